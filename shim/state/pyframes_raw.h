/* pyframes_raw.h: the Python frames of a thread that has a Python thread
 * state but does not hold the GIL (PyTorch's operators and ctypes.CDLL
 * calls release it), read from memory without the C API.
 *
 * Owns the choice, made once, of whether this process's CPython can be
 * read that way: a 64-bit process, a row of pylayout.c for its 3.MINOR
 * (Py_Version, else Py_GetVersion on 3.10), the default object header
 * (PyCode_Type's ob_type at offset 8 is &PyType_Type: not a free-threaded
 * nor a Py_TRACE_REFS build), before 3.13 no debug build (one exporting its
 * reference total: rows are release builds' and not checked against debug
 * ones), and on 3.13 the offsets CPython publishes in
 * _PyRuntime.debug_offsets agreeing with the row.
 *
 * Invariants: only the calling thread's own state is read, while that
 * thread is inside cudapool: its frame chain cannot change under us, and
 * its frames keep their code objects (and those their names) alive. Nothing
 * here takes the GIL, touches a reference count or calls Python but for
 * (_)Py_IsFinalizing (one atomic load); lines come from the code object's
 * co_linetable, decoded by pylinetable.c (never PyCode_Addr2Line:
 * pylinetable.h says why). A walk stops at the first object whose type is
 * not the expected one (a frame on 3.10, a code object; a line table that
 * is not a bytes object gives line -1) and after a bounded number of frames. No walk starts once the
 * interpreter is finalizing (Py_FinalizeEx frees the states of threads
 * still running); one that started just before races with it, a window
 * only a daemon thread allocating at exit can hit. A frame's text is made by
 * cp_pyframes_raw_describe while the thread is still inside cudapool.
 *
 * Locking: cp_pyframes_raw_start runs once (pyframes.c's pthread_once);
 * the rest reads what it set and takes no lock. */
#ifndef CUDAPOOL_SHIM_PYFRAMES_RAW_H
#define CUDAPOOL_SHIM_PYFRAMES_RAW_H

#include <stddef.h>

#include "pyframes.h"

/* Once, in a process hosting CPython, before any capture. */
void cp_pyframes_raw_start(void);
/* Up to max frames of the calling thread's tstate (its own:
 * PyGILState_GetThisThreadState()), innermost first; 0 when this Python
 * cannot be read. */
unsigned cp_pyframes_raw_capture(const void *tstate, cp_pyframe_t *out, unsigned max);
/* "file.py:LINE:qualname" into buf (cap > 0), by the thread that captured
 * f, before it returns to Python. */
void cp_pyframes_raw_describe(const cp_pyframe_t *f, char *buf, size_t cap);
/* The line of the instruction at byte_offset in code (a code object), as
 * PyCode_Addr2Line answers, from co_linetable; -1 when this Python cannot
 * be read or code is not a code object. */
int cp_pyframes_raw_line(const void *code, int byte_offset);
/* NULL when frames are read without the GIL; else why not, for the report
 * ("Python 3.14: no known layout"). */
const char *cp_pyframes_raw_unsupported(void);

#endif
