/* idle.c: the last resort of an allocation that finds the device full and
 * can make no pending block ready (no barrier, no fence: the shim during a
 * capture that forbids ordering work): segments holding no live block go
 * back whole, pending blocks and all (core/segment.c,
 * cp_release_idle_segments), while a segment that still holds a live block
 * is never released, and its pending blocks are never handed out. */
#include "core_fixture.h"

#define BLOCK (4 * MiB) /* large pool: five to a 20 MiB segment */
#define SEGMENT (20 * MiB)

/* A 40 MiB device, no barrier, no fence. */
static void open_without_ordering(void) {
  fx_open(2 * SEGMENT);
  F.sim.barrier_enabled = false;
  F.sim.fence_enabled = false;
}

/* Fills the device: two segments of five blocks each, in allocation order. */
static void fill(uintptr_t blocks[10]) {
  for (int i = 0; i < 10; i++) blocks[i] = fx_alloc(BLOCK);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.segments.current, 2));
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)(2 * SEGMENT)));
  cr_assert(eq(sz, F.sim.used, 2 * SEGMENT), "the device is full");
  for (int i = 1; i < 5; i++) cr_assert(eq(u64, blocks[i], blocks[0] + (uintptr_t)i * BLOCK));
  for (int i = 6; i < 10; i++) cr_assert(eq(u64, blocks[i], blocks[5] + (uintptr_t)(i - 5) * BLOCK));
}

static bool in_segment(uintptr_t p, uintptr_t base) { return p >= base && p < base + SEGMENT; }

Test(idle_segments, a_full_device_of_pending_blocks_gives_its_segments_back) {
  open_without_ordering();
  uintptr_t b[10];
  fill(b);
  for (int i = 0; i < 10; i++) fx_free(b[i], 0);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.allocated_bytes.current, 0));
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)(2 * SEGMENT)), "all pending, all kept");
  cr_assert(eq(u64, s.num_device_free, 0));

  uintptr_t p = fx_alloc(BLOCK);
  (void)p;
  s = fx_stats();
  cr_assert(eq(u64, s.num_device_free, 2), "both idle segments went back");
  cr_assert(eq(u64, s.num_device_alloc, 3), "then one new segment");
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)SEGMENT));
  cr_assert(eq(i64, s.segments.current, 1));
  cr_assert(eq(i64, s.allocated_bytes.current, (int64_t)BLOCK));
  cr_assert(eq(u64, s.num_alloc_retries, 1));
  cr_assert(eq(u64, s.num_ooms, 0));
  cr_assert(eq(u64, s.misses, 3), "a miss per new segment");
  cr_assert(eq(u64, s.hits, 8));
  cr_assert(eq(u64, F.sim.barriers, 0));
  cr_assert(eq(sz, F.sim.used, SEGMENT), "the device got the pending memory back");
  fx_close();
}

Test(idle_segments, a_segment_with_a_live_block_stays_and_its_pending_blocks_are_not_handed_out) {
  open_without_ordering();
  uintptr_t b[10];
  fill(b);
  /* Segment A (b[0..4]) keeps b[2] live; segment B (b[5..9]) is all freed. */
  uintptr_t a_base = b[0];
  for (int i = 0; i < 10; i++)
    if (i != 2) fx_free(b[i], 0);

  /* B goes back; A stays, its four pending blocks untouched. */
  uintptr_t got[5];
  got[0] = fx_alloc(BLOCK);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_device_free, 1), "only the idle segment went back");
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)(2 * SEGMENT)), "A and the new segment");
  cr_assert(eq(i64, s.segments.current, 2));
  cr_assert(not(in_segment(got[0], a_base)));

  /* The new segment serves four more; then only A's pending blocks are
   * free, and they may not be used: out of memory, A still whole. */
  for (int i = 1; i < 5; i++) {
    got[i] = fx_alloc(BLOCK);
    cr_assert(not(in_segment(got[i], a_base)), "a pending block of a live segment was handed out");
  }
  uintptr_t q = 0;
  cr_assert(eq(int, cp_alloc(F.pool, BLOCK, CP_STREAM_DEVICE, 0, &q), ENOMEM));
  s = fx_stats();
  cr_assert(eq(u64, s.num_ooms, 1));
  cr_assert(eq(u64, s.num_device_free, 1), "A holds a live block: never released");
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)(2 * SEGMENT)));
  cr_assert(eq(u64, cp_block_size(F.pool, b[2]), BLOCK), "the live block is still live");
  fx_check();

  /* Once its last live block is freed, A is idle: it goes back, and the
   * allocation that needed it succeeds in a new segment. */
  fx_free(b[2], 0);
  q = fx_alloc(BLOCK);
  s = fx_stats();
  cr_assert(eq(u64, s.num_device_free, 2));
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)(2 * SEGMENT)));
  cr_assert(eq(i64, s.allocated_bytes.current, (int64_t)(6 * BLOCK)));
  cr_assert(eq(u64, s.num_ooms, 1));
  for (int i = 0; i < 5; i++) fx_free(got[i], 0);
  fx_free(q, 0);
  fx_close();
}

Test(idle_segments, a_small_segment_with_a_live_block_stays_too) {
  /* The small pool: 2 MiB segments of 1 MiB blocks. */
  fx_open(4 * MiB);
  F.sim.barrier_enabled = false;
  F.sim.fence_enabled = false;
  uintptr_t a = fx_alloc(MiB), b = fx_alloc(MiB), c = fx_alloc(MiB), d = fx_alloc(MiB);
  cr_assert(eq(sz, F.sim.used, 4 * MiB));
  fx_free(a, 0);
  fx_free(c, 0);
  fx_free(d, 0);
  /* c and d's segment is idle; a's is not (b lives). */
  uintptr_t e = fx_alloc(MiB);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_device_free, 1));
  cr_assert(ne(u64, e, a), "a's segment holds the live b: a stays pending");
  uintptr_t f = fx_alloc(MiB);
  cr_assert(ne(u64, f, a));
  uintptr_t g = 0;
  cr_assert(eq(int, cp_alloc(F.pool, MiB, CP_STREAM_DEVICE, 0, &g), ENOMEM));
  fx_free(b, 0);
  fx_free(e, 0);
  fx_free(f, 0);
  fx_close();
}
