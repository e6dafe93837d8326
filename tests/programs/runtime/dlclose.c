/* dlclose.c: libcudapool.so loaded with dlopen (not preloaded), called, and
 * closed while the process runs on. The path of the library is argv[1].
 * The first CUDA call through the library starts cudapool's threads (the
 * live-stats publisher, and the SIGTERM reporter and trace writer when the
 * environment asks for them); a library unmapped under them would crash the
 * process the next time one of them runs. The library is linked -z nodelete
 * (mk/shim.mk): dlclose leaves it mapped, which RTLD_NOLOAD proves without
 * waiting for a thread to wake up.
 * Line: "dlclose: opened=1 live=1 closed=0 still_mapped=1" (live: the
 * live-stats file of this process existed after the call). */
#include <unistd.h>

#include "progs.h"

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  cudaError_t (*malloc_fn)(void **, size_t) =
      h ? (cudaError_t(*)(void **, size_t))dlsym(h, "cudaMalloc") : NULL;
  void *p = NULL;
  if (malloc_fn) (void)malloc_fn(&p, MiB);
  char live[96];
  snprintf(live, sizeof live, "/dev/shm/cudapool.%lu.%ld", (unsigned long)geteuid(), (long)getpid());
  int has_live = access(live, F_OK) == 0;
  int closed = h ? dlclose(h) : -1;
  void *again = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  printf("dlclose: opened=%d live=%d closed=%d still_mapped=%d\n", h != NULL, has_live, closed,
         again != NULL);
  if (again) dlclose(again);
  fflush(stdout);
  return 0;
}
