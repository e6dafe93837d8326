/* run.c: replay a loaded trace through the real pool on the simulated device.
 *
 * Owns the reuse models, the measurement and --find-limit:
 *   barrier    the simulated device issues barriers (fences off): a freed
 *              block becomes reusable once the pool asks for a barrier
 *   sync       barriers and fences refused: a freed block waits for the next
 *              sync_stream/sync_device of the trace (the worst case of fences)
 *   immediate  cp_config.reuse = CP_REUSE_IMMEDIATE
 * A trace's sync_stream/sync_device become cp_sync_mark + the shim's own rule
 * (cp_synced_stream) / cp_sync_device in every mode.
 *
 * Timing: the loop over a batch of events does nothing but the core calls
 * and a slot store, so (the batches' loop time - time spent reading stats
 * at OOMs) / ops is the cost of the core calls; reading and parsing the
 * next batch (rp_cursor_next: a streamed trace is read again for every
 * run) is off the clock. Each timed run gets a fresh pool and device; the best of
 * `repeat` runs is kept, because on a shared machine noise only adds. The
 * timeline run is separate and untimed: it reads the stats after every event.
 *
 * An allocation the replay cannot serve (OOM) leaves its slot empty, and the
 * trace's later free of it is skipped (counted in skipped_frees). */
#include "replay.h"
#include "rules.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testing/check.h"
#include "testing/sim_backend.h"
#include "util.h"

#define MiB ((uint64_t)1 << 20)

void rp_opts_default(rp_opts_t *o) {
  memset(o, 0, sizeof *o);
  cp_config_default(&o->cfg);
  o->reuse = RP_REUSE_BARRIER;
  o->device_memory = 141ull << 30; /* the H200's capacity */
  o->thread_key = true;            /* the shim passes the thread when only ordered streams are live */
  o->repeat = 5;
  o->page = 2ull << 20; /* CUDA's granularity on the H200 */
}

#define now_ns cp_monotonic_ns

typedef struct run {
  cp_sim_t sim;
  cp_pool_t *pool;
  uintptr_t *slots;
  rp_oom_t *ooms;
  size_t nooms, capooms;
  uint64_t skipped_frees, free_errors, excluded_ns;
} run_t;

static int run_open(run_t *R, const rp_trace_t *t, const rp_opts_t *o) {
  memset(R, 0, sizeof *R);
  cp_sim_init(&R->sim, o->device_memory);
  R->sim.barrier_enabled = o->reuse == RP_REUSE_BARRIER;
  R->sim.addresses = t->segment_addr;
  R->sim.address_sizes = t->segment_size;
  R->sim.naddresses = t->nsegments;
  R->sim.fence_enabled = false;
  cp_config_t cfg = o->cfg;
  if (cfg.expandable) {
    /* Pages are unmapped only after a completed fence: fences complete when
     * waited for or at the trace's device-wide synchronisations. */
    R->sim.vmm_page = o->page;
    R->sim.fence_enabled = true;
    if (!cfg.expandable_size) cfg.expandable_size = o->device_memory;
  }
  cfg.reuse = o->reuse == RP_REUSE_IMMEDIATE ? CP_REUSE_IMMEDIATE : CP_REUSE_DEFERRED;
  cp_backend_t be = cp_sim_backend(&R->sim);
  int rc = cp_pool_create(&R->pool, 0, &cfg, &be);
  if (rc == 0) {
    R->slots = calloc(t->nslots ? t->nslots : 1, sizeof *R->slots);
    if (R->slots == NULL) {
      cp_pool_destroy(R->pool);
      rc = ENOMEM;
    }
  }
  if (rc != 0) cp_sim_fini(&R->sim);
  return rc;
}

static void run_close(run_t *R) {
  cp_pool_destroy(R->pool);
  cp_sim_fini(&R->sim);
  free(R->slots);
  free(R->ooms);
}

/* Off the clock: what the pool looked like when it could not serve. */
static void note_oom(run_t *R, const rp_event_t *e, uint32_t line, double time) {
  uint64_t t0 = now_ns();
  cudapool_stats_t s = {.size = sizeof s, .version = CUDAPOOL_STATS_VERSION};
  cp_get_stats(R->pool, &s);
  rp_oom_t *m = cp_push(&R->ooms, &R->nooms, &R->capooms, sizeof *m);
  if (m) {
    *m = (rp_oom_t){
        .line = line,
        .time = time,
        .size = e->size,
        .reserved = (uint64_t)s.reserved_bytes.current,
        .allocated = (uint64_t)s.allocated_bytes.current,
        .cached = (uint64_t)s.cached_bytes.current,
        .largest_free = s.largest_free_block,
    };
    m->fragmentation = m->cached ? 1.0 - (double)m->largest_free / (double)m->cached : 0.0;
  }
  R->excluded_ns += now_ns() - t0;
}

