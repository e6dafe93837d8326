/* run.c: replaying traces through the real pool (tools/replay/run.c)
 * and the cudapool-replay command line.
 *
 * A hand-written trace whose every figure follows from the pool's rules
 * (512-byte rounding, 2 MiB small segments, own-size segments for requests
 * of 10 MiB and more), replayed under each reuse mode and key; a limit that
 * forces an OOM; --find-limit; the real PyTorch traces against PyTorch's own
 * figures. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <string.h>

#include <zlib.h>

#include "replay.h"
#include "replay_util.h"

#define MiB (1024ull * 1024)

/* S: 1000 B (small pool: a 2 MiB segment, 1024 B block). A, B, C: 12 MiB
 * each (an own 12 MiB segment when nothing cached fits). B is allocated
 * while A is pending; C on another thread while B is pending; the
 * sync_device between them completes A. */
static const char tiny[] = "Thread,Time,Action,Pointer,Size,Stream\n"
                           "1,0.0,allocate,0x1000,1000,(nil)\n"
                           "1,0.1,allocate,0xa000000,12582912,(nil)\n"
                           "1,0.2,free,0xa000000,0,(nil)\n"
                           "1,0.3,allocate,0xb000000,12582912,(nil)\n"
                           "1,0.4,sync_device,(nil),0,(nil)\n"
                           "1,0.5,free,0xb000000,0,(nil)\n"
                           "2,0.6,allocate,0xc000000,12582912,(nil)\n"
                           "2,0.7,free,0xc000000,0,(nil)\n";

/* Over a 20 MiB limit: S and A are live when B asks for a third segment
 * (2 + 12 + 12 MiB), and no segment is idle, so B fails; its free is then
 * skipped. A is freed and synchronised; C reuses it. */
static const char over_limit[] = "Thread,Time,Action,Pointer,Size,Stream\n"
                                 "1,0.0,allocate,0x1000,1000,(nil)\n"
                                 "1,0.1,allocate,0xa000000,12582912,(nil)\n"
                                 "1,0.2,allocate,0xb000000,12582912,(nil)\n"
                                 "1,0.3,free,0xa000000,0,(nil)\n"
                                 "1,0.4,sync_device,(nil),0,(nil)\n"
                                 "1,0.5,free,0xb000000,0,(nil)\n"
                                 "2,0.6,allocate,0xc000000,12582912,(nil)\n"
                                 "2,0.7,free,0xc000000,0,(nil)\n";

static rp_trace_t load_text(const char *text, size_t len) {
  rp_load_opts_t lo = {.name = "tiny", .err = stderr};
  rp_trace_t t;
  cr_assert(eq(int, rp_load_mem(text, len, &lo, &t), 0));
  return t;
}

static rp_trace_t load_tiny(void) { return load_text(tiny, sizeof tiny - 1); }

struct mode_case {
  int reuse;
  bool key;
  uint64_t reserved, hits, misses, immediate, barriers;
};

ParameterizedTestParameters(replay, tiny_trace_modes) {
  static struct mode_case p[] = {
      /* B reuses A after a barrier; C reuses B after another */
      {RP_REUSE_BARRIER, false, 14 * MiB, 2, 2, 0, 2},
      /* B reuses A at once (same thread and stream); C needs a barrier */
      {RP_REUSE_BARRIER, true, 14 * MiB, 2, 2, 1, 1},
      /* A pending until the sync: B takes a new segment; C reuses A */
      {RP_REUSE_SYNC, false, 26 * MiB, 1, 3, 0, 1},
      /* B reuses A by key; B pending at C (other thread): new segment */
      {RP_REUSE_SYNC, true, 26 * MiB, 1, 3, 1, 1},
      {RP_REUSE_IMMEDIATE, false, 14 * MiB, 2, 2, 0, 0},
      {RP_REUSE_IMMEDIATE, true, 14 * MiB, 2, 2, 0, 0},
  };
  return cr_make_param_array(struct mode_case, p, sizeof p / sizeof p[0]);
}

