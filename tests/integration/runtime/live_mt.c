/* live_mt.c: the live counters of a running process, read from outside
 * (cudapool-stats: `cudapool stats PID`, `cudapool top`; shim/state/live.c).
 *
 * Decisions pinned here, and documented in docs/OPTIONS.md:
 *   - at a quiescent point, what a reader prints is byte for byte what the
 *     exit report then says, table and JSON (one code prints both);
 *   - the file is /dev/shm/cudapool.<euid>.<pid>, mode 0600, removed at exit
 *     and on SIGTERM; a process killed by SIGKILL leaves it, a reader calls
 *     it stale (status 1) and `--top` removes it;
 *   - no file natively, nor with CUDAPOOL_LIVE=0: the reader says so (1);
 *   - usage errors exit 2.
 * Program: tests/programs/runtime/live.c (runs the reader on itself).
 *
 * One test of this suite at a time (a lock file held from its init to its
 * fini): every run of the program runs `--top`, which removes the stale
 * file another test's killed process left for its reader. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "it_check.h"
#include "live_layout.h"

static char dir[64], reader[512];
static int serial_fd = -1;

static void mk(void) {
  char lock[512];
  snprintf(lock, sizeof lock, "%s/tests/live-suite.lock", it_build());
  serial_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  cr_assert(ge(int, serial_fd, 0), "%s", lock);
  cr_assert(eq(int, flock(serial_fd, LOCK_EX), 0));
  snprintf(dir, sizeof dir, "/tmp/cp-live-it-XXXXXX");
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(reader, sizeof reader, "%s/cudapool-stats", it_build());
}

static void rm(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  close(serial_fd); /* the next test of the suite may run */
}

TestSuite(live, .init = mk, .fini = rm);

