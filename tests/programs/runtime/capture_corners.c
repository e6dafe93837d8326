/* capture_corners.c: reuse around captures, with device work held in flight
 * (fakecuda_hold_events(1): nothing completes until a synchronisation). A
 * block written by a memset on one stream and freed is allocated again and
 * written on another; the fake counts a race unless that write is ordered
 * after the first. Natively cudaFree waits for the device: races=0, and a
 * capture that no call of the program breaks ends with a graph (end=0).
 *
 *   capture_corners destroy_relaxed | destroy_threadlocal | destroy_own_capture |
 *                   destroy_then_legacy_sync | end_during_other |
 *                   fork_join_nonblocking | fork_join_blocking |
 *                   destroy_joined | destroy_joined_after_end |
 *                   destroy_joined_driver | destroy_joined_driver_ptsz
 *
 * destroy_*: memsets on non-blocking stream S write p and p2, both freed; a
 *   capture begins elsewhere (relaxed on non-blocking C in this thread, or
 *   thread-local on D in another thread); S is destroyed; the capture ends;
 *   an allocation (served after a barrier, under the shim) is written on
 *   the legacy stream. destroy_own_capture: S itself begins a relaxed
 *   capture and is destroyed while capturing (the capture ends with it; end=
 *   is then C's capture status, none). destroy_then_legacy_sync: as
 *   destroy_threadlocal, then cudaStreamSynchronize(0) before the
 *   allocation, with no non-blocking stream left live: the legacy stream's
 *   synchronisation does not wait for S's work.
 * end_during_other: memsets on A write a and b, both freed; a relaxed
 *   capture on C; an allocation during it (a barrier that leaves C out
 *   makes a and b ready); another thread begins a thread-local capture on
 *   D; C's capture ends, then D's; cudaMallocAsync on C (the rest of a and
 *   b, under the shim) is written on C.
 * fork_join_*: a relaxed capture on non-blocking C forks to J (non-blocking
 *   or blocking) through an event recorded on C, and joins back; an
 *   allocation meanwhile that, under the shim, only a barrier could serve
 *   from freed blocks. The capture must end with a graph.
 * destroy_joined*: memsets on non-blocking stream J write p and p2, both
 *   freed; a relaxed capture on non-blocking C forks to J through an event
 *   recorded on C (J joins the capture); J is destroyed while joined (the
 *   capture is then invalidated, natively too) and C's capture ends, or J
 *   joins back into C, the capture ends, then J is destroyed; an allocation
 *   (served after a barrier, under the shim) is written on the legacy
 *   stream: J's work from before the join must be ordered first.
 *   destroy_joined_driver(_ptsz): J joins through the driver's
 *   cuStreamWaitEvent (its _ptsz twin), the fake libcuda beside the runtime
 *   (tests/fakes/cudart/green/), and is destroyed while joined. */
#include <cuda.h>
#include <pthread.h>
#include <string.h>

#include "progs.h"

/* Exported by libcuda; cuda.h declares it only for libcuda's own build. */
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);

static int end_capture(cudaStream_t s, int *graph_null) {
  cudaGraph_t g = NULL;
  int rc = cudaStreamEndCapture(s, &g);
  *graph_null = g == NULL;
  if (g) cudaGraphDestroy(g);
  return rc;
}

/* A thread-local capture on its own stream, begun and ended on cue: steps
 * are a barrier shared with the main thread. */
struct other_capture {
  pthread_barrier_t *step;
  int begin, end, graph_null;
};

static void *thread_local_capture(void *arg) {
  struct other_capture *o = arg;
  cudaStream_t d;
  int errors = cudaStreamCreateWithFlags(&d, cudaStreamNonBlocking) != cudaSuccess;
  o->begin = cudaStreamBeginCapture(d, cudaStreamCaptureModeThreadLocal) | errors;
  pthread_barrier_wait(o->step); /* captured: the main thread goes on */
  pthread_barrier_wait(o->step); /* the main thread is done: end it */
  o->end = end_capture(d, &o->graph_null);
  cudaStreamDestroy(d);
  return NULL;
}

