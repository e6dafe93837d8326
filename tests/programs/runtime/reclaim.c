/* reclaim.c: freed memory comes back without the program's help (the
 * reclaimer, shim/state/reclaim.c). After its frees the program makes no
 * CUDA call and no pool call while it waits: it watches the fake device's
 * own count of live bytes (fakecuda_live_bytes, not the pool), polling a
 * condition until a deadline, as another process sharing the GPU would see
 * its memory come back.
 *
 *   reclaim cap      10 x 1 GiB allocated and freed (run with
 *                    CUDAPOOL_MAX_CACHED=1G): the device gets back all but
 *                    1 GiB
 *   reclaim quiet [S] blocks allocated and kept, nothing freed: the reclaimer
 *                    never passes; then freed: it passes, and once they are
 *                    ready it passes no more while the program idles (S:
 *                    how long to wait for them to be ready, default 60 s)
 *   reclaim idle     two 20 MiB blocks, one freed (CUDAPOOL_RELEASE_IDLE=1):
 *                    its segment goes back, the live one's stays
 *   reclaim fork     frees pending, then a fork; the child exits, the
 *                    parent's memory still comes back
 *   reclaim exit     frees pending, exit at once (the reclaimer may be in a
 *                    pass: the exit must be clean)
 *
 * Lines other than "pool:" are the same natively (where cudaFree gives the memory
 * back at once); "pool:" lines only under the shim. */
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

#define GiB ((size_t)1 << 30)
#define DEADLINE_S 60

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pause_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Polls the fake device's live bytes until at most `most` (1) or the
 * deadline (0). No CUDA call, no pool call. */
static int live_drops_to(long most) {
  double end = now_s() + DEADLINE_S;
  while (fake_live(0) > most) {
    if (now_s() > end) return 0;
    pause_ms(2);
  }
  return 1;
}

static long reclaims(void) {
  cudapool_stats_t s;
  return pool_stats(0, &s) == 0 ? (long)s.num_reclaims : -1;
}

static int cap(void) {
  void *p[10];
  for (int i = 0; i < 10; i++)
    if (cudaMalloc(&p[i], GiB) != cudaSuccess) return 1;
  for (int i = 0; i < 10; i++) cudaMemset(p[i], i, 4096);
  for (int i = 0; i < 10; i++) cudaFree(p[i]);
  printf("cap: reached=%d\n", live_drops_to((long)GiB));
  cudapool_stats_t s;
  if (pool_stats(0, &s) == 0)
    printf("pool: reserved_at_most_1g=%d pending=%lld reclaims_ok=%d\n", s.reserved_bytes.current <= (long long)GiB,
           (long long)s.pending_bytes.current, s.num_reclaims > 0);
  return 0;
}

static int quiet(double deadline_s) {
  void *p[3];
  for (int i = 0; i < 3; i++)
    if (cudaMalloc(&p[i], 4 * MiB) != cudaSuccess) return 1;
  /* Ten intervals (CUDAPOOL_RECLAIM_INTERVAL=10) with nothing freed: not a
   * wait for anything, time in which a wrong wake-up would show. */
  pause_ms(100);
  long nothing_freed = reclaims();
  for (int i = 0; i < 3; i++) cudaFree(p[i]);
  /* Until the reclaimer has made them ready (a stats read does not). */
  double end = now_s() + deadline_s;
  cudapool_stats_t s;
  int ready = 0;
  while (pool_stats(0, &s) == 0 && now_s() < end) {
    if (s.pending_bytes.current == 0 && s.num_reclaims > 0) {
      ready = 1;
      break;
    }
    pause_ms(2);
  }
  long after = reclaims();
  pause_ms(100); /* ten more intervals, nothing freed */
  printf("pool: reclaims_while_nothing_freed=%ld ready=%d more_reclaims_while_idle=%ld\n", nothing_freed, ready,
         reclaims() - after);
  printf("quiet: ok=1\n");
  return 0;
}

static int idle(void) {
  void *a, *b;
  if (cudaMalloc(&a, 20 * MiB) != cudaSuccess || cudaMalloc(&b, 20 * MiB) != cudaSuccess) return 1;
  long before = fake_live(0);
  cudaFree(a);
  printf("idle: released=%d\n", live_drops_to(before - (long)(20 * MiB)));
  cudapool_stats_t s;
  if (pool_stats(0, &s) == 0)
    printf("pool: idle_releases=%llu segments=%lld allocated=%lld\n", (unsigned long long)s.num_idle_releases,
           (long long)s.segments.current, (long long)s.allocated_bytes.current);
  printf("kept: live=%d\n", round_trip(b, 4096, 7));
  return 0;
}

static int forked(void) {
  void *p[4];
  for (int i = 0; i < 4; i++)
    if (cudaMalloc(&p[i], 64 * MiB) != cudaSuccess) return 1;
  for (int i = 0; i < 4; i++) cudaFree(p[i]);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) exit(0);
  int st = 0;
  waitpid(pid, &st, 0);
  printf("child: status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  printf("parent: reached=%d\n", live_drops_to(0));
  return 0;
}

static int exiting(void) {
  void *p[8];
  for (int i = 0; i < 8; i++)
    if (cudaMalloc(&p[i], 32 * MiB) != cudaSuccess) return 1;
  for (int i = 0; i < 8; i++) cudaFree(p[i]);
  printf("exiting: ok=1\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "cap") == 0) return cap();
  if (strcmp(mode, "quiet") == 0) return quiet(argc > 2 ? atof(argv[2]) : DEADLINE_S);
  if (strcmp(mode, "idle") == 0) return idle();
  if (strcmp(mode, "fork") == 0) return forked();
  if (strcmp(mode, "exit") == 0) return exiting();
  fprintf(stderr, "usage: reclaim cap|quiet|idle|fork|exit\n");
  return 2;
}
