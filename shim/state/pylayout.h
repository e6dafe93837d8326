/* pylayout.h: where CPython keeps a thread's frames, per minor version.
 *
 * Owns the table of byte offsets that pyframes_raw.c follows to read the
 * frames of a thread that does not hold the GIL, straight from memory (as
 * py-spy and pystack do from outside the process): PyThreadState to the
 * innermost frame, frame to caller, code object and instruction, code
 * object to its file and function names, and the str object's inline text.
 * One row per supported 3.MINOR, from CPython's own headers of that
 * version (Include/cpython/pystate.h, Include/internal/pycore_frame.h,
 * Include/cpython/code.h, Include/cpython/unicodeobject.h) for a default
 * (not free-threaded, not Py_TRACE_REFS) 64-bit build; these structures
 * do not change within a minor version, which is what debuggers rely on.
 *
 * Invariants: a row's offsets are those of offsetof() in its version's
 * headers (tests/unit/pyframes/layout.c checks the row of the Python
 * installed where the tests run against them, and every row against the
 * reviewed values); CP_PYOFF_NONE marks a field the version lacks.
 * Pure data: no locking. */
#ifndef CUDAPOOL_SHIM_PYLAYOUT_H
#define CUDAPOOL_SHIM_PYLAYOUT_H

#include <stdint.h>

#include "pylinetable.h"

#define CP_PYOFF_NONE 0xffffu

typedef enum cp_pyframe_kind {
  CP_PYFRAMES_OBJECTS,     /* 3.10: a chain of PyFrameObject (f_back, f_lasti) */
  CP_PYFRAMES_INTERPRETER, /* 3.11+: a chain of _PyInterpreterFrame (previous, instruction pointer) */
} cp_pyframe_kind_t;

typedef struct cp_pylayout {
  int minor; /* Python 3.minor */
  cp_pyframe_kind_t kind;
  cp_linetable_format_t linetable;
  /* PyThreadState: 3.10 frame, 3.11/3.12 cframe, 3.13 current_frame. */
  uint16_t tstate_frame;
  /* _PyCFrame.current_frame (3.11/3.12: tstate_frame names the _PyCFrame). */
  uint16_t cframe_current;
  uint16_t frame_back;  /* f_back / previous */
  uint16_t frame_code;  /* f_code / f_executable */
  uint16_t frame_instr; /* 3.10 f_lasti (int, in code units); prev_instr / instr_ptr (pointer) */
  uint16_t frame_lineno; /* 3.10 f_lineno (int, set while tracing), else NONE */
  uint16_t frame_owner;  /* owner (char), 3.11+ */
  int8_t owner_generator; /* FRAME_OWNED_BY_GENERATOR, or -1 */
  int8_t owner_cstack;    /* FRAME_OWNED_BY_CSTACK (a shim frame), or -1 */
  uint16_t code_filename;
  uint16_t code_name;           /* co_qualname where it exists (3.11+), else co_name */
  uint16_t code_linetable;      /* co_linetable (a bytes object; its format: pylinetable.h) */
  uint16_t code_firstlineno;    /* co_firstlineno (int) */
  uint16_t code_firsttraceable; /* _co_firsttraceable (int), 3.11+ */
  uint16_t code_adaptive;       /* co_code_adaptive: the first code unit, 3.11+ */
  uint16_t str_length;          /* PyASCIIObject.length */
  uint16_t str_state;           /* PyASCIIObject.state */
  uint16_t str_ascii_size;      /* sizeof(PyASCIIObject): an ASCII compact string's text */
  uint16_t str_compact_size;    /* sizeof(PyCompactUnicodeObject): any other compact string's */
  uint16_t bytes_size;          /* PyBytesObject's ob_size */
  uint16_t bytes_data;          /* PyBytesObject.ob_sval, the bytes inline */
} cp_pylayout_t;

/* The row of Python 3.minor, or NULL for a version without one. */
const cp_pylayout_t *cp_pylayout_for(int major, int minor);

#endif
