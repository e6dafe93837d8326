/* trace.h: the allocation-event recorder behind CUDAPOOL_TRACE.
 *
 * Writes every event as one CSV line in RMM's logging-adaptor columns (not
 * a file RMM's replay benchmark reads: docs/REPLAY.md says why),
 *   Thread,Time,Action,Pointer,Size,Stream
 * e.g. "633,0.021117000,allocate,0x7efd75e00000,3072,(nil)": Thread is the
 * kernel thread id, Time seconds since cp_trace_open on the monotonic clock
 * (nanosecond digits), Pointer and Stream hex or "(nil)" for 0. Actions:
 * allocate, free, "allocate failure", sync_stream, sync_device, and
 * cudapool's extras: the events that change the
 * pool's decisions, so that cudapool-replay can make them again:
 *   stream_create      Stream the handle, Size 1 non-blocking, 0 blocking
 *   stream_destroy     Stream the handle
 *   capture_begin      Stream the handle, Size 1 relaxed, 0 global/thread-local
 *   capture_end        Stream the handle (the capture is over)
 *   per_thread_stream  the program used the per-thread default stream (once)
 *   segment_alloc      Pointer and Size of a segment the pool got from CUDA
 * cudapool-replay reads it back.
 *
 * A name ending in ".gz" is written gzip-compressed (zlib, level 1, about a
 * tenth of the plain size), with a sync flush after every chunk: what is on
 * disk always decompresses to whole lines, and a file cut short (kill -9)
 * lacks only gzip's trailer (the replayer uses every line and says so once).
 *
 * Cost: an event is one relaxed atomic load, a clock read and a 48-byte
 * store into a thread-local 64 KiB buffer; no lock, no syscall, no
 * formatting. A background thread formats and writes full buffers (one
 * write() per buffer) and, every 200 ms, what the threads' buffers hold so
 * far. A kill -9 loses at most the events of the last 200 ms; every write is
 * whole lines, so the file always parses.
 *
 * Lines of different threads are written in chunks, so the file is in time
 * order per thread only; the replayer sorts by time. For a pointer freed on
 * one thread and reallocated on another to keep its order, the shim records
 * a free before the block goes back to the pool and an allocation after the
 * pool handed it out.
 *
 * Threads: every function may be called from any thread at any time, also
 * before open and after close (then they do nothing). After fork() the child
 * records nothing (the parent's file and buffers stay the parent's) until it
 * calls cp_trace_open itself. */
#ifndef CUDAPOOL_SHIM_TRACE_H
#define CUDAPOOL_SHIM_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Start recording into path, opened by cp_outfile_open (outfile.h: %p is
 * replaced by the pid now, no symbolic link is followed, a name with %p must
 * be new, an existing file is replaced only when it is the user's own).
 * Writes the header line. 0, EBUSY when already open, or the errno of the
 * open or the write (errno is set to it too). */
int cp_trace_open(const char *path);
/* The same; with stack_column, the header and every line get a 7th column,
 * Stack: an allocate line's stack id (cp_trace_alloc_at; the ids of
 * shim/state/stacks.h, whose table the shim writes next to the trace as
 * PATH.stacks.json), empty on every other line. */
int cp_trace_open_with_stacks(const char *path, bool stack_column);
void cp_trace_alloc(uintptr_t ptr, size_t size, uint64_t stream);
/* An allocation made from stack id `stack` (-1: unknown). */
void cp_trace_alloc_at(uintptr_t ptr, size_t size, uint64_t stream, long stack);
void cp_trace_free(uintptr_t ptr, size_t size, uint64_t stream);
void cp_trace_alloc_failure(size_t size, uint64_t stream);
void cp_trace_sync_stream(uint64_t stream);
void cp_trace_sync_device(void);
/* The extras above. */
#define CP_TRACE_STREAM_CREATE "stream_create"
#define CP_TRACE_STREAM_DESTROY "stream_destroy"
#define CP_TRACE_CAPTURE_BEGIN "capture_begin"
#define CP_TRACE_CAPTURE_END "capture_end"
#define CP_TRACE_PER_THREAD_STREAM "per_thread_stream"
/* The learned order changed mode (size: 0 EMPTY, 1 SOLE, 2 MIXED; stream:
 * the stream that made it, or the new home after a recovery). */
#define CP_TRACE_ORDER "order"
#define CP_TRACE_SEGMENT_ALLOC "segment_alloc"
/* action must be a string with static storage (a literal): the record keeps
 * the pointer and the line is formatted later. */
void cp_trace_extra(const char *action, uintptr_t ptr, size_t size, uint64_t stream);
/* Write everything recorded and close the file. Idempotent. Events recorded
 * by other threads while it runs may be lost. */
void cp_trace_close(void);
/* Before an exec (exec_hook.c): stop the writer thread, write everything
 * recorded so far and end the gzip member, so that the file is complete if
 * the new image replaces this one; the file stays open (close-on-exec: the
 * exec closes it). Events other threads record meanwhile may be lost. */
void cp_trace_before_exec(void);
/* After an exec that failed: start the writer again; recording goes on into
 * the same file (a .gz one gets a second gzip member). */
void cp_trace_after_failed_exec(void);
/* One relaxed atomic load. */
bool cp_trace_enabled(void);
/* Events written to the file, and events lost (write error, no memory) since
 * the last open. Either pointer may be NULL. */
void cp_trace_counts(uint64_t *written, uint64_t *dropped);
/* The first error of a write or of the close of the file since the last
 * open (events of a failed write count as dropped), 0 if none. */
int cp_trace_error(void);

#endif
