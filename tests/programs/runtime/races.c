/* races.c: checks the fake's race detector itself, with one allocation and
 * no frees, so the lines are the same with or without a pool: unordered
 * writes on two non-blocking streams race; an event wait, the legacy stream
 * with a blocking stream, and a stream synchronisation order them; the
 * legacy stream does not cover a non-blocking stream. */
#include "progs.h"

/* Races since the previous step; the synchronisation completes the step's
 * work so that steps do not see each other. */
static long step(void) {
  static long last;
  cudaDeviceSynchronize();
  long now = fake_races(), d = now - last;
  last = now;
  return d;
}

int main(void) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("races: nofake\n");
    return 0;
  }
  void *p = NULL;
  cudaStream_t a, b, blk;
  cudaEvent_t e;
  int errors = cudaMalloc(&p, MiB) != cudaSuccess;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaStreamCreate(&blk);
  cudaEventCreate(&e);
  step();
  fake_hold(1);
  cudaMemsetAsync(p, 1, MiB, a);
  cudaMemsetAsync(p, 2, MiB, b);
  long unordered = step();
  cudaMemsetAsync(p, 1, MiB, a);
  cudaEventRecord(e, a);
  cudaStreamWaitEvent(b, e, 0);
  cudaMemsetAsync(p, 2, MiB, b);
  long waited = step();
  cudaMemsetAsync(p, 1, MiB, blk);
  cudaMemsetAsync(p, 2, MiB, 0);
  long legacy_blocking = step();
  cudaMemsetAsync(p, 3, MiB, 0);
  cudaMemsetAsync(p, 4, MiB, blk);
  long blocking_after_legacy = step();
  cudaMemsetAsync(p, 1, MiB, a);
  cudaMemsetAsync(p, 2, MiB, 0);
  long legacy_nonblocking = step();
  cudaMemsetAsync(p, 1, MiB, a);
  cudaStreamSynchronize(a);
  cudaMemsetAsync(p, 2, MiB, b);
  long synced = step();
  cudaMemsetAsync((char *)p + MiB / 2, 1, MiB / 2, a);
  cudaMemsetAsync(p, 2, MiB / 2, b);
  long disjoint = step();
  fake_hold(0);
  errors += cudaFree(p) != cudaSuccess;
  printf("races: errors=%d unordered=%ld event_wait=%ld legacy_after_blocking=%ld "
         "blocking_after_legacy=%ld legacy_after_nonblocking=%ld stream_sync=%ld disjoint=%ld\n",
         errors, unordered, waited, legacy_blocking, blocking_after_legacy, legacy_nonblocking, synced,
         disjoint);
  cudaEventDestroy(e);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  cudaStreamDestroy(blk);
  return 0;
}
