/* coop.c: two processes on one fake device (FAKECUDA_SHARED_MEM): the
 * first fills it and frees (under the shim its cache then holds the
 * memory, idle), the second allocates (cooperation between processes,
 * shim/state/coop.c).
 *
 *   coop pair [stop|devices]
 *                     runs `coop hog` as its child, waits until the hog has
 *                     freed, then allocates what the hog did and prints
 *                     "take: ok=";
 *                     with "stop" the hog is stopped (SIGSTOP) meanwhile
 *                     and continued after; with "devices" (FAKECUDA_DEVICES=2)
 *                     the hog fills and frees devices 0 and 1, the take is
 *                     on device 1, and the hog then prints what it still
 *                     holds on each ("pool: held0= held1=", the fake's live
 *                     bytes: a request names its device, coop.h)
 *   coop chunks       as "pair" in 1 GiB blocks (the "100 x 1 GiB"
 *                     on a 141 GB card): the hog allocates as many as fit
 *                     in 3/4 of free memory, frees them all and idles; this
 *                     process asks for as many and prints "take: ok= got=
 *                     of=", then "info: ms= slowest_ms=" (the slowest
 *                     allocation holds the give-back round trip)
 *   coop flood N      runs `coop hog R W work` as its child, takes what the hog
 *                     freed (one give-back round), lets the hog go on
 *                     working (allocating and freeing 256 MiB in a loop),
 *                     then sends N give-back requests for device 0 straight
 *                     into the hog's live segment, one after another, each
 *                     waited for (5 s at most), and prints the hog's
 *                     counters: "flood: answered= asked= rounds= limited=
 *                     given=" (shim/state/coop.c's rate limit)
 *   coop all READER OUT
 *                     as "pair devices" with the take held (as "pair" on a
 *                     machine with one device), then runs
 *                     `READER --all --group $CUDAPOOL_SHARED_NAME` (the
 *                     overview of cudapool-stats) into the file OUT while
 *                     both run; prints "reader: status=", the pids
 *                     ("pids: me= hog=") and the commands the overview
 *                     should show ("mecmd: ...", "hogcmd: ...");
 *                     then `READER --prometheus` (every process of this
 *                     user) into OUT.prom: "prom: status="
 *   coop regrow       three takes of what an idle hog freed, its cache
 *                     grown again by as much before the second and the
 *                     third: "take: i= ok=", then the hog's counters
 *                     "regrow: asked= rounds= limited= given=" (run with
 *                     a long CUDAPOOL_COOP_INTERVAL: all in one interval)
 *   coop hog R W [both|work|chunks|regrow]
 *                     (the child) 3/4 of the device's free memory
 *                     allocated and freed (on devices 0 and 1 with "both";
 *                     in 1 GiB blocks with "chunks"),
 *                     then its size written to fd W, then waits until fd R
 *                     closes (with "work": until a byte comes on R, then
 *                     works until R closes, and prints "work: failed=";
 *                     with "regrow": each byte 'g' on R, allocates and
 *                     frees that size again and writes 'd' to W)
 *
 * Run with FAKECUDA_MEMORY=4G (3 GiB each), or on a GPU
 * (scripts/gpu-check.d/coop.sh). The "take:" line is the same natively
 * (cudaFree gives the memory back at once) and under the shim with
 * cooperation on; under the shim with it off the take fails. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "live_layout.h"
#include "progs.h"

#define GiB ((size_t)1 << 30)
#define MAX_CHUNKS 1024

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Allocates and frees 256 MiB until fd r closes; the failures. */
static long work(int r) {
  long failed = 0;
  char c;
  if (fcntl(r, F_SETFL, O_NONBLOCK) != 0) return -1;
  for (;;) {
    ssize_t got = read(r, &c, 1);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return failed;
    void *p;
    if (cudaMalloc(&p, 256 * MiB) != cudaSuccess) {
      failed++;
      continue;
    }
    if (cudaFree(p) != cudaSuccess) failed++;
  }
}

