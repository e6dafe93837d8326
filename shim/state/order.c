/* order.c: stream order learned from the work the program submits (order.h
 * says the modes and what they allow).
 *
 * Tags. A stream is named by a tag: the legacy stream TAG_LEGACY, a stream
 * the program created its handle, a per-thread default stream TAG_PER_THREAD
 * (never a home: another thread's cannot be recorded on). The home's tag sits
 * in order->home, so the common submission (to H) costs two compares.
 *
 * What is owed. While SOLE(H) with `early`, blocks were handed out while
 * H's work on them may still run. Leaving SOLE for a stream S records an
 * event on H (owed_event, covering all of H's work so far, so every block
 * handed out until then); S, and every other stream at its first work of
 * the window, then waits on it before its work: a non-blocking (or unknown)
 * stream itself; blocking, per-thread and legacy streams through the legacy
 * stream, once (its later work, which they all wait for, comes after the
 * wait), and not at all when H is the legacy stream (they already wait for
 * its earlier work: ../shared/GPU-FACTS.md). No hand-out by the order
 * happens while MIXED, so one event per window covers everything owed.
 *
 * Recovery. MIXED goes back to SOLE or EMPTY when, besides at most one busy
 * stream (the new home), every stream that received work this window is
 * idle: asked when the pool wants a barrier (cp_order_virtual_barrier). Its
 * answer must not be overtaken by work being submitted meanwhile, so every
 * submission is counted in flight (a striped counter, incremented before the
 * decision, decremented once the real call returned) and the recovery first
 * closes the fast path (home = CLOSED), then requires nothing in flight
 * (Dekker: each side writes, then reads the other's word, sequentially
 * consistent), then queries. Submissions that meanwhile find the path closed
 * wait on the lock and see the new mode.
 *
 * Captures. Captured work runs when its graph is launched, on the launch
 * stream: a submission to a capturing stream is no work. While any capture
 * runs the order hands nothing out (cp_order_key says 0, no virtual
 * barrier): the barriers of cuda_backend.c, which know captures, apply.
 * Before a capture begins, whatever is owed is paid to every known stream
 * at once (cp_order_before_capture), so no record on H or wait on the legacy
 * stream is ever needed during one; streams created during it wait on the
 * owed event at their first work, which touches no capturing stream.
 *
 * Locks: the device's order lock, then its device lock (the stream table);
 * the capture lock, when taken, before both. */
#include "state/order.h"

#include <stdlib.h>

#include "backend/api.h"
#include "state/capture.h"
#include "state/device.h"
#include "state/shim.h"
#include "trace.h"

enum { TAG_NONE = 0, TAG_LEGACY = 1, TAG_PER_THREAD = 2 };
#define CP_ORDER_HOME_CLOSED ((uintptr_t)3)

atomic_bool cp_order_on;
atomic_int cp_order_captures;
static const char *_Atomic given_up_by;
/* A test switch: the orderings owed are not issued (tests/gpu and the
 * simulated-runtime tests show that the races they prevent then happen). */
static bool skip_owed_waits;

#define STRIPES 16
static struct {
  _Atomic long n;
  char pad[64 - sizeof(long)];
} in_flight[STRIPES];

/* This thread's last submission that needed no lock while MIXED. */
static __thread struct {
  const cp_order_t *order;
  uintptr_t tag;
  uint64_t window;
  unsigned generation; /* of the stream table: a destroyed stream's handle may come back */
} known_dirty;

void cp_order_init(cp_order_t *order) {
  pthread_mutex_init(&order->lock, NULL);
  atomic_store(&order->state, 1); /* EMPTY, window 1 */
  atomic_store(&order->home, TAG_NONE);
}

/* From the options' start (init.c), before the program's first CUDA call:
 * EMPTY from the process's start, so a program that created streams but
 * submitted nothing yet reuses at once too. */
