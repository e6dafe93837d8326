/* live_read.h: reading a running process's live counters from its segment
 * (common/live_layout.h has the layout and the protocol), for cudapool-stats.
 *
 * Owns finding a process's segment, telling a live one from a stale one (the
 * pid is gone, or reused: the start time differs), asking for fresh counters
 * and copying them out under the seqlock. Nothing here prints. */
#ifndef CUDAPOOL_LIVE_READ_H
#define CUDAPOOL_LIVE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "live_layout.h"

typedef struct lr_proc {
  char path[128];
  long pid;
  cp_live_segment_t *seg; /* mapped read-write: a reader writes `request` */
  uint32_t asked;         /* the request this reader made */
  uint32_t layout;        /* LR_OTHER_VERSION: the segment's layout word */
} lr_proc_t;

/* A device's cooperation words (live_layout.h, layout 4), as read. */
typedef struct lr_coop {
  char key[CP_LIVE_KEY_MAX]; /* "" while the process has no pool on it */
  uint64_t asks, got, asked, rounds, limited, given;
} lr_coop_t;

typedef struct lr_snapshot {
  char header[sizeof(((cp_live_segment_t *)0)->header)];
  int ndevices;
  uint64_t published_ns;
  bool answered; /* false: the process did not answer in time (the last answer) */
  cudapool_stats_t devices[CP_LIVE_DEVICES];
  uint64_t releasable[CP_LIVE_DEVICES]; /* of devices[i] */
  char group[CP_LIVE_GROUP_MAX];
  char command[CP_LIVE_COMMAND_MAX];
  lr_coop_t coop[CP_LIVE_DEVICES]; /* by the process's device number */
  /* What the report adds after the counters (regions, call sites), as the
   * publisher wrote them: text lines, and JSON members each starting with ','. */
  char extra_text[CP_LIVE_EXTRA_MAX];
  char extra_json[CP_LIVE_EXTRA_MAX];
} lr_snapshot_t;

enum lr_status {
  LR_OK = 0,
  LR_NONE,      /* no segment for that pid (readable by this user) */
  LR_STALE,     /* a segment whose process is gone */
  LR_BAD,       /* not a segment of this layout */
  LR_NO_ACCESS, /* another user's */
  LR_OTHER_VERSION, /* a segment of another cudapool version (its layout in p->layout) */
};

/* Open the segment of pid: CP_LIVE_DIR/cudapool.<euid>.<pid> (LR_NO_ACCESS
 * when only another user's exists: never read, root included). */
enum lr_status lr_open(long pid, lr_proc_t *p);
/* Open the segment file at path (a name CP_LIVE_PREFIX<uid>.<pid>). */
enum lr_status lr_open_path(const char *path, lr_proc_t *p);
void lr_close(lr_proc_t *p);
/* Ask for fresh counters (returns at once). */
void lr_ask(lr_proc_t *p);
/* Wait until the process has answered lr_ask, at most until deadline_ns
 * (CLOCK_MONOTONIC). true: answered. */
bool lr_wait(lr_proc_t *p, uint64_t deadline_ns);
/* Copy the last answer out. */
void lr_copy(const lr_proc_t *p, lr_snapshot_t *out);
/* Ask the process to write a snapshot to `file` (an absolute name), then
 * for fresh counters (lr_ask); the request's number, for lr_snapshot_result. */
uint32_t lr_ask_snapshot(lr_proc_t *p, const char *file);
/* After lr_wait answered: 0 and the file written in path, or the errno the
 * process met; -1 when another asker's request was answered instead. */
int lr_snapshot_result(const lr_proc_t *p, uint32_t asked, char *path, size_t cap);
/* Whether the process the segment names still runs (same start time). */
bool lr_alive(const lr_proc_t *p);
uint64_t lr_monotonic_ns(void);

#endif
