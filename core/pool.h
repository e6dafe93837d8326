/* pool.h: the caching pool of one device, the public API of core/.
 *
 * One cp_pool_t serves one device: a small pool (requests up to 1 MiB, carved
 * from 2 MiB segments) and a large pool, best fit with splitting and
 * coalescing, stream-aware deferred reuse, a byte limit and a cache cap.
 * docs/DESIGN.md explains the rules; each is a field of cp_config_t.
 *
 * Reuse contract. A freed block is *pending* until the device can no longer
 * touch it, then *ready* (reusable by anyone). It becomes ready when:
 *   - a barrier is issued (the pool asks the backend for one when an
 *     allocation can only be served by pending blocks), or
 *   - a fence recorded after its free completes, or
 *   - the caller reports a synchronisation that covers it (cp_sync_*), or
 *   - the config says CP_REUSE_IMMEDIATE (unsafe: no device ordering at all).
 * A pending block freed with a non-zero key is also reusable at once by an
 * allocation with the same stream and the same key: the caller promises that
 * its own submission order protects that case (the shim passes the host
 * thread when only ordered streams are live, else 0; for stream-ordered
 * calls, one key for all with the stream itself, since CUDA runs one
 * stream's work in order).
 *
 * Threads: every function takes the pool's mutex; the backend is called with
 * it held, except for barriers, issued with it released (backend.h).
 * cp_tcache_alloc/cp_tcache_free are the same calls through the
 * calling thread cache (tcache.c), which serves a keyed free and the
 * same thread's next allocation of that block without the mutex. */
#ifndef CUDAPOOL_CORE_POOL_H
#define CUDAPOOL_CORE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cudapool.h"
#include "backend.h"

typedef struct cp_pool cp_pool_t;

enum cp_reuse {
  CP_REUSE_DEFERRED = 0,  /* pending until barrier, fence or sync (safe) */
  CP_REUSE_IMMEDIATE = 1, /* a free is reusable at once (unsafe-immediate) */
};

#define CP_NO_LIMIT SIZE_MAX

typedef struct cp_config {
  size_t round;                 /* requests round up to this (512) */
  size_t small_max;             /* small pool: requests <= this (1 MiB) */
  size_t small_segment;         /* small pool segment size (2 MiB) */
  size_t large_segment;         /* segment for large requests under ... (20 MiB) */
  size_t large_threshold;       /* ... this size (10 MiB) */
  size_t segment_round;         /* bigger requests: own size rounded to this (2 MiB) */
  size_t large_split_remainder; /* large blocks split when remainder > this (1 MiB) */
  size_t max_split;             /* blocks >= this never split (no limit; at least cp_max_split_floor) */
  size_t oversize_waste;        /* unsplittable blocks serve if waste < this (20 MiB) */
  size_t split_barrier_pending; /* pending blocks that make a looming split ask for a barrier (4) */
  size_t split_barrier_share; /* ... and, small pool, their bytes 1/this of the block to split (2; 0: any) */
  /* Large pool, a caller without a reuse key: a looming split asks for a
   * barrier whatever the count when the pending bytes are at least this
   * many times the request (1; 0: off). alloc.c, split_wants_barrier. */
  size_t split_barrier_bytes;
  size_t limit;               /* most bytes reserved (CP_NO_LIMIT) */
  size_t max_cached;          /* most cached bytes kept (CP_NO_LIMIT) */
  enum cp_reuse reuse;
  /* Expandable segments: the large pool carves its blocks from reserved
   * virtual ranges of expandable_size bytes (rounded up to pages), mapped
   * page by page as blocks need them (pages.c). Off when the backend
   * cannot (cp_get_config then says false). */
  bool expandable;
  size_t expandable_size; /* 0: 64 GiB */
  /* Arenas (arena.c): at most this many pools of the device (1: one, no
   * arenas), to which threads move whose allocations keep finding the
   * lock taken: arena_move_after contended allocations more than
   * uncontended ones. Only through cp_tcache_alloc. */
  unsigned arenas;
  unsigned arena_move_after;
} cp_config_t;

/* Where the stream tag of a block comes from: any uint64_t the caller likes;
 * CP_STREAM_DEVICE is the device-wide tag of cudaMalloc-style allocations. */
#define CP_STREAM_DEVICE 0u

/* cp_free flags */
#define CP_FREE_DEVICE_IDLE 1u /* caller synchronised: reusable at once */

void cp_config_default(cp_config_t *cfg);
/* The driver allocation size for a request of `size` bytes (already rounded
 * or not): the segment the pool would reserve when nothing cached fits. */
size_t cp_driver_alloc_size(const cp_config_t *cfg, size_t size);
/* The least max_split a pool takes (a smaller one is raised to it): more
 * than every standard segment, so that the rest of a new segment cut for a
 * request is always smaller than max_split and may serve the next request.
 * Below it, each small request took a fresh 2 MiB segment (max_split 1 MiB)
 * or each request under 10 MiB a whole 20 MiB one (max_split 2-20 MiB). The
 * defaults' floor is 21 MiB (PyTorch refuses max_split_size_mb <= 20). */
