/* shim_unit_secure.c: the options in a secure-execution process
 * (common/options.c, cp_options_load_as and cp_secure_exec).
 *
 * Decision pinned here, and documented in docs/OPTIONS.md: with AT_SECURE
 * set (set-user-ID, set-group-ID, file capabilities) every CUDAPOOL_*
 * variable is ignored, bad ones too, and every option keeps its default; the
 * only trace of it is one line when CUDAPOOL_VERBOSE is true. The run of a
 * real set-user-ID program is in tests/shim_it_files.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

#include "options.h"

static struct { const char *name, *value; } env[32];
static int nenv;

static void set(const char *name, const char *value) {
  env[nenv].name = name;
  env[nenv].value = value;
  nenv++;
}

static const char *get(const char *name) {
  for (int i = nenv - 1; i >= 0; i--)
    if (strcmp(env[i].name, name) == 0) return env[i].value;
  return NULL;
}

static void load_as(cp_options_t *o, bool secure, char *printed, size_t cap) {
  FILE *w = tmpfile();
  cr_assert(ne(ptr, w, NULL));
  cp_options_load_as(o, get, w, secure);
  rewind(w);
  size_t n = fread(printed, 1, cap - 1, w);
  printed[n] = '\0';
  fclose(w);
}

/* Every option set away from its default, the files too. */
static void set_everything(void) {
  set("CUDAPOOL_LIMIT", "8G");
  set("CUDAPOOL_MAX_CACHED", "50%");
  set("CUDAPOOL_MAX_SPLIT", "32M");
  set("CUDAPOOL_MODE", "unsafe-immediate");
  set("CUDAPOOL_STATS", "/etc/shadow");
  set("CUDAPOOL_STATS_FORMAT", "json");
  set("CUDAPOOL_DISABLE", "1");
  set("CUDAPOOL_TRACE", "/root/.bashrc");
  set("CUDAPOOL_LAYER", "driver");
}

Test(secure, every_variable_ignored) {
  cp_options_t defaults, o;
  char printed[1024];
  load_as(&defaults, false, printed, sizeof printed);
  set_everything();
  load_as(&o, true, printed, sizeof printed);
  cr_assert(eq(str, printed, ""));
  cr_assert(eq(int, memcmp(&o, &defaults, sizeof o), 0));
  cr_assert(eq(str, (char *)o.stats, ""));
  cr_assert(eq(str, (char *)o.trace, ""));
}

Test(secure, bad_values_not_even_warned) {
  cp_options_t o;
  char printed[1024];
  set("CUDAPOOL_LIMIT", "12Q");
  set("CUDAPOOL_TRACE", "1");
  load_as(&o, true, printed, sizeof printed);
  cr_assert(eq(str, printed, ""));
}

Test(secure, verbose_says_so_in_one_line) {
  cp_options_t o;
  char printed[1024];
  set_everything();
  set("CUDAPOOL_VERBOSE", "yes");
  load_as(&o, true, printed, sizeof printed);
  cr_assert(eq(str, printed,
               "cudapool: privileged program (secure execution): CUDAPOOL_* variables are "
               "ignored, the defaults are in effect\n"));
  cr_assert(not(o.verbose)); /* the option itself keeps its default */
  cr_assert(eq(str, (char *)o.stats, ""));
}

Test(secure, not_secure_reads_the_same_variables) {
  cp_options_t o;
  char printed[1024];
  set_everything();
  load_as(&o, false, printed, sizeof printed);
  cr_assert(eq(str, printed, ""));
  cr_assert(eq(str, (char *)o.stats, "/etc/shadow"));
  cr_assert(eq(str, (char *)o.trace, "/root/.bashrc"));
  cr_assert(eq(int, o.mode, CP_MODE_UNSAFE_IMMEDIATE));
  cr_assert(o.disable);
}

/* cp_options_load takes the decision from the kernel's AT_SECURE: this test
 * process is not privileged, so it reads the variables. */
Test(secure, load_follows_at_secure) {
  cp_options_t o;
  cr_assert(eq(int, cp_secure_exec(), getauxval(AT_SECURE) != 0));
  cr_assert(not(cp_secure_exec()));
  set("CUDAPOOL_MODE", "sync");
  cp_options_load(&o, get, NULL);
  cr_assert(eq(int, o.mode, CP_MODE_SYNC));
}
