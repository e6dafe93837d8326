/* frames.c: shim/state/pyframes.c's two paths in an embedded CPython.
 * Python code calls cp_test_probe (exported by this program) through
 * ctypes: through CDLL, which releases the GIL (the raw path,
 * pyframes_raw.c), and through PyDLL, which holds it (the C API); from the
 * main thread and from a threading.Thread; and the probe asks again from a
 * thread of its own that has no Python state. Each capture is described at
 * once, as stacks.c does. The file and function names are not ASCII (one
 * of each width CPython stores: 1, 2 and 4 bytes a character), so the raw
 * path's own UTF-8 conversion is checked against the C API's. */
#include <Python.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "state/pyframes.h"

#define MAX_FRAMES 16
#define FILE_NAME "/src/modèle_𝔣.py"
/* the name a frame is given: co_qualname, co_name before 3.11 */
#if PY_MINOR_VERSION >= 11
#define METHOD "Klasse.fläche_π"
#else
#define METHOD "fläche_π"
#endif

typedef struct capture {
  int n; /* -1: not taken */
  cp_pyframe_t f[MAX_FRAMES];
  char text[MAX_FRAMES][512];
  char cut[10]; /* frame 0 described into too small a buffer */
} capture_t;

enum { RELEASED, HELD, NO_STATE, PY_THREAD, NO_STATE_GIL_HELD, N_CAPTURES };
static capture_t captures[N_CAPTURES];

static void take(capture_t *c) {
  c->n = (int)cp_pyframes_capture(c->f, MAX_FRAMES);
  for (int i = 0; i < c->n; i++) cp_pyframes_describe(&c->f[i], c->text[i], sizeof c->text[i]);
  if (c->n > 0) cp_pyframes_describe(&c->f[0], c->cut, sizeof c->cut);
}

static void *thread_without_state(void *c) {
  take(c);
  return NULL;
}

__attribute__((visibility("default"))) void cp_test_probe(int which) {
  take(&captures[which]);
  /* a C thread of the program's, while this thread holds the GIL or not */
  if (which == RELEASED || which == HELD) {
    pthread_t t;
    capture_t *c = &captures[which == RELEASED ? NO_STATE : NO_STATE_GIL_HELD];
    cr_assert(eq(int, pthread_create(&t, NULL, thread_without_state, c), 0));
    pthread_join(t, NULL);
  }
}

/* Line numbers below are those of this source. */
static const char source[] = "import ctypes, threading\n"                  /* 1 */
                             "released = ctypes.CDLL(None).cp_test_probe\n" /* 2 */
                             "held = ctypes.PyDLL(None).cp_test_probe\n"    /* 3 */
                             "def größe():\n"                               /* 4 */
                             "    released(0)\n"                            /* 5 */
                             "    held(1)\n"                                /* 6 */
                             "class Klasse:\n"                              /* 7 */
                             "    def fläche_π(self):\n"                    /* 8 */
                             "        größe()\n"                            /* 9 */
                             "def worker():\n"                              /* 10 */
                             "    released(3)\n"                            /* 11 */
                             "t = threading.Thread(target=worker)\n"        /* 12 */
                             "t.start(); t.join()\n"                        /* 13 */
                             "Klasse().fläche_π()\n";                       /* 14 */

/* A subinterpreter made and ended first turns CPython's GIL-state check off
 * for the rest of the process (PyGILState_Check then says 1 on every
 * thread), as _xxsubinterpreters.create() does. */
static void run_source_after(bool subinterpreter) {
  for (int i = 0; i < N_CAPTURES; i++) captures[i].n = -1;
  Py_InitializeEx(0);
  if (subinterpreter) {
    PyThreadState *main_state = PyThreadState_Get();
    PyThreadState *sub = Py_NewInterpreter();
    cr_assert(not(eq(ptr, sub, NULL)), "no subinterpreter");
    Py_EndInterpreter(sub);
    PyThreadState_Swap(main_state);
  }
  PyObject *code = Py_CompileString(source, FILE_NAME, Py_file_input);
  cr_assert(not(eq(ptr, code, NULL)), "source does not compile");
  PyObject *globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject *result = PyEval_EvalCode(code, globals, globals);
  if (!result) PyErr_Print();
  cr_assert(not(eq(ptr, result, NULL)), "the source raised");
  Py_DecRef(result), Py_DecRef(globals), Py_DecRef(code);
  cr_assert(eq(int, Py_FinalizeEx(), 0));
}

