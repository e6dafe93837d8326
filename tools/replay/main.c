/* main.c: the cudapool-replay command line.
 *
 *   cudapool-replay TRACE [pool options] [--json] [--compare "OPTS"]...
 *                   [--find-limit] [--on-error=skip|stop] [--timeline FILE]
 *
 * Owns argument parsing (getopt_long, one table of pool options read the
 * same way on the command line and inside each --compare string, "--name
 * VALUE" or "--name=VALUE", unambiguous prefixes accepted) and the exit
 * status: 0 done; 1 an I/O error, or the pool refused the options; 2 a usage
 * error (an unknown or ambiguous option, a missing or bad value: the message
 * names the option), bad input with --on-error=stop, a trace with no
 * allocation to replay, or one whose frees cannot come from one process
 * (too many of unknown pointers; --allow-unknown-frees replays it anyway).
 * Sizes use the CUDAPOOL_* syntax (common/parse.c: 512, 64K, 1.5G, 8GiB). */
#include "replay.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#define PROG "cudapool-replay"
#define MAX_COMPARE 16
#define UNKNOWN_FREES_MIN 16 /* and more than 1% of the frees: the refusal above */

static const char usage[] =
    "usage: " PROG " TRACE [options]\n"
    "Replays an allocation trace (cudapool, RMM CSV or the shared PyTorch traces, plain or .gz)\n"
    "through cudapool's pool on a simulated device and reports what it reserved.\n"
    "\n"
    "pool options (sizes: 512, 64K, 256M, 1.5G, 8GiB; 0 or none = no limit):\n"
    "  --limit SIZE              most bytes the pool may reserve\n"
    "  --max-split SIZE          blocks of this size or more are never split (at least 21M)\n"
    "  --max-cached SIZE         most free bytes kept cached\n"
    "  --reuse=barrier|sync|immediate   when a freed block is reusable (default barrier)\n"
    "  --key=none|thread|order   pass the thread as the same-stream reuse key (default thread);\n"
    "                            order: the learned stream order as if all work went to one\n"
    "                            stream (every free reusable at once), unless the trace's\n"
    "                            order events say otherwise\n"
    "  --device-memory SIZE      simulated device capacity (default 141G, an H200)\n"
    "  --expandable[=0|1]        expandable segments: the large pool maps pages on demand\n"
    "  --page SIZE               their page size (default 2M, CUDA's granularity)\n"
    "  --round, --small-max, --small-segment, --large-segment, --large-threshold,\n"
    "  --segment-round, --large-split-remainder, --oversize-waste SIZE   core rules\n"
    "output:\n"
    "  --json                    one JSON object\n"
    "  --compare \"OPTS\"          also run with OPTS on top of the options above; repeatable;\n"
    "                            prints a table (or a JSON object with a \"runs\" array)\n"
    "  --find-limit              smallest limit (2 MiB steps) with no OOM\n"
    "  --timeline FILE           per-event CSV: time,allocated,reserved,largest_free,marker\n"
    "  --repeat N                timed runs, best kept (default 5)\n"
    "input:\n"
    "  --on-error=skip|stop      bad lines: report and skip (default), or stop with status 2\n"
    "  --allow-unknown-frees     replay a trace in which more than 1% of the frees (and at\n"
    "                            least 16) are of pointers it never allocated; refused without\n"
    "                            it (status 2): such a file holds several processes' events\n"
    "  -h, --help                this text\n"
    "Exit status: 0 done, 1 I/O error or options the pool refused, 2 usage error, bad input\n"
    "with --on-error=stop, a trace with no allocation to replay, or one that cannot come from\n"
    "one process.\n";

typedef struct cli {
  const char *trace;
  bool json, find_limit, stop_on_error, allow_unknown_frees;
  const char *timeline;
  const char *compare[MAX_COMPARE];
  size_t ncompare;
} cli_t;

enum kind { SIZE_FIELD, LIMIT_FIELD, REUSE, KEY, DEVICE, REPEAT, EXPANDABLE, PAGE };

