/* reuse.c: pending and ready blocks: a free's place in the free order and
 * in its reuse key's tree, a block made ready (coalesced with its ready
 * neighbours, into the bins), and completing every free up to a point.
 *
 * Pending blocks sit in a FIFO in free order (free_seq grows by one per
 * free of this arena), so completing "everything freed up to seq" is a walk
 * from the head. A pending block freed with a key also sits in the tree of
 * its (stream, key), where an allocation with the same pair may take it at
 * once; keyed frees coalesce at once with the key's pending neighbours.
 * What decides *when* blocks complete (barriers, fences, synchronisations)
 * is sync.c.
 *
 * Called with the pool lock held. */
#include <errno.h>
#include <stdlib.h>

#define HASH_NONFATAL_OOM 1
#include "pool_internal.h"
#include "util.h"

static cp_subpool_t *subpool_of_block(cp_pool_t *pool, const cp_block_t *b) {
  return cp_subpool_of(pool, b->segment->small);
}

/* `lower` takes in its address neighbour `upper`, which is in no index. */
static void join(cp_pool_t *pool, cp_block_t *lower, cp_block_t *upper) {
  lower->size += upper->size;
  if (upper->done_seq > lower->done_seq) lower->done_seq = upper->done_seq;
  lower->next = upper->next;
  if (upper->next) upper->next->prev = lower;
  cp_block_recycle(pool, upper);
  pool->block_count--;
  pool->free_block_count--;
}

/* b, in no index, joined with its address neighbour n (b->prev or b->next)
 * when n is READY: n leaves the ready bins. Returns the block b is now part of. */
static cp_block_t *join_if_ready(cp_pool_t *pool, cp_subpool_t *sp, cp_block_t *b, cp_block_t *n) {
  if (!n || n->state != CP_BLOCK_READY) return b;
  cp_bins_remove(&sp->ready, n);
  cp_block_t *lower = n == b->prev ? n : b;
  join(pool, lower, lower->next);
  return lower;
}

void cp_make_ready(cp_pool_t *pool, cp_block_t *b) {
  cp_subpool_t *sp = subpool_of_block(pool, b);
  if (b->free_seq > b->done_seq) b->done_seq = b->free_seq;
  b->state = CP_BLOCK_READY;
  b->keyed = NULL;
  b->n_recorded = 0;
  b = join_if_ready(pool, sp, b, b->prev);
  b = join_if_ready(pool, sp, b, b->next);
  cp_bins_insert(&sp->ready, b);
}

static cp_keyed_t *keyed_get(cp_subpool_t *sp, uint64_t stream, uint64_t key, bool create) {
  cp_keyed_t *k = sp->last_keyed;
  if (k && k->id.stream == stream && k->id.key == key) return k;
  cp_keyed_t probe = {.id = {stream, key}};
  HASH_FIND(hh, sp->keyed, &probe.id, sizeof probe.id, k);
  if (k) sp->last_keyed = k;
  if (k || !create) return k;
  /* Threads come and go: drop empty trees before the table grows large. */
  if (HASH_COUNT(sp->keyed) >= 64) {
    cp_keyed_t *it, *tmp;
    sp->last_keyed = NULL;
    HASH_ITER(hh, sp->keyed, it, tmp) {
      if (it->count == 0) {
        HASH_DEL(sp->keyed, it);
        free(it);
      }
    }
  }
  k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->id = probe.id;
  RB_INIT(&k->tree);
  int hash_oom = 0;
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(e) (hash_oom = 1)
  HASH_ADD(hh, sp->keyed, id, sizeof k->id, k);
  if (hash_oom) {
    free(k);
    return NULL;
  }
  sp->last_keyed = k;
  return k;
}

cp_block_t *cp_keyed_best_fit(cp_subpool_t *sp, uint64_t stream, uint64_t key, size_t size) {
  if (!sp->keyed) return NULL;
  cp_keyed_t *k = keyed_get(sp, stream, key, false);
  return k && k->count ? cp_tree_best_fit(&k->tree, size) : NULL;
}

size_t cp_pending_not_usable(cp_subpool_t *sp, uint64_t stream, uint64_t key) {
  cp_keyed_t *own = key && sp->keyed ? keyed_get(sp, stream, key, false) : NULL;
  return sp->pending_count - (own ? own->count : 0);
}

