/* reset_threads.c: cudaDeviceReset while eight threads allocate and free.
 *
 * Each thread loops cudaMalloc/cudaFree. Once every thread has done WARMUP
 * pairs (they count up, the main thread waits for the count), the main
 * thread resets the device while they keep going; each thread then does
 * AFTER more pairs once it has seen the reset done, and stops. Calls that
 * straddle the reset may fail (a pointer allocated before it and freed
 * after it is invalid, natively too), so only what is deterministic is
 * printed: that the process survived, the reset's result, and a pair after
 * the threads are done (even a pair begun after the reset may fail: a
 * stale free of a pointer from before it can hit an address reused since,
 * natively too). A pool freed under the threads' feet crashes, or is a
 * heap use-after-free under ASan. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "progs.h"

#define THREADS 8
#define WARMUP 200
#define AFTER 200

static atomic_int warmed; /* threads past WARMUP pairs */
static atomic_bool reset_done;

struct worker {
  pthread_t t;
  int index;
};

static void *work(void *arg) {
  struct worker *w = arg;
  int done = 0, after = 0;
  size_t size = (size_t)(w->index % 3 + 1) * 256 * 1024;
  while (after < AFTER) {
    bool seen = atomic_load(&reset_done);
    void *p = NULL;
    int rc = cudaMalloc(&p, size);
    int rf = rc == cudaSuccess ? cudaFree(p) : cudaSuccess;
    if (rc != cudaSuccess || rf != cudaSuccess) cudaGetLastError();
    if (++done == WARMUP) atomic_fetch_add(&warmed, 1);
    if (seen) after++;
  }
  return NULL;
}

int main(void) {
  static struct worker w[THREADS];
  void *warm = NULL;
  int setup = cudaMalloc(&warm, MiB); /* the pool exists before the threads start */
  setup |= cudaFree(warm);
  for (int i = 0; i < THREADS; i++) {
    w[i].index = i;
    pthread_create(&w[i].t, NULL, work, &w[i]);
  }
  while (atomic_load(&warmed) < THREADS) sched_yield();
  int rc = cudaDeviceReset();
  atomic_store(&reset_done, true);
  for (int i = 0; i < THREADS; i++) pthread_join(w[i].t, NULL);
  void *p = NULL;
  int m = cudaMalloc(&p, MiB);
  int f = cudaFree(p);
  printf("reset_threads: survived=1 setup=%d reset=%d malloc=%d free=%d\n", setup, rc, m, f);
  print_pool(0);
  return 0;
}
