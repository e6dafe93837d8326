/* async.c: stream-ordered allocations (cudaMallocAsync, cudaMallocFromPoolAsync
 * and their per-thread-stream variants, with cudaFreeAsync and cudaFree),
 * natively and under the pool (docs/DESIGN.md, "Stream-ordered
 * allocations").
 *
 * Usage: async basic|race|pools|capture
 *   basic    pairs on the legacy, a created and the per-thread stream; a
 *            block freed on a stream comes back at once to that stream;
 *            cudaFree of a stream-ordered allocation, cudaFreeAsync of a
 *            cudaMalloc one; bad pointers
 *   race     with device work held (fakecuda_hold_events): a block written
 *            and freed on one stream is allocated and written on another;
 *            the fake must count no race
 *   pools    a pool the program creates, the device's current pool
 *            replaced and restored, cudaMallocFromPoolAsync on the default
 *            pool, the default pool's used and reserved figures, TrimTo
 *   capture  stream-ordered allocation and free on a capturing stream
 * Every line but pool:/info: must match the native run. */
#include <string.h>

#include "fakecuda.h"
#include "progs.h"

#define LAST() ((int)cudaGetLastError())
#define KiB ((size_t)1 << 10)

cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t stream);

static long hits(void) {
  cudapool_stats_t s;
  return pool_stats(0, &s) == 0 ? (long)s.hits : 0;
}

/* ---- basic -------------------------------------------------------------------------- */

/* Two pairs on one stream: the second gets the first's block at once. */
static void pairs(const char *tag, cudaStream_t s, int ptsz) {
  void *a = NULL, *b = NULL;
  long calls0 = fake_calls(ptsz ? "cudaMallocAsync_ptsz" : "cudaMallocAsync"), b0 = pool_barriers(),
       h0 = hits();
  int al = ptsz ? cudaMallocAsync_ptsz(&a, 300 * KiB, s) : cudaMallocAsync(&a, 300 * KiB, s);
  int ok = round_trip(a, 300 * KiB, 3);
  int f = ptsz ? cudaFreeAsync_ptsz(a, s) : cudaFreeAsync(a, s);
  int al2 = ptsz ? cudaMallocAsync_ptsz(&b, 300 * KiB, s) : cudaMallocAsync(&b, 300 * KiB, s);
  int ok2 = round_trip(b, 300 * KiB, 4);
  int f2 = ptsz ? cudaFreeAsync_ptsz(b, s) : cudaFreeAsync(b, s);
  int sync = cudaStreamSynchronize(s);
  printf("%s: alloc=%d ok=%d free=%d alloc2=%d ok2=%d free2=%d sync=%d last=%d\n", tag, al, ok, f, al2, ok2,
         f2, sync, LAST());
  printf("info: %s same=%d real_calls=%ld barriers=%ld hits=%ld\n", tag, a == b,
         fake_calls(ptsz ? "cudaMallocAsync_ptsz" : "cudaMallocAsync") - calls0, pool_barriers() - b0,
         hits() - h0);
}

