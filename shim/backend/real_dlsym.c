/* real_dlsym.c: glibc's own dlsym, found once by version (dlvsym) and kept,
 * for the dlsym door (entry/dlsym_hook.c) and the driver table
 * (driver_api.c), which must never call the exported dlsym: that one is
 * cudapool's, and a lookup through it could recurse.
 *
 * cp_find_real_dlsym may run before anything else of cudapool and before
 * the sanitizer runtimes are set up (they look their interceptors up with
 * dlsym while they initialise): it is not instrumented, touches only one
 * static word, allocates nothing and takes no lock.
 *
 * Threads: the cached pointer is an atomic written with the same value by
 * whoever races to find it. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

#include "backend/driver.h"

static _Atomic(cp_dlsym_fn *) real_dlsym;

/* glibc 2.34 moved dlsym into libc.so.6 under a new version; older ones
 * (and AArch64's base version) keep the first. */
__attribute__((no_sanitize("address", "undefined", "thread"))) cp_dlsym_fn *cp_find_real_dlsym(void) {
  cp_dlsym_fn *fn = atomic_load_explicit(&real_dlsym, memory_order_acquire);
  if (fn) return fn;
  static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  for (size_t i = 0; !fn && i < sizeof versions / sizeof versions[0]; i++)
    fn = (cp_dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
  if (fn) atomic_store_explicit(&real_dlsym, fn, memory_order_release);
  return fn;
}

void *cp_real_dlsym(void *handle, const char *name) {
  cp_dlsym_fn *fn = cp_find_real_dlsym();
  return fn ? fn(handle, name) : NULL;
}
