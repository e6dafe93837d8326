/* coop_mt.c: cooperation between processes on one GPU (issue 26, item 2;
 * shim/state/coop.c): a process out of device memory asks the other
 * cudapool processes of its group to give their idle caches back.
 * Threaded (each peer answers on its publisher thread): runs under TSan.
 *
 * Decisions pinned here, documented in docs/OPTIONS.md and docs/USAGE.md:
 *   - two processes on a 4 GiB device, the first holding 3 GiB freed: the
 *     second's 3 GiB succeeds natively; under the shim it fails with
 *     CUDAPOOL_COOP_WAIT=0, and succeeds with cooperation on, saying so in
 *     one exact line;
 *   - a stopped peer (SIGSTOP) does not answer: the allocation fails after
 *     the wait, and the out-of-memory line says 1 asked, 0 answered;
 *   - a truncated or forged segment under a live pid is not asked;
 *   - with CUDAPOOL_LIVE=0 no one is asked, and the line says why;
 *   - the request names the device: with two devices, a peer asked for
 *     device 1 gives back its cache there and keeps device 0's;
 *   - a flood of requests costs a working peer one cache flush per device
 *     per CUDAPOOL_COOP_INTERVAL: after a real request that got the peer's
 *     3 GiB, 300 more within the interval are each answered at once with
 *     0 bytes (rounds stay 1, 300 limited); with the interval 0 each gets
 *     its own round (301);
 *   - `cudapool stats --all --group G` shows, per device (by key, in key
 *     order), the group's shared budget and one row per process (pid
 *     order) with exact bytes and cooperation counters: the hog's device 0
 *     cache (3 GiB, releasable), and on device 1 what the taker asked and
 *     got and what the hog was asked and gave back.
 * Each test names its own group (CUDAPOOL_SHARED_NAME) and its own shared
 * device file (FAKECUDA_SHARED_MEM), so tests running at once do not meet.
 * Program: tests/programs/runtime/coop.c. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"
#include "live_layout.h"

static char group[64], shared[128], group_env[96], shared_env[160];

static void mk(void) {
  static int n;
  snprintf(group, sizeof group, "coop-it-%ld-%d", (long)getpid(), n++);
  snprintf(shared, sizeof shared, "/tmp/cp-coop-%s", group);
  unlink(shared);
  snprintf(group_env, sizeof group_env, "CUDAPOOL_SHARED_NAME=%s", group);
  snprintf(shared_env, sizeof shared_env, "FAKECUDA_SHARED_MEM=%s", shared);
}

static void rm(void) { unlink(shared); }

TestSuite(coop, .init = mk, .fini = rm);

#define ENV(...) IT_ARGS("FAKECUDA_MEMORY=4G", group_env, shared_env, __VA_ARGS__)

static const char *const avoided =
    "cudapool: out of memory on device 0 avoided: asked 3.00 GiB; asked 1 other cudapool processes to give "
    "back: 1 answered, 3.00 GiB came back\n";

Test(coop, a_peers_idle_cache_comes_back) {
  it_result n = {0}, s = {0};
  it_same(&n, &s, ENV("CUDAPOOL_COOP_WAIT=5000"), "coop", IT_ARGS("pair"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(long, it_val(&s, "hog", "status", -1), 0), "%s", s.out);
  cr_assert(eq(str, (char *)s.err, (char *)avoided));
  it_free(&n);
  it_free(&s);
}

Test(coop, off_the_cache_of_a_peer_stays) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=0"), "coop", IT_ARGS("pair"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 0), "%s\n%s", s.out, s.err);
  cr_assert(eq(int, it_count_lines(s.err, "cudapool: out of memory on device 0: asked 3.00 GiB"), 1), "%s", s.err);
  cr_assert(eq(int, it_count_lines(s.err, "give back"), 0), "%s", s.err);
  it_free(&s);
}

Test(coop, a_stopped_peer_bounds_the_wait) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=100"), "coop", IT_ARGS("pair", "stop"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 0), "%s\n%s", s.out, s.err);
  cr_assert(eq(long, it_val(&s, "hog", "status", -1), 0), "%s", s.out);
  cr_assert(eq(int,
               it_count_lines(s.err, "; asked 1 other cudapool processes to give back: 0 answered, 0 B came back"),
               1),
            "%s", s.err);
  it_free(&s);
}

/* A file at dir's name for a live pid that is no cudapool process. */
static void plant(const char *path, size_t size, bool forged) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  cr_assert(ge(int, fd, 0), "%s", path);
  cr_assert(eq(int, ftruncate(fd, (off_t)size), 0));
  if (forged) {
    cp_live_segment_t seg = {0};
    memcpy(seg.magic, CP_LIVE_MAGIC, sizeof CP_LIVE_MAGIC);
    seg.layout = CP_LIVE_LAYOUT;
    seg.stats_size = sizeof(cudapool_stats_t);
    seg.pid = (int64_t)getppid();
    seg.start_time = 1; /* not the pid's */
    snprintf(seg.group, sizeof seg.group, "%s", group);
    cr_assert(eq(long, (long)pwrite(fd, &seg, sizeof seg, 0), (long)sizeof seg));
  }
  close(fd);
}

