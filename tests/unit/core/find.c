/* find.c: the pool's answers about an address, which the shim gives a
 * program that asks CUDA about a pointer (docs/DESIGN.md, "Calls whose
 * meaning changes under sub-allocation"): cp_block_find, the live block
 * holding it (its start, the bytes asked for, whether it starts its
 * segment), else whether it lies in a segment at all (EINVAL) or not
 * (ENOENT). */
#include "core_fixture.h"

Test(find, live_blocks_by_any_address_inside_their_request) {
  fx_open(1 * GiB);
  uintptr_t a = fx_alloc(1000), b = fx_alloc(3000);
  cp_block_info_t info;
  cr_assert(eq(int, cp_block_find(F.pool, a, &info), 0));
  cr_assert(eq(u64, info.start, a));
  cr_assert(eq(sz, info.size, 1000));
  cr_assert(info.segment_start);
  cr_assert(eq(int, cp_block_find(F.pool, b + 2999, &info), 0));
  cr_assert(eq(u64, info.start, b));
  cr_assert(eq(sz, info.size, 3000));
  cr_assert(not(info.segment_start));
  /* Past the request, inside the rounded block: no block of the program's. */
  cr_assert(eq(int, cp_block_find(F.pool, a + 1000, &info), EINVAL));
  fx_free_idle(a);
  fx_free_idle(b);
  fx_close();
}

Test(find, freed_blocks_and_free_space_are_held_but_not_found) {
  fx_open(1 * GiB);
  uintptr_t a = fx_alloc(1000), b = fx_alloc(12 * MiB);
  fx_free(a, 0); /* pending */
  cp_block_info_t info;
  cr_assert(eq(int, cp_block_find(F.pool, a, &info), EINVAL));
  cr_assert(eq(int, cp_block_find(F.pool, a + 2 * MiB - 1, &info), EINVAL), "the small segment's last byte");
  /* The simulated device hands out addresses in order: b's segment follows. */
  cr_assert(eq(u64, b, a + 2 * MiB));
  cr_assert(eq(int, cp_block_find(F.pool, b + 12 * MiB - 1, &info), 0));
  cr_assert(eq(u64, info.start, b));
  cr_assert(info.segment_start);
  cr_assert(eq(int, cp_block_find(F.pool, b + 12 * MiB, &info), ENOENT));
  cr_assert(eq(int, cp_block_find(F.pool, a - 1, &info), ENOENT));
  cr_assert(eq(int, cp_block_find(F.pool, 0, &info), ENOENT));
  fx_free_idle(b);
  cr_assert(eq(int, cp_block_find(F.pool, b, &info), EINVAL), "cached, not released");
  cp_empty_cache(F.pool);
  cr_assert(eq(int, cp_block_find(F.pool, b, &info), ENOENT));
  cr_assert(eq(int, cp_block_find(F.pool, a, &info), ENOENT));
  fx_close();
}
