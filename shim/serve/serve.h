/* serve.h: the serving rules, once for both API layers.
 *
 * The runtime wrappers (interpose.c) and the driver wrappers (driver_mem.c,
 * driver_stream.c) decide only whether a call is theirs to serve (layer.h)
 * and for which device, translate arguments, and map what these functions
 * answer to cudaError_t or CUresult. Everything else is here: when a request
 * is served from the pool or made natively, what a free of a pool block does
 * (also during a strict capture and in CUDAPOOL_MODE=sync), what a completed
 * synchronisation covers, what a stream's end does, what cudaMemGetInfo
 * shows, how a device's pool is made, and what the trace records (through
 * the pool's observer, so that events of one block keep their order).
 *
 * Codes: a layer's native result is an int, 0 for success (cudaSuccess and
 * CUDA_SUCCESS); the functions below return such codes unchanged.
 *
 * Threads: every function may be called from any thread; the pool and the
 * device table do their own locking. */
#ifndef CUDAPOOL_SHIM_SERVE_H
#define CUDAPOOL_SHIM_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/device.h"

/* The pool of dev, made from the options on first use; NULL if it cannot be. */
cp_pool_t *cp_serve_pool(cp_device_t *dev);

typedef enum cp_alloc_verdict {
  CP_SERVED,        /* *out is the program's block */
  CP_FORWARD,       /* make the program's own call: it fails or succeeds natively */
  CP_OUT_OF_MEMORY, /* over CUDAPOOL_LIMIT, or the device is full under it */
} cp_alloc_verdict_t;

/* An allocation of size (> 0) bytes for the program on dev (NULL: forward). */
cp_alloc_verdict_t cp_serve_alloc(cp_device_t *dev, size_t size, uintptr_t *out);
/* The same for a stream and reuse key of the pool's (stream-ordered
 * allocations: stream_order.h). */
cp_alloc_verdict_t cp_serve_alloc_for(cp_device_t *dev, size_t size, uint64_t stream, uint64_t key,
                                      uintptr_t *out);

/* The calls of one layer that the free rule needs, each returning that
 * layer's native code. */
typedef struct cp_layer_calls {
  /* The layer's own free of p, as the program would have made it. */
  int (*real_free)(uintptr_t p);
  /* Whether a strict capture lets this thread free p: 0 if it does, else
   * the code the program's free must return (it failed natively too). */
  int (*capture_probe)(uintptr_t p);
  /* The layer's device synchronisation (CUDAPOOL_MODE=sync). */
  int (*synchronize)(void);
} cp_layer_calls_t;

/* The program frees p (not 0): a pool block goes back to its pool; an
 * interior pointer or a second free fails natively (the layer's free of
 * p|1: never an allocation start, inside the same segment); any other
 * pointer goes to the layer's free unchanged. */
int cp_serve_free(const cp_layer_calls_t *layer, uintptr_t p);
/* Whether p is the start of a live pool block, on any device. */
bool cp_serve_owned(uintptr_t p);

/* The program frees p in stream order (cudaFreeAsync, cuMemFreeAsync). A
 * pool block goes back to its pool as the stream's: an allocation on the
 * same stream may take it at once (CUDA runs that stream's work in order),
 * any other once a barrier, fence or synchronisation covers the work the
 * program queued before the free. Freed on a
 * capturing stream, a pool block is kept for good instead (the captured
 * graph may still use it whenever it is launched). Other pointers go to
 * real_free_async unchanged; bad ones fail natively (p|1). */
typedef struct cp_async_calls {
  int (*free_async)(uintptr_t p, uintptr_t stream); /* the layer's own call */
  /* Whether stream is capturing, as CUDA itself says (a stream that joined
   * a capture through an event counts): its native code, 0 when it answered. */
  int (*capturing)(uintptr_t stream, bool *capturing);
  int (*synchronize)(uintptr_t stream); /* the plain stream synchronisation: its native code */
  bool per_thread; /* the _ptsz variant: stream 0 is the per-thread default stream */
} cp_async_calls_t;
int cp_serve_free_async(const cp_async_calls_t *layer, uintptr_t p, uintptr_t stream);

/* Whether p may be exported through CUDA IPC as it is: it is in no pool
 * segment, or in a live block that starts its segment (the peer maps the
 * segment, whose start is the block). A block inside a segment cannot be
 * (the peer would see another block's bytes): says so once on stderr. Pool
 * memory that no live block holds cannot be either, silently: natively it
 * is no allocation, and the export fails. */
bool cp_serve_ipc_exportable(uintptr_t p);
/* The live pool block containing p, on any device: 0, or EINVAL (in a pool
 * segment, in no live block) or ENOENT (in no pool), as cp_block_find. */
int cp_serve_block_of(uintptr_t p, cp_block_info_t *out);

/* A synchronisation the program makes: begin before the real call, report
 * after it with whether it succeeded. dev may be NULL (nothing covered). */
typedef struct cp_sync {
  cp_device_t *dev;
  cp_pool_t *pool;
  cp_mark_t mark;
} cp_sync_t;
cp_sync_t cp_serve_sync_begin(cp_device_t *dev);
/* per_thread_api: the program called the _ptsz variant (stream 0 is then
 * its per-thread default stream). */
void cp_serve_synced_stream(const cp_sync_t *sync, bool ok, uintptr_t stream, bool per_thread_api);
void cp_serve_synced_device(const cp_sync_t *sync, bool ok);

/* After the program created a stream on dev (the real call succeeded). */
void cp_serve_stream_created(cp_device_t *dev, uintptr_t stream, bool nonblocking);
/* The special handles (the legacy and per-thread default streams), which
 * are never created or destroyed. */
bool cp_serve_special_stream(uintptr_t stream);
/* Around the program's stream destroy (not a special handle). */
void cp_serve_stream_destroying(uintptr_t stream);
void cp_serve_stream_destroyed(uintptr_t stream, bool ok);

/* After the program's end-capture call (the capture lock held since
 * cp_capture_end_lock): over = the capture ended. Barriers issued during the
 * capture left its stream alone; it now waits for the last one. */
void cp_serve_capture_ended(bool over, uintptr_t stream);

/* cudaMemGetInfo/cuMemGetInfo as the program should see them under the
 * pool: cached bytes count as free, and a limit caps both. create: make the
 * pool if there is none (the serving layer: frameworks size themselves from
 * this before their first allocation, so a limit must show). */
void cp_serve_meminfo(cp_device_t *dev, bool create, size_t *free_bytes, size_t *total_bytes);

#endif
