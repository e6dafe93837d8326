/* peer_race.cu: a block of device 0 read and written through peer access by a
 * kernel on device 1, freed and allocated again on device 0 while that kernel
 * runs (issue 31, item d; docs/DESIGN.md, "Peer access").
 *
 * Device 1 enables peer access to device 0. Each iteration: device 0
 * allocates A and fills it; a kernel on a stream R of device 1 spins, checks
 * that A still holds its data (the reader's count) and then writes A again
 * (a late peer write); the host frees A on device 0 at once, allocates B of
 * the same size on device 0 (under a pool likely A's memory) and fills it on
 * a stream W of device 0. After both devices are synchronised, the reader
 * must have seen its data, and B must hold B's data (the peer's late write
 * must not have landed in it).
 *
 * Natively, whether this holds is what cudaFree does: it waits for the
 * device whose memory it frees, and whether that includes a peer's kernel
 * reading the memory is the question. The program measures it: right after
 * cudaFree returns it asks whether R's kernel had finished
 * ("free_waited_for_peer"). Under cudapool the free returns at once and
 * the reuse must be ordered by the pool (cudaDeviceEnablePeerAccess hooked:
 * device 0's barriers cover device 1's streams).
 *
 * Cases: R on device 1 is its legacy stream or a non-blocking stream; W on
 * device 0 is its legacy stream with no stream created on device 0 (the
 * freeing thread's own reuse), or a non-blocking stream of device 0 (a
 * barrier's reuse). Output:
 *   SKIP peer_race: why            fewer than 2 GPUs, or no peer access 1 -> 0
 *   PASS/FAIL peer_r-<R>_w-<W>     the reader and B intact in every iteration
 *   INFO peer_r-<R>_w-<W>: free_waited_for_peer=k/n reused=r/n free_ms=...
 *   INFO peer_race: free_waited_for_peer=K/N (every case)
 * Usage: peer_race [--loops N] [--spin-ms MS]; exit 1 if a case failed. */
#include "gpu_common.cuh"

/* The reader: spins, counts the words of buf that are not its data, then
 * writes every word again (what a peer kernel that reads and writes a buffer
 * does last). */
__global__ static void spin_verify_write_kernel(uint32_t *buf, size_t n, uint32_t seed, uint64_t spin_ns,
                                                unsigned long long *mismatches) {
  spin_for_ns(spin_ns);
  size_t stride = (size_t)gridDim.x * blockDim.x;
  unsigned long long bad = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    bad += (buf[i] != pattern(i, seed));
    buf[i] = pattern(i, seed ^ 0x5a5a5a5au);
  }
  if (bad) atomicAdd(mismatches, bad);
}

static const size_t k_bytes = 8u << 20;
static unsigned long long *g_reader_bad; /* on device 1 */
static unsigned long long *g_writer_bad; /* on device 0 */

struct tally {
  int free_waited, reused, n;
  double free_ms;
};

