/* nvtx.h: cudapool's segments and blocks as NVIDIA's tools see them, through
 * the NVTX Memory API (nvtx3/nvToolsExtMem.h, header-only: the calls reach a
 * tool only through the injection library NVTX_INJECTION64_PATH names, which
 * compute-sanitizer and Nsight Systems set).
 *
 * Owns: the on/off decision (CUDAPOOL_NVTX, decided once at start), the
 * "cudapool" NVTX domain, and the table of registered heaps (one per
 * segment, or per expandable segment's reserved range) that a block's region
 * is registered in.
 *
 * Invariants, while on:
 *   - a segment is a heap (usage: sub-allocator) from its backend alloc
 *     (reserve) to its backend free (unreserve); a heap registered over an
 *     older one it overlaps (a pool dropped by cudaDeviceReset never freed
 *     its segments) replaces it;
 *   - a heap carries its device's reset epoch (cp_device_t.resets) when it
 *     was registered, and a reset unregisters only the heaps of its device
 *     from its own epoch or before: a pool made after the reset (another
 *     thread's first allocation) may register its segments before the
 *     resetting thread gets here, and keeps them;
 *   - a block handed out is one region of its segment's heap, of exactly the
 *     bytes the program asked for, from the pool's ALLOC report to its FREE
 *     report (both under the pool lock, so a region is gone before the block
 *     can be handed to anyone again); a freed block, pending or cached, has
 *     no region;
 *   - while off, no NVTX function is ever called and the pool has no
 *     observer for it: the hot path pays nothing.
 *
 * Locking: the heap table has its own mutex, taken under the pool lock
 * (the core calls the backend and the observer with it held), never the
 * other way round. Nothing here prints but the one CUDAPOOL_VERBOSE line. */
#ifndef CUDAPOOL_SHIM_NVTX_H
#define CUDAPOOL_SHIM_NVTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "options.h"

/* At start, once: on for CUDAPOOL_NVTX=1, or for auto when `injection`
 * (NVTX_INJECTION64_PATH's value) is set and not empty. With `verbose` it
 * says which on one line. */
void cp_nvtx_decide(cp_nvtx_t setting, const char *injection, FILE *verbose);
bool cp_nvtx_on(void);
/* Before the first pool is made (no pool lock held): the domain is created,
 * which loads the tool's injection library. Only while on. */
void cp_nvtx_prepare(void);

/* The backend's segment hooks (only while on). */
void cp_nvtx_segment_added(int device, unsigned epoch, uintptr_t base, size_t size);
void cp_nvtx_segment_removed(uintptr_t base);
/* The device was reset at `epoch` (its reset count before the reset): every
 * heap of it registered in that epoch or before is gone (a no-op while off). */
void cp_nvtx_device_reset(int device, unsigned epoch);
/* The pool observer's reports (only while on). */
void cp_nvtx_block_handed_out(uintptr_t addr, size_t requested);
void cp_nvtx_block_freed(uintptr_t addr);
/* Marks and ranges for the timeline (each a no-op while off). */
void cp_nvtx_mark_barrier(void);
void cp_nvtx_mark_out_of_memory(size_t requested);
void cp_nvtx_range_push(const char *what);
void cp_nvtx_range_pop(void);

#endif