static void pending_account(cp_pool_t *pool, cp_block_t *b, int sign) {
  cp_subpool_t *sp = subpool_of_block(pool, b);
  sp->pending_bytes += sign > 0 ? b->size : -b->size;
  sp->pending_count += sign > 0 ? 1 : (size_t)-1;
  cp_stat_add(&pool->stats.pending_bytes, sign * (int64_t)b->size);
}

static void keyed_insert(cp_keyed_t *k, cp_block_t *b) {
  b->keyed = k;
  if (!k) return;
  cp_tree_insert(&k->tree, b);
  k->count++;
}

/* Whether a free with key tree k may absorb neighbour n: what that key may
 * already use, its own pending blocks and, in the large pool, ready ones. A
 * small-pool block left apart from the ready rest of its 2 MiB segment is
 * reused whole by the next same-size request of the thread instead of being
 * merged and split again on every cudaMalloc/cudaFree pair (a third of a
 * cached pair's cost); on the PyTorch traces it costs no memory. */
static bool joinable(const cp_block_t *n, const cp_keyed_t *k) {
  return n && ((n->state == CP_BLOCK_READY && !n->segment->small) ||
               (n->state == CP_BLOCK_PENDING && n->keyed == k));
}

static void detach_free(cp_pool_t *pool, cp_block_t *n) {
  if (n->state == CP_BLOCK_READY)
    cp_bins_remove(&subpool_of_block(pool, n)->ready, n);
  else
    cp_pending_remove(pool, n);
}

/* A keyed free coalesces at once with what its key may use: the result is
 * pending for that key, so other keys wait for the next barrier for memory
 * they could have had at once, but a single-threaded program's frees merge
 * as eagerly as in a plain caching allocator and fragment no more. */
static cp_block_t *coalesce_for_key(cp_pool_t *pool, cp_block_t *b, const cp_keyed_t *k) {
  if (joinable(b->prev, k)) {
    cp_block_t *prev = b->prev;
    detach_free(pool, prev);
    prev->stream = b->stream;
    join(pool, prev, b);
    b = prev;
  }
  if (joinable(b->next, k)) {
    cp_block_t *next = b->next;
    detach_free(pool, next);
    join(pool, b, next);
  }
  return b;
}

/* Into the free-order list after prev (NULL: at the head). */
static void fifo_insert_after(cp_pool_t *pool, cp_block_t *prev, cp_block_t *b) {
  CP_LIST_INSERT_AFTER(pool->fifo_head, pool->fifo_tail, prev, b, fifo_prev, fifo_next);
}

void cp_pending_add(cp_pool_t *pool, cp_block_t *b, uint64_t key) {
  if (!pool->fifo_head) cp_note_freed(pool, true); /* the first to wait */
  cp_keyed_t *k = key ? keyed_get(subpool_of_block(pool, b), b->stream, key, true) : NULL;
  if (k) b = coalesce_for_key(pool, b, k);
  b->state = CP_BLOCK_PENDING;
  b->free_seq = cp_seq_next(pool);
  fifo_insert_after(pool, pool->fifo_tail, b);
  keyed_insert(k, b);
  pending_account(pool, b, +1);
}

static void fifo_unlink(cp_pool_t *pool, cp_block_t *b) {
  CP_LIST_UNLINK(pool->fifo_head, pool->fifo_tail, b, fifo_prev, fifo_next);
  b->fifo_prev = b->fifo_next = NULL;
}

static void keyed_unlink(cp_block_t *b) {
  if (!b->keyed) return;
  cp_tree_remove(&b->keyed->tree, b);
  b->keyed->count--;
}

void cp_pending_remove(cp_pool_t *pool, cp_block_t *b) {
  fifo_unlink(pool, b);
  keyed_unlink(b);
  b->keyed = NULL;
  pending_account(pool, b, -1);
}

/* The rest is counted after b leaves: the pending peak never sees the
 * bytes twice. */
void cp_pending_split(cp_pool_t *pool, cp_block_t *b, cp_block_t *rest) {
  if (rest) {
    fifo_insert_after(pool, b, rest);
    keyed_insert(b->keyed, rest);
  }
  cp_pending_remove(pool, b);
  if (rest) pending_account(pool, rest, +1);
}

void cp_complete_upto(cp_pool_t *pool, uint64_t seq) {
  while (pool->fifo_head && pool->fifo_head->free_seq <= seq) {
    cp_block_t *b = pool->fifo_head;
    cp_pending_remove(pool, b);
    cp_make_ready(pool, b);
  }
}
