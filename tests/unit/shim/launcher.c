/* launcher.c: scripts/cudapool, run through popen as a user would.
 *
 * Runs from the repository root (make test does). Every test builds its own
 * tree under $CUDAPOOL_TEST_BUILD/tests (the build folder the Makefile
 * exports) with a stand-in libcudapool.so (support/launcher_standin.h: what
 * the launcher checks, which ld.so ignores as a preload it cannot load, and
 * says so on stderr, which these tests discard where they read the program's
 * output).
 * So the tests depend on the script alone, not on the library's state, and
 * run the same in every build folder. Each command starts from env -i so the
 * caller's CUDAPOOL_* and LD_PRELOAD cannot leak in. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher_standin.h"
#include "options.h"

static char tree[PATH_MAX]; /* realpath of this test's folder */

/* snprintf that fails the test instead of cutting a path short. */
__attribute__((format(printf, 3, 4))) static void fmt(char *buf, size_t cap, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int n = vsnprintf(buf, cap, f, ap);
  va_end(ap);
  cr_assert(lt(int, n, (int)cap), "a path too long for this test");
}

static void make_tree(void) {
  const char *build = getenv("CUDAPOOL_TEST_BUILD");
  char parent[PATH_MAX], tmpl[PATH_MAX];
  fmt(parent, sizeof parent, "%s/tests", build != NULL && *build ? build : "/tmp");
  mkdir(parent, 0755);
  fmt(tmpl, sizeof tmpl, "%s/launcher.XXXXXX", parent);
  cr_assert(ne(ptr, mkdtemp(tmpl), NULL), "mkdtemp under %s", parent);
  cr_assert(ne(ptr, realpath(tmpl, tree), NULL));
}

static void remove_tree(void) {
  char cmd[PATH_MAX + 16];
  if (tree[0] == '\0') return;
  fmt(cmd, sizeof cmd, "rm -rf '%s'", tree);
  (void)system(cmd);
}

TestSuite(launcher, .init = make_tree, .fini = remove_tree);

