/* trace.c: the recorder (see trace.h for the format and the guarantees).
 *
 * Owns the per-thread event buffers, the writer thread and the trace file.
 *
 * A buffer (tbuf_t, 64 KiB) is in exactly one place:
 *   - attached: the current buffer of a live thread, on the `threads` list;
 *   - queued:   full or left by an exiting thread, waiting for the writer;
 *   - spare:    empty, ready for reuse (at most MAX_SPARE kept).
 * Only the owning thread appends to an attached buffer, without a lock: it
 * fills rec[count] then publishes count + 1 with a release store. Everyone
 * else reads an attached buffer under `g.lock`, only records [flushed, count)
 * (acquire load of count), and advances `flushed` under the lock. Moving a
 * buffer between places, and `flushed`, `gen` and `attached`, need the lock.
 *
 * Generations: g.gen is 0 when closed, else the number of the current open.
 * A buffer holding records of an older open is reset by its owner on the next
 * event (under the lock), so nothing recorded for one file lands in another.
 *
 * Writing: formatting and write() happen under `g.file_lock`, one write per
 * chunk of whole lines, by the writer thread; by the recording thread itself
 * only when there is no writer thread (it could not be created, after fork
 * in the child, or between an exec and its failure: cp_trace_before_exec)
 * or at close. Per thread, chunks are written in record
 * order: the writer empties the queue before it takes a partial buffer.
 *
 * The file is opened, written and closed through outfile.c (no symbolic link
 * followed, %p replaced at open, no SIGPIPE); the first write or close error
 * of an open is kept in g.err for the shim to report at exit. A name ending
 * in ".gz" is written through zlib's deflate (gzip wrapper, level 1: the
 * writer thread must keep up with the recording threads), with a sync flush
 * after every chunk, so that what is on disk always decompresses to whole
 * lines; the deflate state is the writer's, under file_lock, like the
 * descriptor.
 *
 * Lock order: g.lock, then g.file_lock. Nothing here prints or aborts: this
 * runs inside the host program. */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "outfile.h"
#include "threads.h"
#include "util.h"

#define BUF_BYTES (64 * 1024)
#define MAX_QUEUE 64 /* queued buffers (4 MiB) before a recording thread waits */
#define MAX_SPARE 16
#define FLUSH_NS (200 * 1000000ull)
#define LINE_MAX_BYTES 224
#define GZ_OUT_BYTES (64 * 1024)

typedef struct rec {
  uint64_t ns;
  uint64_t ptr;
  uint64_t size;
  uint64_t stream;
  int64_t stack; /* the allocation's stack id (stacks.h), -1: none */
  const char *action;
} rec_t;

typedef struct tbuf tbuf_t;
#define REC_PER_BUF ((BUF_BYTES - 64) / sizeof(rec_t))

struct tbuf {
  tbuf_t *next, *prev; /* threads list (attached) or queue / spare (next only) */
  uint64_t gen;
  uint64_t tid;
  uint32_t flushed; /* records already written (g.lock) */
  _Atomic uint32_t count;
  bool attached;
  rec_t rec[REC_PER_BUF];
};

static struct {
  _Atomic uint64_t gen;
  uint64_t last_gen;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* writer: work queued, or stop */
  pthread_cond_t room; /* recording threads: the queue shrank */
  tbuf_t *threads;
  tbuf_t *qhead, *qtail;
  size_t qlen;
  tbuf_t *spare;
  size_t nspare;
  bool writer_running, stop;
  pthread_t writer;
  pthread_mutex_t file_lock;
  int fd;
  uint64_t t0;
  bool stack_column; /* lines end with ",Stack" (cp_trace_open_with_stacks) */
  char *out;       /* formatting buffer (file_lock) */
  z_stream *z;     /* gzip'd file: the deflate state (file_lock); NULL: plain */
  Bytef *zout;     /* deflate's output buffer (file_lock) */
  tbuf_t *scratch; /* copy of a partial buffer (writer only) */
  _Atomic uint64_t written, dropped;
  _Atomic int err; /* first write or close error since the last open */
} g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .room = PTHREAD_COND_INITIALIZER,
    .file_lock = PTHREAD_MUTEX_INITIALIZER,
    .fd = -1,
};

