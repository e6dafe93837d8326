/* report.c: the exit report, text and JSON (common/report.c), and the
 * locale-free formatters it prints with (common/parse.c).
 *
 * The expected strings are written out in full, so any change to the
 * format, including a counter added to cudapool.h, shows up here first: the
 * JSON is a format programs read, so its change should be a decision. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "report.h"

static cudapool_stats_t blank(int device) {
  cudapool_stats_t s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  s.version = CUDAPOOL_STATS_VERSION;
  s.device = device;
  return s;
}

static void capture_text(const cudapool_stats_t *d, int n, const char *header, char *buf, size_t cap) {
  FILE *f = tmpfile();
  cr_assert(ne(ptr, f, NULL));
  cp_report_text(f, d, n, header);
  rewind(f);
  size_t got = fread(buf, 1, cap - 1, f);
  buf[got] = '\0';
  fclose(f);
}

static void capture_json_process(const cudapool_stats_t *d, int n, const cp_report_process_t *p, char *buf,
                                 size_t cap) {
  FILE *f = tmpfile();
  cr_assert(ne(ptr, f, NULL));
  cp_report_json_process(f, d, n, p);
  rewind(f);
  size_t got = fread(buf, 1, cap - 1, f);
  buf[got] = '\0';
  fclose(f);
}

/* cp_report_json is cp_report_json_process without a process. */
static void capture_json(const cudapool_stats_t *d, int n, char *buf, size_t cap) {
  capture_json_process(d, n, NULL, buf, cap);
}

/* ---- text -------------------------------------------------------------- */

Test(report_text, known_devices) {
  cudapool_stats_t d[3] = {blank(0), blank(1), blank(7)};
  d[0].allocated_bytes.peak = 2281701376; /* 2.125 GiB */
  d[0].reserved_bytes.peak = 2684354560;  /* 2.5 GiB */
  d[0].hits = 12345;
  d[0].misses = 10;
  d[0].num_alloc = 12355;
  d[0].num_free = 12300;
  d[0].num_device_alloc = 10;
  d[0].num_device_free = 2;
  d[0].num_alloc_retries = 1;
  d[0].largest_free_block = 1073741824;
  d[2].allocated_bytes.peak = 1023;
  d[2].reserved_bytes.peak = 1048575; /* 1023.999 KiB reads as 1.00 MiB */
  d[2].misses = 5;
  d[2].num_alloc = 5;
  d[2].num_device_alloc = 5;
  d[2].num_device_free = 3; /* more driver calls than the program made */
  d[2].num_ooms = 5;
  char out[4096];
  capture_text(d, 3, "mode auto, limit 8 GiB", out, sizeof out);
  cr_assert(eq(str, out,
               "cudapool: mode auto, limit 8 GiB\n"
               "cudapool: dev   peak alloc  peak reserved    util        hits      misses  "
               "hit rate  calls saved  retries   OOMs  largest free\n"
               "cudapool:   0     2.13 GiB       2.50 GiB   85.0%       12345          10     "
               "99.9%        24643        1      0      1.00 GiB\n"
               "cudapool:   1          0 B            0 B       -           0           0     "
               "    -            0        0      0           0 B\n"
               "cudapool:   7       1023 B       1.00 MiB    0.1%           0           5     "
               " 0.0%           -3        0      5           0 B\n"));
}

Test(report_text, no_device_and_default_header) {
  char out[512];
  capture_text(NULL, 0, NULL, out, sizeof out);
  cr_assert(eq(str, out, "cudapool: exit report\ncudapool: no device used\n"));
}

Test(report_text, negative_gauges_print_as_zero) {
  cudapool_stats_t d = blank(0);
  d.allocated_bytes.peak = -5;
  d.reserved_bytes.peak = -1;
  char out[1024];
  capture_text(&d, 1, "h", out, sizeof out);
  cr_assert(ne(ptr, strstr(out, "cudapool:   0          0 B            0 B       -"), NULL), "%s", out);
}

