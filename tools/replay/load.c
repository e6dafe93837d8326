/* load.c: a trace (file, .gz or memory) -> events in time order, trace
 * pointers resolved to slots; the file streamed, not held.
 *
 * Owns reading (zlib's gz reader takes plain and gzip'd files alike), the
 * error policy for bad lines (message "NAME:LINE: what", then skip or stop),
 * putting events in time order, and resolving trace pointers to slots.
 *
 * One pipeline, lines -> parse -> order -> resolve -> sink, run by:
 *   rp_load_file  a first pass over the file: counts, messages, peak live
 *                 bytes, the segments; the events are dropped (sink SCAN);
 *   rp_cursor_*   every replay run reads the file again through the same
 *                 pipeline, a batch of events at a time (sink BATCH);
 *   rp_load_mem   and a file whose lines are too far out of time order for
 *                 the window below: every event held in memory (sink HOLD).
 * Memory while streaming: the window, the live pointers, the messages kept
 * and one entry per segment the live pool made (16 bytes each), whatever
 * the file's length.
 *
 * Why order: cudapool's recorder writes per-thread buffers, so lines of two
 * threads arrive in chunks, not in time order. Events go out in (time, line)
 * order through a min-heap of at most WINDOW lines: exact as long as no line
 * arrives after a later one went out, which the first pass checks; a trace
 * that fails it is held whole and sorted instead. RMM's clock times
 * (HH:MM:SS) wrap at midnight, so a trace whose first line has one keeps its
 * file order (RMM writes in order under a lock).
 *
 * Why slots: a trace pointer can be reused after its free, and the replay
 * loop must not hash. Each allocate takes a free slot number (the lowest
 * ever used is recycled first: slots stay as few as the most blocks live at
 * once); its free names the same slot. The pointer -> slot map (uthash)
 * lives only here. */
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

#define WINDOW ((size_t)1 << 18) /* lines held to put a stream in time order (~16 MiB) */
#define BATCH 65536              /* events a cursor hands out at a time (~2.8 MiB) */
#define CHUNK (256 * 1024)       /* bytes read at a time */

typedef struct raw {
  rp_line_t l;
  uint32_t line;
} raw_t;

typedef struct msg {
  size_t line, seq;
  char text[192];
} msg_t;

typedef struct live {
  uint64_t ptr;
  uint64_t size;
  uint32_t slot, line;
  struct live *next_free;
  UT_hash_handle hh;
} live_t;

enum sink { SINK_SCAN, SINK_HOLD, SINK_BATCH };
enum order { ORDER_UNKNOWN, ORDER_TIME, ORDER_FILE };

typedef struct loader {
  const rp_load_opts_t *o;
  rp_trace_t *t;
  enum sink sink;
  int rc; /* 0 or an errno (2, stopped on a bad line, is decided at the end) */
  /* messages */
  msg_t *msg;
  size_t nmsg, capmsg, nkept[2], keep;
  int resolving; /* the stage a message comes from: 0 parsing, 1 resolving */
  /* input: a gz file or a buffer */
  gzFile f;
  const char *mem;
  size_t memlen, mempos;
  char *chunk, *carry;
  size_t chunk_len, chunk_pos, ncarry;
  bool skipping, at_end;
  size_t lineno, max_lines; /* max_lines: stop there (0 = no limit) */
  /* order */
  enum order order;
  size_t window;
  raw_t *heap;
  size_t nheap, capheap;
  bool emitted, out_of_window;
  raw_t last;        /* the last line that went out */
  uint32_t max_line; /* the highest line number that went out */
  /* resolve */
  live_t *map, *free_live;
  uint64_t live_bytes;
  /* the batch (SINK_BATCH) */
  rp_event_t *bev;
  uint32_t *bline;
  double *btime;
  size_t bn;
} loader_t;

/* A new last element of *array (n used, cap allocated), or NULL without
 * memory. */
static void *grow(void *array_ptr, size_t *n, size_t *cap, size_t elem, size_t first) {
  char **array = array_ptr;
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : first;
    char *g = realloc(*array, c * elem);
    if (!g) return NULL;
    *array = g;
    *cap = c;
  }
  return *array + (*n)++ * elem;
}

/* Room for element n of two or three parallel arrays sharing *cap (c may
 * be NULL); false without memory (the arrays stay valid). */
