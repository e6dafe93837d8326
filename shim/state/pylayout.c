/* pylayout.c: the table of pylayout.h. Each row was worked out from its
 * version's headers (the structures named in pylayout.h) and agrees with
 * bloomberg/pystack's per-version copies of them; 3.13's is also checked at
 * run time against the offsets CPython publishes for debuggers
 * (_PyRuntime.debug_offsets: pyframes_raw.c). In every row
 * _co_firsttraceable sits 16 bytes before co_code_adaptive (an int, then
 * the void *co_extra), and PyBytesObject is its var header (ob_size at
 * 16), ob_shash, then the bytes (32). */
#include "pylayout.h"

#include <stddef.h>

#define NONE CP_PYOFF_NONE

static const cp_pylayout_t rows[] = {
    /* 3.10: tstate->frame (after prev, next, interp); PyFrameObject after
     * PyObject_VAR_HEAD: f_back, f_code, ..., f_lasti at 96, f_lineno 100;
     * PyCodeObject: 7 ints (co_firstlineno 40) then co_code...
     * co_filename 104, co_name 112, co_linetable 120;
     * str objects still carry wstr (PyASCIIObject 48 bytes, compact 72). */
    {.minor = 10,
     .kind = CP_PYFRAMES_OBJECTS,
     .linetable = CP_LINETABLE_310,
     .tstate_frame = 24,
     .cframe_current = NONE,
     .frame_back = 24,
     .frame_code = 32,
     .frame_instr = 96,
     .frame_lineno = 100,
     .frame_owner = NONE,
     .owner_generator = -1,
     .owner_cstack = -1,
     .code_filename = 104,
     .code_name = 112,
     .code_linetable = 120,
     .code_firstlineno = 40,
     .code_firsttraceable = NONE,
     .code_adaptive = NONE,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_size = 48,
     .str_compact_size = 72,
     .bytes_size = 16,
     .bytes_data = 32},
    /* 3.11: tstate->cframe->current_frame; _PyInterpreterFrame: f_func,
     * f_globals, f_builtins, f_locals, f_code (32), frame_obj, previous
     * (48), prev_instr (56), stacktop, is_entry, owner (69). */
    {.minor = 11,
     .kind = CP_PYFRAMES_INTERPRETER,
     .linetable = CP_LINETABLE_311,
     .tstate_frame = 56,
     .cframe_current = 8,
     .frame_back = 48,
     .frame_code = 32,
     .frame_instr = 56,
     .frame_lineno = NONE,
     .frame_owner = 69,
     .owner_generator = 1,
     .owner_cstack = -1,
     .code_filename = 112,
     .code_name = 128,
     .code_linetable = 136,
     .code_firstlineno = 72,
     .code_firsttraceable = 168,
     .code_adaptive = 184,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_size = 48,
     .str_compact_size = 72,
     .bytes_size = 16,
     .bytes_data = 32},
    /* 3.12: _PyCFrame lost use_tracing (current_frame first); the frame
     * starts with f_code, previous; owner (70) after return_offset; shim
     * frames (FRAME_OWNED_BY_CSTACK) enter the chain; wstr is gone. */
    {.minor = 12,
     .kind = CP_PYFRAMES_INTERPRETER,
     .linetable = CP_LINETABLE_311,
     .tstate_frame = 56,
     .cframe_current = 0,
     .frame_back = 8,
     .frame_code = 0,
     .frame_instr = 56,
     .frame_lineno = NONE,
     .frame_owner = 70,
     .owner_generator = 1,
     .owner_cstack = 3,
     .code_filename = 112,
     .code_name = 128,
     .code_linetable = 136,
     .code_firstlineno = 68,
     .code_firsttraceable = 176,
     .code_adaptive = 192,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_size = 40,
     .str_compact_size = 56,
     .bytes_size = 16,
     .bytes_data = 32},
    /* 3.13: no _PyCFrame: tstate->current_frame (after eval_breaker,
     * _status, _whence, state and six ints); f_executable and instr_ptr
     * where 3.12 had f_code and prev_instr; co_executors before _co_cached. */
    {.minor = 13,
     .kind = CP_PYFRAMES_INTERPRETER,
     .linetable = CP_LINETABLE_311,
     .tstate_frame = 72,
     .cframe_current = NONE,
     .frame_back = 8,
     .frame_code = 0,
     .frame_instr = 56,
     .frame_lineno = NONE,
     .frame_owner = 70,
     .owner_generator = 1,
     .owner_cstack = 3,
     .code_filename = 112,
     .code_name = 128,
     .code_linetable = 136,
     .code_firstlineno = 68,
     .code_firsttraceable = 184,
     .code_adaptive = 200,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_size = 40,
     .str_compact_size = 56,
     .bytes_size = 16,
     .bytes_data = 32},
};

const cp_pylayout_t *cp_pylayout_for(int major, int minor) {
  if (major != 3) return NULL;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (rows[i].minor == minor) return &rows[i];
  return NULL;
}
