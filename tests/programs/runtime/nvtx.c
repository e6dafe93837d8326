/* nvtx.c: allocations for the CUDAPOOL_NVTX tests (tests/integration/runtime/nvtx.c).
 * Allocates one block per size argument ("1000", "3M"), then frees them in
 * the same order, then empties the cache, printing each address, so that
 * the test can match what the fake NVTX tool logged. An argument "oom:SIZE"
 * asks for SIZE and expects a refusal. Prints the same natively, but for
 * the "pool" lines. */
#include <errno.h>
#include <stdint.h>

#include "progs.h"

static size_t size_of(const char *text) {
  char *end;
  size_t n = strtoull(text, &end, 10);
  if (*end == 'M') n *= MiB;
  if (*end == 'K') n *= 1024;
  return n;
}

int main(int argc, char **argv) {
  void *blocks[32];
  int n = 0;
  for (int i = 1; i < argc && n < 32; i++) {
    if (strncmp(argv[i], "oom:", 4) == 0) {
      void *p = NULL;
      cudaError_t rc = cudaMalloc(&p, size_of(argv[i] + 4));
      printf("oom: rc=%d\n", (int)rc);
      continue;
    }
    size_t size = size_of(argv[i]);
    if (cudaMalloc(&blocks[n], size) != cudaSuccess) {
      printf("alloc: size=%zu failed\n", size);
      return 1;
    }
    printf("info: alloc addr=%#lx size=%zu\n", (unsigned long)(uintptr_t)blocks[n], size);
    n++;
  }
  for (int i = 0; i < n; i++) {
    cudaFree(blocks[i]);
    printf("info: free addr=%#lx\n", (unsigned long)(uintptr_t)blocks[i]);
  }
  int (*empty)(int) = (int (*)(int))prog_sym("cudapool_empty_cache");
  printf("pool: empty=%d barriers=%ld\n", empty ? empty(0) : -1, pool_barriers());
  printf("nvtx: blocks=%d\n", n);
  return 0;
}