static int hog(int rfd, int wfd, bool both, bool working, bool chunks, bool regrow) {
  void *p[MAX_CHUNKS];
  size_t free_bytes, total;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 1;
  size_t size = free_bytes / 4 * 3 / (2 * MiB) * (2 * MiB);
  size_t n = 1;
  if (chunks) {
    n = size / GiB;
    if (n == 0 || n > MAX_CHUNKS) return 1;
    size = n * GiB;
  }
  for (int dev = both ? 1 : 0; dev >= 0; dev--) {
    if (both && cudaSetDevice(dev) != cudaSuccess) return 1;
    for (size_t i = 0; i < n; i++)
      if (cudaMalloc(&p[i], size / n) != cudaSuccess) return 1;
    for (size_t i = 0; i < n; i++)
      if (cudaFree(p[i]) != cudaSuccess) return 1;
  }
  if (write(wfd, &size, sizeof size) != (ssize_t)sizeof size) return 1;
  char c;
  /* Each 'g': its cache grows again by size (allocated and freed), then 'd'. */
  while (regrow && read(rfd, &c, 1) == 1) {
    void *q;
    if (cudaMalloc(&q, size) != cudaSuccess || cudaFree(q) != cudaSuccess || write(wfd, "d", 1) != 1) return 1;
  }
  if (working) {
    if (read(rfd, &c, 1) != 1) return 1;
    printf("work: failed=%ld\n", work(rfd));
    return 0;
  }
  while (read(rfd, &c, 1) > 0) {
  }
  if (both) printf("pool: held0=%ld held1=%ld\n", fake_live(0), fake_live(1));
  return 0;
}

/* Starts `coop hog R W how` as a child: its pid; *to (its R's other end)
 * and the size it freed, once it has. -1 on failure. */
static char hog_command[64];
static int hog_from = -1; /* with "regrow": the hog's fd W, read end */

static pid_t start_hog(const char *how, int *to, size_t *size) {
  int to_hog[2], from_hog[2];
  if (pipe(to_hog) != 0 || pipe(from_hog) != 0) return -1;
  char r[16], w[16];
  snprintf(r, sizeof r, "%d", to_hog[0]);
  snprintf(w, sizeof w, "%d", from_hog[1]);
  snprintf(hog_command, sizeof hog_command, "coop hog %s %s%s%s", r, w, how ? " " : "", how ? how : "");
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    close(to_hog[1]);
    close(from_hog[0]);
    execl("/proc/self/exe", "coop", "hog", r, w, how, (char *)NULL);
    _exit(127);
  }
  close(to_hog[0]);
  close(from_hog[1]);
  *to = to_hog[1];
  ssize_t got = read(from_hog[0], size, sizeof *size);
  if (how && strcmp(how, "regrow") == 0)
    hog_from = from_hog[0];
  else
    close(from_hog[0]);
  return got == (ssize_t)sizeof *size ? child : -1;
}

/* Asks for size in 1 GiB blocks; the slowest one waited for the peers. */
static void take_chunks(size_t size) {
  static void *p[MAX_CHUNKS];
  int n = (int)(size / GiB), got = 0;
  double start = now_ms(), slowest = 0;
  while (got < n) {
    double t = now_ms();
    cudaError_t err = cudaMalloc(&p[got], GiB);
    if (now_ms() - t > slowest) slowest = now_ms() - t;
    if (err != cudaSuccess) break;
    got++;
  }
  double total = now_ms() - start;
  printf("take: ok=%d got=%d of=%d\n", got == n, got, n);
  printf("info: ms=%.1f slowest_ms=%.1f\n", total, slowest);
  while (got > 0) cudaFree(p[--got]);
}

