/* coop.c: cooperation between cudapool processes (see coop.h for the rules
 * and common/live_layout.h for the give-back words).
 *
 * Why the publisher thread answers and not the reclaimer: the publisher
 * already sleeps on a futex in the shared segment, where another process
 * can wake it, and exists whenever the segment does; the reclaimer sleeps
 * on a private futex and runs only with a cache cap or an idle release.
 *
 * Invariants: the asker maps a peer's file only after fstat says it is a
 * regular file of this user at least sizeof(cp_live_segment_t) long, maps
 * exactly that, and unmaps every mapping before it returns; it waits only
 * with a timeout that ends by its deadline; it never writes a peer's
 * segment but the two request words (atomic adds). */
#include "state/coop.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "live_layout.h"
#include "state/capture.h"
#include "state/device.h"
#include "state/live.h"
#include "state/shim.h"
#include "util.h"

_Static_assert(CP_LIVE_GROUP_MAX == CP_OPTION_NAME_MAX, "a group holds any CUDAPOOL_SHARED_NAME");

#define MAX_PEERS 64 /* asked at once; more peers than this are not asked */

typedef struct peer {
  cp_live_segment_t *seg;
  cp_live_device_t *dev; /* the peer's entry for the asker's device */
  uint32_t ticket;       /* the give request this asker made */
} peer_t;

bool cp_coop_wanted(void) { return cp_opts.coop_wait_ms > 0 && !cp_opts.disable; }

bool cp_coop_on(void) { return cp_coop_wanted() && cp_live_active(); }