Test(coop, truncated_and_forged_segments_are_not_asked) {
  char truncated[128], forged[128];
  snprintf(truncated, sizeof truncated, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.%ld", (unsigned long)geteuid(),
           (long)getpid());
  snprintf(forged, sizeof forged, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.%ld", (unsigned long)geteuid(),
           (long)getppid());
  plant(truncated, 100, false);
  plant(forged, sizeof(cp_live_segment_t), true);
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=5000"), "coop", IT_ARGS("pair"));
  unlink(truncated);
  unlink(forged);
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(str, (char *)s.err, (char *)avoided));
  it_free(&s);
}

Test(coop, without_live_stats_no_one_is_asked) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=200", "CUDAPOOL_LIVE=0"), "coop", IT_ARGS("pair"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 0), "%s\n%s", s.out, s.err);
  cr_assert(eq(int,
               it_count_lines(s.err, "; other cudapool processes not asked to give back: CUDAPOOL_COOP_WAIT needs "
                                     "CUDAPOOL_LIVE"),
               1),
            "%s", s.err);
  it_free(&s);
}

Test(coop, a_peer_gives_back_only_on_the_device_asked_for) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=5000", "FAKECUDA_DEVICES=2"), "coop", IT_ARGS("pair", "devices"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(long, it_val(&s, "hog", "status", -1), 0), "%s", s.out);
  /* 3 GiB cached on device 0 stays; device 1's went back. */
  cr_assert(eq(long, it_val(&s, "pool", "held0", -1), 3L << 30), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "pool", "held1", -1), 0), "%s", s.out);
  cr_assert(eq(str, (char *)s.err,
               "cudapool: out of memory on device 1 avoided: asked 3.00 GiB; asked 1 other cudapool processes to "
               "give back: 1 answered, 3.00 GiB came back\n"));
  it_free(&s);
}

#define FLOODS "300"

Test(coop, a_flood_costs_a_working_peer_one_round_per_interval) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=5000", "CUDAPOOL_COOP_INTERVAL=60000"), "coop",
            IT_ARGS("flood", FLOODS));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(str, (char *)it_line(&s, "flood"),
               "flood: answered=300 asked=301 rounds=1 limited=300 given=3221225472"),
            "%s", s.out);
  cr_assert(eq(long, it_val(&s, "work", "failed", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "hog", "status", -1), 0), "%s", s.out);
  it_free(&s);
}

/* Within the interval, a peer whose cache grew by at least what the asker
 * lacks runs one more round (the second take); not a third (the third
 * take fails, limited): the flood bound is two rounds per interval. The
 * old rule answered the second "nothing more" too. */
Test(coop, a_grown_cache_earns_one_more_round_within_the_interval) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=5000", "CUDAPOOL_COOP_INTERVAL=60000"), "coop",
            IT_ARGS("regrow"));
  cr_assert(eq(str, (char *)s.out,
               "take: i=1 ok=1\ntake: i=2 ok=1\ntake: i=3 ok=0\nregrow: asked=3 rounds=2 limited=1 "
               "given=6442450944\nhog: status=0\n"),
            "%s\n%s", s.out, s.err);
  it_free(&s);
}

Test(coop, without_an_interval_every_request_is_a_round) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=5000", "CUDAPOOL_COOP_INTERVAL=0"), "coop",
            IT_ARGS("flood", FLOODS));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(long, it_val(&s, "flood", "answered", -1), 300), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "flood", "rounds", -1), 301), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "flood", "limited", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "work", "failed", -1), 0), "%s", s.out);
  it_free(&s);
}

/* The budget files this test's group left in /dev/shm (8 KiB each). */
static void rm_budgets(void) {
  for (int d = 1; d <= 2; d++) {
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/cudapool-budget.%lu.uuid-637066616b65646576000000000000%02d.%s",
             (unsigned long)geteuid(), d, group);
    unlink(path);
  }
}

#define COLUMNS                                                                                                     \
  "      PID  DEV   ALLOCATED    RESERVED      CACHED  RELEASABLE   ASKS         GOT  ASKED ROUNDS LIMITED        " \
  "GAVE  COMMAND\n"

