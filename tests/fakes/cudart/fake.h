/* fake.h: the state shared by the modules of the fake CUDA runtime
 * (build/fakecudart/libcudart.so.13), a host-memory stand-in for libcudart
 * that cudapool's CPU tests run programs on.
 *
 * Invariants:
 * - One mutex (fc.lock) guards everything below. Every exported entry point
 *   takes it once through fc_enter() and drops it through fc_leave(); the
 *   fc_* helpers declared here assume it is held and never take it.
 * - Handles given to the program (streams, events) are the addresses of
 *   their records, and every handle the program passes back is looked up in
 *   a table before use, so stale or bogus handles are reported, never
 *   dereferenced.
 * - fc.allocs is sorted by base address and its ranges never overlap.
 * - Vector clocks, the host clock and access records carry information only
 *   while events are held (fakecuda_hold_events(1)); otherwise all work
 *   completes at once and they stay empty (see clock.c). */
#ifndef FAKECUDART_FAKE_H
#define FAKECUDART_FAKE_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#define FC_MAX_DEVICES 16
#define FC_ALIGN 512

/* A vector clock: v[i] is the last tick of stream index i that is known to
 * happen before the owner's next operation. */
typedef struct fc_vc {
  uint64_t *v;
  size_t n;
} fc_vc;

enum fc_stream_kind { FC_STREAM_CREATED, FC_STREAM_LEGACY, FC_STREAM_PER_THREAD };

struct fc_capture;

typedef struct fc_stream {
  UT_hash_handle hh;             /* fc.streams, only for FC_STREAM_CREATED */
  struct fc_stream *prev, *next; /* fc.all: every stream of every kind */
  cudaStream_t handle;
  unsigned idx; /* index in vector clocks, never reused */
  int device;
  unsigned flags;
  int priority;
  enum fc_stream_kind kind;
  fc_vc vc;
  struct fc_capture *cap; /* the capture this stream takes part in */
} fc_stream;

typedef struct fc_event {
  UT_hash_handle hh;
  cudaEvent_t handle;
  int device;
  unsigned flags;
  int recorded;
  uint64_t epoch; /* hold epoch of the record; 0: recorded while not held */
  unsigned sidx;  /* stream index and tick of the record */
  uint64_t tick;
  fc_vc vc;
  struct fc_capture *cap; /* set when recorded into a capture */
  double ms;              /* host time of the record, for ElapsedTime */
} fc_event;

typedef struct fc_capture {
  struct fc_capture *prev, *next;
  unsigned long long id;
  fc_stream *origin;
  enum cudaStreamCaptureMode mode;
  unsigned owner; /* fc_tid() of the thread that began it */
  int device;
  int invalidated;
} fc_capture;

enum fc_alloc_kind { FC_DEVICE, FC_MANAGED, FC_PITCH, FC_HOST };

struct fc_mempool;

typedef struct fc_alloc {
  struct fc_mempool *pool; /* the memory pool of a stream-ordered allocation, else NULL */
  char *base;
  size_t size;    /* bytes asked for */
  size_t charged; /* bytes counted against the device (FC_ALIGN multiple) */
  size_t maplen;  /* nonzero: backed by mmap of this length */
  int device;
  enum fc_alloc_kind kind;
} fc_alloc;

typedef struct fc_access {
  uintptr_t lo, hi;
  unsigned sidx;
  uint64_t tick;
  int write;
} fc_access;

typedef struct fc_counter {
  UT_hash_handle hh;
  long n;
  char name[64];
} fc_counter;

struct fc_state {
  pthread_mutex_t lock;
  int ndev;
  size_t capacity;
  size_t used[FC_MAX_DEVICES];
  /* FAKECUDA_SHARED_MEM: every process's used bytes per device, in a
   * shared file (state.c), or NULL: each process has the device alone. */
  _Atomic uint64_t *shared_used;
  struct fc_shm_proc *shared_proc; /* this process's row (shared_mem.h), or NULL: no row free */
  pid_t shared_pid; /* the process that mapped it (a forked child's exit is not its) */
  long fail_after; /* cudaMalloc calls left before injected failures; -1 off */
  fc_alloc *allocs;
  size_t nallocs, capallocs;
  fc_stream *streams; /* created streams by handle */
  fc_stream *all;
  fc_stream legacy[FC_MAX_DEVICES];
  fc_event *events;
  fc_capture *captures;
  unsigned long long next_capture_id;
  unsigned next_stream_idx;
  int hold;
  uint64_t epoch;
  fc_vc host;
  fc_access *acc;
  size_t nacc, capacc;
  long races;
  fc_counter *counters;
};

extern struct fc_state fc;

/* state.c */
void fc_enter(const char *fn);
cudaError_t fc_leave(cudaError_t err);
void fc_lock_only(void);
void fc_unlock_only(void);
unsigned fc_tid(void);
int fc_cur_device(void);
void fc_set_cur_device(int dev);
enum cudaStreamCaptureMode fc_thread_mode(void);
void fc_set_thread_mode(enum cudaStreamCaptureMode m);
cudaError_t fc_take_last_error(int reset);
long fc_count_of(const char *fn);
fc_stream *fc_per_thread_stream(int dev);
void fc_stream_link(fc_stream *s, enum fc_stream_kind kind, int dev, unsigned flags);
void fc_stream_unlink(fc_stream *s);
cudaError_t fc_stream_get(cudaStream_t h, int ptsz, fc_stream **out);
int fc_stream_blocking(const fc_stream *s);
cudaError_t fc_stream_create_on(int dev, cudaStream_t *out, unsigned flags);
int fc_stream_device(cudaStream_t h);
cudaError_t fc_stream_wait_event(cudaStream_t s, cudaEvent_t e, unsigned flags, int ptsz);
double fc_now_ms(void);

/* vc.c */
uint64_t fc_vc_get(const fc_vc *v, unsigned i);
void fc_vc_set(fc_vc *v, unsigned i, uint64_t x);
void fc_vc_join(fc_vc *dst, const fc_vc *src);
void fc_vc_copy(fc_vc *dst, const fc_vc *src);
void fc_vc_free(fc_vc *v);

/* clock.c */
void fc_clock_op(fc_stream *s, const fc_vc *extra);
void fc_clock_access(fc_stream *s, const void *p, size_t n, int write);
void fc_clock_sync_stream(fc_stream *s);
void fc_clock_sync_device(int dev);
void fc_clock_sync_event(const fc_event *e);
int fc_clock_event_done(const fc_event *e);
int fc_clock_stream_idle(const fc_stream *s);
void fc_clock_record(fc_event *e, fc_stream *s);
void fc_clock_reset(void);

/* capture.c */
cudaError_t fc_capture_unsafe(void);
cudaError_t fc_capture_legacy(int dev);
cudaError_t fc_submit(fc_stream *s, const fc_vc *extra, int *captured);
int fc_capture_active_on(int dev);
void fc_capture_invalidate_device(int dev);
void fc_capture_drop(fc_capture *c);

/* mem.c */
fc_alloc *fc_alloc_containing(const void *p);
fc_alloc *fc_alloc_exact(const void *p);
cudaError_t fc_alloc_new(size_t size, enum fc_alloc_kind kind, int dev, void **out);
void fc_alloc_release(fc_alloc *a);
void fc_alloc_drop_device(int dev);

/* pool.c */
void fc_mempool_released(fc_alloc *a);

/* streams.c */
void fc_streams_drop_device(int dev);

#endif
