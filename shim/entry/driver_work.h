/* driver_work.h: the driver entry points that put work on a stream, which
 * driver_work.c wraps to tell the learned order (state/order.h) before the
 * work is submitted, and the entry points that take a stream but submit no
 * work.
 *
 * The lists are every function cuda.h of CUDA 13.0 declares (with
 * __CUDA_API_VERSION_INTERNAL, so each exported variant under its own name:
 * cuMemcpyHtoD the 32-bit one, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds) that
 * takes a CUstream, is a launch, or is a synchronous copy or memset.
 * CP_DRV_WORK submits work that may touch memory: launches, copies and
 * memsets (synchronous ones too: they run on the legacy stream, or the
 * per-thread one for _ptds), graph launches and uploads, host functions and
 * callbacks, stream memory operations, external semaphores, prefetches and
 * discards, attaches, graphics maps, sparse array maps, decompression.
 * CP_DRV_WORK_BY_HAND is wrapped by hand (driver_work.c): its streams are
 * in an array. CP_DRV_NO_WORK touches no memory the pool hands out, or is
 * seen elsewhere: event records and stream waits (they order, they do not
 * touch memory; driver_stream.c wraps the waits, which may join a capture),
 * stream creation, destruction, queries, synchronisation,
 * attributes and captures, the stream-ordered allocations and frees
 * (driver_async.c, driver_mem.c), and graph instantiation (its upload stream
 * is inside its parameters; the runtime's twin is not work either, see
 * per_thread.h). tests/unit/shim/driver_work.c reads the installed cuda.h
 * and fails on a function of those kinds in no list, so a CUDA that adds
 * one is noticed. A driver newer than that header may still hand out an
 * entry point no list knows: dlsym_hook.c then stops the learned order for
 * the process (cp_order_give_up). The interop headers (cudaGL.h, cudaEGL.h,
 * cudaVDPAU.h) are not listed: their stream calls map graphics resources,
 * never pool memory.
 *
 * X(name, kind, (parameters), (arguments), stream): kind PLAIN (0 is the
 * legacy stream; the synchronous calls without a stream pass NULL, the
 * legacy stream), PTSZ (a _ptsz variant: 0 is the calling thread's
 * per-thread stream) or PTDS (a _ptds variant, no stream argument: the
 * per-thread stream, NULL here); stream is the expression naming the
 * stream. Every file that includes this one defines
 * __CUDA_API_VERSION_INTERNAL before its first include (backend/driver.h). */
#ifndef CUDAPOOL_SHIM_DRIVER_WORK_H
#define CUDAPOOL_SHIM_DRIVER_WORK_H

#include <cuda.h>

