/* shared_limit.c: CUDAPOOL_SHARED_LIMIT (see shared_limit.h for the rules
 * and common/budget_layout.h for the file and the claim).
 *
 * Why a file of its own and not the live segments: a limit that holds at
 * every instant needs one place that every claim adds to and then reads
 * whole (common/budget_layout.h says why that is exact); summing the live
 * segments would mean opening, checking and mapping every peer's file on
 * every segment allocated, and two processes reading each other's old
 * counts at once would both pass. The file is small (a slot per process)
 * and mapped once per device and process.
 *
 * Invariants: a device's `slot`, once set, is never unset; it points into
 * the mapped file, or at `own` when the process is alone or has given its
 * slot up (exit, exec: what is freed after that counts nowhere else), and
 * moves back into the file after a failed exec; only this process
 * writes its slot's counts, others write a slot only to empty it after its
 * owner died (compare-and-swap of `owner` first) or to mark it dead (a
 * compare-and-swap of `dead`, tagged with the owner's generation, so a mark
 * never outlives the owner it was made for); NVML is asked only from
 * cp_shared_wait_dead, never on the claim's path; every loop over the file
 * runs over CP_BUDGET_SLOTS slots or a bounded number of retries, whatever
 * the file says. */
#include "state/shared_limit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/nvml.h"
#include "budget_layout.h"
#include "live_layout.h"
#include "state/device_key.h"
#include "state/shared_file.h"
#include "state/layer.h"
#include "state/shim.h"
#include "util.h"

_Static_assert(CP_BUDGET_GROUP_MAX == CP_OPTION_NAME_MAX, "a group holds any CUDAPOOL_SHARED_NAME");
_Static_assert(CP_BUDGET_KEY_MAX == CP_DEVICE_KEY_MAX && CP_LIVE_KEY_MAX == CP_DEVICE_KEY_MAX, "one device key size");

#define CAS_TRIES 65536 /* a count changed under us this often: another writer is hostile */

typedef struct shared_dev {
  cp_budget_slot_t *_Atomic slot; /* NULL: no shared limit */
  /* Atomic: the end of the process (cp_shared_before_exec) moves them while other
   * threads may still claim. */
  cp_budget_file_t *_Atomic file;   /* NULL: alone, slot = &own */
  _Atomic uint64_t *_Atomic total; /* &file->total, or &own_total when alone */
  cp_budget_slot_t own;
  _Atomic uint64_t own_total;
  uint64_t limit;
  uint64_t held_at_exec; /* this process's count when it gave its slot up before an exec */
  _Atomic int nvml;      /* NVML_UNTRIED, _USABLE or _UNUSABLE (below) */
  char key[CP_BUDGET_KEY_MAX];
  char path[160];
} shared_dev_t;

static shared_dev_t devs[CP_MAX_DEVICES];
static __thread __attribute__((tls_model("initial-exec"))) bool refused;
static __thread __attribute__((tls_model("initial-exec"))) uint64_t refused_bytes;
static uint64_t my_start; /* this process's start time; set at the first attach */

/* ---- the slots ------------------------------------------------------------------- */

/* *w moved by +bytes (only while it stays within limit) or -bytes
 * (saturating at 0); false when it would pass the limit or kept changing
 * under us. */
static bool move(_Atomic uint64_t *w, uint64_t bytes, bool up, uint64_t limit) {
  uint64_t now = atomic_load(w);
  for (int i = 0; i < CAS_TRIES; i++) {
    if (up && (bytes > limit || now > limit - bytes)) return false;
    uint64_t next = up ? now + bytes : now > bytes ? now - bytes : 0;
    if (atomic_compare_exchange_weak(w, &now, next)) return true;
  }
  return false;
}

/* Whether pid has exited and waits to be reaped (state Z or X after the
 * command's last ')'): its device memory went back with its descriptors. */
static bool zombie(uint32_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%lu/stat", (unsigned long)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char *q = strrchr(buf, ')');
  return q && (q[1] == ' ') && (q[2] == 'Z' || q[2] == 'X');
}

