/* options.c: the one option table and its loader (see options.h).
 *
 * Shaped like mimalloc's src/options.c: one row per option, read from
 * CUDAPOOL_<NAME>. A row's default is text in the accepted form and goes
 * through the same parser as the user's value, so the table cannot hold a
 * default the parser would refuse (a unit test loads an empty environment to
 * prove it). Adding an option: a field in cp_options_t, a row here, a line in
 * docs/OPTIONS.md, an entry in docs/cudapool.1 and a line in scripts/cudapool
 * --help (tests check all three name it).
 *
 * Secure execution: the loader, not the getter, decides. With AT_SECURE set
 * it reads no variable but CUDAPOOL_VERBOSE (for its one line), so a getter
 * given by a test or the fuzzer is treated like the environment. */
#include "options.h"

#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "parse.h"

typedef enum cp_opt_kind {
  CP_OPT_SIZE_PCT, /* cp_size_opt_t */
  CP_OPT_SIZE,     /* uint64_t */
  CP_OPT_MODE,     /* cp_mode_t */
  CP_OPT_FORMAT,   /* cp_format_t */
  CP_OPT_LAYER,    /* cp_layer_t */
  CP_OPT_BOOL,     /* bool */
  CP_OPT_STATS,    /* char[CP_OPTION_PATH_MAX]: "", "stderr" or a path */
  CP_OPT_TRACE,    /* char[CP_OPTION_PATH_MAX]: "" or a path */
  CP_OPT_COUNT,    /* unsigned, 1..CP_OPTION_COUNT_MAX, or 0 for "auto" */
  CP_OPT_MS,       /* unsigned, a whole number of milliseconds, 0..60000 */
  CP_OPT_SECONDS,  /* unsigned, a whole number of seconds, 0..604800 (a week) */
  CP_OPT_NVTX,     /* cp_nvtx_t */
  CP_OPT_STACKS,   /* unsigned frames per stack: 0 off, 2..64 (a true word or 1: 16) */
  CP_OPT_SIGNAL,   /* int: 0 off, SIGUSR1 or SIGUSR2 */
  CP_OPT_NAME,     /* char[CP_OPTION_NAME_MAX]: "" or 1..63 of [A-Za-z0-9._-] */
} cp_opt_kind_t;

typedef struct cp_option_desc {
  const char *name; /* the variable: CUDAPOOL_<NAME> */
  cp_opt_kind_t kind;
  size_t offset;        /* of the field in cp_options_t */
  const char *def;      /* the default, in the accepted form */
  const char *then;     /* what the warning says happens instead: the default, in words */
  const char *accepted; /* the accepted form, for the warning */
  const char *doc;      /* one line for CUDAPOOL_VERBOSE */
} cp_option_desc_t;

/* What a warning says after a bad value. The limit's says it loudly: a job
 * that asked for one and runs without it can take the whole device. */
#define DEFAULT_IS(x) "using the default (" x ")"

/* The keyword kinds' words, index = enum value (the fields are enums, int-sized). */
static const char *const mode_words[] = {"auto", "sync", "unsafe-immediate"};

const char *cp_mode_word(cp_mode_t m) { return (unsigned)m < 3 ? mode_words[m] : "?"; }
static const char *const format_words[] = {"text", "json"};
static const char *const layer_words[] = {"both", "runtime", "driver"};
static const char *const nvtx_words[] = {"auto", "0", "1"};
#define WORDS(w) \
  { w, (int)(sizeof w / sizeof w[0]) }
static const struct {
  const char *const *words;
  int n;
} keywords[] = {[CP_OPT_MODE] = WORDS(mode_words),
                [CP_OPT_FORMAT] = WORDS(format_words),
                [CP_OPT_LAYER] = WORDS(layer_words),
                [CP_OPT_NVTX] = WORDS(nvtx_words)};
_Static_assert(sizeof(cp_mode_t) == sizeof(int) && sizeof(cp_format_t) == sizeof(int) &&
                   sizeof(cp_layer_t) == sizeof(int) && sizeof(cp_nvtx_t) == sizeof(int),
               "keyword fields are written as int");

#define SIZE_FORM "bytes with optional K/M/G/T suffix"
/* CUDAPOOL_MAX_SPLIT's floor: the core's cp_max_split_floor for the segment
 * sizes the shim uses (core/pool.h says why; the pool would raise it too). */
