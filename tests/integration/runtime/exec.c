/* exec.c: a process under cudapool that replaces itself with exec keeps
 * what was recorded (shim/exec_hook.c): every exec entry point; a gzip
 * trace; an exec that fails. The new image is /bin/sh running a script that
 * looks at the old image's files with the same pid ($$). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/cp-exec-XXXXXX");
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
}

static void remove_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert(eq(int, system(cmd), 0));
}

TestSuite(exec, .init = make_dir, .fini = remove_dir);

/* The script the new image runs: one "after:" line. */
#define LIVE "$(test -e /dev/shm/cudapool.$(id -u).$$ && echo 1 || echo 0)"

static void run_exec(it_result *r, const char *how, const char *trace_name, const char *check) {
  char trace[128], stats[128], script[1024];
  snprintf(trace, sizeof trace, "CUDAPOOL_TRACE=%s/%s", dir, trace_name);
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/report.%%p.txt", dir);
  snprintf(script, sizeof script, "cd '%s' && echo \"after: %s\"", dir, check);
  const char *const env[] = {trace, stats, NULL};
  it_run_ok(r, IT_SHIM, env, "exec", IT_ARGS(how, script));
}

/* Before the new image runs, whichever exec entry point the program calls:
 * every event is in the trace, the report is written, the live-stats file
 * is gone. */
Test(exec, every_exec_call_keeps_trace_and_report) {
  const char *calls[] = {"execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve"};
  for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
    it_result r;
    run_exec(&r, calls[i], "trace.csv",
             "live=" LIVE " allocs=$(grep -c ,allocate, trace.csv) frees=$(grep -c ,free, trace.csv) "
             "reports=$(cat report.$$.txt | grep -c 'cudapool: process')");
    cr_assert(eq(str, (char *)it_line(&r, "after"), "after: live=0 allocs=64 frees=64 reports=1"),
              "%s\n--- stdout\n%s--- stderr\n%s", calls[i], r.out, r.err);
    it_free(&r);
  }
}

/* A gzip trace is a whole gzip file (its trailer written) at the exec. */
Test(exec, gzip_trace_is_complete_at_exec) {
  it_result r;
  run_exec(
      &r, "execvp", "trace.csv.gz",
      "gzip=$(gzip -t trace.csv.gz 2>&1 && echo ok) allocs=$(gzip -dc trace.csv.gz | grep -c ,allocate,)");
  cr_assert(eq(str, (char *)it_line(&r, "after"), "after: gzip=ok allocs=64"), "%s\n%s", r.out, r.err);
  it_free(&r);
}

/* An exec that fails: the program goes on pooled and traced (its live-stats
 * file made again), and its end rewrites the report from the start: one
 * report, of all 65 pairs; the trace holds all of them, plain or gzip. */
static void failed_exec(const char *trace_name, const char *reader) {
  char trace[128], stats[128], path[128], cmd[256];
  snprintf(trace, sizeof trace, "CUDAPOOL_TRACE=%s/%s", dir, trace_name);
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/report.json", dir);
  const char *const env[] = {trace, stats, "CUDAPOOL_STATS_FORMAT=json", NULL};
  it_result r;
  it_run_ok(&r, IT_SHIM, env, "exec", IT_ARGS("fail", "unused"));
  cr_assert(eq(str, (char *)it_line(&r, "exec_failed"), "exec_failed: rc=-1 enoent=1 live=1 pairs=65"),
            "%s\n%s", r.out, r.err);
  snprintf(path, sizeof path, "%s/report.json", dir);
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL));
  static char text[1 << 16];
  text[fread(text, 1, sizeof text - 1, f)] = '\0';
  fclose(f);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not one JSON report:\n%s", text);
  const it_json *dev = it_json_at(it_json_get(j, "devices"), 0);
  cr_assert(eq(dbl, it_json_num(it_json_get(dev, "num_alloc")), 65));
  it_json_free(j);
  snprintf(cmd, sizeof cmd, "cd '%s' && %s %s | grep -c ,free,", dir, reader, trace_name);
  it_result c = {0};
  cr_assert(eq(str, (char *)it_shell(&c, cmd), "65\n"));
  it_free(&c);
  it_free(&r);
}

Test(exec, failed_exec_goes_on_plain_trace) { failed_exec("trace.csv", "cat"); }
Test(exec, failed_exec_goes_on_gzip_trace) { failed_exec("trace.csv.gz", "gzip -dc"); }

/* The child of a vfork() shares its parent's memory: its exec leaves the
 * parent's trace, report and live-stats file alone (the parent's end writes
 * them, all 65 pairs). */
Test(exec, vfork_child_exec_leaves_the_parent_alone) {
  char trace[128], stats[128], cmd[256];
  snprintf(trace, sizeof trace, "CUDAPOOL_TRACE=%s/trace.csv", dir);
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/report.txt", dir);
  const char *const env[] = {trace, stats, NULL};
  it_result r;
  it_run_ok(&r, IT_SHIM, env, "exec", IT_ARGS("vfork", "unused"));
  cr_assert(eq(str, (char *)it_line(&r, "exec_vfork"), "exec_vfork: status=0 live=1 pairs=65"), "%s\n%s",
            r.out, r.err);
  snprintf(cmd, sizeof cmd, "cd '%s' && grep -c ,free, trace.csv && grep -c 'cudapool: process' report.txt",
           dir);
  it_result c = {0};
  cr_assert(eq(str, (char *)it_shell(&c, cmd), "65\n1\n"));
  it_free(&c);
  it_free(&r);
}
