/* live_extras_mt.c: `cudapool stats PID` shows the regions and call sites
 * the exit report would (CUDAPOOL_STACKS), and `cudapool snapshot PID -o
 * FILE` makes the running process write its snapshot, which `cudapool
 * view` opens. Program: tests/programs/runtime/live_extras.c (region
 * "load" allocated 4 MiB and closed; "step" allocated 3 MiB and is open
 * while the reader runs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

static char dir[64];

static void mk(void) {
  snprintf(dir, sizeof dir, "/tmp/cp-live-extras-XXXXXX");
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
}

static void rm(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(live_extras, .init = mk, .fini = rm);

/* The file dir/name, read into text. */
static void slurp(const char *name, char *text, size_t cap) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL), "%s", path);
  text[fread(text, 1, cap - 1, f)] = '\0';
  fclose(f);
}

static void run(it_result *r) {
  char reader[512];
  snprintf(reader, sizeof reader, "%s/cudapool-stats", it_build());
  it_run_ok(r, IT_SHIM, (const char *const[]){"CUDAPOOL_STACKS=1", NULL}, "live_extras", IT_ARGS(reader, dir));
  cr_assert(eq(long, it_val(r, "live_extras", "errors", -1), 0), "%s\n%s", r->out, r->err);
}

Test(live_extras, stats_pid_shows_the_regions_and_the_call_sites) {
  it_result r;
  run(&r);
  cr_assert(eq(long, it_val(&r, "info", "text", -1), 0), "%s", r.out);
  static char text[65536];
  slurp("stats.txt", text, sizeof text);
  const char *regions = "cudapool: regions (peak: most bytes allocated while open):\n"
                        "cudapool:   load: peak 4194304 bytes, 4194304 bytes in 1 allocation, entered 1 time\n"
                        "cudapool:   step: peak 7340032 bytes, 3145728 bytes in 1 allocation, entered 1 time (open)\n";
  cr_expect(ne(ptr, strstr(text, regions), NULL), "%s", text);
  const char *peak = strstr(text, "cudapool: call sites at the peak of reserved memory (");
  cr_assert(ne(ptr, (void *)peak, NULL), "%s", text);
  const char *line = strchr(peak, '\n') + 1;
  const char *first = "cudapool:   4194304 bytes in 1 block (";
  cr_expect(eq(int, strncmp(line, first, strlen(first)), 0), "%s", text);
  cr_expect(ne(ptr, strstr(line, "% of peak) at live_extras:alloc_weights+0x"), NULL), "%s", text);
  line = strchr(line, '\n') + 1;
  const char *second = "cudapool:   3145728 bytes in 1 block (";
  cr_expect(eq(int, strncmp(line, second, strlen(second)), 0), "%s", text);
  cr_expect(ne(ptr, strstr(line, "% of peak) at live_extras:alloc_activations+0x"), NULL), "%s", text);
  it_free(&r);
}

Test(live_extras, stats_pid_json_carries_regions_and_call_sites) {
  it_result r;
  run(&r);
  cr_assert(eq(long, it_val(&r, "info", "json", -1), 0), "%s", r.out);
  static char text[65536];
  slurp("stats.json", text, sizeof text);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not JSON: %s", text);
  cr_expect(eq(sz, it_json_len(it_json_get(j, "regions")), 2), "%s", text);
  cr_expect(ne(ptr, strstr(text, ",\"regions\":[{\"name\":\"load\",\"peak_bytes\":4194304,\"allocated_bytes\":4194304,"
                                 "\"allocations\":1,\"entries\":1,\"open\":0},{\"name\":\"step\",\"peak_bytes\":7340032,"
                                 "\"allocated_bytes\":3145728,\"allocations\":1,\"entries\":1,\"open\":1}]}\n"),
               NULL),
            "%s", text);
  const it_json *at_peak = it_json_get(it_json_get(j, "call_sites"), "at_peak");
  cr_assert(eq(sz, it_json_len(at_peak), 2), "%s", text);
  cr_expect(eq(dbl, it_json_num(it_json_get(it_json_at(at_peak, 0), "bytes")), 4194304.0), "%s", text);
  it_json_free(j);
  it_free(&r);
}

