/* drv_static.c: a program that reaches the driver as a statically linked
 * CUDA runtime does (drvprogs.h), then checks the lookups, allocation pairs,
 * the error codes of bad calls, contents, pitched memory, cuMemGetInfo and
 * streams. Every line but pool:/info: must be identical natively and under
 * the shim.
 *
 * Usage: drv_static [PAIRS [SIZE]] */
#include <string.h>

#include "drvprogs.h"

static void lookups(void) {
  void *p = NULL, *q = NULL;
  CUdriverProcAddressQueryResult st = 99;
  int rc = D.getProc("cuInit", &p, 13000, 0, &st);
  void *by_dlsym = dlsym(D.lib, "cuInit");
  printf("lookup_init: rc=%d status=%d same_as_dlsym=%d same_as_fake=%d\n", rc, (int)st, p == by_dlsym,
         p == fake_entry("cuInit"));
  rc = D.getProc("cuNoSuchFunction", &p, 13000, 0, &st);
  printf("lookup_unknown: rc=%d null=%d status=%d\n", rc, p == NULL, (int)st);
  rc = D.getProc("cuMemAlloc", &p, 2000, 0, &st);
  printf("lookup_old: rc=%d null=%d status=%d\n", rc, p == NULL, (int)st);
  rc = D.getProc("cuMemAlloc", &p, 99000, 0, &st);
  printf("lookup_future: rc=%d\n", rc);
  /* The served entry points are cudapool's under the shim, not the fake's. */
  D.getProc("cuMemAlloc", &p, 13000, 0, NULL);
  printf("info: alloc_is_fake=%d\n", p == fake_entry("cuMemAlloc_v2"));
  /* cuGetProcAddress itself: the shim's resolver, which answers alike. */
  __typeof__(cuGetProcAddress_v2) *self = NULL;
  rc = D.getProc("cuGetProcAddress", (void **)&self, 13000, 0, &st);
  printf("info: getproc_is_fake=%d\n", (void *)self == fake_entry("cuGetProcAddress_v2"));
  int rc2 = self ? (int)self("cuMemFree", &q, 13000, 0, NULL) : -1;
  printf("lookup_self: rc=%d status=%d got=%d rc2=%d same_free=%d\n", rc, (int)st, self != NULL, rc2,
         q == (void *)D.cuMemFree_v2);
  /* The first cuGetProcAddress, found by dlsym under its own name. */
  __typeof__(cuGetProcAddress) *v1 = (__typeof__(cuGetProcAddress) *)dlsym(D.lib, "cuGetProcAddress");
  q = NULL;
  rc = v1 ? (int)v1("cuMemFree", &q, 12000, 0) : -1;
  printf("lookup_v1: found=%d rc=%d same_free=%d\n", v1 != NULL, rc, q == (void *)D.cuMemFree_v2);
  /* Per-thread flag: cuStreamSynchronize's _ptsz twin. */
  rc = D.getProc("cuStreamSynchronize", &p, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
  printf("lookup_ptsz: rc=%d status=%d differs=%d\n", rc, (int)st, p != (void *)D.cuStreamSynchronize);
  printf("info: ptsz_is_fake=%d\n", p == fake_entry("cuStreamSynchronize_ptsz"));
  /* Lookups by handle of names nobody serves are glibc's own answer. */
  printf("dlsym: init=%d missing=%d err=%d\n", dlsym(D.lib, "cuInit") == fake_entry("cuInit"),
         dlsym(D.lib, "cuNoSuchFunction") == NULL, dlerror() != NULL);
}

static void pairs(int n, size_t size) {
  long before = fake_calls("cuMemAlloc_v2");
  int errors = 0;
  for (int i = 0; i < n; i++) {
    CUdeviceptr p = 0;
    errors += D.cuMemAlloc_v2(&p, size) != CUDA_SUCCESS || !p;
    errors += D.cuMemFree_v2(p) != CUDA_SUCCESS;
  }
  printf("pairs: n=%d errors=%d\n", n, errors);
  printf("info: driver_allocs=%ld\n", fake_calls("cuMemAlloc_v2") - before);
}

static void errors(void) {
  CUdeviceptr p = 0, q = 0;
  int null_out = D.cuMemAlloc_v2(NULL, MiB);
  int zero = D.cuMemAlloc_v2(&p, 0);
  int a = D.cuMemAlloc_v2(&p, MiB);
  int interior = D.cuMemFree_v2(p + 256);
  int f = D.cuMemFree_v2(p);
  int twice = D.cuMemFree_v2(p);
  int bogus = D.cuMemFree_v2((CUdeviceptr)0x12345);
  int null_free = D.cuMemFree_v2(0);
  int oom = D.cuMemAlloc_v2(&q, (size_t)1 << 50);
  size_t pitch = 0;
  int bad_elem = D.cuMemAllocPitch_v2(&q, &pitch, 100, 10, 3);
  size_t fr = 0;
  int info_null = D.cuMemGetInfo_v2(&fr, NULL);
  printf("errors: null_out=%d zero=%d alloc=%d interior=%d free=%d twice=%d bogus=%d null_free=%d "
         "oom=%d bad_elem=%d info_null=%d\n",
         null_out, zero, a, interior, f, twice, bogus, null_free, oom, bad_elem, info_null);
  /* A freed block's interior, later: still refused, pool untouched. */
  a = D.cuMemAlloc_v2(&p, 2 * MiB);
  f = D.cuMemFree_v2(p);
  printf("errors_freed: alloc=%d free=%d interior=%d\n", a, f, D.cuMemFree_v2(p + 512));
}

static void contents(void) {
  unsigned char in[4096], out[4096];
  for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(i * 7 + 3);
  CUdeviceptr p = 0, q = 0;
  int a = D.cuMemAlloc_v2(&p, sizeof in);
  int w = D.cuMemcpyHtoD_v2(p, in, sizeof in);
  int r = D.cuMemcpyDtoH_v2(out, p, sizeof out);
  int same = memcmp(in, out, sizeof in) == 0;
  int f = D.cuMemFree_v2(p);
  int a2 = D.cuMemAlloc_v2(&q, sizeof in);
  int s = D.cuMemsetD8_v2(q, 0x5a, sizeof in);
  r += D.cuMemcpyDtoH_v2(out, q, sizeof out);
  int set = 1;
  for (size_t i = 0; i < sizeof out; i++) set &= out[i] == 0x5a;
  printf("contents: alloc=%d write=%d read=%d same=%d free=%d alloc2=%d set=%d ok=%d free2=%d\n", a, w, r,
         same, f, a2, s, set, D.cuMemFree_v2(q));
}

static void pitched(void) {
  CUdeviceptr p = 0, q = 0;
  size_t pitch = 0, pitch2 = 0;
  int a = D.cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 4);
  int a2 = D.cuMemAllocPitch_v2(&q, &pitch2, 1000, 20, 16);
  int w = D.cuMemsetD8_v2(p + pitch * 9, 1, 1000);
  printf("pitch: alloc=%d pitch=%zu alloc2=%d pitch2=%zu write_last_row=%d free=%d free2=%d\n", a, pitch, a2,
         pitch2, w, D.cuMemFree_v2(p), D.cuMemFree_v2(q));
}

