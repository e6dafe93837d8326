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
#include "backend/real.h"
#include "state/shim.h"

static void *real_fn(_Atomic(void *) *slot, const char *name) {
  void *fn = atomic_load_explicit(slot, memory_order_acquire);
  if (!fn && (fn = cp_real_lookup(name))) atomic_store_explicit(slot, fn, memory_order_release);
  return fn;
}

static inline void plain_PTSZ(cudaStream_t stream) {
  if (stream == cudaStreamPerThread) cp_note_per_thread_stream();
}

static inline void twin_PTSZ(cudaStream_t stream) {
  if (!stream || stream == cudaStreamPerThread) cp_note_per_thread_stream();
}

static inline void twin_PTDS(const void *no_stream) {
  (void)no_stream;
  cp_note_per_thread_stream();
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

#define CP_PT_PLAIN_PTSZ(name, params, args, stream) \
  CP_PT_FORWARD(name, params, args)                  \
  CP_EXPORT cudaError_t name params {                \
    plain_PTSZ(stream);                              \
    return forward_##name args;                      \
  }
#define CP_PT_PLAIN_PTDS(name, params, args, stream)

/* One level more, so that the twin's name is expanded before it is pasted. */
#define CP_PT_TWIN_WRAP(twin, kind, params, args, stream) CP_PT_TWIN_WRAP_(twin, kind, params, args, stream)
#define CP_PT_TWIN_WRAP_(twin, kind, params, args, stream) \
  CP_PT_FORWARD(twin, params, args)                        \
  CP_EXPORT cudaError_t twin params {                     \
    twin_##kind(stream);                                  \
    return forward_##twin args;                           \
  }

#define CP_PT_WRAP(name, kind, params, args, stream) \
  CP_PT_PLAIN_##kind(name, params, args, stream)     \
  CP_PT_TWIN_WRAP(CP_PT_TWIN(name, kind), kind, params, args, stream)
CP_PT_WORK(CP_PT_WRAP)
