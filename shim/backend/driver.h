/* driver.h: the CUDA driver (libcuda) as the shim sees it: the real entry
 * points it calls, the entry points it serves, and the primary contexts.
 *
 * Every file that includes this one must define __CUDA_API_VERSION_INTERNAL
 * before its first include, so that cuda.h declares every exported variant
 * (cuMemAlloc_v2 and the 32-bit cuMemAlloc, cuStreamSynchronize and its
 * _ptsz twin) under its own name instead of renaming them with macros.
 *
 * cp_drv holds libcuda's own functions, looked up by handle in the libcuda
 * the program loaded (dlopen "libcuda.so.1" with RTLD_NOLOAD), so they are
 * found whether the program linked -lcuda or dlopen'ed it locally; the look
 * is repeated until libcuda is there. The served entry points (CP_DRV_SERVED)
 * are cudapool's wrappers (driver_mem.c, driver_stream.c, and the resolvers
 * in dlsym_hook.c), exported under the driver's names for programs linked
 * with -lcuda and handed out by the resolver (cuGetProcAddress) and the dlsym
 * hook for everything else.
 *
 * Threads: cp_drv_ready() is safe to race; cp_drv is written under a mutex,
 * once (atomic stores; a wrapper's first read is an atomic load). The
 * primary-context cache is atomics only. */
#ifndef CUDAPOOL_SHIM_DRIVER_H
#define CUDAPOOL_SHIM_DRIVER_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

#include <stdatomic.h>

#include "backend/api.h"

/* Exported by libcuda, declared by no header. */
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream);

/* The served variants: X(name). Each has a wrapper named cp_w_<name>. */
#define CP_DRV_SERVED(X)              \
  X(cuMemAlloc_v2)                    \
  X(cuMemFree_v2)                     \
  X(cuMemAllocPitch_v2)               \
  X(cuMemGetInfo_v2)                  \
  X(cuStreamSynchronize)              \
  X(cuStreamSynchronize_ptsz)         \
  X(cuCtxSynchronize)                 \
  X(cuCtxSynchronize_v2)              \
  X(cuStreamCreate)                   \
  X(cuStreamCreateWithPriority)       \
  X(cuStreamDestroy_v2)               \
  X(cuDevicePrimaryCtxReset)          \
  X(cuDevicePrimaryCtxReset_v2)       \
  X(cuDevicePrimaryCtxRelease)        \
  X(cuDevicePrimaryCtxRelease_v2)     \
  X(cuStreamBeginCapture)             \
  X(cuStreamBeginCapture_ptsz)        \
  X(cuStreamBeginCapture_v2)          \
  X(cuStreamBeginCapture_v2_ptsz)     \
  X(cuStreamBeginCaptureToGraph)      \
  X(cuStreamBeginCaptureToGraph_ptsz) \
  X(cuStreamEndCapture)               \
  X(cuStreamEndCapture_ptsz)          \
  X(cuGetProcAddress)                 \
  X(cuGetProcAddress_v2)              \
  X(cuMemFreeAsync)                   \
  X(cuMemFreeAsync_ptsz)              \
  X(cuMemGetAddressRange_v2)          \
  X(cuPointerGetAttribute)            \
  X(cuPointerGetAttributes)           \
  X(cuIpcGetMemHandle)                \
  X(cuMemAllocAsync)                  \
  X(cuMemAllocAsync_ptsz)             \
  X(cuMemAllocFromPoolAsync)          \
  X(cuMemAllocFromPoolAsync_ptsz)     \
  X(cuDeviceSetMemPool)               \
  X(cuMemPoolSetAccess)               \
  X(cuMemPoolGetAttribute)            \
  X(cuMemPoolTrimTo)                  \
  X(cuGreenCtxStreamCreate)           \
  X(cuStreamWaitEvent)                \
  X(cuStreamWaitEvent_ptsz)           \
  X(cuCtxEnablePeerAccess)

/* Other driver functions the shim calls: X(name, needed). needed = the
 * driver flavour cannot work without it. The flavour also calls served ones
 * (cp_drv.cuStreamWaitEvent, which it needs: driver_api.c checks it). */
