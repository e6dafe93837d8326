/* capture.h: the stream captures in progress, process-wide.
 *
 * Owns the list of captures the program began (at either layer) and the
 * capture lock. While any capture runs, no barrier, fence, synchronisation
 * or legacy-stream work may be issued (it would join or break the capture);
 * while a strict one (global or thread-local mode) runs, the program's
 * cudaMalloc/cudaFree must behave exactly as natively.
 *
 * Begin and end hold the lock for writing across the program's real call
 * (cp_capture_begin_lock ... cp_capture_begin_done), so that no barrier or
 * fence is ever being issued while a capture starts. Code that issues CUDA
 * ordering work takes it for reading with cp_capture_none_lock().
 *
 * Invariant: captures_active counts the list; cp_strict_captures_active counts
 * its strict entries, captures_without_pre_event those with no pre-capture
 * event; every record's pre-capture event is destroyed when the record goes,
 * unless a destroy of its stream took it first. */
#ifndef CUDAPOOL_SHIM_CAPTURE_H
#define CUDAPOOL_SHIM_CAPTURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Lock order: the capture lock before a device lock. */

/* Around the real begin call: lock, call, then report whether it succeeded
 * (strict: any mode but relaxed), which unlocks. The lock also records an
 * event on the stream, before the capture begins: it covers the stream's
 * work from before the capture, which ordering work issued during the
 * capture waits on instead of touching the capturing stream. */
void cp_capture_begin_lock(uintptr_t stream);
void cp_capture_begin_done(bool began, uintptr_t stream, bool strict);
/* Around the real end call: ended is true when the capture is over (the call
 * succeeded, or reported the capture invalidated). */
void cp_capture_end_lock(void);
void cp_capture_end_done(bool ended, uintptr_t stream);
/* The stream was destroyed: a capture it began has ended with it. */
void cp_capture_forget_stream(uintptr_t stream);
/* Whether stream is capturing now. */
bool cp_capture_stream_capturing(uintptr_t stream);
/* Any capture in global or thread-local mode in progress. Inline: every
 * allocation and free asks. */
extern atomic_int cp_strict_captures_active;
static inline bool cp_capture_strict_active(void) {
  return atomic_load_explicit(&cp_strict_captures_active, memory_order_acquire) != 0;
}
/* True (and the lock held for reading) when no capture is in progress; then
 * call cp_capture_unlock(). */
bool cp_capture_none_lock(void);
/* True (and the lock held for reading) when no capture is in progress or
 * every one is relaxed and has its pre-capture event: ordering work that
 * leaves the capturing streams alone may then be issued. */
bool cp_capture_relaxed_lock(void);
/* The lock for reading, whatever captures run: for ordering work that
 * touches no capturing stream nor the legacy stream (a stream whose capture
 * has just ended waiting on the last barrier), which then no capture can
 * begin or end across. */
void cp_capture_read_lock(void);
/* The lock for writing: the records may then change (a stream destroyed
 * while captures run). */
void cp_capture_write_lock(void);
void cp_capture_unlock(void);
/* With the lock held for writing: the pre-capture event of the capture
 * stream began, now the caller's (its stream is being destroyed, and the
 * event goes on covering that stream's work from before the capture), or
 * NULL. The capture then counts as one without a pre-capture event. */
void *cp_capture_take_pre_event(uintptr_t stream);
/* With the lock held: whether stream is capturing, and its pre-capture
 * event (a cudaEvent_t, or NULL). */
bool cp_capture_of(uintptr_t stream, void **pre_event);
/* With the lock held: the number of captures in progress. */
int cp_capture_count(void);

#endif
