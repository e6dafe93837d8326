/* capture_race.cu: reuse around stream captures (issue 31, "Never early, in
 * the corners"), compared natively and under the shim.
 *
 * destroy_during_capture_*: a kernel on non-blocking stream S spins and
 * then checks buffer A; the host frees A, a capture begins elsewhere
 * (relaxed on another non-blocking stream in this thread, or thread-local
 * on a stream of another thread), S is destroyed while the capture runs,
 * the capture ends, and a buffer B of A's size is allocated and filled on
 * the legacy stream. The reader must still see its own data: natively
 * cudaFree waited for the device; a pool must have ordered S's queued work
 * before the legacy stream's although S is gone.
 *
 * fork_join_*: a relaxed capture on non-blocking stream C forks to stream J
 * (non-blocking or blocking) through an event recorded on C, fills a buffer
 * on each, and joins back; meanwhile the host frees and allocates blocks
 * (under a pool, an allocation that only a barrier could serve from freed
 * blocks). The capture must end with a graph (natively it does), and the
 * graph, launched, must fill both buffers.
 *
 * On cudapool's simulated runtime it runs only with CUDAPOOL_TEST_ON_FAKE=1
 * (kernels are no-ops there; tests/programs/runtime/capture_corners.c holds
 * these cases on the fake's race detector). Usage: capture_race [--loops N]
 * [--spin-ms MS] [FILTER]. Prints PASS/FAIL per case (gpu_common.cuh);
 * exit 1 if any failed. */
#include "gpu_common.cuh"

#include <future>
#include <string>
#include <thread>

static unsigned long long *g_counters; /* [0] reader mismatches, [1] writer/graph check */
static const size_t k_sizes[] = {64u << 20, 4u << 10, 1u << 20};
static uint64_t g_spin_ns;
static int g_loops = 3;
static bool g_fake;

static bool end_capture_ok(cudaStream_t s) {
  cudaGraph_t graph = NULL;
  TRY(cudaStreamEndCapture(s, &graph));
  EXPECT(graph != NULL, "the capture ended without a graph");
  TRY(cudaGraphDestroy(graph));
  return true;
}

/* A thread-local capture on a stream of another host thread, begun before
 * `begun` is set and ended once `go_on` is. */
static void thread_local_capture(std::promise<void> *begun, std::future<void> go_on, bool *ok,
                                 std::string *why) {
  auto body = [&]() -> bool {
    cudaStream_t d = NULL;
    cudaError_t begin = cudaStreamCreateWithFlags(&d, cudaStreamNonBlocking);
    if (begin == cudaSuccess) begin = cudaStreamBeginCapture(d, cudaStreamCaptureModeThreadLocal);
    begun->set_value(); /* whatever happened: the main thread waits for it */
    go_on.wait();
    TRY(begin);
    bool ended = end_capture_ok(d);
    TRY(cudaStreamDestroy(d));
    return ended;
  };
  *ok = body();
  if (!*ok) *why = g_why;
}

