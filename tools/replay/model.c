/* model.c: what the shim knew when it made each decision, rebuilt from a
 * trace's decision events (common/trace.h): the live streams the program
 * created and which are non-blocking, whether the per-thread default stream
 * was used, and the captures in progress. The decisions themselves are
 * core/rules.h's, the same functions the shim applies to its live state, so
 * replay decides as the live run did.
 *
 * Invariants: a handle is in streams at most once; nonblocking counts the
 * entries flagged so. Traces without these events (RMM's, the shared
 * PyTorch ones) leave the model empty: keys on, barriers at cost 1. */
#include "replay.h"

#include <stdlib.h>

#include "rules.h"
#include "util.h"

static size_t find_stream(const rp_model_t *m, uint64_t handle) {
  for (size_t i = 0; i < m->nstreams; i++)
    if (m->streams[i].handle == handle) return i;
  return m->nstreams;
}

void rp_model_stream_create(rp_model_t *m, uint64_t handle, bool nonblocking) {
  size_t i = find_stream(m, handle);
  if (i == m->nstreams) {
    rp_model_stream_t *s = cp_push(&m->streams, &m->nstreams, &m->capstreams, sizeof *s);
    if (!s) return;
    *s = (rp_model_stream_t){.handle = handle};
  } else if (m->streams[i].nonblocking) {
    m->nonblocking--;
  }
  m->streams[i].nonblocking = nonblocking;
  m->nonblocking += nonblocking;
}

void rp_model_stream_destroy(rp_model_t *m, uint64_t handle) {
  size_t i = find_stream(m, handle);
  if (i == m->nstreams) return;
  m->nonblocking -= m->streams[i].nonblocking;
  m->streams[i] = m->streams[--m->nstreams];
  rp_model_capture_end(m, handle); /* a capture dies with its stream */
}

void rp_model_capture_begin(rp_model_t *m, uint64_t stream, bool relaxed) {
  rp_model_capture_t *c = cp_push(&m->captures, &m->ncaptures, &m->capcaptures, sizeof *c);
  if (c) *c = (rp_model_capture_t){.stream = stream, .relaxed = relaxed};
}

void rp_model_capture_end(rp_model_t *m, uint64_t stream) {
  for (size_t i = 0; i < m->ncaptures; i++) {
    if (m->captures[i].stream != stream) continue;
    m->captures[i] = m->captures[--m->ncaptures];
    return;
  }
}

bool rp_model_keys_on(const rp_model_t *m) { return cp_rule_same_thread_keys((unsigned)m->nstreams, m->per_thread); }

void rp_model_order(rp_model_t *m, unsigned mode) {
  if (!m->order_on) m->order_window = 1;
  else if (m->order_mode == CP_RULE_ORDER_MIXED && mode != CP_RULE_ORDER_MIXED) m->order_window++;
  m->order_on = true;
  m->order_mode = mode;
}

static bool order_reuses(const rp_model_t *m) {
  return cp_rule_order_reuses_at_once(m->order_on, m->order_mode, (unsigned)m->ncaptures);
}

uint64_t rp_model_key(const rp_model_t *m, uint64_t thread_key, bool thread_keys) {
  if (order_reuses(m)) return cp_rule_order_key(m->order_window);
  return thread_keys && rp_model_keys_on(m) ? thread_key : 0;
}

unsigned rp_model_barrier_cost(const rp_model_t *m) {
  return order_reuses(m) ? 1 : cp_rule_barrier_cost(m->nonblocking);
}

bool rp_model_barrier_allowed(const rp_model_t *m) {
  unsigned covered = 0;
  for (size_t i = 0; i < m->ncaptures; i++) {
    size_t s = find_stream(m, m->captures[i].stream);
    covered += m->captures[i].relaxed && s < m->nstreams && m->streams[s].nonblocking;
  }
  /* A trace does not record joins (a cudaStreamWaitEvent the shim cannot
   * see either): the live run, seeing none, decided as here. */
  return cp_rule_ordering_allowed((unsigned)m->ncaptures, covered, false);
}

bool rp_model_legacy_sync_covers_device(const rp_model_t *m) {
  return cp_rule_legacy_sync_covers_device(m->nonblocking, 0);
}

void rp_model_free(rp_model_t *m) {
  free(m->streams);
  free(m->captures);
  *m = (rp_model_t){0};
}
