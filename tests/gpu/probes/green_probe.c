/* green_probe.c: what a barrier may do with a green context's stream, on a
 * real GPU (issue 31, item a). Plain C over the driver API, libcuda opened
 * at run time, so it builds without nvcc. With the primary context current
 * (as cudapool's barriers run): an event of the primary context recorded on
 * a stream of a green context, the legacy stream waiting on it, the green
 * stream waiting on an event recorded on the legacy stream, and whether the
 * legacy wait really orders: the green stream is held by a stream memory
 * wait on a host flag, and a value the legacy stream writes after its wait
 * must not land before the flag is released. Prints one line per check:
 *   green: <check> rc=N                 (0: CUDA_SUCCESS)
 *   green: ordered=1|0                  (1: the legacy write waited)
 * SKIP when the driver lacks green contexts or stream memory operations. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#define F(name) static __typeof__(name) *p_##name
F(cuInit); F(cuDeviceGet); F(cuDevicePrimaryCtxRetain); F(cuCtxSetCurrent); F(cuDeviceGetDevResource);
F(cuDevResourceGenerateDesc); F(cuGreenCtxCreate); F(cuGreenCtxStreamCreate); F(cuEventCreate);
F(cuEventRecord); F(cuStreamWaitEvent); F(cuStreamQuery); F(cuStreamGetDevice); F(cuMemHostAlloc);
F(cuMemHostGetDevicePointer_v2); F(cuStreamWaitValue32_v2); F(cuStreamWriteValue32_v2); F(cuCtxSynchronize);
F(cuStreamSynchronize);
#undef F

int main(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) { printf("green: SKIP no libcuda\n"); return 0; }
#define L(name) p_##name = (__typeof__(p_##name))dlsym(h, #name)
  L(cuInit); L(cuDeviceGet); L(cuDevicePrimaryCtxRetain); L(cuCtxSetCurrent); L(cuDeviceGetDevResource);
  L(cuDevResourceGenerateDesc); L(cuGreenCtxCreate); L(cuGreenCtxStreamCreate); L(cuEventCreate);
  L(cuEventRecord); L(cuStreamWaitEvent); L(cuStreamQuery); L(cuStreamGetDevice); L(cuMemHostAlloc);
  L(cuMemHostGetDevicePointer_v2); L(cuStreamWaitValue32_v2); L(cuStreamWriteValue32_v2); L(cuCtxSynchronize);
  L(cuStreamSynchronize);
  if (!p_cuGreenCtxCreate || !p_cuStreamWaitValue32_v2) { printf("green: SKIP no green contexts\n"); return 0; }
  CUdevice dev;
  CUcontext primary;
  if (p_cuInit(0) || p_cuDeviceGet(&dev, 0) || p_cuDevicePrimaryCtxRetain(&primary, dev) ||
      p_cuCtxSetCurrent(primary)) { printf("green: SKIP no device\n"); return 0; }
  CUdevResource res;
  CUdevResourceDesc desc;
  CUgreenCtx g;
  CUstream gs;
  int rc = (int)p_cuDeviceGetDevResource(dev, &res, CU_DEV_RESOURCE_TYPE_SM);
  rc = rc ? rc : (int)p_cuDevResourceGenerateDesc(&desc, &res, 1);
  rc = rc ? rc : (int)p_cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
  rc = rc ? rc : (int)p_cuGreenCtxStreamCreate(&gs, g, CU_STREAM_NON_BLOCKING, 0);
  if (rc) { printf("green: SKIP green stream rc=%d\n", rc); return 0; }
  p_cuCtxSetCurrent(primary);
  CUdevice sdev = -1;
  printf("green: stream_get_device rc=%d device=%d\n", p_cuStreamGetDevice ? (int)p_cuStreamGetDevice(gs, &sdev) : -1,
         (int)sdev);
  CUevent on_green, on_legacy;
  p_cuEventCreate(&on_green, CU_EVENT_DISABLE_TIMING);
  p_cuEventCreate(&on_legacy, CU_EVENT_DISABLE_TIMING);
  volatile unsigned *flags;
  CUdeviceptr dflags;
  if (p_cuMemHostAlloc((void **)&flags, 8, CU_MEMHOSTALLOC_DEVICEMAP) ||
      p_cuMemHostGetDevicePointer_v2(&dflags, (void *)flags, 0)) { printf("green: SKIP host memory\n"); return 0; }
  flags[0] = 0, flags[1] = 0;
  /* The green stream held until the host writes flags[0]. */
  int hold = (int)p_cuStreamWaitValue32_v2(gs, dflags, 1, CU_STREAM_WAIT_VALUE_GEQ);
  printf("green: hold rc=%d\n", hold);
  printf("green: query_busy rc=%d\n", (int)p_cuStreamQuery(gs));
  int rec = (int)p_cuEventRecord(on_green, gs);
  printf("green: record_primary_event_on_green rc=%d\n", rec);
  printf("green: legacy_waits_green_event rc=%d\n", (int)p_cuStreamWaitEvent(CU_STREAM_LEGACY, on_green, 0));
  printf("green: record_on_legacy rc=%d\n", (int)p_cuEventRecord(on_legacy, CU_STREAM_LEGACY));
  printf("green: green_waits_legacy_event rc=%d\n", (int)p_cuStreamWaitEvent(gs, on_legacy, 0));
  p_cuStreamWriteValue32_v2(CU_STREAM_LEGACY, dflags + 4, 1, 0);
  usleep(200000);
  int early = flags[1] != 0;
  flags[0] = 1;
  p_cuCtxSynchronize();
  p_cuStreamSynchronize(gs);
  printf("green: ordered=%d\n", hold == 0 && rec == 0 ? !early : -1);
  return 0;
}
