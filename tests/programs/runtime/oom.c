/* oom.c: running out of device memory (run with FAKECUDA_MEMORY=64M).
 * fill: 16 MiB pieces until cudaMalloc fails; the error is visible once.
 * big/retry: after freeing, allocations that fit natively must succeed under
 * a pool that caches the freed memory, with no stale error left behind.
 * inject: fakecuda_fail_malloc_after(0) makes the runtime refuse. */
#include "progs.h"

#define LAST() ((int)cudaGetLastError())

int main(void) {
  void *p[64];
  int n = 0, rc = 0;
  while (n < 64 && (rc = cudaMalloc(&p[n], 16 * MiB)) == cudaSuccess) n++;
  int l1 = LAST(), l2 = LAST();
  printf("fill: rc=%d last=%d last2=%d\n", rc, l1, l2);
  printf("info: pieces=%d\n", n);
  int errors = 0;
  for (int i = 0; i < n; i++) errors += cudaFree(p[i]) != cudaSuccess;
  printf("freeall: errors=%d\n", errors);

  void *big = NULL;
  rc = cudaMalloc(&big, 60 * MiB);
  printf("big: rc=%d last=%d free=%d\n", rc, LAST(), cudaFree(big));

  void *a = NULL, *b = NULL;
  int ra = cudaMalloc(&a, 24 * MiB), fa = cudaFree(a);
  rc = cudaMalloc(&b, 48 * MiB);
  printf("retry: first=%d free=%d rc=%d last=%d free2=%d\n", ra, fa, rc, LAST(), cudaFree(b));

  void (*fail_after)(long) = (void (*)(long))prog_sym("fakecuda_fail_malloc_after");
  if (fail_after) {
    fail_after(0);
    rc = cudaMalloc(&big, 63 * MiB);
    l1 = LAST(), l2 = LAST();
    fail_after(-1);
    int ok = cudaMalloc(&big, 63 * MiB);
    printf("inject: rc=%d last=%d last2=%d after=%d free=%d\n", rc, l1, l2, ok, cudaFree(big));
  } else {
    printf("inject: nofake\n");
  }
  print_pool(0);
  return 0;
}
