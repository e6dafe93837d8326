/* core_bench.c: the pool's own cost on the simulated device, no CUDA.
 * Prints one line per case, "CASE: N ns/pair", N the median over batches of
 * the nanoseconds per cp_alloc + cp_free pair (cache_hit_tcache: through the
 * thread cache, the shim's path; unkeyed_tcache: the shim's path
 * without a key; unkeyed_15_idle_caches: the same, which flushes every
 * cache first, while 15 other threads' caches sit idle), then the threads
 * cases,
 * "threads_W n=T: X Mpairs/s (Y x one thread)": T threads each repeating a
 * keyed pair of its own, through the thread caches (W = tcache) or the pool
 * lock alone (W = pool); W = barrier: each pair unkeyed (a program that
 * created streams) of a block that fills its segment, so it is reusable
 * only after a barrier (one a pair for one thread), and each
 * barrier spends BARRIER_NS on the host as the driver's calls would (about
 * what one costs on the H200 with a few streams); a barrier covers every
 * thread's frees before it, so the line also says how many a pair took;
 * W = unkeyed: alloc_bench's threads case (each thread replaces one of 8
 * live blocks of 512 B - 1 MiB, unkeyed, through the thread caches, with
 * the same slow barriers) on one pool, and W = unkeyed_arenas the same
 * with up to 8 arenas (core/arena.c).
 * Then, for N = 10^3 ... 10^6 blocks of 512 + (i % 7) * 64 bytes live:
 * "free_among_N_live: X ns/free", X the median ns of a cp_free of one of
 * 100 of them spread evenly over the N, its memory warmed first (the
 * pool's own work beside N live blocks, not the memory's latency; see
 * free_sampled), then "free_cost_spread: R x", the dearest N's X over
 * the cheapest: under 2 when the block table's cost does not grow with the
 * blocks live (a hash that left addresses 512 bytes apart in 128 buckets
 * made it O(N): 10^6 frees took 191 s); and "free_all_N_live: Y ns/free",
 * the N blocks freed in allocation order (the probe), which past
 * 10^4 blocks also pays the memory's latency: what N frees touch no longer
 * fits in the caches.
 * Run by `make bench`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "pool.h"
#include "testing/sim_backend.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define BATCHES 41
#define PAIRS 2000

static cp_sim_t sim;
static cp_backend_t be;
static cp_pool_t *pool;
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

static void open_pool(void) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cp_sim_init(&sim, (size_t)1 << 44);
  be = cp_sim_backend(&sim);
  if (cp_pool_create(&pool, 0, &cfg, &be) != 0) abort();
}

static void close_pool(void) {
  cp_pool_destroy(pool);
  cp_sim_fini(&sim);
}

static uintptr_t must_alloc(size_t size, uint64_t key) {
  uintptr_t p;
  if (cp_alloc(pool, size, 0, key, &p) != 0) abort();
  return p;
}

typedef void (*pair_fn)(int i);

static const char *only; /* argv[1]: run just this case */

/* The median ns per pair over BATCHES batches of PAIRS, after a warm-up. */
static double measure(pair_fn pair) {
  double per_pair[BATCHES];
  for (int i = 0; i < PAIRS; i++) pair(i); /* warm up */
  for (int b = 0; b < BATCHES; b++) {
    double t0 = now_ns();
    for (int i = 0; i < PAIRS; i++) pair(i);
    per_pair[b] = (now_ns() - t0) / PAIRS;
  }
  return bench_median(per_pair, BATCHES);
}

static void report(const char *name, pair_fn pair) {
  if (only && strcmp(only, name) != 0) return;
  printf("%s: %.1f ns/pair\n", name, measure(pair));
  fflush(stdout);
}

/* Same size, same thread key: the shim's common case. */
static void hit_same_key(int i) {
  (void)i;
  cp_free(pool, must_alloc(4096, 1), 1, 0);
}

/* The same through the thread cache: no pool lock (the shim's path). */
static void hit_tcache(int i) {
  (void)i;
  uintptr_t p;
  if (cp_tcache_alloc(pool, 4096, 0, 1, &p) != 0) abort();
  cp_tcache_free(pool, p, 1, 0);
}

/* Same size, no key: every reuse needs a barrier (the simulated one is free). */
static void hit_barrier(int i) {
  (void)i;
  cp_free(pool, must_alloc(4096, 0), 0, 0);
}

