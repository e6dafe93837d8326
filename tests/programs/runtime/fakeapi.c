/* fakeapi.c: the rest of the runtime API the fake serves, one line per
 * area, so a test can pin the fake's behaviour and check that the shim,
 * which intercepts streams, cudaMemGetInfo and cudaDeviceReset, changes
 * none of it: devices and versions, error names, pointer attributes of an
 * interior pointer, copies inside and outside an allocation, streams and
 * events (bogus handles, elapsed time, not-ready is not an error), and the
 * handles cudaDeviceReset destroys. */
#include <string.h>

#include "progs.h"

#define LAST() ((int)cudaGetLastError())

int main(void) {
  int count = 0, drv = 0, rt = 0, major = 0;
  struct cudaDeviceProp prop;
  int c = cudaGetDeviceCount(&count);
  int pr = cudaGetDeviceProperties(&prop, 0);
  int bad = cudaSetDevice(count);
  int l1 = LAST();
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  printf("device: count=%d rc=%d props=%d name_ok=%d mem_ok=%d bad_set=%d last=%d driver=%d "
         "runtime=%d major=%d\n",
         count, c, pr, strcmp(prop.name, "cudapool fake device") == 0 || pr != 0, prop.totalGlobalMem > 0,
         bad, l1, drv, rt, major);
  printf("names: %s %s %s \"%s\"\n", cudaGetErrorName(cudaErrorInvalidValue),
         cudaGetErrorName(cudaErrorStreamCaptureInvalidated), cudaGetErrorName((cudaError_t)12345),
         cudaGetErrorString(cudaErrorMemoryAllocation));

  void *p = NULL;
  struct cudaPointerAttributes a;
  int al = cudaMalloc(&p, MiB);
  int at = cudaPointerGetAttributes(&a, (char *)p + 4096);
  int type = a.type, dev = a.device;
  int x = 0;
  cudaPointerGetAttributes(&a, &x);
  printf("attributes: alloc=%d rc=%d type=%d device=%d host_type=%d\n", al, at, type, dev, (int)a.type);

  char in[64] = "cudapool", out[64] = {0};
  int h2d = cudaMemcpy((char *)p + 100, in, sizeof in, cudaMemcpyHostToDevice);
  int d2h = cudaMemcpy(out, (char *)p + 100, sizeof out, cudaMemcpyDeviceToHost);
  /* Bounds are checked on a managed allocation: a pool's block lies inside
   * a larger driver allocation, so a pooled pointer's overrun is invisible
   * to the runtime (as under any caching allocator). */
  void *m = NULL;
  cudaMallocManaged(&m, MiB, cudaMemAttachGlobal);
  int over = cudaMemcpy((char *)m + MiB - 8, in, sizeof in, cudaMemcpyHostToDevice);
  l1 = LAST();
  int set_bad = cudaMemset((char *)m - 64, 0, 16);
  printf("copy: h2d=%d d2h=%d equal=%d overrun=%d last=%d memset_outside=%d last2=%d\n", h2d, d2h,
         strcmp(in, out) == 0, over, l1, set_bad, LAST());
  cudaFree(m);

  cudaStream_t s;
  cudaEvent_t e0, e1;
  int sc = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, s);
  cudaEventRecord(e1, s);
  float ms = -1;
  int el = cudaEventElapsedTime(&ms, e0, e1);
  fake_hold(1);
  cudaEventRecord(e1, s);
  int nr = cudaEventQuery(e1);
  int l2 = LAST();
  fake_hold(0);
  int bogus = cudaStreamSynchronize((cudaStream_t)0x1234);
  l1 = LAST();
  unsigned flags = 9;
  cudaStreamGetFlags(s, &flags);
  printf("streams: create=%d elapsed=%d ms_ok=%d not_ready=%d last=%d bogus=%d last2=%d flags=%u\n", sc, el,
         ms >= 0, nr, l2, bogus, l1, flags);

  int rs = cudaDeviceReset();
  int sd = cudaStreamDestroy(s);
  l1 = LAST();
  int ed = cudaEventDestroy(e0);
  l2 = LAST();
  int fr = cudaFree(p);
  printf("reset: rc=%d stream_destroy=%d last=%d event_destroy=%d last2=%d free=%d last3=%d\n", rs, sd, l1,
         ed, l2, fr, LAST());
  return 0;
}
