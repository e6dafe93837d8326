/* outfile.h: the files cudapool writes into (CUDAPOOL_STATS, CUDAPOOL_TRACE),
 * opened so that a name chosen by the user can never be turned against the
 * process, and written so that an error is seen and never kills it.
 *
 * Owns the rules for opening a named output (cp_outfile_open) and for writing
 * it (cp_outfile_write, cp_outfile_close), and the list of regular files it
 * has open, which it uses to refuse a second output into the same file.
 *
 * Rules, in the order they apply (docs/OPTIONS.md says the same):
 *   - every "%p" of the name is replaced by the pid of the process when the
 *     file is opened (not when the options were read);
 *   - "/dev/stdout", "/dev/stderr" and "/dev/fd/N" are the process's
 *     descriptor 1, 2 or N, duplicated: written at its current offset, never
 *     truncated, its flags left alone;
 *   - a symbolic link at the end of the name is never followed (ELOOP);
 *   - a name that contained %p must not exist yet (O_EXCL, EEXIST): it is
 *     meant to be new, and one that exists was planted or is stale;
 *   - a new file is created with mode 0600 (then the umask applies); one
 *     created by this open is ours whatever owner the file system gives it;
 *   - an existing regular file is replaced (truncated) only when it belongs to
 *     the effective user and has a single link, else EPERM, untouched;
 *   - an existing regular file that cudapool already has open for another
 *     output is refused (EBUSY), untouched;
 *   - a regular file is locked (flock, exclusive) for as long as it is open;
 *     one that another process has locked (writes now) is refused (EAGAIN),
 *     untouched: several processes given one name without %p never write
 *     into one file at once;
 *   - a FIFO is opened without blocking: without a reader it fails at once
 *     (ENXIO); with one it is then written blocking, like any pipe;
 *   - a character device is written as it is (/dev/null, a terminal);
 *     anything else (a block device) is refused (EINVAL).
 * Nothing here prints: callers warn, with cp_outfile_rule() for the why.
 * Thread-safe; fork-safe (the child inherits the list of open files). */
#ifndef CUDAPOOL_SHIM_OUTFILE_H
#define CUDAPOOL_SHIM_OUTFILE_H

#include <stddef.h>

/* Copy pattern to out with every "%p" replaced by pid. 1 when the pattern
 * held a %p, 0 when not, -1 when the result (with its NUL) does not fit in
 * cap (out is then untouched). */
int cp_outfile_expand(const char *pattern, long pid, char *out, size_t cap);

/* Open pattern for writing by the rules above. Returns a descriptor
 * (close-on-exec, blocking), or -errno. path (may be NULL) receives the name
 * opened, %p replaced, when it fits in cap. */
int cp_outfile_open(const char *pattern, char *path, size_t cap);

/* Write all n bytes (retrying short writes and EINTR). 0, or the errno of
 * the failure (EIO for a write that made no progress). A pipe without a
 * reader gives EPIPE and no SIGPIPE: the signal is blocked for the write and
 * a SIGPIPE it raised is taken back. */
int cp_outfile_write(int fd, const void *buf, size_t n);

/* Close a descriptor of cp_outfile_open and forget its file. 0, or the errno
 * of close() (a late write error of the file system). fd < 0: nothing, 0. */
int cp_outfile_close(int fd);

/* Which rule of cudapool refused a file, for a warning: a phrase for the
 * errno values the rules above return (ELOOP, EEXIST, EPERM, EBUSY, EAGAIN,
 * ENXIO, EINVAL), NULL for the others. */
const char *cp_outfile_rule(int err);

#endif
