/* report.c: the text table and the JSON of the stats (see report.h).
 *
 * The JSON walks the X-macro lists of cudapool.h; the text table picks the
 * columns a person needs at exit. Everything goes straight to the FILE with
 * fprintf of integers and strings (no %f: its decimal point follows the
 * locale), fractions through cp_format_decimal. */
#include "report.h"

#include <inttypes.h>
#include <stdbool.h>

#include "parse.h"

static uint64_t nonneg(int64_t v) { return v > 0 ? (uint64_t)v : 0; }

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static void human(uint64_t bytes, char *buf, size_t cap) {
  if (cp_format_size_human(bytes, buf, cap) == 0) snprintf(buf, cap, "?");
}

/* num / den as a percentage with one decimal, rounded to nearest; "-" when
 * den is 0. */
static void percent_rounded(uint64_t num, uint64_t den, char *buf, size_t cap) {
  size_t n;
  if (den == 0 ||
      (n = cp_format_decimal((long double)num * 100.0L / (long double)den, 1, 1, buf, cap)) == 0 ||
      n + 1 >= cap) {
    snprintf(buf, cap, "-");
    return;
  }
  buf[n] = '%';
  buf[n + 1] = '\0';
}

/* num / den (num <= den) as a percentage with one decimal, rounded DOWN, so
 * that a hit rate reads "100.0%" only when there was no miss; "-" when den is
 * 0. Exact: integers only. */
static void percent_floor(uint64_t num, uint64_t den, char *buf, size_t cap) {
  if (den == 0 || num > den) {
    snprintf(buf, cap, "-");
    return;
  }
  unsigned permille = (unsigned)((unsigned __int128)num * 1000u / den);
  snprintf(buf, cap, "%u.%u%%", permille / 10u, permille % 10u);
}

/* Driver calls the pool saved the program; negative when it made more than
 * the program asked for (a trimmed cache being refilled). */
static void calls_saved(const cudapool_stats_t *s, char *buf, size_t cap) {
  uint64_t asked = sat_add(s->num_alloc, s->num_free);
  uint64_t made = sat_add(s->num_device_alloc, s->num_device_free);
  if (asked >= made)
    snprintf(buf, cap, "%" PRIu64, asked - made);
  else
    snprintf(buf, cap, "-%" PRIu64, made - asked);
}

/* CUDAPOOL_LIMIT as given: "none", "8.00 GiB", "80% of device memory". */
static void limit_words(const cp_size_opt_t *limit, char *lim, size_t cap) {
  snprintf(lim, cap, "none");
  if (limit != NULL && limit->percent > 0.0) {
    size_t n = cp_format_decimal(limit->percent, 6, 0, lim, cap);
    if (n == 0 || snprintf(lim + n, cap - n, "%% of device memory") >= (int)(cap - n)) snprintf(lim, cap, "?");
  } else if (limit != NULL && limit->bytes != 0) {
    human(limit->bytes, lim, cap);
  }
}

size_t cp_report_header(char *buf, size_t cap, long pid, const char *mode, const cp_size_opt_t *limit) {
  char lim[48];
  if (buf == NULL || cap == 0) return 0;
  limit_words(limit, lim, sizeof lim);
  int w = snprintf(buf, cap, "process %ld, version " CP_VERSION_TEXT ", mode %s, limit %s", pid,
                   mode != NULL ? mode : "?", lim);
  if (w < 0 || (size_t)w >= cap) {
    buf[0] = '\0';
    return 0;
  }
  return (size_t)w;
}

#define ROW_FMT "cudapool: %3s  %11s  %13s  %6s  %10s  %10s  %8s  %11s  %7s  %5s  %12s\n"

void cp_report_text(FILE *out, const cudapool_stats_t *devs, int ndevs, const char *header) {
  if (out == NULL) return;
  if (devs == NULL || ndevs < 0) ndevs = 0;
  fprintf(out, "cudapool: %s\n", header != NULL ? header : "exit report");
  if (ndevs == 0) {
    fputs("cudapool: no device used\n", out);
    fflush(out);
    return;
  }
  fprintf(out, ROW_FMT, "dev", "peak alloc", "peak reserved", "util", "hits", "misses", "hit rate",
          "calls saved", "retries", "OOMs", "largest free");
  for (int i = 0; i < ndevs; i++) {
    const cudapool_stats_t *s = &devs[i];
    char dev[16], alloc[32], reserved[32], util[32], hits[24], misses[24], rate[32], saved[32], retries[24],
        ooms[24], largest[32];
    snprintf(dev, sizeof dev, "%d", (int)s->device);
    human(nonneg(s->allocated_bytes.peak), alloc, sizeof alloc);
    human(nonneg(s->reserved_bytes.peak), reserved, sizeof reserved);
    percent_rounded(nonneg(s->allocated_bytes.peak), nonneg(s->reserved_bytes.peak), util, sizeof util);
    snprintf(hits, sizeof hits, "%" PRIu64, s->hits);
    snprintf(misses, sizeof misses, "%" PRIu64, s->misses);
    percent_floor(s->hits, sat_add(s->hits, s->misses), rate, sizeof rate);
    calls_saved(s, saved, sizeof saved);
    snprintf(retries, sizeof retries, "%" PRIu64, s->num_alloc_retries);
    snprintf(ooms, sizeof ooms, "%" PRIu64, s->num_ooms);
    human(s->largest_free_block, largest, sizeof largest);
    fprintf(out, ROW_FMT, dev, alloc, reserved, util, hits, misses, rate, saved, retries, ooms, largest);
  }
  fflush(out);
}

