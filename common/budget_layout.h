/* budget_layout.h: the shared budget file of CUDAPOOL_SHARED_LIMIT (issue
 * 26, item 3; docs/DESIGN.md, "A limit shared by processes"): one file per
 * (user, CUDAPOOL_SHARED_NAME, device) in which every cudapool process of
 * the group keeps a slot with the bytes it holds on that device. Shared by
 * the shim (shim/state/budget.c, the writer) and `cudapool top`/`stats
 * --all` (tools/live/, readers); nothing here is CUDA.
 *
 * The file is CP_BUDGET_DIR/cudapool-budget.<euid>.<device key>[.<group>],
 * mode 0600; the device key is "uuid-" and the device's 32 hex digits where
 * CUDA gives a UUID (the same whatever CUDA_VISIBLE_DEVICES makes its
 * number), else "dev" and the process's device number. A process creates
 * it under a temporary name, fills the header and links it to its name, so
 * that no one ever maps one half made.
 *
 * A slot's words:
 *   - owner: (generation << 32) | pid; pid 0 = free, CP_BUDGET_BUSY = being
 *     emptied by whoever found its owner dead. Taken and given up only by
 *     compare-and-swap on the whole word, so the generation tells a slot
 *     reused meanwhile apart;
 *   - start_time: field 22 of /proc/PID/stat of the owner (0 while the
 *     owner is setting the slot up): a slot whose pid is gone or whose
 *     start time is another's counts nothing and is emptied by anyone;
 *   - reserved: the bytes of device memory its owner holds (pool segments
 *     and mapped pages), raised before the owner asks CUDA for more;
 *   - limit: the CUDAPOOL_SHARED_LIMIT its owner applies (bytes);
 *   - dead: (generation << 32) | the low 32 bits of CLOCK_MONOTONIC in ms
 *     (never 0) when a process first found this generation's owner dead;
 *     0, or another generation's, while no one has. A dead owner's count
 *     stays in the total until its memory is gone from the driver (NVML no
 *     longer lists its pid on the device), or, where NVML cannot say,
 *     CUDAPOOL_SHARED_GRACE ms after that mark; NVML or not, at most
 *     CUDAPOOL_SHARED_GRACE_MAX ms after it (shim/state/shared_limit.h).
 * The header counts the slots emptied by why (taken_gone, taken_grace,
 * taken_cap): what `cudapool stats --all` and the tests read.
 * The group's total is one word, `total`, in the header: a claim adds to
 * it with a compare-and-swap that never passes the claimer's limit, so the
 * total any reader sees is within it at every instant (summing the slots
 * could not promise that: a reader reading them one by one can see a
 * release late and the claim it made room for early). The slots say whose
 * bytes they are, so that a dead process's can be taken back out of the
 * total. Order: a claim adds to `total` before its slot, a release takes
 * from its slot before `total`, so a process killed between the two leaves
 * bytes counted that no slot holds (denied memory, never excess memory);
 * the first process that finds itself alone in the file sets `total` back
 * to its own count.
 * `layout` changes whenever this struct does; a reader refuses any other. */
#ifndef CUDAPOOL_COMMON_BUDGET_LAYOUT_H
#define CUDAPOOL_COMMON_BUDGET_LAYOUT_H

#include <stdatomic.h>
#include <stdint.h>

#define CP_BUDGET_DIR "/dev/shm"
#define CP_BUDGET_PREFIX "cudapool-budget."
#define CP_BUDGET_MAGIC "cpbudgt"
#define CP_BUDGET_LAYOUT 2u
#define CP_BUDGET_SLOTS 128
#define CP_BUDGET_KEY_MAX 48   /* "uuid-" + 32 hex digits, NUL-terminated */
#define CP_BUDGET_GROUP_MAX 64 /* CP_OPTION_NAME_MAX of common/options.h */
#define CP_BUDGET_BUSY 0xffffffffu

typedef struct cp_budget_slot {
  _Atomic uint64_t owner;      /* generation << 32 | pid */
  _Atomic uint64_t start_time; /* the owner's, 0 while it sets the slot up */
  _Atomic uint64_t reserved;   /* bytes the owner holds on the device */
  _Atomic uint64_t limit;      /* the owner's CUDAPOOL_SHARED_LIMIT */
  _Atomic uint64_t dead;       /* generation << 32 | ms when found dead (layout 2) */
  uint64_t reserved0[3];
} cp_budget_slot_t;

typedef struct cp_budget_file {
  char magic[8];                  /* CP_BUDGET_MAGIC */
  uint32_t layout;                /* CP_BUDGET_LAYOUT */
  uint32_t slots;                 /* CP_BUDGET_SLOTS */
  char key[CP_BUDGET_KEY_MAX];    /* the device key of its name, NUL-terminated */
  char group[CP_BUDGET_GROUP_MAX]; /* CUDAPOOL_SHARED_NAME, "" = none, NUL-terminated */
  _Atomic uint64_t total;          /* bytes the group holds: every claim that passed, less releases */
  _Atomic uint64_t taken_gone;     /* dead owners' slots emptied: NVML no longer listed them */
  _Atomic uint64_t taken_grace;    /* emptied after CUDAPOOL_SHARED_GRACE (NVML could not say) */
  _Atomic uint64_t taken_cap;      /* emptied after CUDAPOOL_SHARED_GRACE_MAX, NVML still listing */
  cp_budget_slot_t slot[CP_BUDGET_SLOTS];
} cp_budget_file_t;

static inline uint32_t cp_budget_pid(uint64_t owner) { return (uint32_t)owner; }

/* a + b, at most UINT64_MAX: a hostile slot's count cannot wrap the sum. */
static inline uint64_t cp_budget_add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

#endif
