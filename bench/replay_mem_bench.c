/* replay_mem_bench.c: the replayer's memory against the trace's length.
 *
 *   replay_mem_bench [PATH/TO/cudapool-replay]   (default: ../cudapool-replay
 *                                                 next to this program)
 *
 * Writes gzip'd traces of 200,000, 800,000 and 3,200,000 events (a loop
 * with 64 blocks live, two threads' chunks interleaved as the recorder
 * writes them), replays each once and prints the replayer's peak resident
 * memory (getrusage of the child):
 *   replay_memory: N events, F MiB gzip'd, max RSS R MiB
 * A streamed trace's R stays flat as N grows (tools/replay/load.c). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

/* pairs allocate/free pairs into path; 0 or -1. */
static int write_trace(const char *path, long pairs) {
  gzFile f = gzopen(path, "wb1");
  if (!f) return -1;
  gzputs(f, "Thread,Time,Action,Pointer,Size,Stream\n");
  const long chunk = 1000; /* lines per thread chunk */
  for (long base = 0; base < pairs; base += 2 * chunk)
    for (int thread = 1; thread <= 2; thread++)
      for (long i = base; i < base + 2 * chunk && i < pairs; i += 2) {
        long k = i + thread - 1;
        double t = (double)k * 1e-6;
        unsigned long ptr = 0x100000ul * (unsigned long)(1 + k % 64) + (unsigned long)thread * 0x10000000ul;
        gzprintf(f, "%d,%.9f,allocate,0x%lx,%ld,(nil)\n%d,%.9f,free,0x%lx,0,(nil)\n", thread, t, ptr,
                 512 * (1 + k % 97), thread, t + 5e-7, ptr);
      }
  return gzclose(f) == Z_OK ? 0 : -1;
}

int main(int argc, char **argv) {
  char replay[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", replay, sizeof replay - 32);
  char *slash = n > 0 ? (replay[n] = '\0', strrchr(replay, '/')) : NULL;
  if (argc > 1)
    snprintf(replay, sizeof replay, "%s", argv[1]);
  else if (slash)
    strcpy(slash, "/../cudapool-replay");
  else
    return 2;
  char path[64];
  snprintf(path, sizeof path, "/tmp/cudapool-replay-mem-%ld.csv.gz", (long)getpid());
  for (long pairs = 100000; pairs <= 1600000; pairs *= 4) {
    if (write_trace(path, pairs) != 0) {
      perror("replay_mem_bench: writing the trace");
      return 1;
    }
    struct stat st;
    stat(path, &st);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      if (!freopen("/dev/null", "w", stdout)) _exit(127);
      execl(replay, replay, path, "--repeat", "1", (char *)NULL);
      _exit(127);
    }
    int status;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "replay_mem_bench: the replay failed\n");
      unlink(path);
      return 1;
    }
    printf("replay_memory: %ld events, %.1f MiB gzip'd, max RSS %.1f MiB\n", 2 * pairs,
           (double)st.st_size / (1 << 20), (double)ru.ru_maxrss / 1024);
  }
  unlink(path);
  return 0;
}
