/* planted.cu: memory errors planted on purpose, for compute-sanitizer's
 * memcheck with cudapool's NVTX description of its pool (CUDAPOOL_NVTX,
 * scripts/gpu-check nvtx). Not one of the tests that gpu-check's test
 * section compares natively and under the shim: two of its modes are
 * meant to be caught.
 *
 * Usage: planted overrun|uaf|clean|marks
 *   overrun  one float written just past a 400-byte block (100 floats) that
 *            lies between two live blocks of the same pooled segment: inside
 *            the 512 bytes cudapool rounds the block to, outside the 400
 *            the program asked for. Natively memcheck reports it; under the
 *            shim only when the block is an NVTX region of exactly its
 *            request (CUDAPOOL_NVTX on): otherwise the write lands inside
 *            the segment, one cudaMalloc as far as memcheck knows.
 *   uaf      a float written to a block after cudaFree, while its segment
 *            stays cached (a neighbour is still live). Reported natively;
 *            under the shim only with NVTX (a freed block has no region).
 *   clean    the same blocks used within their bounds: 0 errors anywhere.
 *   marks    for Nsight Systems (gpu-check nvtx's nsys row): what makes
 *            cudapool put its NVTX marks and ranges on a timeline: a block
 *            freed while a non-blocking stream's kernel writes it and asked
 *            for again (a barrier, with CUDAPOOL_LEARN_ORDER=0),
 *            cudapool_empty_cache (looked up at run time: natively absent)
 *            and a request no GPU can serve (out of memory). Prints
 *            "PLANTED marks: written" and the results; exit 0.
 * Prints "PLANTED MODE: written" once the planted kernel was launched and
 * synchronised (its error, if memcheck made the kernel fail, is INFO), and
 * PASS clean when the clean mode read back what it wrote. Exit 0, except
 * for a wrong read-back (1), a failed setup (1 or 2) or a bad argument (2). */
#include "gpu_common.cuh"

__global__ void write_at(float *p, size_t i, float v) { p[i] = v; }

/* Writes after spin_ns: the block stays pending (its fence not done) while
 * the host frees it and asks again, so that the reuse needs a barrier. */
__global__ void spin_then_write(float *p, uint64_t spin_ns) {
  spin_for_ns(spin_ns);
  p[0] = 1.0f;
}

/* The three neighbours of one small segment: before, the block, after. */
typedef struct blocks {
  float *before, *block, *after;
} blocks_t;

static bool g_fake; /* simulated runtime: kernels do nothing */

enum { BLOCK_FLOATS = 100 }; /* 400 bytes: cudapool rounds it to 512 */

static bool allocate(blocks_t *b) {
  TRY(cudaMalloc(&b->before, 256));
  TRY(cudaMalloc(&b->block, BLOCK_FLOATS * sizeof(float)));
  TRY(cudaMalloc(&b->after, 4096));
  printf("INFO planted: before=%p block=%p after=%p\n", (void *)b->before, (void *)b->block,
         (void *)b->after);
  return true;
}

/* Launch, then synchronise; under memcheck a planted kernel may fail. */
static void planted_write(const char *mode, float *p, size_t i) {
  write_at<<<1, 1>>>(p, i, 42.0f);
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  printf("INFO planted %s: launch=%s sync=%s\n", mode, cudaGetErrorName(launch), cudaGetErrorName(sync));
  printf("PLANTED %s: written\n", mode);
}

static bool clean(void) {
  blocks_t b;
  if (!allocate(&b)) return false;
  write_at<<<1, 1>>>(b.block, BLOCK_FLOATS - 1, 42.0f);
  TRY_LAUNCH();
  float got = 0;
  TRY(cudaMemcpy(&got, b.block + BLOCK_FLOATS - 1, sizeof got, cudaMemcpyDeviceToHost));
  EXPECT(g_fake || got == 42.0f, "read back %g, wrote 42", (double)got);
  TRY(cudaFree(b.block));
  TRY(cudaMalloc(&b.block, BLOCK_FLOATS * sizeof(float))); /* the same block again, maybe */
  write_at<<<1, 1>>>(b.block, 0, 7.0f);
  TRY_LAUNCH();
  TRY(cudaDeviceSynchronize());
  TRY(cudaFree(b.before));
  TRY(cudaFree(b.block));
  TRY(cudaFree(b.after));
  return true;
}

/* The marks mode (see the top). */
static int marks(void) {
  cudaStream_t s;
  float *p = NULL, *q = NULL;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  /* Its own 32 MiB segment (a 4 MiB block shared a 20 MiB one, and the
   * next request was served from the rest without a barrier: H100). */
  CHECK(cudaMalloc(&p, 32 << 20));
  spin_then_write<<<1, 1, 0, s>>>(p, 200000000ull);
  CHECK(cudaGetLastError());
  CHECK(cudaFree(p));
  CHECK(cudaMalloc(&q, 32 << 20)); /* nothing free fits, the pending block would: a barrier */
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaFree(q));
  int (*empty_cache)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudapool_empty_cache");
  int emptied = empty_cache ? empty_cache(0) : -1;
  void *huge = NULL;
  cudaError_t oom = cudaMalloc(&huge, (size_t)1 << 50);
  (void)cudaGetLastError();
  printf("INFO planted marks: empty_cache=%s (%d) huge=%s\n", empty_cache ? "found" : "absent", emptied,
         cudaGetErrorName(oom));
  printf("PLANTED marks: written\n");
  CHECK(cudaStreamDestroy(s));
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "overrun") != 0 && strcmp(mode, "uaf") != 0 && strcmp(mode, "clean") != 0 &&
      strcmp(mode, "marks") != 0) {
    fprintf(stderr, "usage: planted overrun|uaf|clean|marks\n");
    return 2;
  }
  print_header("planted");
  if (skip_on_fake("planted", &g_fake)) return 0;
  CHECK(cudaFree(0)); /* create the context */
  if (strcmp(mode, "marks") == 0) return marks();
  if (strcmp(mode, "clean") == 0) {
    run_test("clean", clean, NULL);
    return g_failures ? 1 : 0;
  }
  blocks_t b;
  if (!allocate(&b)) {
    printf("FAIL %s setup: %s\n", mode, g_why);
    return 1;
  }
  if (strcmp(mode, "overrun") == 0) {
    planted_write(mode, b.block, BLOCK_FLOATS);
  } else {
    CHECK(cudaFree(b.block));
    planted_write(mode, b.block, 0);
  }
  return 0;
}
