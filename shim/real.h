/* real.h: the CUDA runtime's own entry points, found on first use.
 *
 * One X-macro lists every real function the shim calls (libeatmydata's
 * shape: one typedef per function, one resolver). cp_real_init() looks each
 * one up with dlsym(RTLD_NEXT), falling back to the already-loaded
 * libcudart by handle; a name that cannot be found is reported once on
 * stderr and left NULL. cp_real_ready() says whether the ones the pool
 * needs were all found: if not, the shim passes every call through.
 *
 * Threads: cp_real_init() is idempotent and safe to race (pthread_once). */
#ifndef CUDAPOOL_SHIM_REAL_H
#define CUDAPOOL_SHIM_REAL_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

/* The per-thread-default-stream twins are macros in the headers, not
 * declarations: declare the exported names the shim defines too. */
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *graph);

/* X(name, needed): needed = the pool cannot work without it. */
#define CP_REAL_FUNCS(X)                    \
  X(cudaMalloc, true)                       \
  X(cudaFree, true)                         \
  X(cudaGetDevice, true)                    \
  X(cudaSetDevice, true)                    \
  X(cudaGetDeviceCount, false)              \
  X(cudaGetLastError, true)                 \
  X(cudaEventCreateWithFlags, true)         \
  X(cudaEventRecord, true)                  \
  X(cudaEventQuery, true)                   \
  X(cudaEventSynchronize, true)             \
  X(cudaEventDestroy, true)                 \
  X(cudaStreamWaitEvent, true)              \
  X(cudaStreamSynchronize, false)           \
  X(cudaStreamSynchronize_ptsz, false)      \
  X(cudaDeviceSynchronize, false)           \
  X(cudaStreamCreate, false)                \
  X(cudaStreamCreateWithFlags, false)       \
  X(cudaStreamCreateWithPriority, false)    \
  X(cudaStreamDestroy, false)               \
  X(cudaStreamGetFlags, false)              \
  X(cudaMemGetInfo, false)                  \
  X(cudaDeviceReset, false)                 \
  X(cudaStreamBeginCapture, false)          \
  X(cudaStreamBeginCapture_ptsz, false)     \
  X(cudaStreamEndCapture, false)            \
  X(cudaStreamEndCapture_ptsz, false)

typedef struct cp_real {
#define CP_REAL_FIELD(name, needed) __typeof__(name) *name;
  CP_REAL_FUNCS(CP_REAL_FIELD)
#undef CP_REAL_FIELD
} cp_real_t;

extern cp_real_t cp_real;

void cp_real_init(void);
bool cp_real_ready(void);

#endif
