/* race.cu: the early-reuse race, the heart of cudapool's reuse contract.
 *
 * A kernel on stream R spins for a while and then checks that buffer A still
 * holds the data written into it. The host frees A right after launching that
 * kernel, allocates a buffer B of the same size (under a pool this is likely
 * A's memory) and overwrites B on stream W, with a kernel or a memset, from
 * the same host thread or from another one. The reader must still see its own
 * data: natively cudaFree waits for the device; a pool must order W's work
 * after R's without waiting on the host.
 *
 * Every combination of reader and writer stream runs: a cudaStreamNonBlocking
 * stream, a blocking stream (cudaStreamCreate), the per-thread default stream
 * (cudaStreamPerThread) and the legacy default stream; writer in the same or
 * in another host thread. Each case loops over buffer sizes (64 MiB, 4 KiB,
 * 1 MiB) and writers (kernel, memset).
 *
 * On cudapool's simulated runtime it runs only with CUDAPOOL_TEST_ON_FAKE=1,
 * and then proves nothing about races (kernels are no-ops): it exercises the
 * calls. Usage: race [--loops N] [--spin-ms MS] [FILTER]
 * Prints PASS/FAIL per case (see gpu_common.cuh); exit 1 if any failed. */
#include "gpu_common.cuh"

#include <string>
#include <thread>

enum stream_kind { SK_NONBLOCKING, SK_BLOCKING, SK_PER_THREAD, SK_LEGACY, SK_COUNT };
static const char *const kind_name[SK_COUNT] = {"nonblocking", "blocking", "perthread", "legacy"};

static cudaStream_t g_reader_stream[SK_COUNT]; /* created once in main */
static cudaStream_t g_writer_stream[SK_COUNT];
static unsigned long long *g_counters; /* [0] reader mismatches, [1] writer check */

static const size_t k_sizes[] = {64u << 20, 4u << 10, 1u << 20};

/* The writer's half of one iteration: allocate B and overwrite it on W. */
static bool write_b(stream_kind wk, size_t bytes, bool use_memset, uint32_t seed_b,
                    void **out_b) {
  /* cudaStreamPerThread means the calling thread's own stream, so it is
   * resolved here, in the writer's thread. */
  cudaStream_t w = g_writer_stream[wk];
  void *b = NULL;
  TRY(cudaMalloc(&b, bytes));
  *out_b = b;
  size_t words = bytes / 4;
  if (use_memset) {
    TRY(cudaMemsetAsync(b, 0xA5, bytes, w));
  } else {
    fill_kernel<<<grid_for(words), 256, 0, w>>>((uint32_t *)b, words, seed_b);
    TRY_LAUNCH();
  }
  return true;
}

