/* options.c: the option parsers, the option table and its loader
 * (common/parse.c, common/options.c).
 *
 * Decisions pinned here, and documented in docs/OPTIONS.md:
 *   - blanks around a value are ignored (" 8G" == "8G"); blanks inside are
 *     refused ("8 G");
 *   - suffixes are powers of 1024 whatever the spelling (K, KB, KiB, k);
 *   - a fraction needs a unit ("1.5G" yes, "1.5" no) and rounds down to the
 *     byte; a value past 2^64-1 is refused, never wrapped;
 *   - an empty or blank variable is the same as an unset one: no warning.
 * Parameter structs hold their text inline: Criterion may run each test in
 * a fresh process where pointers into the parent's data would dangle. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <criterion/redirect.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"
#include "parse.h"

#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

/* ---- fake environment ------------------------------------------------- */

static struct { const char *name, *value; } fake_env[32];
static int fake_n;

static void fake_set(const char *name, const char *value) {
  fake_env[fake_n].name = name;
  fake_env[fake_n].value = value;
  fake_n++;
}

static const char *fake_get(const char *name) {
  for (int i = fake_n - 1; i >= 0; i--)
    if (strcmp(fake_env[i].name, name) == 0) return fake_env[i].value;
  return NULL;
}

/* Load from the fake environment; what was warned lands in warned. */
static void load(cp_options_t *o, char *warned, size_t cap) {
  FILE *w = tmpfile();
  cr_assert(ne(ptr, w, NULL));
  cp_options_load(o, fake_get, w);
  rewind(w);
  size_t n = fread(warned, 1, cap - 1, w);
  warned[n] = '\0';
  fclose(w);
}

static void assert_defaults(const cp_options_t *o) {
  cr_assert(eq(u64, o->limit.bytes, 0));
  cr_assert(eq(dbl, o->limit.percent, 0.0));
  cr_assert(eq(u64, o->max_cached.bytes, 0));
  cr_assert(eq(dbl, o->max_cached.percent, 0.0));
  cr_assert(eq(u64, o->max_split, 0));
  cr_assert(eq(int, o->mode, CP_MODE_AUTO));
  cr_assert(eq(str, (char *)o->stats, ""));
  cr_assert(eq(int, o->stats_format, CP_FORMAT_TEXT));
  cr_assert(eq(int, o->disable, 0));
  cr_assert(eq(int, o->verbose, 0));
  cr_assert(eq(str, (char *)o->trace, ""));
  cr_assert(eq(int, o->layer, CP_LAYER_BOTH));
  cr_assert(eq(u32, o->arenas, 0)); /* auto: one per CPU, resolved when the pool is made */
  cr_assert(eq(int, o->nvtx, CP_NVTX_AUTO));
}

/* ---- sizes ------------------------------------------------------------- */

struct size_case {
  char text[64];
  int rc;
  uint64_t bytes;
};