ParameterizedTest(struct mode_case *m, replay, tiny_trace_modes) {
  rp_trace_t t = load_tiny();
  rp_opts_t o;
  rp_opts_default(&o);
  o.reuse = (enum rp_reuse)m->reuse;
  o.thread_key = m->key;
  o.repeat = 2;
  rp_result_t r;
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  cr_assert(eq(u64, r.peak_allocated, 12 * MiB + 1024));
  cr_assert(eq(u64, r.peak_requested, 12 * MiB + 1000));
  cr_assert(eq(u64, r.peak_reserved, m->reserved), "%s key=%d", rp_reuse_name(o.reuse), m->key);
  cr_assert(eq(dbl, r.utilization, (double)(12 * MiB + 1024) / (double)m->reserved));
  cr_assert(eq(u64, r.hits, m->hits));
  cr_assert(eq(u64, r.misses, m->misses));
  cr_assert(eq(dbl, r.hit_rate, (double)m->hits / 4));
  cr_assert(eq(u64, r.immediate_reuse, m->immediate));
  cr_assert(eq(u64, r.barriers, m->barriers));
  cr_assert(eq(u64, r.device_allocs, m->misses));
  cr_assert(eq(u64, r.num_ooms, 0));
  cr_assert(eq(u64, r.ops, 8));
  cr_assert(eq(u64, r.sync_points, 1));
  cr_assert(eq(int, r.check_rc, 0), "%s", r.check_why);
  cr_assert(gt(dbl, r.ns_per_op, 0));
  rp_result_free(&r);
  rp_trace_free(&t);
}

Test(replay, limit_forces_an_oom) {
  rp_trace_t t = load_text(over_limit, sizeof over_limit - 1);
  rp_opts_t o;
  rp_opts_default(&o);
  o.reuse = RP_REUSE_SYNC;
  o.thread_key = false;
  o.cfg.limit = 20 * MiB;
  o.repeat = 1;
  rp_result_t r;
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  cr_assert(eq(u64, r.num_ooms, 1));
  cr_assert(eq(u64, r.skipped_frees, 1), "B's free has nothing to free");
  cr_assert(eq(u64, r.peak_reserved, 14 * MiB));
  cr_assert(eq(u64, r.hits, 1), "C reuses A after the sync");
  const rp_oom_t *m = &r.ooms[0];
  cr_assert(eq(u32, m->line, 4));
  cr_assert(eq(u64, m->size, 12 * MiB));
  cr_assert(eq(u64, m->reserved, 14 * MiB));
  cr_assert(eq(u64, m->allocated, 12 * MiB + 1024));
  cr_assert(eq(u64, m->cached, 2 * MiB - 1024));
  cr_assert(eq(u64, m->largest_free, 2 * MiB - 1024));
  cr_assert(eq(dbl, m->fragmentation, 0.0));
  rp_result_free(&r);
  rp_trace_free(&t);
}

Test(replay, limit_gives_back_idle_segments_before_failing) {
  /* Sync mode refuses barriers: A is still pending when B needs a segment
   * past the 20 MiB limit. A's segment holds no live block, so it goes back
   * (the real cudaFree waits for the device) and B fits; the same for C
   * against B. No OOM, 14 MiB reserved at most. */
  rp_trace_t t = load_tiny();
  rp_opts_t o;
  rp_opts_default(&o);
  o.reuse = RP_REUSE_SYNC;
  o.thread_key = false;
  o.cfg.limit = 20 * MiB;
  o.repeat = 1;
  rp_result_t r;
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  cr_assert(eq(u64, r.num_ooms, 0));
  cr_assert(eq(u64, r.peak_reserved, 14 * MiB));
  cr_assert(eq(u64, r.misses, 4));
  cr_assert(eq(u64, r.device_frees, 2), "A's and B's segments");
  rp_result_free(&r);
  rp_trace_free(&t);
}

