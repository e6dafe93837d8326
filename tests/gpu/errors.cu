/* errors.cu: the error codes a program sees, which must be exactly native
 * under cudapool.
 *
 * cudaMalloc(&p, 0) gives success and NULL; cudaFree(NULL) succeeds; an
 * interior pointer, a double free and a bogus pointer give
 * cudaErrorInvalidValue, visible once to cudaGetLastError, and leave the
 * allocator untouched; cudaMalloc(2^50) gives cudaErrorMemoryAllocation,
 * visible once; a pointer from cudaMallocPitch is freed by cudaFree. Stream
 * capture: in global and thread-local mode cudaMalloc/cudaFree fail with
 * cudaErrorStreamCaptureUnsupported and the capture is invalidated; in relaxed
 * mode both work and the graph launches.
 *
 * Each test prints OBSERVED lines with the codes it saw; scripts/gpu-check
 * requires them to be identical natively and under the shim, also where the
 * test does not decide on them (what other threads see during a capture).
 *
 * On cudapool's simulated runtime (kernels are no-ops) it exits at once,
 * unless CUDAPOOL_TEST_ON_FAKE=1: then it runs with kernel results unchecked,
 * which checks the error-code expectations against the simulator.
 *
 * Usage: errors [FILTER] */
#include "gpu_common.cuh"

#include <thread>

#define NAME(e) cudaGetErrorName(e)

/* Both calls of "visible once": the first returns err, the second success. */
static bool expect_last_error_once(cudaError_t want, const char *test) {
  cudaError_t first = cudaGetLastError();
  cudaError_t second = cudaGetLastError();
  observed(test, "last_error=%s then=%s", NAME(first), NAME(second));
  EXPECT(first == want, "cudaGetLastError returned %s, expected %s", NAME(first), NAME(want));
  EXPECT(second == cudaSuccess, "a second cudaGetLastError returned %s, expected success",
         NAME(second));
  return true;
}

static bool g_fake; /* simulated runtime: kernels do nothing */

/* Writes a pattern into p (bytes long), reads it back, checks it. */
static bool buffer_works(void *p, size_t bytes) {
  static unsigned long long *counter = NULL;
  if (!counter) TRY(cudaMalloc(&counter, sizeof *counter));
  TRY(cudaMemset(counter, 0, sizeof *counter));
  size_t words = bytes / 4;
  fill_kernel<<<grid_for(words), 256>>>((uint32_t *)p, words, 77);
  TRY_LAUNCH();
  verify_kernel<<<grid_for(words), 256>>>((const uint32_t *)p, words, 77, counter);
  TRY_LAUNCH();
  unsigned long long bad = 1;
  TRY(cudaMemcpy(&bad, counter, sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT(bad == 0 || g_fake, "%llu words of a live buffer read back wrong", bad);
  return true;
}

static bool overlaps(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + bn && y < x + an;
}

static bool t_malloc_zero(void) {
  void *p = (void *)0x1;
  cudaError_t e = cudaMalloc(&p, 0);
  observed("malloc_zero", "malloc=%s ptr_null=%d", NAME(e), p == NULL);
  EXPECT_ERR(e, cudaSuccess);
  EXPECT(p == NULL, "cudaMalloc(&p, 0) set p to %p, expected NULL", p);
  cudaError_t f = cudaFree(p);
  EXPECT_ERR(f, cudaSuccess);
  return expect_last_error_once(cudaSuccess, "malloc_zero");
}

static bool t_free_null(void) {
  cudaError_t e = cudaFree(NULL);
  observed("free_null", "free=%s", NAME(e));
  EXPECT_ERR(e, cudaSuccess);
  return expect_last_error_once(cudaSuccess, "free_null");
}

static bool t_free_interior(void) {
  const size_t bytes = 1 << 20;
  char *p = NULL;
  TRY(cudaMalloc(&p, bytes));
  cudaError_t e = cudaFree(p + 256);
  observed("free_interior", "free=%s", NAME(e));
  EXPECT_ERR(e, cudaErrorInvalidValue);
  if (!expect_last_error_once(cudaErrorInvalidValue, "free_interior")) return false;
  /* The allocator is untouched: p still works and is not handed out again. */
  if (!buffer_works(p, bytes)) return false;
  char *q = NULL;
  TRY(cudaMalloc(&q, bytes));
  EXPECT(!overlaps(p, bytes, q, bytes), "a new buffer %p overlaps the live one %p", q, p);
  TRY(cudaFree(q));
  TRY(cudaFree(p));
  return true;
}

static bool t_double_free(void) {
  const size_t bytes = 64 << 10;
  void *p = NULL;
  TRY(cudaMalloc(&p, bytes));
  TRY(cudaFree(p));
  cudaError_t e = cudaFree(p);
  observed("double_free", "second_free=%s", NAME(e));
  EXPECT_ERR(e, cudaErrorInvalidValue);
  if (!expect_last_error_once(cudaErrorInvalidValue, "double_free")) return false;
  /* The block must not have been put in the cache twice. */
  void *q1 = NULL, *q2 = NULL;
  TRY(cudaMalloc(&q1, bytes));
  TRY(cudaMalloc(&q2, bytes));
  EXPECT(!overlaps(q1, bytes, q2, bytes), "two live buffers overlap: %p and %p", q1, q2);
  TRY(cudaFree(q1));
  TRY(cudaFree(q2));
  return true;
}

static bool t_free_bogus(void) {
  cudaError_t e = cudaFree((void *)0x12345);
  observed("free_bogus", "free=%s", NAME(e));
  EXPECT_ERR(e, cudaErrorInvalidValue);
  return expect_last_error_once(cudaErrorInvalidValue, "free_bogus");
}

static bool t_malloc_huge(void) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, (size_t)1 << 50);
  observed("malloc_huge", "malloc=%s", NAME(e));
  EXPECT_ERR(e, cudaErrorMemoryAllocation);
  if (!expect_last_error_once(cudaErrorMemoryAllocation, "malloc_huge")) return false;
  /* Allocation works again afterwards. */
  void *q = NULL;
  TRY(cudaMalloc(&q, 1 << 20));
  if (!buffer_works(q, 1 << 20)) return false;
  TRY(cudaFree(q));
  return true;
}