#define CP_DRV_WORK(X) \
  X(cuGraphLaunch, PLAIN, (CUgraphExec hGraph, CUstream hStream), (hGraph, hStream), hStream) \
  X(cuGraphLaunch_ptsz, PTSZ, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream), hStream) \
  X(cuGraphUpload, PLAIN, (CUgraphExec hGraph, CUstream hStream), (hGraph, hStream), hStream) \
  X(cuGraphUpload_ptsz, PTSZ, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream), hStream) \
  X(cuGraphicsMapResources, PLAIN, (unsigned int count, CUgraphicsResource *resources, CUstream hStream), (count, resources, hStream), hStream) \
  X(cuGraphicsMapResources_ptsz, PTSZ, (unsigned int count, CUgraphicsResource *resources, CUstream hStream), (count, resources, hStream), hStream) \
  X(cuGraphicsUnmapResources, PLAIN, (unsigned int count, CUgraphicsResource *resources, CUstream hStream), (count, resources, hStream), hStream) \
  X(cuGraphicsUnmapResources_ptsz, PTSZ, (unsigned int count, CUgraphicsResource *resources, CUstream hStream), (count, resources, hStream), hStream) \
  X(cuLaunch, PLAIN, (CUfunction f), (f), NULL) \
  X(cuLaunchCooperativeKernel, PLAIN, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams), (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams), hStream) \
  X(cuLaunchCooperativeKernel_ptsz, PTSZ, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams), (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams), hStream) \
  X(cuLaunchGrid, PLAIN, (CUfunction f, int grid_width, int grid_height), (f, grid_width, grid_height), NULL) \
  X(cuLaunchGridAsync, PLAIN, (CUfunction f, int grid_width, int grid_height, CUstream hStream), (f, grid_width, grid_height, hStream), hStream) \
  X(cuLaunchHostFunc, PLAIN, (CUstream hStream, CUhostFn fn, void *userData), (hStream, fn, userData), hStream) \
  X(cuLaunchHostFunc_ptsz, PTSZ, (CUstream hStream, CUhostFn fn, void *userData), (hStream, fn, userData), hStream) \
  X(cuLaunchKernel, PLAIN, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra), (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra), hStream) \
  X(cuLaunchKernelEx, PLAIN, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra), (config, f, kernelParams, extra), config ? config->hStream : NULL) \
  X(cuLaunchKernelEx_ptsz, PTSZ, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra), (config, f, kernelParams, extra), config ? config->hStream : NULL) \
  X(cuLaunchKernel_ptsz, PTSZ, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra), (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra), hStream) \
  X(cuMemBatchDecompressAsync, PLAIN, (CUmemDecompressParams *paramsArray, size_t count, unsigned int flags, size_t *errorIndex, CUstream stream), (paramsArray, count, flags, errorIndex, stream), stream) \
  X(cuMemBatchDecompressAsync_ptsz, PTSZ, (CUmemDecompressParams *paramsArray, size_t count, unsigned int flags, size_t *errorIndex, CUstream stream), (paramsArray, count, flags, errorIndex, stream), stream) \
  X(cuMemDiscardAndPrefetchBatchAsync, PLAIN, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream), hStream) \
  X(cuMemDiscardAndPrefetchBatchAsync_ptsz, PTSZ, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream), hStream) \
  X(cuMemDiscardBatchAsync, PLAIN, (CUdeviceptr *dptrs, size_t *sizes, size_t count, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, flags, hStream), hStream) \
  X(cuMemDiscardBatchAsync_ptsz, PTSZ, (CUdeviceptr *dptrs, size_t *sizes, size_t count, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, flags, hStream), hStream) \
  X(cuMemMapArrayAsync, PLAIN, (CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream), (mapInfoList, count, hStream), hStream) \
  X(cuMemMapArrayAsync_ptsz, PTSZ, (CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream), (mapInfoList, count, hStream), hStream) \
  X(cuMemPrefetchAsync, PLAIN, (CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream), (devPtr, count, dstDevice, hStream), hStream) \
  X(cuMemPrefetchAsync_ptsz, PTSZ, (CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream), (devPtr, count, dstDevice, hStream), hStream) \
  X(cuMemPrefetchAsync_v2, PLAIN, (CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream), (devPtr, count, location, flags, hStream), hStream) \
  X(cuMemPrefetchAsync_v2_ptsz, PTSZ, (CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream), (devPtr, count, location, flags, hStream), hStream) \
  X(cuMemPrefetchBatchAsync, PLAIN, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream), hStream) \
  X(cuMemPrefetchBatchAsync_ptsz, PTSZ, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream), hStream) \
  X(cuMemcpy, PLAIN, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), (dst, src, ByteCount), NULL) \
  X(cuMemcpy2D, PLAIN, (const CUDA_MEMCPY2D_v1 *pCopy), (pCopy), NULL) \
  X(cuMemcpy2DAsync, PLAIN, (const CUDA_MEMCPY2D_v1 *pCopy, CUstream hStream), (pCopy, hStream), hStream) \
  X(cuMemcpy2DAsync_v2, PLAIN, (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream), hStream) \
  X(cuMemcpy2DAsync_v2_ptsz, PTSZ, (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream), hStream) \
  X(cuMemcpy2DUnaligned, PLAIN, (const CUDA_MEMCPY2D_v1 *pCopy), (pCopy), NULL) \
  X(cuMemcpy2DUnaligned_v2, PLAIN, (const CUDA_MEMCPY2D *pCopy), (pCopy), NULL) \
  X(cuMemcpy2DUnaligned_v2_ptds, PTDS, (const CUDA_MEMCPY2D *pCopy), (pCopy), NULL) \
  X(cuMemcpy2D_v2, PLAIN, (const CUDA_MEMCPY2D *pCopy), (pCopy), NULL) \
  X(cuMemcpy2D_v2_ptds, PTDS, (const CUDA_MEMCPY2D *pCopy), (pCopy), NULL) \
  X(cuMemcpy3D, PLAIN, (const CUDA_MEMCPY3D_v1 *pCopy), (pCopy), NULL) \
  X(cuMemcpy3DAsync, PLAIN, (const CUDA_MEMCPY3D_v1 *pCopy, CUstream hStream), (pCopy, hStream), hStream) \
  X(cuMemcpy3DAsync_v2, PLAIN, (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream), hStream) \
  X(cuMemcpy3DAsync_v2_ptsz, PTSZ, (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream), hStream) \
  X(cuMemcpy3DBatchAsync, PLAIN, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx, unsigned long long flags, CUstream hStream), (numOps, opList, failIdx, flags, hStream), hStream) \
  X(cuMemcpy3DBatchAsync_ptsz, PTSZ, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx, unsigned long long flags, CUstream hStream), (numOps, opList, failIdx, flags, hStream), hStream) \
  X(cuMemcpy3DBatchAsync_v2, PLAIN, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags, CUstream hStream), (numOps, opList, flags, hStream), hStream) \
  X(cuMemcpy3DBatchAsync_v2_ptsz, PTSZ, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags, CUstream hStream), (numOps, opList, flags, hStream), hStream) \
  X(cuMemcpy3DPeer, PLAIN, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy), NULL) \
  X(cuMemcpy3DPeerAsync, PLAIN, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream), hStream) \
  X(cuMemcpy3DPeerAsync_ptsz, PTSZ, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream), hStream) \
  X(cuMemcpy3DPeer_ptds, PTDS, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy), NULL) \
  X(cuMemcpy3D_v2, PLAIN, (const CUDA_MEMCPY3D *pCopy), (pCopy), NULL) \
  X(cuMemcpy3D_v2_ptds, PTDS, (const CUDA_MEMCPY3D *pCopy), (pCopy), NULL) \
  X(cuMemcpyAsync, PLAIN, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream), (dst, src, ByteCount, hStream), hStream) \
  X(cuMemcpyAsync_ptsz, PTSZ, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream), (dst, src, ByteCount, hStream), hStream) \
  X(cuMemcpyAtoA, PLAIN, (CUarray dstArray, unsigned int dstOffset, CUarray srcArray, unsigned int srcOffset, unsigned int ByteCount), (dstArray, dstOffset, srcArray, srcOffset, ByteCount), NULL) \
  X(cuMemcpyAtoA_v2, PLAIN, (CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstArray, dstOffset, srcArray, srcOffset, ByteCount), NULL) \
  X(cuMemcpyAtoA_v2_ptds, PTDS, (CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstArray, dstOffset, srcArray, srcOffset, ByteCount), NULL) \
  X(cuMemcpyAtoD, PLAIN, (CUdeviceptr_v1 dstDevice, CUarray srcArray, unsigned int srcOffset, unsigned int ByteCount), (dstDevice, srcArray, srcOffset, ByteCount), NULL) \
  X(cuMemcpyAtoD_v2, PLAIN, (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstDevice, srcArray, srcOffset, ByteCount), NULL) \
  X(cuMemcpyAtoD_v2_ptds, PTDS, (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstDevice, srcArray, srcOffset, ByteCount), NULL) \
  X(cuMemcpyAtoH, PLAIN, (void *dstHost, CUarray srcArray, unsigned int srcOffset, unsigned int ByteCount), (dstHost, srcArray, srcOffset, ByteCount), NULL) \
  X(cuMemcpyAtoHAsync, PLAIN, (void *dstHost, CUarray srcArray, unsigned int srcOffset, unsigned int ByteCount, CUstream hStream), (dstHost, srcArray, srcOffset, ByteCount, hStream), hStream) \
  X(cuMemcpyAtoHAsync_v2, PLAIN, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream), (dstHost, srcArray, srcOffset, ByteCount, hStream), hStream) \
  X(cuMemcpyAtoHAsync_v2_ptsz, PTSZ, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream), (dstHost, srcArray, srcOffset, ByteCount, hStream), hStream) \
  X(cuMemcpyAtoH_v2, PLAIN, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstHost, srcArray, srcOffset, ByteCount), NULL) \
  X(cuMemcpyAtoH_v2_ptds, PTDS, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstHost, srcArray, srcOffset, ByteCount), NULL) \
  X(cuMemcpyBatchAsync, PLAIN, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream), hStream) \
  X(cuMemcpyBatchAsync_ptsz, PTSZ, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream), hStream) \
  X(cuMemcpyBatchAsync_v2, PLAIN, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream), hStream) \
  X(cuMemcpyBatchAsync_v2_ptsz, PTSZ, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream), hStream) \
  X(cuMemcpyDtoA, PLAIN, (CUarray dstArray, unsigned int dstOffset, CUdeviceptr_v1 srcDevice, unsigned int ByteCount), (dstArray, dstOffset, srcDevice, ByteCount), NULL) \
  X(cuMemcpyDtoA_v2, PLAIN, (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount), (dstArray, dstOffset, srcDevice, ByteCount), NULL) \
  X(cuMemcpyDtoA_v2_ptds, PTDS, (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount), (dstArray, dstOffset, srcDevice, ByteCount), NULL) \
  X(cuMemcpyDtoD, PLAIN, (CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice, unsigned int ByteCount), (dstDevice, srcDevice, ByteCount), NULL) \
  X(cuMemcpyDtoDAsync, PLAIN, (CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice, unsigned int ByteCount, CUstream hStream), (dstDevice, srcDevice, ByteCount, hStream), hStream) \
  X(cuMemcpyDtoDAsync_v2, PLAIN, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), (dstDevice, srcDevice, ByteCount, hStream), hStream) \
  X(cuMemcpyDtoDAsync_v2_ptsz, PTSZ, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), (dstDevice, srcDevice, ByteCount, hStream), hStream) \
  X(cuMemcpyDtoD_v2, PLAIN, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount), (dstDevice, srcDevice, ByteCount), NULL) \
  X(cuMemcpyDtoD_v2_ptds, PTDS, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount), (dstDevice, srcDevice, ByteCount), NULL) \
  X(cuMemcpyDtoH, PLAIN, (void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount), (dstHost, srcDevice, ByteCount), NULL) \
  X(cuMemcpyDtoHAsync, PLAIN, (void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount, CUstream hStream), (dstHost, srcDevice, ByteCount, hStream), hStream) \
  X(cuMemcpyDtoHAsync_v2, PLAIN, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), (dstHost, srcDevice, ByteCount, hStream), hStream) \
  X(cuMemcpyDtoHAsync_v2_ptsz, PTSZ, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), (dstHost, srcDevice, ByteCount, hStream), hStream) \
  X(cuMemcpyDtoH_v2, PLAIN, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount), NULL) \
  X(cuMemcpyDtoH_v2_ptds, PTDS, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount), NULL) \
  X(cuMemcpyHtoA, PLAIN, (CUarray dstArray, unsigned int dstOffset, const void *srcHost, unsigned int ByteCount), (dstArray, dstOffset, srcHost, ByteCount), NULL) \
  X(cuMemcpyHtoAAsync, PLAIN, (CUarray dstArray, unsigned int dstOffset, const void *srcHost, unsigned int ByteCount, CUstream hStream), (dstArray, dstOffset, srcHost, ByteCount, hStream), hStream) \
  X(cuMemcpyHtoAAsync_v2, PLAIN, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream), (dstArray, dstOffset, srcHost, ByteCount, hStream), hStream) \
  X(cuMemcpyHtoAAsync_v2_ptsz, PTSZ, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream), (dstArray, dstOffset, srcHost, ByteCount, hStream), hStream) \
  X(cuMemcpyHtoA_v2, PLAIN, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount), (dstArray, dstOffset, srcHost, ByteCount), NULL) \
  X(cuMemcpyHtoA_v2_ptds, PTDS, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount), (dstArray, dstOffset, srcHost, ByteCount), NULL) \
  X(cuMemcpyHtoD, PLAIN, (CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount), (dstDevice, srcHost, ByteCount), NULL) \
  X(cuMemcpyHtoDAsync, PLAIN, (CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount, CUstream hStream), (dstDevice, srcHost, ByteCount, hStream), hStream) \
  X(cuMemcpyHtoDAsync_v2, PLAIN, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream), (dstDevice, srcHost, ByteCount, hStream), hStream) \
  X(cuMemcpyHtoDAsync_v2_ptsz, PTSZ, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream), (dstDevice, srcHost, ByteCount, hStream), hStream) \
  X(cuMemcpyHtoD_v2, PLAIN, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount), NULL) \
  X(cuMemcpyHtoD_v2_ptds, PTDS, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount), NULL) \
  X(cuMemcpyPeer, PLAIN, (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount), (dstDevice, dstContext, srcDevice, srcContext, ByteCount), NULL) \
  X(cuMemcpyPeerAsync, PLAIN, (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream), (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream), hStream) \
  X(cuMemcpyPeerAsync_ptsz, PTSZ, (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream), (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream), hStream) \
  X(cuMemcpyPeer_ptds, PTDS, (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount), (dstDevice, dstContext, srcDevice, srcContext, ByteCount), NULL) \
  X(cuMemcpy_ptds, PTDS, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), (dst, src, ByteCount), NULL) \
  X(cuMemsetD16, PLAIN, (CUdeviceptr_v1 dstDevice, unsigned short us, unsigned int N), (dstDevice, us, N), NULL) \
  X(cuMemsetD16Async, PLAIN, (CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream), (dstDevice, us, N, hStream), hStream) \
  X(cuMemsetD16Async_ptsz, PTSZ, (CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream), (dstDevice, us, N, hStream), hStream) \
  X(cuMemsetD16_v2, PLAIN, (CUdeviceptr dstDevice, unsigned short us, size_t N), (dstDevice, us, N), NULL) \
  X(cuMemsetD16_v2_ptds, PTDS, (CUdeviceptr dstDevice, unsigned short us, size_t N), (dstDevice, us, N), NULL) \
  X(cuMemsetD2D16, PLAIN, (CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned short us, unsigned int Width, unsigned int Height), (dstDevice, dstPitch, us, Width, Height), NULL) \
  X(cuMemsetD2D16Async, PLAIN, (CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch, us, Width, Height, hStream), hStream) \
  X(cuMemsetD2D16Async_ptsz, PTSZ, (CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch, us, Width, Height, hStream), hStream) \
  X(cuMemsetD2D16_v2, PLAIN, (CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height), (dstDevice, dstPitch, us, Width, Height), NULL) \
  X(cuMemsetD2D16_v2_ptds, PTDS, (CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height), (dstDevice, dstPitch, us, Width, Height), NULL) \
  X(cuMemsetD2D32, PLAIN, (CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned int ui, unsigned int Width, unsigned int Height), (dstDevice, dstPitch, ui, Width, Height), NULL) \
  X(cuMemsetD2D32Async, PLAIN, (CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch, ui, Width, Height, hStream), hStream) \
  X(cuMemsetD2D32Async_ptsz, PTSZ, (CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch, ui, Width, Height, hStream), hStream) \
  X(cuMemsetD2D32_v2, PLAIN, (CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height), (dstDevice, dstPitch, ui, Width, Height), NULL) \
  X(cuMemsetD2D32_v2_ptds, PTDS, (CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height), (dstDevice, dstPitch, ui, Width, Height), NULL) \
  X(cuMemsetD2D8, PLAIN, (CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned char uc, unsigned int Width, unsigned int Height), (dstDevice, dstPitch, uc, Width, Height), NULL) \
  X(cuMemsetD2D8Async, PLAIN, (CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch, uc, Width, Height, hStream), hStream) \
  X(cuMemsetD2D8Async_ptsz, PTSZ, (CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch, uc, Width, Height, hStream), hStream) \
  X(cuMemsetD2D8_v2, PLAIN, (CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height), (dstDevice, dstPitch, uc, Width, Height), NULL) \
  X(cuMemsetD2D8_v2_ptds, PTDS, (CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height), (dstDevice, dstPitch, uc, Width, Height), NULL) \
  X(cuMemsetD32, PLAIN, (CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N), (dstDevice, ui, N), NULL) \
  X(cuMemsetD32Async, PLAIN, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream), (dstDevice, ui, N, hStream), hStream) \
  X(cuMemsetD32Async_ptsz, PTSZ, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream), (dstDevice, ui, N, hStream), hStream) \
  X(cuMemsetD32_v2, PLAIN, (CUdeviceptr dstDevice, unsigned int ui, size_t N), (dstDevice, ui, N), NULL) \
  X(cuMemsetD32_v2_ptds, PTDS, (CUdeviceptr dstDevice, unsigned int ui, size_t N), (dstDevice, ui, N), NULL) \
  X(cuMemsetD8, PLAIN, (CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N), (dstDevice, uc, N), NULL) \
  X(cuMemsetD8Async, PLAIN, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream), (dstDevice, uc, N, hStream), hStream) \
  X(cuMemsetD8Async_ptsz, PTSZ, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream), (dstDevice, uc, N, hStream), hStream) \
  X(cuMemsetD8_v2, PLAIN, (CUdeviceptr dstDevice, unsigned char uc, size_t N), (dstDevice, uc, N), NULL) \
  X(cuMemsetD8_v2_ptds, PTDS, (CUdeviceptr dstDevice, unsigned char uc, size_t N), (dstDevice, uc, N), NULL) \
  X(cuSignalExternalSemaphoresAsync, PLAIN, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream), stream) \
  X(cuSignalExternalSemaphoresAsync_ptsz, PTSZ, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream), stream) \
  X(cuStreamAddCallback, PLAIN, (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags), (hStream, callback, userData, flags), hStream) \
  X(cuStreamAddCallback_ptsz, PTSZ, (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags), (hStream, callback, userData, flags), hStream) \
  X(cuStreamAttachMemAsync, PLAIN, (CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags), (hStream, dptr, length, flags), hStream) \
  X(cuStreamAttachMemAsync_ptsz, PTSZ, (CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags), (hStream, dptr, length, flags), hStream) \
  X(cuStreamBatchMemOp, PLAIN, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray, unsigned int flags), (stream, count, paramArray, flags), stream) \
  X(cuStreamBatchMemOp_ptsz, PTSZ, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray, unsigned int flags), (stream, count, paramArray, flags), stream) \
  X(cuStreamBatchMemOp_v2, PLAIN, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray, unsigned int flags), (stream, count, paramArray, flags), stream) \
  X(cuStreamBatchMemOp_v2_ptsz, PTSZ, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray, unsigned int flags), (stream, count, paramArray, flags), stream) \
  X(cuStreamWaitValue32, PLAIN, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWaitValue32_ptsz, PTSZ, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWaitValue32_v2, PLAIN, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWaitValue32_v2_ptsz, PTSZ, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWaitValue64, PLAIN, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWaitValue64_ptsz, PTSZ, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWaitValue64_v2, PLAIN, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWaitValue64_v2_ptsz, PTSZ, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWriteValue32, PLAIN, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWriteValue32_ptsz, PTSZ, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWriteValue32_v2, PLAIN, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWriteValue32_v2_ptsz, PTSZ, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWriteValue64, PLAIN, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWriteValue64_ptsz, PTSZ, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWriteValue64_v2, PLAIN, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuStreamWriteValue64_v2_ptsz, PTSZ, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags), stream) \
  X(cuWaitExternalSemaphoresAsync, PLAIN, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream), stream) \
  X(cuWaitExternalSemaphoresAsync_ptsz, PTSZ, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream), stream)

