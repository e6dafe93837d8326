/* releasable.c: cp_releasable_bytes (core/stats.c), the RELEASABLE column
 * of `cudapool stats --all`: the bytes of segments that hold no block in
 * use, pending blocks included (a give-back round's barrier makes them
 * ready), and nothing of a segment that holds one live block. */
#include "core_fixture.h"

#define BLOCK (4 * MiB) /* large pool: five to a 20 MiB segment */
#define SEGMENT (20 * MiB)

Test(releasable, counts_segments_without_a_live_block_pending_ones_included) {
  fx_open(2 * SEGMENT);
  uintptr_t b[10];
  for (int i = 0; i < 10; i++) b[i] = fx_alloc(BLOCK);
  cr_assert(eq(i64, fx_stats().segments.current, 2));
  cr_assert(eq(sz, cp_releasable_bytes(F.pool), 0));
  /* Which segment each block is in: the first five share one. */
  for (int i = 0; i < 5; i++) fx_free(b[i], 0);
  cr_assert(eq(i64, fx_stats().pending_bytes.current, (int64_t)SEGMENT), "freed, not yet ready");
  cr_assert(eq(sz, cp_releasable_bytes(F.pool), SEGMENT));
  for (int i = 5; i < 9; i++) fx_free(b[i], 0);
  cr_assert(eq(sz, cp_releasable_bytes(F.pool), SEGMENT), "one live block keeps its segment");
  fx_free(b[9], 0);
  cr_assert(eq(sz, cp_releasable_bytes(F.pool), 2 * SEGMENT));
  cr_assert(eq(sz, cp_empty_cache(F.pool), 2 * SEGMENT), "what a round gives back");
  cr_assert(eq(sz, cp_releasable_bytes(F.pool), 0));
  fx_close();
}
