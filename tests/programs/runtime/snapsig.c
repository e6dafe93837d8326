/* snapsig.c: a snapshot asked for by signal (CUDAPOOL_SNAPSHOT_SIGNAL=USR1).
 * Keeps 3 MiB and 1000 bytes allocated, raises SIGUSR1, then waits (polling,
 * at most 20 s) until the file argv[1] holds a whole snapshot: the shim's
 * thread writes it, not the handler. Prints "snapsig: errors=E complete=C". */
#include <sched.h>
#include <signal.h>
#include <time.h>

#include "progs.h"

static int complete(const char *path) {
  static char text[1 << 16];
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  return n >= 2 && text[n - 2] == '}' && text[n - 1] == '\n';
}

int main(int argc, char **argv) {
  void *a = NULL, *b = NULL;
  int errors = (cudaMalloc(&a, 3 * MiB) != cudaSuccess) + (cudaMalloc(&b, 1000) != cudaSuccess);
  raise(SIGUSR1);
  time_t deadline = time(NULL) + 20;
  int done = 0;
  while (argc > 1 && !(done = complete(argv[1])) && time(NULL) < deadline) sched_yield();
  printf("snapsig: errors=%d complete=%d\n", errors, done);
  return 0;
}
