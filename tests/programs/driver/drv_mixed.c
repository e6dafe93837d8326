/* drv_mixed.c: both layers in one process. The program calls the runtime
 * (the thin runtime of tests/fakes/cuda, which reaches the driver through
 * cuGetProcAddress as libcudart does) and the driver directly. Under the
 * shim there must be one pool: the runtime layer serves cudaMalloc and the
 * pool's own cudaMalloc of a segment passes the driver layer untouched
 * (driver_allocs counts the fake's cuMemAlloc_v2 calls); a pointer from one
 * layer is freed at the other; cudaMemGetInfo is adjusted once; a stream
 * created through the runtime is known once (the fake's event calls count a
 * barrier's work exactly); cudaDeviceReset drops the pool.
 *
 * Usage: drv_mixed [PAIRS] */
#include "drvprogs.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

static void *alloc_free_other_thread(void *arg) {
  (void)arg;
  void *p = NULL;
  int a = cudaMalloc(&p, MiB);
  int f = cudaFree(p);
  return (void *)(intptr_t)(a | f);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  void *p = NULL;
  int errors = cudaMalloc(&p, 0) != cudaSuccess || cudaFree(NULL) != cudaSuccess;
  drv_load();
  long allocs0 = fake_calls("cuMemAlloc_v2");
  for (int i = 0; i < n; i++) {
    errors += cudaMalloc(&p, MiB) != cudaSuccess;
    errors += cudaFree(p) != cudaSuccess;
  }
  printf("runtime_pairs: n=%d errors=%d last=%d\n", n, errors, (int)cudaGetLastError());
  printf("info: driver_allocs=%ld\n", fake_calls("cuMemAlloc_v2") - allocs0);

  CUdeviceptr q = 0;
  int a = cudaMalloc(&p, MiB);
  int f = D.cuMemFree_v2((CUdeviceptr)(uintptr_t)p);
  int a2 = D.cuMemAlloc_v2(&q, MiB);
  int f2 = cudaFree((void *)(uintptr_t)q);
  int twice = cudaFree((void *)(uintptr_t)q);
  int last = (int)cudaGetLastError();
  int twice_drv = D.cuMemFree_v2(q);
  printf("cross: rt_alloc=%d drv_free=%d drv_alloc=%d rt_free=%d twice=%d last=%d twice_drv=%d\n", a, f, a2,
         f2, twice, last, twice_drv);

  size_t free0 = 0, total = 0, free1 = 0, total1 = 0;
  int m0 = cudaMemGetInfo(&free0, &total);
  a = cudaMalloc(&p, MiB);
  int m1 = cudaMemGetInfo(&free1, &total1);
  size_t dfree = 0, dtotal = 0;
  int m2 = D.cuMemGetInfo_v2(&dfree, &dtotal);
  printf("meminfo: rc=%d total=%zu free0=%zu alloc=%d rc1=%d used=%zu rc2=%d drv_used=%zu free=%d\n", m0,
         total, free0, a, m1, total1 - free1, m2, dtotal - dfree, cudaFree(p));

  /* One non-blocking stream: a pending block another thread wants needs
   * one barrier (two event records, two waits), whichever layer made it. */
  cudaStream_t s = NULL;
  long rec0 = fake_calls("cuEventRecord"), wait0 = fake_calls("cuStreamWaitEvent");
  int c = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  long rec1 = fake_calls("cuEventRecord"), wait1 = fake_calls("cuStreamWaitEvent");
  a = cudaMalloc(&p, MiB);
  f = cudaFree(p);
  pthread_t t;
  void *rc = NULL;
  pthread_create(&t, NULL, alloc_free_other_thread, NULL);
  pthread_join(t, &rc);
  long rec2 = fake_calls("cuEventRecord"), wait2 = fake_calls("cuStreamWaitEvent");
  printf("stream: create=%d alloc=%d free=%d other_thread=%d destroy=%d\n", c, a, f, (int)(intptr_t)rc,
         cudaStreamDestroy(s));
  printf("info: create_records=%ld create_waits=%ld reuse_records=%ld reuse_waits=%ld\n", rec1 - rec0,
         wait1 - wait0, rec2 - rec1, wait2 - wait1);
  print_pool(0);

  a = cudaMalloc(&p, MiB);
  int reset = cudaDeviceReset();
  int stale = cudaFree(p);
  last = (int)cudaGetLastError();
  int fresh = cudaMalloc(&p, MiB);
  printf("reset: alloc=%d reset=%d stale_free=%d last=%d alloc=%d free=%d\n", a, reset, stale, last, fresh,
         cudaFree(p));
  return 0;
}
