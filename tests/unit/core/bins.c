/* bins.c: the size index of free blocks (core/bins.c) on its own, without a
 * pool: which class a size lands in (both ends of the linear classes, the
 * first and last subclass of a power of two, the edges of the bitmap's
 * 64-bit words, the last class that takes everything past it), insert and
 * remove with their counters and bitmap bits, best fit (the smallest block
 * that fits, the lowest address on ties, across classes and bitmap words),
 * the largest block, the single-tree functions, and a seeded run of random
 * inserts and removes checked against a brute-force model after every step.
 *
 * Classes are observed through the public fields of cp_bins_t: the one bit
 * of map[] a lone block sets, and the tree it lands in. The expected classes
 * below are worked out by hand from the scheme in bins.h: sizes of 0..31
 * rounding units have a class each (0..31); from 32 units on, each power of
 * two [2^k, 2^(k+1)) units is cut into 16 equal subclasses, so class
 * 32 + 16 * (k - 5) + sub. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdint.h>
#include <string.h>

#include "bins.h"
/* after criterion.h: included first, it breaks the Test macro */
#include <criterion/parameterized.h>

#define U ((size_t)512) /* the pool's default rounding unit */
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* cp_bins_t is about 7 KB: one per test process (Criterion forks). */
static cp_bins_t B;

static cp_block_t block(uintptr_t addr, size_t size) { return (cp_block_t){.addr = addr, .size = size}; }

static bool empty(const struct cp_size_tree *t) { return RB_EMPTY(t); }

static bool class_bit(const cp_bins_t *b, unsigned c) { return (b->map[c / 64] >> (c % 64)) & 1; }

static unsigned bits_set(const cp_bins_t *b) {
  unsigned n = 0;
  for (unsigned w = 0; w < CP_BIN_WORDS; w++) n += (unsigned)__builtin_popcountll(b->map[w]);
  return n;
}

/* Nodes of one class's tree, walked through the links (no generated
 * functions needed); each must have class `want` by spec_class. */
static size_t tree_nodes(const cp_block_t *n) {
  return n ? 1 + tree_nodes(RB_LEFT(n, size_link)) + tree_nodes(RB_RIGHT(n, size_link)) : 0;
}

/* ---- classes ---------------------------------------------------------- */

typedef struct class_case {
  size_t unit, size;
  unsigned cls;
} class_case_t;

