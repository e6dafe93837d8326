/* sites.c: the call sites of CUDAPOOL_STACKS in the exit report. Program:
 * tests/programs/runtime/sites.c (three allocating functions, one called
 * twice; the peak holds 4 MiB + 2 x 3 MiB + 512 KiB in 22 MiB reserved:
 * a 20 MiB large segment and a 2 MiB small one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

/* The text lines of the report naming a site, in order. */
Test(sites, text_names_the_three_functions_with_exact_bytes_at_the_peak) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", "CUDAPOOL_STACKS=1", NULL}, "sites", NULL);
  cr_assert(eq(long, it_val(&r, "sites", "errors", -1), 0));
  const char *peak = strstr(r.err, "cudapool: call sites at the peak of reserved memory (23068672 bytes):\n");
  cr_assert(peak != NULL, "%s", r.err);
  const char *expected =
      "cudapool:   6291456 bytes in 2 blocks (27.3% of peak) at sites:alloc_activations+0x";
  const char *line = strchr(peak, '\n') + 1;
  cr_assert(eq(int, strncmp(line, expected, strlen(expected)), 0), "%s", r.err);
  line = strchr(line, '\n') + 1;
  expected = "cudapool:   4194304 bytes in 1 block (18.2% of peak) at sites:alloc_weights+0x";
  cr_assert(eq(int, strncmp(line, expected, strlen(expected)), 0), "%s", r.err);
  line = strchr(line, '\n') + 1;
  expected = "cudapool:   524288 bytes in 1 block (2.3% of peak) at sites:alloc_scratch+0x";
  cr_assert(eq(int, strncmp(line, expected, strlen(expected)), 0), "%s", r.err);
  line = strchr(line, '\n') + 1;
  expected = "cudapool: call sites of blocks never freed (at exit):\n";
  cr_assert(eq(int, strncmp(line, expected, strlen(expected)), 0), "%s", r.err);
  line = strchr(line, '\n') + 1;
  expected = "cudapool:   4194304 bytes in 1 block (18.2% of peak) at sites:alloc_weights+0x";
  cr_assert(eq(int, strncmp(line, expected, strlen(expected)), 0), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, " at sites:"), 4), "%s", r.err);
  it_free(&r);
}

/* Blocks cudaDeviceReset dropped leave the table: the weights allocated
 * again at the same address after a reset and freed are not "never freed",
 * and the peak holds one block, not the old one and the new. */
Test(sites, a_reset_drops_the_blocks_it_freed_from_the_sites) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", "CUDAPOOL_STACKS=1", NULL}, "sites",
            IT_ARGS("reset"));
  cr_assert(eq(long, it_val(&r, "sites", "errors", -1), 0), "%s", r.out);
  cr_assert(eq(long, it_val(&r, "sites", "same_address", -1), 1), "the test needs the address reused: %s", r.out);
  cr_assert(eq(ptr, strstr(r.err, "never freed"), NULL), "%s", r.err);
  cr_assert(ne(ptr, strstr(r.err, "cudapool:   4194304 bytes in 1 block ("), NULL), "%s", r.err);
  it_free(&r);
}

Test(sites, off_by_default_the_report_names_no_site) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "sites", NULL);
  cr_assert(eq(ptr, strstr(r.err, "call sites"), NULL), "%s", r.err);
  it_free(&r);
}

static it_json *json_report(it_result *r, const char *stacks, char *text, size_t cap) {
  char dir[] = "/tmp/cp-sites-XXXXXX", stats[128], path[160];
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/r.json", dir);
  it_run_ok(r, IT_SHIM, (const char *const[]){stats, "CUDAPOOL_STATS_FORMAT=json", stacks, NULL}, "sites", NULL);
  snprintf(path, sizeof path, "%s/r.json", dir);
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL), "%s", r->err);
  text[fread(text, 1, cap - 1, f)] = '\0';
  fclose(f);
  remove(path);
  rmdir(dir);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not JSON: %s", text);
  return j;
}

