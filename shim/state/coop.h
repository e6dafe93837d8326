/* coop.h: cooperation between cudapool processes that share a GPU (issue
 * 26, item 2; docs/DESIGN.md, "Cooperation between processes"): a process
 * out of device memory asks its peers to give their idle caches back.
 *
 * Rules:
 *   - on only with CUDAPOOL_COOP_WAIT > 0 and this process's live segment
 *     (CUDAPOOL_LIVE): the request travels through the peers' segments
 *     (common/live_layout.h, layout 4);
 *   - peers are this user's live segments in CP_LIVE_DIR of the same
 *     CUDAPOOL_SHARED_NAME ("" matches ""), other than this process's;
 *     a file is used only when it is a regular file of this user, at least
 *     a layout-4 segment long (checked on the descriptor before mapping,
 *     and only that much is mapped), with the magic, layout, stats size,
 *     the pid its name says, alive, with the start time it says: a
 *     truncated, forged or foreign file is skipped, never waited on;
 *   - the asker waits at most CUDAPOOL_COOP_WAIT ms in all, on its own
 *     (already failed) allocation's thread: a stopped or hung peer costs it
 *     that wait and nothing more;
 *   - the request names the device (its key, device_key.h): a peer is asked
 *     only when it has a pool on that GPU, and gives back from it alone;
 *   - a peer answers on its live publisher thread (live.c), which already
 *     sleeps on its segment's shared futex: it empties that pool's cache
 *     (cp_empty_cache: blocks in use stay, pending ones become ready after
 *     a barrier or their fences, as for cudapool_empty_cache), releasing
 *     only while no stream capture is in progress;
 *   - a peer runs at most one round per device per CUDAPOOL_COOP_INTERVAL
 *     ms, and one more within it when its releasable bytes grew, since
 *     the last round, by at least what an asker lacked (give_want: the
 *     largest size asked since the last answer; 0 from an older cudapool
 *     or a forged request, which never earns it); other requests within
 *     it are answered at once with 0 bytes and counted as limited, so a
 *     flood of requests costs it at most two rounds per device per
 *     interval;
 *   - nothing here prints; serve.c words the outcome. */
#ifndef CUDAPOOL_SHIM_COOP_H
#define CUDAPOOL_SHIM_COOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "live_layout.h"

typedef struct cp_coop_result {
  unsigned asked;    /* peers whose segment got the request */
  unsigned answered; /* of those, peers that answered within the wait */
  uint64_t released; /* bytes their answers say went back to the device */
} cp_coop_result_t;

/* Whether an out-of-memory asks peers (CUDAPOOL_COOP_WAIT > 0). */
bool cp_coop_wanted(void);
/* Whether it can: wanted, and this process has a live segment. */
bool cp_coop_on(void);
/* Out of memory on device, lacking `want` bytes: ask every peer that has a
 * pool on the same GPU (by its key) to give back from it, wait for their
 * answers (at most CUDAPOOL_COOP_WAIT ms in all), and say what came of it
 * in *out. */
void cp_coop_ask(int device, size_t want, cp_coop_result_t *out);
/* The peer's side, on the publisher thread: `requests` give-back requests
 * for this process's device (its entry dv) came since the last answer;
 * empties that device's pool's cache (once for them all) and counts it in
 * dv. The bytes released. */
uint64_t cp_coop_answer(cp_live_device_t *dv, int device, uint32_t requests);

#endif
