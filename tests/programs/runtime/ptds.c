/* ptds.c: built with CUDA_API_PER_THREAD_DEFAULT_STREAM, so stream 0 is the
 * per-thread default stream and the program calls the _ptsz/_ptds entry
 * points (cudaStreamSynchronize_ptsz, cudaMemcpy_ptds, ...). */
#include "progs.h"

int main(void) {
  unsigned char host[16] = {0};
  void *p = NULL, *q = NULL;
  int a = cudaMalloc(&p, MiB);
  int ms = cudaMemsetAsync(p, 7, MiB, 0);
  int sy = cudaStreamSynchronize(0);
  int cp = cudaMemcpy(host, p, sizeof host, cudaMemcpyDeviceToHost);
  int f = cudaFree(p);
  int a2 = cudaMalloc(&q, MiB);
  int f2 = cudaFree(q);
  printf("ptds: alloc=%d memset=%d sync=%d copy=%d value=%d free=%d alloc2=%d free2=%d last=%d\n", a, ms, sy,
         cp, host[15], f, a2, f2, (int)cudaGetLastError());
  printf("info: sync_ptsz=%ld memcpy_ptds=%ld\n", fake_calls("cudaStreamSynchronize_ptsz"),
         fake_calls("cudaMemcpy_ptds"));
  print_pool(0);
  return 0;
}
