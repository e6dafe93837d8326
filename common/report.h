/* report.h: the stats report, text and JSON, of cudapool_stats_t records.
 *
 * Owns the output format only. Both forms are generated from the counter
 * lists in cudapool.h (CUDAPOOL_GAUGES/COUNTERS/SNAPSHOT), so a counter added
 * there appears in the JSON without a change here. No CUDA call, no
 * allocation, no lock: safe from a destructor at exit while the CUDA runtime
 * may be unloading. Numbers are printed without the locale. */
#ifndef CUDAPOOL_SHIM_REPORT_H
#define CUDAPOOL_SHIM_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "cudapool.h"
#include "options.h"

#define CP_STR_(x) #x
#define CP_STR(x) CP_STR_(x)
/* "0.1.0" */
#define CP_VERSION_TEXT \
  CP_STR(CUDAPOOL_VERSION_MAJOR) "." CP_STR(CUDAPOOL_VERSION_MINOR) "." CP_STR(CUDAPOOL_VERSION_PATCH)

/* The text report's header, for cp_report_text:
 *   "process 4242, version 0.1.0, mode auto, limit 8.00 GiB"
 * The limit is CUDAPOOL_LIMIT as given: "none", a size for a person (two
 * decimals, cp_format_size_human) or "80% of device memory". Returns the
 * length, or 0 (buf empty) when it does not fit in cap. */
size_t cp_report_header(char *buf, size_t cap, long pid, const char *mode, const cp_size_opt_t *limit);
/* Exit report, text: a header line, then one table row per device: peak
 * allocated, peak reserved, utilisation = peak allocated / peak reserved,
 * hits, misses, hit rate (rounded down: "100.0%" only when nothing missed),
 * driver calls saved = (num_alloc + num_free) - (num_device_alloc +
 * num_device_free), retries, OOMs, largest free block. Every line starts
 * with "cudapool: " so it stands out in a program's stderr. header
 * (cp_report_header's; NULL = "exit report") is printed as given. */
void cp_report_text(FILE *out, const cudapool_stats_t *devs, int ndevs, const char *header);
/* One JSON object on one line:
 * {"version":"0.1.0","devices":[{"device":0,"allocated_bytes":{"current":..,"peak":..},
 *  ...every gauge as {current,peak}, every counter and snapshot value as an
 *  integer, "utilization":0.92}]}
 * utilization = peak allocated / peak reserved, 0.0 when nothing was reserved. */
void cp_report_json(FILE *out, const cudapool_stats_t *devs, int ndevs);

/* Who the report is of, for the JSON form (monitoring reads it without the
 * text header): every field but pid may be left out. */
typedef struct cp_report_process {
  long pid;
  const char *host;            /* NULL: left out */
  int rank;                    /* from the launcher's variables; -1: none ("rank":null) */
  const char *command;         /* the command line, arguments joined by spaces; NULL: left out */
  const char *mode;            /* CUDAPOOL_MODE's word */
  const cp_size_opt_t *limit;  /* CUDAPOOL_LIMIT as given, worded as in the header */
  double wall_s;               /* seconds since the library started; < 0: left out */
  bool at_end;                 /* the report at exit (or SIGTERM): what was never freed is added */
  /* NULL, or writes more members (each starting with ',') before the
   * object's closing brace: the call sites of shim/state/stacks.c. */
  void (*extra)(FILE *out, void *ctx);
  void *extra_ctx;
} cp_report_process_t;

/* cp_report_json with the process: after "version",
 *   "process":{"pid":N,"host":"..","rank":N|null,"command":"..","mode":"..","limit":"..","wall_s":1.5}
 * and, at the end, after "devices":
 *   "still_allocated":{"blocks":N,"bytes":N}   (the sum of every device's current allocated)
 * Strings are JSON-escaped: control characters, quotes and backslashes as
 * escapes, bytes from 0x7f up as \u00XX. proc NULL is cp_report_json. */
void cp_report_json_process(FILE *out, const cudapool_stats_t *devs, int ndevs, const cp_report_process_t *proc);
/* cp_report_json with `members` (JSON members, each starting with ',', as
 * the live stats carry them) before the object's closing brace. */
void cp_report_json_members(FILE *out, const cudapool_stats_t *devs, int ndevs, const char *members);
/* At exit, text: one line per device whose blocks the program never freed,
 *   "cudapool: device 0: 3 blocks, 1.50 MiB still allocated at exit (never freed by the program)"
 * and nothing when every block was freed. */
void cp_report_still_allocated(FILE *out, const cudapool_stats_t *devs, int ndevs);
/* At exit, text, when stream order was not learned because of what (see
 * shim/state/order.h, cp_order_give_up):
 *   "cudapool: order: not learned (cuFutureLaunch looked up)" */
void cp_report_order_given_up(FILE *out, const char *what);

#endif
