/* expandable.c: expandable segments on the simulated device (pages.c):
 * which pages are mapped after exact sequences, when they are unmapped (trim,
 * empty_cache, the limit, the out-of-memory path; never while the device may
 * still touch them), the fallback to ordinary segments, and the invariants
 * after random sequences. Blocks of 4 MiB from a fresh range sit at 0, 4, 8
 * MiB from its start: pages (2 MiB) 0-1, 2-3, 4-5. */
#include <stdio.h>
#include <unistd.h>

#include "core_fixture.h"

#define PAGE (2 * MiB)

static void open_expandable(size_t limit, size_t capacity) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.expandable = true;
  cfg.expandable_size = 1 * GiB;
  cfg.limit = limit;
  cp_sim_init(&F.sim, capacity);
  F.sim.vmm_page = PAGE;
  F.be = cp_sim_backend(&F.sim);
  F.cfg = cfg;
  cr_assert(eq(int, cp_pool_create(&F.pool, 0, &F.cfg, &F.be), 0));
}

static void close_expandable(void) {
  cr_assert(eq(u64, F.sim.bad_maps, 0), "the pool mapped or unmapped a page wrongly");
  fx_close();
}

static int64_t reserved(void) { return fx_stats().reserved_bytes.current; }

Test(expandable, falls_back_to_ordinary_segments_without_pages) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.expandable = true;
  fx_open_cfg(&cfg, 1 * GiB); /* the simulated device's vmm_page is 0 */
  cp_config_t got;
  cp_get_config(F.pool, &got);
  cr_assert(not(got.expandable));
  fx_alloc(30 * MiB);
  cr_assert(eq(i64, reserved(), 30 * MiB), "an ordinary segment of the request's size");
  cr_assert(eq(u64, F.sim.reserves, 0));
  fx_close();
}

Test(expandable, maps_the_pages_blocks_touch) {
  open_expandable(CP_NO_LIMIT, 1 * GiB);
  cp_config_t got;
  cp_get_config(F.pool, &got);
  cr_assert(got.expandable);
  uintptr_t a = fx_alloc(3 * MiB);
  cr_assert(eq(u64, a % PAGE, 0), "the range starts on a page");
  cr_assert(eq(i64, reserved(), 4 * MiB), "3 MiB touches two pages");
  uintptr_t b = fx_alloc(5 * MiB);
  cr_assert(eq(u64, b, a + 3 * MiB), "carved right after, in the same range");
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.reserved_bytes.current, 8 * MiB), "pages 0-3: page 1 is shared");
  cr_assert(eq(i64, s.segments.current, 1));
  cr_assert(eq(u64, s.misses, 2));
  cr_assert(eq(u64, s.num_device_alloc, 2), "one map call per run of new pages");
  cr_assert(eq(u64, F.sim.reserves, 1));
  cr_assert(eq(sz, F.sim.mapped, 8 * MiB));
  uintptr_t c = fx_alloc(2 * MiB);
  cr_assert(eq(u64, c, a + 8 * MiB));
  cr_assert(eq(i64, reserved(), 10 * MiB));
  fx_free_idle(b);
  uintptr_t d = fx_alloc(4 * MiB);
  cr_assert(eq(u64, d, b), "the hole is reused, its pages still mapped");
  cr_assert(eq(i64, reserved(), 10 * MiB));
  cr_assert(eq(u64, fx_stats().hits, 1));
  fx_check();
  close_expandable();
}

Test(expandable, block_info_says_expandable_never_segment_start) {
  open_expandable(CP_NO_LIMIT, 1 * GiB);
  uintptr_t a = fx_alloc(4 * MiB);
  cp_block_info_t info;
  cr_assert(eq(int, cp_block_find(F.pool, a + 100, &info), 0));
  cr_assert(eq(u64, info.start, a));
  cr_assert(info.expandable);
  cr_assert(not(info.segment_start), "CUDA IPC cannot export it: no block starts an allocation");
  close_expandable();
}

Test(expandable, trim_unmaps_whole_free_pages_between_live_blocks) {
  open_expandable(CP_NO_LIMIT, 1 * GiB);
  uintptr_t a = fx_alloc(4 * MiB), b = fx_alloc(4 * MiB), c = fx_alloc(4 * MiB);
  cr_assert(eq(i64, reserved(), 12 * MiB));
  fx_free_idle(b);
  cr_assert(eq(sz, cp_trim(F.pool, 0), 4 * MiB));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.reserved_bytes.current, 8 * MiB), "pages 2-3 went back; a and c stay mapped");
  cr_assert(eq(i64, s.cached_bytes.current, 0));
  cr_assert(eq(u64, F.sim.pages_unmapped, 2));
  cr_assert(eq(u64, s.num_device_free, 1));
  fx_check();
  uintptr_t d = fx_alloc(4 * MiB);
  cr_assert(eq(u64, d, b), "the same address, mapped again");
  cr_assert(eq(i64, reserved(), 12 * MiB));
  fx_free_idle(a);
  fx_free_idle(c);
  fx_free_idle(d);
  cr_assert(eq(sz, cp_empty_cache(F.pool), 12 * MiB));
  cr_assert(eq(i64, reserved(), 0));
  cr_assert(eq(u64, F.sim.unreserves, 1), "a range with nothing live or mapped goes back");
  cr_assert(eq(i64, fx_stats().segments.current, 0));
  close_expandable();
}

