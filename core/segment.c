/* segment.c: segments, the backend allocations the pool carves blocks from.
 *
 * Owns growing (with the limit and the fallback to a request-sized segment),
 * releasing whole free segments oldest first, and finding the segment that
 * holds an address. Segments live in a tree by base address and a list in
 * creation order. With expandable segments on, the large pool grows by
 * reserving a virtual range instead (expandable_size, or the request's own
 * size when larger), whose pages pages.c maps; such a segment is given back
 * once it is wholly free and none of its pages is mapped. Called with the
 * pool lock held. */
#include <errno.h>
#include <stdlib.h>

#include "pool_internal.h"
#include "util.h"

static int cmp_base(const cp_segment_t *a, const cp_segment_t *b) {
  return a->base < b->base ? -1 : a->base > b->base;
}

CP_RB_GENERATE_STATIC(cp_segment_tree, cp_segment, addr_link, cmp_base)

void cp_segments_init(cp_pool_t *pool) { RB_INIT(&pool->segments); }

cp_segment_t *cp_segment_containing(cp_pool_t *pool, uintptr_t addr) {
  cp_segment_t key = {.base = addr};
  cp_segment_t *s = RB_NFIND(cp_segment_tree, &pool->segments, &key);
  if (s && s->base == addr) return s;
  s = s ? RB_PREV(cp_segment_tree, &pool->segments, s) : RB_MAX(cp_segment_tree, &pool->segments);
  return s && addr - s->base < s->size ? s : NULL;
}

/* The segment size for a request of rsize bytes under the limit, claimed
 * (arena.c): the standard size, else the request's own size when only that
 * fits, else 0. */
static size_t claim_under_limit(cp_pool_t *pool, size_t rsize) {
  size_t seg = cp_driver_alloc_size(&pool->cfg, rsize);
  if (seg && cp_budget_claim(pool, seg)) return seg;
  return rsize < seg && cp_budget_claim(pool, rsize) ? rsize : 0;
}

/* A virtual range for the large pool: nothing mapped, nothing reserved yet.
 * The range first, then its bitmap of mapped pages: the bitmap's size
 * follows the request's, and a request no device can hold (2^63 bytes: a
 * 512 GiB bitmap) must cost the host nothing. */
static int reserve_range(cp_pool_t *pool, size_t rsize, size_t *size, uintptr_t *base, uint64_t **mapped) {
  size_t page = pool->page, own = rsize > SIZE_MAX - page ? 0 : (rsize + page - 1) & ~(page - 1);
  if (own == 0) return ENOMEM;
  *size = own > pool->cfg.expandable_size ? own : pool->cfg.expandable_size;
  int rc = pool->be.reserve(pool->be.ctx, pool->device, *size, base);
  if (rc != 0) return rc;
  *mapped = calloc((*size / page + 63) / 64, sizeof **mapped);
  if (*mapped) return 0;
  pool->be.unreserve(pool->be.ctx, pool->device, *base, *size);
  return ENOMEM;
}

void cp_segment_unreserve(cp_pool_t *pool, cp_segment_t *seg) {
  for (size_t i = 0, n = seg->size / pool->page; i < n && seg->mapped_bytes; i++)
    if ((seg->mapped[i / 64] >> (i % 64)) & 1u) {
      pool->be.unmap(pool->be.ctx, pool->device, seg->base + i * pool->page, pool->page);
      seg->mapped_bytes -= pool->page;
    }
  pool->be.unreserve(pool->be.ctx, pool->device, seg->base, seg->size);
}

int cp_segment_grow(cp_pool_t *pool, bool small, size_t rsize, cp_block_t **out) {
  bool expandable = !small && pool->page;
  size_t size = expandable ? 0 : claim_under_limit(pool, rsize);
  uint64_t *mapped = NULL;
  uintptr_t base;
  int rc;
  if (expandable) {
    rc = reserve_range(pool, rsize, &size, &base, &mapped);
  } else {
    if (size == 0) return ENOMEM;
    rc = pool->be.alloc(pool->be.ctx, pool->device, size, &base);
    if (rc != 0 && size > rsize) {
      /* The standard segment may not fit where the request itself does. */
      cp_budget_return(pool, size - rsize);
      size = rsize;
      rc = pool->be.alloc(pool->be.ctx, pool->device, size, &base);
    }
    if (rc != 0) cp_budget_return(pool, size);
  }
  if (rc != 0) return rc;
  cp_segment_t *seg = calloc(1, sizeof *seg);
  cp_block_t *b = seg ? cp_block_new(pool) : NULL;
  if (!b) {
    free(seg);
    if (expandable) {
      pool->be.unreserve(pool->be.ctx, pool->device, base, size);
      free(mapped);
    } else {
      pool->be.free(pool->be.ctx, pool->device, base, size);
      cp_budget_return(pool, size);
    }
    return ENOMEM;
  }
  *seg = (cp_segment_t){
      .base = base, .size = size, .small = small, .expandable = expandable, .mapped = mapped, .first = b};
  CP_LIST_INSERT_AFTER(pool->oldest, pool->newest, pool->newest, seg, older, newer);
  RB_INSERT(cp_segment_tree, &pool->segments, seg);
  cp_owned_add(base, size, pool);
  *b = (cp_block_t){.addr = base, .size = size, .segment = seg, .state = CP_BLOCK_READY};
  pool->block_count++;
  pool->free_block_count++;
  cp_stat_add(&pool->stats.segments, 1);
  if (!expandable) {
    cp_stat_add(&pool->stats.reserved_bytes, (int64_t)size);
    cp_budget_commit(pool, size);
    pool->stats.num_device_alloc++;
  }
  *out = b;
  return 0;
}

