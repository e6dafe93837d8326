/* regions.h: named regions of the program (cudapool_push_tag/pop_tag, the
 * Python package's cudapool.tag, NVTX ranges the program already makes)
 * and what was allocated while each was open, as RMM's statistics profiler
 * shows it.
 *
 * Owns the table of regions (one per distinct name, in order of first
 * sight), each thread's stack of open tags, the open start/end ranges (NVTX
 * nvtxRangeStart/End: not a thread's), the live bytes of the process (the
 * bytes asked for of every block served and not yet freed) and the map from
 * each live block to its bytes.
 *
 * Per region:
 *   - peak: the most live bytes of the process at any moment while the
 *     region was open on some thread (or as a start/end range), so nested
 *     regions share their parent's peak when it came inside them;
 *   - bytes, allocations: the blocks served while the region was open on
 *     the allocating thread's stack (every level: an allocation in "attn"
 *     inside "forward" counts for both) or as an open start/end range; a
 *     name open twice counts an allocation once;
 *   - entries: times it was opened.
 *
 * Invariants: recording starts at the first tag pushed (or range started);
 * before that nothing here is called and the serving path tests one flag.
 * At that first tag every pool is walked once and its allocated blocks are
 * put in the live map, so the live bytes are the process's from then on. A
 * region's index never changes; at most CP_REGIONS_MAX names (more are
 * counted in the last one, "(other)"); a thread's stack keeps
 * CP_REGIONS_DEPTH levels (deeper pushes open nothing: they are only
 * counted, so that their pops close nothing).
 *
 * Locking: one mutex over the table, the open ranges and the live map,
 * taken outside every pool lock (the first tag's walk takes each arena's
 * lock under it: never the other way round). A thread's stack is its own.
 * Nothing here prints but the report writers. Out of memory here loses a
 * record, never the program's allocation. */
#ifndef CUDAPOOL_SHIM_REGIONS_H
#define CUDAPOOL_SHIM_REGIONS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CP_REGIONS_MAX 256
#define CP_REGIONS_DEPTH 32
#define CP_REGION_NAME_MAX 64 /* bytes kept of a name, with its NUL */

/* Set at the first tag, never cleared: the serving path's test. */
extern atomic_bool cp_regions_on;

/* The calling thread opens region `name` (NULL or "" is EINVAL); 0 or an
 * errno. A name longer than CP_REGION_NAME_MAX - 1 bytes is cut. */
int cp_regions_push(const char *name);
/* The calling thread closes its innermost open region: 0, or EINVAL when it
 * has none open. */
int cp_regions_pop(void);
/* A range that any thread may end (NVTX start/end): its id (never 0), or 0
 * when name is empty. */
uint64_t cp_regions_start(const char *name);
/* Ends a range of cp_regions_start; unknown or ended ids are ignored. */
void cp_regions_end(uint64_t id);

/* The shim served `requested` bytes at addr (only while cp_regions_on). */
void cp_regions_served(uintptr_t addr, size_t requested);
/* The program frees addr, before the pool does (only while cp_regions_on);
 * unknown addresses are ignored. */
void cp_regions_freeing(uintptr_t addr);

/* Report writers; nothing when no region was ever opened.
 * Text: "cudapool: regions (peak: most bytes allocated while open):" then
 * one line per region, in order of first sight:
 *   "cudapool:   forward: peak 6291456 bytes, 4194304 bytes in 2 allocations, entered 1 time" */
void cp_regions_report_text(FILE *out);
/* JSON member starting with ',': "regions":[{"name":"forward","peak_bytes":N,
 * "allocated_bytes":N,"allocations":N,"entries":N,"open":N}...]. */
void cp_regions_report_json(FILE *out);

#endif
