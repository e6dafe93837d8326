/* owned.c: a process-wide table of the addresses pools own: for each 2 MiB
 * granule of the address space, how many live segments (of any pool, on
 * any device) overlap it, and whose they are: one arena, or several. A free
 * (or a block query) asks once which arena owns an address and goes there:
 * an address whose granule no segment overlaps is no pool's, and goes to
 * CUDA without taking a pool lock (a program freeing memory of its own CUDA
 * pools, which cudapool leaves alone, paid one lock per arena: with 16
 * arenas on the H200 its allocation and free cost 1.5-3 µs through the
 * shim, 0.7 natively); one named arena is the only one asked; only a
 * granule that segments of two arenas share sends the free to every arena.
 *
 * Two levels: the top indexes address bits 35-47 (8192 ranges of 32 GiB),
 * a leaf bits 21-34 (16384 words); a leaf is made with the first segment
 * in its range and kept until exit (128 KiB; an expandable segment's range,
 * as large as the device, takes a few). An address from 2^48 up, a leaf
 * that could not be made, or an owner the word cannot hold turns the table
 * off for good: every address may then be any arena's. So it can only
 * answer "maybe, ask all" wrongly, never "no" nor the wrong arena.
 *
 * A granule's word: the count of segments in its low COUNT_BITS, the owner
 * above (its address shifted right by 6: arenas are 64-byte aligned), or
 * OWNER_MANY once two owners met there, until the count falls to 0.
 *
 * Threads: a word changes under its pool's lock, by compare-and-swap (two
 * pools' segments may share a granule); a reader takes no lock. A block is
 * handed out only after its segment was counted, and a segment is released
 * only when no block of it is live, so a free that races a change frees no
 * live block either way. */
#include "owned.h"

#include <stdatomic.h>
#include <stdlib.h>

#define GRANULE_SHIFT 21
#define LEAF_BITS 14
#define TOP_BITS 13
#define ADDRESS_BITS (GRANULE_SHIFT + LEAF_BITS + TOP_BITS)

#define COUNT_BITS 20
#define COUNT_MASK (((uint64_t)1 << COUNT_BITS) - 1)
#define OWNER_SHIFT 6 /* arenas are 64-byte aligned */
#define OWNER_MANY (UINT64_MAX >> COUNT_BITS)

typedef struct leaf {
  _Atomic uint64_t word[1u << LEAF_BITS];
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

/* The owner's tag in a granule's word, or 0 when the word cannot hold it. */
static uint64_t owner_tag(const void *owner) {
  uintptr_t o = (uintptr_t)owner;
  uint64_t tag = (uint64_t)o >> OWNER_SHIFT;
  return o & (((uintptr_t)1 << OWNER_SHIFT) - 1) || tag == 0 || tag >= OWNER_MANY ? 0 : tag;
}

static void change(uintptr_t base, size_t size, uint64_t tag, bool add) {
  if (size == 0) return;
  uintptr_t last = base + size - 1;
  if (last < base || last >> ADDRESS_BITS || (add && tag == 0)) {
    atomic_store(&filter_off, true);
    return;
  }
  for (uintptr_t g = base >> GRANULE_SHIFT; g <= last >> GRANULE_SHIFT; g++) {
    leaf_t *leaf = leaf_of(g, add);
    /* No memory for it (adding), or never made (the table is off). */
    if (!leaf) {
      atomic_store(&filter_off, true);
      return;
    }
    _Atomic uint64_t *word = &leaf->word[g & ((1u << LEAF_BITS) - 1)];
    uint64_t old = atomic_load_explicit(word, memory_order_relaxed), next;
    do {
      uint64_t count = old & COUNT_MASK, owner = old >> COUNT_BITS;
      if (add && count == COUNT_MASK) {
        atomic_store(&filter_off, true);
        return;
      }
      if (!add && count == 0) break; /* an add the table missed (it is off) */
      if (add)
        next = (count == 0 ? tag : owner == tag ? owner : OWNER_MANY) << COUNT_BITS | (count + 1);
      else
        next = count == 1 ? 0 : (old - 1);
    } while (!atomic_compare_exchange_weak_explicit(word, &old, next, memory_order_relaxed,
                                                    memory_order_relaxed));
  }
}

void cp_owned_add(uintptr_t base, size_t size, const void *owner) { change(base, size, owner_tag(owner), true); }

void cp_owned_remove(uintptr_t base, size_t size) { change(base, size, 0, false); }

const void *cp_owned_lookup(uintptr_t addr) {
  if (addr >> ADDRESS_BITS || atomic_load_explicit(&filter_off, memory_order_relaxed)) return CP_OWNED_ANY;
  uintptr_t granule = addr >> GRANULE_SHIFT;
  leaf_t *leaf = leaf_of(granule, false);
  if (!leaf) return NULL;
  uint64_t word = atomic_load_explicit(&leaf->word[granule & ((1u << LEAF_BITS) - 1)], memory_order_relaxed);
  uint64_t owner = word >> COUNT_BITS;
  if ((word & COUNT_MASK) == 0) return NULL;
  return owner == OWNER_MANY ? CP_OWNED_ANY : (const void *)(uintptr_t)(owner << OWNER_SHIFT);
}
