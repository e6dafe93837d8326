/* suballoc.c: the runtime calls whose meaning changes when a block is a
 * piece of a larger segment (docs/DESIGN.md, "Calls whose meaning changes
 * under sub-allocation"): cudaFreeAsync and cudaFreeAsync_ptsz, and
 * cudaIpcGetMemHandle.
 *
 * Natively every cudaMalloc is its own allocation. Under a pool two small
 * allocations made one after the other on a fresh pool are one 2 MiB
 * segment: the first starts it, the second lies inside it (two 5 MiB ones
 * share a 20 MiB segment alike). Each part frees everything it made and
 * synchronises before it ends, so the next part starts from whole free
 * segments.
 *
 * Usage: suballoc free|race|capture|ipc
 *   free     stream-ordered frees of pool blocks, of bad and foreign pointers
 *   race     with device work held (fakecuda_hold_events), a block freed in
 *            stream order after a write is allocated again and written on
 *            another stream: the fake must count no race
 *   capture  a stream-ordered free on a capturing stream
 *   ipc      IPC export of blocks that start their segment and of one that
 *            does not */
#include <pthread.h>
#include <string.h>

#include "fakecuda.h"
#include "progs.h"

#define LAST() ((int)cudaGetLastError())
#define KiB ((size_t)1 << 10)

/* Declared by no header without CUDA_API_PER_THREAD_DEFAULT_STREAM. */
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);

static void *raw_malloc(size_t n) {
  void *(*f)(size_t) = (void *(*)(size_t))prog_sym("fakecuda_raw_malloc");
  return f ? f(n) : NULL;
}

/* ---- free: stream-ordered frees --------------------------------------------------- */

static void free_async(void) {
  cudaStream_t s;
  int c = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *a = NULL, *b = NULL;
  int al = cudaMalloc(&a, 512 * KiB) | cudaMalloc(&b, 512 * KiB);
  /* The neighbour holds data the free of a must not lose. */
  int before = round_trip(b, 64 * KiB, 7);
  long live0 = fake_live(0), calls0 = fake_calls("cudaFreeAsync");
  int f = cudaFreeAsync(a, s);
  int sync = cudaStreamSynchronize(s);
  unsigned char out[4096];
  int read = cudaMemcpy(out, b, sizeof out, cudaMemcpyDeviceToHost);
  int kept = out[0] == 7 && out[1] == (unsigned char)(7 + 13);
  int set = cudaMemset(b, 0x5a, 512 * KiB);
  int again = round_trip(b, 64 * KiB, 9);
  printf("free_async: create=%d alloc=%d before=%d free=%d sync=%d neighbour_read=%d kept=%d "
         "neighbour_set=%d neighbour_ok=%d last=%d\n",
         c, al, before, f, sync, read, kept, set, again, LAST());
  printf("info: free_async real_calls=%ld live_freed=%ld\n", fake_calls("cudaFreeAsync") - calls0,
         live0 - fake_live(0));

  /* The per-thread-stream variant, stream 0 = the thread's default stream:
   * the last block of the segment goes too. */
  long calls_ptsz = fake_calls("cudaFreeAsync_ptsz");
  f = cudaFreeAsync_ptsz(b, 0);
  sync = cudaStreamSynchronize(cudaStreamPerThread);
  printf("free_async_ptsz: free=%d sync=%d last=%d\n", f, sync, LAST());
  printf("info: free_async_ptsz real_calls=%ld\n", fake_calls("cudaFreeAsync_ptsz") - calls_ptsz);

  /* Freed blocks come back, after the synchronisations above. */
  void *c1 = NULL;
  long b0 = pool_barriers();
  al = cudaMalloc(&c1, 512 * KiB);
  f = cudaFree(c1);
  printf("free_async_reuse: alloc=%d free=%d last=%d\n", al, f, LAST());
  printf("info: free_async_reuse same=%d barriers=%ld\n", c1 == a || c1 == b, pool_barriers() - b0);

  /* Bad pointers fail natively, with the pool's segment untouched. */
  void *p = NULL, *q = NULL;
  al = cudaMalloc(&p, 1000) | cudaMalloc(&q, 1000);
  int interior = cudaFreeAsync((char *)p + 256, s);
  int l1 = LAST();
  int interior_ptsz = cudaFreeAsync_ptsz((char *)q + 512, s);
  int l2 = LAST();
  int first = cudaFreeAsync(p, s);
  int twice = cudaFreeAsync(p, s);
  int l3 = LAST();
  int twice_ptsz = cudaFreeAsync_ptsz(p, s);
  int l4 = LAST();
  int bogus = cudaFreeAsync((void *)0x12345, s);
  int l5 = LAST();
  int neighbour = round_trip(q, 1000, 3);
  int fq = cudaFreeAsync(q, s);
  int l7 = LAST();
  printf("free_async_errors: alloc=%d interior=%d last=%d interior_ptsz=%d last=%d first=%d twice=%d "
         "last=%d twice_ptsz=%d last=%d bogus=%d last=%d neighbour_ok=%d free=%d last=%d\n",
         al, interior, l1, interior_ptsz, l2, first, twice, l3, twice_ptsz, l4, bogus, l5, neighbour, fq, l7);

  /* A pointer the pool did not make: the runtime's own call, unchanged. */
  void *r = raw_malloc(64 * KiB);
  long calls1 = fake_calls("cudaFreeAsync");
  long live1 = fake_live(0);
  f = cudaFreeAsync(r, s);
  int twice_foreign = cudaFreeAsync(r, s);
  int l6 = LAST();
  printf("free_async_foreign: got=%d free=%d twice=%d last=%d real_calls=%ld live_freed=%ld\n", r != NULL, f,
         twice_foreign, l6, fake_calls("cudaFreeAsync") - calls1, live1 - fake_live(0));
  sync = cudaDeviceSynchronize();
  int d = cudaStreamDestroy(s);
  printf("free_async_end: sync=%d destroy=%d last=%d\n", sync, d, LAST());
}

