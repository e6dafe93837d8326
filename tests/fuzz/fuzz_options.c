/* fuzz_options.c: libFuzzer target over cudapool's option parsing and
 * report formatting (make fuzz; not part of make test).
 *
 * The first input byte picks the target, the rest is its text. Besides
 * "no crash, no sanitizer report", each target checks a property that must
 * hold for every input:
 *   0 size:     an accepted size prints (exact form) and reads back the same;
 *   1 size/%:   an accepted percent is in (0, 100], resolves to <= the total;
 *   2 bool/kw:  cp_parse_bool and a keyword match agree with each other;
 *   3 load:     the rest split on '\n' gives each option its value; every
 *               warning is one "cudapool: warning: CUDAPOOL_" line, at most
 *               one per option; the options as printed load back to the same
 *               struct with no warning;
 *   4 report:   any stats bytes print as text with 2 + n lines, JSON as one.
 * A broken property calls __builtin_trap() so libFuzzer saves the input. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"
#include "parse.h"
#include "report.h"

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "fuzz_options: property failed: %s\n", #cond); \
      __builtin_trap();                                              \
    }                                                                \
  } while (0)

#define MAX_OPTS 32

static const char *fake_value[MAX_OPTS];

static const char *fake_get(const char *name) {
  for (size_t i = 0; i < cp_option_count() && i < MAX_OPTS; i++)
    if (strcmp(cp_option_name(i), name) == 0) return fake_value[i];
  return NULL;
}

static size_t count_char(const char *s, size_t n, char c) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += s[i] == c;
  return k;
}

static void fuzz_size(const char *text) {
  uint64_t v, back;
  char buf[32];
  if (cp_parse_size(text, &v) != 0) return;
  CHECK(cp_format_size_exact(v, buf, sizeof buf) > 0);
  CHECK(cp_parse_size(buf, &back) == 0 && back == v);
  CHECK(cp_format_size_human(v, buf, sizeof buf) > 0);
}

static void fuzz_percent(const char *text, uint64_t total) {
  cp_size_opt_t o;
  if (cp_parse_size_or_percent(text, &o) != 0) return;
  if (o.percent > 0.0) {
    CHECK(o.bytes == 0 && o.percent <= 100.0);
    CHECK(cp_size_opt_resolve(&o, total) <= total);
  } else {
    CHECK(o.percent == 0.0 && cp_size_opt_resolve(&o, total) == o.bytes);
  }
}

static void fuzz_bool(const char *text) {
  static const char *const words[] = {"0", "false", "off", "no", "1", "true", "on", "yes"};
  bool b;
  int i;
  int rb = cp_parse_bool(text, &b), rk = cp_parse_keyword(text, words, 8, &i);
  CHECK(rb == rk);
  if (rb == 0) CHECK(b == (i >= 4));
}

static char *read_all(FILE *f, size_t *n) {
  static char buf[1 << 16];
  fflush(f);
  rewind(f);
  *n = fread(buf, 1, sizeof buf - 1, f);
  buf[*n] = '\0';
  return buf;
}

static void fuzz_load(char *text, FILE *scratch) {
  size_t nopts = cp_option_count(), n;
  static cp_options_t a, b;
  static char printed[MAX_OPTS][CP_OPTION_PATH_MAX];
  CHECK(nopts <= MAX_OPTS);
  char *p = text;
  for (size_t i = 0; i < nopts; i++) {
    fake_value[i] = p;
    char *nl = p != NULL ? strchr(p, '\n') : NULL;
    if (nl != NULL) *nl = '\0';
    p = nl != NULL ? nl + 1 : NULL;
  }
  rewind(scratch);
  cp_options_load(&a, fake_get, scratch);
  long end = ftell(scratch);
  char *w = read_all(scratch, &n);
  n = (size_t)end;
  CHECK(count_char(w, n, '\n') <= nopts);
  for (char *line = w; line < w + n; line = strchr(line, '\n') + 1) {
    CHECK(strncmp(line, "cudapool: warning: CUDAPOOL_", 28) == 0);
    CHECK(strchr(line, '\n') != NULL && strchr(line, '\n') < w + n);
  }
  for (size_t i = 0; i < nopts; i++) {
    CHECK(cp_option_format(&a, i, printed[i], sizeof printed[i]) == 0);
    fake_value[i] = printed[i];
  }
  rewind(scratch);
  cp_options_load(&b, fake_get, scratch);
  CHECK(ftell(scratch) == 0);
  CHECK(memcmp(&a, &b, sizeof a) == 0);
}

static void fuzz_report(const uint8_t *data, size_t size, FILE *scratch) {
  cudapool_stats_t s[2];
  size_t n = 0;
  memset(s, 0, sizeof s);
  memcpy(s, data, size < sizeof s ? size : sizeof s);
  int ndevs = size > sizeof s[0] ? 2 : 1;
  rewind(scratch);
  cp_report_text(scratch, s, ndevs, "fuzz");
  long end = ftell(scratch);
  char *t = read_all(scratch, &n);
  CHECK(count_char(t, (size_t)end, '\n') == (size_t)(2 + ndevs));
  rewind(scratch);
  cp_report_json(scratch, s, ndevs);
  end = ftell(scratch);
  t = read_all(scratch, &n);
  CHECK(count_char(t, (size_t)end, '\n') == 1 && t[end - 1] == '\n');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *scratch;
  static char text[1 << 14];
  if (scratch == NULL) scratch = tmpfile();
  if (size == 0 || scratch == NULL) return 0;
  uint8_t which = data[0] % 5;
  size_t len = size - 1 < sizeof text - 1 ? size - 1 : sizeof text - 1;
  memcpy(text, data + 1, len);
  text[len] = '\0';
  /* The scratch file keeps old bytes past the new end: clear it. */
  if (ftruncate(fileno(scratch), 0) != 0) return 0;
  switch (which) {
    case 0: fuzz_size(text); break;
    case 1: fuzz_percent(text, size > 9 ? (uint64_t)data[1] << 40 | data[size - 1] : 1000); break;
    case 2: fuzz_bool(text); break;
    case 3: fuzz_load(text, scratch); break;
    case 4: fuzz_report(data + 1, size - 1, scratch); break;
  }
  return 0;
}
