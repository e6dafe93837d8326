/* sim_backend.c: the simulated device (see sim_backend.h). Addresses come
 * from a sorted list of free ranges, first fit, 512-byte aligned. Testing
 * only: linked into the tests, benchmarks and tools, never libcudapool.so. */
#include "sim_backend.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

struct cp_sim_range {
  uintptr_t addr;
  size_t size;
  struct cp_sim_range *next; /* holes: next higher hole */
  UT_hash_handle hh;         /* live: by addr */
};

#define SIM_ALIGN 512u
#define SIM_BASE ((uintptr_t)0x7f0000000000ull)

void cp_sim_init(cp_sim_t *sim, size_t capacity) {
  memset(sim, 0, sizeof *sim);
  sim->base = SIM_BASE;
  sim->capacity = capacity;
  sim->fail_after = -1;
  sim->rng = 0x9e3779b97f4a7c15ull;
  sim->barrier_enabled = true;
  sim->fence_enabled = true;
  pthread_mutex_init(&sim->lock, NULL);
  sim->holes = calloc(1, sizeof *sim->holes);
  if (sim->holes) *sim->holes = (cp_sim_range_t){.addr = SIM_BASE, .size = (size_t)1 << 46};
}

void cp_sim_fini(cp_sim_t *sim) {
  CP_HASH_FREE_ALL(sim->live, cp_sim_range_t);
  CP_HASH_FREE_ALL(sim->reservations, cp_sim_range_t);
  CP_HASH_FREE_ALL(sim->pages, cp_sim_range_t);
  CP_LIST_FREE_ALL(sim->holes);
  pthread_mutex_destroy(&sim->lock);
}

size_t cp_sim_live_count(const cp_sim_t *sim) { return HASH_COUNT(sim->live); }

static uint64_t next_random(cp_sim_t *sim) {
  sim->rng ^= sim->rng << 13;
  sim->rng ^= sim->rng >> 7;
  sim->rng ^= sim->rng << 17;
  return sim->rng;
}

static bool should_fail(cp_sim_t *sim, size_t size) {
  if (sim->used + size > sim->capacity) return true;
  if (sim->fail_after == 0) return true;
  if (sim->fail_after > 0) sim->fail_after--;
  return sim->fail_percent && next_random(sim) % 100 < sim->fail_percent;
}

/* A given address range leaves the free ranges, so that no later hole
 * allocation overlaps it (given ranges never overlap live ones). */
static void carve_hole(cp_sim_t *sim, uintptr_t addr, size_t size) {
  for (cp_sim_range_t **link = &sim->holes; *link; link = &(*link)->next) {
    cp_sim_range_t *h = *link;
    if (addr < h->addr || addr + size > h->addr + h->size) continue;
    size_t after = h->addr + h->size - (addr + size);
    if (after > 0) {
      cp_sim_range_t *tail = malloc(sizeof *tail);
      if (!tail) return;
      *tail = (cp_sim_range_t){.addr = addr + size, .size = after, .next = h->next};
      h->next = tail;
    }
    h->size = addr - h->addr;
    if (h->size == 0) {
      *link = h->next;
      free(h);
    }
    return;
  }
}

static bool overlaps_live(const cp_sim_t *sim, uintptr_t addr, size_t size) {
  for (const cp_sim_range_t *r = sim->live; r; r = r->hh.next)
    if (addr < r->addr + r->size && r->addr < addr + size) return true;
  return false;
}

/* The next given address, while the allocations still follow the list: the
 * same size asked, and no overlap with what is live (after a divergence, a
 * live address may have been reused). */
static bool take_given(cp_sim_t *sim, size_t size, size_t need) {
  if (sim->next_address >= sim->naddresses) return false;
  size_t i = sim->next_address;
  if (sim->address_sizes[i] != size || overlaps_live(sim, sim->addresses[i], need)) {
    sim->next_address = sim->naddresses;
    return false;
  }
  return true;
}