/* The file dir/name (kept in r), "<missing>" when it does not exist. */
static const char *contents(it_result *r, const char *name) {
  char path[256], cmd[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (access(path, F_OK) != 0) return "<missing>";
  snprintf(cmd, sizeof cmd, "cat '%s'", path);
  const char *s = it_shell(r, cmd);
  cr_assert(ne(ptr, (void *)s, NULL));
  return s;
}

static void shm_path(char *out, size_t cap, pid_t pid) {
  snprintf(out, cap, "/dev/shm/cudapool.%lu.%ld", (unsigned long)geteuid(), (long)pid);
}

/* Runs the program under the shim (or natively) with env, and checks that
 * it ran its sequence without a CUDA error. */
static void run_live(it_result *r, int how, const char *const *env, const char *mode) {
  const char *const args[] = {reader, dir, mode, NULL};
  cr_assert(eq(int, it_run(r, how, env, "live", mode ? args : IT_ARGS(reader, dir)), 0));
  cr_assert(ne(ptr, (void *)strstr(r->out, "live: errors=0\n"), NULL), "%s\n%s", r->out, r->err);
}

/* The exit report less what only the report at exit says (the text's
 * "still allocated at exit" lines; the JSON's "process" object, which the
 * live view does not carry, and "still_allocated"): each must be there. */
static char *without_end_only(const char *report, bool json) {
  char *out = strdup(report);
  cr_assert(ne(ptr, out, NULL));
  static const char *const json_parts[] = {",\"process\":{", ",\"still_allocated\":{"};
  if (json) {
    for (int i = 0; i < 2; i++) {
      char *at = strstr(out, json_parts[i]), *end = at ? strchr(at, '}') : NULL;
      cr_assert(ne(ptr, end, NULL), "no %s in %s", json_parts[i], report);
      memmove(at, end + 1, strlen(end + 1) + 1);
    }
  } else {
    char *at = strstr(out, "cudapool: device 0: ");
    cr_assert(ne(ptr, at, NULL), "no still-allocated line in %s", report);
    cr_assert(ne(ptr, strstr(at, " still allocated at exit (never freed by the program)\n"), NULL), "%s", report);
    *at = '\0';
  }
  return out;
}

/* The current values `cudapool stats PID` prints after the table, at the
 * program's quiescent point (tests/programs/runtime/live.c): 1 MiB and 512
 * bytes live; the 5 MiB freed last still pending in its 20 MiB segment. */
#define NOW_LINE \
  "cudapool: now   dev 0: allocated 1.00 MiB in 2 blocks, reserved 22.00 MiB, cached 21.00 MiB (pending 20.00 MiB)\n"

/* must: a piece of the exit report that says the sequence was counted. The
 * live table is the exit report's followed by NOW_LINE. */
static void equal_to_the_exit_report(const char *format, const char *live_name, const char *exit_name,
                                     const char *must) {
  char stats[128], fmt[64];
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/%s", dir, exit_name);
  snprintf(fmt, sizeof fmt, "CUDAPOOL_STATS_FORMAT=%s", format);
  it_result s, f1, f2;
  run_live(&s, IT_SHIM, (const char *const[]){stats, fmt, NULL}, NULL);
  cr_assert(eq(int, s.status, 0), "%s", s.err);
  cr_assert(eq(str, (char *)it_line(&s, "info"), "info: text=0 json=0 top=0 prom=0 file=600"), "%s", s.err);
  memset(&f1, 0, sizeof f1);
  memset(&f2, 0, sizeof f2);
  const char *exit_report = contents(&f1, exit_name);
  cr_assert(ne(ptr, (void *)strstr(exit_report, must), NULL), "%s", exit_report);
  bool json = strcmp(format, "json") == 0;
  char *table = without_end_only(exit_report, json), expected[8192];
  snprintf(expected, sizeof expected, "%s%s", table, json ? "" : NOW_LINE);
  cr_assert(eq(str, (char *)contents(&f2, live_name), expected));
  free(table);
  char path[128];
  shm_path(path, sizeof path, s.pid);
  cr_assert(ne(int, access(path, F_OK), 0), "%s was left behind", path);
  it_free(&f1);
  it_free(&f2);
  it_free(&s);
}

Test(live, json_while_running_equals_the_exit_report) {
  equal_to_the_exit_report("json", "live.json", "exit.json", "\"hits\":2,\"misses\":2,");
}

/* --prometheus: every metric's HELP and TYPE lines, then its sample of the
 * one process, labelled; exact values at the quiescent point. */
Test(live, prometheus_text_carries_every_counter_with_exact_values) {
  it_result s, f;
  run_live(&s, IT_SHIM, NULL, NULL);
  cr_assert(eq(str, (char *)it_line(&s, "info"), "info: text=0 json=0 top=0 prom=0 file=600"), "%s", s.err);
  memset(&f, 0, sizeof f);
  const char *prom = contents(&f, "prom.txt");
  char want[256];
  static const char *const samples[][2] = {
      {"allocated_bytes", "1049088"},    {"allocated_bytes_peak", "6291968"}, {"allocated_blocks", "2"},
      {"reserved_bytes", "23068672"},    {"hits_total", "2"},                 {"misses_total", "2"},
      {"num_alloc_total", "4"},          {"num_free_total", "2"},             {"segments", "2"},
  };
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
    snprintf(want, sizeof want, "\ncudapool_%s{pid=\"%ld\",device=\"0\"} %s\n", samples[i][0], (long)s.pid,
             samples[i][1]);
    cr_expect(ne(ptr, (void *)strstr(prom, want), NULL), "no %s in:\n%s", want + 1, prom);
  }
  cr_assert(eq(int, strncmp(prom, "# HELP cudapool_allocated_bytes bytes in blocks handed to the program", 68), 0),
            "%s", prom);
  cr_assert(ne(ptr, (void *)strstr(prom, "\n# TYPE cudapool_hits_total counter\n"), NULL), "%s", prom);
  cr_assert(ne(ptr, (void *)strstr(prom, "\n# TYPE cudapool_reserved_bytes gauge\n"), NULL), "%s", prom);
  /* 8 gauges (current and peak), 17 counters, 3 snapshot values, the
   * releasable bytes and 6 cooperation counters: a HELP, a TYPE and one
   * sample each. */
  cr_assert(eq(int, it_count_lines(prom, "# HELP "), 2 * 8 + 17 + 3 + 1 + 6), "%s", prom);
  cr_assert(eq(int, it_count_lines(prom, "{pid="), 2 * 8 + 17 + 3 + 1 + 6), "%s", prom);
  it_free(&f);
  it_free(&s);
}