static void timeline_row(FILE *f, cp_pool_t *pool, double time, const char *marker) {
  cudapool_stats_t s = {.size = sizeof s, .version = CUDAPOOL_STATS_VERSION};
  cp_get_stats(pool, &s);
  fprintf(f, "%.6f,%lld,%lld,%llu,%s\n", time, (long long)s.allocated_bytes.current,
          (long long)s.reserved_bytes.current, (unsigned long long)s.largest_free_block, marker);
}

/* A decision event: the model changes, and with it what the shim would pass
 * and what a barrier would cost or whether one may be issued. */
static void decide(run_t *R, rp_model_t *m, const rp_event_t *e, const rp_opts_t *o) {
  switch (e->op) {
    case RP_OP_STREAM_CREATE: rp_model_stream_create(m, e->stream, e->size != 0); break;
    case RP_OP_STREAM_DESTROY: rp_model_stream_destroy(m, e->stream); break;
    case RP_OP_CAPTURE_BEGIN: rp_model_capture_begin(m, e->stream, e->size != 0); break;
    case RP_OP_CAPTURE_END: rp_model_capture_end(m, e->stream); break;
    case RP_OP_ORDER: rp_model_order(m, (unsigned)e->size); break;
    default: m->per_thread = true; break;
  }
  R->sim.barrier_cost = rp_model_barrier_cost(m);
  R->sim.barrier_enabled = o->reuse == RP_REUSE_BARRIER && rp_model_barrier_allowed(m);
}

/* The replay loop. Returns the ns the batches took, less the OOM
 * bookkeeping; *rc: 0, or the errno of a trace that could not be read again. */
static uint64_t replay(run_t *R, const rp_trace_t *t, const rp_opts_t *o, FILE *timeline, int *rc) {
  cp_pool_t *pool = R->pool;
  uintptr_t *slots = R->slots;
  rp_model_t model = {0};
  if (o->assume_order) rp_model_order(&model, CP_RULE_ORDER_SOLE);
  rp_cursor_t c;
  if ((*rc = rp_cursor_open(&c, t)) != 0) return 0;
  /* Long traces: every step-th row plus every marked one, at most ~200k rows. */
  const size_t step = t->n / 200000 + 1;
  uint64_t busy = 0;
  size_t i = 0;
  cp_mark_t mark;
  for (size_t n; (n = rp_cursor_next(&c)) > 0;) {
    const rp_event_t *ev = c.ev;
    const uint32_t *line = c.line;
    const double *time = c.time;
    uint64_t t0 = now_ns();
    for (size_t k = 0; k < n; k++, i++) {
      const rp_event_t *e = &ev[k];
      const char *marker = "";
      switch (e->op) {
        case RP_OP_ALLOC: {
          uintptr_t addr = 0;
          if (cp_alloc(pool, e->size, e->stream, rp_model_key(&model, e->key, o->thread_key), &addr) != 0) {
            addr = 0;
            note_oom(R, e, line[k], time[k]);
            marker = "oom";
          }
          slots[e->slot] = addr;
          break;
        }
        case RP_OP_FREE:
          if (slots[e->slot] == 0)
            R->skipped_frees++;
          else if (cp_free(pool, slots[e->slot], rp_model_key(&model, e->key, o->thread_key), 0) != 0)
            R->free_errors++; /* a pool bug: the slot came from cp_alloc */
          break;
        case RP_OP_SYNC_STREAM:
          /* The legacy stream is 0 or cudaStreamLegacy (0x1). */
          if (e->stream <= 1 && rp_model_legacy_sync_covers_device(&model))
            cp_sim_complete_fences(&R->sim, R->sim.fences_recorded);
          cp_sync_mark(pool, &mark);
          cp_synced_stream(pool, &mark, e->stream, e->stream <= 1, !rp_model_legacy_sync_covers_device(&model));
          break;
        case RP_OP_SYNC_DEVICE:
          cp_sim_complete_fences(&R->sim, R->sim.fences_recorded);
          cp_sync_mark(pool, &mark);
          cp_sync_device(pool, &mark);
          break;
        case RP_OP_EMPTY_CACHE:
          cp_empty_cache(pool);
          marker = "empty_cache";
          break;
        default: decide(R, &model, e, o); break;
      }
      if (timeline && (i % step == 0 || marker[0] || i + 1 == t->n))
        timeline_row(timeline, pool, time[k], marker);
    }
    busy += now_ns() - t0;
  }
  rp_cursor_close(&c);
  rp_model_free(&model);
  return busy - R->excluded_ns;
}

