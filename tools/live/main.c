/* main.c: cudapool-stats, the live counters of running processes
 * (`cudapool stats PID`, `cudapool top`).
 *
 *   cudapool-stats PID [--json] [--timeout SEC]
 *   cudapool-stats --top [--interval SEC] [--iterations N] [--timeout SEC] [--group NAME]
 *   cudapool-stats --all [--timeout SEC] [--group NAME]
 *   cudapool-stats [PID] --prometheus [--timeout SEC]
 *   cudapool-stats --snapshot PID -o FILE [--timeout SEC]
 *
 * Owns the command line and the output: the exit report's own table and
 * JSON (common/report.c), so the names and the layout are the exit report's,
 * followed by the current values (now.c; --top adds the rates between two
 * refreshes), or the Prometheus text (prometheus.c); the regions and call
 * sites the process adds (text, or JSON members) after the table. With
 * --snapshot it asks the process to write its memory snapshot to FILE
 * (made absolute here: the process has another working directory) and
 * says where it went. --all, and the top of each --top refresh: the
 * table of every process per device (overview.c).
 * Exit status: 0 done; 1 no live stats for that process (the message says
 * why); 2 a usage error; 3 the process did not answer in time (stopped, or
 * busy in a long allocation): its last answer was printed. `--top` removes
 * the stale files of this user's processes that died without removing
 * their own (kill -9). What a segment says is the writer's, not ours: its
 * header is printed with every byte outside printable ASCII escaped (no
 * terminal escape passes through), and an answer stamped later than now
 * is called 0 s old, never a negative age. */
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "live_read.h"
#include "outfile.h"
#include "now.h"
#include "overview.h"
#include "prometheus.h"
#include "report.h"

#define PROG "cudapool-stats"
#define MAX_PROCS 256

static const char usage[] =
    "usage: " PROG " PID [--json] [--timeout SEC]\n"
    "       " PROG " --top [--interval SEC] [--iterations N] [--timeout SEC] [--group NAME]\n"
    "       " PROG " --all [--timeout SEC] [--group NAME]\n"
    "       " PROG " [PID] --prometheus [--timeout SEC]\n"
    "       " PROG " --snapshot PID -o FILE [--timeout SEC]\n"
    "Prints the pool counters of a running process under cudapool, as its exit report\n"
    "would at this moment, without stopping it (--top: every such process of this user,\n"
    "refreshed). The process publishes them through /dev/shm when asked (CUDAPOOL_LIVE=1,\n"
    "the default).\n"
    "  --json            the exit report's JSON instead of its table\n"
    "  --prometheus      Prometheus text (what node_exporter's textfile collector\n"
    "                    reads) of PID, or of every process of this user\n"
    "  --timeout SEC     how long to wait for the process to answer (default 2)\n"
    "  --top             every process, again every --interval SEC (default 1)\n"
    "  --iterations N    stop after N refreshes (default: until interrupted)\n"
    "  --snapshot PID -o FILE\n"
    "                    the process writes a snapshot of every segment and block\n"
    "                    to FILE (%p = its pid; the rules of its other output files),\n"
    "                    which `cudapool view` opens\n"
    "  --all             every process of this user on each GPU, once: pid, command,\n"
    "                    allocated, reserved, cached, releasable, what it asked of its\n"
    "                    peers and got, how often it was asked and gave back, and the\n"
    "                    shared budget (CUDAPOOL_SHARED_LIMIT); --top shows it too\n"
    "  --group NAME      --all and --top: only processes of CUDAPOOL_SHARED_NAME=NAME\n"
    "Exit status: 0 done, 1 no live stats for PID, 2 usage error, 3 no answer in time\n"
    "(the last answer is printed).\n";

typedef struct cli {
  long pid;
  bool json, top, prometheus, snapshot, all;
  const char *output;
  const char *group; /* --group: only this CUDAPOOL_SHARED_NAME; NULL = every process */
  double timeout, interval;
  long iterations;
} cli_t;

static int usage_error(const char *fmt, const char *arg) {
  fputs(PROG ": ", stderr);
  fprintf(stderr, fmt, arg);
  fputs(" (--help lists the options)\n", stderr);
  return 2;
}

static bool seconds(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v > 0) || v > 86400) return false;
  *out = v;
  return true;
}

