/* trace.c: the recorder (common/trace.c) and its round trip through
 * the replayer.
 *
 * The exact line format, many threads crossing buffer boundaries and exiting
 * before close, close twice and reopen (nothing of one file lands in the
 * next), open errors, fork, and a kill -9 in the middle of recording that
 * leaves a file the replayer reads without a single bad line; the same
 * through gzip (a name ending in .gz). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "replay.h"
#include "replay_util.h"
#include "trace.h"

static char dir[64];
static void mk(void) { cr_assert(eq(int, ru_mkdtemp(dir), 0)); }
static void rm(void) { ru_rmtree(dir); }
TestSuite(trace, .init = mk, .fini = rm);

static void path_of(char *out, const char *name) { snprintf(out, 128, "%s/%s", dir, name); }

/* The whole file, decompressed when it is gzip'd (zlib reads plain files
 * as they are). */
static char *slurp(const char *path) {
  gzFile f = gzopen(path, "rb");
  cr_assert(not(eq(ptr, f, NULL)), "%s", path);
  size_t len = 0, cap = 1 << 16;
  char *s = malloc(cap);
  for (int n; s && (n = gzread(f, s + len, (unsigned)(cap - len - 1))) > 0;) {
    len += (size_t)n;
    if (cap - len < 2) s = realloc(s, cap *= 2);
  }
  cr_assert(not(eq(ptr, s, NULL)));
  s[len] = '\0';
  gzclose(f);
  return s;
}

