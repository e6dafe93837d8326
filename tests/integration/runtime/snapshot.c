/* snapshot.c: the out-of-memory snapshot (CUDAPOOL_OOM_SNAPSHOT). Program:
 * tests/programs/runtime/oom.c with a 64 MiB fake device: four 16 MiB
 * blocks (each a segment of its own: over the 10 MiB threshold) fill it,
 * the fifth fails, and that failure writes the snapshot. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *at = text; (at = strstr(at, needle)); at += strlen(needle)) n++;
  return n;
}

/* Runs oom with the snapshot into a fresh folder; text gets the file. */
static void run_oom(it_result *r, const char *stacks, char *path, size_t path_cap, char *text, size_t cap) {
  char dir[] = "/tmp/cp-snap-XXXXXX", snap[128];
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(snap, sizeof snap, "CUDAPOOL_OOM_SNAPSHOT=%s/s-%%p.json", dir);
  it_run_ok(r, IT_SHIM, (const char *const[]){"FAKECUDA_MEMORY=64M", snap, stacks, NULL}, "oom", NULL);
  snprintf(path, path_cap, "%s/s-%d.json", dir, (int)r->pid);
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL), "%s: %s", path, r->err);
  text[fread(text, 1, cap - 1, f)] = '\0';
  fclose(f);
  remove(path);
  rmdir(dir);
}

Test(snapshot, oom_writes_exact_segments_and_blocks_and_the_line_names_the_file) {
  static char text[65536];
  char path[160], said[256];
  it_result r;
  run_oom(&r, "CUDAPOOL_STACKS=1", path, sizeof path, text, sizeof text);
  snprintf(said, sizeof said, "limit none; snapshot written to %s\n", path);
  cr_assert(ne(ptr, strstr(r.err, said), NULL), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "snapshot written"), 1), "one snapshot per process: %s", r.err);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not JSON: %s", text);
  cr_expect(eq(dbl, it_json_num(it_json_get(j, "version")), 1.0));
  cr_expect(eq(dbl, it_json_num(it_json_get(j, "pid")), (double)r.pid));
  cr_expect(ne(ptr, strstr(text, "\"reason\":\"oom\",\"time_s\":"), NULL), "%s", text);
  cr_expect(eq(int, it_json_type(it_json_get(j, "time_s")), IT_JSON_NUM));
  const it_json *stacks = it_json_get(j, "stacks");
  cr_assert(eq(sz, it_json_len(stacks), 1), "one call site allocated: %s", text);
  cr_expect(eq(dbl, it_json_num(it_json_get(it_json_at(stacks, 0), "id")), 0.0));
  cr_expect(ge(sz, it_json_len(it_json_get(it_json_at(stacks, 0), "frames")), 1), "%s", text);
  const it_json *devs = it_json_get(j, "devices");
  cr_assert(eq(sz, it_json_len(devs), 1), "%s", text);
  const it_json *dev = it_json_at(devs, 0), *totals = it_json_get(dev, "totals");
  cr_expect(eq(dbl, it_json_num(it_json_get(dev, "device")), 0.0));
  cr_expect(eq(dbl, it_json_num(it_json_get(totals, "allocated")), 64.0 * 1048576));
  cr_expect(eq(dbl, it_json_num(it_json_get(totals, "reserved")), 64.0 * 1048576));
  cr_expect(eq(dbl, it_json_num(it_json_get(totals, "cached")), 0.0));
  cr_expect(eq(dbl, it_json_num(it_json_get(totals, "pending")), 0.0));
  const it_json *segs = it_json_get(dev, "segments");
  cr_assert(eq(sz, it_json_len(segs), 4), "%s", text);
  for (size_t i = 0; i < 4; i++) {
    const it_json *seg = it_json_at(segs, i), *blocks = it_json_get(seg, "blocks");
    cr_expect(eq(dbl, it_json_num(it_json_get(seg, "size")), 16.0 * 1048576), "%zu", i);
    cr_expect(eq(dbl, it_json_num(it_json_get(seg, "stream")), 0.0), "%zu", i);
    cr_expect(eq(int, it_json_type(it_json_get(seg, "expandable")), IT_JSON_BOOL), "%zu", i);
    cr_assert(eq(sz, it_json_len(blocks), 1), "%zu: %s", i, text);
    const it_json *b = it_json_at(blocks, 0);
    cr_expect(eq(dbl, it_json_num(it_json_get(b, "size")), 16.0 * 1048576), "%zu", i);
    cr_expect(eq(dbl, it_json_num(it_json_get(b, "requested")), 16.0 * 1048576), "%zu", i);
    cr_expect(eq(dbl, it_json_num(it_json_get(b, "stack")), 0.0), "%zu", i);
  }
  /* A block covers its segment whole: the same address, named once each. */
  cr_expect(eq(int, count(text, "\"state\":\"allocated\""), 4), "%s", text);
  cr_expect(eq(int, count(text, "\"expandable\":false,\"blocks\":[{\"address\""), 4), "%s", text);
  it_json_free(j);
  it_free(&r);
}

