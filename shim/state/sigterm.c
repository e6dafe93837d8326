/* sigterm.c: the exit report of a process stopped with SIGTERM (see
 * sigterm.h for the rules).
 *
 * Async-signal-safety. The handler does two things, both allowed in a
 * signal handler: a lock-free atomic exchange and sem_post (on POSIX's list
 * of async-signal-safe functions). It writes nothing, allocates nothing and
 * takes no lock. The report is written by a thread of cudapool's
 * ("cudapool-term"), started when the handler is installed and waiting in
 * sem_wait with every signal blocked. That thread runs the ordinary exit path
 * (cp_outputs_end: the pools' locks, the trace's, malloc, stdio) as any
 * thread may, because the thread that took the signal is not held in the
 * handler: whatever it held when SIGTERM landed (a pool's lock in the middle
 * of a cudaMalloc, malloc's, stdio's) it releases as it runs on. Writing the
 * report inside the handler would deadlock on the first such lock, and
 * SIGTERM lands in an allocation as easily as anywhere; a handler that only
 * set a flag would need someone to look at it. A self-pipe would work like
 * the semaphore, at the price of two descriptors in the host program.
 *
 * The price of this choice: between the signal and the end the program runs
 * on for as long as the report takes (milliseconds). If it exits on its own
 * in that time, its exit waits for the same report (outputs.c writes it
 * once) and cp_sigterm_after_exit_report ends it by SIGTERM all the same.
 *
 * Invariants: the handler is installed only over SIG_DFL, after the thread
 * exists; the thread never returns to the program (it ends the process);
 * nothing here prints. */
#include "state/sigterm.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "state/live.h"
#include "state/outputs.h"
#include "state/shim.h"
#include "threads.h"

static sem_t go;
static atomic_bool armed, received;

static void on_sigterm(int sig) {
  (void)sig;
  int saved = errno;
  /* A second SIGTERM while the first is being reported changes nothing. */
  if (!atomic_exchange(&received, true)) sem_post(&go);
  errno = saved;
}

/* SIGTERM's action: handler, nothing masked, flags; the one replaced goes
 * to *prev when prev is not NULL. */
static int set_sigterm_action(void (*handler)(int), int flags, struct sigaction *prev) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags;
  return sigaction(SIGTERM, &sa, prev);
}

/* SIGTERM again, with its default action, from this thread: the process
 * ends as the first SIGTERM would have ended it natively. */
static void die_by_sigterm(void) {
  sigset_t term;
  set_sigterm_action(SIG_DFL, 0, NULL);
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &term, NULL);
  raise(SIGTERM);
}

static void *reporter(void *unused) {
  (void)unused;
  while (sem_wait(&go) != 0)
    if (errno != EINTR) return NULL; /* cannot happen to a valid semaphore: stay out of the way */
  cp_outputs_end();
  die_by_sigterm();
  return NULL;
}

/* The child of a fork() has no reporter thread: SIGTERM ends it natively. */
static void child_after_fork(void) {
  struct sigaction cur;
  if (!atomic_load(&armed)) return;
  atomic_store(&armed, false);
  atomic_store(&received, false);
  if (sigaction(SIGTERM, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_sigterm)
    set_sigterm_action(SIG_DFL, 0, NULL);
}

static bool is_default(const struct sigaction *sa) {
  return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

void cp_sigterm_arm(void) {
  struct sigaction cur, prev;
  if ((!cp_opts.stats[0] && !cp_opts.trace[0] && !cp_live_active()) || cp_opts.disable) return;
  if (sigaction(SIGTERM, NULL, &cur) != 0 || !is_default(&cur)) return;
  if (sem_init(&go, 0, 0) != 0) return;

  /* The thread starts with every signal blocked, so none is ever its. */
  if (cp_thread_start(reporter, NULL, "cudapool-term", NULL) != 0)
    return; /* no thread, no handler: SIGTERM stays native */

  /* SA_RESTART: the program's system calls see no EINTR from it. */
  if (set_sigterm_action(on_sigterm, SA_RESTART, &prev) != 0) return;
  /* A thread of the program installed its own in between: give it back. */
  if (!is_default(&prev)) {
    sigaction(SIGTERM, &prev, NULL);
    return;
  }
  atomic_store(&armed, true);
  pthread_atfork(NULL, NULL, child_after_fork);
}

void cp_sigterm_after_exit_report(void) {
  if (atomic_load(&armed) && atomic_load(&received)) die_by_sigterm();
}
