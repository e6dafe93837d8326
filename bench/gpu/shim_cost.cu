/* shim_cost.cu: where a cached cudaMalloc+cudaFree pair spends its time.
 * Times batches of the CUDA calls the shim makes or avoids (cudaGetDevice,
 * event record/wait/query) and of cached pairs with and without a live
 * non-blocking stream; run natively and under the shim by gpu-check.
 * Output: "cost NAME ns=X" per call or pair, mean over a batch, best of 5. */
#include "gpu_common.cuh"

/* Up to n calls per round or 0.1 s, whichever comes first (native pairs
 * are slow); the best of 5 rounds after a warm-up. */
template <class F>
static double per_call_ns(F f, int n) {
  for (int i = 0; i < 10; i++) f();
  double best = 1e30;
  for (int round = 0; round < 5; round++) {
    uint64_t t0 = now_ns(), t = t0;
    int done = 0;
    while (done < n && t - t0 < 100000000ull) {
      for (int i = 0; i < 100; i++) f();
      done += 100;
      t = now_ns();
    }
    double ns = (double)(t - t0) / done;
    if (ns < best) best = ns;
  }
  return best;
}

static void pair(size_t size) {
  void *p = NULL;
  CHECK(cudaMalloc(&p, size));
  CHECK(cudaFree(p));
}

int main(void) {
  print_header("shim_cost");
  CHECK(cudaFree(0));
  int dev = 0;
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  printf("cost clock_gettime ns=%.1f\n", per_call_ns([] { (void)now_ns(); }, 1000000));
  printf("cost cudaGetDevice ns=%.1f\n", per_call_ns([&] { CHECK(cudaGetDevice(&dev)); }, 1000000));
  printf("cost cudaGetLastError ns=%.1f\n", per_call_ns([] { (void)cudaGetLastError(); }, 1000000));
  printf("cost pair_4k ns=%.1f\n", per_call_ns([] { pair(4096); }, 200000));
  printf("cost pair_1m ns=%.1f\n", per_call_ns([] { pair(1 << 20); }, 200000));
  printf("cost pair_64m ns=%.1f\n", per_call_ns([] { pair(64 << 20); }, 200000));
  printf("cost eventRecord_legacy ns=%.1f\n",
         per_call_ns([&] { CHECK(cudaEventRecord(ev, cudaStreamLegacy)); }, 100000));
  printf("cost eventQuery ns=%.1f\n", per_call_ns([&] { (void)cudaEventQuery(ev); }, 100000));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  printf("cost streamWaitEvent ns=%.1f\n", per_call_ns([&] { CHECK(cudaStreamWaitEvent(s, ev, 0)); }, 100000));
  printf("cost eventRecord_stream ns=%.1f\n", per_call_ns([&] { CHECK(cudaEventRecord(ev, s)); }, 100000));
  printf("cost pair_4k_stream_live ns=%.1f\n", per_call_ns([] { pair(4096); }, 200000));
  printf("cost pair_1m_stream_live ns=%.1f\n", per_call_ns([] { pair(1 << 20); }, 100000));
  printf("cost pair_64m_stream_live ns=%.1f\n", per_call_ns([] { pair(64 << 20); }, 100000));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaEventDestroy(ev));
  return 0;
}
