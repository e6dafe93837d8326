/* faults_mt.c: what once went wrong under the shim with threads, run
 * natively and under it ("Never wrong, never exploitable", faults): a
 * relaxed capture while another thread churns allocations, and
 * cudaDeviceReset while eight threads allocate. Threaded: also built into
 * the ThreadSanitizer test binary. */
#include <stdio.h>
#include <stdlib.h>

#include "it_check.h"

/* 5,000 x 4 MiB on a 256 MiB device: without reuse during the capture the
 * churn runs out of memory after 64 rounds. */
#define CHURN_ENV ((const char *const[]){"FAKECUDA_MEMORY=256M", NULL})

static void churn(const char *capture, const char *where) {
  it_result n, s;
  it_same(&n, &s, CHURN_ENV, "capture_churn", IT_ARGS(capture, where));
  char want[512];
  snprintf(want, sizeof want,
           "capture_churn: capture=%s churn=%s setup=0 begin=0 recorded=0,0 malloc_fail=0 "
           "memset_fail=0 free_fail=0 end=0 graph=1 last=0\n",
           capture, where);
  cr_assert(eq(str, (char *)it_compared(&n), want));
  cr_assert(eq(long, it_val(&s, "pool", "num_ooms", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

/* Barriers go on during a relaxed capture on a non-blocking stream
 * (shim/state/cuda_backend.c; the capturing stream is represented by its
 * pre-capture event, shim/state/capture.c): the churn reuses its frees, in a
 * couple of segments, and the capture still ends with a graph. */
static void churn_with_barriers(const char *where) {
  churn("nonblocking", where);
  it_result s;
  it_run_ok(&s, IT_SHIM, CHURN_ENV, "capture_churn", IT_ARGS("nonblocking", where));
  long peak = it_val(&s, "pool", "reserved_peak_mib", -1);
  cr_assert(ge(long, peak, 0), "%s", s.out);
  cr_assert(le(long, peak, 42), "barriers keep the churn in a couple of segments\n%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "num_device_free", -1), 0), "no segment had to be given back\n%s",
            s.out);
  it_free(&s);
}

Test(shim_it_mt, relaxed_nonblocking_capture_with_churn_on_the_legacy_stream) {
  churn_with_barriers("legacy");
}

Test(shim_it_mt, relaxed_nonblocking_capture_with_churn_on_its_own_stream) { churn_with_barriers("own"); }

/* A blocking stream captures: the legacy stream may not be touched, so no
 * barrier or fence can be issued. When the device is full the pool gives
 * back segments that hold no live block (core/segment.c,
 * cp_release_idle_segments) and the churn goes on without a failure. */
Test(shim_it_mt, relaxed_blocking_capture_with_churn_gives_idle_segments_back) {
  churn("blocking", "own");
  it_result s;
  it_run_ok(&s, IT_SHIM, CHURN_ENV, "capture_churn", IT_ARGS("blocking", "own"));
  cr_assert(gt(long, it_val(&s, "pool", "num_device_free", -1), 0), "%s", s.out);
  cr_assert(le(long, it_val(&s, "pool", "reserved_peak_mib", -1), 256), "%s", s.out);
  it_free(&s);
}

/* The reset pool is retired, not freed (shim/state/device.c, retire): threads
 * still inside it finish their call. Before, a heap use-after-free: a crash
 * or a hang on its freed lock, an ASan report under make test-sanitize. */
Test(shim_it_mt, device_reset_while_eight_threads_allocate) {
  it_result n, s;
  it_same(&n, &s, NULL, "reset_threads", NULL);
  cr_assert(eq(str, (char *)it_compared(&n), "reset_threads: survived=1 setup=0 reset=0 malloc=0 free=0\n"));
  cr_assert(eq(long, it_val(&s, "pool", "allocated", -1), 0), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

/* The exit report after such a reset: the device's pool since the reset,
 * with nothing left allocated. */
Test(shim_it_mt, exit_report_after_a_reset_while_threads_allocate) {
  it_result s;
  char text[1 << 16];
  it_json *j = it_json_report(&s, "reset_threads", text, sizeof text);
  const it_json *devs = it_json_get(j, "devices");
  cr_assert(eq(int, it_json_type(devs), IT_JSON_ARR), "%s", text);
  cr_assert(eq(sz, it_json_len(devs), 1), "%s", text);
  const it_json *d = it_json_at(devs, 0);
  cr_assert(eq(dbl, it_json_num(it_json_get(d, "device")), 0));
  cr_assert(eq(dbl, it_json_num(it_json_get(it_json_get(d, "allocated_bytes"), "current")), 0), "%s", text);
  cr_assert(eq(dbl, it_json_num(it_json_get(d, "num_alloc")), it_json_num(it_json_get(d, "num_free"))), "%s",
            text);
  cr_assert(eq(dbl, it_json_num(it_json_get(d, "num_alloc")), (double)it_val(&s, "pool", "num_alloc", -1)),
            "the report and the program's last look agree\n%s\n%s", text, s.out);
  it_json_free(j);
  it_free(&s);
}
