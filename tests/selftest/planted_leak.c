/* A test that leaks on purpose: `make test-sanitize` runs it through
 * scripts/run-tests and expects a failure, which proves that the
 * LeakSanitizer suppression of tests/support/lsan_scope.c hides no leak of ours. */
#include <criterion/criterion.h>
#include <stdlib.h>

static void *volatile planted;

Test(selftest, leaks_on_purpose) {
  planted = malloc(77);
  planted = NULL;
  cr_assert(1);
}