static bool alive(uint32_t pid, uint64_t start) {
  if (kill((pid_t)pid, 0) != 0 && errno != EPERM) return false;
  /* 0: its owner is setting it up (budget_layout.h). */
  return (start == 0 || start == cp_live_start_time((long)pid)) && !zombie(pid);
}

/* Empties a slot whose owner word is still o (the owner died, or a free
 * slot carries a count): one emptier wins the word, the others leave it.
 * Whether it won. */
static bool empty_slot(cp_budget_file_t *f, cp_budget_slot_t *s, uint64_t o) {
  uint64_t gen = o >> 32, busy = (gen << 32) | CP_BUDGET_BUSY;
  if (!atomic_compare_exchange_strong(&s->owner, &o, busy)) return false;
  /* A free slot's count was never in the total (a forged one). */
  uint64_t held = atomic_exchange(&s->reserved, 0);
  if (cp_budget_pid(o) != 0) move(&f->total, held, false, 0);
  atomic_store(&s->start_time, 0);
  atomic_store(&s->limit, 0);
  atomic_store(&s->dead, 0);
  atomic_store(&s->owner, ((gen + 1) << 32) & ~(uint64_t)0xffffffffu);
  return true;
}

/* ---- dead owners' shares --------------------------------------------------------------- */

/* What this process knows of NVML on a device: UNTRIED until the first
 * refused claim asked it (wait_dead); USABLE: it answers and lists this
 * process's own pid while it holds memory there (its pids are ours, not
 * another pid namespace's); UNUSABLE: it cannot tell, for good. */
enum { NVML_UNTRIED, NVML_USABLE, NVML_UNUSABLE };

typedef struct reaped {
  unsigned emptied;   /* slots emptied now */
  unsigned dying;     /* dead owners' slots left charged */
  uint64_t dying_bytes;
} reaped_t;

static uint32_t now_ms32(void) {
  uint32_t ms = (uint32_t)(cp_monotonic_ns() / 1000000u);
  return ms ? ms : 1;
}

/* ms since the slot's owner (owner word o) was first found dead; marked
 * now when no one had (the mark is this generation's: one left from a
 * slot's earlier owner, or a forged one of another, does not count). */
static uint32_t dead_for(cp_budget_slot_t *s, uint64_t o) {
  uint64_t gen = o >> 32, mark = atomic_load(&s->dead), now = now_ms32();
  if (mark >> 32 != gen || (uint32_t)mark == 0) {
    uint64_t mine = (gen << 32) | now;
    if (atomic_compare_exchange_strong(&s->dead, &mark, mine)) return 0;
    if (mark >> 32 != gen || (uint32_t)mark == 0) return 0; /* moved again: seen as now */
  }
  /* Wrap-safe: a mark from the future (forged) reads as long ago. */
  return now - (uint32_t)mark;
}

static bool listed(const uint32_t *pids, int n, uint32_t pid) {
  for (int i = 0; i < n; i++)
    if (pids[i] == pid) return true;
  return false;
}

/* Every slot whose owner is dead and whose memory is gone emptied; the
 * others marked and counted as dying. pids/n: NVML's list for the device
 * (n < 0: none in hand; then only time decides: CUDAPOOL_SHARED_GRACE
 * where NVML is UNUSABLE, else CUDAPOOL_SHARED_GRACE_MAX). Makes no call
 * but /proc reads and kill(pid, 0): fit for the claim's path. */
