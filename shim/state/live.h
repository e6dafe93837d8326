/* live.h: the running process's pool counters, shown on request to
 * `cudapool stats PID` and `cudapool top` through a shared memory segment
 * (live_layout.h has the segment and the protocol; docs/DESIGN.md, "Live
 * stats", why this and not a signal).
 *
 * Rules:
 *   - created at the shim's activation (layer.c, the first CUDA call) when
 *     CUDAPOOL_LIVE is on (the default) and the pool is not disabled; never
 *     in a secure-execution process (AT_SECURE: options.h), whose counters
 *     are not the caller's to read;
 *   - the file CP_LIVE_DIR/cudapool.<euid>.<pid> is created new (O_EXCL,
 *     O_NOFOLLOW, mode 0600); a file already there is replaced only when it
 *     is a regular file of this user with a single link (a stale one of a
 *     process that had this pid and died, or of this process's image before
 *     an exec), else there are no live stats;
 *   - a thread of cudapool's ("cudapool-live", every signal blocked) sleeps
 *     until a reader asks and then publishes; the allocation paths never
 *     touch the segment;
 *   - removed at exit and on SIGTERM (cp_outputs_end), and before an exec
 *     (exec_hook.c: the new image is another program); an exec that fails
 *     makes a new one; a process killed otherwise leaves it, and the readers
 *     recognise it as stale;
 *   - nothing here prints; a segment that cannot be made means no live
 *     stats, and CUDAPOOL_VERBOSE says why. */
#ifndef CUDAPOOL_SHIM_LIVE_H
#define CUDAPOOL_SHIM_LIVE_H

#include <stdbool.h>

#include "live_layout.h"

/* At activation: create the segment and start the publisher, as above. */
void cp_live_start(void);
/* Whether this process has a segment (and so wants an orderly end on
 * SIGTERM, which removes it). */
bool cp_live_active(void);
/* At a device's first pool (serve.c): its key (device_key.h) goes into
 * the segment's dev[device], so that peers can ask it for that device. */
void cp_live_note_device(int device);
/* This process's own entry for device in its segment (its cooperation
 * counters and key), NULL without a segment. */
cp_live_device_t *cp_live_own_device(int device);
/* At exit or SIGTERM: remove the file. The mapping stays for the
 * publisher's last answer. */
void cp_live_end(void);
/* After an exec that failed (cp_live_end ran before it): a new file and
 * segment for the same process, which the publisher moves to. */
void cp_live_after_failed_exec(void);

#endif