static void basic(void) {
  cudaStream_t s;
  int c = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  printf("basic_create: create=%d\n", c);
  pairs("basic_legacy", 0, 0);
  pairs("basic_stream", s, 0);
  pairs("basic_ptsz", 0, 1);
  pairs("basic_per_thread_handle", cudaStreamPerThread, 0);

  /* Across the two kinds of free. */
  void *p = NULL, *q = NULL;
  int al = cudaMallocAsync(&p, 64 * KiB, s) | cudaMalloc(&q, 64 * KiB);
  int ok = round_trip(p, 64 * KiB, 1) && round_trip(q, 64 * KiB, 2);
  int fp = cudaFree(p);
  int fq = cudaFreeAsync(q, s);
  int sync = cudaStreamSynchronize(s);
  printf("basic_mixed: alloc=%d ok=%d free_async_ptr=%d free_async_of_malloc=%d sync=%d last=%d\n", al, ok,
         fp, fq, sync, LAST());

  /* Bad pointers and streams fail natively. */
  void *r = NULL;
  al = cudaMallocAsync(&r, 4096, s);
  int interior = cudaFreeAsync((char *)r + 512, s);
  int l1 = LAST();
  int f = cudaFreeAsync(r, s);
  int twice = cudaFreeAsync(r, s);
  int l2 = LAST();
  int null_out = cudaMallocAsync(NULL, 4096, s);
  int l3 = LAST();
  void *z = (void *)0x1;
  int zero = cudaMallocAsync(&z, 0, s);
  int l4 = LAST();
  void *x = NULL;
  int bogus_stream = cudaMallocAsync(&x, 4096, (cudaStream_t)0x5678);
  int l5 = LAST();
  printf("basic_errors: alloc=%d interior=%d last=%d free=%d twice=%d last=%d null_out=%d last=%d zero=%d "
         "last=%d "
         "bogus_stream=%d last=%d\n",
         al, interior, l1, f, twice, l2, null_out, l3, zero, l4, bogus_stream, l5);
  sync = cudaDeviceSynchronize();
  int d = cudaStreamDestroy(s);
  printf("basic_end: sync=%d destroy=%d last=%d\n", sync, d, LAST());
  print_pool(0);
}

/* ---- race --------------------------------------------------------------------------- */

#define JOB (12 * MiB) /* a segment of its own under the pool */

static void race_one(const char *tag, cudaStream_t s1, cudaStream_t s2) {
  long r0 = fake_races(), b0 = pool_barriers();
  fake_hold(1);
  void *a = NULL, *b = NULL;
  int e = cudaMallocAsync(&a, JOB, s1) | cudaMemsetAsync(a, 1, JOB, s1) | cudaFreeAsync(a, s1);
  e |= cudaMallocAsync(&b, JOB, s2) | cudaMemsetAsync(b, 2, JOB, s2);
  fake_hold(0);
  int f = cudaFreeAsync(b, s2);
  int sync = cudaDeviceSynchronize();
  printf("%s: errors=%d races=%ld free=%d sync=%d last=%d\n", tag, e, fake_races() - r0, f, sync, LAST());
  printf("info: %s same=%d barriers=%ld\n", tag, a == b, pool_barriers() - b0);
}

static void race(void) {
  cudaStream_t nb1, nb2, bl;
  cudaStreamCreateWithFlags(&nb1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&nb2, cudaStreamNonBlocking);
  cudaStreamCreate(&bl);
  race_one("race_same_stream", nb1, nb1);
  race_one("race_nonblocking", nb1, nb2);
  race_one("race_blocking_to_nonblocking", bl, nb2);
  race_one("race_nonblocking_to_legacy", nb1, 0);
  race_one("race_legacy_to_nonblocking", 0, nb2);
  race_one("race_per_thread_to_nonblocking", cudaStreamPerThread, nb1);
  cudaStreamDestroy(nb1);
  cudaStreamDestroy(nb2);
  cudaStreamDestroy(bl);
  printf("race_end: last=%d\n", LAST());
}

/* ---- pools -------------------------------------------------------------------------- */

static uint64_t attr(cudaMemPool_t pool, enum cudaMemPoolAttr a) {
  uint64_t v = 0;
  if (cudaMemPoolGetAttribute(pool, a, &v) != cudaSuccess) return (uint64_t)-1;
  return v;
}

