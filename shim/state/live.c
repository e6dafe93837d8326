/* live.c: the publisher of the live counters (see live.h for the rules and
 * live_layout.h for the protocol).
 *
 * Why a thread that waits for readers rather than copying the counters on
 * every allocation: a copy of every device's cudapool_stats_t into shared
 * memory under the pool lock would cost each cudaMalloc/cudaFree a few
 * hundred bytes of stores, and the snapshot values (largest free block)
 * could not be had cheaply at all; a thread asleep on a futex costs nothing
 * until asked, and then reads the pools exactly as the exit report does.
 *
 * Invariants: only the publisher thread writes the seqlocked part of a
 * segment; `seg` is set before the thread starts and changes only after an
 * exec that failed (cp_live_after_failed_exec: the exec removed the file, so
 * a new one is made and mapped, and the publisher is woken on the old one to
 * move to it); no segment is ever unmapped while the thread may use it (the
 * process's end does that; one old mapping per failed exec is left); the
 * file is removed only by the process whose pid it names. */
#include "state/live.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "state/coop.h"
#include "state/device.h"
#include "state/device_key.h"
#include "live_layout.h"
#include "state/outputs.h"
#include "state/shim.h"
#include "state/snapshot.h"
#include "threads.h"

_Static_assert(CP_LIVE_DEVICES == CP_MAX_DEVICES, "the segment holds every device");
_Static_assert(CP_LIVE_PATH_MAX == CP_OPTION_PATH_MAX, "a snapshot's file name as the options' paths");

static cp_live_segment_t *_Atomic seg;
static char seg_path[96];
/* The device keys noted so far (cp_live_note_device), for a segment made
 * again after a failed exec; key_known[d] is stored after keys[d]. */
static char keys[CP_LIVE_DEVICES][CP_LIVE_KEY_MAX];
static _Atomic bool key_known[CP_LIVE_DEVICES];

static void futex_wait(_Atomic uint32_t *word, uint32_t seen) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* What write() prints, into dst (NUL-terminated): whole when it fits;
 * else text is cut at a line's end with a line saying so, and JSON is
 * replaced by a member saying so (half an object would not parse). */
static void fill_extra(char *dst, size_t cap, void (*write)(FILE *), bool json) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  dst[0] = '\0';
  if (!m) return;
  write(m);
  if (fclose(m) != 0 || !buf) {
    free(buf);
    return;
  }
  static const char cut_line[] = "cudapool: (cut here: the exit report has the rest)\n";
  if (len < cap) {
    memcpy(dst, buf, len + 1);
  } else if (json) {
    snprintf(dst, cap, ",\"extra_cut\":true");
  } else {
    size_t keep = cap - sizeof cut_line;
    while (keep > 0 && buf[keep - 1] != '\n') keep--;
    memcpy(dst, buf, keep);
    memcpy(dst + keep, cut_line, sizeof cut_line);
  }
  free(buf);
}

/* Also called by the thread that makes a segment, before the publisher
 * knows it, without extras (the program's own thread, in its first CUDA
 * call): nothing here is shared between calls but the extras' buffers,
 * which only the publisher uses. */
static void publish(cp_live_segment_t *to, bool extras) {
  static char extra_text[CP_LIVE_EXTRA_MAX], extra_json[CP_LIVE_EXTRA_MAX];
  if (extras) {
    fill_extra(extra_text, sizeof extra_text, cp_report_extra_text, false);
    fill_extra(extra_json, sizeof extra_json, cp_report_extra_json, true);
  }
  cudapool_stats_t devs[CP_LIVE_DEVICES];
  char header[sizeof to->header];
  uint64_t releasable[CP_LIVE_DEVICES];
  int n = cp_device_stats_all(devs, CP_LIVE_DEVICES);
  for (int i = 0; i < n; i++) {
    cp_device_t *dev = devs[i].device >= 0 && devs[i].device < CP_LIVE_DEVICES ? cp_device(devs[i].device) : NULL;
    cp_pool_t *pool = dev ? cp_device_pool_if_any(dev) : NULL;
    releasable[i] = pool ? cp_releasable_bytes(pool) : 0;
  }
  cp_report_header_now(header, sizeof header);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  /* An acquire read-modify-write: no store below moves above the odd
   * count (the seqlock without a fence, which ThreadSanitizer refuses). */
  uint64_t s = atomic_fetch_add_explicit(&to->seq, 1, memory_order_acq_rel);
  memcpy(to->header, header, sizeof header);
  to->ndevices = n;
  memcpy(to->devices, devs, (size_t)n * sizeof *devs);
  memcpy(to->releasable, releasable, (size_t)n * sizeof *releasable);
  to->published_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  if (extras) {
    memcpy(to->extra_text, extra_text, strlen(extra_text) + 1);
    memcpy(to->extra_json, extra_json, strlen(extra_json) + 1);
  }
  atomic_store_explicit(&to->seq, s + 2, memory_order_release);
}

