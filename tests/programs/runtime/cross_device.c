/* cross_device.c: stream-ordered frees on a stream of another device (run
 * with FAKECUDA_DEVICES=2), with device work held in flight
 * (fakecuda_hold_events(1)). Two blocks of device 0 (they fill a
 * small-block segment of a pool) are written by memsets on a non-blocking
 * stream of device 1 and freed there with cudaFreeAsync; device 0 then
 * allocates and writes on its legacy stream. Natively the memory goes back
 * only when device 1's stream reaches the free: races=0, and so under the
 * shim, whose device 0 barriers do not reach device 1's streams. */
#include "progs.h"

int main(void) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("cross_device: nofake\n");
    return 0;
  }
  int count = 0, errors = 0;
  cudaGetDeviceCount(&count);
  cudaStream_t s1;
  errors += cudaSetDevice(1) != cudaSuccess;
  errors += cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) != cudaSuccess;
  errors += cudaSetDevice(0) != cudaSuccess;
  long r0 = fake_races();
  void *a = NULL, *b = NULL, *q = NULL;
  fake_hold(1);
  errors += cudaMalloc(&a, MiB) != cudaSuccess;
  errors += cudaMalloc(&b, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(a, 1, MiB, s1) != cudaSuccess;
  errors += cudaMemsetAsync(b, 1, MiB, s1) != cudaSuccess;
  errors += cudaFreeAsync(a, s1) != cudaSuccess;
  errors += cudaFreeAsync(b, s1) != cudaSuccess;
  errors += cudaMalloc(&q, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(q, 2, MiB, 0) != cudaSuccess;
  errors += cudaFree(q) != cudaSuccess;
  fake_hold(0);
  printf("cross_device_free_async: count=%d errors=%d races=%ld last=%d\n", count, errors, fake_races() - r0,
         (int)cudaGetLastError());
  printf("info: cross_device_free_async reused=%d\n", q == a || q == b);
  cudaSetDevice(1);
  cudaStreamDestroy(s1);
  cudaSetDevice(0);
  print_pool(0);
  return 0;
}
