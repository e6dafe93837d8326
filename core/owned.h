/* owned.h: which arena owns an address, asked without a pool lock
 * (owned.c). */
#ifndef CUDAPOOL_CORE_OWNED_H
#define CUDAPOOL_CORE_OWNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* cp_owned_lookup's answer when the table cannot name one owner. */
#define CP_OWNED_ANY ((const void *)1)

/* A segment of `owner` (an arena, 64-byte aligned) now covers [base, base +
 * size), or no longer. */
void cp_owned_add(uintptr_t base, size_t size, const void *owner);
void cp_owned_remove(uintptr_t base, size_t size);
/* The owner of the segment that may cover addr: NULL only when no live
 * segment of any pool does; CP_OWNED_ANY when segments of several owners
 * share its granule (or the table is off): any may own it. */
const void *cp_owned_lookup(uintptr_t addr);
/* False only when no live segment of any pool covers addr. */
static inline bool cp_owned_maybe(uintptr_t addr) { return cp_owned_lookup(addr) != NULL; }

#endif
