/* order_race.cu: the learned stream order's early reuse (issue 25,
 * shim/state/order.h) against the early-reuse race, one case per process so
 * that every case starts with all work on one stream (the order's SOLE mode).
 *
 * The reader fills buffer A on its stream H (the only stream that got work
 * so far) and then spins there before checking that A still holds its data.
 * The host frees A at once and allocates B of the same size: under cudapool
 * the order hands A's memory straight back. The writer then overwrites B
 * with the first work of another stream, in the ways the issue names: a
 * kernel on a non-blocking stream (made before the free, or after it), from
 * another thread, on the legacy, a blocking or the per-thread stream (H a
 * non-blocking stream), a graph launch, and the driver API (cuMemsetD32Async
 * through cudaGetDriverEntryPointByVersion, that is cuGetProcAddress). The reader
 * must still see its data: the order makes that first work wait for H.
 * With CUDAPOOL_TEST_SKIP_ORDER_WAITS=1 (the wait dropped) the same cases
 * must fail: scripts/gpu-check runs both.
 *
 * Usage: order_race CASE [--spin-ms MS]; order_race --list.
 * Prints PASS/FAIL (gpu_common.cuh) and "INFO reused=N"; exit 1 on FAIL. */
#include "gpu_common.cuh"

#include <cuda.h>
#include <string>
#include <thread>

static const char *const k_cases[] = {
    "legacy_to_nonblocking",      "legacy_to_stream_made_after", "legacy_to_other_thread",
    "nonblocking_to_legacy",      "nonblocking_to_blocking",     "nonblocking_to_perthread",
    "legacy_to_graph",            "legacy_to_driver",            "nonblocking_to_driver_legacy",
};

#define WORDS ((size_t)16 << 20) /* 64 MiB: a segment of its own, which it fills */

/* The graph's writer reads its target from mapped host memory, so that
 * nothing but the graph launch goes to its stream. */
__global__ static void fill_indirect_kernel(uint32_t *const *target, size_t n, uint32_t seed) {
  uint32_t *buf = *(uint32_t *volatile *)target;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    buf[i] = pattern(i, seed);
}

typedef CUresult (*memset_d32_fn)(CUdeviceptr, unsigned int, size_t, CUstream);

