/* proc.c: cuGetProcAddress_v2 and cuGetProcAddress of the fake driver, and
 * its test hooks (fakecu.h).
 *
 * The table maps a base name and the CUDA version a variant appeared in
 * (cudaTypedefs.h) to the exported function, as the real driver does: the
 * newest variant not newer than the cudaVersion asked for, the per-thread
 * one (_ptsz/_ptds) when CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM is
 * set and one exists. A symbol not in the table gives CUDA_SUCCESS, a NULL
 * pointer and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; one asked for with a
 * version older than its first gives VERSION_NOT_SUFFICIENT (cuda.h).
 *
 * FAKECU_TRACE_PROC=1 prints every lookup on stderr (what a runtime asks).
 * With FAKECU_PROC_TRAMPOLINES=1 the lookups of a few entry points (the
 * served allocation, free and stream calls, ptr.c's, and cuLaunchKernel) return a
 * trampoline of the fake's own instead of the exported function, standing
 * for a driver whose cuGetProcAddress answers with internal addresses.
 *
 * The library is linked -Bsymbolic: every address here is the fake's own,
 * whatever a preloaded library defines. */
#include "fk.h"

#include <stdio.h>
#include <string.h>

#include "fakecu.h"

typedef struct proc {
  const char *base;
  int version;
  int per_thread;
  void *fn;
  const char *exported;
} proc_t;

