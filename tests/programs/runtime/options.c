/* options.c: allocates each size given (K/M/G suffixes), keeping them all
 * until the end, and prints one line per allocation; for limit tests
 * (CUDAPOOL_LIMIT) and warnings about bad option values. */
#include "progs.h"

static size_t parse(const char *s) {
  char *end;
  size_t v = strtoull(s, &end, 10);
  switch (*end) {
    case 'K': return v << 10;
    case 'M': return v << 20;
    case 'G': return v << 30;
    default: return v;
  }
}

int main(int argc, char **argv) {
  void *p[32] = {0};
  int n = argc - 1 < 32 ? argc - 1 : 32;
  for (int i = 0; i < n; i++) {
    size_t size = parse(argv[i + 1]);
    int rc = cudaMalloc(&p[i], size);
    printf("alloc: size=%zu rc=%d last=%d\n", size, rc, (int)cudaGetLastError());
  }
  int errors = 0;
  for (int i = 0; i < n; i++) errors += p[i] && cudaFree(p[i]) != cudaSuccess;
  printf("options: errors=%d\n", errors);
  print_pool(0);
  return 0;
}