static bool make_room(size_t n, size_t *cap, void *a, size_t ea, void *b, size_t eb, void *c, size_t ec) {
  if (n < *cap) return true;
  size_t want = *cap ? *cap * 2 : 1024;
  void **arrays[] = {a, b, c};
  const size_t elems[] = {ea, eb, ec};
  /* Through memcpy: each array is a pointer of its own type. */
  for (int i = 0; i < 3 && arrays[i]; i++) {
    void *old, *g;
    memcpy(&old, arrays[i], sizeof old);
    if (!(g = realloc(old, want * elems[i]))) return false;
    memcpy(arrays[i], &g, sizeof g);
  }
  *cap = want;
  return true;
}

/* ---- messages --------------------------------------------------------- */

/* Messages are kept, then printed in line order at the end: resolution
 * finds its errors after parsing has found its own. Each stage keeps at most
 * `keep` of its first messages, so a garbage file costs no memory. */
static void bad_line(loader_t *L, size_t line, const char *fmt, ...) {
  L->t->errors++;
  int stage = L->resolving;
  if (L->o->err == NULL || (L->keep != 0 && L->nkept[stage] >= L->keep)) return;
  msg_t *m = grow(&L->msg, &L->nmsg, &L->capmsg, sizeof *m, 16);
  if (m == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(m->text, sizeof m->text, fmt, ap);
  va_end(ap);
  if (n < 0) {
    L->nmsg--;
    return;
  }
  m->line = line;
  m->seq = L->nmsg - 1;
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

/* ---- resolve: pointers to slots, then the sink ------------------------ */

static void sink_event(loader_t *L, const rp_event_t *e, uint32_t line, double time) {
  rp_trace_t *t = L->t;
  if (L->sink == SINK_BATCH) {
    L->bev[L->bn] = *e;
    L->bline[L->bn] = line;
    L->btime[L->bn++] = time;
    return;
  }
  if (L->sink == SINK_HOLD) {
    if (!make_room(t->n, &t->cap, &t->ev, sizeof *t->ev, &t->line, sizeof *t->line, &t->time,
                   sizeof *t->time)) {
      fail(L, ENOMEM, "loading the trace");
      return;
    }
    t->ev[t->n] = *e;
    t->line[t->n] = line;
    t->time[t->n] = time;
  }
  t->n++;
}

static live_t *take_live(loader_t *L) {
  live_t *s = L->free_live;
  if (s) {
    L->free_live = s->next_free;
    return s;
  }
  s = malloc(sizeof *s);
  if (s) s->slot = L->t->nslots++;
  return s;
}

static void segment(loader_t *L, const rp_line_t *l) {
  rp_trace_t *t = L->t;
  if (L->sink == SINK_BATCH) return; /* the first pass kept them */
  if (!make_room(t->nsegments, &t->capsegments, &t->segment_addr, sizeof *t->segment_addr, &t->segment_size,
                 sizeof *t->segment_size, NULL, 0)) {
    fail(L, ENOMEM, "loading the trace");
    return;
  }
  t->segment_addr[t->nsegments] = (uintptr_t)l->ptr;
  t->segment_size[t->nsegments++] = (size_t)l->size;
}

static void resolve(loader_t *L, const rp_line_t *l, uint32_t line) {
  rp_trace_t *t = L->t;
  rp_event_t e = {.stream = l->stream, .key = l->thread + 1};
  live_t *found = NULL;
  L->resolving = 1;
  switch (l->kind) {
    case RP_LINE_SEGMENT_ALLOC: segment(L, l); return;
    case RP_LINE_ALLOC:
      HASH_FIND(hh, L->map, &l->ptr, sizeof l->ptr, found);
      if (found) {
        bad_line(L, line, "allocate of 0x%" PRIx64 ", still live since line %" PRIu32, l->ptr, found->line);
        return;
      }
      found = take_live(L);
      if (found) {
        *found = (live_t){.ptr = l->ptr, .size = l->size, .slot = found->slot, .line = line};
        hash_oom = 0;
        HASH_ADD(hh, L->map, ptr, sizeof(uint64_t), found);
      }
      if (!found || hash_oom) {
        free(hash_oom ? found : NULL);
        fail(L, ENOMEM, "loading the trace");
        return;
      }
      e.op = RP_OP_ALLOC;
      e.size = l->size;
      e.slot = found->slot;
      t->allocs++;
      L->live_bytes += l->size;
      if (L->live_bytes > t->peak_live) t->peak_live = L->live_bytes;
      break;
    case RP_LINE_FREE:
      HASH_FIND(hh, L->map, &l->ptr, sizeof l->ptr, found);
      if (!found) {
        t->unknown_frees++;
        bad_line(L, line, "free of unknown pointer 0x%" PRIx64, l->ptr);
        return;
      }
      e.op = RP_OP_FREE;
      e.slot = found->slot;
      HASH_DEL(L->map, found);
      found->next_free = L->free_live;
      L->free_live = found;
      L->live_bytes -= found->size;
      t->frees++;
      break;
    case RP_LINE_SYNC_STREAM:
    case RP_LINE_SYNC_DEVICE:
      e.op = l->kind == RP_LINE_SYNC_STREAM ? RP_OP_SYNC_STREAM : RP_OP_SYNC_DEVICE;
      t->syncs++;
      break;
    case RP_LINE_STREAM_CREATE:
    case RP_LINE_STREAM_DESTROY:
    case RP_LINE_CAPTURE_BEGIN:
    case RP_LINE_CAPTURE_END:
    case RP_LINE_PER_THREAD_STREAM:
    case RP_LINE_ORDER:
      e.op = (uint8_t)(RP_OP_STREAM_CREATE + (l->kind - RP_LINE_STREAM_CREATE));
      e.size = l->size;
      t->decisions++;
      break;
    default: /* RP_LINE_EMPTY_CACHE: feed_line keeps nothing else */ e.op = RP_OP_EMPTY_CACHE; break;
  }
  sink_event(L, &e, line, l->time);
}

/* ---- order: a min-heap on (time, line) -------------------------------- */

static bool before(const raw_t *a, const raw_t *b) {
  return a->l.time < b->l.time || (a->l.time == b->l.time && a->line < b->line);
}

static void heap_push(loader_t *L, const raw_t *r) {
  size_t n = L->nheap;
  if (!grow(&L->heap, &L->nheap, &L->capheap, sizeof *L->heap, 1024)) {
    fail(L, ENOMEM, "loading the trace");
    return;
  }
  while (n > 0 && before(r, &L->heap[(n - 1) / 2])) {
    L->heap[n] = L->heap[(n - 1) / 2];
    n = (n - 1) / 2;
  }
  L->heap[n] = *r;
}

static raw_t heap_pop(loader_t *L) {
  raw_t top = L->heap[0], last = L->heap[--L->nheap];
  size_t n = L->nheap, i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && before(&L->heap[c + 1], &L->heap[c])) c++;
    if (!before(&L->heap[c], &last)) break;
    L->heap[i] = L->heap[c];
    i = c;
  }
  if (n > 0) L->heap[i] = last;
  return top;
}