void cp_order_start(void) {
  const char *skip = cp_secure_exec() ? NULL : getenv("CUDAPOOL_TEST_SKIP_ORDER_WAITS");
  skip_owed_waits = skip && skip[0] == '1';
  atomic_store(&cp_order_on, cp_opts.learn_order && !cp_opts.disable && !atomic_load(&given_up_by));
}

bool cp_order_learning(void) { return atomic_load_explicit(&cp_order_on, memory_order_relaxed); }

const char *cp_order_given_up_by(void) { return atomic_load(&given_up_by); }

static uint64_t next_window_state(uint64_t s, unsigned mode) {
  return ((uint64_t)mode << 62) | (CP_ORDER_WINDOW(s) + 1);
}

/* Every change of mode is traced: `cudapool replay` follows it (its model
 * decides keys and barrier costs by core/rules.h from it, as here). */
static void traced(unsigned mode, uintptr_t tag) {
  if (cp_trace_enabled()) cp_trace_extra(CP_TRACE_ORDER, 0, mode, tag);
}

static cudaStream_t stream_of(uintptr_t tag) {
  return tag == TAG_LEGACY ? cudaStreamLegacy : (cudaStream_t)tag;
}

/* The host waits for the home stream's work so far (an event recorded on
 * it): the ordering of last resort, where no stream wait can be made. In the
 * device's context; false when even that failed. */
static bool host_waits_for_home(cp_device_t *dev, uintptr_t home) {
  const cp_api_t *api = cp_api();
  if (!api || home == TAG_NONE || home == CP_ORDER_HOME_CLOSED) return false;
  cudaEvent_t tmp = NULL;
  bool done = false;
  int token = cp_device_enter(dev);
  if (api->event_create(&tmp) == 0) {
    done = api->event_record(tmp, stream_of(home)) == 0 && api->event_sync(tmp) == 0;
    api->event_destroy(tmp);
  }
  cp_device_leave(token);
  return done;
}

/* MIXED, keeping `early`: cp_order_key sets it without the lock, so the
 * change is a compare-and-swap (a store could drop an `early` set meanwhile,
 * and with it the waits owed). False when it was MIXED already. */
static bool set_mixed(cp_order_t *o) {
  uint64_t s = atomic_load(&o->state);
  do {
    if (CP_ORDER_MODE(s) == CP_ORDER_MIXED) return false;
  } while (!atomic_compare_exchange_weak(&o->state, &s, ((uint64_t)CP_ORDER_MIXED << 62) | (s & ~((uint64_t)3 << 62))));
  return true;
}

static void go_mixed(cp_order_t *o, uintptr_t tag) {
  if (set_mixed(o)) traced(CP_ORDER_MIXED, tag);
}

void cp_order_give_up(const char *what) {
  const char *none = NULL;
  atomic_compare_exchange_strong(&given_up_by, &none, what);
  if (!atomic_exchange(&cp_order_on, false)) return;
  /* Keys already handed out by the order stay valid only while the
   * devices say SOLE: make them MIXED. Submissions are no longer watched, so
   * what is owed cannot wait for each stream's first work: the host waits
   * for the home's work now (during a capture everything owed was paid when
   * it began). */
  for (int i = 0; i < CP_MAX_DEVICES; i++) {
    cp_device_t *dev = cp_device(i);
    cp_order_t *o = &dev->order;
    pthread_mutex_lock(&o->lock);
    set_mixed(o);
    o->unknown_dirty = true; /* never recovers */
    if ((atomic_load(&o->state) & CP_ORDER_EARLY) && !atomic_load(&cp_order_captures))
      host_waits_for_home(dev, atomic_load(&o->home));
    pthread_mutex_unlock(&o->lock);
  }
  traced(CP_ORDER_MIXED, 0);
}

void cp_order_reset(cp_order_t *o) {
  pthread_mutex_lock(&o->lock);
  uint64_t s = atomic_load(&o->state);
  atomic_store(&o->state, next_window_state(s, CP_ORDER_EMPTY));
  atomic_store(&o->home, TAG_NONE);
  o->owed_event = NULL; /* gone with the context */
  o->owed_window = o->legacy_owed = 0;
  o->legacy_dirty = o->per_thread_dirty = false;
  o->unknown_dirty = atomic_load(&given_up_by) != NULL;
  pthread_mutex_unlock(&o->lock);
}