Test(sites, json_lists_sites_with_bytes_blocks_share_and_full_stacks) {
  static char text[65536];
  it_result r;
  it_json *j = json_report(&r, "CUDAPOOL_STACKS=4", text, sizeof text);
  const it_json *cs = it_json_get(j, "call_sites");
  cr_assert(cs != NULL, "%s", text);
  cr_expect(eq(dbl, it_json_num(it_json_get(cs, "peak_reserved")), 23068672.0), "%s", text);
  const it_json *peak = it_json_get(cs, "at_peak"), *end = it_json_get(cs, "at_exit");
  cr_assert(eq(sz, it_json_len(peak), 3), "%s", text);
  cr_assert(eq(sz, it_json_len(end), 1), "%s", text);
  const double bytes[] = {6291456, 4194304, 524288}, blocks[] = {2, 1, 1};
  for (size_t i = 0; i < 3; i++) {
    const it_json *s = it_json_at(peak, i);
    cr_expect(eq(dbl, it_json_num(it_json_get(s, "bytes")), bytes[i]), "%zu: %s", i, text);
    cr_expect(eq(dbl, it_json_num(it_json_get(s, "blocks")), blocks[i]), "%zu: %s", i, text);
    cr_expect(eq(dbl, it_json_num(it_json_get(s, "share")), (double)(long)(bytes[i] / 23068672.0 * 1e6 + 0.5) / 1e6),
              "%zu: %s", i, text);
    const it_json *frames = it_json_get(s, "frames");
    cr_expect(eq(int, it_json_type(frames), IT_JSON_ARR), "%s", text);
    cr_expect(le(sz, it_json_len(frames), 4), "CUDAPOOL_STACKS=4 keeps 4 frames: %s", text);
    cr_expect(eq(int, it_json_type(it_json_get(it_json_at(frames, 0), "offset")), IT_JSON_NUM), "%s", text);
  }
  cr_expect(eq(dbl, it_json_num(it_json_get(it_json_at(end, 0), "bytes")), 4194304.0), "%s", text);
  cr_expect(ne(ptr, strstr(text, "\"site\":\"sites:alloc_activations+0x"), NULL), "%s", text);
  cr_expect(ne(ptr, strstr(text, "\"object\":\"sites\",\"symbol\":\"alloc_weights\""), NULL), "%s", text);
  /* scripts/deps installs libunwind: the walk stackwalk.c prefers. */
  cr_expect(ne(ptr, strstr(text, "\"walker\":\"libunwind\"}"), NULL), "%s", text);
  it_json_free(j);
  it_free(&r);
}

Test(sites, a_malformed_depth_warns_once_and_keeps_stacks_off) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", "CUDAPOOL_STACKS=65", NULL}, "sites", NULL);
  cr_assert(eq(int, it_count_lines(r.err, "CUDAPOOL_STACKS"), 1), "%s", r.err);
  cr_assert(ne(ptr, strstr(r.err, "cudapool: warning: CUDAPOOL_STACKS=\"65\" is not a stack depth (accepted: 0/1 or a "
                                  "depth from 2 to 64); using the default (0: off)\n"),
               NULL),
            "%s", r.err);
  cr_assert(eq(ptr, strstr(r.err, "call sites"), NULL), "%s", r.err);
  it_free(&r);
}

/* The trace with CUDAPOOL_STACKS: each allocate line names its stack in the
 * Stack column (four stacks: main calls alloc_activations from two places,
 * one site), the other lines leave it empty, and TRACE.stacks.json holds
 * those ids with the frames naming the functions. */
Test(sites, the_trace_names_each_allocation_s_stack_and_its_table_the_frames) {
  char dir[] = "/tmp/cp-sites-trace-XXXXXX", trace[128], cmd[300];
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(trace, sizeof trace, "CUDAPOOL_TRACE=%s/t.csv", dir);
  it_result r, lines = {0}, table = {0};
  it_run_ok(&r, IT_SHIM, (const char *const[]){trace, "CUDAPOOL_STACKS=1", NULL}, "sites", NULL);
  cr_assert(eq(long, it_val(&r, "sites", "errors", -1), 0));
  /* Action and Stack of the program's allocate lines, in order; every
   * other line's Stack empty. */
  snprintf(cmd, sizeof cmd,
           "awk -F, 'NR==1{print; next} $3==\"allocate\"{printf \"%%s,%%s,%%s\\n\", $3, $5, $7; next} "
           "$7!=\"\"{print \"stack on a \" $3 \" line\"}' %s/t.csv",
           dir);
  cr_assert(eq(str, (char *)it_shell(&lines, cmd),
               "Thread,Time,Action,Pointer,Size,Stream,Stack\n"
               "allocate,4194304,0\n"
               "allocate,3145728,1\n"
               "allocate,3145728,2\n"
               "allocate,524288,3\n"));
  snprintf(cmd, sizeof cmd, "cat %s/t.csv.stacks.json", dir);
  const char *text = it_shell(&table, cmd);
  cr_assert(ne(ptr, (void *)text, NULL));
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "%s", text);
  cr_assert(eq(dbl, it_json_num(it_json_get(j, "version")), 1.0));
  const it_json *stacks = it_json_get(j, "stacks");
  cr_assert(eq(sz, it_json_len(stacks), 4), "%s", text);
  const char *const names[] = {"\"symbol\":\"alloc_weights\"", "\"symbol\":\"alloc_activations\"",
                               "\"symbol\":\"alloc_activations\"", "\"symbol\":\"alloc_scratch\""};
  for (size_t i = 0; i < 4; i++)
    cr_assert(eq(dbl, it_json_num(it_json_get(it_json_at(stacks, i), "id")), (double)i), "%s", text);
  /* Stack i's first frame is function i's (the table is in id order). */
  const char *at = text;
  for (size_t i = 0; i < 4; i++) {
    at = strstr(at, names[i]);
    cr_assert(ne(ptr, (void *)at, NULL), "%s not in order: %s", names[i], text);
    at++;
  }
  it_json_free(j);
  it_free(&lines);
  it_free(&table);
  it_free(&r);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert(eq(int, system(cmd), 0));
}
