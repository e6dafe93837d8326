/* rules.h: the rules that decide how a freed block may be reused: who may
 * take it back at once (the reuse key), when the pool may issue ordering
 * work (barriers, fences) while captures run, what a barrier costs, and what
 * a legacy-stream synchronisation covers. One home for them: the shim applies
 * them to the live state it keeps (shim/state/device.h, cuda_backend.c,
 * shim/serve/serve.c) and `cudapool replay` to the state it rebuilds from a
 * trace (tools/replay/model.c), so a rule changed here changes both; each
 * caller only counts its own inputs.
 *
 * Pure functions of counts: no CUDA, no state, no lock. The reasons are
 * docs/DESIGN.md's "Stream kinds" table and ../shared/GPU-FACTS.md. */
#ifndef CUDAPOOL_CORE_RULES_H
#define CUDAPOOL_CORE_RULES_H

#include <stdbool.h>
#include <stdint.h>

/* Same-thread reuse keys (a block freed by a thread handed back to it at
 * once) are safe only while all of that thread's work is ordered by its own
 * program order: no stream the program created is alive on the device
 * (`live_streams`, of any kind) and the per-thread default stream was never
 * used (it is not ordered with the legacy stream of another thread; once
 * seen, keys stay off for good). */
static inline bool cp_rule_same_thread_keys(unsigned live_streams, bool per_thread_stream_used) {
  return live_streams == 0 && !per_thread_stream_used;
}

/* What a barrier costs when it must reach `nonblocking` non-blocking streams
 * besides the legacy one, in units of the cheapest (backend.h's
 * barrier_cost): 1 + floor(log2(1 + nonblocking)). Each stream adds a few
 * ~0.3 us calls to a barrier, while a split a barrier would have avoided
 * costs memory for the rest of the run: cuDNN creates 16 non-blocking streams
 * per thread, and at 1 + n (33) the pool split instead of waiting and
 * reserved 26% more than PyTorch on convnext_tiny; at 6 it reserves what
 * immediate reuse would, with about 20 barriers a training step
 * (docs/BENCHMARKS.md). */
static inline unsigned cp_rule_barrier_cost(unsigned nonblocking) {
  return 1u + (unsigned)(31 - __builtin_clz(nonblocking + 1u));
}

/* Ordering work (a barrier: records and waits on every stream; a fence) may
 * be issued while `captures` stream captures run only if every capture is
 * relaxed and on a non-blocking stream the pool knows with its pre-capture
 * event (`covered` counts those), and no other stream has joined a capture
 * (`joined`): then the legacy stream covers no capturing stream, and a
 * record or wait cannot join the barrier to a capture or invalidate it. */
static inline bool cp_rule_ordering_allowed(unsigned captures, unsigned covered, bool joined) {
  return captures == 0 || (covered == captures && !joined);
}

/* A synchronisation of the legacy stream finishes every earlier free's work
 * on the device only when no non-blocking stream is alive and no destroyed
 * stream's work is still to be ordered (`orphans`): non-blocking streams are
 * not ordered with the legacy stream. Otherwise it covers the legacy stream's
 * own frees only. */
static inline bool cp_rule_legacy_sync_covers_device(unsigned live_nonblocking, unsigned orphans) {
  return live_nonblocking == 0 && orphans == 0;
}

/* The learned stream order (shim/state/order.h): while every piece of work
 * since its window began went to one stream (mode EMPTY or SOLE), a freed
 * block may be reused by anyone at once, the other streams being made to
 * wait for that stream at their first work; not while a capture runs (the
 * waits owed could touch a capturing stream). Its reuse key, one for every
 * thread, names the window: above every thread key (a counter), below the
 * per-thread stream tags (bit 63) and the stream-ordered key. While it
 * reuses at once a barrier costs nothing (no record, no wait: the shim's
 * barrier is then virtual). */
enum { CP_RULE_ORDER_EMPTY = 0, CP_RULE_ORDER_SOLE = 1, CP_RULE_ORDER_MIXED = 2 };
static inline bool cp_rule_order_reuses_at_once(bool learning, unsigned mode, unsigned captures) {
  return learning && mode != CP_RULE_ORDER_MIXED && captures == 0;
}
static inline uint64_t cp_rule_order_key(uint64_t window) { return ((uint64_t)1 << 62) | window; }

#endif
