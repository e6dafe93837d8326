/* now.h: the "now" lines of cudapool-stats: what a live view is for, the
 * current values (the exit report's table shows peaks), and, between two
 * answers of the same process, the rates. See now.c. */
#ifndef CUDAPOOL_LIVE_NOW_H
#define CUDAPOOL_LIVE_NOW_H

#include <stdio.h>

#include "live_read.h"

/* One line per device of cur: "cudapool: now   dev 0: allocated 8.00 MiB in
 * 2 blocks, reserved 22.00 MiB, cached 14.00 MiB (pending 0 B)"; with prev
 * (an earlier answer of the same process, NULL: none) a second line per
 * device: "cudapool: rates dev 0 over 1.0 s: 4080 allocs/s, 4080 frees/s,
 * 0 driver allocs/s, reserved +0 B/s". A device prev lacks, or an interval
 * that is not positive (the same answer twice), gets no rates line. */
void lv_print_now(FILE *out, const lr_snapshot_t *cur, const lr_snapshot_t *prev);

#endif
