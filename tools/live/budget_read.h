/* budget_read.h: the shared budget of CUDAPOOL_SHARED_LIMIT as `cudapool
 * top` and `cudapool stats --all` show it, read from this user's budget
 * files (common/budget_layout.h; written by shim/state/shared_limit.c).
 *
 * Owns finding the files of one device key and reading them without
 * trusting them: a file is read only when fstat says a regular file of
 * this user exactly one budget file long (checked before mapping it
 * read-only), with the magic, layout, slot count and the key its name
 * says; anything else is skipped. Nothing here prints or writes. */
#ifndef CUDAPOOL_LIVE_BUDGET_READ_H
#define CUDAPOOL_LIVE_BUDGET_READ_H

#include <stddef.h>
#include <stdint.h>

#include "budget_layout.h"

typedef struct lb_budget {
  char group[CP_BUDGET_GROUP_MAX]; /* CUDAPOOL_SHARED_NAME, "" = none */
  uint64_t limit;                  /* the largest limit a live process applies */
  uint64_t total;                  /* bytes the group has claimed (the file's total) */
  unsigned processes;              /* slots of live processes */
  unsigned dying;                  /* slots of dead processes still charged (memory not yet freed) */
  uint64_t dying_bytes;            /* their bytes, in total */
  uint64_t taken_gone, taken_grace, taken_cap; /* dead shares taken back, by reason (budget_layout.h) */
} lb_budget_t;

/* The budgets for device key (every group, or only group when not NULL),
 * at most cap of them into out: how many. A file whose processes are all
 * gone is left out (the file outlives them; budget_layout.h). */
size_t lb_read(const char *key, const char *group, lb_budget_t *out, size_t cap);

#endif