Test(live, table_while_running_equals_the_exit_report_and_top_shows_it) {
  equal_to_the_exit_report("text", "live.txt", "exit.txt", " 2           2     50.0% ");
  it_result f1, f2;
  memset(&f1, 0, sizeof f1);
  memset(&f2, 0, sizeof f2);
  const char *top = contents(&f1, "top.txt");
  char *table = without_end_only(contents(&f2, "exit.txt"), false);
  cr_assert(eq(int, strncmp(top, "cudapool top: ", 14), 0), "%s", top);
  cr_assert(ne(ptr, (void *)strstr(top, table), NULL), "--- top\n%s--- exit report\n%s", top, table);
  /* Two refreshes: the first without rates, the second with them, all zero
   * (the program is waiting for its readers). */
  const char *second = strstr(top + 1, "cudapool top: ");
  cr_assert(ne(ptr, (void *)second, NULL), "%s", top);
  cr_assert(eq(ptr, (void *)strstr(top, "cudapool: rates"), (void *)strstr(second, "cudapool: rates")), "%s", top);
  const char *rates = strstr(second, "cudapool: rates dev 0 over ");
  cr_assert(ne(ptr, (void *)rates, NULL), "%s", top);
  const char *zero = " s: 0 allocs/s, 0 frees/s, 0 driver allocs/s, reserved +0 B/s\n";
  cr_assert(ne(ptr, (void *)strstr(rates, zero), NULL), "%s", top);
  int nows = 0;
  for (const char *at = strstr(top, NOW_LINE); at != NULL; at = strstr(at + 1, NOW_LINE)) nows++;
  cr_assert(eq(int, nows, 2), "%s", top);
  free(table);
  it_free(&f1);
  it_free(&f2);
}

Test(live, none_natively_nor_with_CUDAPOOL_LIVE_0) {
  it_result n, s;
  run_live(&n, IT_NATIVE, NULL, NULL);
  cr_assert(eq(str, (char *)it_line(&n, "info"), "info: text=1 json=1 top=0 prom=1 file=none"));
  run_live(&s, IT_SHIM, (const char *const[]){"CUDAPOOL_LIVE=0", NULL}, NULL);
  cr_assert(eq(str, (char *)it_line(&s, "info"), "info: text=1 json=1 top=0 prom=1 file=none"));
  /* The readers' messages, on the program's stderr. */
  cr_assert(eq(int, it_count_lines(s.err, "has no live stats"), 3), "%s", s.err);
  it_free(&n);
  it_free(&s);
}

Test(live, sigterm_removes_the_file) {
  it_result s;
  run_live(&s, IT_SHIM, NULL, "term");
  cr_assert(eq(int, s.status, 128 + SIGTERM), "%s", s.err);
  char path[128];
  shm_path(path, sizeof path, s.pid);
  cr_assert(ne(int, access(path, F_OK), 0), "%s was left behind", path);
  it_free(&s);
}

/* SIGKILL leaves the file: the reader calls it stale, --top removes it. */
Test(live, a_killed_process_is_stale_and_top_removes_it) {
  it_result s, r;
  run_live(&s, IT_SHIM, NULL, "kill9");
  cr_assert(eq(int, s.status, 128 + SIGKILL), "%s", s.err);
  char path[128], cmd[1024];
  shm_path(path, sizeof path, s.pid);
  cr_assert(eq(int, access(path, F_OK), 0), "no %s", path);
  snprintf(cmd, sizeof cmd, "'%s' %ld 2>&1; echo status=$?", reader, (long)s.pid);
  memset(&r, 0, sizeof r);
  const char *out = it_shell(&r, cmd);
  cr_assert(ne(ptr, (void *)strstr(out, "has ended"), NULL), "%s", out);
  cr_assert(ne(ptr, (void *)strstr(out, "status=1\n"), NULL), "%s", out);
  snprintf(cmd, sizeof cmd, "'%s' --top --iterations 1 >/dev/null; echo status=$?", reader);
  cr_assert(eq(str, (char *)it_shell(&r, cmd), "status=0\n"));
  cr_assert(ne(int, access(path, F_OK), 0), "%s is still there", path);
  it_free(&r);
  it_free(&s);
}

