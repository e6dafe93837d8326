/* sites.c: allocations from three functions of its own, one called twice,
 * for the call-site report (CUDAPOOL_STACKS). At the peak: weights 4 MiB
 * (1 block), activations 2 x 3 MiB, scratch 512 KiB; then every block but
 * the weights is freed, so at exit only weights' 4 MiB is left. Built with
 * -rdynamic (mk/fakecudart.mk), exported, so that dladdr names them.
 * Prints "sites: errors=E".
 * `sites reset`: instead, the weights, cudaDeviceReset (which drops them
 * without a free the shim sees), the weights again (at the same address on
 * the fake device) and their free: nothing is left at exit. */
#include <string.h>

#include "progs.h"

__attribute__((noinline, visibility("default"))) void *alloc_weights(void) {
  void *p = NULL;
  return cudaMalloc(&p, 4 * MiB) == cudaSuccess ? p : NULL;
}

__attribute__((noinline, visibility("default"))) void *alloc_activations(void) {
  void *p = NULL;
  return cudaMalloc(&p, 3 * MiB) == cudaSuccess ? p : NULL;
}

__attribute__((noinline, visibility("default"))) void *alloc_scratch(void) {
  void *p = NULL;
  return cudaMalloc(&p, MiB / 2) == cudaSuccess ? p : NULL;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "reset") == 0) {
    /* The fake device's memory is the host's: after a reset the kernel may
     * map the next segment elsewhere (another thread mapped meanwhile), so
     * the reset is tried again until the address comes back. */
    void *before = alloc_weights(), *after = NULL;
    int errors = !before;
    for (int tries = 0; tries < 8; tries++) {
      errors += cudaDeviceReset() != cudaSuccess;
      after = alloc_weights();
      errors += !after;
      if (after == before) break;
      before = after;
    }
    errors += cudaFree(after) != cudaSuccess;
    printf("sites: errors=%d same_address=%d\n", errors, before == after);
    return 0;
  }
  void *w = alloc_weights(), *a1 = alloc_activations(), *a2 = alloc_activations(), *s = alloc_scratch();
  int errors = !w + !a1 + !a2 + !s;
  errors += (cudaFree(a1) != cudaSuccess) + (cudaFree(a2) != cudaSuccess) + (cudaFree(s) != cudaSuccess);
  printf("sites: errors=%d\n", errors);
  return 0;
}
