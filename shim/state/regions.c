/* regions.c: the regions of regions.h.
 *
 * Why a map of live blocks of its own rather than the pool's allocated
 * gauge: the gauge counts rounded bytes, and blocks lent to thread caches
 * until a flush; the peaks here are of the bytes the program asked for,
 * exact at every allocation, and the map costs nothing until the first tag.
 * Why the live bytes of the whole process rather than the region's own
 * blocks: "how high did memory go while the forward pass ran" is the
 * question a region answers; what the region itself allocated is the
 * second figure. */
#include "state/regions.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "options.h"
#include "pool.h"
#include "state/device.h"

#define SPANS_MAX 1024

typedef struct region {
  char name[CP_REGION_NAME_MAX];
  uint64_t peak, bytes, allocations, entries;
  unsigned open;  /* thread levels and start/end ranges open now */
  unsigned spans; /* of which start/end ranges */
  uint64_t counted; /* the serial of the last allocation counted: once per allocation */
  UT_hash_handle hh;
} region_t;

typedef struct live_block {
  uintptr_t addr;
  uint64_t bytes;
  UT_hash_handle hh;
} live_block_t;

typedef struct span {
  uint64_t id; /* 0: a free slot */
  unsigned region;
} span_t;

atomic_bool cp_regions_on;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static region_t regions[CP_REGIONS_MAX];
static unsigned n_regions;
static region_t *by_name;
static unsigned open_list[CP_REGIONS_MAX]; /* the regions with open > 0 */
static unsigned n_open;
static span_t spans[SPANS_MAX];
static uint64_t next_span_id = 1, serial;
static live_block_t *live;
static uint64_t live_bytes;

static __thread __attribute__((tls_model("initial-exec"))) uint16_t stack[CP_REGIONS_DEPTH];
static __thread __attribute__((tls_model("initial-exec"))) unsigned depth; /* may pass CP_REGIONS_DEPTH */

/* A fork taken while another thread holds the lock must not leave the
 * child's copy locked for ever. */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_done(void) { pthread_mutex_unlock(&lock); }

/* Lock held. */
static void remember(uintptr_t addr, uint64_t bytes) {
  live_block_t *b;
  HASH_FIND_PTR(live, &addr, b);
  if (b) { /* missed its free (a race with the first tag): it is gone */
    live_bytes -= b->bytes;
  } else {
    b = malloc(sizeof *b);
    if (!b) return;
    b->addr = addr;
    int oom = 0;
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(e) (oom = 1)
    HASH_ADD_PTR(live, addr, b);
    if (oom) {
      free(b);
      return;
    }
  }
  b->bytes = bytes;
  live_bytes += bytes;
}

static void walked_block(void *ctx, const cp_walk_block_t *b) {
  (void)ctx;
  if (b->state == CP_WALK_ALLOCATED) remember(b->addr, b->requested);
}

/* Lock held, once: the flag, then the blocks already live (a block served
 * before the flag is seen by the walk; one served after is recorded by its
 * own allocation, and remember() takes it once). */
static void start_recording(void) {
  if (atomic_load_explicit(&cp_regions_on, memory_order_relaxed)) return;
  pthread_atfork(fork_prepare, fork_done, fork_done);
  atomic_store_explicit(&cp_regions_on, true, memory_order_seq_cst);
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = cp_device_pool_if_any(dev);
    if (pool) cp_walk(pool, &(cp_walker_t){.block = walked_block});
  }
}

/* Lock held: the region named name (cut to fit), made at first sight. */
static unsigned region_of(const char *name) {
  char key[CP_REGION_NAME_MAX];
  snprintf(key, sizeof key, "%s", name);
  region_t *r;
  HASH_FIND_STR(by_name, key, r);
  if (r) return (unsigned)(r - regions);
  if (n_regions == CP_REGIONS_MAX - 1) snprintf(key, sizeof key, "(other)");
  if (n_regions == CP_REGIONS_MAX) return CP_REGIONS_MAX - 1;
  r = &regions[n_regions];
  memcpy(r->name, key, sizeof key);
  /* Unhashed (out of memory): still a region, found by no later lookup. */
  int oom = 0;
  HASH_ADD_STR(by_name, name, r);
  (void)oom;
  return n_regions++;
}

/* Lock held. */
static void open_region(unsigned i) {
  region_t *r = &regions[i];
  if (r->open++ == 0) open_list[n_open++] = i;
  r->entries++;
  if (live_bytes > r->peak) r->peak = live_bytes;
}

/* Lock held. */
static void close_region(unsigned i) {
  region_t *r = &regions[i];
  if (r->open == 0 || --r->open > 0) return;
  for (unsigned k = 0; k < n_open; k++)
    if (open_list[k] == i) {
      open_list[k] = open_list[--n_open];
      break;
    }
}

