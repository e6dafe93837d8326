/* shared.c: processes under one CUDAPOOL_SHARED_LIMIT (shim/state/
 * shared_limit.c), each with its own fake device (the limit is what they
 * share); run under the shim, with CUDAPOOL_SHARED_NAME naming the group.
 *
 *   shared churn N ITERS [staggered]
 *                          N workers (`shared worker`, children), each
 *                          holding 512 MiB until all do, then allocating
 *                          and freeing 256 MiB blocks ITERS times; each
 *                          reads the group's total from the budget file
 *                          after every allocation served; all end together
 *                          (none churns while another exits), or with
 *                          "staggered" worker I churns ITERS*(I+1)/N times
 *                          and exits at once, while the others churn on
 *                          (the driver frees a dead worker's memory late:
 *                          its share must wait for that). Prints per worker
 *                          "worker: i=I status=S served=A refused=R over=O
 *                          badcode=B" (over: totals seen above the limit;
 *                          badcode: failures other than
 *                          cudaErrorMemoryAllocation), then the budget
 *                          file's dead shares taken back, "taken: gone=
 *                          grace= cap="
 *   shared killed SIZE     a child holds SIZE, is killed (SIGKILL), then
 *                          this process allocates SIZE: "take: ok= code="
 *   shared stopped SIZE [stop]  a child allocates and frees SIZE (its cache
 *                          holds it), is stopped (SIGSTOP) with "stop",
 *                          then this process allocates SIZE: "take:"
 *   shared reset SIZE      this process caches SIZE, then cudaDeviceReset:
 *                          "info:" cached, reset (right after) and again
 *                          (after a 1 MiB allocation)
 *   shared resetpeer SIZE  a child caches SIZE, calls cudaDeviceReset and
 *                          idles; this process allocates SIZE: "take:",
 *                          then "hold: status="
 *   shared refused SIZE    this process caches SIZE, then empties its cache
 *                          while CUDA refuses frees: "budget: when=cached
 *                          total=", "budget: when=refused rc= total="
 *   shared meminfo SIZE    a child holds SIZE; this process's
 *                          cudaMemGetInfo: "info: free= total=", then again
 *                          after it allocated and freed SIZE itself
 *   shared exiting SIZE    a child allocates and frees SIZE and exits; while
 *                          its exit is held where the driver still has its
 *                          memory (FAKECUDA_EXIT_PIPE), then once it is
 *                          gone, this process allocates SIZE: "take:" twice
 *   shared dead SIZE HOW   this process holds 64 MiB; a child allocates and
 *                          frees SIZE and exits (with HOW "release" its
 *                          memory held in the fake driver past its death:
 *                          FAKECUDA_HOLD_AT_EXIT=1); once it is reaped:
 *                          HOW "release": a
 *                          thread gives the child's memory back (the fake's
 *                          fakecuda_release_process) once the fake NVML has
 *                          answered a question, while this process allocates
 *                          SIZE ("take:", then "released: before=1" when the
 *                          release came before the take returned); "take":
 *                          allocates SIZE; "info": cudaMemGetInfo ("info:");
 *                          "stats READER": `READER --all --group GROUP`
 *                          (cudapool-stats), then "take", then READER again;
 *                          then the budget file's counts of dead shares
 *                          taken back: "taken: gone= grace= cap="
 *   shared take SIZE       allocates SIZE: "take: ok= code="
 *   shared path            prints the budget file's path: "path: PATH"
 *   shared hold SIZE R W HOW  (a child) allocates SIZE; HOW "keep" holds
 *                          it, "free" frees it (its cache holds it),
 *                          "reset" frees it and calls cudaDeviceReset; then
 *                          writes 1 byte to fd W, waits until fd R closes
 * The limit and the sizes come from the test (tests/integration/runtime/
 * shared_mt.c), or from scripts/gpu-check.d/shared.sh on a GPU. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2, when nvcc builds it for scripts/gpu-check */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "budget_layout.h"
