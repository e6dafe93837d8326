/* block.h: blocks and segments, the pool's units of memory.
 *
 * A segment is one backend allocation. It is tiled, in address order and
 * without gaps, by blocks linked through prev/next. Each block is in exactly
 * one state:
 *   ACTIVE   handed to the program, or lent to a thread cache (tcache.c),
 *            which may hold it freed; in the pool's pointer map.
 *   READY    free and reusable by anyone; in its subpool's size bins.
 *   PENDING  freed, the device may still touch it; in the pending FIFO (free
 *            order) and, when it has a reuse key, in that key's size tree.
 * Invariants: two READY blocks are never address neighbours (they coalesce);
 * every block size is a multiple of the pool's rounding; a segment is
 * released only when one READY block covers it whole.
 *
 * An expandable segment (pages.c) is a reserved virtual range whose pages
 * are mapped on demand: every page an ACTIVE block touches is mapped; a
 * page is unmapped only while a READY block covers it whole and the device
 * work of every free that block holds has completed (done_seq). */
#ifndef CUDAPOOL_CORE_BLOCK_H
#define CUDAPOOL_CORE_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bsd/sys/tree.h>
#include <uthash.h>

typedef enum cp_block_state {
  CP_BLOCK_ACTIVE,
  CP_BLOCK_READY,
  CP_BLOCK_PENDING,
} cp_block_state_t;

struct cp_segment;
struct cp_keyed;

typedef struct cp_block {
  uintptr_t addr;
  size_t size;
  struct cp_segment *segment;
  struct cp_block *prev, *next; /* address neighbours within the segment */
  cp_block_state_t state;
  uint64_t stream;  /* the stream it was allocated for */
  size_t requested; /* ACTIVE: bytes the program asked for */
  /* PENDING */
  uint64_t free_seq; /* position in the pool's free order */
  /* READY: the newest free whose device work may still touch these bytes
   * (0: none); its pages may be unmapped once the pool's completed_seq
   * reaches it. Kept through an ACTIVE life: that work may outlive it */
  uint64_t done_seq;
  struct cp_block *fifo_prev, *fifo_next;
  struct cp_keyed *keyed; /* the reuse-key tree holding it, or NULL */
  /* streams recorded with cp_record_stream, besides `stream` */
  uint64_t *recorded;
  uint32_t n_recorded, cap_recorded;
  /* ACTIVE: the thread cache that lends it (tcache.c), set under the pool
   * lock; tc_free, under that cache's own lock: freed into it. */
  struct cp_tcache *lent;
  bool tc_free;
  /* Lent: the pool would hand it out whole for `requested` bytes again, so
   * the cache may give it back for the same size without asking the rules. */
  bool whole_for_requested;
  /* ACTIVE, freed without a key by the thread it was lent to: the next in
   * the pool's stack of such frees, which the pool takes under its lock. */
  struct cp_block *deferred_next;
  RB_ENTRY(cp_block) size_link; /* in bins (READY) or a keyed tree (PENDING) */
  UT_hash_handle hh;            /* pointer map (ACTIVE) */
} cp_block_t;

/* Blocks ordered by (size, address): best fit is the lower bound of
 * (request, 0), ties broken by the lowest address. */
RB_HEAD(cp_size_tree, cp_block);

typedef struct cp_segment {
  uintptr_t base;
  size_t size;
  bool small;                       /* belongs to the small pool */
  bool expandable;                  /* a reserved range mapped page by page */
  uint64_t *mapped;                 /* expandable: bit i = page i mapped */
  size_t mapped_bytes;              /* expandable: what counts as reserved */
  cp_block_t *first;                /* lowest-address block */
  struct cp_segment *older, *newer; /* creation order, for trimming */
  uint64_t free_since;              /* reclaim.c: when a pass first saw it wholly free (0: not free) */
  RB_ENTRY(cp_segment) addr_link;
} cp_segment_t;

RB_HEAD(cp_segment_tree, cp_segment);

static inline bool cp_segment_is_free(const cp_segment_t *s) {
  return s->first->state == CP_BLOCK_READY && s->first->size == s->size;
}

/* libbsd's RB_GENERATE_STATIC uses BSD's __unused, which glibc lacks. */
#define CP_RB_GENERATE_STATIC(name, type, field, cmp) \
  RB_GENERATE_INTERNAL(name, type, field, cmp, __attribute__((unused)) static)

#endif
