/* report.h: the stats report, text and JSON, of cudapool_stats_t records.
 *
 * Owns the output format only. Both forms are generated from the counter
 * lists in cudapool.h (CUDAPOOL_GAUGES/COUNTERS/SNAPSHOT), so a counter added
 * there appears in the JSON without a change here. No CUDA call, no
 * allocation, no lock: safe from a destructor at exit while the CUDA runtime
 * may be unloading. Numbers are printed without the locale. */
#ifndef CUDAPOOL_SHIM_REPORT_H
#define CUDAPOOL_SHIM_REPORT_H

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

#endif
