/* reload_plugin.c: build/progs/libreload_plugin.so, a plugin linked to the
 * fake libcudart, for tests/programs/runtime/reload.c (a program that is
 * not): it is the only user of libcudart in that process, so closing it
 * unloads the runtime. */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#define MiB ((size_t)1 << 20)

/* One round of device work: allocate, fill with `value`, read back, free.
 * Returns the number of calls that failed or read back the wrong bytes. */
__attribute__((visibility("default"))) int reload_plugin_round(int value) {
  unsigned char *host = malloc(MiB);
  if (!host) return 1;
  int errors = 0;
  void *p = NULL, *q = NULL;
  errors += cudaMalloc(&p, MiB) != cudaSuccess;
  errors += cudaMalloc(&q, 3 * MiB) != cudaSuccess;
  errors += cudaMemset(p, value, MiB) != cudaSuccess;
  errors += cudaMemcpy(host, p, MiB, cudaMemcpyDeviceToHost) != cudaSuccess;
  errors += host[0] != (unsigned char)value || host[MiB - 1] != (unsigned char)value;
  errors += cudaFree(q) != cudaSuccess;
  errors += cudaFree(p) != cudaSuccess;
  errors += cudaDeviceSynchronize() != cudaSuccess;
  free(host);
  return errors;
}