size_t cp_max_split_floor(const cp_config_t *cfg);
/* `size` rounded up to cfg->round; 0 when it would overflow. */
size_t cp_round_size(const cp_config_t *cfg, size_t size);

/* 0, EINVAL (bad config) or ENOMEM. The backend table is copied. */
int cp_pool_create(cp_pool_t **out, int device, const cp_config_t *cfg, const cp_backend_t *backend);
/* Release every segment to the backend and free the pool. */
void cp_pool_destroy(cp_pool_t *pool);
/* Free the pool without calling the backend: the device memory is already
 * gone (cudaDeviceReset). */
void cp_pool_drop(cp_pool_t *pool);
/* The device memory is gone (cudaDeviceReset) but the pool stays allocated
 * (other threads may still hold it): it never calls the backend to give
 * memory back again. */
void cp_pool_retire(cp_pool_t *pool);

/* Allocate `size` (> 0) bytes for `stream`. 0, EINVAL (size 0), ENOMEM (the
 * limit, or the device is full), or the backend's own error when its last
 * allocation failed otherwise (the shim's: EIO). */
int cp_alloc(cp_pool_t *pool, size_t size, uint64_t stream, uint64_t key, uintptr_t *out);
/* Free the block starting at addr. 0; ENOENT: addr is not inside any segment
 * of this pool (a foreign pointer); EINVAL: inside a segment but not the
 * start of a live block (interior pointer, double free). The pool is
 * untouched on error. */
int cp_free(cp_pool_t *pool, uintptr_t addr, uint64_t key, unsigned flags);
/* As cp_free, and the block's stream becomes `stream` first: the stream its
 * free is ordered on (cudaFreeAsync), or CP_STREAM_DEVICE for a free that
 * is ordered on none (cudaFree of a block allocated for a stream). The
 * pending block is then reusable at once by an allocation with (stream,
 * key), and cp_sync_stream(stream) completes it. Same codes as cp_free. */
int cp_free_on_stream(cp_pool_t *pool, uintptr_t addr, uint64_t stream, uint64_t key, unsigned flags);

/* cp_alloc, cp_free and cp_free_on_stream through this thread's cache of the pool (tcache.c):
 * the same results and stats (read through cp_get_stats), and a block freed
 * with a key comes back to the same (stream, key) without the pool lock.
 * A pool with an observer or CP_REUSE_IMMEDIATE serves them through the
 * pool alone. */
int cp_tcache_alloc(cp_pool_t *pool, size_t size, uint64_t stream, uint64_t key, uintptr_t *out);
int cp_tcache_free(cp_pool_t *pool, uintptr_t addr, uint64_t key, unsigned flags);
int cp_tcache_free_on_stream(cp_pool_t *pool, uintptr_t addr, uint64_t stream, uint64_t key, unsigned flags);

/* What the pool reports to an observer (the shim's trace recorder), called
 * with the pool lock held: a block's free is seen before anyone can be
 * handed it again, whatever the threads. `size` is the request for ALLOC and
 * ALLOC_FAILED, the block's size for FREE; addr is 0 for ALLOC_FAILED. The
 * observer must not call into the pool. */
typedef enum cp_observed { CP_OBSERVED_ALLOC, CP_OBSERVED_FREE, CP_OBSERVED_ALLOC_FAILED } cp_observed_t;
typedef void cp_observer_fn(void *ctx, cp_observed_t what, uintptr_t addr, size_t size, uint64_t stream);
void cp_pool_set_observer(cp_pool_t *pool, cp_observer_fn *fn, void *ctx);
/* Size of the live block at addr, 0 when none. */
size_t cp_block_size(cp_pool_t *pool, uintptr_t addr);
/* The live block whose requested bytes contain addr (any address inside it,
 * not only its start), as the program sees it: where it starts, the bytes it
 * asked for, and whether it starts its segment (the backend allocation: what
 * CUDA itself describes for any pointer into it). Returns 0 with *out set;
 * EINVAL when addr lies in one of the pool's segments but in no live block's
 * request (a freed block, the bytes past a request, free space); ENOENT when
 * it lies in none (as cp_free). */
typedef struct cp_block_info {
  uintptr_t start;
  size_t size;
  bool segment_start; /* never for a block of an expandable segment */
  bool expandable;    /* in an expandable segment: mapped page by page */
} cp_block_info_t;
int cp_block_find(cp_pool_t *pool, uintptr_t addr, cp_block_info_t *out);
/* Keep the live block at addr pending, once freed, until a barrier, fence or
 * device synchronisation, or a synchronisation of `stream` too. 0 or ENOENT. */
int cp_record_stream(cp_pool_t *pool, uintptr_t addr, uint64_t stream);

/* Synchronisation points. cp_sync_mark() before the real call takes a mark
 * (a point in each arena's free order); after the call returns, report what
 * it covered with the mark: */