enum destroy_during { RELAXED_ELSEWHERE, THREAD_LOCAL_ELSEWHERE, ITS_OWN_CAPTURE, THREAD_LOCAL_THEN_SYNC };

static void destroy_during_capture(enum destroy_during during) {
  static const char *const tags[] = {"corner_destroy_relaxed", "corner_destroy_threadlocal",
                                     "corner_destroy_own_capture", "corner_destroy_then_legacy_sync"};
  const char *tag = tags[during];
  int thread_local = during == THREAD_LOCAL_ELSEWHERE || during == THREAD_LOCAL_THEN_SYNC;
  cudaStream_t s, c = NULL; /* with thread_local, no non-blocking stream is left live */
  int errors = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess;
  if (!thread_local) errors += cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking) != cudaSuccess;
  pthread_barrier_t step;
  pthread_barrier_init(&step, NULL, 2);
  struct other_capture o = {.step = &step};
  pthread_t t;
  long r0 = fake_races();
  void *p = NULL, *p2 = NULL, *q = NULL;
  int begin = 0, end = 0, graph_null = 0;
  fake_hold(1);
  errors += cudaMalloc(&p, MiB) != cudaSuccess; /* two fill a small-block segment of a pool */
  errors += cudaMalloc(&p2, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(p, 1, MiB, s) != cudaSuccess;
  errors += cudaMemsetAsync(p2, 1, MiB, s) != cudaSuccess;
  errors += cudaFree(p) != cudaSuccess;
  errors += cudaFree(p2) != cudaSuccess;
  if (thread_local) {
    pthread_create(&t, NULL, thread_local_capture, &o);
    pthread_barrier_wait(&step);
  } else {
    begin = cudaStreamBeginCapture(during == ITS_OWN_CAPTURE ? s : c, cudaStreamCaptureModeRelaxed);
  }
  int destroy = cudaStreamDestroy(s);
  if (during == ITS_OWN_CAPTURE) {
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
    end = cudaStreamIsCapturing(c, &st) | (int)st; /* nothing else captures */
  } else if (thread_local) {
    pthread_barrier_wait(&step);
    pthread_join(t, NULL);
    begin = o.begin, end = o.end, graph_null = o.graph_null;
  } else {
    end = end_capture(c, &graph_null);
  }
  if (during == THREAD_LOCAL_THEN_SYNC) errors += cudaStreamSynchronize(0) != cudaSuccess;
  errors += cudaMalloc(&q, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(q, 2, MiB, 0) != cudaSuccess;
  errors += cudaFree(q) != cudaSuccess;
  fake_hold(0);
  printf("%s: errors=%d begin=%d destroy=%d end=%d graph_null=%d races=%ld last=%d\n", tag, errors, begin,
         destroy, end, graph_null, fake_races() - r0, (int)cudaGetLastError());
  printf("info: %s reused=%d\n", tag, q == p || q == p2);
  pthread_barrier_destroy(&step);
  if (c) cudaStreamDestroy(c);
}

static void end_during_other_capture(void) {
  cudaStream_t a, c;
  int errors = cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) != cudaSuccess;
  errors += cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking) != cudaSuccess;
  pthread_barrier_t step;
  pthread_barrier_init(&step, NULL, 2);
  struct other_capture o = {.step = &step};
  pthread_t t;
  long r0 = fake_races();
  void *x = NULL, *y = NULL, *mid = NULL, *q = NULL;
  int graph_null = 0;
  fake_hold(1);
  errors += cudaMalloc(&x, MiB) != cudaSuccess; /* two fill a small-block segment of a pool */
  errors += cudaMalloc(&y, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(x, 1, MiB, a) != cudaSuccess;
  errors += cudaMemsetAsync(y, 1, MiB, a) != cudaSuccess;
  errors += cudaFree(x) != cudaSuccess;
  errors += cudaFree(y) != cudaSuccess;
  int begin = cudaStreamBeginCapture(c, cudaStreamCaptureModeRelaxed);
  errors += cudaMalloc(&mid, MiB) != cudaSuccess;
  pthread_create(&t, NULL, thread_local_capture, &o);
  pthread_barrier_wait(&step);
  int end = end_capture(c, &graph_null);
  pthread_barrier_wait(&step);
  pthread_join(t, NULL);
  errors += cudaMallocAsync(&q, MiB, c) != cudaSuccess;
  errors += cudaMemsetAsync(q, 2, MiB, c) != cudaSuccess;
  errors += cudaFreeAsync(q, c) != cudaSuccess;
  errors += cudaFree(mid) != cudaSuccess;
  fake_hold(0);
  printf("corner_end_during_other: errors=%d begin=%d end=%d graph_null=%d other_begin=%d other_end=%d "
         "other_graph_null=%d races=%ld last=%d\n",
         errors, begin, end, graph_null, o.begin, o.end, o.graph_null, fake_races() - r0,
         (int)cudaGetLastError());
  printf("info: corner_end_during_other reused=%d\n", q == x || q == y);
  pthread_barrier_destroy(&step);
  cudaStreamDestroy(a);
  cudaStreamDestroy(c);
}