static int stripe(void) { return (int)(cp_thread_key() & (STRIPES - 1)); }

/* The device a submission to tag belongs to; NULL (and *known false) when
 * no device knows it. With one device a created stream is taken for its
 * without a lookup (every submission asks): the slow path checks the table. */
static cp_device_t *device_of(uintptr_t tag, bool *known) {
  *known = true;
  if (atomic_load_explicit(&cp_visible_devices, memory_order_acquire) == 1) return &cp_devices[0];
  if (tag == TAG_LEGACY || tag == TAG_PER_THREAD) {
    const cp_api_t *api = cp_api();
    int id = 0;
    cp_device_t *dev = api && api->current_device(&id) == 0 ? cp_device(id) : NULL;
    /* Work on a device without a pool may still read a pooled device's
     * memory (a copy, peer access): every pooled device must assume it. */
    if (dev && !cp_device_pool_if_any(dev) && atomic_load_explicit(&cp_pool_mask, memory_order_acquire)) {
      *known = false;
      return NULL;
    }
    return dev;
  }
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));)
    if (cp_device_stream_known(dev, (cudaStream_t)tag)) return dev;
  *known = false;
  return NULL;
}

/* With the order lock: the event owed to other streams, recorded on H now
 * if the window has none yet (NULL when it cannot be). */
static void *owed_event(cp_device_t *dev, const cp_api_t *api) {
  cp_order_t *o = &dev->order;
  uint64_t window = CP_ORDER_WINDOW(atomic_load(&o->state));
  if (o->owed_window == window) return o->owed_event;
  if (!o->owed_event && api->event_create((cudaEvent_t *)&o->owed_event) != 0) o->owed_event = NULL;
  if (!o->owed_event || api->event_record(o->owed_event, stream_of(atomic_load(&o->home))) != 0) return NULL;
  o->owed_window = window;
  return o->owed_event;
}

/* With the order lock: stream (tag, entry s) is about to get its first work
 * of the window while something is owed: it waits for H's work first. */
static void pay_owed(cp_device_t *dev, uintptr_t tag, cp_stream_entry_t *s, bool nonblocking) {
  cp_order_t *o = &dev->order;
  uint64_t s_state = atomic_load(&o->state);
  if (!(s_state & CP_ORDER_EARLY) || skip_owed_waits) return;
  uint64_t window = CP_ORDER_WINDOW(s_state);
  uintptr_t home = atomic_load(&o->home);
  bool via_legacy = !nonblocking;
  if (via_legacy && (home == TAG_LEGACY || o->legacy_owed == window)) return;
  if (s && s->owed_window == window) return;
  const cp_api_t *api = cp_api();
  if (!api) return;
  int token = cp_device_enter(dev);
  void *ev = owed_event(dev, api);
  cudaStream_t target = via_legacy ? cudaStreamLegacy : (cudaStream_t)tag;
  /* Without the event the wait cannot be made: the host waits for H, or,
   * failing that too, the device; if nothing ordered it, nothing is paid and
   * the device never recovers. */
  bool paid = ev && api->stream_wait(target, ev) == 0;
  cp_device_leave(token);
  if (!paid) paid = host_waits_for_home(dev, home);
  if (!paid) {
    o->unknown_dirty = true;
    return;
  }
  atomic_fetch_add_explicit(&o->waits, 1, memory_order_relaxed);
  if (via_legacy)
    o->legacy_owed = window;
  else if (s)
    s->owed_window = window;
}

/* The slow path, with the order lock held: the submission to tag changes
 * the mode, marks the stream as having work this window, and pays what is
 * owed. */
