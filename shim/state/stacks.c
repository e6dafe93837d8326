/* stacks.c: the call-site table (stacks.h).
 *
 * A stack is walked by stackwalk.c: libunwind's unw_backtrace() where it
 * loads (about 0.2 us for 24 frames on the build machine), else glibc's
 * backtrace() (about 3-4 us); bench/stacks_bench.c measures both, and
 * docs/DESIGN.md says why not frame pointers. Frames of libcudapool itself
 * are dropped at capture (the text range of this object, found at start),
 * so DEPTH frames are the program's. */

#include "stacks.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "options.h"
#include "outfile.h"
#include "pyframes.h"
#include "stackwalk.h"

#define PY_MAX 32
#define SITES_TOP 10
/* Frames walked beyond DEPTH: those of libcudapool itself, dropped. */
#define OWN_FRAMES_MAX 8

bool cp_stacks_on;

typedef struct stack {
  long id;
  uint64_t live_bytes, live_blocks, peak_bytes, peak_blocks;
  unsigned n_native, n_py;
  char **py_text; /* n_py "file:line:func", resolved at first sight */
  UT_hash_handle hh;
  size_t key_len;
  uintptr_t key[]; /* n_native pcs, then n_py (code, line) pairs */
} stack_t;

typedef struct live_block {
  uintptr_t addr;
  stack_t *stack;
  uint64_t bytes;
  UT_hash_handle hh;
} live_block_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned depth;
static uintptr_t own_lo, own_hi; /* libcudapool's mapped range */
static stack_t *by_key;          /* uthash on key */
static stack_t **by_id;          /* [id] */
static long n_stacks, cap_stacks;
static live_block_t *live;
static uint64_t peak_reserved, peak_live, live_total;

static int find_own_range(struct dl_phdr_info *info, size_t size, void *self) {
  (void)size;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
    if (a < lo) lo = a;
    if (a + info->dlpi_phdr[i].p_memsz > hi) hi = a + info->dlpi_phdr[i].p_memsz;
  }
  if ((uintptr_t)self < lo || (uintptr_t)self >= hi) return 0;
  own_lo = lo, own_hi = hi;
  return 1;
}

/* A fork taken while another thread holds the lock must not leave the
 * child's copy locked for ever. */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_done(void) { pthread_mutex_unlock(&lock); }

void cp_stacks_start(unsigned frames) {
  static bool fork_handlers;
  if (!fork_handlers) fork_handlers = pthread_atfork(fork_prepare, fork_done, fork_done) == 0;
  cp_stackwalk_start();
  dl_iterate_phdr(find_own_range, (void *)(uintptr_t)cp_stacks_start);
  depth = frames > CP_STACKS_MAX_DEPTH ? CP_STACKS_MAX_DEPTH : frames;
  cp_stacks_on = frames > 0;
}

/* Lock held. A copy of the live figures: the state at the peak. */
static void note_peak(size_t reserved_now) {
  if (reserved_now < peak_reserved || (reserved_now == peak_reserved && live_total <= peak_live)) return;
  peak_reserved = reserved_now, peak_live = live_total;
  for (long i = 0; i < n_stacks; i++) by_id[i]->peak_bytes = by_id[i]->live_bytes, by_id[i]->peak_blocks = by_id[i]->live_blocks;
}

/* Lock held: the stack with this key, made (Python frames described: the
 * capturing thread has not returned to Python yet) when first seen; NULL
 * when out of memory. */
