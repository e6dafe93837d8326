/* clock.c: when fake device work completes, and a race detector for the
 * memory it touches.
 *
 * Normally all work completes the moment it is submitted, so nothing here
 * does anything. While events are held (fakecuda_hold_events(1)) nothing
 * completes by itself, and happens-before is tracked with vector clocks:
 * - every operation on a stream is a tick of that stream; it is ordered after
 *   what the host already knows to be complete (fc.host) and after the
 *   events the stream waited on;
 * - the legacy stream first waits for every blocking stream of its device
 *   (per-thread default streams and streams created without
 *   cudaStreamNonBlocking), and those then wait for it (GPU-FACTS.md),
 *   including blocking streams that appear later (a stream created, or a
 *   thread's per-thread stream first used, after the legacy work);
 * - a host synchronisation (stream, event, device, cudaFree, a synchronous
 *   cudaMemcpy) joins the clock of what it waited for into fc.host: that work
 *   is complete from then on;
 * - memset/memcpy ranges are recorded as accesses; an access that overlaps
 *   an incomplete access of another stream, one of them a write, without
 *   being ordered after it is a race: counted (fakecuda_races()) and printed.
 * Invariant: a held event is complete iff its tick is in fc.host; events
 * recorded in an earlier hold epoch, or while not held, are complete. */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <utlist.h>

static void join_blocking(fc_vc *dst, int dev) {
  fc_stream *b;
  DL_FOREACH(fc.all, b)
  if (b->device == dev && fc_stream_blocking(b)) fc_vc_join(dst, &b->vc);
}

void fc_clock_op(fc_stream *s, const fc_vc *extra) {
  if (!fc.hold) return;
  fc_vc_join(&s->vc, &fc.host);
  fc_vc_join(&s->vc, extra);
  if (s->kind == FC_STREAM_LEGACY) join_blocking(&s->vc, s->device);
  /* A blocking stream's work waits for the legacy stream's earlier work,
   * also when the stream was made (or first used by its thread) after it. */
  else if (fc_stream_blocking(s))
    fc_vc_join(&s->vc, &fc.legacy[s->device].vc);
  fc_vc_set(&s->vc, s->idx, fc_vc_get(&s->vc, s->idx) + 1);
  if (s->kind == FC_STREAM_LEGACY) {
    fc_stream *b;
    DL_FOREACH(fc.all, b)
    if (b->device == s->device && fc_stream_blocking(b)) fc_vc_join(&b->vc, &s->vc);
  }
}

static void report(const fc_access *old, unsigned sidx, uintptr_t lo, size_t n, int write) {
  if (++fc.races > 20) return;
  fprintf(stderr,
          "fakecuda: race: %s of [%#lx, +%zu) on stream %u is not ordered after an "
          "incomplete %s of [%#lx, %#lx) on stream %u\n",
          write ? "write" : "read", (unsigned long)lo, n, sidx, old->write ? "write" : "read",
          (unsigned long)old->lo, (unsigned long)old->hi, old->sidx);
}

void fc_clock_access(fc_stream *s, const void *p, size_t n, int write) {
  if (!fc.hold || n == 0) return;
  uintptr_t lo = (uintptr_t)p, hi = lo + n;
  size_t j = 0;
  for (size_t i = 0; i < fc.nacc; i++) {
    fc_access a = fc.acc[i];
    if (a.tick <= fc_vc_get(&fc.host, a.sidx)) continue; /* complete: forget it */
    if (a.lo < hi && lo < a.hi && (a.write || write) && a.sidx != s->idx &&
        a.tick > fc_vc_get(&s->vc, a.sidx))
      report(&a, s->idx, lo, n, write);
    fc.acc[j++] = a;
  }
  fc.nacc = j;
  if (fc.nacc == fc.capacc) {
    size_t cap = fc.capacc ? 2 * fc.capacc : 64;
    fc_access *na = realloc(fc.acc, cap * sizeof *na);
    if (!na) abort();
    fc.acc = na;
    fc.capacc = cap;
  }
  fc.acc[fc.nacc++] = (fc_access){lo, hi, s->idx, fc_vc_get(&s->vc, s->idx), write};
}

void fc_clock_sync_stream(fc_stream *s) {
  if (!fc.hold) return;
  if (s->kind == FC_STREAM_LEGACY) join_blocking(&fc.host, s->device);
  fc_vc_join(&fc.host, &s->vc);
}

void fc_clock_sync_device(int dev) {
  if (!fc.hold) return;
  fc_stream *s;
  DL_FOREACH(fc.all, s)
  if (s->device == dev) fc_vc_join(&fc.host, &s->vc);
}

int fc_clock_event_done(const fc_event *e) {
  if (!e->recorded || !fc.hold || e->epoch != fc.epoch) return 1;
  return e->tick <= fc_vc_get(&fc.host, e->sidx);
}

void fc_clock_sync_event(const fc_event *e) {
  if (!fc_clock_event_done(e)) fc_vc_join(&fc.host, &e->vc);
}

int fc_clock_stream_idle(const fc_stream *s) {
  if (!fc.hold) return 1;
  if (fc_vc_get(&s->vc, s->idx) > fc_vc_get(&fc.host, s->idx)) return 0;
  if (s->kind != FC_STREAM_LEGACY) return 1;
  fc_stream *b;
  DL_FOREACH(fc.all, b)
  if (b->device == s->device && fc_stream_blocking(b) &&
      fc_vc_get(&b->vc, b->idx) > fc_vc_get(&fc.host, b->idx))
    return 0;
  return 1;
}

void fc_clock_record(fc_event *e, fc_stream *s) {
  e->recorded = 1;
  e->cap = NULL;
  e->ms = fc_now_ms();
  e->epoch = 0;
  if (!fc.hold) return;
  e->epoch = fc.epoch;
  e->sidx = s->idx;
  e->tick = fc_vc_get(&s->vc, s->idx);
  fc_vc_copy(&e->vc, &s->vc);
}

/* Everything submitted so far counts as complete from now on. */
void fc_clock_reset(void) {
  fc_stream *s;
  DL_FOREACH(fc.all, s) fc_vc_free(&s->vc);
  fc_vc_free(&fc.host);
  fc.nacc = 0;
  fc.epoch++;
}
