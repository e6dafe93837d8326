/* it_check.h: Criterion helpers shared by the shim integration tests
 * (tests/integration/): run a program and require a clean exit, with its
 * output in the failure message. */
#ifndef CUDAPOOL_IT_CHECK_H
#define CUDAPOOL_IT_CHECK_H

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "it_run.h"

#define IT_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static inline void it_run_ok(it_result *r, int how, const char *const *env, const char *prog,
                             const char *const *argv) {
  cr_assert(eq(int, it_run(r, how, env, prog, argv), 0), "could not start %s", prog);
  cr_assert(eq(int, r->status, 0), "%s %s exited with %d\n--- stdout\n%s--- stderr\n%s", prog,
            how != IT_NATIVE ? "under the shim" : "natively", r->status, r->out, r->err);
}

/* Runs prog natively and under the shim with the same settings and requires
 * the compared lines (all but pool:/info:) to be identical. */
static inline void it_same(it_result *native, it_result *shim, const char *const *env, const char *prog,
                           const char *const *argv) {
  it_run_ok(native, IT_NATIVE, env, prog, argv);
  it_run_ok(shim, IT_SHIM, env, prog, argv);
  cr_assert(eq(str, (char *)it_compared(shim), (char *)it_compared(native)),
            "%s differs under the shim\n--- shim stderr\n%s", prog, shim->err);
}

/* Runs prog under the shim with its exit report as JSON in a temporary
 * file, and returns the report parsed (text holds it, for messages). */
static inline it_json *it_json_report(it_result *s, const char *prog, char *text, size_t cap) {
  char dir[] = "/tmp/cudapool-it-XXXXXX", pattern[128], path[128];
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(pattern, sizeof pattern, "CUDAPOOL_STATS=%s/report.%%p.json", dir);
  const char *const env[] = {pattern, "CUDAPOOL_STATS_FORMAT=json", NULL};
  it_run_ok(s, IT_SHIM, env, prog, NULL);
  snprintf(path, sizeof path, "%s/report.%d.json", dir, (int)s->pid);
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL), "no report at %s\n--- stderr\n%s", path, s->err);
  size_t len = fread(text, 1, cap - 1, f);
  text[len] = '\0';
  fclose(f);
  remove(path);
  remove(dir);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not JSON:\n%s", text);
  return j;
}

#endif
