/* arena.c: the arenas of a device's pool, and what they share.
 *
 * What it owns. A pool (the main pool, the one the program's calls name)
 * may get up to cfg.arenas - 1 more pools of the same device, its arenas,
 * each with its own lock, segments, bins and thread caches. A thread
 * allocates from its home arena (the main pool until it moves); it moves
 * when its allocations keep finding that arena's lock taken (glibc's malloc
 * does the same with its arenas): its score goes up by one at a contended
 * allocation, down by one at an uncontended one, and at arena_move_after it
 * takes the first other arena whose lock is free, or makes a new one. A
 * program whose threads take turns (PyTorch's forward and backward threads)
 * never contends enough to make one, and keeps one pool: an arena's free
 * blocks cannot serve another arena's threads, so arenas cost memory.
 *
 * What the arenas share (cp_device_pool_t, owned by the main pool, and words
 * each arena publishes for the others):
 *   - the points in time: each arena numbers its own frees (free_seq,
 *     published in its seq_pub), and a mark (a synchronisation, a barrier)
 *     is a point in each arena's order (cp_mark_t), so one mark says which
 *     frees of every arena it covers (one counter for all arenas made
 *     every free of every thread write one cache line);
 *   - barriers: a barrier any arena issued covers every free of every arena
 *     up to its mark (it orders all earlier work on every stream): each
 *     arena's share is published in its covered_pub, and applied at its
 *     next decision (cp_arena_catch_up);
 *   - the limit (its budget and checks live in limits.c): bytes are
 *     claimed from one reserved count before the backend is called, so arenas growing at once never pass it together;
 *     the bytes allocated are counted for all of them (each arena's
 *     exact allocated_now, and a shared sum each arena adds to once per
 *     CP_ALLOCATED_SLACK of change: a check far from the limit reads the
 *     sum, one near it every arena's figure); the out-of-memory path
 *     empties the other arenas before failing;
 *   - the exact reserved peak (the other peaks, with arenas, are the sum of
 *     the arenas' own: an upper bound).
 *
 * Invariants: devpool->held = the arenas' reserved bytes; devpool->reserved
 * = held + claims in flight; arenas are made under arenas_lock and never go before the main
 * pool is destroyed; arenas[i] and its arena_index (i) are written before
 * n_arenas counts it; an arena's covered_pub <= its seq_pub = its free_seq;
 * its allocated_now = its allocated bytes, less than CP_ALLOCATED_SLACK
 * from what it added to devpool->allocated_approx, which is the sum of what
 * they added (core/testing/check.c checks them all).
 * Locking: arenas_lock comes before any pool lock; a thread holds at most
 * one arena's lock, except the main pool's cp_tcaches_lock order (tcache.c). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "pool_internal.h"
#include "util.h"

#define TLS_HOMES 8 /* devices one thread remembers its arena for */

typedef struct tls_home {
  cp_pool_t *main;
  uint64_t uid; /* the main pool's: tells a destroyed pool at the same address */
  cp_pool_t *arena;
  int score;
} tls_home_t;

static __thread __attribute__((tls_model("initial-exec"))) tls_home_t my_homes[TLS_HOMES];

int cp_device_pool_init(cp_pool_t *pool) {
  cp_device_pool_t *sh = cp_zalloc_aligned(sizeof *sh, _Alignof(cp_device_pool_t));
  if (!sh) return ENOMEM;
  pthread_mutex_init(&sh->arenas_lock, NULL);
  pthread_mutex_init(&sh->barrier_lock, NULL);
  pthread_cond_init(&sh->barrier_done, NULL);
  sh->arenas[0] = pool;
  atomic_store(&sh->n_arenas, 1);
  pool->devpool = sh;
  return 0;
}

void cp_device_pool_fini(cp_pool_t *pool) {
  pthread_mutex_destroy(&pool->devpool->arenas_lock);
  pthread_mutex_destroy(&pool->devpool->barrier_lock);
  pthread_cond_destroy(&pool->devpool->barrier_done);
  free(pool->devpool);
}

/* ---- barriers ------------------------------------------------------------------- */

/* Acquire: a free whose number a mark holds happened before the barrier
 * that mark is taken for, and so did the work submitted before that free. */