static void meminfo(void) {
  size_t free0 = 0, total = 0, free1 = 0, total1 = 0, free2 = 0, total2 = 0;
  int rc = D.cuMemGetInfo_v2(&free0, &total);
  CUdeviceptr p = 0;
  int a = D.cuMemAlloc_v2(&p, MiB);
  int rc1 = D.cuMemGetInfo_v2(&free1, &total1);
  int f = D.cuMemFree_v2(p);
  int rc2 = D.cuMemGetInfo_v2(&free2, &total2);
  printf("meminfo: rc=%d total=%zu free0=%zu alloc=%d rc1=%d used=%zu free=%d rc2=%d free_after=%zu\n", rc,
         total, free0, a, rc1, total1 - free1, f, rc2, free2);
}

static void streams(void) {
  CUstream s = NULL;
  int c = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  CUdeviceptr p = 0, q = 0;
  int a = D.cuMemAlloc_v2(&p, MiB);
  int f = D.cuMemFree_v2(p);
  int a2 = D.cuMemAlloc_v2(&q, MiB);
  int sync = D.cuStreamSynchronize(s);
  int legacy = D.cuStreamSynchronize(CU_STREAM_LEGACY);
  int ctx = D.cuCtxSynchronize_v2(NULL);
  int d = D.cuStreamDestroy_v2(s);
  int again = D.cuStreamDestroy_v2(s);
  printf("streams: create=%d alloc=%d free=%d alloc2=%d sync=%d legacy=%d ctx=%d destroy=%d again=%d "
         "free2=%d\n",
         c, a, f, a2, sync, legacy, ctx, d, again, D.cuMemFree_v2(q));
}

/* A context the program made itself is never pooled: its allocations reach
 * the driver (one driver allocation per call, natively and under the shim). */
static void own_context(CUcontext primary) {
  CUcontext mine = NULL;
  int c = D.cuCtxCreate_v2(&mine, 0, 0);
  long before = fake_calls("cuMemAlloc_v2");
  CUdeviceptr p = 0;
  int a = 0, f = 0;
  for (int i = 0; i < 3; i++) {
    a |= D.cuMemAlloc_v2(&p, MiB);
    f |= D.cuMemFree_v2(p);
  }
  long allocs = fake_calls("cuMemAlloc_v2") - before;
  int d = D.cuCtxDestroy_v2(mine);
  int back = D.cuCtxSetCurrent(primary);
  printf("own_context: create=%d alloc=%d free=%d driver_allocs=%ld destroy=%d back=%d\n", c, a, f, allocs, d,
         back);
}

/* The runtime's cudaDeviceReset: the first variant of the reset (CUDA 7.0),
 * which is what a static runtime asks cuGetProcAddress for. Memory made
 * before is gone: freeing it fails, as natively. */
static void reset(void) {
  CUdeviceptr p = 0, q = 0;
  int a = D.cuMemAlloc_v2(&p, MiB);
  int f = D.cuMemFree_v2(p);
  int a2 = D.cuMemAlloc_v2(&p, MiB);
  int r = D.cuDevicePrimaryCtxReset(0);
  int stale = D.cuMemFree_v2(p);
  int fresh = D.cuMemAlloc_v2(&q, MiB);
  printf("reset: alloc=%d free=%d alloc2=%d reset=%d stale_free=%d alloc3=%d free3=%d\n", a, f, a2, r, stale,
         fresh, D.cuMemFree_v2(q));
}

int main(int argc, char **argv) {
  CUcontext primary = drv_setup();
  int n = argc > 1 ? atoi(argv[1]) : 100;
  size_t size = argc > 2 ? (size_t)atoll(argv[2]) : MiB;
  lookups();
  pairs(n, size);
  print_pool(0);
  errors();
  contents();
  pitched();
  meminfo();
  streams();
  own_context(primary);
  reset();
  printf("info: live_bytes=%ld\n", fake_live(0));
  return 0;
}
