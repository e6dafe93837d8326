/* unload.c: the fake runtime gives back its own bookkeeping when it is
 * unloaded (a program's plugin, its only user, closed: see
 * tests/programs/runtime/reload.c), so that a sanitizer's leak check does
 * not report what only the unmapped library pointed to. It also runs at
 * process exit, after the libraries loaded after it (a preloaded
 * interposer) have finished: the state is left empty and consistent, so a
 * late call still works (and would simply allocate it again). Live
 * allocations and their table stay: memory the program still holds is the
 * program's. */
#include "fake.h"

#include <stdlib.h>

__attribute__((destructor)) static void fc_unload(void) {
  fc_lock_only();
  fc_counter *c, *tmp;
  HASH_ITER(hh, fc.counters, c, tmp) {
    HASH_DEL(fc.counters, c);
    free(c);
  }
  if (fc.nallocs == 0) {
    free(fc.allocs);
    fc.allocs = NULL;
    fc.capallocs = 0;
  }
  free(fc.acc);
  fc.acc = NULL;
  fc.nacc = fc.capacc = 0;
  fc_unlock_only();
}
