/* threads_tsan.c: the churn of core_churn.h as a plain program, for
 * ThreadSanitizer (Criterion cannot start under it: Snaipe/Criterion#274),
 * on the pool alone, through the threads' thread caches (core/tcache.c:
 * stats read and caches emptied meanwhile), and unkeyed (barriers shared),
 * alone and through the caches (frees deferred to the pool without its lock),
 * and with the threads spread over arenas (core/arena.c), keyed and not;
 * and the limit read without the lock (cp_over_limit, as tcache.c's slow
 * path asks it) while cp_set_limit changes it (issue 31).
 * Prints "core_threads_tsan: 7 passed, 0 failed" or what broke; exit 1 on
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

static _Atomic bool setting_done;

static void *set_limits(void *arg) {
  cp_pool_t *pool = arg;
  for (int i = 0; i < 2000; i++) cp_set_limit(pool, i % 2 ? (size_t)64 << 20 : 0);
  atomic_store(&setting_done, true);
  return NULL;
}

/* cp_over_limit is asked without the pool lock (tcache.c, after a refusal)
 * while another thread's cp_set_limit writes the limit under it: the read
 * must be atomic, or TSan reports the race. */
static void limit_read_without_the_lock(void) {
  cp_sim_t sim;
  cp_sim_init(&sim, (size_t)256 << 20);
  cp_backend_t be = cp_sim_backend(&sim);
  cp_config_t cfg;
  cp_config_default(&cfg);
  cp_pool_t *pool;
  CHURN_CHECK(cp_pool_create(&pool, 0, &cfg, &be) == 0, "cp_pool_create failed");
  pthread_t t;
  atomic_store(&setting_done, false);
  pthread_create(&t, NULL, set_limits, pool);
  unsigned over = 0;
  while (!atomic_load(&setting_done)) over += cp_over_limit(pool, (size_t)128 << 20);
  pthread_join(t, NULL);
  CHURN_CHECK(cp_over_limit(pool, (size_t)128 << 20), "128 MiB is over the last limit set, 64 MiB");
  (void)over;
  cp_pool_destroy(pool);
  cp_sim_fini(&sim);
}

int main(void) {
  churn_once(false, false);
  churn_once(true, false);
  churn_once(false, true); /* every reuse after a barrier, many shared */
  churn_once(true, true);  /* the same, frees handed to the pool without its lock */
  churn_arenas(false);     /* threads in several arenas, freeing each other's blocks */
  churn_arenas(true);      /* the same without keys: barriers shared between arenas */
  limit_read_without_the_lock();
  printf("core_threads_tsan: 7 passed, 0 failed\n");
  return 0;
}
