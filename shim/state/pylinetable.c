/* pylinetable.c: co_linetable decoded as CPython's own PyCode_Addr2Line
 * walks it (Objects/codeobject.c: advance, _PyCode_CheckLineNumber): from
 * the first entry, adding line deltas to co_firstlineno, until the entry
 * whose address range holds the offset. */
#include "pylinetable.h"

#include <stdbool.h>

/* 3.10: each pair covers bytes[0] bytes of bytecode; bytes[1] is a signed
 * line delta, -128 for "no line". A pair of 0 bytes only moves the line. */
static int line_310(const uint8_t *p, const uint8_t *limit, unsigned line, int offset) {
  int end = 0, ar_line = -1;
  while (end <= offset) {
    if (limit - p < 2) return -1;
    end += p[0]; /* at most 255 a pair, and the table is shorter than INT_MAX pairs */
    int delta = (int8_t)p[1];
    p += 2;
    if (delta == -128) {
      ar_line = -1;
    } else {
      line += (unsigned)delta;
      ar_line = (int)line;
    }
  }
  return ar_line;
}

/* A varint of 6-bit groups, least significant first, bit 6 set when another
 * follows; false when it runs past the table or 32 bits. */
static bool varint(const uint8_t *p, const uint8_t *limit, unsigned *out) {
  unsigned v = 0;
  for (unsigned shift = 0; p < limit && shift < 32; shift += 6) {
    uint8_t b = *p++;
    v |= (unsigned)(b & 63) << shift;
    if (!(b & 64)) {
      *out = v;
      return true;
    }
  }
  return false;
}

enum { LOC_ONE_LINE0 = 10, LOC_ONE_LINE2 = 12, LOC_NO_COLUMNS = 13, LOC_LONG = 14, LOC_NONE = 15 };

/* 3.11+: an entry's first byte has bit 7 set, its code in bits 3-6 and its
 * length in code units minus 1 in bits 0-2; the bytes after it (bit 7
 * clear) hold columns and, for codes 13 and 14, the line delta first, as a
 * signed varint (sign in bit 0). Code 15 has no line. */
static int line_311(const uint8_t *p, const uint8_t *limit, unsigned line, int offset) {
  int end = 0, ar_line = -1;
  while (end <= offset) {
    if (p >= limit || !(*p & 0x80)) return -1;
    int code = (*p >> 3) & 15;
    int delta = 0;
    if (code == LOC_NO_COLUMNS || code == LOC_LONG) {
      unsigned u;
      if (!varint(p + 1, limit, &u)) return -1;
      delta = u & 1 ? -(int)(u >> 1) : (int)(u >> 1);
    } else if (code >= LOC_ONE_LINE0 && code <= LOC_ONE_LINE2) {
      delta = code - LOC_ONE_LINE0;
    }
    line += (unsigned)delta;
    ar_line = code == LOC_NONE ? -1 : (int)line;
    end += ((*p & 7) + 1) * 2;
    do p++;
    while (p < limit && !(*p & 0x80));
  }
  return ar_line;
}

int cp_linetable_line(cp_linetable_format_t format, const uint8_t *table, size_t len, int firstlineno,
                      int byte_offset) {
  if (byte_offset < 0) return firstlineno;
  const uint8_t *limit = table + len;
  /* unsigned sums: a table of nonsense must not overflow a signed int */
  unsigned first = (unsigned)firstlineno;
  return format == CP_LINETABLE_310 ? line_310(table, limit, first, byte_offset)
                                    : line_311(table, limit, first, byte_offset);
}