static void collect(run_t *R, const rp_trace_t *t, rp_result_t *r) {
  cudapool_stats_t s = {.size = sizeof s, .version = CUDAPOOL_STATS_VERSION};
  cp_get_stats(R->pool, &s);
  r->peak_allocated = (uint64_t)s.allocated_bytes.peak;
  r->peak_requested = (uint64_t)s.requested_bytes.peak;
  r->peak_reserved = (uint64_t)s.reserved_bytes.peak;
  r->utilization = r->peak_reserved ? (double)r->peak_allocated / (double)r->peak_reserved : 0;
  r->hits = s.hits;
  r->misses = s.misses;
  r->hit_rate = s.hits + s.misses ? (double)s.hits / (double)(s.hits + s.misses) : 0;
  r->num_ooms = s.num_ooms;
  r->alloc_retries = s.num_alloc_retries;
  r->immediate_reuse = s.num_immediate_reuse;
  r->sync_points = s.num_sync_points;
  r->ops = t->n;
  r->skipped_frees = R->skipped_frees;
  r->free_errors = R->free_errors;
  const cp_sim_t *d = &R->sim;
  r->device_allocs = d->allocs + d->failed_allocs;
  r->device_frees = d->frees;
  r->barriers = d->barriers + d->refused_barriers;
  r->fences = d->fences_recorded;
  r->fence_waits = d->fence_waits;
  r->expandable = d->vmm_page != 0;
  r->pages_mapped = d->pages_mapped;
  r->pages_unmapped = d->pages_unmapped;
  r->map_calls = d->maps;
  r->unmap_calls = d->unmaps;
  r->backend_calls = r->device_allocs + r->device_frees + r->barriers + r->fences + d->fence_queries +
                     d->fence_waits + d->maps + d->unmaps + d->reserves + d->unreserves;
  r->check_rc = cp_pool_check(R->pool, r->check_why, sizeof r->check_why);
  r->ooms = R->ooms;
  R->ooms = NULL;
}

int rp_run(const rp_trace_t *t, const rp_opts_t *o, rp_result_t *r) {
  memset(r, 0, sizeof *r);
  unsigned repeat = o->repeat ? o->repeat : 1;
  uint64_t best = UINT64_MAX;
  for (unsigned k = 0; k < repeat; k++) {
    run_t R;
    int rc = run_open(&R, t, o);
    if (rc != 0) return rc;
    uint64_t ns = replay(&R, t, o, NULL, &rc);
    if (rc != 0) {
      run_close(&R);
      return rc;
    }
    if (ns < best) best = ns;
    if (k == 0) /* the replay is deterministic: every run gives the same figures */
      collect(&R, t, r);
    run_close(&R);
  }
  r->ns_per_op = t->n ? (double)best / (double)t->n : 0;
  if (o->timeline) {
    run_t R;
    if (run_open(&R, t, o) == 0) {
      fprintf(o->timeline, "time,allocated,reserved,largest_free,marker\n");
      int rc;
      replay(&R, t, o, o->timeline, &rc);
      run_close(&R);
    }
  }
  return 0;
}

void rp_result_free(rp_result_t *r) {
  free(r->ooms);
  r->ooms = NULL;
}

/* OOMs of one untimed run at `limit`; UINT64_MAX when the pool will not run. */
static uint64_t ooms_at(const rp_trace_t *t, const rp_opts_t *o, uint64_t limit) {
  rp_opts_t lo = *o;
  lo.cfg.limit = limit;
  lo.repeat = 1;
  lo.timeline = NULL;
  run_t R;
  int rc;
  if (run_open(&R, t, &lo) != 0) return UINT64_MAX;
  replay(&R, t, &lo, NULL, &rc);
  if (rc != 0) {
    run_close(&R);
    return UINT64_MAX;
  }
  cudapool_stats_t s = {.size = sizeof s, .version = CUDAPOOL_STATS_VERSION};
  cp_get_stats(R.pool, &s);
  run_close(&R);
  return s.num_ooms;
}

uint64_t rp_find_limit(const rp_trace_t *t, const rp_opts_t *o, unsigned *runs) {
  /* In 2 MiB units: lo fails (or is below what the trace needs live at
   * once), hi succeeds. OOM-freedom is not strictly monotonic in the limit
   * (a limit changes which segments exist), so this finds a passing limit
   * whose next-lower 2 MiB step fails, the answer a user can act on. */
  unsigned n = 0;
  uint64_t hi = o->device_memory / (2 * MiB);
  n++;
  if (ooms_at(t, o, hi * 2 * MiB) != 0) {
    if (runs) *runs = n;
    return 0;
  }
  uint64_t lo = t->peak_live / (2 * MiB); /* limit lo*2MiB < peak_live + 1: must fail */
  if (lo * 2 * MiB >= t->peak_live && lo > 0) lo--;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    n++;
    if (ooms_at(t, o, mid * 2 * MiB) == 0)
      hi = mid;
    else
      lo = mid;
  }
  if (runs) *runs = n;
  return hi * 2 * MiB;
}
