/* state.c: the fake runtime's global state, its one-time set-up from the
 * environment, the entry/exit protocol of every exported call (lock, count
 * the call, record the thread's last error) and the per-thread values:
 * current device, capture interaction mode, last error, per-thread default
 * streams.
 *
 * Environment, read once on first use:
 *   FAKECUDA_DEVICES            number of devices, 1..16 (default 1)
 *   FAKECUDA_MEMORY             bytes per device, K/M/G/T suffixes (16G)
 *   FAKECUDA_FAIL_MALLOC_AFTER  cudaMalloc calls that succeed before every
 *                               later one fails (default: never)
 *   FAKECUDA_SHARED_MEM         a file holding the used bytes of every
 *                               device, shared by every process that names
 *                               it: they compete for FAKECUDA_MEMORY
 *                               (made and zeroed by the first; default: none);
 *                               its second row holds each device's peak;
 *                               a process's memory leaves it at its exit
 *   FAKECUDA_EXIT_PIPE=R,W      at exit, after every other library's end:
 *                               'e' written to fd W, then fd R read until it
 *                               closes (mem.c; where a driver still holds the
 *                               memory of a dying process)
 *   FAKECUDA_HOLD_AT_EXIT=1     with FAKECUDA_SHARED_MEM: the process's memory
 *                               stays counted after it dies, its pid listed
 *                               by the fake NVML, until
 *                               fakecuda_release_process (shared_mem.h)
 *
 * Invariants: fc.lock is held between fc_enter and fc_leave and nowhere
 * else; cudaErrorNotReady is never stored as the last error (natively a
 * query that is not ready is not an error). */
#include "fake.h"

#include <signal.h>
#include <stdbool.h>

#include "shared_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utlist.h>

struct fc_state fc = {.lock = PTHREAD_MUTEX_INITIALIZER, .fail_after = -1};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;
static unsigned next_tid = 1;

static _Thread_local cudaError_t tl_last_error;
static _Thread_local int tl_device;
static _Thread_local enum cudaStreamCaptureMode tl_mode = cudaStreamCaptureModeGlobal;
static _Thread_local unsigned tl_tid;
static _Thread_local fc_stream *tl_pts[FC_MAX_DEVICES];

static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  int shift = 0;
  switch (*end) {
    case 'K':
    case 'k':
      shift = 10;
      end++;
      break;
    case 'M':
    case 'm':
      shift = 20;
      end++;
      break;
    case 'G':
    case 'g':
      shift = 30;
      end++;
      break;
    case 'T':
    case 't':
      shift = 40;
      end++;
      break;
    default: break;
  }
  if (*end != '\0' || v > (~0ULL >> shift)) return -1;
  *out = (size_t)(v << shift);
  return 0;
}

/* Runs at thread exit: the thread's per-thread default streams go away with
 * it, as natively. */
static void thread_exit(void *unused) {
  (void)unused;
  pthread_mutex_lock(&fc.lock);
  for (int d = 0; d < FC_MAX_DEVICES; d++) {
    fc_stream *s = tl_pts[d];
    if (!s) continue;
    if (s->cap && s->cap->origin == s) fc_capture_drop(s->cap);
    fc_stream_unlink(s);
    free(s);
    tl_pts[d] = NULL;
  }
  pthread_mutex_unlock(&fc.lock);
}

/* FAKECUDA_SHARED_MEM: the counters and the process rows
 * (shared_mem.h) are mapped from the file; updated with atomics only
 * (mem.c), so processes need no lock between them. */
static bool row_free(fc_shm_proc *r) {
  uint32_t pid = atomic_load(&r->pid);
  if (pid == 0) return true;
  /* A dead process's row (killed: no exit of its own emptied it), unless
   * a test holds its memory. */
  return !atomic_load(&r->held) && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static void take_row(fc_shm *m) {
  const char *h = getenv("FAKECUDA_HOLD_AT_EXIT");
  for (int i = 0; i < FC_SHM_PROCS; i++) {
    fc_shm_proc *r = &m->procs[i];
    uint32_t pid = atomic_load(&r->pid);
    if (!row_free(r) || !atomic_compare_exchange_strong(&r->pid, &pid, (uint32_t)getpid())) continue;
    for (int d = 0; d < FC_SHM_DEVICES; d++) atomic_store(&r->bytes[d], 0);
    atomic_store(&r->held, h && strcmp(h, "1") == 0);
    atomic_store(&r->last_pid, (uint32_t)getpid());
    fc.shared_proc = r;
    return;
  }
}

static void map_shared_mem(const char *path) {
  size_t len = sizeof(fc_shm);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  struct stat st;
  void *m = MAP_FAILED;
  if (fd >= 0 && fstat(fd, &st) == 0 && ((size_t)st.st_size >= len || ftruncate(fd, (off_t)len) == 0))
    m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd >= 0) close(fd);
  if (m == MAP_FAILED) {
    fprintf(stderr, "fakecuda: FAKECUDA_SHARED_MEM=%s ignored (%s)\n", path, strerror(errno));
    return;
  }
  fc.shared_used = ((fc_shm *)m)->used;
  fc.shared_pid = getpid();
  take_row(m);
}