#define MAX_SPLIT_LEAST "21M"
#define PATH_FORM "a file path of at most 4095 bytes once %p is replaced by the pid"

static const cp_option_desc_t cp_option_table[] = {
    {"CUDAPOOL_LIMIT", CP_OPT_SIZE_PCT, offsetof(cp_options_t, limit), "0", "running WITHOUT a limit",
     SIZE_FORM ", or N% of device memory",
     "most bytes the pool may reserve per device; N% = share of device memory; 0 = no limit"},
    {"CUDAPOOL_MAX_CACHED", CP_OPT_SIZE_PCT, offsetof(cp_options_t, max_cached), "0", DEFAULT_IS("no cap"),
     SIZE_FORM ", or N% of device memory",
     "most free bytes kept cached per device before segments go back to the driver; 0 = no cap"},
    {"CUDAPOOL_MAX_SPLIT", CP_OPT_SIZE, offsetof(cp_options_t, max_split), "0", DEFAULT_IS("no limit"),
     SIZE_FORM ", at least " MAX_SPLIT_LEAST ", or 0 for no limit",
     "cached blocks of at least this size are never split for a smaller request; 0 = no limit"},
    {"CUDAPOOL_MODE", CP_OPT_MODE, offsetof(cp_options_t, mode), "auto", DEFAULT_IS("auto"),
     "auto, sync or unsafe-immediate",
     "when freed memory is reused: auto = as soon as it is safe, sync = cudaFree synchronises "
     "the device, unsafe-immediate = at once, for single-stream programs only"},
    {"CUDAPOOL_STATS", CP_OPT_STATS, offsetof(cp_options_t, stats), "0", DEFAULT_IS("off"),
     "0 or off, 1 or stderr, or " PATH_FORM,
     "print the exit report: 0 = off, 1 = stderr, else to this file, %p = pid"},
    {"CUDAPOOL_STATS_FORMAT", CP_OPT_FORMAT, offsetof(cp_options_t, stats_format), "text", DEFAULT_IS("text"),
     "text or json", "format of the exit report: text = a table, or json"},
    {"CUDAPOOL_DISABLE", CP_OPT_BOOL, offsetof(cp_options_t, disable), "0", DEFAULT_IS("0: pooling on"),
     "1/true/on/yes or 0/false/off/no", "1 = pass every call through to CUDA unchanged, no pool"},
    {"CUDAPOOL_VERBOSE", CP_OPT_BOOL, offsetof(cp_options_t, verbose), "0", DEFAULT_IS("0: quiet"),
     "1/true/on/yes or 0/false/off/no", "1 = print the options in effect at start"},
    {"CUDAPOOL_TRACE", CP_OPT_TRACE, offsetof(cp_options_t, trace), "0", DEFAULT_IS("off"),
     "0 or off, or " PATH_FORM, "write a trace of every allocation and free to this file, %p = pid; 0 = off"},
    {"CUDAPOOL_LAYER", CP_OPT_LAYER, offsetof(cp_options_t, layer), "both", DEFAULT_IS("both"),
     "runtime, driver or both",
     "layer that serves allocations: runtime = cudaMalloc and co, driver = cuMemAlloc and co, or both; frees "
     "and bookkeeping stay at both"},
    {"CUDAPOOL_EXPANDABLE", CP_OPT_BOOL, offsetof(cp_options_t, expandable), "0",
     DEFAULT_IS("0: ordinary segments"), "1/true/on/yes or 0/false/off/no",
     "1 = expandable segments: large blocks in reserved virtual ranges whose 2 MiB pages are mapped on "
     "demand"},
    {"CUDAPOOL_EXPANDABLE_PAGE", CP_OPT_SIZE, offsetof(cp_options_t, expandable_page), "0",
     DEFAULT_IS("the device's granularity, 2 MiB on the H200"), SIZE_FORM,
     "with CUDAPOOL_EXPANDABLE=1: the unit of device memory mapped and unmapped (rounded up to a power of "
     "two and the granularity); 0 = the granularity"},
    {"CUDAPOOL_ARENAS", CP_OPT_COUNT, offsetof(cp_options_t, arenas), "auto", DEFAULT_IS("auto"),
     "a whole number from 1 to 64, or auto",
     "most pools per device that threads move to when they keep finding the pool's lock taken; 1 = one "
     "pool; auto = one per CPU the process may run on, at most 64"},
    {"CUDAPOOL_LIVE", CP_OPT_BOOL, offsetof(cp_options_t, live), "1", DEFAULT_IS("1: live stats on"),
     "1/true/on/yes or 0/false/off/no",
     "1 = show the pool's counters to `cudapool stats PID` and `cudapool top` through /dev/shm"},
    {"CUDAPOOL_LEARN_ORDER", CP_OPT_BOOL, offsetof(cp_options_t, learn_order), "1",
     DEFAULT_IS("1: learned"), "1/true/on/yes or 0/false/off/no",
     "1 = learn stream order from the work the program submits: while all of it goes to one stream, a freed "
     "block is reused at once and other streams are ordered lazily; 0 = barriers only"},
    {"CUDAPOOL_RECLAIM_INTERVAL", CP_OPT_MS, offsetof(cp_options_t, reclaim_interval_ms), "100",
     DEFAULT_IS("100 ms"), "a whole number of milliseconds from 0 to 60000",
     "with CUDAPOOL_MAX_CACHED or CUDAPOOL_RELEASE_IDLE set, a thread of cudapool's makes freed blocks "
     "reusable and applies those at most this many ms later, without the program's help; 0 = off"},
    {"CUDAPOOL_RELEASE_IDLE", CP_OPT_SECONDS, offsetof(cp_options_t, release_idle_s), "0",
     DEFAULT_IS("0: never"), "a whole number of seconds from 0 to 604800",
     "a cached segment unused this many seconds goes back to the driver (needs CUDAPOOL_RECLAIM_INTERVAL); "
     "0 = never"},
    {"CUDAPOOL_NVTX", CP_OPT_NVTX, offsetof(cp_options_t, nvtx), "auto", DEFAULT_IS("auto"), "auto, 0 or 1",
     "describe segments and blocks to NVIDIA's tools (compute-sanitizer, Nsight Systems) through NVTX: "
     "1 = on, 0 = off, auto = on when a tool is attached (NVTX_INJECTION64_PATH set)"},
    {"CUDAPOOL_STACKS", CP_OPT_STACKS, offsetof(cp_options_t, stacks), "0", DEFAULT_IS("0: off"),
     "0/1 or a depth from 2 to 64",
     "record the call stack of each allocation served (DEPTH native frames, 1 = 16): the exit report "
     "lists the top call sites at the peak of reserved memory and at exit"},
    {"CUDAPOOL_OOM_SNAPSHOT", CP_OPT_TRACE, offsetof(cp_options_t, oom_snapshot), "0", DEFAULT_IS("off"),
     "a file path (%p = pid) or 0",
     "when an allocation fails after cudapool's retries, write a JSON snapshot of every segment and "
     "block (with CUDAPOOL_STACKS: the stack of each) to this file"},
    {"CUDAPOOL_SNAPSHOT_SIGNAL", CP_OPT_SIGNAL, offsetof(cp_options_t, snapshot_signal), "0", DEFAULT_IS("0: off"),
     "0/off, or SIGUSR1 or SIGUSR2 (SIG may be left out)",
     "this signal makes a running process write a snapshot, as on out of memory, to the "
     "CUDAPOOL_OOM_SNAPSHOT file with .N appended (the Nth signal)"},
    {"CUDAPOOL_SHARED_NAME", CP_OPT_NAME, offsetof(cp_options_t, shared_name), "", DEFAULT_IS("none: every process"),
     "1 to 63 letters, digits, '.', '_' or '-'",
     "cooperate (CUDAPOOL_COOP_WAIT) and share CUDAPOOL_SHARED_LIMIT only with this user's cudapool processes "
     "of the same name; unset = with all of this user's"},
    {"CUDAPOOL_SHARED_LIMIT", CP_OPT_SIZE_PCT, offsetof(cp_options_t, shared_limit), "0",
     "running WITHOUT a shared limit", SIZE_FORM ", or N% of device memory",
     "most bytes all of this user's cudapool processes (of CUDAPOOL_SHARED_NAME) may reserve together per "
     "device; N% = share of device memory; 0 = no shared limit"},
    {"CUDAPOOL_COOP_WAIT", CP_OPT_MS, offsetof(cp_options_t, coop_wait_ms), "200", DEFAULT_IS("200 ms"),
     "a whole number of milliseconds from 0 to 60000",
     "out of device memory, ask the other cudapool processes (needs CUDAPOOL_LIVE) to give their idle cache "
     "back and wait at most this many ms for their answers; 0 = off"},
    {"CUDAPOOL_NVTX_REGIONS", CP_OPT_BOOL, offsetof(cp_options_t, nvtx_regions), "1",
     DEFAULT_IS("1: NVTX ranges are regions"), "1/true/on/yes or 0/false/off/no",
     "1 = the program's NVTX ranges (nvtxRangePush/Pop, Start/End) are regions in the report, as "
     "cudapool_push_tag's are, when no NVIDIA tool is attached (cudapool names itself in "
     "NVTX_INJECTION64_PATH)"},
    {"CUDAPOOL_COOP_INTERVAL", CP_OPT_MS, offsetof(cp_options_t, coop_interval_ms), "100", DEFAULT_IS("100 ms"),
     "a whole number of milliseconds from 0 to 60000",
     "asked by other cudapool processes to give back (CUDAPOOL_COOP_WAIT), empty a device's cache at most "
     "once per this many ms, and once more within it when the cache grew by what the asker lacks; other "
     "requests within it are answered at once with 0 bytes; 0 = every request"},
    {"CUDAPOOL_SHARED_GRACE", CP_OPT_MS, offsetof(cp_options_t, shared_grace_ms), "2000", DEFAULT_IS("2000 ms"),
     "a whole number of milliseconds from 0 to 60000",
     "under CUDAPOOL_SHARED_LIMIT, where NVML cannot say whether the driver has freed a dead cudapool "
     "process's memory, its share stays taken this many ms after it is found dead; 0 = taken back at once"},
    {"CUDAPOOL_SHARED_GRACE_MAX", CP_OPT_MS, offsetof(cp_options_t, shared_grace_max_ms), "10000",
     DEFAULT_IS("10000 ms"), "a whole number of milliseconds from 0 to 60000",
     "under CUDAPOOL_SHARED_LIMIT, a dead cudapool process's share stays taken while NVML still lists it on "
     "the device, but at most this many ms after it is found dead"},
};

