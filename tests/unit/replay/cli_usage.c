/* cli_usage.c: cudapool-replay's command line when it is used wrongly
 * (tools/replay/main.c, getopt_long): every usage error names the option
 * and exits 2; an unknown option is called unknown, whatever follows it; a
 * trace with nothing to replay is an error, not a report of zeros; a file
 * that cannot be read exits 1. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "replay_util.h"

static char dir[64];
static void mk(void) { cr_assert(eq(int, ru_mkdtemp(dir), 0)); }
static void rm(void) { ru_rmtree(dir); }
TestSuite(cli_usage, .init = mk, .fini = rm);

static const char trace_text[] = "Thread,Time,Action,Pointer,Size,Stream\n"
                                 "1,0.0,allocate,0x1000,1000,(nil)\n"
                                 "1,0.1,free,0x1000,0,(nil)\n";

static void write_file(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert(not(eq(ptr, f, NULL)));
  fputs(text, f);
  fclose(f);
}

/* cd DIR && cudapool-replay ARGS 2>&1: output in *out, the exit status. */
static int replay(const char *args, char **out) {
  char bin[PATH_MAX], cmd[PATH_MAX * 2];
  cr_assert(eq(int, ru_replay_bin(bin, sizeof bin), 0));
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", dir, bin, args);
  return ru_run(cmd, out);
}

struct usage_case {
  char args[96];
  int status;
  char said[200];
};