#define CP_ARENAS_MAX 64
typedef struct cp_mark {
  unsigned n; /* arenas it names */
  uint64_t seq[CP_ARENAS_MAX];
} cp_mark_t;
void cp_sync_mark(cp_pool_t *pool, cp_mark_t *out);
/* The whole device was idle: every block freed before the mark is ready. */
void cp_sync_device(cp_pool_t *pool, const cp_mark_t *mark);
/* `stream` was idle: blocks freed before the mark that were allocated for it
 * and recorded on no other stream are ready. */
void cp_sync_stream(cp_pool_t *pool, const cp_mark_t *mark, uint64_t stream);
/* The rule for a completed stream synchronisation, for the shim and the
 * replayer alike: the legacy stream waits for every blocking stream, so with
 * no non-blocking stream live its synchronisation covered the whole device;
 * any other stream covers its own blocks. */
void cp_synced_stream(cp_pool_t *pool, const cp_mark_t *mark, uint64_t stream, bool legacy,
                      bool nonblocking_live);

/* Make pending blocks ready (barrier, else wait for fences), then release
 * every whole free segment. Returns the bytes released. */
size_t cp_empty_cache(cp_pool_t *pool);
/* Bytes in segments that hold no block in use (each free or pending): what
 * cp_empty_cache gives back once the device has finished the work the
 * pending ones wait for. Takes every arena's lock in turn (for `cudapool
 * top`, not a hot path). */
size_t cp_releasable_bytes(cp_pool_t *pool);
/* Release whole free segments, oldest first, until cached bytes <= target. */
size_t cp_trim(cp_pool_t *pool, size_t target_cached);
/* Change the limit (CP_NO_LIMIT = none); trims free segments to fit. */
void cp_set_limit(cp_pool_t *pool, size_t limit);
void cp_get_config(cp_pool_t *pool, cp_config_t *out);

/* Background reclaim (reclaim.c): one pass of a thread that works without
 * the program's help (the shim's state/reclaim.c). Over every arena, each
 * under its lock: thread caches flushed; pending blocks made ready (a
 * barrier, else fences polled: never a host wait); then, if args allow it
 * now, free segments given back down to max_cached and, with idle_ns,
 * whole free segments unused that long (the first pass that sees a segment
 * wholly free stamps it; an allocation from it clears the stamp). */
typedef struct cp_reclaim_args {
  uint64_t now_ns;  /* a monotonic clock, > 0 */
  uint64_t idle_ns; /* 0: no idle release */
  /* Called, with an arena's lock held, around giving memory back: begin
   * false = not now (the shim: a stream capture, which a cudaFree from
   * this thread could break, is in progress). NULL: always allowed. */
  bool (*release_begin)(void *ctx);
  void (*release_end)(void *ctx);
  void *ctx;
} cp_reclaim_args_t;
typedef struct cp_reclaim_result {
  bool busy;       /* a later pass has work: freed blocks still wait, pages wait for the device, a release was put off */
  uint64_t due_ns; /* 0, or when the next free segment has been unused for idle_ns */
} cp_reclaim_result_t;
void cp_reclaim(cp_pool_t *pool, const cp_reclaim_args_t *args, cp_reclaim_result_t *out);
/* Whether anything freed waits to be made ready (thread caches flushed
 * first): what a reclaimer checks, after saying it sleeps, before it does. */
bool cp_reclaim_waiting(cp_pool_t *pool);

/* Fill *out (size/version/device are set here). Thread caches are flushed
 * first, so the figures are those of the pool without them. */
void cp_get_stats(cp_pool_t *pool, cudapool_stats_t *out);
void cp_reset_peak(cp_pool_t *pool);
/* Every segment and block of every arena (walk.c), for a snapshot: each
 * arena under its lock in turn, its segments in address order, each
 * segment's blocks in address order right after it; they tile it exactly.
 * The callbacks run with the arena's lock held and must not call into the
 * pool. A block lent to a thread cache and freed there counts as pending
 * (its device work may still run). 0, or ENOMEM (the walk stopped short). */
typedef enum cp_walk_state { CP_WALK_ALLOCATED, CP_WALK_FREE, CP_WALK_PENDING } cp_walk_state_t;
typedef struct cp_walk_segment {
  uintptr_t addr;
  size_t size;
  uint64_t stream; /* its first block's */
  bool expandable;
} cp_walk_segment_t;
typedef struct cp_walk_block {
  uintptr_t addr;
  size_t size;
  size_t requested; /* allocated: the bytes asked for; else 0 */
  cp_walk_state_t state;
  uint64_t stream;
} cp_walk_block_t;
typedef struct cp_walker {
  void (*segment)(void *ctx, const cp_walk_segment_t *seg);
  void (*block)(void *ctx, const cp_walk_block_t *block);
  void *ctx;
} cp_walker_t;
int cp_walk(cp_pool_t *pool, const cp_walker_t *walker);
/* Bytes the backend holds for every arena of the pool now (reserved_bytes
 * without a thread-cache flush): one atomic load, no lock. */
size_t cp_reserved_now(const cp_pool_t *pool);

#endif
