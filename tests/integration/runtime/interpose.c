/* interpose.c: integration tests of libcudapool.so on the fake runtime:
 * interception, the exact error codes, foreign pointers, out of memory,
 * cudaMemGetInfo, several devices, the per-thread-stream API, an nvcc-built
 * program, cudaDeviceReset. Each program runs natively (which checks the
 * fake against the native behaviour in GPU-FACTS.md) and under the shim
 * (which must print the same lines, and pool counters where the sequence
 * makes them exact). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

#define NATIVE_ERRORS                                     \
  "malloc0: rc=0 null=1 last=0\n"                         \
  "free_null: rc=0 last=0\n"                              \
  "free_interior: alloc=0 rc=1 last=1 last2=0 after=0\n"  \
  "double_free: alloc=0 first=0 rc=1 last=1 last2=0\n"    \
  "free_interior_of_freed: alloc=0 first=0 rc=1 last=1\n" \
  "free_bogus: rc=1 last=1 last2=0\n"                     \
  "oom: rc=2 last=2 last2=0\n"                            \
  "peek: rc=1 peek=1 peek2=1 last=1 last2=0\n"            \
  "persist: alloc=0 free=0 last=1\n"

Test(shim_it, intercept_native) {
  it_result r;
  it_run_ok(&r, IT_NATIVE, NULL, "intercept", NULL);
  cr_assert(eq(str, (char *)it_compared(&r), "intercept: pairs=100 errors=0 last=0\n"));
  cr_assert(eq(long, it_val(&r, "info", "driver_mallocs", -1), 100));
  cr_assert(eq(str, (char *)it_line(&r, "pool"), "pool: nopool"));
  it_free(&r);
}

Test(shim_it, intercept_pairs_hit_the_pool) {
  it_result n, s;
  it_same(&n, &s, NULL, "intercept", IT_ARGS("100", "1048576"));
  cr_assert(eq(long, it_val(&s, "pool", "misses", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "hits", -1), 99));
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 100));
  cr_assert(eq(long, it_val(&s, "pool", "num_free", -1), 100));
  cr_assert(eq(long, it_val(&s, "pool", "num_device_alloc", -1), 1));
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0));
  cr_assert(eq(long, it_val(&s, "info", "driver_mallocs", -1), 1));
  it_free(&n);
  it_free(&s);
}

Test(shim_it, error_codes_are_native_and_leave_the_pool_alone) {
  it_result n, s;
  it_same(&n, &s, NULL, "errors", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), NATIVE_ERRORS));
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 4));
  cr_assert(eq(long, it_val(&s, "pool", "num_free", -1), 4));
  it_free(&n);
  it_free(&s);
}

Test(shim_it, foreign_pointers_pass_through) {
  it_result n, s;
  it_same(&n, &s, NULL, "foreign", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "managed: alloc=0 free=0 last=0\n"
               "pitch: alloc=0 pitch=1024 free=0 last=0\n"
               "raw: got=1 free=0 again=1 last=1 last2=0\n"
               "hostptr: alloc=0 free=1 last=1 freehost=0\n"
               "stackptr: free=1 last=1\n"
               "foreign_live: bytes=0\n"));
  /* No pool block was made: either no pool (ENODEV) or an empty one. */
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", 0), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_free", 0), 0));
  cr_assert(ne(str, (char *)it_line(&s, "pool"), "pool: nopool"), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it, out_of_memory_is_native_and_cached_memory_is_reclaimed) {
  it_result n, s;
  const char *const env[] = {"FAKECUDA_MEMORY=64M", NULL};
  it_same(&n, &s, env, "oom", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "fill: rc=2 last=2 last2=0\n"
               "freeall: errors=0\n"
               "big: rc=0 last=0 free=0\n"
               "retry: first=0 free=0 rc=0 last=0 free2=0\n"
               "inject: rc=2 last=2 last2=0 after=0 free=0\n"));
  cr_assert(eq(long, it_val(&n, "info", "pieces", -1), 4));
  /* Two failures within a second: the pool says why once (rate-limited). */
  cr_assert(eq(int, it_count_lines(s.err, "cudapool: out of memory on device 0: asked "), 1), "%s", s.err);
  cr_assert(eq(int, it_count_lines(s.err, "cudapool:"), 1), "%s", s.err);
  it_free(&n);
  it_free(&s);
}

