/* plot.c: scripts/cudapool-plot end to end (replay --timeline, then
 * matplotlib). Skipped, with the reason, where matplotlib is not installed
 * (scripts/deps installs Debian's python3-matplotlib; scripts/run-tests
 * lists a skip in its closing line). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "replay_util.h"

static char dir[64];
static void mk(void) { cr_assert(eq(int, ru_mkdtemp(dir), 0)); }
static void rm(void) { ru_rmtree(dir); }
TestSuite(plot, .init = mk, .fini = rm);

Test(plot, timeline_png_of_a_trace_with_an_oom) {
  char root[PATH_MAX], bin[PATH_MAX], cmd[3 * PATH_MAX], *out = NULL;
  cr_assert(eq(int, ru_repo_root(root, sizeof root), 0));
  cr_assert(eq(int, ru_replay_bin(bin, sizeof bin), 0));
  snprintf(cmd, sizeof cmd, "'%s/scripts/cudapool-plot' --check 2>&1", root);
  int rc = ru_run(cmd, &out);
  if (rc == 3) {
    char why[256];
    snprintf(why, sizeof why, "%s", out);
    free(out);
    cr_skip_test("%s", why);
  }
  cr_assert(eq(int, rc, 0), "%s", out);
  free(out);

  char trace[128], png[128];
  snprintf(trace, sizeof trace, "%s/t.csv", dir);
  snprintf(png, sizeof png, "%s/t.png", dir);
  FILE *f = fopen(trace, "w");
  fputs("Thread,Time,Action,Pointer,Size,Stream\n"
        "1,0.0,allocate,0x1000,12582912,(nil)\n"
        "1,0.1,free,0x1000,0,(nil)\n"
        "1,0.2,allocate,0x2000,33554432,(nil)\n"
        "1,0.3,empty_cache,(nil),0,(nil)\n"
        "1,0.4,allocate,0x3000,1048576,(nil)\n",
        f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "CUDAPOOL_REPLAY='%s' '%s/scripts/cudapool-plot' '%s' -o '%s' --limit 40M 2>&1",
           bin, root, trace, png);
  cr_assert(eq(int, ru_run(cmd, &out), 0), "%s", out);
  cr_assert(not(eq(ptr, strstr(out, "wrote"), NULL)), "%s", out);
  free(out);
  unsigned char magic[8] = {0};
  f = fopen(png, "rb");
  cr_assert(not(eq(ptr, f, NULL)));
  cr_assert(eq(sz, fread(magic, 1, 8, f), 8));
  fseek(f, 0, SEEK_END);
  cr_assert(gt(long, ftell(f), 10000), "a real image");
  fclose(f);
  cr_assert(eq(int, memcmp(magic, "\x89PNG\r\n\x1a\n", 8), 0));
}

/* Usage errors exit 2 and say what is missing; a trace the replayer refuses
 * exits non-zero naming the trace, never the plotter's own temporary files;
 * the unit follows the data (a 40 MiB limit is drawn in MiB). */
Test(plot, usage_errors_exit_2_and_failures_name_the_trace_not_temporary_files) {
  char root[PATH_MAX], bin[PATH_MAX], cmd[3 * PATH_MAX], *out = NULL;
  cr_assert(eq(int, ru_repo_root(root, sizeof root), 0));
  cr_assert(eq(int, ru_replay_bin(bin, sizeof bin), 0));
  snprintf(cmd, sizeof cmd, "'%s/scripts/cudapool-plot' --check 2>&1", root);
  if (ru_run(cmd, &out) == 3) {
    free(out);
    cr_skip_test("matplotlib is not installed");
  }
  free(out);
  char trace[128], png[128];
  snprintf(trace, sizeof trace, "%s/t.csv", dir);
  snprintf(png, sizeof png, "%s/t.png", dir);
  snprintf(cmd, sizeof cmd, "CUDAPOOL_REPLAY='%s' '%s/scripts/cudapool-plot' '%s' 2>&1", bin, root, trace);
  cr_expect(eq(int, ru_run(cmd, &out), 2), "%s", out);
  cr_expect(ne(ptr, strstr(out, "cudapool-plot: no output file given (-o OUT.png)"), NULL), "%s", out);
  free(out);
  snprintf(cmd, sizeof cmd, "CUDAPOOL_REPLAY='%s' '%s/scripts/cudapool-plot' -o '%s' 2>&1", bin, root, png);
  cr_expect(eq(int, ru_run(cmd, &out), 2), "%s", out);
  cr_expect(ne(ptr, strstr(out, "cudapool-plot: no trace given"), NULL), "%s", out);
  free(out);
  FILE *f = fopen(trace, "w");
  fputs("this is not a trace\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "CUDAPOOL_REPLAY='%s' '%s/scripts/cudapool-plot' '%s' -o '%s' 2>&1", bin, root, trace,
           png);
  int rc = ru_run(cmd, &out);
  cr_expect(ne(int, rc, 0), "%s", out);
  cr_expect(ne(ptr, strstr(out, "cudapool-plot: cannot replay "), NULL), "%s", out);
  cr_expect(eq(ptr, strstr(out, "cudapool-plot-"), NULL), "a temporary path in: %s", out);
  cr_expect(eq(ptr, strstr(out, "--timeline"), NULL), "an internal command line in: %s", out);
  free(out);
  f = fopen(trace, "w");
  fputs("Thread,Time,Action,Pointer,Size,Stream\n1,0.0,allocate,0x1000,12582912,(nil)\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "CUDAPOOL_REPLAY='%s' '%s/scripts/cudapool-plot' '%s' -o '%s' --limit 40M 2>&1", bin,
           root, trace, png);
  cr_assert(eq(int, ru_run(cmd, &out), 0), "%s", out);
  cr_expect(ne(ptr, strstr(out, " MiB)"), NULL), "the unit of a 40 MiB trace: %s", out);
  free(out);
}

/* The replayer's flags that take no value (--help says which) leave the
 * next argument alone: "--expandable TRACE" is not "--expandable=TRACE".
 * Without matplotlib the run stops, after parsing, with status 3. */
Test(plot, flags_without_a_value_leave_the_trace_alone) {
  char root[PATH_MAX], bin[PATH_MAX], cmd[3 * PATH_MAX], *out = NULL;
  cr_assert(eq(int, ru_repo_root(root, sizeof root), 0));
  cr_assert(eq(int, ru_replay_bin(bin, sizeof bin), 0));
  char trace[128], png[128];
  snprintf(trace, sizeof trace, "%s/t.csv", dir);
  snprintf(png, sizeof png, "%s/t.png", dir);
  FILE *f = fopen(trace, "w");
  fputs("Thread,Time,Action,Pointer,Size,Stream\n1,0.0,allocate,0x1000,12582912,(nil)\n", f);
  fclose(f);
  static const char *const flags[] = {"--expandable", "--allow-unknown-frees"};
  for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
    snprintf(cmd, sizeof cmd, "CUDAPOOL_REPLAY='%s' '%s/scripts/cudapool-plot' %s '%s' -o '%s' 2>&1", bin, root,
             flags[i], trace, png);
    int rc = ru_run(cmd, &out);
    cr_expect(rc == 0 || rc == 3, "%s: exit %d\n%s", flags[i], rc, out);
    cr_expect(eq(ptr, strstr(out, "no trace given"), NULL), "%s took the trace as its value: %s", flags[i], out);
    free(out);
  }
}
