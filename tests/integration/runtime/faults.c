/* faults.c: what once went wrong under the shim, run natively and under it
 * ("Never wrong, never exploitable", faults): a destroyed blocking stream's
 * queued work, a capture whose stream is destroyed, and libcudart unloaded
 * and loaded again under a running process. */
#include "it_check.h"

/* Work still queued on a blocking stream when it is destroyed is covered by
 * later barriers (shim/state/device.c, stream_destroying_on): the block it wrote
 * is not written on another stream before that work completed. */
Test(shim_it, destroyed_blocking_stream_work_is_ordered_before_reuse) {
  it_result n, s;
  it_same(&n, &s, NULL, "destroyed", IT_ARGS("blocking_busy"));
  cr_assert(eq(str, (char *)it_compared(&n), "destroyed_blocking_busy: errors=0 races=0 last=0\n"));
  it_free(&n);
  it_free(&s);
}

/* A capture ends with the stream that began it (serve.c,
 * cp_serve_stream_destroyed): the pool serves again afterwards, instead of
 * forwarding every call as if a strict capture went on for good. */
static void destroyed_capturing(const char *which, const char *native) {
  it_result n, s;
  it_same(&n, &s, NULL, "destroyed", IT_ARGS(which));
  cr_assert(eq(str, (char *)it_compared(&n), (char *)native));
  cr_assert(eq(long, it_val(&s, "pool", "served", -1), it_val(&s, "pool", "of", -2)),
            "the pool must serve every pair once the capture's stream is gone\n%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it, destroying_a_capturing_nonblocking_stream_ends_its_capture) {
  destroyed_capturing("capturing_nonblocking",
                      "destroyed_capturing_nonblocking: begin=0 destroy=0 last=0 errors=0 last2=0\n");
}

Test(shim_it, destroying_a_capturing_blocking_stream_ends_its_capture) {
  destroyed_capturing("capturing_blocking",
                      "destroyed_capturing_blocking: begin=0 destroy=0 last=0 errors=0 last2=0\n");
}

/* A plugin, the process's only user of libcudart, is loaded, used and
 * closed three times (the program itself is linked to no libcudart). The
 * shim keeps the runtime it resolved loaded (shim/backend/real.c, pin_library_of),
 * and the pool keeps serving from its cache across the rounds. */
Test(shim_it, libcudart_unloaded_and_loaded_again) {
  it_result n, s;
  it_same(&n, &s, NULL, "reload", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "reload: round=1 loaded=1 errors=0 closed=0\n"
               "reload: round=2 loaded=1 errors=0 closed=0\n"
               "reload: round=3 loaded=1 errors=0 closed=0\n"
               "reload: rounds=3 failures=0\n"));
  cr_assert(eq(long, it_val(&n, "info", "cudart_loaded_after_close", -1), 0),
            "natively closing the plugin unloads libcudart");
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 6), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_free", -1), 6), "%s", s.out);
  cr_assert(gt(long, it_val(&s, "pool", "hits", -1), 0), "later rounds reuse cached blocks\n%s", s.out);
  it_free(&n);
  it_free(&s);
}