/* tree/<rel> := contents, executable when mode says so; parent folders made. */
static void put_file(const char *rel, const char *contents, mode_t mode) {
  char path[PATH_MAX], cmd[PATH_MAX + 32];
  fmt(path, sizeof path, "%s/%s", tree, rel);
  fmt(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
  cr_assert(eq(int, system(cmd), 0));
  FILE *f = fopen(path, "w");
  cr_assert(ne(ptr, f, NULL), "%s", path);
  fputs(contents, f);
  fclose(f);
  chmod(path, mode);
}

/* tree/<rel> := the stand-in library. */
static void put_standin(const char *rel) {
  char path[PATH_MAX];
  put_file(rel, "", 0644);
  fmt(path, sizeof path, "%s/%s", tree, rel);
  cr_assert(eq(int, launcher_put_standin(path), 0), "%s", path);
}

/* tree/<rel> := a copy of the repository's launcher. */
static void put_launcher(const char *rel) {
  static char text[65536];
  FILE *f = fopen("scripts/cudapool", "r");
  cr_assert(ne(ptr, f, NULL), "run from the repository root");
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  put_file(rel, text, 0755);
}

/* Run cmd under sh; its output (stdout, plus stderr when the command says
 * 2>&1) into out; returns the exit status. */
static int run(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  cr_assert(ne(ptr, p, NULL));
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  bool exited = WIFEXITED(st);
  cr_assert(exited, "%s", cmd);
  return WEXITSTATUS(st);
}

/* The value of NAME in env's output, or NULL. */
static const char *env_value(const char *out, const char *name, char *buf, size_t cap) {
  size_t n = strlen(name);
  for (const char *line = out; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
    if (strncmp(line, name, n) == 0 && line[n] == '=') {
      const char *end = strchr(line, '\n');
      size_t len = end ? (size_t)(end - line - n - 1) : strlen(line + n + 1);
      if (len >= cap) len = cap - 1;
      memcpy(buf, line + n + 1, len);
      buf[len] = '\0';
      return buf;
    }
  }
  return NULL;
}

#define CLEAN_ENV "env -i PATH=/usr/bin:/bin "

/* scripts/cudapool FLAGS -- /usr/bin/env, with CUDAPOOL_LIB at the stand-in
 * and extra environment assignments before it. */
static int run_env(const char *extra_env, const char *flags, char *out, size_t cap) {
  char cmd[8192];
  put_standin("lib/libcudapool.so");
  fmt(cmd, sizeof cmd,
      CLEAN_ENV "CUDAPOOL_LIB='%s/lib/libcudapool.so' %s scripts/cudapool %s -- /usr/bin/env "
                "2>/dev/null",
      tree, extra_env, flags);
  return run(cmd, out, cap);
}

static void assert_var(const char *out, const char *name, const char *want) {
  char buf[1024];
  const char *got = env_value(out, name, buf, sizeof buf);
  cr_assert(ne(ptr, (void *)got, NULL), "%s not set; env printed:\n%s", name, out);
  cr_assert(eq(str, (char *)got, (char *)want), "%s", name);
}

static void assert_unset(const char *out, const char *name) {
  char buf[1024];
  cr_assert(eq(ptr, (void *)env_value(out, name, buf, sizeof buf), NULL), "%s is set", name);
}

Test(launcher, every_flag_sets_its_variable) {
  char out[16384], lib[PATH_MAX + 32];
  int rc = run_env("",
                   "--limit 8G --max-cached 80% --max-split 256M --mode sync "
                   "--stats=/tmp/s-%p.json --json --trace t.%p --layer runtime --verbose "
                   "--disable",
                   out, sizeof out);
  cr_assert(eq(int, rc, 0), "%s", out);
  fmt(lib, sizeof lib, "%s/lib/libcudapool.so", tree);
  assert_var(out, "LD_PRELOAD", lib);
  assert_var(out, "CUDAPOOL_LIMIT", "8G");
  assert_var(out, "CUDAPOOL_MAX_CACHED", "80%");
  assert_var(out, "CUDAPOOL_MAX_SPLIT", "256M");
  assert_var(out, "CUDAPOOL_MODE", "sync");
  assert_var(out, "CUDAPOOL_STATS", "/tmp/s-%p.json"); /* %p is the library's job */
  assert_var(out, "CUDAPOOL_STATS_FORMAT", "json");
  assert_var(out, "CUDAPOOL_TRACE", "t.%p");
  assert_var(out, "CUDAPOOL_LAYER", "runtime");
  assert_var(out, "CUDAPOOL_VERBOSE", "1");
  assert_var(out, "CUDAPOOL_DISABLE", "1");
}

Test(launcher, equals_form_and_last_flag_wins) {
  char out[16384];
  cr_assert(eq(int, run_env("", "--limit=1G --limit 2G --mode=auto", out, sizeof out), 0));
  assert_var(out, "CUDAPOOL_LIMIT", "2G");
  assert_var(out, "CUDAPOOL_MODE", "auto");
}

Test(launcher, no_flags_sets_nothing_and_keeps_the_environment) {
  char out[16384];
  cr_assert(eq(int, run_env("CUDAPOOL_MODE=sync CUDAPOOL_LIMIT=4G", "--limit 1G", out, sizeof out), 0));
  assert_var(out, "CUDAPOOL_MODE", "sync");
  assert_var(out, "CUDAPOOL_LIMIT", "1G"); /* the flag overrides */
  for (size_t i = 0; i < cp_option_count(); i++) {
    const char *name = cp_option_name(i);
    if (strcmp(name, "CUDAPOOL_MODE") != 0 && strcmp(name, "CUDAPOOL_LIMIT") != 0) assert_unset(out, name);
  }
}

Test(launcher, ld_preload_prepended_sanitizer_runtimes_first) {
  char out[16384], want[3 * PATH_MAX];
  char extra[3 * PATH_MAX];
  fmt(extra, sizeof extra, "LD_PRELOAD='/opt/libasan.so.8 /a/b.so:%s/lib/libcudapool.so::/c.so'", tree);
  cr_assert(eq(int, run_env(extra, "", out, sizeof out), 0));
  fmt(want, sizeof want, "/opt/libasan.so.8:%s/lib/libcudapool.so:/a/b.so:/c.so", tree);
  assert_var(out, "LD_PRELOAD", want);
}

Test(launcher, stats_forms) {
  char out[16384];
  cr_assert(eq(int, run_env("", "--stats", out, sizeof out), 0));
  assert_var(out, "CUDAPOOL_STATS", "1");
  assert_unset(out, "CUDAPOOL_STATS_FORMAT");
  cr_assert(eq(int, run_env("", "--json", out, sizeof out), 0));
  assert_var(out, "CUDAPOOL_STATS", "1"); /* --json alone implies --stats */
  assert_var(out, "CUDAPOOL_STATS_FORMAT", "json");
  cr_assert(eq(int, run_env("CUDAPOOL_STATS=/f.json", "--json", out, sizeof out), 0));
  assert_var(out, "CUDAPOOL_STATS", "/f.json");
}

Test(launcher, program_arguments_untouched) {
  char out[4096], cmd[PATH_MAX + 512];
  put_standin("lib/libcudapool.so");
  fmt(cmd, sizeof cmd,
      CLEAN_ENV "CUDAPOOL_LIB='%s/lib/libcudapool.so' scripts/cudapool --mode sync "
                "/bin/sh -c 'printf \"%%s|\" \"$@\"' x 'a b' --limit -- 2>/dev/null",
      tree);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0));
  cr_assert(eq(str, out, "a b|--limit|--|"));
}

