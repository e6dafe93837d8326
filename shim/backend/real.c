/* real.c: resolving the real CUDA runtime, the depth-counting thunks, and
 * the runtime flavour of api.h (see real.h and api.h).
 *
 * raw.NAME is the runtime's own function; cp_real.NAME is thunk_NAME, which
 * raises cp_inside around the call while the runtime layer serves. raw is
 * written under `lock` only, and only until cudaMalloc has been found (then
 * `final` is set and nothing is written again); thunks read it atomically. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "backend/api.h"
#include "backend/real.h"

__thread __attribute__((tls_model("initial-exec"))) unsigned cp_inside;

atomic_int cp_runtime_state;
static cp_real_t raw;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool final; /* cudaMalloc found: nothing changes any more */
static atomic_bool all_needed_found;

/* A name not found (yet) is looked for again: the runtime may be loaded
 * after the shim first looked (a Python process importing a framework). */
#define CP_REAL_THUNK(name, needed, params, args)                                             \
  static cudaError_t thunk_##name params {                                                    \
    __typeof__(name) *fn = __atomic_load_n(&raw.name, __ATOMIC_ACQUIRE);                      \
    if (!fn) {                                                                                \
      cp_real_init();                                                                         \
      if (!(fn = __atomic_load_n(&raw.name, __ATOMIC_ACQUIRE))) return cudaErrorNotSupported; \
    }                                                                                         \
    bool count = cp_runtime_serving();                                                        \
    if (count) cp_inside++;                                                                   \
    cudaError_t rc = fn args;                                                                 \
    if (count) cp_inside--;                                                                   \
    return rc;                                                                                \
  }
CP_REAL_FUNCS(CP_REAL_THUNK)
#undef CP_REAL_THUNK

cp_real_t cp_real = {
#define CP_REAL_THUNK_PTR(name, needed, params, args) .name = thunk_##name,
    CP_REAL_FUNCS(CP_REAL_THUNK_PTR)
#undef CP_REAL_THUNK_PTR
};

/* The library that holds fn stays loaded for good (RTLD_NODELETE): the
 * pointers kept here, and the pools' memory and events, belong to it. A
 * program that dlcloses the last user of libcudart (a plugin) and loads it
 * again would otherwise leave them pointing into an unmapped library. */
static void pin_library_of(void *fn) {
  Dl_info info;
  if (!fn || !dladdr(fn, &info) || !info.dli_fname) return;
  void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  if (h) dlclose(h);
}

/* A runtime loaded into a local scope (dlopen without RTLD_GLOBAL) is
 * invisible to RTLD_NEXT; look there by handle. */
static void *lookup(const char *name) {
  void *fn = dlsym(RTLD_NEXT, name);
  static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  for (size_t i = 0; i < sizeof sonames / sizeof sonames[0] && !fn; i++) {
    void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      fn = dlsym(h, name);
      dlclose(h);
    }
  }
  pin_library_of(fn);
  return fn;
}

void *cp_real_lookup(const char *name) { return lookup(name); }

