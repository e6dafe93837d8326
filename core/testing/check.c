/* check.c: cp_pool_check, every invariant of the pool verified from scratch
 * (for tests and the randomized checker; O(blocks), never on a hot path).
 * Testing only (check.h): never linked into libcudapool.so.
 * Locking: takes each arena's lock in turn, as the pool's own readers do. */
#include "check.h"
#include "pool_internal.h"
#include "util.h"

typedef struct tally {
  size_t blocks, free_blocks, active, ready[2], pending[2];
  size_t allocated, requested, pending_bytes, reserved, segments;
} tally_t;

static bool page_mapped(const cp_pool_t *pool, const cp_segment_t *seg, uintptr_t addr) {
  size_t i = (size_t)(addr - seg->base) / pool->page;
  return (seg->mapped[i / 64] >> (i % 64)) & 1u;
}

/* Every page of a live block mapped; the bitmap adds up to mapped_bytes. */
static int check_pages(cp_pool_t *pool, cp_segment_t *seg, char *why, size_t n) {
  size_t pages = 0;
  for (uintptr_t a = seg->base; a < seg->base + seg->size; a += pool->page)
    pages += page_mapped(pool, seg, a);
  if (pages * pool->page != seg->mapped_bytes)
    return cp_fail_msg(why, n, "segment %#lx: %zu pages mapped, %zu bytes counted", seg->base, pages,
                       seg->mapped_bytes);
  for (const cp_block_t *b = seg->first; b; b = b->next) {
    if (b->state != CP_BLOCK_ACTIVE) continue;
    for (uintptr_t a = b->addr - (b->addr - seg->base) % pool->page; a < b->addr + b->size; a += pool->page)
      if (!page_mapped(pool, seg, a))
        return cp_fail_msg(why, n, "block %#lx: page %#lx not mapped", b->addr, a);
  }
  return 0;
}

static int check_segment(cp_pool_t *pool, cp_segment_t *seg, tally_t *t, char *why, size_t n) {
  uintptr_t at = seg->base;
  const cp_block_t *prev = NULL;
  for (const cp_block_t *b = seg->first; b; prev = b, b = b->next) {
    if (b->addr != at || b->segment != seg || b->prev != prev)
      return cp_fail_msg(why, n, "segment %#lx: block %#lx out of place", seg->base, b->addr);
    if (b->size == 0 || b->size % pool->cfg.round)
      return cp_fail_msg(why, n, "block %#lx: size %zu", b->addr, b->size);
    if (prev && prev->state == CP_BLOCK_READY && b->state == CP_BLOCK_READY)
      return cp_fail_msg(why, n, "blocks %#lx and %#lx: adjacent ready blocks", prev->addr, b->addr);
    t->blocks++;
    if (b->state == CP_BLOCK_ACTIVE) {
      const cp_block_t *found;
      HASH_FIND_PTR(pool->active, &b->addr, found);
      if (found != b) return cp_fail_msg(why, n, "block %#lx: active but not in the map", b->addr);
      t->active++;
      t->allocated += b->size;
      t->requested += b->requested;
    } else {
      t->free_blocks++;
      if (b->state == CP_BLOCK_READY)
        t->ready[seg->small]++;
      else {
        t->pending[seg->small]++;
        t->pending_bytes += b->size;
      }
    }
    at += b->size;
  }
  if (at != seg->base + seg->size)
    return cp_fail_msg(why, n, "segment %#lx: blocks cover %zu of %zu bytes", seg->base, at - seg->base,
                       seg->size);
  t->reserved += seg->expandable ? seg->mapped_bytes : seg->size;
  t->segments++;
  return seg->expandable ? check_pages(pool, seg, why, n) : 0;
}

static int check_fifo(cp_pool_t *pool, size_t expected, char *why, size_t n) {
  size_t count = 0;
  uint64_t last = 0;
  for (const cp_block_t *b = pool->fifo_head; b; b = b->fifo_next) {
    if (b->state != CP_BLOCK_PENDING) return cp_fail_msg(why, n, "fifo holds non-pending %#lx", b->addr);
    if (b->free_seq < last || b->free_seq > pool->free_seq) return cp_fail_msg(why, n, "fifo out of order");
    if (b->keyed && b->keyed->count == 0) return cp_fail_msg(why, n, "keyed tree count wrong");
    last = b->free_seq;
    count++;
  }
  return count == expected ? 0 : cp_fail_msg(why, n, "fifo has %zu blocks, %zu pending", count, expected);
}

