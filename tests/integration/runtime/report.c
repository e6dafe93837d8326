/* report.c: what the exit report says of the process, for a person (the
 * text report names blocks never freed) and for monitoring (the JSON report
 * carries pid, host, rank, command, mode, limit, wall time, and what was
 * still allocated at exit). Program: tests/programs/runtime/leak.c (keeps
 * 2 MiB + 1024 bytes in 2 blocks). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

Test(report, text_names_what_was_never_freed) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "leak", NULL);
  cr_assert(eq(int, it_count_lines(r.err, "still allocated at exit"), 1), "%s", r.err);
  cr_assert(ne(ptr, strstr(r.err, "cudapool: device 0: 2 blocks, 2.00 MiB still allocated at exit (never freed by "
                                   "the program)\n"),
               NULL),
            "%s", r.err);
  it_free(&r);
}

Test(report, text_of_a_program_that_freed_everything_has_no_such_line) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "lifecycle", IT_ARGS("fork"));
  cr_assert(ne(ptr, strstr(r.err, "cudapool: exit report") ? r.err : strstr(r.err, "cudapool: process"), NULL),
            "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "still allocated"), 0), "%s", r.err);
  it_free(&r);
}

Test(report, json_carries_the_process_and_what_was_never_freed) {
  char dir[] = "/tmp/cp-report-XXXXXX", stats[128], path[160], text[8192];
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/r.json", dir);
  it_result r;
  it_run_ok(&r, IT_SHIM,
            (const char *const[]){stats, "CUDAPOOL_STATS_FORMAT=json", "CUDAPOOL_LIMIT=8G", "RANK=3", NULL}, "leak",
            NULL);
  snprintf(path, sizeof path, "%s/r.json", dir);
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL), "%s", r.err);
  text[fread(text, 1, sizeof text - 1, f)] = '\0';
  fclose(f);
  remove(path);
  rmdir(dir);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not JSON: %s", text);
  const it_json *proc = it_json_get(j, "process");
  cr_assert(proc != NULL, "%s", text);
  cr_expect(eq(dbl, it_json_num(it_json_get(proc, "pid")), (double)r.pid), "%s", text);
  cr_expect(eq(dbl, it_json_num(it_json_get(proc, "rank")), 3.0), "%s", text);
  cr_expect(ge(dbl, it_json_num(it_json_get(proc, "wall_s")), 0.0), "%s", text);
  cr_expect(eq(int, it_json_type(it_json_get(proc, "host")), IT_JSON_STR), "%s", text);
  cr_expect(ne(ptr, strstr(text, "\"mode\":\"auto\",\"limit\":\"8.00 GiB\""), NULL), "%s", text);
  cr_expect(ne(ptr, strstr(text, "/progs/leak\""), NULL), "the command: %s", text);
  const it_json *still = it_json_get(j, "still_allocated");
  cr_assert(still != NULL, "%s", text);
  cr_expect(eq(dbl, it_json_num(it_json_get(still, "blocks")), 2.0), "%s", text);
  cr_expect(eq(dbl, it_json_num(it_json_get(still, "bytes")), 2.0 * 1048576 + 1024), "%s", text);
  it_json_free(j);
  it_free(&r);
}

Test(report, json_rank_is_null_without_a_launcher) {
  char text[8192];
  it_result r;
  it_json *j = it_json_report(&r, "leak", text, sizeof text);
  cr_expect(eq(int, it_json_type(it_json_get(it_json_get(j, "process"), "rank")), IT_JSON_NULL), "%s", text);
  it_json_free(j);
  it_free(&r);
}
