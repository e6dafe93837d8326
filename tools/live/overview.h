/* overview.h: every cudapool process of this user on each GPU, one table
 * per device (`cudapool stats --all`, and the top of each `cudapool top`
 * refresh; issue 26, item 4). See overview.c. */
#ifndef CUDAPOOL_LIVE_OVERVIEW_H
#define CUDAPOOL_LIVE_OVERVIEW_H

#include <stddef.h>
#include <stdio.h>

#include "live_read.h"

/* in, with "\\" and every byte outside printable ASCII as \xNN, into out
 * (4 bytes per input byte at most: 4 * strlen(in) + 1 holds any). What a
 * segment says is its writer's: no terminal escape passes through. */
void lv_escape(const char *in, char *out, size_t cap);

/* For each device (by its key, so that processes numbering it differently
 * share one table), in the order first seen: a line "device KEY: N
 * process(es)", the shared budget of each group with live processes on it
 * ("shared budget[ of group G]: limit L, claimed C by N process(es)",
 * from the budget files; group: only that group's, NULL: every group's),
 * then one row per process with a pool there: pid, its device number,
 * allocated, reserved, cached, releasable (segments no block in use holds:
 * what giving back would release), how often
 * it asked its peers and what came back, how often it was asked, the
 * rounds it ran and the requests it answered "nothing more", what it gave
 * back, and its command. snaps[i] is the answer of pids[i]. */
void lv_print_overview(FILE *out, const long *pids, const lr_snapshot_t *snaps, size_t n, const char *group);

#endif
