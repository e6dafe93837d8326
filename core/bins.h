/* bins.h: the size index of free blocks (segregated fit with exact best fit).
 *
 * Blocks are spread over size classes as in TLSF: a two-level bitmap finds
 * the first non-empty class in O(1); each class is a red-black tree ordered
 * by (size, address), so the smallest block that fits, lowest address on
 * ties, is found in O(log of the blocks in one class). A lookup therefore
 * costs about the same with 100 or 100,000 free blocks.
 *
 * A bins does not own its blocks; the caller keeps block->state right.
 * Not thread-safe: the pool's lock covers it. */
#ifndef CUDAPOOL_CORE_BINS_H
#define CUDAPOOL_CORE_BINS_H

#include "block.h"

#define CP_BIN_LINEAR 32  /* classes 0..31: sizes of 1..31 rounding units */
#define CP_BIN_SUB_LOG2 4 /* 16 subclasses per power of two above that */
#define CP_BIN_COUNT (CP_BIN_LINEAR + 50 * (1 << CP_BIN_SUB_LOG2))
#define CP_BIN_WORDS ((CP_BIN_COUNT + 63) / 64)

typedef struct cp_bins {
  uint64_t top;               /* bit w: map[w] != 0 */
  uint64_t map[CP_BIN_WORDS]; /* bit c: class c non-empty */
  struct cp_size_tree tree[CP_BIN_COUNT];
  size_t count;
  size_t bytes;
  unsigned unit_log2; /* log2 of the rounding unit */
} cp_bins_t;

void cp_bins_init(cp_bins_t *bins, size_t unit);
void cp_bins_insert(cp_bins_t *bins, cp_block_t *block);
void cp_bins_remove(cp_bins_t *bins, cp_block_t *block);
/* Smallest block with size >= size (lowest address on ties), or NULL. */
cp_block_t *cp_bins_best_fit(cp_bins_t *bins, size_t size);
cp_block_t *cp_bins_largest(cp_bins_t *bins);

/* The same order on a single tree (keyed pending blocks). */
void cp_tree_insert(struct cp_size_tree *tree, cp_block_t *block);
void cp_tree_remove(struct cp_size_tree *tree, cp_block_t *block);
cp_block_t *cp_tree_best_fit(struct cp_size_tree *tree, size_t size);

#endif
