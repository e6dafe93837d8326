/* walk.c: cp_walk, the snapshot's view of a pool: every segment once, in
 * address order, each tiled exactly by its blocks in address order, with
 * each block's state, size and request as the pool holds them. */
#include "core_fixture.h"

#define WALK_MAX 64

typedef struct seen {
  cp_walk_segment_t seg[WALK_MAX];
  cp_walk_block_t blk[WALK_MAX];
  size_t blk_seg[WALK_MAX]; /* the segment each block came after */
  size_t nseg, nblk;
} seen_t;

static void on_segment(void *ctx, const cp_walk_segment_t *s) {
  seen_t *w = ctx;
  cr_assert(lt(sz, w->nseg, (size_t)WALK_MAX));
  w->seg[w->nseg++] = *s;
}

static void on_block(void *ctx, const cp_walk_block_t *b) {
  seen_t *w = ctx;
  cr_assert(lt(sz, w->nblk, (size_t)WALK_MAX));
  cr_assert(gt(sz, w->nseg, 0), "a block before any segment");
  w->blk_seg[w->nblk] = w->nseg - 1;
  w->blk[w->nblk++] = *b;
}

static void walk(seen_t *w) {
  *w = (seen_t){0};
  cp_walker_t walker = {on_segment, on_block, w};
  cr_assert(eq(int, cp_walk(F.pool, &walker), 0));
}

/* Every byte of every segment is covered by exactly one block of it: the
 * blocks after a segment start at its base, follow one another without a
 * gap and end at its end. Segments ascend and do not overlap. */
static void assert_tiles_exactly(const seen_t *w) {
  size_t b = 0;
  for (size_t s = 0; s < w->nseg; s++) {
    if (s > 0) cr_assert(ge(u64, w->seg[s].addr, w->seg[s - 1].addr + w->seg[s - 1].size), "segment %zu overlaps", s);
    uintptr_t at = w->seg[s].addr;
    for (; b < w->nblk && w->blk_seg[b] == s; b++) {
      cr_assert(eq(u64, w->blk[b].addr, at), "segment %zu block %zu: a gap or an overlap", s, b);
      cr_assert(gt(sz, w->blk[b].size, 0));
      at += w->blk[b].size;
    }
    cr_assert(eq(u64, at, w->seg[s].addr + w->seg[s].size), "segment %zu: its blocks end elsewhere", s);
  }
  cr_assert(eq(sz, b, w->nblk));
}

Test(walk, covers_every_segment_byte_once_with_exact_states) {
  fx_open(1 * GiB);
  /* Small pool: one 2 MiB segment for a, b, c. Large: 12 MiB, over the
   * 10 MiB threshold, gets a segment of its own size. */
  uintptr_t a = fx_alloc(1000), b = fx_alloc(4096), c = fx_alloc(512), big = fx_alloc(12 * MiB);
  fx_free(b, 0);      /* pending: nothing has ordered its device work */
  fx_free_idle(c);    /* ready at once; coalesces with the free rest */
  seen_t w;
  walk(&w);
  assert_tiles_exactly(&w);
  cr_assert(eq(sz, w.nseg, 2));
  cr_assert(eq(u64, w.seg[0].addr, a));
  cr_assert(eq(sz, w.seg[0].size, 2 * MiB));
  cr_assert(eq(u64, w.seg[1].addr, big));
  cr_assert(eq(sz, w.seg[1].size, 12 * MiB));
  cr_assert(not(w.seg[1].expandable));
  /* a (1024 rounded, 1000 asked), b pending (4096), c+rest free. */
  cr_assert(eq(sz, w.nblk, 4));
  cr_assert(eq(int, w.blk[0].state, CP_WALK_ALLOCATED));
  cr_assert(eq(sz, w.blk[0].size, 1024));
  cr_assert(eq(sz, w.blk[0].requested, 1000));
  cr_assert(eq(int, w.blk[1].state, CP_WALK_PENDING));
  cr_assert(eq(u64, w.blk[1].addr, b));
  cr_assert(eq(sz, w.blk[1].size, 4096));
  cr_assert(eq(sz, w.blk[1].requested, 0));
  cr_assert(eq(int, w.blk[2].state, CP_WALK_FREE));
  cr_assert(eq(sz, w.blk[2].size, 2 * MiB - 1024 - 4096));
  cr_assert(eq(int, w.blk[3].state, CP_WALK_ALLOCATED));
  cr_assert(eq(sz, w.blk[3].requested, 12 * MiB));
  fx_free_idle(a);
  fx_free_idle(big);
  fx_sync_now();
  fx_close();
}

Test(walk, an_empty_pool_has_nothing_to_walk) {
  fx_open(1 * GiB);
  seen_t w;
  walk(&w);
  cr_assert(eq(sz, w.nseg, 0));
  cr_assert(eq(sz, w.nblk, 0));
  fx_close();
}

/* Many blocks of mixed sizes, some freed: still an exact tiling, and the
 * segment bytes add up to the reserved bytes of the stats. */
Test(walk, many_blocks_tile_the_reserved_bytes) {
  fx_open(4 * GiB);
  uintptr_t p[40];
  for (size_t i = 0; i < 40; i++) p[i] = fx_alloc((i % 7 + 1) * 300 * KiB);
  for (size_t i = 0; i < 40; i += 3) fx_free(p[i], 0);
  seen_t w;
  walk(&w);
  assert_tiles_exactly(&w);
  size_t total = 0;
  for (size_t s = 0; s < w.nseg; s++) total += w.seg[s].size;
  cr_assert(eq(i64, (int64_t)total, fx_stats().reserved_bytes.current));
  for (size_t i = 0; i < 40; i++)
    if (i % 3) fx_free_idle(p[i]);
  fx_sync_now();
  fx_close();
}
