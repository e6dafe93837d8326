/* capture.c: allocation during stream capture (GPU-FACTS.md). Global and
 * thread-local captures prohibit cudaMalloc/cudaFree in the capturing thread
 * (global ones in every thread of global interaction mode):
 * cudaErrorStreamCaptureUnsupported, and the capture is invalidated. In
 * relaxed mode, or in a thread a capture does not concern, they succeed and
 * the capture must survive: an interposer may issue no synchronisation then
 * (the "syncs" delta). Event records and waits that leave the capturing
 * stream alone are allowed (a barrier during a relaxed capture): the fake's
 * capture rules fail and invalidate any that would join or break it, which
 * end= and graph_null= show. */
#include <pthread.h>

#include "progs.h"

#define LAST() ((int)cudaGetLastError())

static long syncs(void) {
  return fake_calls("cudaStreamSynchronize") + fake_calls("cudaStreamSynchronize_ptsz") +
         fake_calls("cudaDeviceSynchronize") + fake_calls("cudaEventSynchronize");
}

static int end_capture(cudaStream_t s, int *graph_null) {
  cudaGraph_t g = NULL;
  int rc = cudaStreamEndCapture(s, &g);
  *graph_null = g == NULL;
  if (g) cudaGraphDestroy(g);
  return rc;
}

static void global_mode(void) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *q = NULL, *p = NULL;
  int a = cudaMalloc(&q, MiB);
  int begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  int m = cudaMalloc(&p, MiB);
  int l1 = LAST();
  int f = cudaFree(q);
  int l2 = LAST();
  int gnull;
  int end = end_capture(s, &gnull);
  int l3 = LAST();
  int after = cudaFree(q);
  int pair = cudaMalloc(&p, MiB) | cudaFree(p);
  printf("capture_global: alloc=%d begin=%d malloc=%d last=%d free=%d last2=%d end=%d "
         "graph_null=%d last3=%d after_free=%d after_pair=%d\n",
         a, begin, m, l1, f, l2, end, gnull, l3, after, pair);
  cudaStreamDestroy(s);
}

static void relaxed_mode(const char *tag, unsigned flags) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, flags);
  void *q = NULL, *p = NULL, *r = NULL;
  int a = cudaMalloc(&q, MiB);
  long s0 = syncs();
  int begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  int m1 = cudaMalloc(&p, MiB);
  int ms = cudaMemsetAsync(p, 0, MiB, s);
  int f1 = cudaFree(q);
  int m2 = cudaMalloc(&r, MiB);
  int f2 = cudaFree(r);
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  int isc = cudaStreamIsCapturing(s, &st);
  long ds = syncs() - s0;
  int gnull;
  int end = end_capture(s, &gnull);
  int f3 = cudaFree(p);
  printf("%s: alloc=%d begin=%d malloc=%d memset=%d free=%d malloc2=%d free2=%d is=%d status=%d "
         "end=%d graph_null=%d free3=%d syncs=%ld last=%d\n",
         tag, a, begin, m1, ms, f1, m2, f2, isc, (int)st, end, gnull, f3, ds, LAST());
  cudaStreamDestroy(s);
}

struct other {
  int relaxed;
  int m1, l1, f1, m2, f2;
};

/* Another thread allocating while the main thread captures. */
static void *other_thread(void *arg) {
  struct other *o = arg;
  if (o->relaxed) {
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
  }
  void *p = NULL, *q = NULL;
  o->m1 = cudaMalloc(&p, MiB);
  o->l1 = LAST();
  o->f1 = cudaFree(p);
  o->m2 = cudaMalloc(&q, MiB);
  o->f2 = cudaFree(q);
  LAST();
  return NULL;
}

static void cross_thread(const char *tag, enum cudaStreamCaptureMode mode, int relaxed) {
  cudaStream_t s;
  cudaStreamCreate(&s); /* blocking: legacy-stream work would break the capture */
  struct other o = {.relaxed = relaxed};
  long s0 = syncs();
  int begin = cudaStreamBeginCapture(s, mode);
  pthread_t t;
  pthread_create(&t, NULL, other_thread, &o);
  pthread_join(t, NULL);
  long ds = syncs() - s0;
  int gnull;
  int end = end_capture(s, &gnull);
  printf("%s: begin=%d other_malloc=%d other_last=%d other_free=%d other_malloc2=%d "
         "other_free2=%d end=%d graph_null=%d syncs=%ld last=%d\n",
         tag, begin, o.m1, o.l1, o.f1, o.m2, o.f2, end, gnull, ds, LAST());
  cudaStreamDestroy(s);
}

static void thread_local_own(void) {
  cudaStream_t s;
  cudaStreamCreate(&s);
  void *p = NULL;
  int begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  int m = cudaMalloc(&p, MiB);
  int l1 = LAST();
  int gnull;
  int end = end_capture(s, &gnull);
  printf("capture_threadlocal_own: begin=%d malloc=%d last=%d end=%d graph_null=%d last2=%d\n", begin, m, l1,
         end, gnull, LAST());
  cudaStreamDestroy(s);
}

int main(void) {
  global_mode();
  relaxed_mode("capture_relaxed", cudaStreamNonBlocking);
  relaxed_mode("capture_relaxed_blocking", cudaStreamDefault);
  cross_thread("capture_threadlocal_other", cudaStreamCaptureModeThreadLocal, 0);
  cross_thread("capture_global_other", cudaStreamCaptureModeGlobal, 0);
  cross_thread("capture_global_other_relaxed", cudaStreamCaptureModeGlobal, 1);
  thread_local_own();
  void *p = NULL;
  int pair = cudaMalloc(&p, MiB) | cudaFree(p);
  printf("capture_after: pair=%d last=%d\n", pair, LAST());
  print_pool(0);
  return 0;
}
