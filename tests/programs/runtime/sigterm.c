/* sigterm.c: a job stopped with SIGTERM, as Slurm and Kubernetes stop one.
 * Every mode first makes two cudaMalloc/cudaFree pairs of 1 MiB (one miss,
 * one hit under the shim) and prints "sigterm: mode=M errors=E", flushed,
 * then:
 *   raise     raise(SIGTERM) and wait: natively killed by SIGTERM there
 *   kill      the same with kill(getpid(), SIGTERM): the process's signal,
 *             whichever thread takes it
 *   exit      raise(SIGTERM), then return 0 at once: natively never reached;
 *             under the shim the exit races the report, and must still end
 *             killed by SIGTERM
 *   own       a SIGTERM handler of its own installed before the first CUDA
 *             call; raise: prints "sigterm: handled=1" and exits 0
 *   late      the same handler installed after the first CUDA call
 *   ignored   SIGTERM ignored before the first CUDA call; raise: prints
 *             "sigterm: survived=1" and exits 0
 *   fork      forks after the pairs; the child raises SIGTERM and would
 *             exit 0 if it survived; prints "sigterm: child_signal=N" (0 =
 *             it exited) */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"

static volatile sig_atomic_t handled;

static void on_term(int sig) {
  (void)sig;
  handled = 1;
}

static void handle(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
}

static int pairs(void) {
  int errors = 0;
  for (int i = 0; i < 2; i++) {
    void *p = NULL;
    errors += (cudaMalloc(&p, MiB) != cudaSuccess) + (cudaFree(p) != cudaSuccess);
  }
  return errors;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "raise";
  if (strcmp(mode, "own") == 0) handle();
  if (strcmp(mode, "ignored") == 0) signal(SIGTERM, SIG_IGN);
  int errors = pairs();
  if (strcmp(mode, "late") == 0) handle();
  printf("sigterm: mode=%s errors=%d\n", mode, errors);
  fflush(stdout); /* a process killed by a signal flushes nothing */

  if (strcmp(mode, "raise") == 0 || strcmp(mode, "kill") == 0) {
    if (strcmp(mode, "raise") == 0)
      raise(SIGTERM);
    else
      kill(getpid(), SIGTERM);
    for (;;) pause(); /* until the signal's end comes */
  }
  if (strcmp(mode, "exit") == 0) {
    raise(SIGTERM);
    return 0;
  }
  if (strcmp(mode, "own") == 0 || strcmp(mode, "late") == 0) {
    raise(SIGTERM);
    printf("sigterm: handled=%d\n", (int)handled);
    return 0;
  }
  if (strcmp(mode, "ignored") == 0) {
    raise(SIGTERM);
    printf("sigterm: survived=1\n");
    return 0;
  }
  if (strcmp(mode, "fork") == 0) {
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
      raise(SIGTERM);
      _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return 2;
    printf("sigterm: child_signal=%d\n", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return 0;
  }
  return 2;
}
