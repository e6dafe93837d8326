/* dlclose.c: libcudapool.so opened with dlopen, called, and closed, in a
 * process that runs on (the library is linked -z nodelete, mk/shim.mk:
 * cudapool's threads run its code until the process ends). */
#include <stdlib.h>
#include <unistd.h>

#include "it_check.h"

/* The call starts the live-stats thread, the SIGTERM reporter and the trace
 * writer; after dlclose the library is still mapped, the process ends
 * normally, and its live-stats file is gone with it. */
Test(shim_it, dlclose_leaves_the_library_loaded) {
  char lib[4200];
  snprintf(lib, sizeof lib, "%s/libcudapool.so", it_build());
  char dir[] = "/tmp/cp-dlclose-XXXXXX", trace[64], live[96];
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(trace, sizeof trace, "CUDAPOOL_TRACE=%s/t.csv", dir);
  const char *const env[] = {"CUDAPOOL_STATS=1", trace, NULL};
  it_result r;
  it_run_ok(&r, IT_NATIVE, env, "dlclose", IT_ARGS(lib));
  cr_assert(eq(str, (char *)it_line(&r, "dlclose"), "dlclose: opened=1 live=1 closed=0 still_mapped=1"),
            "%s\n--- stderr\n%s", r.out, r.err);
  snprintf(live, sizeof live, "/dev/shm/cudapool.%lu.%ld", (unsigned long)geteuid(), (long)r.pid);
  cr_assert(ne(int, access(live, F_OK), 0), "%s left behind", live);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert(eq(int, system(cmd), 0));
  it_free(&r);
}
