/* shim_it_files.c: the files cudapool writes (CUDAPOOL_STATS, CUDAPOOL_TRACE)
 * when programs run under it, and a set-user-ID program that must not let
 * its caller's CUDAPOOL_* variables in at all.
 *
 * Decisions pinned here, and documented in docs/OPTIONS.md:
 *   - no symbolic link at the end of a name is followed; a name with %p must
 *     be new; an existing file is replaced only when it is the user's own
 *     regular file with one link; new files are 0600;
 *   - the report goes to stderr, after one warning naming CUDAPOOL_STATS,
 *     whenever its file cannot be opened or written in full, and when it
 *     names the trace's file (the trace is kept);
 *   - a FIFO without a reader is refused at once (one warning), never waited
 *     for; with a reader, and /dev/stderr, /dev/stdout, still work;
 *   - %p is the pid of the process that writes the file;
 *   - in a set-user-ID program every CUDAPOOL_* variable is ignored.
 * Programs: tests/progs/files.c (plants files under its own pid, forks) and
 * tests/progs/secure.c (dlopens the library). */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "it_check.h"

static char dir[64];

static void mk(void) {
  snprintf(dir, sizeof dir, "/tmp/cp-files-it-XXXXXX");
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  umask(022);
}

static void rm(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(files, .init = mk, .fini = rm);

#define SETTING(buf, var, name) snprintf(buf, sizeof buf, "%s=%s/%s", var, dir, name)

static void path_of(char *out, const char *name) { snprintf(out, 256, "%s/%s", dir, name); }

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(ne(ptr, f, NULL), "%s", path);
  fputs(text, f);
  cr_assert(eq(int, fclose(f), 0));
}

/* The whole file (kept in r), "<missing>" when it does not exist. */
static const char *contents(it_result *r, const char *path) {
  char cmd[512];
  if (access(path, F_OK) != 0) return "<missing>";
  snprintf(cmd, sizeof cmd, "cat '%s'", path);
  const char *s = it_shell(r, cmd);
  cr_assert(ne(ptr, (void *)s, NULL));
  return s;
}

/* The text report went to stderr, once, and exactly one warning naming var. */
static void report_on_stderr_after_one_warning(it_result *r, const char *var) {
  cr_assert(eq(int, it_count_lines(r->err, "hit rate"), 1), "--- stderr\n%s", r->err);
  cr_assert(eq(int, it_count_lines(r->err, "cudapool: warning"), 1), "--- stderr\n%s", r->err);
  cr_assert(eq(int, it_count_lines(r->err, var), 1), "--- stderr\n%s", r->err);
}

/* dir/name with its one %p replaced by pid. */
static void file_pattern(char *out, const char *name, pid_t pid) {
  const char *p = strstr(name, "%p");
  cr_assert(ne(ptr, (void *)p, NULL));
  cr_assert(lt(int, snprintf(out, 256, "%s/%.*s%ld%s", dir, (int)(p - name), name, (long)pid, p + 2), 256));
}

/* ---- names planted by someone else ------------------------------------- */

/* The attack: a local user plants /tmp/...-<pid> -> a file the run
 * may write. The program plants it itself, under its own pid. */
Test(files, stats_pid_name_planted_as_symlink) {
  char stats[300], pattern[256], victim[256];
  SETTING(stats, "CUDAPOOL_STATS", "report-%p");
  path_of(pattern, "report-%p");
  path_of(victim, "victim");
  put(victim, "precious\n");
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, NULL}, "files", IT_ARGS("symlink", pattern, victim));
  cr_assert(eq(str, (char *)contents(&r, victim), "precious\n"));
  report_on_stderr_after_one_warning(&r, "CUDAPOOL_STATS");
  cr_assert(eq(int, it_count_lines(r.err, "symbolic link"), 1), "%s", r.err);
  it_free(&r);
}

