/* capture_corners_mt.c: reuse around captures ("Never early, in the
 * corners", issue 31), natively and under the shim, with device work held
 * in flight (tests/programs/runtime/capture_corners.c): a stream destroyed
 * while a capture runs, a capture that ends while another one runs, and the
 * fork/join capture pattern. Every line must be the native one: no race
 * (races=0) and every capture ending with its graph. Threaded: also built
 * into the ThreadSanitizer test binary. */
#include "it_check.h"

static void same(const char *which, const char *native) {
  it_result n, s;
  it_same(&n, &s, NULL, "capture_corners", IT_ARGS(which));
  cr_assert(eq(str, (char *)it_compared(&n), (char *)native));
  it_free(&n);
  it_free(&s);
}

/* The destroyed stream's queued work goes to the device's orphan events,
 * which the next barrier makes the legacy stream wait on (shim/device.c,
 * order_destroyed_stream; shim/cuda_backend.c, order_orphans). Before, the
 * event record was skipped while any capture ran, and the barrier after it
 * no longer knew the stream: races=1. */
Test(shim_it_mt, stream_destroyed_during_a_relaxed_capture_elsewhere_is_ordered_before_reuse) {
  same("destroy_relaxed",
       "corner_destroy_relaxed: errors=0 begin=0 destroy=0 end=0 graph_null=0 races=0 last=0\n");
}

Test(shim_it_mt, stream_destroyed_during_another_threads_thread_local_capture_is_ordered_before_reuse) {
  same("destroy_threadlocal",
       "corner_destroy_threadlocal: errors=0 begin=0 destroy=0 end=0 graph_null=0 races=0 last=0\n");
}

/* Then a legacy-stream synchronisation with no non-blocking stream live:
 * it does not wait for the destroyed stream's work, which the legacy stream
 * has not been made to wait on yet (shim/device.c,
 * cp_device_nonblocking_live counts the orphan events); it made every
 * earlier free ready: races=1. */
Test(shim_it_mt, legacy_sync_after_a_stream_destroyed_during_a_capture_does_not_ready_its_blocks) {
  same("destroy_then_legacy_sync",
       "corner_destroy_then_legacy_sync: errors=0 begin=0 destroy=0 end=0 graph_null=0 races=0 last=0\n");
}

/* A stream destroyed while it captures: its pre-capture event, which
 * covers its work from before the capture, becomes an orphan event (it
 * was dropped with the capture's record: races=1). */
Test(shim_it_mt, stream_destroyed_during_its_own_capture_is_ordered_before_reuse) {
  same("destroy_own_capture",
       "corner_destroy_own_capture: errors=0 begin=0 destroy=0 end=0 graph_null=0 races=0 last=0\n");
}

/* The capture's stream waits for the barriers it was left out of whatever
 * other captures run (shim/device.c, cp_stream_after_barriers); it skipped
 * the wait during another thread's thread-local capture: races=1. */
Test(shim_it_mt, capture_ending_during_another_capture_waits_for_the_barriers_it_missed) {
  same("end_during_other",
       "corner_end_during_other: errors=0 begin=0 end=0 graph_null=0 other_begin=0 other_end=0 "
       "other_graph_null=0 races=0 last=0\n");
}

/* A stream that joined a relaxed capture through an event wait is never
 * queried, recorded on or waited on by a barrier, nor is the legacy stream
 * touched while a blocking one has joined: ordering waits for the capture
 * to end (shim/cuda_backend.c, captures_allow_ordering). Before, the
 * capture ended with cudaErrorStreamCaptureInvalidated (work=901 end=901). */
Test(shim_it_mt, fork_join_capture_on_nonblocking_streams_survives_the_pool) {
  same("fork_join_nonblocking",
       "corner_fork_join_nonblocking: errors=0 begin=0 work=0 end=0 graph_null=0 races=0 last=0\n");
}

Test(shim_it_mt, fork_join_capture_joining_a_blocking_stream_survives_the_pool) {
  same("fork_join_blocking",
       "corner_fork_join_blocking: errors=0 begin=0 work=0 end=0 graph_null=0 races=0 last=0\n");
}

static void same_without_order(const char *which, const char *native) {
  it_result n, s;
  it_same(&n, &s, IT_ARGS("CUDAPOOL_LEARN_ORDER=0"), "capture_corners", IT_ARGS(which));
  cr_assert(eq(str, (char *)it_compared(&n), (char *)native));
  it_free(&n);
  it_free(&s);
}

/* A stream joined to a relaxed capture (cudaStreamWaitEvent on an event
 * recorded in it) and destroyed while joined: nothing may be recorded on it
 * then, so its work from before the join is covered by the event recorded
 * on it just before its wait (shim/state/device.c, cp_stream_may_join),
 * kept as an orphan event for the next barrier. Before, the destroy dropped
 * it and the barrier (learned order off) no longer knew the stream:
 * races=1. The destroy invalidates the capture, natively too (end=901). */
Test(shim_it_mt, stream_destroyed_while_joined_to_a_capture_is_ordered_before_reuse) {
  const char *native = "corner_destroy_joined: errors=0 begin=0 work=0 destroy=0 end=901 graph_null=1 races=0 "
                       "last=901\n";
  same("destroy_joined", native);
  same_without_order("destroy_joined", native);
}

/* Joined back and destroyed after the capture ended: an event recorded on
 * it at the destroy covers everything (held before the fix too). */
Test(shim_it_mt, stream_destroyed_after_its_joined_capture_ended_is_ordered_before_reuse) {
  const char *native = "corner_destroy_joined_after_end: errors=0 begin=0 work=0 destroy=0 end=0 graph_null=0 "
                       "races=0 last=0\n";
  same("destroy_joined_after_end", native);
  same_without_order("destroy_joined_after_end", native);
}

/* The same join through the driver's cuStreamWaitEvent and its _ptsz twin
 * (shim/entry/driver_stream.c: the wrappers record the stream's event
 * first, as the runtime's wait does). Before, the driver's wait was not
 * seen, the destroy found no event covering J's work from before the join
 * and dropped it: races=1 with the learned order off. */
Test(shim_it_mt, stream_joined_through_the_driver_and_destroyed_is_ordered_before_reuse) {
  static const char *const ways[] = {"destroy_joined_driver", "destroy_joined_driver_ptsz"};
  for (int i = 0; i < 2; i++) {
    char native[200];
    snprintf(native, sizeof native,
             "corner_%s: errors=0 begin=0 work=0 destroy=0 end=901 graph_null=1 races=0 last=901\n", ways[i]);
    same(ways[i], native);
    same_without_order(ways[i], native);
  }
}