static void submit_locked(cp_device_t *dev, uintptr_t tag, bool known) {
  cp_order_t *o = &dev->order;
  uint64_t s = atomic_load(&o->state);
  uintptr_t home = atomic_load(&o->home);
  if (known && tag != TAG_LEGACY && tag != TAG_PER_THREAD) {
    /* device_of took it for this device's without asking (one device): the
     * table says whether the program made it here. */
    pthread_mutex_lock(&dev->lock);
    cp_stream_entry_t *e;
    HASH_FIND_PTR(dev->streams, &tag, e);
    known = e != NULL;
    pthread_mutex_unlock(&dev->lock);
  }
  if (home == tag && known) return;
  unsigned mode = CP_ORDER_MODE(s);
  bool may_be_home = known && tag != TAG_PER_THREAD;
  if (!known && (tag == TAG_LEGACY || tag == TAG_PER_THREAD)) {
    /* Another device's legacy or per-thread stream: no wait on this device
     * can order it, so the host waits for H's work when something is owed,
     * and this device never recovers. */
    go_mixed(o, tag);
    o->unknown_dirty = true;
    if ((atomic_load(&o->state) & CP_ORDER_EARLY) && !skip_owed_waits) host_waits_for_home(dev, home);
    return;
  }
  if (mode == CP_ORDER_EMPTY && may_be_home) {
    atomic_store(&o->state, ((uint64_t)CP_ORDER_SOLE << 62) | CP_ORDER_WINDOW(s));
    atomic_store(&o->home, tag);
    traced(CP_ORDER_SOLE, tag);
    return;
  }
  go_mixed(o, tag);
  if (mode == CP_ORDER_EMPTY) atomic_store(&o->home, TAG_NONE);
  pthread_mutex_lock(&dev->lock);
  cp_stream_entry_t *entry = NULL;
  bool nonblocking = true;
  if (tag == TAG_LEGACY) {
    o->legacy_dirty = true;
    nonblocking = false;
  } else if (tag == TAG_PER_THREAD) {
    o->per_thread_dirty = true;
    nonblocking = false;
  } else {
    HASH_FIND_PTR(dev->streams, &tag, entry);
    if (entry) {
      entry->dirty = true;
      nonblocking = entry->nonblocking;
    } else {
      o->unknown_dirty = true;
    }
  }
  if (mode != CP_ORDER_EMPTY) pay_owed(dev, tag, entry, nonblocking);
  pthread_mutex_unlock(&dev->lock);
}

static uintptr_t tag_of(cudaStream_t stream, cp_submit_api_t api) {
  uintptr_t s = (uintptr_t)stream;
  if (api == CP_SUBMIT_PTDS) return TAG_PER_THREAD;
  if (s == 0) return api == CP_SUBMIT_PTSZ ? TAG_PER_THREAD : TAG_LEGACY;
  if (s == (uintptr_t)cudaStreamLegacy) return TAG_LEGACY;
  if (s == (uintptr_t)cudaStreamPerThread) return TAG_PER_THREAD;
  return s;
}

/* Captured work is no work. Asked only while a capture runs. */
static bool capturing(uintptr_t tag, cudaStream_t stream) {
  if (!atomic_load_explicit(&cp_order_captures, memory_order_acquire)) return false;
  if (tag == TAG_LEGACY || tag == TAG_PER_THREAD) return false;
  if (cp_capture_stream_capturing((uintptr_t)stream)) return true;
  const cp_api_t *api = cp_api();
  return api && api->stream_capturing(stream) == 1;
}

