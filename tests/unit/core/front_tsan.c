/* front_tsan.c: the churn of core_churn.h through the threads' front caches
 * (stats read and caches emptied meanwhile) as a plain program, for
 * ThreadSanitizer (Criterion cannot start under it: Snaipe/Criterion#274).
 * Prints "core_front_tsan: 1 passed, 0 failed" or what broke; exit 1 on
 * failure. A data race makes TSan itself fail the run. */
#include <stdio.h>
#include <stdlib.h>

#define CHURN_CHECK(cond, ...)                          \
  do {                                                  \
    if (!(cond)) {                                      \
      fprintf(stderr, "core_front_tsan: " __VA_ARGS__); \
      fprintf(stderr, "\n");                            \
      printf("core_front_tsan: 0 passed, 1 failed\n");  \
      exit(1);                                          \
    }                                                   \
  } while (0)
#include "core_churn.h"

int main(void) {
  cp_pool_t *pool = churn_run(true);
  cudapool_stats_t s;
  cp_get_stats(pool, &s);
  char why[256] = "";
  CHURN_CHECK(cp_pool_check(pool, why, sizeof why) == 0, "%s", why);
  CHURN_CHECK(s.allocated_bytes.current == 0, "%lld bytes still allocated",
              (long long)s.allocated_bytes.current);
  CHURN_CHECK(s.num_alloc == s.num_free, "%llu allocs, %llu frees", (unsigned long long)s.num_alloc,
              (unsigned long long)s.num_free);
  churn_close();
  printf("core_front_tsan: 1 passed, 0 failed\n");
  return 0;
}
