/* state.c: the fake driver's global state, call counters, devices and
 * contexts: cuInit, versions, devices, the per-thread context stack, primary
 * contexts (retain/release/reset/state) and created contexts. Releasing a
 * primary context to zero, resetting it or destroying a created context
 * drops all its memory, streams, events and captures, as natively. */
#include "fk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fk_state fk = {.lock = PTHREAD_MUTEX_INITIALIZER, .fail_after = -1};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned next_tid = 1;
static __thread unsigned tl_tid;
#define FK_STACK 16
static __thread fk_ctx *tl_stack[FK_STACK];
static __thread int tl_depth;

static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
  if (shift) end++;
  if (*end || v > (~0ULL >> shift)) return -1;
  *out = (size_t)(v << shift);
  return 0;
}

static void init_once(void) {
  const char *e = getenv("FAKECU_DEVICES");
  fk.ndev = e && *e ? atoi(e) : 1;
  if (fk.ndev < 1 || fk.ndev > FK_MAX_DEVICES) fk.ndev = 1;
  fk.capacity = (size_t)16 << 30;
  e = getenv("FAKECU_MEMORY");
  if (e && *e && parse_size(e, &fk.capacity) != 0) {
    fprintf(stderr, "fakecu: FAKECU_MEMORY=%s ignored\n", e);
    fk.capacity = (size_t)16 << 30;
  }
  e = getenv("FAKECU_FAIL_ALLOC_AFTER");
  if (e && *e) fk.fail_after = atol(e);
  e = getenv("FAKECU_PROC_TRAMPOLINES");
  fk.trampolines = e && strcmp(e, "1") == 0;
  e = getenv("FAKECU_TRACE_PROC");
  fk.trace_proc = e && strcmp(e, "1") == 0;
  for (int d = 0; d < FK_MAX_DEVICES; d++) {
    fk_ctx *c = &fk.primary[d];
    c->handle = (CUcontext)c;
    c->device = d;
    c->primary = 1;
    c->legacy = (fk_stream){.handle = CU_STREAM_LEGACY, .ctx = c, .kind = FK_LEGACY};
    c->per_thread = (fk_stream){.handle = CU_STREAM_PER_THREAD, .ctx = c, .kind = FK_PER_THREAD};
  }
}

static void count(const char *fn) {
  fk_counter *c;
  HASH_FIND_STR(fk.counters, fn, c);
  if (!c && (c = calloc(1, sizeof *c))) {
    snprintf(c->name, sizeof c->name, "%s", fn);
    HASH_ADD_STR(fk.counters, name, c);
  }
  if (c) c->n++;
}

void fk_lock_only(void) {
  pthread_once(&once, init_once);
  pthread_mutex_lock(&fk.lock);
}

void fk_unlock_only(void) { pthread_mutex_unlock(&fk.lock); }

void fk_enter(const char *fn) {
  fk_lock_only();
  count(fn);
}

CUresult fk_leave(CUresult rc) {
  pthread_mutex_unlock(&fk.lock);
  return rc;
}

long fk_count_of(const char *fn) {
  fk_counter *c;
  HASH_FIND_STR(fk.counters, fn, c);
  return c ? c->n : 0;
}

unsigned fk_tid(void) {
  if (!tl_tid) tl_tid = next_tid++;
  return tl_tid;
}

/* A context on the stack may have died since (released, destroyed): it
 * stays there, as natively, and calls in it fail. */
fk_ctx *fk_current(void) { return tl_depth ? tl_stack[tl_depth - 1] : NULL; }

static int ctx_live(const fk_ctx *c) { return c->primary ? c->refs > 0 : c->alive; }

