/* outputs.c: opening, writing and warning about the trace and the exit
 * report (see outputs.h for the rules).
 *
 * The report is formatted into memory first and written with one
 * cp_outfile_write, so a failed write still has the whole text to send to
 * stderr. Invariants: at most one warning per output per process; at most
 * one report at the end, from whichever comes first, the exit or the
 * SIGTERM reporter (sigterm.c); the other waits for it. An exec writes one
 * before it (exec_hook.c) and keeps the report's file open (close-on-exec),
 * so that the end of a process whose exec failed writes that file again
 * from its start; `lock` orders the exec's outputs and the end's. */
#include "state/outputs.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/device.h"
#include "state/entry_stats.h"
#include "state/live.h"
#include "state/shared_limit.h"
#include "outfile.h"
#include "state/shim.h"
#include "state/sigterm.h"
#include "state/stacks.h"
#include "trace.h"

#define SHOWN_MAX 256 /* bytes of a value or a path a warning shows */

static pthread_once_t end_once = PTHREAD_ONCE_INIT;      /* one report, at exit or on SIGTERM */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* an exec's outputs against the end's */
static bool ended;                                       /* end_outputs ran (lock) */
static int report_fd = -1; /* CUDAPOOL_STATS's file, kept open by an exec that failed (lock) */
static char report_path[CP_OPTION_PATH_MAX];
static pid_t started_pid; /* the process cp_outputs_start ran in */

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
  started_pid = getpid();
  cp_live_start();
  cp_sigterm_arm();
  if (!cp_opts.trace[0]) return;
  int err = cp_trace_open_with_stacks(cp_opts.trace, cp_opts.stacks > 0);
  if (err == 0) return;
  char path[CP_OPTION_PATH_MAX];
  trace_path(path, sizeof path);
  warn_file("CUDAPOOL_TRACE", cp_opts.trace, path, "cannot be written", err, "no trace is recorded");
}

/* With CUDAPOOL_STACKS the trace's Stack column names ids of the table
 * written next to it, as TRACE.stacks.json (cudapool view reads it). */
static void write_stacks_table(void) {
  char path[CP_OPTION_PATH_MAX], table[CP_OPTION_PATH_MAX + 16];
  trace_path(path, sizeof path);
  if (!path[0]) return;
  snprintf(table, sizeof table, "%s.stacks.json", path);
  int err = cp_stacks_write_table(table);
  if (err != 0) warn_file("CUDAPOOL_TRACE", cp_opts.trace, table, "has a stacks table that cannot be written", err,
                          "the trace's Stack column names no frames");
}

static void close_trace(void) {
  uint64_t dropped = 0;
  bool was_open = cp_trace_enabled();
  cp_trace_close();
  if (was_open && cp_stacks_on) write_stacks_table();
  int err = cp_trace_error();
  if (err == 0) return;
  cp_trace_counts(NULL, &dropped);
  char path[CP_OPTION_PATH_MAX], after[64];
  trace_path(path, sizeof path);
  snprintf(after, sizeof after, "%" PRIu64 " events lost", dropped);
  warn_file("CUDAPOOL_TRACE", cp_opts.trace, path, "was not written in full", err, after);
}

/* The report into fd, from the start of the file when it is a regular one
 * that an earlier report (before a failed exec) wrote; 0 or the errno of
 * the failure. */
static int report_to(int fd, bool again) {
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
  struct stat st;
  if (err == 0 && again && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0))
    err = errno;
  if (err == 0) err = cp_outfile_write(fd, text, len);
  free(text);
  return err;
}

/* The report, to its file or stderr (lock held). The trace must still be
 * open: a report named like the trace file is refused. keep: leave the file
 * open in report_fd (an exec: the kernel closes it if the exec succeeds). */
static void write_report(bool keep) {
  if (!cp_opts.stats[0]) return;
  if (strcmp(cp_opts.stats, "stderr") != 0) {
    bool again = report_fd >= 0;
    int fd = again ? report_fd : cp_outfile_open(cp_opts.stats, report_path, sizeof report_path);
    if (fd < 0) report_path[0] = '\0';
    bool opened = fd >= 0;
    int err = opened ? report_to(fd, again) : -fd;
    if (opened && !keep) {
      int cerr = cp_outfile_close(fd);
      if (err == 0) err = cerr;
    }
    report_fd = opened && keep ? fd : -1;
    if (err == 0) return;
    warn_file("CUDAPOOL_STATS", cp_opts.stats, report_path,
              opened ? "was not written in full" : "cannot be written", err, "the report goes to stderr");
  }
  cp_print_report(stderr, cp_opts.stats_format, true);
}

static void end_outputs(void) {
  pthread_mutex_lock(&lock);
  ended = true;
  /* The diagnostic of entry_stats.h, whether or not a pool was used. */
  if (cp_opts.verbose) cp_entry_report(stderr);
  if (cp_device_stats_all(NULL, 0) != 0) write_report(false);
  close_trace();
  pthread_mutex_unlock(&lock);
}

void cp_outputs_end(void) {
  /* A process that made no CUDA call, or used no device, says nothing. The
   * child of a fork() is inactive (layer.c), so a parent's end_once caught
   * half way never stops it. */
  if (!cp_shim_active()) return;
  cp_live_end();
  /* The shared limit's slots stay: shared_limit.h says why. */
  pthread_once(&end_once, end_outputs);
}

bool cp_outputs_before_exec(void) {
  /* Not in the child of a vfork() (or a clone sharing memory): the state is
   * its parent's, which goes on. */
  if (!cp_shim_active() || getpid() != started_pid) return false;
  pthread_mutex_lock(&lock);
  if (ended) {
    pthread_mutex_unlock(&lock);
    return false;
  }
  cp_trace_before_exec();
  if (cp_device_stats_all(NULL, 0) != 0) write_report(true);
  cp_live_end();
  cp_shared_before_exec();
  return true;
}

void cp_outputs_after_failed_exec(void) {
  cp_trace_after_failed_exec();
  cp_live_after_failed_exec();
  cp_shared_after_failed_exec();
  pthread_mutex_unlock(&lock);
}
