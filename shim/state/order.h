/* order.h: stream order learned from the work the program submits (issue 25).
 *
 * Every entry point that can put work on a stream (launches, copies, memsets,
 * graph launches, host functions, semaphores, stream memory operations: the
 * runtime's in entry/submit.c, the driver's in entry/driver_work.c) calls
 * cp_order_submit() before the real call. From those calls each device keeps
 * a mode:
 *   EMPTY  no work submitted since the device's last order point;
 *   SOLE   all work since then went to one stream, its home H (the legacy
 *          stream or a stream the program created; never a per-thread one);
 *   MIXED  work went to another stream too (or to a per-thread or unknown
 *          stream).
 * While a device is EMPTY or SOLE, a freed block may be handed to anyone at
 * once: every piece of work that touched it is on H, before the free. The
 * pool then owes every other stream an ordering before its next work: the
 * first submission to a stream S != H records an event on H and makes S wait
 * on it (a non-blocking S; a blocking, per-thread or legacy S is ordered by
 * the legacy stream waiting on it once, when H is not the legacy stream), and
 * the device becomes MIXED. MIXED falls back on barriers (cuda_backend.c)
 * until every stream that received work besides H is idle again (queried
 * when the pool asks for a barrier), which makes the device SOLE(H) again.
 *
 * Order is not learned at all (the device stays MIXED, and the barriers of
 * docs/DESIGN.md apply as before) when CUDAPOOL_LEARN_ORDER=0, or once an entry
 * point that could submit work without being seen was looked up
 * (cp_order_give_up: a driver entry point newer than the header cudapool was
 * built with).
 *
 * Threads: the fast path (a submission to the home stream, or to a stream
 * already ordered in this window) reads atomics only; transitions take the
 * device's order lock (never while a pool lock is wanted after it). */
#ifndef CUDAPOOL_SHIM_ORDER_H
#define CUDAPOOL_SHIM_ORDER_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* How the entry point names its stream: PLAIN (0 is the legacy stream),
 * PTSZ (a _ptsz twin: 0 is the calling thread's per-thread stream), PTDS (a
 * _ptds twin, no stream argument: the per-thread stream). The synchronous
 * entry points of the plain API (cudaMemcpy, cuMemsetD8) pass PLAIN and a
 * NULL stream: the legacy stream. */
typedef enum { CP_SUBMIT_PLAIN, CP_SUBMIT_PTSZ, CP_SUBMIT_PTDS } cp_submit_api_t;

#include "rules.h"

enum { CP_ORDER_EMPTY = CP_RULE_ORDER_EMPTY, CP_ORDER_SOLE = CP_RULE_ORDER_SOLE, CP_ORDER_MIXED = CP_RULE_ORDER_MIXED };

/* One device's learned order (a field of cp_device_t). `state` packs the
 * mode (bits 62-63), `early` (bit 61: a block may have been handed out by
 * the order key while SOLE, so other streams are owed an ordering) and the
 * window (bits 0-60: bumped whenever the device becomes SOLE or EMPTY again,
 * so keys and per-stream marks of an earlier window never match). `home`
 * is the tag of H (see order.c) while SOLE or MIXED, 0 while EMPTY, and
 * CP_ORDER_HOME_CLOSED while a recovery runs. Everything else is guarded
 * by `lock`. */
typedef struct cp_order {
  _Atomic uint64_t state;
  _Atomic uintptr_t home;
  pthread_mutex_t lock;
  void *owed_event;      /* recorded on H when the device left SOLE with `early` */
  uint64_t owed_window;  /* the window owed_event belongs to; 0: none */
  uint64_t legacy_owed;  /* window in which the legacy stream last waited on it */
  bool legacy_dirty;     /* work went to the legacy stream (not H) this window */
  bool per_thread_dirty; /* work went to a per-thread stream this window */
  bool unknown_dirty;    /* work went to a stream the shim does not know */
  _Atomic uint64_t waits;      /* orderings issued for streams other than H */
  _Atomic uint64_t recoveries; /* MIXED back to SOLE or EMPTY */
} cp_order_t;

#define CP_ORDER_MODE(state) ((unsigned)((state) >> 62))
#define CP_ORDER_EARLY ((uint64_t)1 << 61)
#define CP_ORDER_WINDOW(state) ((state) & (((uint64_t)1 << 61) - 1))

void cp_order_init(cp_order_t *order);
/* Learning on or off, from the options (init.c calls it once they are read). */
void cp_order_start(void);
/* The device was reset: EMPTY again, in a new window. */
void cp_order_reset(cp_order_t *order);

/* Work is about to be submitted to `stream`: returns a token for
 * cp_order_submit_done, called once the real call returned. Never fails;
 * may issue an event record and a stream wait (the ordering owed) before the
 * program's work. */
int cp_order_submit(cudaStream_t stream, cp_submit_api_t api);
void cp_order_submit_done(int token);

struct cp_device;
/* The pool wants a barrier on dev: true when the order makes it needless
 * (the device is EMPTY or SOLE, or becomes so now: every stream that got
 * work this window but one is idle), every pending block then being
 * reusable by anyone; false: issue a real one. */
bool cp_order_virtual_barrier(struct cp_device *dev);
/* A capture is about to begin (capture write lock held): what is owed is
 * paid to every known stream now, and the order hands nothing out until
 * every capture ended (cp_order_captures, counted by capture.c from here). */
void cp_order_before_capture(void);
/* dev's stream s is being destroyed (order lock and device lock held, by
 * device.c): its queued work becomes the legacy stream's (device.c makes
 * that stream wait on it), or stays unordered until the next real barrier
 * while a capture runs. */
struct cp_stream_entry;
void cp_order_stream_destroying(struct cp_device *dev, struct cp_stream_entry *s, bool during_capture);

/* An entry point that may submit work the shim cannot see was looked up (or
 * called): stop learning order for the rest of the process, every device
 * MIXED for good. `what` names it in the report (kept, not copied: a
 * string literal or a name that lives as long as the process). */
void cp_order_give_up(const char *what);
/* Whether order is being learned (the option, and no give-up), and why not. */
extern atomic_bool cp_order_on;
bool cp_order_learning(void);
const char *cp_order_given_up_by(void);

/* The reuse key the order allows now: CP_ORDER_KEY(window) while the device
 * is EMPTY or SOLE and no capture is in progress (setting `early` when
 * SOLE: the block may be handed out before H's work on it is done), else 0.
 * Inline: every allocation and free asks. */
extern atomic_int cp_order_captures; /* mirrored by capture.c */
static inline uint64_t cp_order_key(cp_order_t *order) {
  bool learning = atomic_load_explicit(&cp_order_on, memory_order_relaxed);
  unsigned captures = (unsigned)atomic_load_explicit(&cp_order_captures, memory_order_relaxed);
  uint64_t s = atomic_load_explicit(&order->state, memory_order_acquire);
  for (;;) {
    unsigned mode = CP_ORDER_MODE(s);
    if (!cp_rule_order_reuses_at_once(learning, mode, captures)) return 0;
    if (mode == CP_ORDER_EMPTY || (s & CP_ORDER_EARLY)) return cp_rule_order_key(CP_ORDER_WINDOW(s));
    if (atomic_compare_exchange_weak_explicit(&order->state, &s, s | CP_ORDER_EARLY, memory_order_acq_rel,
                                              memory_order_acquire))
      return cp_rule_order_key(CP_ORDER_WINDOW(s));
  }
}

#endif
