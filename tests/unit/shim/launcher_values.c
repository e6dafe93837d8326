/* launcher_values.c: scripts/cudapool refuses a bad flag value before the
 * program starts (exit status 2, naming the flag, the value and the accepted
 * form), by the library's own grammar: every value here goes through both
 * the launcher and the library's option loader (common/options.c, with
 * common/parse.c), and the verdicts must agree. Also --version (read from the
 * library file) and --help on what the launcher serves.
 *
 * Like launcher.c, each run starts from env -i with a stand-in library in a
 * folder of its own under $CUDAPOOL_TEST_BUILD/tests, from the repository
 * root. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cudapool.h"
#include "launcher_standin.h"
#include "options.h"

static char tree[PATH_MAX];

static void make_tree(void) {
  const char *build = getenv("CUDAPOOL_TEST_BUILD");
  char parent[PATH_MAX], tmpl[PATH_MAX + 32];
  snprintf(parent, sizeof parent, "%s/tests", build != NULL && *build ? build : "/tmp");
  mkdir(parent, 0755);
  snprintf(tmpl, sizeof tmpl, "%s/launcher-values.XXXXXX", parent);
  cr_assert(ne(ptr, mkdtemp(tmpl), NULL), "mkdtemp under %s", parent);
  cr_assert(ne(ptr, realpath(tmpl, tree), NULL));
  char lib[PATH_MAX + 32];
  snprintf(lib, sizeof lib, "%s/libcudapool.so", tree); /* empty: not a library */
  FILE *f = fopen(lib, "w");
  cr_assert(ne(ptr, f, NULL));
  fclose(f);
  snprintf(lib, sizeof lib, "%s/standin", tree);
  mkdir(lib, 0755);
  snprintf(lib, sizeof lib, "%s/standin/libcudapool.so", tree);
  cr_assert(eq(int, launcher_put_standin(lib), 0), "%s", lib);
}

static void remove_tree(void) {
  char cmd[PATH_MAX + 16];
  if (tree[0] == '\0') return;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tree);
  (void)system(cmd);
}

TestSuite(launcher_values, .init = make_tree, .fini = remove_tree);

