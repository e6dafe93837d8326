/* fork.c: a thread with a thread cache (core/tcache.c) forks while another
 * thread holds the pool lock, and the child's thread returns: its cache's
 * exit must not lock the child's copy of that lock, which no thread of the
 * child will ever release (issue 31, item 6: 132 of 200 children hung).
 *
 * Deterministic: the parent's main thread holds the pool lock from before
 * the fork until the child is reaped. A hang is Criterion's timeout; the
 * child also arms alarm() so that a hung child dies (SIGALRM, a failed
 * assertion) instead of outliving the test. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool_internal.h" /* pool->lock; first: it sets uthash's hash function */
#include "core_fixture.h"

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int step; /* 1: the worker's cache holds a block; 2: the pool lock is held; 3: the child reaped */
  int status;
  pthread_t worker;
} scene_t;

static scene_t scene = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, 0};

static void scene_step(int step) {
  pthread_mutex_lock(&scene.lock);
  scene.step = step;
  pthread_cond_broadcast(&scene.cond);
  pthread_mutex_unlock(&scene.lock);
}

static void scene_wait(int step) {
  pthread_mutex_lock(&scene.lock);
  while (scene.step < step) pthread_cond_wait(&scene.cond, &scene.lock);
  pthread_mutex_unlock(&scene.lock);
}

/* In the child: the process ends once the forked thread has gone through
 * its exit (destructors included), without running the parent's atexit
 * handlers (Criterion's). */
static void *reaper(void *unused) {
  (void)unused;
  pthread_join(scene.worker, NULL);
  _exit(0);
}

static void *worker(void *unused) {
  (void)unused;
  uintptr_t p = 0;
  if (cp_tcache_alloc(F.pool, 4096, CP_STREAM_DEVICE, 7, &p) != 0 || cp_tcache_free(F.pool, p, 7, 0) != 0)
    return NULL; /* scene.status stays -1 */
  scene_step(1);
  scene_wait(2);
  pid_t child = fork();
  if (child == 0) {
    alarm(30);
    pthread_t r;
    if (pthread_create(&r, NULL, reaper, NULL) != 0) _exit(3);
    pthread_exit(NULL); /* the child's thread returns: its cache's destructor runs */
  }
  int status = -1;
  if (child > 0 && waitpid(child, &status, 0) == child) scene.status = status;
  scene_step(3); /* the parent's own exit of this thread takes the pool lock */
  return NULL;
}

Test(fork, a_child_thread_exits_while_the_parent_held_the_pool_lock, .timeout = 60) {
  fx_open(GiB);
  cr_assert(eq(int, pthread_create(&scene.worker, NULL, worker, NULL), 0));
  scene_wait(1);
  pthread_mutex_lock(&F.pool->lock); /* as cudapool_stats holds it */
  scene_step(2);
  scene_wait(3);
  pthread_mutex_unlock(&F.pool->lock);
  pthread_join(scene.worker, NULL);
  int status = scene.status;
  bool hung = WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
  cr_assert(not(hung), "the child's thread exit hung on the pool lock");
  cr_assert(eq(int, status, 0), "the child ended with status %#x", status);
  cr_assert(eq(i64, fx_stats().allocated_bytes.current, 0), "the parent's pool is untouched");
  fx_close();
}
