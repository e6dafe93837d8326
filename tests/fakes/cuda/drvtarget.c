/* drvtarget.c: libdrvtarget.so, a dependency of libdrvnext.so for the dlsym
 * tests: the definition of drvtest_who that RTLD_NEXT from libdrvnext must
 * find, and a name only its own group can see. */
const char *drvtest_who(void);
int drvtarget_only(void);

const char *drvtest_who(void) { return "target"; }
int drvtarget_only(void) { return 1; }
