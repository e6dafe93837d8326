/* owned.h: which addresses any pool may own, asked without a pool lock
 * (owned.c). */
#ifndef CUDAPOOL_CORE_OWNED_H
#define CUDAPOOL_CORE_OWNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A segment of some pool now covers [base, base + size), or no longer. */
void cp_owned_add(uintptr_t base, size_t size);
void cp_owned_remove(uintptr_t base, size_t size);
/* False only when no live segment of any pool covers addr. */
bool cp_owned_maybe(uintptr_t addr);

#endif
