/* control.c: integration tests of what cudapool adds on top of the
 * CUDA API: the control API reached through dlsym, the options (limit, a bad
 * value's warning), the exit report as text and JSON, and the exported
 * symbol table of libcudapool.so (plus the versioned symbols of the fake the
 * other tests rely on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "it_check.h"

Test(shim_it, control_api_absent_natively) {
  it_result r;
  it_run_ok(&r, IT_NATIVE, NULL, "control", NULL);
  cr_assert(eq(str, r.out, "control: nopool\n"));
  it_free(&r);
}

Test(shim_it, control_api_through_dlsym) {
  it_result r;
  it_run_ok(&r, IT_SHIM, NULL, "control", NULL);
  cr_assert(eq(str, r.out,
               "control: version=100\n"
               "control: stats=0 badsize=22 badver=22 null=22 nodev=19\n"
               "control: hits=1 misses=1 allocated=1048576\n"
               "control: record=0 record_bogus=2\n"
               "control: empty=0 reserved_after=0 live_after=0\n"
               "control: reset_peak=0 peak_after=0\n"
               "control: set_limit=0 over=2 last=2 unlimited=0 after=0\n"
               "control: print_text=0 text_nonempty=1\n"
               "control: print_json=0 json_object=1\n"
               "control: print_bad=22\n"),
            "--- stderr\n%s", r.err);
  it_free(&r);
}

Test(shim_it, limit_refuses_what_does_not_fit) {
  it_result n, s;
  const char *const env[] = {"CUDAPOOL_LIMIT=4M", NULL};
  it_run_ok(&n, IT_NATIVE, env, "options", IT_ARGS("3M", "5M"));
  it_run_ok(&s, IT_SHIM, env, "options", IT_ARGS("3M", "5M"));
  cr_assert(eq(str, (char *)it_compared(&n),
               "alloc: size=3145728 rc=0 last=0\nalloc: size=5242880 rc=0 last=0\n"
               "options: errors=0\n"));
  cr_assert(eq(str, (char *)it_compared(&s),
               "alloc: size=3145728 rc=0 last=0\nalloc: size=5242880 rc=2 last=2\n"
               "options: errors=0\n"),
            "--- stderr\n%s", s.err);
  it_free(&n);
  it_free(&s);
}

Test(shim_it, bad_option_warns_once_and_uses_the_default) {
  it_result n, s;
  const char *const env[] = {"CUDAPOOL_LIMIT=banana", NULL};
  it_same(&n, &s, env, "options", IT_ARGS("3M", "5M"));
  cr_assert(eq(int, it_count_lines(s.err, "CUDAPOOL_LIMIT"), 1), "--- stderr\n%s", s.err);
  cr_assert(eq(int, it_count_lines(s.err, "banana"), 1), "--- stderr\n%s", s.err);
  cr_assert(eq(str, n.err, ""));
  it_free(&n);
  it_free(&s);
}

Test(shim_it, exit_report_text_on_stderr) {
  it_result n, s;
  const char *const env[] = {"CUDAPOOL_STATS=1", NULL};
  it_same(&n, &s, env, "intercept", NULL);
  cr_assert(eq(str, n.err, ""));
  cr_assert(gt(int, it_count_lines(s.err, "hit"), 0), "--- stderr\n%s", s.err);
  it_free(&n);
  it_free(&s);
}

static const char *const gauges[] = {"allocated_bytes", "reserved_bytes", "active_bytes", "cached_bytes"};
static const char *const counters[] = {
    "hits", "misses", "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "utilization"};

Test(shim_it, exit_report_json_to_a_file) {
  it_result s;
  char text[1 << 16];
  it_json *j = it_json_report(&s, "intercept", text, sizeof text);
  const it_json *devs = it_json_get(j, "devices");
  cr_assert(eq(int, it_json_type(devs), IT_JSON_ARR), "%s", text);
  cr_assert(ge(sz, it_json_len(devs), 1));
  const it_json *d = it_json_at(devs, 0);
  cr_assert(eq(int, it_json_type(it_json_get(d, "device")), IT_JSON_NUM), "%s", text);
  for (size_t i = 0; i < sizeof gauges / sizeof *gauges; i++) {
    const it_json *g = it_json_get(d, gauges[i]);
    cr_assert(eq(int, it_json_type(it_json_get(g, "current")), IT_JSON_NUM), "%s", gauges[i]);
    cr_assert(eq(int, it_json_type(it_json_get(g, "peak")), IT_JSON_NUM), "%s", gauges[i]);
  }
  for (size_t i = 0; i < sizeof counters / sizeof *counters; i++)
    cr_assert(eq(int, it_json_type(it_json_get(d, counters[i])), IT_JSON_NUM), "%s", counters[i]);
  cr_assert(eq(dbl, it_json_num(it_json_get(d, "hits")), 99));
  cr_assert(eq(dbl, it_json_num(it_json_get(d, "misses")), 1));
  cr_assert(eq(dbl, it_json_num(it_json_get(d, "num_device_alloc")), 1));
  it_json_free(j);
  it_free(&s);
}

Test(shim_it, json_parser_rejects_what_is_not_json) {
  const char *bad[] = {"", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "01", "\"x", "[1] 2", "tru"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    cr_assert(eq(ptr, it_json_parse(bad[i]), NULL), "accepted %s", bad[i]);
  it_json *j = it_json_parse(" {\"a\": [1, -2.5e3, \"s\\n\", true, null, {}]} ");
  cr_assert(ne(ptr, j, NULL));
  cr_assert(eq(sz, it_json_len(it_json_get(j, "a")), 6));
  cr_assert(eq(dbl, it_json_num(it_json_at(it_json_get(j, "a"), 1)), -2500));
  it_json_free(j);
}

/* Names nm prints for the defined dynamic symbols of lib, one per line. */
static const char *defined_symbols(it_result *r, const char *lib) {
  char cmd[8400];
  snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>&1 | awk 'NF==3 {print $3}'", lib);
  return it_shell(r, cmd);
}

