/* entry_stats.c: the entry-point counters of entry_stats.h. */
#include "state/entry_stats.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "state/shim.h"

static const char *const names[CP_ENTRY_COUNT] = {
#define CP_ENTRY_NAME(name) #name,
    CP_ENTRY_LIST(CP_ENTRY_NAME)
#undef CP_ENTRY_NAME
};

static _Atomic uint64_t lookups[CP_ENTRY_COUNT][2], calls[CP_ENTRY_COUNT], served[CP_ENTRY_COUNT];

/* "cuMemAlloc_v2", "cuMemFreeAsync_ptsz" and "cuMemAlloc" all name cuMemAlloc's
 * entry: the base is what precedes a "_v<digit>", "_ptsz" or "_ptds". */
static size_t base_length(const char *name) {
  size_t n = strlen(name);
  for (const char *u = strchr(name, '_'); u; u = strchr(u + 1, '_'))
    if ((u[1] == 'v' && u[2] >= '0' && u[2] <= '9') || !strcmp(u, "_ptsz") || !strcmp(u, "_ptds"))
      return (size_t)(u - name);
  return n;
}

void cp_entry_lookup(const char *name, cp_entry_door_t door) {
  if (!name || name[0] != 'c' || name[1] != 'u') return;
  size_t n = base_length(name);
  for (int i = 0; i < CP_ENTRY_COUNT; i++)
    if (strlen(names[i]) == n && !strncmp(names[i], name, n)) {
      atomic_fetch_add_explicit(&lookups[i][door], 1, memory_order_relaxed);
      return;
    }
}

void cp_entry_count(cp_entry_t e, bool was_served) {
  atomic_fetch_add_explicit(&calls[e], 1, memory_order_relaxed);
  if (was_served) atomic_fetch_add_explicit(&served[e], 1, memory_order_relaxed);
}

void cp_entry_report(FILE *out) {
  for (int i = 0; i < CP_ENTRY_COUNT; i++) {
    unsigned long long d = atomic_load(&lookups[i][CP_DOOR_DLSYM]),
                       g = atomic_load(&lookups[i][CP_DOOR_PROC_ADDRESS]), c = atomic_load(&calls[i]),
                       s = atomic_load(&served[i]);
    if (d || g || c)
      fprintf(out,
              "cudapool: entry %-24s dlsym %llu, cuGetProcAddress %llu, calls %llu, served %llu, forwarded "
              "%llu\n",
              names[i], d, g, c, s, c - s);
  }
}