static stack_t *intern(const uintptr_t *key, unsigned n_native, unsigned n_py, const cp_pyframe_t *py) {
  size_t key_len = (n_native + 2 * (size_t)n_py) * sizeof(uintptr_t);
  stack_t *s;
  HASH_FIND(hh, by_key, key, key_len, s);
  if (s) return s;
  if (n_stacks == cap_stacks) {
    long cap = cap_stacks ? 2 * cap_stacks : 64;
    stack_t **grown = realloc(by_id, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    by_id = grown, cap_stacks = cap;
  }
  s = calloc(1, sizeof *s + key_len);
  char **texts = n_py ? calloc(n_py, sizeof *texts) : NULL;
  if (!s || (n_py && !texts)) {
    free(s), free(texts);
    return NULL;
  }
  memcpy(s->key, key, key_len);
  s->key_len = key_len, s->n_native = n_native, s->n_py = n_py, s->py_text = texts;
  for (unsigned i = 0; i < n_py; i++) {
    char buf[512];
    cp_pyframes_describe(&py[i], buf, sizeof buf);
    texts[i] = strdup(buf);
  }
  int oom = 0;
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(e) (oom = 1)
  HASH_ADD_KEYPTR(hh, by_key, s->key, key_len, s);
  if (oom) {
    for (unsigned i = 0; i < n_py; i++) free(texts[i]);
    free(texts), free(s);
    return NULL;
  }
  s->id = n_stacks;
  by_id[n_stacks++] = s;
  return s;
}

/* The stack of this thread's allocation in progress (stacks are never
 * freed, so the pointer stays good). */
static __thread __attribute__((tls_model("initial-exec"))) stack_t *captured;

void cp_stacks_capture(void) {
  void *walked[CP_STACKS_MAX_DEPTH + OWN_FRAMES_MAX];
  uintptr_t key[CP_STACKS_MAX_DEPTH + 2 * PY_MAX];
  cp_pyframe_t py[PY_MAX];
  int n = cp_stackwalk(walked, (int)depth + OWN_FRAMES_MAX);
  /* The program's frames start after cudapool's last one: not after its
   * first run of them, since a sanitizer's backtrace() interceptor is the
   * innermost frame there when glibc's walk is used. cudapool calls nothing
   * of the program's on this path, so no frame of its lies below the
   * program's. */
  int first = 0;
  for (int i = 0; i < n; i++)
    if ((uintptr_t)walked[i] >= own_lo && (uintptr_t)walked[i] < own_hi) first = i + 1;
  unsigned n_native = 0;
  for (int i = first; i < n && n_native < depth; i++) key[n_native++] = (uintptr_t)walked[i];
  unsigned n_py = cp_pyframes_capture(py, PY_MAX);
  for (unsigned i = 0; i < n_py; i++) key[n_native + 2 * i] = py[i].code, key[n_native + 2 * i + 1] = py[i].line;
  pthread_mutex_lock(&lock);
  captured = intern(key, n_native, n_py, py);
  pthread_mutex_unlock(&lock);
}

long cp_stacks_captured_id(void) { return captured ? captured->id : -1; }

void cp_stacks_not_served(void) { captured = NULL; }

void cp_stacks_served(uintptr_t addr, size_t requested, size_t reserved_now) {
  stack_t *s = captured;
  captured = NULL;
  live_block_t *rec = malloc(sizeof *rec);
  if (!rec) return;
  pthread_mutex_lock(&lock);
  int oom = 0;
  /* A record left at this address by memory freed without a free the shim
   * saw (cudaDeviceReset drops a pool's blocks): its bytes are no longer
   * live, and uthash would keep both records under one key. */
  live_block_t *stale;
  HASH_FIND_PTR(live, &addr, stale);
  if (stale) {
    HASH_DEL(live, stale);
    stale->stack->live_bytes -= stale->bytes, stale->stack->live_blocks--, live_total -= stale->bytes;
    free(stale);
  }
  if (s) {
    *rec = (live_block_t){.addr = addr, .stack = s, .bytes = requested};
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(e) (oom = 1)
    HASH_ADD_PTR(live, addr, rec);
  }
  if (s && !oom) {
    s->live_bytes += requested, s->live_blocks++, live_total += requested;
    note_peak(reserved_now);
  } else {
    free(rec);
  }
  pthread_mutex_unlock(&lock);
}

void cp_stacks_freeing(uintptr_t addr) {
  live_block_t *rec;
  pthread_mutex_lock(&lock);
  HASH_FIND_PTR(live, &addr, rec);
  if (rec) {
    HASH_DEL(live, rec);
    rec->stack->live_bytes -= rec->bytes, rec->stack->live_blocks--, live_total -= rec->bytes;
  }
  pthread_mutex_unlock(&lock);
  free(rec);
}

long cp_stacks_id_of(uintptr_t addr) {
  live_block_t *rec;
  pthread_mutex_lock(&lock);
  HASH_FIND_PTR(live, &addr, rec);
  long id = rec ? rec->stack->id : -1;
  pthread_mutex_unlock(&lock);
  return id;
}

/* ---- reports: symbols looked up here, never while serving ---------------------------- */

typedef struct frame_name {
  const char *object; /* basename; "?" when unknown */
  const char *symbol; /* NULL when unknown */
  uintptr_t offset;   /* from the symbol, else from the object's base */
} frame_name_t;

static frame_name_t name_of(uintptr_t pc) {
  Dl_info info;
  frame_name_t f = {"?", NULL, pc};
  /* pc is a return address: the call is the byte before it */
  if (!dladdr((void *)(pc - 1), &info)) return f;
  if (info.dli_fname && info.dli_fname[0]) {
    const char *slash = strrchr(info.dli_fname, '/');
    f.object = slash ? slash + 1 : info.dli_fname;
  }
  if (info.dli_sname && info.dli_saddr) {
    f.symbol = info.dli_sname, f.offset = pc - (uintptr_t)info.dli_saddr;
  } else if (info.dli_fbase) {
    f.offset = pc - (uintptr_t)info.dli_fbase;
  }
  return f;
}

/* Frames of the runtime, the driver, libc, the loader and the sanitizers'
 * runtimes (preloaded first, their interceptors sit between the program and
 * cudapool): not the program's. */
static bool is_system_object(const char *object) {
  static const char *const prefixes[] = {"libcudapool", "libcudart", "libcuda", "libc.so",  "libc-",
                                         "ld-linux",    "ld.so",     "libasan", "libubsan", "libtsan",
                                         "liblsan",     "libclang_rt"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(object, prefixes[i], strlen(prefixes[i])) == 0) return true;
  return false;
}

static void json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c < 0x20 || c == 0x7f) /* UTF-8 (>= 0x80) passes as it is: JSON text is UTF-8 */
      fprintf(out, "\\u%04x", c);
    else
      fputc(c, out);
  }
  fputc('"', out);
}

