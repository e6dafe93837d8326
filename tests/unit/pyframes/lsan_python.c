/* lsan_python.c: LeakSanitizer's suppressions for the Python frames' test
 * binary, in place of tests/support/lsan_scope.c: Criterion's runner leak
 * as there, and in every process what the embedded CPython keeps after
 * Py_FinalizeEx (interned strings, static caches: not ours to free; the
 * modules under test allocate nothing). Exported for the sanitizer runtime,
 * which looks it up at start. */
#include <stdlib.h>

__attribute__((visibility("default"))) const char *__lsan_default_suppressions(void);

const char *__lsan_default_suppressions(void) {
  return getenv("BXFI_MAP") != NULL ? "leak:libpython3\n" : "leak:libcriterion.so\nleak:libpython3\n";
}
