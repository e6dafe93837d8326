/* pyframes_raw.c: frames of a thread without the GIL (pyframes_raw.h),
 * read as CPython's own traceback code walks them: 3.10 follows f_back
 * through frame objects; 3.11+ follows previous through interpreter
 * frames, leaving out shim frames (3.12+, owned by the C stack) and
 * incomplete ones (not past _co_firsttraceable, unless a generator's), as
 * PyEval_GetFrame and PyFrame_GetBack do. */
#include "pyframes_raw.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pylayout.h"

/* Frames followed at most, counting those left out: a chain is never
 * longer than the recursion limit allows, and a bound keeps a bad pointer
 * from looping us. */
#define HOPS_MAX 4096
#define OB_TYPE 8 /* PyObject.ob_type in the default header (checked at start) */

static const cp_pylayout_t *layout; /* NULL: not read */
static const void *code_type, *frame_type, *str_type, *bytes_type;
static int (*is_finalizing)(void);
static char why_not[96];

static uintptr_t load_ptr(const void *base, unsigned off) {
  uintptr_t v;
  memcpy(&v, (const char *)base + off, sizeof v);
  return v;
}

static int load_int(const void *base, unsigned off) {
  int v;
  memcpy(&v, (const char *)base + off, sizeof v);
  return v;
}

static bool is_a(uintptr_t obj, const void *type) { return obj && load_ptr((const void *)obj, OB_TYPE) == (uintptr_t)type; }

/* 3.13's _Py_DebugOffsets, as far as the code object's offsets (each
 * offset a uint64_t; the groups before the ones compared are skipped). */
typedef struct debug_offsets_313 {
  char cookie[8];
  uint64_t version, free_threaded;
  uint64_t runtime_state[3], interpreter_state[13];
  uint64_t ts_size, ts_prev, ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_thread_id,
      ts_datastack_chunk, ts_status;
  uint64_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_localsplus, fr_owner;
  uint64_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_argcount,
      co_localsplusnames, co_localspluskinds, co_code_adaptive;
} debug_offsets_313_t;

static bool debug_offsets_agree(const cp_pylayout_t *l) {
  const debug_offsets_313_t *d = dlsym(RTLD_DEFAULT, "_PyRuntime");
  if (!d || memcmp(d->cookie, "xdebugpy", 8) != 0 || (d->version >> 16) != 0x030d || d->free_threaded) return false;
  return d->ts_current_frame == l->tstate_frame && d->fr_previous == l->frame_back &&
         d->fr_executable == l->frame_code && d->fr_instr_ptr == l->frame_instr && d->fr_owner == l->frame_owner &&
         d->co_filename == l->code_filename && d->co_qualname == l->code_name &&
         d->co_linetable == l->code_linetable && d->co_firstlineno == l->code_firstlineno &&
         d->co_code_adaptive == l->code_adaptive;
}

/* A Py_REF_DEBUG build (every Py_DEBUG one) exports its reference total
 * under one of these names, by version; a release build none. */
static bool ref_debug_build(void) {
  return dlsym(RTLD_DEFAULT, "_Py_RefTotal") || dlsym(RTLD_DEFAULT, "_Py_GetRefTotal") ||
         dlsym(RTLD_DEFAULT, "_Py_GetGlobalRefTotal");
}

/* 3.MINOR from Py_Version (3.11+: a constant), else from Py_GetVersion's
 * "3.10.13 (main, ...)", which formats into a static buffer on each call
 * (why it is not asked more than this once, nor on 3.11+). */
static void python_version(long *major, long *minor) {
  const unsigned long *hex = dlsym(RTLD_DEFAULT, "Py_Version");
  if (hex) {
    *major = (long)(*hex >> 24 & 0xff), *minor = (long)(*hex >> 16 & 0xff);
    return;
  }
  const char *(*get_version)(void);
  *(void **)&get_version = dlsym(RTLD_DEFAULT, "Py_GetVersion");
  *major = *minor = -1;
  if (!get_version) return;
  const char *version = get_version();
  char *end;
  *major = strtol(version, &end, 10);
  if (*end == '.') *minor = strtol(end + 1, NULL, 10);
}