static void json_native_frame(FILE *out, uintptr_t pc) {
  frame_name_t f = name_of(pc);
  fprintf(out, "{\"pc\":\"0x%" PRIxPTR "\",\"object\":", pc);
  json_string(out, f.object);
  fputs(",\"symbol\":", out);
  if (f.symbol)
    json_string(out, f.symbol);
  else
    fputs("null", out);
  fprintf(out, ",\"offset\":%" PRIuPTR "}", f.offset);
}

static void json_frames(FILE *out, const stack_t *s) {
  fputc('[', out);
  for (unsigned i = 0; i < s->n_native; i++) {
    if (i) fputc(',', out);
    json_native_frame(out, s->key[i]);
  }
  for (unsigned i = 0; i < s->n_py; i++) {
    if (i || s->n_native) fputc(',', out);
    fputs("{\"python\":", out);
    json_string(out, s->py_text[i] ? s->py_text[i] : "?");
    fputc('}', out);
  }
  fputc(']', out);
}

/* The innermost frame of the program's own code: its innermost Python
 * frame when it has one, else its innermost native frame outside the
 * system objects; -1 when none (then the site is unknown). Python frames
 * are numbered from n_native. */
static long own_frame(const stack_t *s) {
  if (s->n_py) return s->n_native;
  for (unsigned i = 0; i < s->n_native; i++)
    if (!is_system_object(name_of(s->key[i]).object)) return i;
  return -1;
}

/* "file.py:12:f", "prog:main+0x1a" or "prog+0x1234". */
static void site_text(const stack_t *s, long frame, char *buf, size_t cap) {
  if (frame < 0) {
    snprintf(buf, cap, "?");
  } else if ((unsigned long)frame >= s->n_native) {
    snprintf(buf, cap, "%s", s->py_text[frame - s->n_native] ? s->py_text[frame - s->n_native] : "?");
  } else {
    frame_name_t f = name_of(s->key[frame]);
    snprintf(buf, cap, "%s:%s+0x%" PRIxPTR, f.object, f.symbol ? f.symbol : "", f.offset);
  }
}

/* A call site: the stacks whose own frame (own_frame) is the same code
 * (the same pc, or the same Python text), their figures added up. */
typedef struct site {
  const stack_t *largest; /* the one whose frames the JSON shows */
  long frame;
  uint64_t bytes, blocks;
} site_t;

static bool same_site(const stack_t *a, long fa, const stack_t *b, long fb) {
  if (fa < 0 || fb < 0) return fa == fb;
  bool pa = (unsigned long)fa >= a->n_native, pb = (unsigned long)fb >= b->n_native;
  if (pa != pb) return false;
  if (!pa) return a->key[fa] == b->key[fb];
  const char *ta = a->py_text[fa - a->n_native], *tb = b->py_text[fb - b->n_native];
  return ta && tb && strcmp(ta, tb) == 0;
}

/* Lock held. The top call sites by bytes (at the peak or live now) into
 * top[SITES_TOP], largest first (ties: the site seen first); how many. */
