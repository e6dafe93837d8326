/* suballoc.c: integration tests of the runtime calls whose meaning changes
 * when a pool block is a piece of a segment (docs/DESIGN.md, "Calls whose
 * meaning changes under sub-allocation"): cudaFreeAsync and
 * cudaFreeAsync_ptsz, also on a capturing stream, and cudaIpcGetMemHandle.
 * tests/programs/runtime/suballoc.c runs natively (which checks the fake:
 * every cudaMalloc its own allocation) and under the shim; the compared
 * lines must match, and the info lines show what only the shim does
 * differently. The reuse of such a block with device work in flight is in
 * suballoc_mt.c. */
#include <string.h>

#include "it_check.h"
#include "it_info.h"

#define FREE_OUTPUT                                                                              \
  "free_async: create=0 alloc=0 before=1 free=0 sync=0 neighbour_read=0 kept=1 neighbour_set=0 " \
  "neighbour_ok=1 last=0\n"                                                                      \
  "free_async_ptsz: free=0 sync=0 last=0\n"                                                      \
  "free_async_reuse: alloc=0 free=0 last=0\n"                                                    \
  "free_async_errors: alloc=0 interior=1 last=1 interior_ptsz=1 last=1 first=0 twice=1 last=1 "  \
  "twice_ptsz=1 last=1 bogus=1 last=1 neighbour_ok=1 free=0 last=0\n"                            \
  "free_async_foreign: got=1 free=0 twice=1 last=1 real_calls=2 live_freed=65536\n"              \
  "free_async_end: sync=0 destroy=0 last=0\n"

/* A stream-ordered free of a pool block goes back to the pool: the real
 * call would free the whole segment and the neighbour block with it. Bad
 * pointers fail natively (cudaErrorInvalidValue, recorded), foreign ones
 * reach the runtime unchanged. */
