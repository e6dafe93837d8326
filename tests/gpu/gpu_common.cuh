/* gpu_common.cuh: helpers shared by cudapool's GPU test programs (tests/gpu)
 * and GPU microbenchmarks (bench/gpu). Header-only, built by nvcc with
 * -cudart shared so that libcudapool.so can interpose the runtime.
 *
 * Output convention of the test programs (scripts/gpu-check compares it
 * between a native run and a run under the shim):
 *   PASS name                 a test passed
 *   FAIL name: why            a test failed (the program exits non-zero)
 *   OBSERVED name: k=v ...    facts that must be identical natively and
 *                             under the shim (error codes seen), whether or
 *                             not they decide the test
 *   INFO ...                  anything else (addresses, counts, times):
 *                             free to differ between runs
 *
 * Every CUDA call's return code is checked: inside a test function use
 * TRY(call) / EXPECT(cond, fmt...), which record why and return false. */
#ifndef CUDAPOOL_GPU_COMMON_CUH
#define CUDAPOOL_GPU_COMMON_CUH

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- reporting ---------------------------------------------------------- */

/* Why the current test failed; per host thread so worker threads can fail. */
static thread_local char g_why[768];
static int g_failures = 0;

static inline void set_why(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_why, sizeof g_why, fmt, ap);
  va_end(ap);
}

/* Record a failed CUDA call and return false from the enclosing function. */
#define TRY(call)                                                            \
  do {                                                                       \
    cudaError_t try_err_ = (call);                                           \
    if (try_err_ != cudaSuccess) {                                           \
      set_why("%s:%d: %s -> %s (%s)", __FILE__, __LINE__, #call,             \
              cudaGetErrorName(try_err_), cudaGetErrorString(try_err_));     \
      return false;                                                          \
    }                                                                        \
  } while (0)

/* Check a condition; on failure record the formatted reason, return false. */
#define EXPECT(cond, ...)                                                    \
  do {                                                                       \
    if (!(cond)) {                                                           \
      char expect_msg_[512];                                                 \
      snprintf(expect_msg_, sizeof expect_msg_, __VA_ARGS__);                \
      set_why("%s:%d: %s", __FILE__, __LINE__, expect_msg_);                 \
      return false;                                                          \
    }                                                                        \
  } while (0)

/* Check an expected error code, named in the message when it differs. */
#define EXPECT_ERR(got, want)                                                \
  EXPECT((got) == (want), "%s returned %s, expected %s", #got,               \
         cudaGetErrorName(got), cudaGetErrorName(want))

/* Outside test functions (setup, benchmarks): a failed call is fatal. */
#define CHECK(call)                                                          \
  do {                                                                       \
    cudaError_t chk_err_ = (call);                                           \
    if (chk_err_ != cudaSuccess) {                                           \
      fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call,   \
              cudaGetErrorName(chk_err_), cudaGetErrorString(chk_err_));     \
      printf("FAIL setup: %s -> %s\n", #call, cudaGetErrorName(chk_err_));   \
      exit(2);                                                               \
    }                                                                        \
  } while (0)

/* Check a kernel launch: the launch error, not the kernel's completion. */
#define TRY_LAUNCH() TRY(cudaGetLastError())
#define CHECK_LAUNCH() CHECK(cudaGetLastError())

/* Report a result computed elsewhere (parameterised cases). */
static inline void report_result(const char *name, bool ok) {
  if (ok) {
    printf("PASS %s\n", name);
  } else {
    printf("FAIL %s: %s\n", name, g_why[0] ? g_why : "(no reason recorded)");
    g_failures++;
  }
  fflush(stdout);
}

typedef bool (*test_fn)(void);

/* Run one test; print PASS/FAIL. A filter (argv) selects tests by substring. */
static inline void run_test(const char *name, test_fn fn, const char *filter) {
  if (filter && !strstr(name, filter)) return;
  g_why[0] = '\0';
  report_result(name, fn());
}

static inline void observed(const char *name, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  printf("OBSERVED %s: %s\n", name, buf);
  fflush(stdout);
}

/* ---- environment -------------------------------------------------------- */

/* True when libcudapool.so is loaded (preloaded) into this process. */
static inline bool cudapool_loaded(void) {
  return dlsym(RTLD_DEFAULT, "cudapool_version") != NULL;
}

static inline const char *allocator_name(void) {
  return cudapool_loaded() ? "pool" : "native";
}

/* cudapool's simulated runtime names its device so (tests/fakes/cudart). */
static inline bool on_fake_runtime(void) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return false;
  return strcmp(prop.name, "cudapool fake device") == 0;
}

/* On the simulated runtime (kernels are no-ops) a test program exits at once
 * (true: skip), unless CUDAPOOL_TEST_ON_FAKE=1: then it runs with kernel
 * results unchecked, which still exercises the API calls, the error codes and
 * the host-side checks. Sets *fake. */
