/* cublas_ws.cu: a small cuBLAS program for scripts/gpu-check driver, built
 * with nvcc's default static runtime and linked with libcublas. cuBLAS
 * allocates its workspace itself, through the copy of the runtime inside
 * libcublas, which reaches the driver through dlopen/dlsym: under cudapool
 * those allocations must show in the pool's counters (num_alloc above the
 * program's own count, printed as INFO own_allocs=N).
 *
 * SGEMMs of several sizes on a stream of the program's own, of matrices of
 * small integers: every product is an exact integer in float32, so the
 * result is checked exactly against the host (PASS/FAIL) and its checksum is
 * OBSERVED (identical natively and under the shim).
 *
 * Usage: cublas_ws */
#include <cublas_v2.h>

#include <vector>

#include "gpu_common.cuh"

static int g_own_allocs = 0;

static bool gemm(cublasHandle_t h, cudaStream_t s, int n) {
  size_t bytes = (size_t)n * n * sizeof(float);
  std::vector<float> a((size_t)n * n), b((size_t)n * n), c((size_t)n * n);
  for (size_t i = 0; i < a.size(); i++) {
    a[i] = (float)((int)(i % 5) - 2);
    b[i] = (float)((int)(i % 3) - 1);
  }
  float *da = NULL, *db = NULL, *dc = NULL;
  TRY(cudaMalloc(&da, bytes));
  TRY(cudaMalloc(&db, bytes));
  TRY(cudaMalloc(&dc, bytes));
  g_own_allocs += 3;
  TRY(cudaMemcpyAsync(da, a.data(), bytes, cudaMemcpyHostToDevice, s));
  TRY(cudaMemcpyAsync(db, b.data(), bytes, cudaMemcpyHostToDevice, s));
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc, n);
  EXPECT(st == CUBLAS_STATUS_SUCCESS, "cublasSgemm returned %d", (int)st);
  TRY(cudaMemcpyAsync(c.data(), dc, bytes, cudaMemcpyDeviceToHost, s));
  TRY(cudaStreamSynchronize(s));
  long long checksum = 0, wrong = 0;
  for (int col = 0; col < n; col++) {
    for (int row = 0; row < n; row++) {
      long long want = 0;
      for (int k = 0; k < n; k++) want += (long long)a[(size_t)k * n + row] * (long long)b[(size_t)col * n + k];
      long long got = (long long)c[(size_t)col * n + row];
      wrong += got != want;
      checksum = checksum * 31 + got;
    }
  }
  char name[64];
  snprintf(name, sizeof name, "gemm_n%d", n);
  observed(name, "checksum=%lld wrong=%lld", checksum, wrong);
  TRY(cudaFree(da));
  TRY(cudaFree(db));
  TRY(cudaFree(dc));
  EXPECT(wrong == 0, "%lld of %d entries differ from the host's product", wrong, n * n);
  return true;
}

int main(void) {
  print_header("cublas_ws");
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS) {
    printf("FAIL setup: cublasCreate/cublasSetStream\n");
    return 2;
  }
  static const int sizes[] = {128, 256, 384, 512};
  for (int n : sizes) {
    g_why[0] = '\0';
    char name[64];
    snprintf(name, sizeof name, "cublas_gemm_n%d", n);
    report_result(name, gemm(h, s, n));
  }
  cublasDestroy(h);
  CHECK(cudaStreamDestroy(s));
  printf("INFO own_allocs=%d\n", g_own_allocs);
  return g_failures ? 1 : 0;
}
