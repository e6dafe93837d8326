/* threads.c: the eight-thread churn of core_churn.h as a Criterion
 * test, keyed and unkeyed; threads_tsan.c runs the same under
 * ThreadSanitizer. */
#include "core_fixture.h"

#define CHURN_CHECK(cond, ...)          \
  do {                                  \
    if (!(cond)) cr_fatal(__VA_ARGS__); \
  } while (0)
#include "core_churn.h"

Test(threads, eight_threads_never_share_a_granule, .timeout = 300) {
  cp_pool_t *pool = churn_run(false, false);
  cudapool_stats_t s;
  cp_get_stats(pool, &s);
  cr_assert(eq(i64, s.allocated_bytes.current, 0));
  cr_assert(eq(u64, s.num_alloc, s.num_free));
  cr_assert(gt(u64, s.num_alloc, CHURN_THREADS * CHURN_OPS / 4));
  char why[256] = "";
  cr_assert(eq(int, cp_pool_check(pool, why, sizeof why), 0), "%s", why);
  churn_close();
}

Test(threads, eight_unkeyed_threads_sharing_barriers_never_share_a_granule, .timeout = 300) {
  cp_pool_t *pool = churn_run(false, true);
  cudapool_stats_t s;
  cp_get_stats(pool, &s);
  cr_assert(eq(i64, s.allocated_bytes.current, 0));
  cr_assert(eq(u64, s.num_alloc, s.num_free));
  cr_assert(eq(u64, s.num_immediate_reuse, 0));
  cr_assert(gt(u64, s.num_barriers, 0));
  char why[256] = "";
  cr_assert(eq(int, cp_pool_check(pool, why, sizeof why), 0), "%s", why);
  churn_close();
}
