/* libcuda.c: a fake libcuda.so.1 beside the fake runtime, with only the
 * driver entry points runtime programs call: the green-context ones
 * (cuGreenCtxCreate, cuGreenCtxStreamCreate, cuGreenCtxDestroy) and
 * cuStreamGetDevice, so that a green context's stream can carry held work on
 * the fake runtime and its races be counted (tests/programs/runtime/
 * green_ctx.c); and cuStreamWaitEvent(_ptsz), the runtime's wait made
 * through the driver, joins to a capture included
 * (tests/programs/runtime/capture_corners.c, destroy_joined_driver*).
 *
 * A green context is its device (the resource descriptor is not modelled);
 * its stream is a created non-blocking stream of that device in the fake
 * runtime (fakecuda_stream_create_on), made through no cuda* entry point, as
 * the real driver's stream is. Invariant: as the real call, a stream without
 * CU_STREAM_NON_BLOCKING or a context without CU_GREEN_CTX_DEFAULT_STREAM is
 * refused (CUDA_ERROR_INVALID_VALUE). Everything else of the driver is
 * missing, so cudapool finds this libcuda unusable for its driver layer and
 * serves the runtime's, as for a program that never loaded libcuda. */
#define __CUDA_API_VERSION_INTERNAL 1 /* cuda.h declares the _ptsz variants too */
#include <cuda.h>
#include <stdlib.h>

#include "fakecuda.h"

struct CUgreenCtx_st {
  CUdevice device;
};

CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  (void)desc;
  if (!phCtx || !(flags & CU_GREEN_CTX_DEFAULT_STREAM) || dev < 0) return CUDA_ERROR_INVALID_VALUE;
  CUgreenCtx g = malloc(sizeof *g);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  g->device = dev;
  *phCtx = g;
  return CUDA_SUCCESS;
}

CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) {
  if (!hCtx) return CUDA_ERROR_INVALID_HANDLE;
  free(hCtx);
  return CUDA_SUCCESS;
}

CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags, int priority) {
  (void)priority;
  if (!phStream || !greenCtx || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  cudaStream_t s;
  if (fakecuda_stream_create_on(greenCtx->device, &s, cudaStreamNonBlocking) != cudaSuccess)
    return CUDA_ERROR_INVALID_VALUE;
  *phStream = (CUstream)s;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device) {
  int dev = fakecuda_stream_device((cudaStream_t)hStream);
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0) return CUDA_ERROR_INVALID_HANDLE;
  *device = dev;
  return CUDA_SUCCESS;
}

/* CUresult and cudaError_t share the numbers of every code the wait returns. */
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  return (CUresult)fakecuda_stream_wait_event((cudaStream_t)hStream, (cudaEvent_t)hEvent, Flags, 0);
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  return (CUresult)fakecuda_stream_wait_event((cudaStream_t)hStream, (cudaEvent_t)hEvent, Flags, 1);
}