struct layout {
  const char *launcher, *lib;
};

static void check_layout(struct layout l) {
  char out[16384], cmd[2 * PATH_MAX], want[PATH_MAX + 32];
  put_launcher(l.launcher);
  put_standin(l.lib);
  fmt(cmd, sizeof cmd, CLEAN_ENV "'%s/%s' -- /usr/bin/env 2>/dev/null", tree, l.launcher);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  fmt(want, sizeof want, "%s/%s", tree, l.lib);
  assert_var(out, "LD_PRELOAD", want);
}

Test(launcher, finds_library_in_source_tree) {
  check_layout((struct layout){"scripts/cudapool", "build/libcudapool.so"});
}

Test(launcher, finds_library_when_installed) {
  check_layout((struct layout){"bin/cudapool", "lib/libcudapool.so"});
}

Test(launcher, finds_library_through_a_symlink) {
  char out[16384], cmd[3 * PATH_MAX], want[PATH_MAX + 32];
  put_launcher("prefix/bin/cudapool");
  put_standin("prefix/lib/libcudapool.so");
  fmt(cmd, sizeof cmd, "mkdir -p '%s/usr/bin' && ln -s '%s/prefix/bin/cudapool' '%s/usr/bin/'", tree, tree,
      tree);
  cr_assert(eq(int, system(cmd), 0));
  fmt(cmd, sizeof cmd, CLEAN_ENV "'%s/usr/bin/cudapool' -- /usr/bin/env 2>/dev/null", tree);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0));
  fmt(want, sizeof want, "%s/prefix/lib/libcudapool.so", tree);
  assert_var(out, "LD_PRELOAD", want);
}

struct failure {
  const char *args;
  int status;
  const char *message;
};

static void check_failure(const char *prefix_env, struct failure f) {
  char out[4096], cmd[2 * PATH_MAX];
  put_launcher("bin/cudapool");
  fmt(cmd, sizeof cmd, CLEAN_ENV "%s '%s/bin/cudapool' %s 2>&1", prefix_env, tree, f.args);
  int rc = run(cmd, out, sizeof out);
  cr_assert(eq(int, rc, f.status), "cudapool %s: %s", f.args, out);
  cr_assert(ne(ptr, strstr(out, f.message), NULL), "cudapool %s said: %s", f.args, out);
}

Test(launcher, errors_are_clear) {
  check_failure("", (struct failure){"-- /usr/bin/env", 127, "cudapool: cannot find libcudapool.so"});
  check_failure("CUDAPOOL_LIB=/nonexistent/libcudapool.so",
                (struct failure){"-- true", 127, "CUDAPOOL_LIB=/nonexistent/libcudapool.so: no such file"});
  check_failure("", (struct failure){"--limt 8G -- true", 2,
                                     "cudapool: unknown option --limt; did you mean --limit? (see cudapool --help)\n"});
  check_failure("", (struct failure){"--expand -- true", 2,
                                     "cudapool: unknown option --expand; did you mean --expandable? (see cudapool "
                                     "--help)\n"});
  check_failure("", (struct failure){"--maxcached 1G -- true", 2, "did you mean --max-cached?"});
  check_failure("", (struct failure){"--frobnicate -- true", 2,
                                     "cudapool: unknown option --frobnicate (see cudapool --help)\n"});
  check_failure("", (struct failure){"--stats /tmp/x.txt true", 2,
                                     "cudapool: --stats takes its file after '=': --stats=/tmp/x.txt "
                                     "(\"/tmp/x.txt\" is no program to run)\n"});
  check_failure("", (struct failure){"--limit", 2, "cudapool: --limit needs a value"});
  check_failure("", (struct failure){"--verbose=1 true", 2, "cudapool: --verbose takes no value"});
  check_failure("", (struct failure){"--mode sync", 2, "cudapool: no program given"});
  check_failure("", (struct failure){"-- no-such-program-xyz", 127,
                                     "cudapool: no-such-program-xyz: command not found"});
}