static int sim_alloc_unlocked(void *ctx, int device, size_t size, uintptr_t *out) {
  (void)device;
  cp_sim_t *sim = ctx;
  size_t need = (size + SIM_ALIGN - 1) & ~(size_t)(SIM_ALIGN - 1);
  bool given = take_given(sim, size, need);
  cp_sim_range_t **link = &sim->holes;
  while (!given && *link && (*link)->size < need) link = &(*link)->next;
  cp_sim_range_t *live = (given || *link) && !should_fail(sim, need) ? malloc(sizeof *live) : NULL;
  if (!live) {
    sim->failed_allocs++;
    return ENOMEM;
  }
  if (given) {
    *live = (cp_sim_range_t){.addr = sim->addresses[sim->next_address++], .size = need};
    carve_hole(sim, live->addr, need);
  } else {
    cp_sim_range_t *hole = *link;
    *live = (cp_sim_range_t){.addr = hole->addr, .size = need};
    hole->addr += need;
    hole->size -= need;
    if (hole->size == 0) {
      *link = hole->next;
      free(hole);
    }
  }
  HASH_ADD_PTR(sim->live, addr, live);
  sim->used += need;
  if (sim->used > sim->peak_used) sim->peak_used = sim->used;
  sim->allocs++;
  *out = live->addr;
  return 0;
}

/* Put [addr, addr+size) back into the sorted hole list, merging neighbours. */
static void add_hole(cp_sim_t *sim, uintptr_t addr, size_t size) {
  cp_sim_range_t **link = &sim->holes, *prev = NULL;
  while (*link && (*link)->addr < addr) {
    prev = *link;
    link = &(*link)->next;
  }
  cp_sim_range_t *next = *link;
  if (prev && prev->addr + prev->size == addr) {
    prev->size += size;
    if (next && prev->addr + prev->size == next->addr) {
      prev->size += next->size;
      prev->next = next->next;
      free(next);
    }
    return;
  }
  if (next && addr + size == next->addr) {
    next->addr = addr;
    next->size += size;
    return;
  }
  cp_sim_range_t *hole = malloc(sizeof *hole);
  if (!hole) return; /* the range is lost to the simulation, nothing else */
  *hole = (cp_sim_range_t){.addr = addr, .size = size, .next = next};
  *link = hole;
}

/* The range of the table `set` at addr, NULL if none. */
static cp_sim_range_t *range_at(cp_sim_range_t *set, uintptr_t addr) {
  cp_sim_range_t *r;
  HASH_FIND_PTR(set, &addr, r);
  return r;
}

/* r leaves the table *set and its addresses go back to the holes. */
static void range_release(cp_sim_t *sim, cp_sim_range_t **set, cp_sim_range_t *r) {
  uintptr_t addr = r->addr;
  size_t size = r->size;
  HASH_DEL(*set, r);
  free(r);
  add_hole(sim, addr, size);
}

static void sim_free_unlocked(void *ctx, int device, uintptr_t addr, size_t size) {
  (void)device;
  cp_sim_t *sim = ctx;
  size_t need = (size + SIM_ALIGN - 1) & ~(size_t)(SIM_ALIGN - 1);
  cp_sim_range_t *live = range_at(sim->live, addr);
  if (!live || live->size != need) {
    sim->bad_frees++;
    return;
  }
  sim->used -= need;
  sim->frees++;
  range_release(sim, &sim->live, live);
}

static int sim_barrier(void *ctx, int device) {
  (void)device;
  cp_sim_t *sim = ctx;
  /* Called without the pool lock (backend.h): threads may barrier at once. */
  if (!__atomic_load_n(&sim->barrier_enabled, __ATOMIC_RELAXED)) {
    __atomic_fetch_add(&sim->refused_barriers, 1, __ATOMIC_RELAXED);
    return -1;
  }
  __atomic_fetch_add(&sim->barriers, 1, __ATOMIC_RELAXED);
  return 0;
}

static unsigned sim_barrier_cost(void *ctx, int device) {
  (void)device;
  const cp_sim_t *sim = ctx;
  return sim->barrier_cost ? sim->barrier_cost : 1;
}

static int sim_fence_record_unlocked(void *ctx, int device, cp_fence_t *out) {
  (void)device;
  cp_sim_t *sim = ctx;
  if (!sim->fence_enabled) return -1;
  uint64_t id = ++sim->fences_recorded;
  if (sim->fence_auto_complete) sim->fences_completed = id;
  *out = (cp_fence_t)(uintptr_t)id;
  return 0;
}

