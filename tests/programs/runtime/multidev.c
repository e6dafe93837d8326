/* multidev.c: one pool per device (run with FAKECUDA_DEVICES=2). A block is
 * freed into the pool of the device it came from, whatever the current
 * device, and an allocation is served from the current device's memory. */
#include "progs.h"

static int dev_of(const void *p) {
  struct cudaPointerAttributes a;
  return cudaPointerGetAttributes(&a, p) == cudaSuccess ? a.device : -99;
}

int main(void) {
  int count = 0, errors = 0;
  cudaGetDeviceCount(&count);
  void *p0 = NULL, *p1 = NULL, *q0 = NULL, *q1 = NULL;
  errors += cudaSetDevice(0) != cudaSuccess;
  errors += cudaMalloc(&p0, MiB) != cudaSuccess;
  errors += cudaSetDevice(1) != cudaSuccess;
  errors += cudaMalloc(&p1, MiB) != cudaSuccess;
  int d0 = dev_of(p0), d1 = dev_of(p1);
  errors += cudaSetDevice(0) != cudaSuccess;
  int cross = cudaFree(p1);
  errors += cudaMalloc(&q0, MiB) != cudaSuccess;
  errors += cudaSetDevice(1) != cudaSuccess;
  errors += cudaMalloc(&q1, MiB) != cudaSuccess;
  int e0 = dev_of(q0), e1 = dev_of(q1);
  errors += cudaFree(p0) != cudaSuccess;
  errors += cudaFree(q0) != cudaSuccess;
  errors += cudaFree(q1) != cudaSuccess;
  int cur = -1;
  cudaGetDevice(&cur);
  printf("multidev: count=%d errors=%d p0=%d p1=%d free_cross=%d q0=%d q1=%d cur=%d last=%d\n", count, errors,
         d0, d1, cross, e0, e1, cur, (int)cudaGetLastError());
  print_pool(0);
  print_pool(1);
  return 0;
}
