/* drvprogs.h: what the driver-level test programs share. They reach the
 * driver as a statically linked CUDA runtime does: dlopen("libcuda.so.1"),
 * one dlsym(handle, "cuGetProcAddress_v2"), then cuGetProcAddress_v2 for
 * every entry point (drv_load). They run on the fake driver (and would, with
 * the real libcuda, on a GPU), natively or with libcudapool.so preloaded,
 * and print one line per check, "tag: key=value ...", like the programs of
 * tests/programs/runtime: "pool" and "info" lines may differ under the shim,
 * all others must not.
 * The fake's hooks come from the driver's handle, cudapool's control API
 * from dlsym(RTLD_DEFAULT), so a missing one is reported, not a link error. */
#ifndef CUDAPOOL_DRVPROGS_H
#define CUDAPOOL_DRVPROGS_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudapool.h"
#include "pool_probe.h"

#define MiB ((size_t)1 << 20)

/* X(name, base, version): every entry point the programs use, looked up
 * under its base name with the version its variant appeared in. */
#define DRV_FUNCS(X)                                                \
  X(cuInit, cuInit, 2000)                                           \
  X(cuDeviceGet, cuDeviceGet, 2000)                                 \
  X(cuCtxGetCurrent, cuCtxGetCurrent, 4000)                         \
  X(cuCtxSetCurrent, cuCtxSetCurrent, 4000)                         \
  X(cuCtxGetDevice, cuCtxGetDevice, 2000)                           \
  X(cuCtxCreate_v2, cuCtxCreate, 3020)                              \
  X(cuCtxDestroy_v2, cuCtxDestroy, 4000)                            \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000)       \
  X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000) \
  X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000)     \
  X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000)         \
  X(cuMemAlloc_v2, cuMemAlloc, 3020)                                \
  X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020)                      \
  X(cuMemFree_v2, cuMemFree, 3020)                                  \
  X(cuMemGetInfo_v2, cuMemGetInfo, 3020)                            \
  X(cuMemsetD8_v2, cuMemsetD8, 3020)                                \
  X(cuMemcpyHtoD_v2, cuMemcpyHtoD, 3020)                            \
  X(cuMemcpyDtoH_v2, cuMemcpyDtoH, 3020)                            \
  X(cuStreamCreate, cuStreamCreate, 2000)                           \
  X(cuStreamDestroy_v2, cuStreamDestroy, 4000)                      \
  X(cuStreamSynchronize, cuStreamSynchronize, 2000)                 \
  X(cuCtxSynchronize_v2, cuCtxSynchronize, 13000)                   \
  X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010)           \
  X(cuStreamEndCapture, cuStreamEndCapture, 10000)                  \
  X(cuEventCreate, cuEventCreate, 2000)                             \
  X(cuEventRecord, cuEventRecord, 2000)                             \
  X(cuEventDestroy_v2, cuEventDestroy, 4000)                        \
  X(cuStreamWaitEvent, cuStreamWaitEvent, 3020)

typedef struct drv {
  void *lib;
  __typeof__(cuGetProcAddress_v2) *getProc;
#define DRV_FIELD(name, base, version) __typeof__(name) *name;
  DRV_FUNCS(DRV_FIELD)
#undef DRV_FIELD
} drv_t;

static drv_t D;

/* Loads the driver the static runtime's way; exits 3 if it cannot. */
static inline void drv_load(void) {
  D.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!D.lib) {
    printf("setup: no libcuda.so.1: %s\n", dlerror());
    exit(3);
  }
  D.getProc = (__typeof__(cuGetProcAddress_v2) *)dlsym(D.lib, "cuGetProcAddress_v2");
  if (!D.getProc) exit(3);
#define DRV_LOOKUP(name, base, version)                                                                  \
  if (D.getProc(#base, (void **)&D.name, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL) || !D.name) { \
    printf("setup: no %s\n", #base);                                                                     \
    exit(3);                                                                                             \
  }
  DRV_FUNCS(DRV_LOOKUP)
#undef DRV_LOOKUP
}

/* cuInit, then the primary context of device 0 current, as the runtime
 * makes it. */
static inline CUcontext drv_setup(void) {
  drv_load();
  CUdevice dev = 0;
  CUcontext ctx = NULL;
  if (D.cuInit(0) || D.cuDeviceGet(&dev, 0) || D.cuDevicePrimaryCtxRetain(&ctx, dev) ||
      D.cuCtxSetCurrent(ctx)) {
    printf("setup: cannot make a context\n");
    exit(3);
  }
  return ctx;
}

static inline void *drv_hook(const char *name) { return D.lib ? dlsym(D.lib, name) : NULL; }

static inline long fake_calls(const char *fn) {
  long (*f)(const char *) = (long (*)(const char *))drv_hook("fakecu_calls");
  return f ? f(fn) : -1;
}

static inline long fake_live(int dev) {
  size_t (*f)(int) = (size_t(*)(int))drv_hook("fakecu_live_bytes");
  return f ? (long)f(dev) : -1;
}

static inline void *fake_entry(const char *name) {
  void *(*f)(const char *) = (void *(*)(const char *))drv_hook("fakecu_entry");
  return f ? f(name) : NULL;
}

static inline void print_pool(int dev) {
  cudapool_stats_t s;
  int rc = pool_stats(dev, &s);
  if (rc != 0) {
    if (rc < 0)
      printf("pool: nopool\n");
    else
      printf("pool: dev=%d error=%d\n", dev, rc);
    return;
  }
  printf("pool: dev=%d hits=%llu misses=%llu num_alloc=%llu num_free=%llu num_device_alloc=%llu "
         "num_barriers=%llu num_ooms=%llu allocated=%lld reserved=%lld segments=%lld\n",
         dev, (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.num_alloc,
         (unsigned long long)s.num_free, (unsigned long long)s.num_device_alloc,
         (unsigned long long)s.num_barriers, (unsigned long long)s.num_ooms,
         (long long)s.allocated_bytes.current, (long long)s.reserved_bytes.current,
         (long long)s.segments.current);
}

/* A driver entry point through cuGetProcAddress (CUDA 13's version), with
 * the flags given; NULL when the driver has none. */
static inline void *drv_proc(const char *base, cuuint64_t flags) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  if (D.getProc(base, &fn, 13000, flags, &st) != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS)
    return NULL;
  return fn;
}

/* Writes a pattern to p and reads it back: 1 when both worked and match. */
static inline int drv_round_trip(CUdeviceptr p, size_t n, unsigned char seed) {
  static unsigned char in[64 * 1024], out[64 * 1024];
  if (n > sizeof in) n = sizeof in;
  for (size_t i = 0; i < n; i++) in[i] = (unsigned char)(seed + i * 13);
  if (D.cuMemcpyHtoD_v2(p, in, n) != CUDA_SUCCESS) return 0;
  memset(out, 0, n);
  if (D.cuMemcpyDtoH_v2(out, p, n) != CUDA_SUCCESS) return 0;
  return memcmp(in, out, n) == 0;
}

#endif
