/* parse.c: one line of an allocation trace -> rp_line_t.
 *
 * Owns the CSV grammar the replayer accepts: RMM's logging-adaptor columns
 * Thread,Time,Action,Pointer,Size,Stream as written by cudapool's recorder
 * (common/trace.c), by RMM, and by the recorder of the shared PyTorch traces.
 *   Thread   decimal or 0x-hex
 *   Time     seconds ("4.583414") or RMM's clock "HH:MM:SS.us" / "HH:MM:SS:us"
 *   Action   allocate, free (or deallocate), allocate failure, sync_stream,
 *            sync_device, empty_cache, and the shim's decision events
 *            stream_create, stream_destroy, capture_begin, capture_end,
 *            per_thread_stream; any other word is an extra action that
 *            replay skips (segment_alloc, barrier, fence, oom, ...)
 *   Pointer  0x-hex, 0 or (nil);  Size decimal;  Stream like Pointer
 *   Stack    optional 7th column (cudapool's recorder with CUDAPOOL_STACKS:
 *            a stack id, or empty), read past: it does not change a replay
 *
 * Pure: no allocation, no global state, no locale, never reads past len (the
 * fuzzer feeds it raw bytes). On error *out is untouched and err holds one
 * sentence naming the column and quoting what was there. */
#include "replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#define NCOLS 6

typedef struct field {
  const char *s;
  size_t n;
} field_t;

/* The field as it can be quoted in a message: at most 40 bytes, anything not
 * printable ASCII shown as '?', so a garbage line gives a readable message. */
