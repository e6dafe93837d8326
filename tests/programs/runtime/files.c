/* files.c: a program for the tests of cudapool's output files
 * (tests/shim_it_files.c). It makes 10 cudaMalloc/cudaFree pairs, so that a
 * trace and a report have something in them, after doing what its arguments
 * say, in order; in each PATTERN every %p is this process's pid, as in
 * CUDAPOOL_STATS/CUDAPOOL_TRACE:
 *   symlink PATTERN TARGET  plant a symbolic link PATTERN -> TARGET
 *   file PATTERN            plant a regular file holding "planted\n"
 *   fork PATTERN            fork a child that exits at once (its destructors
 *                           run), wait for it, then print
 *                           "files: parent_name_taken=0|1": whether a file
 *                           PATTERN for this process's pid exists already
 *   swap PATTERN TARGET     make a first CUDA call (the shim opens its
 *                           trace then), then make the descriptor open on
 *                           PATTERN write to TARGET from now on
 * Prints "files: pid=N errors=E". Exit status 0, or 2 for a bad argument or
 * an action that failed. */
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"

static void expand(const char *pattern, char *out, size_t cap) {
  size_t n = 0;
  for (const char *s = pattern; *s && n + 24 < cap; s++) {
    if (s[0] == '%' && s[1] == 'p') {
      n += (size_t)snprintf(out + n, cap - n, "%ld", (long)getpid());
      s++;
    } else {
      out[n++] = *s;
    }
  }
  out[n] = '\0';
}

/* dup2 TARGET onto the descriptor whose file is path; 0 or -1. */
static int swap(const char *path, const char *target) {
  char link[64], got[4096];
  for (int fd = 3; fd < 1024; fd++) {
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, got, sizeof got - 1);
    if (n < 0) continue;
    got[n] = '\0';
    if (strcmp(got, path) != 0) continue;
    int t = open(target, O_WRONLY);
    if (t < 0 || dup2(t, fd) < 0) return -1;
    close(t);
    return 0;
  }
  return -1;
}

int main(int argc, char **argv) {
  char path[4096];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "symlink") == 0 && i + 2 < argc) {
      expand(argv[i + 1], path, sizeof path);
      if (symlink(argv[i + 2], path) != 0) return 2;
      i += 2;
    } else if (strcmp(argv[i], "file") == 0 && i + 1 < argc) {
      expand(argv[++i], path, sizeof path);
      FILE *f = fopen(path, "wx");
      if (f == NULL || fputs("planted\n", f) < 0 || fclose(f) != 0) return 2;
    } else if (strcmp(argv[i], "fork") == 0 && i + 1 < argc) {
      expand(argv[++i], path, sizeof path);
      fflush(NULL);
      pid_t pid = fork();
      if (pid < 0) return 2;
      if (pid == 0) exit(0);
      int st;
      if (waitpid(pid, &st, 0) != pid) return 2;
      printf("files: parent_name_taken=%d\n", access(path, F_OK) == 0);
    } else if (strcmp(argv[i], "swap") == 0 && i + 2 < argc) {
      cudaFree(NULL); /* the shim opens its trace at the first CUDA call */
      expand(argv[i + 1], path, sizeof path);
      if (swap(path, argv[i + 2]) != 0) return 2;
      i += 2;
    } else {
      fprintf(stderr, "files: bad argument %s\n", argv[i]);
      return 2;
    }
  }
  int errors = 0;
  for (int i = 0; i < 10; i++) {
    void *p = NULL;
    if (cudaMalloc(&p, MiB) != cudaSuccess || !p) errors++;
    if (cudaFree(p) != cudaSuccess) errors++;
  }
  printf("files: pid=%ld errors=%d\n", (long)getpid(), errors);
  return 0;
}