void cp_pyframes_raw_start(void) {
  if (UINTPTR_MAX != UINT64_MAX) { /* every row is a 64-bit build's */
    snprintf(why_not, sizeof why_not, "not a 64-bit process");
    return;
  }
  *(void **)&is_finalizing = dlsym(RTLD_DEFAULT, "Py_IsFinalizing"); /* 3.13 */
  if (!is_finalizing) *(void **)&is_finalizing = dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
  code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  frame_type = dlsym(RTLD_DEFAULT, "PyFrame_Type");
  str_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
  bytes_type = dlsym(RTLD_DEFAULT, "PyBytes_Type");
  const void *type_type = dlsym(RTLD_DEFAULT, "PyType_Type");
  if (!is_finalizing || !code_type || !frame_type || !str_type || !bytes_type || !type_type) {
    snprintf(why_not, sizeof why_not, "Python without the symbols needed");
    return;
  }
  long major, minor;
  python_version(&major, &minor);
  const cp_pylayout_t *l = cp_pylayout_for((int)major, (int)minor);
  if (!l)
    snprintf(why_not, sizeof why_not, "Python %ld.%ld: no known layout", major, minor);
  else if (load_ptr(code_type, OB_TYPE) != (uintptr_t)type_type)
    snprintf(why_not, sizeof why_not, "Python %ld.%ld: not the default object header", major, minor);
  else if (minor < 13 && ref_debug_build()) /* 3.13's are checked against debug_offsets */
    snprintf(why_not, sizeof why_not, "Python %ld.%ld: a debug build, its layout not checked", major, minor);
  else if (minor == 13 && !debug_offsets_agree(l))
    snprintf(why_not, sizeof why_not, "Python %ld.%ld: _PyRuntime.debug_offsets differ", major, minor);
  else
    layout = l;
}

const char *cp_pyframes_raw_unsupported(void) { return layout ? NULL : why_not; }

int cp_pyframes_raw_line(const void *code, int byte_offset) {
  if (!layout || !is_a((uintptr_t)code, code_type)) return -1;
  uintptr_t table = load_ptr(code, layout->code_linetable);
  if (!is_a(table, bytes_type)) return -1;
  intptr_t len = (intptr_t)load_ptr((const void *)table, layout->bytes_size);
  if (len < 0) return -1;
  return cp_linetable_line(layout->linetable, (const uint8_t *)table + layout->bytes_data, (size_t)len,
                           load_int(code, layout->code_firstlineno), byte_offset);
}

static uintptr_t innermost(const void *tstate) {
  uintptr_t p = load_ptr(tstate, layout->tstate_frame);
  if (p && layout->cframe_current != CP_PYOFF_NONE) p = load_ptr((const void *)p, layout->cframe_current);
  return p;
}

/* 3.11+: the line of an interpreter frame, or 0 when the frame is left
 * out; *stop when the walk must end here. */
static int interpreter_line(uintptr_t frame, uintptr_t *code_out, bool *stop) {
  const cp_pylayout_t *l = layout;
  int owner = l->frame_owner != CP_PYOFF_NONE ? ((const signed char *)frame)[l->frame_owner] : 0;
  if (owner == l->owner_cstack) return 0;
  uintptr_t code = load_ptr((const void *)frame, l->frame_code);
  if (!is_a(code, code_type)) return *stop = true, 0;
  uintptr_t instr = load_ptr((const void *)frame, l->frame_instr), first = code + l->code_adaptive;
  if (owner != l->owner_generator && instr < first + 2 * (uintptr_t)load_int((const void *)code, l->code_firsttraceable))
    return 0; /* incomplete: its prologue has not run */
  *code_out = code;
  /* the byte offset of the instruction, as _PyInterpreterFrame_LASTI * 2 */
  return cp_pyframes_raw_line((const void *)code, (int)((intptr_t)(instr - first) / 2 * 2));
}

/* 3.10: the line of a frame object (f_lineno while tracing, else from
 * f_lasti, as PyFrame_GetLineNumber). */
static int object_line(uintptr_t frame, uintptr_t *code_out, bool *stop) {
  uintptr_t code = is_a(frame, frame_type) ? load_ptr((const void *)frame, layout->frame_code) : 0;
  if (!is_a(code, code_type)) return *stop = true, 0;
  *code_out = code;
  int line = load_int((const void *)frame, layout->frame_lineno);
  return line ? line : cp_pyframes_raw_line((const void *)code, load_int((const void *)frame, layout->frame_instr) * 2);
}

unsigned cp_pyframes_raw_capture(const void *tstate, cp_pyframe_t *out, unsigned max) {
  /* Py_FinalizeEx frees the thread states of the threads still running
   * (daemon threads, maybe inside a GIL-released call): from the moment it
   * starts, no state but the finalizing thread's is read. */
  if (!layout || !tstate || is_finalizing()) return 0;
  unsigned n = 0;
  uintptr_t frame = innermost(tstate);
  for (int hops = 0; frame && n < max && hops < HOPS_MAX; hops++) {
    uintptr_t code = 0;
    bool stop = false;
    int line = layout->kind == CP_PYFRAMES_OBJECTS ? object_line(frame, &code, &stop)
                                                   : interpreter_line(frame, &code, &stop);
    if (stop) break;
    if (code) out[n++] = (cp_pyframe_t){.code = code, .line = cp_pyframes_line(line), .raw = true};
    frame = load_ptr((const void *)frame, layout->frame_back);
  }
  return n;
}