Test(live_extras, snapshot_pid_writes_a_file_that_cudapool_view_opens) {
  it_result r;
  run(&r);
  long pid = it_val(&r, "info", "pid", -1);
  cr_assert(eq(long, it_val(&r, "info", "snap", -1), 0), "%s", r.out);
  char said[256], path[160], cmd[512];
  static char out[1024], text[65536];
  snprintf(path, sizeof path, "%s/snap-%ld.json", dir, pid);
  snprintf(said, sizeof said, "cudapool: snapshot of process %ld written to %s\n", pid, path);
  slurp("snap.out", out, sizeof out);
  cr_expect(eq(str, out, said));
  snprintf(text, sizeof text, "snap-%ld.json", pid);
  slurp(text, text, sizeof text);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not JSON: %s", text);
  cr_expect(ne(ptr, strstr(text, "\"reason\":\"request\""), NULL), "%s", text);
  cr_expect(eq(sz, it_json_len(it_json_get(j, "stacks")), 2), "%s", text);
  const it_json *totals = it_json_get(it_json_at(it_json_get(j, "devices"), 0), "totals");
  cr_expect(eq(dbl, it_json_num(it_json_get(totals, "allocated")), 7340032.0), "%s", text);
  it_json_free(j);
  snprintf(cmd, sizeof cmd, "scripts/cudapool view '%s' -o '%s/snap.html' 2>&1; echo \"exit=$?\"", path, dir);
  const char *view = it_shell(&r, cmd);
  cr_assert(ne(ptr, (void *)view, NULL));
  cr_expect(ne(ptr, strstr(view, "exit=0\n"), NULL), "%s", view);
  snprintf(path, sizeof path, "%s/snap.html", dir);
  cr_expect(eq(int, access(path, R_OK), 0), "%s", view);
  it_free(&r);
}

Test(live_extras, snapshot_into_a_missing_folder_says_why) {
  it_result r;
  run(&r);
  cr_assert(eq(long, it_val(&r, "info", "bad", -1), 1), "%s", r.out);
  char said[256];
  static char out[1024];
  snprintf(said, sizeof said, "cudapool-stats: process %ld could not write %s/none/snap.json: No such file or directory\n",
           it_val(&r, "info", "pid", -1), dir);
  slurp("snap-bad.out", out, sizeof out);
  cr_expect(eq(str, out, said));
  it_free(&r);
}

/* The launcher's `cudapool snapshot` is cudapool-stats --snapshot; what it
 * needs is said byte for byte, with usage status 2. */
Test(live_extras, snapshot_usage_errors_say_what_is_missing) {
  static const struct {
    const char *args, *said;
  } cases[] = {
      {"snapshot", "cudapool-stats: --snapshot needs a process id (--help lists the options)\nexit=2\n"},
      {"snapshot 1", "cudapool-stats: --snapshot needs -o FILE (--help lists the options)\nexit=2\n"},
      {"snapshot 1 -o f --json",
       "cudapool-stats: --snapshot is its own request: not with --top, --json or --prometheus (--help lists the "
       "options)\nexit=2\n"},
      {"stats 1 -o f", "cudapool-stats: -o is for --snapshot (--help lists the options)\nexit=2\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    it_result r = {0};
    char cmd[512];
    snprintf(cmd, sizeof cmd, "PATH=\"%s:$PATH\" scripts/cudapool %s 2>&1; echo \"exit=$?\"", it_build(),
             cases[i].args);
    const char *said = it_shell(&r, cmd);
    cr_assert(ne(ptr, (void *)said, NULL));
    cr_expect(eq(str, (char *)said, (char *)cases[i].said), "cudapool %s", cases[i].args);
    it_free(&r);
  }
}
