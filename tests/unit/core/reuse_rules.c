/* reuse_rules.c: the reuse rules of core/rules.h, each as a table of its
 * inputs and the answer GPU-FACTS.md and DESIGN's "Stream kinds" require:
 * same-thread keys only while no stream lives and the per-thread stream was
 * never used; a barrier's cost by the non-blocking streams it must reach;
 * ordering work under captures only when every capture is covered and none
 * joined; a legacy-stream sync covering the device only without non-blocking
 * streams or orphans. The shim and `cudapool replay` both call these, so
 * these tables pin what both do. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "rules.h"

Test(reuse_rules, same_thread_keys_only_without_streams_or_per_thread_use) {
  cr_assert(cp_rule_same_thread_keys(0, false));
  cr_assert_not(cp_rule_same_thread_keys(1, false));
  cr_assert_not(cp_rule_same_thread_keys(33, false));
  cr_assert_not(cp_rule_same_thread_keys(0, true));
  cr_assert_not(cp_rule_same_thread_keys(2, true));
}

Test(reuse_rules, barrier_cost_grows_with_log2_of_nonblocking_streams) {
  static const struct {
    unsigned nonblocking, cost;
  } cases[] = {{0, 1}, {1, 2}, {2, 2}, {3, 3}, {6, 3}, {7, 4}, {16, 5}, {32, 6}, {33, 6}, {63, 7}, {4294967294u, 32}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_expect(eq(u32, cp_rule_barrier_cost(cases[i].nonblocking), cases[i].cost), "nonblocking %u",
              cases[i].nonblocking);
}

Test(reuse_rules, ordering_under_captures_needs_every_capture_covered_and_none_joined) {
  cr_assert(cp_rule_ordering_allowed(0, 0, false));
  cr_assert(cp_rule_ordering_allowed(0, 0, true), "no capture: a stale join flag changes nothing");
  cr_assert(cp_rule_ordering_allowed(2, 2, false));
  cr_assert_not(cp_rule_ordering_allowed(2, 1, false));
  cr_assert_not(cp_rule_ordering_allowed(1, 0, false));
  cr_assert_not(cp_rule_ordering_allowed(2, 2, true));
}

Test(reuse_rules, legacy_sync_covers_the_device_only_without_nonblocking_streams_or_orphans) {
  cr_assert(cp_rule_legacy_sync_covers_device(0, 0));
  cr_assert_not(cp_rule_legacy_sync_covers_device(1, 0));
  cr_assert_not(cp_rule_legacy_sync_covers_device(0, 1));
  cr_assert_not(cp_rule_legacy_sync_covers_device(4, 2));
}
