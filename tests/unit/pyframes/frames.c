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

enum {
  RELEASED,
  HELD,
  NO_STATE,
  PY_THREAD,
  NO_STATE_GIL_HELD,
  NOLINE_RELEASED,
  NOLINE_HELD,
  GEN_RELEASED,
  CORO_HELD,
  CORO_RELEASED,
  PENDING_ERROR,
  N_CAPTURES
};
static bool error_kept; /* PENDING_ERROR: the probe's pending exception survived the capture */
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
  if (which == PENDING_ERROR) PyErr_SetString(PyExc_KeyError, "the program's own");
  take(&captures[which]);
  if (which == PENDING_ERROR) {
    error_kept = PyErr_ExceptionMatches(PyExc_KeyError);
    PyErr_Clear();
  }
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
                             "Klasse().fläche_π()\n"                        /* 14 */
                             "def noline():\n"                              /* 15 */
                             "    released(5)\n"                            /* 16 */
                             "    held(6)\n"                                /* 17 */
                             "noline.__code__ = noline.__code__.replace(co_linetable=b'')\n"
                             "noline()\n"                                   /* 19 */
                             "def gen():\n"                                 /* 20 */
                             "    released(7)\n"                            /* 21 */
                             "    yield 1\n"                                /* 22 */
                             "for _ in gen(): pass\n"                       /* 23 */
                             "async def coro():\n"                          /* 24 */
                             "    held(8)\n"                                /* 25 */
                             "    released(9)\n"                            /* 26 */
                             "try:\n"                                       /* 27 */
                             "    coro().send(None)\n"                      /* 28 */
                             "except StopIteration:\n"                      /* 29 */
                             "    pass\n"                                   /* 30 */
                             "held(10)\n";                                  /* 31 */

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

/* A function without a line table: every instruction's line is -1, the
 * same key and text read with the GIL or without it. */
Test(pyframes, a_line_of_minus_one_is_one_key_on_both_paths) {
  run_source();
  const capture_t *released = &captures[NOLINE_RELEASED], *held = &captures[NOLINE_HELD];
  cr_assert(eq(int, released->n, 2));
  cr_assert(eq(int, held->n, 2));
  cr_expect(released->f[0].raw);
  cr_expect(not(held->f[0].raw));
  cr_expect(eq(u64, released->f[0].code, held->f[0].code));
  cr_expect(eq(u64, released->f[0].line, held->f[0].line));
  cr_expect(eq(u64, released->f[0].line, (uintptr_t)(intptr_t)-1));
  cr_expect(eq(str, (char *)released->text[0], FILE_NAME ":-1:noline"));
  cr_expect(eq(str, (char *)held->text[0], FILE_NAME ":-1:noline"));
}

/* 3.11+: a generator's or coroutine's frame is owned by it, not the
 * thread, and linked into the chain while it runs. */
Test(pyframes, generator_and_coroutine_frames_are_read_on_both_paths) {
  run_source();
  static const char *const gen[] = {FILE_NAME ":21:gen", FILE_NAME ":23:<module>"};
  static const char *const coro_held[] = {FILE_NAME ":25:coro", FILE_NAME ":28:<module>"};
  static const char *const coro_released[] = {FILE_NAME ":26:coro", FILE_NAME ":28:<module>"};
  expect_texts(&captures[GEN_RELEASED], "generator, GIL released", 2, gen);
  expect_texts(&captures[CORO_HELD], "coroutine, GIL held", 2, coro_held);
  expect_texts(&captures[CORO_RELEASED], "coroutine, GIL released", 2, coro_released);
  cr_expect(captures[GEN_RELEASED].f[0].raw);
  cr_expect(captures[CORO_RELEASED].f[0].raw);
  cr_expect(not(captures[CORO_HELD].f[0].raw));
  cr_expect(eq(u64, captures[CORO_HELD].f[0].code, captures[CORO_RELEASED].f[0].code));
}

/* A C extension may allocate with an exception set: describing the frames
 * must leave it as it was. */
Test(pyframes, a_pending_exception_survives_a_capture_under_the_gil) {
  run_source();
  static const char *const want[] = {FILE_NAME ":31:<module>"};
  expect_texts(&captures[PENDING_ERROR], "exception pending", 1, want);
  cr_expect(error_kept);
}
