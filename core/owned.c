/* owned.c: a process-wide filter of the addresses pools may own: for each
 * 2 MiB granule of the address space, how many live segments (of any pool,
 * on any device) overlap it. A free of an address whose granule no segment
 * overlaps is no pool's, and goes to CUDA without taking a pool lock: a
 * program freeing memory of its own CUDA pools (cudaMemPoolCreate, which
 * cudapool leaves alone) paid one lock per arena: with 16 arenas on the
 * H200 its allocation and free cost 1.5-3 µs through the shim, 0.7 natively.
 *
 * Two levels: the top indexes address bits 35-47 (8192 ranges of 32 GiB),
 * a leaf bits 21-34 (16384 counts); a leaf is made with the first segment
 * in its range and kept until exit (64 KiB; an expandable segment's range,
 * as large as the device, takes a few). An address from 2^48 up, or a leaf
 * that could not be made, turns the filter off for good: every address may
 * then be owned. So the filter can only answer "maybe" wrongly, never "no".
 *
 * Threads: a count changes under its pool's lock, atomically (two pools'
 * segments may share a granule); a reader takes no lock. A block is handed
 * out only after its segment was counted, and a segment is released only
 * when no block of it is live, so a free that races a change frees no live
 * block either way. */
#include "owned.h"

#include <stdatomic.h>
#include <stdlib.h>

#define GRANULE_SHIFT 21
#define LEAF_BITS 14
#define TOP_BITS 13
#define ADDRESS_BITS (GRANULE_SHIFT + LEAF_BITS + TOP_BITS)

typedef struct leaf {
  atomic_uint count[1u << LEAF_BITS];
} leaf_t;

static _Atomic(leaf_t *) top[1u << TOP_BITS];
static atomic_bool filter_off;

static leaf_t *leaf_of(uintptr_t granule, bool make) {
  _Atomic(leaf_t *) *slot = &top[granule >> LEAF_BITS];
  leaf_t *leaf = atomic_load_explicit(slot, memory_order_acquire);
  if (leaf || !make) return leaf;
  leaf_t *fresh = calloc(1, sizeof *fresh);
  if (!fresh) return NULL;
  if (atomic_compare_exchange_strong_explicit(slot, &leaf, fresh, memory_order_acq_rel, memory_order_acquire))
    return fresh;
  free(fresh); /* another pool made it first */
  return leaf;
}

static void change(uintptr_t base, size_t size, bool add) {
  if (size == 0) return;
  uintptr_t last = base + size - 1;
  if (last < base || last >> ADDRESS_BITS) {
    atomic_store(&filter_off, true);
    return;
  }
  for (uintptr_t g = base >> GRANULE_SHIFT; g <= last >> GRANULE_SHIFT; g++) {
    leaf_t *leaf = leaf_of(g, add);
    /* No memory for it (adding), or never made (the filter is off: a count
     * that an add never raised may now fall below zero, which only ever
     * reads as "maybe"). */
    if (!leaf) {
      atomic_store(&filter_off, true);
      return;
    }
    atomic_uint *count = &leaf->count[g & ((1u << LEAF_BITS) - 1)];
    if (add)
      atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
    else
      atomic_fetch_sub_explicit(count, 1, memory_order_relaxed);
  }
}

void cp_owned_add(uintptr_t base, size_t size) { change(base, size, true); }

void cp_owned_remove(uintptr_t base, size_t size) { change(base, size, false); }

bool cp_owned_maybe(uintptr_t addr) {
  if (addr >> ADDRESS_BITS || atomic_load_explicit(&filter_off, memory_order_relaxed)) return true;
  uintptr_t granule = addr >> GRANULE_SHIFT;
  leaf_t *leaf = leaf_of(granule, false);
  return leaf &&
         atomic_load_explicit(&leaf->count[granule & ((1u << LEAF_BITS) - 1)], memory_order_relaxed) != 0;
}
