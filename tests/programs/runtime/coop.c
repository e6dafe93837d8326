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
 *   coop hog R W [both]
 *                     (the child) 3/4 of the device's free memory
 *                     allocated and freed (on devices 0 and 1 with "both"),
 *                     then its size written to fd W, then waits until fd R
 *                     closes
 *
 * Run with FAKECUDA_MEMORY=4G (3 GiB each), or on a GPU
 * (scripts/gpu-check.d/coop.sh). The "take:" line is the same natively
 * (cudaFree gives the memory back at once) and under the shim with
 * cooperation on; under the shim with it off the take fails. */
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"

static int hog(int rfd, int wfd, bool both) {
  void *p;
  size_t free_bytes, total;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 1;
  size_t size = free_bytes / 4 * 3 / (2 * MiB) * (2 * MiB);
  for (int dev = both ? 1 : 0; dev >= 0; dev--) {
    if (both && cudaSetDevice(dev) != cudaSuccess) return 1;
    if (cudaMalloc(&p, size) != cudaSuccess) return 1;
    if (cudaFree(p) != cudaSuccess) return 1;
  }
  if (write(wfd, &size, sizeof size) != (ssize_t)sizeof size) return 1;
  char c;
  while (read(rfd, &c, 1) > 0) {
  }
  if (both) printf("pool: held0=%ld held1=%ld\n", fake_live(0), fake_live(1));
  return 0;
}

static int pair(bool stop, bool devices) {
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
    execl("/proc/self/exe", "coop", "hog", r, w, devices ? "both" : (char *)NULL, (char *)NULL);
    _exit(127);
  }
  close(to_hog[0]);
  close(from_hog[1]);
  size_t size;
  if (read(from_hog[0], &size, sizeof size) != (ssize_t)sizeof size) return 1;
  int st;
  if (stop && (kill(child, SIGSTOP) != 0 || waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st)))
    return 1;
  void *p = NULL;
  if (devices && cudaSetDevice(1) != cudaSuccess) return 1;
  cudaError_t err = cudaMalloc(&p, size);
  printf("take: ok=%d\n", err == cudaSuccess);
  if (err == cudaSuccess) cudaFree(p);
  if (stop) kill(child, SIGCONT);
  close(to_hog[1]);
  if (waitpid(child, &st, 0) != child) return 1;
  printf("hog: status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  const char *how = argc > 2 ? argv[2] : "";
  if (strcmp(mode, "pair") == 0) return pair(strcmp(how, "stop") == 0, strcmp(how, "devices") == 0);
  if (strcmp(mode, "hog") == 0 && argc > 3) return hog(atoi(argv[2]), atoi(argv[3]), argc > 4);
  fprintf(stderr, "usage: coop pair [stop|devices] | coop hog R W [both]\n");
  return 2;
}
