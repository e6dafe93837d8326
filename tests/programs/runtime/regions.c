/* regions.c: allocations inside named regions, for the region report
 * (tests/integration/runtime/regions.c). Reaches cudapool_push_tag and
 * cudapool_pop_tag through dlsym, as a program that links nothing of
 * cudapool does; prints "regions: errors=E" and the errno of the calls
 * that must fail.
 *   (no argument) nested: 1 MiB before any tag; "forward" { 2 MiB;
 *       "attention" { 3 MiB, freed }; 512 KiB }; "attention" { 1 MiB };
 *       then every block freed;
 *   threads: thread L in "left" allocates 1 MiB, then thread R in "right"
 *       allocates 2 MiB while "left" is still open (a barrier orders them);
 *   nvtx: the same as nested, with NVTX v3 ranges (nvtxRangePushA/Pop) for
 *       "forward" and "attention", and a start/end range "span" around the
 *       last 1 MiB instead of the second "attention";
 *   limits: 300 names opened and closed in turn (r0 ... r299), then "deep"
 *       opened 40 times on one stack around one 1 MiB allocation and closed
 *       40 times; prints "info: deep_pops=N extra_pop=RC". */
#include <errno.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "progs.h"

static int (*push)(const char *);
static int (*pop)(void);
static pthread_barrier_t allocated, done;
static _Atomic int errors; /* both threads of "threads" count into it */

static void *alloc(size_t n) {
  void *p = NULL;
  errors += cudaMalloc(&p, n) != cudaSuccess;
  return p;
}

static void release(void *p) { errors += cudaFree(p) != cudaSuccess; }

static void *left(void *unused) {
  (void)unused;
  errors += push("left") != 0;
  void *p = alloc(MiB);
  pthread_barrier_wait(&allocated);
  pthread_barrier_wait(&done);
  errors += pop() != 0;
  release(p);
  return NULL;
}

static void *right(void *unused) {
  (void)unused;
  pthread_barrier_wait(&allocated);
  errors += push("right") != 0;
  void *p = alloc(2 * MiB);
  errors += pop() != 0;
  pthread_barrier_wait(&done);
  release(p);
  return NULL;
}

static void nested(bool nvtx) {
  void *w = alloc(MiB);
  if (nvtx) nvtxRangePushA("forward"); else errors += push("forward") != 0;
  void *a = alloc(2 * MiB);
  if (nvtx) nvtxRangePushA("attention"); else errors += push("attention") != 0;
  release(alloc(3 * MiB));
  if (nvtx) nvtxRangePop(); else errors += pop() != 0;
  void *c = alloc(MiB / 2);
  if (nvtx) nvtxRangePop(); else errors += pop() != 0;
  void *d;
  if (nvtx) {
    nvtxRangeId_t id = nvtxRangeStartA("span");
    d = alloc(MiB);
    nvtxRangeEnd(id);
  } else {
    errors += push("attention") != 0;
    d = alloc(MiB);
    errors += pop() != 0;
  }
  release(w), release(a), release(c), release(d);
}

int main(int argc, char **argv) {
  push = (int (*)(const char *))prog_sym("cudapool_push_tag");
  pop = (int (*)(void))prog_sym("cudapool_pop_tag");
  if (!push || !pop) {
    printf("regions: no_api=1\n");
    return 0;
  }
  const char *what = argc > 1 ? argv[1] : "nested";
  if (strcmp(what, "threads") == 0) {
    pthread_barrier_init(&allocated, NULL, 2);
    pthread_barrier_init(&done, NULL, 2);
    pthread_t l, r;
    pthread_create(&l, NULL, left, NULL);
    pthread_create(&r, NULL, right, NULL);
    pthread_join(l, NULL);
    pthread_join(r, NULL);
  } else if (strcmp(what, "limits") == 0) {
    char name[16];
    for (int i = 0; i < 300; i++) {
      snprintf(name, sizeof name, "r%d", i);
      errors += push(name) != 0;
      errors += pop() != 0;
    }
    for (int i = 0; i < 40; i++) errors += push("deep") != 0;
    void *p = alloc(MiB);
    int pops = 0;
    for (int i = 0; i < 40; i++) pops += pop() == 0;
    int extra = pop();
    release(p);
    printf("info: deep_pops=%d extra_pop=%d\n", pops, extra);
  } else {
    nested(strcmp(what, "nvtx") == 0);
  }
  int pop_empty = pop(), push_empty = push(""), push_null = push(NULL);
  printf("regions: errors=%d pop_empty=%d push_empty=%d push_null=%d einval=%d\n", atomic_load(&errors),
         pop_empty, push_empty, push_null, EINVAL);
  return 0;
}