CUresult fk_ready(fk_ctx **ctx) {
  if (!fk.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  fk_ctx *c = fk_current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (!ctx_live(c)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *ctx = c;
  return CUDA_SUCCESS;
}

void fk_ctx_drop_state(fk_ctx *c) {
  fk_streams_drop_ctx(c);
  fk_alloc_drop_ctx(c);
}

static fk_ctx *ctx_find(CUcontext h) {
  for (int d = 0; d < fk.ndev; d++)
    if ((CUcontext)&fk.primary[d] == h) return &fk.primary[d];
  fk_ctx *c;
  HASH_FIND_PTR(fk.ctxs, &h, c);
  return c;
}

#define ENTER() fk_enter(__func__)
#define INIT_OR() \
  if (!fk.initialized) return fk_leave(CUDA_ERROR_NOT_INITIALIZED)

CUresult cuInit(unsigned int flags) {
  ENTER();
  if (flags) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  fk.initialized = 1;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuDriverGetVersion(int *v) {
  ENTER();
  if (!v) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  *v = FK_VERSION;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuDeviceGetCount(int *n) {
  ENTER();
  INIT_OR();
  if (!n) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  *n = fk.ndev;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  ENTER();
  INIT_OR();
  if (!dev) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  if (ordinal < 0 || ordinal >= fk.ndev) return fk_leave(CUDA_ERROR_INVALID_DEVICE);
  *dev = ordinal;
  return fk_leave(CUDA_SUCCESS);
}

/* The same UUID as the fake runtime's cudaGetDeviceProperties. */
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  ENTER();
  INIT_OR();
  if (!uuid) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  if (dev < 0 || dev >= fk.ndev) return fk_leave(CUDA_ERROR_INVALID_DEVICE);
  memset(uuid, 0, sizeof *uuid);
  memcpy(uuid->bytes, "cpfakedev", 9);
  uuid->bytes[15] = (char)(dev + 1);
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuCtxGetCurrent(CUcontext *pctx) {
  ENTER();
  INIT_OR();
  if (!pctx) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  *pctx = (CUcontext)fk_current();
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  ENTER();
  INIT_OR();
  if (!ctx) {
    if (tl_depth) tl_depth--;
    return fk_leave(CUDA_SUCCESS);
  }
  fk_ctx *c = ctx_find(ctx);
  if (!c) return fk_leave(CUDA_ERROR_INVALID_CONTEXT);
  if (!tl_depth) tl_depth = 1;
  tl_stack[tl_depth - 1] = c;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  ENTER();
  INIT_OR();
  fk_ctx *c = ctx ? ctx_find(ctx) : NULL;
  if (!c || tl_depth == FK_STACK) return fk_leave(CUDA_ERROR_INVALID_CONTEXT);
  tl_stack[tl_depth++] = c;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  ENTER();
  INIT_OR();
  if (!tl_depth) return fk_leave(CUDA_ERROR_INVALID_CONTEXT);
  fk_ctx *c = tl_stack[--tl_depth];
  if (pctx) *pctx = (CUcontext)c;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuCtxGetDevice(CUdevice *dev) {
  ENTER();
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  if (rc) return fk_leave(rc);
  if (!dev) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  *dev = c->device;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  ENTER();
  INIT_OR();
  (void)flags;
  if (!pctx) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  if (dev < 0 || dev >= fk.ndev) return fk_leave(CUDA_ERROR_INVALID_DEVICE);
  fk_ctx *c = calloc(1, sizeof *c);
  if (!c || tl_depth == FK_STACK) {
    free(c);
    return fk_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  c->handle = (CUcontext)c;
  c->device = dev;
  c->alive = 1;
  c->legacy = (fk_stream){.handle = CU_STREAM_LEGACY, .ctx = c, .kind = FK_LEGACY};
  c->per_thread = (fk_stream){.handle = CU_STREAM_PER_THREAD, .ctx = c, .kind = FK_PER_THREAD};
  HASH_ADD_PTR(fk.ctxs, handle, c);
  *pctx = (CUcontext)c;
  tl_stack[tl_depth++] = c;
  return fk_leave(CUDA_SUCCESS);
}

/* The record stays in fk.ctxs (dead), so a stale handle is recognised. */
CUresult cuCtxDestroy_v2(CUcontext ctx) {
  ENTER();
  INIT_OR();
  fk_ctx *c = ctx ? ctx_find(ctx) : NULL;
  if (!c || c->primary || !c->alive) return fk_leave(CUDA_ERROR_INVALID_CONTEXT);
  fk_ctx_drop_state(c);
  c->alive = 0;
  for (int i = 0; i < tl_depth; i++)
    if (tl_stack[i] == c) tl_stack[i] = tl_stack[--tl_depth];
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  ENTER();
  INIT_OR();
  if (!pctx) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  if (dev < 0 || dev >= fk.ndev) return fk_leave(CUDA_ERROR_INVALID_DEVICE);
  fk.primary[dev].refs++;
  *pctx = (CUcontext)&fk.primary[dev];
  return fk_leave(CUDA_SUCCESS);
}

/* The first variants (CUDA 7.0) behave as the second here. */
static CUresult release(CUdevice dev) {
  if (!fk.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= fk.ndev) return CUDA_ERROR_INVALID_DEVICE;
  fk_ctx *c = &fk.primary[dev];
  if (c->refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--c->refs == 0) fk_ctx_drop_state(c);
  return CUDA_SUCCESS;
}

static CUresult reset(CUdevice dev) {
  if (!fk.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= fk.ndev) return CUDA_ERROR_INVALID_DEVICE;
  fk_ctx_drop_state(&fk.primary[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  ENTER();
  return fk_leave(release(dev));
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  ENTER();
  return fk_leave(release(dev));
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  ENTER();
  return fk_leave(reset(dev));
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  ENTER();
  return fk_leave(reset(dev));
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  ENTER();
  INIT_OR();
  if (!flags || !active) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  if (dev < 0 || dev >= fk.ndev) return fk_leave(CUDA_ERROR_INVALID_DEVICE);
  *flags = 0;
  *active = fk.primary[dev].refs > 0;
  return fk_leave(CUDA_SUCCESS);
}
