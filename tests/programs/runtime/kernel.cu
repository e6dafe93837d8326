// kernel.cu: an nvcc program built with -cudart shared, the way the shim's
// users build theirs: registers a fat binary, __device__ and __managed__
// variables, launches kernels with <<<>>> on the legacy stream and on a
// created stream, and allocates/frees per iteration. On the fake runtime the
// kernels do not run; the program checks only what the runtime returns.
// Prints: "kernel: launch=<err> sync=<err> pairs=<n> errors=<n>".
#include <cstdio>

__device__ int dev_var;
__managed__ int managed_var;

__global__ void fill(int *p, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v + dev_var;
}

int main(int argc, char **argv) {
  int pairs = argc > 1 ? atoi(argv[1]) : 100;
  int errors = 0;
  managed_var = 7;
  int *p = nullptr;
  if (cudaMalloc(&p, 1024 * sizeof(int)) != cudaSuccess) errors++;
  fill<<<4, 256>>>(p, 1024, 1);
  cudaError_t launch = cudaGetLastError();
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) errors++;
  fill<<<4, 256, 0, s>>>(p, 1024, 2);
  if (cudaGetLastError() != cudaSuccess) errors++;
  cudaError_t sync = cudaDeviceSynchronize();
  if (cudaFree(p) != cudaSuccess) errors++;
  for (int i = 0; i < pairs; i++) {
    int *q = nullptr;
    if (cudaMalloc(&q, 1 << 20) != cudaSuccess) errors++;
    fill<<<1, 32, 0, s>>>(q, 32, i);
    if (cudaFree(q) != cudaSuccess) errors++;
  }
  if (cudaStreamDestroy(s) != cudaSuccess) errors++;
  if (managed_var != 7) errors++;
  printf("kernel: launch=%d sync=%d pairs=%d errors=%d\n", (int)launch, (int)sync, pairs, errors);
  return 0;
}
