/* report_header.c: what a person reads first in the text exit report
 * (common/report.c): the header line (the process, the limit for a person) and
 * the hit rate, which rounds down so that "100.0%" never hides a miss. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

struct header_case {
  long pid;
  char mode[24];
  uint64_t bytes;
  double percent;
  char want[128];
};

ParameterizedTestParameters(report_header, exact) {
  static struct header_case cases[] = {
      {4242, "auto", 0, 0.0, "process 4242, version 0.1.0, mode auto, limit none"},
      {1, "sync", UINT64_C(8) << 30, 0.0, "process 1, version 0.1.0, mode sync, limit 8.00 GiB"},
      {77, "auto", UINT64_C(3) << 29, 0.0, "process 77, version 0.1.0, mode auto, limit 1.50 GiB"},
      {77, "auto", 1000, 0.0, "process 77, version 0.1.0, mode auto, limit 1000 B"},
      {99999, "unsafe-immediate", 0, 80.0,
       "process 99999, version 0.1.0, mode unsafe-immediate, limit 80% of device memory"},
      {5, "auto", 0, 12.5, "process 5, version 0.1.0, mode auto, limit 12.5% of device memory"},
  };
  return cr_make_param_array(struct header_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct header_case *c, report_header, exact) {
  char buf[160];
  cp_size_opt_t limit = {.bytes = c->bytes, .percent = c->percent};
  cr_assert(eq(sz, cp_report_header(buf, sizeof buf, c->pid, c->mode, &limit), strlen(c->want)));
  cr_assert(eq(str, buf, c->want));
}

Test(report_header, too_small_a_buffer_is_empty) {
  char buf[16];
  cp_size_opt_t limit = {.bytes = 0, .percent = 0.0};
  cr_assert(eq(sz, cp_report_header(buf, sizeof buf, 4242, "auto", &limit), 0));
  cr_assert(eq(str, buf, ""));
}

struct rate_case {
  uint64_t hits, misses;
  char want[16];
};

ParameterizedTestParameters(report_text, hit_rate_rounds_down) {
  static struct rate_case cases[] = {
      {19999, 1, "99.9%"}, /* 99.995%: rounding would claim 100.0% */
      {9999, 1, "99.9%"},           {1, 0, "100.0%"}, {2, 1, "66.6%"}, {0, 3, "0.0%"}, {1, 9999, "0.0%"},
      {UINT64_MAX - 1, 1, "99.9%"}, {0, 0, "-"},
  };
  return cr_make_param_array(struct rate_case, cases, sizeof cases / sizeof cases[0]);
}

/* The hit rate is the 9th column of the device's row. */
ParameterizedTest(struct rate_case *c, report_text, hit_rate_rounds_down) {
  cudapool_stats_t d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.version = CUDAPOOL_STATS_VERSION;
  d.hits = c->hits;
  d.misses = c->misses;
  char out[2048], rate[32] = "";
  FILE *f = tmpfile();
  cr_assert(ne(ptr, f, NULL));
  cp_report_text(f, &d, 1, "h");
  rewind(f);
  size_t got = fread(out, 1, sizeof out - 1, f);
  out[got] = '\0';
  fclose(f);
  const char *row = strstr(out, "cudapool:   0 ");
  cr_assert(ne(ptr, (void *)row, NULL), "%s", out);
  cr_assert(eq(int, sscanf(row, "cudapool: %*s %*s %*s %*s %*s %*s %*s %*s %31s", rate), 1), "%s", row);
  cr_assert(eq(str, rate, c->want), "%s", row);
}
