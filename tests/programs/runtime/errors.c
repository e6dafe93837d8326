/* errors.c: the error codes a program sees for bad frees, empty and
 * impossible allocations, and the life of the last error (GPU-FACTS.md).
 * Each line is one case; all must be identical natively and under the shim,
 * and the pool must come out of them untouched. */
#include "progs.h"

#define LAST() ((int)cudaGetLastError())

int main(void) {
  void *p = (void *)1, *q = NULL;
  int rc = cudaMalloc(&p, 0);
  printf("malloc0: rc=%d null=%d last=%d\n", rc, p == NULL, LAST());
  rc = cudaFree(NULL);
  printf("free_null: rc=%d last=%d\n", rc, LAST());

  int a = cudaMalloc(&p, MiB);
  rc = cudaFree((char *)p + 256);
  int l1 = LAST(), l2 = LAST();
  printf("free_interior: alloc=%d rc=%d last=%d last2=%d after=%d\n", a, rc, l1, l2, cudaFree(p));

  a = cudaMalloc(&q, MiB);
  int first = cudaFree(q);
  rc = cudaFree(q);
  l1 = LAST(), l2 = LAST();
  printf("double_free: alloc=%d first=%d rc=%d last=%d last2=%d\n", a, first, rc, l1, l2);

  a = cudaMalloc(&q, 2 * MiB);
  first = cudaFree(q);
  rc = cudaFree((char *)q + 512);
  l1 = LAST();
  printf("free_interior_of_freed: alloc=%d first=%d rc=%d last=%d\n", a, first, rc, l1);

  rc = cudaFree((void *)0x12345);
  l1 = LAST(), l2 = LAST();
  printf("free_bogus: rc=%d last=%d last2=%d\n", rc, l1, l2);

  p = NULL;
  rc = cudaMalloc(&p, (size_t)1 << 50);
  l1 = LAST(), l2 = LAST();
  printf("oom: rc=%d last=%d last2=%d\n", rc, l1, l2);

  rc = cudaFree((void *)0x12345);
  int k1 = (int)cudaPeekAtLastError(), k2 = (int)cudaPeekAtLastError();
  l1 = LAST(), l2 = LAST();
  printf("peek: rc=%d peek=%d peek2=%d last=%d last2=%d\n", rc, k1, k2, l1, l2);

  /* A pending error survives later successful calls, pooled ones included. */
  cudaFree((void *)0x12345);
  a = cudaMalloc(&p, MiB);
  int f = cudaFree(p);
  l1 = LAST();
  printf("persist: alloc=%d free=%d last=%d\n", a, f, l1);

  print_pool(0);
  return 0;
}
