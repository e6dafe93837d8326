/* trace_threads_tsan.c: the trace recorder under ThreadSanitizer (Criterion
 * cannot start under it, Snaipe/Criterion#274). Four threads record events
 * while the background writer flushes, two of them exit before the close;
 * the file must then hold every event as one whole line. Prints
 * "trace_threads_tsan: 1 passed, 0 failed" or what broke (exit 1). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

int main(void) {
  char path[] = "/tmp/cudapool-trace-tsan-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return fail("cannot make a temporary file");
  close(fd);
  if (cp_trace_open(path) != 0) return fail("cp_trace_open failed");
  pthread_t t[THREADS];
  for (intptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, record, (void *)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  cp_trace_close();
  FILE *f = fopen(path, "r");
  if (!f) return fail("cannot read the trace back");
  long lines = 0;
  int c, last = '\n';
  while ((c = fgetc(f)) != EOF) {
    lines += c == '\n';
    last = c;
  }
  fclose(f);
  unlink(path);
  if (last != '\n') return fail("the file does not end with a whole line");
  if (lines != 1 + (long)THREADS * EVENTS) return fail("events were lost");
  printf("trace_threads_tsan: 1 passed, 0 failed\n");
  return 0;
}