/* The program never runs without the pool it was asked to have: a library
 * ld.so would not preload as cudapool is refused before it starts (exit 2,
 * one line), and "--" is never a flag's value. */
Test(launcher, refuses_to_run_the_program_unpooled) {
  put_file("notlib/libcudapool.so", "not a library\n", 0644);
  put_standin("with space/libcudapool.so");
  put_standin("with:colon/libcudapool.so");
  char env[PATH_MAX + 64];
  check_failure(
      "CUDAPOOL_LIB=/etc/passwd",
      (struct failure){"-- true", 2,
                       "cudapool: CUDAPOOL_LIB=/etc/passwd is not libcudapool.so (an ELF shared object "
                       "with cudapool's version tag), so true would run without cudapool; set "
                       "CUDAPOOL_LIB to the library, or unset it\n"});
  fmt(env, sizeof env, "CUDAPOOL_LIB='%s/notlib/libcudapool.so'", tree);
  check_failure(env,
                (struct failure){"-- true", 2, "libcudapool.so is not libcudapool.so (an ELF shared object"});
  fmt(env, sizeof env, "CUDAPOOL_LIB='%s/with space/libcudapool.so'", tree);
  check_failure(env, (struct failure){"-- true", 2, "space/libcudapool.so\" has a blank or a colon"});
  fmt(env, sizeof env, "CUDAPOOL_LIB='%s/with:colon/libcudapool.so'", tree);
  check_failure(env, (struct failure){"-- true", 2, "colon/libcudapool.so\" has a blank or a colon"});
  put_standin("lib/libcudapool.so");
  for (int i = 0; i < 2; i++) {
    fmt(env, sizeof env, "CUDAPOOL_LIB='%s/lib/libcudapool.so'", tree);
    check_failure(env, (struct failure){i ? "--limit -- true" : "--trace -- true", 2,
                                        i ? "cudapool: --limit needs a value (see cudapool --help)\n"
                                          : "cudapool: --trace needs a value (see cudapool --help)\n"});
  }
}

Test(launcher, help_names_every_option_and_flag) {
  static char out[32768];
  cr_assert(eq(int, run("scripts/cudapool --help", out, sizeof out), 0));
  for (size_t i = 0; i < cp_option_count(); i++)
    cr_assert(ne(ptr, strstr(out, cp_option_name(i)), NULL), "--help lacks %s", cp_option_name(i));
  static const char *const flags[] = {"--limit",        "--max-cached",
                                      "--max-split",    "--mode",
                                      "--stats[=FILE]", "--json",
                                      "--trace",        "--layer",
                                      "--verbose",      "--disable",
                                      "CUDAPOOL_LIB",   "cudapool replay",
                                      "cudapool plot",  "cudapool stats PID",
                                      "cudapool top"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    cr_assert(ne(ptr, strstr(out, flags[i]), NULL), "--help lacks %s", flags[i]);
}

Test(launcher, replay_and_plot_dispatch) {
  char out[4096], cmd[2 * PATH_MAX];
  put_launcher("scripts/cudapool");
  put_file("scripts/cudapool-replay", "#!/bin/sh\necho \"replay:$*\"\n", 0755);
  put_file("build/cudapool-plot", "#!/bin/sh\necho \"plot:$*\"\n", 0755);
  fmt(cmd, sizeof cmd, CLEAN_ENV "'%s/scripts/cudapool' replay --limit 'a b' 2>&1", tree);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0));
  cr_assert(eq(str, out, "replay:--limit a b\n"));
  fmt(cmd, sizeof cmd, CLEAN_ENV "'%s/scripts/cudapool' plot x.json 2>&1", tree);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0));
  cr_assert(eq(str, out, "plot:x.json\n"));
}

/* stats runs cudapool-stats; top is cudapool-stats --top. */
Test(launcher, stats_and_top_dispatch) {
  char out[4096], cmd[2 * PATH_MAX];
  put_launcher("scripts/cudapool");
  put_file("build/cudapool-stats", "#!/bin/sh\necho \"stats:$*\"\n", 0755);
  fmt(cmd, sizeof cmd, CLEAN_ENV "'%s/scripts/cudapool' stats 42 --json 2>&1", tree);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0));
  cr_assert(eq(str, out, "stats:42 --json\n"));
  fmt(cmd, sizeof cmd, CLEAN_ENV "'%s/scripts/cudapool' top --iterations 1 2>&1", tree);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0));
  cr_assert(eq(str, out, "stats:--top --iterations 1\n"));
}