Test(replay, legacy_stream_sync_is_a_device_sync) {
  /* sync mode, no key: A is pending until a sync covers it. A sync of some
   * other stream does not (A was allocated device-wide); one of the legacy
   * stream, (nil), does. */
  static const char text[] = "1,0.0,allocate,0xa000000,12582912,(nil)\n"
                             "1,0.1,free,0xa000000,0,(nil)\n"
                             "1,0.2,sync_stream,(nil),0,0x55d0c0\n"
                             "1,0.3,allocate,0xb000000,12582912,(nil)\n"
                             "1,0.4,sync_stream,(nil),0,(nil)\n"
                             "1,0.5,allocate,0xc000000,12582912,(nil)\n";
  rp_load_opts_t lo = {.name = "sync", .err = stderr};
  rp_trace_t t;
  cr_assert(eq(int, rp_load_mem(text, sizeof text - 1, &lo, &t), 0));
  rp_opts_t o;
  rp_opts_default(&o);
  o.reuse = RP_REUSE_SYNC;
  o.thread_key = false;
  o.repeat = 1;
  rp_result_t r;
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  cr_assert(eq(u64, r.misses, 2), "B: A still pending after the other stream's sync");
  cr_assert(eq(u64, r.hits, 1), "C reuses A after the legacy sync");
  cr_assert(eq(u64, r.sync_points, 2));
  rp_result_free(&r);
  rp_trace_free(&t);
}

Test(replay, find_limit) {
  rp_trace_t t = load_tiny();
  rp_opts_t o;
  rp_opts_default(&o);
  o.thread_key = false;
  unsigned runs = 0;
  o.reuse = RP_REUSE_IMMEDIATE;
  cr_assert(eq(u64, rp_find_limit(&t, &o, &runs), 14 * MiB));
  cr_assert(gt(u32, runs, 2));
  /* Pending segments go back whole when the limit is reached. */
  o.reuse = RP_REUSE_SYNC;
  cr_assert(eq(u64, rp_find_limit(&t, &o, NULL), 14 * MiB));
  /* A device too small for the trace: no limit helps. */
  o.device_memory = 8 * MiB;
  cr_assert(eq(u64, rp_find_limit(&t, &o, NULL), 0));
  rp_trace_free(&t);
}

Test(replay, timeline_rows_and_markers) {
  rp_trace_t t = load_tiny();
  rp_opts_t o;
  rp_opts_default(&o);
  o.reuse = RP_REUSE_SYNC;
  o.thread_key = false;
  o.cfg.limit = 20 * MiB;
  o.repeat = 1;
  char *text = NULL;
  size_t len = 0;
  o.timeline = open_memstream(&text, &len);
  rp_result_t r;
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  fclose(o.timeline);
  cr_assert(eq(str, text,
               "time,allocated,reserved,largest_free,marker\n"
               "0.000000,1024,2097152,2096128,\n"
               "0.100000,12583936,14680064,2096128,\n"
               "0.200000,1024,14680064,2096128,\n"
               "0.300000,12583936,14680064,2096128,\n"
               "0.400000,12583936,14680064,2096128,\n"
               "0.500000,1024,14680064,2096128,\n"
               "0.600000,12583936,14680064,2096128,\n"
               "0.700000,1024,14680064,2096128,\n"));
  free(text);
  rp_result_free(&r);
  rp_trace_free(&t);
}

/* ---- the real traces: PyTorch's own figures (traces/README.md) -------- */

static void load_real(const char *name, rp_trace_t *t) {
  char root[PATH_MAX], path[PATH_MAX + 64];
  cr_assert(eq(int, ru_repo_root(root, sizeof root), 0));
  snprintf(path, sizeof path, "%s/traces/%s", root, name);
  rp_load_opts_t lo = {.name = name, .err = stderr, .stop_on_error = true};
  cr_assert(eq(int, rp_load_file(path, &lo, t), 0));
}

Test(real, transformer_immediate_matches_pytorch) {
  rp_trace_t t;
  load_real("transformer.csv.gz", &t);
  cr_assert(eq(sz, t.lines, 24288));
  cr_assert(eq(sz, t.allocs, 12134));
  cr_assert(eq(sz, t.frees, 12059));
  cr_assert(eq(sz, t.syncs, 94));
  cr_assert(eq(sz, t.errors, 0));
  rp_opts_t o;
  rp_opts_default(&o);
  o.reuse = RP_REUSE_IMMEDIATE;
  o.repeat = 1;
  rp_result_t r;
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  /* PyTorch: 2,374.0 MiB reserved for the same run. */
  cr_assert(eq(u64, r.peak_reserved, 2374 * MiB));
  cr_assert(eq(int, r.check_rc, 0), "%s", r.check_why);
  cr_assert(eq(u64, r.free_errors, 0));
  rp_result_free(&r);
  rp_trace_free(&t);
}

