/* layers.c: scripts/check-layers, the rule that the code's folders are
 * layers (shim/README.md): it passes on this build, and it fails on a
 * circle across folders, a symbol used upwards and an include pointing up,
 * each planted in a small tree of its own (two objects compiled here). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay_util.h"

static char root[PATH_MAX], tmp[64];

static void setup(void) {
  cr_assert(eq(int, ru_repo_root(root, sizeof root), 0));
  cr_assert(eq(int, ru_mkdtemp(tmp), 0));
}
static void teardown(void) { ru_rmtree(tmp); }

static void write_file(const char *rel, const char *text) {
  char path[PATH_MAX], cmd[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", tmp, rel);
  snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
  cr_assert(eq(int, system(cmd), 0));
  FILE *f = fopen(path, "w");
  cr_assert(f != NULL, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

/* tmp/src/<rel>.c compiled to tmp/build/<rel>.o. */
static void plant(const char *rel, const char *text) {
  char src[PATH_MAX], cmd[3 * PATH_MAX];
  snprintf(src, sizeof src, "src/%s.c", rel);
  write_file(src, text);
  snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s/build/%s')\" && cc -c -o '%s/build/%s.o' '%s/src/%s.c'", tmp,
           rel, tmp, rel, tmp, rel);
  cr_assert(eq(int, system(cmd), 0), "cannot compile %s", rel);
}

static int check_planted(char **out) {
  char cmd[3 * PATH_MAX];
  snprintf(cmd, sizeof cmd, "CHECK_LAYERS_ROOT='%s/src' '%s/scripts/check-layers' '%s/build' 2>&1", tmp, root, tmp);
  return ru_run(cmd, out);
}

TestSuite(layers, .init = setup, .fini = teardown);

Test(layers, this_build_has_no_circle_across_folders_and_nothing_pointing_up) {
  const char *build = getenv("CUDAPOOL_TEST_BUILD");
  char cmd[2 * PATH_MAX], *out = NULL;
  snprintf(cmd, sizeof cmd, "cd '%s' && scripts/check-layers '%s' 2>&1", root, build ? build : "build");
  int rc = ru_run(cmd, &out);
  cr_expect(eq(int, rc, 0), "check-layers failed:\n%s", out ? out : "");
  cr_expect(out && strstr(out, "no circle across folders, nothing points up"), "%s", out ? out : "");
  free(out);
}

Test(layers, a_circle_across_folders_fails_and_names_both_ends) {
  plant("shim/state/device", "int backend_call(void);\nint state_call(void) { return backend_call(); }\n");
  plant("shim/backend/real", "int state_call(void);\nint backend_call(void) { return state_call() + 1; }\n");
  char *out = NULL;
  int rc = check_planted(&out);
  cr_expect(eq(int, rc, 1), "%s", out ? out : "");
  cr_expect(out && strstr(out, "circle across shim/backend, shim/state: shim/backend/real shim/state/device"), "%s",
            out ? out : "");
  cr_expect(out && strstr(out, "symbol up: shim/backend/real.o uses state_call of shim/state/device.o"), "%s",
            out ? out : "");
  free(out);
}

Test(layers, a_use_downwards_passes_and_an_include_upwards_fails) {
  plant("shim/state/device", "int backend_call(void);\nint state_call(void) { return backend_call(); }\n");
  plant("shim/backend/real", "int backend_call(void) { return 1; }\n");
  char *out = NULL;
  cr_expect(eq(int, check_planted(&out), 0), "%s", out ? out : "");
  free(out);
  write_file("src/shim/state/device.h", "int state_call(void);\n");
  write_file("src/shim/backend/real.c", "#include \"state/device.h\"\nint backend_call(void) { return 1; }\n");
  cr_expect(eq(int, check_planted(&out), 1), "%s", out ? out : "");
  cr_expect(out && strstr(out, "include up: shim/backend/real.c includes \"state/device.h\" (shim/state)"), "%s",
            out ? out : "");
  free(out);
}