Test(files, trace_symlink_not_followed) {
  char trace[300], link_name[256], victim[256];
  SETTING(trace, "CUDAPOOL_TRACE", "trace.csv");
  path_of(link_name, "trace.csv");
  path_of(victim, "victim");
  put(victim, "precious\n");
  cr_assert(eq(int, symlink(victim, link_name), 0));
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){trace, NULL}, "files", NULL);
  cr_assert(eq(str, (char *)contents(&r, victim), "precious\n"));
  cr_assert(eq(int, it_count_lines(r.err, "cudapool: warning: CUDAPOOL_TRACE="), 1), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "cudapool:"), 1), "%s", r.err);
  it_free(&r);
}

Test(files, stats_pid_name_that_exists_untouched) {
  char stats[300], pattern[256], planted[256];
  SETTING(stats, "CUDAPOOL_STATS", "report-%p");
  path_of(pattern, "report-%p");
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, NULL}, "files", IT_ARGS("file", pattern));
  file_pattern(planted, "report-%p", r.pid);
  cr_assert(eq(str, (char *)contents(&r, planted), "planted\n"));
  report_on_stderr_after_one_warning(&r, "CUDAPOOL_STATS");
  it_free(&r);
}

Test(files, other_users_file_untouched) {
  if (geteuid() != 0) cr_skip_test("needs root to give a file to another user");
  struct passwd *nobody = getpwnam("nobody");
  if (nobody == NULL) cr_skip_test("no user nobody");
  char stats[300], p[256];
  SETTING(stats, "CUDAPOOL_STATS", "theirs");
  path_of(p, "theirs");
  put(p, "theirs\n");
  cr_assert(eq(int, chown(p, nobody->pw_uid, nobody->pw_gid), 0));
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, NULL}, "files", NULL);
  cr_assert(eq(str, (char *)contents(&r, p), "theirs\n"));
  report_on_stderr_after_one_warning(&r, "CUDAPOOL_STATS");
  it_free(&r);
}

Test(files, hardlinked_file_untouched) {
  char stats[300], p[256], other[256];
  SETTING(stats, "CUDAPOOL_STATS", "linked");
  path_of(p, "linked");
  path_of(other, "elsewhere");
  put(other, "precious\n");
  cr_assert(eq(int, link(other, p), 0));
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, NULL}, "files", NULL);
  cr_assert(eq(str, (char *)contents(&r, other), "precious\n"));
  report_on_stderr_after_one_warning(&r, "CUDAPOOL_STATS");
  it_free(&r);
}

/* ---- the user's own files ---------------------------------------------- */

Test(files, new_files_are_private) {
  char stats[300], trace[300], s[256], t[256];
  SETTING(stats, "CUDAPOOL_STATS", "report.txt");
  SETTING(trace, "CUDAPOOL_TRACE", "trace.csv");
  path_of(s, "report.txt");
  path_of(t, "trace.csv");
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, trace, NULL}, "files", NULL);
  cr_assert(eq(str, r.err, ""));
  struct stat st;
  cr_assert(eq(int, stat(s, &st), 0));
  cr_assert(eq(int, st.st_mode & 07777, 0600));
  cr_assert(eq(int, stat(t, &st), 0));
  cr_assert(eq(int, st.st_mode & 07777, 0600));
  it_free(&r);
}

Test(files, own_file_replaced_whole) {
  char stats[300], p[256];
  SETTING(stats, "CUDAPOOL_STATS", "report.json");
  path_of(p, "report.json");
  static char old[100000];
  memset(old, 'x', sizeof old - 2);
  old[sizeof old - 2] = '\n';
  put(p, old);
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, "CUDAPOOL_STATS_FORMAT=json", NULL}, "files", NULL);
  cr_assert(eq(str, r.err, ""));
  it_json *j = it_json_parse(contents(&r, p));
  cr_assert(ne(ptr, j, NULL), "not one JSON value: %.200s", contents(&r, p));
  it_json_free(j);
  it_free(&r);
}

