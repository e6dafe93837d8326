/* live.c: a program whose live counters are read from outside while it runs
 * (`cudapool stats PID`, tools/live/).
 *
 *   live READER DIR [kill9|term]
 * makes an exact sequence (a 1 MiB pair, then 1 MiB, 512 bytes and 5 MiB
 * allocated and the 5 MiB freed: 2 hits, 2 misses, two blocks live), then,
 * with nothing allocated after that, runs READER on its own pid three
 * times, writing DIR/live.txt (the table), DIR/live.json (--json),
 * DIR/top.txt (--top, two refreshes 0.1 s apart: the second has rates) and
 * DIR/prom.txt (--prometheus), and exits. Prints
 *   info: text=RC json=RC top=RC prom=RC file=MODE
 * the readers' exit statuses and the permission bits of its live stats file
 * (none: no file), and "live: errors=N" (the CUDA calls that failed).
 * kill9 / term: instead of reading, end by SIGKILL (which leaves the file
 * behind, stale) or SIGTERM (whose orderly end removes it) after that line. */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "progs.h"

/* Runs READER with args (NULL-terminated) and its stdout in DIR/out, with
 * no shell in between (a shell under the sanitizers' preload may not run);
 * its exit status, or 128 + the signal that ended it. */
static int reader(const char *const *args, const char *dir, const char *out) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, out);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int st = -1;
  if (posix_spawn(&pid, args[0], &fa, NULL, (char *const *)args, environ) == 0) waitpid(pid, &st, 0);
  posix_spawn_file_actions_destroy(&fa);
  if (st == -1) return 127;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int errors = 0;
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  errors += cudaMalloc(&a, MiB) != cudaSuccess;
  errors += cudaFree(a) != cudaSuccess;
  errors += cudaMalloc(&b, MiB) != cudaSuccess;
  errors += cudaMalloc(&c, 512) != cudaSuccess;
  errors += cudaMalloc(&d, 5 * MiB) != cudaSuccess;
  errors += cudaFree(d) != cudaSuccess;
  printf("live: errors=%d\n", errors);
  fflush(stdout);
  if (argc > 3) {
    raise(strcmp(argv[3], "kill9") == 0 ? SIGKILL : SIGTERM);
    for (;;) pause();
  }

  char pid[32], file[128];
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  /* A long timeout: a loaded machine under a sanitizer may be slow to
   * schedule the publisher, and an answer must come whatever the speed. */
  int text = reader((const char *const[]){argv[1], pid, "--timeout", "120", NULL}, argv[2], "live.txt");
  int json =
      reader((const char *const[]){argv[1], pid, "--json", "--timeout", "120", NULL}, argv[2], "live.json");
  int top = reader((const char *const[]){argv[1], "--top", "--iterations", "2", "--interval", "0.1", "--timeout",
                                         "120", NULL},
                   argv[2], "top.txt");
  int prom = reader((const char *const[]){argv[1], pid, "--prometheus", "--timeout", "120", NULL}, argv[2],
                    "prom.txt");
  snprintf(file, sizeof file, "/dev/shm/cudapool.%lu.%ld", (unsigned long)geteuid(), (long)getpid());
  struct stat st;
  if (lstat(file, &st) == 0)
    printf("info: text=%d json=%d top=%d prom=%d file=%03o\n", text, json, top, prom,
           (unsigned)(st.st_mode & 07777));
  else
    printf("info: text=%d json=%d top=%d prom=%d file=none\n", text, json, top, prom);
  return 0;
}
