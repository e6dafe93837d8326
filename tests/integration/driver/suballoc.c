/* suballoc.c: integration tests of the driver calls whose meaning changes
 * when a pool block is a piece of a segment (docs/DESIGN.md, "Calls whose
 * meaning changes under sub-allocation"): cuMemFreeAsync(_ptsz),
 * cuMemGetAddressRange_v2, cuPointerGetAttribute(s) and cuIpcGetMemHandle,
 * reached the ways programs reach the driver: cuGetProcAddress (a static
 * runtime's lookups), dlsym on the driver's handle, by name (-lcuda), and a
 * driver whose cuGetProcAddress hands out internal addresses.
 * tests/programs/driver/drv_suballoc.c runs natively (each cuMemAlloc its
 * own allocation: the fake describes the whole allocation for any address
 * inside it) and under the shim; the compared lines must match. */
#include <stdio.h>
#include <string.h>

#include "it_check.h"
#include "it_info.h"

#define SUBALLOC_OUTPUT                                                                                   \
  "free_async: create=0 alloc=0 before=1 free=0 neighbour_read=0 kept=1 neighbour_set=0 neighbour_ok=1\n" \
  "free_async_ptsz: free=0\n"                                                                             \
  "free_async_reuse: alloc=0 free=0 free2=0\n"                                                            \
  "free_async_errors: alloc=0 interior=1 interior_ptsz=1 first=0 twice=1 twice_ptsz=1 bogus=1 zero=1 "    \
  "neighbour_ok=1 free=0\n"                                                                               \
  "free_async_foreign: got=1 free=0 twice=1 real_calls=2 live_freed=65536\n"                              \
  "free_async_end: sync=0 destroy=0\n"                                                                    \
  "capture_relaxed: create=0 alloc=0 begin=0 free=0 interior=1 end=0 graph=1 usable=1 free_p=0 free_q=0 " \
  "destroy=0 sync=0\n"                                                                                    \
  "capture_global: create=0 alloc=0 begin=0 free=0 interior=1 end=0 graph=1 usable=1 free_p=0 free_q=0 "  \
  "destroy=0 sync=0\n"                                                                                    \
  "describe_alloc: errors=0\n"                                                                            \
  "range_small_first: rc=0 base_is_block=1 size=1000\n"                                                   \
  "range_small_first_last_byte: rc=0 base_is_block=1 size=1000\n"                                         \
  "range_small_second: rc=0 base_is_block=1 size=3000\n"                                                  \
  "range_small_second_interior: rc=0 base_is_block=1 size=3000\n"                                         \
  "range_large_first: rc=0 base_is_block=1 size=5242880\n"                                                \
  "range_large_second_interior: rc=0 base_is_block=1 size=5242880\n"                                      \
  "range_null_outputs: no_base=0 size=3000 no_size=0 base_is_block=1\n"                                   \
  "attr_small_second: start=0:1 size=0:3000 context=0:1 type=0:2 dptr=0:1 ordinal=0:0 host=1\n"           \
  "attr_small_second_all: rc=0 context=1 start=1 type=2 size=3000 ordinal=0 dptr=1 host_null=1\n"         \
  "attr_large_second: start=0:1 size=0:5242880 context=0:1 type=0:2 dptr=0:1 ordinal=0:0 host=1\n"        \
  "attr_large_second_all: rc=0 context=1 start=1 type=2 size=5242880 ordinal=0 dptr=1 host_null=1\n"      \
  "buffer_id: rc=0 rc2=0 rc3=0 interior_same=1\n"                                                         \
  "range_foreign: rc=0 base_is_block=1 size=8192\n"                                                       \
  "attr_foreign: start=0:1 size=0:8192 context=0:1 type=0:2 dptr=0:1 ordinal=0:0 host=1\n"                \
  "attr_foreign_all: rc=0 context=1 start=1 type=2 size=8192 ordinal=0 dptr=1 host_null=1\n"              \
  "range_host: rc=500 base_is_block=0 size=0\n"                                                           \
  "attr_host: start=1:1 size=1:0 context=1:1 type=1:0 dptr=1:0 ordinal=1:-1 host=1\n"                     \
  "attr_host_all: rc=0 context=1 start=1 type=0 size=0 ordinal=0 dptr=0 host_null=1\n"                    \
  "describe_end: free=0 sync=0\n"                                                                         \
  "ipc_alloc: errors=0\n"                                                                                 \
  "ipc_small_first: rc=0 base_is_block=1 untouched=0\n"                                                   \
  "ipc_large_first: rc=0 base_is_block=1 untouched=0\n"                                                   \
  "ipc_interior_of_first: rc=0 base_is_block=1 untouched=0\n"                                             \
  "ipc_foreign: rc=0 base_is_block=1 untouched=0\n"                                                       \
  "ipc_host: rc=1 base_is_block=0 untouched=1\n"                                                          \
  "ipc_zero: rc=1 base_is_block=0 untouched=1\n"                                                          \
  "ipc_null_handle: rc=1\n"                                                                               \
  "ipc_past_request: rc=1 base_is_block=0 untouched=1\n"                                                  \
  "ipc_freed_first: rc=1 base_is_block=0 untouched=1\n"                                                   \
  "ipc_freed_second: rc=1 base_is_block=0 untouched=1\n"                                                  \
  "ipc_end: errors=0 free=0 sync=0\n"

