/* capture.c: the captures in progress and the capture lock (capture.h).
 * Without memory for a record the capture goes unseen, as before the shim
 * knew of captures at all: nothing better can be done there. */
#include "state/capture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "state/layer.h"
#include "state/order.h"
#include "trace.h"

typedef struct cp_capture {
  uintptr_t stream;
  bool strict;
  cudaEvent_t pre_event; /* NULL when it could not be recorded */
  struct cp_capture *next;
} cp_capture_t;

static pthread_rwlock_t capture_lock = PTHREAD_RWLOCK_INITIALIZER;
static cp_capture_t *captures; /* guarded by capture_lock */
static atomic_int captures_active, captures_without_pre_event;
atomic_int cp_strict_captures_active;   /* capture.h */
static cudaEvent_t beginning_pre_event; /* between begin_lock and begin_done */

/* The special handles (0, legacy, per-thread) are blocking: no ordering work
 * is ever issued while they capture, so they need no event. */
static cudaEvent_t record_pre_event(uintptr_t stream) {
  const cp_api_t *api = cp_api();
  cudaEvent_t ev = NULL;
  if (!api || stream <= 2 || api->event_create(&ev) != 0) return NULL;
  if (api->event_record(ev, (cudaStream_t)stream) == 0) return ev;
  api->event_destroy(ev);
  return NULL;
}

static void drop_event(cudaEvent_t ev) {
  const cp_api_t *api = cp_api();
  if (ev && api) api->event_destroy(ev);
}

static void started(uintptr_t stream, bool strict, cudaEvent_t pre_event) {
  cp_capture_t *c = calloc(1, sizeof *c);
  if (!c) {
    drop_event(pre_event);
    return;
  }
  *c = (cp_capture_t){.stream = stream, .strict = strict, .pre_event = pre_event, .next = captures};
  captures = c;
  if (!pre_event) atomic_fetch_add(&captures_without_pre_event, 1);
  atomic_fetch_add(&captures_active, 1);
  if (strict) atomic_fetch_add(&cp_strict_captures_active, 1);
}

static void ended(uintptr_t stream) {
  for (cp_capture_t **link = &captures; *link; link = &(*link)->next) {
    cp_capture_t *c = *link;
    if (c->stream != stream) continue;
    *link = c->next;
    atomic_fetch_sub(&captures_active, 1);
    atomic_fetch_sub(&cp_order_captures, 1);
    if (c->strict) atomic_fetch_sub(&cp_strict_captures_active, 1);
    if (!c->pre_event) atomic_fetch_sub(&captures_without_pre_event, 1);
    drop_event(c->pre_event);
    free(c);
    return;
  }
}

void cp_capture_begin_lock(uintptr_t stream) {
  pthread_rwlock_wrlock(&capture_lock);
  /* Counted from before the begin, so the order hands nothing out from
   * here; the first capture pays what the order owes while it still may. */
  if (atomic_fetch_add(&cp_order_captures, 1) == 0 && atomic_load(&captures_active) == 0)
    cp_order_before_capture();
  beginning_pre_event = record_pre_event(stream);
}

void cp_capture_begin_done(bool began, uintptr_t stream, bool strict) {
  if (began && cp_trace_enabled()) cp_trace_extra(CP_TRACE_CAPTURE_BEGIN, 0, !strict, stream);
  if (began) {
    started(stream, strict, beginning_pre_event);
  } else {
    drop_event(beginning_pre_event);
    atomic_fetch_sub(&cp_order_captures, 1);
  }
  beginning_pre_event = NULL;
  pthread_rwlock_unlock(&capture_lock);
}

void cp_capture_end_lock(void) { pthread_rwlock_wrlock(&capture_lock); }

void cp_capture_end_done(bool over, uintptr_t stream) {
  if (over && cp_trace_enabled()) cp_trace_extra(CP_TRACE_CAPTURE_END, 0, 0, stream);
  if (over) ended(stream);
  pthread_rwlock_unlock(&capture_lock);
}

void cp_capture_forget_stream(uintptr_t stream) {
  if (!atomic_load(&captures_active)) return;
  pthread_rwlock_wrlock(&capture_lock);
  ended(stream);
  pthread_rwlock_unlock(&capture_lock);
}

bool cp_capture_none_lock(void) {
  if (atomic_load(&captures_active)) return false;
  pthread_rwlock_rdlock(&capture_lock);
  if (atomic_load(&captures_active) == 0) return true;
  pthread_rwlock_unlock(&capture_lock);
  return false;
}

bool cp_capture_relaxed_lock(void) {
  pthread_rwlock_rdlock(&capture_lock);
  if (atomic_load(&cp_strict_captures_active) == 0 && atomic_load(&captures_without_pre_event) == 0)
    return true;
  pthread_rwlock_unlock(&capture_lock);
  return false;
}

void cp_capture_read_lock(void) { pthread_rwlock_rdlock(&capture_lock); }

void cp_capture_write_lock(void) { pthread_rwlock_wrlock(&capture_lock); }

void cp_capture_unlock(void) { pthread_rwlock_unlock(&capture_lock); }

void *cp_capture_take_pre_event(uintptr_t stream) {
  for (cp_capture_t *c = captures; c; c = c->next) {
    if (c->stream != stream || !c->pre_event) continue;
    cudaEvent_t ev = c->pre_event;
    c->pre_event = NULL;
    atomic_fetch_add(&captures_without_pre_event, 1);
    return ev;
  }
  return NULL;
}

bool cp_capture_of(uintptr_t stream, void **pre_event) {
  for (cp_capture_t *c = captures; c; c = c->next) {
    if (c->stream != stream) continue;
    *pre_event = c->pre_event;
    return true;
  }
  return false;
}

int cp_capture_count(void) { return atomic_load(&captures_active); }

bool cp_capture_stream_capturing(uintptr_t stream) {
  if (!atomic_load(&captures_active)) return false;
  void *pre;
  pthread_rwlock_rdlock(&capture_lock);
  bool found = cp_capture_of(stream, &pre);
  pthread_rwlock_unlock(&capture_lock);
  return found;
}