/* Every device's give-back requests (coop.h) that came since the last
 * answer (gave[d]: the last one answered): answered before the counters are
 * published, so that they show what went back. */
static void give_back(cp_live_segment_t *s, uint32_t *gave) {
  for (int d = 0; d < CP_LIVE_DEVICES; d++) {
    cp_live_device_t *dv = &s->dev[d];
    uint32_t give = atomic_load_explicit(&dv->give_request, memory_order_acquire);
    if (give == gave[d]) continue;
    uint64_t released = cp_coop_answer(dv, d, give - gave[d]);
    gave[d] = give;
    atomic_store_explicit(&dv->give_released, released, memory_order_relaxed);
    atomic_store_explicit(&dv->give_answered, give, memory_order_release);
    futex_wake_all(&dv->give_answered);
  }
}

/* A snapshot request: written before the counters are published (and so
 * before `answered`, which the asker waits for). The pattern is the
 * asker's, copied out first: it may write it again meanwhile. */
static void snapshot(cp_live_segment_t *s, uint32_t snap) {
  char pattern[CP_LIVE_PATH_MAX], written[CP_LIVE_PATH_MAX] = "";
  memcpy(pattern, s->snap_pattern, sizeof pattern);
  pattern[sizeof pattern - 1] = '\0';
  int err = cp_snapshot_on_request(pattern, written, sizeof written);
  memcpy(s->snap_written, written, sizeof written);
  s->snap_error = err;
  atomic_store_explicit(&s->snap_answered, snap, memory_order_release);
}

static void *publisher(void *unused) {
  (void)unused;
  cp_live_segment_t *s = NULL;
  uint32_t seen = 0, snapped = 0, gave[CP_LIVE_DEVICES] = {0};
  for (;;) {
    cp_live_segment_t *now = atomic_load_explicit(&seg, memory_order_acquire);
    if (now != s) {
      s = now; /* a new segment (a failed exec): its requests count from 0 */
      seen = snapped = 0;
      memset(gave, 0, sizeof gave);
    }
    uint32_t asked = atomic_load_explicit(&s->request, memory_order_acquire);
    if (asked == seen) {
      futex_wait(&s->request, seen);
      continue;
    }
    /* An asker moves give_request before request: seen here. */
    give_back(s, gave);
    uint32_t snap = atomic_load_explicit(&s->snap_request, memory_order_acquire);
    if (snap != snapped) snapshot(s, snap);
    snapped = snap;
    publish(s, true);
    seen = asked;
    atomic_store_explicit(&s->answered, asked, memory_order_release);
    futex_wake_all(&s->answered);
  }
  return NULL;
}

/* A new file, or -errno. An existing one is removed first only when it is
 * a stale one of ours: a regular file of this user with one link. */
static int create_file(void) {
  const int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC;
  int fd = open(seg_path, flags, 0600);
  if (fd < 0 && errno == EEXIST) {
    struct stat st;
    if (lstat(seg_path, &st) != 0) return -errno;
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) return -EPERM;
    if (unlink(seg_path) != 0) return -errno;
    fd = open(seg_path, flags, 0600);
  }
  return fd < 0 ? -errno : fd;
}

/* The command line, its arguments joined by blanks ("" when unreadable). */
static void read_command(char *out, size_t cap) {
  out[0] = '\0';
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, cap - 1);
  close(fd);
  if (n <= 0) n = 0;
  while (n > 0 && out[n - 1] == '\0') n--;
  for (ssize_t i = 0; i < n; i++)
    if (out[i] == '\0') out[i] = ' ';
  out[n] = '\0';
}

static void set_key(cp_live_segment_t *s, int device) {
  cp_live_device_t *dv = &s->dev[device];
  if (atomic_load_explicit(&dv->key_set, memory_order_acquire)) return;
  memcpy(dv->key, keys[device], sizeof dv->key);
  atomic_store_explicit(&dv->key_set, 1, memory_order_release);
}

