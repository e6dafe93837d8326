/* snapshot_signal.c: snapshots on a signal (snapshot_signal.h). */
#include "state/snapshot_signal.h"

#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "state/shim.h"
#include "state/snapshot.h"
#include "threads.h"

static sem_t go;

static void on_signal(int sig) {
  (void)sig;
  int saved = errno;
  sem_post(&go);
  errno = saved;
}

static void *snapshotter(void *unused) {
  (void)unused;
  char path[CP_OPTION_PATH_MAX + 16];
  for (unsigned n = 1;; n++) {
    while (sem_wait(&go) != 0)
      if (errno != EINTR) return NULL;
    if (cp_snapshot_on_signal(n, path, sizeof path)) {
      fprintf(stderr, "cudapool: snapshot written to %s\n", path);
      fflush(stderr);
    }
  }
  return NULL;
}

void cp_snapshot_signal_arm(void) {
  int sig = cp_opts.snapshot_signal;
  if (!sig || cp_opts.disable) return;
  if (!cp_opts.oom_snapshot[0]) {
    fprintf(stderr, "cudapool: warning: CUDAPOOL_SNAPSHOT_SIGNAL needs CUDAPOOL_OOM_SNAPSHOT (the file); "
                    "the signal is left alone\n");
    return;
  }
  struct sigaction cur, sa;
  if (sigaction(sig, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) return;
  if (sem_init(&go, 0, 0) != 0) return;
  /* The thread starts with every signal blocked, so none is ever its. */
  if (cp_thread_start(snapshotter, NULL, "cudapool-snap", NULL) != 0) return;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, NULL);
}
