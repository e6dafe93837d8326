/* idle_barrier.c: a block that fills its segment, cycled by cudaMalloc and
 * cudaFree while a non-blocking stream is live, so that every reuse needs a
 * barrier. With all device work complete the barrier is stream queries
 * alone; with work held in flight (fakecuda_hold_events) on the legacy
 * stream, the non-blocking one, a blocking one or the per-thread default
 * stream, the next owner's write on another stream must still come after
 * it: the fake counts a race otherwise. The "info" lines (what the pool and
 * the fake saw) differ natively. */
#include "progs.h"

#define SIZE (16 * MiB) /* a segment of its own in a pool */

/* Run-wide counts of what the barrier is made of. */
static long records(void) { return fake_calls("cudaEventRecord"); }
static long waits(void) { return fake_calls("cudaStreamWaitEvent"); }

static void all_idle(void) {
  void *p = NULL, *q = NULL;
  int errors = cudaMalloc(&p, SIZE) | cudaFree(p);
  long b0 = pool_barriers(), r0 = records(), w0 = waits(), same = 0;
  for (int i = 0; i < 10; i++) {
    errors += cudaMalloc(&q, SIZE) != cudaSuccess;
    same += q == p;
    errors += cudaFree(q) != cudaSuccess;
  }
  printf("idle_barrier_all_idle: errors=%d last=%d\n", errors, (int)cudaGetLastError());
  printf("info: idle_barrier_all_idle barriers=%ld records=%ld waits=%ld same=%ld\n", pool_barriers() - b0,
         records() - r0, waits() - w0, same);
}

/* The first owner writes on `first`, frees, and the next writes on `next`
 * while the first write is still held in flight. */
static void busy(const char *tag, cudaStream_t first, cudaStream_t next) {
  void *p = NULL, *q = NULL;
  long races0 = fake_races(), b0 = pool_barriers(), r0 = records();
  fake_hold(1);
  int errors = cudaMalloc(&p, SIZE) != cudaSuccess;
  errors += cudaMemsetAsync(p, 1, SIZE, first) != cudaSuccess;
  errors += cudaFree(p) != cudaSuccess;
  errors += cudaMalloc(&q, SIZE) != cudaSuccess;
  errors += cudaMemsetAsync(q, 2, SIZE, next) != cudaSuccess;
  errors += cudaFree(q) != cudaSuccess;
  fake_hold(0);
  cudaDeviceSynchronize();
  printf("idle_barrier_%s: errors=%d races=%ld last=%d\n", tag, errors, fake_races() - races0,
         (int)cudaGetLastError());
  printf("info: idle_barrier_%s barriers=%ld records=%ld same=%d\n", tag, pool_barriers() - b0,
         records() - r0, p == q);
}

int main(void) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("idle_barrier: nofake\n");
    return 0;
  }
  cudaStream_t nb, blk;
  cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
  cudaStreamCreate(&blk);
  all_idle();
  busy("legacy_busy", cudaStreamLegacy, nb);
  busy("nonblocking_busy", nb, cudaStreamLegacy);
  busy("blocking_busy", blk, nb);
  busy("per_thread_busy", cudaStreamPerThread, nb);
  cudaStreamDestroy(nb);
  cudaStreamDestroy(blk);
  print_pool(0);
  return 0;
}
