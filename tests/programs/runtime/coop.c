/* coop.c: two processes on one fake device (FAKECUDA_SHARED_MEM): the
 * first fills it and frees (under the shim its cache then holds the
 * memory, idle), the second allocates (cooperation between processes,
 * shim/state/coop.c).
 *
 *   coop pair [stop]  runs `coop hog` as its child, waits until the hog has
 *                     freed, then allocates what the hog did and prints
 *                     "take: ok=";
 *                     with "stop" the hog is stopped (SIGSTOP) meanwhile
 *                     and continued after
 *   coop chunks       the same in 1 GiB blocks (the "100 x 1 GiB"
 *                     on a 141 GB card): the hog allocates as many as fit
 *                     in 3/4 of free memory, frees them all and idles; this
 *                     process asks for as many and prints "take: ok= got=
 *                     of=", then "info: ms= slowest_ms=" (the slowest
 *                     allocation holds the give-back round trip)
 *   coop hog R W [chunks]  (the child) 3/4 of the device's free memory
 *                     allocated (in one block, or in 1 GiB blocks) and
 *                     freed, then its size written to fd W, then waits
 *                     until fd R closes
 *
 * Run with FAKECUDA_MEMORY=4G (3 GiB each), or on a GPU
 * (scripts/gpu-check.d/coop.sh). The "take:" line is the same natively
 * (cudaFree gives the memory back at once) and under the shim with
 * cooperation on; under the shim with it off the take fails. */
#include <signal.h>
#include <stdbool.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"

#define GiB ((size_t)1 << 30)
#define MAX_CHUNKS 1024

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int hog(int rfd, int wfd, bool chunks) {
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
  for (size_t i = 0; i < n; i++)
    if (cudaMalloc(&p[i], size / n) != cudaSuccess) return 1;
  for (size_t i = 0; i < n; i++)
    if (cudaFree(p[i]) != cudaSuccess) return 1;
  if (write(wfd, &size, sizeof size) != (ssize_t)sizeof size) return 1;
  char c;
  while (read(rfd, &c, 1) > 0) {
  }
  return 0;
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

static int pair(bool stop, bool chunks) {
  int to_hog[2], from_hog[2];
  if (pipe(to_hog) != 0 || pipe(from_hog) != 0) return 1;
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    char r[16], w[16];
    snprintf(r, sizeof r, "%d", to_hog[0]);
    snprintf(w, sizeof w, "%d", from_hog[1]);
    close(to_hog[1]);
    close(from_hog[0]);
    execl("/proc/self/exe", "coop", "hog", r, w, chunks ? "chunks" : "one", (char *)NULL);
    _exit(127);
  }
  close(to_hog[0]);
  close(from_hog[1]);
  size_t size;
  if (read(from_hog[0], &size, sizeof size) != (ssize_t)sizeof size) return 1;
  int st;
  if (stop && (kill(child, SIGSTOP) != 0 || waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st)))
    return 1;
  if (chunks) {
    take_chunks(size);
  } else {
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, size);
    printf("take: ok=%d\n", err == cudaSuccess);
    if (err == cudaSuccess) cudaFree(p);
  }
  if (stop) kill(child, SIGCONT);
  close(to_hog[1]);
  if (waitpid(child, &st, 0) != child) return 1;
  printf("hog: status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "pair") == 0) return pair(argc > 2 && strcmp(argv[2], "stop") == 0, false);
  if (strcmp(mode, "chunks") == 0) return pair(false, true);
  if (strcmp(mode, "hog") == 0 && argc > 3)
    return hog(atoi(argv[2]), atoi(argv[3]), argc > 4 && strcmp(argv[4], "chunks") == 0);
  fprintf(stderr, "usage: coop pair [stop] | coop chunks | coop hog R W [chunks]\n");
  return 2;
}