/* Runs drv_suballoc with `how` natively and under the shim and checks what
 * the design promises:
 * - cuMemFreeAsync(_ptsz) of a pool block returns it to the pool (the
 *   driver's free is never called: it would free the segment and the
 *   neighbour block in it), even on a capturing stream (the block is kept);
 *   bad pointers fail natively with CUDA_ERROR_INVALID_VALUE; foreign ones
 *   reach the driver;
 * - cuMemGetAddressRange_v2 and the RANGE_START_ADDR / RANGE_SIZE
 *   attributes describe the block holding a pointer (its start, the bytes
 *   asked for), every other attribute and every foreign pointer natively;
 *   blocks of one segment share its buffer id (info line);
 * - cuIpcGetMemHandle exports blocks that start their segment, refuses the
 *   others with CUDA_ERROR_INVALID_VALUE and one line on stderr. */
static void suballoc(const char *how, const char *extra_env) {
  const char *const env[] = {it_fake_driver_env(), extra_env, NULL};
  it_result n, s;
  it_same(&n, &s, env, "drv_suballoc", IT_ARGS(how));
  cr_assert(eq(str, (char *)it_compared(&n), SUBALLOC_OUTPUT), "%s", how);

  cr_assert(eq(long, it_info_val(&n, "free_async", "real_calls", -1), 1), "%s", how);
  cr_assert(eq(long, it_info_val(&n, "free_async_ptsz", "real_calls", -1), 1), "%s", how);
  cr_assert(eq(long, it_info_val(&n, "capture_relaxed", "real_calls", -1), 1), "%s", how);
  cr_assert(eq(long, it_info_val(&s, "free_async", "real_calls", -1), 0), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "free_async", "live_freed", -1), 0), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "free_async_ptsz", "real_calls", -1), 0), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "capture_relaxed", "real_calls", -1), 0), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "capture_global", "real_calls", -1), 0), "%s\n%s", how, s.out);
  /* The freed blocks came back once a barrier covered the frees. */
  cr_assert(eq(long, it_info_val(&s, "free_async_reuse", "same", -1), 1), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "free_async_reuse", "barriers", -1), 1), "%s\n%s", how, s.out);

  cr_assert(eq(long, it_info_val(&n, "buffer_id", "blocks_share", -1), 0), "%s", how);
  cr_assert(eq(long, it_info_val(&s, "buffer_id", "blocks_share", -1), 1), "%s\n%s", how, s.out);

  cr_assert(eq(long, it_info_val(&n, "ipc_small_second", "rc", -1), 0), "%s", how);
  cr_assert(eq(long, it_info_val(&n, "ipc_large_second", "base_is_block", -1), 1), "%s", how);
  cr_assert(eq(long, it_info_val(&s, "ipc_small_second", "rc", -1), 1), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_info_val(&s, "ipc_small_second", "untouched", -1), 1), "%s", how);
  cr_assert(eq(long, it_info_val(&s, "ipc_large_second", "rc", -1), 1), "%s\n%s", how, s.out);
  cr_assert(eq(str, n.err, ""));
  cr_assert(eq(int, it_count_lines(s.err, ""), 1), "%s: one warning line, got:\n%s", how, s.err);
  cr_assert(eq(int, it_count_lines(s.err, "CUDAPOOL_DISABLE=1"), 1), "%s", s.err);

  /* Two segments (a small and a 20 MiB one) for everything; all back. */
  cr_assert(eq(long, it_val(&s, "pool", "num_device_alloc", -1), 2), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s\n%s", how, s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), it_val(&s, "pool", "num_free", -2)), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_driver, suballoc_calls_through_cuGetProcAddress) { suballoc("proc", NULL); }
Test(shim_it_driver, suballoc_calls_through_dlsym) { suballoc("dlsym", NULL); }
Test(shim_it_driver, suballoc_calls_linked_with_lcuda) { suballoc("linked", NULL); }
/* A driver whose cuGetProcAddress answers with addresses of its own: the
 * variants are recognised by name and version (dlsym_hook.c's rules). */
Test(shim_it_driver, suballoc_calls_from_internal_addresses) {
  suballoc("proc", "FAKECU_PROC_TRAMPOLINES=1");
}
