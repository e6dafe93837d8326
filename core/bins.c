/* bins.c: segregated size classes with bitmaps, a (size, address) tree per
 * class. See bins.h for the contract. */
#include "bins.h"

#include <string.h>

static int cmp_size_addr(const cp_block_t *a, const cp_block_t *b) {
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
  return 0;
}

CP_RB_GENERATE_STATIC(cp_size_tree, cp_block, size_link, cmp_size_addr)

static unsigned class_of(const cp_bins_t *bins, size_t size) {
  uint64_t units = (uint64_t)size >> bins->unit_log2;
  if (units < CP_BIN_LINEAR) return (unsigned)units;
  unsigned fl = 63u - (unsigned)__builtin_clzll(units); /* >= 5 */
  unsigned sl = (unsigned)(units >> (fl - CP_BIN_SUB_LOG2)) & ((1u << CP_BIN_SUB_LOG2) - 1);
  unsigned c = CP_BIN_LINEAR + (fl - 5) * (1u << CP_BIN_SUB_LOG2) + sl;
  return c < CP_BIN_COUNT ? c : CP_BIN_COUNT - 1;
}

void cp_bins_init(cp_bins_t *bins, size_t unit) {
  memset(bins, 0, sizeof *bins);
  for (unsigned c = 0; c < CP_BIN_COUNT; c++) RB_INIT(&bins->tree[c]);
  bins->unit_log2 = (unsigned)__builtin_ctzll((unsigned long long)unit);
}

static void set_class_bit(cp_bins_t *bins, unsigned c) {
  bins->map[c / 64] |= 1ull << (c % 64);
  bins->top |= 1ull << (c / 64);
}

static void clear_class_bit_if_empty(cp_bins_t *bins, unsigned c) {
  if (!RB_EMPTY(&bins->tree[c])) return;
  bins->map[c / 64] &= ~(1ull << (c % 64));
  if (bins->map[c / 64] == 0) bins->top &= ~(1ull << (c / 64));
}

void cp_bins_insert(cp_bins_t *bins, cp_block_t *block) {
  unsigned c = class_of(bins, block->size);
  RB_INSERT(cp_size_tree, &bins->tree[c], block);
  set_class_bit(bins, c);
  bins->count++;
  bins->bytes += block->size;
}

void cp_bins_remove(cp_bins_t *bins, cp_block_t *block) {
  unsigned c = class_of(bins, block->size);
  RB_REMOVE(cp_size_tree, &bins->tree[c], block);
  clear_class_bit_if_empty(bins, c);
  bins->count--;
  bins->bytes -= block->size;
}

/* First non-empty class >= c, or CP_BIN_COUNT. */
static unsigned next_class(const cp_bins_t *bins, unsigned c) {
  if (c >= CP_BIN_COUNT) return CP_BIN_COUNT;
  unsigned w = c / 64;
  uint64_t bits = bins->map[w] & (~0ull << (c % 64));
  if (bits) return w * 64 + (unsigned)__builtin_ctzll(bits);
  if (w + 1 >= CP_BIN_WORDS) return CP_BIN_COUNT;
  uint64_t words = bins->top & (~0ull << (w + 1));
  if (!words) return CP_BIN_COUNT;
  w = (unsigned)__builtin_ctzll(words);
  return w * 64 + (unsigned)__builtin_ctzll(bins->map[w]);
}

cp_block_t *cp_bins_best_fit(cp_bins_t *bins, size_t size) {
  unsigned c = class_of(bins, size);
  if (bins->map[c / 64] & (1ull << (c % 64))) {
    cp_block_t *hit = cp_tree_best_fit(&bins->tree[c], size);
    if (hit) return hit;
  }
  /* Every block of a higher class is larger than any block of class c. */
  unsigned n = next_class(bins, c + 1);
  return n < CP_BIN_COUNT ? RB_MIN(cp_size_tree, &bins->tree[n]) : NULL;
}

cp_block_t *cp_bins_largest(cp_bins_t *bins) {
  if (!bins->top) return NULL;
  unsigned w = 63u - (unsigned)__builtin_clzll(bins->top);
  unsigned c = w * 64 + 63u - (unsigned)__builtin_clzll(bins->map[w]);
  return RB_MAX(cp_size_tree, &bins->tree[c]);
}

void cp_tree_insert(struct cp_size_tree *tree, cp_block_t *block) { RB_INSERT(cp_size_tree, tree, block); }

void cp_tree_remove(struct cp_size_tree *tree, cp_block_t *block) { RB_REMOVE(cp_size_tree, tree, block); }

cp_block_t *cp_tree_best_fit(struct cp_size_tree *tree, size_t size) {
  cp_block_t key = {.size = size, .addr = 0};
  return RB_NFIND(cp_size_tree, tree, &key);
}