static int sim_fence_query_unlocked(void *ctx, int device, cp_fence_t fence) {
  (void)device;
  cp_sim_t *sim = ctx;
  sim->fence_queries++;
  return (uint64_t)(uintptr_t)fence <= sim->fences_completed;
}

static int sim_fence_wait_unlocked(void *ctx, int device, cp_fence_t fence) {
  (void)device;
  cp_sim_t *sim = ctx;
  uint64_t id = (uint64_t)(uintptr_t)fence;
  sim->fence_waits++;
  if (id > sim->fences_completed) sim->fences_completed = id;
  return 0;
}

static void sim_fence_release_unlocked(void *ctx, int device, cp_fence_t fence) {
  (void)device;
  (void)fence;
  ((cp_sim_t *)ctx)->fences_released++;
}

/* ---- expandable segments ------------------------------------------------ */

static size_t sim_page_size(void *ctx, int device) {
  (void)device;
  return ((cp_sim_t *)ctx)->vmm_page;
}

static int sim_reserve_unlocked(void *ctx, int device, size_t size, uintptr_t *out) {
  (void)device;
  cp_sim_t *sim = ctx;
  uintptr_t align = sim->vmm_page, at = 0;
  for (cp_sim_range_t *h = sim->holes; h && !at; h = h->next) {
    uintptr_t start = (h->addr + align - 1) & ~(align - 1);
    if (start >= h->addr && start - h->addr <= h->size && h->size - (start - h->addr) >= size) at = start;
  }
  cp_sim_range_t *r = at ? malloc(sizeof *r) : NULL;
  if (!r) return ENOMEM;
  *r = (cp_sim_range_t){.addr = at, .size = size};
  carve_hole(sim, at, size);
  HASH_ADD_PTR(sim->reservations, addr, r);
  sim->reserves++;
  *out = at;
  return 0;
}

/* The reservation holding [addr, addr+size), NULL if none. */
static cp_sim_range_t *reservation_of(cp_sim_t *sim, uintptr_t addr, size_t size) {
  for (cp_sim_range_t *r = sim->reservations; r; r = r->hh.next)
    if (addr >= r->addr && addr - r->addr <= r->size && size <= r->size - (addr - r->addr)) return r;
  return NULL;
}

static bool page_is_mapped(cp_sim_t *sim, uintptr_t addr) { return range_at(sim->pages, addr) != NULL; }

/* Whether [addr, addr+size) is whole pages of one reservation, all mapped
 * or all unmapped as asked; if not, a bad map is counted. */
static bool pages_valid(cp_sim_t *sim, uintptr_t addr, size_t size, bool mapped) {
  bool valid = sim->vmm_page && addr % sim->vmm_page == 0 && size % sim->vmm_page == 0 && size &&
               reservation_of(sim, addr, size);
  for (uintptr_t a = addr; valid && a < addr + size; a += sim->vmm_page)
    valid = page_is_mapped(sim, a) == mapped;
  if (!valid) sim->bad_maps++;
  return valid;
}

static int sim_map_unlocked(void *ctx, int device, uintptr_t addr, size_t size) {
  (void)device;
  cp_sim_t *sim = ctx;
  if (!pages_valid(sim, addr, size, false)) return EIO;
  if (should_fail(sim, size)) {
    sim->failed_allocs++;
    return ENOMEM;
  }
  for (uintptr_t a = addr; a < addr + size; a += sim->vmm_page) {
    cp_sim_range_t *p = malloc(sizeof *p);
    if (!p) abort(); /* a test device: nothing sensible to do */
    *p = (cp_sim_range_t){.addr = a, .size = sim->vmm_page};
    HASH_ADD_PTR(sim->pages, addr, p);
  }
  sim->used += size;
  sim->mapped += size;
  if (sim->used > sim->peak_used) sim->peak_used = sim->used;
  if (sim->mapped > sim->peak_mapped) sim->peak_mapped = sim->mapped;
  sim->maps++;
  sim->pages_mapped += size / sim->vmm_page;
  return 0;
}

