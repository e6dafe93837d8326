/* drv_suballoc.c: the driver calls whose meaning changes when a block is a
 * piece of a larger segment (docs/DESIGN.md, "Calls whose meaning changes
 * under sub-allocation"): cuMemFreeAsync and cuMemFreeAsync_ptsz,
 * cuMemGetAddressRange_v2, cuPointerGetAttribute(s) with the range
 * attributes, and cuIpcGetMemHandle.
 *
 * Natively each cuMemAlloc is its own allocation. Under a pool the first of
 * two small allocations made on whole free segments starts a 2 MiB segment
 * and the second lies inside it (two 5 MiB ones share a 20 MiB segment).
 * Every part frees what it made and synchronises the context, so the next
 * one starts from whole free segments again.
 *
 * Usage: drv_suballoc proc|dlsym|linked
 *   how the six entry points are reached: cuGetProcAddress as a static
 *   runtime asks it (cudaVersion 13000, the per-thread flag for the _ptsz
 *   free), dlsym on the driver's handle, or by name (the program is linked
 *   with -lcuda). Everything else goes through drvprogs.h's lookups. */
#include <string.h>

#include "drvprogs.h"

/* Exported by libcuda, declared by no header. */
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

#define KiB ((size_t)1 << 10)

static struct {
  __typeof__(cuMemFreeAsync) *freeAsync;
  __typeof__(cuMemFreeAsync_ptsz) *freeAsyncPtsz;
  __typeof__(cuMemGetAddressRange_v2) *range;
  __typeof__(cuPointerGetAttribute) *attr;
  __typeof__(cuPointerGetAttributes) *attrs;
  __typeof__(cuIpcGetMemHandle) *ipc;
} F;

