/* stress.cu: many host threads allocating, filling, verifying and freeing at
 * once, the way a multi-stream program does.
 *
 * Each thread keeps a ring of live buffers of random sizes (512 B - 8 MiB).
 * Every iteration picks a slot: if it holds a buffer, a kernel on the
 * thread's stream verifies the buffer's contents and the host frees it at
 * once (the verify may still be running: the pool must not hand the memory to
 * another thread's stream before it is done); then a new buffer is allocated
 * and filled with the thread's own pattern on the thread's stream. The host
 * also checks that no two live buffers, across all threads, ever overlap.
 *
 * Cases: 8 threads each on its own cudaStreamNonBlocking stream, and 4 threads
 * all on the legacy default stream.
 *
 * On cudapool's simulated runtime it runs only with CUDAPOOL_TEST_ON_FAKE=1:
 * the verify kernels are no-ops there, the host-side overlap check is not.
 *
 * Usage: stress [--iters N] [--threads N] [--legacy-threads N] [FILTER] */
#include "gpu_common.cuh"

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

/* Every live buffer of every thread, by start address: overlap check. */
static std::mutex g_live_mu;
static std::map<uintptr_t, size_t> g_live;

static bool live_insert(void *p, size_t n, std::string *why) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  uintptr_t a = (uintptr_t)p;
  auto next = g_live.lower_bound(a);
  if (next != g_live.end() && next->first < a + n) {
    *why = "new buffer overlaps a live one that starts after it";
    return false;
  }
  if (next != g_live.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > a) {
      *why = "new buffer overlaps a live one that starts before it";
      return false;
    }
  }
  g_live[a] = n;
  return true;
}

static void live_erase(void *p) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_live.erase((uintptr_t)p);
}

struct worker_result {
  bool ok = true;
  std::string why;
  unsigned long long iterations = 0, bytes = 0;
};

struct slot {
  uint32_t *p = NULL;
  size_t words = 0;
  uint32_t seed = 0;
};

#define W_TRY(call)                                                                  \
  do {                                                                               \
    cudaError_t w_err_ = (call);                                                     \
    if (w_err_ != cudaSuccess) {                                                     \
      res->ok = false;                                                               \
      res->why = std::string(#call) + " -> " + cudaGetErrorName(w_err_);             \
      return;                                                                        \
    }                                                                                \
  } while (0)

static void worker(int id, bool legacy, int iters, worker_result *res) {
  cudaStream_t s = cudaStreamLegacy;
  if (!legacy) W_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned long long *bad = NULL; /* mismatches seen by this thread's verifies */
  W_TRY(cudaMalloc(&bad, sizeof *bad));
  W_TRY(cudaMemsetAsync(bad, 0, sizeof *bad, s));
  rng_t rng = rng_seed(1000 + (uint64_t)id * 7919 + (legacy ? 1 : 0));
  std::vector<slot> ring(12);

  for (int it = 0; it < iters; it++) {
    slot &sl = ring[rng_next(&rng) % ring.size()];
    if (sl.p) {
      verify_kernel<<<grid_for(sl.words), 256, 0, s>>>(sl.p, sl.words, sl.seed, bad);
      W_TRY(cudaGetLastError());
      live_erase(sl.p);
      W_TRY(cudaFree(sl.p)); /* the verify may still be running */
      sl.p = NULL;
    }
    size_t bytes = rng_size(&rng, 512, 8u << 20, 4);
    uint32_t *p = NULL;
    W_TRY(cudaMalloc(&p, bytes));
    if (!live_insert(p, bytes, &res->why)) {
      res->ok = false;
      return;
    }
    sl.p = p;
    sl.words = bytes / 4;
    sl.seed = (uint32_t)((id << 24) ^ it);
    fill_kernel<<<grid_for(sl.words), 256, 0, s>>>(p, sl.words, sl.seed);
    W_TRY(cudaGetLastError());
    res->iterations++;
    res->bytes += bytes;
  }
  for (slot &sl : ring) {
    if (!sl.p) continue;
    verify_kernel<<<grid_for(sl.words), 256, 0, s>>>(sl.p, sl.words, sl.seed, bad);
    W_TRY(cudaGetLastError());
    live_erase(sl.p);
    W_TRY(cudaFree(sl.p));
  }
  W_TRY(cudaStreamSynchronize(s));
  unsigned long long h = 0;
  W_TRY(cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost));
  W_TRY(cudaFree(bad));
  if (!legacy) W_TRY(cudaStreamDestroy(s));
  if (h) {
    res->ok = false;
    res->why = "verify kernels found " + std::to_string(h) + " corrupted words";
  }
}

static bool stress_case(const char *name, int threads, bool legacy, int iters) {
  std::vector<worker_result> results(threads);
  std::vector<std::thread> ts;
  uint64_t t0 = now_ns();
  for (int i = 0; i < threads; i++) ts.emplace_back(worker, i, legacy, iters, &results[i]);
  for (auto &t : ts) t.join();
  double ms = (now_ns() - t0) / 1e6;
  TRY(cudaDeviceSynchronize());
  unsigned long long total = 0;
  for (int i = 0; i < threads; i++) {
    total += results[i].iterations;
    EXPECT(results[i].ok, "thread %d after %llu iterations: %s", i, results[i].iterations,
           results[i].why.c_str());
  }
  printf("INFO %s: %d threads x %d iterations in %.1f ms (%.0f verified alloc/free per s)\n",
         name, threads, iters, ms, total / (ms / 1e3));
  EXPECT(g_live.empty(), "%zu buffers still marked live", g_live.size());
  return true;
}

int main(int argc, char **argv) {
  int iters = 3000, threads = 8, legacy_threads = 4;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--legacy-threads") && i + 1 < argc) legacy_threads = atoi(argv[++i]);
    else filter = argv[i];
  }
  print_header("stress");
  bool fake = false;
  if (skip_on_fake("stress", &fake)) return 0;
  CHECK(cudaFree(0));
  char name[64];
  snprintf(name, sizeof name, "stress_nonblocking_%dthreads", threads);
  if (!filter || strstr(name, filter)) {
    g_why[0] = '\0';
    report_result(name, stress_case(name, threads, false, iters));
  }
  snprintf(name, sizeof name, "stress_legacy_%dthreads", legacy_threads);
  if (!filter || strstr(name, filter)) {
    g_why[0] = '\0';
    report_result(name, stress_case(name, legacy_threads, true, iters));
  }
  printf("INFO stress: %d failed\n", g_failures);
  return g_failures ? 1 : 0;
}