/* Run cmd under sh, its output into out; the exit status (-1: not exited). */
static int run(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  cr_assert(ne(ptr, p, NULL));
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 'value' for sh, with its single quotes escaped. */
static void quoted(const char *value, char *out, size_t cap) {
  size_t n = 0;
  out[n++] = '\'';
  for (const char *s = value; *s; s++) {
    cr_assert(lt(sz, n + 5, cap));
    if (*s == '\'') {
      memcpy(out + n, "'\\''", 4);
      n += 4;
    } else {
      out[n++] = *s;
    }
  }
  out[n++] = '\'';
  out[n] = '\0';
}

/* scripts/cudapool FLAG VALUE -- /bin/echo ran, stdout and stderr in out. */
static int launch(const char *flag, const char *value, char *out, size_t cap) {
  static char q[9000], cmd[9000 + 2 * PATH_MAX];
  quoted(value, q, sizeof q);
  snprintf(cmd, sizeof cmd,
           "env -i PATH=/usr/bin:/bin CUDAPOOL_LIB='%s/standin/libcudapool.so' scripts/cudapool %s%s%s "
           "-- /bin/echo ran 2>&1",
           tree, flag, flag[strlen(flag) - 1] == '=' ? "" : " ", q);
  return run(cmd, out, cap);
}

static const char *lib_value;
static const char *lib_var;
static const char *one_var(const char *name) { return strcmp(name, lib_var) == 0 ? lib_value : NULL; }

/* The library's verdict: does loading var=value warn? */
static bool library_accepts(const char *var, const char *value) {
  cp_options_t o;
  char buf[2048] = "";
  FILE *warn = tmpfile();
  cr_assert(ne(ptr, warn, NULL));
  lib_var = var;
  lib_value = value;
  cp_options_load_as(&o, one_var, warn, false);
  rewind(warn);
  size_t n = fread(buf, 1, sizeof buf - 1, warn);
  fclose(warn);
  return n == 0;
}

static const char *accepted_form(const char *var) {
  for (size_t i = 0; i < cp_option_count(); i++)
    if (strcmp(cp_option_name(i), var) == 0) return cp_option_accepted(i);
  cr_fatal("no option named %s", var);
  return NULL;
}

struct value_case {
  char flag[16];
  char var[24];
  char value[64];
};

#define SIZE_PCT_CASES(flag, var)                                                                           \
  {flag, var, "8G"}, {flag, var, "8Q"}, {flag, var, "0"}, {flag, var, "00"}, {flag, var, "512"},            \
      {flag, var, "512B"}, {flag, var, "512b"}, {flag, var, "1.5"}, {flag, var, "1.5G"},                    \
      {flag, var, "1.5B"}, {flag, var, "0.5k"}, {flag, var, "8GiB"}, {flag, var, "8gib"},                   \
      {flag, var, "8GB"}, {flag, var, "8Gi"}, {flag, var, "8iB"}, {flag, var, "8GBB"}, {flag, var, "8 G"},  \
      {flag, var, " 8G "}, {flag, var, "\t8G\n"}, {flag, var, "+8G"}, {flag, var, "-1"},                    \
      {flag, var, "0x10"}, {flag, var, "1e9"}, {flag, var, ".5G"}, {flag, var, "5.G"}, {flag, var, "1P"},   \
      {flag, var, "8\nG"}, {flag, var, "18446744073709551615"}, {flag, var, "18446744073709551616"},        \
      {flag, var, "000018446744073709551615"}, {flag, var, "99999999999999999999999"},                      \
      {flag, var, "18014398509481983K"}, {flag, var, "18014398509481984K"}, {flag, var, "17592186044415M"}, \
      {flag, var, "17592186044416M"}, {flag, var, "17179869183G"}, {flag, var, "17179869184G"},             \
      {flag, var, "16777215T"}, {flag, var, "16777216T"}, {flag, var, "16777215.999T"}, {flag, var, "80%"}, \
      {flag, var, "12.5%"}, {flag, var, "0%"}, {flag, var, "0.0%"}, {flag, var, "0.001%"},                  \
      {flag, var, "00.5%"}, {flag, var, "100%"}, {flag, var, "0100%"}, {flag, var, "100.0%"},               \
      {flag, var, "100.01%"}, {flag, var, "101%"}, {flag, var, "1000%"}, {flag, var, "50%%"},               \
      {flag, var, "50.%"}, {flag, var, "%"}, {flag, var, "80 %"}, {flag, var, " 80% "}, {flag, var, "8G%"}, \
  {                                                                                                         \
    flag, var, "banana"                                                                                     \
  }

ParameterizedTestParameters(launcher_values, same_verdict_as_the_library) {
  static struct value_case cases[] = {
      SIZE_PCT_CASES("--limit", "CUDAPOOL_LIMIT"),
      /* the same parser as --limit's */
      {"--max-cached", "CUDAPOOL_MAX_CACHED", "2G"},
      {"--max-cached", "CUDAPOOL_MAX_CACHED", "80%"},
      {"--max-cached", "CUDAPOOL_MAX_CACHED", "150%"},
      {"--max-cached", "CUDAPOOL_MAX_CACHED", "2Q"},
      SIZE_PCT_CASES("--max-split", "CUDAPOOL_MAX_SPLIT"),
      /* its floor, 21 MiB: under it (0 excepted) the library warns */
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "1M"},
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "20.99M"},
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "21M"},
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "22020095"},
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "22020096"},
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "21503K"},
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "21504K"},
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "0.0205078125G"},
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "0.0205078124G"},
      {"--max-split", "CUDAPOOL_MAX_SPLIT", "0.0001K"},
      {"--mode", "CUDAPOOL_MODE", "auto"},
      {"--mode", "CUDAPOOL_MODE", "SYNC"},
      {"--mode", "CUDAPOOL_MODE", " unsafe-immediate "},
      {"--mode", "CUDAPOOL_MODE", "unsafe_immediate"},
      {"--mode", "CUDAPOOL_MODE", "fast"},
      {"--mode", "CUDAPOOL_MODE", "auto2"},
      {"--layer", "CUDAPOOL_LAYER", "runtime"},
      {"--layer", "CUDAPOOL_LAYER", "Driver"},
      {"--layer", "CUDAPOOL_LAYER", "both"},
      {"--layer", "CUDAPOOL_LAYER", "cuda"},
      {"--trace", "CUDAPOOL_TRACE", "t.%p.csv"},
      {"--trace", "CUDAPOOL_TRACE", "/tmp/a b"},
      {"--trace", "CUDAPOOL_TRACE", "off"},
      {"--trace", "CUDAPOOL_TRACE", "0"},
      {"--trace", "CUDAPOOL_TRACE", "1"},
      {"--trace", "CUDAPOOL_TRACE", "Yes"},
      {"--stats=", "CUDAPOOL_STATS", "/tmp/r-%p.json"},
      {"--stats=", "CUDAPOOL_STATS", "stderr"},
      {"--stats=", "CUDAPOOL_STATS", "off"},
      {"--stats=", "CUDAPOOL_STATS", "on"},
  };
  return cr_make_param_array(struct value_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct value_case *c, launcher_values, same_verdict_as_the_library) {
  char out[4096];
  bool lib_ok = library_accepts(c->var, c->value);
  int rc = launch(c->flag, c->value, out, sizeof out);
  cr_assert(eq(int, rc, lib_ok ? 0 : 2), "%s '%s': the library %s it, the launcher said (%d):\n%s", c->flag,
            c->value, lib_ok ? "accepts" : "refuses", rc, out);
  if (lib_ok) return;
  char form[512];
  snprintf(form, sizeof form, "(accepted: %s)\n", accepted_form(c->var));
  cr_assert(ne(ptr, strstr(out, form), NULL), "%s '%s' said:\n%s", c->flag, c->value, out);
  cr_assert(eq(ptr, strstr(out, "ran"), NULL), "the program ran");
}