#define NOPTS (sizeof cp_option_table / sizeof cp_option_table[0])

/* A group name: it is compared byte for byte with other processes' and
 * shown in messages, so only a plain, bounded alphabet. "" (the default
 * only: a blank value means the default) is no name. */
static int parse_name(const char *text, char *field) {
  size_t n = strlen(text);
  if (n >= CP_OPTION_NAME_MAX) return -1;
  for (size_t i = 0; i < n; i++) {
    char c = text[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    if (!ok) return -1;
  }
  memcpy(field, text, n + 1);
  return 0;
}

static const char *const kind_what[] = {
    [CP_OPT_SIZE_PCT] = "a size",     [CP_OPT_SIZE] = "a size",       [CP_OPT_MODE] = "a mode",
    [CP_OPT_FORMAT] = "a format",     [CP_OPT_LAYER] = "a layer",     [CP_OPT_BOOL] = "a boolean",
    [CP_OPT_STATS] = "a destination", [CP_OPT_TRACE] = "a file path", [CP_OPT_COUNT] = "a count",
    [CP_OPT_MS] = "a duration",       [CP_OPT_SECONDS] = "a duration",
    [CP_OPT_NVTX] = "an NVTX setting",
    [CP_OPT_STACKS] = "a stack depth",
    [CP_OPT_SIGNAL] = "a signal",
    [CP_OPT_NAME] = "a name",
};

/* A path option: off words turn it off, "stderr" (stats only) and on words
 * (stats: stderr; trace: refused, there is no default file) are keywords,
 * anything else is a path taken verbatim, blanks and %p included: %p is
 * replaced when the file is opened (outfile.c), in the process that opens it.
 * The path is refused here when it would not fit with this process's pid. */
static int parse_path(const char *text, bool is_stats, char *field) {
  char buf[CP_OPTION_PATH_MAX];
  bool on;
  if (cp_parse_bool(text, &on) == 0) {
    if (on && !is_stats) return -1;
    strcpy(field, on ? "stderr" : "");
    return 0;
  }
  if (is_stats) {
    int i;
    static const char *const stderr_word[] = {"stderr"};
    if (cp_parse_keyword(text, stderr_word, 1, &i) == 0) {
      strcpy(field, "stderr");
      return 0;
    }
  }
  if (cp_expand_pid(text, (long)getpid(), buf, sizeof buf) != 0 || strlen(text) >= sizeof buf) return -1;
  memcpy(field, text, strlen(text) + 1);
  return 0;
}

static int parse_value(const cp_option_desc_t *d, const char *text, cp_options_t *o) {
  void *field = (char *)o + d->offset;
  int word;
  switch (d->kind) {
    case CP_OPT_SIZE_PCT: return cp_parse_size_or_percent(text, field);
    case CP_OPT_SIZE: return cp_parse_size(text, field);
    case CP_OPT_MODE:
    case CP_OPT_FORMAT:
    case CP_OPT_LAYER:
    case CP_OPT_NVTX:
      if (cp_parse_keyword(text, keywords[d->kind].words, keywords[d->kind].n, &word) != 0) return -1;
      *(int *)field = word;
      return 0;
    case CP_OPT_BOOL: return cp_parse_bool(text, field);
    case CP_OPT_STATS: return parse_path(text, true, field);
    case CP_OPT_TRACE: return parse_path(text, false, field);
    case CP_OPT_COUNT: {
      static const char *const auto_word[] = {"auto"};
      int i;
      if (cp_parse_keyword(text, auto_word, 1, &i) == 0) {
        *(unsigned *)field = 0;
        return 0;
      }
      return cp_parse_count(text, 1, CP_OPTION_COUNT_MAX, field);
    }
    case CP_OPT_MS: return cp_parse_count(text, 0, 60000, field);
    case CP_OPT_SECONDS: return cp_parse_count(text, 0, 604800, field);
    case CP_OPT_STACKS: {
      bool on;
      unsigned depth;
      if (cp_parse_bool(text, &on) == 0) {
        *(unsigned *)field = on ? CP_STACKS_DEFAULT_DEPTH : 0;
        return 0;
      }
      if (cp_parse_count(text, 2, CP_STACKS_MAX_DEPTH, &depth) != 0) return -1;
      *(unsigned *)field = depth;
      return 0;
    }
    case CP_OPT_SIGNAL: {
      static const char *const names[] = {"USR1", "SIGUSR1", "USR2", "SIGUSR2"};
      static const int numbers[] = {SIGUSR1, SIGUSR1, SIGUSR2, SIGUSR2};
      bool on;
      int i;
      if (cp_parse_bool(text, &on) == 0 && !on) {
        *(int *)field = 0;
        return 0;
      }
      if (cp_parse_keyword(text, names, 4, &i) != 0) return -1;
      *(int *)field = numbers[i];
      return 0;
    }
    case CP_OPT_NAME: return parse_name(text, field);
  }
  return -1;
}

void cp_put_escaped(FILE *out, const char *v, size_t max) {
  size_t i = 0;
  for (; v[i] != '\0' && i < max; i++) {
    unsigned char c = (unsigned char)v[i];
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c >= 0x20 && c < 0x7f)
      fputc(c, out);
    else
      fprintf(out, "\\x%02x", c);
  }
  if (v[i] != '\0') fputs("...", out);
}