ParameterizedTestParameters(bins, class_of_size) {
  static class_case_t cases[] = {
      /* linear classes: one per unit; a part of a unit counts as none */
      {U, 0, 0},
      {U, U - 1, 0},
      {U, U, 1},
      {U, U + 1, 1},
      {U, 2 * U, 2},
      {U, 31 * U, 31},
      /* 32..63 units: 16 subclasses of 2 units each */
      {U, 32 * U, 32},
      {U, 33 * U, 32},
      {U, 34 * U, 33},
      {U, 62 * U, 47},
      {U, 63 * U, 47},
      /* 64..127 units: 16 subclasses of 4 units each */
      {U, 64 * U, 48},
      {U, 67 * U, 48},
      {U, 68 * U, 49},
      /* the last bit of map[0] and the first of map[1] */
      {U, 127 * U, 63},
      {U, 128 * U, 64},
      /* 1 GiB = 2^21 units: first subclass of that power; +1/16 the next */
      {U, 1 * GiB, 288},
      {U, 1 * GiB + 63 * MiB, 288},
      {U, 1 * GiB + 64 * MiB, 289},
      {U, 2 * GiB - U, 303},
      /* the largest multiple of 512 is 2^55 - 1 units: the very last class */
      {U, SIZE_MAX - (U - 1), CP_BIN_COUNT - 1},
      {U, SIZE_MAX, CP_BIN_COUNT - 1},
      /* unit 1: sizes from 2^55 would be classes past the end; they share
       * the last one */
      {1, 31, 31},
      {1, 32, 32},
      {1, (size_t)1 << 54, 816},
      {1, ((size_t)1 << 55) - 1, CP_BIN_COUNT - 1},
      {1, (size_t)1 << 55, CP_BIN_COUNT - 1},
      {1, SIZE_MAX, CP_BIN_COUNT - 1},
      /* unit 2 MiB: classes count units of the unit given */
      {2 * MiB, 1 * MiB, 0},
      {2 * MiB, 2 * MiB, 1},
      {2 * MiB, 64 * MiB, 32},
  };
  return cr_make_param_array(class_case_t, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(class_case_t *c, bins, class_of_size) {
  cp_bins_init(&B, c->unit);
  cp_block_t b = block(0x1000, c->size);
  cp_bins_insert(&B, &b);
  cr_assert(eq(u32, bits_set(&B), 1), "unit %zu size %zu: one class marked", c->unit, c->size);
  cr_assert(class_bit(&B, c->cls), "unit %zu size %zu: class %u not marked", c->unit, c->size, c->cls);
  cr_assert(eq(u64, B.top, UINT64_C(1) << (c->cls / 64)), "size %zu: summary bit of word %u", c->size,
            c->cls / 64);
  cr_assert(eq(ptr, (void *)RB_ROOT(&B.tree[c->cls]), (void *)&b), "size %zu: not in tree %u", c->size,
            c->cls);
  cr_assert(eq(sz, B.count, 1));
  cr_assert(eq(sz, B.bytes, c->size));
  cp_bins_remove(&B, &b);
  cr_assert(eq(u32, bits_set(&B), 0));
  cr_assert(eq(u64, B.top, 0));
  cr_assert(empty(&B.tree[c->cls]));
  cr_assert(eq(sz, B.count, 0));
  cr_assert(eq(sz, B.bytes, 0));
}

/* ---- init, insert, remove --------------------------------------------- */

Test(bins, init_empties_whatever_was_there) {
  memset(&B, 0xa5, sizeof B);
  cp_bins_init(&B, U);
  cr_assert(eq(u32, B.unit_log2, 9));
  cr_assert(eq(sz, B.count, 0));
  cr_assert(eq(sz, B.bytes, 0));
  cr_assert(eq(u64, B.top, 0));
  for (unsigned w = 0; w < CP_BIN_WORDS; w++) cr_assert(eq(u64, B.map[w], 0), "map[%u]", w);
  for (unsigned c = 0; c < CP_BIN_COUNT; c++) cr_assert(empty(&B.tree[c]), "tree %u", c);
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 0), NULL));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, U), NULL));
  cr_assert(eq(ptr, (void *)cp_bins_largest(&B), NULL));
  cp_bins_init(&B, 2 * MiB);
  cr_assert(eq(u32, B.unit_log2, 21));
}

Test(bins, bits_clear_only_when_the_class_and_the_word_empty) {
  cp_bins_init(&B, U);
  /* classes 40 and 45 share word 0; class 64 starts word 1 */
  cp_block_t a1 = block(0x10000, 48 * U), a2 = block(0x20000, 49 * U); /* class 40 */
  cp_block_t b = block(0x30000, 58 * U);                               /* class 45 */
  cp_block_t c = block(0x40000, 128 * U);                              /* class 64 */
  cp_bins_insert(&B, &a1);
  cp_bins_insert(&B, &a2);
  cp_bins_insert(&B, &b);
  cp_bins_insert(&B, &c);
  cr_assert(eq(u64, B.map[0], (UINT64_C(1) << 40) | (UINT64_C(1) << 45)));
  cr_assert(eq(u64, B.map[1], 1));
  cr_assert(eq(u64, B.top, 3));
  cr_assert(eq(sz, B.count, 4));
  cr_assert(eq(sz, B.bytes, (48 + 49 + 58 + 128) * U));

  cp_bins_remove(&B, &a1); /* class 40 keeps a2 */
  cr_assert(eq(u64, B.map[0], (UINT64_C(1) << 40) | (UINT64_C(1) << 45)));
  cr_assert(eq(ptr, (void *)RB_ROOT(&B.tree[40]), (void *)&a2));
  cp_bins_remove(&B, &a2); /* class 40 empty, word 0 still has 45 */
  cr_assert(eq(u64, B.map[0], UINT64_C(1) << 45));
  cr_assert(eq(u64, B.top, 3));
  cp_bins_remove(&B, &b); /* word 0 empty */
  cr_assert(eq(u64, B.map[0], 0));
  cr_assert(eq(u64, B.top, 2));
  cr_assert(eq(sz, B.count, 1));
  cr_assert(eq(sz, B.bytes, 128 * U));
  cp_bins_remove(&B, &c);
  cr_assert(eq(u64, B.map[1], 0));
  cr_assert(eq(u64, B.top, 0));
  cr_assert(eq(sz, B.count, 0));
  cr_assert(eq(sz, B.bytes, 0));

  /* a block put back after its class emptied is found again */
  cp_bins_insert(&B, &b);
  cr_assert(eq(u64, B.map[0], UINT64_C(1) << 45));
  cr_assert(eq(u64, B.top, 1));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, U), (void *)&b));
}

