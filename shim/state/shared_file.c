/* shared_file.c: finding, checking and mapping the budget file (see
 * shared_file.h for the rules). Invariants: the file is mapped only after
 * fstat on the descriptor opened with O_NOFOLLOW said it is one budget file
 * long; a name is unlinked only while it still holds the file judged; the
 * retries are bounded (4). */
#include "state/shared_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/shim.h"

static bool header_ok(const cp_budget_file_t *f, const char *key) {
  return memcmp(f->magic, CP_BUDGET_MAGIC, sizeof CP_BUDGET_MAGIC) == 0 && f->layout == CP_BUDGET_LAYOUT &&
         f->slots == CP_BUDGET_SLOTS && memchr(f->key, '\0', sizeof f->key) && strcmp(f->key, key) == 0 &&
         memchr(f->group, '\0', sizeof f->group) && strcmp(f->group, cp_opts.shared_name) == 0;
}

/* A new file at path, whole before anyone can open it: written under a
 * name of this process's, then linked. 0, EEXIST (someone was first) or an
 * errno. */
static int create_file(const char *path, const char *key) {
  char tmp[96];
  snprintf(tmp, sizeof tmp, CP_BUDGET_DIR "/.cudapool-budget-new.%lu.%ld", (unsigned long)geteuid(),
           (long)getpid());
  unlink(tmp); /* ours, left by a process that had this pid */
  int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  cp_budget_file_t head;
  memset(&head, 0, sizeof head);
  memcpy(head.magic, CP_BUDGET_MAGIC, sizeof CP_BUDGET_MAGIC);
  head.layout = CP_BUDGET_LAYOUT;
  head.slots = CP_BUDGET_SLOTS;
  snprintf(head.key, sizeof head.key, "%s", key);
  snprintf(head.group, sizeof head.group, "%s", cp_opts.shared_name);
  size_t n = offsetof(cp_budget_file_t, slot);
  int err = ftruncate(fd, sizeof(cp_budget_file_t)) == 0 && pwrite(fd, &head, n, 0) == (ssize_t)n ? 0 : errno;
  close(fd);
  if (err == 0 && link(tmp, path) != 0) err = errno;
  unlink(tmp);
  return err;
}

/* OPENED: *out mapped; MISSING: no file; REPLACE: a file of this user that
 * is no budget file; AGAIN: the name changed while it was judged; REFUSE:
 * a file this process must leave alone. */
typedef enum { OPENED, MISSING, REPLACE, AGAIN, REFUSE } verdict_t;

/* The file at path, opened and checked (shared_limit.h); *why says what
 * was wrong when it is not OPENED. */
static verdict_t open_file(const char *path, const char *key, cp_budget_file_t **out, const char **why) {
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    *why = errno == ELOOP ? "a symbolic link" : strerror(errno);
    return errno == ENOENT ? MISSING : REFUSE;
  }
  struct stat st, at;
  verdict_t v = REFUSE;
  *why = "not a regular file of this user with one link";
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1) {
    *why = "not a budget file (wrong size)";
    v = REPLACE;
    if (st.st_size == (off_t)sizeof(cp_budget_file_t)) {
      void *m = mmap(NULL, sizeof(cp_budget_file_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (m == MAP_FAILED) {
        *why = strerror(errno);
        v = REFUSE;
      } else if (header_ok(m, key)) {
        *out = m;
        v = OPENED;
      } else {
        const cp_budget_file_t *f = m;
        bool other_version = memcmp(f->magic, CP_BUDGET_MAGIC, sizeof CP_BUDGET_MAGIC) == 0 &&
                             f->layout != CP_BUDGET_LAYOUT;
        *why = other_version ? "made by another version of cudapool" : "not a budget file (wrong header)";
        v = other_version ? REFUSE : REPLACE;
        munmap(m, sizeof(cp_budget_file_t));
      }
    }
  }
  close(fd);
  /* Replaced only while the name still holds the file judged: a file a
   * peer made meanwhile stays. */
  if (v == REPLACE && !(lstat(path, &at) == 0 && at.st_ino == st.st_ino && at.st_dev == st.st_dev)) v = AGAIN;
  return v;
}

/* The device's file mapped, or NULL with *why. */
cp_budget_file_t *cp_shared_map_file(const char *path, const char *key, const char **why) {
  for (int tries = 0; tries < 4; tries++) {
    cp_budget_file_t *f = NULL;
    verdict_t v = open_file(path, key, &f, why);
    if (v == OPENED) return f;
    if (v == REFUSE) return NULL;
    if (v == AGAIN) continue;
    if (v == REPLACE && unlink(path) != 0 && errno != ENOENT) {
      *why = strerror(errno);
      return NULL;
    }
    int err = create_file(path, key);
    if (err != 0 && err != EEXIST) {
      *why = strerror(err);
      return NULL;
    }
  }
  *why = "it keeps changing";
  return NULL;
}

