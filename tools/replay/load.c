/* load.c: a whole trace -> rp_trace_t.
 *
 * Owns reading (zlib's gz reader takes plain and gzip'd files alike), the
 * error policy for bad lines (message "NAME:LINE: what", then skip or stop),
 * putting events in time order, and resolving trace pointers to slots.
 *
 * Why sort: cudapool's recorder writes per-thread buffers, so lines of two
 * threads arrive in chunks, not in time order. Lines are sorted by (time,
 * line), which keeps the file order of ties. RMM's clock times (HH:MM:SS)
 * wrap at midnight, so such traces keep their file order (RMM writes in
 * order under a lock).
 *
 * Why slots: a trace pointer can be reused after its free, and the replay
 * loop must not hash. Each allocate gets the next slot number; its free
 * names the same slot. The pointer -> slot map (uthash) lives only here. */
#include "replay.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int hash_oom;
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (hash_oom = 1)
#include <uthash.h>

typedef struct raw {
  rp_line_t l;
  uint32_t line;
} raw_t;

typedef struct msg {
  size_t line, seq;
  char text[192];
} msg_t;

typedef struct loader {
  const rp_load_opts_t *o;
  msg_t *msg;
  size_t nmsg, capmsg, nkept[2], keep;
  int resolving; /* 0 while parsing, 1 while resolving pointers */
  rp_trace_t *t;
  raw_t *raw;
  size_t nraw, capraw;
  size_t lineno;
  bool any_clock;
  int rc; /* 0 or an errno (2, stopped on a bad line, is decided at the end) */
} loader_t;

typedef struct live {
  uint64_t ptr;
  uint64_t size;
  uint32_t slot, line;
  UT_hash_handle hh;
} live_t;

/* Messages are kept, then printed in line order at the end: resolution
 * finds its errors after parsing has found its own. Each stage keeps at most
 * `keep` of its first messages, so a garbage file costs no memory. */