/* ---- best fit --------------------------------------------------------- */

typedef struct fit_case {
  size_t request;
  int want; /* index into fit_sizes, or -1 for NULL */
} fit_case_t;

/* 2^46 + 12 * 2^42 units of 512 bytes: class 32 + 16 * 41 + 12 = 700, in
 * map[10], the only block past map[4]. */
#define S700 ((size_t)7 << 53)

/* One block each, at increasing addresses: classes 1, 3, 32, 32, 47, 63,
 * 64, 288, 700. */
static const size_t fit_sizes[] = {1 * U, 3 * U, 32 * U, 33 * U, 63 * U, 127 * U, 128 * U, 1 * GiB, S700};

ParameterizedTestParameters(bins, best_fit_is_the_smallest_that_fits) {
  static fit_case_t cases[] = {
      {0, 0},           {1, 0},         {U, 0},           {U + 1, 1},      {2 * U, 1},       {3 * U, 1},
      {4 * U, 2},       {31 * U, 2},    {32 * U, 2},      {32 * U + 1, 3}, {33 * U, 3},      {33 * U + 1, 4},
      {34 * U, 4},      {63 * U, 4},    {64 * U, 5},      {127 * U, 5},    {127 * U + 1, 6}, {128 * U, 6},
      {128 * U + 1, 7}, {1 * GiB, 7},   {1 * GiB + 1, 8}, {S700 - U, 8},   {S700, 8},        {S700 + 1, -1},
      {S700 + U, -1},   {SIZE_MAX, -1},
  };
  return cr_make_param_array(fit_case_t, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(fit_case_t *f, bins, best_fit_is_the_smallest_that_fits) {
  enum { N = sizeof fit_sizes / sizeof fit_sizes[0] };
  static cp_block_t blocks[N];
  cp_bins_init(&B, U);
  /* inserted in reverse order, so that insertion order cannot stand in for
   * size order */
  for (int i = N - 1; i >= 0; i--) {
    blocks[i] = block(0x100000 + (uintptr_t)i * 0x1000, fit_sizes[i]);
    cp_bins_insert(&B, &blocks[i]);
  }
  cr_assert(class_bit(&B, 700) && B.map[10] == UINT64_C(1) << (700 % 64), "the last block is in class 700");
  cp_block_t *got = cp_bins_best_fit(&B, f->request);
  cp_block_t *want = f->want < 0 ? NULL : &blocks[f->want];
  cr_assert(eq(ptr, (void *)got, (void *)want), "request %zu: got size %zu, want size %zu", f->request,
            got ? got->size : 0, want ? want->size : 0);
}

Test(bins, best_fit_takes_the_lowest_address_among_equal_sizes) {
  cp_bins_init(&B, U);
  /* five blocks of 40 units (class 36) and two of 10 units, addresses
   * inserted out of order */
  static const uintptr_t addrs[] = {0x50000, 0x20000, 0x90000, 0x10000, 0x70000};
  static cp_block_t big[5], small[2];
  for (int i = 0; i < 5; i++) {
    big[i] = block(addrs[i], 40 * U);
    cp_bins_insert(&B, &big[i]);
  }
  small[0] = block(0x80000, 10 * U);
  small[1] = block(0x08000, 10 * U);
  cp_bins_insert(&B, &small[0]);
  cp_bins_insert(&B, &small[1]);

  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 10 * U), (void *)&small[1]));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 1), (void *)&small[1]));
  /* 11..40 units: the big ones, lowest address first as each is taken */
  /* requests of 11..40 units: from class 36 itself or from below it */
  static const size_t units[] = {11, 40, 32, 40, 39};
  static const int order[] = {3, 1, 0, 4, 2};
  for (int k = 0; k < 5; k++) {
    cp_block_t *got = cp_bins_best_fit(&B, units[k] * U);
    cr_assert(eq(ptr, (void *)got, (void *)&big[order[k]]), "take %d: got %#lx", k,
              got ? (unsigned long)got->addr : 0ul);
    cp_bins_remove(&B, got);
  }
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 11 * U), NULL));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 10 * U), (void *)&small[1]));
}

