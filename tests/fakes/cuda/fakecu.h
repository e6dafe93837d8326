/* fakecu.h: test hooks of the fake CUDA driver (tests/fakes/cuda), for test
 * programs that load build/fakecuda/libcuda.so.1. A program that loads the
 * driver with dlopen reaches them with dlsym(handle, "fakecu_calls"); on the
 * real driver they are absent. None of them is counted by fakecu_calls. */
#ifndef FAKECU_H
#define FAKECU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many times the exported function named fn was called (its exact
 * name: cuStreamSynchronize and cuStreamSynchronize_ptsz apart). */
long fakecu_calls(const char *fn);
/* The next n allocations succeed, every later one fails with
 * CUDA_ERROR_OUT_OF_MEMORY; -1 turns that off. FAKECU_FAIL_ALLOC_AFTER sets
 * it at start. */
void fakecu_fail_alloc_after(long n);
/* Bytes allocated on device (each allocation rounded up to 512). */
size_t fakecu_live_bytes(int device);
/* An allocation in the current context that no cuMemAlloc made (a pointer
 * "from before the shim"); 0 on failure. Free it with cuMemFree. */
unsigned long long fakecu_raw_alloc(size_t size);
/* The fake's own exported function of that name (e.g. "cuMemAlloc_v2"),
 * NULL when it has none: what an interposer must not be confused with. */
void *fakecu_entry(const char *name);
/* The allocation a cuIpcGetMemHandle handle exports: its base (and its size
 * in *size, when size is not NULL); 0 for anything that is not a handle of
 * the fake's. */
unsigned long long fakecu_ipc_base(const void *handle, size_t *size);

/* Virtual memory (vmm.c): bytes mapped on device, live reservations, and
 * the calls that failed an error check (a pool bug when not 0). NULL
 * pointers are skipped. */
void fakecu_vmm_stats(int device, size_t *mapped_bytes, int *reservations, long *errors);

#ifdef __cplusplus
}
#endif
#endif
