/* check.h: cp_pool_check, the checker of every invariant of a pool (check.c).
 *
 * Built into the tests, the benchmarks and the tools only (libcptesting.a,
 * mk/core.mk), never into libcudapool.so: it reads the pool's internals
 * from scratch, O(blocks), and nothing in the product calls it. */
#ifndef CUDAPOOL_CORE_TESTING_CHECK_H
#define CUDAPOOL_CORE_TESTING_CHECK_H

#include <stddef.h>

#include "pool.h"

/* Check every invariant (segments tiled by blocks, no adjacent ready blocks,
 * indexes and stats consistent). 0 when all hold, else writes what broke. */
int cp_pool_check(cp_pool_t *pool, char *why, size_t why_len);

#endif
