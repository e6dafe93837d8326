// capture_probe.cu: what the native runtime does with cudaFree(NULL),
// cudaFree(interior) and cudaMalloc during stream captures of each mode, and
// from another thread while a capture is running. The shim relies on the
// answers (docs/DESIGN.md); run natively by scripts/gpu-check.
#include <cstdio>
#include <thread>
#include <cuda_runtime.h>

static const char *name(cudaError_t e) { return cudaGetErrorName(e); }

static void one(cudaStreamCaptureMode mode, const char *label) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *p = nullptr;
  cudaMalloc(&p, 1 << 20);
  cudaStreamBeginCapture(s, mode);
  cudaError_t f0 = cudaFree(nullptr);
  cudaError_t other = cudaSuccess;
  std::thread t([&] { other = cudaFree(nullptr); });
  t.join();
  cudaError_t fi = cudaFree((char *)p + 1);
  cudaGraph_t g = nullptr;
  cudaError_t end = cudaStreamEndCapture(s, &g);
  cudaError_t last = cudaGetLastError();
  printf("PROBE capture %-12s free(NULL)=%s other_thread_free(NULL)=%s free(interior)=%s end=%s last=%s\n", label,
         name(f0), name(other), name(fi), name(end), name(last));
  if (g) cudaGraphDestroy(g);
  cudaFree(p);
  cudaStreamDestroy(s);
  cudaGetLastError();
}

int main() {
  cudaFree(nullptr);
  one(cudaStreamCaptureModeGlobal, "global");
  one(cudaStreamCaptureModeThreadLocal, "thread-local");
  one(cudaStreamCaptureModeRelaxed, "relaxed");
  return 0;
}
