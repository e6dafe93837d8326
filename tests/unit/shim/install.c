/* install.c: make install and make uninstall (mk/install.mk) into a
 * DESTDIR of the test's own, as a packager would run them.
 *
 * Runs from the repository root (make test does). Each test installs the
 * build folder the Makefile exports ($CUDAPOOL_TEST_BUILD: build/, or
 * build/asan under test-sanitize) with PREFIX=/opt/cudapool-test under a
 * fresh DESTDIR in $CUDAPOOL_TEST_BUILD/tests. Everything it installs is
 * already built, so the inner make only copies; it runs without the outer
 * make's MAKEFLAGS (its jobserver is not ours). */
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

#include "cudapool.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define VERSION STR(CUDAPOOL_VERSION_MAJOR) "." STR(CUDAPOOL_VERSION_MINOR) "." STR(CUDAPOOL_VERSION_PATCH)
#define SONAME "libcudapool.so." STR(CUDAPOOL_VERSION_MAJOR)
#define LIBFILE "libcudapool.so." VERSION
#define PREFIX "/opt/cudapool-test"

static char destdir[PATH_MAX]; /* realpath of this test's DESTDIR */

/* snprintf that fails the test instead of cutting a command short. */
__attribute__((format(printf, 3, 4))) static void fmt(char *buf, size_t cap, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int n = vsnprintf(buf, cap, f, ap);
  va_end(ap);
  cr_assert(lt(int, n, (int)cap), "a command too long for this test");
}

/* The build folder, absolute: $CUDAPOOL_TEST_BUILD, else build/. */
static const char *build_dir(void) {
  static char dir[PATH_MAX];
  const char *b = getenv("CUDAPOOL_TEST_BUILD");
  cr_assert(ne(ptr, realpath(b != NULL && *b ? b : "build", dir), NULL), "no build folder");
  return dir;
}

static void make_destdir(void) {
  char parent[PATH_MAX], tmpl[PATH_MAX];
  fmt(parent, sizeof parent, "%s/tests", build_dir());
  mkdir(parent, 0755);
  fmt(tmpl, sizeof tmpl, "%s/install.XXXXXX", parent);
  cr_assert(ne(ptr, mkdtemp(tmpl), NULL), "mkdtemp under %s", parent);
  cr_assert(ne(ptr, realpath(tmpl, destdir), NULL));
}

static void remove_destdir(void) {
  char cmd[PATH_MAX + 16];
  if (destdir[0] == '\0') return;
  fmt(cmd, sizeof cmd, "rm -rf '%s'", destdir);
  (void)system(cmd);
}

TestSuite(install, .init = make_destdir, .fini = remove_destdir);

/* Run cmd under sh, stdout (and stderr where cmd says 2>&1) into out with
 * trailing blanks cut; the exit status, -1 when it did not exit. */
