/* launch.c: what nvcc's generated host code calls (fat binary and kernel
 * registration, the <<<>>> configuration stack, __cudaLaunchKernel) plus
 * cudaLaunchKernel and the few graph calls a capture needs. Kernels never
 * run: a launch is an operation on its stream (a clock tick, or a node of a
 * capture) that touches no memory. The configuration stack is per thread,
 * as each <<<>>> pushes once and its stub pops once before launching. */
#include "fake.h"

#include <stdlib.h>

#define ENTER() fc_enter(__func__)
#define FC_MAX_CONFIG 16

typedef struct {
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
} fc_config;

static _Thread_local fc_config tl_config[FC_MAX_CONFIG];
static _Thread_local int tl_nconfig;

/* Registered __managed__ variables: host memory freed with their module. */
typedef struct fc_module {
  void **managed;
  size_t nmanaged;
} fc_module;

extern void **__cudaRegisterFatBinary(void *fatCubin);
extern void __cudaRegisterFatBinaryEnd(void **handle);
extern void __cudaUnregisterFatBinary(void **handle);
extern void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
                                   const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                                   dim3 *bDim, dim3 *gDim, int *wSize);
extern void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
                              int ext, size_t size, int constant, int global);
extern void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
                                     const char *deviceName, int ext, size_t size, int constant, int global);
extern char __cudaInitModule(void **handle);
extern unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, struct CUstream_st *stream);
extern cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream);
extern cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fn);
extern cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shmem,
                                      cudaStream_t stream);
extern cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                                           size_t shmem, cudaStream_t stream);

void **__cudaRegisterFatBinary(void *fatCubin) {
  ENTER();
  (void)fatCubin;
  fc_module *m = calloc(1, sizeof *m);
  fc_leave(cudaSuccess);
  return (void **)m;
}

void __cudaRegisterFatBinaryEnd(void **handle) {
  ENTER();
  (void)handle;
  fc_leave(cudaSuccess);
}

void __cudaUnregisterFatBinary(void **handle) {
  ENTER();
  fc_module *m = (fc_module *)handle;
  if (m) {
    for (size_t i = 0; i < m->nmanaged; i++) free(m->managed[i]);
    free(m->managed);
    free(m);
  }
  fc_leave(cudaSuccess);
}

void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize) {
  ENTER();
  (void)handle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)thread_limit;
  (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
  fc_leave(cudaSuccess);
}

void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global) {
  ENTER();
  (void)handle, (void)hostVar, (void)deviceAddress, (void)deviceName;
  (void)ext, (void)size, (void)constant, (void)global;
  fc_leave(cudaSuccess);
}

/* The runtime points the host shadow of a __managed__ variable at its
 * managed memory; host code then dereferences it, so it must be real. */
void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global) {
  ENTER();
  (void)deviceAddress, (void)deviceName, (void)ext, (void)constant, (void)global;
  fc_module *m = (fc_module *)handle;
  void *mem = calloc(1, size ? size : 1);
  void **grown = m ? realloc(m->managed, (m->nmanaged + 1) * sizeof *grown) : NULL;
  if (mem && grown && hostVarPtrAddress) {
    m->managed = grown;
    m->managed[m->nmanaged++] = mem;
    *hostVarPtrAddress = mem;
  } else {
    if (grown) m->managed = grown;
    free(mem);
  }
  fc_leave(cudaSuccess);
}

char __cudaInitModule(void **handle) {
  ENTER();
  (void)handle;
  fc_leave(cudaSuccess);
  return 1;
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, struct CUstream_st *stream) {
  ENTER();
  fc_leave(cudaSuccess);
  if (tl_nconfig == FC_MAX_CONFIG) return 1;
  tl_config[tl_nconfig++] = (fc_config){grid, block, shmem, stream};
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream) {
  ENTER();
  if (tl_nconfig == 0) return fc_leave(cudaErrorMissingConfiguration);
  fc_config c = tl_config[--tl_nconfig];
  *grid = c.grid;
  *block = c.block;
  *shmem = c.shmem;
  *(cudaStream_t *)stream = c.stream;
  return fc_leave(cudaSuccess);
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fn) {
  ENTER();
  if (!kernel || !fn) return fc_leave(cudaErrorInvalidValue);
  *kernel = (cudaKernel_t)fn;
  return fc_leave(cudaSuccess);
}

static cudaError_t launch(const void *fn, dim3 grid, dim3 block, cudaStream_t stream, int ptsz) {
  if (!fn) return cudaErrorInvalidDeviceFunction;
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
      (unsigned long long)block.x * block.y * block.z > 1024)
    return cudaErrorInvalidConfiguration;
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  int captured;
  return fc_submit(s, NULL, &captured);
}

cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t shmem,
                               cudaStream_t s) {
  ENTER();
  (void)args, (void)shmem;
  return fc_leave(launch((const void *)k, grid, block, s, 0));
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t shmem,
                                    cudaStream_t s) {
  ENTER();
  (void)args, (void)shmem;
  return fc_leave(launch((const void *)k, grid, block, s, 1));
}
cudaError_t cudaLaunchKernel(const void *fn, dim3 grid, dim3 block, void **args, size_t shmem,
                             cudaStream_t s) {
  ENTER();
  (void)args, (void)shmem;
  return fc_leave(launch(fn, grid, block, s, 0));
}
cudaError_t cudaLaunchKernel_ptsz(const void *fn, dim3 grid, dim3 block, void **args, size_t shmem,
                                  cudaStream_t s) {
  ENTER();
  (void)args, (void)shmem;
  return fc_leave(launch(fn, grid, block, s, 1));
}

/* Graphs are opaque tokens from cudaStreamEndCapture; a launch is one
 * operation on its stream. */
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  ENTER();
  free(g);
  return fc_leave(cudaSuccess);
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long flags) {
  ENTER();
  (void)flags;
  if (!exec || !g) return fc_leave(cudaErrorInvalidValue);
  *exec = (cudaGraphExec_t)malloc(64);
  return fc_leave(*exec ? cudaSuccess : cudaErrorMemoryAllocation);
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  ENTER();
  free(exec);
  return fc_leave(cudaSuccess);
}
static cudaError_t graph_launch(cudaGraphExec_t exec, cudaStream_t stream, int ptsz) {
  if (!exec) return cudaErrorInvalidValue;
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  int captured;
  return fc_submit(s, NULL, &captured);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  ENTER();
  return fc_leave(graph_launch(exec, s, 0));
}
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t s) {
  ENTER();
  return fc_leave(graph_launch(exec, s, 1));
}
