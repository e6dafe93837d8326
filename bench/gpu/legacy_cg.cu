/* legacy_cg.cu: a legacy-style CUDA C solver (issue 5, item 4).
 *
 * Conjugate gradients on the 2-D Poisson problem (5-point stencil, n x n
 * grid, double precision), written the way older codes are: helper functions
 * allocate their scratch with cudaMalloc and free it on return, and each
 * iteration allocates its temporaries and the new search direction, then
 * frees the old ones. Per iteration: 4 cudaMalloc/cudaFree pairs (two of 8
 * MiB at n=1024, two small) with kernels and two device-to-host copies in
 * between. The reductions are deterministic (fixed tree per block, partial
 * sums added on the host in order), so the residual is bit-identical natively
 * and under cudapool.
 *
 * Output: legacy_cg n=N iters=I allocator=W total_ms=T per_iter_us=U residual=R
 * Usage: legacy_cg [--n N] [--iters I] */
#include "gpu_common.cuh"

#define BLOCK 256

/* y = A x, A the 5-point Laplacian with zero Dirichlet boundary. */
__global__ static void apply_a(const double *x, double *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * n) return;
  int r = i / n, c = i % n;
  double v = 4.0 * x[i];
  if (r > 0) v -= x[i - n];
  if (r < n - 1) v -= x[i + n];
  if (c > 0) v -= x[i - 1];
  if (c < n - 1) v -= x[i + 1];
  y[i] = v;
}

__global__ static void dot_partial(const double *a, const double *b, int len, double *partial) {
  __shared__ double s[BLOCK];
  double v = 0.0;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < len; i += gridDim.x * BLOCK) v += a[i] * b[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ static void axpy2(double *x, double *r, const double *p, const double *ap, double alpha,
                             int len) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < len) {
    x[i] += alpha * p[i];
    r[i] -= alpha * ap[i];
  }
}

__global__ static void new_direction(double *p_new, const double *r, const double *p, double beta,
                                     int len) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < len) p_new[i] = r[i] + beta * p[i];
}

__global__ static void init_rhs(double *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * n) return;
  int r = i / n, c = i % n;
  b[i] = 1.0 + 0.5 * sin(0.01 * r) * cos(0.013 * c);
}

static void die(const char *what, cudaError_t e) {
  fprintf(stderr, "legacy_cg: %s: %s\n", what, cudaGetErrorString(e));
  exit(1);
}
#define CK(call)                                   \
  do {                                             \
    cudaError_t e_ = (call);                       \
    if (e_ != cudaSuccess) die(#call, e_);         \
  } while (0)

/* The legacy helper: allocates its scratch on every call. */
static double dot(const double *a, const double *b, int len) {
  const int blocks = 264;
  double *partial = NULL;
  CK(cudaMalloc(&partial, blocks * sizeof(double)));
  dot_partial<<<blocks, BLOCK>>>(a, b, len, partial);
  CK(cudaGetLastError());
  double h[blocks];
  CK(cudaMemcpy(h, partial, sizeof h, cudaMemcpyDeviceToHost));
  CK(cudaFree(partial));
  double s = 0.0;
  for (int i = 0; i < blocks; i++) s += h[i];
  return s;
}

int main(int argc, char **argv) {
  int n = 1024, iters = 1000;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
  }
  const int len = n * n;
  const size_t bytes = (size_t)len * sizeof(double);
  const int grid = (len + BLOCK - 1) / BLOCK;
  bool fake = on_fake_runtime();

  double *x, *r, *p;
  CK(cudaMalloc(&x, bytes));
  CK(cudaMalloc(&r, bytes));
  CK(cudaMalloc(&p, bytes));
  CK(cudaMemset(x, 0, bytes));
  init_rhs<<<grid, BLOCK>>>(r, n); /* x = 0, so r = b */
  CK(cudaGetLastError());
  CK(cudaMemcpy(p, r, bytes, cudaMemcpyDeviceToDevice));
  double rr = dot(r, r, len), rr0 = rr;
  CK(cudaDeviceSynchronize());

  uint64_t t0 = now_ns();
  for (int it = 0; it < iters; it++) {
    double *ap;
    CK(cudaMalloc(&ap, bytes));
    apply_a<<<grid, BLOCK>>>(p, ap, n);
    CK(cudaGetLastError());
    double pap = dot(p, ap, len);
    double alpha = pap != 0.0 ? rr / pap : 0.0;
    axpy2<<<grid, BLOCK>>>(x, r, p, ap, alpha, len);
    CK(cudaGetLastError());
    CK(cudaFree(ap));
    double rr_new = dot(r, r, len);
    double beta = rr != 0.0 ? rr_new / rr : 0.0;
    double *p_new;
    CK(cudaMalloc(&p_new, bytes));
    new_direction<<<grid, BLOCK>>>(p_new, r, p, beta, len);
    CK(cudaGetLastError());
    CK(cudaFree(p));
    p = p_new;
    rr = rr_new;
  }
  CK(cudaDeviceSynchronize());
  double ms = (now_ns() - t0) / 1e6;

  printf("legacy_cg n=%d iters=%d allocator=%s total_ms=%.3f per_iter_us=%.2f residual=%.17g\n", n,
         iters, allocator_name(), ms, ms * 1e3 / iters, sqrt(rr));
  CK(cudaFree(x));
  CK(cudaFree(r));
  CK(cudaFree(p));
  if (fake) {
    printf("INFO legacy_cg: simulated runtime: no kernels ran, residual not checked\n");
    return 0;
  }
  if (!(sqrt(rr) < 0.5 * sqrt(rr0))) {
    printf("FAIL legacy_cg: the residual went from %.6g to %.6g\n", sqrt(rr0), sqrt(rr));
    return 1;
  }
  return 0;
}