static inline bool skip_on_fake(const char *program, bool *fake) {
  *fake = on_fake_runtime();
  if (!*fake) return false;
  const char *e = getenv("CUDAPOOL_TEST_ON_FAKE");
  if (!e || strcmp(e, "1") != 0) {
    printf("INFO %s: on the simulated runtime: skipped (CUDAPOOL_TEST_ON_FAKE=1 runs it)\n",
           program);
    return true;
  }
  printf("INFO %s: on the simulated runtime: kernel results are not checked\n", program);
  return false;
}

/* Print an INFO header naming the device and the allocator in use. */
static inline void print_header(const char *program) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int dev = 0;
  cudaDeviceProp prop;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaGetDeviceProperties(&prop, dev));
  printf("INFO %s: device %d \"%s\" sm_%d%d, allocator=%s\n", program, dev,
         prop.name, prop.major, prop.minor, allocator_name());
}

/* ---- host clock --------------------------------------------------------- */

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- deterministic data ------------------------------------------------- */

/* The word every buffer holds at index i for a given seed: a cheap hash so
 * that a block overwritten by another buffer's fill is always noticed. */
__host__ __device__ static inline uint32_t pattern(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + (uint64_t)seed * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return (uint32_t)x ^ seed;
}

__global__ static void fill_kernel(uint32_t *buf, size_t n, uint32_t seed) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = pattern(i, seed);
}

/* Adds to *mismatches the number of words that differ from pattern(seed). */
__global__ static void verify_kernel(const uint32_t *buf, size_t n, uint32_t seed,
                                     unsigned long long *mismatches) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  unsigned long long bad = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    bad += (buf[i] != pattern(i, seed));
  if (bad) atomicAdd(mismatches, bad);
}

/* Adds to *mismatches the number of bytes that differ from value. */
__global__ static void verify_bytes_kernel(const uint8_t *buf, size_t n, uint8_t value,
                                           unsigned long long *mismatches) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  unsigned long long bad = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    bad += (buf[i] != value);
  if (bad) atomicAdd(mismatches, bad);
}

/* Device nanosecond clock (%globaltimer). */
__device__ static inline uint64_t globaltimer_ns(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* Busy-waits for spin_ns. The loop counts clock64() cycles and ends on the
 * global nanosecond timer: SM clocks change with boost, the global timer
 * does not. */
__device__ static inline void spin_for_ns(uint64_t spin_ns) {
  uint64_t start = globaltimer_ns();
  while (globaltimer_ns() - start < spin_ns) {
    long long c0 = clock64();
    while (clock64() - c0 < 2000) { }
  }
}

/* Busy-waits for spin_ns, then checks buf against pattern(seed). The spin
 * keeps a window open in which a wrongly reused block gets overwritten. */
__global__ static void spin_then_verify_kernel(const uint32_t *buf, size_t n, uint32_t seed,
                                               uint64_t spin_ns,
                                               unsigned long long *mismatches) {
  spin_for_ns(spin_ns);
  size_t stride = (size_t)gridDim.x * blockDim.x;
  unsigned long long bad = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    bad += (buf[i] != pattern(i, seed));
  if (bad) atomicAdd(mismatches, bad);
}

/* Grid for a grid-stride loop over n words. */
static inline unsigned grid_for(size_t n, unsigned block = 256, unsigned max_grid = 1024) {
  size_t g = (n + block - 1) / block;
  if (g < 1) g = 1;
  if (g > max_grid) g = max_grid;
  return (unsigned)g;
}

/* ---- small deterministic RNG (xorshift64*) ------------------------------ */

struct rng_t {
  uint64_t s;
};

static inline uint64_t rng_next(rng_t *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545F4914F6CDD1Dull;
}

static inline rng_t rng_seed(uint64_t seed) {
  rng_t r = {seed * 0x9E3779B97F4A7C15ull + 0x1234567ull};
  if (r.s == 0) r.s = 1;
  rng_next(&r);
  return r;
}

/* Uniform double in [0, 1). */
static inline double rng_unit(rng_t *r) { return (double)(rng_next(r) >> 11) / 9007199254740992.0; }

/* Log-uniform size in [lo, hi], rounded down to a multiple of align. */
static inline size_t rng_size(rng_t *r, size_t lo, size_t hi, size_t align) {
  double l = log((double)lo), h = log((double)hi);
  size_t s = (size_t)exp(l + (h - l) * rng_unit(r));
  s -= s % align;
  if (s < lo) s = lo;
  if (s > hi) s = hi - hi % align;
  return s;
}

/* Median of an array of doubles (sorts it). */
static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static inline double median(double *v, size_t n) {
  if (n == 0) return 0.0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* CUDAPOOL_GPU_COMMON_CUH */
