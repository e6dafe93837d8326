/* meminfo.c: cudaMemGetInfo as the program sees it (run with
 * FAKECUDA_MEMORY=64M): memory cached by a pool counts as free, so the
 * numbers match native ones; NULL outputs are the runtime's business. */
#include "progs.h"

int main(void) {
  size_t f0 = 0, t0 = 0, f1 = 0, t1 = 0, f2 = 0, t2 = 0;
  int r0 = cudaMemGetInfo(&f0, &t0);
  void *p = NULL;
  int a = cudaMalloc(&p, 16 * MiB);
  int r1 = cudaMemGetInfo(&f1, &t1);
  int f = cudaFree(p);
  int r2 = cudaMemGetInfo(&f2, &t2);
  printf("meminfo: rc=%d total=%zu free0=%zu alloc=%d free_live=%zu freed=%d free_after=%zu "
         "rc1=%d rc2=%d\n",
         r0, t0, f0, a, f1, f, f2, r1, r2);
  size_t x = 0;
  int n1 = cudaMemGetInfo(NULL, &x);
  int l1 = (int)cudaGetLastError();
  int n2 = cudaMemGetInfo(&x, NULL);
  int l2 = (int)cudaGetLastError();
  printf("meminfo_null: free_null=%d last=%d total_null=%d last2=%d\n", n1, l1, n2, l2);
  print_pool(0);
  return 0;
}
