/* parse.c: numbers to text and back, without the locale (see parse.h).
 *
 * Sizes are parsed exactly: the integer part as a uint64 with an overflow
 * check, the fraction as decimal digits multiplied by the suffix's power of
 * two digit by digit, so "1.1G" is floor(1.1 * 2^30) to the byte with no
 * floating point and no overflow. Percentages are small and approximate by
 * nature, so they are doubles. */
#include "parse.h"

#include <inttypes.h>
#include <math.h> /* isnan only: no libm */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The fraction of a size only matters to 40 decimal places: 2^-40 has 40,
 * so floor(f * 2^s) for s <= 40 cannot change past the 40th digit. */
#define FRAC_DIGITS 40

static bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }

/* [*b, *e) := text without the blanks around it. */
static void trim(const char *text, const char **b, const char **e) {
  const char *s = text, *t = text + strlen(text);
  while (s < t && is_blank(*s)) s++;
  while (t > s && is_blank(t[-1])) t--;
  *b = s;
  *e = t;
}

static bool span_ieq(const char *s, const char *e, const char *word) {
  size_t n = (size_t)(e - s);
  if (strlen(word) != n) return false;
  for (size_t i = 0; i < n; i++)
    if (lower(s[i]) != lower(word[i])) return false;
  return true;
}

int cp_is_blank(const char *text) {
  const char *b, *e;
  if (text == NULL) return 1;
  trim(text, &b, &e);
  return b == e;
}

/* floor(0.d[0]d[1]... * 2^shift), by doubling the decimal fraction shift
 * times and collecting the bits that carry out of it. */
static uint64_t frac_floor(const unsigned char *digits, int n, unsigned shift) {
  unsigned char d[FRAC_DIGITS];
  uint64_t bits = 0;
  memcpy(d, digits, (size_t)n);
  for (unsigned s = 0; s < shift; s++) {
    unsigned carry = 0;
    for (int i = n - 1; i >= 0; i--) {
      unsigned v = d[i] * 2u + carry;
      d[i] = (unsigned char)(v % 10u);
      carry = v / 10u;
    }
    bits = (bits << 1) | carry;
  }
  return bits;
}

/* A decimal number as written: its integer part and its fraction's first
 * FRAC_DIGITS digits. */
typedef struct number {
  uint64_t ip;
  bool overflow; /* the integer part does not fit in ip */
  bool point;    /* a fraction was written */
  bool frac_nonzero;
  int nfrac;
  unsigned char frac[FRAC_DIGITS];
} number_t;

/* Digits with an optional fraction; both sides of a point need digits, so
 * ".5" and "5." are not numbers. Returns the end of the number, or NULL. */
static const char *scan_number(const char *s, const char *e, number_t *n) {
  int ndig = 0, fdig = 0;
  *n = (number_t){0};
  for (; s < e && is_digit(*s); s++, ndig++) {
    unsigned d = (unsigned)(*s - '0');
    if (n->ip > (UINT64_MAX - d) / 10u)
      n->overflow = true;
    else
      n->ip = n->ip * 10u + d;
  }
  if (ndig == 0) return NULL;
  if (s < e && *s == '.') {
    n->point = true;
    for (s++; s < e && is_digit(*s); s++, fdig++) {
      if (n->nfrac < FRAC_DIGITS) n->frac[n->nfrac++] = (unsigned char)(*s - '0');
      if (*s != '0') n->frac_nonzero = true;
    }
    if (fdig == 0) return NULL;
  }
  return s;
}

int cp_parse_count(const char *text, unsigned lo, unsigned hi, unsigned *out) {
  const char *s, *e;
  number_t n;
  if (text == NULL || out == NULL) return -1;
  trim(text, &s, &e);
  s = scan_number(s, e, &n);
  if (s != e || n.overflow || n.point || n.ip < lo || n.ip > hi) return -1;
  *out = (unsigned)n.ip;
  return 0;
}

int cp_parse_size(const char *text, uint64_t *bytes) {
  const char *s, *e;
  number_t n;
  unsigned shift = 0;
  if (text == NULL || bytes == NULL) return -1;
  trim(text, &s, &e);
  s = scan_number(s, e, &n);
  if (s == NULL || n.overflow) return -1;
  if (s < e) {
    switch (lower(*s)) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: break;
    }
    if (shift != 0) s++;
    /* "B" alone means bytes; after a unit, "B" or "iB" are both 1024-based. */
    if (shift != 0 && s < e && lower(*s) == 'i') {
      s++;
      if (s == e || lower(*s) != 'b') return -1;
    }
    if (s < e && lower(*s) == 'b') s++;
  }
  if (s != e) return -1;
  /* A byte count is whole: "1.5" alone would have to round somewhere. */
  if (n.point && shift == 0) return -1;
  if (shift != 0 && n.ip > (UINT64_MAX >> shift)) return -1;
  uint64_t v = n.ip << shift;
  uint64_t f = n.point ? frac_floor(n.frac, n.nfrac, shift) : 0;
  if (v > UINT64_MAX - f) return -1;
  *bytes = v + f;
  return 0;
}

static int parse_percent(const char *s, const char *e, double *out) {
  number_t n;
  const char *p = scan_number(s, e, &n);
  if (p == NULL || p != e || n.overflow) return -1;
  if (n.ip > 100 || (n.ip == 100 && n.frac_nonzero) || (n.ip == 0 && !n.frac_nonzero)) return -1;
  double v = (double)n.ip, scale = 0.1;
  for (int i = 0; i < n.nfrac; i++, scale /= 10.0) v += n.frac[i] * scale;
  /* Kept to 6 decimal places, as cp_options_print writes them, so a
   * printed value reads back as the same double; never rounded down to 0. */
  v = (double)(uint64_t)(v * 1e6 + 0.5) / 1e6; /* v <= 101: the cast is safe */
  if (v < 1e-6) v = 1e-6;
  if (v > 100.0) v = 100.0;
  *out = v;
  return 0;
}