Test(files, same_file_for_trace_and_stats_keeps_the_trace) {
  static const char *const names[] = {"both.csv", "both-%p.csv"};
  for (int i = 0; i < 2; i++) {
    char stats[300], trace[300], p[256];
    SETTING(stats, "CUDAPOOL_STATS", names[i]);
    SETTING(trace, "CUDAPOOL_TRACE", names[i]);
    it_result r;
    it_run_ok(&r, IT_SHIM, (const char *const[]){stats, trace, NULL}, "files", NULL);
    if (i == 0)
      path_of(p, names[i]);
    else
      file_pattern(p, names[i], r.pid);
    const char *text = contents(&r, p);
    cr_assert(eq(int, strncmp(text, "Thread,Time,Action,Pointer,Size,Stream\n", 39), 0), "%s", text);
    cr_assert(eq(int, it_count_lines(text, ",allocate,"), 10), "%s", text);
    cr_assert(eq(int, it_count_lines(text, "cudapool"), 0), "%s", text);
    report_on_stderr_after_one_warning(&r, "CUDAPOOL_TRACE"); /* the warning names both */
    cr_assert(eq(int, it_count_lines(r.err, "cudapool: warning: CUDAPOOL_STATS="), 1), "%s", r.err);
    it_free(&r);
  }
}

/* ---- one name for several processes -------------------------------------- */

/* Another process writes the file (it holds the lock, as cudapool's outputs
 * do while open): the trace is refused with one warning naming the path and
 * the way out, %p, and the file is left as it was. */
Test(files, trace_written_by_another_process_refused) {
  char trace[300], p[256], want[600];
  SETTING(trace, "CUDAPOOL_TRACE", "shared.csv");
  path_of(p, "shared.csv");
  put(p, "another process's trace\n");
  int other = open(p, O_WRONLY | O_CLOEXEC);
  cr_assert(ge(int, other, 0));
  cr_assert(eq(int, flock(other, LOCK_EX), 0));
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){trace, NULL}, "files", NULL);
  snprintf(want, sizeof want,
           "cudapool: warning: CUDAPOOL_TRACE=\"%s\" cannot be written: another process writes this file now "
           "(put %%p in the name for one file per process); no trace is recorded\n",
           p);
  cr_assert(eq(str, r.err, want));
  cr_assert(eq(str, (char *)contents(&r, p), "another process's trace\n"));
  close(other);
  it_free(&r);
}

/* The same for the report: it goes to stderr after the warning. */
Test(files, report_written_by_another_process_refused) {
  char stats[300], p[256];
  SETTING(stats, "CUDAPOOL_STATS", "shared.txt");
  path_of(p, "shared.txt");
  put(p, "another process's report\n");
  int other = open(p, O_WRONLY | O_CLOEXEC);
  cr_assert(ge(int, other, 0));
  cr_assert(eq(int, flock(other, LOCK_EX), 0));
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, NULL}, "files", NULL);
  report_on_stderr_after_one_warning(&r, "CUDAPOOL_STATS");
  cr_assert(eq(int, it_count_lines(r.err, "another process writes this file now (put %p in the name"), 1), "%s",
            r.err);
  cr_assert(eq(str, (char *)contents(&r, p), "another process's report\n"));
  close(other);
  it_free(&r);
}

/* ---- files that cannot be written -------------------------------------- */

Test(files, unopenable_report_goes_to_stderr) {
  char stats[300];
  SETTING(stats, "CUDAPOOL_STATS", "no/such/folder/report.txt");
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, NULL}, "files", NULL);
  report_on_stderr_after_one_warning(&r, "CUDAPOOL_STATS");
  cr_assert(eq(int, it_count_lines(r.err, "No such file or directory"), 1), "%s", r.err);
  it_free(&r);
}

Test(files, write_error_warned_and_report_on_stderr) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=/dev/full", NULL}, "files", NULL);
  report_on_stderr_after_one_warning(&r, "CUDAPOOL_STATS");
  cr_assert(eq(int, it_count_lines(r.err, "No space left on device"), 1), "%s", r.err);
  it_free(&r);
}

