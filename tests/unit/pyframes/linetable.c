/* linetable.c: shim/state/pylinetable.c's lines, as the raw path reads them
 * (cp_pyframes_raw_line: the code object's co_linetable found through the
 * layout row), equal PyCode_Addr2Line's at every instruction of real code
 * objects, taken under the GIL: a module of multi-line expressions, loops
 * that jump back to an earlier line, comprehensions, handlers, with blocks,
 * generators and coroutines, and two modules of the standard library; and
 * tables of nonsense are never read past their end. */
#include <Python.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "state/pyframes.h"
#include "state/pyframes_raw.h"
#include "state/pylinetable.h"

static const char source[] = "import threading, dataclasses\n"
                             "SRC = '''\n"
                             "def multi(a, b):\n"
                             "    x = (a +\n"
                             "         b *\n"
                             "         (a -\n"
                             "          b))\n"
                             "    for i in range(3):\n"
                             "        x += i\n"
                             "    while x > 0:\n"
                             "        x -= 1\n"
                             "    try:\n"
                             "        y = [z\n"
                             "             for z in range(x)]\n"
                             "    except Exception as e:\n"
                             "        y = None\n"
                             "    with open(__file__) as f:\n"
                             "        pass\n"
                             "    return (x,\n"
                             "            y)\n"
                             "async def coro(other):\n"
                             "    await other()\n"
                             "def gen():\n"
                             "    yield from range(3)\n"
                             "class K:\n"
                             "    def m(self): return lambda q: q\n"
                             "'''\n"
                             "def walk(c, out):\n"
                             "    out.append(c)\n"
                             "    for k in c.co_consts:\n"
                             "        if hasattr(k, 'co_code'): walk(k, out)\n"
                             "codes = []\n"
                             "walk(compile(SRC, 'lt.py', 'exec'), codes)\n"
                             "for m in (threading, dataclasses):\n"
                             "    with open(m.__file__) as f:\n"
                             "        walk(compile(f.read(), m.__file__, 'exec'), codes)\n"
                             "sizes = [len(c.co_code) for c in codes]\n";

Test(pylinetable, every_instruction_of_real_code_objects_has_the_line_python_gives) {
  Py_InitializeEx(0);
  cr_assert(eq(ptr, (char *)cp_pyframes_without_gil_unsupported(), NULL), "%s", cp_pyframes_without_gil_unsupported());
  PyObject *globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject *result = PyRun_String(source, Py_file_input, globals, globals);
  if (!result) PyErr_Print();
  cr_assert(not(eq(ptr, result, NULL)));
  PyObject *codes = PyDict_GetItemString(globals, "codes"), *sizes = PyDict_GetItemString(globals, "sizes");
  long instructions = 0, no_line = 0, back = 0, firsts = 0;
  for (Py_ssize_t i = 0; i < PyList_Size(codes); i++) {
    PyCodeObject *code = (PyCodeObject *)PyList_GetItem(codes, i);
    long size = PyLong_AsLong(PyList_GetItem(sizes, i));
    int before = 0;
    for (int offset = 0; offset < size; offset += 2, instructions++) {
      int ours = cp_pyframes_raw_line(code, offset), python = PyCode_Addr2Line(code, offset);
      cr_expect(eq(int, ours, python), "code object %zd (%s), byte offset %d", i,
                PyUnicode_AsUTF8(code->co_name), offset);
      no_line += python < 0;
      back += python > 0 && python < before;
      if (python > 0) before = python;
    }
    /* before the first instruction (3.10's f_lasti of -1, 3.11's prev_instr) */
    cr_expect(eq(int, cp_pyframes_raw_line(code, -2), PyCode_Addr2Line(code, -2)));
    firsts++;
  }
  /* the cases named above occurred */
  cr_expect(gt(long, instructions, 5000), "%ld instructions", instructions);
  cr_expect(gt(long, no_line, 0), "no instruction without a line");
  cr_expect(gt(long, back, 0), "no line that jumps back");
  cr_expect(gt(long, firsts, 100), "%ld code objects", firsts);
  cr_expect(eq(int, cp_pyframes_raw_line(globals, 0), -1), "not a code object");
  Py_DecRef(result), Py_DecRef(globals);
  cr_assert(eq(int, Py_FinalizeEx(), 0));
}

Test(pylinetable, a_table_of_nonsense_is_never_read_past_its_end) {
  /* each on the heap at its exact size, so that ASan sees one byte too far */
  static const uint8_t varint_runs_off[] = {0x80 | 13 << 3, 0x41, 0x41};
  static const uint8_t no_entry_start[] = {0x05, 0x06};
  static const uint8_t odd_pair[] = {0x02, 0x01, 0x02};
  static const uint8_t long_varint[] = {0x80 | 14 << 3, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f};
  const struct {
    cp_linetable_format_t format;
    const uint8_t *bytes;
    size_t len;
    int offset, line;
  } cases[] = {
      {CP_LINETABLE_311, varint_runs_off, sizeof varint_runs_off, 0, -1},
      {CP_LINETABLE_311, no_entry_start, sizeof no_entry_start, 0, -1},
      {CP_LINETABLE_311, long_varint, sizeof long_varint, 0, -1},
      {CP_LINETABLE_310, odd_pair, sizeof odd_pair, 0, 11}, /* the first pair is whole */
      {CP_LINETABLE_310, odd_pair, sizeof odd_pair, 2, -1},
      {CP_LINETABLE_311, NULL, 0, 0, -1},
      {CP_LINETABLE_310, NULL, 0, 0, -1},
      {CP_LINETABLE_311, NULL, 0, -2, 10}, /* before the first instruction: co_firstlineno */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t *copy = malloc(cases[i].len ? cases[i].len : 1);
    cr_assert(not(eq(ptr, copy, NULL)));
    if (cases[i].len) memcpy(copy, cases[i].bytes, cases[i].len);
    cr_expect(eq(int, cp_linetable_line(cases[i].format, copy, cases[i].len, 10, cases[i].offset), cases[i].line),
              "case %zu", i);
    free(copy);
  }
}
