/* driver_names.c: the driver entry points the build's CUDA headers know,
 * by base name (cuMemcpyHtoD for cuMemcpyHtoD_v2 and its _ptds twin), as
 * cuGetProcAddress is asked for them. A name outside the set is an entry
 * point newer than cudapool's build, which may submit work the shim cannot
 * see (entry/dlsym_hook.c then gives up learning stream order).
 *
 * The table is generated at build time from the headers (mk/shim.mk,
 * $(BUILD)/gen/cuda_names.h), sorted for strcmp; a lookup is a binary
 * search. Constant data: no state, no lock. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdlib.h>
#include <string.h>

#include "backend/driver.h"

static const char *const known[] = {
#include "cuda_names.h"
};

static int by_name(const void *key, const void *entry) {
  return strcmp((const char *)key, *(const char *const *)entry);
}

bool cp_drv_name_known(const char *base) {
  return base && bsearch(base, known, sizeof known / sizeof known[0], sizeof known[0], by_name) != NULL;
}

size_t cp_drv_names(const char *const **names) {
  *names = known;
  return sizeof known / sizeof known[0];
}
