/* threads.c: starting cudapool's own threads (see threads.h). The caller's
 * signal mask is blocked in full only around pthread_create, which copies
 * it into the new thread, and restored at once. */
#include "threads.h"

#include <signal.h>

int cp_thread_start(void *(*fn)(void *), const char *name) {
  sigset_t all, old;
  pthread_attr_t attr;
  pthread_t t;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, fn, NULL);
    pthread_attr_destroy(&attr);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0) pthread_setname_np(t, name);
  return rc;
}
