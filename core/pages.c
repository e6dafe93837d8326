/* pages.c: expandable segments, the pages of reserved virtual ranges.
 *
 * An expandable segment is a virtual range the backend reserved (no memory
 * behind it); blocks are carved from it as from any segment, and its pages
 * (the backend's mapping granularity, 2 MiB on CUDA) get device memory only
 * while something needs them. A block is never moved: pages come and go
 * under free address space only, so a pointer handed out stays valid.
 *
 * Owns the page bitmap of each expandable segment and the reserved-bytes
 * count of its mapped pages. Invariants (checked by check.c):
 *   - every page an ACTIVE block touches is mapped;
 *   - a page is unmapped only while one READY block covers it whole and the
 *     device work of every free that block took in has completed
 *     (done_seq <= completed_seq). A barrier orders later work after the
 *     free, enough to hand the bytes out again, but the device may still be
 *     running the earlier work: unmapping under it would fault, so it waits
 *     for a completed fence or a synchronisation;
 *   - mapped_bytes = mapped pages * page; reserved_bytes counts it.
 * Pages go back (cp_pages_release) under pressure only: the limit, the
 * out-of-memory path, the cache cap (trim), empty_cache; see docs/DESIGN.md
 * for the measurements behind that choice.
 *
 * Called with the pool lock held. */
#include <errno.h>

#include "pool_internal.h"

static size_t page_index(const cp_pool_t *pool, const cp_segment_t *seg, uintptr_t addr) {
  return (size_t)(addr - seg->base) / pool->page;
}

static bool is_mapped(const cp_segment_t *seg, size_t i) { return (seg->mapped[i / 64] >> (i % 64)) & 1u; }

static void set_pages_mapped(cp_pool_t *pool, cp_segment_t *seg, size_t first, size_t end, bool mapped) {
  for (size_t i = first; i < end; i++) {
    if (mapped)
      seg->mapped[i / 64] |= (uint64_t)1 << (i % 64);
    else
      seg->mapped[i / 64] &= ~((uint64_t)1 << (i % 64));
  }
  int64_t bytes = (int64_t)((end - first) * pool->page);
  seg->mapped_bytes += mapped ? (size_t)bytes : (size_t)-bytes;
  cp_stat_add(&pool->stats.reserved_bytes, mapped ? bytes : -bytes);
  /* A mapping's bytes were claimed before it (cp_pages_claim). */
  if (mapped)
    cp_budget_commit(pool, (size_t)bytes);
  else
    cp_budget_release(pool, (size_t)bytes);
}

/* The end of the run of pages from i that are all mapped (or all not). */
static size_t run_end(const cp_segment_t *seg, size_t i, size_t end, bool mapped) {
  while (i < end && is_mapped(seg, i) == mapped) i++;
  return i;
}

static void unmap_run(cp_pool_t *pool, cp_segment_t *seg, size_t first, size_t end) {
  pool->be.unmap(pool->be.ctx, pool->device, seg->base + first * pool->page, (end - first) * pool->page);
  set_pages_mapped(pool, seg, first, end, false);
  pool->stats.num_device_free++;
}

/* Unmap the mapped pages in [first, end), at most `want` bytes of them. */
static size_t unmap_range(cp_pool_t *pool, cp_segment_t *seg, size_t first, size_t end, size_t want) {
  size_t released = 0;
  for (size_t i = first; i < end && released < want;) {
    if (!is_mapped(seg, i)) {
      i = run_end(seg, i, end, false);
      continue;
    }
    size_t stop = run_end(seg, i, end, true);
    size_t left = want - released, most = left / pool->page + (left % pool->page != 0);
    if (stop - i > most) stop = i + most;
    unmap_run(pool, seg, i, stop);
    released += (stop - i) * pool->page;
    i = stop;
  }
  return released;
}

/* The pages a READY block covers whole, if its work has completed. */
static size_t release_block(cp_pool_t *pool, cp_block_t *b, size_t want) {
  if (b->done_seq > pool->completed_seq) return 0;
  cp_segment_t *seg = b->segment;
  uintptr_t lo = b->addr - seg->base, hi = lo + b->size;
  size_t first = (size_t)((lo + pool->page - 1) / pool->page), end = (size_t)(hi / pool->page);
  return first < end ? unmap_range(pool, seg, first, end, want) : 0;
}

size_t cp_pages_release(cp_pool_t *pool, size_t want, const cp_block_t *keep) {
  size_t released = 0;
  for (cp_segment_t *seg = pool->oldest; seg && released < want; seg = seg->newer) {
    if (!seg->expandable || seg->mapped_bytes == 0) continue;
    for (cp_block_t *b = seg->first; b && released < want; b = b->next)
      if (b->state == CP_BLOCK_READY && b != keep) released += release_block(pool, b, want - released);
  }
  cp_stats_refresh_derived(pool);
  return released;
}

bool cp_pages_release_segment(cp_pool_t *pool, cp_segment_t *seg) {
  if (seg->mapped_bytes) release_block(pool, seg->first, SIZE_MAX);
  return seg->mapped_bytes == 0;
}

bool cp_complete_all(cp_pool_t *pool, bool wait) {
  if (pool->completed_seq >= pool->free_seq) return true;
  cp_poll_fences(pool);
  if (pool->completed_seq < pool->free_seq && cp_fence_everything(pool) && wait) cp_wait_fences(pool);
  return pool->completed_seq >= pool->free_seq;
}

/* `need` more mapped bytes claimed under the limit (arena.c), unmapping
 * free pages (other than b's) to make room. */
static bool claim_under_limit(cp_pool_t *pool, const cp_block_t *b, size_t need) {
  if (cp_budget_claim(pool, need)) return true;
  size_t reserved = cp_budget_reserved(pool);
  if (reserved + need > pool->cfg.limit) cp_pages_release(pool, reserved + need - pool->cfg.limit, b);
  return cp_budget_claim(pool, need);
}

bool cp_pages_mapped(const cp_pool_t *pool, const cp_block_t *b, size_t size) {
  const cp_segment_t *seg = b->segment;
  if (!seg->expandable) return true;
  size_t first = page_index(pool, seg, b->addr), end = page_index(pool, seg, b->addr + size - 1) + 1;
  for (size_t i = first; i < end; i++)
    if (!is_mapped(seg, i)) return false;
  return true;
}

int cp_pages_claim(cp_pool_t *pool, cp_block_t *b, size_t size, bool *mapped) {
  cp_segment_t *seg = b->segment;
  size_t first = page_index(pool, seg, b->addr), end = page_index(pool, seg, b->addr + size - 1) + 1;
  size_t need = 0;
  for (size_t i = first; i < end; i++) need += !is_mapped(seg, i);
  *mapped = false;
  if (need == 0) return 0;
  if (!claim_under_limit(pool, b, need * pool->page)) return ENOMEM;
  for (size_t i = first; i < end;) {
    if (is_mapped(seg, i)) {
      i = run_end(seg, i, end, true);
      continue;
    }
    size_t stop = run_end(seg, i, end, false);
    int rc = pool->be.map(pool->be.ctx, pool->device, seg->base + i * pool->page, (stop - i) * pool->page);
    /* Runs mapped before a failure stay mapped, under free bytes: counted
     * as reserved, and given back like any free page. */
    if (rc != 0) {
      size_t left = 0;
      for (size_t j = i; j < end; j++) left += !is_mapped(seg, j);
      cp_budget_return(pool, left * pool->page);
      return rc;
    }
    set_pages_mapped(pool, seg, i, stop, true);
    pool->stats.num_device_alloc++;
    *mapped = true;
    i = stop;
  }
  return 0;
}