Test(coop, stats_all_shows_every_process_per_device_with_its_budget) {
  char reader[512], out[160], path[200];
  snprintf(reader, sizeof reader, "%s/cudapool-stats", it_build());
  snprintf(out, sizeof out, "/tmp/cp-coop-all-%s.txt", group);
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=5000", "FAKECUDA_DEVICES=2", "CUDAPOOL_SHARED_LIMIT=8G"), "coop",
            IT_ARGS("all", reader, out));
  rm_budgets();
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(long, it_val(&s, "reader", "status", -1), 0), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "hog", "status", -1), 0), "%s", s.out);
  long me = it_val(&s, "pids", "me", -1), hog = it_val(&s, "pids", "hog", -1);
  char mecmd[61];
  snprintf(mecmd, sizeof mecmd, "%s", it_line(&s, "mecmd") + strlen("mecmd: "));
  const char *hogcmd = it_line(&s, "hogcmd") + strlen("hogcmd: ");
  char me_row[256], hog_row[256], want[2048];
  snprintf(me_row, sizeof me_row,
           "  %7ld    1    3.00 GiB    3.00 GiB         0 B         0 B      1    3.00 GiB      0      0       0 "
           "        0 B  %s\n",
           me, mecmd);
  snprintf(hog_row, sizeof hog_row,
           "  %7ld    1         0 B         0 B         0 B         0 B      0         0 B      1      1       0 "
           "   3.00 GiB  %s\n",
           hog, hogcmd);
  snprintf(want, sizeof want,
           "cudapool: 2 processes under cudapool of group %s\n"
           "\n"
           "device uuid-637066616b6564657600000000000001: 1 process\n"
           "  shared budget of group %s: limit 8.00 GiB, claimed 3.00 GiB by 1 process\n" COLUMNS
           "  %7ld    0         0 B    3.00 GiB    3.00 GiB    3.00 GiB      0         0 B      0      0       0 "
           "        0 B  %s\n"
           "\n"
           "device uuid-637066616b6564657600000000000002: 2 processes\n"
           "  shared budget of group %s: limit 8.00 GiB, claimed 3.00 GiB by 2 processes\n" COLUMNS "%s%s",
           group, group, hog, hogcmd, group, me < hog ? me_row : hog_row, me < hog ? hog_row : me_row);
  snprintf(path, sizeof path, "cat '%s'", out);
  it_result f = {0};
  const char *got = it_shell(&f, path);
  unlink(out);
  cr_assert(eq(str, (char *)got, want));
  it_free(&f);
  /* The same counters in the Prometheus text, labelled by pid and device
   * number: the asker's on device 1, the hog's on 0 (its idle cache) and 1. */
  cr_assert(eq(long, it_val(&s, "prom", "status", -1), 0), "%s", s.out);
  snprintf(path, sizeof path, "cat '%s.prom'", out);
  const char *prom = it_shell(&f, path);
  snprintf(path, sizeof path, "%s.prom", out);
  unlink(path);
  static const struct {
    bool hog;
    int device;
    const char *metric, *value;
  } samples[] = {
      {false, 1, "coop_asks_total", "1"},           {false, 1, "coop_got_bytes_total", "3221225472"},
      {false, 1, "coop_asked_total", "0"},          {false, 1, "coop_rounds_total", "0"},
      {false, 1, "coop_given_bytes_total", "0"},    {false, 1, "releasable_bytes", "0"},
      {true, 1, "coop_asks_total", "0"},            {true, 1, "coop_asked_total", "1"},
      {true, 1, "coop_rounds_total", "1"},          {true, 1, "coop_limited_total", "0"},
      {true, 1, "coop_given_bytes_total", "3221225472"}, {true, 1, "releasable_bytes", "0"},
      {true, 0, "coop_asked_total", "0"},           {true, 0, "releasable_bytes", "3221225472"},
  };
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
    char line[256];
    snprintf(line, sizeof line, "\ncudapool_%s{pid=\"%ld\",device=\"%d\"} %s\n", samples[i].metric,
             samples[i].hog ? hog : me, samples[i].device, samples[i].value);
    cr_expect(ne(ptr, (void *)strstr(prom, line), NULL), "no %s in:\n%s", line + 1, prom);
  }
  cr_assert(ne(ptr, (void *)strstr(prom, "\n# TYPE cudapool_coop_rounds_total counter\n"), NULL), "%s", prom);
  it_free(&f);
  it_free(&s);
}

/* The scenario in 1 GiB blocks: the first process frees three, the
 * second asks for three; the second's second block is the one refused. */
Test(coop, blocks_of_one_gib_all_come_back) {
  it_result n = {0}, off = {0}, on = {0};
  it_run_ok(&n, IT_NATIVE, IT_ARGS("FAKECUDA_MEMORY=4G", shared_env), "coop", IT_ARGS("chunks"));
  cr_assert(eq(long, it_val(&n, "take", "got", -1), 3), "%s\n%s", n.out, n.err);
  cr_assert(eq(long, it_val(&n, "take", "ok", -1), 1));
  unlink(shared);
  it_run_ok(&off, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=0"), "coop", IT_ARGS("chunks"));
  cr_assert(eq(long, it_val(&off, "take", "got", -1), 1), "%s\n%s", off.out, off.err);
  cr_assert(eq(long, it_val(&off, "take", "ok", -1), 0));
  unlink(shared);
  it_run_ok(&on, IT_SHIM, ENV("CUDAPOOL_COOP_WAIT=5000"), "coop", IT_ARGS("chunks"));
  cr_assert(eq(long, it_val(&on, "take", "got", -1), 3), "%s\n%s", on.out, on.err);
  cr_assert(eq(long, it_val(&on, "take", "ok", -1), 1));
  cr_assert(eq(str, (char *)on.err,
               "cudapool: out of memory on device 0 avoided: asked 1.00 GiB; asked 1 other cudapool processes to "
               "give back: 1 answered, 3.00 GiB came back\n"));
  it_free(&n);
  it_free(&off);
  it_free(&on);
}