int cp_order_submit(cudaStream_t stream, cp_submit_api_t api) {
  cp_options_start(); /* and with it cp_order_start */
  if (!atomic_load_explicit(&cp_order_on, memory_order_relaxed)) {
    if (api != CP_SUBMIT_PLAIN || stream == cudaStreamPerThread) {
      uintptr_t t = tag_of(stream, api);
      if (t == TAG_PER_THREAD) cp_note_per_thread_stream();
    }
    return -1;
  }
  uintptr_t tag = tag_of(stream, api);
  if (tag == TAG_PER_THREAD) cp_note_per_thread_stream();
  int i = stripe();
  atomic_fetch_add(&in_flight[i].n, 1);
  bool known;
  cp_device_t *dev = device_of(tag, &known);
  if (!dev) {
    /* A stream no device knows: every pooled device must assume it. */
    if (capturing(tag, stream)) return i;
    atomic_fetch_sub(&in_flight[i].n, 1);
    int next = 0;
    for (cp_device_t *d; (d = cp_next_device_with_pool(&next));) {
      pthread_mutex_lock(&d->order.lock);
      submit_locked(d, tag, false);
      pthread_mutex_unlock(&d->order.lock);
    }
    atomic_fetch_add(&in_flight[i].n, 1);
    return i;
  }
  cp_order_t *o = &dev->order;
  uintptr_t home = atomic_load(&o->home);
  if (home == tag) return i;
  uint64_t s = atomic_load(&o->state);
  if (home != CP_ORDER_HOME_CLOSED && CP_ORDER_MODE(s) == CP_ORDER_MIXED && known_dirty.order == o &&
      known_dirty.tag == tag && known_dirty.window == CP_ORDER_WINDOW(s) &&
      known_dirty.generation == atomic_load_explicit(&cp_stream_generation, memory_order_acquire))
    return i;
  if (capturing(tag, stream)) return i;
  /* Not counted while waiting for the lock: a recovery holding it must not
   * take this submission for one in flight; counted again before the lock
   * is released, so one that follows does. */
  atomic_fetch_sub(&in_flight[i].n, 1);
  unsigned generation = atomic_load_explicit(&cp_stream_generation, memory_order_acquire);
  pthread_mutex_lock(&o->lock);
  submit_locked(dev, tag, known);
  atomic_fetch_add(&in_flight[i].n, 1);
  s = atomic_load(&o->state);
  known_dirty.order = o;
  known_dirty.tag = tag;
  known_dirty.window = CP_ORDER_WINDOW(s);
  known_dirty.generation = generation;
  pthread_mutex_unlock(&o->lock);
  return i;
}

void cp_order_submit_done(int token) {
  if (token >= 0) atomic_fetch_sub(&in_flight[token].n, 1);
}

static bool nothing_in_flight(void) {
  for (int i = 0; i < STRIPES; i++)
    if (atomic_load(&in_flight[i].n) != 0) return false;
  return true;
}

/* With the order lock, the fast path closed and nothing in flight: whether
 * at most one stream that received work this window is still busy (*busy:
 * its tag, TAG_NONE when none); false when one cannot be asked. */
static bool at_most_one_busy(cp_device_t *dev, const cp_api_t *api, uintptr_t old_home, uintptr_t *busy) {
  cp_order_t *o = &dev->order;
  *busy = TAG_NONE;
  if (o->unknown_dirty || atomic_load(&dev->n_orphans)) return false;
  /* Per-thread streams are asked through the legacy stream, whose query
   * answers for all of them: busy, that work may be on any thread's, and no
   * stream orders another thread's per-thread stream after it (whatever the
   * home). */
  if (o->per_thread_dirty && !api->stream_idle(cudaStreamLegacy)) return false;
  int n_busy = 0;
  if (old_home != TAG_NONE && !api->stream_idle(stream_of(old_home))) {
    *busy = old_home;
    n_busy++;
  }
  /* The legacy stream's query covers blocking and per-thread streams too. */
  if (o->legacy_dirty && old_home != TAG_LEGACY && !api->stream_idle(cudaStreamLegacy)) {
    *busy = TAG_LEGACY;
    n_busy++;
  }
  cp_stream_entry_t *s, *tmp;
  HASH_ITER(hh, dev->streams, s, tmp) {
    if (!s->dirty || (uintptr_t)s->stream == old_home || n_busy > 1) continue;
    if (!api->stream_idle(s->stream)) {
      *busy = (uintptr_t)s->stream;
      n_busy++;
    }
  }
  return n_busy <= 1;
}

/* The pool wants a barrier: true when the order makes one unnecessary (the
 * device is EMPTY or SOLE, or becomes so now), every pending block then
 * being reusable by anyone. */
