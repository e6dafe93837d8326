/* stacks_bench.c: what CUDAPOOL_STACKS costs an allocation (shim/state/
 * stacks.c, built in here): one recorded allocation and its free, from a
 * call chain 20 frames deep, at depth 16 and 64, against glibc backtrace()
 * alone. Prints one line per case: "stacks_bench: CASE ns=N" (median of 9
 * rounds of 20000). No Python here: pyframes finds none and adds one
 * failed lookup, once. The module is built into this program, so the frames
 * it drops as its own are this program's whole chain: the walk (always
 * DEPTH + 8 frames) is paid in full, the hashing of fewer frames is not,
 * which the walk dominates. Measured on the 2-core build machine: about
 * 4-6 us per allocation, as backtrace() alone. */
#include <stdint.h>
#include <stdio.h>
#include <execinfo.h>

#include "bench_util.h"
#include "state/stacks.h"

#define ROUNDS 9
#define ITERS 20000

typedef void op_fn(uintptr_t i);

static void record_pair(uintptr_t i) {
  cp_stacks_served(0x100000 + 512 * (i & 1023), 512, 1 << 20);
  cp_stacks_freeing(0x100000 + 512 * (i & 1023));
}

static void walk_only(uintptr_t i) {
  void *frames[64];
  (void)i;
  backtrace(frames, 24);
}

/* Recursion that the compiler keeps: each level is a real frame. */
static __attribute__((noinline)) void nest(int depth, op_fn *op, uintptr_t i) {
  if (depth == 0)
    op(i);
  else
    nest(depth - 1, op, i);
  __asm__ volatile("" ::: "memory");
}

static double measure(op_fn *op) {
  double per[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = now_ns();
    for (uintptr_t i = 0; i < ITERS; i++) nest(20, op, i);
    per[r] = (now_ns() - t0) / ITERS;
  }
  return bench_median(per, ROUNDS);
}

int main(void) {
  cp_stacks_start(16);
  printf("stacks_bench: backtrace_24_frames ns=%.0f\n", measure(walk_only));
  printf("stacks_bench: record_and_free_depth_16 ns=%.0f\n", measure(record_pair));
  cp_stacks_start(64);
  printf("stacks_bench: record_and_free_depth_64 ns=%.0f\n", measure(record_pair));
  return 0;
}
