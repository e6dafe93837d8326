/* live_layout.h: the shared memory segment through which a running process
 * shows its pool counters to `cudapool stats PID` and `cudapool top`
 * (tools/live/), and the protocol both sides follow. Shared by the shim
 * (shim/state/live.c, the publisher) and the reader; nothing here is CUDA.
 *
 * The segment is the file CP_LIVE_DIR/cudapool.<euid>.<pid>, mode 0600,
 * created by the process at its first CUDA call and removed at its exit.
 * Protocol (both words are futexes on the shared mapping):
 *   - a reader adds 1 to `request` and wakes it;
 *   - the process's publisher thread, asleep on `request`, reads every
 *     pool's counters (cp_get_stats, as the exit report does), writes them
 *     under the seqlock `seq` (odd while it writes), then stores the
 *     request it answered in `answered` and wakes it;
 *   - the reader waits on `answered` until it reaches its request, then
 *     copies `header`, `ndevices` and `devices` until it reads the same
 *     even `seq` before and after the copy.
 * So the program's allocation paths never touch the segment: publishing
 * costs nothing until someone asks. A stopped process (SIGSTOP, a debugger)
 * does not answer; the reader then shows the last answer and says so.
 * `layout` changes whenever this struct does; a reader refuses any other.
 *
 * Layout 2 added the give-back words after `devices` (shim/state/coop.h):
 * a process out of device memory (the asker) adds 1 to `give_request`,
 * then to `request`, and wakes `request`; the publisher thread, woken,
 * empties its pools' caches, stores the bytes that went back in
 * `give_released` and then the give request it answered in
 * `give_answered`, and wakes it. `group` is the process's
 * CUDAPOOL_SHARED_NAME ("" = none), NUL-terminated; askers only ask
 * segments of their own group. A layout-1 reader refuses a layout-2
 * segment by its `layout` word, and a layout-2 reader a layout-1 one
 * (which is also too short), each naming it a segment it cannot read.
 *
 * Layout 3 added, after the give-back words:
 *   - under the seqlock, what the report adds after the counters
 *     (regions, call sites: the publisher's cp_report_extra_text/json),
 *     NUL-terminated; text cut at its last whole line, with a line saying
 *     so, and JSON left out (`extra_json` = ","extra_cut":true") when
 *     they do not fit;
 *   - a snapshot request (`cudapool snapshot PID -o FILE`): the asker
 *     writes the file's absolute name (%p allowed) in `snap_pattern`, then
 *     adds 1 to `snap_request`, then asks as a reader does (request += 1,
 *     wake); the publisher, woken, writes the snapshot by the output-file
 *     rules, stores the file written in `snap_written` and 0 or an errno in
 *     `snap_error`, then the snapshot request it answered in
 *     `snap_answered`, all before `answered`. One asker at a time: two at
 *     once may both get the later one's file, which `snap_written` shows.
 *
 * Layout 4 (issue 26, items 4 and 5) moved the give-back words into
 * `dev[]`, so that a request names the device it is for,
 * and keeps the cooperation counters that `cudapool top` shows:
 *   - `dev[D]` is this process's device number D: `key` (the device key of
 *     common/budget_layout.h, the same whatever CUDA_VISIBLE_DEVICES makes
 *     its number) is written once, when the process makes its pool there,
 *     before `key_set` is stored 1 (release);
 *   - a process out of memory on a device (the asker) finds the peer's
 *     `dev[P]` with its own key (a peer without it has no pool there and is
 *     not asked), raises its `give_want` to the bytes it lacks (a word that
 *     was reserved and 0 before: a layout-4 peer that does not know it
 *     ignores it, one that does reads 0 from an older asker), adds 1 to its
 *     `give_request`, then 1 to `request`, and wakes `request`; the
 *     publisher thread, woken, answers every device whose `give_request`
 *     moved: it takes `give_want` (swapped to 0), empties that device's
 *     pool only (one round per device per CUDAPOOL_COOP_INTERVAL ms, and
 *     one more within it when its releasable bytes grew by at least
 *     `give_want` since the last round; any other request within it is
 *     answered at once with 0 bytes, "nothing more"), stores
 *     the bytes that went back in `give_released`, then the request it
 *     answered in `give_answered`, and wakes it;
 *   - the counters (`asks`, `got`, `asked`, `rounds`, `limited`, `given`)
 *     only grow, each written by one side (asks and got by the process's
 *     askers, the rest by its publisher), read without the seqlock;
 *   - `releasable[i]` (under the seqlock, as `devices[i]`) is the bytes in
 *     segments of devices[i]'s pool with no block in use at the answer
 *     (cp_releasable_bytes: what a give-back round would release);
 *   - `command` is the process's command line (arguments joined by blanks,
 *     cut at CP_LIVE_COMMAND_MAX - 1 bytes), written before `layout`.
 * `group` is the process's CUDAPOOL_SHARED_NAME ("" = none),
 * NUL-terminated; askers only ask segments of their own group. Every older
 * reader refuses a layout-4 segment by its `layout` word (at the same
 * offset in every layout), and a layout-4 reader an older one, each naming
 * it a segment of another version: nothing is misread. */