static reaped_t reap_with(cp_budget_file_t *f, int nvml, const uint32_t *pids, int n) {
  reaped_t r = {0};
  uint64_t grace = cp_opts.shared_grace_ms, cap = cp_opts.shared_grace_max_ms;
  for (unsigned i = 0; i < CP_BUDGET_SLOTS; i++) {
    cp_budget_slot_t *s = &f->slot[i];
    uint64_t o = atomic_load(&s->owner);
    uint32_t pid = cp_budget_pid(o);
    if (pid == CP_BUDGET_BUSY) continue;
    if (pid == 0) {
      if (atomic_load(&s->reserved) != 0) empty_slot(f, s, o);
      continue;
    }
    if (alive(pid, atomic_load(&s->start_time))) continue;
    uint32_t age = dead_for(s, o);
    _Atomic uint64_t *why = NULL;
    if (n >= 0 && !listed(pids, n, pid))
      why = &f->taken_gone;
    else if (nvml == NVML_UNUSABLE && n < 0 && age >= grace)
      why = &f->taken_grace;
    else if (nvml != NVML_UNUSABLE && age >= cap)
      why = &f->taken_cap;
    uint64_t held = atomic_load(&s->reserved);
    if (why && empty_slot(f, s, o)) {
      atomic_fetch_add(why, 1);
      r.emptied++;
    } else if (!why) {
      r.dying++;
      r.dying_bytes = cp_budget_add_sat(r.dying_bytes, held);
    }
  }
  return r;
}

/* Every dead process's slot whose time has come emptied (no NVML call). */
static reaped_t reap(const shared_dev_t *d, cp_budget_file_t *f) {
  return reap_with(f, atomic_load(&d->nvml), NULL, -1);
}

/* A free slot made this process's, or NULL when every one is taken. */
static cp_budget_slot_t *take_slot(const shared_dev_t *d, cp_budget_file_t *f, uint64_t limit) {
  for (int pass = 0; pass < 2; pass++) {
    for (unsigned i = 0; i < CP_BUDGET_SLOTS; i++) {
      cp_budget_slot_t *s = &f->slot[i];
      uint64_t o = atomic_load(&s->owner);
      if (cp_budget_pid(o) != 0) continue;
      uint64_t mine = (((o >> 32) + 1) << 32) | (uint32_t)getpid();
      if (!atomic_compare_exchange_strong(&s->owner, &o, mine)) continue;
      atomic_store(&s->reserved, 0); /* a free slot carries none, unless forged */
      atomic_store(&s->limit, limit);
      atomic_store(&s->start_time, my_start);
      return s;
    }
    reap(d, f);
  }
  return NULL;
}

/* The slots whose owner is alive or being set up (reap first). */
static unsigned live_slots(const cp_budget_file_t *f) {
  unsigned live = 0;
  for (unsigned i = 0; i < CP_BUDGET_SLOTS; i++) {
    uint32_t pid = cp_budget_pid(atomic_load(&f->slot[i].owner));
    live += pid != 0 && pid != CP_BUDGET_BUSY;
  }
  return live;
}

/* ---- the interface ----------------------------------------------------------------- */

/* Alone under the limit: this process's own bytes against it. */
static void go_alone(shared_dev_t *d, uint64_t held) {
  atomic_store(&d->own.limit, d->limit);
  atomic_store(&d->own.reserved, held);
  atomic_store(&d->own_total, held);
  d->total = &d->own_total;
  d->file = NULL;
  atomic_store_explicit(&d->slot, &d->own, memory_order_release);
}

/* In the file with slot s (its count held, already in the total). */
static void go_shared(shared_dev_t *d, cp_budget_file_t *f, cp_budget_slot_t *s) {
  d->file = f;
  d->total = &f->total;
  atomic_store_explicit(&d->slot, s, memory_order_release);
}

/* Alone in the file, with nothing claimed yet: bytes that processes killed
 * between a claim's two stores left in the total go (budget_layout.h). A
 * peer that takes a slot and claims meanwhile moves the total, and the
 * swap fails. */
static void repair(const shared_dev_t *d, cp_budget_file_t *f) {
  reap(d, f);
  uint64_t t = atomic_load(&f->total);
  if (t != 0 && live_slots(f) == 1) atomic_compare_exchange_strong(&f->total, &t, 0);
}

