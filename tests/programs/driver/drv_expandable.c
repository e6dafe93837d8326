/* drv_expandable.c: large blocks under expandable segments
 * (CUDAPOOL_EXPANDABLE=1) on the fake driver, whose pages are inaccessible
 * until mapped and made accessible, and lose their bytes when unmapped.
 *
 * Three blocks a (4 MiB), b (8 MiB), c (6 MiB) are written and read back;
 * cuIpcGetMemHandle of a; b freed, the context synchronised and the cache
 * emptied (b's pages go back), a and c read back again; a new block in b's
 * place written and read; everything freed and the cache emptied. Natively
 * each is its own cuMemAlloc. "info:" lines carry what differs under the
 * shim: the IPC result, the pool's reserved bytes and the fake's mapped
 * bytes, reservations and error-check failures. */
#include <string.h>

#include "drvprogs.h"

static int check(CUdeviceptr p, size_t n, unsigned char v) {
  static unsigned char buf[8 << 20];
  if (D.cuMemcpyDtoH_v2(buf, p, n) != CUDA_SUCCESS) return 0;
  for (size_t i = 0; i < n; i++)
    if (buf[i] != v) return 0;
  return 1;
}

static void vmm_info(const char *tag) {
  void (*stats)(int, size_t *, int *, long *) =
      (void (*)(int, size_t *, int *, long *))drv_hook("fakecu_vmm_stats");
  size_t mapped = 0;
  int reservations = -1;
  long errors = -1;
  if (stats) stats(0, &mapped, &reservations, &errors);
  cudapool_stats_t s;
  long long reserved = pool_stats(0, &s) == 0 ? (long long)s.reserved_bytes.current : -1;
  printf("info: %s reserved=%lld vmm_mapped=%zu reservations=%d vmm_errors=%ld live=%ld\n", tag, reserved,
         mapped, reservations, errors, fake_live(0));
}

static void empty_cache(void) {
  int (*f)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudapool_empty_cache");
  if (f) f(0);
}

int main(void) {
  drv_setup();
  __typeof__(cuIpcGetMemHandle) *ipc = NULL;
  if (D.getProc("cuIpcGetMemHandle", (void **)&ipc, 4010, 0, NULL) || !ipc) return 3;
  CUdeviceptr a = 0, b = 0, c = 0, d = 0;
  int rc = D.cuMemAlloc_v2(&a, 4 * MiB) | D.cuMemAlloc_v2(&b, 8 * MiB) | D.cuMemAlloc_v2(&c, 6 * MiB);
  rc |= D.cuMemsetD8_v2(a, 0xa1, 4 * MiB) | D.cuMemsetD8_v2(b, 0xb2, 8 * MiB) |
        D.cuMemsetD8_v2(c, 0xc3, 6 * MiB);
  printf("alloc: rc=%d a=%d b=%d c=%d\n", rc, check(a, 4 * MiB, 0xa1), check(b, 8 * MiB, 0xb2),
         check(c, 6 * MiB, 0xc3));
  vmm_info("three");

  CUipcMemHandle h;
  memset(&h, 0, sizeof h);
  printf("info: ipc rc=%d\n", (int)ipc(&h, a));

  rc = D.cuMemFree_v2(b) | D.cuCtxSynchronize_v2(NULL);
  empty_cache();
  printf("free_b: rc=%d a=%d c=%d\n", rc, check(a, 4 * MiB, 0xa1), check(c, 6 * MiB, 0xc3));
  vmm_info("freed_b");

  rc = D.cuMemAlloc_v2(&d, 8 * MiB) | D.cuMemsetD8_v2(d, 0xd4, 8 * MiB);
  printf("realloc: rc=%d d=%d a=%d c=%d\n", rc, check(d, 8 * MiB, 0xd4), check(a, 4 * MiB, 0xa1),
         check(c, 6 * MiB, 0xc3));
  printf("info: realloc same_place=%d\n", d == b);
  vmm_info("realloc");

  rc = D.cuMemFree_v2(a) | D.cuMemFree_v2(c) | D.cuMemFree_v2(d) | D.cuCtxSynchronize_v2(NULL);
  empty_cache();
  printf("end: rc=%d\n", rc);
  vmm_info("end");
  print_pool(0);
  return 0;
}
