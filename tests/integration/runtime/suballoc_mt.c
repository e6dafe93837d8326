/* suballoc_mt.c: a block freed with cudaFreeAsync while a write on its
 * stream may still run, allocated again and written on another stream
 * (tests/programs/runtime/suballoc.c, part "race"; the fake holds device
 * work in flight and counts unordered writes, as fence_mt.c does for
 * cudaFree). Natively the stream reaches the free before the memory can be
 * handed out again; under the pool the block comes back only once a barrier
 * or a synchronisation covers the work queued before the free: never a race.
 * Threaded: also built into the ThreadSanitizer test binary. */
#include "it_check.h"
#include "it_info.h"

#define RACE_OUTPUT                                                \
  "race_nonblocking_same_thread: errors=0 races=0 free=0 last=0\n" \
  "race_nonblocking_threads: errors=0 races=0 free=0 last=0\n"     \
  "race_ptsz_nonblocking: errors=0 races=0 free=0 last=0\n"        \
  "race_blocking_to_nonblocking: errors=0 races=0 free=0 last=0\n" \
  "race_nonblocking_to_legacy: errors=0 races=0 free=0 last=0\n"   \
  "race_legacy_to_nonblocking: errors=0 races=0 free=0 last=0\n"   \
  "race_per_thread_streams: errors=0 races=0 free=0 last=0\n"      \
  "race_after_device_sync: errors=0 races=0 free=0 last=0\n"       \
  "race_end: sync=0 last=0\n"

static const char *const scenarios[] = {
    "race_nonblocking_same_thread", "race_nonblocking_threads",   "race_ptsz_nonblocking",
    "race_blocking_to_nonblocking", "race_nonblocking_to_legacy", "race_legacy_to_nonblocking",
    "race_per_thread_streams",      "race_after_device_sync",
};

Test(shim_it_mt, free_async_reuse_waits_for_the_freed_work) {
  it_result n, s;
  it_same(&n, &s, NULL, "suballoc", IT_ARGS("race"));
  cr_assert(eq(str, (char *)it_compared(&n), RACE_OUTPUT));
  /* Each second allocation is the first one's block (a 12 MiB segment of
   * its own): the reuse the races= lines check did happen. A barrier made
   * it safe, or the device synchronisation before it. */
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
    cr_assert(eq(long, it_info_val(&s, scenarios[i], "same", -1), 1), "%s\n%s", scenarios[i], s.out);
    cr_assert(ge(long, it_info_val(&s, scenarios[i], "barriers", -1), 1), "%s\n%s", scenarios[i], s.out);
  }
  cr_assert(eq(long, it_val(&s, "pool", "num_device_alloc", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 16), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_free", -1), 16), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}