/* The shim's path without a key (a program that created streams): every
 * allocation is a slow one, which first flushes every thread's cache; the
 * free of a block lent to the thread is handed over without the pool lock.
 * Alone (unkeyed_tcache) and beside 15 idle caches. */
static void slow_tcache(int i) {
  (void)i;
  uintptr_t p;
  if (cp_tcache_alloc(pool, 4096, 0, 0, &p) != 0) abort();
  cp_tcache_free(pool, p, 0, 0);
}

#define IDLE_THREADS 15

static pthread_barrier_t idle_made, idle_done;

/* Makes this thread's cache (one keyed pair), then stays alive, idle. */
static void *idle_cache(void *key) {
  uintptr_t p;
  if (cp_tcache_alloc(pool, 4096, 0, (uint64_t)(uintptr_t)key, &p) != 0) abort();
  cp_tcache_free(pool, p, (uint64_t)(uintptr_t)key, 0);
  pthread_barrier_wait(&idle_made);
  pthread_barrier_wait(&idle_done);
  return NULL;
}

static size_t mixed_size(void) {
  uint64_t r = rnd() % 100;
  if (r < 70) return 512 + rnd() % (256 * KiB);
  if (r < 95) return 256 * KiB + rnd() % (768 * KiB);
  return 1 * MiB + rnd() % (16 * MiB);
}

#define MIXED_LIVE 10000
static uintptr_t mixed_live[MIXED_LIVE];

/* Replace a random one of 10,000 live blocks of mixed sizes. */
static void mixed_10k(int i) {
  (void)i;
  size_t slot = rnd() % MIXED_LIVE;
  cp_free(pool, mixed_live[slot], 1, 0);
  mixed_live[slot] = must_alloc(mixed_size(), 1);
}

#define SIZES 64
static size_t lookup_sizes[SIZES];

/* Take a free block of a size that exists and give it back, with n free
 * blocks of mixed sizes around (kept apart by live blocks). */
static void lookup(int i) {
  size_t size = lookup_sizes[(size_t)i % SIZES];
  cp_free(pool, must_alloc(size, 0), 0, CP_FREE_DEVICE_IDLE);
}

static void fill_free_blocks(int n) {
  for (int s = 0; s < SIZES; s++) lookup_sizes[s] = 512 * (1 + rnd() % 200);
  uintptr_t *holes = malloc(sizeof *holes * (size_t)n);
  for (int k = 0; k < n; k++) {
    holes[k] = must_alloc(lookup_sizes[rnd() % SIZES] + 512 * (rnd() % 3), 0);
    must_alloc(512, 0); /* separator, never freed */
  }
  for (int k = 0; k < n; k++) cp_free(pool, holes[k], 0, CP_FREE_DEVICE_IDLE);
  free(holes);
}

#define THREAD_PAIRS 400000
#define BARRIER_PAIRS 20000
#define BARRIER_NS 1000.0

typedef enum { VIA_POOL, VIA_TCACHE, VIA_BARRIER, VIA_UNKEYED, VIA_UNKEYED_ARENAS } via_t;

typedef struct thread_arg {
  via_t via;
  uint64_t key;
  pthread_barrier_t *start;
} thread_arg_t;

static int (*sim_barrier)(void *ctx, int device);

static int slow_barrier(void *ctx, int device) {
  double until = now_ns() + BARRIER_NS;
  while (now_ns() < until) {
  }
  return sim_barrier(ctx, device);
}

static int pairs_of(via_t via) {
  return via == VIA_BARRIER ? BARRIER_PAIRS : via >= VIA_UNKEYED ? THREAD_PAIRS / 4 : THREAD_PAIRS;
}

static uintptr_t tcache_alloc(size_t size) {
  uintptr_t x;
  if (cp_tcache_alloc(pool, size, 0, 0, &x) != 0) abort();
  return x;
}

/* alloc_bench's threads case: replace one of 8 live blocks, unkeyed. */
static void unkeyed_churn(uint64_t seed) {
  uintptr_t live[8];
  uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
#define NEXT (r ^= r << 13, r ^= r >> 7, r ^= r << 17, r)
  for (int i = 0; i < 8; i++) live[i] = tcache_alloc(512 + NEXT % (1u << 20));
  for (int i = 0; i < pairs_of(VIA_UNKEYED); i++) {
    int k = (int)(NEXT % 8);
    cp_tcache_free(pool, live[k], 0, 0);
    live[k] = tcache_alloc(512 + NEXT % (1u << 20));
  }
  for (int i = 0; i < 8; i++) cp_tcache_free(pool, live[i], 0, 0);
#undef NEXT
}