static void resolve(void) {
  bool ok = true;
  const char *missing = NULL;
#define CP_REAL_RESOLVE(name, needed, params, args)                                                \
  if (!raw.name) __atomic_store_n(&raw.name, (__typeof__(name) *)lookup(#name), __ATOMIC_RELEASE); \
  if (!raw.name && (needed)) {                                                                     \
    ok = false;                                                                                    \
    if (!missing) missing = #name;                                                                 \
  }
  CP_REAL_FUNCS(CP_REAL_RESOLVE)
#undef CP_REAL_RESOLVE
  atomic_store(&all_needed_found, ok);
  if (raw.cudaMalloc) {
    atomic_store(&final, true);
    if (!ok)
      fprintf(stderr, "cudapool: cannot find the CUDA runtime's %s; passing every runtime call through\n",
              missing);
  }
}

void cp_real_init(void) {
  if (atomic_load_explicit(&final, memory_order_acquire)) return;
  pthread_mutex_lock(&lock);
  if (!atomic_load(&final)) resolve();
  pthread_mutex_unlock(&lock);
}

bool cp_real_complete(void) {
  cp_real_init();
  return atomic_load(&all_needed_found);
}

/* ---- the runtime flavour of api.h ------------------------------------------ */

/* The program did not make the failed call: take its error back out of
 * cudaGetLastError(). */
static int ok_or_clear(cudaError_t rc) {
  if (rc == cudaSuccess) return 0;
  cp_real.cudaGetLastError();
  return -1;
}

/* A query's answer: 1 done; 0 not yet, or failed (its error cleared, as above). */
static int done_or_clear(cudaError_t rc) {
  if (rc == cudaSuccess) return 1;
  if (rc != cudaErrorNotReady) cp_real.cudaGetLastError();
  return 0;
}

static int rt_current_device(int *dev) { return ok_or_clear(cp_real.cudaGetDevice(dev)); }

static int rt_device_count(int *count) {
  return cp_real.cudaGetDeviceCount ? ok_or_clear(cp_real.cudaGetDeviceCount(count)) : -1;
}

static int rt_enter(int dev) {
  int cur = -1;
  if (cp_real.cudaGetDevice(&cur) != cudaSuccess) return -1;
  if (cur == dev) return -1;
  return cp_real.cudaSetDevice(dev) == cudaSuccess ? cur : -1;
}

static void rt_leave(int previous) {
  if (previous >= 0) cp_real.cudaSetDevice(previous);
}

static int rt_mem_alloc(size_t size, uintptr_t *out) {
  void *p = NULL;
  cudaError_t rc = cp_real.cudaMalloc(&p, size);
  if (rc != cudaSuccess) {
    /* The pool may still succeed (after releasing cached segments): the
     * program must not see this attempt's error then. The shim sets the
     * final error itself when the allocation fails for good. */
    cp_real.cudaGetLastError();
    return rc == cudaErrorMemoryAllocation ? ENOMEM : EIO;
  }
  *out = (uintptr_t)p;
  return 0;
}

static int rt_mem_free(uintptr_t addr) { return ok_or_clear(cp_real.cudaFree((void *)addr)); }

static int rt_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  return cp_real.cudaMemGetInfo ? ok_or_clear(cp_real.cudaMemGetInfo(free_bytes, total_bytes)) : -1;
}

static int rt_event_create(cudaEvent_t *ev) {
  return ok_or_clear(cp_real.cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
}

static void rt_event_destroy(cudaEvent_t ev) { ok_or_clear(cp_real.cudaEventDestroy(ev)); }

static int rt_event_record(cudaEvent_t ev, cudaStream_t stream) {
  return ok_or_clear(cp_real.cudaEventRecord(ev, stream));
}

static int rt_event_query(cudaEvent_t ev) { return done_or_clear(cp_real.cudaEventQuery(ev)); }

static int rt_event_sync(cudaEvent_t ev) { return ok_or_clear(cp_real.cudaEventSynchronize(ev)); }

static int rt_stream_wait(cudaStream_t stream, cudaEvent_t ev) {
  return ok_or_clear(cp_real.cudaStreamWaitEvent(stream, ev, 0));
}

static int rt_stream_idle(cudaStream_t stream) { return done_or_clear(cp_real.cudaStreamQuery(stream)); }

static int rt_stream_capturing(cudaStream_t stream) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (!cp_real.cudaStreamIsCapturing) return -1;
  if (ok_or_clear(cp_real.cudaStreamIsCapturing(stream, &status)) != 0) return -1;
  return status != cudaStreamCaptureStatusNone;
}

/* The properties' UUID: asked once per device and process (budget.c), so
 * the cost of the whole query does not matter. */
static int rt_device_uuid(int dev, unsigned char *uuid) {
  struct cudaDeviceProp p;
  memset(&p, 0, sizeof p);
  if (ok_or_clear(cp_real.cudaGetDeviceProperties(&p, dev)) != 0) return -1;
  static const unsigned char none[sizeof p.uuid.bytes];
  if (memcmp(p.uuid.bytes, none, sizeof none) == 0) return -1;
  memcpy(uuid, p.uuid.bytes, sizeof p.uuid.bytes);
  return 0;
}

#define RT_OP(ret, op, params) .op = rt_##op,
const cp_api_t cp_api_runtime = {.name = "runtime", CP_API_OPS(RT_OP)};
#undef RT_OP