/* The next event in time order. A line that should have gone out before
 * the last one arrived too late for the window (the first pass then holds
 * the whole trace instead). */
static void emit(loader_t *L, const raw_t *r) {
  if (L->emitted && before(r, &L->last)) L->out_of_window = true;
  if (r->line < L->max_line) L->t->reordered = true;
  if (r->line > L->max_line) L->max_line = r->line;
  L->last = *r;
  L->emitted = true;
  resolve(L, &r->l, r->line);
}

static void order(loader_t *L, const raw_t *r) {
  if (L->order == ORDER_UNKNOWN) L->order = r->l.clock_time ? ORDER_FILE : ORDER_TIME;
  if (L->order == ORDER_FILE) {
    resolve(L, &r->l, r->line);
    return;
  }
  heap_push(L, r);
  while (L->nheap > L->window && L->rc == 0) {
    raw_t next = heap_pop(L);
    emit(L, &next);
  }
}

static void drain(loader_t *L) {
  while (L->nheap > 0 && L->rc == 0 && !(L->sink == SINK_BATCH && L->bn == BATCH)) {
    raw_t next = heap_pop(L);
    emit(L, &next);
  }
}

/* ---- lines ------------------------------------------------------------ */

/* complete: the line ended with a newline (false only for the last line). */
static void feed_line(loader_t *L, const char *s, size_t len, bool complete) {
  char err[160];
  rp_line_t l;
  size_t line = ++L->lineno;
  L->t->lines++;
  L->resolving = 0;
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
  raw_t r = {l, line > UINT32_MAX ? UINT32_MAX : (uint32_t)line};
  order(L, &r);
}

/* The next piece of input into chunk; false at its end. */
static bool refill(loader_t *L) {
  if (L->f == NULL) {
    if (L->mempos >= L->memlen) return false;
    L->chunk = (char *)L->mem + L->mempos;
    L->chunk_len = L->memlen - L->mempos;
    L->mempos = L->memlen;
  } else {
    int got = gzread(L->f, L->chunk, CHUNK);
    if (got <= 0) return false;
    L->chunk_len = (size_t)got;
  }
  L->chunk_pos = 0;
  return true;
}