#ifndef CUDAPOOL_SHIM_LIVE_LAYOUT_H
#define CUDAPOOL_SHIM_LIVE_LAYOUT_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cudapool.h"

#define CP_LIVE_DIR "/dev/shm"
#define CP_LIVE_PREFIX "cudapool."
#define CP_LIVE_MAGIC "cplive"
#define CP_LIVE_LAYOUT 4u
#define CP_LIVE_GROUP_MAX 64 /* CP_OPTION_NAME_MAX of common/options.h */
#define CP_LIVE_DEVICES 64 /* CP_MAX_DEVICES of shim/state/device.h */
#define CP_LIVE_EXTRA_MAX 65536
#define CP_LIVE_PATH_MAX 4096 /* CP_OPTION_PATH_MAX of common/options.h */
#define CP_LIVE_KEY_MAX 48 /* CP_BUDGET_KEY_MAX of common/budget_layout.h */
#define CP_LIVE_COMMAND_MAX 128

/* Layout 4: one device of the process, by its device number (above). */
typedef struct cp_live_device {
  char key[CP_LIVE_KEY_MAX];       /* the device key, NUL-terminated; valid once key_set */
  _Atomic uint32_t key_set;        /* 1: the process has a pool on this device */
  _Atomic uint32_t give_request;   /* askers: += 1, then request += 1 and wake request */
  _Atomic uint32_t give_answered;  /* publisher: the give request it last answered, then wake */
  uint32_t reserved0;
  _Atomic uint64_t give_released;  /* bytes its last answer released */
  _Atomic uint64_t asks;           /* times this process asked its peers, out of memory here */
  _Atomic uint64_t got;            /* bytes their answers said came back */
  _Atomic uint64_t asked;          /* give requests peers made of this process */
  _Atomic uint64_t rounds;         /* empty-cache rounds it ran for them */
  _Atomic uint64_t limited;        /* of the requests, those answered 0 without a round */
  _Atomic uint64_t given;          /* bytes its rounds gave back */
  _Atomic uint64_t give_want;      /* askers: the most bytes one of them lacked, raised before give_request */
  uint64_t reserved1[3];
} cp_live_device_t;

typedef struct cp_live_segment {
  char magic[8];             /* CP_LIVE_MAGIC */
  uint32_t layout;           /* CP_LIVE_LAYOUT */
  uint32_t stats_size;       /* sizeof(cudapool_stats_t) */
  int64_t pid;               /* the process it describes */
  uint64_t start_time;       /* field 22 of /proc/PID/stat: tells a reused pid apart */
  _Atomic uint32_t request;  /* readers: += 1, then wake */
  _Atomic uint32_t answered; /* publisher: the request it last answered, then wake */
  _Atomic uint64_t seq;      /* seqlock over what follows: odd while written */
  uint64_t published_ns;     /* CLOCK_REALTIME of the last answer */
  int32_t ndevices;          /* devices[0, ndevices) are valid */
  int32_t reserved0;
  char header[160]; /* the exit report's header line: "process N, version V, mode M, limit L" */
  cudapool_stats_t devices[CP_LIVE_DEVICES];
  uint64_t releasable[CP_LIVE_DEVICES]; /* of devices[i], under seq */
  char group[CP_LIVE_GROUP_MAX];
  uint32_t unused_layout2[4]; /* layout 2's give-back words: now in dev[] */
  /* Layout 3: the report's extras (under seq) and the snapshot request (above). */
  char extra_text[CP_LIVE_EXTRA_MAX];
  char extra_json[CP_LIVE_EXTRA_MAX];
  _Atomic uint32_t snap_request;  /* askers: the pattern first, then += 1, then request += 1 and wake */
  _Atomic uint32_t snap_answered; /* publisher: the snapshot request it last answered */
  int32_t snap_error;             /* 0, or the errno of the last snapshot request */
  int32_t reserved1;
  char snap_pattern[CP_LIVE_PATH_MAX]; /* asker: the absolute file name, %p allowed */
  char snap_written[CP_LIVE_PATH_MAX]; /* publisher: the file written (%p replaced) */
  /* Layout 4: the command and the devices (above). */
  char command[CP_LIVE_COMMAND_MAX];
  cp_live_device_t dev[CP_LIVE_DEVICES];
} cp_live_segment_t;

/* Field 22 of /proc/PID/stat, the process's start time in clock ticks
 * since boot (what tells a reused pid apart); 0 when it cannot be read. The
 * command name (field 2) may hold blanks and parentheses: fields are
 * counted from the last ')'. */
static inline uint64_t cp_live_start_time(long pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char *q = strrchr(buf, ')');
  unsigned long long t = 0;
  /* After ')': the state (field 3), then 18 numbers up to the start time. */
  if (!q || sscanf(q + 1, " %*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
                   &t) != 1)
    return 0;
  return t;
}

#endif
