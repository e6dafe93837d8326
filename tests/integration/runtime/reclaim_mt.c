/* reclaim_mt.c: the reclaimer (shim/state/reclaim.c, core/reclaim.c) makes
 * freed memory reusable and releasable without the program's help; issue
 * 26, item 1. Threaded (the reclaimer is a thread): runs under TSan too.
 *
 * Decisions pinned here, documented in docs/OPTIONS.md and docs/DESIGN.md:
 *   - 10 x 1 GiB freed under CUDAPOOL_MAX_CACHED=1G: the device gets all but
 *     1 GiB back while the program makes no further CUDA or pool call (today
 *     it got nothing back until a synchronisation);
 *   - a program that frees nothing never has the reclaimer pass over its
 *     pool, and one whose frees are all ready has it pass no more;
 *   - CUDAPOOL_RELEASE_IDLE=1: a free segment goes back, one in use stays;
 *   - CUDAPOOL_RECLAIM_INTERVAL=0: no reclaimer (nothing comes back);
 *   - a fork()ed child and the exit, with frees pending, end cleanly.
 * Program: tests/programs/runtime/reclaim.c. */
#include "it_check.h"

#define ENV(...) IT_ARGS("CUDAPOOL_RECLAIM_INTERVAL=10", __VA_ARGS__)

static void both(it_result *native, it_result *shim, const char *const *env, const char *mode) {
  it_same(native, shim, env, "reclaim", IT_ARGS(mode));
}

Test(reclaim, max_cached_holds_without_the_programs_help) {
  it_result n = {0}, s = {0};
  both(&n, &s, ENV("CUDAPOOL_MAX_CACHED=1G"), "cap");
  cr_assert(eq(long, it_val(&s, "cap", "reached", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "reserved_at_most_1g", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "pending", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(reclaim, the_default_interval_serves_too) {
  it_result s = {0};
  /* Empty: the default (it_run would otherwise turn the reclaimer off). */
  it_run_ok(&s, IT_SHIM, IT_ARGS("CUDAPOOL_RECLAIM_INTERVAL=", "CUDAPOOL_MAX_CACHED=1G"), "reclaim", IT_ARGS("cap"));
  cr_assert(eq(long, it_val(&s, "cap", "reached", -1), 1), "%s", s.out);
  it_free(&s);
}

Test(reclaim, no_pass_while_nothing_is_freed_nor_once_all_is_ready) {
  it_result n = {0}, s = {0};
  both(&n, &s, ENV("CUDAPOOL_MAX_CACHED=1G"), "quiet");
  cr_assert(eq(long, it_val(&s, "pool", "reclaims_while_nothing_freed", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "ready", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "more_reclaims_while_idle", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(reclaim, an_idle_segment_goes_back_a_used_one_stays) {
  it_result n = {0}, s = {0};
  both(&n, &s, ENV("CUDAPOOL_RELEASE_IDLE=1"), "idle");
  cr_assert(eq(long, it_val(&s, "idle", "released", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "idle_releases", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "segments", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "kept", "live", -1), 1), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(reclaim, interval_zero_is_off) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, IT_ARGS("CUDAPOOL_RECLAIM_INTERVAL=0", "CUDAPOOL_MAX_CACHED=1G"), "reclaim",
            IT_ARGS("quiet", "1"));
  /* Nothing made the frees ready: the program waited its second in vain. */
  cr_assert(eq(long, it_val(&s, "pool", "ready", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "reclaims_while_nothing_freed", -1), 0), "%s", s.out);
  it_free(&s);
}

Test(reclaim, a_forked_child_and_the_parent_end_cleanly) {
  it_result n = {0}, s = {0};
  both(&n, &s, ENV("CUDAPOOL_MAX_CACHED=1M"), "fork");
  cr_assert(eq(long, it_val(&s, "child", "status", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "parent", "reached", -1), 1), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(reclaim, exit_with_frees_pending_is_clean) {
  for (int i = 0; i < 5; i++) {
    it_result s = {0};
    it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_MAX_CACHED=1M", "CUDAPOOL_STATS=1"), "reclaim", IT_ARGS("exit"));
    cr_assert(eq(long, it_val(&s, "exiting", "ok", -1), 1), "%s", s.out);
    it_free(&s);
  }
}
