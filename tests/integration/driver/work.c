/* work.c: the driver entry points that submit work
 * (shim/entry/driver_work.c), on the fake driver: drv_work reaches a launch,
 * an asynchronous memset and copy through cuGetProcAddress (with and
 * without the per-thread flag), dlsym and -lcuda, and calls them. Under the
 * shim every door hands out cudapool's wrapper of the very variant the
 * driver answered (its exported alias has the driver's name, so dladdr
 * names the same symbol natively and under the shim), and every result,
 * content and count of the driver's own calls is the native one. A lookup
 * of an entry point newer than the build's cuda.h (the fake's
 * cuFutureLaunch), or of a work entry point at an address the shim cannot
 * recognise, stops the learned order, which the exit report says; lookups
 * that fail do not. */
#include <string.h>

#include "it_check.h"
#include "it_info.h"

static const char *const doors[] = {"proc_launch",    "proc_memset",     "proc_copy",    "proc_launch_pt",
                                    "proc_memset_pt", "proc_copy_pt",    "proc_copy_old", "dlsym_memset_pt",
                                    "dlsym_launch",   "linked_memset",   "linked_launch"};

#define GIVEN_UP "cudapool: order: not learned ("

Test(shim_it_driver_work, every_door_hands_out_the_wrapper_of_the_same_variant) {
  const char *const env[] = {it_fake_driver_env(), "CUDAPOOL_STATS=1", NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_work", NULL);
  for (size_t i = 0; i < sizeof doors / sizeof doors[0]; i++) {
    cr_assert(eq(long, it_info_val(&n, doors[i], "in_cudapool", -1), 0), "%s\n%s", doors[i], n.out);
    cr_assert(eq(long, it_info_val(&s, doors[i], "in_cudapool", -1), 1), "%s\n%s", doors[i], s.out);
  }
  /* The per-thread flag gets the _ptsz variant (its wrapper, under the shim). */
  cr_assert(eq(str, (char *)it_line(&s, "proc_memset_pt"), "proc_memset_pt: symbol=cuMemsetD8Async_ptsz"));
  cr_assert(eq(str, (char *)it_line(&s, "proc_copy_pt"), "proc_copy_pt: symbol=cuMemcpyHtoDAsync_v2_ptsz"));
  cr_assert(eq(str, (char *)it_line(&s, "proc_launch"), "proc_launch: symbol=cuLaunchKernel"));
  /* An old cudaVersion gets the old variant's wrapper: its own ABI. */
  cr_assert(eq(str, (char *)it_line(&s, "proc_copy_old"), "proc_copy_old: symbol=cuMemcpyHtoDAsync"));
  cr_assert(eq(str, (char *)it_line(&s, "calls"),
               "calls: setup=0 memset=0 memset_pt=0 dlsym_memset=0 linked_memset=0 copy=0 copy_pt=0 sync=0 "
               "read=0 contents=1"));
  cr_assert(eq(str, (char *)it_line(&s, "counts"),
               "counts: launch=4 launch_ptsz=2 memset=2 memset_ptsz=2 copy=2 copy_ptsz=1 copy_v1=1"));
  /* Failed lookups of unknown names give nothing up. */
  cr_assert(eq(ptr, strstr(s.err, GIVEN_UP), NULL), "%s", s.err);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_driver_work, a_newer_entry_point_stops_the_learned_order) {
  const char *const env[] = {it_fake_driver_env(), "CUDAPOOL_STATS=1", NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_work", IT_ARGS("future"));
  cr_assert(eq(str, (char *)it_line(&s, "future"), "future: found=1 rc=0"), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "future_fn", "in_cudapool", -1), 0), "%s", s.out);
  cr_assert(ne(ptr, strstr(s.err, GIVEN_UP "cuFutureLaunch looked up)\n"), NULL), "%s", s.err);
  it_free(&n);
  it_free(&s);
}

/* A driver that answers with internal addresses: the launch cannot be
 * recognised, so it is handed out as is and the order is given up. */
Test(shim_it_driver_work, a_work_entry_point_at_an_unknown_address_stops_the_learned_order) {
  const char *const env[] = {it_fake_driver_env(), "CUDAPOOL_STATS=1", "FAKECU_PROC_TRAMPOLINES=1", NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_work", NULL);
  cr_assert(eq(long, it_info_val(&s, "proc_launch", "in_cudapool", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "proc_memset", "in_cudapool", -1), 1), "%s", s.out);
  cr_assert(ne(ptr, strstr(s.err, GIVEN_UP "a driver entry point at an unknown address looked up)\n"), NULL), "%s",
            s.err);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_driver_work, disabled_hands_out_the_drivers_own_functions) {
  const char *const env[] = {it_fake_driver_env(), "CUDAPOOL_DISABLE=1", NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_work", IT_ARGS("future"));
  for (size_t i = 0; i < 9; i++) /* the lookups; -lcuda still binds the exports */
    cr_assert(eq(long, it_info_val(&s, doors[i], "in_cudapool", -1), 0), "%s\n%s", doors[i], s.out);
  it_free(&n);
  it_free(&s);
}
