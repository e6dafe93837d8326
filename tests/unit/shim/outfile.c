/* shim_unit_outfile.c: the rules for opening and writing cudapool's output
 * files (common/outfile.c), one test per rule of outfile.h, each on a file the
 * rule is there to protect; the runs under the shim are in
 * tests/shim_it_files.c. Every test works in its own temporary folder. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "outfile.h"

static char dir[64];

static void mk(void) {
  snprintf(dir, sizeof dir, "/tmp/cp-outfile-test-XXXXXX");
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
}

static void rm(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(outfile, .init = mk, .fini = rm);

static void path_of(char *out, const char *name) { snprintf(out, 4096, "%s/%s", dir, name); }

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(ne(ptr, f, NULL), "%s", path);
  fputs(text, f);
  cr_assert(eq(int, fclose(f), 0));
}

/* The whole file; "<missing>" when it does not exist. */
static const char *contents(const char *path) {
  static char buf[8192];
  FILE *f = fopen(path, "r");
  if (f == NULL) return "<missing>";
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void write_close(int fd, const char *text) {
  cr_assert(ge(int, fd, 0), "open failed: %s", strerror(-fd));
  cr_assert(eq(int, cp_outfile_write(fd, text, strlen(text)), 0));
  cr_assert(eq(int, cp_outfile_close(fd), 0));
}

Test(outfile, expand_pid) {
  char out[16];
  cr_assert(eq(int, cp_outfile_expand("a%pb", 42, out, sizeof out), 1));
  cr_assert(eq(str, out, "a42b"));
  cr_assert(eq(int, cp_outfile_expand("%p%%p%", 7, out, sizeof out), 1));
  cr_assert(eq(str, out, "7%7%"));
  cr_assert(eq(int, cp_outfile_expand("plain", 42, out, sizeof out), 0));
  cr_assert(eq(str, out, "plain"));
  strcpy(out, "untouched");
  cr_assert(eq(int, cp_outfile_expand("%p%p%p%p", 12345, out, sizeof out), -1));
  cr_assert(eq(str, out, "untouched"));
}

Test(outfile, new_file_is_private) {
  char p[4096];
  path_of(p, "new");
  umask(022);
  write_close(cp_outfile_open(p, NULL, 0), "report\n");
  struct stat st;
  cr_assert(eq(int, stat(p, &st), 0));
  cr_assert(eq(int, st.st_mode & 07777, 0600));
  cr_assert(eq(str, (char *)contents(p), "report\n"));
}

Test(outfile, symlink_never_followed) {
  char victim[4096], link_name[4096];
  path_of(victim, "victim");
  path_of(link_name, "link");
  put(victim, "precious\n");
  cr_assert(eq(int, symlink(victim, link_name), 0));
  cr_assert(eq(int, cp_outfile_open(link_name, NULL, 0), -ELOOP));
  /* A planted link to where a file does not exist yet is not followed either. */
  char dangling[4096], target[4096];
  path_of(dangling, "dangling");
  path_of(target, "would-be-created");
  cr_assert(eq(int, symlink(target, dangling), 0));
  cr_assert(eq(int, cp_outfile_open(dangling, NULL, 0), -ELOOP));
  cr_assert(eq(str, (char *)contents(victim), "precious\n"));
  cr_assert(eq(str, (char *)contents(target), "<missing>"));
}

/* The attack of the issue: a local user guesses the pid of root's run and
 * plants /tmp/report-<pid> -> /etc/something. */
Test(outfile, pid_name_planted_as_symlink) {
  char victim[4096], pattern[4096], planted[4096];
  path_of(victim, "victim");
  put(victim, "precious\n");
  path_of(pattern, "report-%p");
  cr_assert(eq(int, cp_outfile_expand(pattern, (long)getpid(), planted, sizeof planted), 1));
  cr_assert(eq(int, symlink(victim, planted), 0));
  cr_assert(eq(int, cp_outfile_open(pattern, NULL, 0), -ELOOP));
  cr_assert(eq(str, (char *)contents(victim), "precious\n"));
}

Test(outfile, pid_name_must_be_new) {
  char pattern[4096], planted[4096], got[4096];
  path_of(pattern, "report-%p");
  cr_assert(eq(int, cp_outfile_expand(pattern, (long)getpid(), planted, sizeof planted), 1));
  put(planted, "planted\n"); /* this user's own file, one link: still refused */
  cr_assert(eq(int, cp_outfile_open(pattern, got, sizeof got), -EEXIST));
  cr_assert(eq(str, got, planted));
  cr_assert(eq(str, (char *)contents(planted), "planted\n"));
  cr_assert(eq(int, unlink(planted), 0));
  write_close(cp_outfile_open(pattern, NULL, 0), "fresh\n");
  cr_assert(eq(str, (char *)contents(planted), "fresh\n"));
}

/* %p is the pid of the process that opens, not of the one that read it. */
Test(outfile, pid_of_the_opener) {
  char pattern[4096], mine[4096], childs[4096];
  path_of(pattern, "r-%p");
  pid_t pid = fork();
  cr_assert(ge(int, pid, 0));
  if (pid == 0) {
    int fd = cp_outfile_open(pattern, NULL, 0);
    _exit(fd >= 0 && cp_outfile_write(fd, "child\n", 6) == 0 && cp_outfile_close(fd) == 0 ? 0 : 1);
  }
  int st;
  cr_assert(eq(int, waitpid(pid, &st, 0), pid));
  cr_assert(eq(int, WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0));
  cp_outfile_expand(pattern, (long)pid, childs, sizeof childs);
  cp_outfile_expand(pattern, (long)getpid(), mine, sizeof mine);
  cr_assert(eq(str, (char *)contents(childs), "child\n"));
  cr_assert(eq(str, (char *)contents(mine), "<missing>"));
}

Test(outfile, own_file_replaced_whole) {
  char p[4096];
  path_of(p, "mine");
  put(p, "an old and much longer report that must not leave a tail behind\n");
  write_close(cp_outfile_open(p, NULL, 0), "new\n");
  cr_assert(eq(str, (char *)contents(p), "new\n"));
}

Test(outfile, other_users_file_untouched) {
  if (geteuid() != 0) cr_skip_test("needs root to give a file to another user");
  struct passwd *nobody = getpwnam("nobody");
  if (nobody == NULL) cr_skip_test("no user nobody");
  char p[4096];
  path_of(p, "theirs");
  put(p, "theirs\n");
  cr_assert(eq(int, chown(p, nobody->pw_uid, nobody->pw_gid), 0));
  cr_assert(eq(int, cp_outfile_open(p, NULL, 0), -EPERM));
  cr_assert(eq(str, (char *)contents(p), "theirs\n"));
}

Test(outfile, hardlinked_file_untouched) {
  char p[4096], other[4096];
  path_of(p, "linked");
  path_of(other, "elsewhere");
  put(other, "precious\n");
  cr_assert(eq(int, link(other, p), 0));
  cr_assert(eq(int, cp_outfile_open(p, NULL, 0), -EPERM));
  cr_assert(eq(str, (char *)contents(other), "precious\n"));
}

Test(outfile, same_file_refused_while_open) {
  char p[4096], alias[4096];
  path_of(p, "shared");
  int first = cp_outfile_open(p, NULL, 0);
  cr_assert(ge(int, first, 0));
  cr_assert(eq(int, cp_outfile_write(first, "first\n", 6), 0));
  cr_assert(eq(int, cp_outfile_open(p, NULL, 0), -EBUSY));
  snprintf(alias, sizeof alias, "%s/./shared", dir); /* another spelling, same file */
  cr_assert(eq(int, cp_outfile_open(alias, NULL, 0), -EBUSY));
  cr_assert(eq(str, (char *)contents(p), "first\n"));
  cr_assert(eq(int, cp_outfile_close(first), 0));
  write_close(cp_outfile_open(p, NULL, 0), "second\n"); /* closed: free again */
  cr_assert(eq(str, (char *)contents(p), "second\n"));
}

/* A name without %p given to several processes: while one has the file
 * open (locked), another's open is refused and the file left whole; once
 * it is closed, the next one may replace it. */
Test(outfile, file_open_in_another_process_refused_untouched) {
  char p[4096];
  path_of(p, "one-for-all");
  int go[2], done[2];
  cr_assert(eq(int, pipe(go), 0));
  cr_assert(eq(int, pipe(done), 0));
  pid_t pid = fork();
  cr_assert(ge(int, pid, 0));
  if (pid == 0) {
    /* Only the test's ends stay open here: if the test fails first, the
     * child reads end of file and goes. */
    close(go[1]);
    close(done[0]);
    int fd = cp_outfile_open(p, NULL, 0);
    int ok = fd >= 0 && cp_outfile_write(fd, "first\n", 6) == 0;
    char c = ok ? 'y' : 'n';
    if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(2);
    _exit(cp_outfile_close(fd) == 0 && ok ? 0 : 1);
  }
  close(go[0]);
  close(done[1]);
  char c = 0;
  cr_assert(eq(int, (int)read(done[0], &c, 1), 1));
  cr_assert(eq(chr, c, 'y'));
  cr_assert(eq(int, cp_outfile_open(p, NULL, 0), -EAGAIN));
  cr_assert(eq(str, (char *)contents(p), "first\n"));
  cr_assert(eq(int, (int)write(go[1], "x", 1), 1));
  int st;
  cr_assert(eq(int, waitpid(pid, &st, 0), pid));
  cr_assert(eq(int, WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0));
  write_close(cp_outfile_open(p, NULL, 0), "second\n");
  cr_assert(eq(str, (char *)contents(p), "second\n"));
}

Test(outfile, same_pid_name_refused_while_open) {
  char pattern[4096];
  path_of(pattern, "both-%p");
  int first = cp_outfile_open(pattern, NULL, 0);
  cr_assert(ge(int, first, 0));
  cr_assert(eq(int, cp_outfile_open(pattern, NULL, 0), -EBUSY));
  cr_assert(eq(int, cp_outfile_close(first), 0));
}

Test(outfile, fifo_without_reader_fails_at_once) {
  char p[4096];
  path_of(p, "fifo");
  cr_assert(eq(int, mkfifo(p, 0600), 0));
  cr_assert(eq(int, cp_outfile_open(p, NULL, 0), -ENXIO));
  cr_assert(ne(ptr, (void *)cp_outfile_rule(ENXIO), NULL));
}

Test(outfile, fifo_with_reader_written_blocking) {
  char p[4096], got[16] = {0};
  path_of(p, "fifo");
  cr_assert(eq(int, mkfifo(p, 0600), 0));
  int reader = open(p, O_RDONLY | O_NONBLOCK);
  cr_assert(ge(int, reader, 0));
  int fd = cp_outfile_open(p, NULL, 0);
  cr_assert(ge(int, fd, 0), "%s", strerror(-fd));
  cr_assert(eq(int, fcntl(fd, F_GETFL) & O_NONBLOCK, 0));
  cr_assert(eq(int, fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC));
  write_close(fd, "hello");
  cr_assert(eq(long, (long)read(reader, got, sizeof got - 1), 5));
  cr_assert(eq(str, got, "hello"));
  close(reader);
}

Test(outfile, character_devices_written) {
  int fd = cp_outfile_open("/dev/null", NULL, 0);
  write_close(fd, "gone\n");
  fd = cp_outfile_open("/dev/full", NULL, 0);
  cr_assert(ge(int, fd, 0));
  cr_assert(eq(int, cp_outfile_write(fd, "x", 1), ENOSPC));
  cr_assert(eq(int, cp_outfile_close(fd), 0));
}

Test(outfile, block_device_refused) {
  if (geteuid() != 0) cr_skip_test("needs root to make a device node");
  char p[4096];
  path_of(p, "blk");
  if (mknod(p, S_IFBLK | 0600, makedev(7, 0)) != 0) cr_skip_test("cannot make a device node here");
  cr_assert(lt(int, cp_outfile_open(p, NULL, 0), 0));
}

Test(outfile, standard_streams_duplicated) {
  int pipefd[2];
  char name[32], got[16] = {0};
  cr_assert(eq(int, pipe(pipefd), 0));
  snprintf(name, sizeof name, "/dev/fd/%d", pipefd[1]);
  int fd = cp_outfile_open(name, NULL, 0);
  cr_assert(ge(int, fd, 0));
  cr_assert(ne(int, fd, pipefd[1]));
  write_close(fd, "via fd");
  cr_assert(eq(long, (long)read(pipefd[0], got, sizeof got - 1), 6));
  cr_assert(eq(str, got, "via fd"));
  fd = cp_outfile_open("/dev/stderr", NULL, 0);
  struct stat a, b;
  cr_assert(eq(int, fstat(fd, &a), 0));
  cr_assert(eq(int, fstat(2, &b), 0));
  cr_assert(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
  cr_assert(eq(int, cp_outfile_close(fd), 0));
  cr_assert(eq(int, cp_outfile_open("/dev/fd/987", NULL, 0), -EBADF));
  close(pipefd[0]);
  close(pipefd[1]);
}

/* With SIGPIPE's default action, a plain write() here kills the process. */
Test(outfile, pipe_without_reader_gives_epipe_not_sigpipe) {
  int pipefd[2];
  signal(SIGPIPE, SIG_DFL);
  cr_assert(eq(int, pipe(pipefd), 0));
  close(pipefd[0]);
  cr_assert(eq(int, cp_outfile_write(pipefd[1], "x", 1), EPIPE));
  sigset_t pending;
  cr_assert(eq(int, sigpending(&pending), 0));
  cr_assert(not(sigismember(&pending, SIGPIPE)));
  close(pipefd[1]);
}

Test(outfile, name_too_long) {
  static char pattern[4200];
  memset(pattern, 'a', 4090);
  strcpy(pattern + 4090, "%p%p%p");
  cr_assert(eq(int, cp_outfile_open(pattern, NULL, 0), -ENAMETOOLONG));
}

Test(outfile, every_refusal_has_a_rule) {
  static const int refusals[] = {ELOOP, EEXIST, EPERM, EBUSY, EAGAIN, ENXIO, EINVAL};
  for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++)
    cr_assert(ne(ptr, (void *)cp_outfile_rule(refusals[i]), NULL), "errno %d", refusals[i]);
  cr_assert(eq(ptr, (void *)cp_outfile_rule(ENOENT), NULL));
}
