/* regions.c: regions (cudapool_push_tag/pop_tag, and the program's own
 * NVTX ranges) in the exit report, text and JSON. Program:
 * tests/programs/runtime/regions.c (its header lists the allocations; the
 * figures below follow from them: 1 MiB is live before the first tag). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

#define HEADING "cudapool: regions (peak: most bytes allocated while open):\n"

static void expect_errors_and_einval(it_result *r) {
  cr_assert(eq(long, it_val(r, "regions", "errors", -1), 0), "%s", r->out);
  long einval = it_val(r, "regions", "einval", -1);
  cr_expect(eq(long, it_val(r, "regions", "pop_empty", -1), einval), "%s", r->out);
  cr_expect(eq(long, it_val(r, "regions", "push_empty", -1), einval), "%s", r->out);
  cr_expect(eq(long, it_val(r, "regions", "push_null", -1), einval), "%s", r->out);
}

Test(regions, nested_tags_give_exact_peaks_bytes_and_counts_in_the_text_report) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "regions", NULL);
  expect_errors_and_einval(&r);
  const char *expected = HEADING
      "cudapool:   forward: peak 6291456 bytes, 5767168 bytes in 3 allocations, entered 1 time\n"
      "cudapool:   attention: peak 6291456 bytes, 4194304 bytes in 2 allocations, entered 2 times\n";
  cr_assert(ne(ptr, strstr(r.err, expected), NULL), "%s", r.err);
  cr_expect(eq(int, it_count_lines(r.err, ", entered "), 2), "%s", r.err);
  it_free(&r);
}

Test(regions, nvtx_push_pop_and_start_end_ranges_are_regions) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "regions", IT_ARGS("nvtx"));
  expect_errors_and_einval(&r);
  const char *expected = HEADING
      "cudapool:   forward: peak 6291456 bytes, 5767168 bytes in 3 allocations, entered 1 time\n"
      "cudapool:   attention: peak 6291456 bytes, 3145728 bytes in 1 allocation, entered 1 time\n"
      "cudapool:   span: peak 4718592 bytes, 1048576 bytes in 1 allocation, entered 1 time\n";
  cr_assert(ne(ptr, strstr(r.err, expected), NULL), "%s", r.err);
  it_free(&r);
}

/* The fake tool takes no core ranges: what matters is that cudapool did
 * not take the tool's place. */
Test(regions, nvtx_ranges_stay_a_tools_when_one_is_attached) {
  char inject[1200];
  snprintf(inject, sizeof inject, "NVTX_INJECTION64_PATH=%s/fakenvtx/libnvtx_inject.so", it_build());
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", "CUDAPOOL_VERBOSE=1", inject, NULL}, "regions",
            IT_ARGS("nvtx"));
  cr_assert(eq(long, it_val(&r, "regions", "errors", -1), 0), "%s", r.out);
  cr_expect(ne(ptr, strstr(r.err, "cudapool: NVTX ranges as regions off (a tool is attached: NVTX_INJECTION64_PATH "
                                  "is set)\n"),
               NULL),
            "%s", r.err);
  cr_expect(eq(ptr, strstr(r.err, "cudapool: regions"), NULL), "%s", r.err);
  it_free(&r);
}

/* A child of a process under cudapool inherits NVTX_INJECTION64_PATH naming
 * libcudapool itself: that is no tool (CUDAPOOL_NVTX stays off), and the
 * child's ranges are regions as its parent's were. */
Test(regions, an_inherited_injection_naming_cudapool_is_no_tool) {
  char inject[1200];
  snprintf(inject, sizeof inject, "NVTX_INJECTION64_PATH=%s/libcudapool.so", it_build());
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", "CUDAPOOL_VERBOSE=1", inject, NULL}, "regions",
            IT_ARGS("nvtx"));
  cr_assert(eq(long, it_val(&r, "regions", "errors", -1), 0), "%s", r.out);
  cr_expect(eq(int, it_count_lines(r.err, "cudapool: NVTX off (CUDAPOOL_NVTX=auto, no tool"), 1), "%s", r.err);
  cr_expect(eq(int, it_count_lines(r.err, "cudapool: NVTX ranges as regions on"), 1), "%s", r.err);
  cr_expect(ne(ptr, strstr(r.err, "cudapool:   span: peak 4718592 bytes, 1048576 bytes in 1 allocation"), NULL), "%s",
            r.err);
  it_free(&r);
}

