/* fence_mt.c: the reuse contract. With device work held in flight
 * by the fake, a block freed while a write on one stream may still be
 * running must not be written by its next owner on another stream unless
 * that write is ordered after the first; the fake counts such races. Also
 * checks the fake's own event and race model (races, fence_events lines).
 * Threaded: also built into the ThreadSanitizer test binary. */
#include "it_check.h"

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
