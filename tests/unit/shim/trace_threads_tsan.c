/* trace_threads_tsan.c: the trace recorder under ThreadSanitizer (Criterion
 * cannot start under it, Snaipe/Criterion#274). Four threads record events
 * while the background writer flushes, two of them exit before the close;
 * the file must then hold every event as one whole line. Then the same into
 * a gzip'd file (the writer's deflate state). Prints
 * "trace_threads_tsan: 2 passed, 0 failed" or what broke (exit 1). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "trace.h"

#define THREADS 4
#define EVENTS 50000

static void *record(void *arg) {
  uintptr_t base = 0x100000 * (uintptr_t)(1 + (intptr_t)arg);
  for (uintptr_t i = 0; i < EVENTS / 2; i++) {
    cp_trace_alloc(base + i * 512, 512, 0);
    cp_trace_free(base + i * 512, 512, 0);
  }
  return NULL;
}

static int fail(const char *why) {
  fprintf(stderr, "trace_threads_tsan: %s\n", why);
  printf("trace_threads_tsan: 0 passed, 1 failed\n");
  return 1;
}

/* Records from THREADS threads into path; NULL or what broke. */
static const char *one_file(const char *path) {
  if (cp_trace_open(path) != 0) return "cp_trace_open failed";
  pthread_t t[THREADS];
  for (intptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, record, (void *)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  cp_trace_close();
  gzFile f = gzopen(path, "rb"); /* plain files are read as they are */
  if (!f) return "cannot read the trace back";
  long lines = 0;
  int c, last = '\n';
  while ((c = gzgetc(f)) != -1) {
    lines += c == '\n';
    last = c;
  }
  gzclose(f);
  unlink(path);
  if (last != '\n') return "the file does not end with a whole line";
  if (lines != 1 + (long)THREADS * EVENTS) return "events were lost";
  return NULL;
}

int main(void) {
  char dir[] = "/tmp/cudapool-trace-tsan-XXXXXX", plain[64], gz[64];
  if (!mkdtemp(dir)) return fail("cannot make a temporary folder");
  snprintf(plain, sizeof plain, "%s/t.csv", dir);
  snprintf(gz, sizeof gz, "%s/t.csv.gz", dir);
  const char *why = one_file(plain);
  if (!why) why = one_file(gz);
  rmdir(dir);
  if (why) return fail(why);
  printf("trace_threads_tsan: 2 passed, 0 failed\n");
  return 0;
}
