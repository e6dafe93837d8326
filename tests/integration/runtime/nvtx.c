/* nvtx.c: integration tests of CUDAPOOL_NVTX: what NVIDIA's tools are told
 * about cudapool's segments and blocks. The tool is the fake injection
 * library of tests/fakes/nvtx/, which logs every NVTX call it receives to
 * NVTX_FAKE_LOG; the program is tests/programs/runtime/nvtx.c, which prints
 * the address of every block it gets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

#define LOG_MAX 8192

typedef struct nvtx_run {
  it_result r;
  char dir[32];
  char log[LOG_MAX]; /* "" when the tool wrote nothing */
  bool logged;       /* the tool created its log: NVTX reached it */
} nvtx_run;

/* Runs progs/PROG under the shim with env (up to 6 settings) plus the log's
 * NVTX_FAKE_LOG, and, when tool, NVTX_INJECTION64_PATH = the fake. */
static void run_nvtx_as(nvtx_run *n, bool tool, const char *const *env, const char *prog,
                        const char *const *argv) {
  strcpy(n->dir, "/tmp/cudapool-nvtx-XXXXXX");
  cr_assert(ne(ptr, mkdtemp(n->dir), NULL));
  char log_var[96], inject_var[1200], path[64];
  snprintf(path, sizeof path, "%s/log", n->dir);
  snprintf(log_var, sizeof log_var, "NVTX_FAKE_LOG=%s", path);
  snprintf(inject_var, sizeof inject_var, "NVTX_INJECTION64_PATH=%s/fakenvtx/libnvtx_inject.so", it_build());
  const char *all[10] = {log_var};
  int k = 1;
  if (tool) all[k++] = inject_var;
  for (int i = 0; env && env[i] && k < 9; i++) all[k++] = env[i];
  all[k] = NULL;
  it_run_ok(&n->r, IT_SHIM, all, prog, argv);
  FILE *f = fopen(path, "r");
  n->logged = f != NULL;
  size_t len = f ? fread(n->log, 1, LOG_MAX - 1, f) : 0;
  n->log[len] = '\0';
  if (f) fclose(f);
  remove(path);
  remove(n->dir);
}

static void run_nvtx(nvtx_run *n, bool tool, const char *const *env, const char *const *argv) {
  run_nvtx_as(n, tool, env, "nvtx", argv);
}

/* Another program of tests/programs/runtime, no arguments, with the tool. */
static void run_nvtx_prog(nvtx_run *n, const char *const *env, const char *prog) {
  run_nvtx_as(n, true, env, prog, NULL);
}

/* The address of the i-th block the program printed. */
static unsigned long block(nvtx_run *n, int i) {
  const char *line = n->r.out;
  for (int seen = 0; (line = strstr(line, "info: alloc addr=")) != NULL; line++, seen++)
    if (seen == i) return strtoul(line + strlen("info: alloc addr="), NULL, 16);
  cr_assert(false, "no block %d in\n%s", i, n->r.out);
  return 0;
}

/* 1000 and 5000 bytes share a small (2 MiB) segment, 3M gets a large one
 * (20 MiB), the last 1000 bytes go back into the small one. */
#define BLOCKS IT_ARGS("1000", "5000", "3M", "1000")

/* What the tool must see for BLOCKS: each segment a heap when it is made,
 * each block a region of exactly its request in its segment's heap, each
 * free that region unregistered, and empty_cache unregistering the heaps
 * inside its range (its barrier marked). */
static void expect_blocks_log(nvtx_run *n) {
  unsigned long a0 = block(n, 0), a1 = block(n, 1), a2 = block(n, 2), a3 = block(n, 3);
  cr_assert(eq(ulong, a1, a0 + 1024), "5000 bytes follow 1000 rounded to 512s");
  cr_assert(eq(ulong, a3, a0 + 1024 + 5120));
  char want[LOG_MAX];
  snprintf(want, sizeof want,
           "domain cudapool\n"
           "heap+ 1 base=%#lx size=2097152\n"
           "region+ heap=1 addr=%#lx size=1000\n"
           "region+ heap=1 addr=%#lx size=5000\n"
           "heap+ 2 base=%#lx size=20971520\n"
           "region+ heap=2 addr=%#lx size=3145728\n"
           "region+ heap=1 addr=%#lx size=1000\n"
           "region- addr=%#lx\n"
           "region- addr=%#lx\n"
           "region- addr=%#lx\n"
           "region- addr=%#lx\n"
           "push cudapool_empty_cache\n"
           "mark cudapool barrier\n"
           "heap- 1\n"
           "heap- 2\n"
           "pop\n",
           a0, a0, a1, a2, a2, a3, a0, a1, a2, a3);
  cr_assert(eq(str, n->log, want), "--- stdout\n%s--- stderr\n%s", n->r.out, n->r.err);
}

