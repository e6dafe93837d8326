/* reset.c: cudaDeviceReset takes every allocation of the device with it.
 * Pointers from before it (live or freed into the pool) are invalid after it,
 * and new allocations work; the pool keeps nothing of the old context. */
#include "progs.h"

#define LAST() ((int)cudaGetLastError())

int main(void) {
  void *p1 = NULL, *p2 = NULL, *p3 = NULL, *n = NULL;
  int errors = 0;
  errors += cudaMalloc(&p1, MiB) != cudaSuccess;
  errors += cudaMalloc(&p2, MiB) != cudaSuccess;
  errors += cudaMalloc(&p3, MiB) != cudaSuccess;
  errors += cudaFree(p2) != cudaSuccess;
  int rc = cudaDeviceReset();
  int f_old = cudaFree(p1);
  int l1 = LAST();
  int f_cached = cudaFree(p2);
  int l2 = LAST();
  int m = cudaMalloc(&n, MiB);
  int f_new = cudaFree(n);
  printf("reset: errors=%d rc=%d free_old=%d last=%d free_cached=%d last2=%d malloc=%d "
         "free_new=%d last3=%d\n",
         errors, rc, f_old, l1, f_cached, l2, m, f_new, LAST());
  printf("info: live=%ld\n", fake_live(0));
  print_pool(0);
  return 0;
}
