/* outfile.c: opening and writing cudapool's output files (see outfile.h).
 *
 * Invariants:
 *   - every open() has O_NOFOLLOW | O_NONBLOCK | O_NOCTTY and never O_TRUNC;
 *     a name is first created (O_EXCL), and only when it exists already (and
 *     has no %p) opened without O_CREAT; every decision after that (keep,
 *     truncate, refuse) is taken on fstat() of the descriptor itself, so
 *     nothing can be swapped between a check and the use;
 *   - a file this process did not just create is truncated only after every
 *     check has passed, the lock included;
 *   - a regular file is written only under flock(LOCK_EX), taken without
 *     waiting: one output path given to several processes has one writer;
 *   - `reg.files` lists the regular files (device, inode) of descriptors
 *     handed out and not yet closed; it is changed under `reg.lock` only, and
 *     a fork never finds the lock held (pthread_atfork);
 *   - lock order: a caller's own lock (trace.c's), then `reg.lock`. Fork
 *     handlers take their locks in the reverse order of registration, so
 *     ours are registered first, by a constructor that runs before the
 *     library's others (priority 101), and the fork takes them last.
 * No allocation, no output, no exit: this runs inside the host program, at
 * its start and at its end. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define MAX_OPEN 8 /* more outputs than cudapool has: a full list only stops the EBUSY check */