#define CP_DRV_WORK_BY_HAND(X) X(cuLaunchCooperativeKernelMultiDevice)

#define CP_DRV_NO_WORK(X) \
  X(cuEventRecord) \
  X(cuEventRecordWithFlags) \
  X(cuEventRecordWithFlags_ptsz) \
  X(cuEventRecord_ptsz) \
  X(cuGraphInstantiateWithParams) \
  X(cuGraphInstantiateWithParams_ptsz) \
  X(cuGreenCtxStreamCreate) \
  X(cuMemAllocAsync) \
  X(cuMemAllocAsync_ptsz) \
  X(cuMemAllocFromPoolAsync) \
  X(cuMemAllocFromPoolAsync_ptsz) \
  X(cuMemFreeAsync) \
  X(cuMemFreeAsync_ptsz) \
  X(cuStreamBeginCapture) \
  X(cuStreamBeginCaptureToGraph) \
  X(cuStreamBeginCaptureToGraph_ptsz) \
  X(cuStreamBeginCapture_ptsz) \
  X(cuStreamBeginCapture_v2) \
  X(cuStreamBeginCapture_v2_ptsz) \
  X(cuStreamCopyAttributes) \
  X(cuStreamCopyAttributes_ptsz) \
  X(cuStreamCreate) \
  X(cuStreamCreateWithPriority) \
  X(cuStreamDestroy) \
  X(cuStreamDestroy_v2) \
  X(cuStreamEndCapture) \
  X(cuStreamEndCapture_ptsz) \
  X(cuStreamGetAttribute) \
  X(cuStreamGetAttribute_ptsz) \
  X(cuStreamGetCaptureInfo) \
  X(cuStreamGetCaptureInfo_ptsz) \
  X(cuStreamGetCaptureInfo_v2) \
  X(cuStreamGetCaptureInfo_v2_ptsz) \
  X(cuStreamGetCaptureInfo_v3) \
  X(cuStreamGetCaptureInfo_v3_ptsz) \
  X(cuStreamGetCtx) \
  X(cuStreamGetCtx_ptsz) \
  X(cuStreamGetCtx_v2) \
  X(cuStreamGetCtx_v2_ptsz) \
  X(cuStreamGetDevice) \
  X(cuStreamGetDevice_ptsz) \
  X(cuStreamGetFlags) \
  X(cuStreamGetFlags_ptsz) \
  X(cuStreamGetGreenCtx) \
  X(cuStreamGetId) \
  X(cuStreamGetId_ptsz) \
  X(cuStreamGetPriority) \
  X(cuStreamGetPriority_ptsz) \
  X(cuStreamIsCapturing) \
  X(cuStreamIsCapturing_ptsz) \
  X(cuStreamQuery) \
  X(cuStreamQuery_ptsz) \
  X(cuStreamSetAttribute) \
  X(cuStreamSetAttribute_ptsz) \
  X(cuStreamSynchronize) \
  X(cuStreamSynchronize_ptsz) \
  X(cuStreamUpdateCaptureDependencies) \
  X(cuStreamUpdateCaptureDependencies_ptsz) \
  X(cuStreamUpdateCaptureDependencies_v2) \
  X(cuStreamUpdateCaptureDependencies_v2_ptsz) \
  X(cuStreamWaitEvent) \
  X(cuStreamWaitEvent_ptsz)

#include <stdbool.h>

/* The wrapper of the row whose libcuda function is fn, NULL when fn is none
 * of theirs (driver_work.c). */
void *cp_drv_work_wrapper(void *fn);
/* Whether base, a name as cuGetProcAddress is asked for it (no _v2, _ptsz),
 * names a row. */
bool cp_drv_work_base(const char *base);
/* Whether name is a row's exact name: for the dlsym router (no lock, no
 * library call, not instrumented). */
bool cp_drv_is_work_name(const char *name);

#endif
