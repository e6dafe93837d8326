/* live_extras.c: what `cudapool stats PID` shows beyond the counters
 * (regions, call sites) and `cudapool snapshot PID`, read from outside
 * while the program runs (tests/integration/runtime/live_extras.c).
 *
 *   live_extras READER DIR
 * region "load" { alloc_weights: 4 MiB }, then region "step" {
 * alloc_activations: 3 MiB }, both blocks kept and "step" still open, then
 * runs READER (cudapool-stats) on its own pid, each with its stdout in a
 * file of DIR and its stderr after it:
 *   PID                                  -> DIR/stats.txt
 *   PID --json                           -> DIR/stats.json
 *   --snapshot PID -o DIR/snap-%p.json   -> DIR/snap.out
 *   --snapshot PID -o DIR/none/snap.json -> DIR/snap-bad.out (no such folder)
 * Prints "info: text=RC json=RC snap=RC bad=RC pid=PID" and
 * "live_extras: errors=N". Built with -rdynamic: dladdr names the two
 * functions. Natively (no cudapool_push_tag) it prints "live_extras: no_api=1". */
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"

extern char **environ;

__attribute__((noinline, visibility("default"))) void *alloc_weights(void) {
  void *p = NULL;
  return cudaMalloc(&p, 4 * MiB) == cudaSuccess ? p : NULL;
}

__attribute__((noinline, visibility("default"))) void *alloc_activations(void) {
  void *p = NULL;
  return cudaMalloc(&p, 3 * MiB) == cudaSuccess ? p : NULL;
}

/* READER with args, stdout into DIR/out and stderr appended to it, no
 * shell in between; its exit status, or 128 + the signal that ended it. */
static int reader(const char *const *args, const char *dir, const char *out) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, out);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int st = -1;
  if (posix_spawn(&pid, args[0], &fa, NULL, (char *const *)args, environ) == 0) waitpid(pid, &st, 0);
  posix_spawn_file_actions_destroy(&fa);
  if (st == -1) return 127;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int (*push)(const char *) = (int (*)(const char *))prog_sym("cudapool_push_tag");
  int (*pop)(void) = (int (*)(void))prog_sym("cudapool_pop_tag");
  if (!push || !pop) {
    printf("live_extras: no_api=1\n");
    return 0;
  }
  int errors = push("load") != 0;
  void *w = alloc_weights();
  errors += pop() != 0;
  errors += push("step") != 0;
  void *a = alloc_activations();
  errors += !w + !a;
  char pid[32], snap[512], bad[512];
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  snprintf(snap, sizeof snap, "%s/snap-%%p.json", argv[2]);
  snprintf(bad, sizeof bad, "%s/none/snap.json", argv[2]);
  /* A long timeout: a loaded machine under a sanitizer may be slow to
   * schedule the publisher, and an answer must come whatever the speed. */
  int text = reader((const char *const[]){argv[1], pid, "--timeout", "120", NULL}, argv[2], "stats.txt");
  int json = reader((const char *const[]){argv[1], pid, "--json", "--timeout", "120", NULL}, argv[2], "stats.json");
  int snapped = reader((const char *const[]){argv[1], "--snapshot", pid, "-o", snap, "--timeout", "120", NULL},
                       argv[2], "snap.out");
  int refused = reader((const char *const[]){argv[1], "--snapshot", pid, "-o", bad, "--timeout", "120", NULL},
                       argv[2], "snap-bad.out");
  printf("info: text=%d json=%d snap=%d bad=%d pid=%s\n", text, json, snapped, refused, pid);
  errors += pop() != 0;
  errors += (cudaFree(w) != cudaSuccess) + (cudaFree(a) != cudaSuccess);
  printf("live_extras: errors=%d\n", errors);
  return 0;
}