Test(bins, best_fit_prefers_size_over_address_across_classes) {
  cp_bins_init(&B, U);
  /* the request's own class (32: 32..33 units) holds only a block too
   * small; the next non-empty class (34) must win over a larger block at a
   * lower address in a later class */
  cp_block_t in_class = block(0x400000, 32 * U);
  cp_block_t next = block(0x300000, 36 * U);       /* class 34 */
  cp_block_t later = block(0x100000, 60 * U);      /* class 46 */
  cp_block_t lower_same = block(0x200000, 37 * U); /* class 34 too, larger */
  cp_bins_insert(&B, &later);
  cp_bins_insert(&B, &lower_same);
  cp_bins_insert(&B, &next);
  cp_bins_insert(&B, &in_class);
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 33 * U), (void *)&next));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 32 * U), (void *)&in_class));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 36 * U + 1), (void *)&lower_same));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 37 * U + 1), (void *)&later));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 60 * U + 1), NULL));
}

Test(bins, best_fit_crosses_empty_bitmap_words) {
  cp_bins_init(&B, U);
  /* the only block sits in word 12 (class 831); requests from word 0 on
   * must reach it through the summary word */
  cp_block_t top = block(0x1000, SIZE_MAX - (U - 1));
  cp_bins_insert(&B, &top);
  cr_assert(eq(u64, B.top, UINT64_C(1) << (CP_BIN_WORDS - 1)));
  for (size_t req = U; req < SIZE_MAX / 3; req *= 3)
    cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, req), (void *)&top), "request %zu", req);
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, SIZE_MAX - (U - 1)), (void *)&top));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, SIZE_MAX), NULL));
  /* one in word 1 now comes first for what it fits */
  cp_block_t mid = block(0x2000, 128 * U);
  cp_bins_insert(&B, &mid);
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 1), (void *)&mid));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 128 * U), (void *)&mid));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, 128 * U + 1), (void *)&top));
}

Test(bins, last_class_orders_everything_past_it_by_size) {
  cp_bins_init(&B, 1); /* unit 1: sizes from 2^55 share class 831 */
  cp_block_t a = block(0x3000, (size_t)1 << 55);
  cp_block_t b = block(0x1000, (size_t)1 << 60);
  cp_block_t c = block(0x2000, SIZE_MAX);
  cp_block_t d = block(0x4000, ((size_t)1 << 55) - 1); /* the class's own top */
  cp_bins_insert(&B, &c);
  cp_bins_insert(&B, &b);
  cp_bins_insert(&B, &a);
  cp_bins_insert(&B, &d);
  cr_assert(eq(u32, bits_set(&B), 1));
  cr_assert(eq(sz, tree_nodes(RB_ROOT(&B.tree[CP_BIN_COUNT - 1])), 4));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, (size_t)1 << 50), (void *)&d));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, (size_t)1 << 55), (void *)&a));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, ((size_t)1 << 55) + 1), (void *)&b));
  cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, ((size_t)1 << 60) + 1), (void *)&c));
  cr_assert(eq(ptr, (void *)cp_bins_largest(&B), (void *)&c));
}