Test(live, usage_errors_exit_2) {
  static const char *const bad[] = {"",
                                    "abc",
                                    "--bogus 1",
                                    "1 2",
                                    "--top --json",
                                    "--timeout 0 1",
                                    "--iterations x --top",
                                    "99999999999999999999",
                                    "4294967297",
                                    "2147483648"}; /* not clamped to a pid: refused */
  it_result r;
  memset(&r, 0, sizeof r);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1; echo status=$?", reader, bad[i]);
    const char *out = it_shell(&r, cmd);
    cr_assert(ne(ptr, (void *)strstr(out, "cudapool-stats: "), NULL), "%s: %s", bad[i], out);
    cr_assert(ne(ptr, (void *)strstr(out, "status=2\n"), NULL), "%s: %s", bad[i], out);
  }
  it_free(&r);
}

/* What a segment says is its writer's: a header with terminal escapes is
 * shown escaped, and an answer stamped an hour from now is 0 s old, not
 * -3600. The segment is crafted for this (live, not answering) process. */
Test(live, crafted_header_escaped_and_age_never_negative) {
  static cp_live_segment_t seg;
  memcpy(seg.magic, CP_LIVE_MAGIC, sizeof CP_LIVE_MAGIC);
  seg.layout = CP_LIVE_LAYOUT;
  seg.stats_size = sizeof(cudapool_stats_t);
  seg.pid = getpid();
  seg.start_time = cp_live_start_time((long)getpid());
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  seg.published_ns = ((uint64_t)now.tv_sec + 3600) * 1000000000u;
  strcpy(seg.header, "process 1\x1b]0;owned\x07\x1b[2J\\");
  char path[128], cmd[1024];
  snprintf(path, sizeof path, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.%ld", (unsigned long)geteuid(),
           (long)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  cr_assert(ge(int, fd, 0), "%s", path);
  cr_assert(eq(long, (long)write(fd, &seg, sizeof seg), (long)sizeof seg));
  close(fd);
  snprintf(cmd, sizeof cmd, "'%s' %ld --timeout 0.01 2>&1; echo status=$?", reader, (long)getpid());
  it_result r = {0};
  const char *out = it_shell(&r, cmd);
  unlink(path);
  cr_assert(ne(ptr, (void *)out, NULL));
  const char *want = "cudapool: process 1\\x1b]0;owned\\x07\\x1b[2J\\\\\n";
  cr_assert(eq(int, strncmp(out, want, strlen(want)), 0), "%s", out);
  cr_assert(ne(ptr, (void *)strstr(out, "its last answer, 0.0 s old\nstatus=3\n"), NULL), "%s", out);
  it_free(&r);
}

/* A segment of another cudapool version (here layout 2, the one before
 * issue 26's per-device words) is named as such, never misread. */
Test(live, a_segment_of_another_version_is_refused_by_name) {
  static cp_live_segment_t seg;
  memcpy(seg.magic, CP_LIVE_MAGIC, sizeof CP_LIVE_MAGIC);
  seg.layout = 2;
  seg.stats_size = sizeof(cudapool_stats_t);
  seg.pid = getpid();
  seg.start_time = cp_live_start_time((long)getpid());
  char path[128], cmd[1024], want[512];
  snprintf(path, sizeof path, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.%ld", (unsigned long)geteuid(),
           (long)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  cr_assert(ge(int, fd, 0), "%s", path);
  cr_assert(eq(long, (long)write(fd, &seg, sizeof seg), (long)sizeof seg));
  close(fd);
  snprintf(cmd, sizeof cmd, "'%s' %ld --timeout 0.01 2>&1; echo status=$?", reader, (long)getpid());
  it_result r = {0};
  const char *out = it_shell(&r, cmd);
  unlink(path);
  snprintf(want, sizeof want,
           "cudapool-stats: process %ld runs another version of cudapool (live stats layout 2; this reader reads "
           "layout 4): use the cudapool-stats of that version\nstatus=1\n",
           (long)getpid());
  cr_assert(eq(str, (char *)out, want));
  it_free(&r);
}