void cp_arena_marks(cp_pool_t *pool, cp_mark_t *out) {
  out->n = 0;
  cp_for_each_arena(a, pool) out->seq[out->n++] = atomic_load_explicit(&a->seq_pub, memory_order_acquire);
}

void cp_arena_publish_barrier(cp_pool_t *pool, const cp_mark_t *mark) {
  for (unsigned i = 0; i < mark->n; i++) {
    _Atomic uint64_t *covered = &cp_arena_at(pool, i)->covered_pub;
    uint64_t seen = atomic_load_explicit(covered, memory_order_relaxed);
    while (seen < mark->seq[i] &&
           !atomic_compare_exchange_weak_explicit(covered, &seen, mark->seq[i], memory_order_release,
                                                  memory_order_relaxed)) {
    }
  }
}

void cp_arena_catch_up(cp_pool_t *pool) {
  if (cp_arena_count(pool) == 1) return;
  uint64_t mark = atomic_load_explicit(&pool->covered_pub, memory_order_acquire);
  if (mark <= pool->barrier_covered) return;
  /* What cp_try_barrier does after its own barrier. */
  pool->barrier_covered = mark;
  cp_complete_upto(pool, mark);
  if (!pool->page) cp_retire_fences_upto(pool, mark);
  if (pool->fenced_upto < mark) pool->fenced_upto = mark;
  cp_stats_refresh_derived(pool);
}

/* ---- a thread's arena ----------------------------------------------------------- */

static tls_home_t *home_entry(cp_pool_t *main, bool create) {
  tls_home_t *empty = NULL;
  for (int i = 0; i < TLS_HOMES; i++) {
    tls_home_t *h = &my_homes[i];
    if (h->main == main && h->uid == main->uid) return h;
    if (h->main == main || !h->main) {
      *h = (tls_home_t){0}; /* empty, or left by a destroyed pool at this address */
      if (!empty) empty = h;
    }
  }
  if (!create || !empty) return NULL;
  *empty = (tls_home_t){.main = main, .uid = main->uid, .arena = main};
  return empty;
}

cp_pool_t *cp_arena_home_of_thread(cp_pool_t *main) {
  tls_home_t *h = home_entry(main, false);
  return h ? h->arena : main;
}

/* A new arena, its lock held; NULL when none may be made. */
static cp_pool_t *arena_make_locked(cp_pool_t *main) {
  cp_device_pool_t *sh = main->devpool;
  cp_pool_t *a = NULL;
  pthread_mutex_lock(&sh->arenas_lock);
  unsigned n = cp_arena_count(main);
  if (n < main->cfg.arenas && !sh->retired && atomic_load(&main->tcache_on)) {
    a = cp_arena_new(main);
    if (a) {
      pthread_mutex_lock(&a->lock);
      atomic_store_explicit(&main->has_arenas, true, memory_order_relaxed); /* before n_arenas releases */
      a->arena_index = n;
      sh->arenas[n] = a;
      atomic_store_explicit(&sh->n_arenas, n + 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&sh->arenas_lock);
  return a;
}

/* The thread leaves `from`: the first other arena whose lock is free, else a
 * new one, its lock held; NULL: it stays. */
static cp_pool_t *arena_move(cp_pool_t *main, cp_pool_t *from) {
  cp_for_each_arena(a, main) if (a != from && pthread_mutex_trylock(&a->lock) == 0) return a;
  return arena_make_locked(main);
}

cp_pool_t *cp_arena_lock(cp_pool_t *main, cp_pool_t *pool) {
  if (main->cfg.arenas <= 1) {
    pthread_mutex_lock(&pool->lock);
    return pool;
  }
  bool contended = pthread_mutex_trylock(&pool->lock) != 0;
  tls_home_t *h = home_entry(main, contended);
  if (!h) {
    if (contended) pthread_mutex_lock(&pool->lock);
    return pool;
  }
  if (!contended) {
    if (h->score > 0) h->score--;
    return pool;
  }
  if (++h->score >= (int)main->cfg.arena_move_after) {
    h->score = 0;
    cp_pool_t *to = arena_move(main, pool);
    if (to) {
      h->arena = to;
      return to;
    }
  }
  pthread_mutex_lock(&pool->lock);
  return pool;
}