static bool room(const loader_t *L) {
  return L->rc == 0 && !L->out_of_window && !(L->sink == SINK_BATCH && L->bn == BATCH) &&
         (L->max_lines == 0 || L->lineno < L->max_lines);
}

/* Lines into the pipeline until the batch is full or the input ends; our
 * own line splitting, since gzgets would stop at a NUL byte and hide the
 * rest of a garbage line from the parser. A line longer than RP_MAX_LINE is
 * one bad line. */
static void pump(loader_t *L) {
  while (room(L)) {
    if (L->chunk_pos >= L->chunk_len && !refill(L)) {
      if (!L->at_end && L->ncarry > 0 && !L->skipping) feed_line(L, L->carry, L->ncarry, false);
      L->at_end = true;
      L->ncarry = 0;
      drain(L);
      return;
    }
    const char *c = L->chunk;
    size_t pos = L->chunk_pos, n = L->chunk_len;
    const char *nl = memchr(c + pos, '\n', n - pos);
    size_t end = nl ? (size_t)(nl - c) : n, piece = end - pos;
    L->chunk_pos = end + 1;
    if (L->skipping) {
      L->skipping = nl == NULL;
    } else if (L->ncarry + piece > RP_MAX_LINE + 1) {
      L->lineno++;
      L->t->lines++;
      L->resolving = 0;
      bad_line(L, L->lineno, "line longer than %d bytes", RP_MAX_LINE);
      L->skipping = nl == NULL;
      L->ncarry = 0;
    } else if (nl == NULL) {
      memcpy(L->carry + L->ncarry, c + pos, piece);
      L->ncarry += piece;
    } else if (L->ncarry > 0) {
      memcpy(L->carry + L->ncarry, c + pos, piece);
      feed_line(L, L->carry, L->ncarry + piece, true);
      L->ncarry = 0;
    } else {
      feed_line(L, c + pos, piece, true);
    }
  }
  if (L->rc == 0 && L->max_lines != 0 && L->lineno >= L->max_lines) {
    L->at_end = true;
    drain(L);
  }
}

/* ---- loaders ---------------------------------------------------------- */

static int loader_init(loader_t *L, const rp_load_opts_t *o, rp_trace_t *t, enum sink sink, size_t window) {
  *L = (loader_t){.o = o, .t = t, .sink = sink, .window = window};
  L->keep = o->stop_on_error ? 1 : o->max_messages;
  L->carry = malloc(RP_MAX_LINE + 1);
  if (sink == SINK_BATCH) {
    L->bev = malloc(BATCH * sizeof *L->bev);
    L->bline = malloc(BATCH * sizeof *L->bline);
    L->btime = malloc(BATCH * sizeof *L->btime);
    if (!L->bev || !L->bline || !L->btime) return ENOMEM;
  }
  return L->carry ? 0 : ENOMEM;
}

static int loader_open(loader_t *L, const char *path) {
  L->f = gzopen(path, "rb");
  if (L->f == NULL) return errno ? errno : ENOMEM;
  L->chunk = malloc(CHUNK);
  return L->chunk ? 0 : ENOMEM;
}

/* What gz said at the end. A gzip file that stops without its trailer (the
 * recording process was killed) still gave every line before the cut. */
static void check_gz(loader_t *L) {
  int zerr = Z_OK;
  const char *zmsg = gzerror(L->f, &zerr);
  if (L->rc != 0 || zerr == Z_OK || zerr == Z_STREAM_END) return;
  if (zerr == Z_ERRNO)
    fail(L, errno ? errno : EIO, "reading");
  else
    bad_line(L, L->lineno + 1, "bad gzip data (%s): the lines before it are used", zmsg);
}

static void loader_fini(loader_t *L) {
  if (L->f) {
    gzclose(L->f);
    free(L->chunk);
  }
  live_t *all = L->free_live; /* the map's own: free_live_map */
  while (all) {
    live_t *next = all->next_free;
    free(all);
    all = next;
  }
  void *owned[] = {L->carry, L->heap, L->msg, L->bev, L->bline, L->btime};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
}

/* The map's entries are freed here: HASH_CLEAR only forgets them. */
static void free_live_map(loader_t *L) {
  live_t *e, *tmp;
  HASH_ITER(hh, L->map, e, tmp) {
    HASH_DEL(L->map, e);
    free(e);
  }
}

/* With stop_on_error the whole input is still read, so that the line
 * reported is the first bad one whichever stage found it. */