void cp_shared_attach(int device, uint64_t limit) {
  if (device < 0 || device >= CP_MAX_DEVICES || limit == 0) return;
  shared_dev_t *d = &devs[device];
  if (atomic_load(&d->slot)) return; /* a pool made again after a reset: the same budget */
  if (!my_start) my_start = cp_live_start_time((long)getpid());
  d->limit = limit;
  char key[CP_BUDGET_KEY_MAX];
  cp_device_key(device, key, sizeof key);
  memcpy(d->key, key, sizeof key);
  snprintf(d->path, sizeof d->path, CP_BUDGET_DIR "/" CP_BUDGET_PREFIX "%lu.%s%s%s", (unsigned long)geteuid(), key,
           cp_opts.shared_name[0] ? "." : "", cp_opts.shared_name);
  const char *why = "every slot taken by a live process";
  cp_budget_file_t *f = my_start ? cp_shared_map_file(d->path, key, &why) : NULL;
  if (!my_start) why = "cannot read this process's start time";
  cp_budget_slot_t *s = f ? take_slot(d, f, limit) : NULL;
  if (s) {
    repair(d, f);
    go_shared(d, f, s);
    return;
  }
  if (f) munmap(f, sizeof *f);
  fprintf(stderr,
          "cudapool: warning: CUDAPOOL_SHARED_LIMIT: cannot use %s (%s); the limit holds this process alone on "
          "device %d\n",
          d->path, why, device);
  go_alone(d, 0);
}

bool cp_shared_on(int device) {
  return device >= 0 && device < CP_MAX_DEVICES && atomic_load_explicit(&devs[device].slot, memory_order_acquire);
}

/* The total first, then the slot (budget_layout.h: the order a kill
 * between them leaves harmless). */
bool cp_shared_claim(int device, size_t bytes) {
  if (device < 0 || device >= CP_MAX_DEVICES) return true;
  shared_dev_t *d = &devs[device];
  cp_budget_slot_t *s = atomic_load_explicit(&d->slot, memory_order_acquire);
  refused = false;
  if (!s || bytes == 0) return true;
  bool ok = move(d->total, bytes, true, d->limit);
  cp_budget_file_t *f = d->file;
  /* Dead processes' bytes out of the total, those whose time has come
   * (NVML is asked only by cp_shared_wait_dead, outside the pool's lock). */
  if (!ok && f && reap(d, f).emptied) ok = move(d->total, bytes, true, d->limit);
  if (ok) move(&s->reserved, bytes, true, UINT64_MAX);
  refused = !ok;
  refused_bytes = ok ? 0 : bytes;
  return ok;
}

void cp_shared_release(int device, size_t bytes) {
  if (device < 0 || device >= CP_MAX_DEVICES) return;
  shared_dev_t *d = &devs[device];
  cp_budget_slot_t *s = atomic_load_explicit(&d->slot, memory_order_acquire);
  if (!s) return;
  move(&s->reserved, bytes, false, 0);
  move(d->total, bytes, false, 0);
}

bool cp_shared_refused(void) { return refused; }

bool cp_shared_usage(int device, cp_shared_usage_t *out) {
  if (!cp_shared_on(device)) return false;
  shared_dev_t *d = &devs[device];
  cp_budget_slot_t *s = atomic_load_explicit(&d->slot, memory_order_acquire);
  cp_budget_file_t *f = d->file;
  reaped_t r = {0};
  if (f) r = reap(d, f);
  unsigned live = f ? live_slots(f) : 1;
  *out = (cp_shared_usage_t){.limit = d->limit,
                             .total = atomic_load(d->total),
                             .mine = atomic_load(&s->reserved),
                             /* Others may empty slots meanwhile: never below 1. */
                             .processes = f ? (live > r.dying ? live - r.dying : 1) : 1,
                             .dying = r.dying,
                             .dying_bytes = r.dying_bytes,
                             .alone = !f};
  return true;
}

