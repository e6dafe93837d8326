/* real.h: the CUDA runtime's own entry points, found on first use.
 *
 * One X-macro lists every real function the shim calls (libeatmydata's
 * shape: one typedef per function, one resolver), with its parameters so
 * that real.c can give each a thunk. cp_real.NAME is that thunk, never NULL:
 * it calls the runtime's NAME, and returns cudaErrorNotSupported while NAME
 * cannot be found. The thunk counts the call in cp_inside (api.h) while the
 * runtime layer serves, so that the driver layer below passes it straight
 * through. cp_real_init() looks each name up with dlsym(RTLD_NEXT), falling
 * back to an already-loaded libcudart by handle. A process without libcudart
 * (a statically linked runtime) is looked at again when a thunk is called,
 * since the runtime may be loaded after the first look (then the runtime
 * wrappers forward and the driver layer serves); once cudaMalloc is found the
 * result is final. A runtime found incomplete is reported once on stderr; an
 * absent one silently (the driver layer may serve).
 * cp_real_complete() says whether every needed name was found; whether the
 * runtime layer then serves is layer.c's decision.
 *
 * Threads: cp_real_init() is safe to race (a mutex; the fields are written
 * only while no thunk can be called, before cudaMalloc is first found). */
#ifndef CUDAPOOL_SHIM_REAL_H
#define CUDAPOOL_SHIM_REAL_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Whether the runtime layer serves: 0 until the first call has loaded the
 * options and looked for the runtime, then 1 (pass through) or 2 (the
 * runtime layer serves). Decided and written by state/layer.c; kept here
 * because the thunks read it on every call. */
extern atomic_int cp_runtime_state;
static inline bool cp_runtime_serving(void) {
  return atomic_load_explicit(&cp_runtime_state, memory_order_relaxed) == 2;
}

/* The per-thread-default-stream twins are macros in the headers, not
 * declarations: declare the exported names the shim defines too. */
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream);
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **devPtr, size_t size, cudaMemPool_t pool, cudaStream_t stream);

/* The stream-ordered allocations and memory pools (interpose_async.c), in
 * CP_REAL_FUNCS's form. */
typedef cudaMemPool_t cp_mp_t;
typedef cudaStream_t cp_st_t;
#define CP_REAL_ASYNC_FUNCS(X)                                                                        \
  X(cudaMallocAsync, false, (void **p, size_t n, cp_st_t s), (p, n, s))                               \
  X(cudaMallocAsync_ptsz, false, (void **p, size_t n, cp_st_t s), (p, n, s))                          \
  X(cudaMallocFromPoolAsync, false, (void **p, size_t n, cp_mp_t m, cp_st_t s), (p, n, m, s))         \
  X(cudaMallocFromPoolAsync_ptsz, false, (void **p, size_t n, cp_mp_t m, cp_st_t s), (p, n, m, s))    \
  X(cudaDeviceGetDefaultMemPool, false, (cp_mp_t * m, int d), (m, d))                                 \
  X(cudaDeviceSetMemPool, false, (int d, cp_mp_t m), (d, m))                                          \
  X(cudaMemPoolSetAccess, false, (cp_mp_t m, const struct cudaMemAccessDesc *a, size_t n), (m, a, n)) \
  X(cudaMemPoolGetAttribute, false, (cp_mp_t m, enum cudaMemPoolAttr a, void *v), (m, a, v))          \
  X(cudaMemPoolTrimTo, false, (cp_mp_t m, size_t n), (m, n))

/* X(name, needed, (parameters), (arguments)): needed = the pool cannot work
 * without it. Every one returns cudaError_t. */
