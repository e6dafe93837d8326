/* layer.c: integration tests of cudapool's driver layer on the
 * fake driver (tests/fakes/cuda): a program that reaches the driver as a
 * statically linked runtime does, one linked with -lcuda, one that uses the
 * runtime and the driver together, stream capture at the driver level,
 * CUDAPOOL_LAYER and CUDAPOOL_DISABLE, and dlsym's caller-relative answers.
 * Each program runs natively (which checks the fake) and under the shim,
 * which must print the same lines, and pool counters where the sequence
 * makes them exact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

#define DRV_ENV(...) ((const char *const[]){it_fake_driver_env(), __VA_ARGS__})

/* The value of key in any "info:" line (the programs print several). */
static long info_val(it_result *r, const char *key, long missing) {
  size_t kl = strlen(key);
  for (const char *l = strstr(r->out, "info:"); l; l = strstr(l + 1, "info:")) {
    if (l != r->out && l[-1] != '\n') continue;
    const char *end = strchr(l, '\n');
    for (const char *p = strchr(l, ' '); p && (!end || p < end); p = strchr(p + 1, ' '))
      if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == '=') return strtol(p + 2 + kl, NULL, 10);
  }
  return missing;
}

#define STATIC_OUTPUT                                                                                 \
  "lookup_init: rc=0 status=0 same_as_dlsym=1 same_as_fake=1\n"                                       \
  "lookup_unknown: rc=0 null=1 status=1\n"                                                            \
  "lookup_old: rc=0 null=1 status=2\n"                                                                \
  "lookup_future: rc=1\n"                                                                             \
  "lookup_self: rc=0 status=0 got=1 rc2=0 same_free=1\n"                                              \
  "lookup_v1: found=1 rc=0 same_free=1\n"                                                             \
  "lookup_ptsz: rc=0 status=0 differs=1\n"                                                            \
  "dlsym: init=1 missing=1 err=0\n"                                                                   \
  "pairs: n=100 errors=0\n"                                                                           \
  "errors: null_out=1 zero=1 alloc=0 interior=1 free=0 twice=1 bogus=1 null_free=0 oom=2 bad_elem=1 " \
  "info_null=1\n"                                                                                     \
  "errors_freed: alloc=0 free=0 interior=1\n"                                                         \
  "contents: alloc=0 write=0 read=0 same=1 free=0 alloc2=0 set=0 ok=1 free2=0\n"                      \
  "pitch: alloc=0 pitch=1024 alloc2=0 pitch2=1024 write_last_row=0 free=0 free2=0\n"                  \
  "meminfo: rc=0 total=17179869184 free0=17179869184 alloc=0 rc1=0 used=1048576 free=0 rc2=0 "        \
  "free_after=17179869184\n"                                                                          \
  "streams: create=0 alloc=0 free=0 alloc2=0 sync=0 legacy=0 ctx=0 destroy=0 again=400 free2=0\n"     \
  "own_context: create=0 alloc=0 free=0 driver_allocs=3 destroy=0 back=0\n"                           \
  "reset: alloc=0 free=0 alloc2=0 reset=0 stale_free=1 alloc3=0 free3=0\n"

Test(shim_it_driver, static_runtime_lookups_native) {
  it_result n;
  it_run_ok(&n, IT_NATIVE, DRV_ENV(NULL), "drv_static", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), STATIC_OUTPUT));
  cr_assert(eq(str, (char *)it_line(&n, "pool"), "pool: nopool"));
  cr_assert(eq(long, info_val(&n, "driver_allocs", -1), 100));
  it_free(&n);
}

/* The lookup sequence of a static runtime gets cudapool's wrappers for the
 * served entry points, the fake's own for the rest, and the pool serves. */
Test(shim_it_driver, static_runtime_allocations_are_pooled) {
  it_result n, s;
  it_same(&n, &s, DRV_ENV(NULL), "drv_static", NULL);
  cr_assert(eq(long, it_val(&s, "pool", "hits", -1), 99), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "misses", -1), 1));
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", -1), 100));
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0));
  cr_assert(eq(long, info_val(&s, "driver_allocs", -1), 1));
  cr_assert(eq(str, (char *)it_line(&n, "info"), "info: alloc_is_fake=1"));
  cr_assert(eq(str, (char *)it_line(&s, "info"), "info: alloc_is_fake=0"));
  cr_assert(ne(ptr, strstr(s.out, "info: getproc_is_fake=0\n"), NULL), "%s", s.out);
  cr_assert(ne(ptr, strstr(s.out, "info: ptsz_is_fake=0\n"), NULL), "%s", s.out);
  /* Its deliberate 1 PiB request: the pool says why it failed, once. */
  cr_assert(eq(str, s.err,
               "cudapool: out of memory on device 0: asked 1.00 PiB; allocated 0 B, reserved 0 B, "
               "cached 0 B (largest free block 0 B), limit none\n"));
  it_free(&n);
  it_free(&s);
}

