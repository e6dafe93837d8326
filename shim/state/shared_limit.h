/* shared_limit.h: CUDAPOOL_SHARED_LIMIT, one budget of device memory for
 * every cudapool process of this user (or of its CUDAPOOL_SHARED_NAME) on
 * each device (issue 26, item 3; docs/DESIGN.md, "A limit shared by
 * processes"; the file's layout and the claim's rule in
 * common/budget_layout.h).
 *
 * Rules:
 *   - on for a device once cp_shared_attach gave it a limit (at its pool's
 *     creation); the backend (cuda_backend.c) claims every segment and
 *     mapped page before CUDA is asked for it, and releases it after CUDA
 *     took it back: the pool's own bytes only (allocations forwarded to
 *     CUDA unpooled are not counted);
 *   - a claim raises this process's slot first, then sums every slot; over
 *     the limit, it empties the slots of dead processes (pid gone, or
 *     another start time) and sums again; still over, it takes its bytes
 *     back and fails (ENOMEM to the pool, which then releases its own cache
 *     and retries; serve.c asks the peers to give back and says why);
 *   - the file is used only when it is a regular file of this user, exactly
 *     one budget file long (checked on the descriptor before mapping), with
 *     the magic, layout, slot count, device key and group this process
 *     expects. A file of this user that is not one (short, garbage) is
 *     replaced; anything else (another user's, a link, another layout)
 *     leaves this process alone under the limit (its own bytes against it),
 *     said in one warning;
 *   - a dead process's share is taken back only once its memory is gone
 *     from the driver, which may free it after the process can be found
 *     dead (a zombie; measured on an H100: a process holding 4.5 GiB had it
 *     freed 57-89 ms after its exit began, about when it was reaped, and
 *     NVML stopped listing it 30-35 ms after that). A
 *     claim that finds a dead owner marks the slot with the time (the
 *     slot's `dead`, budget_layout.h) and leaves it charged. The process
 *     refused then (serve.c, no lock held) calls cp_shared_wait_dead: it
 *     asks NVML (backend/nvml.h) which pids the driver still counts on the
 *     device and empties the slots of those it no longer lists; where NVML
 *     cannot say (no library, no UUID, its pids not this namespace's), a
 *     slot is emptied CUDAPOOL_SHARED_GRACE ms after its mark; NVML or not,
 *     CUDAPOOL_SHARED_GRACE_MAX ms after it (a pid reused, an NVML that
 *     lies). It waits (2 ms steps) while dying shares would make the room
 *     it was refused, so at most until the last such slot's time is up;
 *     the header counts each slot emptied by its reason;
 *   - at exit the process keeps its slots: its device memory goes back to
 *     the driver only as the process dies, after every destructor, so
 *     giving the share up earlier let a peer claim and allocate while this
 *     memory was still taken (measured on an H100: four churning processes
 *     at 4.5 GiB under a 3 GiB limit). The process counts as dead once it
 *     is gone, has another start time, or is a zombie; its slot is then
 *     emptied as the rule above says;
 *   - bytes CUDA refused to free (cuda_backend.c: the runtime refuses
 *     frees once its teardown at exit began) are never released: the
 *     memory is still the process's;
 *   - before an exec it gives its slots up (its pid and start time survive
 *     an exec, its device memory does not, so no one could tell it dead),
 *     and takes them again after an exec that failed.
 * Threads: claims and releases are lock-free atomics on the slot (a claim
 * reads /proc for dead owners, never NVML); attach is
 * called under the device's lock (pool creation), the end under outputs.c's.
 * Nothing here prints but attach's one warning. */
#ifndef CUDAPOOL_SHIM_SHARED_LIMIT_H
#define CUDAPOOL_SHIM_SHARED_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cp_shared_usage {
  uint64_t limit; /* this process's CUDAPOOL_SHARED_LIMIT on the device, bytes */
  uint64_t total; /* bytes the group holds on it, this process's included */
  uint64_t mine;  /* this process's share of total */
  unsigned processes; /* live processes' slots, this process's included */
  unsigned dying;     /* dead processes' slots still charged (their memory not yet gone) */
  uint64_t dying_bytes; /* their share of total */
  bool alone;         /* no budget file: the limit holds this process alone */
} cp_shared_usage_t;

/* The device's budget, limit bytes (0: none). Called at pool creation. */
void cp_shared_attach(int device, uint64_t limit);
/* Whether the device has a shared limit. */
bool cp_shared_on(int device);
/* Before CUDA is asked for bytes more on device: whether they fit (then
 * they count as this process's until cp_shared_release). */
bool cp_shared_claim(int device, size_t bytes);
void cp_shared_release(int device, size_t bytes);
/* Whether the last claim this thread made was refused. */
bool cp_shared_refused(void);
/* After this thread's claim on device was refused, with no lock held:
 * waits while dead processes' shares whose memory the driver still holds
 * would make the room refused; true when one was taken back (try again). */
bool cp_shared_wait_dead(int device);
/* The device's dead shares taken back, by reason (budget_layout.h). */
typedef enum { CP_SHARED_GONE, CP_SHARED_GRACE, CP_SHARED_CAP } cp_shared_taken_t;
uint64_t cp_shared_taken(int device, cp_shared_taken_t why);
/* The device's budget now, dead processes' shares emptied first; false
 * when it has none. */
bool cp_shared_usage(int device, cp_shared_usage_t *out);
/* The slots given up before an exec and taken again after a failed one. */
void cp_shared_before_exec(void);
void cp_shared_after_failed_exec(void);

#endif
