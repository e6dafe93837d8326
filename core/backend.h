/* backend.h: how the pool reaches a device.
 *
 * The core knows nothing of CUDA. It talks to a device only through this
 * table of function pointers (the shape of rpmalloc's rpmalloc_interface_t):
 * the shim plugs in CUDA, tests and replay plug in the simulated device of
 * testing/sim_backend.h.
 *
 * Contract of each entry:
 * - alloc: reserve `size` bytes on `device`, store the address in *out.
 *   Returns 0 or an errno (ENOMEM when the device is full).
 * - free: give back a whole earlier allocation. Must not reclaim memory that
 *   device work submitted before the call may still touch (cudaFree waits).
 * - barrier (optional, NULL = never): issue an asynchronous ordering point
 *   after which all future device work is ordered after all past work, on
 *   every stream. 0 = issued, anything else = refused (e.g. during a stream
 *   capture). No host wait.
 * - barrier_cost (optional, NULL = 1): what a barrier costs now, in units
 *   of the cheapest one (the shim: cp_rule_barrier_cost (core/rules.h) of the live non-blocking
 *   streams, pool.h). The pool
 *   asks for optional barriers (better fits) less often when they cost more.
 * - fence_record (optional, NULL = no fences): record a fence covering all
 *   past device work. 0 = recorded, anything else = refused.
 * - fence_query: 1 once the fence's work has completed, else 0.
 * - fence_wait: block the host until the fence has completed; 0 = waited,
 *   anything else = refused (the fence stays outstanding).
 * - fence_release: the pool is done with the fence (return it to a pool).
 * Expandable segments (optional: page_size NULL, or returning 0, = not
 * supported on this device, and the pool uses ordinary segments):
 * - page_size: the mapping granularity in bytes (a power of two).
 * - reserve: reserve `size` bytes of virtual address space (no memory).
 *   0 or an errno.
 * - unreserve: give back a whole earlier reservation, no page of it mapped.
 * - map: back [addr, addr+size), whole pages of a reservation, none of them
 *   mapped, with device memory, one physical allocation per page, readable
 *   and writable by the device. All or nothing: 0, ENOMEM or EIO.
 * - unmap: unmap [addr, addr+size), whole mapped pages, and free their
 *   memory. The pool calls it only for pages that no device work can still
 *   touch (completed, not merely ordered by a barrier): it need not wait.
 *
 * - freed (optional): the pool went from nothing freed waiting to something
 *   (pending = true: a block became pending, was freed into a thread cache
 *   that held none, or pushed onto an empty deferred stack), or a block was
 *   freed straight to ready (pending = false: CUDAPOOL_MODE=sync,
 *   unsafe-immediate). A wake-up for a background reclaimer (the shim's
 *   state/reclaim.c): called on free paths, with the pool lock or a thread
 *   cache's lock held or none, so it must be cheap, take no lock and never
 *   call into the pool.
 *
 * The pool calls the backend with its own lock held, except barrier, which
 * it calls without (threads may issue barriers at once); a backend must
 * never call back into the pool. */
#ifndef CUDAPOOL_CORE_BACKEND_H
#define CUDAPOOL_CORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void *cp_fence_t;

typedef struct cp_backend {
  void *ctx;
  int (*alloc)(void *ctx, int device, size_t size, uintptr_t *out);
  void (*free)(void *ctx, int device, uintptr_t addr, size_t size);
  int (*barrier)(void *ctx, int device);
  unsigned (*barrier_cost)(void *ctx, int device);
  int (*fence_record)(void *ctx, int device, cp_fence_t *out);
  int (*fence_query)(void *ctx, int device, cp_fence_t fence);
  int (*fence_wait)(void *ctx, int device, cp_fence_t fence);
  void (*fence_release)(void *ctx, int device, cp_fence_t fence);
  size_t (*page_size)(void *ctx, int device);
  int (*reserve)(void *ctx, int device, size_t size, uintptr_t *out);
  void (*unreserve)(void *ctx, int device, uintptr_t addr, size_t size);
  int (*map)(void *ctx, int device, uintptr_t addr, size_t size);
  void (*unmap)(void *ctx, int device, uintptr_t addr, size_t size);
  void (*freed)(void *ctx, int device, bool pending);
} cp_backend_t;

#endif
