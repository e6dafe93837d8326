/* init.c: the shim's start and end.
 *
 * Start (constructor, or the first intercepted call if that comes earlier):
 * read the options once, print them with CUDAPOOL_VERBOSE. The trace opens
 * at the first CUDA call (layer.c), which also decides which layer serves.
 * End (destructor): flush the trace and print the exit report when
 * CUDAPOOL_STATS asks, with no CUDA call (the runtime may already be
 * unloading); the pools are left to the process's end, as cudaFree at exit
 * would only slow it down. Which files, and what happens when one cannot be
 * written: outputs.c. A SIGTERM that came in while the program was exiting
 * ends it after the report (sigterm.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "state/device.h"
#include "state/nvtx.h"
#include "state/nvtx_regions.h"
#include "state/order.h"
#include "state/outputs.h"
#include "state/process_info.h"
#include "state/regions.h"
#include "state/reclaim.h"
#include "backend/cuda_vmm.h"
#include "backend/real.h"
#include "report.h"
#include "state/shim.h"
#include "state/sigterm.h"
#include "state/snapshot_signal.h"
#include "state/stacks.h"

cp_options_t cp_opts;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void start(void) {
  cp_process_info_start();
  cp_options_load(&cp_opts, NULL, stderr);
  if (cp_opts.verbose) cp_options_print(&cp_opts, stderr);
  /* A privileged process never loads a library its caller's environment names. */
  const char *injection = cp_secure_exec() ? NULL : cp_options_getenv("NVTX_INJECTION64_PATH");
  /* Named by the parent's cudapool (nvtx_regions.h): no tool. */
  if (cp_nvtx_regions_is_self(injection)) injection = NULL;
  cp_nvtx_decide(cp_secure_exec() ? CP_NVTX_OFF : cp_opts.nvtx, injection, cp_opts.verbose ? stderr : NULL);
  cp_nvtx_regions_start(cp_opts.nvtx_regions && !cp_opts.disable, injection, cp_opts.verbose ? stderr : NULL);
  if (cp_opts.stacks) cp_stacks_start(cp_opts.stacks);
  cp_snapshot_signal_arm();
  cp_vmm_set_page_option(cp_opts.expandable_page);
  cp_order_start();
  cp_layer_at_load();
}

void cp_options_start(void) { pthread_once(&once, start); }

__thread __attribute__((tls_model("initial-exec"))) uint64_t cp_thread_key_value;

uint64_t cp_thread_key_first(void) {
  static atomic_uint_fast64_t next_key = 1;
  return cp_thread_key_value = atomic_fetch_add(&next_key, 1);
}

__attribute__((constructor)) static void cudapool_start(void) { pthread_once(&once, start); }

void cp_report_header_now(char *buf, size_t cap) {
  cp_report_header(buf, cap, (long)getpid(), cp_mode_word(cp_opts.mode), &cp_opts.limit);
}

/* The JSON report's members after the counters: call sites, then regions. */
void cp_report_extra_json(FILE *out) {
  cp_stacks_report_json(out, NULL);
  cp_regions_report_json(out);
}

/* The text report's lines after the table: call sites, then regions. */
void cp_report_extra_text(FILE *out) {
  cp_stacks_report_text(out);
  cp_regions_report_text(out);
}

static void report_extra_json(FILE *out, void *unused) {
  (void)unused;
  cp_report_extra_json(out);
}

void cp_print_report(FILE *out, cp_format_t format, bool at_end) {
  cudapool_stats_t devs[CP_MAX_DEVICES];
  int n = cp_device_stats_all(devs, CP_MAX_DEVICES);
  if (format == CP_FORMAT_JSON) {
    cp_report_process_t proc;
    cp_process_info(&proc, at_end);
    proc.extra = report_extra_json;
    cp_report_json_process(out, devs, n, &proc);
    return;
  }
  char header[160];
  cp_report_header_now(header, sizeof header);
  cp_report_text(out, devs, n, header);
  if (at_end) cp_report_still_allocated(out, devs, n);
  const char *given_up_by = cp_order_given_up_by();
  if (given_up_by) cp_report_order_given_up(out, given_up_by);
  cp_report_extra_text(out);
}

__attribute__((destructor)) static void cudapool_end(void) {
  cp_reclaim_stop(); /* normally done already, by its atexit handler */
  cp_outputs_end();
  cp_sigterm_after_exit_report();
}