/* A driver whose cuGetProcAddress answers with addresses of its own (not
 * the exported functions): the variants are then told by name. */
Test(shim_it_driver, internal_addresses_are_mapped_by_name) {
  it_result n, s;
  const char *const *env = DRV_ENV("FAKECU_PROC_TRAMPOLINES=1", NULL);
  it_same(&n, &s, env, "drv_static", NULL);
  cr_assert(eq(long, info_val(&n, "driver_allocs", -1), 100));
  cr_assert(eq(long, info_val(&s, "driver_allocs", -1), 1), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "hits", -1), 99), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_driver, layer_runtime_leaves_the_driver_alone) {
  it_result n, s;
  const char *const *env = DRV_ENV("CUDAPOOL_LAYER=runtime", NULL);
  it_same(&n, &s, env, "drv_static", NULL);
  cr_assert(eq(long, info_val(&s, "driver_allocs", -1), 100), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_alloc", 0), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_driver, disabled_hands_out_the_drivers_own_functions) {
  it_result n, s;
  const char *const *env = DRV_ENV("CUDAPOOL_DISABLE=1", NULL);
  it_same(&n, &s, env, "drv_static", NULL);
  cr_assert(eq(long, info_val(&s, "driver_allocs", -1), 100), "%s", s.out);
  cr_assert(eq(str, (char *)it_line(&s, "info"), "info: alloc_is_fake=1"));
  it_free(&n);
  it_free(&s);
}

/* A limit caps what cuMemGetInfo shows, and an allocation over it fails
 * with the driver's own out-of-memory code. */
Test(shim_it_driver, limit_at_the_driver_level) {
  it_result s;
  const char *const *env = DRV_ENV("CUDAPOOL_LIMIT=32M", NULL);
  it_run_ok(&s, IT_SHIM, env, "drv_static", NULL);
  cr_assert(eq(long, it_val(&s, "meminfo", "total", -1), 32L << 20), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "meminfo", "used", -1), 1L << 20));
  cr_assert(eq(long, it_val(&s, "errors", "oom", -1), 2));
  cr_assert(eq(long, it_val(&s, "pairs", "errors", -1), 0));
  it_free(&s);
}

Test(shim_it_driver, exit_report_of_a_static_runtime_program) {
  char dir[] = "/tmp/cudapool-drv-XXXXXX";
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  char setting[128], path[128];
  snprintf(setting, sizeof setting, "CUDAPOOL_STATS=%s/report.json", dir);
  const char *const *env = DRV_ENV(setting, "CUDAPOOL_STATS_FORMAT=json", NULL);
  it_result s;
  it_run_ok(&s, IT_SHIM, env, "drv_static", NULL);
  snprintf(path, sizeof path, "%s/report.json", dir);
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL), "no report at %s", path);
  char text[65536];
  size_t got = fread(text, 1, sizeof text - 1, f);
  text[got] = '\0';
  fclose(f);
  unlink(path);
  rmdir(dir);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "%s", text);
  const it_json *d = it_json_at(it_json_get(j, "devices"), 0);
  cr_assert(ne(ptr, (void *)d, NULL), "%s", text);
  /* The program ends with a device reset, then one allocation and free:
   * the report shows the pool made after the reset. */
  cr_assert(eq(dbl, it_json_num(it_json_get(d, "num_alloc")), 1), "%s", text);
  cr_assert(eq(dbl, it_json_num(it_json_get(d, "num_free")), 1), "%s", text);
  cr_assert(eq(dbl, it_json_num(it_json_get(d, "num_device_alloc")), 1), "%s", text);
  it_json_free(j);
  it_free(&s);
}

#define CAPTURE_OUTPUT                                                               \
  "relaxed: create=0 warm=0 begin=0 alloc=0 free=0 alloc2=0 free2=0 end=0 graph=1\n" \
  "global_alloc: begin=0 alloc=900 end=901 graph=0\n"                                \
  "global_free: alloc=0 begin=0 free=900 end=901 free_after=0\n"                     \
  "thread_local: begin=0 bogus_free=900 end=901\n"                                   \
  "misc: legacy=900 not_capturing=401 begin=0 destroy=0 alloc=0 free=0\n"