/* ---- race: reuse only once the freed block's work is covered ---------------------- */

struct job {
  cudaStream_t stream;
  void *ptr;
  int value;
  int free_async; /* 1: cudaFreeAsync after the write, 2: cudaFreeAsync_ptsz */
  int errors;
};

/* 12 MiB: a segment of its own under a pool, so the second job's block can
 * only be the first one's, once a barrier or a synchronisation covers it. */
#define JOB_SIZE (12 * MiB)

static void *alloc_write(void *arg) {
  struct job *j = arg;
  j->errors += cudaMalloc(&j->ptr, JOB_SIZE) != cudaSuccess;
  j->errors += cudaMemsetAsync(j->ptr, j->value, JOB_SIZE, j->stream) != cudaSuccess;
  if (j->free_async == 1) j->errors += cudaFreeAsync(j->ptr, j->stream) != cudaSuccess;
  if (j->free_async == 2) j->errors += cudaFreeAsync_ptsz(j->ptr, j->stream) != cudaSuccess;
  return NULL;
}

/* A job on a thread of its own that stays alive until released: its
 * per-thread default stream lives on (a thread's exit ends it). */
struct worker {
  pthread_t thread;
  pthread_barrier_t done, release;
  struct job *job;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  alloc_write(w->job);
  pthread_barrier_wait(&w->done);
  pthread_barrier_wait(&w->release);
  return NULL;
}

static void start(struct worker *w, struct job *j) {
  w->job = j;
  pthread_barrier_init(&w->done, NULL, 2);
  pthread_barrier_init(&w->release, NULL, 2);
  pthread_create(&w->thread, NULL, worker_main, w);
  pthread_barrier_wait(&w->done);
}

static void finish(struct worker *w) {
  pthread_barrier_wait(&w->release);
  pthread_join(w->thread, NULL);
  pthread_barrier_destroy(&w->done);
  pthread_barrier_destroy(&w->release);
}

/* The first job writes a block on s1 and frees it in s1's order; the second
 * allocates (the pool may hand out the same block) and writes on s2. Each
 * job on a thread of its own (threaded) or both on this thread. */
static void scenario(const char *tag, cudaStream_t s1, cudaStream_t s2, int variant, int threaded,
                     int device_sync) {
  long r0 = fake_races(), b0 = pool_barriers();
  fake_hold(1);
  struct job a = {.stream = s1, .value = 1, .free_async = variant}, b = {.stream = s2, .value = 2};
  struct worker wa, wb;
  if (threaded)
    start(&wa, &a);
  else
    alloc_write(&a);
  if (device_sync) a.errors += cudaDeviceSynchronize() != cudaSuccess;
  if (threaded)
    start(&wb, &b);
  else
    alloc_write(&b);
  if (threaded) {
    finish(&wa);
    finish(&wb);
  }
  fake_hold(0);
  int f = cudaFree(b.ptr);
  printf("%s: errors=%d races=%ld free=%d last=%d\n", tag, a.errors + b.errors, fake_races() - r0, f, LAST());
  printf("info: %s same=%d barriers=%ld\n", tag, a.ptr == b.ptr, pool_barriers() - b0);
}