static const struct popt {
  const char *name;
  enum kind kind;
  size_t off; /* SIZE_FIELD/LIMIT_FIELD: offset of the size_t in cp_config_t */
} popts[] = {
    {"limit", LIMIT_FIELD, offsetof(cp_config_t, limit)},
    {"max-split", LIMIT_FIELD, offsetof(cp_config_t, max_split)},
    {"max-cached", LIMIT_FIELD, offsetof(cp_config_t, max_cached)},
    {"round", SIZE_FIELD, offsetof(cp_config_t, round)},
    {"small-max", SIZE_FIELD, offsetof(cp_config_t, small_max)},
    {"small-segment", SIZE_FIELD, offsetof(cp_config_t, small_segment)},
    {"large-segment", SIZE_FIELD, offsetof(cp_config_t, large_segment)},
    {"large-threshold", SIZE_FIELD, offsetof(cp_config_t, large_threshold)},
    {"segment-round", SIZE_FIELD, offsetof(cp_config_t, segment_round)},
    {"large-split-remainder", SIZE_FIELD, offsetof(cp_config_t, large_split_remainder)},
    {"oversize-waste", SIZE_FIELD, offsetof(cp_config_t, oversize_waste)},
    {"reuse", REUSE, 0},
    {"key", KEY, 0},
    {"device-memory", DEVICE, 0},
    {"repeat", REPEAT, 0},
    {"expandable", EXPANDABLE, 0},
    {"page", PAGE, 0},
};

static int bad(const char *opt, const char *value, const char *want) {
  fprintf(stderr, PROG ": --%s: '%s' is not %s\n", opt, value, want);
  return -1;
}

static int set_popt(const struct popt *p, const char *v, rp_opts_t *o) {
  uint64_t bytes;
  size_t *field = (size_t *)((char *)&o->cfg + p->off);
  switch (p->kind) {
    case LIMIT_FIELD:
      if (strcmp(v, "none") == 0) {
        *field = CP_NO_LIMIT;
        return 0;
      }
      if (cp_parse_size(v, &bytes) != 0 || bytes > SIZE_MAX)
        return bad(p->name, v, "a size (e.g. 8G) or none");
      *field = bytes ? (size_t)bytes : CP_NO_LIMIT;
      return 0;
    case SIZE_FIELD:
      if (cp_parse_size(v, &bytes) != 0 || bytes == 0 || bytes > SIZE_MAX)
        return bad(p->name, v, "a size above 0");
      *field = (size_t)bytes;
      return 0;
    case REUSE:
      if (strcmp(v, "barrier") == 0)
        o->reuse = RP_REUSE_BARRIER;
      else if (strcmp(v, "sync") == 0)
        o->reuse = RP_REUSE_SYNC;
      else if (strcmp(v, "immediate") == 0)
        o->reuse = RP_REUSE_IMMEDIATE;
      else
        return bad(p->name, v, "barrier, sync or immediate");
      return 0;
    case KEY:
      if (strcmp(v, "none") != 0 && strcmp(v, "thread") != 0 && strcmp(v, "order") != 0)
        return bad(p->name, v, "none, thread or order");
      o->thread_key = strcmp(v, "none") != 0;
      o->assume_order = strcmp(v, "order") == 0;
      return 0;
    case DEVICE:
      if (cp_parse_size(v, &bytes) != 0 || bytes == 0 || bytes > SIZE_MAX)
        return bad(p->name, v, "a size above 0");
      o->device_memory = bytes;
      return 0;
    case EXPANDABLE:
      if (v == NULL) return o->cfg.expandable = true, 0;
      if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0) return bad(p->name, v, "0 or 1");
      o->cfg.expandable = strcmp(v, "1") == 0;
      return 0;
    case PAGE:
      if (cp_parse_size(v, &bytes) != 0 || bytes < 512 || bytes > SIZE_MAX || (bytes & (bytes - 1)))
        return bad(p->name, v, "a power of two of at least 512");
      o->page = (size_t)bytes;
      return 0;
    default: {
      char *end;
      errno = 0;
      unsigned long n = strtoul(v, &end, 10);
      if (errno || *end || end == v || n == 0 || n > 1000) return bad(p->name, v, "a count from 1 to 1000");
      o->repeat = (unsigned)n;
      return 0;
    }
  }
}

