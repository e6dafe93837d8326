/* real.c: resolving the real CUDA runtime (see real.h). */
#include "real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

cp_real_t cp_real;
static bool all_needed_found;
static pthread_once_t resolved = PTHREAD_ONCE_INIT;

/* A runtime loaded into a local scope (dlopen without RTLD_GLOBAL) is
 * invisible to RTLD_NEXT; look there by handle. */
static void *lookup(const char *name) {
  void *fn = dlsym(RTLD_NEXT, name);
  if (fn) return fn;
  static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  for (size_t i = 0; i < sizeof sonames / sizeof sonames[0] && !fn; i++) {
    void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      fn = dlsym(h, name);
      dlclose(h);
    }
  }
  return fn;
}

static void resolve(void) {
  bool ok = true;
#define CP_REAL_RESOLVE(name, needed)                                                        \
  cp_real.name = (__typeof__(name) *)lookup(#name);                                          \
  if (!cp_real.name && (needed)) {                                                           \
    fprintf(stderr, "cudapool: cannot find the CUDA runtime's " #name                        \
                    "; passing every call through\n");                                       \
    ok = false;                                                                              \
  }
  CP_REAL_FUNCS(CP_REAL_RESOLVE)
#undef CP_REAL_RESOLVE
  all_needed_found = ok;
}

void cp_real_init(void) { pthread_once(&resolved, resolve); }

bool cp_real_ready(void) {
  cp_real_init();
  return all_needed_found;
}