static void race(void) {
  cudaStream_t nb1, nb2, bl;
  cudaStreamCreateWithFlags(&nb1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&nb2, cudaStreamNonBlocking);
  cudaStreamCreate(&bl);
  scenario("race_nonblocking_same_thread", nb1, nb2, 1, 0, 0);
  scenario("race_nonblocking_threads", nb1, nb2, 1, 1, 0);
  scenario("race_ptsz_nonblocking", nb1, nb2, 2, 0, 0);
  scenario("race_blocking_to_nonblocking", bl, nb2, 1, 0, 0);
  scenario("race_nonblocking_to_legacy", nb1, 0, 1, 1, 0);
  scenario("race_legacy_to_nonblocking", 0, nb2, 1, 0, 0);
  scenario("race_per_thread_streams", cudaStreamPerThread, cudaStreamPerThread, 2, 1, 0);
  scenario("race_after_device_sync", nb1, nb2, 1, 0, 1);
  cudaStreamDestroy(nb1);
  cudaStreamDestroy(nb2);
  cudaStreamDestroy(bl);
  int sync = cudaDeviceSynchronize();
  printf("race_end: sync=%d last=%d\n", sync, LAST());
}

/* ---- capture: a free recorded into a graph ---------------------------------------- */

static void capture_one(const char *tag, enum cudaStreamCaptureMode mode) {
  cudaStream_t s;
  cudaGraph_t g = NULL;
  int c = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *p = NULL, *q = NULL;
  int al = cudaMalloc(&p, 4096) | cudaMalloc(&q, 4096);
  int begin = cudaStreamBeginCapture(s, mode);
  long calls0 = fake_calls("cudaFreeAsync");
  int f = cudaFreeAsync(p, s);
  long real_calls = fake_calls("cudaFreeAsync") - calls0;
  /* A bad pointer fails on a capturing stream too. */
  int interior = cudaFreeAsync((char *)q + 512, s);
  int end = cudaStreamEndCapture(s, &g);
  int l1 = LAST();
  int graph = g != NULL;
  if (g) cudaGraphDestroy(g);
  /* The graph was never launched: p is still the program's. */
  int usable = round_trip(p, 4096, 5) && round_trip(q, 4096, 6);
  int fp = cudaFree(p);
  int fq = cudaFree(q);
  int d = cudaStreamDestroy(s);
  int sync = cudaDeviceSynchronize();
  printf("%s: create=%d alloc=%d begin=%d free=%d interior=%d end=%d graph=%d last=%d usable=%d free_p=%d "
         "free_q=%d destroy=%d sync=%d last=%d\n",
         tag, c, al, begin, f, interior, end, graph, l1, usable, fp, fq, d, sync, LAST());
  /* Under a pool the real free never sees a block: at launch a free node of
   * the segment would free every block in it. */
  printf("info: %s real_calls=%ld\n", tag, real_calls);
}

/* A second stream joins the capture through an event wait, frees there,
 * and is joined back: it is capturing as much as the first. */
static void capture_joined(void) {
  cudaStream_t s1, s2;
  cudaEvent_t e1, e2;
  cudaGraph_t g = NULL;
  int c = cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) |
          cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) |
          cudaEventCreateWithFlags(&e1, cudaEventDisableTiming) |
          cudaEventCreateWithFlags(&e2, cudaEventDisableTiming);
  void *p = NULL;
  int al = cudaMalloc(&p, 4096);
  int begin = cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed);
  int join = cudaEventRecord(e1, s1) | cudaStreamWaitEvent(s2, e1, 0);
  long calls0 = fake_calls("cudaFreeAsync");
  int f = cudaFreeAsync(p, s2);
  long real_calls = fake_calls("cudaFreeAsync") - calls0;
  int back = cudaEventRecord(e2, s2) | cudaStreamWaitEvent(s1, e2, 0);
  int end = cudaStreamEndCapture(s1, &g);
  int graph = g != NULL;
  if (g) cudaGraphDestroy(g);
  int usable = round_trip(p, 4096, 7);
  int fp = cudaFree(p);
  int d = cudaStreamDestroy(s1) | cudaStreamDestroy(s2) | cudaEventDestroy(e1) | cudaEventDestroy(e2);
  printf("capture_joined: create=%d alloc=%d begin=%d join=%d free=%d back=%d end=%d graph=%d usable=%d "
         "free_p=%d destroy=%d last=%d\n",
         c, al, begin, join, f, back, end, graph, usable, fp, d, LAST());
  printf("info: capture_joined real_calls=%ld\n", real_calls);
}