static int run(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  cr_assert(ne(ptr, p, NULL));
  size_t n = fread(out, 1, cap - 1, p);
  while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\n')) n--;
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* make TARGET into this test's DESTDIR with PREFIX=prefix; its exit status,
 * what it said in out. */
static int make(const char *target, const char *prefix, char *out, size_t cap) {
  char cmd[3 * PATH_MAX];
  /* SAN as the build's: were a source newer than its object, the inner
   * make would rebuild it with the sanitizers the rest was built with. */
  const char *san = getenv("CUDAPOOL_TEST_SAN");
  fmt(cmd, sizeof cmd,
      "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory V=1 %s BUILD='%s' SAN='%s' "
      "DESTDIR='%s' PREFIX='%s' 2>&1",
      target, build_dir(), san ? san : "", destdir, prefix);
  return run(cmd, out, cap);
}

static void install(void) {
  static char out[16384];
  cr_assert(eq(int, make("install", PREFIX, out, sizeof out), 0), "%s", out);
}

/* Every file and link under DESTDIR: "TYPE MODE PATH [LINK TARGET]". */
static void listing(char *out, size_t cap) {
  char cmd[PATH_MAX + 128];
  fmt(cmd, sizeof cmd, "cd '%s' && find . ! -type d -printf '%%y %%m %%p %%l\\n' | LC_ALL=C sort", destdir);
  cr_assert(eq(int, run(cmd, out, cap), 0), "%s", out);
}

#define D "./opt/cudapool-test"
static const char installed[] = "f 644 " D "/include/cudapool.h \n"
                                "f 644 " D "/lib/pkgconfig/cudapool.pc \n"
                                "f 644 " D "/share/man/man1/cudapool.1 \n"
                                "f 644 " D "/share/man/man1/cudapool-replay.1 \n"
                                "f 644 " D "/share/man/man1/cudapool-plot.1 \n"
                                "f 644 " D "/share/man/man1/cudapool-stats.1 \n"
                                "f 644 " D "/share/man/man1/cudapool-view.1 \n"
                                "f 644 " D "/share/man/man1/cudapool-export.1 \n"
                                "f 755 " D "/bin/cudapool \n"
                                "f 755 " D "/bin/cudapool-plot \n"
                                "f 755 " D "/bin/cudapool-view \n"
                                "f 755 " D "/bin/cudapool-export \n"
                                "f 644 " D "/share/cudapool/cpviz/__init__.py \n"
                                "f 644 " D "/share/cudapool/cpviz/inputs.py \n"
                                "f 644 " D "/share/cudapool/cpviz/memviz.py \n"
                                "f 644 " D "/share/cudapool/cpviz/page.css \n"
                                "f 644 " D "/share/cudapool/cpviz/page.js \n"
                                "f 644 " D "/share/cudapool/cpviz/page.py \n"
                                "f 644 " D "/share/cudapool/cpviz/perfetto.py \n"
                                "f 644 " D "/share/cudapool/cpviz/recording.py \n"
                                "f 644 " D "/share/cudapool/cpviz/snapshot.py \n"
                                "f 644 " D "/share/cudapool/cpviz/stacks_table.py \n"
                                "f 644 " D "/share/cudapool/cpviz/timeline.py \n"
                                "f 644 " D "/share/cudapool/cpviz/trace.py \n"
                                "f 755 " D "/bin/cudapool-replay \n"
                                "f 755 " D "/bin/cudapool-stats \n"
                                "f 755 " D "/lib/" LIBFILE " \n"
                                "l 777 " D "/lib/libcudapool.so " SONAME "\n"
                                "l 777 " D "/lib/" SONAME " " LIBFILE;

/* installed, sorted as listing() sorts. */
static void expected_listing(char *out, size_t cap) {
  char cmd[sizeof installed + 64];
  fmt(cmd, sizeof cmd, "printf '%%s\\n' '%s' | LC_ALL=C sort", installed);
  cr_assert(eq(int, run(cmd, out, cap), 0));
}

/* The same bytes at PREFIX/rel under DESTDIR as at src. */
static void same_file(const char *src, const char *rel) {
  char cmd[3 * PATH_MAX], out[1024];
  fmt(cmd, sizeof cmd, "cmp '%s' '%s%s/%s' 2>&1", src, destdir, PREFIX, rel);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
}

Test(install, the_tree_files_modes_and_links) {
  char got[8192], want[8192], src[PATH_MAX];
  install();
  listing(got, sizeof got);
  expected_listing(want, sizeof want);
  cr_assert(eq(str, got, want));
  fmt(src, sizeof src, "%s/" LIBFILE, build_dir());
  same_file(src, "lib/" LIBFILE);
  fmt(src, sizeof src, "%s/cudapool-replay", build_dir());
  same_file(src, "bin/cudapool-replay");
  same_file("include/cudapool.h", "include/cudapool.h");
  same_file("docs/cudapool.1", "share/man/man1/cudapool.1");
  same_file("docs/cudapool-stats.1", "share/man/man1/cudapool-stats.1");
  same_file("scripts/cudapool", "bin/cudapool");
  same_file("scripts/cudapool-plot", "bin/cudapool-plot");
  same_file("scripts/cudapool-view", "bin/cudapool-view");
  same_file("scripts/cpviz/page.js", "share/cudapool/cpviz/page.js");
}

/* man NAME finds a page for each program a packager installs: a program
 * added to INSTALL_PROGRAMS without its page in MAN_PAGES fails here. */
Test(install, a_man_page_for_every_program) {
  char cmd[2 * PATH_MAX], out[4096];
  install();
  fmt(cmd, sizeof cmd,
      "cd '%s" PREFIX "' && n=0 && for p in bin/*; do n=$((n+1)); "
      "[ -f \"share/man/man1/${p#bin/}.1\" ] || echo \"no share/man/man1/${p#bin/}.1 for $p\"; done; "
      "echo \"$n programs\"",
      destdir);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(eq(str, out, "6 programs"));
}

Test(install, the_library_carries_its_soname) {
  char cmd[2 * PATH_MAX], out[4096];
  install();
  fmt(cmd, sizeof cmd, "readelf -d '%s" PREFIX "/lib/libcudapool.so' | grep '(SONAME)'", destdir);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(ne(ptr, strstr(out, "Library soname: [" SONAME "]"), NULL), "%s", out);
}

/* The installed launcher finds the installed library (../lib from its
 * folder) and the installed replayer (next to itself). */
Test(install, the_launcher_finds_what_was_installed) {
  char cmd[2 * PATH_MAX], out[8192], want[2 * PATH_MAX];
  install();
  fmt(cmd, sizeof cmd, "env -i PATH=/usr/bin:/bin '%s" PREFIX "/bin/cudapool' --version 2>&1", destdir);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  fmt(want, sizeof want, "cudapool " VERSION " (%s" PREFIX "/lib/libcudapool.so)", destdir);
  cr_assert(eq(str, out, want));
  fmt(cmd, sizeof cmd, "env -i PATH=/usr/bin:/bin '%s" PREFIX "/bin/cudapool' replay --help 2>&1", destdir);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(eq(int, strncmp(out, "usage: cudapool-replay", 22), 0), "%s", out);
  /* The viewer finds its package in share/cudapool: a page from a bundled
   * trace, written outside the source tree. */
  char root[PATH_MAX];
  cr_assert(ne(ptr, getcwd(root, sizeof root), NULL));
  fmt(cmd, sizeof cmd,
      "cd / && env -i PATH=/usr/bin:/bin '%s" PREFIX "/bin/cudapool' view '%s/traces/transformer.csv.gz' "
      "-o '%s/view.html' >/dev/null 2>&1; echo status=$?; head -c 15 '%s/view.html'",
      destdir, root, destdir, destdir);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(eq(str, out, "status=0\n<!DOCTYPE html>"), "%s", out);
}

/* pkg-config reads the installed cudapool.pc; a program built with its
 * flags (against the DESTDIR tree, through PKG_CONFIG_SYSROOT_DIR) links the
 * installed library by its SONAME, before the (fake) CUDA runtime as
 * docs/USAGE.md says to, so its cudaMalloc is served by the pool: one miss,
 * then two hits. Preloading the library as well loads no second copy: the
 * loader knows it by its SONAME. */
static const char program[] =
    "#include <cudapool.h>\n"
    "#include <link.h>\n"
    "#include <stdio.h>\n"
    "#include <string.h>\n"
    "int cudaMalloc(void **p, size_t n);\n"
    "int cudaFree(void *p);\n"
    "static int count(struct dl_phdr_info *i, size_t n, void *copies) {\n"
    "  (void)n;\n"
    "  if (strstr(i->dlpi_name, \"libcudapool\")) ++*(int *)copies;\n"
    "  return 0;\n"
    "}\n"
    "int main(void) {\n"
    "  int copies = 0;\n"
    "  void *p;\n"
    "  for (int i = 0; i < 3; i++)\n"
    "    if (cudaMalloc(&p, 1 << 20) != 0 || cudaFree(p) != 0) return 1;\n"
    "  cudapool_stats_t s = {.size = sizeof s, .version = CUDAPOOL_STATS_VERSION};\n"
    "  if (cudapool_stats(0, &s) != 0) return 2;\n"
    "  dl_iterate_phdr(count, &copies);\n"
    "  printf(\"version=%d copies=%d misses=%llu hits=%llu\\n\", cudapool_version(), copies,\n"
    "         (unsigned long long)s.misses, (unsigned long long)s.hits);\n"
    "  return 0;\n"
    "}\n";

Test(install, pkg_config_builds_a_program_against_the_control_api) {
  char cmd[4 * PATH_MAX], out[8192], pcpath[PATH_MAX], src[PATH_MAX], want[64], libpath[3 * PATH_MAX];
  char out_preloaded[8192];
  if (run("command -v pkg-config", out, sizeof out) != 0)
    cr_skip("pkg-config not installed (scripts/deps installs it)");
  install();
  fmt(pcpath, sizeof pcpath, "PKG_CONFIG_PATH='%s" PREFIX "/lib/pkgconfig'", destdir);
  fmt(cmd, sizeof cmd, "env %s pkg-config --modversion cudapool 2>&1", pcpath);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(eq(str, out, VERSION));
  fmt(cmd, sizeof cmd, "env %s pkg-config --cflags --libs cudapool 2>&1", pcpath);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(eq(str, out, "-I" PREFIX "/include -L" PREFIX "/lib -lcudapool"));

  fmt(src, sizeof src, "%s/prog.c", destdir);
  FILE *f = fopen(src, "w");
  cr_assert(ne(ptr, f, NULL), "%s", src);
  fputs(program, f);
  fclose(f);
  fmt(cmd, sizeof cmd,
      "cd '%s' && cc -std=c11 -D_GNU_SOURCE prog.c -o prog -Wl,--no-as-needed "
      "$(env %s PKG_CONFIG_SYSROOT_DIR='%s' pkg-config --cflags --libs cudapool) "
      "-L'%s/fakecudart' -l:libcudart.so.13 2>&1",
      destdir, pcpath, destdir, build_dir());
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s\n%s", cmd, out);

  /* A sanitizer build of the library needs its runtimes loaded first. */
  const char *san = getenv("CUDAPOOL_TEST_SAN_PRELOAD");
  san = san != NULL ? san : "";
  fmt(want, sizeof want, "version=%d copies=1 misses=1 hits=2", CUDAPOOL_VERSION);
  fmt(libpath, sizeof libpath, "LD_LIBRARY_PATH='%s" PREFIX "/lib:%s/fakecudart'", destdir, build_dir());
  fmt(cmd, sizeof cmd, "cd '%s' && LD_PRELOAD='%s' %s ./prog 2>&1", destdir, san, libpath);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(eq(str, out, want));
  fmt(cmd, sizeof cmd, "cd '%s' && LD_PRELOAD='%s %s" PREFIX "/lib/libcudapool.so' %s ./prog 2>&1", destdir,
      san, destdir, libpath);
  cr_assert(eq(int, run(cmd, out_preloaded, sizeof out_preloaded), 0), "%s", out_preloaded);
  cr_assert(eq(str, out_preloaded, want));
}

/* uninstall removes what install put there and nothing else: another
 * package's files in the same folders stay, and so do those folders; the
 * folders it leaves empty go (PREFIX itself stays). */
Test(install, uninstall_removes_exactly_what_install_put_there) {
  char out[8192], cmd[2 * PATH_MAX];
  fmt(cmd, sizeof cmd,
      "install -D -m 644 /dev/null '%s" PREFIX "/lib/libother.so.1' && "
      "install -D -m 644 /dev/null '%s" PREFIX "/bin/other' 2>&1",
      destdir, destdir);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  install();
  cr_assert(eq(int, make("uninstall", PREFIX, out, sizeof out), 0), "%s", out);
  listing(out, sizeof out);
  cr_assert(eq(str, out, "f 644 " D "/bin/other \nf 644 " D "/lib/libother.so.1"));
  fmt(cmd, sizeof cmd, "cd '%s' && find . -type d | LC_ALL=C sort", destdir);
  cr_assert(eq(int, run(cmd, out, sizeof out), 0), "%s", out);
  cr_assert(eq(str, out, ".\n./opt\n" D "\n" D "/bin\n" D "/lib"), "the folders left: %s", out);
  /* Again: nothing left to remove is not an error. */
  cr_assert(eq(int, make("uninstall", PREFIX, out, sizeof out), 0), "%s", out);
}

Test(install, a_relative_prefix_is_refused) {
  char out[4096], got[4096];
  cr_assert(eq(int, make("install", "usr/local", out, sizeof out), 2), "%s", out);
  cr_assert(ne(ptr, strstr(out, "PREFIX must be an absolute path, not \"usr/local\""), NULL), "%s", out);
  cr_assert(eq(int, make("uninstall", "usr/local", out, sizeof out), 2), "%s", out);
  listing(got, sizeof got);
  cr_assert(eq(str, got, ""), "nothing installed");
}
