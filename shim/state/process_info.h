/* process_info.h: who this process is, for the JSON report (common/report.h's
 * cp_report_process_t): its command line, its rank, its host, and how long
 * the library has been loaded. */
#ifndef CUDAPOOL_SHIM_PROCESS_INFO_H
#define CUDAPOOL_SHIM_PROCESS_INFO_H

#include <stdbool.h>

#include "report.h"

/* At start (init.c), once: the command line, the rank and the clock. */
void cp_process_info_start(void);
/* The record for a report now; at_end for the report at exit or SIGTERM.
 * Its strings stay valid until the next call. */
void cp_process_info(cp_report_process_t *out, bool at_end);

#endif
