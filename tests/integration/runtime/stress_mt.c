/* stress_mt.c: 8 threads allocating and freeing random sizes, each
 * block filled with a thread-unique pattern and checked before its free;
 * no block may overlap another live one, none may be lost (the pool ends
 * with nothing allocated and as many frees as allocations), and with device
 * work held in flight no reuse may race. Threaded: also built into the
 * ThreadSanitizer test binary. */
#include "it_check.h"

#define STRESS_OK(iters) \
  "stress: threads=8 iterations=" iters " errors=0 overlaps=0 corrupt=0 races=0 last=0\n"

static void no_lost_block(it_result *s) {
  cr_assert(eq(long, it_val(s, "pool", "allocated", -1), 0), "%s", s->out);
  long allocs = it_val(s, "pool", "num_alloc", -1);
  cr_assert(gt(long, allocs, 0), "%s", s->out);
  cr_assert(eq(long, it_val(s, "pool", "num_free", -1), allocs));
}

Test(shim_it_mt, stress_native) {
  it_result n;
  it_run_ok(&n, IT_NATIVE, NULL, "stress", IT_ARGS("8", "400"));
  cr_assert(eq(str, (char *)it_compared(&n), STRESS_OK("400")));
  it_free(&n);
}

Test(shim_it_mt, stress_under_the_shim) {
  it_result n, s;
  it_same(&n, &s, NULL, "stress", IT_ARGS("8", "400"));
  no_lost_block(&s);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_mt, stress_with_work_in_flight_under_the_shim) {
  it_result n, s;
  const char *const env[] = {"FAKECUDA_MEMORY=2G", NULL};
  it_same(&n, &s, env, "stress", IT_ARGS("8", "400", "held"));
  cr_assert(eq(str, (char *)it_compared(&n), STRESS_OK("400")));
  no_lost_block(&s);
  it_free(&n);
  it_free(&s);
}
