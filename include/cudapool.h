/* cudapool.h: the public control API of cudapool, the LD_PRELOAD caching
 * allocator for CUDA device memory.
 *
 * A program that links nothing of cudapool can still reach every function
 * here at run time with dlsym(RTLD_DEFAULT, "cudapool_stats") and friends
 * (see docs/OPTIONS.md and the README). Every function returns 0 or an errno
 * value; none of them makes a CUDA call that could block on the device,
 * except cudapool_empty_cache, which may wait for device work to finish
 * before giving memory back.
 *
 * This header is also the one list of counters: CUDAPOOL_GAUGES and
 * CUDAPOOL_COUNTERS below generate cudapool_stats_t, the exit report and the
 * JSON output, so a counter added here appears everywhere. */
#ifndef CUDAPOOL_H
#define CUDAPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The same typedef as CUDA's driver_types.h: repeating it is legal, and it
 * keeps this header free of CUDA includes. */
struct CUstream_st;
typedef struct CUstream_st *cudaStream_t;

#define CUDAPOOL_VERSION_MAJOR 0
#define CUDAPOOL_VERSION_MINOR 1
#define CUDAPOOL_VERSION_PATCH 0
/* cudapool_version() returns major * 10000 + minor * 100 + patch. */
#define CUDAPOOL_VERSION \
  (CUDAPOOL_VERSION_MAJOR * 10000 + CUDAPOOL_VERSION_MINOR * 100 + CUDAPOOL_VERSION_PATCH)

/* Gauges have a current value and a peak since start or the last reset_peak.
 * X(name, description) */
#define CUDAPOOL_GAUGES(X)                                                     \
  X(allocated_bytes, "bytes in blocks handed to the program (rounded to 512)") \
  X(allocated_blocks, "blocks handed to the program")                          \
  X(requested_bytes, "bytes the program asked for, before rounding")           \
  X(active_bytes, "allocated plus freed blocks the device may still touch")    \
  X(pending_bytes, "freed blocks not yet reusable by every stream")            \
  X(cached_bytes, "reserved but not allocated: free and pending blocks")       \
  X(reserved_bytes, "bytes obtained from the driver")                          \
  X(segments, "driver allocations held")

/* Counters only grow. X(name, description) */
#define CUDAPOOL_COUNTERS(X)                                                    \
  X(num_alloc, "allocations served")                                            \
  X(num_free, "frees of pool blocks")                                           \
  X(hits, "allocations served from cached memory")                              \
  X(misses, "allocations that needed a new driver allocation")                  \
  X(num_immediate_reuse, "hits on a block reused at once by its key (thread, or learned stream order)") \
  X(num_device_alloc, "driver allocations made")                                \
  X(num_device_free, "driver allocations released")                             \
  X(num_barriers, "asynchronous device-wide barriers issued")                   \
  X(num_fences_recorded, "fences recorded")                                     \
  X(num_fences_waited, "fences the host waited for")                            \
  X(num_sync_points, "program synchronisations that completed pending blocks")  \
  X(num_alloc_retries, "allocations that failed once and were retried")         \
  X(num_ooms, "allocations that failed with out-of-memory")                     \
  X(num_reclaims, "passes of the reclaimer thread (CUDAPOOL_RECLAIM_INTERVAL)") \
  X(num_idle_releases, "segments given back unused (CUDAPOOL_RELEASE_IDLE)")                  \
  X(num_order_waits, "streams made to wait for the one all work went to, before their first work")   \
  X(num_order_recoveries, "times every stream but one was found idle: reuse at once again")

/* Values computed when the stats are read. X(name, description) */
#define CUDAPOOL_SNAPSHOT(X)                                           \
  X(blocks, "blocks in all segments")                                  \
  X(free_blocks, "blocks not handed to the program (free or pending)") \
  X(largest_free_block, "largest block reusable now, in bytes")

typedef struct cudapool_gauge {
  int64_t current;
  int64_t peak;
} cudapool_gauge_t;

#define CUDAPOOL_STATS_VERSION 1

typedef struct cudapool_stats {
  uint32_t size;    /* set by the caller: sizeof(cudapool_stats_t) */
  uint32_t version; /* set by the caller: CUDAPOOL_STATS_VERSION */
  int32_t device;
  int32_t reserved0;
#define CUDAPOOL_X_GAUGE_FIELD(name, desc) cudapool_gauge_t name;
#define CUDAPOOL_X_VALUE_FIELD(name, desc) uint64_t name;
  CUDAPOOL_GAUGES(CUDAPOOL_X_GAUGE_FIELD)
  CUDAPOOL_COUNTERS(CUDAPOOL_X_VALUE_FIELD)
  CUDAPOOL_SNAPSHOT(CUDAPOOL_X_VALUE_FIELD)
#undef CUDAPOOL_X_GAUGE_FIELD
#undef CUDAPOOL_X_VALUE_FIELD
} cudapool_stats_t;

/* Fill *out for one device. out->size and out->version must be set; all
 * zero for a device not allocated on yet (before the process's first CUDA
 * call: any device number below 64, since cudapool asks CUDA nothing before
 * the program does). EINVAL: bad size/version or NULL; ENODEV: no such
 * device. */
int cudapool_stats(int device, cudapool_stats_t *out);
/* Give whole free segments back to the driver; device -1 = every device. */
int cudapool_empty_cache(int device);
/* Peaks := current values; device -1 = every device. */
int cudapool_reset_peak(int device);
/* Keep the block at ptr pending until work on stream, too, has completed
 * (PyTorch's recordStream). ENOENT: ptr is not a live pool block. */
int cudapool_record_stream(const void *ptr, cudaStream_t stream);
/* Most bytes the pool may reserve on device (0 = no limit). */
int cudapool_set_limit(int device, size_t bytes);
/* Print the report of every device; format "text" or "json" (NULL = text). */
int cudapool_print_stats(FILE *out, const char *format);
/* CUDAPOOL_VERSION of the loaded library. */
int cudapool_version(void);
/* The layout of the loaded library's cudapool_stats_t, for bindings that
 * cannot read this header (python/cudapool): "version=V;gauges NAME ...;
 * counters NAME ...;snapshot NAME ...", the three lists above in order. */
const char *cudapool_stats_layout(void);
/* Open a region named name on the calling thread (regions nest, per
 * thread): the exit report and `cudapool stats PID` show, per region, the
 * most bytes allocated while it was open, and the bytes and allocations
 * made in it. The name is copied (63 bytes kept). EINVAL: NULL or "". */
int cudapool_push_tag(const char *name);
/* Close the calling thread's innermost region. EINVAL: none is open. */
int cudapool_pop_tag(void);

#ifdef __cplusplus
}
#endif
#endif /* CUDAPOOL_H */
