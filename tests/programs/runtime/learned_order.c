/* learned_order.c: the learned stream order (shim/state/order.h) on the
 * fake runtime with device work held in flight. Each case writes a block on
 * the stream all work went to so far, frees it, allocates the same size at
 * once (under cudapool the order hands the block straight back: reused=1)
 * and writes the new block on another stream, or from another thread. The
 * fake counts a write not ordered after the first as a race: 0 natively,
 * and 0 under cudapool only because the other stream is made to wait first
 * (CUDAPOOL_TEST_SKIP_ORDER_WAITS=1 drops that wait: the races appear).
 *
 *   learned_order CASE     prints "CASE: errors=N races=N" and a pool line
 *
 * Cases: legacy_to_nonblocking, legacy_to_stream_made_after, legacy_other_thread,
 * nonblocking_to_legacy, nonblocking_to_blocking, nonblocking_to_nonblocking,
 * mixed_then_recovered, memcpy_sync_to_nonblocking, per_thread_to_nonblocking,
 * per_thread_other_thread (the legacy stream the home, a block written on
 * another thread's per-thread stream and freed there, then written on this
 * thread's: the legacy stream's busy query covers the first per-thread
 * stream, which is no order for the second, so no recovery may pick the
 * legacy stream then; found on the H100 by tests/gpu/ptds_race.cu).
 * Natively the free waits for the device, so nothing races either. */
#include <pthread.h>

#include "progs.h"

#define N (12 * MiB) /* over 10 MiB: a segment of its own, which it fills */

static int errors;
static void *first, *second;
static cudaStream_t other;

static void reuse(cudaStream_t home) {
  errors += cudaMemsetAsync(first, 1, N, home) != cudaSuccess;
  errors += cudaFree(first) != cudaSuccess;
  errors += cudaMalloc(&second, N) != cudaSuccess;
}

static void *write_other(void *arg) {
  (void)arg;
  errors += cudaMemsetAsync(second, 2, N, other) != cudaSuccess;
  return NULL;
}

/* The other thread stays alive until the end: its per-thread stream (and
 * the work on it) lives as long as the thread. */
static pthread_barrier_t freed, written;
static void *pt_write_and_free(void *arg) {
  (void)arg;
  errors += cudaMemsetAsync(first, 1, N, cudaStreamPerThread) != cudaSuccess;
  errors += cudaFree(first) != cudaSuccess;
  pthread_barrier_wait(&freed);
  pthread_barrier_wait(&written);
  return NULL;
}

static long races_now(void) {
  long r = fake_races();
  fake_hold(0);
  cudaDeviceSynchronize();
  return r;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  if (fake_calls("cudaMalloc") < 0) {
    printf("%s: nofake\n", c);
    return 0;
  }
  cudaStream_t nb = NULL, blk = NULL;
  errors += cudaMalloc(&first, N) != cudaSuccess;
  cudaDeviceSynchronize();
  long races = -1;
  if (strcmp(c, "legacy_to_nonblocking") == 0 || strcmp(c, "legacy_other_thread") == 0 ||
      strcmp(c, "memcpy_sync_to_nonblocking") == 0) {
    errors += cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess;
    fake_hold(1);
    if (c[0] == 'm') {
      /* A synchronous copy is work on the legacy stream too. */
      static char host[N];
      errors += cudaMemcpy(first, host, N, cudaMemcpyHostToDevice) != cudaSuccess;
      errors += cudaFree(first) != cudaSuccess;
      errors += cudaMalloc(&second, N) != cudaSuccess;
    } else {
      reuse(0);
    }
    if (strcmp(c, "legacy_other_thread") == 0) {
      pthread_t t;
      pthread_create(&t, NULL, write_other, NULL);
      pthread_join(t, NULL);
    } else {
      write_other(NULL);
    }
    races = races_now();
  } else if (strcmp(c, "legacy_to_stream_made_after") == 0) {
    fake_hold(1);
    reuse(0);
    errors += cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess;
    write_other(NULL);
    races = races_now();
  } else if (strncmp(c, "nonblocking_to_", 15) == 0) {
    errors += cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking) != cudaSuccess;
    if (strcmp(c + 15, "blocking") == 0) errors += cudaStreamCreate(&other) != cudaSuccess;
    if (strcmp(c + 15, "nonblocking") == 0)
      errors += cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess;
    /* other stays NULL for the legacy stream. */
    fake_hold(1);
    reuse(nb);
    write_other(NULL);
    races = races_now();
  } else if (strcmp(c, "mixed_then_recovered") == 0) {
    /* Work on two streams: no reuse at once. Once both are idle, the pool's
     * next barrier finds every stream but one idle and reuses at once
     * again. */
    errors += cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking) != cudaSuccess;
    errors += cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess;
    errors += cudaMemsetAsync(first, 1, N, nb) != cudaSuccess;
    errors += cudaMemsetAsync(first, 1, N, other) != cudaSuccess;
    cudaDeviceSynchronize();
    fake_hold(1);
    reuse(0);
    write_other(NULL);
    races = races_now();
  } else if (strcmp(c, "per_thread_other_thread") == 0) {
    void *home_work = NULL;
    errors += cudaMalloc(&home_work, 4096) != cudaSuccess;
    errors += cudaMemsetAsync(home_work, 0, 4096, 0) != cudaSuccess; /* the legacy stream: home */
    cudaDeviceSynchronize();
    fake_hold(1);
    pthread_barrier_init(&freed, NULL, 2);
    pthread_barrier_init(&written, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, pt_write_and_free, NULL);
    pthread_barrier_wait(&freed);
    errors += cudaMalloc(&second, N) != cudaSuccess;
    errors += cudaMemsetAsync(second, 2, N, cudaStreamPerThread) != cudaSuccess;
    races = fake_races();
    pthread_barrier_wait(&written);
    pthread_join(t, NULL);
    fake_hold(0);
    cudaDeviceSynchronize();
    cudaFree(home_work);
  } else if (strcmp(c, "per_thread_to_nonblocking") == 0) {
    errors += cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess;
    fake_hold(1);
    reuse(cudaStreamPerThread);
    write_other(NULL);
    races = races_now();
  } else {
    printf("%s: unknown case\n", c);
    return 2;
  }
  printf("%s: errors=%d races=%ld\n", c, errors, races);
  cudapool_stats_t s;
  if (pool_stats(0, &s) == 0)
    printf("pool: reused=%d immediate=%llu barriers=%llu order_waits=%llu recoveries=%llu\n", second == first,
           (unsigned long long)s.num_immediate_reuse, (unsigned long long)s.num_barriers,
           (unsigned long long)s.num_order_waits, (unsigned long long)s.num_order_recoveries);
  cudaFree(second);
  if (nb) cudaStreamDestroy(nb);
  if (blk) cudaStreamDestroy(blk);
  if (other) cudaStreamDestroy(other);
  return 0;
}