/* Whether the file on disk starts with gzip's magic bytes. */
static bool gzip_magic(const char *path) {
  unsigned char m[2] = {0, 0};
  FILE *f = fopen(path, "rb");
  cr_assert(not(eq(ptr, f, NULL)), "%s", path);
  size_t n = fread(m, 1, 2, f);
  fclose(f);
  return n == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

/* "TID,SECONDS.NNNNNNNNN,REST": checks the first two columns, returns REST. */
static const char *check_prefix(const char *line, long tid, double *time) {
  char *end;
  cr_assert(eq(long, strtol(line, &end, 10), tid), "%.80s", line);
  cr_assert(eq(chr, *end, ','));
  const char *t = end + 1, *dot = strchr(t, '.');
  cr_assert(not(eq(ptr, (void *)dot, NULL)));
  for (int i = 1; i <= 9; i++) cr_assert(dot[i] >= '0' && dot[i] <= '9', "nine decimals: %.40s", line);
  cr_assert(eq(chr, dot[10], ','));
  *time = strtod(t, NULL);
  return dot + 11;
}

Test(trace, exact_lines_and_round_trip) {
  char path[128];
  path_of(path, "t.csv");
  cr_assert(not(cp_trace_enabled()));
  cr_assert(eq(int, cp_trace_open(path), 0));
  cr_assert(cp_trace_enabled());
  cp_trace_alloc(0x7f0000001000, 4096, 0);
  cp_trace_sync_stream(0x55d0c0);
  cp_trace_alloc_failure(1ull << 40, 0x10);
  cp_trace_extra("barrier", 0x7f0000000000, 2097152, 0);
  cp_trace_free(0x7f0000001000, 4096, 0);
  cp_trace_sync_device();
  cp_trace_close();
  cr_assert(not(cp_trace_enabled()));
  uint64_t written, dropped;
  cp_trace_counts(&written, &dropped);
  cr_assert(eq(u64, written, 6));
  cr_assert(eq(u64, dropped, 0));

  static const char *const rest[] = {
      "allocate,0x7f0000001000,4096,(nil)",
      "sync_stream,(nil),0,0x55d0c0",
      "allocate failure,(nil),1099511627776,0x10",
      "barrier,0x7f0000000000,2097152,(nil)",
      "free,0x7f0000001000,4096,(nil)",
      "sync_device,(nil),0,(nil)",
  };
  char *text = slurp(path), *save = NULL;
  char *line = strtok_r(text, "\n", &save);
  cr_assert(eq(str, line, "Thread,Time,Action,Pointer,Size,Stream"));
  long tid = (long)syscall(SYS_gettid);
  double prev = 0, t;
  for (int i = 0; i < 6; i++) {
    line = strtok_r(NULL, "\n", &save);
    cr_assert(not(eq(ptr, line, NULL)));
    cr_assert(eq(str, (char *)check_prefix(line, tid, &t), (char *)rest[i]));
    cr_assert(ge(dbl, t, prev));
    prev = t;
  }
  cr_assert(eq(ptr, strtok_r(NULL, "\n", &save), NULL));
  free(text);

  rp_load_opts_t lo = {.name = path, .err = stderr, .stop_on_error = true};
  rp_trace_t tr;
  cr_assert(eq(int, rp_load_file(path, &lo, &tr), 0));
  cr_assert(eq(sz, tr.allocs, 1));
  cr_assert(eq(sz, tr.frees, 1));
  cr_assert(eq(sz, tr.syncs, 2));
  cr_assert(eq(sz, tr.alloc_failures, 1));
  cr_assert(eq(sz, tr.skipped, 1));
  rp_opts_t o;
  rp_opts_default(&o);
  o.repeat = 1;
  rp_result_t r;
  cr_assert(eq(int, rp_run(&tr, &o, &r), 0));
  cr_assert(eq(u64, r.peak_allocated, 4096));
  cr_assert(eq(u64, r.peak_reserved, 2u << 20));
  rp_result_free(&r);
  rp_trace_free(&tr);
}

#define THREADS 4
#define PAIRS 5000 /* 10,000 events a thread: several 64 KiB buffers */

static void *record_pairs(void *arg) {
  uintptr_t base = (uintptr_t)arg << 32;
  for (uintptr_t i = 0; i < PAIRS; i++) {
    cp_trace_alloc(base + i * 4096, 512 + i, 0);
    cp_trace_free(base + i * 4096, 0, 0);
  }
  return NULL; /* the thread's last buffer is flushed by its exit */
}

static void threads_exit_before_close(const char *name) {
  char path[128];
  path_of(path, name);
  cr_assert(eq(int, cp_trace_open(path), 0));
  pthread_t th[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++)
    cr_assert(eq(int, pthread_create(&th[i], NULL, record_pairs, (void *)(i + 1)), 0));
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  cp_trace_close();
  uint64_t written, dropped;
  cp_trace_counts(&written, &dropped);
  cr_assert(eq(u64, written, THREADS * PAIRS * 2));
  cr_assert(eq(u64, dropped, 0));

  /* Per thread, lines are in time order in the file. */
  char *text = slurp(path), *save = NULL;
  long tids[THREADS] = {0};
  double last[THREADS] = {0};
  size_t lines = 0;
  strtok_r(text, "\n", &save);
  for (char *l = strtok_r(NULL, "\n", &save); l; l = strtok_r(NULL, "\n", &save), lines++) {
    long tid = strtol(l, NULL, 10);
    int k = 0;
    while (k < THREADS && tids[k] != 0 && tids[k] != tid) k++;
    cr_assert(lt(int, k, THREADS), "at most %d threads", THREADS);
    tids[k] = tid;
    double t;
    check_prefix(l, tid, &t);
    cr_assert(ge(dbl, t, last[k]), "line %zu", lines + 2);
    last[k] = t;
  }
  cr_assert(eq(sz, lines, THREADS * PAIRS * 2));
  free(text);

  rp_load_opts_t lo = {.name = path, .err = stderr, .stop_on_error = true};
  rp_trace_t tr;
  cr_assert(eq(int, rp_load_file(path, &lo, &tr), 0));
  cr_assert(eq(sz, tr.allocs, THREADS * PAIRS));
  cr_assert(eq(sz, tr.frees, THREADS * PAIRS));
  rp_trace_free(&tr);
}

Test(trace, threads_exit_before_close) {
  threads_exit_before_close("threads.csv");
  char path[128];
  path_of(path, "threads.csv");
  cr_assert(not(gzip_magic(path)));
}

/* The same lines through gzip: the file is gzip, every line arrives, and
 * the replayer reads it as it reads the plain one. */
Test(trace, gzip_round_trip) {
  threads_exit_before_close("threads.csv.gz");
  char path[128];
  path_of(path, "threads.csv.gz");
  cr_assert(gzip_magic(path));
}

Test(trace, close_twice_and_reopen) {
  char a[128], b[128];
  path_of(a, "a.csv");
  path_of(b, "b.csv");
  cr_assert(eq(int, cp_trace_open(a), 0));
  cr_assert(eq(int, cp_trace_open(b), EBUSY));
  cp_trace_alloc(0x1000, 512, 0);
  cp_trace_close();
  cp_trace_close();
  cp_trace_alloc(0x2000, 512, 0); /* closed: not recorded anywhere */
  cr_assert(eq(int, cp_trace_open(b), 0));
  cp_trace_free(0x1000, 0, 0);
  cp_trace_close();
  char *ta = slurp(a), *tb = slurp(b);
  cr_assert(not(eq(ptr, strstr(ta, ",allocate,0x1000,512,(nil)\n"), NULL)));
  cr_assert(eq(ptr, strstr(ta, "0x2000"), NULL));
  cr_assert(eq(ptr, strstr(tb, "allocate"), NULL), "%s", tb);
  cr_assert(not(eq(ptr, strstr(tb, ",free,0x1000,0,(nil)\n"), NULL)));
  free(ta);
  free(tb);
}

Test(trace, open_errors) {
  char path[128];
  path_of(path, "no/such/dir.csv");
  cr_assert(eq(int, cp_trace_open(path), ENOENT));
  cr_assert(eq(int, cp_trace_open(NULL), EINVAL));
  cr_assert(not(cp_trace_enabled()));
  cp_trace_alloc(0x1000, 1, 0); /* never opened: nothing happens */
  cp_trace_close();
}

/* bad_max: the bad lines allowed (a cut last line; with gzip, also the
 * missing trailer). */
static void kill9_leaves_a_parseable_file(const char *name, size_t bad_max) {
  char path[128];
  path_of(path, name);
  pid_t pid = fork();
  cr_assert(ge(int, pid, 0));
  if (pid == 0) {
    if (cp_trace_open(path) != 0) _exit(1);
    for (uintptr_t i = 0; i < 100000; i++) {
      cp_trace_alloc(0x10000 + i * 512, 512, 0);
      cp_trace_free(0x10000 + i * 512, 0, 0);
    }
    /* Wait (no sleep) until the writer has written something, then die
     * with buffers full and the writer possibly mid-way. */
    uint64_t written = 0;
    for (long spins = 0; written < 1000 && spins < 2000000000L; spins++) {
      cp_trace_counts(&written, NULL);
      sched_yield();
    }
    raise(SIGKILL);
    _exit(2);
  }
  int st;
  cr_assert(eq(int, waitpid(pid, &st, 0), pid));
  int sig = WIFSIGNALED(st) ? WTERMSIG(st) : -1;
  cr_assert(eq(int, sig, SIGKILL), "status %d", st);
  rp_load_opts_t lo = {.name = path, .err = stderr};
  rp_trace_t tr;
  cr_assert(eq(int, rp_load_file(path, &lo, &tr), 0));
  /* Every write is whole lines, but Linux stops a write at a page boundary
   * once SIGKILL is pending: the last line may be cut, never more. */
  cr_assert(le(sz, tr.errors, bad_max), "%zu bad lines", tr.errors);
  cr_assert(ge(sz, tr.n, 1000));
  cr_assert(le(sz, tr.n, 200000));
  rp_trace_free(&tr);
}

Test(trace, kill9_leaves_a_parseable_file) { kill9_leaves_a_parseable_file("killed.csv", 1); }

Test(trace, kill9_leaves_a_parseable_gzip_file) { kill9_leaves_a_parseable_file("killed.csv.gz", 2); }

/* A program that forks (PyTorch's DataLoader workers): the child records
 * nothing into the parent's file and can open its own. */
Test(trace, fork_child_starts_closed) {
  char parent[128], child[128];
  path_of(parent, "parent.csv");
  path_of(child, "child.csv");
  cr_assert(eq(int, cp_trace_open(parent), 0));
  cp_trace_alloc(0x1000, 512, 0);
  pid_t pid = fork();
  cr_assert(ge(int, pid, 0));
  if (pid == 0) {
    int bad = cp_trace_enabled();
    cp_trace_alloc(0xdead000, 512, 0); /* not recorded anywhere */
    bad |= cp_trace_open(child) != 0;
    cp_trace_alloc(0x2000, 512, 0);
    cp_trace_close();
    _exit(bad);
  }
  int st;
  cr_assert(eq(int, waitpid(pid, &st, 0), pid));
  cr_assert(eq(int, WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0));
  cp_trace_free(0x1000, 0, 0);
  cp_trace_close();
  char *tp = slurp(parent), *tc = slurp(child);
  cr_assert(not(eq(ptr, strstr(tp, ",allocate,0x1000,512,(nil)\n"), NULL)), "%s", tp);
  cr_assert(not(eq(ptr, strstr(tp, ",free,0x1000,0,(nil)\n"), NULL)), "%s", tp);
  cr_assert(eq(ptr, strstr(tp, "0x2000"), NULL));
  cr_assert(eq(ptr, strstr(tp, "0xdead000"), NULL));
  cr_assert(not(eq(ptr, strstr(tc, ",allocate,0x2000,512,(nil)\n"), NULL)), "%s", tc);
  cr_assert(eq(ptr, strstr(tc, "0x1000"), NULL), "%s", tc);
  cr_assert(eq(ptr, strstr(tc, "0xdead000"), NULL), "%s", tc);
  free(tp);
  free(tc);
}
