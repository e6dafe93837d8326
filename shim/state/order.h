/* order.h: stream order learned from the work the program submits (issue 25).
 *
 * Every entry point that can put work on a stream (launches, copies, memsets,
 * graph launches, host functions, semaphores, stream memory operations: the
 * runtime's in entry/submit.c, the driver's in entry/driver_work.c) calls
 * cp_order_submit() before the real call. From those calls each device keeps
 * a mode:
 *   EMPTY  no work submitted since the device's last order point;
 *   SOLE   all work since then went to one stream, its home H (the legacy
 *          stream or a stream the program created; never a per-thread one);
 *   MIXED  work went to another stream too (or to a per-thread or unknown
 *          stream).
 * While a device is EMPTY or SOLE, a freed block may be handed to anyone at
 * once: every piece of work that touched it is on H, before the free. The
 * pool then owes every other stream an ordering before its next work: the
 * first submission to a stream S != H records an event on H and makes S wait
 * on it (a non-blocking S; a blocking, per-thread or legacy S is ordered by
 * the legacy stream waiting on it once, when H is not the legacy stream), and
 * the device becomes MIXED. MIXED falls back on barriers (cuda_backend.c)
 * until every stream that received work besides H is idle again (queried
 * when the pool asks for a barrier), which makes the device SOLE(H) again.
 *
 * Order is not learned at all (the device stays MIXED, and the barriers of
 * docs/DESIGN.md apply as before) when CUDAPOOL_LEARN_ORDER=0, or once an entry
 * point that could submit work without being seen was looked up
 * (cp_order_give_up: a driver entry point newer than the header cudapool was
 * built with).
 *
 * Threads: the fast path (a submission to the home stream, or to a stream
 * already ordered in this window) reads atomics only; transitions take the
 * device's order lock (never while a pool lock is wanted after it). */
#ifndef CUDAPOOL_SHIM_ORDER_H
#define CUDAPOOL_SHIM_ORDER_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

/* How the entry point names its stream: PLAIN (0 is the legacy stream),
 * PTSZ (a _ptsz twin: 0 is the calling thread's per-thread stream), PTDS (a
 * _ptds twin, no stream argument: the per-thread stream). The synchronous
 * entry points of the plain API (cudaMemcpy, cuMemsetD8) pass PLAIN and a
 * NULL stream: the legacy stream. */
typedef enum { CP_SUBMIT_PLAIN, CP_SUBMIT_PTSZ, CP_SUBMIT_PTDS } cp_submit_api_t;

/* Work is about to be submitted to `stream`. Never fails; may issue an event
 * record and a stream wait (the ordering owed), before the program's work. */
void cp_order_submit(cudaStream_t stream, cp_submit_api_t api);

/* An entry point that may submit work the shim cannot see was looked up (or
 * called): stop learning order for the rest of the process, every device
 * MIXED for good. `what` names it in the report (kept, not copied: a
 * string literal or a name that lives as long as the process). */
void cp_order_give_up(const char *what);

/* Whether order is being learned (the option, and no give-up). */
bool cp_order_learning(void);

#endif
