/* ptds_threads_mt.c: per-thread default streams from two threads (issue 31,
 * item 2; tests/programs/runtime/ptds_threads.c). Thread U writes a block on
 * its per-thread stream, the main thread frees it and writes a new
 * allocation on its own per-thread stream. Same-thread reuse keys must be
 * off by then (U's call said the per-thread stream was used), so the main
 * thread never gets the block back before a barrier: no race, and the new
 * allocation is another block of the segment. For the handle
 * (cudaStreamPerThread), the _ptsz entry points (stream 0 in a
 * --default-stream per-thread build), a memset, a copy and a kernel launch
 * (which the fake says writes nothing: the other block shows the keys went
 * off), with and without a trace (a traced pool has no thread caches: the
 * rule, not the cache). */
#include <string.h>

#include "it_check.h"

static const char *const hows[] = {"memset", "copy", "launch"};

static void expect_no_early_reuse(const char *prog, const char *const *env) {
  for (size_t i = 0; i < sizeof hows / sizeof *hows; i++) {
    it_result s;
    it_run_ok(&s, IT_SHIM, env, prog, IT_ARGS(hows[i]));
    char want[128];
    snprintf(want, sizeof want, "%s: how=%s user=0 errors=0 races=0\n", prog, hows[i]);
    cr_assert(eq(str, (char *)it_compared(&s), want), "%s\n--- stderr\n%s", s.out, s.err);
    cr_assert(eq(long, it_val(&s, "info", "same_block", -1), 0), "%s %s: keys stayed on\n%s", prog, hows[i],
              s.out);
    it_free(&s);
  }
}

Test(ptds_threads, the_handle_from_two_threads_as_natively) {
  for (size_t i = 0; i < sizeof hows / sizeof *hows; i++) {
    it_result n, s;
    it_same(&n, &s, NULL, "ptds_threads", IT_ARGS(hows[i]));
    it_free(&n);
    it_free(&s);
  }
  expect_no_early_reuse("ptds_threads", NULL);
}

/* The fake's native run of this build counts a race the shim's does not
 * (its per-thread streams under CUDA_API_PER_THREAD_DEFAULT_STREAM); the
 * shim's run is what is checked. */
Test(ptds_threads, the_ptsz_entry_points_from_two_threads) { expect_no_early_reuse("ptsz_threads", NULL); }

Test(ptds_threads, traced_without_thread_caches) {
  char dir[] = "/tmp/cudapool-it-XXXXXX", trace[128];
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(trace, sizeof trace, "CUDAPOOL_TRACE=%s/trace.%%p.csv", dir);
  const char *const env[] = {trace, NULL};
  expect_no_early_reuse("ptds_threads", env);
  expect_no_early_reuse("ptsz_threads", env);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert(eq(int, system(cmd), 0));
}