static int pair(bool stop, bool devices, bool chunks) {
  int to;
  size_t size;
  pid_t child = start_hog(devices ? "both" : chunks ? "chunks" : NULL, &to, &size);
  if (child < 0) return 1;
  int st;
  if (stop && (kill(child, SIGSTOP) != 0 || waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st)))
    return 1;
  if (chunks) {
    take_chunks(size);
  } else {
    void *p = NULL;
    if (devices && cudaSetDevice(1) != cudaSuccess) return 1;
    cudaError_t err = cudaMalloc(&p, size);
    printf("take: ok=%d\n", err == cudaSuccess);
    if (err == cudaSuccess) cudaFree(p);
  }
  if (stop) kill(child, SIGCONT);
  close(to);
  if (waitpid(child, &st, 0) != child) return 1;
  printf("hog: status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

/* This process's command line, arguments joined by blanks. */
static void own_command(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/cmdline", "r");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  if (f) fclose(f);
  while (n > 0 && out[n - 1] == '\0') n--;
  for (size_t i = 0; i < n; i++)
    if (out[i] == '\0') out[i] = ' ';
  out[n] = '\0';
}

/* Runs reader --all --group $CUDAPOOL_SHARED_NAME into the file out: its
 * exit status. */
static int run_reader(const char *reader, const char *out, const char *how) {
  const char *group = getenv("CUDAPOOL_SHARED_NAME");
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(126);
    if (strcmp(how, "--all") == 0)
      execl(reader, reader, "--all", "--group", group ? group : "", "--timeout", "10", (char *)NULL);
    else
      execl(reader, reader, how, "--timeout", "10", (char *)NULL);
    _exit(127);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int all(const char *reader, const char *out) {
  int to;
  size_t size;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 1;
  pid_t child = start_hog(count > 1 ? "both" : NULL, &to, &size);
  if (child < 0) return 1;
  void *p = NULL;
  if (count > 1 && cudaSetDevice(1) != cudaSuccess) return 1;
  cudaError_t err = cudaMalloc(&p, size);
  printf("take: ok=%d\n", err == cudaSuccess);
  printf("reader: status=%d\n", run_reader(reader, out, "--all"));
  char prom[PATH_MAX];
  snprintf(prom, sizeof prom, "%s.prom", out);
  printf("prom: status=%d\n", run_reader(reader, prom, "--prometheus"));
  char me[256];
  own_command(me, sizeof me);
  printf("pids: me=%ld hog=%ld\n", (long)getpid(), (long)child);
  printf("mecmd: %s\n", me);
  printf("hogcmd: %s\n", hog_command);
  if (err == cudaSuccess) cudaFree(p);
  close(to);
  int st;
  if (waitpid(child, &st, 0) != child) return 1;
  printf("hog: status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

/* One give-back request for device 0 into the segment, waited for until
 * deadline (CLOCK_MONOTONIC ns) at most: whether it was answered. */
static bool ask_once(cp_live_segment_t *seg, uint64_t deadline) {
  cp_live_device_t *dv = &seg->dev[0];
  uint32_t ticket = atomic_fetch_add(&dv->give_request, 1) + 1;
  atomic_fetch_add(&seg->request, 1);
  syscall(SYS_futex, (uint32_t *)&seg->request, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  for (;;) {
    uint32_t got = atomic_load(&dv->give_answered);
    if ((int32_t)(got - ticket) >= 0) return true;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t now = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    if (now >= deadline) return false;
    struct timespec rel = {.tv_sec = (time_t)((deadline - now) / 1000000000u),
                           .tv_nsec = (long)((deadline - now) % 1000000000u)};
    syscall(SYS_futex, (uint32_t *)&dv->give_answered, FUTEX_WAIT, got, &rel, NULL, 0);
  }
}

static int flood(long n) {
  int to;
  size_t size;
  pid_t child = start_hog("work", &to, &size);
  if (child < 0) return 1;
  void *p = NULL;
  cudaError_t err = cudaMalloc(&p, size);
  printf("take: ok=%d\n", err == cudaSuccess);
  if (write(to, "g", 1) != 1) return 1;
  char path[128];
  snprintf(path, sizeof path, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.%ld", (unsigned long)geteuid(), (long)child);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  void *m = fd >= 0 ? mmap(NULL, sizeof(cp_live_segment_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  if (m == MAP_FAILED) {
    printf("flood: nosegment\n");
  } else {
    cp_live_segment_t *seg = m;
    long answered = 0;
    for (long i = 0; i < n; i++) {
      struct timespec t;
      clock_gettime(CLOCK_MONOTONIC, &t);
      answered += ask_once(seg, (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec + 5000000000u);
    }
    cp_live_device_t *dv = &seg->dev[0];
    printf("flood: answered=%ld asked=%llu rounds=%llu limited=%llu given=%llu\n", answered,
           (unsigned long long)atomic_load(&dv->asked), (unsigned long long)atomic_load(&dv->rounds),
           (unsigned long long)atomic_load(&dv->limited), (unsigned long long)atomic_load(&dv->given));
    munmap(m, sizeof(cp_live_segment_t));
  }
  if (err == cudaSuccess) cudaFree(p);
  close(to);
  int st;
  if (waitpid(child, &st, 0) != child) return 1;
  printf("hog: status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

/* Three takes of what the hog freed, its cache grown again by as much
 * before the second and the third, all within one CUDAPOOL_COOP_INTERVAL:
 * "take: i= ok=" each, then the hog's counters "regrow: asked= rounds=
 * limited= given=" (coop.c's extra round: the second earns it, the third
 * does not). */
static int regrow(void) {
  int to;
  size_t size;
  pid_t child = start_hog("regrow", &to, &size);
  if (child < 0) return 1;
  int (*empty)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudapool_empty_cache");
  for (int i = 1; i <= 3; i++) {
    char c;
    if (i > 1 && (write(to, "g", 1) != 1 || read(hog_from, &c, 1) != 1)) return 1;
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, size);
    printf("take: i=%d ok=%d\n", i, err == cudaSuccess);
    if (err == cudaSuccess) cudaFree(p);
    if (empty) empty(0); /* back to the device, for the hog's next growth */
  }
  char path[128];
  snprintf(path, sizeof path, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.%ld", (unsigned long)geteuid(), (long)child);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  void *m = fd >= 0 ? mmap(NULL, sizeof(cp_live_segment_t), PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  if (m != MAP_FAILED) {
    cp_live_device_t *dv = &((cp_live_segment_t *)m)->dev[0];
    printf("regrow: asked=%llu rounds=%llu limited=%llu given=%llu\n", (unsigned long long)atomic_load(&dv->asked),
           (unsigned long long)atomic_load(&dv->rounds), (unsigned long long)atomic_load(&dv->limited),
           (unsigned long long)atomic_load(&dv->given));
    munmap(m, sizeof(cp_live_segment_t));
  }
  close(to);
  int st;
  if (waitpid(child, &st, 0) != child) return 1;
  printf("hog: status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  const char *how = argc > 2 ? argv[2] : "";
  if (strcmp(mode, "pair") == 0) return pair(strcmp(how, "stop") == 0, strcmp(how, "devices") == 0, false);
  if (strcmp(mode, "chunks") == 0) return pair(false, false, true);
  if (strcmp(mode, "flood") == 0 && argc > 2) return flood(atol(argv[2]));
  if (strcmp(mode, "all") == 0 && argc > 3) return all(argv[2], argv[3]);
  if (strcmp(mode, "regrow") == 0) return regrow();
  if (strcmp(mode, "hog") == 0 && argc > 3) {
    const char *extra = argc > 4 ? argv[4] : "";
    return hog(atoi(argv[2]), atoi(argv[3]), strcmp(extra, "both") == 0, strcmp(extra, "work") == 0,
               strcmp(extra, "chunks") == 0, strcmp(extra, "regrow") == 0);
  }
  fprintf(stderr, "usage: coop pair [stop|devices] | coop chunks | coop flood N | coop all READER OUT | coop regrow | "
                  "coop hog R W [both|work|chunks|regrow]\n");
  return 2;
}