static pthread_key_t exit_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* initial-exec: the library is preloaded, and this keeps the hot path free
 * of __tls_get_addr. */
static _Thread_local tbuf_t *my_buf __attribute__((tls_model("initial-exec")));

static const char A_ALLOC[] = "allocate", A_FREE[] = "free", A_FAIL[] = "allocate failure",
                  A_SYNC_STREAM[] = "sync_stream", A_SYNC_DEVICE[] = "sync_device";

#define now_ns cp_monotonic_ns

/* ---- formatting and writing (file_lock held) -------------------------- */

static char *put_dec(char *p, uint64_t v) {
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

static char *put_ptr(char *p, uint64_t v) {
  if (v == 0) {
    memcpy(p, "(nil)", 5);
    return p + 5;
  }
  static const char hex[] = "0123456789abcdef";
  char tmp[16];
  int n = 0;
  while (v) {
    tmp[n++] = hex[v & 15];
    v >>= 4;
  }
  *p++ = '0';
  *p++ = 'x';
  while (n) *p++ = tmp[--n];
  return p;
}

static char *format_rec(char *p, uint64_t tid, const rec_t *r) {
  uint64_t d = r->ns > g.t0 ? r->ns - g.t0 : 0, frac = d % 1000000000u;
  p = put_dec(p, tid);
  *p++ = ',';
  p = put_dec(p, d / 1000000000u);
  *p++ = '.';
  for (uint64_t div = 100000000u; div; div /= 10) *p++ = (char)('0' + frac / div % 10);
  *p++ = ',';
  /* A caller's action string must not break the columns or the line. */
  for (int k = 0; r->action[k] && k < 64; k++) {
    char c = r->action[k];
    if (c != ',' && c != '\n' && c != '\r') *p++ = c;
  }
  *p++ = ',';
  p = put_ptr(p, r->ptr);
  *p++ = ',';
  p = put_dec(p, r->size);
  *p++ = ',';
  p = put_ptr(p, r->stream);
  if (g.stack_column) {
    *p++ = ',';
    if (r->stack >= 0) p = put_dec(p, (uint64_t)r->stack);
  }
  *p++ = '\n';
  return p;
}

static void keep_error(int err) {
  int none = 0;
  if (err != 0) atomic_compare_exchange_strong(&g.err, &none, err);
}

/* n bytes of whole lines to fd, compressed through z when it is set (then
 * flush is Z_SYNC_FLUSH, or Z_FINISH at close). 0 or an errno. */
static int put_bytes(int fd, z_stream *z, Bytef *zout, const void *buf, size_t n, int flush) {
  if (z == NULL) return cp_outfile_write(fd, buf, n);
  z->next_in = (Bytef *)buf;
  z->avail_in = (uInt)n;
  do {
    z->next_out = zout;
    z->avail_out = GZ_OUT_BYTES;
    if (deflate(z, flush) == Z_STREAM_ERROR) return EIO;
    size_t have = GZ_OUT_BYTES - z->avail_out;
    int err = have ? cp_outfile_write(fd, zout, have) : 0;
    if (err != 0) return err;
  } while (z->avail_out == 0);
  return 0;
}

/* Records [from, to) of b as one write of whole lines. */
static void write_range(const tbuf_t *b, uint32_t from, uint32_t to) {
  if (from >= to) return;
  pthread_mutex_lock(&g.file_lock);
  bool ok = g.fd >= 0 && g.out != NULL;
  if (ok) {
    char *p = g.out;
    for (uint32_t i = from; i < to; i++) p = format_rec(p, b->tid, &b->rec[i]);
    int err = put_bytes(g.fd, g.z, g.zout, g.out, (size_t)(p - g.out), Z_SYNC_FLUSH);
    keep_error(err);
    ok = err == 0;
  }
  pthread_mutex_unlock(&g.file_lock);
  atomic_fetch_add_explicit(ok ? &g.written : &g.dropped, to - from, memory_order_relaxed);
}

/* ---- buffer places (g.lock held) -------------------------------------- */

static void unlink_thread(tbuf_t *b) {
  if (b->prev)
    b->prev->next = b->next;
  else
    g.threads = b->next;
  if (b->next) b->next->prev = b->prev;
  b->next = b->prev = NULL;
  b->attached = false;
}

static void link_thread(tbuf_t *b) {
  b->prev = NULL;
  b->next = g.threads;
  if (g.threads) g.threads->prev = b;
  g.threads = b;
  b->attached = true;
}

static void push_queue(tbuf_t *b) {
  b->next = NULL;
  if (g.qtail)
    g.qtail->next = b;
  else
    g.qhead = b;
  g.qtail = b;
  g.qlen++;
  pthread_cond_signal(&g.wake);
}

/* The first buffer of the queue or of the spares, taken off the list. */
static tbuf_t *take_first(tbuf_t **head, size_t *len) {
  tbuf_t *b = *head;
  if (b) {
    *head = b->next;
    (*len)--;
  }
  return b;
}

static tbuf_t *pop_queue(void) {
  tbuf_t *b = take_first(&g.qhead, &g.qlen);
  if (b) {
    if (!g.qhead) g.qtail = NULL;
    pthread_cond_broadcast(&g.room);
  }
  return b;
}

static void recycle(tbuf_t *b) {
  if (g.nspare >= MAX_SPARE) {
    free(b);
    return;
  }
  b->next = g.spare;
  g.spare = b;
  g.nspare++;
}

/* Write out every queued buffer of generation gen; older ones (an event that
 * raced with close) are dropped (g.lock held; released while writing). */
static void drain_queue(uint64_t gen) {
  tbuf_t *b;
  while ((b = pop_queue()) != NULL) {
    if (b->gen != gen) {
      recycle(b);
      continue;
    }
    pthread_mutex_unlock(&g.lock);
    write_range(b, b->flushed, atomic_load_explicit(&b->count, memory_order_acquire));
    pthread_mutex_lock(&g.lock);
    recycle(b);
  }
}

/* Copy the unwritten records of one attached buffer of the current
 * generation into `into`; false when none has any (g.lock held). */
static bool take_partial(tbuf_t *into, uint64_t gen) {
  for (tbuf_t *b = g.threads; b; b = b->next) {
    uint32_t n = atomic_load_explicit(&b->count, memory_order_acquire);
    if (b->gen != gen || n <= b->flushed) continue;
    into->tid = b->tid;
    memcpy(into->rec, &b->rec[b->flushed], (n - b->flushed) * sizeof(rec_t));
    atomic_store_explicit(&into->count, n - b->flushed, memory_order_relaxed);
    b->flushed = n;
    return true;
  }
  return false;
}

/* Queue first, then the attached buffers, until nothing is left (g.lock
 * held). `scratch` is a private buffer. */
static void flush_all(tbuf_t *scratch, uint64_t gen) {
  for (;;) {
    drain_queue(gen);
    if (!take_partial(scratch, gen)) return;
    pthread_mutex_unlock(&g.lock);
    write_range(scratch, 0, atomic_load_explicit(&scratch->count, memory_order_relaxed));
    pthread_mutex_lock(&g.lock);
  }
}

/* ---- the writer thread ------------------------------------------------ */

/* arg: the generation to write. Not read from g.gen: a close may have reset
 * it before this thread first runs. */
static void *writer_main(void *arg) {
  uint64_t gen = (uint64_t)(uintptr_t)arg;
  pthread_mutex_lock(&g.lock);
  uint64_t next_flush = now_ns() + FLUSH_NS;
  while (!g.stop) {
    if (g.qhead == NULL) {
      struct timespec until = {.tv_sec = (time_t)(next_flush / 1000000000u),
                               .tv_nsec = (long)(next_flush % 1000000000u)};
      pthread_cond_timedwait(&g.wake, &g.lock, &until);
    }
    drain_queue(gen);
    if (now_ns() >= next_flush) {
      flush_all(g.scratch, gen);
      next_flush = now_ns() + FLUSH_NS;
    }
  }
  flush_all(g.scratch, gen);
  pthread_mutex_unlock(&g.lock);
  return NULL;
}

/* ---- thread registration ---------------------------------------------- */

static void thread_exit(void *v) {
  tbuf_t *b = v;
  pthread_mutex_lock(&g.lock);
  if (b->attached) unlink_thread(b);
  uint64_t gen = atomic_load_explicit(&g.gen, memory_order_relaxed);
  if (gen != 0 && b->gen == gen && atomic_load_explicit(&b->count, memory_order_relaxed) > b->flushed) {
    push_queue(b);
    if (!g.writer_running) drain_queue(gen);
  } else {
    recycle(b);
  }
  pthread_mutex_unlock(&g.lock);
  my_buf = NULL;
}

static void fork_prepare(void) {
  pthread_mutex_lock(&g.lock);
  pthread_mutex_lock(&g.file_lock);
}

static void fork_parent(void) {
  pthread_mutex_unlock(&g.file_lock);
  pthread_mutex_unlock(&g.lock);
}

/* The child has one thread and no writer: it records nothing until the shim
 * opens a file of its own. The parent's buffers are the parent's to write;
 * the child forgets them (a bounded leak, once per fork). */
static void fork_child(void) {
  atomic_store_explicit(&g.gen, 0, memory_order_relaxed);
  /* A plain close, not cp_outfile_close: outfile.c's list of open files
   * keeps the parent's trace, which the child must not write either. */
  if (g.fd >= 0) close(g.fd);
  atomic_store(&g.err, 0);
  g.fd = -1;
  g.threads = g.qhead = g.qtail = NULL;
  g.qlen = 0;
  g.writer_running = false;
  g.out = NULL;
  g.z = NULL; /* the parent's, like the buffers */
  g.zout = NULL;
  g.scratch = NULL;
  if (my_buf) my_buf->attached = false;
  pthread_mutex_unlock(&g.file_lock);
  pthread_mutex_unlock(&g.lock);
}

static void init_once(void) {
  /* The writer's periodic wait is on the monotonic clock, like the records. */
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g.wake, &attr);
  pthread_condattr_destroy(&attr);
  if (pthread_key_create(&exit_key, thread_exit) == 0) pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static tbuf_t *new_buf(void) {
  tbuf_t *b = take_first(&g.spare, &g.nspare);
  if (!b && !(b = malloc(sizeof *b))) return NULL;
  b->next = b->prev = NULL;
  b->flushed = 0;
  atomic_store_explicit(&b->count, 0, memory_order_relaxed);
  b->attached = false;
  return b;
}

/* The calling thread needs a buffer with room for the current generation. */
static tbuf_t *slow_buf(uint64_t gen) {
  tbuf_t *b = my_buf;
  pthread_mutex_lock(&g.lock);
  if (atomic_load_explicit(&g.gen, memory_order_relaxed) != gen) {
    pthread_mutex_unlock(&g.lock);
    return NULL;
  }
  if (b && b->gen != gen) {
    /* Left over from an earlier open: whatever it holds belongs there. */
    b->flushed = 0;
    atomic_store_explicit(&b->count, 0, memory_order_relaxed);
  } else if (b && atomic_load_explicit(&b->count, memory_order_relaxed) >= REC_PER_BUF) {
    if (b->attached) unlink_thread(b);
    while (g.writer_running && g.qlen >= MAX_QUEUE && !g.stop) pthread_cond_wait(&g.room, &g.lock);
    push_queue(b);
    if (!g.writer_running) drain_queue(gen);
    b = NULL;
  }
  if (b == NULL) {
    b = new_buf();
    if (b == NULL) {
      /* The old buffer is queued: the exit destructor must not see it. */
      my_buf = NULL;
      pthread_setspecific(exit_key, NULL);
      pthread_mutex_unlock(&g.lock);
      return NULL;
    }
    b->tid = (uint64_t)syscall(SYS_gettid);
    my_buf = b;
    pthread_setspecific(exit_key, b);
  }
  b->gen = gen;
  if (!b->attached) link_thread(b);
  pthread_mutex_unlock(&g.lock);
  return b;
}

static inline void put(const char *action, uint64_t ptr, uint64_t size, uint64_t stream, int64_t stack) {
  uint64_t gen = atomic_load_explicit(&g.gen, memory_order_relaxed);
  if (gen == 0) return;
  tbuf_t *b = my_buf;
  uint32_t n;
  if (b == NULL || b->gen != gen ||
      (n = atomic_load_explicit(&b->count, memory_order_relaxed)) >= REC_PER_BUF) {
    b = slow_buf(gen);
    if (b == NULL) {
      atomic_fetch_add_explicit(&g.dropped, 1, memory_order_relaxed);
      return;
    }
    n = atomic_load_explicit(&b->count, memory_order_relaxed);
  }
  rec_t *r = &b->rec[n];
  r->ns = now_ns();
  r->ptr = ptr;
  r->size = size;
  r->stream = stream;
  r->stack = stack;
  r->action = action;
  atomic_store_explicit(&b->count, n + 1, memory_order_release);
}

/* ---- the API ---------------------------------------------------------- */

void cp_trace_alloc(uintptr_t ptr, size_t size, uint64_t stream) { put(A_ALLOC, ptr, size, stream, -1); }
void cp_trace_alloc_at(uintptr_t ptr, size_t size, uint64_t stream, long stack) {
  put(A_ALLOC, ptr, size, stream, stack);
}
void cp_trace_free(uintptr_t ptr, size_t size, uint64_t stream) { put(A_FREE, ptr, size, stream, -1); }
void cp_trace_alloc_failure(size_t size, uint64_t stream) { put(A_FAIL, 0, size, stream, -1); }
void cp_trace_sync_stream(uint64_t stream) { put(A_SYNC_STREAM, 0, 0, stream, -1); }
void cp_trace_sync_device(void) { put(A_SYNC_DEVICE, 0, 0, 0, -1); }

void cp_trace_extra(const char *action, uintptr_t ptr, size_t size, uint64_t stream) {
  if (action) put(action, ptr, size, stream, -1);
}

bool cp_trace_enabled(void) { return atomic_load_explicit(&g.gen, memory_order_relaxed) != 0; }

void cp_trace_counts(uint64_t *written, uint64_t *dropped) {
  if (written) *written = atomic_load_explicit(&g.written, memory_order_relaxed);
  if (dropped) *dropped = atomic_load_explicit(&g.dropped, memory_order_relaxed);
}

static bool is_gz_name(const char *path) {
  size_t n = strlen(path);
  return n >= 3 && strcmp(path + n - 3, ".gz") == 0;
}

/* A deflate state writing gzip, and its output buffer. 0 or ENOMEM. */
static int gz_start(z_stream **z, Bytef **zout) {
  *z = calloc(1, sizeof **z);
  *zout = malloc(GZ_OUT_BYTES);
  if (*z && *zout && deflateInit2(*z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK) return 0;
  free(*z);
  free(*zout);
  *z = NULL;
  *zout = NULL;
  return ENOMEM;
}

static void gz_end(z_stream *z, Bytef *zout) {
  if (z) deflateEnd(z);
  free(z);
  free(zout);
}

int cp_trace_open(const char *path) { return cp_trace_open_with_stacks(path, false); }

int cp_trace_open_with_stacks(const char *path, bool stack_column) {
  const char *header = stack_column ? "Thread,Time,Action,Pointer,Size,Stream,Stack\n"
                                    : "Thread,Time,Action,Pointer,Size,Stream\n";
  if (path == NULL) return EINVAL;
  pthread_once(&once, init_once);
  pthread_mutex_lock(&g.lock);
  if (atomic_load_explicit(&g.gen, memory_order_relaxed) != 0 || g.writer_running) {
    pthread_mutex_unlock(&g.lock);
    return EBUSY;
  }
  int fd = cp_outfile_open(path, NULL, 0);
  int rc = fd < 0 ? -fd : 0;
  z_stream *z = NULL;
  Bytef *zout = NULL;
  if (rc == 0 && is_gz_name(path)) rc = gz_start(&z, &zout);
  if (rc == 0) rc = put_bytes(fd, z, zout, header, strlen(header), Z_SYNC_FLUSH);
  char *out = rc ? NULL : malloc(REC_PER_BUF * LINE_MAX_BYTES);
  tbuf_t *scratch = rc ? NULL : malloc(sizeof *scratch);
  if (rc == 0 && (!out || !scratch)) rc = ENOMEM;
  if (rc != 0) {
    if (fd >= 0) cp_outfile_close(fd);
    gz_end(z, zout);
    free(out);
    free(scratch);
    pthread_mutex_unlock(&g.lock);
    errno = rc;
    return rc;
  }
  pthread_mutex_lock(&g.file_lock);
  g.fd = fd;
  g.out = out;
  g.z = z;
  g.zout = zout;
  pthread_mutex_unlock(&g.file_lock);
  g.scratch = scratch;
  /* Anything still queued raced with the last close and belongs to it. */
  for (tbuf_t *b; (b = pop_queue()) != NULL;) recycle(b);
  g.t0 = now_ns();
  g.stack_column = stack_column;
  g.stop = false;
  atomic_store_explicit(&g.written, 0, memory_order_relaxed);
  atomic_store_explicit(&g.dropped, 0, memory_order_relaxed);
  atomic_store(&g.err, 0);
  uint64_t gen = ++g.last_gen;
  atomic_store_explicit(&g.gen, gen, memory_order_relaxed);
  /* threads.c: no program signal reaches it, and a fork waits for its start-up. */
  g.writer_running = cp_thread_start(writer_main, (void *)(uintptr_t)gen, "cudapool-trace", &g.writer) == 0;
  pthread_mutex_unlock(&g.lock);
  return 0;
}

void cp_trace_close(void) {
  pthread_mutex_lock(&g.lock);
  uint64_t gen = atomic_load_explicit(&g.gen, memory_order_relaxed);
  if (gen == 0) {
    pthread_mutex_unlock(&g.lock);
    return;
  }
  atomic_store_explicit(&g.gen, 0, memory_order_relaxed);
  bool joined = g.writer_running;
  if (joined) {
    g.stop = true;
    pthread_cond_signal(&g.wake);
    pthread_cond_broadcast(&g.room);
    pthread_mutex_unlock(&g.lock);
    pthread_join(g.writer, NULL); /* it flushes everything before it returns */
    pthread_mutex_lock(&g.lock);
    g.writer_running = false;
  } else {
    flush_all(g.scratch, gen);
  }
  pthread_mutex_lock(&g.file_lock);
  if (g.z) keep_error(put_bytes(g.fd, g.z, g.zout, NULL, 0, Z_FINISH));
  gz_end(g.z, g.zout);
  g.z = NULL;
  g.zout = NULL;
  keep_error(cp_outfile_close(g.fd));
  g.fd = -1;
  free(g.out);
  g.out = NULL;
  pthread_mutex_unlock(&g.file_lock);
  free(g.scratch);
  g.scratch = NULL;
  pthread_mutex_unlock(&g.lock);
}

int cp_trace_error(void) { return atomic_load(&g.err); }

void cp_trace_before_exec(void) {
  pthread_mutex_lock(&g.lock);
  uint64_t gen = atomic_load_explicit(&g.gen, memory_order_relaxed);
  if (gen == 0) {
    pthread_mutex_unlock(&g.lock);
    return;
  }
  if (g.writer_running) {
    g.stop = true;
    pthread_cond_signal(&g.wake);
    pthread_cond_broadcast(&g.room);
    pthread_mutex_unlock(&g.lock);
    pthread_join(g.writer, NULL);
    pthread_mutex_lock(&g.lock);
    g.writer_running = false; /* recording threads now write their full buffers themselves */
    g.stop = false;
  }
  flush_all(g.scratch, gen);
  /* A gzip member ends here, so that the file is whole if the exec succeeds;
   * writes after a failed one start the next member (gzip reads a file of
   * several members as one stream). */
  pthread_mutex_lock(&g.file_lock);
  if (g.z) {
    keep_error(put_bytes(g.fd, g.z, g.zout, NULL, 0, Z_FINISH));
    deflateReset(g.z);
  }
  pthread_mutex_unlock(&g.file_lock);
  pthread_mutex_unlock(&g.lock);
}

void cp_trace_after_failed_exec(void) {
  pthread_mutex_lock(&g.lock);
  uint64_t gen = atomic_load_explicit(&g.gen, memory_order_relaxed);
  if (gen != 0 && !g.writer_running)
    g.writer_running = cp_thread_start(writer_main, (void *)(uintptr_t)gen, "cudapool-trace", &g.writer) == 0;
  pthread_mutex_unlock(&g.lock);
}
