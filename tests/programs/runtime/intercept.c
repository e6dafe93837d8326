/* intercept.c: allocate/free pairs of one size, the pattern a caching pool
 * exists for. Usage: intercept [pairs=100] [bytes=1MiB].
 * Prints "intercept: pairs=N errors=E", then how many cudaMalloc/cudaFree
 * calls reached the runtime (info) and the pool's counters. */
#include "progs.h"

int main(int argc, char **argv) {
  int pairs = argc > 1 ? atoi(argv[1]) : 100;
  size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : MiB;
  int errors = 0;
  for (int i = 0; i < pairs; i++) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess || !p) errors++;
    if (cudaFree(p) != cudaSuccess) errors++;
  }
  printf("intercept: pairs=%d errors=%d last=%d\n", pairs, errors, (int)cudaGetLastError());
  printf("info: driver_mallocs=%ld driver_frees=%ld\n", fake_calls("cudaMalloc"), fake_calls("cudaFree"));
  print_pool(0);
  return 0;
}