/* The options that are not pool options (command line only). */
enum {
  O_JSON = 256,
  O_FIND_LIMIT,
  O_TIMELINE,
  O_ON_ERROR,
  O_COMPARE,
  O_ALLOW_UNKNOWN_FREES,
  O_POOL = 512 /* + index in popts */
};
static const struct option cli_opts[] = {
    {"json", no_argument, NULL, O_JSON},
    {"find-limit", no_argument, NULL, O_FIND_LIMIT},
    {"timeline", required_argument, NULL, O_TIMELINE},
    {"on-error", required_argument, NULL, O_ON_ERROR},
    {"compare", required_argument, NULL, O_COMPARE},
    {"allow-unknown-frees", no_argument, NULL, O_ALLOW_UNKNOWN_FREES},
    {"help", no_argument, NULL, 'h'},
};
#define NPOPTS (sizeof popts / sizeof popts[0])
#define NCLI (sizeof cli_opts / sizeof cli_opts[0])

/* getopt_long's table: the pool options, then (not in_compare) the others. */
static void build_longopts(struct option *lo, bool in_compare) {
  size_t n = 0;
  for (size_t k = 0; k < NPOPTS; k++)
    lo[n++] =
        (struct option){popts[k].name, popts[k].kind == EXPANDABLE ? optional_argument : required_argument,
                        NULL, O_POOL + (int)k};
  for (size_t k = 0; !in_compare && k < NCLI; k++) lo[n++] = cli_opts[k];
  lo[n] = (struct option){NULL, 0, NULL, 0};
}

static const char *name_of(const struct option *lo, int val) {
  for (; lo->name != NULL; lo++)
    if (lo->val == val) return lo->name;
  return "?";
}

/* What getopt_long refused (c is ':' or '?'), in a message naming it.
 * glibc: optopt is the option's val when a value was missing or not
 * allowed, the character of an unknown short option, and 0 for an unknown
 * or ambiguous long one (argv[optind - 1] is then the argument). */
static int refused(int c, char **argv, const struct option *lo, bool in_compare) {
  const char *ctx = in_compare ? "--compare: " : "";
  if (c == ':') {
    fprintf(stderr, PROG ": %s--%s needs a value\n", ctx, name_of(lo, optopt));
  } else if (optopt >= 256) {
    fprintf(stderr, PROG ": %s--%s takes no value\n", ctx, name_of(lo, optopt));
  } else if (optopt != 0) {
    fprintf(stderr, PROG ": %sunknown option '-%c' (--help lists them)\n", ctx, optopt);
  } else {
    const char *arg = argv[optind - 1], *name = arg + 2, *eq = strchr(name, '=');
    size_t nlen = eq ? (size_t)(eq - name) : strlen(name), matches = 0;
    for (const struct option *o = lo; o->name != NULL; o++) matches += strncmp(o->name, name, nlen) == 0;
    if (in_compare)
      fprintf(stderr, PROG ": --compare: '%s' is not a pool option\n", arg);
    else if (matches > 1) {
      fprintf(stderr, PROG ": option '--%.*s' is ambiguous:", (int)nlen, name);
      for (const struct option *o = lo; o->name != NULL; o++)
        if (strncmp(o->name, name, nlen) == 0) fprintf(stderr, " --%s", o->name);
      fputc('\n', stderr);
    } else {
      fprintf(stderr, PROG ": unknown option '--%.*s' (--help lists them)\n", (int)nlen, name);
    }
  }
  return -1;
}

/* Options of one argv (argv[0] is not an argument). in_compare: only pool
 * options are allowed, and no trace. Returns 0 or -1 (message printed). */
