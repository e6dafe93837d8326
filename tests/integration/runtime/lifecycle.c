/* lifecycle.c: the shim starts at the first CUDA call, not at load, and a
 * child of fork() after that passes everything through and reports
 * nothing (layer.c). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

static char dir[256];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/cp-lifecycle-XXXXXX");
  cr_assert(not(eq(ptr, mkdtemp(dir), NULL)));
}

static void remove_dir(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert(eq(int, system(cmd), 0));
}

static int files_in_dir(void) {
  DIR *d = opendir(dir);
  cr_assert(not(eq(ptr, d, NULL)));
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

TestSuite(lifecycle, .init = make_dir, .fini = remove_dir);

/* A process that never calls CUDA: no trace file, no report, not a word. */
Test(lifecycle, no_cuda_call_no_output) {
  char trace[300], stats[300];
  snprintf(trace, sizeof trace, "CUDAPOOL_TRACE=%s/trace.%%p.csv", dir);
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=1");
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){trace, stats, NULL}, "lifecycle", IT_ARGS("none"));
  cr_assert(eq(str, r.err, ""));
  cr_assert(eq(int, files_in_dir(), 0), "a trace file was created");
  it_free(&r);
}

/* The child of a process that used the pool makes its own calls natively:
 * the same real cudaMalloc count as without the shim. */
Test(lifecycle, forked_child_passes_through) {
  it_result n, s;
  it_same(&n, &s, NULL, "lifecycle", IT_ARGS("fork"));
  cr_assert(eq(str, (char *)it_line(&s, "child"), "child: real_mallocs=1 errors=0"));
  it_free(&n);
  it_free(&s);
}

/* Only the parent reports (to its own %p file); the child writes none. */
Test(lifecycle, forked_child_writes_no_report) {
  char stats[300];
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/stats.%%p.json", dir);
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, "CUDAPOOL_STATS_FORMAT=json", NULL}, "lifecycle",
            IT_ARGS("fork"));
  cr_assert(eq(int, files_in_dir(), 1), "%s", r.err);
  char path[400];
  snprintf(path, sizeof path, "%s/stats.%ld.json", dir, (long)r.pid);
  cr_assert(eq(int, access(path, F_OK), 0), "the parent's report is missing");
  it_free(&r);
}