static int lookup(const char *how) {
  if (strcmp(how, "proc") == 0) {
    F.freeAsync = (__typeof__(F.freeAsync))drv_proc("cuMemFreeAsync", CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    F.freeAsyncPtsz = (__typeof__(F.freeAsyncPtsz))drv_proc("cuMemFreeAsync",
                                                            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    F.range = (__typeof__(F.range))drv_proc("cuMemGetAddressRange", 0);
    F.attr = (__typeof__(F.attr))drv_proc("cuPointerGetAttribute", 0);
    F.attrs = (__typeof__(F.attrs))drv_proc("cuPointerGetAttributes", 0);
    F.ipc = (__typeof__(F.ipc))drv_proc("cuIpcGetMemHandle", 0);
  } else if (strcmp(how, "dlsym") == 0) {
    F.freeAsync = (__typeof__(F.freeAsync))dlsym(D.lib, "cuMemFreeAsync");
    F.freeAsyncPtsz = (__typeof__(F.freeAsyncPtsz))dlsym(D.lib, "cuMemFreeAsync_ptsz");
    F.range = (__typeof__(F.range))dlsym(D.lib, "cuMemGetAddressRange_v2");
    F.attr = (__typeof__(F.attr))dlsym(D.lib, "cuPointerGetAttribute");
    F.attrs = (__typeof__(F.attrs))dlsym(D.lib, "cuPointerGetAttributes");
    F.ipc = (__typeof__(F.ipc))dlsym(D.lib, "cuIpcGetMemHandle");
  } else if (strcmp(how, "linked") == 0) {
    F.freeAsync = cuMemFreeAsync;
    F.freeAsyncPtsz = cuMemFreeAsync_ptsz;
    F.range = cuMemGetAddressRange_v2;
    F.attr = cuPointerGetAttribute;
    F.attrs = cuPointerGetAttributes;
    F.ipc = cuIpcGetMemHandle;
  } else {
    return -1;
  }
  return F.freeAsync && F.freeAsyncPtsz && F.range && F.attr && F.attrs && F.ipc ? 0 : -1;
}

static CUdeviceptr raw_alloc(size_t n) {
  unsigned long long (*f)(size_t) = (unsigned long long (*)(size_t))drv_hook("fakecu_raw_alloc");
  return f ? (CUdeviceptr)f(n) : 0;
}

static long barriers(void) {
  cudapool_stats_t s;
  return pool_stats(0, &s) == 0 ? (long)s.num_barriers : 0;
}

static CUdeviceptr alloc(size_t n, int *errors) {
  CUdeviceptr p = 0;
  *errors += D.cuMemAlloc_v2(&p, n) != CUDA_SUCCESS;
  return p;
}

/* ---- stream-ordered frees ------------------------------------------------------- */

static void free_async(void) {
  CUstream s = NULL;
  int c = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  int errors = 0;
  CUdeviceptr a = alloc(512 * KiB, &errors), b = alloc(512 * KiB, &errors);
  int before = drv_round_trip(b, 64 * KiB, 7);
  long live0 = fake_live(0), calls0 = fake_calls("cuMemFreeAsync");
  int f = F.freeAsync(a, s);
  unsigned char out[2];
  int read = D.cuMemcpyDtoH_v2(out, b, sizeof out);
  int kept = out[0] == 7 && out[1] == 7 + 13;
  int set = D.cuMemsetD8_v2(b, 0x5a, 512 * KiB);
  int again = drv_round_trip(b, 64 * KiB, 9);
  printf("free_async: create=%d alloc=%d before=%d free=%d neighbour_read=%d kept=%d neighbour_set=%d "
         "neighbour_ok=%d\n",
         c, errors, before, f, read, kept, set, again);
  printf("info: free_async real_calls=%ld live_freed=%ld\n", fake_calls("cuMemFreeAsync") - calls0,
         live0 - fake_live(0));

  /* Stream 0 of the per-thread variant: the context's per-thread stream. */
  long calls_ptsz = fake_calls("cuMemFreeAsync_ptsz");
  f = F.freeAsyncPtsz(b, 0);
  printf("free_async_ptsz: free=%d\n", f);
  printf("info: free_async_ptsz real_calls=%ld\n", fake_calls("cuMemFreeAsync_ptsz") - calls_ptsz);

  /* The freed blocks come back, once a barrier covers the frees. */
  long b0 = barriers();
  CUdeviceptr big = alloc(MiB, &errors); /* the segment's rest */
  CUdeviceptr reuse = alloc(512 * KiB, &errors);
  int fr = D.cuMemFree_v2(reuse);
  int fb = D.cuMemFree_v2(big);
  printf("free_async_reuse: alloc=%d free=%d free2=%d\n", errors, fr, fb);
  printf("info: free_async_reuse same=%d barriers=%ld\n", reuse == a || reuse == b, barriers() - b0);

  /* Bad pointers fail natively; the segment and its other block are intact. */
  errors = 0;
  CUdeviceptr p = alloc(1000, &errors), q = alloc(1000, &errors);
  int interior = F.freeAsync(p + 256, s);
  int interior_ptsz = F.freeAsyncPtsz(q + 512, s);
  int first = F.freeAsync(p, s);
  int twice = F.freeAsync(p, s);
  int twice_ptsz = F.freeAsyncPtsz(p, s);
  int bogus = F.freeAsync((CUdeviceptr)0x12345, s);
  int zero = F.freeAsync(0, s);
  int neighbour = drv_round_trip(q, 1000, 3);
  int fq = F.freeAsync(q, s);
  printf("free_async_errors: alloc=%d interior=%d interior_ptsz=%d first=%d twice=%d twice_ptsz=%d bogus=%d "
         "zero=%d neighbour_ok=%d free=%d\n",
         errors, interior, interior_ptsz, first, twice, twice_ptsz, bogus, zero, neighbour, fq);

  /* A pointer the pool did not make: the driver's own call, unchanged. */
  CUdeviceptr r = raw_alloc(64 * KiB);
  long calls1 = fake_calls("cuMemFreeAsync"), live1 = fake_live(0);
  f = F.freeAsync(r, s);
  int twice_foreign = F.freeAsync(r, s);
  printf("free_async_foreign: got=%d free=%d twice=%d real_calls=%ld live_freed=%ld\n", r != 0, f,
         twice_foreign, fake_calls("cuMemFreeAsync") - calls1, live1 - fake_live(0));
  int sync = D.cuCtxSynchronize_v2(NULL);
  printf("free_async_end: sync=%d destroy=%d\n", sync, D.cuStreamDestroy_v2(s));
}

/* ---- a stream-ordered free into a capture ----------------------------------------- */

static void capture_one(const char *tag, CUstreamCaptureMode mode) {
  CUstream s = NULL;
  CUgraph g = NULL;
  int c = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  int errors = 0;
  CUdeviceptr p = alloc(4096, &errors), q = alloc(4096, &errors);
  int begin = D.cuStreamBeginCapture_v2(s, mode);
  long calls0 = fake_calls("cuMemFreeAsync");
  int f = F.freeAsync(p, s);
  long real_calls = fake_calls("cuMemFreeAsync") - calls0;
  int interior = F.freeAsync(q + 512, s);
  int end = D.cuStreamEndCapture(s, &g);
  /* The graph was never launched: p is still the program's. */
  int usable = drv_round_trip(p, 4096, 5) && drv_round_trip(q, 4096, 6);
  int fp = D.cuMemFree_v2(p);
  int fq = D.cuMemFree_v2(q);
  int d = D.cuStreamDestroy_v2(s);
  int sync = D.cuCtxSynchronize_v2(NULL);
  printf("%s: create=%d alloc=%d begin=%d free=%d interior=%d end=%d graph=%d usable=%d free_p=%d free_q=%d "
         "destroy=%d sync=%d\n",
         tag, c, errors, begin, f, interior, end, g != NULL, usable, fp, fq, d, sync);
  printf("info: %s real_calls=%ld\n", tag, real_calls);
}

/* ---- what a pointer is part of ---------------------------------------------------- */

static void range_of(const char *tag, CUdeviceptr ptr, CUdeviceptr start) {
  CUdeviceptr base = 0;
  size_t size = 0;
  int rc = F.range(&base, &size, ptr);
  printf("%s: rc=%d base_is_block=%d size=%zu\n", tag, rc, rc == 0 && base == start, size);
}

static void attributes_of(const char *tag, CUdeviceptr ptr, CUdeviceptr start, CUcontext ctx) {
  CUdeviceptr rstart = 0, dptr = 0;
  size_t rsize = 0;
  CUcontext pctx = NULL;
  unsigned mtype = 0;
  int ordinal = -1;
  void *host = NULL;
  int r1 = F.attr(&rstart, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr);
  int r2 = F.attr(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr);
  int r3 = F.attr(&pctx, CU_POINTER_ATTRIBUTE_CONTEXT, ptr);
  int r4 = F.attr(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr);
  int r5 = F.attr(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, ptr);
  int r6 = F.attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
  int r7 = F.attr(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, ptr);
  printf("%s: start=%d:%d size=%d:%zu context=%d:%d type=%d:%u dptr=%d:%d ordinal=%d:%d host=%d\n", tag, r1,
         rstart == start, r2, rsize, r3, pctx == ctx, r4, mtype, r5, dptr == ptr, r6, ordinal, r7);

  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_CONTEXT,        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                 CU_POINTER_ATTRIBUTE_HOST_POINTER};
  rstart = dptr = 1;
  rsize = 1;
  pctx = NULL;
  mtype = 99;
  ordinal = -1;
  host = (void *)&host;
  void *data[] = {&pctx, &rstart, &mtype, &rsize, &ordinal, &dptr, &host};
  int rc = F.attrs(sizeof which / sizeof which[0], which, data, ptr);
  printf("%s_all: rc=%d context=%d start=%d type=%u size=%zu ordinal=%d dptr=%d host_null=%d\n", tag, rc,
         pctx == ctx, rstart == start, mtype, rsize, ordinal, dptr == ptr, host == NULL);
}

static void describe(CUcontext ctx) {
  int errors = 0;
  CUdeviceptr p = alloc(1000, &errors), q = alloc(3000, &errors);
  CUdeviceptr r = alloc(5 * MiB, &errors), t = alloc(5 * MiB, &errors);
  printf("describe_alloc: errors=%d\n", errors);
  range_of("range_small_first", p, p);
  range_of("range_small_first_last_byte", p + 999, p);
  range_of("range_small_second", q, q);
  range_of("range_small_second_interior", q + 100, q);
  range_of("range_large_first", r + 4096, r);
  range_of("range_large_second_interior", t + 12345, t);
  CUdeviceptr base = 0;
  size_t size = 0;
  int no_base = F.range(NULL, &size, q + 1);
  int no_size = F.range(&base, NULL, q + 1);
  printf("range_null_outputs: no_base=%d size=%zu no_size=%d base_is_block=%d\n", no_base, size, no_size,
         base == q);
  attributes_of("attr_small_second", q + 100, q, ctx);
  attributes_of("attr_large_second", t, t, ctx);
  /* Other attributes stay the segment's: blocks of one segment share a
   * buffer id, natively each allocation has its own. */
  unsigned long long id_p = 0, id_q = 1, id_q2 = 2;
  int ip = F.attr(&id_p, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
  int iq = F.attr(&id_q, CU_POINTER_ATTRIBUTE_BUFFER_ID, q);
  int iq2 = F.attr(&id_q2, CU_POINTER_ATTRIBUTE_BUFFER_ID, q + 2999);
  printf("buffer_id: rc=%d rc2=%d rc3=%d interior_same=%d\n", ip, iq, iq2, id_q == id_q2);
  printf("info: buffer_id blocks_share=%d\n", id_p == id_q);

  /* What the pool never made: native. */
  CUdeviceptr f = raw_alloc(8192);
  range_of("range_foreign", f + 10, f);
  attributes_of("attr_foreign", f + 10, f, ctx);
  int x = 0;
  range_of("range_host", (CUdeviceptr)(uintptr_t)&x, 0);
  attributes_of("attr_host", (CUdeviceptr)(uintptr_t)&x, 0, NULL);
  int fr = D.cuMemFree_v2(p) | D.cuMemFree_v2(q) | D.cuMemFree_v2(r) | D.cuMemFree_v2(t) | D.cuMemFree_v2(f);
  printf("describe_end: free=%d sync=%d\n", fr, D.cuCtxSynchronize_v2(NULL));
}

/* ---- IPC export ------------------------------------------------------------------- */

static void export(const char *tag, CUdeviceptr ptr, CUdeviceptr start) {
  unsigned long long (*base_of)(const void *, size_t *) =
      (unsigned long long (*)(const void *, size_t *))drv_hook("fakecu_ipc_base");
  CUipcMemHandle h;
  memset(&h, 0xab, sizeof h);
  int rc = F.ipc(&h, ptr);
  int base_is_block = rc == 0 && base_of && base_of(&h, NULL) == start;
  unsigned char untouched = 1;
  for (size_t i = 0; i < sizeof h.reserved; i++) untouched &= (unsigned char)h.reserved[i] == 0xab;
  printf("%s: rc=%d base_is_block=%d untouched=%d\n", tag, rc, base_is_block, untouched);
}

static void ipc(void) {
  int errors = 0;
  CUdeviceptr p = alloc(512 * KiB, &errors), q = alloc(512 * KiB, &errors);
  CUdeviceptr r = alloc(5 * MiB, &errors), t = alloc(5 * MiB, &errors);
  printf("ipc_alloc: errors=%d\n", errors);
  export("ipc_small_first", p, p);
  export("ipc_large_first", r, r);
  export("ipc_interior_of_first", p + 4096, p);
  /* Inside a segment: their own allocations natively, refused by a pool. */
  export("info: ipc_small_second", q, q);
  export("info: ipc_large_second", t + 100, t);
  CUdeviceptr f = raw_alloc(8192);
  export("ipc_foreign", f, f);
  int x = 0;
  export("ipc_host", (CUdeviceptr)(uintptr_t)&x, 0);
  export("ipc_zero", 0, 0);
  printf("ipc_null_handle: rc=%d\n", F.ipc(NULL, p));
  CUdeviceptr odd = alloc(1000, &errors);
  export("ipc_past_request", odd + 1000, odd);
  int fr = D.cuMemFree_v2(p) | D.cuMemFree_v2(q) | D.cuMemFree_v2(r) | D.cuMemFree_v2(t) | D.cuMemFree_v2(f) |
           D.cuMemFree_v2(odd);
  export("ipc_freed_first", r, r);
  export("ipc_freed_second", q, q);
  int sync = D.cuCtxSynchronize_v2(NULL);
  printf("ipc_end: errors=%d free=%d sync=%d\n", errors, fr, sync);
}

int main(int argc, char **argv) {
  CUcontext ctx = drv_setup();
  const char *how = argc > 1 ? argv[1] : "";
  if (lookup(how) != 0) {
    printf("setup: cannot reach the six entry points by %s\n", how);
    return 3;
  }
  free_async();
  capture_one("capture_relaxed", CU_STREAM_CAPTURE_MODE_RELAXED);
  capture_one("capture_global", CU_STREAM_CAPTURE_MODE_GLOBAL);
  describe(ctx);
  ipc();
  print_pool(0);
  printf("info: live_bytes=%ld\n", fake_live(0));
  return 0;
}