static void *thread_pairs(void *p) {
  thread_arg_t *a = p;
  pthread_barrier_wait(a->start);
  for (int i = 0; i < pairs_of(a->via); i++) {
    uintptr_t x;
    if (a->via >= VIA_UNKEYED) {
      unkeyed_churn(a->key);
      break;
    } else if (a->via == VIA_BARRIER) {
      cp_free(pool, must_alloc(20 * MiB, 0), 0, 0); /* a block that fills its segment */
    } else if (a->via == VIA_TCACHE) {
      if (cp_tcache_alloc(pool, 4096, 0, a->key, &x) != 0) abort();
      cp_tcache_free(pool, x, a->key, 0);
    } else {
      cp_free(pool, must_alloc(4096, a->key), a->key, 0);
    }
  }
  return NULL;
}

/* Pairs per second over all threads, the best of three runs. */
static double threads_rate(via_t via, int n) {
  double best = 0;
  for (int run = 0; run < 3; run++) {
    pthread_t t[16];
    thread_arg_t args[16];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
      args[i] = (thread_arg_t){via, (uint64_t)i + 1, &start};
      pthread_create(&t[i], NULL, thread_pairs, &args[i]);
    }
    pthread_barrier_wait(&start);
    double t0 = now_ns();
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    double rate = (double)n * pairs_of(via) / ((now_ns() - t0) / 1e9);
    pthread_barrier_destroy(&start);
    if (rate > best) best = rate;
  }
  return best;
}

static void report_threads(via_t via) {
  static const char *const names[] = {"threads_pool", "threads_tcache", "threads_barrier", "threads_unkeyed",
                                      "threads_unkeyed_arenas"};
  if (only && strncmp(only, "threads", 7) != 0) return;
  double one = 0;
  for (int n = 1; n <= 4; n *= 2) {
    cudapool_stats_t before = {.size = sizeof before, .version = CUDAPOOL_STATS_VERSION}, after = before;
    cp_get_stats(pool, &before);
    double rate = threads_rate(via, n);
    cp_get_stats(pool, &after);
    if (n == 1) one = rate;
    printf("%s n=%d: %.2f Mpairs/s (%.2f x one thread)", names[via], n, rate / 1e6, rate / one);
    if (via >= VIA_BARRIER)
      printf(", %.2f barriers a pair, %lld segments at most",
             (double)(after.num_barriers - before.num_barriers) /
                 (double)(after.num_alloc - before.num_alloc),
             (long long)after.segments.peak);
    printf("\n");
    fflush(stdout);
  }
}

static size_t live_size(size_t i) { return 512 + (i % 7) * 64; }

/* The pool with n blocks live, in live[0..n). */
static void open_pool_with_live(uintptr_t *live, size_t n) {
  open_pool();
  for (size_t i = 0; i < n; i++) live[i] = must_alloc(live_size(i), 1);
}

#define SAMPLE 100

/* With the n blocks of live[] live: rounds of SAMPLE frees of blocks spread
 * evenly over them, each round other blocks (never freed before, so each
 * sits where its allocation put it in the block table), each first looked
 * up untimed (cp_block_size) so that its memory is in the CPU caches: the
 * median ns per free over the rounds is the pool's own work. */
static double free_sampled(const uintptr_t *live, size_t n) {
  enum { ROUNDS_MAX = 41 };
  size_t stride = n / SAMPLE, rounds = stride < ROUNDS_MAX ? stride : ROUNDS_MAX;
  double per_free[ROUNDS_MAX];
  size_t warm = 0;
  for (size_t r = 0; r < rounds; r++) {
    for (size_t j = 0; j < SAMPLE; j++) warm += cp_block_size(pool, live[j * stride + r]);
    double t0 = now_ns();
    for (size_t j = 0; j < SAMPLE; j++) cp_free(pool, live[j * stride + r], 1, 0);
    per_free[r] = (now_ns() - t0) / SAMPLE;
  }
  if (warm == 0) abort();
  return bench_median(per_free, rounds);
}

/* n blocks allocated, then freed in allocation order, each round on a
 * fresh pool: the median ns per free over the rounds (a million frees in
 * all, at most 41 rounds). Leaves no pool open. */
