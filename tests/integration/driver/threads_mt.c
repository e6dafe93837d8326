/* threads_mt.c: threads at the driver level (drv_threads): each
 * thread churns its own allocations on its own non-blocking stream and
 * looks entry points up again meanwhile; every thread must read back its own
 * data, natively and under the shim. Threaded: also built into the
 * ThreadSanitizer test binary, where the program is instrumented. */
#include <stdio.h>

#include "it_check.h"

Test(shim_it_mt, driver_threads_native) {
  it_result n;
  it_run_ok(&n, IT_NATIVE, ((const char *const[]){it_fake_driver_env(), NULL}), "drv_threads", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), "threads: n=8 iterations=200 errors=0 sync=0\n"));
  it_free(&n);
}

Test(shim_it_mt, driver_threads_under_the_shim) {
  it_result n, s;
  it_same(&n, &s, ((const char *const[]){it_fake_driver_env(), NULL}), "drv_threads", NULL);
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 1600), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0));
  it_free(&n);
  it_free(&s);
}