/* ---- JSON -------------------------------------------------------------- */

Test(report_json, known_device_exact) {
  cudapool_stats_t d = blank(3);
  d.allocated_bytes = (cudapool_gauge_t){100, 920};
  d.allocated_blocks = (cudapool_gauge_t){1, 2};
  d.requested_bytes = (cudapool_gauge_t){3, 4};
  d.active_bytes = (cudapool_gauge_t){5, 6};
  d.pending_bytes = (cudapool_gauge_t){7, 8};
  d.cached_bytes = (cudapool_gauge_t){9, 10};
  d.reserved_bytes = (cudapool_gauge_t){500, 1000};
  d.segments = (cudapool_gauge_t){11, 12};
  uint64_t v = 21;
  d.num_alloc = v++;
  d.num_free = v++;
  d.hits = v++;
  d.misses = v++;
  d.num_immediate_reuse = v++;
  d.num_device_alloc = v++;
  d.num_device_free = v++;
  d.num_barriers = v++;
  d.num_fences_recorded = v++;
  d.num_fences_waited = v++;
  d.num_sync_points = v++;
  d.num_alloc_retries = v++;
  d.num_ooms = v++;
  d.num_reclaims = v++;
  d.num_idle_releases = v++;
  d.num_order_waits = v++;
  d.num_order_recoveries = v++;
  d.blocks = 41;
  d.free_blocks = 42;
  d.largest_free_block = 43;
  char out[4096];
  capture_json(&d, 1, out, sizeof out);
  cr_assert(eq(str, out,
               "{\"version\":\"0.1.0\",\"devices\":[{\"device\":3,"
               "\"allocated_bytes\":{\"current\":100,\"peak\":920},"
               "\"allocated_blocks\":{\"current\":1,\"peak\":2},"
               "\"requested_bytes\":{\"current\":3,\"peak\":4},"
               "\"active_bytes\":{\"current\":5,\"peak\":6},"
               "\"pending_bytes\":{\"current\":7,\"peak\":8},"
               "\"cached_bytes\":{\"current\":9,\"peak\":10},"
               "\"reserved_bytes\":{\"current\":500,\"peak\":1000},"
               "\"segments\":{\"current\":11,\"peak\":12},"
               "\"num_alloc\":21,\"num_free\":22,\"hits\":23,\"misses\":24,"
               "\"num_immediate_reuse\":25,\"num_device_alloc\":26,\"num_device_free\":27,"
               "\"num_barriers\":28,\"num_fences_recorded\":29,\"num_fences_waited\":30,"
               "\"num_sync_points\":31,\"num_alloc_retries\":32,\"num_ooms\":33,"
               "\"num_reclaims\":34,\"num_idle_releases\":35,\"num_order_waits\":36,\"num_order_recoveries\":37,"
               "\"blocks\":41,\"free_blocks\":42,\"largest_free_block\":43,"
               "\"utilization\":0.92}]}\n"));
}

Test(report_json, no_device) {
  char out[256];
  capture_json(NULL, 0, out, sizeof out);
  cr_assert(eq(str, out, "{\"version\":\"0.1.0\",\"devices\":[]}\n"));
  capture_json(NULL, 5, out, sizeof out);
  cr_assert(eq(str, out, "{\"version\":\"0.1.0\",\"devices\":[]}\n"));
}

/* A strict JSON checker (RFC 8259 grammar, no extensions), enough to prove
 * the output parses whatever the numbers are. */
