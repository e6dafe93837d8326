/* ptds_race.cu: per-thread default streams from two threads, no stream
 * created (issue 31, item 2).
 *
 * Thread U fills buffer A and launches a reader that spins, then checks A,
 * both on U's per-thread default stream (cudaStreamPerThread). The main
 * thread, after U's launches (host order: U is joined), frees A, allocates a
 * buffer B of the same size and overwrites it on its own per-thread stream,
 * with a kernel or a memset. Natively cudaFree waits for the device. Under a
 * pool the free returns at once; the program created no stream, so a pool
 * that only counts created streams would hand A back to the main thread by
 * its same-thread key, and the main thread's per-thread stream is not
 * ordered after U's: the reader would see B's data. The main thread touches
 * no per-thread stream before the write, and the counters are reset and read
 * on the legacy stream, so U's launches are the pool's only sign.
 *
 * On cudapool's simulated runtime it runs only with CUDAPOOL_TEST_ON_FAKE=1
 * (kernels are no-ops: it exercises the calls).
 * Usage: ptds_race [--loops N] [--spin-ms MS] [FILTER]
 * Prints PASS/FAIL per case (gpu_common.cuh); exit 1 if any failed. */
#include "gpu_common.cuh"

#include <string>
#include <thread>

static unsigned long long *g_counters; /* [0] reader mismatches, [1] writer check */

static const size_t k_sizes[] = {64u << 20, 4u << 10, 1u << 20};

static bool race_once(int iter, bool use_memset, uint64_t spin_ns, int *reused) {
  size_t bytes = k_sizes[iter % 3], words = bytes / 4;
  uint32_t seed_a = 0x2000u + 2u * (uint32_t)iter, seed_b = seed_a + 1u;
  TRY(cudaMemset(g_counters, 0, 2 * sizeof *g_counters)); /* legacy stream */
  uint32_t *a = NULL;
  TRY(cudaMalloc(&a, bytes));
  TRY(cudaDeviceSynchronize());

  bool ok = false;
  std::string why;
  std::thread u([&] {
    fill_kernel<<<grid_for(words), 256, 0, cudaStreamPerThread>>>(a, words, seed_a);
    cudaError_t rc = cudaGetLastError();
    if (rc == cudaSuccess) {
      spin_then_verify_kernel<<<64, 256, 0, cudaStreamPerThread>>>(a, words, seed_a, spin_ns, &g_counters[0]);
      rc = cudaGetLastError();
    }
    ok = rc == cudaSuccess;
    if (!ok) why = cudaGetErrorString(rc);
  });
  u.join();
  if (!ok) {
    set_why("reader thread: %s", why.c_str());
    return false;
  }
  TRY(cudaFree(a)); /* the reader is still spinning on U's per-thread stream */

  uint32_t *b = NULL;
  TRY(cudaMalloc(&b, bytes));
  if ((void *)b == (void *)a) (*reused)++;
  if (use_memset) {
    TRY(cudaMemsetAsync(b, 0xA5, bytes, cudaStreamPerThread));
  } else {
    fill_kernel<<<grid_for(words), 256, 0, cudaStreamPerThread>>>(b, words, seed_b);
    TRY_LAUNCH();
  }

  TRY(cudaDeviceSynchronize());
  unsigned long long reader_bad = 0;
  TRY(cudaMemcpy(&reader_bad, &g_counters[0], sizeof reader_bad, cudaMemcpyDeviceToHost));
  EXPECT(reader_bad == 0,
         "iteration %d (%zu bytes, writer %s): the reader saw %llu of %zu words of its freed buffer "
         "overwritten (B %s A)",
         iter, bytes, use_memset ? "memset" : "kernel", reader_bad, words, (void *)a == (void *)b ? "==" : "!=");
  if (use_memset) {
    verify_bytes_kernel<<<grid_for(bytes), 256>>>((const uint8_t *)b, bytes, 0xA5, &g_counters[1]);
  } else {
    verify_kernel<<<grid_for(words), 256>>>((const uint32_t *)b, words, seed_b, &g_counters[1]);
  }
  TRY_LAUNCH();
  unsigned long long writer_bad = 0;
  TRY(cudaMemcpy(&writer_bad, &g_counters[1], sizeof writer_bad, cudaMemcpyDeviceToHost));
  EXPECT(writer_bad == 0, "iteration %d: %llu of the writer's words are wrong", iter, writer_bad);
  TRY(cudaFree(b));
  return true;
}

int main(int argc, char **argv) {
  int loops = 3;
  double spin_ms = 80.0;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--loops") && i + 1 < argc) loops = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spin-ms") && i + 1 < argc) spin_ms = atof(argv[++i]);
    else filter = argv[i];
  }
  print_header("ptds_race");
  bool fake = false;
  if (skip_on_fake("ptds_race", &fake)) return 0;
  CHECK(cudaFree(0));
  CHECK(cudaMalloc(&g_counters, 2 * sizeof *g_counters));
  uint64_t spin_ns = (uint64_t)(spin_ms * 1e6);
  for (int use_memset = 0; use_memset < 2; use_memset++) {
    char name[128];
    snprintf(name, sizeof name, "ptds_race_r-perthread-otherthread_w-perthread-%s",
             use_memset ? "memset" : "kernel");
    if (filter && !strstr(name, filter)) continue;
    g_why[0] = '\0';
    int reused = 0;
    uint64_t t0 = now_ns();
    bool ok = true;
    for (int it = 0; it < loops && ok; it++) ok = race_once(it, use_memset != 0, spin_ns, &reused);
    printf("INFO %s: the new buffer took the freed one's address in %d of %d iterations; %.1f ms\n", name,
           reused, loops, (now_ns() - t0) / 1e6);
    report_result(name, ok);
  }
  CHECK(cudaFree(g_counters));
  printf("INFO ptds_race: %d failed\n", g_failures);
  return g_failures ? 1 : 0;
}