static bool race_once(stream_kind rk, stream_kind wk, bool other_thread, int iter,
                      uint64_t spin_ns, int *reused) {
  cudaStream_t r = g_reader_stream[rk];
  size_t bytes = k_sizes[iter % 3];
  size_t words = bytes / 4;
  bool use_memset = iter % 2 == 1;
  uint32_t seed_a = 0x1000u + 2u * (uint32_t)iter, seed_b = seed_a + 1u;

  TRY(cudaMemsetAsync(g_counters, 0, 2 * sizeof *g_counters, r));
  uint32_t *a = NULL;
  TRY(cudaMalloc(&a, bytes));
  fill_kernel<<<grid_for(words), 256, 0, r>>>(a, words, seed_a);
  TRY_LAUNCH();
  spin_then_verify_kernel<<<64, 256, 0, r>>>(a, words, seed_a, spin_ns, &g_counters[0]);
  TRY_LAUNCH();
  TRY(cudaFree(a)); /* the reader is still spinning on the device */

  void *b = NULL;
  if (other_thread) {
    bool ok = false;
    std::string why;
    std::thread t([&] {
      ok = write_b(wk, bytes, use_memset, seed_b, &b);
      if (!ok) why = g_why;
    });
    t.join();
    if (!ok) {
      set_why("writer thread: %s", why.c_str());
      return false;
    }
  } else if (!write_b(wk, bytes, use_memset, seed_b, &b)) {
    return false;
  }
  if ((void *)a == b) (*reused)++;

  TRY(cudaDeviceSynchronize());
  unsigned long long reader_bad = 0;
  TRY(cudaMemcpy(&reader_bad, &g_counters[0], sizeof reader_bad, cudaMemcpyDeviceToHost));
  EXPECT(reader_bad == 0,
         "iteration %d (%zu bytes, writer %s): the reader saw %llu of %zu words of its "
         "freed buffer overwritten (B %s A)",
         iter, bytes, use_memset ? "memset" : "kernel", reader_bad, words,
         (void *)a == b ? "==" : "!=");

  /* The writer's data must be intact too. */
  if (use_memset) {
    verify_bytes_kernel<<<grid_for(bytes), 256>>>((const uint8_t *)b, bytes, 0xA5,
                                                 &g_counters[1]);
  } else {
    verify_kernel<<<grid_for(words), 256>>>((const uint32_t *)b, words, seed_b, &g_counters[1]);
  }
  TRY_LAUNCH();
  unsigned long long writer_bad = 0;
  TRY(cudaMemcpy(&writer_bad, &g_counters[1], sizeof writer_bad, cudaMemcpyDeviceToHost));
  EXPECT(writer_bad == 0, "iteration %d: %llu of the writer's words are wrong", iter,
         writer_bad);
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
  print_header("race");
  bool fake = false;
  if (skip_on_fake("race", &fake)) return 0;
  CHECK(cudaFree(0));
  CHECK(cudaStreamCreateWithFlags(&g_reader_stream[SK_NONBLOCKING], cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&g_writer_stream[SK_NONBLOCKING], cudaStreamNonBlocking));
  CHECK(cudaStreamCreate(&g_reader_stream[SK_BLOCKING]));
  CHECK(cudaStreamCreate(&g_writer_stream[SK_BLOCKING]));
  g_reader_stream[SK_PER_THREAD] = g_writer_stream[SK_PER_THREAD] = cudaStreamPerThread;
  g_reader_stream[SK_LEGACY] = g_writer_stream[SK_LEGACY] = cudaStreamLegacy;
  CHECK(cudaMalloc(&g_counters, 2 * sizeof *g_counters));

  uint64_t spin_ns = (uint64_t)(spin_ms * 1e6);
  for (int other = 0; other < 2; other++) {
    for (int rk = 0; rk < SK_COUNT; rk++) {
      for (int wk = 0; wk < SK_COUNT; wk++) {
        char name[128];
        snprintf(name, sizeof name, "race_r-%s_w-%s_%s", kind_name[rk], kind_name[wk],
                 other ? "otherthread" : "samethread");
        if (filter && !strstr(name, filter)) continue;
        g_why[0] = '\0';
        int reused = 0;
        uint64_t t0 = now_ns();
        bool ok = true;
        for (int it = 0; it < loops && ok; it++)
          ok = race_once((stream_kind)rk, (stream_kind)wk, other != 0, it, spin_ns, &reused);
        printf("INFO %s: the new buffer took the freed one's address in %d of %d "
               "iterations; %.1f ms\n",
               name, reused, loops, (now_ns() - t0) / 1e6);
        report_result(name, ok);
      }
    }
  }

  CHECK(cudaFree(g_counters));
  CHECK(cudaStreamDestroy(g_reader_stream[SK_NONBLOCKING]));
  CHECK(cudaStreamDestroy(g_writer_stream[SK_NONBLOCKING]));
  CHECK(cudaStreamDestroy(g_reader_stream[SK_BLOCKING]));
  CHECK(cudaStreamDestroy(g_writer_stream[SK_BLOCKING]));
  printf("INFO race: %d failed\n", g_failures);
  return g_failures ? 1 : 0;
}