/* The peer's segment at path, mapped and checked (coop.h), or NULL. */
static cp_live_segment_t *open_peer(const char *path) {
  const char *dot = strrchr(path, '.');
  char *end;
  errno = 0;
  long pid = dot ? strtol(dot + 1, &end, 10) : 0;
  if (!dot || errno || end == dot + 1 || *end != '\0' || pid <= 0 || pid == (long)getpid()) return NULL;
  /* O_NONBLOCK: a FIFO planted under the name must not block the open. */
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return NULL;
  struct stat st;
  void *m = MAP_FAILED;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
      st.st_size >= (off_t)sizeof(cp_live_segment_t))
    m = mmap(NULL, sizeof(cp_live_segment_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return NULL;
  cp_live_segment_t *s = m;
  bool good = atomic_load_explicit(&s->layout, memory_order_acquire) == CP_LIVE_LAYOUT &&
              memcmp(s->magic, CP_LIVE_MAGIC, sizeof CP_LIVE_MAGIC) == 0 &&
              s->stats_size == sizeof(cudapool_stats_t) && s->pid == (int64_t)pid &&
              memchr(s->group, '\0', sizeof s->group) != NULL && strcmp(s->group, cp_opts.shared_name) == 0 &&
              kill((pid_t)pid, 0) == 0 && s->start_time != 0 && s->start_time == cp_live_start_time(pid);
  if (!good) {
    munmap(m, sizeof(cp_live_segment_t));
    return NULL;
  }
  return s;
}

static void wake(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* The peer's entry for the device named key, NULL when it has no pool
 * there (nothing to give). The key is the peer's: read bounded. */
static cp_live_device_t *peer_device(cp_live_segment_t *s, const char *key) {
  for (int d = 0; d < CP_LIVE_DEVICES; d++) {
    cp_live_device_t *dv = &s->dev[d];
    if (atomic_load_explicit(&dv->key_set, memory_order_acquire) == 1 &&
        memchr(dv->key, '\0', sizeof dv->key) != NULL && strcmp(dv->key, key) == 0)
      return dv;
  }
  return NULL;
}

/* Whether p's answer has come; waits for it until deadline at most. */
static bool wait_answer(peer_t *p, uint64_t deadline) {
  for (;;) {
    uint32_t got = atomic_load_explicit(&p->dev->give_answered, memory_order_acquire);
    /* Wrap-safe: an answer to this ticket or a later one. */
    if ((int32_t)(got - p->ticket) >= 0) return true;
    uint64_t now = cp_monotonic_ns();
    if (now >= deadline) return false;
    struct timespec rel = {.tv_sec = (time_t)((deadline - now) / 1000000000u),
                           .tv_nsec = (long)((deadline - now) % 1000000000u)};
    syscall(SYS_futex, (uint32_t *)&p->dev->give_answered, FUTEX_WAIT, got, &rel, NULL, 0);
  }
}

void cp_coop_ask(int device, size_t want, cp_coop_result_t *out) {
  memset(out, 0, sizeof *out);
  cp_live_device_t *own = cp_live_own_device(device);
  if (!cp_coop_on() || !own || atomic_load_explicit(&own->key_set, memory_order_acquire) != 1) return;
  atomic_fetch_add_explicit(&own->asks, 1, memory_order_relaxed);
  uint64_t deadline = cp_monotonic_ns() + (uint64_t)cp_opts.coop_wait_ms * 1000000u;
  char pattern[96];
  snprintf(pattern, sizeof pattern, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.*", (unsigned long)geteuid());
  glob_t g;
  if (glob(pattern, GLOB_NOSORT, NULL, &g) != 0) return;
  peer_t peers[MAX_PEERS];
  unsigned n = 0;
  for (size_t i = 0; i < g.gl_pathc && n < MAX_PEERS; i++) {
    cp_live_segment_t *s = open_peer(g.gl_pathv[i]);
    if (!s) continue;
    cp_live_device_t *dv = peer_device(s, own->key);
    if (!dv) {
      munmap(s, sizeof *s);
      continue;
    }
    /* Raised before the request: the peer reads it with the request. */
    uint64_t had = atomic_load(&dv->give_want);
    while (had < want && !atomic_compare_exchange_weak(&dv->give_want, &had, want)) {
    }
    peers[n] = (peer_t){.seg = s, .dev = dv, .ticket = atomic_fetch_add(&dv->give_request, 1) + 1};
    /* The publisher sleeps on `request`: moving it is what wakes it. */
    atomic_fetch_add(&s->request, 1);
    wake(&s->request);
    n++;
  }
  globfree(&g);
  out->asked = n;
  for (unsigned i = 0; i < n; i++) {
    if (wait_answer(&peers[i], deadline)) {
      out->answered++;
      out->released += atomic_load_explicit(&peers[i].dev->give_released, memory_order_acquire);
    }
    munmap(peers[i].seg, sizeof(cp_live_segment_t));
  }
  atomic_fetch_add_explicit(&own->got, out->released, memory_order_relaxed);
}

/* One round for device: its pool's cache emptied; the bytes released. */
static uint64_t give_back(int device) {
  cp_device_t *dev = cp_device(device);
  cp_pool_t *pool = dev ? cp_device_pool_if_any(dev) : NULL;
  /* A cudaFree during a capture in global mode would break it: then
   * nothing goes back, and the answer says 0. */
  if (!pool || !cp_capture_none_lock()) return 0;
  uint64_t released = cp_empty_cache(pool);
  cp_capture_unlock();
  return released;
}

/* Each device's rounds (the publisher thread's only): when the last
 * interval began, whether its extra round ran, and the releasable bytes a
 * round left (pending blocks during a capture, say). */
static uint64_t last_round_ns[CP_LIVE_DEVICES];
static bool had_round[CP_LIVE_DEVICES], extra_used[CP_LIVE_DEVICES];
static uint64_t left_after[CP_LIVE_DEVICES];

static uint64_t releasable(int device) {
  cp_device_t *dev = cp_device(device);
  cp_pool_t *pool = dev ? cp_device_pool_if_any(dev) : NULL;
  return pool ? cp_releasable_bytes(pool) : 0;
}

/* Whether a round for device may run now (CUDAPOOL_COOP_INTERVAL): the
 * first of an interval; or, once within it, when the cache grew by at
 * least what an asker lacked (want) since the last round: "nothing more"
 * would be false then. The extra round does not start a new interval, so
 * a flood costs at most two per interval. */
static bool round_allowed(int device, uint64_t want) {
  uint64_t now = cp_monotonic_ns();
  uint64_t interval = (uint64_t)cp_opts.coop_interval_ms * 1000000u;
  if (interval && had_round[device] && now - last_round_ns[device] < interval) {
    if (extra_used[device] || want == 0) return false;
    uint64_t r = releasable(device);
    if (r < left_after[device] || r - left_after[device] < want) return false;
    extra_used[device] = true;
    return true;
  }
  had_round[device] = true;
  extra_used[device] = false;
  last_round_ns[device] = now;
  return true;
}

uint64_t cp_coop_answer(cp_live_device_t *dv, int device, uint32_t requests) {
  atomic_fetch_add_explicit(&dv->asked, requests, memory_order_relaxed);
  uint64_t want = atomic_exchange(&dv->give_want, 0);
  if (!cp_coop_wanted()) return 0;
  if (!round_allowed(device, want)) {
    /* "Nothing more": the last round gave back all that was idle then,
     * and the cache has not grown by what was lacked since. */
    atomic_fetch_add_explicit(&dv->limited, requests, memory_order_relaxed);
    return 0;
  }
  uint64_t released = give_back(device);
  left_after[device] = releasable(device);
  atomic_fetch_add_explicit(&dv->rounds, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&dv->given, released, memory_order_relaxed);
  return released;
}