/* ---- largest ---------------------------------------------------------- */

Test(bins, largest_is_the_biggest_block) {
  cp_bins_init(&B, U);
  cp_block_t s = block(0x1000, 1 * U), m = block(0x2000, 100 * U), l = block(0x3000, 127 * U);
  cp_block_t h = block(0x4000, 128 * U); /* first class of word 1 */
  cp_bins_insert(&B, &l);
  cp_bins_insert(&B, &s);
  cr_assert(eq(ptr, (void *)cp_bins_largest(&B), (void *)&l));
  cp_bins_insert(&B, &m);
  cr_assert(eq(ptr, (void *)cp_bins_largest(&B), (void *)&l));
  cp_bins_insert(&B, &h);
  cr_assert(eq(ptr, (void *)cp_bins_largest(&B), (void *)&h));
  /* within one class too: 126 and 127 units are both class 63 */
  cp_bins_remove(&B, &h);
  cp_block_t l2 = block(0x500, 126 * U);
  cp_bins_insert(&B, &l2);
  cr_assert(eq(ptr, (void *)cp_bins_largest(&B), (void *)&l));
  cp_bins_remove(&B, &l);
  cr_assert(eq(ptr, (void *)cp_bins_largest(&B), (void *)&l2));
  cp_bins_remove(&B, &l2);
  cp_bins_remove(&B, &m);
  cr_assert(eq(ptr, (void *)cp_bins_largest(&B), (void *)&s));
  cp_bins_remove(&B, &s);
  cr_assert(eq(ptr, (void *)cp_bins_largest(&B), NULL));
}

/* ---- one tree (the pending blocks of one reuse key) -------------------- */

Test(tree, best_fit_lowest_address_on_ties_and_remove) {
  struct cp_size_tree t;
  RB_INIT(&t);
  cr_assert(eq(ptr, (void *)cp_tree_best_fit(&t, 0), NULL));
  /* no classes here: any sizes, one tree */
  cp_block_t a = block(0x9000, 3 * U), b = block(0x5000, 3 * U), c = block(0x7000, 1000 * U);
  cp_block_t d = block(0x1000, 2 * U);
  cp_tree_insert(&t, &a);
  cp_tree_insert(&t, &c);
  cp_tree_insert(&t, &b);
  cp_tree_insert(&t, &d);
  cr_assert(eq(sz, tree_nodes(RB_ROOT(&t)), 4));
  cr_assert(eq(ptr, (void *)cp_tree_best_fit(&t, 1), (void *)&d));
  cr_assert(eq(ptr, (void *)cp_tree_best_fit(&t, 2 * U), (void *)&d));
  cr_assert(eq(ptr, (void *)cp_tree_best_fit(&t, 2 * U + 1), (void *)&b));
  cr_assert(eq(ptr, (void *)cp_tree_best_fit(&t, 3 * U + 1), (void *)&c));
  cr_assert(eq(ptr, (void *)cp_tree_best_fit(&t, 1000 * U + 1), NULL));
  cp_tree_remove(&t, &b);
  cr_assert(eq(ptr, (void *)cp_tree_best_fit(&t, 3 * U), (void *)&a));
  cp_tree_remove(&t, &a);
  cr_assert(eq(ptr, (void *)cp_tree_best_fit(&t, 3 * U), (void *)&c));
  cp_tree_remove(&t, &c);
  cp_tree_remove(&t, &d);
  cr_assert(empty(&t));
}

/* ---- random operations against a model -------------------------------- */

/* The class of a size computed another way than bins.c does (a loop for
 * the power of two, a division for the subclass). */