static void init_once(void) {
  const char *e = getenv("FAKECUDA_DEVICES");
  fc.ndev = 1;
  if (e && *e) {
    int n = atoi(e);
    if (n < 1 || n > FC_MAX_DEVICES)
      fprintf(stderr, "fakecuda: FAKECUDA_DEVICES=%s ignored (1..%d)\n", e, FC_MAX_DEVICES);
    else
      fc.ndev = n;
  }
  fc.capacity = (size_t)16 << 30;
  e = getenv("FAKECUDA_MEMORY");
  if (e && *e && parse_size(e, &fc.capacity) != 0) {
    fprintf(stderr, "fakecuda: FAKECUDA_MEMORY=%s ignored (bytes, K/M/G/T suffix)\n", e);
    fc.capacity = (size_t)16 << 30;
  }
  e = getenv("FAKECUDA_FAIL_MALLOC_AFTER");
  if (e && *e) fc.fail_after = atol(e);
  e = getenv("FAKECUDA_SHARED_MEM");
  if (e && *e) map_shared_mem(e);
  pthread_key_create(&thread_key, thread_exit);
  for (int d = 0; d < FC_MAX_DEVICES; d++) {
    fc_stream_link(&fc.legacy[d], FC_STREAM_LEGACY, d, 0);
    fc.legacy[d].handle = cudaStreamLegacy;
  }
}

static void count(const char *fn) {
  fc_counter *c;
  HASH_FIND_STR(fc.counters, fn, c);
  if (!c) {
    c = calloc(1, sizeof *c);
    if (!c) return;
    snprintf(c->name, sizeof c->name, "%s", fn);
    HASH_ADD_STR(fc.counters, name, c);
  }
  c->n++;
}

void fc_enter(const char *fn) {
  pthread_once(&once, init_once);
  pthread_mutex_lock(&fc.lock);
  count(fn);
}

cudaError_t fc_leave(cudaError_t err) {
  if (err != cudaSuccess && err != cudaErrorNotReady) tl_last_error = err;
  pthread_mutex_unlock(&fc.lock);
  return err;
}

void fc_lock_only(void) {
  pthread_once(&once, init_once);
  pthread_mutex_lock(&fc.lock);
}

void fc_unlock_only(void) { pthread_mutex_unlock(&fc.lock); }

long fc_count_of(const char *fn) {
  fc_counter *c;
  HASH_FIND_STR(fc.counters, fn, c);
  return c ? c->n : 0;
}

unsigned fc_tid(void) {
  if (!tl_tid) tl_tid = next_tid++; /* only called under fc.lock */
  return tl_tid;
}

int fc_cur_device(void) { return tl_device; }
void fc_set_cur_device(int dev) { tl_device = dev; }
enum cudaStreamCaptureMode fc_thread_mode(void) { return tl_mode; }
void fc_set_thread_mode(enum cudaStreamCaptureMode m) { tl_mode = m; }

cudaError_t fc_take_last_error(int reset) {
  cudaError_t e = tl_last_error;
  if (reset) tl_last_error = cudaSuccess;
  return e;
}

double fc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void fc_stream_link(fc_stream *s, enum fc_stream_kind kind, int dev, unsigned flags) {
  s->kind = kind;
  s->device = dev;
  s->flags = flags;
  s->idx = fc.next_stream_idx++;
  DL_APPEND(fc.all, s);
}

void fc_stream_unlink(fc_stream *s) {
  DL_DELETE(fc.all, s);
  fc_vc_free(&s->vc);
}

fc_stream *fc_per_thread_stream(int dev) {
  if (!tl_pts[dev]) {
    fc_stream *s = calloc(1, sizeof *s);
    if (!s) abort();
    fc_stream_link(s, FC_STREAM_PER_THREAD, dev, 0);
    s->handle = cudaStreamPerThread;
    tl_pts[dev] = s;
    pthread_setspecific(thread_key, &tl_pts[0]);
  }
  return tl_pts[dev];
}

int fc_stream_blocking(const fc_stream *s) {
  return s->kind == FC_STREAM_PER_THREAD ||
         (s->kind == FC_STREAM_CREATED && !(s->flags & cudaStreamNonBlocking));
}

/* Stream 0 is the legacy stream in the plain API and the per-thread stream
 * in the _ptsz/_ptds API, as natively. */
cudaError_t fc_stream_get(cudaStream_t h, int ptsz, fc_stream **out) {
  int dev = tl_device;
  if (h == NULL) {
    *out = ptsz ? fc_per_thread_stream(dev) : &fc.legacy[dev];
  } else if (h == cudaStreamLegacy) {
    *out = &fc.legacy[dev];
  } else if (h == cudaStreamPerThread) {
    *out = fc_per_thread_stream(dev);
  } else {
    fc_stream *s;
    HASH_FIND(hh, fc.streams, &h, sizeof h, s);
    if (!s) return cudaErrorInvalidResourceHandle;
    *out = s;
  }
  return cudaSuccess;
}
