/* replayable.c: a run whose trace cudapool-replay must reproduce number for
 * number (issue 10): every kind of decision event the shim records, with
 * threads. Phases, separated so that no decision event races an allocation
 * (the recorder orders allocations and frees by the pool lock, and the rest
 * by the time they were recorded):
 *   1. one thread, no stream: same-thread reuse (keys on);
 *   2. three non-blocking streams and a blocking one: keys off, barriers
 *      cost more; four threads allocate and free sizes from 1 KiB to 24 MiB,
 *      writing each block on their own stream, with legacy-stream and device
 *      synchronisations between rounds;
 *   3. a relaxed capture on a non-blocking stream while one thread churns;
 *   4. the streams destroyed: one thread again, keys on again.
 * With the argument "in-turn" the phase-2 threads run one after another:
 * the learned stream order (shim/state/order.h) then changes mode between
 * allocations of one thread at a time, in the trace's order too; with
 * threads at once its changes race other threads' allocations, which the
 * trace cannot order (so that run is replayed with it off).
 * Prints "replayable: errors=N". */
#include <pthread.h>
#include <stdbool.h>

#include "progs.h"

#define THREADS 4
#define ROUNDS 6
#define PER_ROUND 40

static cudaStream_t streams[THREADS];
static pthread_barrier_t round_start, round_end;
static bool in_turn;
static int errors[THREADS];

static size_t size_of(unsigned seed, unsigned i) {
  static const size_t sizes[] = {1024, 3000, 65536, 700000, 1 << 20, 3 << 20, 9 << 20, 24 << 20};
  return sizes[(seed * 7 + i * 13) % (sizeof sizes / sizeof sizes[0])];
}

static void churn(int t, unsigned seed, int count) {
  void *keep[8] = {0};
  for (int i = 0; i < count; i++) {
    void **slot = &keep[(unsigned)i % 8];
    if (*slot) errors[t] += cudaFree(*slot) != cudaSuccess;
    *slot = NULL;
    size_t n = size_of(seed, (unsigned)i);
    errors[t] += cudaMalloc(slot, n) != cudaSuccess;
    if (*slot) errors[t] += cudaMemsetAsync(*slot, t, n < 4096 ? n : 4096, streams[t]) != cudaSuccess;
  }
  for (int i = 0; i < 8; i++)
    if (keep[i]) errors[t] += cudaFree(keep[i]) != cudaSuccess;
}

static void *worker(void *arg) {
  int t = (int)(long)arg;
  for (int r = 0; r < ROUNDS; r++) {
    if (!in_turn) pthread_barrier_wait(&round_start);
    churn(t, (unsigned)(t * 31 + r), PER_ROUND);
    if (!in_turn) pthread_barrier_wait(&round_end);
  }
  return NULL;
}

int main(int argc, char **argv) {
  in_turn = argc > 1 && strcmp(argv[1], "in-turn") == 0;
  int main_errors = 0;
  churn(0, 1, 60); /* phase 1: streams[0] is 0, the legacy stream */
  main_errors += errors[0];
  errors[0] = 0;

  for (int t = 0; t < THREADS - 1; t++)
    main_errors += cudaStreamCreateWithFlags(&streams[t], cudaStreamNonBlocking) != cudaSuccess;
  main_errors += cudaStreamCreate(&streams[THREADS - 1]) != cudaSuccess;
  pthread_barrier_init(&round_start, NULL, THREADS + 1);
  pthread_barrier_init(&round_end, NULL, THREADS + 1);
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS && in_turn; t++) {
    pthread_create(&th[t], NULL, worker, (void *)t);
    pthread_join(th[t], NULL);
    main_errors += (t % 2 ? cudaDeviceSynchronize() : cudaStreamSynchronize(0)) != cudaSuccess;
  }
  for (long t = 0; t < THREADS && !in_turn; t++) pthread_create(&th[t], NULL, worker, (void *)t);
  for (int r = 0; r < ROUNDS && !in_turn; r++) {
    pthread_barrier_wait(&round_start);
    pthread_barrier_wait(&round_end);
    main_errors += (r % 2 ? cudaDeviceSynchronize() : cudaStreamSynchronize(0)) != cudaSuccess;
  }
  for (int t = 0; t < THREADS && !in_turn; t++) pthread_join(th[t], NULL);

  cudaGraph_t graph = NULL;
  main_errors += cudaStreamBeginCapture(streams[0], cudaStreamCaptureModeRelaxed) != cudaSuccess;
  churn(1, 5, 50);
  main_errors += cudaStreamEndCapture(streams[0], &graph) != cudaSuccess;
  if (graph) cudaGraphDestroy(graph);

  for (int t = 0; t < THREADS; t++) main_errors += cudaStreamDestroy(streams[t]) != cudaSuccess;
  for (int t = 0; t < THREADS; t++) streams[t] = 0;
  churn(2, 9, 60);
  for (int t = 0; t < THREADS; t++) main_errors += errors[t];
  printf("replayable: errors=%d\n", main_errors);
  return 0;
}