static int top_sites(bool at_peak, site_t *top) {
  site_t *all = calloc(n_stacks ? (size_t)n_stacks : 1, sizeof *all);
  if (!all) return 0;
  int n = 0;
  for (long i = 0; i < n_stacks; i++) {
    const stack_t *s = by_id[i];
    uint64_t bytes = at_peak ? s->peak_bytes : s->live_bytes, blocks = at_peak ? s->peak_blocks : s->live_blocks;
    if (bytes == 0) continue;
    long frame = own_frame(s);
    int j = 0;
    while (j < n && !same_site(all[j].largest, all[j].frame, s, frame)) j++;
    if (j == n) all[n++] = (site_t){.largest = s, .frame = frame};
    uint64_t largest = at_peak ? all[j].largest->peak_bytes : all[j].largest->live_bytes;
    if (bytes > largest) all[j].largest = s, all[j].frame = frame;
    all[j].bytes += bytes, all[j].blocks += blocks;
  }
  int kept = 0;
  for (int i = 0; i < n; i++) {
    int at = kept < SITES_TOP ? kept++ : SITES_TOP;
    while (at > 0 && top[at - 1].bytes < all[i].bytes) {
      if (at < SITES_TOP) top[at] = top[at - 1];
      at--;
    }
    if (at < SITES_TOP) top[at] = all[i];
  }
  free(all);
  return kept;
}

static double share_of(uint64_t bytes) { return peak_reserved ? (double)bytes / (double)peak_reserved : 0.0; }

void cp_stacks_report_text(FILE *out) {
  if (!cp_stacks_on) return;
  site_t top[SITES_TOP];
  char site[600];
  pthread_mutex_lock(&lock);
  for (int pass = 0; pass < 2; pass++) {
    bool at_peak = pass == 0;
    int n = top_sites(at_peak, top);
    if (at_peak) {
      const char *py_not_read = cp_pyframes_without_gil_unsupported();
      fprintf(out, "cudapool: call sites at the peak of reserved memory (%" PRIu64 " bytes%s%s):\n", peak_reserved,
              py_not_read ? "; no Python frames from threads without the GIL: " : "", py_not_read ? py_not_read : "");
    }
    else if (n)
      fputs("cudapool: call sites of blocks never freed (at exit):\n", out);
    for (int i = 0; i < n; i++) {
      site_text(top[i].largest, top[i].frame, site, sizeof site);
      fprintf(out, "cudapool:   %" PRIu64 " bytes in %" PRIu64 " block%s (%.1f%% of peak) at %s\n", top[i].bytes,
              top[i].blocks, top[i].blocks == 1 ? "" : "s", 100.0 * share_of(top[i].bytes), site);
    }
  }
  pthread_mutex_unlock(&lock);
  fflush(out);
}

static void json_sites(FILE *out, bool at_peak) {
  site_t top[SITES_TOP];
  char site[600];
  int n = top_sites(at_peak, top);
  fputc('[', out);
  for (int i = 0; i < n; i++) {
    site_text(top[i].largest, top[i].frame, site, sizeof site);
    fprintf(out, "%s{\"stack\":%ld,\"bytes\":%" PRIu64 ",\"blocks\":%" PRIu64 ",\"share\":%.6f,\"site\":",
            i ? "," : "", top[i].largest->id, top[i].bytes, top[i].blocks, share_of(top[i].bytes));
    if (top[i].frame < 0)
      fputs("null", out);
    else
      json_string(out, site);
    fputs(",\"frames\":", out);
    json_frames(out, top[i].largest);
    fputc('}', out);
  }
  fputc(']', out);
}

void cp_stacks_report_json(FILE *out, void *unused) {
  (void)unused;
  if (!cp_stacks_on) return;
  pthread_mutex_lock(&lock);
  fprintf(out, ",\"call_sites\":{\"peak_reserved\":%" PRIu64 ",\"at_peak\":", peak_reserved);
  json_sites(out, true);
  fputs(",\"at_exit\":", out);
  json_sites(out, false);
  fputs(",\"walker\":", out);
  json_string(out, cp_stackwalk_name());
  const char *py_not_read = cp_pyframes_without_gil_unsupported();
  if (py_not_read) {
    fputs(",\"python_without_gil\":", out);
    json_string(out, py_not_read);
  }
  fputc('}', out);
  pthread_mutex_unlock(&lock);
}

void cp_stacks_json_table(FILE *out) {
  fputc('[', out);
  pthread_mutex_lock(&lock);
  for (long i = 0; cp_stacks_on && i < n_stacks; i++) {
    fprintf(out, "%s{\"id\":%ld,\"frames\":", i ? "," : "", i);
    json_frames(out, by_id[i]);
    fputc('}', out);
  }
  pthread_mutex_unlock(&lock);
  fputc(']', out);
}

int cp_stacks_write_table(const char *path) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) return ENOMEM;
  fputs("{\"version\":1,\"stacks\":", mem);
  cp_stacks_json_table(mem);
  fputs("}\n", mem);
  int err = fclose(mem) != 0 ? ENOMEM : 0;
  if (!err) {
    int fd = cp_outfile_open(path, NULL, 0);
    err = fd < 0 ? -fd : cp_outfile_write(fd, text, len);
    int cerr = cp_outfile_close(fd);
    if (!err) err = cerr;
  }
  free(text);
  return err;
}