static void bad_line(loader_t *L, size_t line, const char *fmt, ...) {
  L->t->errors++;
  int stage = L->resolving;
  if (L->o->err == NULL || (L->keep != 0 && L->nkept[stage] >= L->keep)) return;
  if (L->nmsg == L->capmsg) {
    size_t cap = L->capmsg ? L->capmsg * 2 : 16;
    msg_t *m = realloc(L->msg, cap * sizeof *m);
    if (m == NULL) return;
    L->msg = m;
    L->capmsg = cap;
  }
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(L->msg[L->nmsg].text, sizeof L->msg[0].text, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  L->msg[L->nmsg].line = line;
  L->msg[L->nmsg].seq = L->nmsg;
  L->nmsg++;
  L->nkept[stage]++;
}

static int cmp_msg(const void *a, const void *b) {
  const msg_t *x = a, *y = b;
  if (x->line != y->line) return x->line < y->line ? -1 : 1;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

static void print_messages(loader_t *L) {
  if (L->o->err == NULL || L->nmsg == 0) return;
  qsort(L->msg, L->nmsg, sizeof *L->msg, cmp_msg);
  const char *name = L->o->name ? L->o->name : "trace";
  size_t show = L->nmsg;
  if (L->keep != 0 && show > L->keep) show = L->keep;
  for (size_t i = 0; i < show; i++) fprintf(L->o->err, "%s:%zu: %s\n", name, L->msg[i].line, L->msg[i].text);
  if (!L->o->stop_on_error && L->t->errors > show)
    fprintf(L->o->err, "%s: %zu more bad lines not shown\n", name, L->t->errors - show);
}

static void fail(loader_t *L, int rc, const char *what) {
  if (L->rc == 0) L->rc = rc;
  if (L->o->err) fprintf(L->o->err, "%s: %s: %s\n", L->o->name ? L->o->name : "trace", what, strerror(rc));
}

/* complete: the line ended with a newline (false only for the last line). */
static void feed_line(loader_t *L, const char *s, size_t len, bool complete) {
  char err[160];
  rp_line_t l;
  size_t line = ++L->lineno;
  L->t->lines++;
  if (rp_parse_line(s, len, &l, err, sizeof err) != 0) {
    if (complete)
      bad_line(L, line, "%s", err);
    else
      bad_line(L, line, "truncated last line (no newline at end of file): %s", err);
    return;
  }
  switch (l.kind) {
    case RP_LINE_BLANK:
    case RP_LINE_HEADER: return;
    case RP_LINE_EXTRA: L->t->skipped++; return;
    case RP_LINE_ALLOC_FAIL: L->t->alloc_failures++; return;
    case RP_LINE_ZERO_ALLOC: L->t->zero_allocs++; return;
    default: break;
  }
  if (L->nraw == L->capraw) {
    size_t cap = L->capraw ? L->capraw * 2 : 4096;
    raw_t *r = realloc(L->raw, cap * sizeof *r);
    if (r == NULL) {
      fail(L, ENOMEM, "loading the trace");
      return;
    }
    L->raw = r;
    L->capraw = cap;
  }
  L->any_clock |= l.clock_time;
  L->raw[L->nraw++] = (raw_t){l, line > UINT32_MAX ? UINT32_MAX : (uint32_t)line};
}

static int cmp_raw(const void *a, const void *b) {
  const raw_t *x = a, *y = b;
  if (x->l.time != y->l.time) return x->l.time < y->l.time ? -1 : 1;
  return (x->line > y->line) - (x->line < y->line);
}

static void put_in_order(loader_t *L) {
  if (L->any_clock) return;
  for (size_t i = 1; i < L->nraw; i++) {
    if (L->raw[i].l.time < L->raw[i - 1].l.time) {
      qsort(L->raw, L->nraw, sizeof *L->raw, cmp_raw);
      L->t->reordered = true;
      return;
    }
  }
}

static void resolve(loader_t *L) {
  rp_trace_t *t = L->t;
  size_t n = L->nraw ? L->nraw : 1;
  t->ev = malloc(n * sizeof *t->ev);
  t->line = malloc(n * sizeof *t->line);
  t->time = malloc(n * sizeof *t->time);
  t->segment_addr = malloc(n * sizeof *t->segment_addr);
  t->segment_size = malloc(n * sizeof *t->segment_size);
  live_t *entries = malloc(n * sizeof *entries);
  if (!t->ev || !t->line || !t->time || !t->segment_addr || !t->segment_size || !entries) {
    free(entries);
    fail(L, ENOMEM, "loading the trace");
    return;
  }
  live_t *map = NULL;
  uint64_t live_bytes = 0;
  hash_oom = 0;
  for (size_t i = 0; i < L->nraw && L->rc == 0; i++) {
    const rp_line_t *l = &L->raw[i].l;
    uint32_t line = L->raw[i].line;
    rp_event_t e = {.stream = l->stream, .key = l->thread + 1};
    live_t *found = NULL;
    if (l->kind == RP_LINE_SEGMENT_ALLOC) {
      t->segment_addr[t->nsegments] = (uintptr_t)l->ptr;
      t->segment_size[t->nsegments++] = (size_t)l->size;
      continue;
    }
    switch (l->kind) {
      case RP_LINE_ALLOC:
        HASH_FIND(hh, map, &l->ptr, sizeof l->ptr, found);
        if (found) {
          bad_line(L, line, "allocate of 0x%" PRIx64 ", still live since line %" PRIu32, l->ptr, found->line);
          continue;
        }
        e.op = RP_OP_ALLOC;
        e.size = l->size;
        e.slot = t->nslots++;
        entries[e.slot] = (live_t){.ptr = l->ptr, .size = l->size, .slot = e.slot, .line = line};
        HASH_ADD(hh, map, ptr, sizeof(uint64_t), &entries[e.slot]);
        if (hash_oom) {
          fail(L, ENOMEM, "loading the trace");
          continue;
        }
        t->allocs++;
        live_bytes += l->size;
        if (live_bytes > t->peak_live) t->peak_live = live_bytes;
        break;
      case RP_LINE_FREE:
        HASH_FIND(hh, map, &l->ptr, sizeof l->ptr, found);
        if (!found) {
          bad_line(L, line, "free of unknown pointer 0x%" PRIx64, l->ptr);
          continue;
        }
        e.op = RP_OP_FREE;
        e.slot = found->slot;
        HASH_DEL(map, found);
        live_bytes -= found->size;
        t->frees++;
        break;
      case RP_LINE_SYNC_STREAM:
        e.op = RP_OP_SYNC_STREAM;
        t->syncs++;
        break;
      case RP_LINE_SYNC_DEVICE:
        e.op = RP_OP_SYNC_DEVICE;
        t->syncs++;
        break;
      case RP_LINE_STREAM_CREATE:
      case RP_LINE_STREAM_DESTROY:
      case RP_LINE_CAPTURE_BEGIN:
      case RP_LINE_CAPTURE_END:
      case RP_LINE_PER_THREAD_STREAM:
        e.op = (uint8_t)(RP_OP_STREAM_CREATE + (l->kind - RP_LINE_STREAM_CREATE));
        e.size = l->size;
        t->decisions++;
        break;
      default: /* RP_LINE_EMPTY_CACHE: feed_line keeps nothing else */ e.op = RP_OP_EMPTY_CACHE; break;
    }
    t->ev[t->n] = e;
    t->line[t->n] = line;
    t->time[t->n] = l->time;
    t->n++;
  }
  HASH_CLEAR(hh, map);
  free(entries);
}

/* With stop_on_error the whole input is still read, so that the line
 * reported is the first bad one whichever stage found it. */
static int finish(loader_t *L) {
  if (L->rc == 0) {
    L->resolving = 1;
    put_in_order(L);
    resolve(L);
  }
  if (L->rc == 0 && L->o->stop_on_error && L->t->errors > 0) L->rc = 2;
  print_messages(L);
  free(L->raw);
  free(L->msg);
  if (L->rc != 0) rp_trace_free(L->t);
  return L->rc;
}

static void loader_init(loader_t *L, const rp_load_opts_t *o, rp_trace_t *t) {
  memset(t, 0, sizeof *t);
  *L = (loader_t){.o = o, .t = t};
  L->keep = o->stop_on_error ? 1 : o->max_messages;
}

int rp_load_mem(const char *buf, size_t len, const rp_load_opts_t *o, rp_trace_t *t) {
  loader_t L;
  loader_init(&L, o, t);
  size_t pos = 0;
  while (pos < len && L.rc == 0) {
    const char *nl = memchr(buf + pos, '\n', len - pos);
    size_t end = nl ? (size_t)(nl - buf) : len;
    feed_line(&L, buf + pos, end - pos, nl != NULL);
    pos = end + 1;
  }
  return finish(&L);
}

int rp_load_file(const char *path, const rp_load_opts_t *o, rp_trace_t *t) {
  loader_t L;
  loader_init(&L, o, t);
  gzFile f = gzopen(path, "rb");
  if (f == NULL) {
    int e = errno ? errno : ENOMEM;
    if (o->err) fprintf(o->err, "%s: cannot open: %s\n", path, strerror(e));
    return e;
  }
  /* Our own line splitting over gzread: gzgets would stop at a NUL byte
   * and hide the rest of a garbage line from the parser. */
  enum { CHUNK = 256 * 1024, CARRY = RP_MAX_LINE + 1 };
  char *chunk = malloc(CHUNK), *carry = malloc(CARRY);
  if (!chunk || !carry) {
    free(chunk);
    free(carry);
    gzclose(f);
    fail(&L, ENOMEM, "reading");
    return finish(&L);
  }
  size_t ncarry = 0;
  bool skipping = false; /* inside an over-long line */
  int got;
  while (L.rc == 0 && (got = gzread(f, chunk, CHUNK)) > 0) {
    size_t pos = 0, n = (size_t)got;
    while (pos < n && L.rc == 0) {
      const char *nl = memchr(chunk + pos, '\n', n - pos);
      size_t end = nl ? (size_t)(nl - chunk) : n, piece = end - pos;
      if (skipping) {
        skipping = nl == NULL;
      } else if (ncarry + piece > CARRY) {
        L.lineno++;
        t->lines++;
        bad_line(&L, L.lineno, "line longer than %d bytes", RP_MAX_LINE);
        skipping = nl == NULL;
        ncarry = 0;
      } else if (nl == NULL) {
        memcpy(carry + ncarry, chunk + pos, piece);
        ncarry += piece;
      } else if (ncarry > 0) {
        memcpy(carry + ncarry, chunk + pos, piece);
        feed_line(&L, carry, ncarry + piece, true);
        ncarry = 0;
      } else {
        feed_line(&L, chunk + pos, piece, true);
      }
      pos = end + 1;
    }
  }
  if (L.rc == 0 && ncarry > 0 && !skipping) feed_line(&L, carry, ncarry, false);
  free(chunk);
  free(carry);
  int zerr = Z_OK;
  const char *zmsg = gzerror(f, &zerr);
  if (L.rc == 0 && zerr != Z_OK && zerr != Z_STREAM_END) {
    if (zerr == Z_ERRNO)
      fail(&L, errno ? errno : EIO, "reading");
    else
      bad_line(&L, L.lineno + 1, "bad gzip data (%s): the lines before it are used", zmsg);
  }
  gzclose(f);
  return finish(&L);
}

void rp_trace_free(rp_trace_t *t) {
  free(t->ev);
  free(t->line);
  free(t->time);
  free(t->segment_addr);
  free(t->segment_size);
  t->segment_addr = NULL;
  t->segment_size = NULL;
  t->nsegments = 0;
  t->ev = NULL;
  t->line = NULL;
  t->time = NULL;
  t->n = 0;
}