#include "progs.h"

/* The budget file of device 0, named by its UUID as shim/state/shared_limit.c
 * names it (the fake's UUID: tests/fakes/cudart/device.c; a GPU's its own). */
static void budget_path(char *out, size_t n) {
  const char *group = getenv("CUDAPOOL_SHARED_NAME");
  struct cudaDeviceProp prop;
  char uuid[33] = "unknown";
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    for (int i = 0; i < 16; i++) snprintf(uuid + 2 * i, 3, "%02x", (unsigned char)prop.uuid.bytes[i]);
  snprintf(out, n, CP_BUDGET_DIR "/" CP_BUDGET_PREFIX "%lu.uuid-%s%s%s", (unsigned long)geteuid(), uuid,
           group && *group ? "." : "", group && *group ? group : "");
}

static const cp_budget_file_t *map_budget(void) {
  char path[256];
  budget_path(path, sizeof path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  void *m = mmap(NULL, sizeof(cp_budget_file_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  return m == MAP_FAILED ? NULL : m;
}

static uint64_t total_of(const cp_budget_file_t *f) { return atomic_load(&f->total); }

static size_t size_arg(const char *s) { return (size_t)strtoull(s, NULL, 10) * MiB; }

/* A child running `shared hold ...`: its pid, with *to (its stdin: close to
 * end it) and after it wrote its byte. */
static pid_t start_hold(size_t size, const char *how, int *to) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return -1;
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    char mib[32], r[16], w[16];
    snprintf(mib, sizeof mib, "%zu", size / MiB);
    snprintf(r, sizeof r, "%d", down[0]);
    snprintf(w, sizeof w, "%d", up[1]);
    close(down[1]);
    close(up[0]);
    execl("/proc/self/exe", "shared", "hold", mib, r, w, how, (char *)NULL);
    _exit(127);
  }
  close(down[0]);
  close(up[1]);
  char c;
  if (read(up[0], &c, 1) != 1) return -1;
  close(up[0]);
  *to = down[1];
  return child;
}

static int hold(size_t size, int rfd, int wfd, const char *how) {
  void *p;
  bool reset = strcmp(how, "reset") == 0;
  if (cudaMalloc(&p, size) != cudaSuccess) return 1;
  if ((reset || strcmp(how, "free") == 0) && cudaFree(p) != cudaSuccess) return 1;
  if (reset && cudaDeviceReset() != cudaSuccess) return 1;
  if (write(wfd, "x", 1) != 1) return 1;
  char c;
  while (read(rfd, &c, 1) > 0) {
  }
  return 0;
}

static void take(size_t size) {
  void *p = NULL;
  cudaError_t err = cudaMalloc(&p, size);
  printf("take: ok=%d code=%d\n", err == cudaSuccess, (int)err);
  if (err == cudaSuccess) cudaFree(p);
}

static int end_child(pid_t child, int to) {
  int st;
  close(to);
  if (waitpid(child, &st, 0) != child) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- churn ------------------------------------------------------------------------ */

static int worker(int iters, int rfd, int wfd, bool staggered) {
  void *base, *blocks[8];
  int n = 0, served = 0, refused = 0, over = 0, badcode = 0;
  if (cudaMalloc(&base, 512 * MiB) != cudaSuccess) return 1;
  const cp_budget_file_t *f = map_budget();
  if (!f) return 2;
  uint64_t limit = atomic_load(&f->slot[0].limit);
  for (int i = 1; i < CP_BUDGET_SLOTS && !limit; i++) limit = atomic_load(&f->slot[i].limit);
  char c;
  if (write(wfd, "x", 1) != 1 || read(rfd, &c, 1) != 1) return 3; /* every worker holds its 512 MiB */
  srand((unsigned)getpid());
  for (int i = 0; i < iters; i++) {
    cudaError_t err = cudaMalloc(&blocks[n], 256 * MiB);
    if (err == cudaSuccess) {
      served++;
      n++;
      over += total_of(f) > limit;
    } else {
      refused++;
      badcode += err != cudaErrorMemoryAllocation;
      cudaGetLastError();
    }
    /* Full, refused, or now and then: everything back to the cache. */
    if (n == 6 || err != cudaSuccess || rand() % 4 == 0)
      while (n > 0) cudaFree(blocks[--n]);
  }
  /* All end together: a process's memory goes back to the driver only as
   * it dies, so a peer still churning while one exits would measure the
   * driver's teardown, not the limit. */
  if (!staggered && (write(wfd, "y", 1) != 1 || read(rfd, &c, 1) != 1)) return 3;
  cudaFree(base);
  printf("worker: served=%d refused=%d over=%d badcode=%d\n", served, refused, over, badcode);
  return 0;
}

static void print_taken(void) {
  const cp_budget_file_t *f = map_budget();
  if (f)
    printf("taken: gone=%llu grace=%llu cap=%llu\n", (unsigned long long)atomic_load(&f->taken_gone),
           (unsigned long long)atomic_load(&f->taken_grace), (unsigned long long)atomic_load(&f->taken_cap));
}

static int churn(int n, int iters, bool staggered) {
  pid_t kids[16];
  int down[16][2], up[16][2];
  if (n > 16) return 1;
  fflush(stdout);
  for (int i = 0; i < n; i++) {
    if (pipe(down[i]) != 0 || pipe(up[i]) != 0) return 1;
    if ((kids[i] = fork()) < 0) return 1;
    if (kids[i] == 0) {
      char it[16], r[16], w[16];
      snprintf(it, sizeof it, "%d", staggered ? iters * (i + 1) / n : iters);
      snprintf(r, sizeof r, "%d", down[i][0]);
      snprintf(w, sizeof w, "%d", up[i][1]);
      execl("/proc/self/exe", "shared", "worker", it, r, w, staggered ? "staggered" : "together", (char *)NULL);
      _exit(127);
    }
    close(down[i][0]);
    close(up[i][1]);
  }
  char c;
  for (int i = 0; i < n; i++)
    if (read(up[i][0], &c, 1) != 1) return 1;
  for (int i = 0; i < n; i++)
    if (write(down[i][1], "x", 1) != 1) return 1;
  for (int i = 0; i < n && !staggered; i++)
    if (read(up[i][0], &c, 1) != 1) return 1; /* every worker done churning */
  for (int i = 0; i < n && !staggered; i++)
    if (write(down[i][1], "x", 1) != 1) return 1;
  for (int i = 0; i < n; i++) {
    int st;
    if (waitpid(kids[i], &st, 0) != kids[i]) return 1;
    printf("status: i=%d status=%d\n", i, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  print_taken();
  return 0;
}

/* ---- the other cases ------------------------------------------------------------------ */

static int killed(size_t size) {
  int to;
  pid_t child = start_hold(size, "keep", &to);
  if (child < 0) return 1;
  int st;
  if (kill(child, SIGKILL) != 0 || waitpid(child, &st, 0) != child) return 1;
  close(to);
  take(size);
  return 0;
}

static int stopped(size_t size, bool stop) {
  int to, st;
  pid_t child = start_hold(size, "free", &to);
  if (child < 0) return 1;
  if (stop && (kill(child, SIGSTOP) != 0 || waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st)))
    return 1;
  take(size);
  if (stop) kill(child, SIGCONT);
  printf("hold: status=%d\n", end_child(child, to));
  return 0;
}

/* A child allocates and frees size (its cache holds it) and exits; its
 * exit stops where the driver still holds its memory (the fake's
 * FAKECUDA_EXIT_PIPE), and this process asks for size then, and again once
 * the child is gone. */
static int exiting(size_t size) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return 1;
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    char pipes[32], mib[32];
    snprintf(pipes, sizeof pipes, "%d,%d", down[0], up[1]);
    snprintf(mib, sizeof mib, "%zu", size / MiB);
    setenv("FAKECUDA_EXIT_PIPE", pipes, 1);
    close(down[1]);
    close(up[0]);
    execl("/proc/self/exe", "shared", "exiter", mib, (char *)NULL);
    _exit(127);
  }
  close(down[0]);
  close(up[1]);
  char c;
  if (read(up[0], &c, 1) != 1 || c != 'e') return 1;
  take(size);
  close(down[1]);
  int st;
  if (waitpid(child, &st, 0) != child) return 1;
  take(size);
  printf("exiter: status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

static void info(const char *when) {
  size_t free_bytes = 0, total = 0;
  cudaError_t err = cudaMemGetInfo(&free_bytes, &total);
  printf("info: when=%s code=%d free=%zu total=%zu\n", when, (int)err, free_bytes, total);
}

/* ---- a dead peer whose memory the driver still holds ---------------------------- */

typedef struct releaser {
  int query, done; /* the fake NVML's byte per answer; closed by main when done */
  pid_t child;
  _Atomic int released, rc;
} releaser_t;

/* Once the fake NVML has answered (the shim looked and saw the child still
 * listed), the child's memory goes back, as the driver frees it late. */
static void *release_late(void *arg) {
  releaser_t *r = arg;
  struct pollfd p[2] = {{.fd = r->query, .events = POLLIN}, {.fd = r->done, .events = POLLIN}};
  while (poll(p, 2, -1) >= 0 || errno == EINTR) {
    if (p[1].revents) return NULL;
    char c;
    if ((p[0].revents & POLLIN) && read(r->query, &c, 1) == 1) {
      int (*release)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "fakecuda_release_process");
      atomic_store(&r->released, 1);
      atomic_store(&r->rc, release ? release((int)r->child) : -2);
      return NULL;
    }
    if (p[0].revents & (POLLHUP | POLLERR)) return NULL;
  }
  return NULL;
}

/* `reader --all --group $CUDAPOOL_SHARED_NAME` into this process's stdout. */
static int overview(const char *reader) {
  const char *group = getenv("CUDAPOOL_SHARED_NAME");
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execl(reader, reader, "--all", "--group", group ? group : "", "--timeout", "10", (char *)NULL);
    _exit(127);
  }
  int st;
  return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int dead(size_t size, const char *how, const char *reader) {
  int q[2], done[2];
  if (pipe2(q, O_CLOEXEC) != 0 || pipe2(done, O_CLOEXEC) != 0) return 1;
  char fd[16];
  snprintf(fd, sizeof fd, "%d", q[1]);
  setenv("FAKENVML_QUERY_FD", fd, 1);
  void *mine;
  if (cudaMalloc(&mine, 64 * MiB) != cudaSuccess) return 1; /* a context the fake NVML lists */
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    char mib[32];
    snprintf(mib, sizeof mib, "%zu", size / MiB);
    if (strcmp(how, "release") == 0) setenv("FAKECUDA_HOLD_AT_EXIT", "1", 1);
    execl("/proc/self/exe", "shared", "exiter", mib, (char *)NULL);
    _exit(127);
  }
  int st;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
  releaser_t r = {.query = q[0], .done = done[0], .child = child};
  pthread_t t;
  bool late = strcmp(how, "release") == 0;
  if (late && pthread_create(&t, NULL, release_late, &r) != 0) return 1;
  if (strcmp(how, "info") == 0) {
    info("dead");
  } else if (strcmp(how, "stats") == 0 && reader) {
    if (overview(reader) != 0) return 1;
    take(size);
    if (overview(reader) != 0) return 1;
  } else {
    take(size);
  }
  if (late) {
    int released = atomic_load(&r.released);
    close(done[1]);
    pthread_join(t, NULL);
    printf("released: before=%d rc=%d\n", released, atomic_load(&r.rc));
  }
  print_taken();
  cudaFree(mine);
  return 0;
}

static int exiter(size_t size) {
  void *p;
  return cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess;
}

static int meminfo(size_t size) {
  int to;
  pid_t child = start_hold(size, "keep", &to);
  if (child < 0) return 1;
  info("peer");
  void *p;
  if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1;
  info("cached");
  printf("hold: status=%d\n", end_child(child, to));
  return 0;
}

/* This process caches size, then empties its cache (cudapool_empty_cache)
 * while CUDA refuses frees, as the runtime does once its teardown at exit
 * began (the fake's fakecuda_refuse_frees): the group's total before and
 * after. */
static int refused_free(size_t size) {
  void *p;
  if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1;
  const cp_budget_file_t *f = map_budget();
  void (*refuse)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "fakecuda_refuse_frees");
  int (*empty)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudapool_empty_cache");
  if (!f || !refuse || !empty) return 1;
  printf("budget: when=cached total=%llu\n", (unsigned long long)total_of(f));
  refuse(1);
  int rc = empty(0);
  refuse(0);
  printf("budget: when=refused rc=%d total=%llu\n", rc, (unsigned long long)total_of(f));
  return 0;
}

