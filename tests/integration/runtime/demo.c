/* demo.c: scripts/demo on the simulated runtime (CUDAPOOL_DEMO_FAKE=1,
 * --no-build): what it credits to cudapool. Disabled (its --disable, or
 * CUDAPOOL_DISABLE in the environment), nothing may read as cudapool's: the
 * program says its cudaMalloc came from the CUDA runtime, the summary shows
 * no speed-up and says why. Skipped where the demo program is not built (it
 * needs nvcc). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

/* scripts/demo --no-build ARGS --steps 20 with env before it; stdout and
 * stderr in r (kept); the exit status. */
static int demo(it_result *r, const char *env, const char *args, const char **out) {
  char app[4200], cmd[8192];
  snprintf(app, sizeof app, "%s/demo/legacy_app", it_build());
  if (access(app, X_OK) != 0) cr_skip_test("%s is not built (no nvcc)", app);
  const char *san = getenv("CUDAPOOL_TEST_SAN_PRELOAD");
  /* Under sanitizers the library and the simulated runtime need their
   * runtimes loaded first; the shell tools that then carry them leak by
   * design. */
  snprintf(cmd, sizeof cmd,
           "env -u CUDAPOOL_DISABLE -u CUDAPOOL_STATS -u CUDAPOOL_STATS_FORMAT -u CUDAPOOL_LIB BUILD='%s' "
           "CUDAPOOL_DEMO_FAKE=1 LD_PRELOAD='%s' ASAN_OPTIONS=detect_leaks=0 %s "
           "scripts/demo --no-build %s --steps 20 2>&1; echo \"exit=$?\"",
           it_build(), san != NULL ? san : "", env, args);
  memset(r, 0, sizeof *r);
  *out = it_shell(r, cmd);
  cr_assert(ne(ptr, (void *)*out, NULL));
  const char *e = strstr(*out, "exit=");
  cr_assert(ne(ptr, (void *)e, NULL), "%s", *out);
  return atoi(e + 5);
}

static void nothing_credited_to_cudapool(const char *env, const char *args) {
  it_result r;
  const char *out;
  cr_assert(eq(int, demo(&r, env, args, &out), 0), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "cudaMalloc from cudapool"), 0), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "cudapool loaded but disabled: every call passed through"), 1), "%s",
            out);
  cr_assert(eq(int, it_count_lines(out, "with cudapool"), 0), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "speed-up"), 0), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "hit rate"), 0), "%s", out);
  cr_assert(
      eq(int, it_count_lines(out, "(cudapool was disabled: both runs allocated from the CUDA runtime"), 1),
      "%s", out);
  it_free(&r);
}

Test(demo, disable_flag_claims_nothing) { nothing_credited_to_cudapool("", "--disable"); }

Test(demo, disable_variable_claims_nothing) { nothing_credited_to_cudapool("CUDAPOOL_DISABLE=Yes", ""); }

Test(demo, enabled_shows_the_pool) {
  it_result r;
  const char *out;
  cr_assert(eq(int, demo(&r, "", "", &out), 0), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "cudaMalloc from cudapool"), 1), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "  with cudapool: "), 1), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "hit rate"), 1), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "disabled"), 0), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "  wall:  the whole process"), 1), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "  loop:  the app's own clock"), 1), "%s", out);
  cr_assert(eq(int, it_count_lines(out, "util = the first over the second"), 1), "%s", out);
  it_free(&r);
}

/* Each command the demo shows ("== native: CMD", "== under cudapool: CMD")
 * runs as shown from the source tree's root, as a new user would paste it:
 * without the demo's own environment. */
Test(demo, shown_commands_run_as_shown) {
  it_result r;
  const char *out;
  cr_assert(eq(int, demo(&r, "", "", &out), 0), "%s", out);
  static const char *const heads[] = {"== native: ", "== under cudapool: "};
  for (int i = 0; i < 2; i++) {
    const char *at = strstr(out, heads[i]);
    cr_assert(ne(ptr, (void *)at, NULL), "%s", out);
    at += strlen(heads[i]);
    char shown[1024], cmd[4096];
    size_t n = strcspn(at, "\n");
    cr_assert(lt(sz, n, sizeof shown), "%s", out);
    memcpy(shown, at, n);
    shown[n] = '\0';
    const char *san = getenv("CUDAPOOL_TEST_SAN_PRELOAD");
    snprintf(cmd, sizeof cmd,
             "env -u CUDAPOOL_DISABLE -u CUDAPOOL_LIB -u LD_LIBRARY_PATH LD_PRELOAD='%s' ASAN_OPTIONS=detect_leaks=0 "
             "sh -c '%s --steps 5' 2>&1; echo \"exit=$?\"",
             san != NULL ? san : "", shown);
    it_result c;
    memset(&c, 0, sizeof c);
    const char *got = it_shell(&c, cmd);
    cr_assert(ne(ptr, (void *)got, NULL));
    cr_assert(ne(ptr, (void *)strstr(got, "legacy_app: total "), NULL), "%s\n%s", shown, got);
    cr_assert(ne(ptr, (void *)strstr(got, "exit=0"), NULL), "%s\n%s", shown, got);
    if (i == 1) cr_assert(ne(ptr, (void *)strstr(got, "cudaMalloc from cudapool"), NULL), "%s\n%s", shown, got);
    it_free(&c);
  }
  it_free(&r);
}
