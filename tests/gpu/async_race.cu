/* async_race.cu: the early-reuse race for stream-ordered allocations
 * (cudaMallocAsync / cudaFreeAsync), served by cudapool when it is loaded.
 *
 * A buffer A is allocated on stream R, filled, and read by a kernel on R
 * that spins a while and then checks A still holds its data; the host frees
 * A in stream order on R right after launching it (the reader is ordered
 * before the free, as the API requires) and at once allocates B of the same
 * size on stream W and overwrites it there, from the same host thread or
 * another. The reader must still see its own data: natively the pool hands
 * A's memory to W only once the free on R is reached; under cudapool B may
 * be A at once when W is R (R's order protects it), and on any other
 * stream only after a barrier. Iterations also cross the two kinds of
 * calls: A from cudaMalloc freed with cudaFree (which natively waits for the
 * device, so the reader finishes first) and B from cudaMallocAsync; A
 * stream-ordered and B from cudaMalloc. A pointer from cudaMallocAsync is
 * never freed with cudaFree while a kernel still reads it: CUDA does not
 * wait for the stream then (measured on the H200: the next cudaMallocAsync
 * got the memory at once and overwrote it under the reader), so a program
 * doing it is wrong natively and there is nothing to compare. A writer in
 * another thread synchronises its per-thread default stream before the
 * thread ends (that stream goes away with its thread).
 *
 * Every combination of reader and writer stream runs: non-blocking,
 * blocking, the per-thread default stream and the legacy one; writer in the
 * same or in another host thread. Each case loops over buffer sizes (64 MiB,
 * 4 KiB, 1 MiB) and the free/alloc kinds. A native run and a run under the
 * shim print the same PASS lines (scripts/gpu-check test compares them).
 *
 * Usage: async_race [--loops N] [--spin-ms MS] [FILTER] */
#include "gpu_common.cuh"

#include <string>
#include <thread>

enum stream_kind { SK_NONBLOCKING, SK_BLOCKING, SK_PER_THREAD, SK_LEGACY, SK_COUNT };
static const char *const kind_name[SK_COUNT] = {"nonblocking", "blocking", "perthread", "legacy"};

static cudaStream_t g_reader_stream[SK_COUNT], g_writer_stream[SK_COUNT];
static unsigned long long *g_counters; /* [0] reader mismatches, [1] writer check */

static const size_t k_sizes[] = {64u << 20, 4u << 10, 1u << 20};

/* iter % 4: how A is allocated and freed (both stream-ordered or neither)
 * and how B is allocated. */
static bool frees_async(int iter) { return iter % 4 != 2; }
static bool allocs_async(int iter) { return iter % 4 != 3; }

static bool write_b(stream_kind wk, size_t bytes, int iter, uint32_t seed_b, void **out_b) {
  cudaStream_t w = g_writer_stream[wk];
  void *b = NULL;
  if (allocs_async(iter))
    TRY(cudaMallocAsync(&b, bytes, w));
  else
    TRY(cudaMalloc(&b, bytes));
  *out_b = b;
  size_t words = bytes / 4;
  if (iter % 2) {
    TRY(cudaMemsetAsync(b, 0xA5, bytes, w));
  } else {
    fill_kernel<<<grid_for(words), 256, 0, w>>>((uint32_t *)b, words, seed_b);
    TRY_LAUNCH();
  }
  return true;
}

