/* capture_churn.c: a relaxed capture runs on one stream while another
 * thread churns: 5,000 x (cudaMalloc 4 MiB, cudaMemsetAsync, cudaFree).
 * Natively every call succeeds (a relaxed capture forbids nothing to other
 * threads). Run with a device smaller than the churn's total (the
 * integration tests give FAKECUDA_MEMORY=256M: 64 blocks of 4 MiB, far
 * fewer than 5,000), so that a pool that could not reuse its frees while
 * the capture lasts runs out of memory.
 *
 *   capture_churn CAPTURE CHURN
 *   CAPTURE: nonblocking | blocking  the stream that captures
 *   CHURN:   legacy | own            where the churn's memsets go (own: a
 *                                    non-blocking stream of the churn's)
 *
 * The capture records work before and after the churn (on the capturing
 * stream: recorded, not run) and must end successfully. Lines:
 *   capture_churn: the counts, identical natively and under the shim;
 *   pool: the pool's peak reserved bytes (MiB) and how many segments it
 *         gave back (num_device_free), under the shim only. */
#include <pthread.h>
#include <string.h>

#include "progs.h"

#define ROUNDS 5000
#define SIZE (4 * MiB)

struct churn {
  cudaStream_t stream; /* where the memsets go */
  int malloc_fail, memset_fail, free_fail;
};

static void *churn(void *arg) {
  struct churn *c = arg;
  for (int i = 0; i < ROUNDS; i++) {
    void *p = NULL;
    if (cudaMalloc(&p, SIZE) != cudaSuccess) {
      c->malloc_fail++;
      cudaGetLastError();
      continue;
    }
    c->memset_fail += cudaMemsetAsync(p, i & 0xff, 4096, c->stream) != cudaSuccess;
    c->free_fail += cudaFree(p) != cudaSuccess;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (fake_calls("cudaMalloc") < 0) {
    printf("capture_churn: nofake\n");
    return 0;
  }
  if (argc != 3 || (strcmp(argv[1], "nonblocking") && strcmp(argv[1], "blocking")) ||
      (strcmp(argv[2], "legacy") && strcmp(argv[2], "own"))) {
    fprintf(stderr, "usage: capture_churn nonblocking|blocking legacy|own\n");
    return 2;
  }
  int nonblocking = !strcmp(argv[1], "nonblocking");
  cudaStream_t cap, own = NULL;
  cudaStreamCreateWithFlags(&cap, nonblocking ? cudaStreamNonBlocking : cudaStreamDefault);
  if (!strcmp(argv[2], "own")) cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
  void *buf = NULL;
  int setup = cudaMalloc(&buf, MiB);
  struct churn c = {.stream = own ? own : cudaStreamLegacy};

  int begin = cudaStreamBeginCapture(cap, cudaStreamCaptureModeRelaxed);
  int rec1 = cudaMemsetAsync(buf, 1, MiB, cap);
  pthread_t t;
  pthread_create(&t, NULL, churn, &c);
  pthread_join(t, NULL);
  int rec2 = cudaMemsetAsync(buf, 2, MiB, cap);
  cudaGraph_t graph = NULL;
  int end = cudaStreamEndCapture(cap, &graph);

  printf("capture_churn: capture=%s churn=%s setup=%d begin=%d recorded=%d,%d "
         "malloc_fail=%d memset_fail=%d free_fail=%d end=%d graph=%d last=%d\n",
         argv[1], argv[2], setup, begin, rec1, rec2, c.malloc_fail, c.memset_fail, c.free_fail, end,
         graph != NULL, (int)cudaGetLastError());
  if (graph) cudaGraphDestroy(graph);
  cudapool_stats_t s;
  if (pool_stats(0, &s) == 0)
    printf("pool: reserved_peak_mib=%lld num_device_free=%llu num_ooms=%llu\n",
           (long long)(s.reserved_bytes.peak / (long long)MiB), (unsigned long long)s.num_device_free,
           (unsigned long long)s.num_ooms);
  else
    printf("pool: nopool\n");
  cudaFree(buf);
  if (own) cudaStreamDestroy(own);
  cudaStreamDestroy(cap);
  return 0;
}