Test(shim_it, nvtx_1_registers_segments_as_heaps_and_blocks_as_regions) {
  nvtx_run n;
  run_nvtx(&n, true, IT_ARGS("CUDAPOOL_NVTX=1"), BLOCKS);
  expect_blocks_log(&n);
  cr_assert(eq(int, it_count_lines(n.r.out, "nvtx: blocks=4"), 1));
  it_free(&n.r);
}

Test(shim_it, nvtx_auto_is_on_when_a_tool_is_attached) {
  nvtx_run n;
  run_nvtx(&n, true, IT_ARGS("CUDAPOOL_VERBOSE=1"), BLOCKS);
  expect_blocks_log(&n);
  cr_assert(eq(int,
               it_count_lines(n.r.err, "cudapool: NVTX on (CUDAPOOL_NVTX=auto, a tool is attached: "
                                       "NVTX_INJECTION64_PATH is set)"),
               1),
            "--- stderr\n%s", n.r.err);
  it_free(&n.r);
}

Test(shim_it, nvtx_auto_is_off_without_a_tool) {
  nvtx_run n;
  run_nvtx(&n, false, IT_ARGS("CUDAPOOL_VERBOSE=1"), BLOCKS);
  cr_assert(not(n.logged), "the fake was loaded:\n%s", n.log);
  cr_assert(eq(int,
               it_count_lines(n.r.err, "cudapool: NVTX off (CUDAPOOL_NVTX=auto, no tool: "
                                       "NVTX_INJECTION64_PATH unset)"),
               1),
            "--- stderr\n%s", n.r.err);
  it_free(&n.r);
}

Test(shim_it, nvtx_0_registers_nothing_even_with_a_tool) {
  nvtx_run n;
  run_nvtx(&n, true, IT_ARGS("CUDAPOOL_NVTX=0"), BLOCKS);
  cr_assert(not(n.logged), "NVTX was called with CUDAPOOL_NVTX=0:\n%s", n.log);
  cr_assert(eq(int, it_count_lines(n.r.out, "nvtx: blocks=4"), 1));
  it_free(&n.r);
}

Test(shim_it, nvtx_bad_value_warns_once_and_follows_auto) {
  nvtx_run n;
  run_nvtx(&n, true, IT_ARGS("CUDAPOOL_NVTX=maybe"), BLOCKS);
  cr_assert(eq(str, n.r.err,
               "cudapool: warning: CUDAPOOL_NVTX=\"maybe\" is not an NVTX setting (accepted: auto, 0 or 1); "
               "using the default (auto)\n"));
  expect_blocks_log(&n);
  it_free(&n.r);
}

/* A refusal is a mark with the request; the refused request has no region. */
Test(shim_it, nvtx_marks_an_out_of_memory) {
  nvtx_run n;
  run_nvtx(&n, true, IT_ARGS("CUDAPOOL_NVTX=1", "CUDAPOOL_LIMIT=4M"), IT_ARGS("1000", "oom:8M"));
  cr_assert(eq(int, it_count_lines(n.r.out, "oom: rc=2"), 1), "--- stdout\n%s", n.r.out);
  unsigned long a0 = block(&n, 0);
  char want[LOG_MAX];
  snprintf(want, sizeof want,
           "domain cudapool\n"
           "heap+ 1 base=%#lx size=2097152\n"
           "region+ heap=1 addr=%#lx size=1000\n"
           "mark cudapool out of memory: asked 8.00 MiB\n"
           "region- addr=%#lx\n"
           "push cudapool_empty_cache\n"
           "mark cudapool barrier\n"
           "heap- 1\n"
           "pop\n",
           a0, a0, a0);
  cr_assert(eq(str, n.log, want), "--- stderr\n%s", n.r.err);
  it_free(&n.r);
}