static void pools(void) {
  cudaStream_t s;
  cudaMemPool_t def = NULL, mine = NULL, cur = NULL;
  int c = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) | cudaDeviceGetDefaultMemPool(&def, 0);
  struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                   .location = {.type = cudaMemLocationTypeDevice, .id = 0}};
  int created = cudaMemPoolCreate(&mine, &props);
  printf("pools_setup: create=%d pool=%d\n", c, created);

  /* A pool the program made: CUDA's alone. */
  void *p = NULL;
  long calls0 = fake_calls("cudaMallocFromPoolAsync");
  int al = cudaMallocFromPoolAsync(&p, 256 * KiB, mine, s);
  uint64_t used = attr(mine, cudaMemPoolAttrUsedMemCurrent);
  int f = cudaFreeAsync(p, s);
  int sync = cudaStreamSynchronize(s);
  printf("pools_created: alloc=%d used=%llu free=%d sync=%d used_after=%llu last=%d\n", al,
         (unsigned long long)used, f, sync, (unsigned long long)attr(mine, cudaMemPoolAttrUsedMemCurrent),
         LAST());
  printf("info: pools_created real_calls=%ld\n", fake_calls("cudaMallocFromPoolAsync") - calls0);
  long asks0 = fake_calls("cudaDeviceGetDefaultMemPool");
  int again = 0;
  for (int i = 0; i < 10; i++) again |= cudaMallocFromPoolAsync(&p, 4 * KiB, mine, s) | cudaFreeAsync(p, s);
  printf("pools_created_again: errors=%d sync=%d last=%d\n", again, cudaStreamSynchronize(s), LAST());
  printf("info: pools_created_again default_pool_asks=%ld\n",
         fake_calls("cudaDeviceGetDefaultMemPool") - asks0);

  /* The current pool replaced: cudaMallocAsync is CUDA's; restored: served. */
  int set = cudaDeviceSetMemPool(0, mine) | cudaDeviceGetMemPool(&cur, 0);
  calls0 = fake_calls("cudaMallocAsync");
  al = cudaMallocAsync(&p, 256 * KiB, s);
  used = attr(mine, cudaMemPoolAttrUsedMemCurrent);
  f = cudaFreeAsync(p, s);
  long replaced_calls = fake_calls("cudaMallocAsync") - calls0;
  int back = cudaDeviceSetMemPool(0, def);
  calls0 = fake_calls("cudaMallocAsync");
  void *q = NULL;
  int al2 = cudaMallocAsync(&q, 256 * KiB, s);
  long restored_calls = fake_calls("cudaMallocAsync") - calls0;
  printf("pools_current: set=%d is_mine=%d alloc=%d used=%llu free=%d back=%d alloc2=%d last=%d\n", set,
         cur == mine, al, (unsigned long long)used, f, back, al2, LAST());
  printf("info: pools_current replaced_calls=%ld restored_calls=%ld\n", replaced_calls, restored_calls);

  /* The default pool named explicitly: served; its figures include the pool's. */
  calls0 = fake_calls("cudaMallocFromPoolAsync");
  void *r = NULL;
  al = cudaMallocFromPoolAsync(&r, 512 * KiB, def, s);
  long from_default_calls = fake_calls("cudaMallocFromPoolAsync") - calls0;
  uint64_t used_now = attr(def, cudaMemPoolAttrUsedMemCurrent),
           reserved = attr(def, cudaMemPoolAttrReservedMemCurrent);
  uint64_t used_high = attr(def, cudaMemPoolAttrUsedMemHigh),
           threshold = attr(def, cudaMemPoolAttrReleaseThreshold);
  printf(
      "pools_default: alloc=%d used_at_least=%d reserved_ge_used=%d high_ge_used=%d threshold=%llu last=%d\n",
      al, used_now >= 768 * KiB, reserved >= used_now, used_high >= used_now, (unsigned long long)threshold,
      LAST());
  printf("info: pools_default real_calls=%ld used=%llu reserved=%llu\n", from_default_calls,
         (unsigned long long)used_now, (unsigned long long)reserved);
  f = cudaFreeAsync(q, s) | cudaFreeAsync(r, s);
  sync = cudaStreamSynchronize(s);
  int trim = cudaMemPoolTrimTo(def, 0);
  printf("pools_trim: free=%d sync=%d trim=%d used=%llu last=%d\n", f, sync, trim,
         (unsigned long long)attr(def, cudaMemPoolAttrUsedMemCurrent), LAST());
  cudapool_stats_t st;
  if (pool_stats(0, &st) == 0)
    printf("info: pools_trim reserved=%lld\n", (long long)st.reserved_bytes.current);
  int destroy = cudaMemPoolDestroy(mine) | cudaStreamDestroy(s);
  printf("pools_end: destroy=%d last=%d\n", destroy, LAST());
}