/* No barrier or fence during a relaxed capture (it would end invalidated),
 * native failures in strict ones, for a pool pointer too. */
Test(shim_it_driver, captures_at_the_driver_level) {
  it_result n, s;
  it_same(&n, &s, DRV_ENV(NULL), "drv_capture", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), CAPTURE_OUTPUT));
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);
  cr_assert(ge(long, it_val(&s, "pool", "num_alloc", -1), 4), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

Test(shim_it_driver, program_linked_with_lcuda) {
  it_result n, s;
  it_same(&n, &s, DRV_ENV(NULL), "drv_linked", NULL);
  cr_assert(eq(str, (char *)it_compared(&n),
               "linked: setup=0 pairs=100 errors=0 alloc=0 interior=1 free=0 getproc=0 found=1\n"));
  cr_assert(eq(long, info_val(&n, "driver_allocs", -1), 101));
  cr_assert(eq(long, info_val(&s, "driver_allocs", -1), 1), "%s", s.out);
  cr_assert(eq(long, info_val(&s, "free_is_fake", -1), 0));
  cr_assert(eq(long, it_val(&s, "pool", "hits", -1), 100));
  it_free(&n);
  it_free(&s);
}

#define MIXED_OUTPUT                                                                                     \
  "runtime_pairs: n=100 errors=0 last=0\n"                                                               \
  "cross: rt_alloc=0 drv_free=0 drv_alloc=0 rt_free=0 twice=1 last=1 twice_drv=1\n"                      \
  "meminfo: rc=0 total=17179869184 free0=17179869184 alloc=0 rc1=0 used=1048576 rc2=0 drv_used=1048576 " \
  "free=0\n"                                                                                             \
  "stream: create=0 alloc=0 free=0 other_thread=0 destroy=0\n"                                           \
  "reset: alloc=0 reset=0 stale_free=1 last=1 alloc=0 free=0\n"

/* One pool whichever layer: the runtime layer serves, the pool's own
 * cudaMalloc passes the driver layer untouched (one driver allocation for
 * 100 pairs), cudaMemGetInfo is adjusted once, the stream made through the
 * runtime is known once (a barrier: two records, two waits). The learned
 * order is off: it would make the barrier virtual (no work was submitted),
 * and the barrier's reach is what is checked. */
static void mixed(const char *layer, long pool_hits) {
  it_result n, s;
  const char *const *env = DRV_ENV(layer, "CUDAPOOL_LEARN_ORDER=0", NULL);
  it_same(&n, &s, env, "drv_mixed", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), MIXED_OUTPUT));
  cr_assert(eq(long, info_val(&n, "driver_allocs", -1), 100));
  cr_assert(eq(long, info_val(&s, "driver_allocs", -1), 1), "%s\n%s", layer, s.out);
  cr_assert(eq(long, info_val(&s, "create_records", -1), 1), "%s\n%s", layer, s.out);
  cr_assert(eq(long, info_val(&s, "create_waits", -1), 1));
  cr_assert(eq(long, info_val(&s, "reuse_records", -1), 2));
  cr_assert(eq(long, info_val(&s, "reuse_waits", -1), 2));
  cr_assert(eq(long, it_val(&s, "pool", "hits", -1), pool_hits), "%s\n%s", layer, s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_barriers", -1), 1));
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0));
  it_free(&n);
  it_free(&s);
}

Test(shim_it_driver, one_pool_for_runtime_and_driver) { mixed("CUDAPOOL_LAYER=both", 104); }
Test(shim_it_driver, layer_driver_serves_runtime_calls_below) { mixed("CUDAPOOL_LAYER=driver", 104); }
/* The driver-level allocation is not pooled then (one hit fewer); the
 * runtime's pointer freed at the driver level still goes back to the pool. */
Test(shim_it_driver, layer_runtime_still_frees_pool_pointers_at_the_driver) {
  mixed("CUDAPOOL_LAYER=runtime", 103);
}

#define NEXT_OUTPUT                                                                            \
  "local: loaded=1 next=target default=found main_default=main main_next=null malloc_next=1\n" \
  "preloaded: next=target default=found main_default=main main_next=next\n"

Test(shim_it_driver, dlsym_answers_relative_to_its_caller) {
  it_result n, s;
  it_same(&n, &s, DRV_ENV(NULL), "drv_next", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), NEXT_OUTPUT));
  it_free(&n);
  it_free(&s);
}