Test(expandable, a_page_shared_with_a_live_block_stays_mapped) {
  open_expandable(CP_NO_LIMIT, 1 * GiB);
  uintptr_t a = fx_alloc(3 * MiB), b = fx_alloc(3 * MiB), c = fx_alloc(3 * MiB);
  (void)a, (void)c;
  cr_assert(eq(i64, reserved(), 10 * MiB), "pages 0-4");
  fx_free_idle(b); /* [3, 6) MiB: page 1 ([2, 4)) is shared with a, page 2 ([4, 6)) is b's alone */
  cr_assert(eq(sz, cp_trim(F.pool, 0), 2 * MiB));
  cr_assert(eq(i64, reserved(), 8 * MiB));
  fx_check();
  close_expandable();
}

Test(expandable, pages_of_a_block_freed_before_a_barrier_wait_for_completion) {
  open_expandable(CP_NO_LIMIT, 1 * GiB);
  F.sim.fence_enabled = false; /* nothing can say the device finished */
  uintptr_t a = fx_alloc(4 * MiB), b = fx_alloc(4 * MiB), c = fx_alloc(4 * MiB);
  (void)a, (void)c;
  fx_free(b, 0);
  cr_assert(eq(sz, cp_trim(F.pool, 0), 0), "pending: the device may still use it");
  cr_assert(eq(sz, cp_empty_cache(F.pool), 0), "a barrier orders, it does not complete the work");
  cr_assert(eq(u64, F.sim.barriers, 1));
  cr_assert(eq(i64, reserved(), 12 * MiB));
  cr_assert(eq(u64, F.sim.pages_unmapped, 0));
  fx_sync_now(); /* the program synchronised */
  cr_assert(eq(sz, cp_trim(F.pool, 0), 4 * MiB));
  cr_assert(eq(i64, reserved(), 8 * MiB));
  close_expandable();
}

Test(expandable, empty_cache_waits_for_a_fence_before_unmapping) {
  open_expandable(CP_NO_LIMIT, 1 * GiB);
  uintptr_t a = fx_alloc(4 * MiB), b = fx_alloc(4 * MiB), c = fx_alloc(4 * MiB);
  (void)a, (void)c;
  fx_free(b, 0);
  cr_assert(eq(sz, cp_empty_cache(F.pool), 4 * MiB));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_fences_recorded, 1));
  cr_assert(eq(u64, s.num_fences_waited, 1));
  cr_assert(eq(i64, s.reserved_bytes.current, 8 * MiB));
  close_expandable();
}

Test(expandable, the_limit_counts_mapped_pages_and_unmaps_free_ones) {
  open_expandable(16 * MiB, 1 * GiB);
  uintptr_t a = fx_alloc(4 * MiB), b = fx_alloc(4 * MiB), c = fx_alloc(4 * MiB);
  (void)a, (void)c;
  fx_free_idle(b);
  uintptr_t d = fx_alloc(6 * MiB); /* not in b's hole: at the tail, 3 new pages */
  cr_assert(eq(u64, d, a + 12 * MiB));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.reserved_bytes.current, 16 * MiB), "one of b's pages made room under the limit");
  cr_assert(eq(u64, F.sim.pages_unmapped, 1), "no more than the limit needed");
  cr_assert(eq(u64, s.num_ooms, 0));
  uintptr_t e;
  cr_assert(eq(int, cp_alloc(F.pool, 2 * MiB, 0, 0, &e), 0), "in b's hole: 16 MiB allocated");
  cr_assert(eq(u64, e, b));
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 16 * MiB));
  cr_assert(eq(int, cp_alloc(F.pool, 512, 0, 0, &e), ENOMEM), "allocated would cross the limit");
  fx_check();
  close_expandable();
}