static double free_all(uintptr_t *live, size_t n) {
  enum { ROUNDS_MAX = 41 };
  size_t rounds = n >= 1000000 ? 1 : 1000000 / n;
  if (rounds > ROUNDS_MAX) rounds = ROUNDS_MAX;
  double per_free[ROUNDS_MAX];
  for (size_t r = 0; r < rounds; r++) {
    open_pool_with_live(live, n);
    double t0 = now_ns();
    for (size_t i = 0; i < n; i++) cp_free(pool, live[i], 1, 0);
    per_free[r] = (now_ns() - t0) / (double)n;
    close_pool();
  }
  return bench_median(per_free, rounds);
}

static void report_free_with_live(void) {
  if (only && strncmp(only, "free_", 5) != 0) return;
  enum { COUNTS = 4 };
  double among[COUNTS], all[COUNTS], least = 0, most = 0;
  uintptr_t *live = malloc(1000000 * sizeof *live);
  if (!live) abort();
  size_t n = 1000;
  for (int k = 0; k < COUNTS; k++, n *= 10) {
    open_pool_with_live(live, n);
    among[k] = free_sampled(live, n);
    printf("free_among_%zu_live: %.1f ns/free\n", n, among[k]);
    fflush(stdout);
    if (least == 0 || among[k] < least) least = among[k];
    if (among[k] > most) most = among[k];
    close_pool();
    all[k] = free_all(live, n);
  }
  free(live);
  printf("free_cost_spread: %.2f x (flat: under 2)\n", most / least);
  n = 1000;
  for (int k = 0; k < COUNTS; k++, n *= 10) printf("free_all_%zu_live: %.1f ns/free\n", n, all[k]);
  fflush(stdout);
}

int main(int argc, char **argv) {
  only = argc > 1 ? argv[1] : NULL;
  open_pool();
  report("cache_hit", hit_same_key);
  report("cache_hit_tcache", hit_tcache);
  report("cache_hit_barrier", hit_barrier);
  report("unkeyed_tcache", slow_tcache);
  close_pool();

  open_pool();
  pthread_t idle[IDLE_THREADS];
  pthread_barrier_init(&idle_made, NULL, IDLE_THREADS + 1);
  pthread_barrier_init(&idle_done, NULL, IDLE_THREADS + 1);
  for (int i = 0; i < IDLE_THREADS; i++)
    pthread_create(&idle[i], NULL, idle_cache, (void *)(uintptr_t)(i + 2));
  pthread_barrier_wait(&idle_made);
  report("unkeyed_15_idle_caches", slow_tcache);
  pthread_barrier_wait(&idle_done);
  for (int i = 0; i < IDLE_THREADS; i++) pthread_join(idle[i], NULL);
  pthread_barrier_destroy(&idle_made);
  pthread_barrier_destroy(&idle_done);
  close_pool();

  open_pool();
  for (int i = 0; i < MIXED_LIVE; i++) mixed_live[i] = must_alloc(mixed_size(), 1);
  report("mixed_10000_live", mixed_10k);
  close_pool();

  open_pool();
  fill_free_blocks(100);
  report("lookup_100_free", lookup);
  close_pool();

  open_pool();
  fill_free_blocks(100000);
  report("lookup_100000_free", lookup);
  close_pool();

  open_pool();
  report_threads(VIA_POOL);
  report_threads(VIA_TCACHE);
  close_pool();

  report_free_with_live();

  cp_sim_init(&sim, (size_t)1 << 44);
  be = cp_sim_backend(&sim);
  sim_barrier = be.barrier;
  be.barrier = slow_barrier;
  cp_config_t cfg;
  cp_config_default(&cfg);
  if (cp_pool_create(&pool, 0, &cfg, &be) != 0) abort();
  report_threads(VIA_BARRIER);
  close_pool();

  for (via_t via = VIA_UNKEYED; via <= VIA_UNKEYED_ARENAS; via++) {
    cp_sim_init(&sim, (size_t)1 << 44);
    be = cp_sim_backend(&sim);
    be.barrier = slow_barrier;
    cp_config_default(&cfg);
    if (via == VIA_UNKEYED_ARENAS) cfg.arenas = 8;
    if (cp_pool_create(&pool, 0, &cfg, &be) != 0) abort();
    report_threads(via);
    close_pool();
  }
  return 0;
}
