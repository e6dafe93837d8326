/* device.h: what the shim knows about each device.
 *
 * Per device: its pool (created on the first allocation there), the live
 * streams the program created through the runtime or the driver (a barrier
 * must reach every non-blocking one; a stream is known once, by handle,
 * whichever layer reports it), the captures in progress (no barrier, fence,
 * sync or legacy-stream work may be issued while one is active), and the
 * events the CUDA backend records. CUDA is reached through cp_api() (api.h),
 * the runtime or the driver flavour.
 *
 * Locking: `lock` guards streams, captures, events and pool creation. The
 * pool's own lock may be held when the backend takes `lock` (pool, then
 * device); code holding `lock` never calls into the pool. The counters read
 * on hot paths are atomics. */
#ifndef CUDAPOOL_SHIM_DEVICE_H
#define CUDAPOOL_SHIM_DEVICE_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uthash.h>

#include "api.h"
#include "pool.h"

#define CP_MAX_DEVICES 64

typedef struct cp_stream_entry {
  cudaStream_t stream;
  cudaEvent_t event; /* recorded on it by barriers and fences */
  bool nonblocking;
  UT_hash_handle hh;
} cp_stream_entry_t;

typedef struct cp_device {
  int id;
  _Atomic(cp_pool_t *) pool;
  pthread_mutex_t lock;
  size_t total_memory;          /* from cudaMemGetInfo at pool creation */
  cp_stream_entry_t *streams;   /* live created streams, by handle */
  atomic_int live_streams;      /* any kind */
  atomic_int live_nonblocking;
  cudaEvent_t barrier_event;    /* E, recorded on the legacy stream */
  cudaEvent_t *spare_events;    /* for fences */
  int n_spare, cap_spare;
} cp_device_t;

/* The device table; entries exist for ids 0..CP_MAX_DEVICES-1. */
cp_device_t *cp_device(int id);
/* The device current on this thread for the runtime, or NULL when none can
 * be had (runtime wrappers only). */
cp_device_t *cp_current_device(void);
/* The number of devices, 0 when it cannot be had (the flavour in use). */
int cp_device_count(void);
/* Its pool, created on first use from the options; NULL if that failed. */
cp_pool_t *cp_device_pool(cp_device_t *dev);
/* The first device at or after index *next whose pool exists, or NULL;
 * advances *next past it. For walking every pool. */
cp_device_t *cp_next_device_with_pool(int *next);
/* Forget the device's pool without freeing it in CUDA (cudaDeviceReset). */
void cp_device_reset(cp_device_t *dev);
/* Stream and capture bookkeeping, called after the real call succeeded.
 * Reporting a known handle again updates it (a stream one layer created and
 * the other saw, or a handle reused after a destroy the shim missed). */
void cp_device_stream_created(cp_device_t *dev, cudaStream_t stream, bool nonblocking);
/* Before the real cudaStreamDestroy: orders its pending work before later
 * legacy-stream work, so a barrier issued after it still covers that work. */
void cp_stream_destroying(cudaStream_t stream);

/* Stream captures, process-wide (a capture on any device counts):
 * begin/end run the real call under the capture lock, so that no barrier or
 * fence is ever being issued while a capture starts. */
typedef __typeof__(cudaStreamBeginCapture) cp_begin_capture_fn;
typedef __typeof__(cudaStreamEndCapture) cp_end_capture_fn;
cudaError_t cp_capture_begin(cp_begin_capture_fn *real, cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cp_capture_end(cp_end_capture_fn *real, cudaStream_t stream, cudaGraph_t *graph);
/* The same for calls of other signatures (the driver's): take the capture
 * lock for writing, make the real call, report what it did, unlock. */
void cp_capture_lock_write(void);
void cp_capture_started(cudaStream_t stream, bool strict); /* it succeeded */
void cp_capture_ended(cudaStream_t stream);                /* it ended, invalidated or not */
void cp_capture_unlock_write(void);
/* The stream was destroyed: a capture it began has ended with it. */
void cp_capture_forget_stream(cudaStream_t stream);
/* Any capture in global or thread-local mode in progress: the program's
 * cudaMalloc/cudaFree must then behave exactly as natively. */
bool cp_capture_strict_active(void);
/* For the backend: true (and the capture lock held for reading) when no
 * capture is in progress; then call cp_capture_unlock(). */
bool cp_capture_none_lock(void);
void cp_capture_unlock(void);
/* Key for same-thread reuse on this device now, 0 when it would be unsafe:
 * only while the program has created no streams on it and uses no per-thread
 * default stream, so all of a thread's work is ordered by its own order. */
uint64_t cp_device_reuse_key(cp_device_t *dev);
/* The program used the per-thread default stream: same-thread reuse is off
 * from now on. */
void cp_note_per_thread_stream(void);
/* The backend table that drives CUDA for this device (cuda_backend.c). */
cp_backend_t cp_cuda_backend(cp_device_t *dev);
/* Make CUDA calls act on `dev` (cp_api()->enter): switches the current
 * device (runtime) or pushes its primary context (driver) when needed.
 * Returns a token for cp_device_leave, -1 when nothing changed. */
int cp_device_enter(const cp_device_t *dev);
void cp_device_leave(int token);
/* cudaMemGetInfo/cuMemGetInfo as the program should see them under the
 * pool: cached bytes count as free, and a limit caps both. */
void cp_device_adjust_meminfo(cp_pool_t *pool, size_t *free_bytes, size_t *total_bytes);
/* Number of devices whose pool exists (for reports), and a snapshot. */
int cp_device_stats_all(cudapool_stats_t *out, int cap);

#endif