static void run_source(void) { run_source_after(false); }

static void expect_texts(const capture_t *c, const char *what, int n, const char *const *texts) {
  cr_assert(eq(int, c->n, n), "%s: %d frames", what, c->n);
  for (int i = 0; i < n; i++) cr_expect(eq(str, (char *)c->text[i], (char *)texts[i]), "%s: frame %d", what, i);
}

Test(pyframes, a_thread_that_released_the_gil_names_its_python_lines) {
  run_source();
  static const char *const want[] = {FILE_NAME ":5:größe", FILE_NAME ":9:" METHOD, FILE_NAME ":14:<module>"};
  expect_texts(&captures[RELEASED], "GIL released", 3, want);
  for (int i = 0; i < 3; i++) cr_expect(captures[RELEASED].f[i].raw, "frame %d read without the GIL", i);
}

Test(pyframes, both_paths_give_the_same_frames) {
  run_source();
  static const char *const want[] = {FILE_NAME ":6:größe", FILE_NAME ":9:" METHOD, FILE_NAME ":14:<module>"};
  expect_texts(&captures[HELD], "GIL held", 3, want);
  for (int i = 0; i < 3; i++) {
    cr_expect(not(captures[HELD].f[i].raw), "frame %d read through the C API", i);
    /* the same code objects: the key of a stack does not depend on the path */
    cr_expect(eq(u64, captures[HELD].f[i].code, captures[RELEASED].f[i].code), "frame %d's code object", i);
  }
  cr_expect(eq(u64, captures[HELD].f[1].line, captures[RELEASED].f[1].line));
  cr_expect(eq(u64, captures[HELD].f[2].line, captures[RELEASED].f[2].line));
}

/* "/src/mod" then "è" (2 bytes) does not fit in 10 with its '\0', and
 * nothing after it is added: a text cut short is a prefix of the whole. */
Test(pyframes, a_text_cut_short_is_a_prefix_of_whole_code_points) {
  run_source();
  cr_expect(eq(str, captures[RELEASED].cut, "/src/mod"));
}

Test(pyframes, a_thread_without_python_state_has_no_python_frames) {
  run_source();
  cr_expect(eq(int, captures[NO_STATE].n, 0));
  cr_expect(eq(int, captures[NO_STATE_GIL_HELD].n, 0));
}

/* Before 3.12 the "current" thread state is the GIL holder's, whoever asks:
 * with the check off, a thread without a state of its own must not take the
 * holder's frames (read without the GIL) for its own. */
Test(pyframes, after_a_subinterpreter_a_thread_without_python_state_still_has_none) {
  run_source_after(true);
  cr_expect(eq(int, captures[NO_STATE_GIL_HELD].n, 0), "%d frames: %s", captures[NO_STATE_GIL_HELD].n,
            captures[NO_STATE_GIL_HELD].text[0]);
  cr_expect(eq(int, captures[NO_STATE].n, 0));
  /* the threads with a state still read their own */
  cr_expect(eq(int, captures[HELD].n, 3));
  cr_expect(eq(int, captures[RELEASED].n, 3));
  cr_expect(eq(int, captures[PY_THREAD].n >= 2, 1));
}

Test(pyframes, a_python_thread_reads_its_own_frames) {
  run_source();
  const capture_t *c = &captures[PY_THREAD];
  cr_assert(ge(int, c->n, 2), "%d frames", c->n);
  cr_expect(eq(str, (char *)c->text[0], FILE_NAME ":11:worker"));
  /* then threading.py's Thread.run and its bootstrap, never the main thread's frames */
  const char *run = strstr(c->text[1], "threading.py:");
  cr_expect(not(eq(ptr, (char *)run, NULL)), "frame 1: %s", c->text[1]);
#if PY_MINOR_VERSION >= 11
  const char *run_name = ":Thread.run"; /* co_qualname */
#else
  const char *run_name = ":run";
#endif
  size_t len = strlen(c->text[1]), name_len = strlen(run_name);
  cr_expect(len > name_len && strcmp(c->text[1] + len - name_len, run_name) == 0, "frame 1: %s", c->text[1]);
  for (int i = 0; i < c->n; i++) cr_expect(strstr(c->text[i], "<module>") == NULL, "frame %d: %s", i, c->text[i]);
}
