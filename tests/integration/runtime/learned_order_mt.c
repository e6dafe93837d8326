/* learned_order_mt.c: the learned stream order (issue 25) with device work
 * held in flight by the fake (tests/programs/runtime/learned_order.c). A
 * block written on the one stream all work went to comes back to the next
 * allocation at once, also to another thread, and its next write on another
 * stream is ordered after the first (races=0, as natively); without the wait
 * the order owes (the test switch CUDAPOOL_TEST_SKIP_ORDER_WAITS=1) the same
 * runs race, so the cases can fail. With CUDAPOOL_LEARN_ORDER=0 the reuse
 * waits for a barrier as before. Threaded: also built into the
 * ThreadSanitizer test binary. */
#include "it_check.h"

static const char *const owing[] = {
    "legacy_to_nonblocking",      "legacy_other_thread",        "nonblocking_to_legacy",
    "nonblocking_to_blocking",    "nonblocking_to_nonblocking", "mixed_then_recovered",
};
/* Ordered without the owed wait too: a stream made after the free waits
 * for the legacy stream at its creation; a synchronous copy completes on
 * the fake before the free; per-thread work is never a home. */
static const char *const ordered_anyway[] = {
    "legacy_to_stream_made_after",
    "memcpy_sync_to_nonblocking",
    "per_thread_to_nonblocking",
    "per_thread_other_thread",
};

static void same_and_safe(const char *c, long reused, long immediate) {
  it_result n, s;
  it_same(&n, &s, NULL, "learned_order", IT_ARGS(c));
  cr_assert(eq(long, it_val(&s, c, "races", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, c, "errors", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "reused", -1), reused), "%s: %s", c, s.out);
  cr_assert(eq(long, it_val(&s, "pool", "immediate", -1), immediate), "%s: %s", c, s.out);
  it_free(&n);
  it_free(&s);
}

Test(learned_order_mt, a_block_of_the_sole_stream_comes_back_at_once_and_orders_the_next_stream) {
  for (size_t i = 0; i < sizeof owing / sizeof *owing; i++) {
    bool recovered = strcmp(owing[i], "mixed_then_recovered") == 0;
    /* After the recovery the pending block is handed out by the (virtual)
     * barrier, not by its key: it was freed while work went to two streams. */
    same_and_safe(owing[i], 1, recovered ? 0 : 1);
    it_result s;
    it_run_ok(&s, IT_SHIM, NULL, "learned_order", IT_ARGS(owing[i]));
    cr_assert(eq(long, it_val(&s, "pool", "order_waits", -1), 1), "%s: %s", owing[i], s.out);
    cr_assert(eq(long, it_val(&s, "pool", "recoveries", -1), recovered), "%s: %s", owing[i], s.out);
    cr_assert(eq(long, it_val(&s, "pool", "barriers", -1), recovered), "%s: %s", owing[i], s.out);
    it_free(&s);
  }
  for (size_t i = 0; i < sizeof ordered_anyway / sizeof *ordered_anyway; i++) {
    bool per_thread = ordered_anyway[i][0] == 'p';
    same_and_safe(ordered_anyway[i], 1, !per_thread);
  }
}

Test(learned_order_mt, without_the_owed_wait_the_cases_race) {
  for (size_t i = 0; i < sizeof owing / sizeof *owing; i++) {
    it_result s;
    it_run_ok(&s, IT_SHIM, IT_ARGS("CUDAPOOL_TEST_SKIP_ORDER_WAITS=1"), "learned_order", IT_ARGS(owing[i]));
    cr_assert(eq(long, it_val(&s, owing[i], "races", -1), 1), "%s: %s", owing[i], s.out);
    it_free(&s);
  }
}

Test(learned_order_mt, off_it_waits_for_a_barrier) {
  for (size_t i = 0; i < sizeof owing / sizeof *owing; i++) {
    it_result s;
    it_run_ok(&s, IT_SHIM, IT_ARGS("CUDAPOOL_LEARN_ORDER=0"), "learned_order", IT_ARGS(owing[i]));
    cr_assert(eq(long, it_val(&s, owing[i], "races", -1), 0), "%s: %s", owing[i], s.out);
    cr_assert(eq(long, it_val(&s, "pool", "immediate", -1), 0), "%s: %s", owing[i], s.out);
    cr_assert(eq(long, it_val(&s, "pool", "order_waits", -1), 0), "%s: %s", owing[i], s.out);
    it_free(&s);
  }
}
