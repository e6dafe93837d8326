/* run_tests.c: scripts/run-tests, the runner of make test, over
 * tests/selftest/planted_skip.c (one test passes, one skips): a skipped test
 * is counted in the closing line, after CI's "N passed, N failed" prefix,
 * and listed with its reason; it does not fail the run. Over
 * tests/selftest/planted_hang.c (a test whose forked child never ends): the
 * binary is killed when its time is up, with the child, and fails, naming
 * the test. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The build folder: $CUDAPOOL_TEST_BUILD, or the one above this binary's. */
static void build_dir(char *out, size_t cap) {
  const char *b = getenv("CUDAPOOL_TEST_BUILD");
  if (b != NULL && *b) {
    snprintf(out, cap, "%s", b);
    return;
  }
  char self[PATH_MAX - 8];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  cr_assert(gt(int, (int)n, 0));
  self[n] = '\0';
  *strrchr(self, '/') = '\0';
  snprintf(out, cap, "%s/..", self);
}

/* scripts/run-tests over build/tests/NAME with the extra environment env;
 * its output into out, its exit status returned (-1: it did not exit). */
static int run_over(const char *name, const char *env, char *out, size_t cap) {
  char build[PATH_MAX + 8], cmd[2 * PATH_MAX + 128];
  build_dir(build, sizeof build);
  /* env -i: Criterion's own variables would make the inner runner a worker. */
  snprintf(cmd, sizeof cmd, "env -i PATH=/usr/bin:/bin %s scripts/run-tests '%s/tests/%s' 2>&1", env, build, name);
  FILE *p = popen(cmd, "r");
  cr_assert(ne(ptr, p, NULL));
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(run_tests, skips_counted_and_listed) {
  char out[8192];
  cr_assert(eq(int, run_over("planted_skip", "", out, sizeof out), 0), "a skip is not a failure:\n%s", out);
  const char *skipped =
      strstr(out, "\nSKIPPED: planted::skips_with_a_reason: no widget here (a planted skip)\n");
  cr_assert(ne(ptr, (void *)skipped, NULL), "%s", out);
  const char *last = strstr(out, "\ntests: ");
  cr_assert(ne(ptr, (void *)last, NULL), "%s", out);
  cr_assert(eq(str, (char *)last, "\ntests: 1 passed, 0 failed, 1 skipped\n"), "%s", out);
}

/* The 2 s is a limit on a test that never ends, not a timing assertion. */
Test(run_tests, a_hang_is_killed_and_named) {
  char out[8192], build[PATH_MAX + 8], want[PATH_MAX + 256];
  cr_assert(eq(int, run_over("planted_hang", "CUDAPOOL_TEST_TIMEOUT=2", out, sizeof out), 1), "%s", out);
  build_dir(build, sizeof build);
  snprintf(want, sizeof want,
           "\nFAILED: %s/tests/planted_hang (killed after 2 s; still running: planted::hangs_in_a_forked_child)\n"
           "tests: 0 passed, 1 failed, 0 skipped\n",
           build);
  const char *tail = strstr(out, "\nFAILED: ");
  cr_assert(ne(ptr, (void *)tail, NULL), "%s", out);
  cr_assert(eq(str, (char *)tail, want), "%s", out);
}
