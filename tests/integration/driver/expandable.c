/* expandable.c: expandable segments (CUDAPOOL_EXPANDABLE=1) on the fake
 * driver, whose virtual memory calls check their arguments and whose pages
 * fault until mapped and made accessible: the data of live blocks survives
 * pages going back around them, reserved bytes are the mapped pages, the
 * range goes back once empty, IPC of such a block fails clearly, and where
 * the driver has no virtual memory management (FAKECU_NO_VMM=1, or the
 * fake runtime, which has no libcuda) the pool falls back with one warning.
 * tests/programs/driver/drv_expandable.c is the program. */
#include <stdio.h>
#include <string.h>

#include "it_check.h"
#include "it_info.h"

#define EXPANDABLE_OUTPUT       \
  "alloc: rc=0 a=1 b=1 c=1\n"   \
  "free_b: rc=0 a=1 c=1\n"      \
  "realloc: rc=0 d=1 a=1 c=1\n" \
  "end: rc=0\n"

Test(shim_it_driver, expandable_segments_map_and_unmap_pages_under_live_blocks) {
  const char *const env[] = {it_fake_driver_env(), "CUDAPOOL_EXPANDABLE=1", NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_expandable", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), EXPANDABLE_OUTPUT));
  cr_assert(eq(long, it_info_val(&n, "ipc", "rc", -1), 0));
  cr_assert(eq(long, it_info_val(&n, "three", "reservations", -1), 0), "natively: plain cuMemAlloc");
  /* a [0,4) b [4,12) c [12,18) MiB of one range: pages 0-8. */
  cr_assert(eq(long, it_info_val(&s, "three", "reserved", -1), 18 << 20), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "three", "vmm_mapped", -1), 18 << 20), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "three", "reservations", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "ipc", "rc", -1), 1), "CUDA_ERROR_INVALID_VALUE: %s", s.out);
  /* b's pages went back, a's and c's stayed with their bytes. */
  cr_assert(eq(long, it_info_val(&s, "freed_b", "reserved", -1), 10 << 20), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "freed_b", "vmm_mapped", -1), 10 << 20), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "realloc", "same_place", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "realloc", "vmm_mapped", -1), 18 << 20), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "end", "reserved", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "end", "vmm_mapped", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "end", "reservations", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "end", "live", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "end", "vmm_errors", -1), 0), "%s", s.out);
  cr_assert(eq(int, it_count_lines(s.err, ""), 1), "one warning, for the IPC export:\n%s", s.err);
  cr_assert(eq(int, it_count_lines(s.err, "CUDA IPC cannot export"), 1), "%s", s.err);
  it_free(&n);
  it_free(&s);
}

/* CUDAPOOL_EXPANDABLE_PAGE=8M: the unit mapped is 8 MiB (one physical
 * allocation each), so a page goes back only when no live block touches any
 * of its 8 MiB. */
Test(shim_it_driver, expandable_page_sets_the_unit_mapped) {
  const char *const env[] = {it_fake_driver_env(), "CUDAPOOL_EXPANDABLE=1", "CUDAPOOL_EXPANDABLE_PAGE=6M", NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_expandable", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), EXPANDABLE_OUTPUT));
  /* 6M rounds up to 8 MiB: a [0,4) b [4,12) c [12,18) MiB touch pages 0-2. */
  cr_assert(eq(long, it_info_val(&s, "three", "reserved", -1), 24 << 20), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "three", "vmm_mapped", -1), 24 << 20), "%s", s.out);
  /* b's bytes share pages 0 and 1 with a and c: nothing goes back. */
  cr_assert(eq(long, it_info_val(&s, "freed_b", "vmm_mapped", -1), 24 << 20), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "end", "vmm_mapped", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "end", "vmm_errors", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

/* A unit the device cannot hold (9G rounds up to 16 GiB, the fake device's
 * memory) failed every mapping, an out-of-memory line each: one warning,
 * and the granularity instead. */
Test(shim_it_driver, expandable_page_at_the_device_memory_falls_back_to_the_granularity) {
  const char *const env[] = {it_fake_driver_env(), "CUDAPOOL_EXPANDABLE=1", "CUDAPOOL_EXPANDABLE_PAGE=9G", NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_expandable", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), EXPANDABLE_OUTPUT));
  cr_assert(eq(long, it_info_val(&s, "three", "reserved", -1), 18 << 20), "2 MiB pages: %s", s.out);
  cr_assert(eq(long, it_info_val(&s, "three", "vmm_mapped", -1), 18 << 20), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "end", "vmm_errors", -1), 0), "%s", s.out);
  cr_assert(eq(int, it_count_lines(s.err, "out of memory"), 0), "%s", s.err);
  cr_assert(eq(int, it_count_lines(s.err, "CUDAPOOL_EXPANDABLE_PAGE"), 1), "%s", s.err);
  cr_assert(ne(ptr,
               strstr(s.err, "cudapool: warning: CUDAPOOL_EXPANDABLE_PAGE=9G is not under the memory of device "
                             "0, 16G (accepted: a size under it once rounded up to a power of two); using the "
                             "default (the device's granularity, 2M)\n"),
               NULL),
            "%s", s.err);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_driver, expandable_segments_fall_back_without_virtual_memory) {
  const char *const env[] = {it_fake_driver_env(), "CUDAPOOL_EXPANDABLE=1", "FAKECU_NO_VMM=1", NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_expandable", NULL);
  cr_assert(eq(str, (char *)it_compared(&s), EXPANDABLE_OUTPUT));
  cr_assert(eq(long, it_info_val(&s, "three", "reservations", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "three", "reserved", -1), 20 << 20), "one ordinary 20 MiB segment");
  cr_assert(eq(long, it_info_val(&s, "ipc", "rc", -1), 0), "a block that starts its segment exports");
  cr_assert(eq(int, it_count_lines(s.err, "using ordinary segments"), 1), "%s", s.err);
  cr_assert(eq(int, it_count_lines(s.err, ""), 1), "%s", s.err);
  it_free(&n);
  it_free(&s);
}

/* The fake runtime has no libcuda to ask: ordinary segments, one warning. */
Test(shim_it_driver, expandable_segments_fall_back_on_the_fake_runtime) {
  const char *const env[] = {"CUDAPOOL_EXPANDABLE=1", NULL};
  it_result n, s;
  it_same(&n, &s, env, "suballoc", IT_ARGS("free"));
  cr_assert(eq(int, it_count_lines(s.err, "using ordinary segments"), 1), "%s", s.err);
  it_free(&n);
  it_free(&s);
}
