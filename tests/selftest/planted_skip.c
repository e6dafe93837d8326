/* planted_skip.c: one test that passes and one that skips, for
 * tests/unit/shim/run_tests.c: scripts/run-tests must count the skip in its
 * closing line and list it with its reason. Not run by make test itself. */
#include <criterion/criterion.h>

Test(planted, passes) { cr_assert(1); }

Test(planted, skips_with_a_reason) { cr_skip_test("no widget here (a planted skip)"); }
