/* report.c: what cudapool-replay prints.
 *
 * Owns the three output forms of a result: the text report, the one-object
 * JSON (keys fixed by the issue: peak_allocated, peak_reserved, utilization,
 * hit_rate, ns_per_op, num_ooms, then the rest), and the --compare table.
 * Sizes in text are MiB with one decimal (the unit of PyTorch's memory
 * summary); JSON carries exact bytes. Nothing here changes a result. */
#include "replay.h"

#include <inttypes.h>
#include <string.h>

#define MAX_OOM_LINES 10

const char *rp_reuse_name(enum rp_reuse r) {
  switch (r) {
    case RP_REUSE_SYNC: return "sync";
    case RP_REUSE_IMMEDIATE: return "immediate";
    default: return "barrier";
  }
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* "none" for the unlimited sentinel, else MiB. */
static const char *size_opt(uint64_t v, char *buf, size_t cap) {
  if (v == (uint64_t)CP_NO_LIMIT)
    snprintf(buf, cap, "none");
  else
    snprintf(buf, cap, "%.1f MiB", mib(v));
  return buf;
}

static void print_ooms(FILE *f, const rp_result_t *r) {
  uint64_t shown = r->num_ooms < MAX_OOM_LINES ? r->num_ooms : MAX_OOM_LINES;
  for (uint64_t i = 0; i < shown && r->ooms; i++) {
    const rp_oom_t *m = &r->ooms[i];
    fprintf(f,
            "  OOM at line %" PRIu32 " (t=%.3f s): %.1f MiB requested; reserved %.1f, allocated "
            "%.1f, cached %.1f, largest free block %.1f MiB; fragmentation %.3f\n",
            m->line, m->time, mib(m->size), mib(m->reserved), mib(m->allocated), mib(m->cached),
            mib(m->largest_free), m->fragmentation);
  }
  if (r->num_ooms > shown)
    fprintf(f, "  ... and %" PRIu64 " more OOMs (--json lists all)\n", r->num_ooms - shown);
}

void rp_print_text(FILE *f, const char *name, const rp_trace_t *t, const rp_opts_t *o, const rp_result_t *r) {
  char a[32], b[32], c[32];
  fprintf(f,
          "trace            %s: %zu events (%zu allocations, %zu frees, %zu syncs), peak live %.1f "
          "MiB\n",
          name, t->n, t->allocs, t->frees, t->syncs, mib(t->peak_live));
  if (t->skipped || t->alloc_failures || t->zero_allocs || t->errors || t->reordered)
    fprintf(f,
            "                 %zu zero-byte allocations, %zu extra actions skipped, %zu recorded "
            "allocation failures, %zu bad lines%s\n",
            t->zero_allocs, t->skipped, t->alloc_failures, t->errors,
            t->reordered ? ", lines sorted by time" : "");
  fprintf(f, "options          reuse=%s limit=%s max_split=%s max_cached=%s device=%.1f GiB\n",
          rp_reuse_name(o->reuse), size_opt(o->cfg.limit, a, sizeof a),
          size_opt(o->cfg.max_split, b, sizeof b), size_opt(o->cfg.max_cached, c, sizeof c),
          (double)o->device_memory / (1 << 30));
  fprintf(f, "peak allocated   %.1f MiB (requested %.1f MiB)\n", mib(r->peak_allocated),
          mib(r->peak_requested));
  fprintf(f, "peak reserved    %.1f MiB\n", mib(r->peak_reserved));
  fprintf(f, "utilisation      %.3f\n", r->utilization);
  fprintf(f, "hit rate         %.4f (%" PRIu64 " hits, %" PRIu64 " misses)\n", r->hit_rate, r->hits,
          r->misses);
  fprintf(f,
          "backend calls    %" PRIu64 " (%" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64
          " barriers, %" PRIu64 " fences)\n",
          r->backend_calls, r->device_allocs, r->device_frees, r->barriers, r->fences);
  if (r->expandable)
    fprintf(f,
            "pages            %" PRIu64 " mapped in %" PRIu64 " calls, %" PRIu64 " unmapped in %" PRIu64
            " calls (%.0f MiB pages, expandable segments)\n",
            r->pages_mapped, r->map_calls, r->pages_unmapped, r->unmap_calls, mib(o->page));
  fprintf(f, "OOMs             %" PRIu64 "\n", r->num_ooms);
  print_ooms(f, r);
  fprintf(f, "ns per op        %.1f (%" PRIu64 " ops)\n", r->ns_per_op, r->ops);
  if (r->check_rc != 0) fprintf(f, "POOL CHECK FAILED: %s\n", r->check_why);
  if (r->free_errors) fprintf(f, "POOL REFUSED %" PRIu64 " FREES\n", r->free_errors);
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static void json_limit(FILE *f, const char *key, uint64_t v) {
  if (v == (uint64_t)CP_NO_LIMIT)
    fprintf(f, ",\"%s\":null", key);
  else
    fprintf(f, ",\"%s\":%" PRIu64, key, v);
}

void rp_print_json(FILE *f, const char *name, const rp_trace_t *t, const rp_opts_t *o, const rp_result_t *r,
                   uint64_t find_limit) {
  fprintf(f,
          "{\"peak_allocated\":%" PRIu64 ",\"peak_reserved\":%" PRIu64
          ",\"utilization\":%.6f,\"hit_rate\":%.6f,\"ns_per_op\":%.2f,\"num_ooms\":%" PRIu64,
          r->peak_allocated, r->peak_reserved, r->utilization, r->hit_rate, r->ns_per_op, r->num_ooms);
  fputs(",\"trace\":", f);
  json_string(f, name);
  fprintf(f, ",\"reuse\":\"%s\"", rp_reuse_name(o->reuse));
  json_limit(f, "limit", o->cfg.limit);
  json_limit(f, "max_split", o->cfg.max_split);
  json_limit(f, "max_cached", o->cfg.max_cached);
  fprintf(f,
          ",\"device_memory\":%" PRIu64 ",\"peak_requested\":%" PRIu64 ",\"trace_peak_live\":%" PRIu64
          ",\"events\":%zu,\"allocations\":%zu,\"frees\":%zu,\"syncs\":%zu,\"skipped_actions\":%zu"
          ",\"trace_alloc_failures\":%zu,\"zero_allocs\":%zu,\"bad_lines\":%zu,\"ops\":%" PRIu64
          ",\"hits\":%" PRIu64 ",\"misses\":%" PRIu64 ",\"immediate_reuse\":%" PRIu64
          ",\"alloc_retries\":%" PRIu64 ",\"skipped_frees\":%" PRIu64 ",\"backend_calls\":%" PRIu64
          ",\"device_allocs\":%" PRIu64 ",\"device_frees\":%" PRIu64 ",\"barriers\":%" PRIu64
          ",\"fences\":%" PRIu64 ",\"sync_points\":%" PRIu64 ",\"pool_check_ok\":%s",
          o->device_memory, r->peak_requested, t->peak_live, t->n, t->allocs, t->frees, t->syncs, t->skipped,
          t->alloc_failures, t->zero_allocs, t->errors, r->ops, r->hits, r->misses, r->immediate_reuse,
          r->alloc_retries, r->skipped_frees, r->backend_calls, r->device_allocs, r->device_frees,
          r->barriers, r->fences, r->sync_points, r->check_rc == 0 ? "true" : "false");
  fprintf(f,
          ",\"expandable\":%s,\"pages_mapped\":%" PRIu64 ",\"pages_unmapped\":%" PRIu64
          ",\"map_calls\":%" PRIu64 ",\"unmap_calls\":%" PRIu64,
          r->expandable ? "true" : "false", r->pages_mapped, r->pages_unmapped, r->map_calls, r->unmap_calls);
  if (find_limit != UINT64_MAX) fprintf(f, ",\"find_limit\":%" PRIu64, find_limit);
  fputs(",\"ooms\":[", f);
  for (uint64_t i = 0; i < r->num_ooms && r->ooms; i++) {
    const rp_oom_t *m = &r->ooms[i];
    fprintf(f,
            "%s{\"line\":%" PRIu32 ",\"time\":%.6f,\"size\":%" PRIu64 ",\"reserved\":%" PRIu64
            ",\"allocated\":%" PRIu64 ",\"cached\":%" PRIu64 ",\"largest_free\":%" PRIu64
            ",\"fragmentation\":%.6f}",
            i ? "," : "", m->line, m->time, m->size, m->reserved, m->allocated, m->cached, m->largest_free,
            m->fragmentation);
  }
  fputs("]}", f);
}

void rp_print_compare(FILE *f, const char *name, const rp_trace_t *t, size_t n, const char *const *labels,
                      const rp_result_t *r) {
  int w = 7;
  for (size_t i = 0; i < n; i++)
    if ((int)strlen(labels[i]) > w) w = (int)strlen(labels[i]);
  fprintf(f, "trace %s: %zu events, peak live %.1f MiB\n", name, t->n, mib(t->peak_live));
  fprintf(f, "%-*s  %14s  %14s  %6s  %8s  %5s  %8s  %6s\n", w, "options", "peak alloc MiB", "peak resv MiB",
          "util", "hit rate", "OOMs", "backend", "ns/op");
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%-*s  %14.1f  %14.1f  %6.3f  %8.4f  %5" PRIu64 "  %8" PRIu64 "  %6.1f\n", w, labels[i],
            mib(r[i].peak_allocated), mib(r[i].peak_reserved), r[i].utilization, r[i].hit_rate, r[i].num_ooms,
            r[i].backend_calls, r[i].ns_per_op);
}
