/* fence_mt.c: the reuse contract. With device work held in flight
 * by the fake, a block freed while a write on one stream may still be
 * running must not be written by its next owner on another stream unless
 * that write is ordered after the first; the fake counts such races. Also
 * checks the fake's own event and race model (races, fence_events lines).
 * Threaded: also built into the ThreadSanitizer test binary. */
#include "it_check.h"
#include "it_info.h"

#define NATIVE_FENCE                                                      \
  "fence_events: held=600 after_stream_sync=0 held2=600 after_release=0 " \
  "after_device_sync=0 legacy_held=600 after_event_sync=0 last=0\n"       \
  "fence_nonblocking_threads: errors=0 races=0 last=0\n"                  \
  "fence_nonblocking_same_thread: errors=0 races=0 last=0\n"              \
  "fence_blocking_threads: errors=0 races=0 last=0\n"                     \
  "fence_legacy_same_thread: errors=0 races=0 last=0\n"                   \
  "fence_legacy_threads: errors=0 races=0 last=0\n"                       \
  "fence_per_thread_streams: errors=0 races=0 last=0\n"                   \
  "fence_nonblocking_to_legacy: errors=0 races=0 last=0\n"                \
  "fence_legacy_to_nonblocking: errors=0 races=0 last=0\n"                \
  "fence_after_device_sync: errors=0 races=0 last=0\n"                    \
  "fence_new_stream_threads: errors=0 races=0 last=0\n"                   \
  "fence_new_stream_same_thread: errors=0 races=0 last=0\n"               \
  "fence_stream_created_after_reuse: errors=0 races=0 last=0\n"

Test(shim_it_mt, fake_race_detector_and_events) {
  it_result n;
  it_run_ok(&n, IT_NATIVE, NULL, "races", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "races: errors=0 unordered=1 event_wait=0 legacy_after_blocking=0 "
               "blocking_after_legacy=0 legacy_after_nonblocking=1 stream_sync=0 disjoint=0\n"));
  it_free(&n);
}

Test(shim_it_mt, fake_race_detector_under_the_shim) {
  it_result n, s;
  it_same(&n, &s, NULL, "races", NULL);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_mt, no_reuse_before_the_fence_native) {
  it_result n;
  it_run_ok(&n, IT_NATIVE, NULL, "fence", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), NATIVE_FENCE));
  it_free(&n);
}

Test(shim_it_mt, no_reuse_before_the_fence_under_the_shim) {
  it_result n, s;
  it_same(&n, &s, NULL, "fence", NULL);
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

/* A block that fills its segment, cycled while a non-blocking stream is
 * live: every reuse needs a barrier. With all work complete, the barrier
 * is stream queries alone (no event record, no wait); with work in flight
 * on any kind of stream, a full one (the legacy stream's record, counted),
 * and the next owner's write races with nothing. */
Test(shim_it_mt, a_barrier_over_idle_streams_records_nothing) {
  it_result n, s;
  /* The learned order off: its virtual barriers would spare the real ones. */
  it_same(&n, &s, IT_ARGS("CUDAPOOL_LEARN_ORDER=0"), "idle_barrier", NULL);
  cr_assert(eq(str, (char *)it_compared(&s),
               "idle_barrier_all_idle: errors=0 last=0\n"
               "idle_barrier_legacy_busy: errors=0 races=0 last=0\n"
               "idle_barrier_nonblocking_busy: errors=0 races=0 last=0\n"
               "idle_barrier_blocking_busy: errors=0 races=0 last=0\n"
               "idle_barrier_per_thread_busy: errors=0 races=0 last=0\n"));
  cr_assert(eq(long, it_info_val(&s, "idle_barrier_all_idle", "barriers", -1), 10), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "idle_barrier_all_idle", "same", -1), 10), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "idle_barrier_all_idle", "records", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "idle_barrier_all_idle", "waits", -1), 0), "%s", s.out);
  static const char *const busy[] = {"idle_barrier_legacy_busy", "idle_barrier_nonblocking_busy",
                                     "idle_barrier_blocking_busy", "idle_barrier_per_thread_busy"};
  for (size_t i = 0; i < sizeof busy / sizeof busy[0]; i++) {
    cr_assert(eq(long, it_info_val(&s, busy[i], "same", -1), 1), "%s: %s", busy[i], s.out);
    cr_assert(gt(long, it_info_val(&s, busy[i], "records", -1), 0), "%s: %s", busy[i], s.out);
  }
  it_free(&n);
  it_free(&s);
}
