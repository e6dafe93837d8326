/* nvml.c: NVML's list of a GPU's compute processes (see nvml.h).
 *
 * Invariants: `lib_state` goes from UNTRIED to READY or BROKEN once, under
 * `lock`, and never back; every call into NVML is made under `lock`, into
 * the one static buffer (NVML is thread-safe, the buffer is not); the
 * buffer is handed to NVML with a count that fits it, for the struct size
 * of the function that was found (_v3 and _v2 take nvmlProcessInfo_t, 24
 * bytes; _v1 takes 16), and an answer that says it wrote more than it was
 * given is refused; `tried` only grows. */
#include "backend/nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef int nvml_return_t;
typedef void *nvml_device_t;
#define NVML_OK 0
#define NVML_FUNCTION_NOT_FOUND 13

/* nvml.h's nvmlProcessInfo_t (taken by _v3 and _v2) and nvmlProcessInfo_v1_t. */
typedef struct {
  unsigned int pid;
  unsigned long long used;
  unsigned int gpu_instance, compute_instance;
} info_v2_t;
typedef struct {
  unsigned int pid;
  unsigned long long used;
} info_v1_t;
_Static_assert(sizeof(info_v2_t) == 24 && sizeof(info_v1_t) == 16, "NVML's process info sizes");

typedef nvml_return_t init_fn(void);
typedef nvml_return_t by_uuid_fn(const char *uuid, nvml_device_t *dev);
typedef nvml_return_t procs_fn(nvml_device_t dev, unsigned int *count, void *infos);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static enum { UNTRIED, READY, BROKEN } lib_state;
static by_uuid_fn *by_uuid;
/* The process lists found, newest first, with the struct size each takes;
 * `tried` skips those that said they are not there after all. */
static struct {
  procs_fn *fn;
  size_t stride;
} lists[3];
static size_t nlists, tried;
static union {
  info_v2_t v2[CP_NVML_MAX_PIDS];
  info_v1_t v1[CP_NVML_MAX_PIDS];
} buf;

/* With lock held. */
static bool load(void) {
  if (lib_state != UNTRIED) return lib_state == READY;
  lib_state = BROKEN;
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  init_fn *init = (init_fn *)dlsym(lib, "nvmlInit_v2");
  by_uuid = (by_uuid_fn *)dlsym(lib, "nvmlDeviceGetHandleByUUID");
  static const struct {
    const char *name;
    size_t stride;
  } names[] = {{"nvmlDeviceGetComputeRunningProcesses_v3", sizeof(info_v2_t)},
               {"nvmlDeviceGetComputeRunningProcesses_v2", sizeof(info_v2_t)},
               {"nvmlDeviceGetComputeRunningProcesses", sizeof(info_v1_t)}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    procs_fn *fn = (procs_fn *)dlsym(lib, names[i].name);
    if (fn) lists[nlists].fn = fn, lists[nlists++].stride = names[i].stride;
  }
  /* The library stays loaded (NVML keeps its own state until nvmlShutdown). */
  if (!init || !by_uuid || !nlists || init() != NVML_OK) return false;
  lib_state = READY;
  return true;
}

/* "uuid-" and 32 hex digits as NVML spells a UUID: PREFIX-8-4-4-4-12. */
static bool nvml_uuid(const char *key, const char *prefix, char *out, size_t n) {
  if (strncmp(key, "uuid-", 5) != 0 || strlen(key) != 5 + 32) return false;
  const char *h = key + 5;
  snprintf(out, n, "%s-%.8s-%.4s-%.4s-%.4s-%.12s", prefix, h, h + 8, h + 12, h + 16, h + 20);
  return true;
}

/* With lock held: the GPU's handle, tried as a GPU's UUID, then a MIG instance's. */
static bool handle_of(const char *key, nvml_device_t *dev) {
  static const char *const prefixes[] = {"GPU", "MIG"};
  char uuid[64];
  for (size_t i = 0; i < 2; i++)
    if (nvml_uuid(key, prefixes[i], uuid, sizeof uuid) && by_uuid(uuid, dev) == NVML_OK) return true;
  return false;
}

int cp_nvml_pids(const char *key, uint32_t *pids, size_t cap) {
  int n = -1;
  pthread_mutex_lock(&lock);
  nvml_device_t dev = NULL;
  if (load() && handle_of(key, &dev)) {
    unsigned int count = CP_NVML_MAX_PIDS;
    int rc = NVML_FUNCTION_NOT_FOUND;
    /* A newer list that the library names but does not have (an old
     * driver's) says so: the next one is tried, from then on. */
    while (tried < nlists && (rc = lists[tried].fn(dev, &count, &buf)) == NVML_FUNCTION_NOT_FOUND) {
      count = CP_NVML_MAX_PIDS;
      tried++;
    }
    /* More processes than the buffer holds (NVML_ERROR_INSUFFICIENT_SIZE)
     * or a count past what it was given: the list is not whole, and a
     * dead pid left out of it would read as gone. */
    if (rc == NVML_OK && count <= CP_NVML_MAX_PIDS && count <= cap) {
      bool v2 = lists[tried].stride == sizeof(info_v2_t);
      for (unsigned int i = 0; i < count; i++) pids[i] = v2 ? buf.v2[i].pid : buf.v1[i].pid;
      n = (int)count;
    }
  }
  pthread_mutex_unlock(&lock);
  return n;
}
