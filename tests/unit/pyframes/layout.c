/* layout.c: shim/state/pylayout.c's row for the Python these tests are
 * built against equals offsetof() in that Python's own headers, internal
 * ones included (Py_BUILD_CORE): every offset the raw walk follows. A
 * version without a row fails here, so that a new Python on the build
 * machine asks for its row. And every row, whatever Python is installed,
 * against the values of a review of each version's headers. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stddef.h>

#if PY_MINOR_VERSION == 10
#include <frameobject.h>
#else
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#endif

#include "state/pylayout.h"

#define OFF(field, expected) cr_expect(eq(u16, (uint16_t)(expected), l->field), #field ": %u, headers say %zu", \
                                       (unsigned)l->field, (size_t)(expected))

Test(pylayout, row_of_the_local_python_matches_its_headers) {
  const cp_pylayout_t *l = cp_pylayout_for(PY_MAJOR_VERSION, PY_MINOR_VERSION);
  cr_assert(not(eq(ptr, (void *)l, NULL)), "no layout row for Python %d.%d", PY_MAJOR_VERSION, PY_MINOR_VERSION);
  cr_expect(eq(int, l->minor, PY_MINOR_VERSION));
  OFF(str_length, offsetof(PyASCIIObject, length));
  OFF(str_state, offsetof(PyASCIIObject, state));
  OFF(str_ascii_size, sizeof(PyASCIIObject));
  OFF(str_compact_size, sizeof(PyCompactUnicodeObject));
  OFF(code_filename, offsetof(PyCodeObject, co_filename));
  OFF(code_linetable, offsetof(PyCodeObject, co_linetable));
  OFF(code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
  OFF(bytes_size, offsetof(PyVarObject, ob_size));
  OFF(bytes_data, offsetof(PyBytesObject, ob_sval));
  cr_expect(eq(int, l->linetable, PY_MINOR_VERSION == 10 ? CP_LINETABLE_310 : CP_LINETABLE_311));
#if PY_MINOR_VERSION == 10
  cr_expect(eq(int, l->kind, CP_PYFRAMES_OBJECTS));
  OFF(tstate_frame, offsetof(PyThreadState, frame));
  OFF(frame_back, offsetof(PyFrameObject, f_back));
  OFF(frame_code, offsetof(PyFrameObject, f_code));
  OFF(frame_instr, offsetof(PyFrameObject, f_lasti));
  OFF(frame_lineno, offsetof(PyFrameObject, f_lineno));
  OFF(code_name, offsetof(PyCodeObject, co_name));
#else
  cr_expect(eq(int, l->kind, CP_PYFRAMES_INTERPRETER));
#if PY_MINOR_VERSION <= 12
  OFF(tstate_frame, offsetof(PyThreadState, cframe));
  OFF(cframe_current, offsetof(_PyCFrame, current_frame));
#else
  OFF(tstate_frame, offsetof(PyThreadState, current_frame));
#endif
  OFF(frame_back, offsetof(_PyInterpreterFrame, previous));
#if PY_MINOR_VERSION <= 12
  OFF(frame_code, offsetof(_PyInterpreterFrame, f_code));
  OFF(frame_instr, offsetof(_PyInterpreterFrame, prev_instr));
#else
  OFF(frame_code, offsetof(_PyInterpreterFrame, f_executable));
  OFF(frame_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
  OFF(frame_owner, offsetof(_PyInterpreterFrame, owner));
  cr_expect(eq(i8, l->owner_generator, FRAME_OWNED_BY_GENERATOR));
#if PY_MINOR_VERSION >= 12
  cr_expect(eq(i8, l->owner_cstack, FRAME_OWNED_BY_CSTACK));
#else
  cr_expect(eq(i8, l->owner_cstack, -1));
#endif
  OFF(code_name, offsetof(PyCodeObject, co_qualname));
  OFF(code_firsttraceable, offsetof(PyCodeObject, _co_firsttraceable));
  OFF(code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
#endif
}

Test(pylayout, versions_without_a_row) {
  cr_expect(eq(ptr, (void *)cp_pylayout_for(3, 9), NULL));
  cr_expect(eq(ptr, (void *)cp_pylayout_for(3, 14), NULL));
  cr_expect(eq(ptr, (void *)cp_pylayout_for(2, 7), NULL));
}

/* Reviewed from each version's headers: the innermost frame in
 * PyThreadState (3.11/3.12 through _PyCFrame), the frame's code, caller,
 * instruction and owner, the code object's file and name, where 3.11+
 * starts tracing and its code units, and the str object's text. */
Test(pylayout, every_row_has_the_reviewed_offsets) {
  static const struct {
    int minor;
    uint16_t tstate_frame, cframe_current, back, code, instr, lineno, owner, filename, name, firsttraceable,
        adaptive, str_ascii, str_compact;
  } want[] = {
      {10, 24, CP_PYOFF_NONE, 24, 32, 96, 100, CP_PYOFF_NONE, 104, 112, CP_PYOFF_NONE, CP_PYOFF_NONE, 48, 72},
      {11, 56, 8, 48, 32, 56, CP_PYOFF_NONE, 69, 112, 128, 168, 184, 48, 72},
      {12, 56, 0, 8, 0, 56, CP_PYOFF_NONE, 70, 112, 128, 176, 192, 40, 56},
      {13, 72, CP_PYOFF_NONE, 8, 0, 56, CP_PYOFF_NONE, 70, 112, 128, 184, 200, 40, 56},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const cp_pylayout_t *l = cp_pylayout_for(3, want[i].minor);
    cr_assert(not(eq(ptr, (void *)l, NULL)), "no row for 3.%d", want[i].minor);
#define ROW(field, expected) \
  cr_expect(eq(u16, l->field, want[i].expected), "3.%d " #field ": %u", want[i].minor, (unsigned)l->field)
    ROW(tstate_frame, tstate_frame);
    ROW(cframe_current, cframe_current);
    ROW(frame_back, back);
    ROW(frame_code, code);
    ROW(frame_instr, instr);
    ROW(frame_lineno, lineno);
    ROW(frame_owner, owner);
    ROW(code_filename, filename);
    ROW(code_name, name);
    ROW(code_firsttraceable, firsttraceable);
    ROW(code_adaptive, adaptive);
    ROW(str_ascii_size, str_ascii);
    ROW(str_compact_size, str_compact);
#undef ROW
    cr_expect(eq(int, l->kind, want[i].minor == 10 ? CP_PYFRAMES_OBJECTS : CP_PYFRAMES_INTERPRETER));
  }
}