static bool destroy_once(bool thread_local_elsewhere, int iter) {
  size_t bytes = k_sizes[iter % 3], words = bytes / 4;
  uint32_t seed_a = 0x3000u + 2u * (uint32_t)iter, seed_b = seed_a + 1u;
  cudaStream_t s, c;
  TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  TRY(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
  TRY(cudaMemsetAsync(g_counters, 0, 2 * sizeof *g_counters, s));
  uint32_t *a = NULL;
  TRY(cudaMalloc(&a, bytes));
  fill_kernel<<<grid_for(words), 256, 0, s>>>(a, words, seed_a);
  TRY_LAUNCH();
  spin_then_verify_kernel<<<64, 256, 0, s>>>(a, words, seed_a, g_spin_ns, &g_counters[0]);
  TRY_LAUNCH();
  TRY(cudaFree(a)); /* the reader is still spinning on the device */

  std::promise<void> begun, go_on;
  bool other_ok = true;
  std::string other_why;
  std::thread other;
  if (thread_local_elsewhere) {
    other = std::thread(thread_local_capture, &begun, go_on.get_future(), &other_ok, &other_why);
    begun.get_future().wait();
  } else {
    TRY(cudaStreamBeginCapture(c, cudaStreamCaptureModeRelaxed));
  }
  cudaError_t destroyed = cudaStreamDestroy(s); /* the reader still runs */
  bool ended = true;
  if (thread_local_elsewhere) {
    go_on.set_value();
    other.join();
  } else {
    ended = end_capture_ok(c);
  }
  TRY(destroyed);
  if (!ended) return false;
  EXPECT(other_ok, "capturing thread: %s", other_why.c_str());

  uint32_t *b = NULL;
  TRY(cudaMalloc(&b, bytes));
  fill_kernel<<<grid_for(words), 256>>>(b, words, seed_b); /* the legacy stream */
  TRY_LAUNCH();
  TRY(cudaDeviceSynchronize());
  unsigned long long reader_bad = 0;
  TRY(cudaMemcpy(&reader_bad, &g_counters[0], sizeof reader_bad, cudaMemcpyDeviceToHost));
  EXPECT(g_fake || reader_bad == 0,
         "iteration %d (%zu bytes): the reader saw %llu of %zu words of its freed buffer "
         "overwritten (B %s A)",
         iter, bytes, reader_bad, words, a == b ? "==" : "!=");
  printf("INFO destroy_during_capture iteration %d: B %s A\n", iter, a == b ? "==" : "!=");
  TRY(cudaFree(b));
  TRY(cudaStreamDestroy(c));
  return true;
}

static bool destroy_during_relaxed_capture(void) {
  for (int i = 0; i < g_loops; i++)
    if (!destroy_once(false, i)) return false;
  return true;
}

static bool destroy_during_thread_local_capture(void) {
  for (int i = 0; i < g_loops; i++)
    if (!destroy_once(true, i)) return false;
  return true;
}

static bool fork_join(bool blocking_fork) {
  enum { BLOCKS = 8 };
  const size_t mib = 1u << 20, words = (4u << 20) / 4;
  cudaStream_t c, j;
  cudaEvent_t forked, joined;
  TRY(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
  TRY(cudaStreamCreateWithFlags(&j, blocking_fork ? cudaStreamDefault : cudaStreamNonBlocking));
  TRY(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
  TRY(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
  uint32_t *on_c = NULL, *on_j = NULL;
  TRY(cudaMalloc(&on_c, words * 4));
  TRY(cudaMalloc(&on_j, words * 4));
  void *freed[BLOCKS], *during[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) TRY(cudaMalloc(&freed[i], mib));
  for (int i = 0; i < BLOCKS; i++) TRY(cudaFree(freed[i]));

  TRY(cudaStreamBeginCapture(c, cudaStreamCaptureModeRelaxed));
  fill_kernel<<<grid_for(words), 256, 0, c>>>(on_c, words, 0x51u);
  TRY_LAUNCH();
  TRY(cudaEventRecord(forked, c));
  TRY(cudaStreamWaitEvent(j, forked, 0)); /* j joins the capture */
  fill_kernel<<<grid_for(words), 256, 0, j>>>(on_j, words, 0x52u);
  TRY_LAUNCH();
  /* Relaxed mode: allocations are allowed, and must not break the capture. */
  for (int i = 0; i < BLOCKS; i++) TRY(cudaMalloc(&during[i], mib));
  TRY(cudaEventRecord(joined, j));
  TRY(cudaStreamWaitEvent(c, joined, 0));
  cudaGraph_t graph = NULL;
  cudaError_t end = cudaStreamEndCapture(c, &graph);
  observed(blocking_fork ? "fork_join_blocking" : "fork_join_nonblocking", "end=%d graph_null=%d",
           (int)end, graph == NULL);
  TRY(end);
  EXPECT(graph != NULL, "the capture ended without a graph");
  for (int i = 0; i < BLOCKS; i++) TRY(cudaFree(during[i]));

  cudaGraphExec_t exec = NULL;
  TRY(cudaGraphInstantiate(&exec, graph, 0));
  TRY(cudaMemset(g_counters, 0, 2 * sizeof *g_counters));
  TRY(cudaGraphLaunch(exec, c));
  TRY(cudaStreamSynchronize(c));
  verify_kernel<<<grid_for(words), 256>>>(on_c, words, 0x51u, &g_counters[1]);
  TRY_LAUNCH();
  verify_kernel<<<grid_for(words), 256>>>(on_j, words, 0x52u, &g_counters[1]);
  TRY_LAUNCH();
  unsigned long long bad = 0;
  TRY(cudaMemcpy(&bad, &g_counters[1], sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT(g_fake || bad == 0, "the graph's fills: %llu of %zu words wrong", bad, 2 * words);
  TRY(cudaGraphExecDestroy(exec));
  TRY(cudaGraphDestroy(graph));
  TRY(cudaFree(on_c));
  TRY(cudaFree(on_j));
  TRY(cudaEventDestroy(forked));
  TRY(cudaEventDestroy(joined));
  TRY(cudaStreamDestroy(c));
  TRY(cudaStreamDestroy(j));
  return true;
}

static bool fork_join_nonblocking(void) { return fork_join(false); }
static bool fork_join_blocking(void) { return fork_join(true); }

int main(int argc, char **argv) {
  double spin_ms = 80.0;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--loops") && i + 1 < argc) g_loops = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spin-ms") && i + 1 < argc) spin_ms = atof(argv[++i]);
    else filter = argv[i];
  }
  print_header("capture_race");
  if (skip_on_fake("capture_race", &g_fake)) return 0;
  CHECK(cudaFree(0));
  CHECK(cudaMalloc(&g_counters, 2 * sizeof *g_counters));
  g_spin_ns = (uint64_t)(spin_ms * 1e6);
  run_test("destroy_during_relaxed_capture", destroy_during_relaxed_capture, filter);
  run_test("destroy_during_thread_local_capture", destroy_during_thread_local_capture, filter);
  run_test("fork_join_nonblocking", fork_join_nonblocking, filter);
  run_test("fork_join_blocking", fork_join_blocking, filter);
  CHECK(cudaFree(g_counters));
  printf("INFO capture_race: %d failed\n", g_failures);
  return g_failures ? 1 : 0;
}
