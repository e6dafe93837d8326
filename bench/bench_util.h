/* bench_util.h: the clock and the median of the benchmarks that print
 * "CASE: N ns/pair" (core_bench.c, shim_pair.c). */
#ifndef CUDAPOOL_BENCH_UTIL_H
#define CUDAPOOL_BENCH_UTIL_H

#include <stddef.h>
#include <stdlib.h>
#include <time.h>

static inline double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double bench_median(double *v, size_t n) {
  qsort(v, n, sizeof v[0], bench_cmp_double);
  return v[n / 2];
}

#endif
