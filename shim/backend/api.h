/* api.h: the CUDA operations the pool's backend and the device bookkeeping
 * make, in two flavours, and which calls belong to which layer.
 *
 * Flavours. The runtime flavour (real.c) calls libcudart; the driver flavour
 * (driver_api.c) calls libcuda, for programs that carry the runtime
 * statically and have no libcudart to call. cp_api() picks one, once, the
 * first time the shim needs CUDA: the runtime when the runtime layer serves
 * (real.h), else the driver when libcuda is loaded. Both are correct for any
 * program: a process where the driver flavour was picked first keeps it when
 * libcudart shows up later. Every entry returns 0 on success and leaves no
 * error behind for the program (the runtime flavour clears
 * cudaGetLastError() after a failed call; the driver has no such state).
 * cudaEvent_t/CUevent and cudaStream_t/CUstream are the same handle types.
 *
 * Layers. A program's call may pass the runtime layer (interpose.c) and then
 * the driver layer (driver_*.c), since libcudart is built on libcuda. The
 * thread-local depth cp_inside counts the real runtime calls the shim makes
 * while the runtime layer serves (the thunks of real.c); a driver wrapper
 * called at depth > 0 passes the call straight to the driver, so nothing is
 * pooled twice or counted twice. CUDAPOOL_LAYER narrows which layer serves
 * allocations; frees of pool blocks and the stream, capture and
 * synchronisation bookkeeping work at both layers whatever it says, since a
 * pointer or a stream made at one layer may be used at the other.
 *
 * Threads: cp_api() is safe to race; the flavours keep no state of their own
 * except the driver's primary-context cache (driver_api.c). */
#ifndef CUDAPOOL_SHIM_API_H
#define CUDAPOOL_SHIM_API_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Device ids the shim keeps anything for: 0..CP_MAX_DEVICES-1. */
#define CP_MAX_DEVICES 64

/* The operations, X(return type, name, parameters). A flavour defines a
 * function <prefix>_<name> for every one and fills its table from this list
 * (real.c, driver_api.c), so a flavour that lacks one does not compile.
 * - enter: make dev the device the calls that follow act on (the driver
 *   flavour: its primary context). Returns a token for leave; -1: nothing
 *   changed.
 * - mem_alloc: 0, ENOMEM (the device is full) or EIO (any other failure).
 * - mem_free: 0, or -1 when CUDA refused (the memory stays allocated: the
 *   runtime's teardown at exit refuses frees), the error cleared.
 * - event_create: timing disabled.
 * - event_query: 1 complete; 0 not yet, or an error.
 * - stream_idle: 1 all its work is done; 0 not yet, or unknown.
 * - stream_capturing: 1 the stream takes part in a capture (it began one,
 *   or joined one by waiting on an event recorded in it); 0 not; -1 unknown
 *   (an error, or a driver without cuStreamIsCapturing). Never invalidates
 *   a capture: only asked of created streams, never of the legacy one.
 * - device_uuid: the device's 16-byte UUID, the same in every process
 *   whatever CUDA_VISIBLE_DEVICES numbers it; 0, or -1 where CUDA gives
 *   none. */
#define CP_API_OPS(X)                                               \
  X(int, current_device, (int *dev))                                \
  X(int, device_count, (int *count))                                \
  X(int, enter, (int dev))                                          \
  X(void, leave, (int token))                                       \
  X(int, mem_alloc, (size_t size, uintptr_t * out))                 \
  X(int, mem_free, (uintptr_t addr))                                \
  X(int, mem_get_info, (size_t * free_bytes, size_t * total_bytes)) \
  X(int, event_create, (cudaEvent_t * ev))                          \
  X(void, event_destroy, (cudaEvent_t ev))                          \
  X(int, event_record, (cudaEvent_t ev, cudaStream_t stream))       \
  X(int, event_query, (cudaEvent_t ev))                             \
  X(int, event_sync, (cudaEvent_t ev))                              \
  X(int, stream_wait, (cudaStream_t stream, cudaEvent_t ev))        \
  X(int, stream_idle, (cudaStream_t stream))                        \
  X(int, stream_capturing, (cudaStream_t stream))                   \
  X(int, device_uuid, (int dev, unsigned char *uuid))

typedef struct cp_api {
  const char *name; /* "runtime" or "driver" */
#define CP_API_FIELD(ret, op, params) ret(*op) params;
  CP_API_OPS(CP_API_FIELD)
#undef CP_API_FIELD
} cp_api_t;

extern const cp_api_t cp_api_runtime; /* real.c */
extern const cp_api_t cp_api_driver;  /* driver_api.c */


/* Real runtime calls the shim is making on this thread (see above). */
extern __thread __attribute__((tls_model("initial-exec"))) unsigned cp_inside;

/* Whether libcuda is loaded and has what the driver flavour needs
 * (driver_api.c; looked for again until it is). */
bool cp_drv_ready(void);

#endif
