/* fill.cu: filling the GPU, then reusing the memory for one large buffer.
 *
 * Allocates 1 GiB pieces until cudaMalloc fails (it must fail with
 * cudaErrorMemoryAllocation, visible once to cudaGetLastError), touches each
 * piece, frees them all, then allocates one buffer of 90% of the total that
 * cudaMemGetInfo reports. Under cudapool the freed pieces sit in its cache, so
 * this needs its out-of-memory path to give cached segments back to the
 * driver and retry. Then fills again with 1 GiB pieces: about as many must fit.
 *
 * With CUDAPOOL_LIMIT set, cudapool reports the limit as the total, so the
 * same program checks that no more than the limit was handed out; natively
 * that check holds trivially and the output is the same.
 *
 * Usage: fill [FILTER] */
#include "gpu_common.cuh"

#include <vector>

static const size_t GiB = (size_t)1 << 30;

/* Allocates 1 GiB pieces until cudaMalloc fails; returns them in pieces. */
static bool fill_pieces(std::vector<void *> *pieces, size_t total, const char *test) {
  const size_t max_pieces = total / GiB + 16; /* a bound in case nothing fails */
  cudaError_t e = cudaSuccess;
  while (pieces->size() < max_pieces) {
    void *p = NULL;
    e = cudaMalloc(&p, GiB);
    if (e != cudaSuccess) break;
    pieces->push_back(p);
    /* Touch it so the memory is real, not just reserved. */
    TRY(cudaMemsetAsync(p, (int)(pieces->size() & 0xff), GiB, cudaStreamLegacy));
  }
  TRY(cudaDeviceSynchronize());
  EXPECT(e != cudaSuccess, "%zu pieces of 1 GiB fitted in a %zu-byte device: no failure",
         pieces->size(), total);
  cudaError_t last = cudaGetLastError(), last2 = cudaGetLastError();
  observed(test, "malloc_when_full=%s last_error=%s then=%s", cudaGetErrorName(e),
           cudaGetErrorName(last), cudaGetErrorName(last2));
  EXPECT(e == cudaErrorMemoryAllocation, "cudaMalloc on a full device returned %s",
         cudaGetErrorName(e));
  EXPECT(last == cudaErrorMemoryAllocation && last2 == cudaSuccess,
         "cudaGetLastError after the failure returned %s then %s", cudaGetErrorName(last),
         cudaGetErrorName(last2));
  EXPECT(pieces->size() * GiB <= total, "%zu GiB handed out but the device reports %zu bytes",
         pieces->size(), total);
  EXPECT(!pieces->empty(), "not even one 1 GiB piece fitted");
  return true;
}

static bool free_all(std::vector<void *> *pieces) {
  for (void *p : *pieces) TRY(cudaFree(p));
  pieces->clear();
  return true;
}

static size_t g_first_count;

static bool t_fill_1g_pieces(void) {
  size_t free_b = 0, total = 0;
  TRY(cudaMemGetInfo(&free_b, &total));
  printf("INFO fill: cudaMemGetInfo free %.2f GiB total %.2f GiB\n", (double)free_b / GiB,
         (double)total / GiB);
  std::vector<void *> pieces;
  uint64_t t0 = now_ns();
  bool ok = fill_pieces(&pieces, total, "fill_1g_pieces");
  g_first_count = pieces.size();
  printf("INFO fill: %zu pieces of 1 GiB in %.1f ms\n", pieces.size(), (now_ns() - t0) / 1e6);
  if (!free_all(&pieces)) return false;
  return ok;
}

static bool t_fill_then_90_percent(void) {
  size_t free_b = 0, total = 0;
  TRY(cudaMemGetInfo(&free_b, &total));
  size_t big = total / 10 * 9;
  big -= big % (2 << 20);
  void *p = NULL;
  uint64_t t0 = now_ns();
  cudaError_t e = cudaMalloc(&p, big);
  observed("fill_then_90_percent", "malloc_90_percent=%s", cudaGetErrorName(e));
  EXPECT(e == cudaSuccess, "cudaMalloc of %zu bytes (90%% of %zu) after freeing all: %s", big,
         total, cudaGetErrorName(e));
  printf("INFO fill: one buffer of %.2f GiB in %.1f ms\n", (double)big / GiB,
         (now_ns() - t0) / 1e6);
  TRY(cudaMemset(p, 0x5A, big));
  /* Check the last bytes are there. */
  unsigned char tail[16];
  TRY(cudaMemcpy(tail, (char *)p + big - sizeof tail, sizeof tail, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < sizeof tail; i++)
    EXPECT(tail[i] == 0x5A, "byte %zu from the end reads %#x", sizeof tail - i, tail[i]);
  TRY(cudaFree(p));
  return true;
}

static bool t_fill_refill(void) {
  size_t free_b = 0, total = 0;
  TRY(cudaMemGetInfo(&free_b, &total));
  std::vector<void *> pieces;
  bool ok = fill_pieces(&pieces, total, "fill_refill");
  size_t n = pieces.size();
  printf("INFO fill: refilled %zu pieces (first fill %zu)\n", n, g_first_count);
  if (!free_all(&pieces)) return false;
  if (!ok) return false;
  EXPECT(g_first_count == 0 || n + 2 >= g_first_count,
         "only %zu pieces of 1 GiB fitted after the 90%% buffer, against %zu at first", n,
         g_first_count);
  return true;
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  print_header("fill");
  if (on_fake_runtime()) {
    printf("INFO fill: on the simulated runtime: skipped\n");
    return 0;
  }
  CHECK(cudaFree(0));
  run_test("fill_1g_pieces", t_fill_1g_pieces, filter);
  run_test("fill_then_90_percent", t_fill_then_90_percent, filter);
  run_test("fill_refill", t_fill_refill, filter);
  printf("INFO fill: %d failed\n", g_failures);
  return g_failures ? 1 : 0;
}
