/* stackwalk.h: the native stack walk behind CUDAPOOL_STACKS (stacks.c).
 *
 * Owns the choice of walker, made once at start: libunwind's
 * unw_backtrace() when libunwind.so.8 loads (dlopened with RTLD_LOCAL, never
 * linked: the library also defines _Unwind_* and a weak backtrace(), which a
 * preloaded dependency would put in front of the program's own C++ exception
 * unwinding), with its per-thread cache of frame descriptions
 * (UNW_CACHE_PER_THREAD: no lock shared between threads); else glibc's
 * backtrace(). Both read only unwind tables (.eh_frame), never frame
 * pointers, so code built without them is walked right. docs/DESIGN.md
 * ("Call sites: the walk") gives the numbers behind the choice.
 *
 * Invariants: cp_stackwalk returns at most max return addresses, innermost
 * first, the first being one inside cp_stackwalk itself (a frame of
 * libcudapool: stacks.c drops those); whichever walker is in use, the same
 * chain gives the same addresses. After cp_stackwalk_start the walk allocates nothing
 * on glibc's path; libunwind's first walk on a thread sets up that thread's
 * cache.
 *
 * Locking: start once, before any walk (init's pthread_once); the walk
 * itself takes no lock of ours. */
#ifndef CUDAPOOL_SHIM_STACKWALK_H
#define CUDAPOOL_SHIM_STACKWALK_H

#include <stdbool.h>

typedef enum cp_walker { CP_WALKER_GLIBC, CP_WALKER_LIBUNWIND } cp_walker_t;

/* Chooses the walker (libunwind when it loads) and walks once, so that the
 * first recorded allocation does not pay the loading. Returns the walker. */
cp_walker_t cp_stackwalk_start(void);
/* Uses this walker from now on (tests and the benchmark compare them);
 * false, and nothing changes, when it cannot be loaded. */
bool cp_stackwalk_use(cp_walker_t walker);
/* "libunwind" or "glibc": the walker in use. */
const char *cp_stackwalk_name(void);
/* Up to max return addresses of the calling thread's stack into pcs. */
int cp_stackwalk(void **pcs, int max);

#endif
