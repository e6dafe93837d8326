/* reclaim.c: the reclaimer thread (see reclaim.h for the rules; the pass
 * itself is core/reclaim.c).
 *
 * Sleeping and waking. `epoch` is the futex word the thread sleeps on;
 * `sleeping` says it may be about to sleep, so a free must wake it. The
 * thread stores sleeping = true, fences, and then checks once more that
 * nothing freed waits (cp_reclaim_waiting flushes every cache and looks at
 * the pending lists, each under its lock); a free stores what it freed
 * (a pending block, a cache's first freed block, a deferred free), fences,
 * and loads `sleeping` (cp_reclaim_freed). Either the check sees the free
 * or the free sees sleeping and bumps `epoch` and wakes the thread, whose
 * futex wait then returns at once: no wake-up is lost, and a free while
 * the thread is awake costs a fence and a load. Frees the thread makes
 * itself (flushing caches) never wake it.
 *
 * Invariants: a pass runs only under pass_lock, and none begins once
 * `stopping` is set; the thread never calls into CUDA but through a pool's
 * backend; nothing here allocates but the pool's own work. */
#include "state/reclaim.h"

#include <dlfcn.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "state/capture.h"
#include "state/device.h"
#include "state/shim.h"
#include "threads.h"
#include "util.h"

static _Atomic uint32_t epoch;   /* bumped to wake the thread */
static atomic_bool sleeping;     /* the thread may sleep: a free must wake it */
static atomic_bool ready_freed;  /* a block went straight to ready since the last pass */
static atomic_bool running, stopping;
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static uint64_t interval_ns, idle_ns; /* set before the thread starts */
static __thread __attribute__((tls_model("initial-exec"))) bool on_reclaimer;

static void futex_wake(void) { syscall(SYS_futex, (uint32_t *)&epoch, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }

void cp_reclaim_freed(void *ctx, int device, bool pending) {
  (void)ctx, (void)device;
  if (on_reclaimer) return; /* its own flushes: its pass sees them */
  if (!pending) {
    if (!idle_ns) return; /* nothing waits: only the idle release wants to know */
    atomic_store_explicit(&ready_freed, true, memory_order_relaxed);
  }
  atomic_thread_fence(memory_order_seq_cst);
  if (!atomic_load_explicit(&sleeping, memory_order_relaxed)) return;
  if (atomic_exchange(&sleeping, false)) {
    atomic_fetch_add(&epoch, 1);
    futex_wake();
  }
}

/* Until `epoch` moves past seen (false), or the deadline (0: none) passes
 * (true). */
static bool wait_for(uint32_t seen, uint64_t deadline) {
  while (atomic_load(&epoch) == seen) {
    struct timespec rel, *timeout = NULL;
    if (deadline) {
      uint64_t now = cp_monotonic_ns();
      if (now >= deadline) return true;
      rel.tv_sec = (time_t)((deadline - now) / 1000000000u);
      rel.tv_nsec = (long)((deadline - now) % 1000000000u);
      timeout = &rel;
    }
    syscall(SYS_futex, (uint32_t *)&epoch, FUTEX_WAIT_PRIVATE, seen, timeout, NULL, 0);
  }
  return false;
}

/* Memory goes back only while no capture is in progress: a cudaFree from
 * this thread would break a capture in global mode. */
static bool release_begin(void *ctx) {
  (void)ctx;
  return cp_capture_none_lock();
}

static void release_end(void *ctx) {
  (void)ctx;
  cp_capture_unlock();
}

static cp_reclaim_result_t pass_all(void) {
  cp_reclaim_args_t args = {.now_ns = cp_monotonic_ns(),
                            .idle_ns = idle_ns,
                            .release_begin = release_begin,
                            .release_end = release_end};
  cp_reclaim_result_t all = {0};
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = cp_device_pool_if_any(dev);
    if (!pool) continue;
    cp_reclaim_result_t r;
    cp_reclaim(pool, &args, &r);
    all.busy |= r.busy;
    if (r.due_ns && (!all.due_ns || r.due_ns < all.due_ns)) all.due_ns = r.due_ns;
  }
  return all;
}

