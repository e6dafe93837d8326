/* it_run.c: see it_run.h. Programs run in a child process whose stdout and
 * stderr go to unlinked temporary files, read back after it exits; a child
 * that hangs is killed by SIGALRM after IT_DEADLINE_S so a deadlock fails a
 * test instead of stalling the suite (a safety net, never a timing check).
 * Invariant: every string handed out lives in it_result until it_free, and
 * is also listed in `owned`, so that a test failing before it_free (which
 * leaves the test early) does not show up as a leak under LeakSanitizer. */
#include "it_run.h"

#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cudapool.h"

#define IT_DEADLINE_S 300

extern char **environ;

static char *owned[1024];

static char *own(char *s) {
  for (size_t i = 0; s && i < sizeof owned / sizeof *owned; i++)
    if (!owned[i]) {
      owned[i] = s;
      break;
    }
  return s;
}

static void disown_free(char *s) {
  for (size_t i = 0; s && i < sizeof owned / sizeof *owned; i++)
    if (owned[i] == s) owned[i] = NULL;
  free(s);
}

static char *keep(it_result *r, char *s) {
  if (!s) return NULL;
  if (r->nkept == IT_MAX_KEPT) {
    free(s);
    return NULL;
  }
  r->kept[r->nkept++] = own(s);
  return s;
}

const char *it_fake_driver_env(void) {
  static char env[PATH_MAX + 32];
  snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s/fakecuda", it_build());
  return env;
}

const char *it_build(void) {
  static char dir[PATH_MAX];
  if (dir[0]) return dir;
  const char *b = getenv("CUDAPOOL_TEST_BUILD");
  if (b && *b) {
    snprintf(dir, sizeof dir, "%s", b);
  } else {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    snprintf(dir, sizeof dir, "%s", dirname(dirname(exe)));
  }
  return dir;
}

#define IT_STR_(x) #x
#define IT_STR(x) IT_STR_(x)
#define IT_SONAME "libcudapool.so." IT_STR(CUDAPOOL_VERSION_MAJOR)

const char *it_shim_name(int how) {
  switch (how) {
    case IT_SHIM: return "libcudapool.so";
    case IT_SHIM_SONAME: return IT_SONAME;
    case IT_SHIM_FILE: return IT_SONAME "." IT_STR(CUDAPOOL_VERSION_MINOR) "." IT_STR(CUDAPOOL_VERSION_PATCH);
    default: return "";
  }
}

static int dropped(const char *e) {
  return strncmp(e, "LD_PRELOAD=", 11) == 0 || strncmp(e, "FAKECUDA_", 9) == 0 ||
         (strncmp(e, "CUDAPOOL_", 9) == 0 && strncmp(e, "CUDAPOOL_TEST_", 14) != 0);
}

static char **make_env(int how, const char *const *env, char *preload, size_t cap) {
  size_t n = 0, extra = 0;
  while (environ[n]) n++;
  while (env && env[extra]) extra++;
  char **out = calloc(n + extra + 4, sizeof *out);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!dropped(environ[i])) out[k++] = environ[i];
  bool interval_given = false, coop_given = false;
  for (size_t i = 0; i < extra; i++) {
    out[k++] = (char *)env[i];
    interval_given |= strncmp(env[i], "CUDAPOOL_RECLAIM_INTERVAL=", 26) == 0;
    coop_given |= strncmp(env[i], "CUDAPOOL_COOP_WAIT=", 19) == 0;
  }
  /* Cooperation empties other processes' caches on an out-of-memory: off
   * unless a test asks for it (coop_mt.c), so that tests running at once
   * do not empty each other's caches. */
  if (!coop_given) out[k++] = "CUDAPOOL_COOP_WAIT=0";
  /* The reclaimer's passes come with time, not with the program's calls:
   * off unless a test asks for it (reclaim_mt.c), so that exact figures
   * after exact sequences stay exact. */
  if (!interval_given) out[k++] = "CUDAPOOL_RECLAIM_INTERVAL=0";
  const char *san = getenv("CUDAPOOL_TEST_SAN_PRELOAD");
  bool shim = how != IT_NATIVE;
  snprintf(preload, cap, "LD_PRELOAD=%s%s%s%s%s", san ? san : "", san && *san && shim ? " " : "",
           shim ? it_build() : "", shim ? "/" : "", it_shim_name(how));
  out[k++] = preload;
  return out;
}