Test(files, trace_write_error_warned) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_TRACE=/dev/full", NULL}, "files", NULL);
  cr_assert(eq(int, it_count_lines(r.err, "cudapool: warning: CUDAPOOL_TRACE=\"/dev/full\""), 1), "%s",
            r.err);
  cr_assert(eq(int, it_count_lines(r.err, "cudapool:"), 1), "%s", r.err);
  it_free(&r);
}

/* The trace opens fine, then its file fills up (the program points the
 * trace's descriptor at /dev/full): one warning at exit, with the loss. */
Test(files, trace_lost_events_warned_at_exit) {
  char trace[300], p[256];
  SETTING(trace, "CUDAPOOL_TRACE", "trace.csv");
  path_of(p, "trace.csv");
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){trace, NULL}, "files", IT_ARGS("swap", p, "/dev/full"));
  cr_assert(eq(int, it_count_lines(r.err, "cudapool:"), 1), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "cudapool: warning: CUDAPOOL_TRACE="), 1), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "No space left on device"), 1), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, " events lost"), 1), "%s", r.err);
  it_free(&r);
}

/* Without O_NONBLOCK the open waits for a reader that never comes: the
 * program hangs at exit (the run's deadline kills it). */
Test(files, stats_fifo_without_reader_does_not_hang) {
  char stats[300], p[256];
  SETTING(stats, "CUDAPOOL_STATS", "fifo");
  path_of(p, "fifo");
  cr_assert(eq(int, mkfifo(p, 0600), 0));
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, NULL}, "files", NULL);
  report_on_stderr_after_one_warning(&r, "CUDAPOOL_STATS");
  cr_assert(eq(int, it_count_lines(r.err, "reader"), 1), "%s", r.err);
  it_free(&r);
}

Test(files, trace_fifo_without_reader_does_not_hang) {
  char trace[300], p[256];
  SETTING(trace, "CUDAPOOL_TRACE", "fifo");
  path_of(p, "fifo");
  cr_assert(eq(int, mkfifo(p, 0600), 0));
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){trace, NULL}, "files", NULL);
  cr_assert(eq(int, it_count_lines(r.err, "cudapool: warning: CUDAPOOL_TRACE="), 1), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "reader"), 1), "%s", r.err);
  cr_assert(eq(long, it_val(&r, "files", "errors", -1), 0));
  it_free(&r);
}

/* ---- outputs that must keep working ------------------------------------ */

Test(files, stats_fifo_with_reader_gets_the_report) {
  char stats[300], p[256];
  SETTING(stats, "CUDAPOOL_STATS", "fifo");
  path_of(p, "fifo");
  cr_assert(eq(int, mkfifo(p, 0600), 0));
  int reader = open(p, O_RDONLY | O_NONBLOCK); /* the report fits in the pipe's buffer */
  cr_assert(ge(int, reader, 0));
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, NULL}, "files", NULL);
  cr_assert(eq(str, r.err, ""));
  char got[8192];
  ssize_t n = read(reader, got, sizeof got - 1);
  close(reader);
  cr_assert(gt(long, (long)n, 0));
  got[n] = '\0';
  cr_assert(eq(int, it_count_lines(got, "hit rate"), 1), "%s", got);
  it_free(&r);
}

Test(files, dev_stderr_and_dev_stdout_still_work) {
  it_result r;
  it_run_ok(&r, IT_SHIM,
            (const char *const[]){"CUDAPOOL_STATS=/dev/stderr", "CUDAPOOL_TRACE=/dev/stdout", NULL}, "files",
            NULL);
  cr_assert(eq(int, it_count_lines(r.err, "hit rate"), 1), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "warning"), 0), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.out, "Thread,Time,Action,Pointer,Size,Stream"), 1), "%s", r.out);
  cr_assert(eq(int, it_count_lines(r.out, ",allocate,"), 10), "%s", r.out);
  cr_assert(eq(long, it_val(&r, "files", "errors", -1), 0), "%s", r.out);
  it_free(&r);
}

/* ---- %p ---------------------------------------------------------------- */

/* A child of fork() that exits writes its report, if any, under its own
 * pid: never under its parent's, which the parent writes at its own exit. */