/* A new segment, published once, at *out; 0 or an errno. */
static int make_segment(cp_live_segment_t **out) {
  snprintf(seg_path, sizeof seg_path, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.%ld", (unsigned long)geteuid(),
           (long)getpid());
  int fd = create_file();
  if (fd < 0) return -fd;
  void *m = MAP_FAILED;
  int err = ftruncate(fd, sizeof(cp_live_segment_t)) == 0 ? 0 : errno;
  if (err == 0) m = mmap(NULL, sizeof(cp_live_segment_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (err == 0 && m == MAP_FAILED) err = errno;
  close(fd);
  if (err != 0) {
    unlink(seg_path);
    return err;
  }
  cp_live_segment_t *s = m;
  memcpy(s->magic, CP_LIVE_MAGIC, sizeof CP_LIVE_MAGIC);
  s->stats_size = sizeof(cudapool_stats_t);
  s->pid = (int64_t)getpid();
  s->start_time = cp_live_start_time((long)getpid());
  snprintf(s->group, sizeof s->group, "%s", cp_opts.shared_name);
  read_command(s->command, sizeof s->command);
  for (int d = 0; d < CP_LIVE_DEVICES; d++)
    if (atomic_load_explicit(&key_known[d], memory_order_acquire)) set_key(s, d);
  publish(s, false);
  /* The layout last, released: a reader that sees it sees the rest. */
  atomic_store_explicit(&s->layout, CP_LIVE_LAYOUT, memory_order_release);
  *out = s;
  return 0;
}

static void say(const char *why, int err) {
  if (!cp_opts.verbose) return;
  fprintf(stderr, "cudapool: no live stats (cudapool stats PID): %s%s%s\n", why, err ? ": " : "",
          err ? strerror(err) : "");
  fflush(stderr);
}

void cp_live_start(void) {
  if (!cp_opts.live || cp_opts.disable) return;
  if (cp_secure_exec()) {
    say("privileged program (secure execution)", 0);
    return;
  }
  cp_live_segment_t *s = NULL;
  int err = make_segment(&s);
  if (err != 0) {
    say(seg_path, err);
    return;
  }
  atomic_store_explicit(&seg, s, memory_order_release);
  int rc = cp_thread_start(publisher, NULL, "cudapool-live", NULL);
  if (rc != 0) {
    /* Nobody would answer: no segment rather than one that hangs readers. */
    unlink(seg_path);
    atomic_store(&seg, NULL);
    munmap(s, sizeof *s);
    say("no thread", rc);
  }
}

bool cp_live_active(void) { return atomic_load(&seg) != NULL; }

void cp_live_note_device(int device) {
  if (device < 0 || device >= CP_LIVE_DEVICES || atomic_load_explicit(&key_known[device], memory_order_acquire))
    return;
  /* Only the thread that made the device's pool gets here (once per
   * device), so keys[device] has one writer. */
  cp_device_key(device, keys[device], sizeof keys[device]);
  atomic_store_explicit(&key_known[device], true, memory_order_release);
  cp_live_segment_t *s = atomic_load_explicit(&seg, memory_order_acquire);
  if (s) set_key(s, device);
}

cp_live_device_t *cp_live_own_device(int device) {
  cp_live_segment_t *s = atomic_load_explicit(&seg, memory_order_acquire);
  return s && device >= 0 && device < CP_LIVE_DEVICES ? &s->dev[device] : NULL;
}

void cp_live_end(void) {
  cp_live_segment_t *s = atomic_load(&seg);
  if (s != NULL && s->pid == (int64_t)getpid()) unlink(seg_path);
}

void cp_live_after_failed_exec(void) {
  cp_live_segment_t *old = atomic_load(&seg), *s = NULL;
  if (old == NULL || old->pid != (int64_t)getpid()) return;
  int err = make_segment(&s);
  if (err != 0) {
    say(seg_path, err);
    return;
  }
  atomic_store_explicit(&seg, s, memory_order_release);
  /* A request the publisher cannot miss, even if it is about to sleep on
   * the old segment: it answers it there and then moves to the new one. */
  atomic_fetch_add_explicit(&old->request, 1, memory_order_release);
  futex_wake_all(&old->request);
}
