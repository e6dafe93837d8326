/* options.h: cudapool's options, read once from CUDAPOOL_<NAME> variables.
 *
 * Owns the one option table (options.c, mimalloc-style): every option has a
 * name, a kind, a default written in the accepted form, the accepted form as
 * text for warnings, and a doc line. Nothing else in cudapool calls getenv()
 * for an option: the shim calls cp_options_load() once at start and keeps the
 * struct.
 *
 * Invariants after cp_options_load():
 *   - every field holds either a value the user wrote in an accepted form or
 *     the option's default; a bad value never leaves a half-parsed field;
 *   - a bad value printed exactly one line on `warn`, nothing else did;
 *   - an unset variable, and one set to the empty string or only blanks,
 *     means the default, without a warning;
 *   - stats is "" (off), "stderr", or a file path as the user wrote it, %p
 *     included (outfile.c replaces %p when it opens the file); trace is ""
 *     (off) or such a path;
 *   - in a secure-execution process (getauxval(AT_SECURE): set-user-ID,
 *     set-group-ID, file capabilities) no CUDAPOOL_* variable is read but
 *     CUDAPOOL_VERBOSE, and every field holds its default: the environment
 *     belongs to the unprivileged caller, and a file named by it could be
 *     one the program's privilege lets it overwrite. With CUDAPOOL_VERBOSE
 *     true it prints one line on `warn` saying so, nothing else.
 * Parsing never depends on the locale and rejects, never wraps, values that do
 * not fit in 64 bits. Not thread-safe: load once, then only read. */
#ifndef CUDAPOOL_SHIM_OPTIONS_H
#define CUDAPOOL_SHIM_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { CP_MODE_AUTO = 0, CP_MODE_SYNC, CP_MODE_UNSAFE_IMMEDIATE } cp_mode_t;
typedef enum { CP_LAYER_BOTH = 0, CP_LAYER_RUNTIME, CP_LAYER_DRIVER } cp_layer_t;
typedef enum { CP_FORMAT_TEXT = 0, CP_FORMAT_JSON } cp_format_t;
/* CUDAPOOL_NVTX: auto = on when an NVTX tool is attached (NVTX_INJECTION64_PATH set). */
typedef enum { CP_NVTX_AUTO = 0, CP_NVTX_OFF, CP_NVTX_ON } cp_nvtx_t;

typedef struct cp_size_opt {
  uint64_t bytes;
  double percent; /* percent > 0: a share of device memory, bytes unused */
} cp_size_opt_t;

#define CP_OPTION_PATH_MAX 4096
#define CP_OPTION_NAME_MAX 64

typedef struct cp_options {
  cp_size_opt_t limit;            /* CUDAPOOL_LIMIT: bytes per device or N% of device memory; 0 = no limit */
  cp_size_opt_t max_cached;       /* CUDAPOOL_MAX_CACHED: same form; 0 = no cap */
  uint64_t max_split;             /* CUDAPOOL_MAX_SPLIT: size; 0 = no limit */
  cp_mode_t mode;                 /* CUDAPOOL_MODE: auto | sync | unsafe-immediate */
  char stats[CP_OPTION_PATH_MAX]; /* CUDAPOOL_STATS: "" off, "stderr", or a path (%p expanded) */
  cp_format_t stats_format;       /* CUDAPOOL_STATS_FORMAT: text | json */
  bool disable;                   /* CUDAPOOL_DISABLE: pass everything through */
  bool verbose;                   /* CUDAPOOL_VERBOSE: print the effective options at start */
  char trace[CP_OPTION_PATH_MAX]; /* CUDAPOOL_TRACE: "" off, else a path (%p expanded) */
  cp_layer_t layer;               /* CUDAPOOL_LAYER: runtime | driver | both */
  bool expandable;                /* CUDAPOOL_EXPANDABLE: large pool on CUDA virtual memory */
  uint64_t expandable_page;       /* CUDAPOOL_EXPANDABLE_PAGE: bytes mapped at a time (0: granularity) */
  bool live;                      /* CUDAPOOL_LIVE: counters readable by `cudapool stats PID` */
  bool learn_order;               /* CUDAPOOL_LEARN_ORDER: reuse at once while all work is on one stream */
  unsigned arenas; /* CUDAPOOL_ARENAS: most pools per device (1..CP_OPTION_COUNT_MAX; 0: auto) */
  unsigned reclaim_interval_ms; /* CUDAPOOL_RECLAIM_INTERVAL: ms between the reclaimer's passes; 0 = off */
  unsigned release_idle_s;      /* CUDAPOOL_RELEASE_IDLE: seconds a free segment is kept; 0 = for ever */
  cp_nvtx_t nvtx;               /* CUDAPOOL_NVTX: auto | 0 | 1 */
  unsigned stacks;              /* CUDAPOOL_STACKS: native frames kept per allocation; 0 = off */
  char oom_snapshot[CP_OPTION_PATH_MAX]; /* CUDAPOOL_OOM_SNAPSHOT: "" off, else a path (%p expanded) */
  int snapshot_signal;          /* CUDAPOOL_SNAPSHOT_SIGNAL: 0 off, SIGUSR1 or SIGUSR2 */
  char shared_name[CP_OPTION_NAME_MAX]; /* CUDAPOOL_SHARED_NAME: "" = every process of this user */
  cp_size_opt_t shared_limit; /* CUDAPOOL_SHARED_LIMIT: bytes per device for the group, or N%; 0 = none */
  unsigned coop_wait_ms; /* CUDAPOOL_COOP_WAIT: ms an out-of-memory waits for peers; 0 = no cooperation */
  bool nvtx_regions;     /* CUDAPOOL_NVTX_REGIONS: the program's NVTX ranges as regions */
  unsigned coop_interval_ms; /* CUDAPOOL_COOP_INTERVAL: ms between two give-back rounds per device; 0 = none */
  unsigned shared_grace_ms;     /* CUDAPOOL_SHARED_GRACE: ms a dead process's share stays, NVML unable to say */
  unsigned shared_grace_max_ms; /* CUDAPOOL_SHARED_GRACE_MAX: ms it stays at most while NVML lists its pid */
} cp_options_t;