Test(real, gpt_varlen_loads_with_zero_byte_allocations) {
  rp_trace_t t;
  load_real("gpt_varlen.csv.gz", &t);
  cr_assert(eq(sz, t.lines, 26547));
  cr_assert(eq(sz, t.zero_allocs, 638), "cudaMalloc(&p, 0) lines");
  cr_assert(eq(sz, t.allocs, 13571 - 638));
  cr_assert(eq(sz, t.frees, 12854));
  cr_assert(eq(sz, t.errors, 0));
  cr_assert(eq(u64, t.peak_live, 13577634976ull));
  rp_trace_free(&t);
}

/* Issue 11's goal: utilisation at least 0.95 with expandable segments, and
 * without a limit no page is ever unmapped (every map while growing). */
static void expandable_goal(const char *trace, uint64_t reserved_mib, uint64_t pages) {
  rp_trace_t t;
  load_real(trace, &t);
  rp_opts_t o;
  rp_opts_default(&o);
  o.cfg.expandable = true;
  o.repeat = 1;
  rp_result_t r;
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  cr_assert(r.expandable);
  cr_assert(ge(dbl, r.utilization, 0.95), "%s: %f", trace, r.utilization);
  cr_assert(eq(u64, r.peak_reserved, reserved_mib * MiB), "%s", trace);
  cr_assert(eq(u64, r.pages_mapped, pages), "%s", trace);
  cr_assert(eq(u64, r.pages_unmapped, 0), "%s", trace);
  cr_assert(eq(u64, r.num_ooms, 0));
  cr_assert(eq(int, r.check_rc, 0), "%s", r.check_why);
  cr_assert(eq(u64, r.free_errors, 0));
  rp_result_free(&r);
  rp_trace_free(&t);
}

Test(real, transformer_expandable_reaches_0_95) { expandable_goal("transformer.csv.gz", 2216, 1091); }
Test(real, gpt_varlen_expandable_reaches_0_95) { expandable_goal("gpt_varlen.csv.gz", 13020, 6502); }

/* The same trace gzip'd and plain: the same replay, figure for figure. */
Test(real, gzip_and_plain_replay_alike) {
  char root[PATH_MAX], gz[PATH_MAX + 64], dir[64], plain[128];
  cr_assert(eq(int, ru_repo_root(root, sizeof root), 0));
  cr_assert(eq(int, ru_mkdtemp(dir), 0));
  snprintf(gz, sizeof gz, "%s/traces/transformer.csv.gz", root);
  snprintf(plain, sizeof plain, "%s/transformer.csv", dir);
  gzFile in = gzopen(gz, "rb");
  FILE *out = fopen(plain, "w");
  cr_assert(ne(ptr, in, NULL));
  cr_assert(ne(ptr, out, NULL));
  char buf[65536];
  for (int n; (n = gzread(in, buf, sizeof buf)) > 0;)
    cr_assert(eq(sz, fwrite(buf, 1, (size_t)n, out), (size_t)n));
  gzclose(in);
  cr_assert(eq(int, fclose(out), 0));
  rp_load_opts_t lo = {.name = "t", .err = stderr, .stop_on_error = true};
  rp_trace_t a, b;
  cr_assert(eq(int, rp_load_file(gz, &lo, &a), 0));
  cr_assert(eq(int, rp_load_file(plain, &lo, &b), 0));
  rp_opts_t o;
  rp_opts_default(&o);
  o.repeat = 1;
  rp_result_t ra, rb;
  cr_assert(eq(int, rp_run(&a, &o, &ra), 0));
  cr_assert(eq(int, rp_run(&b, &o, &rb), 0));
  cr_assert(eq(u64, ra.ops, 24287));
  cr_assert(eq(u64, ra.ops, rb.ops));
  cr_assert(eq(u64, ra.peak_reserved, rb.peak_reserved));
  cr_assert(eq(u64, ra.peak_allocated, rb.peak_allocated));
  cr_assert(eq(u64, ra.hits, rb.hits));
  cr_assert(eq(u64, ra.misses, rb.misses));
  cr_assert(eq(u64, ra.barriers, rb.barriers));
  cr_assert(eq(u64, ra.immediate_reuse, rb.immediate_reuse));
  cr_assert(eq(u64, rp_find_limit(&a, &o, NULL), rp_find_limit(&b, &o, NULL)));
  rp_result_free(&ra);
  rp_result_free(&rb);
  rp_trace_free(&a);
  rp_trace_free(&b);
  ru_rmtree(dir);
}