static bool run_case(const std::string &c, uint64_t spin_ns, int *reused) {
  bool home_legacy = c.rfind("legacy_", 0) == 0;
  cudaStream_t home = cudaStreamLegacy, other = NULL;
  unsigned long long *counter = NULL;
  uint32_t **target = NULL;
  cudaGraphExec_t exec = NULL;
  cudaStream_t graph_stream = NULL;
  memset_d32_fn memset_d32 = NULL;
  TRY(cudaFree(0));
  if (!home_legacy) TRY(cudaStreamCreateWithFlags(&home, cudaStreamNonBlocking));
  if (c == "legacy_to_nonblocking" || c == "legacy_to_other_thread" || c == "legacy_to_driver")
    TRY(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  if (c == "nonblocking_to_blocking") TRY(cudaStreamCreate(&other));
  if (c == "nonblocking_to_legacy" || c == "nonblocking_to_driver_legacy") other = cudaStreamLegacy;
  if (c == "nonblocking_to_perthread") other = cudaStreamPerThread;
  if (c == "legacy_to_driver" || c == "nonblocking_to_driver_legacy") {
    cudaDriverEntryPointQueryResult q;
    TRY(cudaGetDriverEntryPointByVersion("cuMemsetD32Async", (void **)&memset_d32, 12000, cudaEnableDefault, &q));
    EXPECT(memset_d32 != NULL, "no cuMemsetD32Async");
  }
  if (c == "legacy_to_graph") {
    /* Captured before anything runs: capturing is no work. */
    TRY(cudaHostAlloc((void **)&target, sizeof *target, cudaHostAllocMapped));
    uint32_t **dev_target = NULL;
    TRY(cudaHostGetDevicePointer((void **)&dev_target, target, 0));
    TRY(cudaStreamCreateWithFlags(&graph_stream, cudaStreamNonBlocking));
    cudaGraph_t g = NULL;
    TRY(cudaStreamBeginCapture(graph_stream, cudaStreamCaptureModeRelaxed));
    fill_indirect_kernel<<<grid_for(WORDS), 256, 0, graph_stream>>>(dev_target, WORDS, 0x2002u);
    TRY(cudaStreamEndCapture(graph_stream, &g));
    TRY(cudaGraphInstantiate(&exec, g, 0));
    TRY(cudaGraphDestroy(g));
    other = graph_stream;
  }
  TRY(cudaMalloc(&counter, sizeof *counter));
  TRY(cudaMemsetAsync(counter, 0, sizeof *counter, home)); /* the first work: on H */

  uint32_t *a = NULL;
  TRY(cudaMalloc(&a, WORDS * 4));
  fill_kernel<<<grid_for(WORDS), 256, 0, home>>>(a, WORDS, 0x2001u);
  TRY_LAUNCH();
  spin_then_verify_kernel<<<64, 256, 0, home>>>(a, WORDS, 0x2001u, spin_ns, counter);
  TRY_LAUNCH();
  TRY(cudaFree(a)); /* the reader is still spinning */
  uint32_t *b = NULL;
  TRY(cudaMalloc(&b, WORDS * 4));
  *reused = a == b;
  if (c == "legacy_to_stream_made_after") TRY(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));

  bool ok = true;
  auto write = [&]() -> bool {
    if (exec) {
      *target = b;
      TRY(cudaGraphLaunch(exec, other));
    } else if (memset_d32) {
      CUresult rc = memset_d32((CUdeviceptr)b, 0x5A5A5A5Au, WORDS, (CUstream)other);
      EXPECT(rc == CUDA_SUCCESS, "cuMemsetD32Async: %d", (int)rc);
    } else {
      fill_kernel<<<grid_for(WORDS), 256, 0, other>>>(b, WORDS, 0x2002u);
      TRY_LAUNCH();
    }
    return true;
  };
  if (c == "legacy_to_other_thread") {
    std::string why;
    std::thread t([&] {
      ok = write();
      if (!ok) why = g_why;
    });
    t.join();
    EXPECT(ok, "writer thread: %s", why.c_str());
  } else if (!write()) {
    return false;
  }
  TRY(cudaDeviceSynchronize());
  unsigned long long bad = 0;
  TRY(cudaMemcpy(&bad, counter, sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT(bad == 0, "the reader saw %llu of %zu words of its freed buffer overwritten (B %s A)", bad, WORDS,
         *reused ? "==" : "!=");
  TRY(cudaFree(b));
  TRY(cudaFree(counter));
  if (exec) TRY(cudaGraphExecDestroy(exec));
  if (target) TRY(cudaFreeHost(target));
  return true;
}

int main(int argc, char **argv) {
  double spin_ms = 100.0;
  const char *name = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--list")) {
      for (const char *c : k_cases) printf("%s\n", c);
      return 0;
    }
    if (!strcmp(argv[i], "--spin-ms") && i + 1 < argc)
      spin_ms = atof(argv[++i]);
    else
      name = argv[i];
  }
  bool known = false;
  for (const char *c : k_cases) known = known || (name && !strcmp(name, c));
  if (!known) {
    fprintf(stderr, "usage: order_race CASE [--spin-ms MS] | --list\n");
    return 2;
  }
  print_header("order_race");
  bool fake = false;
  if (skip_on_fake("order_race", &fake)) return 0;
  int reused = 0;
  char full[96];
  snprintf(full, sizeof full, "order_%s", name);
  g_why[0] = '\0';
  bool ok = run_case(name, (uint64_t)(spin_ms * 1e6), &reused);
  printf("INFO %s: reused=%d\n", full, reused);
  report_result(full, ok);
  return g_failures ? 1 : 0;
}
