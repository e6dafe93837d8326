/* drv_linked.c: a program linked with -lcuda that calls the driver by
 * name: cudapool serves it through ordinary symbol interposition (its
 * exports cuMemAlloc_v2, cuMemFree_v2, ...), no dlsym involved. Also calls
 * cuGetProcAddress by name, which is cudapool's resolver under the shim.
 *
 * Usage: drv_linked [PAIRS] */
#include "drvprogs.h"

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  CUdevice dev = 0;
  CUcontext ctx = NULL;
  int setup = cuInit(0) | cuDeviceGet(&dev, 0) | cuDevicePrimaryCtxRetain(&ctx, dev) | cuCtxSetCurrent(ctx);
  D.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  int errors = 0;
  for (int i = 0; i < n; i++) {
    CUdeviceptr p = 0;
    errors += cuMemAlloc_v2(&p, MiB) != CUDA_SUCCESS;
    errors += cuMemFree_v2(p) != CUDA_SUCCESS;
  }
  CUdeviceptr p = 0;
  int a = cuMemAlloc_v2(&p, MiB);
  int interior = cuMemFree_v2(p + 8);
  int f = cuMemFree_v2(p);
  void *fn = NULL;
  int rc = cuGetProcAddress_v2("cuMemFree", &fn, 13000, 0, NULL);
  printf("linked: setup=%d pairs=%d errors=%d alloc=%d interior=%d free=%d getproc=%d found=%d\n", setup, n,
         errors, a, interior, f, rc, fn != NULL);
  printf("info: driver_allocs=%ld free_is_fake=%d\n", fake_calls("cuMemAlloc_v2"),
         fn == fake_entry("cuMemFree_v2"));
  print_pool(0);
  return 0;
}
