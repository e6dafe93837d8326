/* async.c: stream-ordered allocations at the driver layer
 * (tests/programs/driver/drv_async.c), reached through cuGetProcAddress and
 * through dlsym as static runtimes and XLA reach them: served with native
 * results and reused at once on the stream that freed them; pools the
 * program made or made current, and captures, left to the driver; the
 * entry-point diagnostic of CUDAPOOL_VERBOSE counts what happened. */
#include <string.h>

#include "it_check.h"
#include "it_info.h"

static void stream_ordered(const char *how) {
  const char *const env[] = {it_fake_driver_env(), "CUDAPOOL_VERBOSE=1", NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_async", IT_ARGS(how));
  static const char *const tags[] = {"pairs_stream", "pairs_legacy", "pairs_ptsz"};
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
    cr_assert(eq(long, it_info_val(&n, tags[i], "real_calls", -1), 2), "%s %s", how, tags[i]);
    cr_assert(eq(long, it_info_val(&s, tags[i], "real_calls", -1), 0), "%s %s\n%s", how, tags[i], s.out);
    cr_assert(eq(long, it_info_val(&s, tags[i], "same", -1), 1), "%s %s\n%s", how, tags[i], s.out);
  }
  cr_assert(eq(long, it_info_val(&s, "pools", "mine_calls", -1), 1), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "pools", "replaced_calls", -1), 1), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "pools", "def_calls", -1), 0), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "pools", "used", -1), 64 * 1024), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "capture", "alloc_calls", -1), 1), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "capture", "free_calls", -1), 1), "%s\n%s", how, s.out);
  /* 6 pairs' allocations served, the replaced pool's and the capture's
   * forwarded; the FromPool calls: the default pool's served, the
   * program's own forwarded. */
  const char *door =
      strcmp(how, "dlsym") == 0 ? "dlsym 2, cuGetProcAddress 0" : "dlsym 0, cuGetProcAddress 2";
  char line[256];
  snprintf(line, sizeof line, "cudapool: entry cuMemAllocAsync          %s, calls 8, served 6, forwarded 2\n",
           door);
  cr_assert(ne(ptr, strstr(s.err, line), NULL), "%s: no \"%s\" in\n%s", how, line, s.err);
  cr_assert(ne(ptr, strstr(s.err, "cuMemAllocFromPoolAsync  "), NULL), "%s", s.err);
  cr_assert(ne(ptr, strstr(s.err, "calls 2, served 1, forwarded 1\n"), NULL), "%s", s.err);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_driver, stream_ordered_allocations_through_cuGetProcAddress) { stream_ordered("proc"); }
Test(shim_it_driver, stream_ordered_allocations_through_dlsym) { stream_ordered("dlsym"); }