static void warn_bad(FILE *warn, const cp_option_desc_t *d, const char *value) {
  if (warn == NULL) return;
  fprintf(warn, "cudapool: warning: %s=\"", d->name);
  cp_put_escaped(warn, value, 64);
  fprintf(warn, "\" is not %s (accepted: %s); %s\n", kind_what[d->kind], d->accepted, d->then);
  fflush(warn);
}

/* CUDAPOOL_MAX_SPLIT under its floor (0, no limit, excepted) is raised to it. */
static void raise_to_least(FILE *warn, const cp_option_desc_t *d, const char *value, cp_options_t *o) {
  uint64_t least;
  if (d->offset != offsetof(cp_options_t, max_split) || cp_parse_size(MAX_SPLIT_LEAST, &least) != 0) return;
  if (o->max_split == 0 || o->max_split >= least) return;
  o->max_split = least;
  if (warn == NULL) return;
  fprintf(warn, "cudapool: warning: %s=\"", d->name);
  cp_put_escaped(warn, value, 64);
  fprintf(warn, "\" is under %s (accepted: %s); using %s\n", MAX_SPLIT_LEAST, d->accepted, MAX_SPLIT_LEAST);
  fflush(warn);
}

const char *cp_options_getenv(const char *name) { return getenv(name); }

