/* prometheus.c: the counters as Prometheus text (prometheus.h). The metric
 * list is include/cudapool.h's X-macros, so a counter added there is
 * exported with no change here: gauge NAME gives cudapool_NAME (current)
 * and cudapool_NAME_peak, counter NAME gives cudapool_NAME_total (a counter,
 * the suffix Prometheus expects), snapshot NAME gives cudapool_NAME; then
 * the releasable bytes and the cooperation counters of each device
 * (cudapool_coop_*: asks, got, asked, rounds, limited, given, as `cudapool
 * top` shows them). The
 * format wants each metric's samples right after its HELP/TYPE lines, so
 * the output goes metric by metric over all processes. Label values are
 * numbers: no escaping is needed. */
#include "prometheus.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

typedef enum { GAUGE_NOW, GAUGE_PEAK, COUNTER, SNAPSHOT } kind_t;

typedef struct metric {
  const char *name, *help;
  kind_t kind;
  size_t offset; /* in cudapool_stats_t */
} metric_t;

static const metric_t metrics[] = {
#define GAUGE(n, d)                                                                   \
  {#n, d, GAUGE_NOW, offsetof(cudapool_stats_t, n)},                                  \
      {#n "_peak", d " (peak since start or reset)", GAUGE_PEAK, offsetof(cudapool_stats_t, n)},
#define COUNT(n, d) {#n "_total", d, COUNTER, offsetof(cudapool_stats_t, n)},
#define SNAP(n, d) {#n, d, SNAPSHOT, offsetof(cudapool_stats_t, n)},
    CUDAPOOL_GAUGES(GAUGE) CUDAPOOL_COUNTERS(COUNT) CUDAPOOL_SNAPSHOT(SNAP)
#undef GAUGE
#undef COUNT
#undef SNAP
};

static int64_t value_of(const metric_t *m, const cudapool_stats_t *d) {
  const char *base = (const char *)d + m->offset;
  cudapool_gauge_t g;
  uint64_t v;
  switch (m->kind) {
    case GAUGE_NOW: memcpy(&g, base, sizeof g); return g.current;
    case GAUGE_PEAK: memcpy(&g, base, sizeof g); return g.peak;
    default: memcpy(&v, base, sizeof v); return (int64_t)v;
  }
}

/* Cooperation between processes (live_layout.h's per-device words, read
 * by live_read.c into lr_coop_t) and the releasable bytes, per device. */
typedef struct coop_metric {
  const char *name, *help;
  bool counter;
  size_t offset; /* in lr_coop_t; SIZE_MAX: the snapshot's releasable[] */
} coop_metric_t;

static const coop_metric_t coop_metrics[] = {
    {"releasable_bytes", "bytes in segments with no block in use (pending ones included): what a give-back "
                         "round would release", false, SIZE_MAX},
    {"coop_asks_total", "times this process, out of memory on the device, asked the other cudapool processes to "
                        "give back", true, offsetof(lr_coop_t, asks)},
    {"coop_got_bytes_total", "bytes the other processes' answers said came back to this process's asks", true,
     offsetof(lr_coop_t, got)},
    {"coop_asked_total", "give-back requests other cudapool processes made of this process", true,
     offsetof(lr_coop_t, asked)},
    {"coop_rounds_total", "empty-cache rounds this process ran for those requests", true,
     offsetof(lr_coop_t, rounds)},
    {"coop_limited_total", "requests answered with 0 bytes without a round (CUDAPOOL_COOP_INTERVAL)", true,
     offsetof(lr_coop_t, limited)},
    {"coop_given_bytes_total", "bytes this process's rounds gave back", true, offsetof(lr_coop_t, given)},
};

static uint64_t coop_value(const coop_metric_t *m, const lr_snapshot_t *snap, int d) {
  if (m->offset == SIZE_MAX) return snap->releasable[d];
  int dev = snap->devices[d].device;
  if (dev < 0 || dev >= CP_LIVE_DEVICES) return 0;
  uint64_t v;
  memcpy(&v, (const char *)&snap->coop[dev] + m->offset, sizeof v);
  return v;
}

void lv_prometheus(FILE *out, const long *pids, const lr_snapshot_t *const *snaps, size_t n) {
  for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++) {
    const metric_t *m = &metrics[i];
    fprintf(out, "# HELP cudapool_%s %s\n# TYPE cudapool_%s %s\n", m->name, m->help, m->name,
            m->kind == COUNTER ? "counter" : "gauge");
    for (size_t p = 0; p < n; p++)
      for (int d = 0; d < snaps[p]->ndevices; d++)
        fprintf(out, "cudapool_%s{pid=\"%ld\",device=\"%d\"} %" PRId64 "\n", m->name, pids[p],
                snaps[p]->devices[d].device, value_of(m, &snaps[p]->devices[d]));
  }
  for (size_t i = 0; i < sizeof coop_metrics / sizeof coop_metrics[0]; i++) {
    const coop_metric_t *m = &coop_metrics[i];
    fprintf(out, "# HELP cudapool_%s %s\n# TYPE cudapool_%s %s\n", m->name, m->help, m->name,
            m->counter ? "counter" : "gauge");
    for (size_t p = 0; p < n; p++)
      for (int d = 0; d < snaps[p]->ndevices; d++)
        fprintf(out, "cudapool_%s{pid=\"%ld\",device=\"%d\"} %" PRIu64 "\n", m->name, pids[p],
                snaps[p]->devices[d].device, coop_value(m, snaps[p], d));
  }
}
