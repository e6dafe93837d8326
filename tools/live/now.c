/* now.c: the "now" and "rates" lines (now.h). Rates are differences of the
 * counters over the difference of the two answers' publication times (the
 * process's own clock, not the reader's: a reader that waited does not
 * dilute them). Sizes in the exit report's human form (common/parse.c). */
#include "now.h"

#include <inttypes.h>

#include "parse.h"

static const cudapool_stats_t *device_of(const lr_snapshot_t *s, int device) {
  for (int i = 0; i < s->ndevices; i++)
    if (s->devices[i].device == device) return &s->devices[i];
  return NULL;
}

static double per_second(uint64_t now, uint64_t before, double seconds) {
  return now >= before ? (double)(now - before) / seconds : 0.0;
}

void lv_print_now(FILE *out, const lr_snapshot_t *cur, const lr_snapshot_t *prev) {
  for (int i = 0; i < cur->ndevices; i++) {
    const cudapool_stats_t *d = &cur->devices[i];
    char alloc[32], reserved[32], cached[32], pending[32];
    cp_format_size_human((uint64_t)d->allocated_bytes.current, alloc, sizeof alloc);
    cp_format_size_human((uint64_t)d->reserved_bytes.current, reserved, sizeof reserved);
    cp_format_size_human((uint64_t)d->cached_bytes.current, cached, sizeof cached);
    cp_format_size_human((uint64_t)d->pending_bytes.current, pending, sizeof pending);
    fprintf(out, "cudapool: now   dev %d: allocated %s in %" PRId64 " blocks, reserved %s, cached %s (pending %s)\n",
            d->device, alloc, d->allocated_blocks.current, reserved, cached, pending);
    const cudapool_stats_t *p = prev ? device_of(prev, d->device) : NULL;
    double seconds = prev ? ((double)cur->published_ns - (double)prev->published_ns) / 1e9 : 0.0;
    if (p == NULL || !(seconds > 0)) continue;
    int64_t grew = d->reserved_bytes.current - p->reserved_bytes.current;
    char change[32];
    cp_format_size_human((uint64_t)((double)(grew < 0 ? -grew : grew) / seconds), change, sizeof change);
    fprintf(out,
            "cudapool: rates dev %d over %.1f s: %.0f allocs/s, %.0f frees/s, %.0f driver allocs/s, reserved "
            "%c%s/s\n",
            d->device, seconds, per_second(d->num_alloc, p->num_alloc, seconds),
            per_second(d->num_free, p->num_free, seconds),
            per_second(d->num_device_alloc, p->num_device_alloc, seconds), grew < 0 ? '-' : '+', change);
  }
}