bool cp_secure_exec(void) { return getauxval(AT_SECURE) != 0; }

void cp_options_load(cp_options_t *out, const char *(*get)(const char *name), FILE *warn) {
  cp_options_load_as(out, get, warn, cp_secure_exec());
}

void cp_options_load_as(cp_options_t *out, const char *(*get)(const char *name), FILE *warn, bool secure) {
  if (out == NULL) return;
  if (get == NULL) get = cp_options_getenv;
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < NOPTS; i++) {
    const cp_option_desc_t *d = &cp_option_table[i];
    /* Cannot fail for the table as written (a test proves it); if a row were
     * ever wrong its field would stay zero, which every option reads as
     * "off" or "no limit". */
    (void)parse_value(d, d->def, out);
    if (secure) continue;
    const char *v = get(d->name);
    if (cp_is_blank(v)) continue;
    if (parse_value(d, v, out) != 0)
      warn_bad(warn, d, v);
    else
      raise_to_least(warn, d, v, out);
  }
  bool verbose;
  if (secure && warn != NULL && cp_parse_bool(get("CUDAPOOL_VERBOSE"), &verbose) == 0 && verbose) {
    fputs("cudapool: privileged program (secure execution): CUDAPOOL_* variables are ignored, "
          "the defaults are in effect\n",
          warn);
    fflush(warn);
  }
}

