/* shared_mem.h: the file FAKECUDA_SHARED_MEM names, shared by every process
 * of the fake runtime that names it (state.c maps it, mem.c writes it) and
 * read by the fake NVML (tests/fakes/nvml/), which answers from it as a
 * driver's NVML answers from the driver's accounting.
 *
 * Rows: each device's used bytes (all processes together), each device's
 * peak of them, then one row per process with its pid and its bytes on
 * each device. A process takes a free row (pid 0, or a dead pid's row that
 * is not held) when it maps the file; its row empties at its exit, when
 * the fake driver gives its memory back, unless FAKECUDA_HOLD_AT_EXIT=1
 * made it `held`: then its memory stays counted, and its pid listed by the
 * fake NVML, until a test calls fakecuda_release_process(pid) (a driver
 * that frees a dead process's memory late). Updated with atomics only. */
#ifndef FAKECUDA_SHARED_MEM_H
#define FAKECUDA_SHARED_MEM_H

#include <stdatomic.h>
#include <stdint.h>

#define FC_SHM_DEVICES 16 /* FC_MAX_DEVICES */
#define FC_SHM_PROCS 64

typedef struct fc_shm_proc {
  _Atomic uint32_t pid;  /* 0: free */
  _Atomic uint32_t held; /* 1: its memory outlives it until released */
  _Atomic uint32_t last_pid; /* the row's last process, kept past its exit (FAKENVML_MODE=stuck lists it) */
  uint32_t unused;
  _Atomic uint64_t bytes[FC_SHM_DEVICES];
} fc_shm_proc;

typedef struct fc_shm {
  _Atomic uint64_t used[FC_SHM_DEVICES];
  _Atomic uint64_t peak[FC_SHM_DEVICES];
  fc_shm_proc procs[FC_SHM_PROCS];
} fc_shm;

#endif
