/* drv_async.c: the driver's stream-ordered allocations (cuMemAllocAsync,
 * cuMemAllocFromPoolAsync, their _ptsz variants, cuMemFreeAsync) and the
 * pool calls around them, reached as a static runtime or XLA reaches them.
 *
 * Usage: drv_async proc|dlsym
 *   proc   every entry point through cuGetProcAddress_v2 (cudaVersion
 *          13000, the per-thread flag for the _ptsz variants)
 *   dlsym  every entry point through dlsym on the driver's handle
 * Every line but pool:/info: must match the native run. */
#include <stdbool.h>
#include <string.h>

#include "drvprogs.h"

#define KiB ((size_t)1 << 10)

static struct {
  __typeof__(cuMemAllocAsync) *allocAsync, *allocAsyncPtsz;
  __typeof__(cuMemAllocFromPoolAsync) *fromPool;
  __typeof__(cuMemFreeAsync) *freeAsync;
  __typeof__(cuDeviceGetDefaultMemPool) *defaultPool;
  __typeof__(cuDeviceSetMemPool) *setPool;
  __typeof__(cuMemPoolCreate) *create;
  __typeof__(cuMemPoolDestroy) *destroy;
  __typeof__(cuMemPoolGetAttribute) *attr;
  __typeof__(cuMemPoolTrimTo) *trim;
} F;

static void *find(const char *how, const char *base, const char *exported, bool per_thread) {
  if (!strcmp(how, "dlsym")) return dlsym(D.lib, exported);
  return drv_proc(base, per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0);
}

static int lookup(const char *how) {
  if (strcmp(how, "proc") && strcmp(how, "dlsym")) return -1;
#define FIND(field, base, exported, ptsz) F.field = (__typeof__(F.field))find(how, #base, #exported, ptsz)
  FIND(allocAsync, cuMemAllocAsync, cuMemAllocAsync, false);
  FIND(allocAsyncPtsz, cuMemAllocAsync, cuMemAllocAsync_ptsz, true);
  FIND(fromPool, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, false);
  FIND(freeAsync, cuMemFreeAsync, cuMemFreeAsync, false);
  FIND(defaultPool, cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, false);
  FIND(setPool, cuDeviceSetMemPool, cuDeviceSetMemPool, false);
  FIND(create, cuMemPoolCreate, cuMemPoolCreate, false);
  FIND(destroy, cuMemPoolDestroy, cuMemPoolDestroy, false);
  FIND(attr, cuMemPoolGetAttribute, cuMemPoolGetAttribute, false);
  FIND(trim, cuMemPoolTrimTo, cuMemPoolTrimTo, false);
#undef FIND
  return F.allocAsync && F.allocAsyncPtsz && F.fromPool && F.freeAsync && F.defaultPool && F.setPool &&
                 F.create && F.destroy && F.attr && F.trim
             ? 0
             : -1;
}

static void pairs(const char *tag, CUstream s, bool ptsz) {
  __typeof__(cuMemAllocAsync) *alloc = ptsz ? F.allocAsyncPtsz : F.allocAsync;
  const char *real = ptsz ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync";
  long calls0 = fake_calls(real);
  CUdeviceptr a = 0, b = 0;
  int al = alloc(&a, 300 * KiB, s);
  int ok = drv_round_trip(a, 4096, 3);
  /* The per-thread stream by its handle: the stream the _ptsz call meant. */
  CUstream freed_on = ptsz && !s ? CU_STREAM_PER_THREAD : s;
  int f = F.freeAsync(a, freed_on);
  int al2 = alloc(&b, 300 * KiB, s);
  int ok2 = drv_round_trip(b, 4096, 4);
  int f2 = F.freeAsync(b, freed_on);
  int sync = D.cuStreamSynchronize(s);
  printf("%s: alloc=%d ok=%d free=%d alloc2=%d ok2=%d free2=%d sync=%d\n", tag, al, ok, f, al2, ok2, f2,
         sync);
  printf("info: %s same=%d real_calls=%ld\n", tag, a == b, fake_calls(real) - calls0);
}

static uint64_t attr(CUmemoryPool pool, CUmemPool_attribute a) {
  cuuint64_t v = 0;
  return F.attr(pool, a, &v) == CUDA_SUCCESS ? v : (uint64_t)-1;
}

static void pools(CUstream s) {
  CUmemoryPool def = NULL, mine = NULL;
  CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                          .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  int setup = F.defaultPool(&def, 0) | F.create(&mine, &props);
  CUdeviceptr p = 0, q = 0, r = 0;
  long calls0 = fake_calls("cuMemAllocFromPoolAsync");
  int mine_alloc = F.fromPool(&p, 64 * KiB, mine, s);
  uint64_t mine_used = attr(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
  int f = F.freeAsync(p, s);
  long mine_calls = fake_calls("cuMemAllocFromPoolAsync") - calls0;
  int set = F.setPool(0, mine);
  calls0 = fake_calls("cuMemAllocAsync");
  int replaced = F.allocAsync(&q, 64 * KiB, s);
  long replaced_calls = fake_calls("cuMemAllocAsync") - calls0;
  f |= F.freeAsync(q, s);
  int back = F.setPool(0, def);
  calls0 = fake_calls("cuMemAllocFromPoolAsync");
  int def_alloc = F.fromPool(&r, 64 * KiB, def, s);
  long def_calls = fake_calls("cuMemAllocFromPoolAsync") - calls0;
  uint64_t used = attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
  f |= F.freeAsync(r, s);
  int sync = D.cuStreamSynchronize(s);
  int trim = F.trim(def, 0);
  int destroy = F.destroy(mine);
  printf("pools: setup=%d mine_alloc=%d mine_used=%llu set=%d replaced=%d back=%d def_alloc=%d used_ge=%d "
         "free=%d "
         "sync=%d trim=%d destroy=%d\n",
         setup, mine_alloc, (unsigned long long)mine_used, set, replaced, back, def_alloc, used >= 64 * KiB,
         f, sync, trim, destroy);
  printf("info: pools mine_calls=%ld replaced_calls=%ld def_calls=%ld used=%llu\n", mine_calls,
         replaced_calls, def_calls, (unsigned long long)used);
}

static void capture(CUstream s) {
  long calls0 = fake_calls("cuMemAllocAsync"), free0 = fake_calls("cuMemFreeAsync");
  int begin = D.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
  CUdeviceptr p = 0;
  int al = F.allocAsync(&p, 64 * KiB, s);
  int f = F.freeAsync(p, s);
  CUgraph g = NULL;
  int end = D.cuStreamEndCapture(s, &g);
  printf("capture: begin=%d alloc=%d free=%d end=%d\n", begin, al, f, end);
  printf("info: capture alloc_calls=%ld free_calls=%ld\n", fake_calls("cuMemAllocAsync") - calls0,
         fake_calls("cuMemFreeAsync") - free0);
}

int main(int argc, char **argv) {
  drv_setup();
  const char *how = argc > 1 ? argv[1] : "";
  if (lookup(how) != 0) {
    printf("setup: cannot reach the entry points by %s\n", how);
    return 3;
  }
  CUstream s;
  int c = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  printf("setup: create=%d\n", c);
  pairs("pairs_stream", s, false);
  pairs("pairs_legacy", CU_STREAM_LEGACY, false);
  pairs("pairs_ptsz", 0, true);
  pools(s);
  capture(s);
  int d = D.cuStreamDestroy_v2(s) | D.cuCtxSynchronize_v2(NULL);
  printf("end: destroy=%d\n", d);
  print_pool(0);
  return 0;
}
