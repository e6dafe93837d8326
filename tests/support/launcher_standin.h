/* launcher_standin.h: a stand-in for libcudapool.so in the launcher's tests
 * (unit/shim/launcher*.c): the first 18 bytes of an ELF shared object
 * (magic, 64-bit little-endian, e_type ET_DYN) and cudapool's version tag,
 * which is what scripts/cudapool checks before it preloads a library
 * (check_lib). ld.so cannot load it: it says so on stderr and runs the
 * program without it, so the tests depend on the script alone, not on the
 * library's build. */
#ifndef CUDAPOOL_LAUNCHER_STANDIN_H
#define CUDAPOOL_LAUNCHER_STANDIN_H

#include <stdio.h>

static const char launcher_standin[] = "\x7f"
                                       "ELF\x02\x01\x01"
                                       "\0\0\0\0\0\0\0\0\0"
                                       "\x03\x00"
                                       "@(#)cudapool 0.0.0\n";

/* path := the stand-in; 0, or -1 when it cannot be written. */
static inline int launcher_put_standin(const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  size_t n = fwrite(launcher_standin, 1, sizeof launcher_standin - 1, f);
  return fclose(f) == 0 && n == sizeof launcher_standin - 1 ? 0 : -1;
}

#endif