Test(shim_it, meminfo_counts_cached_memory_as_free) {
  it_result n, s;
  const char *const env[] = {"FAKECUDA_MEMORY=64M", NULL};
  it_same(&n, &s, env, "meminfo", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "meminfo: rc=0 total=67108864 free0=67108864 alloc=0 free_live=50331648 "
               "freed=0 free_after=67108864 rc1=0 rc2=0\n"
               "meminfo_null: free_null=1 last=1 total_null=1 last2=1\n"));
  it_free(&n);
  it_free(&s);
}

Test(shim_it, meminfo_total_is_the_limit) {
  it_result s;
  const char *const env[] = {"FAKECUDA_MEMORY=64M", "CUDAPOOL_LIMIT=32M", NULL};
  it_run_ok(&s, IT_SHIM, env, "meminfo", NULL);
  cr_assert(eq(long, it_val(&s, "meminfo", "total", -1), 32L << 20), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "meminfo", "free0", -1), 32L << 20));
  it_free(&s);
}

Test(shim_it, one_pool_per_device) {
  it_result n, s;
  const char *const env[] = {"FAKECUDA_DEVICES=2", NULL};
  it_same(&n, &s, env, "multidev", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "multidev: count=2 errors=0 p0=0 p1=1 free_cross=0 q0=0 q1=1 cur=1 last=0\n"));
  /* it_line finds the first pool line: device 0. */
  cr_assert(eq(long, it_val(&s, "pool", "dev", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 2));
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0));
  const char *dev1 = strstr(s.out, "pool: dev=1 ");
  cr_assert(ne(ptr, (void *)dev1, NULL), "%s", s.out);
  cr_assert(ne(ptr, strstr(dev1, " hits=1 "), NULL), "device 1 must reuse its own block: %s", dev1);
  cr_assert(ne(ptr, strstr(dev1, " num_alloc=2 "), NULL), "%s", dev1);
  it_free(&n);
  it_free(&s);
}

Test(shim_it, per_thread_default_stream_api) {
  it_result n, s;
  it_same(&n, &s, NULL, "ptds", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "ptds: alloc=0 memset=0 sync=0 copy=0 value=7 free=0 alloc2=0 free2=0 last=0\n"));
  cr_assert(eq(long, it_val(&n, "info", "sync_ptsz", -1), 1));
  cr_assert(eq(long, it_val(&s, "pool", "hits", -1), 1), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it, nvcc_program_built_with_cudart_shared) {
  char path[4096];
  snprintf(path, sizeof path, "%s/progs/kernel", it_build());
  if (access(path, X_OK) != 0) cr_skip_test("no nvcc: %s not built", path);
  it_result n, s;
  it_same(&n, &s, NULL, "kernel", IT_ARGS("100"));
  cr_assert(eq(str, (char *)it_compared(&n), "kernel: launch=0 sync=0 pairs=100 errors=0\n"));
  it_free(&n);
  it_free(&s);
}

Test(shim_it, device_reset_drops_the_pool) {
  it_result n, s;
  it_same(&n, &s, NULL, "reset", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "reset: errors=0 rc=0 free_old=1 last=1 free_cached=1 last2=1 malloc=0 "
               "free_new=0 last3=0\n"));
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "segments", -1), 1));
  it_free(&n);
  it_free(&s);
}

Test(shim_it, fake_runtime_api) {
  it_result n, s;
  it_same(&n, &s, NULL, "fakeapi", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "device: count=1 rc=0 props=0 name_ok=1 mem_ok=1 bad_set=101 last=101 "
               "driver=13000 runtime=13000 major=9\n"
               "names: cudaErrorInvalidValue cudaErrorStreamCaptureInvalidated unrecognized "
               "error code \"out of memory\"\n"
               "attributes: alloc=0 rc=0 type=2 device=0 host_type=0\n"
               "copy: h2d=0 d2h=0 equal=1 overrun=1 last=1 memset_outside=1 last2=1\n"
               "streams: create=0 elapsed=0 ms_ok=1 not_ready=600 last=0 bogus=400 last2=400 "
               "flags=1\n"
               "reset: rc=0 stream_destroy=400 last=400 event_destroy=400 last2=400 free=1 "
               "last3=1\n"));
  it_free(&n);
  it_free(&s);
}

Test(shim_it, fake_injected_malloc_failures_from_the_environment) {
  it_result n;
  const char *const env[] = {"FAKECUDA_FAIL_MALLOC_AFTER=3", NULL};
  it_run_ok(&n, IT_NATIVE, env, "intercept", IT_ARGS("5"));
  cr_assert(eq(str, (char *)it_compared(&n), "intercept: pairs=5 errors=2 last=2\n"));
  it_free(&n);
}