static void json_device(FILE *out, const cudapool_stats_t *s) {
  char util[32];
  uint64_t peak_reserved = nonneg(s->reserved_bytes.peak);
  long double u =
      peak_reserved == 0 ? 0.0L : (long double)nonneg(s->allocated_bytes.peak) / (long double)peak_reserved;
  if (cp_format_decimal(u, 4, 1, util, sizeof util) == 0) snprintf(util, sizeof util, "0.0");
  fprintf(out, "{\"device\":%d", (int)s->device);
#define CP_JSON_GAUGE(name, desc)                                                                \
  fprintf(out, ",\"" #name "\":{\"current\":%" PRId64 ",\"peak\":%" PRId64 "}", s->name.current, \
          s->name.peak);
#define CP_JSON_VALUE(name, desc) fprintf(out, ",\"" #name "\":%" PRIu64, s->name);
  CUDAPOOL_GAUGES(CP_JSON_GAUGE)
  CUDAPOOL_COUNTERS(CP_JSON_VALUE)
  CUDAPOOL_SNAPSHOT(CP_JSON_VALUE)
#undef CP_JSON_GAUGE
#undef CP_JSON_VALUE
  fprintf(out, ",\"utilization\":%s}", util);
}

static void json_string(FILE *out, const char *text) {
  fputc('"', out);
  for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
    if (*c == '"' || *c == '\\')
      fprintf(out, "\\%c", *c);
    else if (*c < 0x20 || *c >= 0x7f)
      fprintf(out, "\\u%04x", *c);
    else
      fputc(*c, out);
  }
  fputc('"', out);
}

static void json_process(FILE *out, const cp_report_process_t *p) {
  char lim[48], wall[48];
  limit_words(p->limit, lim, sizeof lim);
  fprintf(out, ",\"process\":{\"pid\":%ld", p->pid);
  if (p->host != NULL) fputs(",\"host\":", out), json_string(out, p->host);
  if (p->rank >= 0)
    fprintf(out, ",\"rank\":%d", p->rank);
  else
    fputs(",\"rank\":null", out);
  if (p->command != NULL) fputs(",\"command\":", out), json_string(out, p->command);
  fputs(",\"mode\":", out), json_string(out, p->mode != NULL ? p->mode : "?");
  fputs(",\"limit\":", out), json_string(out, lim);
  if (p->wall_s >= 0 && cp_format_decimal(p->wall_s, 3, 1, wall, sizeof wall) > 0)
    fprintf(out, ",\"wall_s\":%s", wall);
  fputc('}', out);
}

static void still_allocated(const cudapool_stats_t *s, uint64_t *blocks, uint64_t *bytes) {
  *blocks = nonneg(s->allocated_blocks.current);
  *bytes = nonneg(s->allocated_bytes.current);
}

void cp_report_json_process(FILE *out, const cudapool_stats_t *devs, int ndevs, const cp_report_process_t *proc) {
  if (out == NULL) return;
  if (devs == NULL || ndevs < 0) ndevs = 0;
  fputs("{\"version\":\"" CP_VERSION_TEXT "\"", out);
  if (proc != NULL) json_process(out, proc);
  fputs(",\"devices\":[", out);
  uint64_t blocks = 0, bytes = 0;
  for (int i = 0; i < ndevs; i++) {
    if (i > 0) fputc(',', out);
    json_device(out, &devs[i]);
    uint64_t b, n;
    still_allocated(&devs[i], &b, &n);
    blocks = sat_add(blocks, b), bytes = sat_add(bytes, n);
  }
  fputc(']', out);
  if (proc != NULL && proc->at_end)
    fprintf(out, ",\"still_allocated\":{\"blocks\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", blocks, bytes);
  if (proc != NULL && proc->extra != NULL) proc->extra(out, proc->extra_ctx);
  fputs("}\n", out);
  fflush(out);
}

void cp_report_json_members(FILE *out, const cudapool_stats_t *devs, int ndevs, const char *members) {
  if (out == NULL) return;
  if (devs == NULL || ndevs < 0) ndevs = 0;
  fputs("{\"version\":\"" CP_VERSION_TEXT "\",\"devices\":[", out);
  for (int i = 0; i < ndevs; i++) {
    if (i > 0) fputc(',', out);
    json_device(out, &devs[i]);
  }
  fputc(']', out);
  if (members != NULL) fputs(members, out);
  fputs("}\n", out);
  fflush(out);
}

void cp_report_json(FILE *out, const cudapool_stats_t *devs, int ndevs) {
  cp_report_json_process(out, devs, ndevs, NULL);
}

void cp_report_still_allocated(FILE *out, const cudapool_stats_t *devs, int ndevs) {
  if (out == NULL || devs == NULL) return;
  for (int i = 0; i < ndevs; i++) {
    uint64_t blocks, bytes;
    char size[32];
    still_allocated(&devs[i], &blocks, &bytes);
    if (blocks == 0 && bytes == 0) continue;
    human(bytes, size, sizeof size);
    fprintf(out, "cudapool: device %d: %" PRIu64 " block%s, %s still allocated at exit (never freed by the program)\n",
            (int)devs[i].device, blocks, blocks == 1 ? "" : "s", size);
  }
  fflush(out);
}

void cp_report_order_given_up(FILE *out, const char *what) {
  fprintf(out, "cudapool: order: not learned (%s looked up)\n", what);
}
