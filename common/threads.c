/* threads.c: starting cudapool's own threads (see threads.h). The caller's
 * signal mask is blocked in full only around pthread_create, which copies
 * it into the new thread, and restored at once.
 *
 * A fork() waits (pthread_atfork, at most ~1 s) until every thread started
 * here has left its start-up: a thread's start-up allocates (the C library,
 * a sanitizer's runtime), and a child forked while it held an allocator lock
 * would block forever on that lock (seen with ASan: LeakSanitizer's exit
 * check in the child of a fork that raced the live-stats thread's start).
 * Past start-up they only sleep (futex, sigwait, a condition variable)
 * until asked, and allocate only under a lock that their own module's fork
 * handler takes (the trace writer), or through malloc in the pool's work
 * as the program's own threads do (the reclaimer: the C library's and the
 * sanitizers' allocators take their locks across a fork), so a fork never
 * copies a held allocator lock. A thread names itself: a detached one may be gone before its
 * creator could. */
#include "threads.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <time.h>

#define STARTS_MAX 8

/* What a thread runs, held only until it has begun: the slot is free again
 * once the new thread has copied it out. */
typedef struct thread_start {
  void *(*fn)(void *);
  void *arg;
  const char *name;
  atomic_bool busy;
} thread_start_t;

static thread_start_t starts[STARTS_MAX];
static atomic_int starting; /* threads created that have not yet begun their body */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void wait_for_start_ups(void) {
  const struct timespec ms = {0, 1000000};
  for (int i = 0; i < 1000 && atomic_load_explicit(&starting, memory_order_acquire) > 0; i++)
    nanosleep(&ms, NULL);
}

static void register_fork_wait(void) { pthread_atfork(wait_for_start_ups, NULL, NULL); }

static void *trampoline(void *slot) {
  thread_start_t *st = slot;
  void *(*fn)(void *) = st->fn;
  void *arg = st->arg;
  pthread_setname_np(pthread_self(), st->name);
  atomic_store_explicit(&st->busy, false, memory_order_release);
  atomic_fetch_sub_explicit(&starting, 1, memory_order_release);
  return fn(arg);
}

static thread_start_t *take_slot(void) {
  for (int i = 0; i < STARTS_MAX; i++) {
    bool idle = false;
    if (atomic_compare_exchange_strong(&starts[i].busy, &idle, true)) return &starts[i];
  }
  return NULL;
}

int cp_thread_start(void *(*fn)(void *), void *arg, const char *name, pthread_t *joinable) {
  thread_start_t *slot = take_slot();
  if (slot == NULL) return EAGAIN;
  slot->fn = fn;
  slot->arg = arg;
  slot->name = name;
  pthread_once(&fork_once, register_fork_wait);
  sigset_t all, old;
  pthread_attr_t attr;
  pthread_t t;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  atomic_fetch_add_explicit(&starting, 1, memory_order_relaxed);
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    if (joinable == NULL) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, trampoline, slot);
    pthread_attr_destroy(&attr);
  }
  if (rc != 0) {
    atomic_fetch_sub_explicit(&starting, 1, memory_order_relaxed);
    atomic_store_explicit(&slot->busy, false, memory_order_release);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0 && joinable != NULL) *joinable = t;
  return rc;
}