static unsigned spec_class(size_t size, unsigned unit_log2) {
  uint64_t units = (uint64_t)size >> unit_log2;
  if (units < 32) return (unsigned)units;
  unsigned k = 5;
  while (k < 63 && (units >> (k + 1)) != 0) k++;
  uint64_t base = UINT64_C(1) << k;
  unsigned c = 32 + (k - 5) * 16 + (unsigned)((units - base) / (base / 16));
  return c < CP_BIN_COUNT ? c : CP_BIN_COUNT - 1;
}

/* Every node of the tree is of class c and in (size, address) order; the
 * number of nodes. */
static size_t check_tree(const cp_block_t *n, unsigned c, const cp_block_t **prev) {
  if (n == NULL) return 0;
  size_t k = check_tree(RB_LEFT(n, size_link), c, prev);
  cr_assert(eq(u32, spec_class(n->size, B.unit_log2), c), "size %zu in tree %u", n->size, c);
  if (*prev) {
    bool ordered = (*prev)->size < n->size || ((*prev)->size == n->size && (*prev)->addr < n->addr);
    cr_assert(ordered, "tree %u out of order", c);
  }
  *prev = n;
  return k + 1 + check_tree(RB_RIGHT(n, size_link), c, prev);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Units spread over many powers of two (so over many bitmap words), with a
 * few sizes drawn often so that ties are common. */
static size_t random_size(void) {
  if (rnd() % 3 == 0) return (size_t)(1 + rnd() % 6) * 40 * U;
  unsigned k = (unsigned)(rnd() % 40);
  return (size_t)(1 + rnd() % (UINT64_C(1) << k)) * U;
}

Test(bins, random_operations_keep_bits_trees_and_counts_consistent) {
  enum { SLOTS = 512, STEPS = 20000 };
  static cp_block_t blocks[SLOTS];
  static bool in[SLOTS];
  size_t count = 0, bytes = 0;
  cp_bins_init(&B, U);
  for (int step = 0; step < STEPS; step++) {
    int i = (int)(rnd() % SLOTS);
    if (in[i]) {
      cp_bins_remove(&B, &blocks[i]);
      count--;
      bytes -= blocks[i].size;
    } else {
      blocks[i] = block(0x10000000 + (uintptr_t)i * 0x1000, random_size());
      cp_bins_insert(&B, &blocks[i]);
      count++;
      bytes += blocks[i].size;
    }
    in[i] = !in[i];

    cr_assert(eq(sz, B.count, count), "step %d", step);
    cr_assert(eq(sz, B.bytes, bytes), "step %d", step);
    size_t nodes = 0;
    for (unsigned c = 0; c < CP_BIN_COUNT; c++) {
      cr_assert(eq(int, class_bit(&B, c), !empty(&B.tree[c])), "step %d class %u", step, c);
      const cp_block_t *prev = NULL;
      nodes += check_tree(RB_ROOT(&B.tree[c]), c, &prev);
    }
    cr_assert(eq(sz, nodes, count), "step %d", step);
    for (unsigned w = 0; w < CP_BIN_WORDS; w++)
      cr_assert(eq(int, (int)(B.top >> w & 1), B.map[w] != 0), "step %d word %u", step, w);
    cr_assert(eq(u64, B.top >> CP_BIN_WORDS, 0));
    cr_assert(eq(u64, B.map[CP_BIN_WORDS - 1] >> (CP_BIN_COUNT % 64), 0));

    /* best fit and largest against a scan of the model */
    size_t req = rnd() % 2 ? random_size() : random_size() - U + 1 + rnd() % U;
    const cp_block_t *best = NULL, *largest = NULL;
    for (int j = 0; j < SLOTS; j++) {
      if (!in[j]) continue;
      const cp_block_t *b = &blocks[j];
      if (b->size >= req &&
          (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr)))
        best = b;
      if (!largest || b->size > largest->size) largest = b;
    }
    cr_assert(eq(ptr, (void *)cp_bins_best_fit(&B, req), (void *)best), "step %d request %zu", step, req);
    cp_block_t *l = cp_bins_largest(&B);
    cr_assert(eq(sz, l ? l->size : 0, largest ? largest->size : 0), "step %d", step);
  }
}
