/* pylinetable.h: the source line of an instruction, from a CPython code
 * object's line table (co_linetable), decoded here.
 *
 * Owns the two table formats of the supported versions: 3.10's (pairs of
 * bytecode delta and line delta, Objects/lnotab_notes.txt) and 3.11+'s
 * location table (Objects/locations.md). PyCode_Addr2Line is not used for
 * a thread without the GIL because 3.11's reads _co_linearray, which a line
 * tracer on another thread creates lazily (the pointer stored before the
 * entry size and the contents); co_linetable itself is an immutable bytes
 * object that lives as long as its code object.
 *
 * Invariants: the answer equals PyCode_Addr2Line's for every instruction
 * of a well-formed table (tests/unit/pyframes/linetable.c checks real code
 * objects); nothing is read outside [table, table + len), whatever the
 * bytes say. Pure code: no Python call, no state, no locking. */
#ifndef CUDAPOOL_SHIM_PYLINETABLE_H
#define CUDAPOOL_SHIM_PYLINETABLE_H

#include <stddef.h>
#include <stdint.h>

typedef enum cp_linetable_format {
  CP_LINETABLE_310, /* 3.10: (bytes, signed line delta) pairs, -128 = no line */
  CP_LINETABLE_311, /* 3.11+: location entries of 1 to 8 code units */
} cp_linetable_format_t;

/* The line of the instruction at byte_offset (code units * 2), -1 for one
 * without a line or past the table; a negative byte_offset (before the
 * first instruction) gives firstlineno, as PyCode_Addr2Line does. */
int cp_linetable_line(cp_linetable_format_t format, const uint8_t *table, size_t len, int firstlineno,
                      int byte_offset);

#endif
