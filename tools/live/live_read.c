/* live_read.c: the reader's side of the live stats protocol (see
 * live_read.h and common/live_layout.h).
 *
 * A segment is opened without following a symbolic link and checked on the
 * descriptor (a regular file of this user, at least the layout's size)
 * before it is mapped; its pid must be the one its name says. Another
 * user's file is never mapped, root's reader included: its owner could
 * truncate it under the mapping (SIGBUS) or hold its seqlock odd. A copy
 * gives up after a bounded number of tries for the same reason. */
#include "live_read.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

uint64_t lr_monotonic_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

enum lr_status lr_open_path(const char *path, lr_proc_t *p) {
  memset(p, 0, sizeof *p);
  if (strlen(path) >= sizeof p->path) return LR_BAD;
  strcpy(p->path, path);
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  if (!dot || sscanf(dot + 1, "%ld", &p->pid) != 1) return LR_BAD;
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return errno == ENOENT ? LR_NONE : errno == EACCES || errno == EPERM ? LR_NO_ACCESS : LR_BAD;
  struct stat st;
  void *m = MAP_FAILED;
  bool ours = fstat(fd, &st) == 0 && st.st_uid == geteuid();
  if (ours && S_ISREG(st.st_mode) && (size_t)st.st_size >= sizeof(cp_live_segment_t))
    m = mmap(NULL, sizeof(cp_live_segment_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (!ours) return LR_NO_ACCESS;
  if (m == MAP_FAILED) return LR_BAD;
  p->seg = m;
  uint32_t layout = atomic_load_explicit(&p->seg->layout, memory_order_acquire);
  /* Every layout has magic and layout at the same offsets: an older or
   * newer segment is named as such, never read as this one. */
  if (layout != CP_LIVE_LAYOUT && layout != 0 && memcmp(p->seg->magic, CP_LIVE_MAGIC, sizeof CP_LIVE_MAGIC) == 0) {
    p->layout = layout;
    lr_close(p);
    return LR_OTHER_VERSION;
  }
  if (layout != CP_LIVE_LAYOUT || memcmp(p->seg->magic, CP_LIVE_MAGIC, sizeof CP_LIVE_MAGIC) != 0 ||
      p->seg->stats_size != sizeof(cudapool_stats_t) || p->seg->pid != p->pid) {
    lr_close(p);
    return LR_BAD;
  }
  return lr_alive(p) ? LR_OK : LR_STALE;
}

enum lr_status lr_open(long pid, lr_proc_t *p) {
  char path[128];
  snprintf(path, sizeof path, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.%ld", (unsigned long)geteuid(), pid);
  enum lr_status st = lr_open_path(path, p);
  if (st != LR_NONE) return st;
  /* Another user's process: say so rather than "none". */
  snprintf(path, sizeof path, CP_LIVE_DIR "/" CP_LIVE_PREFIX "*.%ld", pid);
  glob_t g;
  if (glob(path, 0, NULL, &g) != 0) return LR_NONE;
  st = g.gl_pathc > 0 ? LR_NO_ACCESS : LR_NONE;
  globfree(&g);
  return st;
}

void lr_close(lr_proc_t *p) {
  if (p->seg) munmap(p->seg, sizeof *p->seg);
  p->seg = NULL;
}

bool lr_alive(const lr_proc_t *p) {
  if (kill((pid_t)p->pid, 0) != 0 && errno != EPERM) return false;
  uint64_t t = cp_live_start_time(p->pid);
  return t == 0 || p->seg->start_time == 0 || t == p->seg->start_time;
}

void lr_ask(lr_proc_t *p) {
  p->asked = atomic_fetch_add_explicit(&p->seg->request, 1, memory_order_acq_rel) + 1;
  syscall(SYS_futex, (uint32_t *)&p->seg->request, FUTEX_WAKE, 1, NULL, NULL, 0);
}

bool lr_wait(lr_proc_t *p, uint64_t deadline_ns) {
  for (;;) {
    uint32_t a = atomic_load_explicit(&p->seg->answered, memory_order_acquire);
    if ((int32_t)(a - p->asked) >= 0) return true;
    uint64_t now = lr_monotonic_ns();
    if (now >= deadline_ns) return false;
    uint64_t left = deadline_ns - now;
    struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u), .tv_nsec = (long)(left % 1000000000u)};
    syscall(SYS_futex, (uint32_t *)&p->seg->answered, FUTEX_WAIT, a, &ts, NULL, 0);
  }
}

void lr_copy(const lr_proc_t *p, lr_snapshot_t *out) {
  const cp_live_segment_t *s = p->seg;
  for (long tries = 0; tries < 1000000; tries++) {
    uint64_t before = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (before & 1) continue;
    memcpy(out->header, s->header, sizeof out->header);
    int n = s->ndevices;
    out->ndevices = n < 0 ? 0 : n > CP_LIVE_DEVICES ? CP_LIVE_DEVICES : n;
    out->published_ns = s->published_ns;
    memcpy(out->devices, s->devices, (size_t)out->ndevices * sizeof *out->devices);
    memcpy(out->releasable, s->releasable, (size_t)out->ndevices * sizeof *out->releasable);
    memcpy(out->extra_text, s->extra_text, sizeof out->extra_text);
    memcpy(out->extra_json, s->extra_json, sizeof out->extra_json);
    /* A release read-modify-write (adding 0): no load above moves below it. */
    if (atomic_fetch_add_explicit((_Atomic uint64_t *)&s->seq, 0, memory_order_acq_rel) == before) break;
  }
  out->header[sizeof out->header - 1] = '\0';
  /* Written before `layout` and never again: no seqlock needed. */
  memcpy(out->group, s->group, sizeof out->group);
  out->group[sizeof out->group - 1] = '\0';
  memcpy(out->command, s->command, sizeof out->command);
  out->command[sizeof out->command - 1] = '\0';
  for (int d = 0; d < CP_LIVE_DEVICES; d++) {
    cp_live_device_t *dv = (cp_live_device_t *)&s->dev[d];
    lr_coop_t *c = &out->coop[d];
    memset(c, 0, sizeof *c);
    if (atomic_load_explicit(&dv->key_set, memory_order_acquire) == 1) {
      memcpy(c->key, dv->key, sizeof c->key);
      c->key[sizeof c->key - 1] = '\0';
    }
    c->asks = atomic_load_explicit(&dv->asks, memory_order_relaxed);
    c->got = atomic_load_explicit(&dv->got, memory_order_relaxed);
    c->asked = atomic_load_explicit(&dv->asked, memory_order_relaxed);
    c->rounds = atomic_load_explicit(&dv->rounds, memory_order_relaxed);
    c->limited = atomic_load_explicit(&dv->limited, memory_order_relaxed);
    c->given = atomic_load_explicit(&dv->given, memory_order_relaxed);
  }
  out->extra_text[sizeof out->extra_text - 1] = '\0';
  out->extra_json[sizeof out->extra_json - 1] = '\0';
}

uint32_t lr_ask_snapshot(lr_proc_t *p, const char *file) {
  snprintf(p->seg->snap_pattern, sizeof p->seg->snap_pattern, "%s", file);
  uint32_t asked = atomic_fetch_add_explicit(&p->seg->snap_request, 1, memory_order_acq_rel) + 1;
  lr_ask(p);
  return asked;
}

int lr_snapshot_result(const lr_proc_t *p, uint32_t asked, char *path, size_t cap) {
  if (atomic_load_explicit(&p->seg->snap_answered, memory_order_acquire) != asked) return -1;
  snprintf(path, cap, "%.*s", (int)sizeof p->seg->snap_written - 1, p->seg->snap_written);
  return p->seg->snap_error;
}