/* A path option's limit is on the name once %p is replaced: 4095 bytes. */
Test(launcher_values, path_length_as_the_library) {
  char name[4200], out[8192];
  for (size_t len = 4094; len <= 4097; len++) {
    memset(name, 'a', len);
    name[len] = '\0';
    bool lib_ok = library_accepts("CUDAPOOL_TRACE", name);
    cr_assert(eq(int, lib_ok, len <= 4095), "%zu", len);
    cr_assert(eq(int, launch("--trace", name, out, sizeof out), lib_ok ? 0 : 2), "%zu bytes: %s", len, out);
    cr_assert(eq(int, launch("--stats=", name, out, sizeof out), lib_ok ? 0 : 2), "%zu bytes: %s", len, out);
  }
}

Test(launcher_values, refusal_names_flag_value_and_form) {
  char out[4096];
  cr_assert(eq(int, launch("--limit", "8Q", out, sizeof out), 2));
  cr_assert(eq(str, out,
               "cudapool: --limit \"8Q\" is not a size (accepted: bytes with optional K/M/G/T suffix, or N% "
               "of device memory)\n"));
  cr_assert(eq(int, launch("--limit=", "8Q", out, sizeof out), 2));
  cr_assert(eq(int, launch("--mode", "fast", out, sizeof out), 2));
  cr_assert(
      eq(str, out, "cudapool: --mode \"fast\" is not a mode (accepted: auto, sync or unsafe-immediate)\n"));
}

/* The environment stays blank-means-unset; a flag given a blank value is a
 * mistake. */
