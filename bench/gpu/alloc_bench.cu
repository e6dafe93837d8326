/* alloc_bench.cu: cudaMalloc+cudaFree microbenchmarks (issue 5, items 1-2).
 *
 * Run natively it measures the driver's allocator; run with
 * LD_PRELOAD=libcudapool.so it measures cudapool (the program cannot tell
 * otherwise, and says which in every line). In the same run it also measures
 * cudaMallocFromPoolAsync/cudaFreeAsync on a memory pool of its own with an
 * unlimited release threshold (the shim does not touch those calls), so the
 * ratio against the stream-ordered allocator comes from one process.
 *
 * Pairs are timed on the host with clock_gettime(CLOCK_MONOTONIC) around a
 * batch of them (about 4 us each), after a warm-up; reported figures are
 * medians of the per-pair time over many batches (each case runs until it
 * has max_reps pairs or its time budget is spent).
 *
 * Output, one line per case (W is "native" or "pool", the allocator behind
 * cudaMalloc in this run):
 *   pair size=BYTES W_ns=MEDIAN async_ns=MEDIAN W_stream_ns=MEDIAN reps=N async_reps=N
 *   churn live=64 min=256 max=8388608 W_ns=MEDIAN async_ns=MEDIAN reps=N
 *   threads n=T W_pairs_per_s=X async_pairs_per_s=Y seconds=S
 *   threads_work n=T W_pairs_per_s=X async_pairs_per_s=Y seconds=S
 *   threads_legacy n=T W_pairs_per_s=X async_pairs_per_s=Y seconds=S
 *   default_async size=BYTES W_ns=MEDIAN async_ns=MEDIAN reps=N async_reps=N
 * default_async times cudaMallocAsync/cudaFreeAsync pairs on the device's
 * default pool (served by cudapool when it is loaded: W is then "pool"; by
 * CUDA's own default pool natively), async_ns the same pairs on the
 * program's own pool, which cudapool always leaves to CUDA.
 * W_ns is timed before the program has created any stream, W_stream_ns
 * while one non-blocking stream is live (see bench_pairs).
 * "threads" churns pairs only; "threads_work" also puts a cudaMemsetAsync on
 * the thread's stream between each cudaMalloc and cudaFree; "threads_legacy"
 * is "threads" in a program that creates no stream (every thread on the
 * legacy stream), timed before anything else.
 *
 * Usage: alloc_bench [--quick] [legacy|pairs|churn|threads|default ...] */
#include "gpu_common.cuh"

#include <atomic>
#include <thread>
#include <vector>

static double g_budget_s = 0.4; /* per case and allocator */
static int g_max_reps = 50000;
static double g_thread_seconds = 0.5;
static cudaMemPool_t g_async_pool;
static cudaStream_t g_stream; /* non-blocking, for the async allocator */

/* Times pair() max_reps times or for the budget, after warmup calls;
 * returns the median in ns per pair. Each sample times a batch of pairs,
 * enough for about 4 us: two clock reads around one pair added the clock's
 * own cost (20-40 ns on these hosts) to a pair of 60, and a batch holds a
 * pool's occasional barrier in its sample instead of leaving it to the
 * median's tail. */
template <class F>
static double time_pairs(F pair, int warmup, int *reps_out) {
  for (int i = 0; i < warmup; i++) pair();
  /* The batch is sized after the warm-up: its first pair may have made a
   * segment (tens of microseconds), which made batches of one pair, each
   * sample then carrying the clock's own cost. */
  const int probe = 16; /* bench_churn counts on it */
  uint64_t w0 = now_ns();
  for (int i = 0; i < probe; i++) pair();
  double guess = (double)(now_ns() - w0) / probe;
  int batch = guess > 0 ? (int)(4000.0 / guess) : 64;
  batch = batch < 1 ? 1 : batch > 64 ? 64 : batch;
  std::vector<double> v;
  v.reserve(g_max_reps);
  uint64_t start = now_ns(), budget = (uint64_t)(g_budget_s * 1e9);
  int done = 0;
  while (done < g_max_reps && (v.size() < 20 || now_ns() - start < budget)) {
    uint64_t t0 = now_ns();
    for (int i = 0; i < batch; i++) pair();
    uint64_t t1 = now_ns();
    v.push_back((double)(t1 - t0) / batch);
    done += batch;
  }
  *reps_out = done;
  return median(v.data(), v.size());
}

static const size_t pair_sizes[] = {512, 64u << 10, 1u << 20, 16u << 20, 256u << 20, 1u << 30};
#define NSIZES (sizeof pair_sizes / sizeof pair_sizes[0])

static double time_malloc_pairs(size_t size, int *reps) {
  return time_pairs(
      [&] {
        void *p = NULL;
        CHECK(cudaMalloc(&p, size));
        CHECK(cudaFree(p));
      },
      10, reps);
}

