/* secure.c: loads the library named by its first argument with dlopen, as a
 * program linked with it would at start, and exits: the library's
 * constructor reads the options and its destructor writes the report. For
 * the test that runs a set-user-ID copy of it (tests/shim_it_files.c):
 * LD_PRELOAD of a path is ignored in secure execution, dlopen is not.
 * Prints "secure: at_secure=N loaded=0|1"; exit status 0 when loaded. */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/auxv.h>

/* LeakSanitizer cannot stop the threads of a set-user-ID process (it ptraces
 * them), and the sanitizers read no *SAN_OPTIONS variable there: a build with
 * AddressSanitizer takes this instead. Unused in other builds. */
__attribute__((visibility("default"), used)) const char *__asan_default_options(void) {
  return "detect_leaks=0";
}

int main(int argc, char **argv) {
  void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) : NULL;
  printf("secure: at_secure=%lu loaded=%d\n", getauxval(AT_SECURE), h != NULL);
  fflush(stdout);
  if (h == NULL) fprintf(stderr, "secure: %s\n", argc > 1 ? dlerror() : "no library given");
  return h != NULL ? 0 : 1;
}