static char *slurp(FILE *f) {
  fflush(f);
  long n = ftell(f);
  if (n < 0) n = 0;
  char *s = malloc((size_t)n + 1);
  rewind(f);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = '\0';
  return s;
}

int it_run(it_result *r, int how, const char *const *env, const char *prog, const char *const *argv) {
  memset(r, 0, sizeof *r);
  char path[PATH_MAX + 64], preload[2 * PATH_MAX];
  snprintf(path, sizeof path, "%s/progs/%s", it_build(), prog);
  const char *args[64] = {path};
  for (int i = 0; argv && argv[i] && i < 62; i++) args[i + 1] = argv[i];
  char **envp = make_env(how, env, preload, sizeof preload);
  FILE *out = tmpfile(), *err = tmpfile();
  if (!out || !err) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    alarm(IT_DEADLINE_S);
    execve(path, (char *const *)args, envp);
    _exit(127);
  }
  free(envp);
  if (pid < 0) return -1;
  int st = 0;
  waitpid(pid, &st, 0);
  r->pid = pid;
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r->out = own(slurp(out));
  r->err = own(slurp(err));
  fclose(out);
  fclose(err);
  return 0;
}

void it_free(it_result *r) {
  disown_free(r->out);
  disown_free(r->err);
  for (int i = 0; i < r->nkept; i++) disown_free(r->kept[i]);
  memset(r, 0, sizeof *r);
}

const char *it_line(it_result *r, const char *tag) {
  size_t tl = strlen(tag);
  for (const char *l = r->out; l && *l;) {
    const char *nl = strchr(l, '\n');
    size_t len = nl ? (size_t)(nl - l) : strlen(l);
    if (len > tl && strncmp(l, tag, tl) == 0 && l[tl] == ':') return keep(r, strndup(l, len));
    l = nl ? nl + 1 : l + len;
  }
  return NULL;
}

long it_val(it_result *r, const char *tag, const char *key, long missing) {
  const char *l = it_line(r, tag);
  if (!l) return missing;
  size_t kl = strlen(key);
  for (const char *p = strchr(l, ' '); p; p = strchr(p + 1, ' '))
    if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == '=') return strtol(p + 2 + kl, NULL, 10);
  return missing;
}

const char *it_compared(it_result *r) {
  size_t n = r->out ? strlen(r->out) : 0;
  char *s = malloc(n + 1), *w = s;
  for (const char *l = r->out; l && *l;) {
    const char *nl = strchr(l, '\n');
    size_t len = nl ? (size_t)(nl - l) + 1 : strlen(l);
    if (strncmp(l, "pool:", 5) != 0 && strncmp(l, "info:", 5) != 0) {
      memcpy(w, l, len);
      w += len;
    }
    l += len;
  }
  *w = '\0';
  return keep(r, s);
}

int it_count_lines(const char *text, const char *needle) {
  int n = 0;
  for (const char *l = text; l && *l;) {
    const char *nl = strchr(l, '\n');
    size_t len = nl ? (size_t)(nl - l) : strlen(l);
    char *line = strndup(l, len);
    n += strstr(line, needle) != NULL;
    free(line);
    l = nl ? nl + 1 : l + len;
  }
  return n;
}

const char *it_shell(it_result *r, const char *cmd) {
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  size_t cap = 4096, n = 0;
  char *s = malloc(cap);
  size_t got;
  while ((got = fread(s + n, 1, cap - n - 1, p)) > 0) {
    n += got;
    if (cap - n < 2) s = realloc(s, cap *= 2);
  }
  s[n] = '\0';
  pclose(p);
  return keep(r, s);
}