ParameterizedTestParameters(parse, size) {
  static struct size_case cases[] = {
      {"0", 0, 0},
      {"512", 0, 512},
      {"512B", 0, 512},
      {"64K", 0, 64 << 10},
      {"64k", 0, 64 << 10},
      {"64KB", 0, 64 << 10},
      {"64KiB", 0, 64 << 10},
      {"64kib", 0, 64 << 10},
      {"3M", 0, 3 << 20},
      {"1.5G", 0, 3 * GiB / 2},
      {"8GiB", 0, 8 * GiB},
      {"8gb", 0, 8 * GiB},
      {"2T", 0, 2 * TiB},
      {"0.5K", 0, 512},
      {"1.1K", 0, 1126}, /* 1126.4 rounds down */
      {"0.001K", 0, 1},  /* 1.024 */
      {"0.0001K", 0, 0}, /* 0.1024 */
      {"000012K", 0, 12 << 10},
      {" 8G", 0, 8 * GiB}, /* blanks around: ignored */
      {"8G ", 0, 8 * GiB},
      {"\t8G\n", 0, 8 * GiB},
      {"18446744073709551615", 0, UINT64_MAX},
      {"16777215T", 0, UINT64_MAX - TiB + 1},
      /* 44 nines: exact beyond the 40 digits that matter */
      {"15.99999999999999999999999999999999999999999999T", 0, 16 * TiB - 1},
      {"", -1, 0},
      {"   ", -1, 0},
      {"-1", -1, 0},
      {"-0", -1, 0},
      {"+1", -1, 0},
      {"12Q", -1, 0},
      {"1.5", -1, 0}, /* a fraction needs a unit */
      {"1.5B", -1, 0},
      {"1.", -1, 0},
      {".5K", -1, 0},
      {"K", -1, 0},
      {"G8", -1, 0},
      {"8 G", -1, 0}, /* blanks inside: refused */
      {"8G B", -1, 0},
      {"8GiBB", -1, 0},
      {"8iB", -1, 0},
      {"8Gi", -1, 0},
      {"8P", -1, 0},
      {"1e3", -1, 0},
      {"0x10", -1, 0},
      {"1,5G", -1, 0}, /* no locale: the point is the only separator */
      {"1_000", -1, 0},
      {"nan", -1, 0},
      {"inf", -1, 0},
      {"18446744073709551616", -1, 0}, /* 2^64 */
      {"99999999999999999999999", -1, 0},
      {"16777216T", -1, 0},    /* 2^64 */
      {"17179869184G", -1, 0}, /* 2^64 */
      {"16777216.0T", -1, 0},
      {"18446744073709551615.5K", -1, 0},
      /* just under 2^64: floor(0.999.. * 2^40) is 2^40 - 1 */
      {"16777215.999999999999999999999T", 0, UINT64_MAX},
  };
  return cr_make_param_array(struct size_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct size_case *c, parse, size) {
  uint64_t bytes = 777;
  int rc = cp_parse_size(c->text, &bytes);
  cr_assert(eq(int, rc, c->rc), "cp_parse_size(\"%s\")", c->text);
  cr_assert(eq(u64, bytes, c->rc == 0 ? c->bytes : 777), "\"%s\": output untouched on error", c->text);
}

Test(parse, size_null_arguments) {
  uint64_t b = 5;
  cr_assert(eq(int, cp_parse_size(NULL, &b), -1));
  cr_assert(eq(int, cp_parse_size("1", NULL), -1));
  cr_assert(eq(u64, b, 5));
}

/* ---- percentages ------------------------------------------------------- */

struct pct_case {
  char text[32];
  int rc;
  double percent;
  uint64_t bytes;
};

ParameterizedTestParameters(parse, size_or_percent) {
  static struct pct_case cases[] = {
      {"80%", 0, 80.0, 0},
      {"100%", 0, 100.0, 0},
      {"100.000%", 0, 100.0, 0},
      {"0.5%", 0, 0.5, 0},
      {"12.5%", 0, 12.5, 0},
      {" 80% ", 0, 80.0, 0},
      {"33.3333333%", 0, 33.333333, 0}, /* kept to 6 decimals */
      {"0.0000001%", 0, 0.000001, 0},   /* > 0 stays > 0 */
      {"8G", 0, 0.0, 8 * GiB},          /* a size is a size */
      {"0", 0, 0.0, 0},
      {"0%", -1, 0, 0},
      {"0.000%", -1, 0, 0},
      {"101%", -1, 0, 0},
      {"100.0001%", -1, 0, 0},
      {"-5%", -1, 0, 0},
      {"%", -1, 0, 0},
      {"80 %", -1, 0, 0},
      {"80%%", -1, 0, 0},
      {"80%x", -1, 0, 0},
      {"1G%", -1, 0, 0},
      {"abc%", -1, 0, 0},
      {".5%", -1, 0, 0},
      {"99999999999999999999999%", -1, 0, 0},
      {"", -1, 0, 0},
  };
  return cr_make_param_array(struct pct_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct pct_case *c, parse, size_or_percent) {
  cp_size_opt_t o = {.bytes = 777, .percent = 7.0};
  int rc = cp_parse_size_or_percent(c->text, &o);
  cr_assert(eq(int, rc, c->rc), "cp_parse_size_or_percent(\"%s\")", c->text);
  if (c->rc != 0) {
    cr_assert(eq(u64, o.bytes, 777));
    cr_assert(eq(dbl, o.percent, 7.0));
    return;
  }
  cr_assert(eq(u64, o.bytes, c->bytes), "\"%s\"", c->text);
  double diff = o.percent > c->percent ? o.percent - c->percent : c->percent - o.percent;
  cr_assert(lt(dbl, diff, 1e-12), "\"%s\": %.9f", c->text, o.percent);
}

struct resolve_case {
  uint64_t bytes;
  double percent;
  uint64_t total;
  uint64_t want;
};

ParameterizedTestParameters(parse, resolve) {
  static struct resolve_case cases[] = {
      {0, 0.0, 1000, 0},             /* unset */
      {8 * GiB, 0.0, 1000, 8 * GiB}, /* bytes ignore the device */
      {0, 80.0, 1000, 800},
      {0, 50.0, 1001, 500}, /* floor */
      {0, 12.5, 1000, 125},
      {0, 100.0, 141 * GiB, 141 * GiB},
      {0, 90.0, 150754820096, 135679338086}, /* H200: floor(0.9 * total) */
      {0, 80.0, 0, 0},                       /* no device memory known */
      {0, 100.0, UINT64_MAX, UINT64_MAX},
  };
  return cr_make_param_array(struct resolve_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct resolve_case *c, parse, resolve) {
  cp_size_opt_t o = {.bytes = c->bytes, .percent = c->percent};
  cr_assert(eq(u64, cp_size_opt_resolve(&o, c->total), c->want));
}

Test(parse, resolve_null_is_unset) { cr_assert(eq(u64, cp_size_opt_resolve(NULL, 100), 0)); }

/* ---- booleans ---------------------------------------------------------- */

struct bool_case {
  char text[16];
  int rc;
  int value;
};

ParameterizedTestParameters(parse, boolean) {
  static struct bool_case cases[] = {
      {"1", 0, 1},  {"true", 0, 1},    {"TRUE", 0, 1},   {"On", 0, 1},  {"yes", 0, 1},  {" yes ", 0, 1},
      {"0", 0, 0},  {"false", 0, 0},   {"off", 0, 0},    {"No", 0, 0},  {"", -1, 0},    {"2", -1, 0},
      {"y", -1, 0}, {"enable", -1, 0}, {"truee", -1, 0}, {"-1", -1, 0}, {"o n", -1, 0}, {"01", -1, 0},
  };
  return cr_make_param_array(struct bool_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct bool_case *c, parse, boolean) {
  bool v = true;
  int rc = cp_parse_bool(c->text, &v);
  cr_assert(eq(int, rc, c->rc), "cp_parse_bool(\"%s\")", c->text);
  cr_assert(eq(int, v, c->rc == 0 ? c->value : 1), "\"%s\"", c->text);
}

/* ---- keyword options through the loader --------------------------------- */

struct kw_case {
  char var[32];
  char text[32];
  int value;  /* the field after load */
  int warned; /* 1 = one warning line */
};

ParameterizedTestParameters(options, keywords) {
  static struct kw_case cases[] = {
      {"CUDAPOOL_MODE", "auto", CP_MODE_AUTO, 0},
      {"CUDAPOOL_MODE", "SYNC", CP_MODE_SYNC, 0},
      {"CUDAPOOL_MODE", " unsafe-immediate ", CP_MODE_UNSAFE_IMMEDIATE, 0},
      {"CUDAPOOL_MODE", "unsafe_immediate", CP_MODE_AUTO, 1},
      {"CUDAPOOL_MODE", "immediate", CP_MODE_AUTO, 1},
      {"CUDAPOOL_MODE", "", CP_MODE_AUTO, 0},
      {"CUDAPOOL_LAYER", "runtime", CP_LAYER_RUNTIME, 0},
      {"CUDAPOOL_LAYER", "Driver", CP_LAYER_DRIVER, 0},
      {"CUDAPOOL_LAYER", "both", CP_LAYER_BOTH, 0},
      {"CUDAPOOL_LAYER", "all", CP_LAYER_BOTH, 1},
      {"CUDAPOOL_STATS_FORMAT", "json", CP_FORMAT_JSON, 0},
      {"CUDAPOOL_STATS_FORMAT", "TEXT", CP_FORMAT_TEXT, 0},
      {"CUDAPOOL_STATS_FORMAT", "yaml", CP_FORMAT_TEXT, 1},
      {"CUDAPOOL_NVTX", "1", CP_NVTX_ON, 0},
      {"CUDAPOOL_NVTX", " 0 ", CP_NVTX_OFF, 0},
      {"CUDAPOOL_NVTX", "AUTO", CP_NVTX_AUTO, 0},
      {"CUDAPOOL_NVTX", "on", CP_NVTX_AUTO, 1},
      {"CUDAPOOL_NVTX", "2", CP_NVTX_AUTO, 1},
  };
  return cr_make_param_array(struct kw_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct kw_case *c, options, keywords) {
  cp_options_t o;
  char warned[1024];
  fake_set(c->var, c->text);
  load(&o, warned, sizeof warned);
  int got = strcmp(c->var, "CUDAPOOL_MODE") == 0    ? (int)o.mode
            : strcmp(c->var, "CUDAPOOL_LAYER") == 0 ? (int)o.layer
            : strcmp(c->var, "CUDAPOOL_NVTX") == 0  ? (int)o.nvtx
                                                    : (int)o.stats_format;
  cr_assert(eq(int, got, c->value), "%s=\"%s\"", c->var, c->text);
  size_t lines = 0;
  for (const char *p = warned; *p; p++) lines += *p == '\n';
  cr_assert(eq(sz, lines, (size_t)c->warned), "%s=\"%s\" warned: %s", c->var, c->text, warned);
}

/* ---- the loader -------------------------------------------------------- */

Test(options, defaults_when_unset) {
  cp_options_t o;
  char warned[1024];
  memset(&o, 0xa5, sizeof o); /* every field must be written */
  load(&o, warned, sizeof warned);
  assert_defaults(&o);
  cr_assert(eq(str, warned, ""), "the table's defaults all parse");
}

Test(options, blank_values_are_unset) {
  cp_options_t o;
  char warned[1024];
  for (size_t i = 0; i < cp_option_count(); i++) fake_set(cp_option_name(i), i % 2 ? "" : "  ");
  load(&o, warned, sizeof warned);
  assert_defaults(&o);
  cr_assert(eq(str, warned, ""));
}

Test(options, every_option_read) {
  cp_options_t o;
  char warned[1024];
  fake_set("CUDAPOOL_LIMIT", "8G");
  fake_set("CUDAPOOL_MAX_CACHED", "25%");
  fake_set("CUDAPOOL_MAX_SPLIT", "256MiB");
  fake_set("CUDAPOOL_MODE", "sync");
  fake_set("CUDAPOOL_STATS", "1");
  fake_set("CUDAPOOL_STATS_FORMAT", "json");
  fake_set("CUDAPOOL_DISABLE", "yes");
  fake_set("CUDAPOOL_VERBOSE", "on");
  fake_set("CUDAPOOL_TRACE", "/tmp/trace.txt");
  fake_set("CUDAPOOL_LAYER", "driver");
  fake_set("CUDAPOOL_ARENAS", " 16 ");
  fake_set("CUDAPOOL_NVTX", "0");
  load(&o, warned, sizeof warned);
  cr_assert(eq(int, o.nvtx, CP_NVTX_OFF));
  cr_assert(eq(str, warned, ""));
  cr_assert(eq(u32, o.arenas, 16));
  cr_assert(eq(u64, o.limit.bytes, 8 * GiB));
  cr_assert(eq(dbl, o.limit.percent, 0.0));
  cr_assert(eq(dbl, o.max_cached.percent, 25.0));
  cr_assert(eq(u64, o.max_split, 256u << 20));
  cr_assert(eq(int, o.mode, CP_MODE_SYNC));
  cr_assert(eq(str, (char *)o.stats, "stderr"));
  cr_assert(eq(int, o.stats_format, CP_FORMAT_JSON));
  cr_assert(eq(int, o.disable, 1));
  cr_assert(eq(int, o.verbose, 1));
  cr_assert(eq(str, (char *)o.trace, "/tmp/trace.txt"));
  cr_assert(eq(int, o.layer, CP_LAYER_DRIVER));
}

/* auto (any case) is 0, resolved to the CPU count when the pool is made. */
Test(options, arenas_auto_word) {
  static const struct {
    const char *text;
    unsigned want;
  } cases[] = {{" Auto ", 0}, {"auto", 0}, {"64", 64}, {"1", 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cp_options_t o;
    char warned[1024];
    fake_set("CUDAPOOL_ARENAS", cases[i].text);
    load(&o, warned, sizeof warned);
    cr_assert(eq(str, warned, ""), "CUDAPOOL_ARENAS=\"%s\"", cases[i].text);
    cr_assert(eq(u32, o.arenas, cases[i].want), "CUDAPOOL_ARENAS=\"%s\"", cases[i].text);
  }
}

/* CUDAPOOL_STACKS: off words 0, true words the default depth 16, a depth
 * 2..64 as given; 65 and words that are neither are refused. */
Test(options, stacks_depth_forms) {
  static const struct {
    const char *text;
    unsigned want;
    bool warns;
  } cases[] = {{"0", 0, false},  {"off", 0, false}, {"1", 16, false},  {"on", 16, false}, {"2", 2, false},
               {"64", 64, false}, {"24", 24, false}, {"65", 0, true}, {"deep", 0, true}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cp_options_t o;
    char warned[1024];
    fake_set("CUDAPOOL_STACKS", cases[i].text);
    load(&o, warned, sizeof warned);
    cr_assert(eq(int, warned[0] != '\0', cases[i].warns), "CUDAPOOL_STACKS=\"%s\": %s", cases[i].text, warned);
    cr_assert(eq(u32, o.stacks, cases[i].want), "CUDAPOOL_STACKS=\"%s\"", cases[i].text);
  }
}

Test(options, null_get_reads_the_environment) {
  cp_options_t o;
  setenv("CUDAPOOL_LIMIT", "2G", 1);
  setenv("CUDAPOOL_MODE", "unsafe-immediate", 1);
  cp_options_load(&o, NULL, NULL);
  cr_assert(eq(u64, o.limit.bytes, 2 * GiB));
  cr_assert(eq(int, o.mode, CP_MODE_UNSAFE_IMMEDIATE));
  cr_assert(eq(str, (char *)cp_options_getenv("CUDAPOOL_MODE"), "unsafe-immediate"));
}

Test(options, null_warn_prints_nothing_and_keeps_default) {
  cp_options_t o;
  fake_set("CUDAPOOL_LIMIT", "12Q");
  cp_options_load(&o, fake_get, NULL);
  cr_assert(eq(u64, o.limit.bytes, 0));
}

/* ---- warnings ---------------------------------------------------------- */

Test(warnings, bad_limit_on_stderr, .init = cr_redirect_stderr) {
  cp_options_t o;
  fake_set("CUDAPOOL_LIMIT", "12Q");
  cp_options_load(&o, fake_get, stderr);
  fflush(stderr);
  char got[1024];
  size_t n = fread(got, 1, sizeof got - 1, cr_get_redirected_stderr());
  got[n] = '\0';
  cr_assert(eq(str, got,
               "cudapool: warning: CUDAPOOL_LIMIT=\"12Q\" is not a size (accepted: bytes with "
               "optional K/M/G/T suffix, or N% of device memory); running WITHOUT a "
               "limit\n"));
  cr_assert(eq(u64, o.limit.bytes, 0));
  cr_assert(eq(dbl, o.limit.percent, 0.0));
}

struct warn_case {
  char var[32];
  char text[96];
  char line[400];
};

ParameterizedTestParameters(warnings, exact_text) {
  static struct warn_case cases[] = {
      {"CUDAPOOL_ARENAS", "0",
       "cudapool: warning: CUDAPOOL_ARENAS=\"0\" is not a count (accepted: a whole number from 1 to 64, or "
       "auto); "
       "using the default (auto)\n"},
      {"CUDAPOOL_ARENAS", "65",
       "cudapool: warning: CUDAPOOL_ARENAS=\"65\" is not a count (accepted: a whole number from 1 to 64, or "
       "auto); "
       "using the default (auto)\n"},
      {"CUDAPOOL_ARENAS", "2.5",
       "cudapool: warning: CUDAPOOL_ARENAS=\"2.5\" is not a count (accepted: a whole number from 1 to 64, or "
       "auto); "
       "using the default (auto)\n"},
      {"CUDAPOOL_ARENAS", "-1",
       "cudapool: warning: CUDAPOOL_ARENAS=\"-1\" is not a count (accepted: a whole number from 1 to 64, or "
       "auto); "
       "using the default (auto)\n"},
      {"CUDAPOOL_ARENAS", "4k",
       "cudapool: warning: CUDAPOOL_ARENAS=\"4k\" is not a count (accepted: a whole number from 1 to 64, or "
       "auto); "
       "using the default (auto)\n"},
      {"CUDAPOOL_MAX_CACHED", "150%",
       "cudapool: warning: CUDAPOOL_MAX_CACHED=\"150%\" is not a size (accepted: bytes with "
       "optional K/M/G/T suffix, or N% of device memory); using the default (no cap)\n"},
      {"CUDAPOOL_MAX_SPLIT", "50%",
       "cudapool: warning: CUDAPOOL_MAX_SPLIT=\"50%\" is not a size (accepted: bytes with "
       "optional K/M/G/T suffix, at least 21M, or 0 for no limit); using the default (no limit)\n"},

      {"CUDAPOOL_MODE", "fast",
       "cudapool: warning: CUDAPOOL_MODE=\"fast\" is not a mode (accepted: auto, sync or "
       "unsafe-immediate); using the default (auto)\n"},
      {"CUDAPOOL_STATS_FORMAT", "xml",
       "cudapool: warning: CUDAPOOL_STATS_FORMAT=\"xml\" is not a format (accepted: text or "
       "json); using the default (text)\n"},
      {"CUDAPOOL_DISABLE", "maybe",
       "cudapool: warning: CUDAPOOL_DISABLE=\"maybe\" is not a boolean (accepted: "
       "1/true/on/yes or 0/false/off/no); using the default (0: pooling on)\n"},
      {"CUDAPOOL_VERBOSE", "2",
       "cudapool: warning: CUDAPOOL_VERBOSE=\"2\" is not a boolean (accepted: "
       "1/true/on/yes or 0/false/off/no); using the default (0: quiet)\n"},
      {"CUDAPOOL_TRACE", "1",
       "cudapool: warning: CUDAPOOL_TRACE=\"1\" is not a file path (accepted: 0 or off, or a "
       "file path of at most 4095 bytes once %p is replaced by the pid); using the default "
       "(off)\n"},
      {"CUDAPOOL_LAYER", "cuda",
       "cudapool: warning: CUDAPOOL_LAYER=\"cuda\" is not a layer (accepted: runtime, driver "
       "or both); using the default (both)\n"},
      /* the value is escaped: one line whatever it holds */
      {"CUDAPOOL_LIMIT", "8\nG\"\\\x1b",
       "cudapool: warning: CUDAPOOL_LIMIT=\"8\\x0aG\\\"\\\\\\x1b\" is not a size (accepted: "
       "bytes with optional K/M/G/T suffix, or N% of device memory); running WITHOUT a "
       "limit\n"},
      {"CUDAPOOL_SHARED_NAME", "job A",
       "cudapool: warning: CUDAPOOL_SHARED_NAME=\"job A\" is not a name (accepted: 1 to 63 letters, digits, "
       "'.', '_' or '-'); using the default (none: every process)\n"},
      {"CUDAPOOL_COOP_WAIT", "60001",
       "cudapool: warning: CUDAPOOL_COOP_WAIT=\"60001\" is not a duration (accepted: a whole number of "
       "milliseconds from 0 to 60000); using the default (200 ms)\n"},
      /* and cut after 64 bytes */
      {"CUDAPOOL_MODE", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaz",
       "cudapool: warning: CUDAPOOL_MODE=\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
       "aaaaaaaaaaa...\" is not a mode (accepted: auto, sync or unsafe-immediate); using the "
       "default (auto)\n"},
      {"CUDAPOOL_NVTX", "yes",
       "cudapool: warning: CUDAPOOL_NVTX=\"yes\" is not an NVTX setting (accepted: auto, 0 or 1); "
       "using the default (auto)\n"},
  };
  return cr_make_param_array(struct warn_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct warn_case *c, warnings, exact_text) {
  cp_options_t o;
  char warned[1024];
  fake_set(c->var, c->text);
  load(&o, warned, sizeof warned);
  cr_assert(eq(str, warned, c->line));
  assert_defaults(&o);
}

/* A max_split under the core's floor (cp_max_split_floor: 21 MiB) left the
 * rest of every new segment unusable: raised to it, with one warning. */
Test(warnings, max_split_under_the_floor_raised_to_it) {
  static const struct {
    const char *text;
    uint64_t want;
    bool warns;
  } cases[] = {{"1M", 21u << 20, true},          {"512", 21u << 20, true},     {"20.99M", 21u << 20, true},
               {"21M", 21u << 20, false},        {"22020096", 21u << 20, false}, {"0", 0, false},
               {"0.0001K", 0, false},            {"256M", 256u << 20, false}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cp_options_t o;
    char warned[1024], want[512] = "";
    fake_n = 0;
    fake_set("CUDAPOOL_MAX_SPLIT", cases[i].text);
    load(&o, warned, sizeof warned);
    cr_assert(eq(u64, o.max_split, cases[i].want), "%s", cases[i].text);
    if (cases[i].warns)
      snprintf(want, sizeof want,
               "cudapool: warning: CUDAPOOL_MAX_SPLIT=\"%s\" is under 21M (accepted: bytes with optional "
               "K/M/G/T suffix, at least 21M, or 0 for no limit); using 21M\n",
               cases[i].text);
    cr_assert(eq(str, warned, want), "%s", cases[i].text);
  }
}

Test(warnings, one_line_per_bad_value_in_table_order) {
  cp_options_t o;
  char warned[2048];
  fake_set("CUDAPOOL_LAYER", "x");
  fake_set("CUDAPOOL_LIMIT", "8GQ"); /* a good prefix still keeps the default */
  fake_set("CUDAPOOL_MODE", "sync");
  load(&o, warned, sizeof warned);
  cr_assert(eq(u64, o.limit.bytes, 0));
  cr_assert(eq(int, o.mode, CP_MODE_SYNC));
  const char *second = strchr(warned, '\n');
  cr_assert(ne(ptr, (void *)second, NULL));
  cr_assert(eq(int, strncmp(warned, "cudapool: warning: CUDAPOOL_LIMIT=\"8GQ\"", 39), 0));
  cr_assert(eq(int, strncmp(second + 1, "cudapool: warning: CUDAPOOL_LAYER=\"x\"", 37), 0));
  cr_assert(eq(ptr, (void *)strchr(second + 1, '\n'), (void *)(warned + strlen(warned) - 1)));
}

/* ---- paths and %p ------------------------------------------------------ */

/* %p stays in the option: the file's opener replaces it (common/outfile.c), in
 * the process that opens the file, so a forked child gets its own name. */
Test(paths, pid_kept_for_the_opener) {
  cp_options_t o;
  char warned[1024];
  fake_set("CUDAPOOL_STATS", "/tmp/cp-%p.json");
  fake_set("CUDAPOOL_TRACE", "t-%p-%p.%d%%p");
  load(&o, warned, sizeof warned);
  cr_assert(eq(str, warned, ""));
  cr_assert(eq(str, (char *)o.stats, "/tmp/cp-%p.json"));
  cr_assert(eq(str, (char *)o.trace, "t-%p-%p.%d%%p"));
}

struct stats_case {
  char text[16];
  char want[16];
};

ParameterizedTestParameters(paths, stats_words) {
  static struct stats_case cases[] = {
      {"1", "stderr"}, {"stderr", "stderr"}, {"STDERR", "stderr"},     {"true", "stderr"}, {"0", ""},
      {"off", ""},     {"no", ""},           {" out.txt", " out.txt"}, {"2", "2"},
  };
  return cr_make_param_array(struct stats_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct stats_case *c, paths, stats_words) {
  cp_options_t o;
  char warned[1024];
  fake_set("CUDAPOOL_STATS", c->text);
  load(&o, warned, sizeof warned);
  cr_assert(eq(str, warned, ""));
  cr_assert(eq(str, (char *)o.stats, c->want), "CUDAPOOL_STATS=\"%s\"", c->text);
}

Test(paths, trace_off_words) {
  cp_options_t o;
  char warned[1024];
  fake_set("CUDAPOOL_TRACE", "off");
  load(&o, warned, sizeof warned);
  cr_assert(eq(str, warned, ""));
  cr_assert(eq(str, (char *)o.trace, ""));
}

Test(paths, longest_path_fits_one_more_does_not) {
  cp_options_t o;
  char warned[1024];
  static char fits[CP_OPTION_PATH_MAX], over[CP_OPTION_PATH_MAX + 8];
  memset(fits, 'a', CP_OPTION_PATH_MAX - 1);
  memset(over, 'a', CP_OPTION_PATH_MAX - 1);
  strcpy(over + CP_OPTION_PATH_MAX - 1, "%p"); /* the pid has at least one digit */
  fake_set("CUDAPOOL_STATS", fits);
  fake_set("CUDAPOOL_TRACE", over);
  load(&o, warned, sizeof warned);
  cr_assert(eq(str, (char *)o.stats, fits));
  cr_assert(eq(str, (char *)o.trace, ""));
  cr_assert(eq(int, strncmp(warned, "cudapool: warning: CUDAPOOL_TRACE=\"aaaa", 39), 0));
}

Test(paths, expand_pid_direct) {
  char out[16];
  cr_assert(eq(int, cp_expand_pid("a%pb", 42, out, sizeof out), 0));
  cr_assert(eq(str, out, "a42b"));
  cr_assert(eq(int, cp_expand_pid("%", 42, out, sizeof out), 0));
  cr_assert(eq(str, out, "%"));
  cr_assert(eq(int, cp_expand_pid("%p%p%p", 12345, out, sizeof out), 0));
  cr_assert(eq(str, out, "123451234512345"));
  strcpy(out, "untouched");
  cr_assert(eq(int, cp_expand_pid("%p%p%p%p", 12345, out, sizeof out), -1));
  cr_assert(eq(int, cp_expand_pid("x", 1, out, 1), -1)); /* no room for the NUL */
}

/* ---- verbose print ----------------------------------------------------- */

/* Fill env from "cudapool: NAME=VALUE (doc)" lines; returns the line count.
 * Values here hold no " (". */
static int env_from_print(char *printed) {
  int lines = 0;
  for (char *line = strtok(printed, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    cr_assert(eq(int, strncmp(line, "cudapool: CUDAPOOL_", 19), 0), "line: %s", line);
    char *eq_sign = strchr(line, '='), *doc = strstr(line, " (");
    cr_assert(ne(ptr, eq_sign, NULL));
    cr_assert(ne(ptr, doc, NULL));
    *eq_sign = '\0';
    *doc = '\0';
    fake_set(line + strlen("cudapool: "), eq_sign + 1);
    lines++;
  }
  return lines;
}

static void print_to(const cp_options_t *o, char *buf, size_t cap) {
  FILE *f = tmpfile();
  cp_options_print(o, f);
  rewind(f);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = '\0';
  fclose(f);
}

Test(verbose, prints_every_option_in_effect) {
  cp_options_t o;
  char warned[1024], printed[8192];
  fake_set("CUDAPOOL_LIMIT", "8GiB");
  fake_set("CUDAPOOL_MAX_CACHED", "12.5%");
  fake_set("CUDAPOOL_MAX_SPLIT", "23040K"); /* 22.5M: over the floor */
  fake_set("CUDAPOOL_MODE", "SYNC");
  fake_set("CUDAPOOL_STATS", "stderr");
  load(&o, warned, sizeof warned);
  print_to(&o, printed, sizeof printed);
  cr_assert(ne(ptr,
               strstr(printed, "cudapool: CUDAPOOL_LIMIT=8G (most bytes the pool may "
                               "reserve per device; N% = share of device memory; 0 = no "
                               "limit)\n"),
               NULL),
            "%s", printed);
  cr_assert(ne(ptr, strstr(printed, "cudapool: CUDAPOOL_MAX_CACHED=12.5% ("), NULL));
  cr_assert(ne(ptr, strstr(printed, "cudapool: CUDAPOOL_MAX_SPLIT=23040K ("), NULL));
  cr_assert(ne(ptr, strstr(printed, "cudapool: CUDAPOOL_MODE=sync ("), NULL));
  cr_assert(ne(ptr, strstr(printed, "cudapool: CUDAPOOL_STATS=stderr ("), NULL));
  cr_assert(ne(ptr, strstr(printed, "cudapool: CUDAPOOL_STATS_FORMAT=text ("), NULL));
  cr_assert(ne(ptr, strstr(printed, "cudapool: CUDAPOOL_TRACE=0 ("), NULL));
  cr_assert(ne(ptr, strstr(printed, "cudapool: CUDAPOOL_LAYER=both ("), NULL));
  cr_assert(ne(ptr, strstr(printed, "cudapool: CUDAPOOL_ARENAS=auto ("), NULL));
  fake_n = 0;
  cr_assert(eq(int, env_from_print(printed), (int)cp_option_count()));
}

Test(verbose, printed_values_read_back_unchanged) {
  cp_options_t a, b;
  char warned[1024], printed[16384];
  fake_set("CUDAPOOL_LIMIT", "33.3333333%");
  fake_set("CUDAPOOL_MAX_CACHED", "1.1K");
  fake_set("CUDAPOOL_MAX_SPLIT", "18446744073709551615");
  fake_set("CUDAPOOL_MODE", "unsafe-immediate");
  fake_set("CUDAPOOL_STATS", "/tmp/s-%p");
  fake_set("CUDAPOOL_STATS_FORMAT", "json");
  fake_set("CUDAPOOL_DISABLE", "true");
  fake_set("CUDAPOOL_VERBOSE", "1");
  fake_set("CUDAPOOL_TRACE", "x.trace");
  fake_set("CUDAPOOL_LAYER", "runtime");
  load(&a, warned, sizeof warned);
  cr_assert(eq(str, warned, ""));
  print_to(&a, printed, sizeof printed);
  fake_n = 0;
  env_from_print(printed);
  load(&b, warned, sizeof warned);
  cr_assert(eq(str, warned, ""));
  cr_assert(eq(int, memcmp(&a, &b, sizeof a), 0), "%s", printed);
}

Test(verbose, option_format_bounds) {
  cp_options_t o;
  char buf[8];
  cp_options_load(&o, fake_get, NULL);
  cr_assert(eq(int, cp_option_format(&o, cp_option_count(), buf, sizeof buf), -1));
  cr_assert(eq(ptr, (void *)cp_option_name(cp_option_count()), NULL));
  strcpy(o.stats, "/a/long/path");
  cr_assert(eq(int, cp_option_format(&o, 4, buf, sizeof buf), -1)); /* does not fit */
  cr_assert(eq(int, cp_option_format(&o, 3, buf, sizeof buf), 0));
  cr_assert(eq(str, buf, "auto"));
}

/* ---- the docs name every option ---------------------------------------- */

Test(docs, options_md_names_every_option) {
  FILE *f = fopen("docs/OPTIONS.md", "r");
  cr_assert(ne(ptr, f, NULL), "run from the repository root");
  static char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  for (size_t i = 0; i < cp_option_count(); i++) {
    char heading[64];
    snprintf(heading, sizeof heading, "`%s`", cp_option_name(i));
    cr_assert(ne(ptr, strstr(text, heading), NULL), "docs/OPTIONS.md lacks %s", heading);
  }
}

/* The section of docs/OPTIONS.md that starts at "### `NAME`", up to the next
 * "### " heading; NULL if there is none. Cuts text at the section's end. */
static char *options_md_section(char *text, const char *name) {
  char heading[80];
  snprintf(heading, sizeof heading, "### `%s`", name);
  char *at = strstr(text, heading);
  if (at == NULL) return NULL;
  char *end = strstr(at + strlen(heading), "\n### ");
  if (end != NULL) *end = '\0';
  return at;
}

static void read_options_md(char *text, size_t cap) {
  FILE *f = fopen("docs/OPTIONS.md", "r");
  cr_assert(ne(ptr, f, NULL), "run from the repository root");
  size_t n = fread(text, 1, cap - 1, f);
  cr_assert(lt(sz, n, cap - 1), "docs/OPTIONS.md outgrew this test's buffer");
  text[n] = '\0';
  fclose(f);
}

/* Drift between the table and the page: each option's section states, as
 * its first `**Default:**`, exactly the value the table's default formats
 * to (an empty one as "unset"); every `### \`CUDAPOOL_...\`` heading is an option of the table. */
Test(docs, options_md_defaults_are_the_tables) {
  cp_options_t o;
  cp_options_load(&o, fake_get, NULL);
  static char text[131072], section[131072];
  read_options_md(text, sizeof text);
  for (size_t i = 0; i < cp_option_count(); i++) {
    memcpy(section, text, sizeof text);
    char *s = options_md_section(section, cp_option_name(i));
    cr_assert(ne(ptr, s, NULL), "docs/OPTIONS.md has no ### `%s` section", cp_option_name(i));
    char *d = strstr(s, "**Default:**");
    cr_assert(ne(ptr, d, NULL), "the %s section states no **Default:**", cp_option_name(i));
    d += strlen("**Default:**");
    while (*d == ' ' || *d == '\n') d++;
    char want[256], got[256];
    cr_assert(eq(int, cp_option_format(&o, i, want, sizeof want), 0));
    if (want[0] == '\0') { /* an empty default: the page says "unset" */
      cr_expect(eq(int, strncmp(d, "unset", 5), 0), "docs/OPTIONS.md gives %s a default; the table none",
                cp_option_name(i));
      continue;
    }
    cr_assert(eq(chr, *d, '`'), "the %s section's default is not in backticks", cp_option_name(i));
    const char *close = strchr(d + 1, '`');
    cr_assert(ne(ptr, (void *)close, NULL));
    snprintf(got, sizeof got, "%.*s", (int)(close - d - 1), d + 1);
    cr_expect(eq(str, got, want), "docs/OPTIONS.md says %s defaults to `%s`, the table to `%s`",
              cp_option_name(i), got, want);
  }
  for (const char *h = strstr(text, "### `CUDAPOOL_"); h != NULL; h = strstr(h + 1, "### `CUDAPOOL_")) {
    char name[80];
    cr_assert(eq(int, sscanf(h, "### `%79[A-Z_]`", name), 1));
    bool known = false;
    for (size_t i = 0; i < cp_option_count(); i++) known = known || strcmp(name, cp_option_name(i)) == 0;
    cr_expect(known, "docs/OPTIONS.md documents %s, which the option table lacks", name);
  }
}

/* Cooperation between processes (shim/state/coop.c): on by default. */
Test(options, cooperation_read) {
  cp_options_t o;
  char warned[1024];
  load(&o, warned, sizeof warned);
  cr_assert(eq(u32, o.coop_wait_ms, 200));
  cr_assert(eq(str, o.shared_name, ""));
  fake_set("CUDAPOOL_COOP_WAIT", "0");
  fake_set("CUDAPOOL_SHARED_NAME", "job-A_1.x");
  load(&o, warned, sizeof warned);
  cr_assert(eq(str, warned, ""));
  cr_assert(eq(u32, o.coop_wait_ms, 0));
  cr_assert(eq(str, o.shared_name, "job-A_1.x"));
  /* 64 bytes: one too many for the segment's group */
  fake_set("CUDAPOOL_SHARED_NAME", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  load(&o, warned, sizeof warned);
  cr_assert(eq(str, o.shared_name, ""));
}
