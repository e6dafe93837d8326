/* soname.c: the library by each of its names (mk/shim.mk): the build folder
 * holds libcudapool.so.X.Y.Z, with SONAME libcudapool.so.X, and the links
 * libcudapool.so.X and libcudapool.so to it, and LD_PRELOAD of any of the
 * three serves the program the same. The installed tree is checked by
 * tests/unit/shim/install.c. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudapool.h"
#include "it_check.h"

Test(soname, both_links_lead_to_the_versioned_file) {
  char path[PATH_MAX + 64], real[PATH_MAX], want[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", it_build(), it_shim_name(IT_SHIM_FILE));
  cr_assert(ne(ptr, realpath(path, want), NULL), "%s", path);
  cr_assert(eq(str, want, path), "%s is a link, not the library", path);
  const int links[] = {IT_SHIM, IT_SHIM_SONAME};
  for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
    snprintf(path, sizeof path, "%s/%s", it_build(), it_shim_name(links[i]));
    cr_assert(ne(ptr, realpath(path, real), NULL), "%s", path);
    cr_assert(eq(str, real, want), "%s", path);
  }
}

Test(soname, the_library_names_its_major_version) {
  it_result r = {0};
  char cmd[PATH_MAX + 128], want[64];
  snprintf(cmd, sizeof cmd, "readelf -d '%s/%s' | sed -n 's/.*(SONAME).*\\[\\(.*\\)\\]$/\\1/p'", it_build(),
           it_shim_name(IT_SHIM_FILE));
  const char *soname = it_shell(&r, cmd);
  cr_assert(ne(ptr, (void *)soname, NULL));
  snprintf(want, sizeof want, "%s\n", it_shim_name(IT_SHIM_SONAME));
  cr_assert(eq(str, (char *)soname, want));
  it_free(&r);
}

/* The control program's lines and exit report are the same whichever name
 * was preloaded. */
Test(soname, preloaded_by_any_of_its_names) {
  it_result by_link, other;
  char version[64];
  const char *const env[] = {"CUDAPOOL_STATS=1", NULL};
  it_run_ok(&by_link, IT_SHIM, env, "control", NULL);
  snprintf(version, sizeof version, "control: version=%d", CUDAPOOL_VERSION);
  cr_assert(eq(str, (char *)it_line(&by_link, "control"), version), "--- stderr\n%s", by_link.err);
  cr_assert(eq(int, it_count_lines(by_link.err, "cudapool:   0 "), 1), "--- stderr\n%s", by_link.err);
  const int names[] = {IT_SHIM_SONAME, IT_SHIM_FILE};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    it_run_ok(&other, names[i], env, "control", NULL);
    cr_assert(eq(str, other.out, by_link.out), "%s", it_shim_name(names[i]));
    const char *row = strstr(other.err, "cudapool:   0 "), *want = strstr(by_link.err, "cudapool:   0 ");
    cr_assert(ne(ptr, (void *)row, NULL), "%s\n--- stderr\n%s", it_shim_name(names[i]), other.err);
    cr_assert(eq(str, (char *)row, (char *)want), "%s", it_shim_name(names[i]));
    it_free(&other);
  }
  it_free(&by_link);
}
