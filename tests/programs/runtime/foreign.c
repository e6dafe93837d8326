/* foreign.c: pointers cudaMalloc did not make (managed, pitched, pinned
 * host, the fake's fakecuda_raw_malloc standing for "allocated before the
 * shim", a stack address) freed with cudaFree: the runtime must see each one
 * unchanged, so results and the last error are exactly native. */
#include "progs.h"

#define LAST() ((int)cudaGetLastError())

int main(void) {
  void *m = NULL;
  int a = cudaMallocManaged(&m, MiB, cudaMemAttachGlobal);
  int f = cudaFree(m);
  printf("managed: alloc=%d free=%d last=%d\n", a, f, LAST());

  void *pp = NULL;
  size_t pitch = 0;
  a = cudaMallocPitch(&pp, &pitch, 1000, 10);
  f = cudaFree(pp);
  printf("pitch: alloc=%d pitch=%zu free=%d last=%d\n", a, pitch, f, LAST());

  void *(*raw)(size_t) = (void *(*)(size_t))prog_sym("fakecuda_raw_malloc");
  if (raw) {
    void *r = raw(MiB);
    f = cudaFree(r);
    int again = cudaFree(r);
    int l1 = LAST(), l2 = LAST();
    printf("raw: got=%d free=%d again=%d last=%d last2=%d\n", r != NULL, f, again, l1, l2);
  } else {
    printf("raw: nofake\n");
  }

  void *h = NULL;
  a = cudaMallocHost(&h, 4096);
  f = cudaFree(h);
  int l1 = LAST();
  printf("hostptr: alloc=%d free=%d last=%d freehost=%d\n", a, f, l1, cudaFreeHost(h));

  int x = 0;
  f = cudaFree(&x);
  printf("stackptr: free=%d last=%d\n", f, LAST());
  printf("foreign_live: bytes=%ld\n", fake_live(0));
  print_pool(0);
  return 0;
}