/* The trace keeps its observer: both see every block. */
Test(shim_it, nvtx_and_trace_share_the_pool_observer) {
  nvtx_run n;
  char trace[64], trace_var[96];
  snprintf(trace, sizeof trace, "/tmp/cudapool-nvtx-trace.%d", (int)getpid());
  snprintf(trace_var, sizeof trace_var, "CUDAPOOL_TRACE=%s", trace);
  run_nvtx(&n, true, IT_ARGS("CUDAPOOL_NVTX=1", trace_var), BLOCKS);
  expect_blocks_log(&n);
  cr_assert(eq(int, access(trace, R_OK), 0), "no trace at %s", trace);
  remove(trace);
  it_free(&n.r);
}

/* The log with every address ("0x...") replaced by "*". */
static void mask_addresses(const char *log, char *out, size_t cap) {
  size_t k = 0;
  for (const char *p = log; *p && k + 2 < cap;) {
    if (p[0] == '0' && p[1] == 'x') {
      out[k++] = '*';
      for (p += 2; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f');) p++;
    } else {
      out[k++] = *p++;
    }
  }
  out[k] = '\0';
}

/* cudaDeviceReset takes the segments with it: their heaps are unregistered
 * at once, before any new segment (progs/reset: three 1 MiB blocks, one
 * freed, the reset, one new block). */
Test(shim_it, nvtx_device_reset_unregisters_its_heaps) {
  nvtx_run n;
  const char *const env[] = {"CUDAPOOL_NVTX=1", NULL};
  run_nvtx_prog(&n, env, "reset");
  char masked[LOG_MAX];
  mask_addresses(n.log, masked, sizeof masked);
  cr_assert(eq(str, masked,
               "domain cudapool\n"
               "heap+ 1 base=* size=2097152\n"
               "region+ heap=1 addr=* size=1048576\n"
               "region+ heap=1 addr=* size=1048576\n"
               "heap+ 2 base=* size=2097152\n"
               "region+ heap=2 addr=* size=1048576\n"
               "region- addr=*\n"
               "heap- 1\n"
               "heap- 2\n"
               "heap+ 3 base=* size=2097152\n"
               "region+ heap=3 addr=* size=1048576\n"
               "region- addr=*\n"),
            "--- log\n%s--- stdout\n%s--- stderr\n%s", n.log, n.r.out, n.r.err);
  it_free(&n.r);
}

/* An expandable segment's whole reserved range (as large as the fake
 * device's 16 GiB) is one heap, its blocks regions of it whichever pages are
 * mapped; it goes when the range is given back (progs/drv_expandable, at the
 * driver level). */
/* An expandable segment is no heap: compute-sanitizer refuses a heap over
 * reserved, partly unmapped addresses and then every region in it (401
 * warnings on the H100, memcheck stress CUDAPOOL_EXPANDABLE=1), so neither
 * its range nor its blocks are registered; the range around empty_cache
 * stays. */
Test(shim_it, nvtx_expandable_segments_are_not_registered) {
  nvtx_run n;
  /* The fake driver by name, as tests/integration/driver/ do: a sanitizer's
   * dlopen interceptor does not search the program's RUNPATH. */
  char lib[1100];
  snprintf(lib, sizeof lib, "LD_LIBRARY_PATH=%s/fakecuda", it_build());
  const char *const env[] = {lib, "CUDAPOOL_NVTX=1", "CUDAPOOL_EXPANDABLE=1", NULL};
  run_nvtx_prog(&n, env, "drv_expandable");
  char masked[LOG_MAX];
  mask_addresses(n.log, masked, sizeof masked);
  cr_assert(eq(str, masked,
               "domain cudapool\n"
               "push cudapool_empty_cache\n"
               "pop\n"
               "push cudapool_empty_cache\n"
               "pop\n"),
            "--- log\n%s--- stdout\n%s--- stderr\n%s", n.log, n.r.out, n.r.err);
  it_free(&n.r);
}

/* Under the shim the program's own lines are those it prints natively. */
Test(shim_it, nvtx_changes_nothing_the_program_sees) {
  it_result native, shim;
  it_same(&native, &shim, IT_ARGS("CUDAPOOL_NVTX=1"), "nvtx", BLOCKS);
  it_free(&native);
  it_free(&shim);
}
