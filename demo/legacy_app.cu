/* legacy_app.cu: cudapool's bundled demo workload (`make demo`).
 *
 * A small heat-diffusion simulation written the way many legacy CUDA codes
 * are: every time step allocates the new temperature field and a halo buffer
 * with cudaMalloc, runs its kernels, and frees the old field and the halo
 * with cudaFree; every 50 steps a diagnostics helper allocates its own
 * scratch, copies partial sums back and frees it. Natively each of those
 * cudaMalloc/cudaFree calls costs tens of microseconds and cudaFree waits for
 * the GPU; under cudapool (LD_PRELOAD) they are served from its cache.
 *
 * Built with nvcc -cudart shared so that the runtime is a shared library the
 * preloaded shim can interpose. It also runs on cudapool's simulated runtime
 * (tests/fakes/cudart), where kernels are no-ops: it recognises that device by
 * its name and then skips the result checks.
 *
 * Output: a few lines, ending with "legacy_app: total T ms ..." and a result
 * line; exit status 1 if a check fails or a CUDA call fails.
 * Usage: legacy_app [--n N] [--steps S] */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudapool.h" /* the stats record only: nothing of cudapool is linked */

#define BLOCK 256
#define DIAG_BLOCKS 128

static void check(cudaError_t e, const char *what, int line) {
  if (e != cudaSuccess) {
    fprintf(stderr, "legacy_app: line %d: %s failed: %s\n", line, what, cudaGetErrorString(e));
    exit(1);
  }
}
#define CK(call) check((call), #call, __LINE__)

/* Copies the first and last rows into a halo buffer (periodic boundary). */
__global__ void pack_halo(const float *u, float *halo, int n) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < n) {
    halo[c] = u[(size_t)(n - 1) * n + c]; /* row above row 0 */
    halo[n + c] = u[c];                   /* row below row n-1 */
  }
}

/* One explicit diffusion step on a periodic n x n grid. */
__global__ void diffuse(const float *u, const float *halo, float *next, int n, float k) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)n * n) return;
  int r = (int)(i / n), c = (int)(i % n);
  float up = r > 0 ? u[i - n] : halo[c];
  float down = r < n - 1 ? u[i + n] : halo[n + c];
  float left = u[(size_t)r * n + (c + n - 1) % n];
  float right = u[(size_t)r * n + (c + 1) % n];
  next[i] = u[i] + k * (up + down + left + right - 4.0f * u[i]);
}

__global__ void init_field(float *u, int n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)n * n) return;
  int r = (int)(i / n), c = (int)(i % n);
  float dr = (r - n / 3) / (0.05f * n), dc = (c - n / 2) / (0.08f * n);
  u[i] = 1.0f + expf(-(dr * dr + dc * dc)); /* background plus a hot spot */
}

/* Per block: sum (as double) and maximum of u. */
__global__ void diag_partial(const float *u, size_t len, double *sums, float *maxes) {
  __shared__ double s[BLOCK];
  __shared__ float m[BLOCK];
  double acc = 0.0;
  float mx = -INFINITY;
  for (size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x; i < len; i += (size_t)gridDim.x * BLOCK) {
    acc += u[i];
    mx = fmaxf(mx, u[i]);
  }
  s[threadIdx.x] = acc;
  m[threadIdx.x] = mx;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) {
      s[threadIdx.x] += s[threadIdx.x + k];
      m[threadIdx.x] = fmaxf(m[threadIdx.x], m[threadIdx.x + k]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sums[blockIdx.x] = s[0];
    maxes[blockIdx.x] = m[0];
  }
}