static void fork_join(int blocking) {
  const char *tag = blocking ? "corner_fork_join_blocking" : "corner_fork_join_nonblocking";
  cudaStream_t c, j;
  cudaEvent_t forked, joined;
  int errors = cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking) != cudaSuccess;
  errors += cudaStreamCreateWithFlags(&j, blocking ? cudaStreamDefault : cudaStreamNonBlocking) != cudaSuccess;
  errors += cudaEventCreateWithFlags(&forked, cudaEventDisableTiming) != cudaSuccess;
  errors += cudaEventCreateWithFlags(&joined, cudaEventDisableTiming) != cudaSuccess;
  long r0 = fake_races();
  void *buf = NULL, *x = NULL, *y = NULL, *z = NULL;
  errors += cudaMalloc(&buf, 2 * MiB) != cudaSuccess;
  errors += cudaMalloc(&x, MiB) != cudaSuccess; /* two fill a small-block segment of a pool */
  errors += cudaMalloc(&y, MiB) != cudaSuccess;
  errors += cudaFree(x) != cudaSuccess;
  errors += cudaFree(y) != cudaSuccess;
  int begin = cudaStreamBeginCapture(c, cudaStreamCaptureModeRelaxed);
  int work = cudaMemsetAsync(buf, 1, MiB, c);
  work |= cudaEventRecord(forked, c);
  work |= cudaStreamWaitEvent(j, forked, 0);
  work |= cudaMemsetAsync((char *)buf + MiB, 2, MiB, j);
  errors += cudaMalloc(&z, MiB) != cudaSuccess;
  work |= cudaEventRecord(joined, j);
  work |= cudaStreamWaitEvent(c, joined, 0);
  int graph_null = 0;
  int end = end_capture(c, &graph_null);
  errors += cudaFree(z) != cudaSuccess;
  errors += cudaFree(buf) != cudaSuccess;
  printf("%s: errors=%d begin=%d work=%d end=%d graph_null=%d races=%ld last=%d\n", tag, errors, begin, work,
         end, graph_null, fake_races() - r0, (int)cudaGetLastError());
  cudaEventDestroy(forked);
  cudaEventDestroy(joined);
  cudaStreamDestroy(c);
  cudaStreamDestroy(j);
}

/* How J waits on C's event: the runtime's call, or the driver's (the fake
 * libcuda's, linked: the program calls it as a -lcuda program would). */
enum join_by { JOIN_RUNTIME, JOIN_DRIVER, JOIN_DRIVER_PTSZ };

static int join(enum join_by by, cudaStream_t j, cudaEvent_t e) {
  if (by == JOIN_DRIVER) return cuStreamWaitEvent((CUstream)j, (CUevent)e, 0);
  if (by == JOIN_DRIVER_PTSZ) return cuStreamWaitEvent_ptsz((CUstream)j, (CUevent)e, 0);
  return cudaStreamWaitEvent(j, e, 0);
}

