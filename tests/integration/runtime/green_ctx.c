/* green_ctx.c: a green context's stream (cuGreenCtxStreamCreate) against
 * early reuse (issue 31, item a), with device work held in flight by the
 * fake (tests/programs/runtime/green_ctx.c; the fake libcuda of green
 * contexts, tests/fakes/cudart/green/). The shim knows the stream as a
 * non-blocking stream of its device (shim/entry/driver_stream.c), so the
 * learned order (the default) and the barriers (CUDAPOOL_LEARN_ORDER=0)
 * order its work before a reuse elsewhere and a reuse's work on it after
 * the free: races=0, as natively. Unhooked, the stream was unknown: a
 * block written on it came back to the same thread by its reuse key, and a
 * barrier neither waited for its work nor made it wait (races=1 in three
 * of the four runs). */
#include "it_check.h"

static void safe(const char *c, const char *const *env, long immediate, long barriers) {
  it_result n, s;
  it_same(&n, &s, env, "green_ctx", IT_ARGS(c));
  char want[128];
  snprintf(want, sizeof want, "%s: errors=0 races=0", c);
  cr_assert(eq(str, (char *)it_line(&n, c), want), "%s", n.out);
  cr_assert(eq(str, (char *)it_line(&s, c), want), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "reused", -1), 1), "%s: %s", c, s.out);
  cr_assert(eq(long, it_val(&s, "pool", "immediate", -1), immediate), "%s: %s", c, s.out);
  cr_assert(eq(long, it_val(&s, "pool", "barriers", -1), barriers), "%s: %s", c, s.out);
  it_free(&n);
  it_free(&s);
}

/* All work went to one stream before the free: the block comes back at
 * once, and the other stream waits for the green (or legacy) stream's work
 * first (order_waits=1). */
Test(shim_it_green, a_green_stream_is_ordered_by_the_learned_order) {
  safe("green_to_legacy", NULL, 1, 0);
  safe("legacy_to_green", NULL, 1, 0);
}

/* Without the order the reuse waits for a barrier, which records on the
 * green stream and makes the legacy stream wait, and makes the green stream
 * wait on the legacy stream's event. */
Test(shim_it_green, a_green_stream_is_reached_by_the_barriers) {
  safe("green_to_legacy", IT_ARGS("CUDAPOOL_LEARN_ORDER=0"), 0, 1);
  safe("legacy_to_green", IT_ARGS("CUDAPOOL_LEARN_ORDER=0"), 0, 1);
}
