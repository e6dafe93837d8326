/* snapshot.h: the memory snapshot (CUDAPOOL_OOM_SNAPSHOT): every segment
 * and block of every device's pool, with the call stack of each allocated
 * block when CUDAPOOL_STACKS is on, as one JSON object in a file.
 *
 * Owns the snapshot format (version 1, docs/OPTIONS.md; a viewer reads it,
 * so fields are only ever added) and when the out-of-memory snapshot is
 * taken: at the first allocation the pool refused with ENOMEM, once per
 * process. Written from the failing allocation's thread (never a signal
 * handler, never with a pool lock held by the caller); the pools are walked
 * each arena under its lock (core cp_walk), the text built in memory, then
 * the file opened and written by the rules of outfile.h. No CUDA call. */
#ifndef CUDAPOOL_SHIM_SNAPSHOT_H
#define CUDAPOOL_SHIM_SNAPSHOT_H

#include <stddef.h>

/* After an allocation failed for want of memory: with CUDAPOOL_OOM_SNAPSHOT
 * set and no snapshot taken yet, write one (reason "oom"). Returns the file
 * written (%p replaced), or NULL (off, taken already, or the file could not
 * be written: then one warning naming the variable). */
const char *cp_snapshot_after_oom(void);
/* The Nth snapshot CUDAPOOL_SNAPSHOT_SIGNAL asked for (reason "signal"),
 * into the CUDAPOOL_OOM_SNAPSHOT file with ".N" appended; the file written
 * into path, or NULL after one warning. From snapshot_signal.c's thread. */
const char *cp_snapshot_on_signal(unsigned n, char *path, size_t cap);
/* A snapshot `cudapool snapshot PID` asked for (reason "request"), into
 * pattern (an absolute name, %p allowed; else EINVAL), by the rules of
 * outfile.h; the file written into path. 0 or an errno, and nothing
 * printed: the asker reports it. From the live stats thread (live.c). */
int cp_snapshot_on_request(const char *pattern, char *path, size_t cap);
/* The snapshot's JSON text, with reason ("oom", "signal", "exit"), into a
 * malloc'd string (*len its length); NULL when out of memory. */
char *cp_snapshot_text(const char *reason, size_t *len);

#endif