static const char *quote(field_t f, char *buf, size_t cap) {
  size_t n = f.n < 40 ? f.n : 40;
  if (n + 4 > cap) n = cap - 4;
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)f.s[i];
    buf[j++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  if (f.n > n) {
    buf[j++] = '.';
    buf[j++] = '.';
    buf[j++] = '.';
  }
  buf[j] = '\0';
  return buf;
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

static field_t trim(const char *s, size_t n) {
  while (n > 0 && is_blank(s[0])) {
    s++;
    n--;
  }
  while (n > 0 && is_blank(s[n - 1])) n--;
  return (field_t){s, n};
}

static bool eq_nocase(field_t f, const char *word) {
  size_t n = strlen(word);
  if (f.n != n) return false;
  for (size_t i = 0; i < n; i++) {
    char c = f.s[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != word[i]) return false;
  }
  return true;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Decimal digits only, no sign; false on overflow or anything else. */
static bool parse_dec(field_t f, uint64_t *out) {
  if (f.n == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < f.n; i++) {
    char c = f.s[i];
    if (c < '0' || c > '9') return false;
    uint64_t d = (uint64_t)(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

/* "0x" then 1..16 hex digits. */
static bool parse_hex(field_t f, uint64_t *out) {
  if (f.n < 3 || f.n > 18 || f.s[0] != '0' || (f.s[1] != 'x' && f.s[1] != 'X')) return false;
  uint64_t v = 0;
  for (size_t i = 2; i < f.n; i++) {
    int h = hexval(f.s[i]);
    if (h < 0) return false;
    v = v << 4 | (uint64_t)h;
  }
  *out = v;
  return true;
}

/* Pointer and Stream: 0x-hex, "(nil)" (glibc's %p of NULL) or "0". */
static bool parse_ptr(field_t f, uint64_t *out) {
  if (eq_nocase(f, "(nil)") || (f.n == 1 && f.s[0] == '0')) {
    *out = 0;
    return true;
  }
  return parse_hex(f, out);
}

static bool parse_number(field_t f, uint64_t *out) { return parse_hex(f, out) || parse_dec(f, out); }

/* digits[.digits]: seconds. Integer part and fraction are read as integers
 * and divided once, so "4.583414" is the double nearest to it. */
static bool parse_seconds(field_t f, double *out) {
  size_t i = 0;
  uint64_t ip = 0, frac = 0, scale = 1;
  while (i < f.n && f.s[i] >= '0' && f.s[i] <= '9' && i < 18) ip = ip * 10 + (uint64_t)(f.s[i++] - '0');
  if (i == 0) return false;
  if (i < f.n && f.s[i] == '.') {
    size_t start = ++i;
    while (i < f.n && f.s[i] >= '0' && f.s[i] <= '9' && i - start < 18) {
      frac = frac * 10 + (uint64_t)(f.s[i++] - '0');
      scale *= 10;
    }
    if (i == start) return false;
  }
  if (i != f.n) return false;
  *out = (double)ip + (double)frac / (double)scale;
  return true;
}

/* RMM's clock: HH:MM:SS then '.' or ':' then the microseconds. */
static bool parse_clock(field_t f, double *out) {
  uint64_t part[4] = {0};
  size_t i = 0;
  for (int k = 0; k < 4; k++) {
    size_t start = i;
    while (i < f.n && f.s[i] >= '0' && f.s[i] <= '9' && i - start < 9)
      part[k] = part[k] * 10 + (uint64_t)(f.s[i++] - '0');
    if (i == start) return false;
    if (k == 3) break;
    if (i >= f.n || (f.s[i] != ':' && !(k == 2 && f.s[i] == '.'))) return false;
    i++;
  }
  if (i != f.n || part[1] > 59 || part[2] > 60) return false;
  *out = (double)part[0] * 3600 + (double)part[1] * 60 + (double)part[2] + (double)part[3] * 1e-6;
  return true;
}

static const struct {
  const char *name;
  enum rp_kind kind;
} actions[] = {
    {"allocate", RP_LINE_ALLOC},
    {"free", RP_LINE_FREE},
    {"deallocate", RP_LINE_FREE},
    {"allocate failure", RP_LINE_ALLOC_FAIL},
    {"allocate_failure", RP_LINE_ALLOC_FAIL},
    {"sync_stream", RP_LINE_SYNC_STREAM},
    {"sync_device", RP_LINE_SYNC_DEVICE},
    {"empty_cache", RP_LINE_EMPTY_CACHE},
    {"stream_create", RP_LINE_STREAM_CREATE},
    {"stream_destroy", RP_LINE_STREAM_DESTROY},
    {"capture_begin", RP_LINE_CAPTURE_BEGIN},
    {"capture_end", RP_LINE_CAPTURE_END},
    {"per_thread_stream", RP_LINE_PER_THREAD_STREAM},
    {"order", RP_LINE_ORDER},
    {"segment_alloc", RP_LINE_SEGMENT_ALLOC},
};

/* An action we do not know but that looks like one: a word of letters,
 * digits, '_', '-' or ' '. Anything else is garbage. */
static bool is_extra_action(field_t f) {
  if (f.n == 0 || f.n > 64) return false;
  for (size_t i = 0; i < f.n; i++) {
    char c = f.s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == ' ';
    if (!ok) return false;
  }
  return true;
}

static bool header_match(const field_t *col) {
  static const char *const lower[NCOLS] = {"thread", "time", "action", "pointer", "size", "stream"};
  for (int i = 0; i < NCOLS; i++)
    if (!eq_nocase(col[i], lower[i])) return false;
  return true;
}

int rp_parse_line(const char *s, size_t len, rp_line_t *out, char *err, size_t errlen) {
  char q[48];
  if (len > 0 && s[len - 1] == '\r') len--;
  if (len > RP_MAX_LINE) return cp_fail_msg(err, errlen, "line longer than %d bytes", RP_MAX_LINE);
  if (memchr(s, '\0', len) != NULL) return cp_fail_msg(err, errlen, "NUL byte in line");
  field_t whole = trim(s, len);
  if (whole.n == 0 || whole.s[0] == '#') {
    *out = (rp_line_t){.kind = RP_LINE_BLANK};
    return 0;
  }

  field_t col[NCOLS];
  int ncol = 0;
  const char *p = s, *end = s + len;
  for (;;) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *stop = comma ? comma : end;
    if (ncol < NCOLS) col[ncol] = trim(p, (size_t)(stop - p));
    ncol++;
    if (!comma) break;
    p = comma + 1;
  }
  /* A 7th column, Stack (CUDAPOOL_STACKS), names call sites: nothing to
   * replay. */
  if (ncol != NCOLS && ncol != NCOLS + 1)
    return cp_fail_msg(err, errlen, "expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found %d",
                       ncol);
  if (header_match(col)) {
    *out = (rp_line_t){.kind = RP_LINE_HEADER};
    return 0;
  }

  rp_line_t l = {0};
  if (!parse_number(col[0], &l.thread))
    return cp_fail_msg(err, errlen, "bad Thread '%s'", quote(col[0], q, sizeof q));
  if (parse_seconds(col[1], &l.time))
    l.clock_time = false;
  else if (parse_clock(col[1], &l.time))
    l.clock_time = true;
  else
    return cp_fail_msg(err, errlen, "bad Time '%s'", quote(col[1], q, sizeof q));
  l.kind = RP_LINE_EXTRA;
  bool known = false;
  for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
    if (eq_nocase(col[2], actions[i].name)) {
      l.kind = actions[i].kind;
      known = true;
      break;
    }
  }
  if (!known && !is_extra_action(col[2]))
    return cp_fail_msg(err, errlen, "bad Action '%s'", quote(col[2], q, sizeof q));
  if (!parse_ptr(col[3], &l.ptr))
    return cp_fail_msg(err, errlen, "bad Pointer '%s'", quote(col[3], q, sizeof q));
  if (!parse_dec(col[4], &l.size)) {
    bool digits = col[4].n > 0;
    for (size_t i = 0; i < col[4].n; i++) digits = digits && col[4].s[i] >= '0' && col[4].s[i] <= '9';
    return cp_fail_msg(err, errlen, digits ? "Size '%s' out of range" : "bad Size '%s'",
                       quote(col[4], q, sizeof q));
  }
  if (l.size > SIZE_MAX)
    return cp_fail_msg(err, errlen, "Size '%s' out of range", quote(col[4], q, sizeof q));
  if (!parse_ptr(col[5], &l.stream))
    return cp_fail_msg(err, errlen, "bad Stream '%s'", quote(col[5], q, sizeof q));
  /* cudaMalloc(&p, 0) succeeds with p = NULL: a line, nothing to replay. */
  if (l.kind == RP_LINE_ALLOC && l.ptr == 0 && l.size == 0) l.kind = RP_LINE_ZERO_ALLOC;
  if (l.kind == RP_LINE_ALLOC && l.ptr == 0)
    return cp_fail_msg(err, errlen, "allocate of %" PRIu64 " bytes with a null Pointer", l.size);
  if (l.kind == RP_LINE_ALLOC && l.size == 0) return cp_fail_msg(err, errlen, "allocate of 0 bytes");
  /* cudaFree(NULL) is legal and does nothing: nothing to replay. */
  if (l.kind == RP_LINE_FREE && l.ptr == 0) l.kind = RP_LINE_BLANK;
  *out = l;
  return 0;
}
