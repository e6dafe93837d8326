/* fk.h: the state shared by the modules of the fake CUDA driver
 * (build/fakecuda/libcuda.so.1), a host-memory stand-in for libcuda that
 * cudapool's driver-level CPU tests run programs on. Modelled on the fake
 * runtime (tests/fakes/cudart), smaller: no clocks, every piece of work
 * completes at once.
 *
 * What it models: cuInit; devices; primary contexts (retain count, reset)
 * and created contexts, with a per-thread context stack; memory (cuMemAlloc,
 * pitched, cuMemFree, cuMemGetInfo, memset/memcpy to check contents; in
 * ptr.c the stream-ordered free, address ranges, pointer attributes and IPC
 * handles, which describe a whole allocation from any address in it); virtual
 * memory management (vmm.c: reservations, pages, access); streams
 * and events; work on a stream (work.c: a kernel launch that runs nothing,
 * an asynchronous memset and copy); the stream-capture rules a barrier issued at the wrong time
 * would trip (the same rules as tests/fakes/cudart/capture.c, thread
 * interaction mode always global); cuGetProcAddress with versions and the
 * per-thread flag. Error codes follow the driver's documentation; where a
 * code is not documented (cuMemFree(0) succeeds here) the shim forwards that
 * case unchanged anyway.
 *
 * Invariants:
 * - One mutex (fk.lock) guards everything below. Every exported entry point
 *   takes it once through fk_enter() and drops it through fk_leave(); the
 *   fk_* helpers assume it is held.
 * - Handles given out (streams, events, created contexts) are addresses of
 *   their records and are looked up in a table before use; primary contexts
 *   are the fixed records fk.primary[d].
 * - fk.allocs is sorted by base address and its ranges never overlap; every
 *   allocation belongs to a live context. */
#ifndef FAKECUDA_FK_H
#define FAKECUDA_FK_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

/* Exported by libcuda (and ptr.c), declared by no header. */
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

#define FK_MAX_DEVICES 8
#define FK_ALIGN 512
#define FK_VERSION 13000

typedef struct fk_ctx fk_ctx;
typedef struct fk_capture fk_capture;

enum fk_stream_kind { FK_CREATED, FK_LEGACY, FK_PER_THREAD };

typedef struct fk_stream {
  UT_hash_handle hh; /* fk.streams, FK_CREATED only */
  CUstream handle;
  fk_ctx *ctx;
  unsigned flags;
  enum fk_stream_kind kind;
  fk_capture *cap; /* the capture it takes part in */
} fk_stream;

struct fk_ctx {
  UT_hash_handle hh; /* fk.ctxs, created contexts only */
  CUcontext handle;
  int device;
  int primary;
  int refs;                     /* primary: retain count; active while > 0 */
  int alive;                    /* created: until destroyed */
  fk_stream legacy, per_thread; /* one per-thread stream per context: enough here */
};

struct fk_capture {
  fk_capture *prev, *next;
  fk_stream *origin;
  CUstreamCaptureMode mode;
  unsigned owner;
  int invalidated;
};

typedef struct fk_event {
  UT_hash_handle hh;
  CUevent handle;
  fk_ctx *ctx;
  unsigned flags;
  fk_capture *cap; /* recorded into a capture */
} fk_event;

struct fk_mempool;

typedef struct fk_alloc {
  char *base;
  size_t size, charged, maplen;
  fk_ctx *ctx;
  struct fk_mempool *pool; /* the memory pool of a stream-ordered allocation, else NULL */
} fk_alloc;

typedef struct fk_counter {
  UT_hash_handle hh;
  long n;
  char name[64];
} fk_counter;

struct fk_state {
  pthread_mutex_t lock;
  int initialized;
  int ndev;
  size_t capacity;
  size_t used[FK_MAX_DEVICES];
  long fail_after; /* allocations left before injected failures; -1 off */
  int trampolines; /* FAKECU_PROC_TRAMPOLINES: cuGetProcAddress hands out wrappers */
  int trace_proc;  /* FAKECU_TRACE_PROC: print every cuGetProcAddress */
  fk_ctx primary[FK_MAX_DEVICES];
  fk_ctx *ctxs;
  fk_alloc *allocs;
  size_t nallocs, capallocs;
  fk_stream *streams;
  fk_event *events;
  fk_capture *captures;
  fk_counter *counters;
};

extern struct fk_state fk;

/* state.c */
void fk_enter(const char *fn);
CUresult fk_leave(CUresult rc);
void fk_lock_only(void);
void fk_unlock_only(void);
long fk_count_of(const char *fn);
unsigned fk_tid(void);
fk_ctx *fk_current(void); /* NULL: no current context */
/* The common checks: initialised, a current context. */
CUresult fk_ready(fk_ctx **ctx);
void fk_ctx_drop_state(fk_ctx *c);

/* mem.c */
fk_alloc *fk_alloc_containing(uintptr_t p, size_t n);
CUresult fk_alloc_new(fk_ctx *ctx, size_t size, CUdeviceptr *out);
void fk_alloc_drop_ctx(fk_ctx *ctx);
fk_alloc *fk_alloc_exact(uintptr_t p);
void fk_alloc_release(fk_alloc *a);

/* pool.c */
void fk_mempool_released(fk_alloc *a);
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream);

/* streams.c */
CUresult fk_stream_get(fk_ctx *ctx, CUstream h, int per_thread_api, fk_stream **out);
CUresult fk_capture_unsafe(void);
CUresult fk_submit(fk_stream *s);
void fk_streams_drop_ctx(fk_ctx *ctx);

/* vmm.c: [p, p+n) is in mapped pages made accessible */
#include <stdbool.h>
bool fk_vmm_accessible(uintptr_t p, size_t n);

/* proc.c */
void *fk_export(const char *name);

/* work.c: cuFutureLaunch, which proc.c hands out (declared by no cuda.h) */
CUresult fk_future_launch(CUstream h);

#endif