static bool waiting_anywhere(void) {
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = cp_device_pool_if_any(dev);
    if (pool && cp_reclaim_waiting(pool)) return true;
  }
  return false;
}

static void *reclaimer(void *unused) {
  (void)unused;
  on_reclaimer = true;
  uint32_t seen = 0; /* epoch starts at 0: a free before this line is not missed */
  uint64_t deadline = 0;
  for (;;) {
    bool timed_out = wait_for(seen, deadline);
    seen = atomic_load(&epoch);
    if (!timed_out && !atomic_load(&stopping)) {
      /* Woken by a free: the first pass one interval later (the device is
       * likely still at the work the free waits for, and the program may
       * make it ready itself meanwhile); frees until then wake nothing. */
      uint64_t first = cp_monotonic_ns() + interval_ns;
      deadline = deadline && deadline < first ? deadline : first;
      continue;
    }
    pthread_mutex_lock(&pass_lock);
    if (atomic_load(&stopping)) {
      pthread_mutex_unlock(&pass_lock);
      return NULL;
    }
    atomic_store(&sleeping, false);
    atomic_store(&ready_freed, false);
    cp_reclaim_result_t r = pass_all();
    uint64_t now = cp_monotonic_ns();
    bool again = r.busy;
    if (!again) {
      /* About to sleep: say so, then look once more (see the top). */
      atomic_store(&sleeping, true);
      atomic_thread_fence(memory_order_seq_cst);
      again = atomic_load(&ready_freed) || waiting_anywhere();
      if (again) atomic_store(&sleeping, false);
    }
    pthread_mutex_unlock(&pass_lock);
    deadline = again ? now + interval_ns : r.due_ns;
  }
  return NULL;
}

void cp_reclaim_stop(void) {
  if (!atomic_load(&running)) return;
  atomic_store(&stopping, true);
  atomic_fetch_add(&epoch, 1);
  futex_wake();
  pthread_mutex_lock(&pass_lock); /* the pass in progress ends first */
  pthread_mutex_unlock(&pass_lock);
}

static void stop_at_exit(void) { cp_reclaim_stop(); }

/* The child of a fork() has no reclaimer (and serves nothing: layer.c). */
static void child_after_fork(void) {
  atomic_store(&running, false);
  atomic_store(&sleeping, false);
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  pass_lock = fresh;
}

/* The thread runs this library's code until the process ends: it stays
 * loaded (a library loaded with dlopen, as by PyTorch's pluggable
 * allocator, could otherwise be unloaded under it). */
static void pin_this_library(void) {
  Dl_info info;
  if (!dladdr((void *)cp_reclaim_start, &info) || !info.dli_fname) return;
  void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  if (h) dlclose(h);
}

static void start(void) {
  /* Only where there is something to hold while the program idles: a
   * cache cap or an idle release. A pass costs a busy program time (it
   * flushes caches and issues barriers under its feet: densenet121 took
   * 85 ms a step with it against 74 without, in one H200 run). */
  bool holds_something = cp_opts.max_cached.bytes != 0 || cp_opts.max_cached.percent > 0.0 || cp_opts.release_idle_s;
  if (!cp_opts.reclaim_interval_ms || !holds_something || cp_opts.trace[0] || cp_opts.disable) return;
  interval_ns = (uint64_t)cp_opts.reclaim_interval_ms * 1000000u;
  idle_ns = (uint64_t)cp_opts.release_idle_s * 1000000000u;
  pin_this_library();
  /* Before the thread exists, so that it never runs in a child. */
  pthread_atfork(NULL, NULL, child_after_fork);
  atomic_store(&sleeping, true); /* from its first wait: frees must wake it */
  if (cp_thread_start(reclaimer, NULL, "cudapool-reclaim", NULL) != 0) {
    atomic_store(&sleeping, false);
    return;
  }
  atomic_store(&running, true);
  /* Registered now, after the CUDA runtime's own (it started when the
   * first pool asked for the device's memory): runs before its teardown. */
  atexit(stop_at_exit);
}

void cp_reclaim_start(void) { pthread_once(&start_once, start); }

bool cp_reclaim_on(void) { return atomic_load_explicit(&running, memory_order_relaxed); }