static const char *js_value(const char *p);
static const char *js_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}
static const char *js_string(const char *p) {
  if (*p++ != '"') return NULL;
  for (; *p != '"'; p++) {
    if ((unsigned char)*p < 0x20) return NULL;
    if (*p == '\\') {
      p++;
      if (*p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!strchr("0123456789abcdefABCDEF", p[i]) || p[i] == '\0') return NULL;
        p += 4;
      } else if (*p == '\0' || !strchr("\"\\/bfnrt", *p)) {
        return NULL;
      }
    }
  }
  return p + 1;
}
static const char *js_digits(const char *p) {
  if (*p < '0' || *p > '9') return NULL;
  while (*p >= '0' && *p <= '9') p++;
  return p;
}
static const char *js_number(const char *p) {
  if (*p == '-') p++;
  if (*p == '0')
    p++;
  else if ((p = js_digits(p)) == NULL)
    return NULL;
  if (*p == '.' && (p = js_digits(p + 1)) == NULL) return NULL;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if ((p = js_digits(p)) == NULL) return NULL;
  }
  return p;
}
static const char *js_seq(const char *p, char close, bool keyed) {
  p = js_ws(p + 1);
  if (*p == close) return p + 1;
  for (;;) {
    if (keyed) {
      if ((p = js_string(p)) == NULL) return NULL;
      p = js_ws(p);
      if (*p++ != ':') return NULL;
    }
    if ((p = js_value(p)) == NULL) return NULL;
    p = js_ws(p);
    if (*p == close) return p + 1;
    if (*p++ != ',') return NULL;
    p = js_ws(p);
  }
}
static const char *js_value(const char *p) {
  p = js_ws(p);
  switch (*p) {
    case '{': return js_seq(p, '}', true);
    case '[': return js_seq(p, ']', false);
    case '"': return js_string(p);
    case 't': return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f': return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n': return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
    default: return js_number(p);
  }
}
static bool json_valid(const char *text) {
  const char *end = js_value(text);
  return end != NULL && *js_ws(end) == '\0';
}

Test(report_json, checker_rejects_broken_json) {
  cr_assert(json_valid("{\"a\":[1,-2.5e3,\"x\\n\",true,null,{}]}\n"));
  cr_assert(not(json_valid("{\"a\":1,}")));
  cr_assert(not(json_valid("{\"a\":01}")));
  cr_assert(not(json_valid("{\"a\":1.}")));
  cr_assert(not(json_valid("{\"a\":1}}")));
  cr_assert(not(json_valid("{\"a\":nan}")));
}