Test(launcher, missing_tool_is_reported) {
  check_failure("", (struct failure){"plot x", 127, "cudapool: cudapool-plot not found"});
}

/* Whether [list, end) holds `flag` as a whole word. */
static bool lists_flag(const char *list, const char *end, const char *flag) {
  size_t n = strlen(flag);
  for (const char *p = strstr(list, flag); p != NULL && p < end; p = strstr(p + 1, flag))
    if (p[-1] != '-' && (p[n] == ' ' || p[n] == '\n' || p[n] == ')')) return true;
  return false;
}

/* Drift between the launcher's flags, its --help, the option table and
 * cudapool-stats: every flag the launcher takes (its `flags=(...)` list) is
 * described in --help and no --help line describes another; every option
 * of the table is named in --help; every flag cudapool-stats --help offers
 * is in the launcher's usage of `stats`/`top` (its --top being `top`). */
Test(launcher, help_matches_the_flags_the_table_and_cudapool_stats) {
  static char script[65536], help[16384], stats_help[8192];
  FILE *f = fopen("scripts/cudapool", "r");
  cr_assert(ne(ptr, f, NULL), "run from the repository root");
  script[fread(script, 1, sizeof script - 1, f)] = '\0';
  fclose(f);
  char cmd[PATH_MAX + 64];
  cr_assert(eq(int, run(CLEAN_ENV "scripts/cudapool --help", help, sizeof help), 0));
  const char *list = strstr(script, "\nflags=(");
  cr_assert(ne(ptr, (void *)list, NULL), "scripts/cudapool has no flags=(...) list");
  const char *end = strchr(list, ')');
  size_t nflags = 0;
  for (const char *p = strstr(list, "--"); p != NULL && p < end; p = strstr(p + 2, "--")) {
    char flag[40], line[48];
    cr_assert(eq(int, sscanf(p, "%39[-a-z]", flag), 1));
    snprintf(line, sizeof line, "\n  %s", flag);
    bool described = strstr(help, line) != NULL || (strcmp(flag, "--help") == 0 && strstr(help, "-h, --help"));
    cr_expect(described, "--help describes no %s", flag);
    nflags++;
    p += strlen(flag) - 2;
  }
  cr_assert(gt(sz, nflags, 10));
  for (const char *p = strstr(help, "\n  --"); p != NULL; p = strstr(p + 1, "\n  --")) {
    char flag[40];
    cr_assert(eq(int, sscanf(p + 3, "%39[-a-z]", flag), 1));
    cr_expect(lists_flag(list, end + 1, flag), "--help describes %s, which flags=(...) lacks", flag);
  }
  for (size_t i = 0; i < cp_option_count(); i++)
    cr_expect(ne(ptr, strstr(help, cp_option_name(i)), NULL), "--help never names %s", cp_option_name(i));
  const char *build = getenv("CUDAPOOL_TEST_BUILD");
  fmt(cmd, sizeof cmd, "'%s/cudapool-stats' --help", build != NULL && *build ? build : "build");
  cr_assert(eq(int, run(cmd, stats_help, sizeof stats_help), 0));
  const char *usage_end = strstr(help, "\n\n");
  for (const char *p = strstr(stats_help, "--"); p != NULL; p = strstr(p + 2, "--")) {
    char flag[40];
    /* --top is the launcher's `top` */
    if (sscanf(p, "%39[-a-z]", flag) != 1 || strlen(flag) < 3 || strcmp(flag, "--top") == 0) continue;
    const char *in_help = strstr(help, flag);
    cr_expect(in_help != NULL && in_help < usage_end, "cudapool's usage lines lack cudapool-stats' %s", flag);
  }
}

/* --stacks: 1 alone, a depth as given; a depth out of 0..64 refused (exit
 * 2) before the program runs. */
Test(launcher, stacks_forms) {
  char out[16384];
  cr_assert(eq(int, run_env("", "--stacks", out, sizeof out), 0));
  assert_var(out, "CUDAPOOL_STACKS", "1");
  cr_assert(eq(int, run_env("", "--stacks=24", out, sizeof out), 0));
  assert_var(out, "CUDAPOOL_STACKS", "24");
  cr_assert(eq(int, run_env("", "--stacks=64", out, sizeof out), 0));
  assert_var(out, "CUDAPOOL_STACKS", "64");
  cr_assert(eq(int, run_env("", "--stacks=65", out, sizeof out), 2));
  cr_assert(eq(int, run_env("", "--stacks=deep", out, sizeof out), 2));
}
