/* threads.c: starting cudapool's own threads (see threads.h). The caller's
 * signal mask is blocked in full only around pthread_create, which copies
 * it into the new thread, and restored at once.
 *
 * A fork() waits (pthread_atfork, at most ~1 s) until every thread started
 * here has left its start-up: a thread's start-up allocates (the C library,
 * a sanitizer's runtime), and a child forked while it held an allocator lock
 * would block forever on that lock (seen with ASan: LeakSanitizer's exit
 * check in the child of a fork that raced the live-stats thread's start).
 * Past start-up they only sleep (futex, sigwait) until asked. */
#include "threads.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#define BODIES_MAX 4

typedef struct thread_body {
  void *(*fn)(void *);
} thread_body_t;

static thread_body_t bodies[BODIES_MAX];
static atomic_int n_bodies;
static atomic_int starting; /* threads created that have not yet begun their body */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void wait_for_start_ups(void) {
  const struct timespec ms = {0, 1000000};
  for (int i = 0; i < 1000 && atomic_load_explicit(&starting, memory_order_acquire) > 0; i++)
    nanosleep(&ms, NULL);
}

static void register_fork_wait(void) { pthread_atfork(wait_for_start_ups, NULL, NULL); }

static void *trampoline(void *arg) {
  const thread_body_t *body = arg;
  atomic_fetch_sub_explicit(&starting, 1, memory_order_release);
  return body->fn(NULL);
}

int cp_thread_start(void *(*fn)(void *), const char *name) {
  int slot = atomic_fetch_add(&n_bodies, 1);
  if (slot >= BODIES_MAX) return EAGAIN;
  bodies[slot].fn = fn;
  pthread_once(&fork_once, register_fork_wait);
  sigset_t all, old;
  pthread_attr_t attr;
  pthread_t t;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  atomic_fetch_add_explicit(&starting, 1, memory_order_relaxed);
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, trampoline, &bodies[slot]);
    pthread_attr_destroy(&attr);
  }
  if (rc != 0) atomic_fetch_sub_explicit(&starting, 1, memory_order_relaxed);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0) pthread_setname_np(t, name);
  return rc;
}
