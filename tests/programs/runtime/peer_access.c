/* peer_access.c: blocks of device 0 written by device 1 through peer access
 * (cudaDeviceEnablePeerAccess), freed with cudaFree on device 0 and allocated
 * again there, with device work held in flight (fakecuda_hold_events(1));
 * run with FAKECUDA_DEVICES=2.
 *
 *   peer_access same_thread|barrier|device_sync|legacy_sync legacy|nonblocking
 *
 * Device 1 enables access to device 0. Two 1 MiB blocks of device 0 (they
 * fill a small-block segment of a pool, so the next allocation can only be
 * served from them) are written by memsets on device 1's legacy stream or on
 * a non-blocking stream of device 1 (the second argument), and freed on
 * device 0; device 0 then allocates 1 MiB and writes it:
 *   same_thread: on its legacy stream, no stream created on device 0 (the
 *     freeing thread's own reuse, by its key, unless the peer turned keys off);
 *   barrier: on a non-blocking stream of device 0 (keys off: a barrier);
 *   device_sync, legacy_sync: as same_thread, after cudaDeviceSynchronize()
 *     or cudaStreamSynchronize(0) on device 0 (neither waits for device 1).
 * The fake's cudaFree waits for the freeing device's work only (what a real
 * cudaFree does is tests/gpu/peer_race.cu's question): natively races=1.
 * Under cudapool the peer's work must be ordered before the reuse: races=0.
 * Prints "peer_<case>_<reader>: errors=N enable=RC races=N last=RC". */
#include <stdbool.h>
#include <string.h>

#include "progs.h"

int main(int argc, char **argv) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("peer_access: nofake\n");
    return 0;
  }
  const char *what = argc > 2 ? argv[1] : "", *reader = argc > 2 ? argv[2] : "";
  bool barrier = !strcmp(what, "barrier"), device_sync = !strcmp(what, "device_sync"),
       legacy_sync = !strcmp(what, "legacy_sync"), nonblocking_reader = !strcmp(reader, "nonblocking");
  if ((!barrier && !device_sync && !legacy_sync && strcmp(what, "same_thread")) ||
      (!nonblocking_reader && strcmp(reader, "legacy"))) {
    fprintf(stderr, "usage: peer_access same_thread|barrier|device_sync|legacy_sync legacy|nonblocking\n");
    return 2;
  }
  int errors = cudaSetDevice(1) != cudaSuccess;
  int enable = cudaDeviceEnablePeerAccess(0, 0);
  cudaStream_t r = 0, w = 0;
  if (nonblocking_reader) errors += cudaStreamCreateWithFlags(&r, cudaStreamNonBlocking) != cudaSuccess;
  errors += cudaSetDevice(0) != cudaSuccess;
  if (barrier) errors += cudaStreamCreateWithFlags(&w, cudaStreamNonBlocking) != cudaSuccess;
  long r0 = fake_races();
  void *p = NULL, *p2 = NULL, *q = NULL;
  fake_hold(1);
  errors += cudaMalloc(&p, MiB) != cudaSuccess;
  errors += cudaMalloc(&p2, MiB) != cudaSuccess;
  errors += cudaSetDevice(1) != cudaSuccess;
  errors += cudaMemsetAsync(p, 1, MiB, r) != cudaSuccess;
  errors += cudaMemsetAsync(p2, 1, MiB, r) != cudaSuccess;
  errors += cudaSetDevice(0) != cudaSuccess;
  errors += cudaFree(p) != cudaSuccess;
  errors += cudaFree(p2) != cudaSuccess;
  if (device_sync) errors += cudaDeviceSynchronize() != cudaSuccess;
  if (legacy_sync) errors += cudaStreamSynchronize(0) != cudaSuccess;
  errors += cudaMalloc(&q, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(q, 2, MiB, w) != cudaSuccess;
  errors += cudaFree(q) != cudaSuccess;
  fake_hold(0);
  printf("peer_%s_%s: errors=%d enable=%d races=%ld last=%d\n", what, reader, errors, enable, fake_races() - r0,
         (int)cudaGetLastError());
  printf("info: peer_%s_%s reused=%d\n", what, reader, q == p || q == p2);
  if (w) cudaStreamDestroy(w);
  if (r) {
    cudaSetDevice(1);
    cudaStreamDestroy(r);
    cudaSetDevice(0);
  }
  print_pool(0);
  return 0;
}