static void destroy_joined(int after_end, enum join_by by) {
  static const char *const tags[] = {"corner_destroy_joined", "corner_destroy_joined_driver",
                                     "corner_destroy_joined_driver_ptsz"};
  const char *tag = after_end ? "corner_destroy_joined_after_end" : tags[by];
  cudaStream_t c, j;
  cudaEvent_t forked, joined;
  int errors = cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking) != cudaSuccess;
  errors += cudaStreamCreateWithFlags(&j, cudaStreamNonBlocking) != cudaSuccess;
  errors += cudaEventCreateWithFlags(&forked, cudaEventDisableTiming) != cudaSuccess;
  errors += cudaEventCreateWithFlags(&joined, cudaEventDisableTiming) != cudaSuccess;
  long r0 = fake_races();
  void *p = NULL, *p2 = NULL, *q = NULL;
  fake_hold(1);
  errors += cudaMalloc(&p, MiB) != cudaSuccess; /* two fill a small-block segment of a pool */
  errors += cudaMalloc(&p2, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(p, 1, MiB, j) != cudaSuccess;
  errors += cudaMemsetAsync(p2, 1, MiB, j) != cudaSuccess;
  errors += cudaFree(p) != cudaSuccess;
  errors += cudaFree(p2) != cudaSuccess;
  int begin = cudaStreamBeginCapture(c, cudaStreamCaptureModeRelaxed);
  int work = cudaEventRecord(forked, c);
  work |= join(by, j, forked);
  int destroy = 0, graph_null = 0, end;
  if (after_end) {
    work |= cudaEventRecord(joined, j);
    work |= cudaStreamWaitEvent(c, joined, 0);
    end = end_capture(c, &graph_null);
    destroy = cudaStreamDestroy(j);
  } else {
    destroy = cudaStreamDestroy(j);
    end = end_capture(c, &graph_null);
  }
  errors += cudaMalloc(&q, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(q, 2, MiB, 0) != cudaSuccess;
  errors += cudaFree(q) != cudaSuccess;
  fake_hold(0);
  printf("%s: errors=%d begin=%d work=%d destroy=%d end=%d graph_null=%d races=%ld last=%d\n", tag, errors, begin,
         work, destroy, end, graph_null, fake_races() - r0, (int)cudaGetLastError());
  printf("info: %s reused=%d\n", tag, q == p || q == p2);
  cudaEventDestroy(forked);
  cudaEventDestroy(joined);
  cudaStreamDestroy(c);
}

int main(int argc, char **argv) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("capture_corners: nofake\n");
    return 0;
  }
  const char *what = argc > 1 ? argv[1] : "";
  if (!strcmp(what, "destroy_relaxed"))
    destroy_during_capture(RELAXED_ELSEWHERE);
  else if (!strcmp(what, "destroy_threadlocal"))
    destroy_during_capture(THREAD_LOCAL_ELSEWHERE);
  else if (!strcmp(what, "destroy_own_capture"))
    destroy_during_capture(ITS_OWN_CAPTURE);
  else if (!strcmp(what, "destroy_then_legacy_sync"))
    destroy_during_capture(THREAD_LOCAL_THEN_SYNC);
  else if (!strcmp(what, "end_during_other"))
    end_during_other_capture();
  else if (!strcmp(what, "fork_join_nonblocking"))
    fork_join(0);
  else if (!strcmp(what, "fork_join_blocking"))
    fork_join(1);
  else if (!strcmp(what, "destroy_joined"))
    destroy_joined(0, JOIN_RUNTIME);
  else if (!strcmp(what, "destroy_joined_after_end"))
    destroy_joined(1, JOIN_RUNTIME);
  else if (!strcmp(what, "destroy_joined_driver"))
    destroy_joined(0, JOIN_DRIVER);
  else if (!strcmp(what, "destroy_joined_driver_ptsz"))
    destroy_joined(0, JOIN_DRIVER_PTSZ);
  else {
    fprintf(stderr, "usage: capture_corners destroy_relaxed|destroy_threadlocal|destroy_own_capture|"
                    "destroy_then_legacy_sync|end_during_other|fork_join_nonblocking|fork_join_blocking|"
                    "destroy_joined|destroy_joined_after_end|destroy_joined_driver|destroy_joined_driver_ptsz\n");
    return 2;
  }
  print_pool(0);
  return 0;
}