size_t cp_option_count(void) { return NOPTS; }

const char *cp_option_name(size_t i) { return i < NOPTS ? cp_option_table[i].name : NULL; }

const char *cp_option_accepted(size_t i) { return i < NOPTS ? cp_option_table[i].accepted : NULL; }

static const char *keyword_of(cp_opt_kind_t kind, int v) {
  return (v >= 0 && v < keywords[kind].n) ? keywords[kind].words[v] : NULL;
}

int cp_option_format(const cp_options_t *o, size_t i, char *buf, size_t cap) {
  if (o == NULL || i >= NOPTS || buf == NULL || cap == 0) return -1;
  const cp_option_desc_t *d = &cp_option_table[i];
  const void *field = (const char *)o + d->offset;
  const char *word = NULL;
  size_t n = 0;
  switch (d->kind) {
    case CP_OPT_SIZE_PCT: {
      const cp_size_opt_t *s = field;
      if (s->percent > 0.0) {
        n = cp_format_decimal(s->percent, 6, 0, buf, cap);
        if (n == 0 || n + 1 >= cap) return -1;
        buf[n] = '%';
        buf[n + 1] = '\0';
        return 0;
      }
      n = cp_format_size_exact(s->bytes, buf, cap);
      break;
    }
    case CP_OPT_SIZE: n = cp_format_size_exact(*(const uint64_t *)field, buf, cap); break;
    case CP_OPT_MODE:
    case CP_OPT_FORMAT:
    case CP_OPT_LAYER:
    case CP_OPT_NVTX: word = keyword_of(d->kind, *(const int *)field); break;
    case CP_OPT_BOOL: word = *(const bool *)field ? "1" : "0"; break;
    case CP_OPT_STATS:
    case CP_OPT_TRACE: word = ((const char *)field)[0] != '\0' ? field : "0"; break;
    case CP_OPT_COUNT: {
      unsigned count = *(const unsigned *)field;
      int len = count ? snprintf(buf, cap, "%u", count) : snprintf(buf, cap, "auto");
      return len > 0 && (size_t)len < cap ? 0 : -1;
    }
    case CP_OPT_SIGNAL: {
      int sig = *(const int *)field;
      word = sig == SIGUSR1 ? "SIGUSR1" : sig == SIGUSR2 ? "SIGUSR2" : "0";
      break;
    }
    case CP_OPT_MS:
    case CP_OPT_SECONDS:
    case CP_OPT_STACKS: {
      int len = snprintf(buf, cap, "%u", *(const unsigned *)field);
      return len > 0 && (size_t)len < cap ? 0 : -1;
    }
    case CP_OPT_NAME: word = field; break;
  }
  if (d->kind == CP_OPT_SIZE_PCT || d->kind == CP_OPT_SIZE) return n == 0 ? -1 : 0;
  if (word == NULL || strlen(word) >= cap) return -1;
  memcpy(buf, word, strlen(word) + 1);
  return 0;
}

void cp_options_print(const cp_options_t *opts, FILE *out) {
  char value[CP_OPTION_PATH_MAX];
  if (opts == NULL || out == NULL) return;
  for (size_t i = 0; i < NOPTS; i++) {
    if (cp_option_format(opts, i, value, sizeof value) != 0) strcpy(value, "?");
    fprintf(out, "cudapool: %s=%s (%s)\n", cp_option_table[i].name, value, cp_option_table[i].doc);
  }
  fflush(out);
}