Test(snapshot, without_stacks_blocks_name_no_stack) {
  static char text[65536];
  char path[160];
  it_result r;
  run_oom(&r, "CUDAPOOL_STACKS=0", path, sizeof path, text, sizeof text);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not JSON: %s", text);
  cr_expect(eq(sz, it_json_len(it_json_get(j, "stacks")), 0), "%s", text);
  cr_expect(eq(int, count(text, "\"stack\":null"), 4), "%s", text);
  it_json_free(j);
  it_free(&r);
}

Test(snapshot, an_unwritable_file_warns_once_and_the_line_names_none) {
  it_result r;
  it_run_ok(&r, IT_SHIM,
            (const char *const[]){"FAKECUDA_MEMORY=64M", "CUDAPOOL_OOM_SNAPSHOT=/nonexistent-cp-dir/s.json", NULL},
            "oom", NULL);
  cr_assert(ne(ptr, strstr(r.err, "cudapool: warning: CUDAPOOL_OOM_SNAPSHOT=\"/nonexistent-cp-dir/s.json\" cannot "
                                   "be written: No such file or directory; no snapshot is taken\n"),
               NULL),
            "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "CUDAPOOL_OOM_SNAPSHOT"), 1), "%s", r.err);
  cr_assert(eq(int, it_count_lines(r.err, "snapshot written"), 0), "%s", r.err);
  it_free(&r);
}

/* CUDAPOOL_SNAPSHOT_SIGNAL: a running process writes one on the signal, to
 * the CUDAPOOL_OOM_SNAPSHOT file with ".1" appended, reason "signal". */
Test(snapshot, a_signal_writes_one_from_the_running_process) {
  static char text[65536];
  char dir[] = "/tmp/cp-snapsig-XXXXXX", snap[128], path[160];
  cr_assert(ne(ptr, mkdtemp(dir), NULL));
  snprintf(snap, sizeof snap, "CUDAPOOL_OOM_SNAPSHOT=%s/s.json", dir);
  snprintf(path, sizeof path, "%s/s.json.1", dir);
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){snap, "CUDAPOOL_SNAPSHOT_SIGNAL=USR1", NULL}, "snapsig",
            IT_ARGS(path));
  cr_assert(eq(long, it_val(&r, "snapsig", "complete", -1), 1), "%s", r.err);
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL), "%s", r.err);
  text[fread(text, 1, sizeof text - 1, f)] = '\0';
  fclose(f);
  remove(path);
  rmdir(dir);
  it_json *j = it_json_parse(text);
  cr_assert(ne(ptr, j, NULL), "not JSON: %s", text);
  cr_expect(ne(ptr, strstr(text, "\"reason\":\"signal\""), NULL), "%s", text);
  const it_json *dev = it_json_at(it_json_get(j, "devices"), 0);
  cr_expect(eq(dbl, it_json_num(it_json_get(it_json_get(dev, "totals"), "allocated")), 3.0 * 1048576 + 1024), "%s",
            text);
  /* 1000 bytes: the small pool's 2 MiB segment; 3 MiB: a large 20 MiB one. */
  const it_json *segs = it_json_get(dev, "segments");
  cr_assert(eq(sz, it_json_len(segs), 2), "%s", text);
  it_json_free(j);
  it_free(&r);
}

Test(snapshot, a_bad_signal_name_warns) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_SNAPSHOT_SIGNAL=KILL", NULL}, "leak", NULL);
  cr_assert(ne(ptr, strstr(r.err, "cudapool: warning: CUDAPOOL_SNAPSHOT_SIGNAL=\"KILL\" is not a signal (accepted: "
                                   "0/off, or SIGUSR1 or SIGUSR2 (SIG may be left out)); using the default (0: off)\n"),
               NULL),
            "%s", r.err);
  it_free(&r);
}