/* ---- the command line ------------------------------------------------- */

static char dir[64];
static void mk(void) { cr_assert(eq(int, ru_mkdtemp(dir), 0)); }
static void rm(void) { ru_rmtree(dir); }
TestSuite(cli, .init = mk, .fini = rm);

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(not(eq(ptr, f, NULL)));
  fputs(text, f);
  fclose(f);
}

static int replay_cmd(const char *args, char **out) {
  char bin[PATH_MAX], cmd[PATH_MAX * 2];
  cr_assert(eq(int, ru_replay_bin(bin, sizeof bin), 0));
  snprintf(cmd, sizeof cmd, "'%s' %s", bin, args);
  return ru_run(cmd, out);
}

Test(cli, json_has_the_issue_keys) {
  char path[128], args[256], *out = NULL;
  snprintf(path, sizeof path, "%s/over_limit.csv", dir);
  write_file(path, over_limit);
  snprintf(args, sizeof args, "%s --reuse sync --key=none --limit=20M --json --repeat 1", path);
  cr_assert(eq(int, replay_cmd(args, &out), 0));
  const char *head = "{\"peak_allocated\":12583936,\"peak_reserved\":14680064,"
                     "\"utilization\":0.857213,\"hit_rate\":0.333333,\"ns_per_op\":";
  cr_assert(eq(int, strncmp(out, head, strlen(head)), 0), "%s", out);
  cr_assert(not(eq(ptr, strstr(out, "\"num_ooms\":1,"), NULL)), "%s", out);
  cr_assert(not(eq(ptr, strstr(out, "\"ooms\":[{\"line\":4,"), NULL)), "%s", out);
  free(out);
}

Test(cli, compare_and_find_limit) {
  char path[128], args[256], *out = NULL;
  snprintf(path, sizeof path, "%s/tiny.csv", dir);
  write_file(path, tiny);
  snprintf(args, sizeof args,
           "%s --key none --repeat 1 --compare '--reuse=sync' --compare '--reuse=immediate'", path);
  cr_assert(eq(int, replay_cmd(args, &out), 0));
  cr_assert(not(eq(ptr, strstr(out, "(base)"), NULL)), "%s", out);
  /* label, peak allocated, peak reserved, utilisation, hit rate, OOMs */
  double a, b, u, h;
  unsigned ooms;
  char *row = strstr(out, "\n--reuse=sync ");
  cr_assert(not(eq(ptr, row, NULL)), "%s", out);
  cr_assert(eq(int, sscanf(row, " --reuse=sync %lf %lf %lf %lf %u", &a, &b, &u, &h, &ooms), 5));
  cr_assert(eq(dbl, b, 26.0));
  cr_assert(eq(dbl, h, 0.25));
  row = strstr(out, "\n--reuse=immediate ");
  cr_assert(not(eq(ptr, row, NULL)), "%s", out);
  cr_assert(eq(int, sscanf(row, " --reuse=immediate %lf %lf %lf %lf %u", &a, &b, &u, &h, &ooms), 5));
  cr_assert(eq(dbl, b, 14.0));
  cr_assert(eq(dbl, u, 0.857));
  free(out);
  snprintf(args, sizeof args, "%s --key none --reuse=sync --find-limit --repeat 1", path);
  cr_assert(eq(int, replay_cmd(args, &out), 0));
  cr_assert(not(eq(ptr, strstr(out, "find-limit       14 MiB (14680064 bytes)"), NULL)), "%s", out);
  free(out);
}

