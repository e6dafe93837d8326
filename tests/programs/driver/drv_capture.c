/* drv_capture.c: stream capture at the driver level. A relaxed capture
 * tolerates allocations and frees, and must still end well under the shim,
 * which may then issue no barrier or fence (it would join or break the
 * capture: the fake driver invalidates it exactly as the H200 does). In
 * global mode cuMemAlloc and cuMemFree fail and invalidate the capture,
 * natively and under the shim alike, for a pool pointer too. */
#include "drvprogs.h"

int main(void) {
  drv_setup();
  CUstream s = NULL;
  CUgraph g = NULL;
  int c = D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  CUdeviceptr warm = 0, a = 0, b = 0;
  /* A pending block exists before the capture: reusing it needs a barrier. */
  int w = D.cuMemAlloc_v2(&warm, MiB) | D.cuMemFree_v2(warm);
  int begin = D.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED);
  int aa = D.cuMemAlloc_v2(&a, MiB);
  int fa = D.cuMemFree_v2(a);
  int ab = D.cuMemAlloc_v2(&b, MiB);
  int fb = D.cuMemFree_v2(b);
  int end = D.cuStreamEndCapture(s, &g);
  printf("relaxed: create=%d warm=%d begin=%d alloc=%d free=%d alloc2=%d free2=%d end=%d graph=%d\n", c, w,
         begin, aa, fa, ab, fb, end, g != NULL);

  CUdeviceptr p = 0;
  int pa = D.cuMemAlloc_v2(&p, MiB);
  begin = D.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
  aa = D.cuMemAlloc_v2(&a, MiB);
  end = D.cuStreamEndCapture(s, &g);
  printf("global_alloc: begin=%d alloc=%d end=%d graph=%d\n", begin, aa, end, g != NULL);
  begin = D.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
  int fp = D.cuMemFree_v2(p);
  end = D.cuStreamEndCapture(s, &g);
  int after = D.cuMemFree_v2(p);
  printf("global_free: alloc=%d begin=%d free=%d end=%d free_after=%d\n", pa, begin, fp, end, after);

  begin = D.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  int bogus = D.cuMemFree_v2((CUdeviceptr)0x12345);
  end = D.cuStreamEndCapture(s, &g);
  printf("thread_local: begin=%d bogus_free=%d end=%d\n", begin, bogus, end);

  int legacy = D.cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_RELAXED);
  int not_capturing = D.cuStreamEndCapture(s, &g);
  /* Destroying a capturing stream ends its capture: allocations work again. */
  begin = D.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
  int d = D.cuStreamDestroy_v2(s);
  aa = D.cuMemAlloc_v2(&a, MiB);
  printf("misc: legacy=%d not_capturing=%d begin=%d destroy=%d alloc=%d free=%d\n", legacy, not_capturing,
         begin, d, aa, D.cuMemFree_v2(a));
  print_pool(0);
  return 0;
}
