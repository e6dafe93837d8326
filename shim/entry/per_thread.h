/* per_thread.h: the runtime entry points that can put work on a per-thread
 * default stream, which per_thread.c wraps to say so before the work is
 * submitted (device.h, cp_note_per_thread_stream: same-thread reuse keys go
 * off for good).
 *
 * The list is every function cuda_runtime_api.h of CUDA 13.0 gives a
 * per-thread twin (`#define NAME __CUDART_API_PTSZ(NAME)` or `_PTDS`),
 * plus nvcc's launch entry point __cudaLaunchKernel (crt/device_functions.h),
 * split in two: CP_PT_WORK submits device work (launches, copies, memsets,
 * event records and waits, graph launches and uploads, host functions,
 * prefetches, semaphores, attaches), CP_PT_NO_WORK does not or is wrapped
 * elsewhere (allocations and frees, synchronisations, captures, queries).
 * tests/unit/shim/per_thread.c reads the installed header and fails on a
 * twin in neither list, so a CUDA that adds one is noticed; until it is
 * listed, such an entry point reaches the runtime unwrapped and its work
 * is not seen (docs/DESIGN.md, "Per-thread default streams").
 *
 * X(name, kind, (parameters), (arguments), stream): kind PTSZ (the twin is
 * name_ptsz and takes a stream, 0 meaning the per-thread stream) or PTDS
 * (name_ptds, no stream: always the per-thread stream); stream is the
 * expression naming the stream in the plain entry (NULL for PTDS). */
#ifndef CUDAPOOL_SHIM_PER_THREAD_H
#define CUDAPOOL_SHIM_PER_THREAD_H

#include <cuda_runtime_api.h>

/* nvcc's <<<>>> calls these; no C header declares them. */
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                               cudaStream_t stream);

#define CP_PT_WORK(X) \
  X(cudaEventRecord, PTSZ, (cudaEvent_t event, cudaStream_t stream), (event, stream), stream) \
  X(cudaEventRecordWithFlags, PTSZ, (cudaEvent_t event, cudaStream_t stream, unsigned int flags), (event, stream, flags), stream) \
  X(cudaGraphLaunch, PTSZ, (cudaGraphExec_t graphExec, cudaStream_t stream), (graphExec, stream), stream) \
  X(cudaGraphUpload, PTSZ, (cudaGraphExec_t graphExec, cudaStream_t stream), (graphExec, stream), stream) \
  X(cudaLaunchCooperativeKernel, PTSZ, (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream), (func, gridDim, blockDim, args, sharedMem, stream), stream) \
  X(cudaLaunchHostFunc, PTSZ, (cudaStream_t stream, cudaHostFn_t fn, void *userData), (stream, fn, userData), stream) \
  X(cudaLaunchKernel, PTSZ, (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream), (func, gridDim, blockDim, args, sharedMem, stream), stream) \
  X(cudaLaunchKernelExC, PTSZ, (const cudaLaunchConfig_t *config, const void *func, void **args), (config, func, args), config ? config->stream : NULL) \
  X(cudaMemDiscardAndPrefetchBatchAsync, PTSZ, (void **dptrs, size_t *sizes, size_t count, struct cudaMemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, cudaStream_t stream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream), stream) \
  X(cudaMemDiscardBatchAsync, PTSZ, (void **dptrs, size_t *sizes, size_t count, unsigned long long flags, cudaStream_t stream), (dptrs, sizes, count, flags, stream), stream) \
  X(cudaMemPrefetchAsync, PTSZ, (const void *devPtr, size_t count, struct cudaMemLocation location, unsigned int flags, cudaStream_t stream), (devPtr, count, location, flags, stream), stream) \
  X(cudaMemPrefetchBatchAsync, PTSZ, (void **dptrs, size_t *sizes, size_t count, struct cudaMemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, cudaStream_t stream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, stream), stream) \
  X(cudaMemcpy, PTDS, (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind), (dst, src, count, kind), NULL) \
  X(cudaMemcpy2D, PTDS, (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind), (dst, dpitch, src, spitch, width, height, kind), NULL) \
  X(cudaMemcpy2DArrayToArray, PTDS, (cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc, size_t width, size_t height, enum cudaMemcpyKind kind), (dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, width, height, kind), NULL) \
  X(cudaMemcpy2DAsync, PTSZ, (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream), (dst, dpitch, src, spitch, width, height, kind, stream), stream) \
  X(cudaMemcpy2DFromArray, PTDS, (void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind), (dst, dpitch, src, wOffset, hOffset, width, height, kind), NULL) \
  X(cudaMemcpy2DFromArrayAsync, PTSZ, (void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream), (dst, dpitch, src, wOffset, hOffset, width, height, kind, stream), stream) \
  X(cudaMemcpy2DToArray, PTDS, (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind), (dst, wOffset, hOffset, src, spitch, width, height, kind), NULL) \
  X(cudaMemcpy2DToArrayAsync, PTSZ, (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream), (dst, wOffset, hOffset, src, spitch, width, height, kind, stream), stream) \
  X(cudaMemcpy3D, PTDS, (const struct cudaMemcpy3DParms *p), (p), NULL) \
  X(cudaMemcpy3DAsync, PTSZ, (const struct cudaMemcpy3DParms *p, cudaStream_t stream), (p, stream), stream) \
  X(cudaMemcpy3DBatchAsync, PTSZ, (size_t numOps, struct cudaMemcpy3DBatchOp *opList, unsigned long long flags, cudaStream_t stream), (numOps, opList, flags, stream), stream) \
  X(cudaMemcpy3DPeer, PTDS, (const struct cudaMemcpy3DPeerParms *p), (p), NULL) \
  X(cudaMemcpy3DPeerAsync, PTSZ, (const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream), (p, stream), stream) \
  X(cudaMemcpyArrayToArray, PTDS, (cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc, size_t count, enum cudaMemcpyKind kind), (dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind), NULL) \
  X(cudaMemcpyAsync, PTSZ, (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream), (dst, src, count, kind, stream), stream) \
  X(cudaMemcpyBatchAsync, PTSZ, (void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, cudaStream_t stream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream), stream) \
  X(cudaMemcpyFromArray, PTDS, (void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count, enum cudaMemcpyKind kind), (dst, src, wOffset, hOffset, count, kind), NULL) \
  X(cudaMemcpyFromArrayAsync, PTSZ, (void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream), (dst, src, wOffset, hOffset, count, kind, stream), stream) \
  X(cudaMemcpyFromSymbol, PTDS, (void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind), (dst, symbol, count, offset, kind), NULL) \
  X(cudaMemcpyFromSymbolAsync, PTSZ, (void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream), (dst, symbol, count, offset, kind, stream), stream) \
  X(cudaMemcpyToArray, PTDS, (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count, enum cudaMemcpyKind kind), (dst, wOffset, hOffset, src, count, kind), NULL) \
  X(cudaMemcpyToArrayAsync, PTSZ, (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream), (dst, wOffset, hOffset, src, count, kind, stream), stream) \
  X(cudaMemcpyToSymbol, PTDS, (const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind), (symbol, src, count, offset, kind), NULL) \
  X(cudaMemcpyToSymbolAsync, PTSZ, (const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream), (symbol, src, count, offset, kind, stream), stream) \
  X(cudaMemset, PTDS, (void *devPtr, int value, size_t count), (devPtr, value, count), NULL) \
  X(cudaMemset2D, PTDS, (void *devPtr, size_t pitch, int value, size_t width, size_t height), (devPtr, pitch, value, width, height), NULL) \
  X(cudaMemset2DAsync, PTSZ, (void *devPtr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream), (devPtr, pitch, value, width, height, stream), stream) \
  X(cudaMemset3D, PTDS, (struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent), (pitchedDevPtr, value, extent), NULL) \
  X(cudaMemset3DAsync, PTSZ, (struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent, cudaStream_t stream), (pitchedDevPtr, value, extent, stream), stream) \
  X(cudaMemsetAsync, PTSZ, (void *devPtr, int value, size_t count, cudaStream_t stream), (devPtr, value, count, stream), stream) \
  X(cudaSignalExternalSemaphoresAsync, PTSZ, (const cudaExternalSemaphore_t *extSemArray, const struct cudaExternalSemaphoreSignalParams *paramsArray, unsigned int numExtSems, cudaStream_t stream), (extSemArray, paramsArray, numExtSems, stream), stream) \
  X(cudaStreamAddCallback, PTSZ, (cudaStream_t stream, cudaStreamCallback_t callback, void *userData, unsigned int flags), (stream, callback, userData, flags), stream) \
  X(cudaStreamAttachMemAsync, PTSZ, (cudaStream_t stream, void *devPtr, size_t length, unsigned int flags), (stream, devPtr, length, flags), stream) \
  X(cudaStreamWaitEvent, PTSZ, (cudaStream_t stream, cudaEvent_t event, unsigned int flags), (stream, event, flags), stream) \
  X(cudaWaitExternalSemaphoresAsync, PTSZ, (const cudaExternalSemaphore_t *extSemArray, const struct cudaExternalSemaphoreWaitParams *paramsArray, unsigned int numExtSems, cudaStream_t stream), (extSemArray, paramsArray, numExtSems, stream), stream) \
  X(__cudaLaunchKernel, PTSZ, (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream), (kernel, gridDim, blockDim, args, sharedMem, stream), stream)