Test(cli, bad_input_and_bad_options) {
  char path[128], args[256], *out = NULL;
  snprintf(path, sizeof path, "%s/bad.csv", dir);
  write_file(path, "1,0,allocate,0x10,8,(nil)\n1,1,free,0x20,0,(nil)\n");
  snprintf(args, sizeof args, "%s --on-error=stop 2>&1", path);
  cr_assert(eq(int, replay_cmd(args, &out), 2));
  char want[256];
  snprintf(want, sizeof want, "%s:2: free of unknown pointer 0x20\n", path);
  cr_assert(eq(str, out, want));
  free(out);
  snprintf(args, sizeof args, "%s --repeat 1 2>&1", path);
  cr_assert(eq(int, replay_cmd(args, &out), 0), "skip is the default");
  cr_assert(eq(int, strncmp(out, want, strlen(want)), 0), "%s", out);
  free(out);
  snprintf(args, sizeof args, "%s --limit 12Q 2>&1", path);
  cr_assert(eq(int, replay_cmd(args, &out), 2), "a usage error");
  cr_assert(eq(str, out, "cudapool-replay: --limit: '12Q' is not a size (e.g. 8G) or none\n"));
  free(out);
  snprintf(args, sizeof args, "%s --compare '--json' 2>&1", path);
  cr_assert(eq(int, replay_cmd(args, &out), 2), "a usage error");
  cr_assert(eq(str, out, "cudapool-replay: --compare: '--json' is not a pool option\n"));
  free(out);
}

/* The learned stream order's events (shim/state/order.h) decide the keys:
 * a non-blocking stream is live, so thread keys are off; while the order
 * says SOLE (1) every free comes back at once, to the other thread too, with
 * no barrier; MIXED (2) falls back on a barrier; a recovery (MIXED to SOLE,
 * a new window) reuses at once again. --key=order assumes SOLE from the
 * start when a trace has no order events. */
Test(replay, order_events_decide_the_keys) {
  static const char text[] = "1,0.00,stream_create,(nil),1,0x5000\n"
                             "1,0.01,order,(nil),1,(nil)\n"
                             "1,0.02,allocate,0xa000000,12582912,(nil)\n"
                             "1,0.03,free,0xa000000,0,(nil)\n"
                             "2,0.04,allocate,0xb000000,12582912,(nil)\n" /* at once: same window */
                             "1,0.05,order,(nil),2,0x5000\n"
                             "2,0.06,free,0xb000000,0,(nil)\n"
                             "1,0.07,allocate,0xc000000,12582912,(nil)\n" /* MIXED: a barrier */
                             "1,0.08,order,(nil),1,0x5000\n"
                             "1,0.09,free,0xc000000,0,(nil)\n"
                             "2,0.10,allocate,0xd000000,12582912,(nil)\n"; /* at once again */
  rp_trace_t t = load_text(text, sizeof text - 1);
  rp_opts_t o;
  rp_opts_default(&o);
  o.repeat = 1;
  rp_result_t r;
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  cr_assert(eq(u64, r.misses, 1));
  cr_assert(eq(u64, r.hits, 3));
  cr_assert(eq(u64, r.immediate_reuse, 2));
  cr_assert(eq(u64, r.barriers, 1));
  rp_result_free(&r);
  rp_trace_free(&t);

  static const char plain[] = "1,0.00,stream_create,(nil),1,0x5000\n"
                              "1,0.02,allocate,0xa000000,12582912,(nil)\n"
                              "1,0.03,free,0xa000000,0,(nil)\n"
                              "2,0.04,allocate,0xb000000,12582912,(nil)\n";
  t = load_text(plain, sizeof plain - 1);
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  cr_assert(eq(u64, r.immediate_reuse, 0), "no order events: keys off, a barrier");
  cr_assert(eq(u64, r.barriers, 1));
  rp_result_free(&r);
  o.assume_order = true;
  cr_assert(eq(int, rp_run(&t, &o, &r), 0));
  cr_assert(eq(u64, r.immediate_reuse, 1), "--key=order: SOLE from the start");
  cr_assert(eq(u64, r.barriers, 0));
  rp_result_free(&r);
  rp_trace_free(&t);
}