static void sim_unmap_unlocked(void *ctx, int device, uintptr_t addr, size_t size) {
  (void)device;
  cp_sim_t *sim = ctx;
  if (!pages_valid(sim, addr, size, true)) return;
  for (uintptr_t a = addr; a < addr + size; a += sim->vmm_page) {
    cp_sim_range_t *p = range_at(sim->pages, a);
    HASH_DEL(sim->pages, p);
    free(p);
  }
  sim->used -= size;
  sim->mapped -= size;
  sim->unmaps++;
  sim->pages_unmapped += size / sim->vmm_page;
}

static void sim_unreserve_unlocked(void *ctx, int device, uintptr_t addr, size_t size) {
  (void)device;
  cp_sim_t *sim = ctx;
  cp_sim_range_t *r = range_at(sim->reservations, addr);
  bool any_mapped = false;
  for (uintptr_t a = addr; r && a < addr + size && !any_mapped; a += sim->vmm_page)
    any_mapped = sim->pages && page_is_mapped(sim, a);
  if (!r || r->size != size || any_mapped) {
    sim->bad_frees++;
    return;
  }
  sim->unreserves++;
  range_release(sim, &sim->reservations, r);
}

/* ---- the table: each entry under the device's lock (arenas call it at once) ---- */

#define LOCKED(ret, name, params, args)             \
  static ret name params {                          \
    pthread_mutex_lock(&((cp_sim_t *)ctx)->lock);   \
    ret rc = name##_unlocked args;                  \
    pthread_mutex_unlock(&((cp_sim_t *)ctx)->lock); \
    return rc;                                      \
  }
#define LOCKED_VOID(name, params, args)             \
  static void name params {                         \
    pthread_mutex_lock(&((cp_sim_t *)ctx)->lock);   \
    name##_unlocked args;                           \
    pthread_mutex_unlock(&((cp_sim_t *)ctx)->lock); \
  }

LOCKED(int, sim_alloc, (void *ctx, int device, size_t size, uintptr_t *out), (ctx, device, size, out))
LOCKED_VOID(sim_free, (void *ctx, int device, uintptr_t addr, size_t size), (ctx, device, addr, size))
LOCKED(int, sim_fence_record, (void *ctx, int device, cp_fence_t *out), (ctx, device, out))
LOCKED(int, sim_fence_query, (void *ctx, int device, cp_fence_t fence), (ctx, device, fence))
LOCKED(int, sim_fence_wait, (void *ctx, int device, cp_fence_t fence), (ctx, device, fence))
LOCKED_VOID(sim_fence_release, (void *ctx, int device, cp_fence_t fence), (ctx, device, fence))
LOCKED(int, sim_reserve, (void *ctx, int device, size_t size, uintptr_t *out), (ctx, device, size, out))
LOCKED(int, sim_map, (void *ctx, int device, uintptr_t addr, size_t size), (ctx, device, addr, size))
LOCKED_VOID(sim_unmap, (void *ctx, int device, uintptr_t addr, size_t size), (ctx, device, addr, size))
LOCKED_VOID(sim_unreserve, (void *ctx, int device, uintptr_t addr, size_t size), (ctx, device, addr, size))

void cp_sim_complete_fences(cp_sim_t *sim, uint64_t upto) {
  pthread_mutex_lock(&sim->lock);
  if (upto > sim->fences_completed) sim->fences_completed = upto;
  pthread_mutex_unlock(&sim->lock);
}

cp_backend_t cp_sim_backend(cp_sim_t *sim) {
  return (cp_backend_t){
      .ctx = sim,
      .alloc = sim_alloc,
      .free = sim_free,
      .barrier = sim_barrier,
      .barrier_cost = sim_barrier_cost,
      .fence_record = sim_fence_record,
      .fence_query = sim_fence_query,
      .fence_wait = sim_fence_wait,
      .fence_release = sim_fence_release,
      .page_size = sim_page_size,
      .reserve = sim_reserve,
      .unreserve = sim_unreserve,
      .map = sim_map,
      .unmap = sim_unmap,
  };
}