Test(expandable, out_of_memory_waits_then_unmaps_free_pages) {
  open_expandable(CP_NO_LIMIT, 14 * MiB);
  uintptr_t a = fx_alloc(4 * MiB), b = fx_alloc(4 * MiB), c = fx_alloc(4 * MiB);
  (void)a, (void)c;
  fx_free(b, 0);
  uintptr_t d = fx_alloc(6 * MiB);
  cr_assert(eq(u64, d, a + 12 * MiB));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_alloc_retries, 1));
  cr_assert(eq(u64, s.num_fences_waited, 1), "the pages of b waited for the device");
  cr_assert(eq(i64, s.reserved_bytes.current, 14 * MiB));
  cr_assert(eq(u64, s.num_ooms, 0));
  fx_check();
  close_expandable();
}

Test(expandable, set_limit_unmaps_down_to_it) {
  open_expandable(CP_NO_LIMIT, 1 * GiB);
  uintptr_t a = fx_alloc(8 * MiB), b = fx_alloc(8 * MiB);
  (void)b;
  fx_free(a, 0);
  cp_set_limit(F.pool, 10 * MiB);
  cr_assert(eq(i64, reserved(), 8 * MiB), "a's pages, once the device finished with them");
  close_expandable();
}

Test(expandable, a_request_larger_than_the_range_gets_its_own) {
  open_expandable(CP_NO_LIMIT, 4 * GiB);
  uintptr_t a = fx_alloc(1536 * MiB);
  (void)a;
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.reserved_bytes.current, 1536 * MiB));
  cr_assert(eq(u64, F.sim.reserves, 1), "one range of the request's own size");
  close_expandable();
}

Test(expandable, small_requests_stay_in_ordinary_segments) {
  open_expandable(CP_NO_LIMIT, 1 * GiB);
  fx_alloc(512 * KiB);
  cr_assert(eq(u64, F.sim.reserves, 0));
  cr_assert(eq(i64, reserved(), 2 * MiB));
  close_expandable();
}

/* Random allocations, frees (pending, keyed, idle), barriers refused or
 * not, syncs, trims and limits: every invariant after each step, and no page
 * unmapped while a block's free is not known complete. */
Test(expandable, invariants_hold_under_random_sequences) {
  open_expandable(300 * MiB, 1 * GiB);
  uint64_t rng = 12345;
  uintptr_t live[64] = {0};
  for (int i = 0; i < 4000; i++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    unsigned slot = rng % 64, what = (rng >> 8) % 100;
    F.sim.barrier_enabled = (rng >> 20) % 4 != 0;
    if (what < 55 && !live[slot]) {
      size_t size =
          (rng >> 24) % 2 ? (size_t)((rng >> 30) % (40 * MiB)) + 1 : (size_t)((rng >> 30) % MiB) + 1;
      uintptr_t p;
      if (cp_alloc(F.pool, size, 0, (rng >> 40) % 3, &p) == 0) live[slot] = p;
    } else if (what < 90 && live[slot]) {
      cr_assert(eq(int, cp_free(F.pool, live[slot], (rng >> 40) % 3, (rng >> 44) % 5 == 0), 0));
      live[slot] = 0;
    } else if (what < 93) {
      fx_sync_now();
    } else if (what < 96) {
      cp_trim(F.pool, (rng >> 30) % (64 * MiB));
    } else if (what < 98) {
      cp_empty_cache(F.pool);
    } else {
      cp_set_limit(F.pool, (rng >> 30) % 2 ? 300 * MiB : 0);
    }
    fx_check();
    cr_assert(eq(u64, F.sim.bad_maps, 0), "step %d", i);
    cr_assert(eq(sz, F.sim.mapped + F.sim.used - F.sim.mapped, (size_t)reserved()), "step %d", i);
  }
  for (int i = 0; i < 64; i++)
    if (live[i]) fx_free(live[i], 0);
  cp_empty_cache(F.pool);
  cr_assert(eq(i64, reserved(), 0));
  close_expandable();
}

/* With neither barriers nor fences (as during some captures), the last
 * resort releases idle ordinary segments, whose free waits for the device;
 * an expandable segment is not released so, and its pending block must stay
 * pending: another key never gets it before a synchronisation. */
Test(expandable, no_barrier_no_fence_never_hands_out_a_pending_block) {
  open_expandable(CP_NO_LIMIT, 4 * MiB);
  F.sim.barrier_enabled = false;
  F.sim.fence_enabled = false;
  uintptr_t a = 0, b = 0;
  cr_assert(eq(int, cp_alloc(F.pool, 4 * MiB, CP_STREAM_DEVICE, 1, &a), 0));
  cr_assert(eq(int, cp_free(F.pool, a, 1, 0), 0));
  for (int i = 0; i < 2; i++) {
    int rc = cp_alloc(F.pool, 4 * MiB, CP_STREAM_DEVICE, 2, &b);
    cr_assert(eq(int, rc, ENOMEM), "try %d: another key got the pending block %#lx", i, (unsigned long)b);
  }
  fx_sync_now();
  cr_assert(eq(int, cp_alloc(F.pool, 4 * MiB, CP_STREAM_DEVICE, 2, &b), 0));
  cr_assert(eq(u64, b, a), "after a synchronisation it is ready");
  cr_assert(eq(int, cp_free(F.pool, b, 2, 0), 0));
  close_expandable();
}

