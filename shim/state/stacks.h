/* stacks.h: call sites of the allocations served (CUDAPOOL_STACKS).
 *
 * Owns the table of distinct call stacks (one id per stack, keyed by its
 * frame addresses and, when the thread held Python's GIL, its Python
 * frames), the map from each live block the shim served to its stack, and
 * per stack the bytes and blocks live now and at the peak of reserved
 * memory.
 *
 * Invariants: a stack's id never changes and ids are 0, 1, 2... in order of
 * first sight; a stack's live bytes are the sum of the requested bytes of
 * the blocks in the live map naming it; the peak figures are the live
 * figures copied at the moment the reserved bytes of every device reached
 * their highest (ties: the copy with more live bytes wins), so the cost of
 * a copy is paid only at a new peak.
 *
 * Locking: one mutex over everything here. Off (cp_stacks_on false) nothing
 * here is called: the serving path tests the flag once. Symbols are looked
 * up (dladdr) only when a report is written, never on the allocation path;
 * a Python frame is resolved to text once, when its stack is first seen.
 * Out of memory in here loses a record, never the program's allocation. */
#ifndef CUDAPOOL_SHIM_STACKS_H
#define CUDAPOOL_SHIM_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern bool cp_stacks_on;

/* At start, with CUDAPOOL_STACKS's depth (> 0): turns recording on. */
void cp_stacks_start(unsigned depth);
/* Before the pool is asked: walks the calling thread's stack and keeps its
 * stack as the thread's allocation in progress, so that the trace's
 * allocate line (written under the pool's lock) can name it. */
void cp_stacks_capture(void);
/* The id of the stack the thread's allocation in progress was called from
 * (cp_stacks_capture), or -1. */
long cp_stacks_captured_id(void);
/* The allocation in progress was not served: its stack is dropped. */
void cp_stacks_not_served(void);
/* The shim served `requested` bytes at addr from the captured stack (none:
 * nothing is recorded); reserved_now: the bytes the pools of every device
 * hold now. Ends the allocation in progress. */
void cp_stacks_served(uintptr_t addr, size_t requested, size_t reserved_now);
/* The program frees addr (before the pool does: the block may be handed out
 * again at once). Unknown addresses are ignored. */
void cp_stacks_freeing(uintptr_t addr);
/* The stack id of the live block at addr, or -1. */
long cp_stacks_id_of(uintptr_t addr);

/* Report writers; nothing when recording is off. */
/* Text: the top call sites at the peak of reserved memory and at exit. */
void cp_stacks_report_text(FILE *out);
/* JSON members, each starting with ',': "call_sites":{"peak_reserved":N,
 * "at_peak":[site...],"at_exit":[site...],"walker":"libunwind"|"glibc"},
 * a site being {"stack":ID,
 * "bytes":N,"blocks":N,"share":F,"site":FRAME|null,"frames":[FRAME...]}. */
void cp_stacks_report_json(FILE *out, void *unused);
/* The snapshot's "stacks" array, and the trace's sidecar's:
 * [{"id":N,"frames":[FRAME...]}...]. */
void cp_stacks_json_table(FILE *out);
/* The trace's sidecar: {"version":1,"stacks":[...]} (the table above) into
 * path (outfile.h rules). 0 or an errno. */
int cp_stacks_write_table(const char *path);

#endif