void cp_shared_before_exec(void) {
  for (int i = 0; i < CP_MAX_DEVICES; i++) {
    shared_dev_t *d = &devs[i];
    cp_budget_slot_t *s = atomic_load(&d->slot);
    if (!s || !d->file) continue;
    uint64_t o = atomic_load(&s->owner);
    /* A forked child's end is not its parent's. */
    if (cp_budget_pid(o) != (uint32_t)getpid()) continue;
    cp_budget_file_t *f = d->file;
    /* Frees made after this (destructors) must not lower the counts of
     * whoever takes the slot next: they go to `own`, alone. The file stays
     * mapped for a failed exec. */
    go_alone(d, 0);
    d->file = f;
    d->held_at_exec = atomic_exchange(&s->reserved, 0);
    move(&f->total, d->held_at_exec, false, 0);
    atomic_store(&s->start_time, 0);
    atomic_compare_exchange_strong(&s->owner, &o, ((o >> 32) + 1) << 32);
  }
}

/* The memory is still this process's: counted again, whatever the limit. */
void cp_shared_after_failed_exec(void) {
  for (int i = 0; i < CP_MAX_DEVICES; i++) {
    shared_dev_t *d = &devs[i];
    if (!atomic_load(&d->slot) || !d->file) continue;
    cp_budget_file_t *f = d->file;
    cp_budget_slot_t *again = take_slot(d, f, d->limit);
    if (!again) {
      go_alone(d, d->held_at_exec); /* every slot taken meanwhile */
      continue;
    }
    move(&f->total, d->held_at_exec, true, UINT64_MAX);
    atomic_store(&again->reserved, d->held_at_exec);
    go_shared(d, f, again);
  }
}

/* ---- waiting for a dead process's memory ---------------------------------------------- */

/* NVML's list for d, or -1: also decides whether NVML can be used there
 * (d->nvml). Called with no lock of the allocation path held. */
static int nvml_list(shared_dev_t *d, uint32_t *pids, size_t cap) {
  if (atomic_load(&d->nvml) == NVML_UNUSABLE) return -1;
  int n = cp_nvml_pids(d->key, pids, cap);
  /* Holding memory there, this process must be in the list; when it is
   * not, NVML's pids are not this pid namespace's (a container's). */
  cp_budget_slot_t *s = atomic_load_explicit(&d->slot, memory_order_acquire);
  bool ok = n >= 0 && (atomic_load(&s->reserved) == 0 || listed(pids, n, (uint32_t)getpid()));
  atomic_store(&d->nvml, ok ? NVML_USABLE : NVML_UNUSABLE);
  return ok ? n : -1;
}

bool cp_shared_wait_dead(int device) {
  if (!cp_shared_on(device) || !refused) return false;
  shared_dev_t *d = &devs[device];
  cp_budget_file_t *f = d->file;
  if (!f) return false;
  uint64_t want = refused_bytes;
  uint32_t pids[CP_NVML_MAX_PIDS]; /* 4 KiB: this is the failure path's stack */
  for (;;) {
    int n = nvml_list(d, pids, CP_NVML_MAX_PIDS);
    reaped_t r = reap_with(f, atomic_load(&d->nvml), pids, n);
    if (r.emptied) return true;
    uint64_t total = atomic_load(d->total), rest = total > r.dying_bytes ? total - r.dying_bytes : 0;
    /* Nothing dying, or room that its end would not make: no wait. */
    if (!r.dying || want > d->limit || rest > d->limit - want) return false;
    /* Every dying slot is emptied by CUDAPOOL_SHARED_GRACE(_MAX) after its
     * mark at the latest: the loop ends. */
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 2000000};
    nanosleep(&pause, NULL);
  }
}

uint64_t cp_shared_taken(int device, cp_shared_taken_t why) {
  if (!cp_shared_on(device) || !devs[device].file) return 0;
  cp_budget_file_t *f = devs[device].file;
  return atomic_load(why == CP_SHARED_GONE ? &f->taken_gone : why == CP_SHARED_GRACE ? &f->taken_grace : &f->taken_cap);
}