static struct {
  pthread_mutex_t lock;
  pthread_once_t once;
  struct open_file {
    int fd; /* -1: free slot */
    dev_t dev;
    ino_t ino;
  } files[MAX_OPEN];
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static void reg_lock(void) { pthread_mutex_lock(&reg.lock); }
static void reg_unlock(void) { pthread_mutex_unlock(&reg.lock); }

static void reg_init(void) {
  for (int i = 0; i < MAX_OPEN; i++) reg.files[i].fd = -1;
  pthread_atfork(reg_lock, reg_unlock, reg_unlock);
}

__attribute__((constructor(101))) static void reg_start(void) { pthread_once(&reg.once, reg_init); }

/* Callers hold the lock. */
static bool reg_has(const struct stat *st) {
  for (int i = 0; i < MAX_OPEN; i++)
    if (reg.files[i].fd >= 0 && reg.files[i].dev == st->st_dev && reg.files[i].ino == st->st_ino) return true;
  return false;
}

static void reg_add(int fd, const struct stat *st) {
  for (int i = 0; i < MAX_OPEN; i++)
    if (reg.files[i].fd < 0) {
      reg.files[i].fd = fd;
      reg.files[i].dev = st->st_dev;
      reg.files[i].ino = st->st_ino;
      return;
    }
}

int cp_outfile_expand(const char *pattern, long pid, char *out, size_t cap) {
  char digits[24];
  int nd = snprintf(digits, sizeof digits, "%ld", pid);
  size_t len = 0;
  int has = 0;
  for (const char *s = pattern; *s; s++) {
    if (s[0] == '%' && s[1] == 'p') {
      len += (size_t)nd;
      has = 1;
      s++;
    } else {
      len++;
    }
  }
  if (len >= cap) return -1;
  char *w = out;
  for (const char *s = pattern; *s; s++) {
    if (s[0] == '%' && s[1] == 'p') {
      memcpy(w, digits, (size_t)nd);
      w += nd;
      s++;
    } else {
      *w++ = *s;
    }
  }
  *w = '\0';
  return has;
}

/* "/dev/stdout", "/dev/stderr", "/dev/fd/N": N, else -1. */
static int std_stream_fd(const char *name) {
  if (strcmp(name, "/dev/stdout") == 0) return 1;
  if (strcmp(name, "/dev/stderr") == 0) return 2;
  if (strncmp(name, "/dev/fd/", 8) != 0 || name[8] == '\0') return -1;
  long n = 0;
  for (const char *s = name + 8; *s; s++) {
    if (*s < '0' || *s > '9' || n > INT_MAX / 10) return -1;
    n = n * 10 + (*s - '0');
  }
  return n <= INT_MAX ? (int)n : -1;
}

/* The checks on a freshly opened name; 0 or an errno, fd still open. A file
 * this open created is new, empty and ours whoever the file system says owns
 * it (NFS with root_squash): only a file that was there is judged. */
static int check_named(int fd, bool created, struct stat *st) {
  if (fstat(fd, st) != 0) return errno;
  if (S_ISREG(st->st_mode)) {
    if (!created) {
      if (st->st_uid != geteuid() || st->st_nlink != 1) return EPERM;
      if (reg_has(st)) return EBUSY;
    }
    /* Another process writing this file holds the lock: refused, untouched
     * (never truncated, never interleaved). Held until the descriptor's
     * last copy is closed: at close, at exit, or by an exec. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) return errno == EWOULDBLOCK ? EAGAIN : errno;
    if (!created && st->st_size != 0 && ftruncate(fd, 0) != 0) return errno;
  } else if (!S_ISFIFO(st->st_mode) && !S_ISCHR(st->st_mode)) {
    return EINVAL;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) return errno;
  return 0;
}

int cp_outfile_open(const char *pattern, char *path, size_t cap) {
  char name[PATH_MAX];
  if (pattern == NULL) return -EINVAL;
  int has_pid = cp_outfile_expand(pattern, (long)getpid(), name, sizeof name);
  if (has_pid < 0) return -ENAMETOOLONG;
  if (path != NULL && cap > 0 && strlen(name) < cap) memcpy(path, name, strlen(name) + 1);
  pthread_once(&reg.once, reg_init);

  int std = std_stream_fd(name);
  if (std >= 0) {
    int fd = fcntl(std, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return -errno;
    struct stat st;
    reg_lock();
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) reg_add(fd, &st);
    reg_unlock();
    return fd;
  }

  /* Create; if the name exists (and may: no %p), open what is there without
   * creating, and judge it. A file removed in between is created again. */
  const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  bool created = false;
  int fd = -1;
  reg_lock();
  for (int tries = 0; tries < 3; tries++) {
    fd = open(name, flags | O_CREAT | O_EXCL, 0600);
    if ((created = fd >= 0) || errno != EEXIST || has_pid) break;
    fd = open(name, flags);
    if (fd >= 0 || errno != ENOENT) break;
  }
  int err = fd < 0 ? errno : 0;
  struct stat st;
  if (fd < 0) {
    /* Say why in cudapool's words where the errno alone would mislead. */
    if (err == EEXIST && lstat(name, &st) == 0) {
      if (S_ISLNK(st.st_mode))
        err = ELOOP;
      else if (S_ISREG(st.st_mode) && reg_has(&st))
        err = EBUSY;
    }
    if (err == ENXIO && (lstat(name, &st) != 0 || !S_ISFIFO(st.st_mode))) err = ENODEV;
  } else if ((err = check_named(fd, created, &st)) != 0) {
    close(fd);
  } else if (S_ISREG(st.st_mode)) {
    reg_add(fd, &st);
  }
  reg_unlock();
  return err ? -err : fd;
}

int cp_outfile_write(int fd, const void *buf, size_t n) {
  sigset_t pipe_set, old, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  /* A SIGPIPE already pending is the program's, not ours to take. */
  bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
  const char *s = buf;
  int err = 0;
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    s += w;
    n -= (size_t)w;
  }
  if (err == EPIPE && !was_pending) {
    static const struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return err;
}

int cp_outfile_close(int fd) {
  if (fd < 0) return 0;
  pthread_once(&reg.once, reg_init);
  reg_lock();
  for (int i = 0; i < MAX_OPEN; i++)
    if (reg.files[i].fd == fd) reg.files[i].fd = -1;
  reg_unlock();
  /* Linux releases the descriptor even when close() fails: never retry. */
  if (close(fd) != 0 && errno != EINTR) return errno;
  return 0;
}

const char *cp_outfile_rule(int err) {
  switch (err) {
    case ELOOP: return "a symbolic link at the end of the name is never followed";
    case EEXIST: return "a name with %p must not exist yet";
    case EPERM:
      return "an existing file is replaced only when it is a regular file of this user with a "
             "single link";
    case EBUSY: return "cudapool already writes another output to this file";
    case EAGAIN:
      return "another process writes this file now (put %p in the name for one file per process)";
    case ENXIO: return "a FIFO is written only when a reader has it open";
    case EINVAL: return "only a regular file, a FIFO or a character device is written";
    default: return NULL;
  }
}
