/* size_grammar.c: one size grammar in three languages. The library's
 * parser (common/parse.c, cp_parse_size) is the reference; the launcher's
 * bash copy (scripts/cudapool is_size_or_percent, through --max-cached,
 * against cp_parse_size_or_percent) and the Python package's
 * (cudapool.parse_size, bytes only) must accept exactly what it accepts and,
 * where they give a number (Python), the same number. Each case runs all
 * three; a grammar changed in one place fails here until the other two
 * follow. Runs from the repository root (make test does). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "options.h"

static const char *const cases[] = {
    "0",          "1",      "512",        "64K",       "64k",       "1.5G",     "8GiB",     "8gib",
    "2tb",        "2TB",    "100B",       "100b",      " 8G ",      "1.5",      "1.5B",     "8GB",
    "8Gi",        "8 G",    "G",          "-1",        "+1",        "0x10",     "1e3",      "8G8",
    "1.G",        ".5G",    "16777215T",  "16777216T", "18446744073709551615", "18446744073709551616",
    "17179869183G", "17179869184G", "0.0009765625K", "3.999999999G", "",  "80%",  "1,5G", "8M ", "100%", "100.0%", "100.5%", "0%",
    "0.5%", "101%", "%", "50 %"};

/* The exit status of sh -c cmd; its stdout in out. */
static int run(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  cr_assert(ne(ptr, p, NULL));
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  bool exited = WIFEXITED(st);
  cr_assert(exited, "%s", cmd);
  return WEXITSTATUS(st);
}

Test(size_grammar, launcher_and_python_accept_what_the_library_accepts) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *text = cases[i];
    uint64_t bytes = 0;
    bool lib_ok = cp_parse_size(text, &bytes) == 0;
    cp_size_opt_t size_or_percent;
    bool lib_percent_ok = cp_parse_size_or_percent(text, &size_or_percent) == 0;
    char cmd[512], out[256];
    /* No library at that path: a value the launcher accepts gets as far as
     * looking for it (127); a refused one stops at the value (2). */
    snprintf(cmd, sizeof cmd,
             "env -i PATH=/usr/bin:/bin CUDAPOOL_LIB=/nonexistent/libcudapool.so scripts/cudapool "
             "--max-cached='%s' -- true 2>/dev/null",
             text);
    int rc = run(cmd, out, sizeof out);
    cr_expect(rc == 127 || rc == 2, "launcher on \"%s\": exit %d", text, rc);
    cr_expect(eq(int, rc == 127, lib_percent_ok), "\"%s\": the library %s it, the launcher %s it", text,
              lib_percent_ok ? "accepts" : "refuses", rc == 127 ? "accepts" : "refuses");
    snprintf(cmd, sizeof cmd,
             "env -i PATH=/usr/bin:/bin PYTHONPATH=python python3 -c 'import sys, cudapool\n"
             "try: print(cudapool.parse_size(sys.argv[1]))\nexcept ValueError: print(\"refused\")' '%s'",
             text);
    cr_assert(eq(int, run(cmd, out, sizeof out), 0), "python on \"%s\" failed: %s", text, out);
    char want[32];
    snprintf(want, sizeof want, "%" PRIu64 "\n", bytes);
    cr_expect(eq(str, out, lib_ok ? want : "refused\n"), "\"%s\": the library says %s, Python %s", text,
              lib_ok ? want : "refused", out);
  }
}