Test(files, pid_is_the_writers) {
  char stats[300], pattern[256], mine[256];
  SETTING(stats, "CUDAPOOL_STATS", "report-%p");
  path_of(pattern, "report-%p");
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){stats, NULL}, "files", IT_ARGS("fork", pattern));
  cr_assert(eq(long, it_val(&r, "files", "parent_name_taken", -1), 0), "%s", r.out);
  file_pattern(mine, "report-%p", r.pid);
  cr_assert(eq(int, it_count_lines(contents(&r, mine), "hit rate"), 1));
  it_free(&r);
}

/* ---- set-user-ID --------------------------------------------------------- */

/* A set-user-ID (to nobody) copy of tests/progs/secure.c, run by root: the
 * kernel marks it secure (AT_SECURE). Its caller's CUDAPOOL_TRACE and
 * CUDAPOOL_STATS name files in a folder that nobody may write: none may
 * appear, and CUDAPOOL_VERBOSE gives one line and no more. */
Test(files, setuid_program_ignores_cudapool_variables) {
  if (geteuid() != 0) cr_skip_test("needs root to make a set-user-ID program of another user");
  struct passwd *nobody = getpwnam("nobody");
  if (nobody == NULL) cr_skip_test("no user nobody");
  char bindir[512], prog[600], rel[600], lib[512], cmd[1400];
  snprintf(bindir, sizeof bindir, "%s/setuid-it-XXXXXX", it_build());
  cr_assert(ne(ptr, mkdtemp(bindir), NULL));
  struct statvfs vfs;
  cr_assert(eq(int, statvfs(bindir, &vfs), 0));
  snprintf(prog, sizeof prog, "%s/secure", bindir);
  snprintf(rel, sizeof rel, "../%s/secure", strrchr(bindir, '/') + 1);
  snprintf(lib, sizeof lib, "%s/libcudapool.so", it_build());
  snprintf(cmd, sizeof cmd, "cp '%s/progs/secure' '%s'", it_build(), prog);
  cr_assert(eq(int, system(cmd), 0));
  cr_assert(eq(int, chmod(bindir, 0755), 0));
  cr_assert(eq(int, chown(prog, nobody->pw_uid, nobody->pw_gid), 0));
  cr_assert(eq(int, chmod(prog, 04755), 0));
  cr_assert(eq(int, chmod(dir, 0777), 0));
  char stats[300], trace[300];
  SETTING(stats, "CUDAPOOL_STATS", "stats.txt");
  SETTING(trace, "CUDAPOOL_TRACE", "trace.csv");
  const char *const env[] = {stats, trace, "CUDAPOOL_VERBOSE=1", NULL};
  it_result r;
  int started = it_run(&r, IT_NATIVE, env, rel, IT_ARGS(lib));
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", bindir);
  cr_assert(eq(int, system(cmd), 0));
  cr_assert(eq(int, started, 0));
  if (vfs.f_flag & ST_NOSUID) cr_skip_test("the build folder is mounted nosuid");
  long at_secure = it_val(&r, "secure", "at_secure", -1);
  if (at_secure == 0) cr_skip_test("set-user-ID is not honoured here (no_new_privs?)");
  cr_assert(eq(long, at_secure, 1), "--- stdout\n%s--- stderr\n%s", r.out, r.err);
  cr_assert(eq(int, r.status, 0), "--- stdout\n%s--- stderr\n%s", r.out, r.err);
  cr_assert(eq(long, it_val(&r, "secure", "loaded", -1), 1), "%s", r.err);
  char s[256], t[256];
  path_of(s, "stats.txt");
  path_of(t, "trace.csv");
  cr_assert(eq(str, (char *)contents(&r, s), "<missing>"));
  cr_assert(eq(str, (char *)contents(&r, t), "<missing>"));
  cr_assert(eq(int, it_count_lines(r.err, "cudapool:"), 1), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "CUDAPOOL_* variables are ignored"), 1), "%s", r.err);
  it_free(&r);
}
