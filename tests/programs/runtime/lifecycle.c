/* lifecycle.c: when the shim starts and what a forked child sees.
 *   lifecycle none    makes no CUDA call at all (a shell under the launcher)
 *   lifecycle fork    uses the device (cudaMalloc/cudaFree pairs), forks; the
 *                     child makes one pair and prints how many real
 *                     cudaMalloc calls reached the runtime for it:
 *                     "child: real_mallocs=1" natively, and under the shim
 *                     too, since the child passes everything through (the
 *                     parent's pool is not the child's).
 * Prints "lifecycle: mode=M errors=E" from the parent. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"

static int pair(void) {
  void *p = NULL;
  return (cudaMalloc(&p, MiB) != cudaSuccess) + (cudaFree(p) != cudaSuccess);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "none";
  int errors = 0;
  if (strcmp(mode, "fork") == 0) {
    for (int i = 0; i < 4; i++) errors += pair();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
      long before = fake_calls("cudaMalloc");
      int e = pair();
      printf("child: real_mallocs=%ld errors=%d\n", fake_calls("cudaMalloc") - before, e);
      exit(0); /* destructors run: the child must write no report */
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) errors++;
  } else if (strcmp(mode, "none") != 0) {
    return 2;
  }
  printf("lifecycle: mode=%s errors=%d\n", mode, errors);
  return 0;
}
