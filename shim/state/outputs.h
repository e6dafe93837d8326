/* outputs.h: the shim's two output files, the trace (CUDAPOOL_TRACE) and the
 * exit report (CUDAPOOL_STATS): when each is opened, what happens when one
 * cannot be written, and the one warning that says so.
 *
 * Owns the policy; outfile.h owns how a file is opened and written. Rules:
 *   - the trace is opened at the first CUDA call (layer.c); if it cannot
 *     be, one warning and the program runs without a trace;
 *   - a process that made no CUDA call, or used no device, writes no
 *     report (and a child of fork() is such a process: layer.c);
 *   - the report's file is opened at exit while the trace is still open, so
 *     that a report named like the trace file is refused and the trace kept;
 *   - a report that cannot be opened or written in full goes to stderr
 *     after one warning; a trace with a write or close error gets one
 *     warning at exit;
 *   - every warning is one line naming the variable, its value (escaped) and
 *     the file when %p made it differ, the reason and what happens instead.
 *   - a process stopped by SIGTERM writes both as at exit (sigterm.h);
 *   - the live stats segment (live.h) is made at start, before SIGTERM is
 *     armed, and its file removed at exit or on SIGTERM;
 *   - before an exec (exec_hook.c) the trace is flushed and complete, the
 *     report written and the live file removed, as at exit; if the exec
 *     fails, the trace goes on in the same file, a new live file is made,
 *     and the report is written again at the end: into the same file, from
 *     its start (to stderr: a second report).
 * cp_outputs_start is called once, from layer.c; cp_outputs_end from
 * init.c's destructor and from sigterm.c's thread (it writes once); the
 * exec pair from exec_hook.c; never from an allocation path. */
#ifndef CUDAPOOL_SHIM_OUTPUTS_H
#define CUDAPOOL_SHIM_OUTPUTS_H

#include <stdbool.h>
#include <stdio.h>

#include "options.h"

/* At start, once the options are loaded: open the trace if asked, arm the
 * SIGTERM report (sigterm.h). */
void cp_outputs_start(void);
/* At exit or on SIGTERM: close the trace, write the report if asked, once;
 * a second caller waits for the first. No CUDA call. */
void cp_outputs_end(void);
/* Before an exec of this process: the outputs as at exit (above). true:
 * done, and the caller must call cp_outputs_after_failed_exec if the exec
 * returns (a lock is held until then); false: nothing to do (no CUDA call
 * yet, the end already written, or the caller is the child of a vfork). */
bool cp_outputs_before_exec(void);
void cp_outputs_after_failed_exec(void);

/* The report of every device used, text or JSON (init.c); at_end for the
 * report at exit or SIGTERM, which adds what was never freed. */
void cp_print_report(FILE *out, cp_format_t format, bool at_end);
/* Its header line, "process N, version V, mode M, limit L" (init.c; the
 * live stats show the same). */
void cp_report_header_now(char *buf, size_t cap);
/* What the report adds after the counters (init.c; the live stats show the
 * same): call sites (CUDAPOOL_STACKS), then regions; text lines, or JSON
 * members each starting with ','. Nothing when neither was recorded. */
void cp_report_extra_text(FILE *out);
void cp_report_extra_json(FILE *out);

#endif
