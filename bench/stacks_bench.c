/* stacks_bench.c: what CUDAPOOL_STACKS costs an allocation (shim/state/
 * stacks.c and stackwalk.c, built in here), and the walks it could use.
 * Every case runs from a call chain 20 frames deep and prints one line
 * "stacks_bench: CASE ns=N" (median of 9 rounds of 20000), the walks with
 * " frames=F", the frames the last one found:
 *   walk_glibc_24, walk_libunwind_24: the two walkers of stackwalk.c, 24
 *     frames (depth 16 plus the 8 kept for cudapool's own);
 *   walk_frame_pointers_24: a walk of the rbp chain, bounded by the thread's
 *     stack (this program is built with frame pointers, so it is right here),
 *     and walk_frame_pointers_no_fp_chain: the same walk through a chain built
 *     without them, where it stops early (F < 24) or goes wrong;
 *   walk_cached_by_4_frames: libunwind's walk of the 4 innermost frames, and
 *     the whole stack reused from a cache when those 4 were seen before;
 *   record_and_free_WALKER_depth_D: one allocation recorded and freed, the
 *     whole cost with stacks on (stacks off, the serving path only tests a
 *     flag: bench/shim_pair.c's pair with and without CUDAPOOL_STACKS).
 * No Python here: pyframes finds none and adds one failed lookup, once. The
 * module is built into this program, so the frames it drops as its own are
 * this program's whole chain: the walk (DEPTH + 8 frames) is paid in full,
 * the hashing of fewer frames is not, which the walk dominates. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench_util.h"
#include "state/stacks.h"
#include "state/stackwalk.h"

#define ROUNDS 9
#define ITERS 20000
#define WALK 24
#define CHAIN 20

typedef int op_fn(uintptr_t i);

static void *frames[64];

static int record_pair(uintptr_t i) {
  cp_stacks_capture();
  cp_stacks_served(0x100000 + 512 * (i & 1023), 512, 1 << 20);
  cp_stacks_freeing(0x100000 + 512 * (i & 1023));
  return 0;
}

static int walk_glibc(uintptr_t i) {
  (void)i;
  return cp_stackwalk(frames, WALK);
}

/* ---- candidates not taken, measured here only ---------------------------------------- */

static __thread uintptr_t stack_lo, stack_hi;

/* The rbp chain, read only inside this thread's stack, each frame above the
 * last: never faults, but only right where every frame keeps rbp. */
static __attribute__((noinline)) int frame_pointer_walk(void **pcs, int max) {
  if (!stack_hi) {
    pthread_attr_t attr;
    void *base;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
    pthread_attr_getstack(&attr, &base, &size);
    pthread_attr_destroy(&attr);
    stack_lo = (uintptr_t)base, stack_hi = stack_lo + size;
  }
  const uintptr_t *fp = __builtin_frame_address(0);
  int n = 0;
  while (n < max && (uintptr_t)fp >= stack_lo && (uintptr_t)fp + 2 * sizeof *fp <= stack_hi &&
         (uintptr_t)fp % sizeof *fp == 0) {
    const uintptr_t *next = (const uintptr_t *)fp[0];
    if (!fp[1]) break;
    pcs[n++] = (void *)fp[1];
    if (next <= fp) break;
    fp = next;
  }
  return n;
}

static int walk_fp(uintptr_t i) {
  (void)i;
  return frame_pointer_walk(frames, WALK);
}

#define CACHE_HEAD 4
#define CACHE_SLOTS 256
typedef struct cached_stack {
  void *head[CACHE_HEAD];
  void *pcs[WALK];
  int n;
} cached_stack_t;
static cached_stack_t cache[CACHE_SLOTS];

/* The 4 innermost frames, then the rest from the cache when those were
 * seen: wrong whenever one caller is reached along two paths. */
static int walk_cached(uintptr_t i) {
  (void)i;
  void *head[CACHE_HEAD];
  int n = cp_stackwalk(head, CACHE_HEAD);
  uint64_t h = 1469598103934665603u;
  for (int k = 0; k < n; k++) h = (h ^ (uintptr_t)head[k]) * 1099511628211u;
  cached_stack_t *slot = &cache[h % CACHE_SLOTS];
  if (slot->n && memcmp(slot->head, head, sizeof head) == 0) {
    memcpy(frames, slot->pcs, (size_t)slot->n * sizeof frames[0]);
    return slot->n;
  }
  slot->n = cp_stackwalk(slot->pcs, WALK);
  memcpy(slot->head, head, sizeof head);
  memcpy(frames, slot->pcs, (size_t)slot->n * sizeof frames[0]);
  return slot->n;
}

/* ---- the chains ----------------------------------------------------------------------- */

/* Recursion that the compiler keeps: each level is a real frame. */
static __attribute__((noinline)) int nest(int depth, op_fn *op, uintptr_t i) {
  int n = depth == 0 ? op(i) : nest(depth - 1, op, i);
  __asm__ volatile("" ::: "memory");
  return n;
}

/* The same, built without frame pointers, rbp used as an ordinary register
 * (as optimised distribution libraries may): what a frame-pointer walk
 * meets in libcudart or libtorch. */
static __attribute__((noinline, optimize("omit-frame-pointer"))) int nest_no_fp(int depth, op_fn *op, uintptr_t i) {
  int n = depth == 0 ? op(i) : nest_no_fp(depth - 1, op, i);
  __asm__ volatile("" ::: "memory", "rbp");
  return n;
}

typedef int chain_fn(int depth, op_fn *op, uintptr_t i);

static void measure(const char *name, chain_fn *chain, op_fn *op) {
  double per[ROUNDS];
  int n = 0;
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = now_ns();
    for (uintptr_t i = 0; i < ITERS; i++) n = chain(CHAIN, op, i);
    per[r] = (now_ns() - t0) / ITERS;
  }
  printf("stacks_bench: %s ns=%.0f", name, bench_median(per, ROUNDS));
  if (op != record_pair) printf(" frames=%d", n);
  putchar('\n');
}

int main(void) {
  cp_stacks_start(16);
  bool libunwind = cp_stackwalk_use(CP_WALKER_LIBUNWIND);
  cp_stackwalk_use(CP_WALKER_GLIBC);
  measure("walk_glibc_24", nest, walk_glibc);
  measure("record_and_free_glibc_depth_16", nest, record_pair);
  if (!libunwind) {
    puts("stacks_bench: no libunwind.so.8: its cases skipped");
  } else {
    cp_stackwalk_use(CP_WALKER_LIBUNWIND);
    measure("walk_libunwind_24", nest, walk_glibc);
    measure("walk_cached_by_4_frames", nest, walk_cached);
    measure("record_and_free_libunwind_depth_16", nest, record_pair);
  }
  measure("walk_frame_pointers_24", nest, walk_fp);
  measure("walk_frame_pointers_no_fp_chain", nest_no_fp, walk_fp);
  cp_stacks_start(64);
  cp_stackwalk_use(CP_WALKER_GLIBC);
  measure("record_and_free_glibc_depth_64", nest, record_pair);
  if (libunwind) {
    cp_stackwalk_use(CP_WALKER_LIBUNWIND);
    measure("record_and_free_libunwind_depth_64", nest, record_pair);
  }
  return 0;
}