/* Runtime entry points that submit work but have no per-thread twin (their
 * stream is a stream, 0 the legacy one): wrapped for the learned order
 * (state/order.h) like the plain entries above. cudaMemcpyPeer is
 * synchronous, on the legacy stream. */
#define CP_ORDER_EXTRA_WORK(X) \
  X(cudaMemcpyPeerAsync, (void *dst, int dstDevice, const void *src, int srcDevice, size_t count, cudaStream_t stream), (dst, dstDevice, src, srcDevice, count, stream), stream) \
  X(cudaMemcpyPeer, (void *dst, int dstDevice, const void *src, int srcDevice, size_t count), (dst, dstDevice, src, srcDevice, count), NULL) \
  X(cudaGraphicsMapResources, (int count, cudaGraphicsResource_t *resources, cudaStream_t stream), (count, resources, stream), stream) \
  X(cudaGraphicsUnmapResources, (int count, cudaGraphicsResource_t *resources, cudaStream_t stream), (count, resources, stream), stream)

#define CP_PT_NO_WORK(X) \
  X(cudaFreeAsync) \
  X(cudaMallocAsync) \
  X(cudaMallocFromPoolAsync) \
  X(cudaGetDriverEntryPoint) \
  X(cudaGetDriverEntryPointByVersion) \
  X(cudaGraphInstantiateWithParams) \
  X(cudaStreamBeginCapture) \
  X(cudaStreamBeginCaptureToGraph) \
  X(cudaStreamCopyAttributes) \
  X(cudaStreamEndCapture) \
  X(cudaStreamGetAttribute) \
  X(cudaStreamGetCaptureInfo) \
  X(cudaStreamGetDevice) \
  X(cudaStreamGetFlags) \
  X(cudaStreamGetId) \
  X(cudaStreamGetPriority) \
  X(cudaStreamIsCapturing) \
  X(cudaStreamQuery) \
  X(cudaStreamSetAttribute) \
  X(cudaStreamSynchronize) \
  X(cudaStreamUpdateCaptureDependencies)

#endif