bool cp_order_virtual_barrier(cp_device_t *dev) {
  if (!atomic_load_explicit(&cp_order_on, memory_order_relaxed) ||
      atomic_load_explicit(&cp_order_captures, memory_order_acquire))
    return false;
  cp_order_t *o = &dev->order;
  if (!cp_sole_device_with_pool()) return false; /* see cp_device_reuse_key */
  if (cp_order_key(o)) return true; /* sets `early` when SOLE */
  const cp_api_t *api = cp_api();
  if (!api) return false;
  pthread_mutex_lock(&o->lock);
  bool ok = false;
  uint64_t s = atomic_load(&o->state);
  if (CP_ORDER_MODE(s) != CP_ORDER_MIXED) {
    ok = true;
  } else if (!o->unknown_dirty) {
    uintptr_t old_home = atomic_exchange(&o->home, CP_ORDER_HOME_CLOSED);
    uintptr_t busy = TAG_NONE;
    int token = cp_device_enter(dev);
    pthread_mutex_lock(&dev->lock);
    ok = nothing_in_flight() && at_most_one_busy(dev, api, old_home, &busy);
    if (ok) {
      cp_stream_entry_t *e, *tmp;
      HASH_ITER(hh, dev->streams, e, tmp) e->dirty = false;
      o->legacy_dirty = o->per_thread_dirty = false;
      unsigned mode = busy == TAG_NONE ? CP_ORDER_EMPTY : CP_ORDER_SOLE;
      /* `early` at once: the pool hands out what is pending now. */
      atomic_store(&o->state, next_window_state(s, mode) | (mode == CP_ORDER_SOLE ? CP_ORDER_EARLY : 0));
      atomic_fetch_add_explicit(&o->recoveries, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&dev->lock);
    cp_device_leave(token);
    atomic_store(&o->home, ok ? busy : old_home);
    if (ok) traced(CP_ORDER_MODE(atomic_load(&o->state)), busy);
  }
  pthread_mutex_unlock(&o->lock);
  return ok;
}

/* A capture is about to begin (capture write lock held, no capture of this
 * process may be running: the first one): pay what is owed to every known
 * stream now, and leave SOLE, so nothing needs H or the legacy stream while
 * captures run. */
void cp_order_before_capture(void) {
  const cp_api_t *api = cp_api();
  int next = 0;
  for (cp_device_t *dev; api && (dev = cp_next_device_with_pool(&next));) {
    cp_order_t *o = &dev->order;
    pthread_mutex_lock(&o->lock);
    uint64_t s = atomic_load(&o->state);
    if (CP_ORDER_MODE(s) != CP_ORDER_EMPTY) {
      go_mixed(o, 0);
      pthread_mutex_lock(&dev->lock);
      pay_owed(dev, TAG_LEGACY, NULL, false);
      cp_stream_entry_t *e, *tmp;
      HASH_ITER(hh, dev->streams, e, tmp) {
        if (e->nonblocking && (uintptr_t)e->stream != atomic_load(&o->home))
          pay_owed(dev, (uintptr_t)e->stream, e, true);
      }
      pthread_mutex_unlock(&dev->lock);
    }
    pthread_mutex_unlock(&o->lock);
  }
}

void cp_order_stream_destroying(cp_device_t *dev, cp_stream_entry_t *s, bool during_capture) {
  cp_order_t *o = &dev->order;
  uintptr_t tag = (uintptr_t)s->stream;
  bool home = atomic_load(&o->home) == tag;
  if (!s->dirty && !home) return;
  /* The handle may come back for a new stream, ordered after nothing. */
  if (home) atomic_store(&o->home, CP_ORDER_MODE(atomic_load(&o->state)) == CP_ORDER_EMPTY ? TAG_NONE : TAG_LEGACY);
  /* Its work ends up a legacy-stream wait either way (now, or through its
   * orphan event at the next barrier or fence, which drops the orphan), so
   * a recovery must ask the legacy stream. */
  if (!home) o->legacy_dirty = true;
  if (during_capture) go_mixed(o, tag);
}