ParameterizedTestParameters(cli_usage, errors_name_the_option) {
  static struct usage_case cases[] = {
      /* unknown, with or without something after it */
      {"t.csv --stats", 2, "cudapool-replay: unknown option '--stats' (--help lists them)\n"},
      {"--stats t.csv", 2, "cudapool-replay: unknown option '--stats' (--help lists them)\n"},
      {"t.csv --stats=x.json", 2, "cudapool-replay: unknown option '--stats' (--help lists them)\n"},
      {"t.csv -x", 2, "cudapool-replay: unknown option '-x' (--help lists them)\n"},
      /* a value missing, or given to a flag */
      {"t.csv --limit", 2, "cudapool-replay: --limit needs a value\n"},
      {"t.csv --json=1", 2, "cudapool-replay: --json takes no value\n"},
      {"t.csv --find-limit=yes", 2, "cudapool-replay: --find-limit takes no value\n"},
      /* a prefix of several */
      {"t.csv --large 1M", 2,
       "cudapool-replay: option '--large' is ambiguous: --large-segment --large-threshold "
       "--large-split-remainder\n"},
      /* bad values */
      {"t.csv --limit 12Q", 2, "cudapool-replay: --limit: '12Q' is not a size (e.g. 8G) or none\n"},
      {"t.csv --max-split 1M", 2,
       "cudapool-replay: --max-split: under 21M, the least the pool takes (above its largest segment)\n"},
      {"t.csv --compare '--max-split 20M'", 2,
       "cudapool-replay: --max-split: under 21M, the least the pool takes (above its largest segment)\n"},
      {"t.csv --large-segment 40M --max-split 32M", 2,
       "cudapool-replay: --max-split: under 41M, the least the pool takes (above its largest segment)\n"},
      {"t.csv --on-error=maybe", 2, "cudapool-replay: --on-error: 'maybe' is not skip or stop\n"},
      {"t.csv --repeat 0", 2, "cudapool-replay: --repeat: '0' is not a count from 1 to 1000\n"},
      /* arguments */
      {"t.csv t.csv", 2, "cudapool-replay: unexpected argument 't.csv'\n"},
      {"t.csv --compare '--json'", 2, "cudapool-replay: --compare: '--json' is not a pool option\n"},
      {"t.csv --compare '--limit'", 2, "cudapool-replay: --compare: --limit needs a value\n"},
      {"t.csv --compare 'x.csv'", 2, "cudapool-replay: --compare: unexpected argument 'x.csv'\n"},
      {"t.csv --compare '--reuse=fast'", 2,
       "cudapool-replay: --reuse: 'fast' is not barrier, sync or immediate\n"},
  };
  return cr_make_param_array(struct usage_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct usage_case *c, cli_usage, errors_name_the_option) {
  char *out = NULL;
  write_file("t.csv", trace_text);
  int rc = replay(c->args, &out);
  cr_assert(eq(int, rc, c->status), "%s: %s", c->args, out);
  cr_assert(eq(str, out, c->said), "%s", c->args);
  free(out);
}

Test(cli_usage, no_trace_prints_the_usage_and_exits_2) {
  char *out = NULL;
  cr_assert(eq(int, replay("--json", &out), 2), "%s", out);
  const char *want = "cudapool-replay: no trace given\nusage: cudapool-replay TRACE [options]\n";
  cr_assert(eq(int, strncmp(out, want, strlen(want)), 0), "%s", out);
  free(out);
}

Test(cli_usage, help_long_and_short) {
  char *out = NULL;
  cr_assert(eq(int, replay("--help", &out), 0), "%s", out);
  cr_assert(eq(int, strncmp(out, "usage: cudapool-replay TRACE", 28), 0), "%s", out);
  cr_assert(not(eq(ptr, strstr(out, "Exit status: 0 done"), NULL)), "%s", out);
  free(out);
  cr_assert(eq(int, replay("-h", &out), 0), "%s", out);
  cr_assert(eq(int, strncmp(out, "usage: cudapool-replay TRACE", 28), 0), "%s", out);
  free(out);
}

/* Options may come before the trace, and values after '=' or apart. */
Test(cli_usage, options_anywhere) {
  char *out = NULL;
  write_file("t.csv", trace_text);
  cr_assert(eq(int, replay("--repeat 1 --limit=8M t.csv --key none --json", &out), 0), "%s", out);
  cr_assert(eq(int, strncmp(out, "{\"peak_allocated\":1024,", 23), 0), "%s", out);
  free(out);
}

struct empty_case {
  char name[16];
  char text[128];
  char said[160];
};

ParameterizedTestParameters(cli_usage, nothing_to_replay_is_an_error) {
  static struct empty_case cases[] = {
      {"empty.csv", "", "cudapool-replay: empty.csv: no allocation to replay (0 lines, 0 of them bad)\n"},
      {"header.csv", "Thread,Time,Action,Pointer,Size,Stream\n",
       "cudapool-replay: header.csv: no allocation to replay (1 lines, 0 of them bad)\n"},
      {"junk.csv", "hello\n",
       "junk.csv:1: expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found 1\n"
       "cudapool-replay: junk.csv: no allocation to replay (1 lines, 1 of them bad)\n"},
      {"syncs.csv", "1,0.0,sync_device,(nil),0,(nil)\n",
       "cudapool-replay: syncs.csv: no allocation to replay (1 lines, 0 of them bad)\n"},
  };
  return cr_make_param_array(struct empty_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct empty_case *c, cli_usage, nothing_to_replay_is_an_error) {
  char *out = NULL, args[64];
  write_file(c->name, c->text);
  snprintf(args, sizeof args, "%s --repeat 1", c->name);
  cr_assert(eq(int, replay(args, &out), 2), "%s", out);
  cr_assert(eq(str, out, c->said));
  free(out);
  snprintf(args, sizeof args, "%s --repeat 1 --json", c->name);
  cr_assert(eq(int, replay(args, &out), 2), "%s", out);
  cr_assert(eq(str, out, c->said), "--json too");
  free(out);
}

Test(cli_usage, unreadable_file_exits_1) {
  char *out = NULL;
  cr_assert(eq(int, replay("missing.csv", &out), 1), "%s", out);
  cr_assert(eq(str, out, "missing.csv: cannot open: No such file or directory\n"));
  free(out);
}

/* name := `known` allocate/free pairs of one thread, then `unknown` frees of
 * pointers nothing allocated, from another (a second process's lines). */
static void write_mixed(const char *name, int known, int unknown) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert(not(eq(ptr, f, NULL)));
  fputs("Thread,Time,Action,Pointer,Size,Stream\n", f);
  for (int i = 0; i < known; i++) {
    fprintf(f, "1,%d.0,allocate,0x%x,4096,(nil)\n", i, 0x100000 + i * 0x1000);
    fprintf(f, "1,%d.5,free,0x%x,4096,(nil)\n", i, 0x100000 + i * 0x1000);
  }
  for (int k = 0; k < unknown; k++) fprintf(f, "2,%d.7,free,0x%x,4096,(nil)\n", k, 0x9000000 + k * 0x1000);
  fclose(f);
}

/* The last line of out. */
static const char *last_line(const char *out) {
  size_t n = strlen(out);
  if (n > 0 && out[n - 1] == '\n') n--;
  while (n > 0 && out[n - 1] != '\n') n--;
  return out + n;
}

/* More than 1% of the frees, and at least 16, of pointers the trace never
 * allocated: the events of several processes, refused (status 2) unless
 * --allow-unknown-frees; a few (a trace begun late) are only bad lines. */
Test(cli_usage, trace_of_several_processes_refused) {
  char *out = NULL;
  write_mixed("mixed.csv", 100, 20);
  cr_assert(eq(int, replay("mixed.csv --repeat 1", &out), 2), "%s", out);
  cr_assert(eq(str, (char *)last_line(out),
               "cudapool-replay: mixed.csv: 20 of 120 frees are of pointers the trace never allocated: not the "
               "trace of one process (several processes writing one file? give each its own with %p in "
               "CUDAPOOL_TRACE); --allow-unknown-frees replays it anyway\n"));
  free(out);
  cr_assert(eq(int, replay("mixed.csv --repeat 1 --allow-unknown-frees --json", &out), 0), "%s", out);
  cr_assert(not(eq(ptr, strstr(out, "{\"peak_allocated\":4096,"), NULL)), "%s", out);
  free(out);
  write_mixed("few.csv", 100, 15); /* fewer than 16 */
  cr_assert(eq(int, replay("few.csv --repeat 1", &out), 0), "%s", out);
  free(out);
  write_mixed("share.csv", 1600, 16); /* 16 of 1616: 1% or less */
  cr_assert(eq(int, replay("share.csv --repeat 1", &out), 0), "%s", out);
  free(out);
}
