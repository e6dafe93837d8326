/* threads_tsan.c: the churn of core_churn.h as a plain program, for
 * ThreadSanitizer (Criterion cannot start under it: Snaipe/Criterion#274),
 * on the pool alone, through the threads' thread caches (core/tcache.c:
 * stats read and caches emptied meanwhile), and unkeyed (barriers shared),
 * alone and through the caches (frees deferred to the pool without its lock),
 * and with the threads spread over arenas (core/arena.c), keyed and not.
 * Prints "core_threads_tsan: 6 passed, 0 failed" or what broke; exit 1 on
 * failure. A data race makes TSan itself fail the run. */
#include <stdio.h>
#include <stdlib.h>

#define CHURN_CHECK(cond, ...)                            \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "core_threads_tsan: " __VA_ARGS__); \
      fprintf(stderr, "\n");                              \
      printf("core_threads_tsan: 0 passed, 1 failed\n");  \
      exit(1);                                            \
    }                                                     \
  } while (0)
#include "core_churn.h"

static void churn_once(bool tcache, bool unkeyed) {
  churn_checked_stats(churn_run(tcache, unkeyed));
  churn_close();
}

static void churn_arenas(bool unkeyed) {
  cp_pool_t *pool = churn_run_with(true, unkeyed, true);
  churn_checked_stats(pool);
  CHURN_CHECK(cp_arena_count(pool) > 1, "no arena was made");
  churn_close();
}

int main(void) {
  churn_once(false, false);
  churn_once(true, false);
  churn_once(false, true); /* every reuse after a barrier, many shared */
  churn_once(true, true);  /* the same, frees handed to the pool without its lock */
  churn_arenas(false);     /* threads in several arenas, freeing each other's blocks */
  churn_arenas(true);      /* the same without keys: barriers shared between arenas */
  printf("core_threads_tsan: 6 passed, 0 failed\n");
  return 0;
}
