/* pyframes.c: Python frames through the C API found at run time, or, for a
 * thread that released the GIL, through pyframes_raw.c (pyframes.h).
 * Resolved once, on the first capture: Python is usually the executable or
 * loaded before the first allocation; a process without it pays one failed
 * lookup. */
#include "pyframes.h"

#include "pyframes_raw.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

typedef void py_object;
static struct {
  int (*gil_check)(void);
  int (*is_initialized)(void);
  py_object *(*get_frame)(void);
  py_object *(*frame_code)(py_object *);
  int (*frame_line)(py_object *);
  py_object *(*frame_back)(py_object *);
  py_object *(*get_attr)(py_object *, const char *);
  const char *(*as_utf8)(py_object *);
  void (*decref)(py_object *);
  void (*err_fetch)(py_object **, py_object **, py_object **);
  void (*err_restore)(py_object *, py_object *, py_object *);
  void *(*current_tstate)(void); /* NULL when neither name is exported */
  void *(*this_tstate)(void);    /* the calling thread's own state; safe without the GIL */
} py;
static const char *name_attr; /* co_qualname, co_name before 3.11 */
static bool py_ok;
static pthread_once_t py_once = PTHREAD_ONCE_INIT;

#define PY_RESOLVE(field, name) ((*(void **)&py.field = dlsym(RTLD_DEFAULT, name)) != NULL)

static void resolve(void) {
  py_ok = PY_RESOLVE(gil_check, "PyGILState_Check") && PY_RESOLVE(is_initialized, "Py_IsInitialized") &&
          PY_RESOLVE(get_frame, "PyEval_GetFrame") && PY_RESOLVE(frame_code, "PyFrame_GetCode") &&
          PY_RESOLVE(frame_line, "PyFrame_GetLineNumber") && PY_RESOLVE(frame_back, "PyFrame_GetBack") &&
          PY_RESOLVE(get_attr, "PyObject_GetAttrString") && PY_RESOLVE(as_utf8, "PyUnicode_AsUTF8") &&
          PY_RESOLVE(decref, "Py_DecRef") && PY_RESOLVE(err_fetch, "PyErr_Fetch") &&
          PY_RESOLVE(err_restore, "PyErr_Restore") &&
          PY_RESOLVE(this_tstate, "PyGILState_GetThisThreadState");
  /* PyGILState_Check says 1 on every thread once the GIL-state check is off
   * (subinterpreters turn it off): the current state, read without a check,
   * compared with the thread's own, tells whether it holds the GIL. */
  if (!PY_RESOLVE(current_tstate, "PyThreadState_GetUnchecked")) /* 3.13 */
    (void)(PY_RESOLVE(current_tstate, "_PyThreadState_UncheckedGet"));
  /* co_qualname came in 3.11, as Py_Version did: asked for on 3.10 it would
   * fail on every frame */
  name_attr = dlsym(RTLD_DEFAULT, "Py_Version") ? "co_qualname" : "co_name";
  if (py_ok) cp_pyframes_raw_start();
}

static unsigned capture_holding_gil(cp_pyframe_t *out, unsigned max) {
  unsigned n = 0;
  py_object *frame = py.get_frame(); /* borrowed */
  bool owned = false;
  while (frame && n < max) {
    py_object *code = py.frame_code(frame); /* new reference */
    out[n].code = (uintptr_t)code;
    out[n].line = cp_pyframes_line(py.frame_line(frame));
    out[n].raw = false;
    n++;
    py.decref(code); /* the frame keeps it alive while we run */
    py_object *back = py.frame_back(frame); /* new reference */
    if (owned) py.decref(frame);
    frame = back, owned = true;
  }
  if (owned && frame) py.decref(frame);
  return n;
}

unsigned cp_pyframes_capture(cp_pyframe_t *out, unsigned max) {
  pthread_once(&py_once, resolve);
  if (!py_ok || !py.is_initialized()) return 0;
  void *mine = py.this_tstate();
  if (!mine) return 0; /* no state of its own: no Python frames */
  /* Before 3.12 the "current" state is the GIL holder's, whichever thread
   * asks, and once a subinterpreter existed PyGILState_Check says 1 on every
   * thread: only our own state being the current one says that we hold the
   * GIL (3.12+: the current state is per thread; the test holds there too). */
  bool held = py.gil_check();
  if (held && py.current_tstate) held = py.current_tstate() == mine;
  if (held) return capture_holding_gil(out, max);
  return cp_pyframes_raw_capture(mine, out, max);
}

const char *cp_pyframes_without_gil_unsupported(void) {
  pthread_once(&py_once, resolve);
  return py_ok ? cp_pyframes_raw_unsupported() : NULL;
}

/* GIL held, the program's error indicator put aside by the caller. */
static const char *attr_text(py_object *obj, const char *name, py_object **hold) {
  *hold = py.get_attr(obj, name);
  const char *text = *hold ? py.as_utf8(*hold) : NULL;
  return text ? text : "?";
}

void cp_pyframes_describe(const cp_pyframe_t *f, char *buf, size_t cap) {
  /* The raw text for every frame wherever it can be read: one text a code
   * object, made with no C API call; a frame taken under the GIL can be
   * read the same way (its code object alive, the GIL held). */
  if (f->raw || !cp_pyframes_raw_unsupported()) {
    cp_pyframes_raw_describe(f, buf, cap);
    return;
  }
  /* A C extension may allocate with an exception pending: our lookups
   * must neither see it nor leave one of their own. */
  py_object *type, *value, *traceback;
  py.err_fetch(&type, &value, &traceback);
  py_object *file, *name;
  const char *file_text = attr_text((py_object *)f->code, "co_filename", &file);
  const char *name_text = attr_text((py_object *)f->code, name_attr, &name);
  snprintf(buf, cap, "%s:%ld:%s", file_text, (long)(intptr_t)f->line, name_text);
  if (file) py.decref(file);
  if (name) py.decref(name);
  py.err_restore(type, value, traceback);
}
