/* green_ctx.c: a green context's stream (cuGreenCtxStreamCreate, from the
 * fake libcuda of tests/fakes/cudart/green/) against early reuse, with
 * device work held in flight (issue 31, item a). A green context's stream
 * is non-blocking: no legacy-stream work orders it, so the pool's barriers
 * and its learned order must know it as a non-blocking stream of its
 * device. The fake counts a write not ordered after the earlier write of
 * the same bytes as a race; natively cudaFree waits for the device.
 *
 *   green_ctx green_to_legacy | legacy_to_green
 *
 * green_to_legacy: a block written on the green stream and freed; the same
 *   size allocated at once (the freed block, under the pool) and written on
 *   the legacy stream.
 * legacy_to_green: written on the legacy stream, freed, allocated again and
 *   written on the green stream.
 * Prints "CASE: errors=N races=N" and a pool line (reused: the block came
 * back). */
#include <cuda.h>
#include <string.h>

#include "progs.h"

#define N (12 * MiB) /* over 10 MiB: a segment of its own, which it fills */

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  if (fake_calls("cudaMalloc") < 0) {
    printf("%s: nofake\n", c);
    return 0;
  }
  int to_legacy = strcmp(c, "green_to_legacy") == 0;
  if (!to_legacy && strcmp(c, "legacy_to_green") != 0) {
    fprintf(stderr, "usage: green_ctx green_to_legacy|legacy_to_green\n");
    return 2;
  }
  void *first = NULL, *second = NULL;
  int errors = cudaMalloc(&first, N) != cudaSuccess;
  cudaDeviceSynchronize();
  CUgreenCtx green = NULL;
  CUstream gs = NULL;
  errors += cuGreenCtxCreate(&green, NULL, 0, CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS;
  errors += cuGreenCtxStreamCreate(&gs, green, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS;
  cudaStream_t before = to_legacy ? (cudaStream_t)gs : 0, after = to_legacy ? 0 : (cudaStream_t)gs;
  fake_hold(1);
  errors += cudaMemsetAsync(first, 1, N, before) != cudaSuccess;
  errors += cudaFree(first) != cudaSuccess;
  errors += cudaMalloc(&second, N) != cudaSuccess;
  errors += cudaMemsetAsync(second, 2, N, after) != cudaSuccess;
  long races = fake_races();
  fake_hold(0);
  cudaDeviceSynchronize();
  printf("%s: errors=%d races=%ld\n", c, errors, races);
  cudapool_stats_t s;
  if (pool_stats(0, &s) == 0)
    printf("pool: reused=%d immediate=%llu barriers=%llu order_waits=%llu\n", second == first,
           (unsigned long long)s.num_immediate_reuse, (unsigned long long)s.num_barriers,
           (unsigned long long)s.num_order_waits);
  cudaFree(second);
  cudaStreamDestroy((cudaStream_t)gs);
  cuGreenCtxDestroy(green);
  return 0;
}