int cp_regions_push(const char *name) {
  if (!name || !name[0]) return EINVAL;
  if (depth >= CP_REGIONS_DEPTH) { /* counted for its pop, not kept: never opened */
    depth++;
    return 0;
  }
  pthread_mutex_lock(&lock);
  start_recording();
  unsigned i = region_of(name);
  open_region(i);
  pthread_mutex_unlock(&lock);
  stack[depth++] = (uint16_t)i;
  return 0;
}

int cp_regions_pop(void) {
  if (depth == 0) return EINVAL;
  depth--;
  if (depth >= CP_REGIONS_DEPTH) return 0; /* a level that was never kept */
  pthread_mutex_lock(&lock);
  close_region(stack[depth]);
  pthread_mutex_unlock(&lock);
  return 0;
}

uint64_t cp_regions_start(const char *name) {
  if (!name || !name[0]) return 0;
  uint64_t id = 0;
  pthread_mutex_lock(&lock);
  start_recording();
  for (unsigned k = 0; k < SPANS_MAX && id == 0; k++) {
    if (spans[k].id != 0) continue;
    unsigned i = region_of(name);
    open_region(i);
    regions[i].spans++;
    id = spans[k].id = next_span_id++;
    spans[k].region = i;
  }
  pthread_mutex_unlock(&lock);
  /* Every slot taken (ranges never ended): not recorded, but a valid id. */
  return id ? id : UINT64_MAX;
}

void cp_regions_end(uint64_t id) {
  if (id == 0 || id == UINT64_MAX) return;
  pthread_mutex_lock(&lock);
  for (unsigned k = 0; k < SPANS_MAX; k++) {
    if (spans[k].id != id) continue;
    spans[k].id = 0;
    regions[spans[k].region].spans--;
    close_region(spans[k].region);
    break;
  }
  pthread_mutex_unlock(&lock);
}

/* Lock held. */
static void count_in(unsigned i, size_t requested) {
  region_t *r = &regions[i];
  if (r->counted == serial) return;
  r->counted = serial;
  r->bytes += requested;
  r->allocations++;
}

void cp_regions_served(uintptr_t addr, size_t requested) {
  unsigned levels = depth < CP_REGIONS_DEPTH ? depth : CP_REGIONS_DEPTH;
  pthread_mutex_lock(&lock);
  remember(addr, requested);
  serial++;
  for (unsigned k = 0; k < levels; k++) count_in(stack[k], requested);
  for (unsigned k = 0; k < n_open; k++) {
    region_t *r = &regions[open_list[k]];
    if (r->spans) count_in(open_list[k], requested);
    if (live_bytes > r->peak) r->peak = live_bytes;
  }
  pthread_mutex_unlock(&lock);
}

void cp_regions_freeing(uintptr_t addr) {
  pthread_mutex_lock(&lock);
  live_block_t *b;
  HASH_FIND_PTR(live, &addr, b);
  if (b) {
    live_bytes -= b->bytes;
    HASH_DEL(live, b);
    free(b);
  }
  pthread_mutex_unlock(&lock);
}

void cp_regions_report_text(FILE *out) {
  if (!atomic_load(&cp_regions_on)) return;
  pthread_mutex_lock(&lock);
  fputs("cudapool: regions (peak: most bytes allocated while open):\n", out);
  for (unsigned i = 0; i < n_regions; i++) {
    const region_t *r = &regions[i];
    fputs("cudapool:   ", out);
    cp_put_escaped(out, r->name, CP_REGION_NAME_MAX);
    fprintf(out,
            ": peak %" PRIu64 " bytes, %" PRIu64 " bytes in %" PRIu64 " allocation%s, entered %" PRIu64 " time%s%s\n",
            r->peak, r->bytes, r->allocations, r->allocations == 1 ? "" : "s", r->entries,
            r->entries == 1 ? "" : "s", r->open ? " (open)" : "");
  }
  pthread_mutex_unlock(&lock);
  fflush(out);
}

static void json_name(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f) /* a name cut inside a UTF-8 sequence stays valid JSON */
      fprintf(out, "\\u%04x", c);
    else
      fputc(c, out);
  }
  fputc('"', out);
}

void cp_regions_report_json(FILE *out) {
  if (!atomic_load(&cp_regions_on)) return;
  pthread_mutex_lock(&lock);
  fputs(",\"regions\":[", out);
  for (unsigned i = 0; i < n_regions; i++) {
    const region_t *r = &regions[i];
    fprintf(out, "%s{\"name\":", i ? "," : "");
    json_name(out, r->name);
    fprintf(out,
            ",\"peak_bytes\":%" PRIu64 ",\"allocated_bytes\":%" PRIu64 ",\"allocations\":%" PRIu64
            ",\"entries\":%" PRIu64 ",\"open\":%u}",
            r->peak, r->bytes, r->allocations, r->entries, r->open);
  }
  fputc(']', out);
  pthread_mutex_unlock(&lock);
}
