/* ptds_threads.c: per-thread default streams from two threads (issue 31,
 * item 2). No stream is created. Thread U writes b on its per-thread
 * stream, held in flight; the main thread frees b, allocates the same size
 * and writes it on its own per-thread stream. Natively cudaFree waits for
 * U's write. Under a pool the free returns at once, and a block reused by
 * the main thread's same-thread key would be written while U's write still
 * runs: its per-thread stream is not ordered after U's. The shim must have
 * seen U's per-thread work (the memset's own entry point) and turned
 * same-thread keys off, so the block waits for a barrier.
 *
 * Built twice: with the cudaStreamPerThread handle (this file), and as
 * ptsz_threads.c with CUDA_API_PER_THREAD_DEFAULT_STREAM, where stream 0 is
 * the per-thread stream and the program calls cudaMemsetAsync_ptsz.
 * argv[1] "copy": U writes with cudaMemcpyAsync instead of a memset;
 * "launch": with a kernel (cudaLaunchKernel). */
#include <pthread.h>
#include <string.h>

#include "progs.h"

#ifndef PT_STREAM
#define PT_STREAM cudaStreamPerThread
#endif
#ifndef PROG
#define PROG "ptds_threads"
#endif

static void *b;
static const char *how = "memset";
static int user_rc = -1;
static unsigned char host[MiB];
/* U stays alive until the main thread is done: a thread's exit would end
 * its per-thread stream in the fake, not on a device. */
static pthread_barrier_t submitted, done;

static void write_kernel(void) {}

static void *user(void *unused) {
  (void)unused;
  if (strcmp(how, "copy") == 0) {
    user_rc = cudaMemcpyAsync(b, host, MiB, cudaMemcpyHostToDevice, PT_STREAM);
  } else if (strcmp(how, "launch") == 0) {
    void *args[] = {NULL};
    user_rc = cudaLaunchKernel((const void *)write_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, PT_STREAM);
  } else {
    user_rc = cudaMemsetAsync(b, 1, MiB, PT_STREAM);
  }
  pthread_barrier_wait(&submitted);
  pthread_barrier_wait(&done);
  return NULL;
}

int main(int argc, char **argv) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("%s: nofake\n", PROG);
    return 0;
  }
  if (argc > 1) how = argv[1];
  int errors = cudaMalloc(&b, MiB) != cudaSuccess;
  cudaDeviceSynchronize();
  long before = fake_races();
  fake_hold(1);
  pthread_barrier_init(&submitted, NULL, 2);
  pthread_barrier_init(&done, NULL, 2);
  pthread_t u;
  pthread_create(&u, NULL, user, NULL);
  pthread_barrier_wait(&submitted);
  void *first = b, *c = NULL;
  errors += cudaFree(b) != cudaSuccess;
  errors += cudaMalloc(&c, MiB) != cudaSuccess;
  errors += cudaMemsetAsync(c, 2, MiB, PT_STREAM) != cudaSuccess;
  fake_hold(0);
  cudaDeviceSynchronize();
  long races = fake_races() - before;
  pthread_barrier_wait(&done);
  pthread_join(u, NULL);
  errors += cudaFree(c) != cudaSuccess;
  printf("%s: how=%s user=%d errors=%d races=%ld\n", PROG, how, user_rc, errors, races);
  printf("info: same_block=%d\n", c == first);
  print_pool(0);
  return 0;
}
