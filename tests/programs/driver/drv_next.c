/* drv_next.c: dlsym keeps glibc's caller-relative answers under the shim,
 * whose dlsym sits in front of glibc's. libdrvnext.so asks for
 * dlsym(RTLD_NEXT, "drvtest_who"), which must find its dependency's
 * definition ("target"), and for dlsym(RTLD_DEFAULT, "drvtarget_only"),
 * which its own scope sees when it was loaded RTLD_LOCAL. Run twice: the
 * library dlopen'ed locally, then (the program runs itself again with the
 * library appended to LD_PRELOAD) preloaded after libcudapool.so. The
 * program defines drvtest_who too ("main"), exported. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *drvtest_who(void);
__attribute__((visibility("default"))) const char *drvtest_who(void) { return "main"; }

typedef const char *who_fn(void);

static void lib_path(char *out, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  snprintf(out, cap, "%s/../fakecuda/libdrvnext.so", dirname(exe));
}

static const char *call(void *h, const char *name) {
  who_fn *f = (who_fn *)dlsym(h, name);
  return f ? f() : "absent";
}

int main(int argc, char **argv) {
  char lib[PATH_MAX + 64];
  lib_path(lib, sizeof lib);
  who_fn *next_from_main = (who_fn *)dlsym(RTLD_NEXT, "drvtest_who");
  who_fn *deflt = (who_fn *)dlsym(RTLD_DEFAULT, "drvtest_who");
  if (argc > 1 && strcmp(argv[1], "--preloaded") == 0) {
    printf("preloaded: next=%s default=%s main_default=%s main_next=%s\n", call(RTLD_DEFAULT, "drvnext_next"),
           call(RTLD_DEFAULT, "drvnext_default"), deflt ? deflt() : "null",
           next_from_main ? next_from_main() : "null");
    return 0;
  }
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  printf("local: loaded=%d next=%s default=%s main_default=%s main_next=%s malloc_next=%d\n", h != NULL,
         h ? call(h, "drvnext_next") : "-", h ? call(h, "drvnext_default") : "-", deflt ? deflt() : "null",
         next_from_main ? next_from_main() : "null", dlsym(RTLD_NEXT, "malloc") != NULL);
  fflush(stdout);
  const char *pre = getenv("LD_PRELOAD");
  char env[3 * PATH_MAX];
  snprintf(env, sizeof env, "%s%s%s", pre ? pre : "", pre && *pre ? " " : "", lib);
  setenv("LD_PRELOAD", env, 1);
  char *args[] = {argv[0], "--preloaded", NULL};
  execv("/proc/self/exe", args);
  return 1;
}
