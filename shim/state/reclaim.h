/* reclaim.h: the reclaimer, a thread of cudapool's ("cudapool-reclaim")
 * that makes freed memory reusable and releasable without the program's
 * help (docs/DESIGN.md, "Threads and locks": the reclaimer).
 *
 * Rules:
 *   - started once, when the first pool is made (serve.c), unless
 *     CUDAPOOL_RECLAIM_INTERVAL is 0 or a trace is recorded (a trace must
 *     replay to the same decisions, and the reclaimer's depend on time);
 *   - asleep on a futex while nothing freed waits and no free segment is
 *     due for the idle release: an idle process wakes nothing. A free
 *     wakes it only on the pool's transition from nothing freed to
 *     something (backend.h, `freed`: a fence and a load on that free, a
 *     futex wake only when the thread sleeps; never on an allocation);
 *   - while something freed waits it passes over every device's pool
 *     every CUDAPOOL_RECLAIM_INTERVAL ms (core/reclaim.c: caches flushed,
 *     a barrier or fences, then CUDAPOOL_MAX_CACHED and the idle release
 *     CUDAPOOL_RELEASE_IDLE), so a pending block whose device work has
 *     finished is ready at most one interval after its free (a barrier
 *     makes it ready at once; where captures allow neither barrier nor
 *     fence, it waits for them to end);
 *   - takes the pool locks like any caller, gives memory back (cudaFree,
 *     unmap) only while no stream capture is in progress, holding the
 *     capture lock for reading across it, and reaches CUDA only through
 *     the device's backend, which makes the device (its primary context)
 *     current for each call;
 *   - stopped at exit (an atexit handler registered when it starts, so it
 *     runs before the CUDA runtime's teardown): no pass begins after, and
 *     exit waits for the one in progress; the child of a fork() has no
 *     reclaimer; the library stays loaded once it runs (no dlclose under
 *     its feet);
 *   - nothing here prints. */
#ifndef CUDAPOOL_SHIM_RECLAIM_H
#define CUDAPOOL_SHIM_RECLAIM_H

#include <stdbool.h>

/* When a pool is made: start the thread (once), as above. */
void cp_reclaim_start(void);
/* Whether it runs: the backends of pools made from now on carry its hook. */
bool cp_reclaim_on(void);
/* The backend's `freed` entry (core/backend.h). */
void cp_reclaim_freed(void *ctx, int device, bool pending);
/* No pass after this returns (exit). */
void cp_reclaim_stop(void);

#endif