/* A pointer from another allocation function is freed by cudaFree. */
static bool t_free_foreign_pitch(void) {
  void *p = NULL;
  size_t pitch = 0;
  TRY(cudaMallocPitch(&p, &pitch, 1000, 100));
  cudaError_t interior = cudaFree((char *)p + 512);
  cudaError_t last = cudaGetLastError();
  cudaError_t whole = cudaFree(p);
  observed("free_foreign_pitch", "interior=%s last=%s whole=%s", NAME(interior), NAME(last),
           NAME(whole));
  EXPECT_ERR(interior, cudaErrorInvalidValue);
  EXPECT_ERR(last, cudaErrorInvalidValue);
  EXPECT_ERR(whole, cudaSuccess);
  return expect_last_error_once(cudaSuccess, "free_foreign_pitch");
}

/* Capture in a prohibiting mode, then cudaMalloc (or cudaFree of a live
 * buffer) on the capturing thread or on another one. */
enum capture_op { OP_MALLOC, OP_FREE };

static bool capture_case(const char *name, cudaStreamCaptureMode mode, capture_op op,
                         bool other_thread, bool must_fail) {
  cudaStream_t s;
  TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint32_t *buf = NULL;
  TRY(cudaMalloc(&buf, 4096));
  void *victim = NULL; /* freed during the capture (OP_FREE) */
  TRY(cudaMalloc(&victim, 1 << 20));
  TRY(cudaDeviceSynchronize());

  TRY(cudaStreamBeginCapture(s, mode));
  fill_kernel<<<1, 256, 0, s>>>(buf, 1024, 5);
  cudaError_t launch = cudaGetLastError();
  void *p = NULL;
  cudaError_t call = cudaSuccess;
  auto act = [&] { call = op == OP_MALLOC ? cudaMalloc(&p, 1 << 20) : cudaFree(victim); };
  if (other_thread) {
    std::thread t(act);
    t.join();
  } else {
    act();
  }
  cudaGraph_t g = NULL;
  cudaError_t end = cudaStreamEndCapture(s, &g);
  cudaError_t last = cudaGetLastError();
  cudaError_t last2 = cudaGetLastError();
  observed(name, "launch=%s %s=%s end_capture=%s graph_null=%d last_error=%s then=%s",
           NAME(launch), op == OP_MALLOC ? "malloc" : "free", NAME(call), NAME(end), g == NULL,
           NAME(last), NAME(last2));
  if (g) TRY(cudaGraphDestroy(g));
  cudaError_t sync = cudaStreamSynchronize(s);
  /* Whatever happened during the capture, the program can clean up after. */
  cudaError_t after = cudaSuccess;
  if (op == OP_MALLOC && call == cudaSuccess) after = cudaFree(p);
  cudaError_t victim_free = cudaSuccess;
  if (!(op == OP_FREE && call == cudaSuccess)) victim_free = cudaFree(victim);
  cudaError_t last3 = cudaGetLastError();
  observed(name, "sync=%s cleanup=%s victim_free=%s last_error=%s", NAME(sync), NAME(after),
           NAME(victim_free), NAME(last3));
  TRY(cudaFree(buf));
  TRY(cudaStreamDestroy(s));
  if (must_fail) {
    EXPECT(call == cudaErrorStreamCaptureUnsupported, "%s during the capture returned %s",
           op == OP_MALLOC ? "cudaMalloc" : "cudaFree", NAME(call));
    EXPECT(end == cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture returned %s",
           NAME(end));
  }
  return true;
}