#define CP_DRV_OTHERS(X)                  \
  X(cuCtxGetCurrent, true)                \
  X(cuCtxGetDevice, true)                 \
  X(cuCtxPushCurrent_v2, true)            \
  X(cuCtxPopCurrent_v2, true)             \
  X(cuDeviceGetCount, false)              \
  X(cuDevicePrimaryCtxRetain, true)       \
  X(cuDevicePrimaryCtxGetState, true)     \
  X(cuEventCreate, true)                  \
  X(cuEventRecord, true)                  \
  X(cuEventQuery, true)                   \
  X(cuEventSynchronize, true)             \
  X(cuEventDestroy_v2, true)              \
  X(cuStreamQuery, false)                 \
  X(cuStreamIsCapturing, false)           \
  X(cuDeviceGetAttribute, false)          \
  X(cuDeviceCanAccessPeer, false)         \
  X(cuMemGetAllocationGranularity, false) \
  X(cuMemAddressReserve, false)           \
  X(cuMemAddressFree, false)              \
  X(cuMemCreate, false)                   \
  X(cuMemRelease, false)                  \
  X(cuMemMap, false)                      \
  X(cuMemUnmap, false)                    \
  X(cuMemSetAccess, false)                \
  X(cuDeviceGetDefaultMemPool, false)     \
  X(cuDeviceGetUuid_v2, false)            \
  X(cuStreamGetDevice, false)

typedef struct cp_drv {
#define CP_DRV_FIELD(name) __typeof__(name) *name;
#define CP_DRV_FIELD2(name, needed) __typeof__(name) *name;
  CP_DRV_SERVED(CP_DRV_FIELD)
  CP_DRV_OTHERS(CP_DRV_FIELD2)
#undef CP_DRV_FIELD
#undef CP_DRV_FIELD2
} cp_drv_t;

extern cp_drv_t cp_drv;

/* The wrappers (hidden; exported under the driver's names by alias). */
#define CP_DRV_DECLARE(name) extern __typeof__(name) cp_w_##name;
CP_DRV_SERVED(CP_DRV_DECLARE)
#undef CP_DRV_DECLARE

/* Export wrapper cp_w_<name> under the driver's name, for programs linked
 * with -lcuda (the hidden name is what the resolver hands out). */
#define CP_DRV_EXPORT(name) \
  extern __typeof__(name) name __attribute__((visibility("default"), alias("cp_w_" #name)));
/* In a wrapper: libcuda's own function, looked up first if the program
 * reached the wrapper before the shim found libcuda (-lcuda programs). */
#define CP_DRV_REAL(name) (__atomic_load_n(&cp_drv.name, __ATOMIC_ACQUIRE) ? (void)0 : (void)cp_drv_ready())
/* First statement of a wrapper: the real function, or the driver's own
 * answer when libcuda lacks it. */
#define CP_DRV_NEED(name)                                \
  do {                                                   \
    CP_DRV_REAL(name);                                   \
    if (!cp_drv.name) return CUDA_ERROR_NOT_INITIALIZED; \
  } while (0)

/* The handle of the libcuda the program loaded (kept open), NULL until it
 * is loaded: other tables of libcuda's functions (entry/driver_work.c) are
 * looked up in it with cp_real_dlsym. */
void *cp_drv_handle(void);

/* Whether base (a name as cuGetProcAddress is asked for it: no _v2, _ptsz)
 * is a driver entry point of the build's CUDA headers (driver_names.c). */
bool cp_drv_name_known(const char *base);
/* The whole set, sorted by strcmp: its size, the names in *names. */
size_t cp_drv_names(const char *const **names);

/* Whether stream is capturing, as the driver says (the shim's own records
 * where the driver lacks cuStreamIsCapturing): its native code. */
int cp_drv_capturing(uintptr_t stream, bool *capturing);


/* The wrapper to hand out for `fn`, libcuda's answer to a lookup of `name`
 * (a dlsym by handle: the exported name; NULL for cuGetProcAddress, which
 * passes the base name, cudaVersion and flags instead): the wrapper when fn
 * is one of the served entry points, else fn itself. */
void *cp_drv_hook(void *fn, const char *name, const char *base, int cuda_version, cuuint64_t flags);
/* Whether name is one of the served variants' exported names
 * (entry/dlsym_hook.c). */
bool cp_drv_is_served_name(const char *name);
/* glibc's own dlsym (real_dlsym.c): found once, never instrumented. */
typedef void *cp_dlsym_fn(void *, const char *);
cp_dlsym_fn *cp_find_real_dlsym(void);
void *cp_real_dlsym(void *handle, const char *name);

/* The primary context of dev when it is active, else NULL (cached). */
CUcontext cp_drv_primary(int dev);
/* The primary context of dev was reset or released: forget the handle. */
void cp_drv_forget_primary(int dev);
/* Bumped by every cp_drv_forget_primary. */
extern atomic_uint cp_drv_primary_generation;

#endif