void cp_segment_release(cp_pool_t *pool, cp_segment_t *seg) {
  cp_block_t *b = seg->first;
  cp_bins_remove(&cp_subpool_of(pool, seg->small)->ready, b);
  cp_block_recycle(pool, b);
  pool->block_count--;
  pool->free_block_count--;
  RB_REMOVE(cp_segment_tree, &pool->segments, seg);
  CP_LIST_UNLINK(pool->oldest, pool->newest, seg, older, newer);
  cp_owned_remove(seg->base, seg->size);
  if (seg->expandable) {
    cp_segment_unreserve(pool, seg); /* its pages are unmapped already */
  } else {
    pool->be.free(pool->be.ctx, pool->device, seg->base, seg->size);
    cp_stat_add(&pool->stats.reserved_bytes, -(int64_t)seg->size);
    cp_budget_release(pool, seg->size);
    pool->stats.num_device_free++;
  }
  cp_stat_add(&pool->stats.segments, -1);
  free(seg->mapped);
  free(seg);
}

/* The first PENDING block of a segment that holds no ACTIVE block; NULL
 * when it has none, or when any block of it is live (wherever that block
 * lies: a pending block before it may still be written by the device). */
static cp_block_t *idle_pending(const cp_segment_t *seg) {
  cp_block_t *pending = NULL;
  for (cp_block_t *b = seg->first; b; b = b->next) {
    if (b->state == CP_BLOCK_ACTIVE) return NULL;
    if (b->state == CP_BLOCK_PENDING && !pending) pending = b;
  }
  return pending;
}

/* The last resort when pending blocks cannot be made ready (no barrier or
 * fence may be issued, as during some stream captures): a segment with no
 * ACTIVE block goes back whole, its PENDING blocks with it. The backend's
 * free waits for the device, so nothing it may still touch is reclaimed
 * early, and no block of it is ever handed out again. Not an expandable
 * segment: its pages go back only once the device is done with them
 * (pages.c), so it would stay, its blocks READY too early. */
size_t cp_release_idle_segments(cp_pool_t *pool) {
  for (cp_segment_t *seg = pool->oldest; seg; seg = seg->newer) {
    if (seg->expandable) continue;
    cp_block_t *b;
    /* One at a time: making a block ready may merge its neighbours away. */
    while ((b = idle_pending(seg))) {
      cp_pending_remove(pool, b);
      cp_make_ready(pool, b);
    }
  }
  return cp_release_free_segments(pool, 0);
}

size_t cp_release_free_segments(cp_pool_t *pool, size_t target_cached) {
  size_t released = 0;
  cp_segment_t *seg = pool->oldest;
  while (seg) {
    cp_segment_t *newer = seg->newer;
    size_t cached = (size_t)(pool->stats.reserved_bytes.current - pool->stats.allocated_bytes.current);
    if (cached <= target_cached) break;
    if (cp_segment_is_free(seg) && seg->expandable) {
      size_t before = seg->mapped_bytes;
      bool unmapped = cp_pages_release_segment(pool, seg);
      released += before - seg->mapped_bytes;
      if (unmapped) cp_segment_release(pool, seg);
    } else if (cp_segment_is_free(seg)) {
      released += seg->size;
      cp_segment_release(pool, seg);
    }
    seg = newer;
  }
  cp_stats_refresh_derived(pool);
  /* Free pages between live blocks of expandable segments go back too. */
  size_t cached = (size_t)pool->stats.cached_bytes.current;
  if (pool->page && cached > target_cached) released += cp_pages_release(pool, cached - target_cached, NULL);
  return released;
}