Test(shim_it_suballoc, free_async_returns_blocks_to_the_pool) {
  it_result n, s;
  it_same(&n, &s, NULL, "suballoc", IT_ARGS("free"));
  cr_assert(eq(str, (char *)it_compared(&n), FREE_OUTPUT));
  cr_assert(eq(long, it_info_val(&n, "free_async", "real_calls", -1), 1));
  cr_assert(eq(long, it_info_val(&n, "free_async", "live_freed", -1), 512 << 10));
  cr_assert(eq(long, it_info_val(&n, "free_async_ptsz", "real_calls", -1), 1));
  cr_assert(eq(long, it_info_val(&s, "free_async", "real_calls", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "free_async", "live_freed", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "free_async_ptsz", "real_calls", -1), 0), "%s", s.out);
  /* Every allocation came from one segment, and every free reached the
   * pool: the two stream-ordered ones, the reuse, the failed attempts' good
   * frees (p, q) and nothing else. */
  cr_assert(eq(long, it_val(&s, "pool", "num_device_alloc", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 5), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_free", -1), 5), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);
  cr_assert(eq(str, s.err, ""));
  it_free(&n);
  it_free(&s);
}

#define CAPTURE_OUTPUT                                                                                  \
  "capture_joined: create=0 alloc=0 begin=0 join=0 free=0 back=0 end=0 graph=1 usable=1 free_p=0 "      \
  "destroy=0 last=0\n"                                                                                  \
  "capture_relaxed: create=0 alloc=0 begin=0 free=0 interior=1 end=0 graph=1 last=1 usable=1 free_p=0 " \
  "free_q=0 destroy=0 sync=0 last=0\n"                                                                  \
  "capture_global: create=0 alloc=0 begin=0 free=0 interior=1 end=0 graph=1 last=1 usable=1 free_p=0 "  \
  "free_q=0 destroy=0 sync=0 last=0\n"                                                                  \
  "capture_end: sync=0 last=0\n"

/* Natively the free becomes a node of the captured graph, run when the
 * graph is. Under the pool the block is kept: the program's call succeeds
 * and the real free never sees the block (a free node of the segment would
 * free every block in it at launch); the block stays the program's, which
 * may still use it and free it. Capture ends well in both modes. */
Test(shim_it_suballoc, free_async_on_a_capturing_stream_keeps_the_block) {
  it_result n, s;
  it_same(&n, &s, NULL, "suballoc", IT_ARGS("capture"));
  cr_assert(eq(str, (char *)it_compared(&n), CAPTURE_OUTPUT));
  cr_assert(eq(long, it_info_val(&n, "capture_relaxed", "real_calls", -1), 1));
  cr_assert(eq(long, it_info_val(&n, "capture_global", "real_calls", -1), 1));
  cr_assert(eq(long, it_info_val(&s, "capture_relaxed", "real_calls", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_info_val(&s, "capture_global", "real_calls", -1), 0), "%s", s.out);
  /* A stream that joined the capture through an event is capturing too. */
  cr_assert(eq(long, it_info_val(&n, "capture_joined", "real_calls", -1), 1));
  cr_assert(eq(long, it_info_val(&s, "capture_joined", "real_calls", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 5), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_free", -1), 5), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

#define IPC_OUTPUT                                                   \
  "ipc_alloc: rc=0\n"                                                \
  "ipc_small_first: rc=0 last=0 base_is_block=1 untouched=0\n"       \
  "ipc_large_first: rc=0 last=0 base_is_block=1 untouched=0\n"       \
  "ipc_own_segment: rc=0 last=0 base_is_block=1 untouched=0\n"       \
  "ipc_interior_of_first: rc=0 last=0 base_is_block=1 untouched=0\n" \
  "ipc_foreign: rc=0 last=0 base_is_block=1 untouched=0\n"           \
  "ipc_host: rc=1 last=1 base_is_block=0 untouched=1\n"              \
  "ipc_null: rc=1 last=1 base_is_block=0 untouched=1\n"              \
  "ipc_null_handle: rc=1 last=1\n"                                   \
  "ipc_past_request: rc=1 last=1 base_is_block=0 untouched=1\n"      \
  "ipc_freed_first: rc=1 last=1 base_is_block=0 untouched=1\n"       \
  "ipc_freed_second: rc=1 last=1 base_is_block=0 untouched=1\n"      \
  "ipc_freed_own: rc=1 last=1 base_is_block=0 untouched=1\n"         \
  "ipc_freed_alloc: rc=0\n"                                          \
  "ipc_end: free=0 sync=0 last=0\n"

static const char *const ipc_inner[] = {"ipc_small_second", "ipc_large_second", "ipc_small_second_again"};

/* A block that starts its segment exports as natively: the handle's
 * allocation begins with the block. One inside a segment (the second small
 * or 5 MiB allocation) would give the peer the segment from its start:
 * the call fails with cudaErrorInvalidValue, recorded for cudaGetLastError,
 * the handle untouched, and one line on stderr names CUDAPOOL_DISABLE=1,
 * which restores the native behaviour. Pool memory no live block holds
 * (freed, past the bytes asked for) fails as natively, silently. */
Test(shim_it_suballoc, ipc_exports_only_blocks_that_start_their_segment) {
  it_result n, s, d;
  it_same(&n, &s, NULL, "suballoc", IT_ARGS("ipc"));
  cr_assert(eq(str, (char *)it_compared(&n), IPC_OUTPUT));
  for (size_t i = 0; i < sizeof ipc_inner / sizeof ipc_inner[0]; i++) {
    const char *tag = ipc_inner[i];
    cr_assert(eq(long, it_info_val(&n, tag, "rc", -1), 0), "%s natively\n%s", tag, n.out);
    cr_assert(eq(long, it_info_val(&n, tag, "base_is_block", -1), 1), "%s natively", tag);
    cr_assert(eq(long, it_info_val(&s, tag, "rc", -1), 1), "%s under the shim\n%s", tag, s.out);
    cr_assert(eq(long, it_info_val(&s, tag, "last", -1), 1), "%s under the shim", tag);
    cr_assert(eq(long, it_info_val(&s, tag, "untouched", -1), 1), "%s under the shim", tag);
  }
  cr_assert(eq(str, n.err, ""));
  cr_assert(eq(int, it_count_lines(s.err, ""), 1), "one warning line, got:\n%s", s.err);
  cr_assert(eq(int, it_count_lines(s.err, "cudapool: warning: cannot export"), 1), "%s", s.err);
  cr_assert(eq(int, it_count_lines(s.err, "CUDAPOOL_DISABLE=1"), 1), "%s", s.err);
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);

  it_run_ok(&d, IT_SHIM, IT_ARGS("CUDAPOOL_DISABLE=1"), "suballoc", IT_ARGS("ipc"));
  cr_assert(eq(str, (char *)it_compared(&d), IPC_OUTPUT));
  for (size_t i = 0; i < sizeof ipc_inner / sizeof ipc_inner[0]; i++)
    cr_assert(eq(long, it_info_val(&d, ipc_inner[i], "rc", -1), 0), "%s disabled\n%s", ipc_inner[i], d.out);
  cr_assert(eq(str, d.err, ""));
  it_free(&n);
  it_free(&s);
  it_free(&d);
}
