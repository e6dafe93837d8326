/* fakecuda.h: test hooks of the fake CUDA runtime (tests/fakes/cudart/),
 * for test programs linked against build/fakecudart/libcudart.so.13. A
 * program that must also run on the real runtime reaches them with
 * dlsym(RTLD_DEFAULT, "fakecuda_calls") instead, and gets NULL there. */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many times the exported function named fn was called (its exact
 * name: cudaStreamSynchronize and cudaStreamSynchronize_ptsz are counted
 * apart). */
long fakecuda_calls(const char *fn);
/* The next n cudaMalloc calls (of nonzero size) succeed, every later one
 * fails with cudaErrorMemoryAllocation; n = -1 turns that off. The
 * environment variable FAKECUDA_FAIL_MALLOC_AFTER sets it at start. */
void fakecuda_fail_malloc_after(long n);
/* With FAKECUDA_SHARED_MEM: the memory of pid, held past its death by
 * FAKECUDA_HOLD_AT_EXIT=1, given back (shared_mem.h); 0, or -1 when pid
 * holds none that way. */
int fakecuda_release_process(int pid);
/* While on, cudaFree of device memory fails with cudaErrorCudartUnloading
 * and leaves the memory allocated, as the runtime's cudaFree does once its
 * teardown at exit began. */
void fakecuda_refuse_frees(int on);
/* While on, no device work completes by itself: events recorded stay
 * incomplete (cudaEventQuery: cudaErrorNotReady) until a synchronisation
 * that covers them (cudaEventSynchronize, cudaStreamSynchronize,
 * cudaDeviceSynchronize, cudaFree, synchronous cudaMemcpy) or
 * fakecuda_hold_events(0), and unordered accesses to the same memory by
 * memset/memcpy on different streams are reported as races. */
void fakecuda_hold_events(int on);
/* Bytes of device, managed and pitched memory live on device (each
 * allocation counted rounded up to 512 bytes). */
size_t fakecuda_live_bytes(int device);
/* A device allocation on the current device that no cudaMalloc made (a
 * "foreign" pointer for an interposer); free it with cudaFree. NULL on
 * failure. */
void *fakecuda_raw_malloc(size_t size);
/* Races seen while events were held (see fakecuda_hold_events). */
long fakecuda_races(void);
/* The allocation a cudaIpcGetMemHandle handle exports: its base (and its
 * size in *size, when size is not NULL); NULL for anything that is not a
 * handle of the fake's. */
void *fakecuda_ipc_base(const void *handle, size_t *size);
/* For the fake driver beside the runtime (tests/fakes/cudart/green/): a
 * stream created on device dev with flags, as cudaStreamCreateWithFlags
 * would on that device, but through no cuda* entry point (an interposer
 * sees only the driver call that asked for it); and the device of a stream
 * (-1 if the handle is not one). */
cudaError_t fakecuda_stream_create_on(int dev, cudaStream_t *out, unsigned flags);
int fakecuda_stream_device(cudaStream_t stream);
/* For the same fake driver's cuStreamWaitEvent and cuStreamWaitEvent_ptsz
 * (ptsz: 0 is the calling thread's per-thread stream): the wait of
 * cudaStreamWaitEvent, joins to a capture included, through no cuda* entry
 * point, as the real driver's call is. */
cudaError_t fakecuda_stream_wait_event(cudaStream_t stream, cudaEvent_t event, unsigned flags, int ptsz);

#ifdef __cplusplus
}
#endif
#endif
