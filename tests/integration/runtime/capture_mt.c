/* capture_mt.c: allocation during stream capture, natively (the
 * fake reproduces GPU-FACTS.md) and under the shim, which must forward
 * global/thread-local captures' calls so the errors are native, and must
 * issue no synchronisation while a capture is active (syncs=0), nor any
 * ordering work that would join or break it, so relaxed captures survive. Threaded: also
 * built into the ThreadSanitizer test binary. */
#include "it_check.h"

/* As seen on the H200 (gpu-check capture probe): cudaFree(NULL) fails too
 * during another thread's global-mode capture. */
#define NATIVE_CAPTURE                                                                \
  "capture_global: alloc=0 begin=0 malloc=900 last=900 free=900 last2=900 end=901 "   \
  "graph_null=1 last3=901 after_free=0 after_pair=0\n"                                \
  "capture_relaxed: alloc=0 begin=0 malloc=0 memset=0 free=0 malloc2=0 free2=0 is=0 " \
  "status=1 end=0 graph_null=0 free3=0 syncs=0 last=0\n"                              \
  "capture_relaxed_blocking: alloc=0 begin=0 malloc=0 memset=0 free=0 malloc2=0 "     \
  "free2=0 is=0 status=1 end=0 graph_null=0 free3=0 syncs=0 last=0\n"                 \
  "capture_threadlocal_other: begin=0 other_malloc=0 other_last=0 other_free=0 "      \
  "other_malloc2=0 other_free2=0 end=0 graph_null=0 syncs=0 last=0\n"                 \
  "capture_global_other: begin=0 other_malloc=900 other_last=900 other_free=900 "     \
  "other_malloc2=900 other_free2=900 end=901 graph_null=1 syncs=0 "                   \
  "last=901\n"                                                                        \
  "capture_global_other_relaxed: begin=0 other_malloc=0 other_last=0 other_free=0 "   \
  "other_malloc2=0 other_free2=0 end=0 graph_null=0 syncs=0 last=0\n"                 \
  "capture_threadlocal_own: begin=0 malloc=900 last=900 end=901 graph_null=1 "        \
  "last2=901\n"                                                                       \
  "capture_after: pair=0 last=0\n"

Test(shim_it_mt, capture_native) {
  it_result n;
  it_run_ok(&n, IT_NATIVE, NULL, "capture", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), NATIVE_CAPTURE));
  it_free(&n);
}

Test(shim_it_mt, capture_under_the_shim_is_native) {
  it_result n, s;
  it_same(&n, &s, NULL, "capture", NULL);
  it_free(&n);
  it_free(&s);
}