static int has_line(const char *text, const char *line) {
  size_t n = strlen(line);
  for (const char *p = strstr(text, line); p; p = strstr(p + 1, line))
    if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) return 1;
  return 0;
}

Test(shim_it, shim_exports_only_unversioned_cuda_symbols) {
  char lib[4200];
  snprintf(lib, sizeof lib, "%s/libcudapool.so", it_build());
  it_result r = {0};
  const char *syms = defined_symbols(&r, lib);
  cr_assert(ne(ptr, (void *)syms, NULL));
  cr_assert(ne(ptr, strstr(syms, "cudaMalloc"), NULL), "nm says:\n%s", syms);
  int n = 0;
  for (const char *l = syms; *l; n++) {
    const char *nl = strchr(l, '\n');
    size_t len = nl ? (size_t)(nl - l) : strlen(l);
    char name[512];
    snprintf(name, sizeof name, "%.*s", (int)len, l);
    static const char *const exec_family[] = {"execve", "execv",  "execvp", "execvpe",
                                              "execl",  "execlp", "execle", "fexecve"};
    bool is_exec = false;
    for (size_t k = 0; k < sizeof exec_family / sizeof *exec_family; k++)
      is_exec |= strcmp(name, exec_family[k]) == 0;
    /* InitializeInjectionNvtx2: the NVTX tool entry (CUDAPOOL_NVTX_REGIONS). */
    cr_assert(strncmp(name, "cu", 2) == 0 || strncmp(name, "__cuda", 6) == 0 || strcmp(name, "dlsym") == 0 ||
                  is_exec || strcmp(name, "InitializeInjectionNvtx2") == 0,
              "unexpected export %s", name);
    cr_assert(eq(ptr, strchr(name, '@'), NULL), "versioned export %s", name);
    l = nl ? nl + 1 : l + len;
  }
  const char *required[] = {"cudaMalloc",
                            "cudaFree",
                            "cudaStreamSynchronize",
                            "cudaStreamSynchronize_ptsz",
                            "cudaDeviceSynchronize",
                            "cudapool_stats",
                            "cudapool_empty_cache",
                            "cudapool_reset_peak",
                            "cudapool_record_stream",
                            "cudapool_set_limit",
                            "cudapool_print_stats",
                            "cudapool_version",
                            "dlsym",
                            "execve",
                            "execvp",
                            "execlp",
                            "fexecve",
                            "cuGetProcAddress_v2",
                            "cuMemAlloc_v2",
                            "cuMemFree_v2"};
  for (size_t i = 0; i < sizeof required / sizeof *required; i++)
    cr_assert(has_line(syms, required[i]), "%s not exported", required[i]);
  it_free(&r);
}

Test(shim_it, fake_runtime_symbols_are_versioned_like_libcudart) {
  char lib[4200], cmd[4300];
  snprintf(lib, sizeof lib, "%s/fakecudart/libcudart.so.13", it_build());
  it_result r = {0};
  const char *syms = defined_symbols(&r, lib);
  cr_assert(has_line(syms, "cudaMalloc@@libcudart.so.13"), "nm says:\n%s", syms);
  cr_assert(has_line(syms, "cudaStreamSynchronize_ptsz@@libcudart.so.13"));
  cr_assert(has_line(syms, "fakecuda_calls@@libcudart.so.13"));
  snprintf(cmd, sizeof cmd, "nm -D --undefined-only '%s/progs/intercept' | awk '{print $2}'", it_build());
  cr_assert(has_line(it_shell(&r, cmd), "cudaMalloc@libcudart.so.13"));
  it_free(&r);
}