static bool peer_once(cudaStream_t r, cudaStream_t w, int iter, uint64_t spin_ns, tally *t) {
  size_t words = k_bytes / 4;
  uint32_t seed_a = 0x2000u + 2u * (uint32_t)iter, seed_b = seed_a + 1u;
  TRY(cudaSetDevice(0));
  uint32_t *a = NULL;
  TRY(cudaMalloc(&a, k_bytes));
  fill_kernel<<<grid_for(words), 256>>>(a, words, seed_a);
  TRY_LAUNCH();
  TRY(cudaDeviceSynchronize());

  TRY(cudaSetDevice(1));
  cudaEvent_t done;
  TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  TRY(cudaMemsetAsync(g_reader_bad, 0, sizeof *g_reader_bad, r));
  spin_verify_write_kernel<<<64, 256, 0, r>>>(a, words, seed_a, spin_ns, g_reader_bad);
  TRY_LAUNCH();
  TRY(cudaEventRecord(done, r));

  TRY(cudaSetDevice(0));
  uint64_t t0 = now_ns();
  TRY(cudaFree(a)); /* the peer's kernel is still spinning */
  t->free_ms += (double)(now_ns() - t0) / 1e6;
  TRY(cudaSetDevice(1));
  cudaError_t q = cudaEventQuery(done);
  EXPECT(q == cudaSuccess || q == cudaErrorNotReady, "cudaEventQuery -> %s", cudaGetErrorName(q));
  t->free_waited += q == cudaSuccess;
  TRY(cudaSetDevice(0));

  uint32_t *b = NULL;
  TRY(cudaMalloc(&b, k_bytes));
  t->reused += b == a;
  fill_kernel<<<grid_for(words), 256, 0, w>>>(b, words, seed_b);
  TRY_LAUNCH();

  TRY(cudaSetDevice(1));
  TRY(cudaDeviceSynchronize());
  TRY(cudaEventDestroy(done));
  unsigned long long reader_bad = 0;
  TRY(cudaMemcpy(&reader_bad, g_reader_bad, sizeof reader_bad, cudaMemcpyDeviceToHost));
  TRY(cudaSetDevice(0));
  TRY(cudaDeviceSynchronize());
  TRY(cudaMemset(g_writer_bad, 0, sizeof *g_writer_bad));
  verify_kernel<<<grid_for(words), 256>>>(b, words, seed_b, g_writer_bad);
  TRY_LAUNCH();
  unsigned long long writer_bad = 0;
  TRY(cudaMemcpy(&writer_bad, g_writer_bad, sizeof writer_bad, cudaMemcpyDeviceToHost));
  TRY(cudaFree(b));
  t->n++;
  EXPECT(reader_bad == 0 && writer_bad == 0,
         "iteration %d: the peer's reader saw %llu of %zu words of its freed buffer overwritten, and B has "
         "%llu words not its own (the peer's late write; B %s A)",
         iter, reader_bad, words, writer_bad, b == a ? "==" : "!=");
  return true;
}

int main(int argc, char **argv) {
  int loops = 3;
  double spin_ms = 150.0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--loops") && i + 1 < argc) loops = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spin-ms") && i + 1 < argc) spin_ms = atof(argv[++i]);
  }
  print_header("peer_race");
  bool fake = false;
  if (skip_on_fake("peer_race", &fake)) return 0;
  int n = 0, can = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (n < 2) {
    printf("SKIP peer_race: %d GPU(s), two are needed\n", n);
    return 0;
  }
  CHECK(cudaDeviceCanAccessPeer(&can, 1, 0));
  if (!can) {
    printf("SKIP peer_race: device 1 cannot access device 0's memory (cudaDeviceCanAccessPeer)\n");
    return 0;
  }
  CHECK(cudaSetDevice(1));
  CHECK(cudaDeviceEnablePeerAccess(0, 0));
  cudaStream_t r_nonblocking;
  CHECK(cudaStreamCreateWithFlags(&r_nonblocking, cudaStreamNonBlocking));
  CHECK(cudaMalloc(&g_reader_bad, sizeof *g_reader_bad));
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&g_writer_bad, sizeof *g_writer_bad));

  uint64_t spin_ns = (uint64_t)(spin_ms * 1e6);
  int waited = 0, total = 0;
  /* The legacy writer first: no stream is created on device 0 until the
   * non-blocking writer's cases (a live stream turns the freeing thread's
   * own reuse off). */
  for (int wk = 0; wk < 2; wk++) {
    cudaStream_t w = cudaStreamLegacy;
    if (wk == 1) CHECK(cudaStreamCreateWithFlags(&w, cudaStreamNonBlocking));
    for (int rk = 0; rk < 2; rk++) {
      cudaStream_t r = rk == 0 ? cudaStreamLegacy : r_nonblocking;
      char name[96];
      snprintf(name, sizeof name, "peer_r-%s_w-%s", rk == 0 ? "legacy" : "nonblocking",
               wk == 0 ? "legacy" : "nonblocking");
      g_why[0] = '\0';
      tally t = {0, 0, 0, 0.0};
      bool ok = true;
      for (int it = 0; it < loops && ok; it++) ok = peer_once(r, w, it, spin_ns, &t);
      printf("INFO %s: free_waited_for_peer=%d/%d reused=%d/%d free_ms=%.1f\n", name, t.free_waited, t.n,
             t.reused, t.n, t.n ? t.free_ms / t.n : 0.0);
      report_result(name, ok);
      waited += t.free_waited;
      total += t.n;
    }
    if (wk == 1) CHECK(cudaStreamDestroy(w));
  }
  printf("INFO peer_race: free_waited_for_peer=%d/%d\n", waited, total);
  return g_failures ? 1 : 0;
}
