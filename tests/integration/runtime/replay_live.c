/* replay_live.c: a trace the shim recorded, replayed by cudapool-replay,
 * gives the live run's figures number for number (issue 10): the decision
 * events (streams, captures) drive the replay's keys, barrier cost and
 * barrier refusals as they drove the shim. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "it_check.h"

static double num(const it_json *obj, const char *key) {
  const it_json *v = it_json_get(obj, key);
  cr_assert(not(eq(ptr, (void *)v, NULL)), "no %s", key);
  return it_json_num(v);
}

/* stacks: "CUDAPOOL_STACKS=1" (the trace gets its Stack column) or "=0". */
static void replays_to_the_live_figures(const char *learn, const char *how, const char *stacks) {
  char dir[] = "/tmp/cp-replay-live-XXXXXX";
  cr_assert(not(eq(ptr, mkdtemp(dir), NULL)));
  char trace[300], stats[300], cmd[900];
  snprintf(trace, sizeof trace, "CUDAPOOL_TRACE=%s/trace.csv", dir);
  snprintf(stats, sizeof stats, "CUDAPOOL_STATS=%s/stats.json", dir);
  it_result live;
  it_run_ok(&live, IT_SHIM, (const char *const[]){trace, stats, "CUDAPOOL_STATS_FORMAT=json", learn, stacks, NULL},
            "replayable", how ? IT_ARGS(how) : NULL);
  cr_assert(eq(str, (char *)it_line(&live, "replayable"), "replayable: errors=0"));

  snprintf(cmd, sizeof cmd, "head -n 1 %s/trace.csv", dir);
  it_result r0 = {0};
  bool stack_column = strcmp(stacks, "CUDAPOOL_STACKS=1") == 0;
  cr_assert(eq(str, (char *)it_shell(&r0, cmd),
               stack_column ? "Thread,Time,Action,Pointer,Size,Stream,Stack\n"
                            : "Thread,Time,Action,Pointer,Size,Stream\n"));
  it_free(&r0);
  snprintf(cmd, sizeof cmd, "cat %s/stats.json", dir);
  it_result r1 = {0}, r2 = {0};
  it_json *report = it_json_parse(it_shell(&r1, cmd));
  cr_assert(not(eq(ptr, report, NULL)));
  const it_json *dev = it_json_at(it_json_get(report, "devices"), 0);
  cr_assert(not(eq(ptr, (void *)dev, NULL)));
  snprintf(cmd, sizeof cmd, "%s/cudapool-replay %s/trace.csv --json --repeat 1", it_build(), dir);
  it_json *replay = it_json_parse(it_shell(&r2, cmd));
  cr_assert(not(eq(ptr, replay, NULL)), "%s", r2.out);

  const it_json *reserved = it_json_get(dev, "reserved_bytes");
  cr_assert(eq(dbl, num(replay, "peak_reserved"), num(reserved, "peak")));
  cr_assert(eq(dbl, num(replay, "barriers"), num(dev, "num_barriers")));
  cr_assert(eq(dbl, num(replay, "immediate_reuse"), num(dev, "num_immediate_reuse")));
  cr_assert(eq(dbl, num(replay, "hits"), num(dev, "hits")));
  cr_assert(eq(dbl, num(replay, "misses"), num(dev, "misses")));
  cr_assert(gt(dbl, num(dev, "num_immediate_reuse"), 0), "phase 1 reuses by key");
  cr_assert(gt(dbl, num(dev, "num_barriers"), 0), "phase 2 needs barriers");
  if (!how) cr_assert(eq(dbl, num(dev, "num_order_recoveries"), 0), "the order is off");
  if (how) cr_assert(gt(dbl, num(dev, "num_order_recoveries"), 0), "phase 2 mixes streams and recovers");

  it_json_free(report);
  it_json_free(replay);
  it_free(&r1);
  it_free(&r2);
  it_free(&live);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert(eq(int, system(cmd), 0));
}

/* The threads of phase 2 at once: the learned order's changes of mode race
 * their allocations, which a trace cannot order, so it is off here. */
Test(replay_live, shim_trace_replays_to_the_live_figures) {
  replays_to_the_live_figures("CUDAPOOL_LEARN_ORDER=0", NULL, "CUDAPOOL_STACKS=0");
}

/* One thread at a time: the order's changes (its "order" events) replay
 * to the live keys and barriers exactly. */
Test(replay_live, with_the_learned_order_one_thread_at_a_time) {
  replays_to_the_live_figures("CUDAPOOL_LEARN_ORDER=1", "in-turn", "CUDAPOOL_STACKS=0");
}

/* CUDAPOOL_STACKS adds the Stack column; the replayer reads past it. */
Test(replay_live, a_trace_with_the_stack_column_replays_to_the_live_figures) {
  replays_to_the_live_figures("CUDAPOOL_LEARN_ORDER=0", NULL, "CUDAPOOL_STACKS=1");
}
