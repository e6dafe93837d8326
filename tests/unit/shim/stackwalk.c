/* stackwalk.c: shim/state/stackwalk.c's two walkers, through a chain of
 * three functions built without frame pointers that use rbp as an ordinary
 * register (so that a frame-pointer walk would lose them): each walker
 * finds the exact return addresses the chain took (each function records
 * its own with __builtin_return_address), innermost first, on the main
 * thread and on a new one. libunwind's cases skip where libunwind.so.8
 * does not load (scripts/deps installs it). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "state/stackwalk.h"

#define MAX 32

typedef struct walk {
  void *pcs[MAX];
  int n;
  void *returns[3]; /* into chain_2, chain_1, the caller of chain_1 */
} walk_t;

#define NO_FRAME_POINTER __attribute__((noinline, noclone, optimize("omit-frame-pointer")))

static NO_FRAME_POINTER void chain_3(walk_t *w) {
  w->returns[0] = __builtin_return_address(0);
  w->n = cp_stackwalk(w->pcs, MAX);
  __asm__ volatile("" ::: "memory", "rbp");
}

static NO_FRAME_POINTER void chain_2(walk_t *w) {
  w->returns[1] = __builtin_return_address(0);
  chain_3(w);
  __asm__ volatile("" ::: "memory", "rbp");
}

static NO_FRAME_POINTER void chain_1(walk_t *w) {
  w->returns[2] = __builtin_return_address(0);
  chain_2(w);
  __asm__ volatile("" ::: "memory", "rbp");
}

/* The chain's three return addresses follow one another in the walk, after
 * the frames inside cp_stackwalk and chain_3 (and, under ASan, its
 * backtrace interceptor). */
static void assert_walk_names_the_chain(const walk_t *w, const char *walker) {
  int at = 0;
  while (at < w->n && w->pcs[at] != w->returns[0]) at++;
  cr_assert(lt(int, at + 2, w->n), "%s: the return into chain_2 (%p) is not among the %d frames", walker,
            w->returns[0], w->n);
  cr_assert(ge(int, at, 2), "%s: frames inside cp_stackwalk and chain_3 missing (at %d)", walker, at);
  cr_assert(eq(ptr, w->pcs[at + 1], w->returns[1]), "%s: frame after chain_2's", walker);
  cr_assert(eq(ptr, w->pcs[at + 2], w->returns[2]), "%s: frame after chain_1's", walker);
}

static void *walk_on_thread(void *w) {
  chain_1(w);
  return NULL;
}

static void check_walker(cp_walker_t walker, const char *name) {
  if (!cp_stackwalk_use(walker)) cr_skip_test("%s cannot be loaded here (libunwind.so.8: scripts/deps)", name);
  cr_assert(eq(str, (char *)cp_stackwalk_name(), (char *)name));
  walk_t here = {0}, there = {0};
  chain_1(&here);
  assert_walk_names_the_chain(&here, name);
  pthread_t t;
  cr_assert(eq(int, pthread_create(&t, NULL, walk_on_thread, &there), 0));
  pthread_join(t, NULL);
  assert_walk_names_the_chain(&there, name);
}

Test(stackwalk, libunwind_finds_each_return_address_of_a_chain_without_frame_pointers) {
  check_walker(CP_WALKER_LIBUNWIND, "libunwind");
}

Test(stackwalk, glibc_finds_each_return_address_of_a_chain_without_frame_pointers) {
  check_walker(CP_WALKER_GLIBC, "glibc");
}

Test(stackwalk, both_walkers_give_the_same_frames_from_the_chain_outwards) {
  if (!cp_stackwalk_use(CP_WALKER_LIBUNWIND)) cr_skip_test("libunwind.so.8 cannot be loaded here (scripts/deps)");
  walk_t walks[2];
  memset(walks, 0, sizeof walks);
  /* One call site for both walks (volatile: not unrolled into two), so the
   * same frames all the way out. */
  for (volatile int k = 0; k < 2; k++) {
    cp_stackwalk_use(k == 0 ? CP_WALKER_LIBUNWIND : CP_WALKER_GLIBC);
    chain_1(&walks[k]);
  }
  walk_t a = walks[0], b = walks[1];
  int ia = 0, ib = 0;
  while (ia < a.n && a.pcs[ia] != a.returns[0]) ia++;
  while (ib < b.n && b.pcs[ib] != b.returns[0]) ib++;
  cr_assert(lt(int, ia, a.n));
  cr_assert(lt(int, ib, b.n));
  /* Outward of the chain both stop where the unwind tables stop (_start). */
  cr_assert(eq(int, a.n - ia, b.n - ib), "libunwind %d frames, glibc %d, from chain_2 out", a.n - ia, b.n - ib);
  cr_assert(eq(int, memcmp(&a.pcs[ia], &b.pcs[ib], (size_t)(a.n - ia) * sizeof a.pcs[0]), 0));
}

Test(stackwalk, start_prefers_libunwind_and_a_walk_keeps_to_its_bound) {
  cp_walker_t chosen = cp_stackwalk_start();
  if (chosen != CP_WALKER_LIBUNWIND) cr_skip_test("libunwind.so.8 cannot be loaded here (scripts/deps)");
  cr_assert(eq(str, (char *)cp_stackwalk_name(), "libunwind"));
  void *pcs[4] = {0, 0, 0, (void *)0x5a5a};
  cr_assert(eq(int, cp_stackwalk(pcs, 3), 3));
  cr_assert(eq(ptr, pcs[3], (void *)0x5a5a));
}