Test(report_json, valid_for_extreme_values) {
  cudapool_stats_t d[2] = {blank(0), blank(INT32_MAX)};
#define SET_GAUGE(name, desc)                           \
  d[0].name = (cudapool_gauge_t){INT64_MIN, INT64_MAX}; \
  d[1].name = (cudapool_gauge_t){-1, 0};
#define SET_VALUE(name, desc) d[0].name = UINT64_MAX;
  CUDAPOOL_GAUGES(SET_GAUGE)
  CUDAPOOL_COUNTERS(SET_VALUE)
  CUDAPOOL_SNAPSHOT(SET_VALUE)
#undef SET_GAUGE
#undef SET_VALUE
  d[0].reserved_bytes.peak = 1; /* utilization far above 1 */
  char out[8192];
  capture_json(d, 2, out, sizeof out);
  cr_assert(json_valid(out), "%s", out);
  cr_assert(ne(ptr, strstr(out, "\"utilization\":9223372036854775807.0}"), NULL), "%s", out);
  cr_assert(ne(ptr, strstr(out, "\"utilization\":0.0}]}"), NULL), "peak reserved 0: %s", out);
  /* every name of the lists is there, once per device */
#define CHECK_NAME(name, desc)                                                         \
  {                                                                                    \
    int count = 0;                                                                     \
    for (const char *p = out; (p = strstr(p, "\"" #name "\":")) != NULL; p++) count++; \
    cr_assert(eq(int, count, 2), "%s", #name);                                         \
  }
  CUDAPOOL_GAUGES(CHECK_NAME)
  CUDAPOOL_COUNTERS(CHECK_NAME)
  CUDAPOOL_SNAPSHOT(CHECK_NAME)
#undef CHECK_NAME
}

/* ---- formatters -------------------------------------------------------- */

struct human_case {
  uint64_t bytes;
  char want[24];
};

ParameterizedTestParameters(format, size_human) {
  static struct human_case cases[] = {
      {0, "0 B"},
      {1023, "1023 B"},
      {1024, "1.00 KiB"},
      {1536, "1.50 KiB"},
      {1048575, "1.00 MiB"},
      {2297807503, "2.14 GiB"},
      {UINT64_C(1) << 40, "1.00 TiB"},
      {UINT64_C(1) << 50, "1.00 PiB"},
      {UINT64_MAX, "16.00 EiB"},
  };
  return cr_make_param_array(struct human_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct human_case *c, format, size_human) {
  char buf[24];
  cr_assert(gt(sz, cp_format_size_human(c->bytes, buf, sizeof buf), 0));
  cr_assert(eq(str, buf, c->want));
}

struct exact_case {
  uint64_t bytes;
  char want[24];
};

ParameterizedTestParameters(format, size_exact) {
  static struct exact_case cases[] = {
      {0, "0"},
      {1000, "1000"},
      {1024, "1K"},
      {1536, "1536"},
      {3 << 20, "3M"},
      {UINT64_C(8) << 30, "8G"},
      {UINT64_C(5) << 40, "5T"},
      {UINT64_C(1) << 50, "1024T"},
      {UINT64_MAX, "18446744073709551615"},
  };
  return cr_make_param_array(struct exact_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct exact_case *c, format, size_exact) {
  char buf[24];
  uint64_t back = 0;
  cr_assert(gt(sz, cp_format_size_exact(c->bytes, buf, sizeof buf), 0));
  cr_assert(eq(str, buf, c->want));
  cr_assert(eq(int, cp_parse_size(buf, &back), 0));
  cr_assert(eq(u64, back, c->bytes), "reads back");
}

struct dec_case {
  long double value;
  int max_dec, min_dec;
  char want[32];
};

ParameterizedTestParameters(format, decimal) {
  static struct dec_case cases[] = {
      {0.92L, 4, 1, "0.92"},   {1.0L, 4, 1, "1.0"},
      {0.0L, 4, 1, "0.0"},     {2.0L / 3.0L, 4, 1, "0.6667"},
      {0.99995L, 4, 1, "1.0"}, {80.0L, 6, 0, "80"},
      {12.5L, 6, 0, "12.5"},   {33.333333L, 6, 0, "33.333333"},
      {-3.0L, 4, 1, "0.0"},    {99.94L, 1, 1, "99.9"},
      {99.96L, 1, 1, "100.0"},
  };
  return cr_make_param_array(struct dec_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct dec_case *c, format, decimal) {
  char buf[32];
  cr_assert(gt(sz, cp_format_decimal(c->value, c->max_dec, c->min_dec, buf, sizeof buf), 0));
  cr_assert(eq(str, buf, c->want));
}

Test(format, decimal_nan_and_small_buffer) {
  char buf[4];
  cr_assert(gt(sz, cp_format_decimal(__builtin_nanl(""), 4, 1, buf, sizeof buf), 0));
  cr_assert(eq(str, buf, "0.0"));
  cr_assert(eq(sz, cp_format_decimal(12345.0L, 4, 1, buf, sizeof buf), 0));
  cr_assert(eq(str, buf, ""), "too small: empty, still terminated");
  cr_assert(eq(sz, cp_format_size_human(UINT64_MAX, buf, sizeof buf), 0));
}

/* ---- the process, for monitoring ----------------------------------------- */


Test(report_json, process_exact_and_still_allocated_summed_over_devices) {
  cudapool_stats_t d[2] = {blank(0), blank(2)};
  d[0].allocated_blocks.current = 2, d[0].allocated_bytes.current = 2098176;
  d[1].allocated_blocks.current = 1, d[1].allocated_bytes.current = 512;
  cp_size_opt_t limit = {.bytes = (size_t)8 << 30};
  cp_report_process_t p = {.pid = 4242, .host = "node-7", .rank = 3, .command = "python train.py --lr 0.1",
                           .mode = "auto", .limit = &limit, .wall_s = 12.3456, .at_end = true};
  char out[8192];
  capture_json_process(d, 2, &p, out, sizeof out);
  cr_assert(json_valid(out), "%s", out);
  cr_assert(eq(int, strncmp(out,
                            "{\"version\":\"0.1.0\",\"process\":{\"pid\":4242,\"host\":\"node-7\",\"rank\":3,"
                            "\"command\":\"python train.py --lr 0.1\",\"mode\":\"auto\",\"limit\":\"8.00 GiB\","
                            "\"wall_s\":12.346},\"devices\":[{\"device\":0,",
                            strlen("{\"version\":\"0.1.0\",\"process\":{\"pid\":4242,\"host\":\"node-7\",\"rank\":3,"
                                   "\"command\":\"python train.py --lr 0.1\",\"mode\":\"auto\",\"limit\":\"8.00 "
                                   "GiB\",\"wall_s\":12.346},\"devices\":[{\"device\":0,")),
               0),
            "%s", out);
  const char *tail = "],\"still_allocated\":{\"blocks\":3,\"bytes\":2098688}}\n";
  cr_assert(eq(str, out + strlen(out) - strlen(tail), (char *)tail), "%s", out);
}

Test(report_json, process_fields_left_out_and_rank_null_and_no_still_allocated_before_the_end) {
  cp_report_process_t p = {.pid = 7, .rank = -1, .mode = "sync", .wall_s = -1};
  char out[512];
  capture_json_process(NULL, 0, &p, out, sizeof out);
  cr_assert(eq(str, out,
               "{\"version\":\"0.1.0\",\"process\":{\"pid\":7,\"rank\":null,\"mode\":\"sync\",\"limit\":\"none\"},"
               "\"devices\":[]}\n"));
}

Test(report_json, process_strings_are_escaped) {
  cp_report_process_t p = {.pid = 1, .rank = -1, .command = "a \"b\"\\c\n\x1b[31m\xc3\xa9", .mode = "auto",
                           .wall_s = -1};
  char out[512];
  capture_json_process(NULL, 0, &p, out, sizeof out);
  cr_assert(json_valid(out), "%s", out);
  cr_assert(ne(ptr, strstr(out, "\"command\":\"a \\\"b\\\"\\\\c\\u000a\\u001b[31m\\u00c3\\u00a9\""), NULL), "%s",
            out);
}

Test(report_text, still_allocated_lines_only_for_devices_with_live_blocks) {
  cudapool_stats_t d[3] = {blank(0), blank(1), blank(4)};
  d[0].allocated_blocks.current = 1, d[0].allocated_bytes.current = 512;
  d[2].allocated_blocks.current = 2, d[2].allocated_bytes.current = 3 << 20;
  FILE *f = tmpfile();
  cr_assert(ne(ptr, f, NULL));
  cp_report_still_allocated(f, d, 3);
  rewind(f);
  char out[1024];
  out[fread(out, 1, sizeof out - 1, f)] = '\0';
  fclose(f);
  cr_assert(eq(str, out,
               "cudapool: device 0: 1 block, 512 B still allocated at exit (never freed by the program)\n"
               "cudapool: device 4: 2 blocks, 3.00 MiB still allocated at exit (never freed by the program)\n"));
}

Test(report_text, order_given_up_names_what_was_looked_up) {
  FILE *f = tmpfile();
  cr_assert(ne(ptr, f, NULL));
  cp_report_order_given_up(f, "cuFutureLaunch");
  rewind(f);
  char out[256];
  out[fread(out, 1, sizeof out - 1, f)] = '\0';
  fclose(f);
  cr_assert(eq(str, out, "cudapool: order: not learned (cuFutureLaunch looked up)\n"));
}
