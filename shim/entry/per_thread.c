/* per_thread.c: seeing work on a per-thread default stream before it is
 * submitted. Same-thread reuse keys (device.h) assume every thread's work
 * runs on the legacy stream; a thread's per-thread stream is not ordered
 * after another thread's, so the first sign of one turns keys off for good
 * (cp_note_per_thread_stream), before the real call submits the work.
 *
 * Each entry point of per_thread.h's CP_PT_WORK is wrapped: the plain one
 * when its stream is cudaStreamPerThread, the _ptsz twin when it is that or
 * 0 (the per-thread stream in that API), the _ptds twin always (it has no
 * stream: it is the per-thread stream's). Plain PTDS entry points use the
 * legacy stream and are not wrapped. The wrapper then calls the runtime's
 * own function unchanged (found as real.c finds the others); nothing else
 * changes, whatever layer serves, so the check costs one compare.
 * The driver's twins and CU_STREAM_PER_THREAD are not seen here: see
 * docs/DESIGN.md ("Per-thread default streams") for what that leaves. */
#include "entry/per_thread.h"

#include <stdatomic.h>

#include "state/device.h"
#include "state/order.h"
#include "backend/real.h"
#include "state/shim.h"

static void *real_fn(_Atomic(void *) *slot, const char *name) {
  void *fn = atomic_load_explicit(slot, memory_order_acquire);
  if (!fn && (fn = cp_real_lookup(name))) atomic_store_explicit(slot, fn, memory_order_release);
  return fn;
}

/* Event records and stream waits touch no memory: they are seen for the
 * per-thread stream only, and are no work to the learned order. The test is
 * on a literal name and folds away. */
static inline bool ordering_only(const char *name) {
  return __builtin_strcmp(name, "cudaEventRecord") == 0 || __builtin_strcmp(name, "cudaEventRecordWithFlags") == 0 ||
         __builtin_strcmp(name, "cudaStreamWaitEvent") == 0 || __builtin_strcmp(name, "cudaEventRecord_ptsz") == 0 ||
         __builtin_strcmp(name, "cudaEventRecordWithFlags_ptsz") == 0 ||
         __builtin_strcmp(name, "cudaStreamWaitEvent_ptsz") == 0;
}

static inline bool stream_wait(const char *name) {
  return __builtin_strcmp(name, "cudaStreamWaitEvent") == 0 || __builtin_strcmp(name, "cudaStreamWaitEvent_ptsz") == 0;
}

static inline int seen(const char *name, cudaStream_t stream, cp_submit_api_t api) {
  if (!ordering_only(name)) return cp_order_submit(stream, api);
  /* The fork of a fork/join capture: the stream may join one (device.h). */
  if (stream_wait(name)) cp_stream_may_join(stream);
  if (api == CP_SUBMIT_PTDS || stream == cudaStreamPerThread || (api == CP_SUBMIT_PTSZ && !stream))
    cp_note_per_thread_stream();
  return -1;
}

#define CP_PT_CAT_(a, b) a##b
#define CP_PT_CAT(a, b) CP_PT_CAT_(a, b)
#define CP_PT_STR_(a) #a
#define CP_PT_STR(a) CP_PT_STR_(a)
#define CP_PT_SUFFIX_PTSZ _ptsz
#define CP_PT_SUFFIX_PTDS _ptds
#define CP_PT_TWIN(name, kind) CP_PT_CAT(name, CP_PT_SUFFIX_##kind)

/* The call itself, through the runtime's function of that name. */
#define CP_PT_FORWARD(fname, params, args)                                      \
  typedef cudaError_t fn_##fname params;                                         \
  static _Atomic(void *) real_##fname;                                           \
  static cudaError_t forward_##fname params {                                    \
    fn_##fname *cp_pt_real = (fn_##fname *)real_fn(&real_##fname, CP_PT_STR(fname)); \
    return cp_pt_real ? cp_pt_real args : cudaErrorNotSupported;                 \
  }

/* The wrapper: seen (order.h), the runtime's own call, then done. */
#define CP_PT_SEEN(fname, params, args, stream, api)            \
  CP_PT_FORWARD(fname, params, args)                             \
  CP_EXPORT cudaError_t fname params {                           \
    int cp_pt_token = seen(#fname, stream, api);                 \
    cudaError_t cp_pt_rc = forward_##fname args;                 \
    cp_order_submit_done(cp_pt_token);                           \
    return cp_pt_rc;                                             \
  }

/* Plain entry points name 0 for the legacy stream; the plain synchronous
 * calls (cudaMemcpy, cudaMemset: PTDS rows, whose stream is NULL) use it. */
#define CP_PT_PLAIN_PTSZ(name, params, args, stream) CP_PT_SEEN(name, params, args, stream, CP_SUBMIT_PLAIN)
#define CP_PT_PLAIN_PTDS CP_PT_PLAIN_PTSZ

/* One level more, so that the twin's name is expanded before it is pasted. */
#define CP_PT_TWIN_WRAP(twin, kind, params, args, stream) CP_PT_SEEN(twin, params, args, stream, CP_SUBMIT_##kind)

#define CP_PT_WRAP(name, kind, params, args, stream) \
  CP_PT_PLAIN_##kind(name, params, args, stream)     \
  CP_PT_TWIN_WRAP(CP_PT_TWIN(name, kind), kind, params, args, stream)
CP_PT_WORK(CP_PT_WRAP)
/* Work entry points without a per-thread twin. */
CP_ORDER_EXTRA_WORK(CP_PT_PLAIN_PTSZ)
