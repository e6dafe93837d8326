/* trace_bench.c: the recorder's cost per event (common/trace.c).
 *
 * Records allocate/free events into a temporary file, from one thread and
 * then from 4 threads at once. The cost a program pays is the CPU time its
 * own threads spend in cp_trace_* (clock read, record store, and the buffer
 * hand-off to the writer thread every ~1,600 events), per event:
 *   trace_event: N ns/event (1 thread)
 *   trace_event: N ns/event (4 threads)
 * Thread CPU time, not wall time: with more threads than cores, wall time
 * per event measures the scheduler. The writer's side (formatting, write())
 * runs on its own thread; its throughput is printed as
 *   trace_writer: N Mevents/s (wall time of the whole run, 4 threads), and
 *   the file's bytes per event
 * then the same into a gzip'd file (a name ending in .gz), whose writer
 * compresses: a writer slower than the recording threads makes them wait
 * when its queue is full, which shows in their cost per event.
 * Every event must reach the file (written == recorded), else exit 1. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"

#define EVENTS_PER_THREAD 4000000u

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct job {
  uintptr_t base;
  uint64_t cpu;
} job_t;

static void *record(void *arg) {
  job_t *j = arg;
  uint64_t c0 = cpu_ns();
  for (uint32_t i = 0; i < EVENTS_PER_THREAD / 2; i++) {
    cp_trace_alloc(j->base + (uintptr_t)i * 512, 512 + (i & 1023), 0);
    cp_trace_free(j->base + (uintptr_t)i * 512, 0, 0);
  }
  j->cpu = cpu_ns() - c0;
  return NULL;
}

/* CPU ns per event of the recording threads; *wall_ns the whole run; 0 on
 * failure. */
static double run(const char *path, int threads, uint64_t *wall_ns) {
  pthread_t t[8];
  job_t jobs[8];
  if (cp_trace_open(path) != 0) {
    perror("trace_bench: cp_trace_open");
    return 0;
  }
  uint64_t t0 = now_ns();
  for (int i = 0; i < threads; i++) {
    jobs[i] = (job_t){.base = (uintptr_t)(i + 1) << 40};
    pthread_create(&t[i], NULL, record, &jobs[i]);
  }
  uint64_t cpu = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    cpu += jobs[i].cpu;
  }
  cp_trace_close(); /* the writer finishes: part of the throughput */
  *wall_ns = now_ns() - t0;
  uint64_t written, dropped;
  cp_trace_counts(&written, &dropped);
  if (written != (uint64_t)threads * EVENTS_PER_THREAD || dropped != 0) {
    fprintf(stderr, "trace_bench: %llu events written, %llu dropped\n", (unsigned long long)written,
            (unsigned long long)dropped);
    return 0;
  }
  return (double)cpu / ((double)threads * EVENTS_PER_THREAD);
}

/* One file kind: plain (.csv) or gzip'd (.csv.gz). 0 or 1. */
static int bench(const char *suffix, const char *what) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/cudapool-trace-bench-%ld%s", (long)getpid(), suffix);
  uint64_t wall1, wall4;
  double one = run(path, 1, &wall1), four = run(path, 4, &wall4);
  struct stat st;
  long long bytes = stat(path, &st) == 0 ? (long long)st.st_size : -1;
  unlink(path);
  if (one == 0 || four == 0) return 1;
  printf("trace_event: %.1f ns/event (1 thread%s)\n", one, what);
  printf("trace_event: %.1f ns/event (4 threads%s)\n", four, what);
  printf("trace_writer: %.1f Mevents/s (4 threads, to the file%s), %.1f bytes/event\n",
         4.0 * EVENTS_PER_THREAD / ((double)wall4 / 1e9) / 1e6, what,
         (double)bytes / (4.0 * EVENTS_PER_THREAD));
  return 0;
}

int main(void) { return bench(".csv", "") || bench(".csv.gz", ", gzip"); }
