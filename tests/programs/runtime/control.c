/* control.c: cudapool's control API reached through dlsym, as a program
 * that links nothing of cudapool would. Natively it prints
 * "control: nopool". Under the shim each line reports return codes (0 or an
 * errno) and the stats that each call must have changed. */
#include <errno.h>
#include <string.h>

#include "progs.h"

typedef int (*stats_fn)(int, cudapool_stats_t *);

static cudapool_stats_t stats(stats_fn f, int dev) {
  cudapool_stats_t s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  s.version = CUDAPOOL_STATS_VERSION;
  if (f(dev, &s) != 0) printf("control: stats_failed\n");
  return s;
}

/* First non-blank byte of what print_stats wrote, and its length. */
static int printed(int (*print)(FILE *, const char *), const char *fmt, int *first, long *len) {
  FILE *f = tmpfile();
  if (!f) return -1;
  int rc = print(f, fmt);
  fflush(f);
  *len = ftell(f);
  rewind(f);
  int c;
  while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\t') {
  }
  *first = c;
  fclose(f);
  return rc;
}

int main(void) {
  stats_fn st = (stats_fn)prog_sym("cudapool_stats");
  int (*version)(void) = (int (*)(void))prog_sym("cudapool_version");
  int (*empty)(int) = (int (*)(int))prog_sym("cudapool_empty_cache");
  int (*reset_peak)(int) = (int (*)(int))prog_sym("cudapool_reset_peak");
  int (*record)(const void *, cudaStream_t) =
      (int (*)(const void *, cudaStream_t))prog_sym("cudapool_record_stream");
  int (*set_limit)(int, size_t) = (int (*)(int, size_t))prog_sym("cudapool_set_limit");
  int (*print)(FILE *, const char *) = (int (*)(FILE *, const char *))prog_sym("cudapool_print_stats");
  if (!st || !version || !empty || !reset_peak || !record || !set_limit || !print) {
    printf("control: nopool\n");
    return 0;
  }
  printf("control: version=%d\n", version());

  /* The first allocation makes sure the device has a pool to ask about. */
  void *p = NULL, *q = NULL;
  cudaMalloc(&p, MiB);
  cudaFree(p);
  cudapool_stats_t s;
  memset(&s, 0, sizeof s);
  s.size = 3;
  s.version = CUDAPOOL_STATS_VERSION;
  int badsize = st(0, &s);
  s.size = sizeof s;
  s.version = 999;
  int badver = st(0, &s);
  s.version = CUDAPOOL_STATS_VERSION;
  printf("control: stats=%d badsize=%d badver=%d null=%d nodev=%d\n", st(0, &s), badsize, badver, st(0, NULL),
         st(99, &s));

  cudaMalloc(&q, MiB);
  s = stats(st, 0);
  printf("control: hits=%llu misses=%llu allocated=%lld\n", (unsigned long long)s.hits,
         (unsigned long long)s.misses, (long long)s.allocated_bytes.current);

  cudaStream_t stream;
  cudaStreamCreate(&stream);
  int rec = record(q, stream);
  int rec_bogus = record((void *)0x12345, stream);
  cudaFree(q);
  cudaStreamDestroy(stream);
  printf("control: record=%d record_bogus=%d\n", rec, rec_bogus);

  int e = empty(-1);
  s = stats(st, 0);
  printf("control: empty=%d reserved_after=%lld live_after=%ld\n", e, (long long)s.reserved_bytes.current,
         fake_live(0));

  cudaMalloc(&p, 2 * MiB);
  cudaFree(p);
  int rp = reset_peak(0);
  s = stats(st, 0);
  printf("control: reset_peak=%d peak_after=%lld\n", rp, (long long)s.allocated_bytes.peak);

  int sl = set_limit(0, 4 * MiB);
  int over = cudaMalloc(&p, 8 * MiB);
  int last = (int)cudaGetLastError();
  int sl0 = set_limit(0, 0);
  int under = cudaMalloc(&p, 8 * MiB);
  cudaFree(p);
  printf("control: set_limit=%d over=%d last=%d unlimited=%d after=%d\n", sl, over, last, sl0, under);

  int first = 0;
  long len = 0;
  int pt = printed(print, "text", &first, &len);
  printf("control: print_text=%d text_nonempty=%d\n", pt, len > 0);
  pt = printed(print, "json", &first, &len);
  printf("control: print_json=%d json_object=%d\n", pt, first == '{');
  printf("control: print_bad=%d\n", printed(print, "xml", &first, &len));
  return 0;
}