/* The legacy diagnostics helper: allocates its scratch on every call. */
static void diagnostics(const float *u, int n, double *energy, float *peak) {
  double *sums = NULL;
  float *maxes = NULL;
  CK(cudaMalloc((void **)&sums, DIAG_BLOCKS * sizeof(double)));
  CK(cudaMalloc((void **)&maxes, DIAG_BLOCKS * sizeof(float)));
  diag_partial<<<DIAG_BLOCKS, BLOCK>>>(u, (size_t)n * n, sums, maxes);
  CK(cudaGetLastError());
  double hs[DIAG_BLOCKS];
  float hm[DIAG_BLOCKS];
  CK(cudaMemcpy(hs, sums, sizeof hs, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hm, maxes, sizeof hm, cudaMemcpyDeviceToHost));
  CK(cudaFree(sums));
  CK(cudaFree(maxes));
  *energy = 0.0;
  *peak = -INFINITY;
  for (int b = 0; b < DIAG_BLOCKS; b++) {
    *energy += hs[b];
    *peak = fmaxf(*peak, hm[b]);
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Whether cudapool serves this process's cudaMalloc: loaded (LD_PRELOAD)
 * and not disabled. Its stats call answers only when its pool is on, which a
 * symbol lookup alone cannot tell (CUDAPOOL_DISABLE=1 keeps the library
 * loaded). Reached through dlsym: the program runs the same without it. */
static int served_by_cudapool(void) {
  typedef int (*stats_fn)(int, cudapool_stats_t *);
  stats_fn stats = (stats_fn)dlsym(RTLD_DEFAULT, "cudapool_stats");
  if (stats == NULL) return 0;
  cudapool_stats_t s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  s.version = CUDAPOOL_STATS_VERSION;
  return stats(0, &s) == 0;
}

int main(int argc, char **argv) {
  int n = 1024, steps = 2000;
  setvbuf(stdout, NULL, _IOLBF, 0); /* keep our lines before any exit report */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
  }
  const size_t cells = (size_t)n * n, bytes = cells * sizeof(float);
  const unsigned grid = (unsigned)((cells + BLOCK - 1) / BLOCK);
  const int diag_every = 50;

  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int fake = strcmp(prop.name, "cudapool fake device") == 0;
  int pooled = served_by_cudapool();
  int loaded = dlsym(RTLD_DEFAULT, "cudapool_version") != NULL;
  int diags = steps / diag_every;
  printf("legacy_app: %dx%d grid, %d steps on \"%s\", cudaMalloc from %s\n", n, n, steps,
         prop.name,
         pooled   ? "cudapool"
         : loaded ? "the CUDA runtime (cudapool loaded but disabled: every call passed through)"
                  : "the CUDA runtime");
  printf("legacy_app: %d cudaMalloc/cudaFree pairs (2 per step, 2 per diagnostic every %d "
         "steps)\n",
         2 * steps + 2 * diags, diag_every);

  float *u = NULL;
  CK(cudaMalloc((void **)&u, bytes));
  init_field<<<grid, BLOCK>>>(u, n);
  CK(cudaGetLastError());
  double e0 = 0.0, e = 0.0;
  float max0 = 0.0f, mx = 0.0f;
  diagnostics(u, n, &e0, &max0);
  CK(cudaDeviceSynchronize());

  const float k = 0.2f;
  double t0 = now_ms();
  for (int s = 1; s <= steps; s++) {
    float *next = NULL, *halo = NULL;
    CK(cudaMalloc((void **)&next, bytes));
    CK(cudaMalloc((void **)&halo, 2 * (size_t)n * sizeof(float)));
    pack_halo<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(u, halo, n);
    CK(cudaGetLastError());
    diffuse<<<grid, BLOCK>>>(u, halo, next, n, k);
    CK(cudaGetLastError());
    CK(cudaFree(halo));
    CK(cudaFree(u));
    u = next;
    if (s % diag_every == 0) diagnostics(u, n, &e, &mx);
  }
  CK(cudaDeviceSynchronize());
  double ms = now_ms() - t0;
  printf("legacy_app: total %.1f ms, %.1f us per step\n", ms, 1e3 * ms / steps);
  CK(cudaFree(u));

  if (fake) {
    printf("legacy_app: simulated runtime (kernels are no-ops): result checks skipped\n");
    return 0;
  }
  double drift = fabs(e - e0) / e0;
  int ok = isfinite(e) && drift < 1e-4 && mx <= max0 && mx > 1.0f;
  printf("legacy_app: heat %.9g -> %.9g (drift %.1e), peak %.6f -> %.6f: %s\n", e0, e, drift,
         (double)max0, (double)mx, ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