Test(regions, verbose_says_nvtx_ranges_are_regions) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_VERBOSE=1", NULL}, "regions", NULL);
  cr_expect(eq(int, it_count_lines(r.err, "cudapool: NVTX ranges as regions on"), 1), "%s", r.err);
  it_free(&r);
}

Test(regions, nvtx_regions_off_leaves_the_programs_ranges_alone) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", "CUDAPOOL_NVTX_REGIONS=0", NULL}, "regions",
            IT_ARGS("nvtx"));
  cr_assert(eq(long, it_val(&r, "regions", "errors", -1), 0), "%s", r.out);
  cr_expect(eq(ptr, strstr(r.err, "cudapool: regions"), NULL), "%s", r.err);
  it_free(&r);
}

Test(regions, no_tag_no_regions_in_the_report) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "sites", NULL);
  cr_expect(eq(ptr, strstr(r.err, "regions"), NULL), "%s", r.err);
  it_free(&r);
}

Test(regions, json_lists_each_region_with_its_figures) {
  char dir[] = "/tmp/cp-regions-XXXXXX", stats[128], path[160];
  static char text[16384];
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/r.json", dir);
  snprintf(path, sizeof path, "%s/r.json", dir);
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, "CUDAPOOL_STATS_FORMAT=json", NULL}, "regions", NULL);
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL), "%s", r.err);
  text[fread(text, 1, sizeof text - 1, f)] = '\0';
  fclose(f);
  remove(path);
  rmdir(dir);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not JSON: %s", text);
  cr_assert(eq(sz, it_json_len(it_json_get(j, "regions")), 2), "%s", text);
  const char *expected = ",\"regions\":[{\"name\":\"forward\",\"peak_bytes\":6291456,\"allocated_bytes\":5767168,"
                         "\"allocations\":3,\"entries\":1,\"open\":0},{\"name\":\"attention\",\"peak_bytes\":6291456,"
                         "\"allocated_bytes\":4194304,\"allocations\":2,\"entries\":2,\"open\":0}]}";
  cr_expect(ne(ptr, strstr(text, expected), NULL), "%s", text);
  it_json_free(j);
  it_free(&r);
}

/* 255 names have a region each; the rest share "(other)" ("deep" too: 45
 * + 32 entries). A stack deeper than 32 levels opens nothing past them yet
 * pops level by level, and an allocation counts once in a name open many
 * times. */
Test(regions, names_past_the_table_share_other_and_deep_stacks_pop_evenly) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "regions", IT_ARGS("limits"));
  expect_errors_and_einval(&r);
  cr_expect(eq(long, it_val(&r, "info", "deep_pops", -1), 40), "%s", r.out);
  cr_expect(eq(long, it_val(&r, "info", "extra_pop", -1), it_val(&r, "regions", "einval", -2)), "%s", r.out);
  cr_expect(eq(int, it_count_lines(r.err, ", entered "), 256), "%s", r.err);
  cr_expect(ne(ptr, strstr(r.err, "cudapool:   r254: peak 0 bytes, 0 bytes in 0 allocations, entered 1 time\n"), NULL),
            "%s", r.err);
  cr_expect(ne(ptr, strstr(r.err, "cudapool:   (other): peak 1048576 bytes, 1048576 bytes in 1 allocation, entered 77 "
                                  "times\n"),
               NULL),
            "%s", r.err);
  cr_expect(eq(ptr, strstr(r.err, "r255"), NULL), "%s", r.err);
  it_free(&r);
}
