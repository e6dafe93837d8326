/* snapshot.c: the memory snapshot (snapshot.h). */
#include "state/snapshot.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outfile.h"
#include "pool.h"
#include "state/device.h"
#include "state/process_info.h"
#include "state/shim.h"
#include "state/stacks.h"

typedef struct walk_out {
  FILE *out;
  bool any_segment, any_block;
  uint64_t pending;
} walk_out_t;

static const char *const state_words[] = {[CP_WALK_ALLOCATED] = "allocated", [CP_WALK_FREE] = "free",
                                          [CP_WALK_PENDING] = "pending"};

static void on_segment(void *ctx, const cp_walk_segment_t *s) {
  walk_out_t *w = ctx;
  if (w->any_segment) fputs("]},", w->out);
  fprintf(w->out, "{\"address\":\"0x%" PRIxPTR "\",\"size\":%zu,\"stream\":%" PRIu64 ",\"expandable\":%s,\"blocks\":[",
          s->addr, s->size, s->stream, s->expandable ? "true" : "false");
  w->any_segment = true, w->any_block = false;
}

static void on_block(void *ctx, const cp_walk_block_t *b) {
  walk_out_t *w = ctx;
  long stack = b->state == CP_WALK_ALLOCATED && cp_stacks_on ? cp_stacks_id_of(b->addr) : -1;
  fprintf(w->out, "%s{\"address\":\"0x%" PRIxPTR "\",\"size\":%zu,\"requested\":%zu,\"state\":\"%s\",\"stream\":%" PRIu64
          ",\"stack\":",
          w->any_block ? "," : "", b->addr, b->size, b->requested, state_words[b->state], b->stream);
  if (stack < 0)
    fputs("null}", w->out);
  else
    fprintf(w->out, "%ld}", stack);
  if (b->state == CP_WALK_PENDING) w->pending += b->size;
  w->any_block = true;
}

/* One device's object, into out. */
static bool device_json(FILE *out, cp_device_t *dev, cp_pool_t *pool) {
  char *segs = NULL;
  size_t segs_len = 0;
  FILE *mem = open_memstream(&segs, &segs_len);
  if (!mem) return false;
  walk_out_t w = {.out = mem};
  cp_walker_t walker = {on_segment, on_block, &w};
  int rc = cp_walk(pool, &walker);
  if (w.any_segment) fputs("]}", mem);
  if (fclose(mem) != 0 || rc != 0) {
    free(segs);
    return false;
  }
  cudapool_stats_t s = {.size = sizeof s, .version = CUDAPOOL_STATS_VERSION};
  cp_get_stats(pool, &s);
  fprintf(out,
          "{\"device\":%d,\"totals\":{\"allocated\":%" PRId64 ",\"reserved\":%" PRId64 ",\"cached\":%" PRId64
          ",\"pending\":%" PRIu64 "},\"segments\":[%s]}",
          cp_device_id(dev), s.allocated_bytes.current, s.reserved_bytes.current, s.cached_bytes.current, w.pending,
          segs);
  free(segs);
  return true;
}

char *cp_snapshot_text(const char *reason, size_t *len) {
  char *text = NULL;
  FILE *out = open_memstream(&text, len);
  if (!out) return NULL;
  cp_report_process_t proc;
  cp_process_info(&proc, false);
  fprintf(out, "{\"version\":1,\"pid\":%ld,\"reason\":\"%s\",\"time_s\":%.6f,\"stacks\":", (long)getpid(), reason,
          proc.wall_s < 0 ? 0.0 : proc.wall_s);
  cp_stacks_json_table(out);
  fputs(",\"devices\":[", out);
  bool ok = true, first = true;
  int next = 0;
  for (cp_device_t *dev; ok && (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = cp_device_pool_if_any(dev);
    if (!pool) continue;
    if (!first) fputc(',', out);
    ok = device_json(out, dev, pool);
    first = false;
  }
  fputs("]}\n", out);
  if (fclose(out) != 0 || !ok) {
    free(text);
    return NULL;
  }
  return text;
}

/* Writes a snapshot to pattern (outfile.h rules), the file written into
 * path: 0 or an errno. */
static int write_file(const char *reason, const char *pattern, char *path, size_t cap) {
  size_t len = 0;
  char *text = cp_snapshot_text(reason, &len);
  int err = ENOMEM;
  if (text) {
    int fd = cp_outfile_open(pattern, path, cap);
    err = fd < 0 ? -fd : cp_outfile_write(fd, text, len);
    int cerr = cp_outfile_close(fd);
    if (!err) err = cerr;
  }
  free(text);
  return err;
}

/* write_file, or NULL after one warning naming `variable`. */
static const char *write_snapshot(const char *reason, const char *variable, const char *pattern, char *path,
                                  size_t cap) {
  int err = write_file(reason, pattern, path, cap);
  if (!err) return path;
  const char *rule = cp_outfile_rule(err);
  fprintf(stderr, "cudapool: warning: %s=\"", variable);
  cp_put_escaped(stderr, pattern, 512);
  fprintf(stderr, "\" cannot be written: %s; no snapshot is taken\n", rule ? rule : strerror(err));
  return NULL;
}

static atomic_bool oom_taken;
static char oom_path[CP_OPTION_PATH_MAX];

const char *cp_snapshot_after_oom(void) {
  if (!cp_opts.oom_snapshot[0] || atomic_exchange(&oom_taken, true)) return NULL;
  return write_snapshot("oom", "CUDAPOOL_OOM_SNAPSHOT", cp_opts.oom_snapshot, oom_path, sizeof oom_path);
}

const char *cp_snapshot_on_signal(unsigned n, char *path, size_t cap) {
  char pattern[CP_OPTION_PATH_MAX + 16];
  snprintf(pattern, sizeof pattern, "%s.%u", cp_opts.oom_snapshot, n);
  return write_snapshot("signal", "CUDAPOOL_OOM_SNAPSHOT", pattern, path, cap);
}

int cp_snapshot_on_request(const char *pattern, char *path, size_t cap) {
  if (pattern[0] != '/') return EINVAL;
  return write_file("request", pattern, path, cap);
}
