/* destroyed.c: streams destroyed with something still attached to them.
 *
 * destroyed_blocking_busy: with device work held (fakecuda_hold_events(1)),
 * two blocks that fill a small-block segment are written on a blocking
 * stream, freed, and the stream destroyed while those writes still run; a
 * third allocation (served after a barrier by the coalesced segment, under
 * the shim) is written on a non-blocking stream. The legacy stream waits
 * only for live blocking streams, so a barrier issued after the destroy
 * covers the writes only if the destroy ordered them before the legacy
 * stream. Natively cudaFree waits for the device: races=0, and so under the
 * shim.
 *
 * destroyed_capturing: a global-mode capture begun on a stream that is then
 * destroyed while it captures (the fake drops the capture with its stream);
 * then cudaMalloc/cudaFree pairs work natively, and the pool must serve
 * them: the capture is over, so no strict capture forbids it any more
 * (`pool: served=` counts the pairs the pool served, hits or misses). */
#include <string.h>

#include "progs.h"

static void blocking_busy(void) {
  cudaStream_t blocking, other;
  int errors = cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess;
  errors += cudaStreamCreate(&blocking) != cudaSuccess;
  long r0 = fake_races();
  void *a = NULL, *b = NULL, *c = NULL;
  fake_hold(1);
  errors += cudaMalloc(&a, MiB) != cudaSuccess; /* two fill a small-block segment */
  errors += cudaMalloc(&b, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(a, 1, MiB, blocking) != cudaSuccess;
  errors += cudaMemsetAsync(b, 1, MiB, blocking) != cudaSuccess;
  errors += cudaFree(a) != cudaSuccess;
  errors += cudaFree(b) != cudaSuccess;
  errors += cudaStreamDestroy(blocking) != cudaSuccess;
  errors += cudaMalloc(&c, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(c, 2, MiB, other) != cudaSuccess;
  errors += cudaFree(c) != cudaSuccess;
  fake_hold(0);
  printf("destroyed_blocking_busy: errors=%d races=%ld last=%d\n", errors, fake_races() - r0,
         (int)cudaGetLastError());
  printf("info: destroyed_blocking_busy reused=%d\n", c == a || c == b);
  cudaStreamDestroy(other);
}

static unsigned long long pool_served(void) {
  cudapool_stats_t s;
  return pool_stats(0, &s) == 0 ? s.hits + s.misses : 0;
}

static void capturing(int nonblocking) {
  const char *tag = nonblocking ? "destroyed_capturing_nonblocking" : "destroyed_capturing_blocking";
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, nonblocking ? cudaStreamNonBlocking : cudaStreamDefault);
  int begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  int destroy = cudaStreamDestroy(s);
  int last = cudaGetLastError();
  enum { PAIRS = 8 };
  unsigned long long served0 = pool_served();
  int errors = 0;
  for (int i = 0; i < PAIRS; i++) {
    void *p = NULL;
    errors += cudaMalloc(&p, MiB) != cudaSuccess;
    errors += cudaFree(p) != cudaSuccess;
  }
  printf("%s: begin=%d destroy=%d last=%d errors=%d last2=%d\n", tag, begin, destroy, last, errors,
         (int)cudaGetLastError());
  printf("pool: %s served=%llu of=%d\n", tag, pool_served() - served0, PAIRS);
}

int main(int argc, char **argv) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("destroyed: nofake\n");
    return 0;
  }
  const char *what = argc > 1 ? argv[1] : "";
  if (!strcmp(what, "blocking_busy"))
    blocking_busy();
  else if (!strcmp(what, "capturing_nonblocking"))
    capturing(1);
  else if (!strcmp(what, "capturing_blocking"))
    capturing(0);
  else {
    fprintf(stderr, "usage: destroyed blocking_busy|capturing_nonblocking|capturing_blocking\n");
    return 2;
  }
  return 0;
}
