/* drv_threads.c: threads at the driver level. Each thread makes its own
 * context current, creates a non-blocking stream, and churns allocations of
 * varying sizes, writing a pattern into each block and reading it back
 * before freeing it; it also looks entry points up again (dlsym by handle
 * and cuGetProcAddress) while the others allocate. Every thread must see
 * its own data and every call succeed, natively and under the shim (and
 * under ThreadSanitizer, which instruments this program).
 *
 * Usage: drv_threads [THREADS [ITERATIONS]] */
#include <pthread.h>
#include <string.h>

#include "drvprogs.h"

static CUcontext ctx;
static int iterations = 200;

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg, seed = id * 2654435761u + 1;
  int errors = D.cuCtxSetCurrent(ctx) != CUDA_SUCCESS;
  CUstream s = NULL;
  errors += D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS;
  unsigned char buf[8192], back[8192];
  for (int i = 0; i < iterations; i++) {
    seed = seed * 1103515245u + 12345u;
    size_t size = 512 + (seed >> 8) % (sizeof buf - 512);
    memset(buf, (int)(id + (unsigned)i), size);
    CUdeviceptr p = 0;
    errors += D.cuMemAlloc_v2(&p, size) != CUDA_SUCCESS;
    errors += D.cuMemcpyHtoD_v2(p, buf, size) != CUDA_SUCCESS;
    errors += D.cuMemcpyDtoH_v2(back, p, size) != CUDA_SUCCESS;
    errors += memcmp(buf, back, size) != 0;
    errors += D.cuMemFree_v2(p) != CUDA_SUCCESS;
    if (i % 50 == 0) {
      void *fn = NULL;
      errors += D.getProc("cuMemAlloc", &fn, 13000, 0, NULL) != CUDA_SUCCESS || fn != (void *)D.cuMemAlloc_v2;
      errors += dlsym(D.lib, "cuInit") == NULL;
      errors += D.cuStreamSynchronize(s) != CUDA_SUCCESS;
    }
  }
  errors += D.cuStreamDestroy_v2(s) != CUDA_SUCCESS;
  return (void *)(intptr_t)errors;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 8;
  if (argc > 2) iterations = atoi(argv[2]);
  ctx = drv_setup();
  pthread_t t[64];
  if (threads > 64) threads = 64;
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
  long errors = 0;
  for (int i = 0; i < threads; i++) {
    void *rc;
    pthread_join(t[i], &rc);
    errors += (long)(intptr_t)rc;
  }
  printf("threads: n=%d iterations=%d errors=%ld sync=%d\n", threads, iterations, errors,
         D.cuCtxSynchronize_v2(NULL));
  print_pool(0);
  return 0;
}
