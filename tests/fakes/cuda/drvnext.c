/* drvnext.c: libdrvnext.so, a library that calls dlsym with RTLD_NEXT and
 * RTLD_DEFAULT, whose answers depend on who calls: glibc resolves RTLD_NEXT
 * after the calling object and RTLD_DEFAULT in the calling object's scope.
 * An interposed dlsym that called glibc's from its own library would answer
 * for that library instead. It defines drvtest_who itself, so that a lookup
 * starting anywhere before it finds "next", the right one "target" (its
 * dependency, libdrvtarget.so). */
#include <dlfcn.h>

const char *drvtest_who(void);
const char *drvnext_next(void);
const char *drvnext_default(void);

const char *drvtest_who(void) { return "next"; }

const char *drvnext_next(void) {
  const char *(*f)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "drvtest_who");
  return f ? f() : "null";
}

const char *drvnext_default(void) { return dlsym(RTLD_DEFAULT, "drvtarget_only") ? "found" : "missing"; }