Test(launcher_values, blank_flag_values_refused) {
  char out[4096];
  static const char *const flags[] = {"--limit", "--max-cached", "--max-split",
                                      "--mode",  "--layer",      "--trace"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    cr_assert(eq(int, launch(flags[i], "", out, sizeof out), 2), "%s ''", flags[i]);
    cr_assert(eq(int, launch(flags[i], " ", out, sizeof out), 2), "%s ' '", flags[i]);
  }
}

/* A bad value in the environment is the library's to judge: passed on. */
Test(launcher_values, variables_are_not_judged_here) {
  char out[4096], cmd[PATH_MAX + 256];
  snprintf(
      cmd, sizeof cmd,
      "env -i PATH=/usr/bin:/bin CUDAPOOL_LIB='%s/standin/libcudapool.so' CUDAPOOL_LIMIT=8Q scripts/cudapool "
      "-- /bin/sh -c 'echo \"$CUDAPOOL_LIMIT\"' 2>/dev/null",
      tree);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0));
  cr_assert(eq(str, out, "8Q\n"));
}

/* --version reads the version compiled into the library it would preload. */
Test(launcher_values, version_of_the_library) {
  char out[4096], cmd[3 * PATH_MAX], lib[2 * PATH_MAX], want[3 * PATH_MAX];
  const char *build = getenv("CUDAPOOL_TEST_BUILD");
  if (build != NULL && *build)
    snprintf(cmd, sizeof cmd, "%s/libcudapool.so", build);
  else { /* the build folder above this binary's (BUILD/tests/) */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(gt(sz, (size_t)(n > 0 ? n : 0), 0));
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(cmd, sizeof cmd, "%s/../libcudapool.so", self);
  }
  cr_assert(ne(ptr, realpath(cmd, lib), NULL), "%s", cmd);
  snprintf(cmd, sizeof cmd, "env -i PATH=/usr/bin:/bin CUDAPOOL_LIB='%s' scripts/cudapool --version 2>&1",
           lib);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  snprintf(want, sizeof want, "cudapool %d.%d.%d (%s)\n", CUDAPOOL_VERSION_MAJOR, CUDAPOOL_VERSION_MINOR,
           CUDAPOOL_VERSION_PATCH, lib);
  cr_assert(eq(str, out, want));

  /* The library's, not the launcher's or the header's. */
  snprintf(lib, sizeof lib, "%s/other.so", tree);
  FILE *f = fopen(lib, "w");
  cr_assert(ne(ptr, f, NULL));
  static const char blob[] = "\x7f"
                             "ELF\0\0junk\0@(#)cudapool 9.8.17\0more";
  fwrite(blob, 1, sizeof blob - 1, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "env -i PATH=/usr/bin:/bin CUDAPOOL_LIB='%s' scripts/cudapool --version 2>&1",
           lib);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  snprintf(want, sizeof want, "cudapool 9.8.17 (%s)\n", lib);
  cr_assert(eq(str, out, want));

  snprintf(cmd, sizeof cmd,
           "env -i PATH=/usr/bin:/bin CUDAPOOL_LIB='%s/libcudapool.so' scripts/cudapool --version 2>&1",
           tree);
  cr_assert(eq(int, run(cmd, out, sizeof out), 1), "%s", out);
  cr_assert(ne(ptr, strstr(out, "no cudapool version in it"), NULL), "%s", out);
}

/* README: the driver layer serves statically linked runtimes (nvcc's
 * default); --help must not say the opposite. */
Test(launcher_values, help_serves_static_runtimes_as_the_readme_says) {
  static char out[32768];
  cr_assert(eq(int, run("scripts/cudapool --help", out, sizeof out), 0));
  cr_assert(eq(ptr, strstr(out, "must use the CUDA runtime as a shared"), NULL), "%s", out);
  cr_assert(ne(ptr, strstr(out, "statically linked runtimes (nvcc's default)"), NULL), "%s", out);
  cr_assert(ne(ptr, strstr(out, "--version"), NULL), "%s", out);
}
