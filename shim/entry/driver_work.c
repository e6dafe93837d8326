/* driver_work.c: seeing the work a program submits through the driver
 * before it is submitted (issue 25). Every row of driver_work.h's
 * CP_DRV_WORK has a wrapper cp_w_<name> that tells the learned order which
 * stream gets the work (cp_order_submit), calls libcuda's own function with
 * the program's arguments, and returns its result unchanged. The wrappers
 * are exported under the driver's names (programs linked with -lcuda) and
 * handed out instead of libcuda's functions by the dlsym and
 * cuGetProcAddress doors (dlsym_hook.c), recognised by the pointer libcuda
 * answered, so each variant keeps its own ABI.
 *
 * libcuda's functions are looked up in the libcuda the program loaded
 * (cp_drv_handle), all rows at once, the first time a door or a wrapper
 * needs them after libcuda is there. A call the shim makes itself (cp_inside:
 * the runtime layer's own real calls) passes straight through.
 *
 * Invariant: the rows of CP_DRV_WORK are sorted by name (strcmp), so the
 * dlsym router can search them without a lock or a library call
 * (tests/unit/shim/driver_work.c checks the order).
 *
 * Threads: `lock` guards the lookup; the table is written once under it,
 * read with atomic loads. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "entry/driver_work.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "backend/driver.h"
#include "state/order.h"
#include "state/shim.h"

enum {
#define CP_DW_INDEX(name, kind, params, args, stream) DW_##name,
#define CP_DW_INDEX1(name) DW_##name,
  CP_DRV_WORK(CP_DW_INDEX) CP_DRV_WORK_BY_HAND(CP_DW_INDEX1) DW_COUNT,
  DW_SORTED = DW_cuLaunchCooperativeKernelMultiDevice /* the sorted rows come first */
#undef CP_DW_INDEX
#undef CP_DW_INDEX1
};

static const char *const names[DW_COUNT] = {
#define CP_DW_NAME(name, kind, params, args, stream) #name,
#define CP_DW_NAME1(name) #name,
    CP_DRV_WORK(CP_DW_NAME) CP_DRV_WORK_BY_HAND(CP_DW_NAME1)
#undef CP_DW_NAME
#undef CP_DW_NAME1
};

static _Atomic(void *) real[DW_COUNT];
static atomic_bool resolved;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Every row looked up in libcuda once it is loaded; until then, nothing. */
static void resolve(void) {
  if (atomic_load_explicit(&resolved, memory_order_acquire)) return;
  void *h = cp_drv_handle();
  if (!h) return;
  pthread_mutex_lock(&lock);
  if (!atomic_load(&resolved)) {
    for (int i = 0; i < DW_COUNT; i++) atomic_store_explicit(&real[i], cp_real_dlsym(h, names[i]), memory_order_release);
    atomic_store_explicit(&resolved, true, memory_order_release);
  }
  pthread_mutex_unlock(&lock);
}

static void *real_of(int i) {
  void *fn = atomic_load_explicit(&real[i], memory_order_acquire);
  if (!fn && !atomic_load_explicit(&resolved, memory_order_acquire)) {
    resolve();
    fn = atomic_load_explicit(&real[i], memory_order_acquire);
  }
  return fn;
}

/* The call itself: NOT_INITIALIZED, as for the served entry points, when
 * libcuda lacks the function (a -lcuda program built for a newer driver). */
#define CP_DW_WRAP(name, kind, params, args, stream)                           \
  CUresult cp_w_##name params {                                                \
    __typeof__(name) *cp_dw_real = (__typeof__(name) *)real_of(DW_##name);     \
    if (!cp_dw_real) return CUDA_ERROR_NOT_INITIALIZED;                        \
    if (cp_inside) return cp_dw_real args;                                     \
    int cp_dw_token = cp_order_submit((cudaStream_t)(stream), CP_SUBMIT_##kind); \
    CUresult cp_dw_rc = cp_dw_real args;                                       \
    cp_order_submit_done(cp_dw_token);                                         \
    return cp_dw_rc;                                                           \
  }                                                                            \
  CP_DRV_EXPORT(name)
CP_DRV_WORK(CP_DW_WRAP)
#undef CP_DW_WRAP

/* One launch on one stream per device, the streams in the array. A list
 * longer than the shim's device table (more devices than cudapool handles)
 * cannot be told apart: the order is given up before it runs. */
CUresult cp_w_cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList, unsigned int numDevices,
                                                   unsigned int flags) {
  __typeof__(cuLaunchCooperativeKernelMultiDevice) *fn =
      (__typeof__(cuLaunchCooperativeKernelMultiDevice) *)real_of(DW_cuLaunchCooperativeKernelMultiDevice);
  if (!fn) return CUDA_ERROR_NOT_INITIALIZED;
  if (cp_inside || !launchParamsList) return fn(launchParamsList, numDevices, flags);
  if (numDevices > CP_MAX_DEVICES) {
    cp_order_give_up("cuLaunchCooperativeKernelMultiDevice over more devices than cudapool handles");
    return fn(launchParamsList, numDevices, flags);
  }
  int tokens[CP_MAX_DEVICES];
  for (unsigned i = 0; i < numDevices; i++)
    tokens[i] = cp_order_submit((cudaStream_t)launchParamsList[i].hStream, CP_SUBMIT_PLAIN);
  CUresult rc = fn(launchParamsList, numDevices, flags);
  for (unsigned i = 0; i < numDevices; i++) cp_order_submit_done(tokens[i]);
  return rc;
}
CP_DRV_EXPORT(cuLaunchCooperativeKernelMultiDevice)

static void *const wrappers[DW_COUNT] = {
#define CP_DW_WRAPPER(name, kind, params, args, stream) (void *)cp_w_##name,
#define CP_DW_WRAPPER1(name) (void *)cp_w_##name,
    CP_DRV_WORK(CP_DW_WRAPPER) CP_DRV_WORK_BY_HAND(CP_DW_WRAPPER1)
#undef CP_DW_WRAPPER
#undef CP_DW_WRAPPER1
};

void *cp_drv_work_wrapper(void *fn) {
  if (!fn) return NULL;
  resolve();
  for (int i = 0; i < DW_COUNT; i++)
    if (atomic_load_explicit(&real[i], memory_order_acquire) == fn) return wrappers[i];
  return NULL;
}

/* Whether name, less its version and per-thread suffixes, is base. */
static bool has_base(const char *name, const char *base) {
  size_t n = strlen(base);
  if (strncmp(name, base, n) != 0) return false;
  const char *s = name + n;
  if (s[0] == '_' && s[1] == 'v' && s[2] >= '0' && s[2] <= '9') {
    s += 2;
    while (*s >= '0' && *s <= '9') s++;
  }
  return !*s || !strcmp(s, "_ptsz") || !strcmp(s, "_ptds");
}

bool cp_drv_work_base(const char *base) {
  for (int i = 0; i < DW_COUNT; i++)
    if (has_base(names[i], base)) return true;
  return false;
}

/* The router's search (dlsym_hook.c): by hand, as its own compare. */
#define CP_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))
CP_NO_SANITIZE static int compare(const char *a, const char *b) {
  while (*a && *a == *b) a++, b++;
  return (unsigned char)*a - (unsigned char)*b;
}

CP_NO_SANITIZE bool cp_drv_is_work_name(const char *name) {
  int lo = 0, hi = DW_SORTED;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2, c = compare(name, names[mid]);
    if (c == 0) return true;
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  for (int i = DW_SORTED; i < DW_COUNT; i++)
    if (compare(name, names[i]) == 0) return true;
  return false;
}