static bool race_once(stream_kind rk, stream_kind wk, bool other_thread, int iter, uint64_t spin_ns,
                      int *reused) {
  cudaStream_t r = g_reader_stream[rk];
  size_t bytes = k_sizes[iter % 3];
  size_t words = bytes / 4;
  uint32_t seed_a = 0x2000u + 2u * (uint32_t)iter, seed_b = seed_a + 1u;

  TRY(cudaMemsetAsync(g_counters, 0, 2 * sizeof *g_counters, r));
  uint32_t *a = NULL;
  if (frees_async(iter))
    TRY(cudaMallocAsync((void **)&a, bytes, r));
  else
    TRY(cudaMalloc((void **)&a, bytes));
  fill_kernel<<<grid_for(words), 256, 0, r>>>(a, words, seed_a);
  TRY_LAUNCH();
  spin_then_verify_kernel<<<64, 256, 0, r>>>(a, words, seed_a, spin_ns, &g_counters[0]);
  TRY_LAUNCH();
  if (frees_async(iter))
    TRY(cudaFreeAsync(a, r)); /* the reader is still spinning, ordered before the free */
  else
    TRY(cudaFree(a));

  void *b = NULL;
  if (other_thread) {
    bool ok = false;
    std::string why;
    std::thread t([&] {
      ok = write_b(wk, bytes, iter, seed_b, &b);
      if (ok && wk == SK_PER_THREAD && cudaStreamSynchronize(cudaStreamPerThread) != cudaSuccess) {
        set_why("cudaStreamSynchronize(cudaStreamPerThread) failed in the writer thread");
        ok = false;
      }
      if (!ok) why = g_why;
    });
    t.join();
    if (!ok) {
      set_why("writer thread: %s", why.c_str());
      return false;
    }
  } else if (!write_b(wk, bytes, iter, seed_b, &b)) {
    return false;
  }
  if ((void *)a == b) (*reused)++;

  TRY(cudaDeviceSynchronize());
  unsigned long long reader_bad = 0;
  TRY(cudaMemcpy(&reader_bad, &g_counters[0], sizeof reader_bad, cudaMemcpyDeviceToHost));
  EXPECT(reader_bad == 0,
         "iteration %d (%zu bytes, %s free, %s alloc): the reader saw %llu of %zu words of its freed "
         "buffer overwritten (B %s A)",
         iter, bytes, frees_async(iter) ? "async" : "sync", allocs_async(iter) ? "async" : "sync", reader_bad,
         words, (void *)a == b ? "==" : "!=");
  if (iter % 2) {
    verify_bytes_kernel<<<grid_for(bytes), 256>>>((const uint8_t *)b, bytes, 0xA5, &g_counters[1]);
  } else {
    verify_kernel<<<grid_for(words), 256>>>((const uint32_t *)b, words, seed_b, &g_counters[1]);
  }
  TRY_LAUNCH();
  unsigned long long writer_bad = 0;
  TRY(cudaMemcpy(&writer_bad, &g_counters[1], sizeof writer_bad, cudaMemcpyDeviceToHost));
  EXPECT(writer_bad == 0, "iteration %d: %llu of the writer's words are wrong", iter, writer_bad);
  if (allocs_async(iter))
    TRY(cudaFreeAsync(b, cudaStreamLegacy));
  else
    TRY(cudaFree(b));
  TRY(cudaDeviceSynchronize());
  return true;
}

int main(int argc, char **argv) {
  int loops = 4;
  double spin_ms = 60.0;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--loops") && i + 1 < argc) loops = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spin-ms") && i + 1 < argc) spin_ms = atof(argv[++i]);
    else filter = argv[i];
  }
  print_header("async_race");
  bool fake = false;
  if (skip_on_fake("async_race", &fake)) return 0;
  CHECK(cudaFree(0));
  CHECK(cudaStreamCreateWithFlags(&g_reader_stream[SK_NONBLOCKING], cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&g_writer_stream[SK_NONBLOCKING], cudaStreamNonBlocking));
  CHECK(cudaStreamCreate(&g_reader_stream[SK_BLOCKING]));
  CHECK(cudaStreamCreate(&g_writer_stream[SK_BLOCKING]));
  g_reader_stream[SK_PER_THREAD] = g_writer_stream[SK_PER_THREAD] = cudaStreamPerThread;
  g_reader_stream[SK_LEGACY] = g_writer_stream[SK_LEGACY] = cudaStreamLegacy;
  CHECK(cudaMalloc(&g_counters, 2 * sizeof *g_counters));

  uint64_t spin_ns = (uint64_t)(spin_ms * 1e6);
  int total_reused = 0;
  for (int other = 0; other < 2; other++) {
    for (int rk = 0; rk < SK_COUNT; rk++) {
      for (int wk = 0; wk < SK_COUNT; wk++) {
        char name[128];
        snprintf(name, sizeof name, "async_race_r-%s_w-%s_%s", kind_name[rk], kind_name[wk],
                 other ? "otherthread" : "samethread");
        if (filter && !strstr(name, filter)) continue;
        g_why[0] = '\0';
        int reused = 0;
        uint64_t t0 = now_ns();
        bool ok = true;
        for (int it = 0; it < loops && ok; it++)
          ok = race_once((stream_kind)rk, (stream_kind)wk, other != 0, it, spin_ns, &reused);
        total_reused += reused;
        printf("INFO %s: the new buffer took the freed one's address in %d of %d iterations; %.1f ms\n", name,
               reused, loops, (now_ns() - t0) / 1e6);
        report_result(name, ok);
      }
    }
  }
  CHECK(cudaFree(g_counters));
  for (int k = SK_NONBLOCKING; k <= SK_BLOCKING; k++) {
    CHECK(cudaStreamDestroy(g_reader_stream[k]));
    CHECK(cudaStreamDestroy(g_writer_stream[k]));
  }
  printf("INFO async_race: %d failed; addresses reused %d times (allocator=%s)\n", g_failures, total_reused,
         allocator_name());
  return g_failures ? 1 : 0;
}
