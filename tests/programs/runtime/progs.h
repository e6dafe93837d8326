/* progs.h: what the test programs share. They run on the fake runtime
 * (and, unchanged, on a real GPU), natively or with libcudapool.so
 * preloaded, and print one line per check on stdout, "tag: key=value ...".
 * Lines whose tag is "pool" or "info" may differ between a native run and a
 * run under the shim; every other line must be identical. The fake's test
 * hooks and cudapool's control API are looked up with dlsym, so a missing
 * one is reported ("nofake", "nopool"), never a link error. */
#ifndef CUDAPOOL_PROGS_H
#define CUDAPOOL_PROGS_H

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudapool.h"
#include "pool_probe.h"

#define MiB ((size_t)1 << 20)

static inline void *prog_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

static inline long fake_calls(const char *fn) {
  long (*f)(const char *) = (long (*)(const char *))prog_sym("fakecuda_calls");
  return f ? f(fn) : -1;
}

static inline void fake_hold(int on) {
  void (*f)(int) = (void (*)(int))prog_sym("fakecuda_hold_events");
  if (f) f(on);
}

static inline long fake_races(void) {
  long (*f)(void) = (long (*)(void))prog_sym("fakecuda_races");
  return f ? f() : -1;
}

static inline long fake_live(int dev) {
  size_t (*f)(int) = (size_t(*)(int))prog_sym("fakecuda_live_bytes");
  return f ? (long)f(dev) : -1;
}

static inline void print_pool(int dev) {
  cudapool_stats_t s;
  int rc = pool_stats(dev, &s);
  if (rc != 0) {
    if (rc < 0)
      printf("pool: nopool\n");
    else
      printf("pool: dev=%d error=%d\n", dev, rc);
    return;
  }
  printf("pool: dev=%d hits=%llu misses=%llu num_alloc=%llu num_free=%llu "
         "num_device_alloc=%llu num_device_free=%llu num_ooms=%llu allocated=%lld "
         "allocated_peak=%lld reserved=%lld cached=%lld segments=%lld\n",
         dev, (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.num_alloc,
         (unsigned long long)s.num_free, (unsigned long long)s.num_device_alloc,
         (unsigned long long)s.num_device_free, (unsigned long long)s.num_ooms,
         (long long)s.allocated_bytes.current, (long long)s.allocated_bytes.peak,
         (long long)s.reserved_bytes.current, (long long)s.cached_bytes.current,
         (long long)s.segments.current);
}

/* The pool's barriers on device 0 so far (0 without the pool). */
static inline long pool_barriers(void) {
  cudapool_stats_t s;
  return pool_stats(0, &s) == 0 ? (long)s.num_barriers : 0;
}

/* Writes a pattern to p and reads it back: 1 when both worked and match. */
static inline int round_trip(void *p, size_t n, unsigned char seed) {
  static unsigned char in[64 * 1024], out[64 * 1024];
  if (n > sizeof in) n = sizeof in;
  for (size_t i = 0; i < n; i++) in[i] = (unsigned char)(seed + i * 13);
  if (cudaMemcpy(p, in, n, cudaMemcpyHostToDevice) != cudaSuccess) return 0;
  memset(out, 0, n);
  if (cudaMemcpy(out, p, n, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
  return memcmp(in, out, n) == 0;
}

#endif