/* ---- capture ------------------------------------------------------------------------ */

static void capture_one(const char *tag, enum cudaStreamCaptureMode mode) {
  cudaStream_t s;
  cudaGraph_t g = NULL;
  int c = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *before = NULL;
  int al0 = cudaMallocAsync(&before, 4096, s) | cudaStreamSynchronize(s);
  int begin = cudaStreamBeginCapture(s, mode);
  long calls0 = fake_calls("cudaMallocAsync"), free0 = fake_calls("cudaFreeAsync");
  void *p = NULL;
  int al = cudaMallocAsync(&p, 64 * KiB, s);
  int f = cudaFreeAsync(p, s);
  long alloc_calls = fake_calls("cudaMallocAsync") - calls0, free_calls = fake_calls("cudaFreeAsync") - free0;
  int end = cudaStreamEndCapture(s, &g);
  int graph = g != NULL;
  if (g) cudaGraphDestroy(g);
  int usable = round_trip(before, 4096, 9);
  int fb = cudaFreeAsync(before, s);
  int sync = cudaStreamSynchronize(s);
  int d = cudaStreamDestroy(s);
  printf("%s: create=%d alloc0=%d begin=%d alloc=%d free=%d end=%d graph=%d usable=%d free_before=%d sync=%d "
         "destroy=%d last=%d\n",
         tag, c, al0, begin, al, f, end, graph, usable, fb, sync, d, LAST());
  printf("info: %s alloc_calls=%ld free_calls=%ld\n", tag, alloc_calls, free_calls);
}

static void capture(void) {
  capture_one("capture_relaxed", cudaStreamCaptureModeRelaxed);
  capture_one("capture_global", cudaStreamCaptureModeGlobal);
  printf("capture_end: sync=%d last=%d\n", cudaDeviceSynchronize(), LAST());
}

/* A device reset makes a new context with its own default pool, whose
 * handle CUDA need not keep (the fake does): the shim asks again, and an
 * allocation from it after the reset is served. */
static void reset(void) {
  cudaStream_t s = NULL;
  cudaMemPool_t def = NULL;
  void *p = NULL;
  int c = cudaDeviceGetDefaultMemPool(&def, 0);
  int before = cudaMallocFromPoolAsync(&p, 4 * KiB, def, s) | cudaFreeAsync(p, s) | cudaDeviceSynchronize();
  int rs = cudaDeviceReset();
  c |= cudaDeviceGetDefaultMemPool(&def, 0);
  long asks0 = fake_calls("cudaDeviceGetDefaultMemPool"), calls0 = fake_calls("cudaMallocFromPoolAsync");
  int after = cudaMallocFromPoolAsync(&p, 4 * KiB, def, s);
  long asks = fake_calls("cudaDeviceGetDefaultMemPool") - asks0,
       real = fake_calls("cudaMallocFromPoolAsync") - calls0;
  after |= cudaFreeAsync(p, s) | cudaDeviceSynchronize();
  printf("reset_default_pool: get=%d before=%d reset=%d after=%d last=%d\n", c, before, rs, after, LAST());
  printf("info: reset_default_pool asks=%ld real_calls=%ld\n", asks, real);
}

int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "basic";
  if (!strcmp(part, "basic"))
    basic();
  else if (!strcmp(part, "race"))
    race();
  else if (!strcmp(part, "pools"))
    pools();
  else if (!strcmp(part, "capture"))
    capture();
  else if (!strcmp(part, "reset"))
    reset();
  else {
    fprintf(stderr, "usage: async basic|race|pools|capture|reset\n");
    return 2;
  }
  return 0;
}
