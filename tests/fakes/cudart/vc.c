/* vc.c: vector clocks over stream indices (see clock.c for what they mean).
 * Invariant: entries past n are zero, so a clock only grows when a stream
 * with a larger index is first seen; a NULL/empty clock is the zero clock. */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

uint64_t fc_vc_get(const fc_vc *v, unsigned i) { return i < v->n ? v->v[i] : 0; }

static void grow(fc_vc *v, size_t n) {
  if (n <= v->n) return;
  uint64_t *nv = realloc(v->v, n * sizeof *nv);
  if (!nv) abort();
  memset(nv + v->n, 0, (n - v->n) * sizeof *nv);
  v->v = nv;
  v->n = n;
}

void fc_vc_set(fc_vc *v, unsigned i, uint64_t x) {
  grow(v, (size_t)i + 1);
  v->v[i] = x;
}

void fc_vc_join(fc_vc *dst, const fc_vc *src) {
  if (!src) return;
  grow(dst, src->n);
  for (size_t i = 0; i < src->n; i++)
    if (src->v[i] > dst->v[i]) dst->v[i] = src->v[i];
}

void fc_vc_copy(fc_vc *dst, const fc_vc *src) {
  if (dst->n) memset(dst->v, 0, dst->n * sizeof *dst->v);
  fc_vc_join(dst, src);
}

void fc_vc_free(fc_vc *v) {
  free(v->v);
  v->v = NULL;
  v->n = 0;
}