/* This process's pool dropped with its context (cudaDeviceReset) while it
 * cached size: cudaMemGetInfo under the shared limit before, right after,
 * and after a 1 MiB allocation. */
static int reset_then(size_t size) {
  void *p;
  if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1;
  info("cached");
  if (cudaDeviceReset() != cudaSuccess) return 1;
  info("reset");
  if (cudaMalloc(&p, MiB) != cudaSuccess) return 1;
  info("again");
  return 0;
}

/* A child caches size and drops its context (cudaDeviceReset), then idles;
 * this process allocates size: "take:", then "hold: status=". */
static int reset_peer(size_t size) {
  int to;
  pid_t child = start_hold(size, "reset", &to);
  if (child < 0) return 1;
  take(size);
  printf("hold: status=%d\n", end_child(child, to));
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (strcmp(mode, "churn") == 0 && argc > 3)
    return churn(atoi(argv[2]), atoi(argv[3]), argc > 4 && strcmp(argv[4], "staggered") == 0);
  if (strcmp(mode, "worker") == 0 && argc > 4)
    return worker(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argc > 5 && strcmp(argv[5], "staggered") == 0);
  if (strcmp(mode, "killed") == 0 && argc > 2) return killed(size_arg(argv[2]));
  if (strcmp(mode, "stopped") == 0 && argc > 2) return stopped(size_arg(argv[2]), argc > 3);
  if (strcmp(mode, "meminfo") == 0 && argc > 2) return meminfo(size_arg(argv[2]));
  if (strcmp(mode, "reset") == 0 && argc > 2) return reset_then(size_arg(argv[2]));
  if (strcmp(mode, "resetpeer") == 0 && argc > 2) return reset_peer(size_arg(argv[2]));
  if (strcmp(mode, "refused") == 0 && argc > 2) return refused_free(size_arg(argv[2]));
  if (strcmp(mode, "exiting") == 0 && argc > 2) return exiting(size_arg(argv[2]));
  if (strcmp(mode, "exiter") == 0 && argc > 2) return exiter(size_arg(argv[2]));
  if (strcmp(mode, "dead") == 0 && argc > 3) return dead(size_arg(argv[2]), argv[3], argc > 4 ? argv[4] : NULL);
  if (strcmp(mode, "take") == 0 && argc > 2) {
    take(size_arg(argv[2]));
    return 0;
  }
  if (strcmp(mode, "path") == 0) {
    char path[256];
    budget_path(path, sizeof path);
    printf("path: %s\n", path);
    return 0;
  }
  if (strcmp(mode, "hold") == 0 && argc > 5)
    return hold(size_arg(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5]);
  fprintf(stderr, "usage: shared churn N ITERS | killed MIB | stopped MIB [stop] | reset MIB | resetpeer MIB | refused MIB | meminfo MIB | exiting MIB | dead MIB release|take|info | take MIB | path\n");
  return 2;
}
