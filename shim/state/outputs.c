/* outputs.c: opening, writing and warning about the trace and the exit
 * report (see outputs.h for the rules).
 *
 * The report is formatted into memory first and written with one
 * cp_outfile_write, so a failed write still has the whole text to send to
 * stderr. Invariants: at most one warning per output per process; at most
 * one report, from whichever comes first, the exit or the SIGTERM reporter
 * (sigterm.c); the other waits for it. */
#include "state/outputs.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state/device.h"
#include "state/entry_stats.h"
#include "state/live.h"
#include "outfile.h"
#include "state/shim.h"
#include "state/sigterm.h"
#include "trace.h"

#define SHOWN_MAX 256 /* bytes of a value or a path a warning shows */

static pthread_once_t end_once = PTHREAD_ONCE_INIT; /* one report, at exit or on SIGTERM */

/* cudapool: warning: NAME="VALUE" (PATH) cannot be written: REASON; AFTER */
static void warn_file(const char *name, const char *value, const char *path, const char *what, int err,
                      const char *after) {
  const char *reason = err == EBUSY && strcmp(name, "CUDAPOOL_STATS") == 0
                           ? "it is the file of CUDAPOOL_TRACE, which is kept"
                           : cp_outfile_rule(err);
  fprintf(stderr, "cudapool: warning: %s=\"", name);
  cp_put_escaped(stderr, value, SHOWN_MAX);
  fputc('"', stderr);
  if (path[0] != '\0' && strcmp(path, value) != 0) {
    fputs(" (", stderr);
    cp_put_escaped(stderr, path, SHOWN_MAX);
    fputc(')', stderr);
  }
  fprintf(stderr, " %s: %s; %s\n", what, reason != NULL ? reason : strerror(err), after);
  fflush(stderr);
}

static void trace_path(char *path, size_t cap) {
  if (cp_outfile_expand(cp_opts.trace, (long)getpid(), path, cap) < 0) path[0] = '\0';
}

void cp_outputs_start(void) {
  cp_live_start();
  cp_sigterm_arm();
  if (!cp_opts.trace[0]) return;
  int err = cp_trace_open(cp_opts.trace);
  if (err == 0) return;
  char path[CP_OPTION_PATH_MAX];
  trace_path(path, sizeof path);
  warn_file("CUDAPOOL_TRACE", cp_opts.trace, path, "cannot be written", err, "no trace is recorded");
}

static void close_trace(void) {
  uint64_t dropped = 0;
  cp_trace_close();
  int err = cp_trace_error();
  if (err == 0) return;
  cp_trace_counts(NULL, &dropped);
  char path[CP_OPTION_PATH_MAX], after[64];
  trace_path(path, sizeof path);
  snprintf(after, sizeof after, "%" PRIu64 " events lost", dropped);
  warn_file("CUDAPOOL_TRACE", cp_opts.trace, path, "was not written in full", err, after);
}

/* The report into fd; 0 or the errno of the failure. fd is closed. */
static int report_to(int fd) {
  char *text = NULL;
  size_t len = 0;
  int err = 0;
  FILE *m = open_memstream(&text, &len);
  if (m == NULL) {
    err = errno ? errno : ENOMEM;
  } else {
    cp_print_report(m, cp_opts.stats_format, true);
    if (fclose(m) != 0) err = ENOMEM;
  }
  if (err == 0) err = cp_outfile_write(fd, text, len);
  int cerr = cp_outfile_close(fd);
  free(text);
  return err != 0 ? err : cerr;
}

static void end_outputs(void) {
  /* The diagnostic of entry_stats.h, whether or not a pool was used. */
  if (cp_opts.verbose) cp_entry_report(stderr);
  if (cp_device_stats_all(NULL, 0) == 0) {
    close_trace();
    return;
  }
  bool to_file = cp_opts.stats[0] && strcmp(cp_opts.stats, "stderr") != 0;
  char path[CP_OPTION_PATH_MAX] = "";
  /* Before the trace closes: a report named like the trace file is refused. */
  int fd = to_file ? cp_outfile_open(cp_opts.stats, path, sizeof path) : -1;
  close_trace();
  if (!cp_opts.stats[0]) return;
  if (to_file) {
    bool opened = fd >= 0;
    int err = opened ? report_to(fd) : -fd;
    if (err == 0) return;
    warn_file("CUDAPOOL_STATS", cp_opts.stats, path, opened ? "was not written in full" : "cannot be written",
              err, "the report goes to stderr");
  }
  cp_print_report(stderr, cp_opts.stats_format, true);
}

void cp_outputs_end(void) {
  /* A process that made no CUDA call, or used no device, says nothing. The
   * child of a fork() is inactive (layer.c), so a parent's end_once caught
   * half way never stops it. */
  if (!cp_shim_active()) return;
  cp_live_end();
  pthread_once(&end_once, end_outputs);
}
