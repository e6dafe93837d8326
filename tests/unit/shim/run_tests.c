/* run_tests.c: scripts/run-tests, the runner of make test, over
 * tests/selftest/planted_skip.c (one test passes, one skips): a skipped test
 * is counted in the closing line, after CI's "N passed, N failed" prefix,
 * and listed with its reason; it does not fail the run. */
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

Test(run_tests, skips_counted_and_listed) {
  char build[PATH_MAX + 8], cmd[2 * PATH_MAX + 64], out[8192];
  build_dir(build, sizeof build);
  /* env -i: Criterion's own variables would make the inner runner a worker. */
  snprintf(cmd, sizeof cmd, "env -i PATH=/usr/bin:/bin scripts/run-tests '%s/tests/planted_skip' 2>&1",
           build);
  FILE *p = popen(cmd, "r");
  cr_assert(ne(ptr, p, NULL));
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  cr_assert(ok, "a skip is not a failure:\n%s", out);
  const char *skipped =
      strstr(out, "\nSKIPPED: planted::skips_with_a_reason: no widget here (a planted skip)\n");
  cr_assert(ne(ptr, (void *)skipped, NULL), "%s", out);
  const char *last = strstr(out, "\ntests: ");
  cr_assert(ne(ptr, (void *)last, NULL), "%s", out);
  cr_assert(eq(str, (char *)last, "\ntests: 1 passed, 0 failed, 1 skipped\n"), "%s", out);
}