static int parse(int argc, char **argv, rp_opts_t *o, cli_t *cli, bool in_compare) {
  struct option lo[NPOPTS + NCLI + 1];
  build_longopts(lo, in_compare);
  opterr = 0;
  optind = 0; /* glibc: start afresh, as each --compare string is a new argv */
  int c;
  while ((c = getopt_long(argc, argv, in_compare ? ":" : ":h", lo, NULL)) != -1) {
    if (c == ':' || c == '?') return refused(c, argv, lo, in_compare);
    if (c >= O_POOL) {
      if (set_popt(&popts[c - O_POOL], optarg, o) != 0) return -1;
      continue;
    }
    switch (c) {
      case 'h': fputs(usage, stdout); exit(0);
      case O_JSON: cli->json = true; break;
      case O_FIND_LIMIT: cli->find_limit = true; break;
      case O_ALLOW_UNKNOWN_FREES: cli->allow_unknown_frees = true; break;
      case O_TIMELINE: cli->timeline = optarg; break;
      case O_ON_ERROR:
        if (strcmp(optarg, "skip") != 0 && strcmp(optarg, "stop") != 0)
          return bad("on-error", optarg, "skip or stop");
        cli->stop_on_error = strcmp(optarg, "stop") == 0;
        break;
      case O_COMPARE:
        if (cli->ncompare == MAX_COMPARE) {
          fprintf(stderr, PROG ": at most %d --compare\n", MAX_COMPARE);
          return -1;
        }
        cli->compare[cli->ncompare++] = optarg;
        break;
      default: return refused('?', argv, lo, in_compare); /* not reached */
    }
  }
  /* getopt_long moved the arguments that are not options to the end. */
  for (int i = optind; i < argc; i++) {
    if (in_compare || cli->trace != NULL) {
      fprintf(stderr, PROG ": %sunexpected argument '%s'\n", in_compare ? "--compare: " : "", argv[i]);
      return -1;
    }
    cli->trace = argv[i];
  }
  return 0;
}

/* Split a --compare string on blanks (no quoting needed: no value has one). */
static int parse_compare(const char *s, rp_opts_t *o) {
  char *copy = strdup(s), *save = NULL, *argv[65], name[] = PROG " --compare";
  int argc = 0;
  if (copy == NULL) return -1;
  argv[argc++] = name;
  for (char *w = strtok_r(copy, " \t", &save); w && argc < 64; w = strtok_r(NULL, " \t", &save))
    argv[argc++] = w;
  argv[argc] = NULL;
  cli_t unused = {0};
  int rc = parse(argc, argv, o, &unused, true);
  free(copy);
  return rc;
}

/* A --max-split under the pool's floor (core/pool.h, cp_max_split_floor:
 * above every segment size) is refused, as the launcher refuses it: the pool
 * would raise it, and the report would show a figure it did not use. */
static int check_max_split(const rp_opts_t *o) {
  size_t least = cp_max_split_floor(&o->cfg);
  if (o->cfg.max_split == CP_NO_LIMIT || o->cfg.max_split >= least) return 0;
  if (least % ((size_t)1 << 20) == 0)
    fprintf(stderr, PROG ": --max-split: under %zuM, the least the pool takes (above its largest segment)\n",
            least >> 20);
  else
    fprintf(stderr, PROG ": --max-split: under %zu, the least the pool takes (above its largest segment)\n",
            least);
  return -1;
}

/* opts[0] = base, opts[i] = base + the i-th --compare string; before the
 * trace is read, so that a typo costs no loading time. */
static int prepare_compare(const cli_t *cli, const rp_opts_t *base, rp_opts_t *opts) {
  for (size_t i = 0; i <= cli->ncompare; i++) {
    opts[i] = *base;
    opts[i].timeline = NULL;
    if (i > 0 && parse_compare(cli->compare[i - 1], &opts[i]) != 0) return -1;
    if (check_max_split(&opts[i]) != 0) return -1;
  }
  return 0;
}

static int run_compare(const cli_t *cli, const rp_trace_t *t, const rp_opts_t *opts) {
  size_t n = cli->ncompare + 1;
  rp_result_t r[MAX_COMPARE + 1];
  const char *labels[MAX_COMPARE + 1];
  for (size_t i = 0; i < n; i++) labels[i] = i == 0 ? "(base)" : cli->compare[i - 1];
  for (size_t i = 0; i < n; i++) {
    int rc = rp_run(t, &opts[i], &r[i]);
    if (rc != 0) {
      fprintf(stderr, PROG ": options '%s': the pool refused them (%s)\n", labels[i], strerror(rc));
      for (size_t j = 0; j < i; j++) rp_result_free(&r[j]);
      return 1;
    }
  }
  if (cli->json) {
    fputs("{\"runs\":[", stdout);
    for (size_t i = 0; i < n; i++) {
      fputs(i ? "," : "", stdout);
      rp_print_json(stdout, cli->trace, t, &opts[i], &r[i], UINT64_MAX);
    }
    fputs("],\"labels\":[", stdout);
    for (size_t i = 0; i < n; i++)
      printf("%s\"%s\"", i ? "," : "", labels[i]); /* labels hold no quotes: parse refused them */
    fputs("]}\n", stdout);
  } else {
    rp_print_compare(stdout, cli->trace, t, n, labels, r);
  }
  for (size_t i = 0; i < n; i++) rp_result_free(&r[i]);
  return 0;
}

