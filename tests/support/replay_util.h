/* replay_util.h: helpers shared by the tests of tests/unit/replay and by
 * tests/unit/shim/trace.c: a private temporary folder per test, the
 * repository root (for traces/ and scripts/), and running a command while
 * capturing its output. */
#ifndef CUDAPOOL_TESTS_REPLAY_UTIL_H
#define CUDAPOOL_TESTS_REPLAY_UTIL_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A fresh folder under /tmp; *dir must hold 64 bytes. 0 or -1. */
static inline int ru_mkdtemp(char *dir) {
  snprintf(dir, 64, "/tmp/cp-replay-test-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static inline void ru_rmtree(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* The repository root: the first folder above this executable that holds
 * traces/ and scripts/ (build/tests/unit_replay_tests, build/asan/tests/...). */
static inline int ru_repo_root(char *out, size_t cap) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return -1;
  path[n] = '\0';
  for (int up = 0; up < 6; up++) {
    char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path) return -1;
    *slash = '\0';
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/scripts/cudapool-plot", path);
    if (access(probe, F_OK) == 0 && strlen(path) < cap) {
      strcpy(out, path);
      return 0;
    }
  }
  return -1;
}

/* The replay binary next to this test binary's folder (BUILD/cudapool-replay). */
static inline int ru_replay_bin(char *out, size_t cap) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return -1;
  path[n] = '\0';
  for (int k = 0; k < 2; k++) {
    char *slash = strrchr(path, '/');
    if (slash == NULL) return -1;
    *slash = '\0';
  }
  if ((size_t)snprintf(out, cap, "%s/cudapool-replay", path) >= cap) return -1;
  return 0;
}

/* Run cmd with sh; stdout (and stderr when merged is set) into a malloc'd
 * string. Returns the exit status, or -1. */
static inline int ru_run(const char *cmd, char **out) {
  FILE *p = popen(cmd, "r");
  if (p == NULL) return -1;
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
    len += got;
    if (cap - len < 1024) {
      char *g = realloc(buf, cap * 2);
      if (g == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = g;
      cap *= 2;
    }
  }
  int st = pclose(p);
  if (buf) buf[len] = '\0';
  *out = buf;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
