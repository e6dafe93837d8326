/* async.c: stream-ordered allocations at the runtime layer
 * (tests/programs/runtime/async.c): served from the pool with native
 * results, reused at once on the stream that freed them and only after a
 * barrier on any other (the fake's race detector counts unordered writes),
 * pools the program made or made current left to CUDA, captures passed
 * through. */
#include "it_check.h"
#include "it_info.h"

Test(shim_it, stream_ordered_pairs_are_served_and_reused_on_their_stream) {
  it_result n, s;
  it_same(&n, &s, NULL, "async", IT_ARGS("basic"));
  static const char *const tags[] = {"basic_legacy", "basic_stream", "basic_ptsz", "basic_per_thread_handle"};
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
    cr_assert(eq(long, it_info_val(&s, tags[i], "real_calls", -1), 0), "%s\n%s", tags[i], s.out);
    cr_assert(eq(long, it_info_val(&s, tags[i], "same", -1), 1), "%s\n%s", tags[i], s.out);
    cr_assert(eq(long, it_info_val(&s, tags[i], "barriers", -1), 0), "%s\n%s", tags[i], s.out);
    cr_assert(eq(long, it_info_val(&n, tags[i], "real_calls", -1), 2), "%s\n%s", tags[i], n.out);
  }
  /* 4 x 2 pairs, the mixed pair and the bad-pointer block; the bogus
   * stream's allocation was the runtime's. */
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 11), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_free", -1), 11), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_device_alloc", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it, stream_ordered_reuse_on_another_stream_waits_for_a_barrier) {
  it_result n, s;
  it_same(&n, &s, NULL, "async", IT_ARGS("race"));
  cr_assert(eq(str, (char *)it_compared(&n),
               "race_same_stream: errors=0 races=0 free=0 sync=0 last=0\n"
               "race_nonblocking: errors=0 races=0 free=0 sync=0 last=0\n"
               "race_blocking_to_nonblocking: errors=0 races=0 free=0 sync=0 last=0\n"
               "race_nonblocking_to_legacy: errors=0 races=0 free=0 sync=0 last=0\n"
               "race_legacy_to_nonblocking: errors=0 races=0 free=0 sync=0 last=0\n"
               "race_per_thread_to_nonblocking: errors=0 races=0 free=0 sync=0 last=0\n"
               "race_end: last=0\n"));
  cr_assert(eq(long, it_info_val(&s, "race_same_stream", "same", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "race_same_stream", "barriers", -1), 0), "%s", s.out);
  static const char *const others[] = {"race_nonblocking", "race_blocking_to_nonblocking",
                                       "race_nonblocking_to_legacy", "race_legacy_to_nonblocking",
                                       "race_per_thread_to_nonblocking"};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    cr_assert(eq(long, it_info_val(&s, others[i], "same", -1), 1), "%s\n%s", others[i], s.out);
    cr_assert(eq(long, it_info_val(&s, others[i], "barriers", -1), 1), "%s\n%s", others[i], s.out);
  }
  it_free(&n);
  it_free(&s);
}

/* The detector sees the race the rule prevents: without it, it counts. */
Test(shim_it, stream_ordered_race_is_seen_without_the_rule) {
  it_result s;
  const char *const env[] = {"CUDAPOOL_MODE=unsafe-immediate", NULL};
  it_run_ok(&s, IT_SHIM, env, "async", IT_ARGS("race"));
  cr_assert(gt(long, it_val(&s, "race_nonblocking", "races", 0), 0), "%s", s.out);
  it_free(&s);
}

Test(shim_it, the_default_pool_is_asked_again_after_a_device_reset) {
  it_result n, s;
  it_same(&n, &s, NULL, "async", IT_ARGS("reset"));
  cr_assert(eq(long, it_info_val(&s, "reset_default_pool", "asks", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "reset_default_pool", "real_calls", -1), 0), "served: %s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it, program_pools_and_a_replaced_current_pool_pass_through) {
  it_result n, s;
  it_same(&n, &s, NULL, "async", IT_ARGS("pools"));
  cr_assert(eq(long, it_info_val(&s, "pools_created", "real_calls", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "pools_created_again", "default_pool_asks", -1), 0),
            "the default pool is asked once, not at every *FromPoolAsync: %s", s.out);
  cr_assert(eq(long, it_info_val(&s, "pools_current", "replaced_calls", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "pools_current", "restored_calls", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "pools_default", "real_calls", -1), 0), "%s", s.out);
  /* 768 KiB of blocks in one 2 MiB segment, none in CUDA's pool. */
  cr_assert(eq(long, it_info_val(&s, "pools_default", "used", -1), 768 * 1024), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "pools_default", "reserved", -1), 2 << 20), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "pools_trim", "reserved", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it, stream_ordered_calls_in_a_capture_reach_cuda) {
  it_result n, s;
  it_same(&n, &s, NULL, "async", IT_ARGS("capture"));
  cr_assert(eq(long, it_info_val(&s, "capture_relaxed", "alloc_calls", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "capture_relaxed", "free_calls", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "capture_global", "alloc_calls", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "capture_global", "free_calls", -1), 1), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

/* CUDAPluggableAllocator dlopens the library by path: served whether or not
 * it is also preloaded, the stream learnt from the first call. */
Test(shim_it, torch_pluggable_entry_points_serve_stream_ordered) {
  char lib[512];
  snprintf(lib, sizeof lib, "%s/libcudapool.so", it_build());
  it_result n, s;
  it_same(&n, &s, NULL, "torch_entry", IT_ARGS(lib));
  cr_assert(eq(long, it_val(&n, "torch_pairs", "byte", -1), 9), "%s", n.out);
  cr_assert(eq(long, it_val(&n, "torch_pairs", "zero_is_null", -1), 1), "%s", n.out);
  it_result *runs[] = {&n, &s};
  for (int i = 0; i < 2; i++) {
    cr_assert(eq(long, it_info_val(runs[i], "torch_pairs", "real_calls", -1), 0), "%s", runs[i]->out);
    cr_assert(eq(long, it_info_val(runs[i], "torch_pairs", "same", -1), 1), "%s", runs[i]->out);
  }
  it_free(&n);
  it_free(&s);
}

/* cudaFreeAsync of a device 0 block on a stream of device 1
 * (tests/programs/runtime/cross_device.c): device 0's barriers do not reach
 * that stream, so the free waits for it (shim/serve.c,
 * stream_of_another_device). Before, a barrier of device 0 made the block
 * ready while device 1's memset still wrote it: races=1. */
Test(shim_it, stream_ordered_free_on_another_devices_stream_waits_for_that_stream) {
  it_result n, s;
  it_same(&n, &s, ((const char *const[]){"FAKECUDA_DEVICES=2", NULL}), "cross_device", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), "cross_device_free_async: count=2 errors=0 races=0 last=0\n"));
  cr_assert(eq(long, it_val(&s, "pool", "num_free", -1), 3), "the pool took the blocks back\n%s", s.out);
  it_free(&n);
  it_free(&s);
}
