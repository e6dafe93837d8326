/* budget_read.c: reading the shared budget files (see budget_read.h).
 *
 * A slot counts as live when its owner's pid runs with the start time the
 * slot says (a reused pid is someone else), as the shim itself judges
 * (shim/state/shared_limit.c); the total is the file's word, which the
 * shim keeps within the limit at every instant. */
#include "budget_read.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "live_layout.h"

static bool slot_alive(const cp_budget_slot_t *s) {
  uint64_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
  uint32_t pid = cp_budget_pid(owner);
  if (pid == 0 || pid == CP_BUDGET_BUSY || pid > (uint32_t)INT32_MAX) return false;
  if (kill((pid_t)pid, 0) != 0 && errno != EPERM) return false;
  uint64_t start = atomic_load_explicit(&s->start_time, memory_order_relaxed);
  uint64_t now = cp_live_start_time((long)pid);
  return start == 0 || now == 0 || start == now;
}

/* The file at path read into *out, when it is one (budget_read.h). */
static bool read_one(const char *path, const char *key, lb_budget_t *out) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st;
  void *m = MAP_FAILED;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
      st.st_size == (off_t)sizeof(cp_budget_file_t))
    m = mmap(NULL, sizeof(cp_budget_file_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return false;
  const cp_budget_file_t *f = m;
  bool good = memcmp(f->magic, CP_BUDGET_MAGIC, sizeof CP_BUDGET_MAGIC) == 0 && f->layout == CP_BUDGET_LAYOUT &&
              f->slots == CP_BUDGET_SLOTS && memchr(f->key, '\0', sizeof f->key) != NULL &&
              strcmp(f->key, key) == 0 && memchr(f->group, '\0', sizeof f->group) != NULL;
  if (good) {
    memset(out, 0, sizeof *out);
    memcpy(out->group, f->group, sizeof out->group);
    out->total = atomic_load_explicit((_Atomic uint64_t *)&f->total, memory_order_acquire);
    out->taken_gone = atomic_load_explicit((_Atomic uint64_t *)&f->taken_gone, memory_order_relaxed);
    out->taken_grace = atomic_load_explicit((_Atomic uint64_t *)&f->taken_grace, memory_order_relaxed);
    out->taken_cap = atomic_load_explicit((_Atomic uint64_t *)&f->taken_cap, memory_order_relaxed);
    for (unsigned i = 0; i < CP_BUDGET_SLOTS; i++) {
      const cp_budget_slot_t *s = &f->slot[i];
      uint32_t pid = cp_budget_pid(atomic_load_explicit((_Atomic uint64_t *)&s->owner, memory_order_acquire));
      if (!slot_alive(s)) {
        /* A dead owner's slot still charged: its memory not yet gone from
         * the driver (the shim empties it then). */
        uint64_t held = atomic_load_explicit((_Atomic uint64_t *)&s->reserved, memory_order_relaxed);
        if (pid != 0 && pid != CP_BUDGET_BUSY && held) {
          out->dying++;
          out->dying_bytes = cp_budget_add_sat(out->dying_bytes, held);
        }
        continue;
      }
      out->processes++;
      uint64_t limit = atomic_load_explicit((_Atomic uint64_t *)&s->limit, memory_order_relaxed);
      if (limit > out->limit) out->limit = limit;
    }
  }
  munmap(m, sizeof(cp_budget_file_t));
  return good && out->processes > 0;
}

size_t lb_read(const char *key, const char *group, lb_budget_t *out, size_t cap) {
  char path[256];
  size_t n = 0;
  unsigned long uid = (unsigned long)geteuid();
  if (group) {
    if (group[0])
      snprintf(path, sizeof path, CP_BUDGET_DIR "/" CP_BUDGET_PREFIX "%lu.%s.%s", uid, key, group);
    else
      snprintf(path, sizeof path, CP_BUDGET_DIR "/" CP_BUDGET_PREFIX "%lu.%s", uid, key);
    return cap > 0 && read_one(path, key, &out[0]) ? 1 : 0;
  }
  snprintf(path, sizeof path, CP_BUDGET_DIR "/" CP_BUDGET_PREFIX "%lu.%s", uid, key);
  if (cap > 0 && read_one(path, key, &out[n])) n++;
  snprintf(path, sizeof path, CP_BUDGET_DIR "/" CP_BUDGET_PREFIX "%lu.%s.*", uid, key);
  glob_t g;
  if (glob(path, 0, NULL, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc && n < cap; i++) n += read_one(g.gl_pathv[i], key, &out[n]);
    globfree(&g);
  }
  return n;
}
