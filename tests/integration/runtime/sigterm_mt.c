/* sigterm.c: a job stopped with SIGTERM (how Slurm and Kubernetes stop
 * one) still leaves its exit report and its whole trace, and ends killed by
 * SIGTERM as natively (shim/state/sigterm.c); a program's own SIGTERM handling,
 * early or late, is left alone, and a forked child dies of SIGTERM as it
 * would without cudapool. Program: tests/programs/runtime/sigterm.c. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

static char dir[64];

static void mk(void) {
  snprintf(dir, sizeof dir, "/tmp/cp-sigterm-it-XXXXXX");
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
}

static void rm(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(sigterm, .init = mk, .fini = rm);

#define KILLED_BY_SIGTERM (128 + SIGTERM)

/* The whole file (kept in r), "<missing>" when it does not exist. */
static const char *contents(it_result *r, const char *path) {
  char cmd[512];
  if (access(path, F_OK) != 0) return "<missing>";
  snprintf(cmd, sizeof cmd, "cat '%s'", path);
  const char *s = it_shell(r, cmd);
  cr_assert(ne(ptr, (void *)s, NULL));
  return s;
}

/* prog MODE natively and under the shim with env: both end with status,
 * with the same compared lines. */
static void both(it_result *n, it_result *s, const char *const *env, const char *mode, int status) {
  cr_assert(eq(int, it_run(n, IT_NATIVE, env, "sigterm", IT_ARGS(mode)), 0));
  cr_assert(eq(int, it_run(s, IT_SHIM, env, "sigterm", IT_ARGS(mode)), 0));
  cr_assert(eq(int, n->status, status), "natively: %d\n%s%s", n->status, n->out, n->err);
  cr_assert(eq(int, s->status, status), "under the shim: %d\n--- stdout\n%s--- stderr\n%s", s->status, s->out,
            s->err);
  cr_assert(eq(str, (char *)it_compared(s), (char *)it_compared(n)), "--- shim stderr\n%s", s->err);
}

/* The report of r's process, in text: its header names the pid; one row,
 * one miss then one hit. */
static void assert_report(const char *text, const it_result *r) {
  char header[160];
  snprintf(header, sizeof header, "cudapool: process %ld, version 0.1.0, mode auto, limit none\n",
           (long)r->pid);
  cr_assert(eq(int, strncmp(text, header, strlen(header)), 0), "want %s--- got\n%s", header, text);
  cr_assert(eq(int, it_count_lines(text, "cudapool:"), 3), "%s", text);
  const char *row = strstr(text, "\ncudapool:   0 ");
  unsigned long hits = 0, misses = 0;
  char rate[16] = "";
  cr_assert(ne(ptr, (void *)row, NULL), "%s", text);
  cr_assert(
      eq(int, sscanf(row + 1, "cudapool: %*s %*s %*s %*s %*s %*s %lu %lu %15s", &hits, &misses, rate), 3),
      "%s", row);
  cr_assert(eq(u64, hits, 1), "%s", text);
  cr_assert(eq(u64, misses, 1), "%s", text);
  cr_assert(eq(str, rate, "50.0%"), "%s", text);
}

static void killed_with_its_report(const char *mode) {
  char stats[128], path[128];
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/report.%%p.txt", dir);
  it_result n, s, f;
  both(&n, &s, (const char *const[]){stats, NULL}, mode, KILLED_BY_SIGTERM);
  char line[64];
  snprintf(line, sizeof line, "sigterm: mode=%s errors=0\n", mode);
  cr_assert(eq(str, s.out, line));
  snprintf(path, sizeof path, "%s/report.%ld.txt", dir, (long)s.pid);
  memset(&f, 0, sizeof f);
  assert_report(contents(&f, path), &s);
  cr_assert(eq(str, s.err, ""));
  it_free(&f);
  it_free(&n);
  it_free(&s);
}

Test(sigterm, raised_report_written_and_status_as_native) { killed_with_its_report("raise"); }

Test(sigterm, killed_report_written_and_status_as_native) { killed_with_its_report("kill"); }

/* The program exits on its own while the report is being written: one
 * report, and the status is still SIGTERM's. */
Test(sigterm, exit_during_the_report_one_report_same_status) {
  it_result n, s;
  both(&n, &s, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "exit", KILLED_BY_SIGTERM);
  assert_report(s.err, &s);
  it_free(&n);
  it_free(&s);
}

/* The trace's last events are on disk: both pairs. */
Test(sigterm, trace_complete) {
  char trace[128], path[128];
  snprintf(trace, sizeof trace, "CUDAPOOL_TRACE=%s/trace.csv", dir);
  snprintf(path, sizeof path, "%s/trace.csv", dir);
  it_result n, s, f;
  both(&n, &s, (const char *const[]){trace, NULL}, "raise", KILLED_BY_SIGTERM);
  memset(&f, 0, sizeof f);
  const char *text = contents(&f, path);
  cr_assert(eq(int, it_count_lines(text, ",allocate,"), 2), "%s", text);
  cr_assert(eq(int, it_count_lines(text, ",free,"), 2), "%s", text);
  it_free(&f);
  it_free(&n);
  it_free(&s);
}

/* A handler of the program's own, installed before or after the first CUDA
 * call, runs as natively; the report comes at its normal exit. */
static void own_handler(const char *mode) {
  it_result n, s;
  both(&n, &s, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, mode, 0);
  cr_assert(eq(int, it_count_lines(s.out, "sigterm: handled=1"), 1), "%s", s.out);
  assert_report(s.err, &s);
  it_free(&n);
  it_free(&s);
}

Test(sigterm, program_handler_before_cuda_kept) { own_handler("own"); }

Test(sigterm, program_handler_after_cuda_kept) { own_handler("late"); }

Test(sigterm, ignored_stays_ignored) {
  it_result n, s;
  both(&n, &s, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "ignored", 0);
  cr_assert(eq(int, it_count_lines(s.out, "sigterm: survived=1"), 1), "%s", s.out);
  assert_report(s.err, &s);
  it_free(&n);
  it_free(&s);
}

/* The child of a fork() after the first CUDA call has no reporter: SIGTERM
 * must kill it as natively, not be swallowed by the parent's handler. */
Test(sigterm, forked_child_dies_of_it) {
  it_result n, s;
  both(&n, &s, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "fork", 0);
  cr_assert(eq(int, it_count_lines(s.out, "sigterm: child_signal=15"), 1), "%s", s.out);
  it_free(&n);
  it_free(&s);
}