static int parse(int argc, char **argv, cli_t *c) {
  static const struct option lo[] = {
      {"json", no_argument, NULL, 'j'},
      {"top", no_argument, NULL, 't'},
      {"prometheus", no_argument, NULL, 'p'},
      {"timeout", required_argument, NULL, 'T'},
      {"interval", required_argument, NULL, 'i'},
      {"iterations", required_argument, NULL, 'n'},
      {"snapshot", no_argument, NULL, 'S'},
      {"output", required_argument, NULL, 'o'},
      {"all", no_argument, NULL, 'a'},
      {"group", required_argument, NULL, 'g'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *c = (cli_t){.pid = -1, .timeout = 2.0, .interval = 1.0};
  opterr = 0;
  int o;
  char *end;
  while ((o = getopt_long(argc, argv, ":ho:", lo, NULL)) != -1) {
    switch (o) {
      case 'h': fputs(usage, stdout); exit(0);
      case 'j': c->json = true; break;
      case 't': c->top = true; break;
      case 'p': c->prometheus = true; break;
      case 'S': c->snapshot = true; break;
      case 'o':
        if (!optarg[0]) return usage_error("%s", "-o needs a file name");
        c->output = optarg;
        break;
      case 'a': c->all = true; break;
      case 'g':
        if (strlen(optarg) >= CP_LIVE_GROUP_MAX) return usage_error("--group: '%s' is longer than 63 bytes", optarg);
        c->group = optarg;
        break;
      case 'T':
      case 'i':
        if (!seconds(optarg, o == 'T' ? &c->timeout : &c->interval))
          return usage_error(o == 'T' ? "--timeout: '%s' is not a number of seconds"
                                      : "--interval: '%s' is not a number of seconds",
                             optarg);
        break;
      case 'n':
        errno = 0;
        c->iterations = strtol(optarg, &end, 10);
        if (errno || *end || end == optarg || c->iterations < 1)
          return usage_error("--iterations: '%s' is not a count from 1", optarg);
        break;
      case ':': return usage_error("%s needs a value", argv[optind - 1]);
      default: return usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  for (int i = optind; i < argc; i++) {
    if (c->top || c->all || c->pid >= 0) return usage_error("unexpected argument '%s'", argv[i]);
    errno = 0;
    c->pid = strtol(argv[i], &end, 10);
    /* A pid is a positive int (pid_t): a larger number is refused, not clamped. */
    if (*end || end == argv[i] || errno == ERANGE || c->pid <= 0 || c->pid > INT_MAX)
      return usage_error("'%s' is not a process id", argv[i]);
  }
  if (c->snapshot && (c->top || c->json || c->prometheus))
    return usage_error("%s", "--snapshot is its own request: not with --top, --json or --prometheus");
  if (c->snapshot && c->pid < 0) return usage_error("%s", "--snapshot needs a process id");
  if (c->snapshot && !c->output) return usage_error("%s", "--snapshot needs -o FILE");
  if (c->output && !c->snapshot) return usage_error("%s", "-o is for --snapshot");
  if (c->prometheus && (c->top || c->json))
    return usage_error("%s", "--prometheus is its own output: not with --top or --json");
  if (c->all && (c->top || c->json || c->prometheus || c->snapshot))
    return usage_error("%s", "--all is its own output: not with --top, --json or --prometheus");
  if (c->group && !c->top && !c->all) return usage_error("%s", "--group is for --all and --top");
  if (!c->top && !c->all && !c->prometheus && c->pid < 0) return usage_error("%s", "no process id given");
  if (c->top && c->json) return usage_error("%s", "--json is for one process, not --top");
  return 0;
}

static uint64_t deadline(double sec) { return lr_monotonic_ns() + (uint64_t)(sec * 1e9); }

/* The process's regions and call sites, line by line, each escaped as the
 * header is (the names are the program's). */
static void print_extra(const char *text) {
  static char line[4 * 1024 + 1];
  while (*text) {
    const char *nl = strchr(text, '\n');
    size_t len = nl ? (size_t)(nl - text) : strlen(text);
    char raw[1024];
    snprintf(raw, sizeof raw, "%.*s", (int)(len < sizeof raw ? len : sizeof raw - 1), text);
    lv_escape(raw, line, sizeof line);
    puts(line);
    text += len + (nl != NULL);
  }
}

/* The report of s; in text, the current values after it (rates too when
 * prev, an earlier answer of the same process, is given). */
static void print(const lr_snapshot_t *s, bool json, const lr_snapshot_t *prev) {
  char header[4 * sizeof s->header + 1];
  lv_escape(s->header, header, sizeof header);
  if (json) {
    cp_report_json_members(stdout, s->devices, s->ndevices, s->extra_json);
  } else {
    cp_report_text(stdout, s->devices, s->ndevices, header);
    print_extra(s->extra_text);
    lv_print_now(stdout, s, prev);
  }
}

/* Seconds since the last answer; 0 for one stamped later than now (a clock
 * set back, or a segment that says so). */
static double age_s(const lr_snapshot_t *s) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  double t = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
  double age = t - (double)s->published_ns / 1e9;
  return age > 0 ? age : 0;
}

/* Opens c->pid's segment: 0, or 1 after saying why not. */
static int open_one(const cli_t *c, lr_proc_t *out) {
  lr_proc_t p;
  switch (lr_open(c->pid, &p)) {
    case LR_OK: *out = p; return 0;
    case LR_STALE:
      fprintf(stderr, PROG ": process %ld has ended (its live stats file %s is stale)\n", c->pid, p.path);
      return 1;
    case LR_NO_ACCESS:
      fprintf(stderr, PROG ": process %ld belongs to another user: run this as that user\n", c->pid);
      return 1;
    case LR_BAD:
      fprintf(stderr, PROG ": process %ld: %s is not a live stats file of this version\n", c->pid, p.path);
      return 1;
    case LR_OTHER_VERSION:
      fprintf(stderr,
              PROG ": process %ld runs another version of cudapool (live stats layout %u; this reader reads layout "
                   "%u): use the cudapool-stats of that version\n",
              c->pid, p.layout, CP_LIVE_LAYOUT);
      return 1;
    default:
      fprintf(stderr,
              PROG ": process %ld has no live stats: it is not running under cudapool, has made no CUDA call "
                   "yet, or runs with CUDAPOOL_LIVE=0\n",
              c->pid);
      return 1;
  }
}

static int one(const cli_t *c) {
  lr_proc_t p;
  if (open_one(c, &p) != 0) return 1;
  static lr_snapshot_t snap;
  lr_ask(&p);
  bool answered = lr_wait(&p, deadline(c->timeout));
  lr_copy(&p, &snap);
  lr_close(&p);
  if (c->prometheus) {
    const lr_snapshot_t *one_snap = &snap;
    lv_prometheus(stdout, &c->pid, &one_snap, 1);
  } else {
    print(&snap, c->json, NULL);
  }
  if (answered) return 0;
  fprintf(stderr, PROG ": process %ld did not answer within %g s (stopped?): its last answer, %.1f s old\n",
          c->pid, c->timeout, age_s(&snap));
  return 3;
}

/* Segments of another cudapool version the last gather skipped. */
static size_t other_versions;

/* --snapshot: the process writes it (from its live stats thread); a name
 * relative to this working directory is made absolute first. */
static int snapshot(const cli_t *c) {
  char file[CP_LIVE_PATH_MAX], cwd[CP_LIVE_PATH_MAX];
  int n = c->output[0] == '/' ? snprintf(file, sizeof file, "%s", c->output)
          : getcwd(cwd, sizeof cwd)  ? snprintf(file, sizeof file, "%s/%s", cwd, c->output)
                                     : -1;
  if (n < 0 || (size_t)n >= sizeof file) return usage_error("-o: '%s' is too long a name once absolute", c->output);
  lr_proc_t p;
  if (open_one(c, &p) != 0) return 1;
  uint32_t asked = lr_ask_snapshot(&p, file);
  bool answered = lr_wait(&p, deadline(c->timeout));
  char written[CP_LIVE_PATH_MAX], shown[4 * CP_LIVE_PATH_MAX + 1];
  int err = answered ? lr_snapshot_result(&p, asked, written, sizeof written) : 0;
  lr_close(&p);
  if (!answered) {
    fprintf(stderr, PROG ": process %ld did not answer within %g s (stopped?): no snapshot\n", c->pid, c->timeout);
    return 3;
  }
  if (err < 0) {
    fprintf(stderr, PROG ": process %ld answered another snapshot request made at the same time: ask again\n",
            c->pid);
    return 1;
  }
  lv_escape(err ? file : written, shown, sizeof shown);
  if (err) {
    const char *rule = cp_outfile_rule(err);
    fprintf(stderr, PROG ": process %ld could not write %s: %s\n", c->pid, shown, rule ? rule : strerror(err));
    return 1;
  }
  printf("cudapool: snapshot of process %ld written to %s\n", c->pid, shown);
  return 0;
}

/* Every segment of this user, once: asked together, then waited for. */
static size_t gather(const cli_t *c, long *pids, lr_snapshot_t *snaps) {
  char pattern[128];
  snprintf(pattern, sizeof pattern, CP_LIVE_DIR "/" CP_LIVE_PREFIX "%lu.*", (unsigned long)geteuid());
  static lr_proc_t procs[MAX_PROCS];
  glob_t g;
  size_t n = 0;
  other_versions = 0;
  if (glob(pattern, 0, NULL, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc && n < MAX_PROCS; i++) {
      enum lr_status st = lr_open_path(g.gl_pathv[i], &procs[n]);
      if (st == LR_OK && c->group && (memchr(procs[n].seg->group, '\0', sizeof procs[n].seg->group) == NULL ||
                                      strcmp(procs[n].seg->group, c->group) != 0)) {
        lr_close(&procs[n]); /* another group's */
      } else if (st == LR_OK) {
        lr_ask(&procs[n++]);
      } else if (st == LR_OTHER_VERSION) {
        other_versions++;
      } else if (st == LR_STALE) {
        lr_close(&procs[n]);
        unlink(g.gl_pathv[i]); /* ours (we could open it read-write) and its process is gone */
      }
    }
    globfree(&g);
  }
  uint64_t until = deadline(c->timeout);
  for (size_t i = 0; i < n; i++) {
    bool answered = lr_wait(&procs[i], until);
    lr_copy(&procs[i], &snaps[i]);
    pids[i] = procs[i].pid;
    snaps[i].answered = answered;
    if (!answered) {
      size_t len = strlen(snaps[i].header);
      snprintf(snaps[i].header + len, sizeof snaps[i].header - len, " (not answering: %.0f s old)",
               age_s(&snaps[i]));
    }
    lr_close(&procs[i]);
  }
  return n;
}

static long pids[MAX_PROCS], prev_pids[MAX_PROCS];
static lr_snapshot_t snaps[MAX_PROCS], prev_snaps[MAX_PROCS];
static size_t prev_n;

/* One refresh of --top: every process's report and current values, with
 * the rates since the previous refresh for those seen then. */
static void refresh(const cli_t *c, bool clear) {
  size_t n = gather(c, pids, snaps);
  if (clear) fputs("\033[H\033[2J", stdout);
  time_t now = time(NULL);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
  printf("cudapool top: %zu process%s at %s (every %g s)\n", n, n == 1 ? "" : "es", when, c->interval);
  if (n > 0) {
    fputc('\n', stdout);
    lv_print_overview(stdout, pids, snaps, n, c->group);
  }
  for (size_t i = 0; i < n; i++) {
    const lr_snapshot_t *prev = NULL;
    for (size_t k = 0; k < prev_n && prev == NULL; k++)
      if (prev_pids[k] == pids[i]) prev = &prev_snaps[k];
    fputc('\n', stdout);
    print(&snaps[i], false, prev);
  }
  fflush(stdout);
  memcpy(prev_pids, pids, n * sizeof pids[0]);
  memcpy(prev_snaps, snaps, n * sizeof snaps[0]);
  prev_n = n;
}

/* --all: every process of this user on each GPU, once. */
static int all(const cli_t *c) {
  size_t n = gather(c, pids, snaps);
  printf("cudapool: %zu process%s under cudapool%s%s\n", n, n == 1 ? "" : "es", c->group ? " of group " : "",
         c->group ? c->group : "");
  if (n > 0) {
    fputc('\n', stdout);
    lv_print_overview(stdout, pids, snaps, n, c->group);
  }
  fflush(stdout);
  if (other_versions)
    fprintf(stderr, PROG ": %zu process%s of another cudapool version not shown (live stats layout other than %u)\n",
            other_versions, other_versions == 1 ? "" : "es", CP_LIVE_LAYOUT);
  return 0;
}

/* --prometheus without a PID: every process of this user, once. */
static int prometheus_all(const cli_t *c) {
  size_t n = gather(c, pids, snaps);
  static const lr_snapshot_t *views[MAX_PROCS];
  for (size_t i = 0; i < n; i++) views[i] = &snaps[i];
  lv_prometheus(stdout, pids, views, n);
  return 0;
}

static int top(const cli_t *c) {
  bool clear = isatty(STDOUT_FILENO);
  for (long k = 0; c->iterations == 0 || k < c->iterations; k++) {
    if (k > 0) {
      struct timespec d = {.tv_sec = (time_t)c->interval,
                           .tv_nsec = (long)((c->interval - (double)(time_t)c->interval) * 1e9)};
      while (nanosleep(&d, &d) != 0 && errno == EINTR) {
      }
    }
    refresh(c, clear);
  }
  return 0;
}

int main(int argc, char **argv) {
  cli_t c;
  int rc = parse(argc, argv, &c);
  if (rc != 0) return rc;
  if (c.snapshot) return snapshot(&c);
  if (c.prometheus && c.pid < 0) return prometheus_all(&c);
  if (c.all) return all(&c);
  return c.top ? top(&c) : one(&c);
}