int cp_parse_size_or_percent(const char *text, cp_size_opt_t *out) {
  const char *s, *e;
  if (text == NULL || out == NULL) return -1;
  trim(text, &s, &e);
  if (s < e && e[-1] == '%') {
    double p;
    if (parse_percent(s, e - 1, &p) != 0) return -1;
    out->bytes = 0;
    out->percent = p;
    return 0;
  }
  uint64_t bytes;
  if (cp_parse_size(text, &bytes) != 0) return -1;
  out->bytes = bytes;
  out->percent = 0.0;
  return 0;
}

int cp_parse_bool(const char *text, bool *out) {
  static const char *const words[] = {"0", "false", "off", "no", "1", "true", "on", "yes"};
  int i;
  if (out == NULL || cp_parse_keyword(text, words, 8, &i) != 0) return -1;
  *out = i >= 4;
  return 0;
}

int cp_parse_keyword(const char *text, const char *const *words, int nwords, int *index) {
  const char *s, *e;
  if (text == NULL || words == NULL || index == NULL) return -1;
  trim(text, &s, &e);
  for (int i = 0; i < nwords; i++) {
    if (span_ieq(s, e, words[i])) {
      *index = i;
      return 0;
    }
  }
  return -1;
}

uint64_t cp_size_opt_resolve(const cp_size_opt_t *opt, uint64_t total_bytes) {
  if (opt == NULL) return 0;
  if (!(opt->percent > 0.0)) return opt->bytes;
  if (opt->percent >= 100.0) return total_bytes;
  /* long double holds every uint64 exactly, so only the percent rounds. */
  long double v = (long double)total_bytes * (long double)opt->percent / 100.0L;
  if (!(v >= 0.0L)) return 0;
  if (v >= (long double)total_bytes) return total_bytes;
  return (uint64_t)v;
}

int cp_expand_pid(const char *pattern, long pid, char *out, size_t cap) {
  char num[24];
  size_t n = 0, numlen = (size_t)snprintf(num, sizeof num, "%ld", pid);
  if (pattern == NULL || out == NULL || cap == 0) return -1;
  for (const char *p = pattern; *p != '\0'; p++) {
    const char *piece = p;
    size_t len = 1;
    if (p[0] == '%' && p[1] == 'p') {
      piece = num;
      len = numlen;
      p++;
    }
    if (len >= cap - n) return -1;
    memcpy(out + n, piece, len);
    n += len;
  }
  out[n] = '\0';
  return 0;
}

static size_t put(char *buf, size_t cap, int n) {
  if (buf == NULL || cap == 0 || n < 0 || (size_t)n >= cap) {
    if (buf != NULL && cap > 0) buf[0] = '\0';
    return 0;
  }
  return (size_t)n;
}

size_t cp_format_size_exact(uint64_t bytes, char *buf, size_t cap) {
  static const char units[] = "KMGT";
  int u = -1;
  for (int i = 3; i >= 0 && bytes != 0; i--) {
    if ((bytes & ((UINT64_C(1) << (10 * (i + 1))) - 1)) == 0) {
      u = i;
      break;
    }
  }
  if (u < 0) return put(buf, cap, snprintf(buf, cap, "%" PRIu64, bytes));
  return put(buf, cap, snprintf(buf, cap, "%" PRIu64 "%c", bytes >> (10 * (u + 1)), units[u]));
}

size_t cp_format_size_human(uint64_t bytes, char *buf, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return put(buf, cap, snprintf(buf, cap, "%" PRIu64 " B", bytes));
  int u = 1;
  while (u < 6 && bytes >= (UINT64_C(1) << (10 * (u + 1)))) u++;
  uint64_t hundredths;
  for (;;) {
    long double v = (long double)bytes / (long double)(UINT64_C(1) << (10 * u));
    hundredths = (uint64_t)(v * 100.0L + 0.5L);
    /* 1048575 B is 1023.999 KiB: it reads better as 1.00 MiB. */
    if (hundredths < 102400 || u == 6) break;
    u++;
  }
  return put(
      buf, cap,
      snprintf(buf, cap, "%" PRIu64 ".%02u %s", hundredths / 100, (unsigned)(hundredths % 100), units[u]));
}

size_t cp_format_decimal(long double value, int max_dec, int min_dec, char *buf, size_t cap) {
  const long double two63 = 9223372036854775808.0L;
  uint64_t scale = 1, ip, fp;
  if (max_dec < 0) max_dec = 0;
  if (max_dec > 9) max_dec = 9;
  if (min_dec < 0) min_dec = 0;
  if (min_dec > max_dec) min_dec = max_dec;
  for (int i = 0; i < max_dec; i++) scale *= 10u;
  if (isnan(value) || value < 0.0L) value = 0.0L;
  /* The cast of a value past the integer range is undefined: clamp first.
   * Below 2^63, long double's 64-bit mantissa splits value exactly. */
  if (!(value < two63)) {
    ip = (uint64_t)INT64_MAX;
    fp = 0;
  } else {
    ip = (uint64_t)value;
    fp = (uint64_t)((value - (long double)ip) * (long double)scale + 0.5L);
    if (fp >= scale) {
      ip++;
      fp -= scale;
    }
  }
  int dec = max_dec;
  while (dec > min_dec && fp % 10u == 0) {
    fp /= 10u;
    dec--;
  }
  if (dec == 0) return put(buf, cap, snprintf(buf, cap, "%" PRIu64, ip));
  return put(buf, cap, snprintf(buf, cap, "%" PRIu64 ".%0*" PRIu64, ip, dec, fp));
}