static void capture(void) {
  capture_joined();
  capture_one("capture_relaxed", cudaStreamCaptureModeRelaxed);
  capture_one("capture_global", cudaStreamCaptureModeGlobal);
  int sync = cudaDeviceSynchronize();
  printf("capture_end: sync=%d last=%d\n", sync, LAST());
}

/* ---- ipc: export of a block ------------------------------------------------------- */

static void *(*ipc_base)(const void *, size_t *);

/* Exports p, which lies in the block (or allocation) starting at start:
 * the result, the last error, whether the handle names an allocation whose
 * base is start (what the peer maps at its offset 0), and whether the call
 * left the handle as it was. */
static void export(const char *tag, void *p, void *start) {
  cudaIpcMemHandle_t h;
  memset(&h, 0xab, sizeof h);
  int rc = cudaIpcGetMemHandle(&h, p);
  int last = LAST();
  int base_is_p = rc == cudaSuccess && ipc_base(&h, NULL) == start;
  unsigned char untouched = 1;
  for (size_t i = 0; i < sizeof h.reserved; i++) untouched &= (unsigned char)h.reserved[i] == 0xab;
  printf("%s: rc=%d last=%d base_is_block=%d untouched=%d\n", tag, rc, last, base_is_p, untouched);
}

static void ipc(void) {
  ipc_base = (void *(*)(const void *, size_t *))prog_sym("fakecuda_ipc_base");
  if (!ipc_base) {
    printf("ipc: nofake\n");
    return;
  }
  void *p = NULL, *q = NULL, *r = NULL, *t = NULL, *u = NULL;
  int al = cudaMalloc(&p, 512 * KiB) | cudaMalloc(&q, 512 * KiB) | cudaMalloc(&r, 5 * MiB) |
           cudaMalloc(&t, 5 * MiB) | cudaMalloc(&u, 30 * MiB);
  printf("ipc_alloc: rc=%d\n", al);
  /* Each starts its segment under a pool. */
  export("ipc_small_first", p, p);
  export("ipc_large_first", r, r);
  export("ipc_own_segment", u, u);
  /* An interior pointer exports the whole allocation natively; under a pool
   * the segment, which starts with the block. */
  export("ipc_interior_of_first", (char *)p + 4096, p);
  /* Inside a segment: natively each is its own allocation; a pool must
   * refuse them (the peer would map the segment from its start). */
  export("info: ipc_small_second", q, q);
  export("info: ipc_large_second", t, t);
  export("info: ipc_small_second_again", (char *)q + 100, q);
  /* What the pool never made, and bad calls: native. */
  void *f = raw_malloc(64 * KiB);
  export("ipc_foreign", (char *)f + 100, f);
  int x = 0;
  export("ipc_host", &x, &x);
  export("ipc_null", NULL, NULL);
  int null_handle = cudaIpcGetMemHandle(NULL, p);
  printf("ipc_null_handle: rc=%d last=%d\n", null_handle, LAST());
  /* Past the bytes asked for, and after the free: no allocation natively;
   * under a pool still pool memory (the rounded block, a cached segment),
   * which must not be exported either. */
  void *odd = NULL;
  int a2 = cudaMalloc(&odd, 1000);
  export("ipc_past_request", (char *)odd + 1000, odd);
  int fr = cudaFree(p) | cudaFree(q) | cudaFree(r) | cudaFree(t) | cudaFree(u) | cudaFree(f) | cudaFree(odd);
  export("ipc_freed_first", r, r);
  export("ipc_freed_second", t, t);
  export("ipc_freed_own", (char *)u + 100, u);
  printf("ipc_freed_alloc: rc=%d\n", a2);
  int sync = cudaDeviceSynchronize();
  printf("ipc_end: free=%d sync=%d last=%d\n", fr, sync, LAST());
}

int main(int argc, char **argv) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("suballoc: nofake\n");
    return 0;
  }
  const char *part = argc > 1 ? argv[1] : "";
  if (strcmp(part, "free") == 0)
    free_async();
  else if (strcmp(part, "race") == 0)
    race();
  else if (strcmp(part, "capture") == 0)
    capture();
  else if (strcmp(part, "ipc") == 0)
    ipc();
  else {
    fprintf(stderr, "usage: suballoc free|race|capture|ipc\n");
    return 2;
  }
  print_pool(0);
  return 0;
}
