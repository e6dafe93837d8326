/* torch_entry.c: PyTorch's pluggable-allocator entry points,
 * cudapool_torch_alloc(size, device, stream) and cudapool_torch_free(ptr,
 * size, device, stream), called as torch.cuda.memory.CUDAPluggableAllocator
 * calls them: the library dlopen'ed by path (argv[1]), with or without the
 * preload.
 *
 * Usage: torch_entry LIBRARY
 * Prints the codes and contents seen; info: lines say whether the pool
 * served (the fake runtime's own cudaMallocAsync was not called) and reused
 * a block on its stream at once. */
#include <string.h>

#include "fakecuda.h"
#include "progs.h"

#define LAST() ((int)cudaGetLastError())

typedef void *alloc_fn(ssize_t, int, cudaStream_t);
typedef void free_fn(void *, ssize_t, int, cudaStream_t);

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *lib = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
  alloc_fn *alloc = lib ? (alloc_fn *)dlsym(lib, "cudapool_torch_alloc") : NULL;
  free_fn *release = lib ? (free_fn *)dlsym(lib, "cudapool_torch_free") : NULL;
  printf("torch_load: found=%d\n", alloc && release);
  if (!alloc || !release) return 1;
  cudaStream_t s;
  int c = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  long calls0 = fake_calls("cudaMallocAsync");
  void *a = alloc(1 << 20, 0, s);
  int wrote = a && cudaMemsetAsync(a, 7, 1 << 20, s) == cudaSuccess;
  release(a, 1 << 20, 0, s);
  void *b = alloc(1 << 20, 0, s);
  unsigned char byte = 0;
  int set = b && cudaMemsetAsync(b, 9, 1 << 20, s) == cudaSuccess;
  int read = b && cudaMemcpyAsync(&byte, b, 1, cudaMemcpyDeviceToHost, s) == cudaSuccess;
  int sync = cudaStreamSynchronize(s);
  release(b, 1 << 20, 0, s);
  void *z = alloc(0, 0, s);
  printf("torch_pairs: create=%d got=%d wrote=%d set=%d read=%d byte=%d sync=%d zero_is_null=%d last=%d\n", c,
         a && b, wrote, set, read, byte, sync, z == NULL, LAST());
  printf("info: torch_pairs real_calls=%ld same=%d\n", fake_calls("cudaMallocAsync") - calls0, a == b);
  int sync2 = cudaStreamSynchronize(s);
  int d = cudaStreamDestroy(s);
  printf("torch_end: sync=%d destroy=%d last=%d\n", sync2, d, LAST());
  return 0;
}
