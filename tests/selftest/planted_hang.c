/* planted_hang.c: one test whose forked child never ends, as a fork that
 * copied a held allocator lock would not, for tests/unit/shim/run_tests.c:
 * scripts/run-tests must kill it (the child too) once its time is up, fail
 * the binary and name the test. Not run by make test itself. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <sys/wait.h>
#include <unistd.h>

Test(planted, hangs_in_a_forked_child) {
  pid_t pid = fork();
  cr_assert(ge(int, pid, 0));
  if (pid == 0)
    for (;;) pause();
  waitpid(pid, NULL, 0);
}
