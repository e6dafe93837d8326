/* capture.c: the captures in progress and the capture lock (capture.h).
 * Without memory for a record the capture goes unseen, as before the shim
 * knew of captures at all: nothing better can be done there. */
#include "capture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct cp_capture {
  uintptr_t stream;
  bool strict;
  struct cp_capture *next;
} cp_capture_t;

static pthread_rwlock_t capture_lock = PTHREAD_RWLOCK_INITIALIZER;
static cp_capture_t *captures; /* guarded by capture_lock */
static atomic_int captures_active, strict_captures_active;

static void started(uintptr_t stream, bool strict) {
  cp_capture_t *c = calloc(1, sizeof *c);
  if (!c) return;
  *c = (cp_capture_t){.stream = stream, .strict = strict, .next = captures};
  captures = c;
  atomic_fetch_add(&captures_active, 1);
  if (strict) atomic_fetch_add(&strict_captures_active, 1);
}

static void ended(uintptr_t stream) {
  for (cp_capture_t **link = &captures; *link; link = &(*link)->next) {
    cp_capture_t *c = *link;
    if (c->stream != stream) continue;
    *link = c->next;
    atomic_fetch_sub(&captures_active, 1);
    if (c->strict) atomic_fetch_sub(&strict_captures_active, 1);
    free(c);
    return;
  }
}

void cp_capture_begin_lock(void) { pthread_rwlock_wrlock(&capture_lock); }

void cp_capture_begin_done(bool began, uintptr_t stream, bool strict) {
  if (began) started(stream, strict);
  pthread_rwlock_unlock(&capture_lock);
}

void cp_capture_end_lock(void) { pthread_rwlock_wrlock(&capture_lock); }

void cp_capture_end_done(bool over, uintptr_t stream) {
  if (over) ended(stream);
  pthread_rwlock_unlock(&capture_lock);
}

void cp_capture_forget_stream(uintptr_t stream) {
  if (!atomic_load(&captures_active)) return;
  pthread_rwlock_wrlock(&capture_lock);
  ended(stream);
  pthread_rwlock_unlock(&capture_lock);
}

bool cp_capture_strict_active(void) {
  return atomic_load_explicit(&strict_captures_active, memory_order_acquire) != 0;
}

bool cp_capture_none_lock(void) {
  if (atomic_load(&captures_active)) return false;
  pthread_rwlock_rdlock(&capture_lock);
  if (atomic_load(&captures_active) == 0) return true;
  pthread_rwlock_unlock(&capture_lock);
  return false;
}

void cp_capture_unlock(void) { pthread_rwlock_unlock(&capture_lock); }