static bool t_capture_global_malloc(void) {
  return capture_case("capture_global_malloc", cudaStreamCaptureModeGlobal, OP_MALLOC, false,
                      true);
}
static bool t_capture_global_free(void) {
  return capture_case("capture_global_free", cudaStreamCaptureModeGlobal, OP_FREE, false, true);
}
static bool t_capture_threadlocal_malloc(void) {
  return capture_case("capture_threadlocal_malloc", cudaStreamCaptureModeThreadLocal, OP_MALLOC,
                      false, true);
}
/* Other threads during a capture: decided by the native run (OBSERVED). */
static bool t_capture_global_malloc_otherthread(void) {
  return capture_case("capture_global_malloc_otherthread", cudaStreamCaptureModeGlobal,
                      OP_MALLOC, true, false);
}
static bool t_capture_threadlocal_malloc_otherthread(void) {
  return capture_case("capture_threadlocal_malloc_otherthread",
                      cudaStreamCaptureModeThreadLocal, OP_MALLOC, true, false);
}
static bool t_capture_global_free_otherthread(void) {
  return capture_case("capture_global_free_otherthread", cudaStreamCaptureModeGlobal, OP_FREE,
                      true, false);
}

/* Relaxed mode: cudaMalloc and cudaFree work, the capture succeeds and the
 * graph it made runs. */
static bool t_capture_relaxed(void) {
  const size_t words = 1 << 18;
  cudaStream_t s;
  TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint32_t *buf = NULL;
  TRY(cudaMalloc(&buf, words * 4));
  TRY(cudaMemset(buf, 0, words * 4));
  unsigned long long *counter = NULL;
  TRY(cudaMalloc(&counter, sizeof *counter));
  TRY(cudaMemset(counter, 0, sizeof *counter));
  TRY(cudaDeviceSynchronize());

  TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  fill_kernel<<<grid_for(words), 256, 0, s>>>(buf, words, 21);
  TRY_LAUNCH();
  void *q = NULL;
  cudaError_t m = cudaMalloc(&q, 1 << 20);
  cudaError_t f = m == cudaSuccess ? cudaFree(q) : cudaSuccess;
  verify_kernel<<<grid_for(words), 256, 0, s>>>(buf, words, 21, counter);
  TRY_LAUNCH();
  cudaGraph_t g = NULL;
  cudaError_t end = cudaStreamEndCapture(s, &g);
  observed("capture_relaxed", "malloc=%s free=%s end_capture=%s", NAME(m), NAME(f), NAME(end));
  EXPECT_ERR(m, cudaSuccess);
  EXPECT_ERR(f, cudaSuccess);
  EXPECT_ERR(end, cudaSuccess);
  EXPECT(g != NULL, "the capture made no graph");

  /* Nothing ran yet: the buffer is still zero. */
  uint32_t first = 1;
  TRY(cudaMemcpy(&first, buf, sizeof first, cudaMemcpyDeviceToHost));
  EXPECT(first == 0, "captured work ran before the graph was launched");
  cudaGraphExec_t exec;
  TRY(cudaGraphInstantiate(&exec, g, 0));
  TRY(cudaGraphLaunch(exec, s));
  TRY(cudaStreamSynchronize(s));
  unsigned long long bad = 1;
  TRY(cudaMemcpy(&bad, counter, sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT(bad == 0 || g_fake, "the graph's verify kernel counted %llu wrong words", bad);
  TRY(cudaMemcpy(&first, buf, sizeof first, cudaMemcpyDeviceToHost));
  EXPECT(first == pattern(0, 21) || g_fake, "the graph did not write the buffer");
  TRY(cudaGraphExecDestroy(exec));
  TRY(cudaGraphDestroy(g));
  TRY(cudaFree(counter));
  TRY(cudaFree(buf));
  TRY(cudaStreamDestroy(s));
  return expect_last_error_once(cudaSuccess, "capture_relaxed");
}

static bool t_no_error_left(void) {
  TRY(cudaDeviceSynchronize());
  return expect_last_error_once(cudaSuccess, "no_error_left");
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  print_header("errors");
  if (skip_on_fake("errors", &g_fake)) return 0;
  CHECK(cudaFree(0)); /* create the context */
  (void)cudaGetLastError();
  run_test("malloc_zero", t_malloc_zero, filter);
  run_test("free_null", t_free_null, filter);
  run_test("free_interior", t_free_interior, filter);
  run_test("double_free", t_double_free, filter);
  run_test("free_bogus", t_free_bogus, filter);
  run_test("malloc_huge", t_malloc_huge, filter);
  run_test("free_foreign_pitch", t_free_foreign_pitch, filter);
  run_test("capture_global_malloc", t_capture_global_malloc, filter);
  run_test("capture_global_free", t_capture_global_free, filter);
  run_test("capture_threadlocal_malloc", t_capture_threadlocal_malloc, filter);
  run_test("capture_global_malloc_otherthread", t_capture_global_malloc_otherthread, filter);
  run_test("capture_threadlocal_malloc_otherthread", t_capture_threadlocal_malloc_otherthread,
           filter);
  run_test("capture_global_free_otherthread", t_capture_global_free_otherthread, filter);
  run_test("capture_relaxed", t_capture_relaxed, filter);
  run_test("no_error_left", t_no_error_left, filter);
  printf("INFO errors: %d failed\n", g_failures);
  return g_failures ? 1 : 0;
}
