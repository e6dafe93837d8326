/* leak.c: leaves blocks allocated at exit, as a program that forgets its
 * frees does: 1 MiB allocated and freed, then 2 MiB and 1000 bytes
 * (1024 once rounded) kept. Prints "leak: errors=E". */
#include "progs.h"

int main(void) {
  void *a = NULL, *b = NULL, *c = NULL;
  int errors = (cudaMalloc(&a, MiB) != cudaSuccess) + (cudaFree(a) != cudaSuccess);
  errors += (cudaMalloc(&b, 2 * MiB) != cudaSuccess) + (cudaMalloc(&c, 1000) != cudaSuccess);
  printf("leak: errors=%d\n", errors);
  return 0;
}