/* ---- a request no device can hold ------------------------------------------------ */

static cp_backend_t sim_be;
static unsigned reserve_calls;
static long vm_growth_at_reserve, vm_before;

/* The process's address space, in pages (/proc/self/statm's first field). */
static long vm_pages(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = -1;
  cr_assert(ne(ptr, f, NULL));
  cr_assert(eq(int, fscanf(f, "%ld", &pages), 1));
  fclose(f);
  return pages;
}

static int watched_reserve(void *ctx, int device, size_t size, uintptr_t *out) {
  reserve_calls++;
  long growth = vm_pages() - vm_before;
  if (growth > vm_growth_at_reserve) vm_growth_at_reserve = growth;
  return sim_be.reserve(ctx, device, size, out);
}

/* The range was sized into a host bitmap before it was reserved: 2^63
 * bytes asked the host for 512 GiB first. The device is asked first now,
 * and refuses. */
Test(expandable, a_request_no_device_holds_asks_the_device_before_the_host) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.expandable = true;
  cfg.expandable_size = 1 * GiB;
  cp_sim_init(&F.sim, 1 * GiB);
  F.sim.vmm_page = PAGE;
  sim_be = F.be = cp_sim_backend(&F.sim);
  F.be.reserve = watched_reserve;
  F.cfg = cfg;
  cr_assert(eq(int, cp_pool_create(&F.pool, 0, &F.cfg, &F.be), 0));
  vm_before = vm_pages();
  uintptr_t p = 0;
  cr_assert(eq(int, cp_alloc(F.pool, (size_t)1 << 63, CP_STREAM_DEVICE, 0, &p), ENOMEM));
  cr_assert(ge(u32, reserve_calls, 1), "the device was asked");
  cr_assert(lt(i64, vm_growth_at_reserve * sysconf(_SC_PAGESIZE), (int64_t)1 << 30),
            "the host gave %ld pages before the device was asked", vm_growth_at_reserve);
  cr_assert(eq(u64, F.sim.reserves, 0));
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 0));
  /* An ordinary request after it still gets its range. */
  p = fx_alloc(4 * MiB);
  cr_assert(eq(u64, F.sim.reserves, 1));
  fx_free_idle(p);
  close_expandable();
}

/* Issue 31, item 5. b is freed while a kernel on non-blocking stream A may
 * still read it; a barrier makes it ready (ordered, not finished), a
 * stream-ordered allocation on S takes it and frees it on S with no work of
 * its own, and a synchronisation of S makes it ready again. S being idle
 * says nothing of A's kernel: its pages stay mapped until the device is
 * known to have finished the work of the first free too. */
Test(expandable, a_stream_sync_after_a_new_life_does_not_forget_earlier_work) {
  open_expandable(CP_NO_LIMIT, 1 * GiB);
  F.sim.fence_enabled = false; /* nothing can say the device finished */
  const uint64_t S = 0x5000, ORDERED = UINT64_MAX; /* the shim's stream-ordered key */
  uintptr_t a = fx_alloc(4 * MiB), b = fx_alloc(4 * MiB), c = fx_alloc(4 * MiB);
  (void)a, (void)c;
  fx_free(b, 0); /* the kernel on A may still read b */
  uintptr_t again = fx_alloc_on(4 * MiB, S, ORDERED);
  cr_assert(eq(u64, again, b), "made ready by a barrier, handed out on S");
  cr_assert(eq(u64, F.sim.barriers, 1));
  cr_assert(eq(int, cp_free_on_stream(F.pool, b, S, ORDERED, 0), 0));
  cp_mark_t mark;
  cp_sync_mark(F.pool, &mark);
  cp_sync_stream(F.pool, &mark, S); /* S had no work: b is ready */
  cr_assert(eq(sz, cp_trim(F.pool, 0), 0), "A's kernel may still read b's pages");
  cr_assert(eq(sz, cp_empty_cache(F.pool), 0));
  cr_assert(eq(u64, F.sim.pages_unmapped, 0));
  cr_assert(eq(i64, reserved(), 12 * MiB));
  fx_check();
  fx_sync_now(); /* the device finished everything */
  cr_assert(eq(sz, cp_trim(F.pool, 0), 4 * MiB));
  cr_assert(eq(i64, reserved(), 8 * MiB));
  close_expandable();
}