static int check_one(cp_pool_t *pool, unsigned index, char *why, size_t n, size_t *reserved, int64_t *added) {
  pthread_mutex_lock(&pool->lock);
  cp_tcaches_flush_all(pool); /* what they hold freed is checked as pending blocks */
  tally_t t = {0};
  int rc = 0;
  size_t listed = 0;
  for (cp_segment_t *seg = pool->oldest; seg && rc == 0; seg = seg->newer, listed++)
    rc = check_segment(pool, seg, &t, why, n);
  const cudapool_stats_t *s = &pool->stats;
  if (rc == 0 && HASH_COUNT(pool->active) != t.active + 1)
    rc = cp_fail_msg(why, n, "map has %u entries, %zu active blocks and the anchor", HASH_COUNT(pool->active),
                     t.active);
  for (int small = 0; small < 2 && rc == 0; small++) {
    cp_subpool_t *sp = cp_subpool_of(pool, small);
    if (sp->ready.count != t.ready[small])
      rc = cp_fail_msg(why, n, "bins hold %zu, %zu ready", sp->ready.count, t.ready[small]);
    else if (sp->pending_count != t.pending[small])
      rc = cp_fail_msg(why, n, "pending count %zu, found %zu", sp->pending_count, t.pending[small]);
  }
  if (rc == 0) rc = check_fifo(pool, t.pending[0] + t.pending[1], why, n);
  if (rc == 0 && (t.blocks != pool->block_count || t.free_blocks != pool->free_block_count))
    rc = cp_fail_msg(why, n, "block counts %zu/%zu, found %zu/%zu", pool->block_count, pool->free_block_count,
                     t.blocks, t.free_blocks);
  if (rc == 0 &&
      ((size_t)s->allocated_bytes.current != t.allocated || (size_t)s->allocated_blocks.current != t.active ||
       (size_t)s->requested_bytes.current != t.requested ||
       (size_t)s->pending_bytes.current != t.pending_bytes ||
       (size_t)s->reserved_bytes.current != t.reserved || (size_t)s->segments.current != t.segments))
    rc = cp_fail_msg(why, n, "stats disagree: allocated %ld/%zu reserved %ld/%zu pending %ld/%zu",
                     (long)s->allocated_bytes.current, t.allocated, (long)s->reserved_bytes.current,
                     t.reserved, (long)s->pending_bytes.current, t.pending_bytes);
  if (rc == 0 && (s->active_bytes.current != s->allocated_bytes.current + s->pending_bytes.current ||
                  s->cached_bytes.current != s->reserved_bytes.current - s->allocated_bytes.current))
    rc = cp_fail_msg(why, n, "derived stats stale");
  uint64_t published = atomic_load(&pool->seq_pub), covered = atomic_load(&pool->covered_pub);
  if (rc == 0 && (pool->arena_index != index || published != pool->free_seq || covered > pool->free_seq ||
                  pool->barrier_covered > pool->free_seq))
    rc = cp_fail_msg(why, n, "arena %u (index %u): free order %llu, published %llu, covered %llu/%llu", index,
                     pool->arena_index, (unsigned long long)pool->free_seq, (unsigned long long)published,
                     (unsigned long long)covered, (unsigned long long)pool->barrier_covered);
  int64_t change = s->allocated_bytes.current - pool->allocated_added;
  if (rc == 0 && (atomic_load(&pool->allocated_now) != s->allocated_bytes.current ||
                  change >= CP_ALLOCATED_SLACK || change <= -CP_ALLOCATED_SLACK))
    rc = cp_fail_msg(why, n, "allocated %lld, published %lld, added to the shared sum %lld",
                     (long long)s->allocated_bytes.current, (long long)atomic_load(&pool->allocated_now),
                     (long long)pool->allocated_added);
  *reserved += t.reserved;
  *added += pool->allocated_added;
  pthread_mutex_unlock(&pool->lock);
  return rc;
}

/* Every arena, and the reserved bytes they share the limit by (no claim is
 * in flight while nothing allocates). */
int cp_pool_check(cp_pool_t *main, char *why, size_t n) {
  size_t reserved = 0;
  int64_t added = 0;
  int rc = 0;
  unsigned index = 0;
  cp_for_each_arena(pool, main) {
    if ((rc = check_one(pool, index++, why, n, &reserved, &added)) != 0) break;
  }
  int64_t shared = atomic_load(&main->devpool->allocated_approx);
  if (rc == 0 && added != shared)
    rc = cp_fail_msg(why, n, "arenas added %lld to the allocated sum, which says %lld", (long long)added,
                     (long long)shared);
  if (rc == 0 && (reserved != cp_budget_held(main) || reserved != cp_budget_reserved(main)))
    rc = cp_fail_msg(why, n, "arenas reserve %zu, the shared counts say %zu held, %zu claimed", reserved,
                     cp_budget_held(main), cp_budget_reserved(main));
  return rc;
}
