/* nvtx_heaps.c: shim/state/nvtx.c's heap table against the fake NVTX tool
 * (tests/fakes/nvtx/, which logs every call to NVTX_FAKE_LOG), driven
 * directly, in the order threads can make the calls.
 *
 * The case it is for: cudaDeviceReset on one thread drops the device's pool
 * and releases the device lock before it unregisters the old pool's heaps;
 * another thread's first allocation may make the new pool and register its
 * first segment in between. The reset must leave that heap registered (its
 * blocks are regions of it), so a heap carries the device's reset epoch.
 * Criterion runs each test in a process of its own: nvtx.c's state and the
 * NVTX library's one-time initialisation start fresh in each. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "state/nvtx.h"

#define SEG (2u << 20)
#define OLD_BASE ((uintptr_t)0x7f0000000000)
#define NEW_BASE ((uintptr_t)0x7f0000400000)
#define OTHER_BASE ((uintptr_t)0x7f0000800000)

static char log_path[64];

/* The fake tool attached before the first NVTX call, as a tool's launcher
 * does, and the module on. */
static void attach(void) {
  const char *build = getenv("CUDAPOOL_TEST_BUILD");
  char tool[1024];
  snprintf(tool, sizeof tool, "%s/fakenvtx/libnvtx_inject.so", build && *build ? build : "build");
  cr_assert(eq(int, access(tool, R_OK), 0), "%s is not built (make)", tool);
  snprintf(log_path, sizeof log_path, "/tmp/cudapool-nvtx-heaps.%d", (int)getpid());
  remove(log_path);
  setenv("NVTX_INJECTION64_PATH", tool, 1);
  setenv("NVTX_FAKE_LOG", log_path, 1);
  cp_nvtx_decide(CP_NVTX_AUTO, tool, NULL);
  cr_assert(cp_nvtx_on());
  cp_nvtx_prepare();
}

static void detach(void) { remove(log_path); }

TestSuite(nvtx_heaps, .init = attach, .fini = detach);

static void expect_log(const char *want) {
  char got[4096] = "";
  FILE *f = fopen(log_path, "r");
  cr_assert(ne(ptr, f, NULL), "the fake tool wrote no log");
  size_t n = fread(got, 1, sizeof got - 1, f);
  got[n] = '\0';
  fclose(f);
  cr_assert(eq(str, got, (char *)want));
}

/* Epoch 0's pool has a segment; the reset (epoch 0 -> 1) races a first
 * allocation, whose new pool registers its segment in epoch 1 before the
 * reset unregisters epoch 0's heaps: only the old heap goes, and a block of
 * the new segment is still a region of its heap. */
Test(nvtx_heaps, a_reset_spares_the_heap_of_a_pool_made_since) {
  cp_nvtx_segment_added(0, 0, OLD_BASE, SEG);
  cp_nvtx_segment_added(0, 1, NEW_BASE, SEG);
  cp_nvtx_device_reset(0, 0);
  cp_nvtx_block_handed_out(NEW_BASE, 1000);
  cp_nvtx_block_handed_out(OLD_BASE, 1000); /* no heap: no region */
  cp_nvtx_block_freed(NEW_BASE);
  cp_nvtx_segment_removed(NEW_BASE);
  expect_log("domain cudapool\n"
             "heap+ 1 base=0x7f0000000000 size=2097152\n"
             "heap+ 2 base=0x7f0000400000 size=2097152\n"
             "heap- 1\n"
             "region+ heap=2 addr=0x7f0000400000 size=1000\n"
             "region- addr=0x7f0000400000\n"
             "heap- 2\n");
}

/* A reset takes every heap of its device from its epoch or before (a late
 * registration by a thread still inside an older pool included), none of
 * another device's, and counts epochs across the wrap of unsigned. */
Test(nvtx_heaps, a_reset_takes_its_devices_older_heaps_only) {
  cp_nvtx_segment_added(0, 4, OLD_BASE, SEG);
  cp_nvtx_segment_added(0, 5, NEW_BASE, SEG);
  cp_nvtx_segment_added(1, 5, OTHER_BASE, SEG);
  cp_nvtx_device_reset(0, 5);
  cp_nvtx_segment_added(2, 0xffffffffu, OLD_BASE + 16 * SEG, SEG);
  cp_nvtx_segment_added(2, 0, NEW_BASE + 16 * SEG, SEG);
  cp_nvtx_device_reset(2, 0xffffffffu);
  expect_log("domain cudapool\n"
             "heap+ 1 base=0x7f0000000000 size=2097152\n"
             "heap+ 2 base=0x7f0000400000 size=2097152\n"
             "heap+ 3 base=0x7f0000800000 size=2097152\n"
             "heap- 2\n"
             "heap- 1\n"
             "heap+ 4 base=0x7f0002000000 size=2097152\n"
             "heap+ 5 base=0x7f0002400000 size=2097152\n"
             "heap- 4\n");
}
