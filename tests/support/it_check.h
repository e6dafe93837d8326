/* it_check.h: Criterion helpers shared by the shim integration tests
 * (tests/integration/): run a program and require a clean exit, with its
 * output in the failure message. */
#ifndef CUDAPOOL_IT_CHECK_H
#define CUDAPOOL_IT_CHECK_H

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "it_run.h"

#define IT_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static inline void it_run_ok(it_result *r, int how, const char *const *env, const char *prog,
                             const char *const *argv) {
  cr_assert(eq(int, it_run(r, how, env, prog, argv), 0), "could not start %s", prog);
  cr_assert(eq(int, r->status, 0), "%s %s exited with %d\n--- stdout\n%s--- stderr\n%s", prog,
            how == IT_SHIM ? "under the shim" : "natively", r->status, r->out, r->err);
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

#endif
