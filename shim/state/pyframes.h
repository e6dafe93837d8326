/* pyframes.h: the Python frames of the calling thread, when the process
 * hosts CPython and the thread has a Python thread state.
 *
 * Owns the run-time lookup (dlsym, nothing linked against Python) of the
 * few C API functions used: PyGILState_Check, Py_IsInitialized,
 * PyEval_GetFrame, PyFrame_GetCode, PyFrame_GetLineNumber, PyFrame_GetBack,
 * PyObject_GetAttrString, PyUnicode_AsUTF8, Py_DecRef, PyErr_Fetch,
 * PyErr_Restore, PyGILState_GetThisThreadState. When one is missing (no
 * Python, or one older than 3.9) capture returns 0 frames, always.
 *
 * Two paths, one result: a thread holding the GIL is read through the C
 * API; a thread with a thread state that released the GIL (PyTorch's
 * operators, ctypes.CDLL calls) is read from memory by pyframes_raw.c,
 * without the GIL (3.10-3.13; other versions: no frames). A thread with no
 * thread state of its own has no Python frames. A frame is kept as (code
 * object address, line), the same pair on both paths: cheap to take and to
 * compare; cp_pyframes_describe turns it into "file.py:LINE:qualname" (the
 * function's co_qualname, co_name before 3.11), the same text on both
 * paths: read from memory (pyframes_raw.c) wherever that path works, else
 * through the C API with the program's pending exception kept. It must be
 * called by the capturing thread before it returns to Python (with the GIL
 * still held on the first path), before the code object can go away. A
 * thread running in a subinterpreter is read through its first thread
 * state (PyGILState_GetThisThreadState: the main interpreter's), not the
 * subinterpreter's: its frames there are not seen. */
#ifndef CUDAPOOL_SHIM_PYFRAMES_H
#define CUDAPOOL_SHIM_PYFRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cp_pyframe {
  uintptr_t code;
  uintptr_t line;
  bool raw; /* read without the GIL (pyframes_raw.c) */
} cp_pyframe_t;

/* A frame's line as kept: sign-extended, so that a line of -1 (an
 * instruction without one) is the same key on both paths. */
static inline uintptr_t cp_pyframes_line(int line) { return (uintptr_t)(intptr_t)line; }

/* Up to max frames, innermost first; 0 without Python or a thread state. */
unsigned cp_pyframes_capture(cp_pyframe_t *out, unsigned max);
/* "file.py:LINE:qualname" into buf (cap > 0), right after capture. */
void cp_pyframes_describe(const cp_pyframe_t *f, char *buf, size_t cap);
/* NULL unless the process hosts a CPython whose frames cannot be read
 * without the GIL; then why (pyframes_raw.h), for the report. */
const char *cp_pyframes_without_gil_unsupported(void);

#endif