static int finish(loader_t *L) {
  if (L->rc == 0 && L->o->stop_on_error && L->t->errors > 0) L->rc = 2;
  print_messages(L);
  free_live_map(L);
  loader_fini(L);
  if (L->rc != 0) rp_trace_free(L->t);
  return L->rc;
}

int rp_load_mem(const char *buf, size_t len, const rp_load_opts_t *o, rp_trace_t *t) {
  loader_t L;
  memset(t, 0, sizeof *t);
  if (loader_init(&L, o, t, SINK_HOLD, SIZE_MAX) != 0) fail(&L, ENOMEM, "loading the trace");
  L.mem = buf;
  L.memlen = len;
  pump(&L);
  return finish(&L);
}

/* One pass over the file with sink and window. */
static int load_pass(const char *path, const rp_load_opts_t *o, rp_trace_t *t, enum sink sink,
                     size_t window) {
  loader_t L;
  memset(t, 0, sizeof *t);
  int rc = loader_init(&L, o, t, sink, window);
  if (rc == 0) rc = loader_open(&L, path);
  if (rc != 0) {
    if (L.f == NULL && rc != ENOMEM) {
      if (o->err) fprintf(o->err, "%s: cannot open: %s\n", path, strerror(rc));
      loader_fini(&L);
      return rc;
    }
    fail(&L, rc, "reading");
    return finish(&L);
  }
  pump(&L);
  if (!L.out_of_window) check_gz(&L);
  if (L.out_of_window && L.rc == 0) {
    free_live_map(&L);
    loader_fini(&L);
    rp_trace_free(t);
    return -1;
  }
  return finish(&L);
}

int rp_load_file(const char *path, const rp_load_opts_t *o, rp_trace_t *t) {
  int rc = load_pass(path, o, t, SINK_SCAN, WINDOW);
  if (rc == -1) return load_pass(path, o, t, SINK_HOLD, SIZE_MAX);
  if (rc == 0) {
    t->path = strdup(path);
    if (t->path == NULL) {
      rp_trace_free(t);
      return ENOMEM;
    }
  }
  return rc;
}

void rp_trace_free(rp_trace_t *t) {
  void *owned[] = {t->ev, t->line, t->time, t->segment_addr, t->segment_size, t->path};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
  size_t lines = t->lines, errors = t->errors;
  memset(t, 0, sizeof *t);
  /* The counts of a failed load stay: the caller reports them. */
  t->lines = lines;
  t->errors = errors;
}

/* ---- cursors ---------------------------------------------------------- */

int rp_cursor_open(rp_cursor_t *c, const rp_trace_t *t) {
  memset(c, 0, sizeof *c);
  c->t = t;
  if (t->path == NULL) return 0;
  static const rp_load_opts_t quiet = {.name = NULL, .err = NULL};
  loader_t *L = malloc(sizeof *L);
  rp_trace_t *counts = calloc(1, sizeof *counts);
  int rc = L && counts ? 0 : ENOMEM;
  if (rc == 0) rc = loader_init(L, &quiet, counts, SINK_BATCH, WINDOW);
  if (rc == 0) rc = loader_open(L, t->path);
  if (rc == 0) {
    L->max_lines = t->lines; /* a file still being written: the lines the first pass saw */
    c->loader = L;
    c->counts = counts;
    return 0;
  }
  if (L) loader_fini(L);
  free(L);
  free(counts);
  return rc;
}

/* The batch a cursor hands out: n events of the three arrays. */
static size_t hand_out(rp_cursor_t *c, const rp_event_t *ev, const uint32_t *line, const double *time,
                       size_t n) {
  *c = (rp_cursor_t){.ev = ev,
                     .line = line,
                     .time = time,
                     .n = n,
                     .t = c->t,
                     .loader = c->loader,
                     .counts = c->counts,
                     .done = c->done};
  return n;
}

size_t rp_cursor_next(rp_cursor_t *c) {
  const rp_trace_t *t = c->t;
  if (c->loader == NULL) {
    bool first = !c->done;
    c->done = true;
    return first ? hand_out(c, t->ev, t->line, t->time, t->n) : 0;
  }
  loader_t *L = c->loader;
  L->bn = 0;
  if (L->at_end)
    drain(L);
  else
    pump(L);
  return hand_out(c, L->bev, L->bline, L->btime, L->bn);
}

void rp_cursor_close(rp_cursor_t *c) {
  if (c->loader) {
    free_live_map(c->loader);
    loader_fini(c->loader);
    free(c->loader);
  }
  free(c->counts);
  memset(c, 0, sizeof *c);
}
