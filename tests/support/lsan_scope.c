/* LeakSanitizer scope for the Criterion test binaries.
 *
 * Criterion's runner process leaks 48 bytes of its own when it runs tests
 * in parallel (--jobs 2; libcriterion 2.4.1), which fails every sanitized
 * run. That leak is suppressed in the runner alone: the workers, where our
 * tests and the code they test run, are told apart by BXFI_MAP, which
 * Criterion's BoxFort sets in every worker it starts, and keep no
 * suppression at all. scripts/run-tests fails a binary whose output holds a
 * LeakSanitizer report, since a worker's leak does not change Criterion's
 * verdict.
 *
 * The sanitizer runtime looks this function up at start, so it must be
 * exported from the executable despite -fvisibility=hidden. */
#include <stdlib.h>

__attribute__((visibility("default"))) const char *__lsan_default_suppressions(void);

const char *__lsan_default_suppressions(void) {
  return getenv("BXFI_MAP") != NULL ? "" : "leak:libcriterion.so\n";
}