/* cudaMalloc pairs are timed first with no stream created (a legacy-stream
 * program: under cudapool the same thread reuses its block at once), then
 * again while one non-blocking stream is live (under cudapool every reuse
 * of the one hot block then needs a barrier), then cudaMallocAsync pairs on
 * that stream. Called before main creates any stream. */
static void create_async_pool(int dev) {
  cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev;
  CHECK(cudaMemPoolCreate(&g_async_pool, &props));
  uint64_t threshold = UINT64_MAX;
  CHECK(cudaMemPoolSetAttribute(g_async_pool, cudaMemPoolAttrReleaseThreshold, &threshold));
}

static void setup_async(void) { CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking)); }

static void bench_pairs(void) {
  double plain[NSIZES];
  int plain_reps[NSIZES];
  for (size_t i = 0; i < NSIZES; i++) plain[i] = time_malloc_pairs(pair_sizes[i], &plain_reps[i]);
  setup_async(); /* g_stream is the live non-blocking stream from here on */

  for (size_t i = 0; i < NSIZES; i++) {
    size_t size = pair_sizes[i];
    int reps = 0, async_reps = 0;
    double with_stream = time_malloc_pairs(size, &reps);
    double async_ns = time_pairs(
          [&] {
            void *p = NULL;
            CHECK(cudaMallocFromPoolAsync(&p, size, g_async_pool, g_stream));
            CHECK(cudaFreeAsync(p, g_stream));
          },
          10, &async_reps);
    CHECK(cudaStreamSynchronize(g_stream));
    CHECK(cudaMemPoolTrimTo(g_async_pool, 0));
    printf("pair size=%zu %s_ns=%.1f async_ns=%.1f %s_stream_ns=%.1f reps=%d async_reps=%d\n", size,
           allocator_name(), plain[i], async_ns, allocator_name(), with_stream, plain_reps[i], async_reps);
  }
}

/* 64 live buffers of random sizes; each step frees one and allocates another
 * of a new random size. The same sequence of slots and sizes for both. */
static void bench_churn(void) {
  const int live = 64, warmup = 256;
  const size_t lo = 256, hi = 8u << 20;
  const int n = warmup + 16 + g_max_reps + 64; /* time_pairs probes 16, and may end a batch past max_reps */
  std::vector<size_t> sizes(live + n);
  std::vector<int> slots(n);
  rng_t rng = rng_seed(42);
  for (auto &s : sizes) s = rng_size(&rng, lo, hi, 1);
  for (auto &s : slots) s = (int)(rng_next(&rng) % live);

  double result[2];
  int reps[2];
  for (int async = 0; async < 2; async++) {
    std::vector<void *> bufs(live, nullptr);
    auto alloc = [&](void **p, size_t size) {
      if (async) CHECK(cudaMallocFromPoolAsync(p, size, g_async_pool, g_stream));
      else CHECK(cudaMalloc(p, size));
    };
    auto release = [&](void *p) {
      if (async) CHECK(cudaFreeAsync(p, g_stream));
      else CHECK(cudaFree(p));
    };
    for (int i = 0; i < live; i++) alloc(&bufs[i], sizes[i]);
    int step = 0;
    result[async] = time_pairs(
        [&] {
          int s = slots[step];
          release(bufs[s]);
          alloc(&bufs[s], sizes[live + step]);
          step++;
        },
        warmup, &reps[async]);
    for (void *p : bufs) release(p);
    CHECK(cudaStreamSynchronize(g_stream));
    CHECK(cudaMemPoolTrimTo(g_async_pool, 0));
  }
  printf("churn live=%d min=%zu max=%zu %s_ns=%.1f async_ns=%.1f reps=%d async_reps=%d\n", live,
         lo, hi, allocator_name(), result[0], result[1], reps[0], reps[1]);
}

/* T threads, each on its own non-blocking stream (own_stream) or all on the
 * legacy stream, churning 8 live buffers of 512 B - 1 MiB for a fixed time;
 * returns pairs per second over all. */
static double threads_run(int nthreads, bool async, bool work, bool own_stream) {
  std::atomic<int> ready(0);
  std::atomic<bool> go(false), stop(false);
  std::vector<unsigned long long> counts(nthreads, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < nthreads; t++) {
    ts.emplace_back([&, t] {
      cudaStream_t s = 0;
      if (own_stream) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      rng_t rng = rng_seed(500 + t);
      const int live = 8;
      void *bufs[live];
      size_t lens[live];
      auto alloc = [&](int i) {
        lens[i] = rng_size(&rng, 512, 1u << 20, 1);
        if (async) CHECK(cudaMallocFromPoolAsync(&bufs[i], lens[i], g_async_pool, s));
        else CHECK(cudaMalloc(&bufs[i], lens[i]));
        if (work) CHECK(cudaMemsetAsync(bufs[i], 0, lens[i] < 4096 ? lens[i] : 4096, s));
      };
      auto release = [&](int i) {
        if (async) CHECK(cudaFreeAsync(bufs[i], s));
        else CHECK(cudaFree(bufs[i]));
      };
      for (int i = 0; i < live; i++) alloc(i);
      for (int w = 0; w < 64; w++) { /* warm-up */
        int i = (int)(rng_next(&rng) % live);
        release(i);
        alloc(i);
      }
      CHECK(cudaStreamSynchronize(s));
      ready++;
      while (!go.load()) { }
      unsigned long long n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        int i = (int)(rng_next(&rng) % live);
        release(i);
        alloc(i);
        n++;
      }
      counts[t] = n;
      for (int i = 0; i < live; i++) release(i);
      CHECK(cudaStreamSynchronize(s));
      if (own_stream) CHECK(cudaStreamDestroy(s));
    });
  }
  while (ready.load() < nthreads) std::this_thread::yield();
  uint64_t t0 = now_ns();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(g_thread_seconds));
  stop = true;
  uint64_t t1 = now_ns();
  for (auto &th : ts) th.join();
  CHECK(cudaMemPoolTrimTo(g_async_pool, 0));
  unsigned long long total = 0;
  for (auto c : counts) total += c;
  return total / ((t1 - t0) / 1e9);
}