/* ---- text: a compact str object's inline characters, as UTF-8 ---------------------- */

/* PyASCIIObject.state, as CPython declares it (the compiler lays the bits
 * out as it does CPython's own); bit 7 is 3.10/3.11's ready, 3.12+'s
 * statically_allocated. */
typedef struct str_state {
  unsigned int interned : 2;
  unsigned int kind : 3;
  unsigned int compact : 1;
  unsigned int ascii : 1;
  unsigned int bit7 : 1;
  unsigned int : 24;
} str_state_t;

typedef struct text {
  char *buf;
  size_t cap, len; /* buf[len] is '\0'; len < cap */
  bool full;       /* something did not fit: nothing more is added, so the text is a prefix */
} text_t;

/* Appends n bytes, or nothing when they do not fit (a code point is never cut). */
static void put(text_t *t, const char *s, size_t n) {
  if (t->full || t->len + n >= t->cap) {
    t->full = true;
    return;
  }
  memcpy(t->buf + t->len, s, n);
  t->len += n;
  t->buf[t->len] = '\0';
}

static void put_code_point(text_t *t, uint32_t c) {
  char u[4];
  if (c < 0x80) {
    u[0] = (char)c;
    put(t, u, 1);
  } else if (c < 0x800) {
    u[0] = (char)(0xc0 | c >> 6), u[1] = (char)(0x80 | (c & 0x3f));
    put(t, u, 2);
  } else if (c >= 0xd800 && c < 0xe000) {
    put(t, "?", 1); /* a lone surrogate has no UTF-8 */
  } else if (c < 0x10000) {
    u[0] = (char)(0xe0 | c >> 12), u[1] = (char)(0x80 | ((c >> 6) & 0x3f)), u[2] = (char)(0x80 | (c & 0x3f));
    put(t, u, 3);
  } else {
    u[0] = (char)(0xf0 | c >> 18), u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    u[2] = (char)(0x80 | ((c >> 6) & 0x3f)), u[3] = (char)(0x80 | (c & 0x3f));
    put(t, u, 4);
  }
}

/* "?" for anything but a compact str (its text inline, after the header). */
static void put_str(text_t *t, uintptr_t obj) {
  if (!is_a(obj, str_type)) {
    put(t, "?", 1);
    return;
  }
  const char *o = (const char *)obj;
  str_state_t st;
  memcpy(&st, o + layout->str_state, sizeof st);
  intptr_t length = (intptr_t)load_ptr(o, layout->str_length);
  bool kind_ok = st.ascii ? st.kind == 1 : st.kind == 1 || st.kind == 2 || st.kind == 4;
  if (!st.compact || length < 0 || !kind_ok) {
    put(t, "?", 1);
    return;
  }
  if (st.ascii) {
    size_t room = t->cap - 1 - t->len;
    put(t, o + layout->str_ascii_size, (size_t)length < room ? (size_t)length : room);
    t->full = t->full || (size_t)length >= room;
    return;
  }
  const char *data = o + layout->str_compact_size;
  for (intptr_t i = 0; i < length && !t->full; i++) {
    uint32_t c;
    if (st.kind == 1) {
      c = ((const uint8_t *)data)[i];
    } else if (st.kind == 2) {
      uint16_t u;
      memcpy(&u, data + 2 * i, sizeof u);
      c = u;
    } else {
      memcpy(&c, data + 4 * i, sizeof c);
    }
    put_code_point(t, c);
  }
}

void cp_pyframes_raw_describe(const cp_pyframe_t *f, char *buf, size_t cap) {
  text_t t = {buf, cap, 0, false};
  buf[0] = '\0';
  if (!layout || !is_a(f->code, code_type)) {
    snprintf(buf, cap, "?:%ld:?", (long)(intptr_t)f->line);
    return;
  }
  char line[24];
  int n = snprintf(line, sizeof line, ":%ld:", (long)(intptr_t)f->line);
  put_str(&t, load_ptr((const void *)f->code, layout->code_filename));
  put(&t, line, (size_t)n);
  put_str(&t, load_ptr((const void *)f->code, layout->code_name));
}
