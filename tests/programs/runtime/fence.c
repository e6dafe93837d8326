/* fence.c: the reuse contract with device work held in flight
 * (fakecuda_hold_events(1): nothing completes until a synchronisation).
 * A block freed while a memset on one stream may still write it is
 * allocated again and written on another stream; the fake counts a race
 * unless that second write is ordered after the first (by stream order, a
 * barrier of events, or a synchronisation). Natively cudaFree waits for the
 * device, so every line must show races=0 under the shim too. Whether the
 * pointer came back (same=) is info only: a barrier makes early reuse safe. */
#include <pthread.h>
#include <string.h>

#include "progs.h"

struct job {
  cudaStream_t stream;
  void *ptr;
  int value;
  int keep; /* 1: leave allocated, 0: free after the memset */
  int errors;
};

static void *alloc_write_free(void *arg) {
  struct job *j = arg;
  j->errors += cudaMalloc(&j->ptr, MiB) != cudaSuccess;
  j->errors += cudaMemsetAsync(j->ptr, j->value, MiB, j->stream) != cudaSuccess;
  if (!j->keep) j->errors += cudaFree(j->ptr) != cudaSuccess;
  return NULL;
}

static void run(struct job *j, int threaded) {
  if (!threaded) {
    alloc_write_free(j);
    return;
  }
  pthread_t t;
  pthread_create(&t, NULL, alloc_write_free, j);
  pthread_join(t, NULL);
}

enum between { NOTHING, DEVICE_SYNC, NEW_STREAM };

/* First job writes and frees on s1; the second allocates and writes on s2,
 * or on a stream created after the free (NEW_STREAM), optionally after a
 * synchronisation. */
static void scenario(const char *tag, cudaStream_t s1, cudaStream_t s2, int threaded, enum between between) {
  long r0 = fake_races();
  fake_hold(1);
  struct job a = {.stream = s1, .value = 1}, b = {.stream = s2, .value = 2};
  run(&a, threaded);
  if (between == DEVICE_SYNC) cudaDeviceSynchronize();
  if (between == NEW_STREAM) cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking);
  run(&b, threaded);
  if (between == NEW_STREAM) cudaStreamDestroy(b.stream);
  fake_hold(0);
  printf("%s: errors=%d races=%ld last=%d\n", tag, a.errors + b.errors, fake_races() - r0,
         (int)cudaGetLastError());
  printf("info: %s same=%d\n", tag, a.ptr == b.ptr);
}

/* Two blocks written on s1 and freed; an allocation that only freed memory
 * can serve (the interposer may order all known streams after past work
 * then); a stream created after that; a second allocation written on the
 * new stream. A new stream is ordered after nothing, natively. */
static void stream_after_reuse(cudaStream_t s1) {
  const size_t size = MiB; /* two fill a small-block segment of a pool */
  long r0 = fake_races();
  int errors = 0;
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  fake_hold(1);
  errors += cudaMalloc(&a, size) | cudaMalloc(&b, size);
  errors += cudaMemsetAsync(a, 1, size, s1) | cudaMemsetAsync(b, 1, size, s1);
  errors += cudaFree(a) | cudaFree(b);
  errors += cudaMalloc(&c, size);
  cudaStream_t fresh;
  errors += cudaStreamCreateWithFlags(&fresh, cudaStreamNonBlocking);
  errors += cudaMalloc(&d, size);
  errors += cudaMemsetAsync(d, 2, size, fresh);
  errors += cudaFree(c) | cudaFree(d) | cudaStreamDestroy(fresh);
  fake_hold(0);
  printf("fence_stream_created_after_reuse: errors=%d races=%ld last=%d\n", errors, fake_races() - r0,
         (int)cudaGetLastError());
  printf("info: fence_stream_created_after_reuse reused=%d\n", (c == a || c == b) + (d == a || d == b));
}

static void events(void) {
  cudaStream_t s;
  cudaEvent_t e;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  fake_hold(1);
  cudaEventRecord(e, s);
  int held = cudaEventQuery(e);
  cudaStreamSynchronize(s);
  int after_stream = cudaEventQuery(e);
  cudaEventRecord(e, s);
  int held2 = cudaEventQuery(e);
  fake_hold(0);
  int after_release = cudaEventQuery(e);
  fake_hold(1);
  cudaEventRecord(e, s);
  cudaDeviceSynchronize();
  int after_device = cudaEventQuery(e);
  cudaEventRecord(e, 0);
  int legacy_held = cudaEventQuery(e);
  cudaEventSynchronize(e);
  int after_event = cudaEventQuery(e);
  fake_hold(0);
  printf("fence_events: held=%d after_stream_sync=%d held2=%d after_release=%d "
         "after_device_sync=%d legacy_held=%d after_event_sync=%d last=%d\n",
         held, after_stream, held2, after_release, after_device, legacy_held, after_event,
         (int)cudaGetLastError());
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
}

int main(void) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("fence: nofake\n");
    return 0;
  }
  cudaStream_t nb1, nb2, b1, b2;
  cudaStreamCreateWithFlags(&nb1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&nb2, cudaStreamNonBlocking);
  cudaStreamCreate(&b1);
  cudaStreamCreate(&b2);
  events();
  scenario("fence_nonblocking_threads", nb1, nb2, 1, NOTHING);
  scenario("fence_nonblocking_same_thread", nb1, nb2, 0, NOTHING);
  scenario("fence_blocking_threads", b1, b2, 1, NOTHING);
  scenario("fence_legacy_same_thread", 0, 0, 0, NOTHING);
  scenario("fence_legacy_threads", 0, 0, 1, NOTHING);
  scenario("fence_per_thread_streams", cudaStreamPerThread, cudaStreamPerThread, 1, NOTHING);
  scenario("fence_nonblocking_to_legacy", nb1, 0, 1, NOTHING);
  scenario("fence_legacy_to_nonblocking", 0, nb2, 1, NOTHING);
  scenario("fence_after_device_sync", nb1, nb2, 1, DEVICE_SYNC);
  scenario("fence_new_stream_threads", nb1, NULL, 1, NEW_STREAM);
  scenario("fence_new_stream_same_thread", nb1, NULL, 0, NEW_STREAM);
  stream_after_reuse(nb1);
  cudaStreamDestroy(nb1);
  cudaStreamDestroy(nb2);
  cudaStreamDestroy(b1);
  cudaStreamDestroy(b2);
  print_pool(0);
  return 0;
}