static void bench_threads(void) {
  static const int ns[] = {1, 4, 16};
  for (int work = 0; work < 2; work++) {
    for (int n : ns) {
      double direct = threads_run(n, false, work != 0, true);
      double async = threads_run(n, true, work != 0, true);
      printf("%s n=%d %s_pairs_per_s=%.0f async_pairs_per_s=%.0f seconds=%.2f\n",
             work ? "threads_work" : "threads", n, allocator_name(), direct, async,
             g_thread_seconds);
    }
  }
}

/* The same churn in a program that creates no stream: every thread's work
 * is on the legacy stream, so a pool may reuse a thread's own frees at once
 * (cudapool's thread caches), and no barrier is ever needed. Runs before
 * anything creates a stream; CUDA's pool is used on the legacy stream. */
static void bench_threads_legacy(void) {
  static const int ns[] = {1, 4, 16};
  for (int n : ns) {
    double direct = threads_run(n, false, false, false);
    double async = threads_run(n, true, false, false);
    printf("threads_legacy n=%d %s_pairs_per_s=%.0f async_pairs_per_s=%.0f seconds=%.2f\n", n,
           allocator_name(), direct, async, g_thread_seconds);
  }
}

/* Stream-ordered pairs on the default pool against the program's own pool,
 * both on g_stream: the same stream, so a pool may reuse at once. */
static void bench_default_async(void) {
  for (size_t i = 0; i < NSIZES; i++) {
    size_t size = pair_sizes[i];
    int reps = 0, own_reps = 0;
    double default_ns = time_pairs(
        [&] {
          void *p = NULL;
          CHECK(cudaMallocAsync(&p, size, g_stream));
          CHECK(cudaFreeAsync(p, g_stream));
        },
        10, &reps);
    double own_ns = time_pairs(
        [&] {
          void *p = NULL;
          CHECK(cudaMallocFromPoolAsync(&p, size, g_async_pool, g_stream));
          CHECK(cudaFreeAsync(p, g_stream));
        },
        10, &own_reps);
    CHECK(cudaStreamSynchronize(g_stream));
    CHECK(cudaMemPoolTrimTo(g_async_pool, 0));
    printf("default_async size=%zu %s_ns=%.1f async_ns=%.1f reps=%d async_reps=%d\n", size, allocator_name(),
           default_ns, own_ns, reps, own_reps);
  }
}

int main(int argc, char **argv) {
  bool want_pairs = false, want_churn = false, want_threads = false, want_default = false, want_legacy = false,
       any = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      g_budget_s = 0.05;
      g_max_reps = 2000;
      g_thread_seconds = 0.1;
    } else if (!strcmp(argv[i], "pairs")) {
      want_pairs = any = true;
    } else if (!strcmp(argv[i], "churn")) {
      want_churn = any = true;
    } else if (!strcmp(argv[i], "threads")) {
      want_threads = any = true;
    } else if (!strcmp(argv[i], "default")) {
      want_default = any = true;
    } else if (!strcmp(argv[i], "legacy")) {
      want_legacy = any = true;
    } else {
      fprintf(stderr, "usage: alloc_bench [--quick] [legacy] [pairs] [churn] [threads] [default]\n");
      return 2;
    }
  }
  if (!any) want_legacy = want_pairs = want_churn = want_threads = want_default = true;
  print_header("alloc_bench");
  if (on_fake_runtime()) printf("INFO alloc_bench: simulated runtime: times are not GPU times\n");

  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaFree(0));
  create_async_pool(dev);
  /* First: these two time what runs before any stream exists. */
  if (want_legacy) bench_threads_legacy();
  if (want_pairs) bench_pairs();
  else setup_async();
  if (want_churn) bench_churn();
  if (want_threads) bench_threads();
  if (want_default) bench_default_async();

  CHECK(cudaStreamSynchronize(g_stream));
  CHECK(cudaMemPoolDestroy(g_async_pool));
  CHECK(cudaStreamDestroy(g_stream));
  return 0;
}
