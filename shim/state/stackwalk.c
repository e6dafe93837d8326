/* stackwalk.c: the two walkers and the choice between them (stackwalk.h).
 *
 * libunwind is found by dlopen, by its SONAME (Debian's libunwind8, the
 * package libunwind-dev's header comes with), and its entry points by their
 * real names (_ULx86_64_* on x86-64: libunwind.h renames most unw_* to
 * them by macro; unw_backtrace keeps its own name). When one is missing,
 * glibc's walk is used. */

#include "stackwalk.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stddef.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

typedef int walk_fn(void **pcs, int max);
typedef int set_caching_fn(unw_addr_space_t, unw_caching_policy_t);

#define STR2(x) #x
#define STR(x) STR2(x)
/* The real name libunwind.h's macros give a function or variable in this
 * architecture: _ULx86_64_set_caching_policy and so on. */
#define UNW_REAL_NAME(name) STR(UNW_OBJ(name))

static walk_fn *unw_walk;
static walk_fn *walk = backtrace;
static cp_walker_t in_use = CP_WALKER_GLIBC;

/* libunwind's walk, set up once: NULL when the library is not there. */
static walk_fn *load_libunwind(void) {
  static bool tried;
  if (tried) return unw_walk;
  tried = true;
  void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return NULL;
  walk_fn *found = (walk_fn *)dlsym(lib, "unw_backtrace");
  set_caching_fn *set_caching = (set_caching_fn *)dlsym(lib, UNW_REAL_NAME(set_caching_policy));
  unw_addr_space_t *local = (unw_addr_space_t *)dlsym(lib, UNW_REAL_NAME(local_addr_space));
  if (!found || !set_caching || !local) return NULL;
  /* Per thread: the global cache takes a lock on every walk, which threads
   * allocating at once would fight over. */
  set_caching(*local, UNW_CACHE_PER_THREAD);
  return unw_walk = found;
}

bool cp_stackwalk_use(cp_walker_t walker) {
  walk_fn *chosen = walker == CP_WALKER_LIBUNWIND ? load_libunwind() : backtrace;
  if (!chosen) return false;
  walk = chosen, in_use = walker;
  /* The first walk loads what the walker needs (glibc's loads libgcc_s:
   * malloc, dlopen): here, not on an allocation. */
  void *warm[4];
  walk(warm, 4);
  return true;
}

cp_walker_t cp_stackwalk_start(void) {
  if (!cp_stackwalk_use(CP_WALKER_LIBUNWIND)) cp_stackwalk_use(CP_WALKER_GLIBC);
  return in_use;
}

const char *cp_stackwalk_name(void) { return in_use == CP_WALKER_LIBUNWIND ? "libunwind" : "glibc"; }

/* Not a tail call, under every optimisation level: the first address is
 * the one into this function, whichever walker runs. */
int cp_stackwalk(void **pcs, int max) {
  int n = walk(pcs, max);
  __asm__ volatile("" ::: "memory");
  return n;
}