#define P(base, version, fn) \
  { #base, version, 0, (void *)fn, #fn }
#define PT(base, version, fn) \
  { #base, version, 1, (void *)fn, #fn }

static const proc_t procs[] = {
    P(cuInit, 2000, cuInit),
    P(cuDriverGetVersion, 2020, cuDriverGetVersion),
    P(cuDeviceGet, 2000, cuDeviceGet),
    P(cuDeviceGetCount, 2000, cuDeviceGetCount),
    P(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2),
    P(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    P(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    P(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
    P(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
    P(cuCtxGetDevice, 2000, cuCtxGetDevice),
    P(cuCtxCreate, 3020, cuCtxCreate_v2),
    P(cuCtxDestroy, 4000, cuCtxDestroy_v2),
    P(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    P(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
    P(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
    P(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
    P(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
    P(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),
    P(cuMemAlloc, 3020, cuMemAlloc_v2),
    P(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
    P(cuMemFree, 3020, cuMemFree_v2),
    P(cuMemGetInfo, 3020, cuMemGetInfo_v2),
    P(cuMemsetD8, 3020, cuMemsetD8_v2),
    P(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2),
    P(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2),
    P(cuStreamCreate, 2000, cuStreamCreate),
    P(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
    P(cuStreamDestroy, 4000, cuStreamDestroy_v2),
    P(cuStreamSynchronize, 2000, cuStreamSynchronize),
    PT(cuStreamSynchronize, 7000, cuStreamSynchronize_ptsz),
    P(cuCtxSynchronize, 2000, cuCtxSynchronize),
    P(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
    P(cuStreamBeginCapture, 10000, cuStreamBeginCapture),
    PT(cuStreamBeginCapture, 10000, cuStreamBeginCapture_ptsz),
    P(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2),
    PT(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2_ptsz),
    P(cuStreamEndCapture, 10000, cuStreamEndCapture),
    PT(cuStreamEndCapture, 10000, cuStreamEndCapture_ptsz),
    P(cuEventCreate, 2000, cuEventCreate),
    P(cuEventRecord, 2000, cuEventRecord),
    PT(cuEventRecord, 7000, cuEventRecord_ptsz),
    P(cuEventQuery, 2000, cuEventQuery),
    P(cuEventSynchronize, 2000, cuEventSynchronize),
    P(cuEventDestroy, 4000, cuEventDestroy_v2),
    P(cuStreamWaitEvent, 3020, cuStreamWaitEvent),
    PT(cuStreamWaitEvent, 7000, cuStreamWaitEvent_ptsz),
    P(cuGetProcAddress, 11030, cuGetProcAddress),
    P(cuGetProcAddress, 12000, cuGetProcAddress_v2),
    /* ptr.c */
    P(cuMemFreeAsync, 11020, cuMemFreeAsync),
    PT(cuMemFreeAsync, 11020, cuMemFreeAsync_ptsz),
    P(cuMemAllocAsync, 11020, cuMemAllocAsync),
    PT(cuMemAllocAsync, 11020, cuMemAllocAsync_ptsz),
    P(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync),
    PT(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync_ptsz),
    P(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool),
    P(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool),
    P(cuDeviceSetMemPool, 11020, cuDeviceSetMemPool),
    P(cuMemPoolCreate, 11020, cuMemPoolCreate),
    P(cuMemPoolDestroy, 11020, cuMemPoolDestroy),
    P(cuMemPoolSetAccess, 11020, cuMemPoolSetAccess),
    P(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute),
    P(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo),
    P(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2),
    P(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
    P(cuPointerGetAttributes, 7000, cuPointerGetAttributes),
    P(cuIpcGetMemHandle, 4010, cuIpcGetMemHandle),
    /* work.c */
    P(cuLaunchKernel, 4000, cuLaunchKernel),
    PT(cuLaunchKernel, 7000, cuLaunchKernel_ptsz),
    P(cuMemsetD8Async, 3020, cuMemsetD8Async),
    PT(cuMemsetD8Async, 7000, cuMemsetD8Async_ptsz),
    P(cuMemcpyHtoDAsync, 2000, cuMemcpyHtoDAsync),
    P(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2),
    PT(cuMemcpyHtoDAsync, 7000, cuMemcpyHtoDAsync_v2_ptsz),
    P(cuFutureLaunch, 13000, fk_future_launch),
};

/* ---- trampolines ------------------------------------------------------------- */

static CUresult t_alloc(CUdeviceptr *d, size_t n) { return cuMemAlloc_v2(d, n); }
static CUresult t_free(CUdeviceptr d) { return cuMemFree_v2(d); }
static CUresult t_sync(CUstream s) { return cuStreamSynchronize(s); }
static CUresult t_create(CUstream *s, unsigned f) { return cuStreamCreate(s, f); }
static CUresult t_destroy(CUstream s) { return cuStreamDestroy_v2(s); }

/* ptr.c's entry points: the calls whose meaning changes under a pool. */
static CUresult t_free_async(CUdeviceptr d, CUstream s) { return cuMemFreeAsync(d, s); }
static CUresult t_free_async_ptsz(CUdeviceptr d, CUstream s) { return cuMemFreeAsync_ptsz(d, s); }
static CUresult t_range(CUdeviceptr *b, size_t *n, CUdeviceptr d) { return cuMemGetAddressRange_v2(b, n, d); }
static CUresult t_attr(void *v, CUpointer_attribute a, CUdeviceptr d) {
  return cuPointerGetAttribute(v, a, d);
}
static CUresult t_attrs(unsigned n, CUpointer_attribute *a, void **v, CUdeviceptr d) {
  return cuPointerGetAttributes(n, a, v, d);
}
static CUresult t_ipc(CUipcMemHandle *h, CUdeviceptr d) { return cuIpcGetMemHandle(h, d); }

/* work.c's: a launch whose lookup a shim cannot recognise by its address. */
static CUresult t_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shared, CUstream s, void **params, void **extra) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}

static void *trampoline_ptr(void *fn) {
  if (fn == (void *)cuLaunchKernel) return (void *)t_launch;
  if (fn == (void *)cuMemFreeAsync) return (void *)t_free_async;
  if (fn == (void *)cuMemFreeAsync_ptsz) return (void *)t_free_async_ptsz;
  if (fn == (void *)cuMemGetAddressRange_v2) return (void *)t_range;
  if (fn == (void *)cuPointerGetAttribute) return (void *)t_attr;
  if (fn == (void *)cuPointerGetAttributes) return (void *)t_attrs;
  if (fn == (void *)cuIpcGetMemHandle) return (void *)t_ipc;
  return fn;
}

static void *trampoline(void *fn) {
  if (fn == (void *)cuMemAlloc_v2) return (void *)t_alloc;
  if (fn == (void *)cuMemFree_v2) return (void *)t_free;
  if (fn == (void *)cuStreamSynchronize) return (void *)t_sync;
  if (fn == (void *)cuStreamCreate) return (void *)t_create;
  if (fn == (void *)cuStreamDestroy_v2) return (void *)t_destroy;
  return trampoline_ptr(fn);
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status) {
  if (!symbol || !pfn || version > FK_VERSION ||
      (flags &
       ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
    return CUDA_ERROR_INVALID_VALUE;
  int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const proc_t *best = NULL;
  int known = 0;
  for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
    const proc_t *p = &procs[i];
    if (strcmp(p->base, symbol) != 0) continue;
    known = 1;
    if (p->version > version || (p->per_thread && !per_thread)) continue;
    if (!best || p->version > best->version || (p->version == best->version && p->per_thread)) best = p;
  }
  *pfn = best ? (fk.trampolines ? trampoline(best->fn) : best->fn) : NULL;
  if (fk.trace_proc)
    fprintf(stderr, "fakecu: cuGetProcAddress(%s, %d, %llu) -> %s\n", symbol, version,
            (unsigned long long)flags, best ? best->exported : "NULL");
  if (status)
    *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
              : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus) {
  fk_enter(__func__);
  return fk_leave(lookup(symbol, pfn, cudaVersion, flags, symbolStatus));
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  fk_enter(__func__);
  return fk_leave(lookup(symbol, pfn, cudaVersion, flags, NULL));
}

void *fk_export(const char *name) {
  for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
    if (strcmp(procs[i].exported, name) == 0) return procs[i].fn;
  return NULL;
}

/* ---- test hooks (fakecu.h): not counted ----------------------------------------- */

long fakecu_calls(const char *fn) {
  if (!fn) return 0;
  fk_lock_only();
  long n = fk_count_of(fn);
  fk_unlock_only();
  return n;
}

void fakecu_fail_alloc_after(long n) {
  fk_lock_only();
  fk.fail_after = n < 0 ? -1 : n;
  fk_unlock_only();
}

size_t fakecu_live_bytes(int device) {
  fk_lock_only();
  size_t n = device >= 0 && device < fk.ndev ? fk.used[device] : 0;
  fk_unlock_only();
  return n;
}

CUdeviceptr fakecu_raw_alloc(size_t size) {
  CUdeviceptr p = 0;
  fk_lock_only();
  fk_ctx *c = fk_current();
  if (!c || !size || fk_alloc_new(c, size, &p) != CUDA_SUCCESS) p = 0;
  fk_unlock_only();
  return p;
}

void *fakecu_entry(const char *name) { return name ? fk_export(name) : NULL; }