#define CP_STACKS_DEFAULT_DEPTH 16 /* CUDAPOOL_STACKS=1 */
#define CP_STACKS_MAX_DEPTH 64

#define CP_OPTION_COUNT_MAX 64 /* = CP_ARENAS_MAX (core/pool.h) */

/* Fill *out from the environment through get (NULL = cp_options_getenv). A
 * bad value prints exactly one line to warn (NULL = print nothing), e.g.
 *   cudapool: warning: CUDAPOOL_LIMIT="12Q" is not a size (accepted: bytes
 *   with optional K/M/G/T suffix, or N% of device memory); running WITHOUT a
 *   limit
 * (one line; wrapped here; the other options say "using the default (...)")
 * and keeps the default. In a secure-execution process (cp_secure_exec())
 * it is cp_options_load_as(..., true). */
void cp_options_load(cp_options_t *out, const char *(*get)(const char *name), FILE *warn);
/* cp_options_load with the secure-execution decision given: secure = every
 * option keeps its default, only CUDAPOOL_VERBOSE is read, for the one line
 * it prints (see the invariants above). */
void cp_options_load_as(cp_options_t *out, const char *(*get)(const char *name), FILE *warn, bool secure);
/* Whether the kernel started this process in secure-execution mode
 * (getauxval(AT_SECURE) != 0). */
bool cp_secure_exec(void);
/* A user's text inside a warning's quotes: at most max bytes of it ("..."
 * after a cut), '"' and '\' escaped, every byte outside printable ASCII as
 * \xNN, so that a value with a newline or a terminal escape in it still gives
 * one harmless line. */
void cp_put_escaped(FILE *out, const char *text, size_t max);
/* Print every option in effect, one line each, for CUDAPOOL_VERBOSE:
 *   cudapool: CUDAPOOL_LIMIT=8G (most bytes the pool may reserve per device; 0 = no limit)
 * Each value is printed in a form that cp_options_load reads back unchanged. */
void cp_options_print(const cp_options_t *opts, FILE *out);
/* getenv() with the signature cp_options_load wants: the one getenv of the
 * library. */
const char *cp_options_getenv(const char *name);

/* The table, for tests, the fuzzer and the docs check: i in [0, count). */
size_t cp_option_count(void);
/* "CUDAPOOL_LIMIT"; NULL when i is out of range. */
const char *cp_option_name(size_t i);
/* The accepted form a warning names ("auto, sync or unsafe-immediate"), which
 * the launcher's refusals must name too; NULL when i is out of range. */
const char *cp_option_accepted(size_t i);
/* The value of option i in opts as cp_options_print shows it. 0, or -1 when
 * i is out of range or buf is too small. */
int cp_option_format(const cp_options_t *opts, size_t i, char *buf, size_t cap);

/* Parsers (parse.c), exported to tests and the fuzzer: 0 on success, -1 on a
 * bad value, and then the output is untouched. Blanks around the value are
 * ignored; blanks inside it are not accepted. Suffixes are powers of 1024. */
int cp_parse_size(const char *text, uint64_t *bytes);               /* "512", "64K", "1.5G", "8GiB" */
int cp_parse_size_or_percent(const char *text, cp_size_opt_t *out); /* also "80%" (0 < p <= 100) */
int cp_parse_bool(const char *text, bool *out);                     /* 1/true/on/yes, 0/false/off/no */
int cp_parse_count(const char *text, unsigned lo, unsigned hi,
                   unsigned *out); /* "8": a whole number lo..hi */
/* Bytes of a size option for a device with total_bytes of memory (percent
 * applied, floor); 0 = unset. */
uint64_t cp_size_opt_resolve(const cp_size_opt_t *opt, uint64_t total_bytes);

/* CUDAPOOL_MODE's word for m ("auto", "sync", "unsafe-immediate"). */
const char *cp_mode_word(cp_mode_t m);

#endif
