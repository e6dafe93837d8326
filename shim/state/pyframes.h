/* pyframes.h: the Python frames of the calling thread, when the process
 * hosts CPython and the thread holds the GIL.
 *
 * Owns the run-time lookup (dlsym, nothing linked against Python) of the
 * few C API functions used: PyGILState_Check, Py_IsInitialized,
 * PyEval_GetFrame, PyFrame_GetCode, PyFrame_GetLineNumber, PyFrame_GetBack,
 * PyObject_GetAttrString, PyUnicode_AsUTF8, Py_DecRef. When one is missing
 * (no Python, or one older than 3.9) capture returns 0 frames, always.
 * A frame is kept as (code object address, line): cheap to take and to
 * compare; cp_pyframes_describe turns it into "file.py:LINE:func" and must
 * be called while the same thread still holds the GIL, before the code
 * object can go away. */
#ifndef CUDAPOOL_SHIM_PYFRAMES_H
#define CUDAPOOL_SHIM_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

typedef struct cp_pyframe {
  uintptr_t code;
  uintptr_t line;
} cp_pyframe_t;

/* Up to max frames, innermost first; 0 without Python or the GIL. */
unsigned cp_pyframes_capture(cp_pyframe_t *out, unsigned max);
/* "file.py:LINE:func" into buf (cap > 0), GIL held (right after capture). */
void cp_pyframes_describe(const cp_pyframe_t *f, char *buf, size_t cap);

#endif
