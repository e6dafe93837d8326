/* prometheus.h: cudapool-stats --prometheus, the live counters in the
 * Prometheus text exposition format (version 0.0.4), the format
 * node_exporter's textfile collector reads. See prometheus.c. */
#ifndef CUDAPOOL_LIVE_PROMETHEUS_H
#define CUDAPOOL_LIVE_PROMETHEUS_H

#include <stddef.h>
#include <stdio.h>

#include "live_read.h"

/* Every metric, its HELP and TYPE lines, then its samples of the n
 * processes snaps[i] (process id pids[i]), labelled pid and device. */
void lv_prometheus(FILE *out, const long *pids, const lr_snapshot_t *const *snaps, size_t n);

#endif
