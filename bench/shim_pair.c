/* shim_pair.c: the cached cudaMalloc + cudaFree pair through the whole
 * shim (interposition, serving rules, the thread cache), run by
 * `make bench` under LD_PRELOAD=libcudapool.so on the fake runtime, whose
 * own calls a cached pair never reaches. Prints "shim_pair_SIZE: N ns/pair",
 * N the median over batches, for a few sizes, then with a non-blocking
 * stream live and a memset on the legacy stream between pairs (what the
 * learned stream order makes a cached pair again; CUDAPOOL_LEARN_ORDER=0
 * shows the barrier it spares); alloc_bench.cu measures the
 * same on a GPU. Started without the shim, it runs itself again with the
 * build's libcudapool.so (../libcudapool.so from this binary) preloaded. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

#define BATCHES 41
#define PAIRS 20000

static void pair_of(size_t size, const char *name, bool work) {
  double per_pair[BATCHES];
  void *p;
  for (int i = 0; i < PAIRS; i++) { /* warm up: the segment, the cache */
    if (cudaMalloc(&p, size) != cudaSuccess) exit(1);
    cudaFree(p);
  }
  for (int b = 0; b < BATCHES; b++) {
    double t0 = now_ns();
    for (int i = 0; i < PAIRS; i++) {
      cudaMalloc(&p, size);
      if (work) cudaMemsetAsync(p, 0, 1, 0);
      cudaFree(p);
    }
    per_pair[b] = (now_ns() - t0) / PAIRS;
  }
  printf("shim_pair_%s: %.1f ns/pair\n", name, bench_median(per_pair, BATCHES));
}

/* Runs this program again with ../libcudapool.so preloaded; returns only on failure. */
static void again_preloaded(char **argv) {
  char self[PATH_MAX], lib[PATH_MAX + 32];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0 || getenv("SHIM_PAIR_AGAIN")) return;
  self[n] = '\0';
  *strrchr(self, '/') = '\0';
  snprintf(lib, sizeof lib, "%s/../libcudapool.so", self);
  setenv("LD_PRELOAD", lib, 1);
  setenv("CUDAPOOL_LIVE", "0", 0);
  setenv("SHIM_PAIR_AGAIN", "1", 1);
  execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
  (void)argc;
  if (!dlsym(RTLD_DEFAULT, "cudapool_stats")) {
    again_preloaded(argv);
    fprintf(stderr, "shim_pair: could not run with libcudapool.so preloaded\n");
    return 1;
  }
  pair_of(512, "512B", false);
  pair_of((size_t)1 << 20, "1MiB", false);
  pair_of((size_t)64 << 20, "64MiB", false);
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 1;
  pair_of(512, "512B_stream_live_legacy_memset", true);
  pair_of((size_t)64 << 20, "64MiB_stream_live_legacy_memset", true);
  cudaStreamDestroy(s);
  return 0;
}