int main(int argc, char **argv) {
  rp_opts_t o;
  cli_t cli = {0};
  rp_opts_default(&o);
  if (parse(argc, argv, &o, &cli, false) != 0) return 2;
  if (cli.trace == NULL) {
    fputs(PROG ": no trace given\n", stderr);
    fputs(usage, stderr);
    return 2;
  }
  rp_opts_t copts[MAX_COMPARE + 1];
  if (check_max_split(&o) != 0 || (cli.ncompare > 0 && prepare_compare(&cli, &o, copts) != 0)) return 2;
  rp_load_opts_t lo = {
      .name = cli.trace, .err = stderr, .stop_on_error = cli.stop_on_error, .max_messages = 20};
  rp_trace_t t;
  int rc = rp_load_file(cli.trace, &lo, &t);
  /* ENOENT is 2 too: bad input is the 2 with bad lines counted. */
  if (rc != 0) return rc == 2 && t.errors > 0 ? 2 : 1;
  /* An empty file, a wrong file, every line bad: no report of zeros. */
  if (t.allocs == 0) {
    fprintf(stderr, PROG ": %s: no allocation to replay (%zu lines, %zu of them bad)\n", cli.trace, t.lines,
            t.errors);
    rp_trace_free(&t);
    return 2;
  }
  /* One process frees only what it allocated: a trace cut at its start
   * lacks a few allocations, one that several processes wrote at once
   * (one CUDAPOOL_TRACE without %p) lacks thousands. */
  size_t free_lines = t.frees + t.unknown_frees;
  if (!cli.allow_unknown_frees && t.unknown_frees >= UNKNOWN_FREES_MIN &&
      t.unknown_frees * 100 > free_lines) {
    fprintf(stderr,
            PROG ": %s: %zu of %zu frees are of pointers the trace never allocated: not the trace of one "
                 "process (several processes writing one file? give each its own with %%p in "
                 "CUDAPOOL_TRACE); --allow-unknown-frees replays it anyway\n",
            cli.trace, t.unknown_frees, free_lines);
    rp_trace_free(&t);
    return 2;
  }
  if (cli.ncompare > 0) {
    rc = run_compare(&cli, &t, copts);
    rp_trace_free(&t);
    return rc;
  }
  FILE *tl = NULL;
  if (cli.timeline) {
    tl = fopen(cli.timeline, "w");
    if (tl == NULL) {
      fprintf(stderr, PROG ": %s: %s\n", cli.timeline, strerror(errno));
      rp_trace_free(&t);
      return 1;
    }
    o.timeline = tl;
  }
  rp_result_t r;
  rc = rp_run(&t, &o, &r);
  if (tl && fclose(tl) != 0) {
    fprintf(stderr, PROG ": %s: %s\n", cli.timeline, strerror(errno));
    rc = rc ? rc : EIO;
  }
  if (rc != 0) {
    fprintf(stderr, PROG ": the pool refused these options (%s)\n", strerror(rc));
    rp_trace_free(&t);
    return 1;
  }
  uint64_t limit = UINT64_MAX;
  unsigned runs = 0;
  if (cli.find_limit) limit = rp_find_limit(&t, &o, &runs);
  if (cli.json) {
    rp_print_json(stdout, cli.trace, &t, &o, &r, limit);
    fputc('\n', stdout);
  } else {
    rp_print_text(stdout, cli.trace, &t, &o, &r);
    if (cli.find_limit && limit == 0)
      printf("find-limit       none: the trace runs out of memory even at the device's %.1f GiB\n",
             (double)o.device_memory / (1 << 30));
    else if (cli.find_limit)
      printf("find-limit       %.0f MiB (%llu bytes): smallest 2 MiB step with no OOM (%u runs)\n",
             (double)limit / (1 << 20), (unsigned long long)limit, runs);
  }
  rp_result_free(&r);
  rp_trace_free(&t);
  return 0;
}