#define CP_REAL_FUNCS(X)                                                                        \
  X(cudaMalloc, true, (void **p, size_t n), (p, n))                                             \
  X(cudaFree, true, (void *p), (p))                                                             \
  X(cudaGetDevice, true, (int *d), (d))                                                         \
  X(cudaSetDevice, true, (int d), (d))                                                          \
  X(cudaGetDeviceCount, false, (int *n), (n))                                                   \
  X(cudaGetLastError, true, (void), ())                                                         \
  X(cudaEventCreateWithFlags, true, (cudaEvent_t * e, unsigned int f), (e, f))                  \
  X(cudaEventRecord, true, (cudaEvent_t e, cudaStream_t s), (e, s))                             \
  X(cudaEventQuery, true, (cudaEvent_t e), (e))                                                 \
  X(cudaEventSynchronize, true, (cudaEvent_t e), (e))                                           \
  X(cudaEventDestroy, true, (cudaEvent_t e), (e))                                               \
  X(cudaStreamWaitEvent, true, (cudaStream_t s, cudaEvent_t e, unsigned int f), (s, e, f))      \
  X(cudaStreamQuery, false, (cudaStream_t s), (s))                                              \
  X(cudaStreamSynchronize, false, (cudaStream_t s), (s))                                        \
  X(cudaStreamSynchronize_ptsz, false, (cudaStream_t s), (s))                                   \
  X(cudaDeviceSynchronize, false, (void), ())                                                   \
  X(cudaStreamCreate, false, (cudaStream_t * s), (s))                                           \
  X(cudaStreamCreateWithFlags, false, (cudaStream_t * s, unsigned int f), (s, f))               \
  X(cudaStreamCreateWithPriority, false, (cudaStream_t * s, unsigned int f, int p), (s, f, p))  \
  X(cudaStreamDestroy, false, (cudaStream_t s), (s))                                            \
  X(cudaStreamGetFlags, false, (cudaStream_t s, unsigned int *f), (s, f))                       \
  X(cudaMemGetInfo, false, (size_t * f, size_t * t), (f, t))                                    \
  X(cudaDeviceReset, false, (void), ())                                                         \
  X(cudaStreamBeginCapture, false, (cudaStream_t s, enum cudaStreamCaptureMode m), (s, m))      \
  X(cudaStreamBeginCapture_ptsz, false, (cudaStream_t s, enum cudaStreamCaptureMode m), (s, m)) \
  X(cudaStreamEndCapture, false, (cudaStream_t s, cudaGraph_t * g), (s, g))                     \
  X(cudaStreamEndCapture_ptsz, false, (cudaStream_t s, cudaGraph_t * g), (s, g))                \
  X(cudaFreeAsync, false, (void *p, cudaStream_t s), (p, s))                                    \
  X(cudaStreamIsCapturing, false, (cudaStream_t s, enum cudaStreamCaptureStatus * c), (s, c))   \
  X(cudaFreeAsync_ptsz, false, (void *p, cudaStream_t s), (p, s))                               \
  X(cudaIpcGetMemHandle, false, (cudaIpcMemHandle_t * h, void *p), (h, p))                      \
  X(cudaGetDeviceProperties, false, (struct cudaDeviceProp * p, int d), (p, d))                 \
  X(cudaDeviceEnablePeerAccess, false, (int d, unsigned int f), (d, f))                         \
  CP_REAL_ASYNC_FUNCS(X)

typedef struct cp_real {
#define CP_REAL_FIELD(name, needed, params, args) __typeof__(name) *name;
  CP_REAL_FUNCS(CP_REAL_FIELD)
#undef CP_REAL_FIELD
} cp_real_t;

extern cp_real_t cp_real;

void cp_real_init(void);

/* The runtime's own function of that name, as the thunks find theirs (NULL
 * while none is loaded): for wrappers that forward a call unchanged. */
void *cp_real_lookup(const char *name);

/* Every needed runtime function found (looks again until cudaMalloc is). */
bool cp_real_complete(void);

/* interpose.c: whether stream is capturing, as the runtime says (its code),
 * and the runtime's stream-ordered free calls (serve.h). */
struct cp_async_calls;
int cp_rt_capturing(uintptr_t stream, bool *capturing);
extern const struct cp_async_calls *const cp_runtime_async; /* cudaFreeAsync's */

#endif
