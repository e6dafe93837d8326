/* stress.c: threads allocating and freeing random sizes, each on its own
 * non-blocking stream. Every block gets a thread-unique byte pattern in
 * every byte (cudaMemsetAsync) that is read back and checked before the
 * free; a shared registry of live ranges catches overlapping blocks at once;
 * a last write is left in flight at each free; streams are replaced now and
 * then. With "held", device work
 * only completes at synchronisations, so reuse without ordering shows as a
 * race. Usage: stress [threads=8] [iterations=1000] [held]. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "progs.h"

#define MAX_LIVE 4
#define MAX_SIZE ((size_t)256 << 10)

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct range { uintptr_t lo, hi; } reg[1024];
static int nreg;
static int iterations;

struct worker {
  int id, errors, overlaps, corrupt;
};

static int reg_add(void *p, size_t n) {
  uintptr_t lo = (uintptr_t)p, hi = lo + n;
  int overlap = 0;
  pthread_mutex_lock(&reg_lock);
  for (int i = 0; i < nreg; i++) overlap |= reg[i].lo < hi && lo < reg[i].hi;
  if (nreg < 1024) reg[nreg++] = (struct range){lo, hi};
  pthread_mutex_unlock(&reg_lock);
  return overlap;
}

static void reg_del(void *p) {
  pthread_mutex_lock(&reg_lock);
  for (int i = 0; i < nreg; i++)
    if (reg[i].lo == (uintptr_t)p) {
      reg[i] = reg[--nreg];
      break;
    }
  pthread_mutex_unlock(&reg_lock);
}

struct block {
  void *p;
  size_t n;
  unsigned char pattern;
};

static void check_and_free(struct worker *w, struct block *b, cudaStream_t s, unsigned char *buf) {
  w->errors += cudaMemcpyAsync(buf, b->p, b->n, cudaMemcpyDeviceToHost, s) != cudaSuccess;
  w->errors += cudaStreamSynchronize(s) != cudaSuccess;
  for (size_t i = 0; i < b->n; i++)
    if (buf[i] != b->pattern) {
      w->corrupt++;
      break;
    }
  w->errors += cudaMemsetAsync(b->p, 0xEE, b->n, s) != cudaSuccess;
  reg_del(b->p);
  w->errors += cudaFree(b->p) != cudaSuccess;
}

static void *work(void *arg) {
  struct worker *w = arg;
  unsigned seed = 12345u + 7919u * (unsigned)w->id;
  cudaStream_t s;
  w->errors += cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess;
  unsigned char *buf = malloc(MAX_SIZE);
  struct block live[MAX_LIVE];
  int nlive = 0;
  for (int it = 0; it < iterations; it++) {
    if (it % 50 == 49) {
      /* A fresh stream now and then: it is ordered after nothing, so blocks
       * that others freed must still not reach it early. */
      w->errors += cudaStreamSynchronize(s) != cudaSuccess;
      w->errors += cudaStreamDestroy(s) != cudaSuccess;
      w->errors += cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess;
    }
    if (nlive == 0 || (nlive < MAX_LIVE && rand_r(&seed) % 2)) {
      struct block b = {NULL, 1 + rand_r(&seed) % MAX_SIZE, (unsigned char)(w->id * 31 + it) | 1};
      if (cudaMalloc(&b.p, b.n) != cudaSuccess) {
        w->errors++;
        continue;
      }
      w->overlaps += reg_add(b.p, b.n);
      w->errors += cudaMemsetAsync(b.p, b.pattern, b.n, s) != cudaSuccess;
      live[nlive++] = b;
    } else {
      int k = rand_r(&seed) % nlive;
      check_and_free(w, &live[k], s, buf);
      live[k] = live[--nlive];
    }
  }
  while (nlive > 0) check_and_free(w, &live[--nlive], s, buf);
  w->errors += cudaStreamDestroy(s) != cudaSuccess;
  free(buf);
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 8;
  iterations = argc > 2 ? atoi(argv[2]) : 1000;
  int held = argc > 3 && strcmp(argv[3], "held") == 0;
  if (threads < 1 || threads > 64) threads = 8;
  struct worker w[64];
  pthread_t t[64];
  long r0 = fake_races();
  if (held) fake_hold(1);
  for (int i = 0; i < threads; i++) {
    w[i] = (struct worker){.id = i};
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  int errors = 0, overlaps = 0, corrupt = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    errors += w[i].errors;
    overlaps += w[i].overlaps;
    corrupt += w[i].corrupt;
  }
  if (held) fake_hold(0);
  printf("stress: threads=%d iterations=%d errors=%d overlaps=%d corrupt=%d races=%ld last=%d\n", threads,
         iterations, errors, overlaps, corrupt, fake_races() - r0, (int)cudaGetLastError());
  print_pool(0);
  return 0;
}
