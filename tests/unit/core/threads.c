/* threads.c: the eight-thread churn of core_churn.h as a Criterion
 * test, keyed and unkeyed; threads_tsan.c runs the same under
 * ThreadSanitizer. */
#include "pool_internal.h" /* core_churn.h's; first: it sets uthash's hash function */
#include "core_fixture.h"

#define CHURN_CHECK(cond, ...)          \
  do {                                  \
    if (!(cond)) cr_fatal(__VA_ARGS__); \
  } while (0)
#include "core_churn.h"

Test(threads, eight_threads_never_share_a_granule, .timeout = 300) {
  cudapool_stats_t s = churn_checked_stats(churn_run(false, false));
  cr_assert(gt(u64, s.num_alloc, CHURN_THREADS * CHURN_OPS / 4));
  churn_close();
}

Test(threads, eight_unkeyed_threads_sharing_barriers_never_share_a_granule, .timeout = 300) {
  cudapool_stats_t s = churn_checked_stats(churn_run(false, true));
  cr_assert(eq(u64, s.num_immediate_reuse, 0));
  cr_assert(gt(u64, s.num_barriers, 0));
  churn_close();
}

Test(threads, eight_threads_in_arenas_never_share_a_granule, .timeout = 300) {
  cp_pool_t *pool = churn_run_with(true, false, true);
  cudapool_stats_t s = churn_checked_stats(pool);
  cr_assert(gt(u32, cp_arena_count(pool), 1));
  cr_assert(gt(u64, s.num_alloc, CHURN_THREADS * CHURN_OPS / 4));
  churn_close();
}

Test(threads, eight_unkeyed_threads_in_arenas_sharing_barriers_never_share_a_granule, .timeout = 300) {
  cp_pool_t *pool = churn_run_with(true, true, true);
  cudapool_stats_t s = churn_checked_stats(pool);
  cr_assert(gt(u32, cp_arena_count(pool), 1));
  cr_assert(eq(u64, s.num_immediate_reuse, 0));
  cr_assert(gt(u64, s.num_barriers, 0));
  churn_close();
}
