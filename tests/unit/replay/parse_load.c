/* parse_load.c: the replayer's input side, tools/replay/parse.c and load.c.
 *
 * Valid lines of each producer (cudapool's recorder, RMM, the shared PyTorch
 * traces), each kind of bad line with its exact message, and the loader's
 * line numbers, skip/stop policy, time ordering, pointer resolution and .gz
 * input; a file streamed through cursors gives the events that holding it
 * gives, and one too far out of time order is held and sorted. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "replay.h"

/* ---- rp_parse_line: valid lines -------------------------------------- */

struct good {
  char line[96];
  int kind;
  uint64_t thread, ptr, size, stream;
  double time;
  bool clock_time;
};

ParameterizedTestParameters(parse, valid) {
  static struct good p[] = {
      /* the shared PyTorch traces */
      {"633,0.021117,allocate,0x7efd75e00000,3072,(nil)", RP_LINE_ALLOC, 633, 0x7efd75e00000, 3072, 0,
       0.021117, false},
      {"633,4.583414,free,0x7efd75e3a800,0,(nil)", RP_LINE_FREE, 633, 0x7efd75e3a800, 0, 0, 4.583414, false},
      {"633,0.016493,sync_stream,(nil),0,(nil)", RP_LINE_SYNC_STREAM, 633, 0, 0, 0, 0.016493, false},
      {"633,1.124660,sync_device,(nil),0,(nil)", RP_LINE_SYNC_DEVICE, 633, 0, 0, 0, 1.12466, false},
      {"633,0.070838,allocate,(nil),0,(nil)", RP_LINE_ZERO_ALLOC, 633, 0, 0, 0, 0.070838, false},
      /* cudapool's recorder: nanosecond digits, extras, a stream */
      {"41,12.000000250,allocate,0x7f0000200000,512,0x55d0c0", RP_LINE_ALLOC, 41, 0x7f0000200000, 512,
       0x55d0c0, 12.00000025, false},
      {"41,1.5,allocate failure,(nil),1099511627776,0x10", RP_LINE_ALLOC_FAIL, 41, 0, 1ull << 40, 0x10, 1.5,
       false},
      {"41,2,segment_alloc,0x7f0000000000,2097152,(nil)", RP_LINE_SEGMENT_ALLOC, 41, 0x7f0000000000, 2097152,
       0, 2, false},
      {"41,2,barrier,(nil),0,(nil)", RP_LINE_EXTRA, 41, 0, 0, 0, 2, false},
      {"41,2,stream_create,(nil),1,0x55d0c0", RP_LINE_STREAM_CREATE, 41, 0, 1, 0x55d0c0, 2, false},
      {"41,2,empty_cache,(nil),0,(nil)", RP_LINE_EMPTY_CACHE, 41, 0, 0, 0, 2, false},
      /* RMM: thread id, clock time, 0x0 stream, deallocate with its size, CRLF */
      {"140573312345856,14:03:07:123456,allocate,0x7f8a40000000,1024,0x0", RP_LINE_ALLOC, 140573312345856u,
       0x7f8a40000000, 1024, 0, 14 * 3600 + 3 * 60 + 7.123456, true},
      {"140573312345856,14:03:07.5,deallocate,0x7f8a40000000,1024,0x7f8a38001020\r", RP_LINE_FREE,
       140573312345856u, 0x7f8a40000000, 1024, 0x7f8a38001020, 14 * 3600 + 3 * 60 + 7 + 5e-6, true},
      {" 7 , 0.5 , FREE , 0X1F , 0 , 0 ", RP_LINE_FREE, 7, 0x1f, 0, 0, 0.5, false},
      {"0x1c,3,allocate,0x10,1,(nil)", RP_LINE_ALLOC, 0x1c, 0x10, 1, 0, 3, false},
      /* CUDAPOOL_STACKS: a 7th column, Stack, the same event (empty off allocate lines) */
      {"41,12.000000250,allocate,0x7f0000200000,512,0x55d0c0,17", RP_LINE_ALLOC, 41, 0x7f0000200000, 512,
       0x55d0c0, 12.00000025, false},
      {"41,13,free,0x7f0000200000,512,0x55d0c0,", RP_LINE_FREE, 41, 0x7f0000200000, 512, 0x55d0c0, 13, false},
  };
  return cr_make_param_array(struct good, p, sizeof p / sizeof p[0]);
}

ParameterizedTest(struct good *g, parse, valid) {
  rp_line_t l;
  char err[160] = "";
  cr_assert(eq(int, rp_parse_line(g->line, strlen(g->line), &l, err, sizeof err), 0), "%s: %s", g->line, err);
  cr_assert(eq(int, (int)l.kind, g->kind), "%s", g->line);
  cr_assert(eq(u64, l.thread, g->thread));
  cr_assert(eq(u64, l.ptr, g->ptr));
  cr_assert(eq(u64, l.size, g->size));
  cr_assert(eq(u64, l.stream, g->stream));
  cr_assert(epsilon_eq(dbl, l.time, g->time, 1e-9), "%s: %.9f", g->line, l.time);
  cr_assert(eq(int, l.clock_time, g->clock_time));
}

Test(parse, header_blank_comment) {
  rp_line_t l;
  char err[160];
  const char *h = "Thread,Time,Action,Pointer,Size,Stream";
  cr_assert(eq(int, rp_parse_line(h, strlen(h), &l, err, sizeof err), 0));
  cr_assert(eq(int, (int)l.kind, RP_LINE_HEADER));
  const char *with_stacks = "Thread,Time,Action,Pointer,Size,Stream,Stack";
  l.kind = RP_LINE_BLANK;
  cr_assert(eq(int, rp_parse_line(with_stacks, strlen(with_stacks), &l, err, sizeof err), 0));
  cr_assert(eq(int, (int)l.kind, RP_LINE_HEADER));
  cr_assert(eq(int, rp_parse_line("  \r", 3, &l, err, sizeof err), 0));
  cr_assert(eq(int, (int)l.kind, RP_LINE_BLANK));
  cr_assert(eq(int, rp_parse_line("# note", 6, &l, err, sizeof err), 0));
  cr_assert(eq(int, (int)l.kind, RP_LINE_BLANK));
  /* cudaFree(NULL): legal, nothing to replay */
  const char *f = "1,0,free,(nil),0,(nil)";
  cr_assert(eq(int, rp_parse_line(f, strlen(f), &l, err, sizeof err), 0));
  cr_assert(eq(int, (int)l.kind, RP_LINE_BLANK));
}

/* ---- rp_parse_line: bad lines, exact messages ------------------------- */

struct bad {
  char line[96];
  char msg[112];
};

ParameterizedTestParameters(parse, invalid) {
  static struct bad p[] = {
      {"633,0.1,allocate,0x10", "expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found 4"},
      {"633,0.1,allocate,0x10,8,(nil),3,x",
       "expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found 8"},
      {"t633,0.1,allocate,0x10,8,(nil)", "bad Thread 't633'"},
      {"633,-0.1,allocate,0x10,8,(nil)", "bad Time '-0.1'"},
      {"633,1.,allocate,0x10,8,(nil)", "bad Time '1.'"},
      {"633,25:61:00.1,allocate,0x10,8,(nil)", "bad Time '25:61:00.1'"},
      {"633,0.1,alloc@te,0x10,8,(nil)", "bad Action 'alloc@te'"},
      {"633,0.1,,0x10,8,(nil)", "bad Action ''"},
      {"633,0.1,allocate,0xZZ,8,(nil)", "bad Pointer '0xZZ'"},
      {"633,0.1,allocate,0x10000000000000000,8,(nil)", "bad Pointer '0x10000000000000000'"},
      {"633,0.1,allocate,16,8,(nil)", "bad Pointer '16'"},
      {"633,0.1,allocate,0x10,-8,(nil)", "bad Size '-8'"},
      {"633,0.1,allocate,0x10,8k,(nil)", "bad Size '8k'"},
      {"633,0.1,allocate,0x10,18446744073709551616,(nil)", "Size '18446744073709551616' out of range"},
      {"633,0.1,allocate,0x10,8,nil", "bad Stream 'nil'"},
      {"633,0.1,allocate,(nil),8,(nil)", "allocate of 8 bytes with a null Pointer"},
      {"633,0.1,allocate,0x10,0,(nil)", "allocate of 0 bytes"},
      {"\x01\x02garbage\xff", "expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found 1"},
      {"1,2,\x7f\x80,0x1,1,0", "bad Action '\?\?'"},
  };
  return cr_make_param_array(struct bad, p, sizeof p / sizeof p[0]);
}

ParameterizedTest(struct bad *b, parse, invalid) {
  rp_line_t l = {.kind = RP_LINE_HEADER};
  char err[160] = "";
  cr_assert(eq(int, rp_parse_line(b->line, strlen(b->line), &l, err, sizeof err), -1), "%s", b->line);
  cr_assert(eq(str, err, b->msg));
  cr_assert(eq(int, (int)l.kind, RP_LINE_HEADER), "output untouched on error");
}

Test(parse, nul_byte_and_long_line) {
  rp_line_t l;
  char err[160];
  const char nul[] = "1,0,allocate,0x1\0,8,(nil)";
  cr_assert(eq(int, rp_parse_line(nul, sizeof nul - 1, &l, err, sizeof err), -1));
  cr_assert(eq(str, err, "NUL byte in line"));
  size_t n = RP_MAX_LINE + 1;
  char *big = malloc(n);
  memset(big, 'a', n);
  cr_assert(eq(int, rp_parse_line(big, n, &l, err, sizeof err), -1));
  cr_assert(eq(str, err, "line longer than 4096 bytes"));
  free(big);
}

Test(parse, long_field_is_quoted_short) {
  char line[200], err[160];
  snprintf(line, sizeof line, "1,0,allocate,0x1,%s,(nil)",
           "12345678901234567890123456789012345678901234567890");
  rp_line_t l;
  cr_assert(eq(int, rp_parse_line(line, strlen(line), &l, err, sizeof err), -1));
  cr_assert(eq(str, err, "Size '1234567890123456789012345678901234567890...' out of range"));
}

/* ---- the loader ------------------------------------------------------- */

/* Load text; messages collected in *msgs (caller frees). */
static int load(const char *text, bool stop, rp_trace_t *t, char **msgs) {
  size_t len = 0;
  FILE *err = open_memstream(msgs, &len);
  rp_load_opts_t o = {.name = "t.csv", .err = err, .stop_on_error = stop};
  int rc = rp_load_mem(text, strlen(text), &o, t);
  fclose(err);
  return rc;
}

static const char bad_trace[] = "Thread,Time,Action,Pointer,Size,Stream\n" /* 1 */
                                "1,0.1,allocate,0x100,1000,(nil)\n"        /* 2 */
                                "1,0.2,free,0x999,0,(nil)\n"               /* 3: unknown pointer */
                                "1,0.3,allocate,0x100,10,(nil)\n"          /* 4: still live */
                                "zzz\n"                                    /* 5: garbage */
                                "1,0.4,barrier,0x0,2097152,(nil)\n"        /* 6: extra, skipped */
                                "1,0.5,free,0x100,0,(nil)\n"               /* 7 */
                                "1,0.6,allocate,0x100,20,(nil)\n"          /* 8: reuse after free */
                                "1,0.7,allocate,0x200,3";                  /* 9: truncated */

Test(load, skip_reports_every_bad_line_in_line_order) {
  rp_trace_t t;
  char *msgs = NULL;
  cr_assert(eq(int, load(bad_trace, false, &t, &msgs), 0));
  cr_assert(eq(str, msgs,
               "t.csv:3: free of unknown pointer 0x999\n"
               "t.csv:4: allocate of 0x100, still live since line 2\n"
               "t.csv:5: expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found 1\n"
               "t.csv:9: truncated last line (no newline at end of file): expected 6 columns "
               "(Thread,Time,Action,Pointer,Size,Stream), found 5\n"));
  cr_assert(eq(sz, t.errors, 4));
  cr_assert(eq(sz, t.lines, 9));
  cr_assert(eq(sz, t.skipped, 1));
  cr_assert(eq(sz, t.n, 3));
  cr_assert(eq(sz, t.allocs, 2));
  cr_assert(eq(sz, t.frees, 1));
  cr_assert(eq(u32, t.nslots, 1), "the freed block's slot is taken again");
  cr_assert(eq(int, t.ev[0].op, RP_OP_ALLOC));
  cr_assert(eq(int, t.ev[1].op, RP_OP_FREE));
  cr_assert(eq(u32, t.ev[1].slot, t.ev[0].slot));
  cr_assert(eq(int, t.ev[2].op, RP_OP_ALLOC));
  cr_assert(eq(u32, t.ev[2].slot, t.ev[0].slot));
  cr_assert(eq(u32, t.line[2], 8));
  cr_assert(eq(u64, t.peak_live, 1000));
  rp_trace_free(&t);
  free(msgs);
}

Test(load, stop_at_first_bad_line) {
  rp_trace_t t;
  char *msgs = NULL;
  /* The first bad line, though pointer resolution finds it after parsing. */
  cr_assert(eq(int, load(bad_trace, true, &t, &msgs), 2));
  cr_assert(eq(str, msgs, "t.csv:3: free of unknown pointer 0x999\n"));
  free(msgs);
  msgs = NULL;
  cr_assert(eq(int, load("1,0,allocate,0x5,8,(nil)\n1,1,allocate,0x6,8,(nil)\nx\n", true, &t, &msgs), 2));
  cr_assert(eq(str, msgs, "t.csv:3: expected 6 columns (Thread,Time,Action,Pointer,Size,Stream), found 1\n"));
  free(msgs);
  msgs = NULL;
  /* A resolution error stops too. */
  cr_assert(eq(int, load("1,0,free,0x5,0,(nil)\n", true, &t, &msgs), 2));
  cr_assert(eq(str, msgs, "t.csv:1: free of unknown pointer 0x5\n"));
  free(msgs);
}

Test(load, sorts_by_time_keeping_ties_in_file_order) {
  /* Two threads' chunks, as the recorder writes them. */
  const char *text = "Thread,Time,Action,Pointer,Size,Stream\n"
                     "2,0.000000300,free,0x100,0,(nil)\n"
                     "2,0.000000400,allocate,0x100,64,(nil)\n"
                     "1,0.000000100,allocate,0x100,32,(nil)\n"
                     "1,0.000000400,sync_device,(nil),0,(nil)\n";
  rp_trace_t t;
  char *msgs = NULL;
  cr_assert(eq(int, load(text, false, &t, &msgs), 0));
  cr_assert(eq(str, msgs, ""));
  cr_assert(t.reordered);
  cr_assert(eq(sz, t.n, 4));
  cr_assert(eq(u32, t.line[0], 4));
  cr_assert(eq(u32, t.line[1], 2));
  cr_assert(eq(u32, t.line[2], 3));
  cr_assert(eq(u32, t.line[3], 5));
  cr_assert(eq(u64, t.ev[0].key, 2), "thread 1 -> key 2");
  cr_assert(eq(u64, t.ev[2].size, 64));
  rp_trace_free(&t);
  free(msgs);
}

Test(load, rmm_clock_times_keep_file_order) {
  const char *text = "1,23:59:59.999999,allocate,0x100,32,0x0\n"
                     "1,00:00:00.000001,free,0x100,32,0x0\n";
  rp_trace_t t;
  char *msgs = NULL;
  cr_assert(eq(int, load(text, false, &t, &msgs), 0));
  cr_assert(not(t.reordered));
  cr_assert(eq(sz, t.n, 2));
  cr_assert(eq(int, t.ev[1].op, RP_OP_FREE));
  rp_trace_free(&t);
  free(msgs);
}

static char tmpdir[64];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/cp-replay-test-XXXXXX");
  cr_assert(not(eq(ptr, mkdtemp(tmpdir), NULL)));
}

static void remove_tmpdir(void) {
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  cr_assert(eq(int, system(cmd), 0));
}

TestSuite(load_file, .init = make_tmpdir, .fini = remove_tmpdir);

/* Every event of t, through a cursor, into held arrays (caller frees). */
typedef struct events {
  rp_event_t *ev;
  uint32_t *line;
  double *time;
  size_t n;
} events_t;

static events_t all_events(const rp_trace_t *t) {
  events_t e = {0};
  rp_cursor_t c;
  cr_assert(eq(int, rp_cursor_open(&c, t), 0));
  for (size_t n; (n = rp_cursor_next(&c)) > 0;) {
    e.ev = realloc(e.ev, (e.n + n) * sizeof *e.ev);
    e.line = realloc(e.line, (e.n + n) * sizeof *e.line);
    e.time = realloc(e.time, (e.n + n) * sizeof *e.time);
    cr_assert(ne(ptr, e.ev, NULL));
    cr_assert(ne(ptr, e.line, NULL));
    cr_assert(ne(ptr, e.time, NULL));
    memcpy(e.ev + e.n, c.ev, n * sizeof *c.ev);
    memcpy(e.line + e.n, c.line, n * sizeof *c.line);
    memcpy(e.time + e.n, c.time, n * sizeof *c.time);
    e.n += n;
  }
  rp_cursor_close(&c);
  return e;
}

static void free_events(events_t *e) {
  free(e->ev);
  free(e->line);
  free(e->time);
}

static void same_events(const events_t *a, const events_t *b) {
  cr_assert(eq(sz, a->n, b->n));
  for (size_t i = 0; i < a->n; i++) { /* field by field: the struct has padding */
    cr_assert(eq(u64, a->ev[i].size, b->ev[i].size), "event %zu", i);
    cr_assert(eq(u64, a->ev[i].stream, b->ev[i].stream), "event %zu", i);
    cr_assert(eq(u64, a->ev[i].key, b->ev[i].key), "event %zu", i);
    cr_assert(eq(u32, a->ev[i].slot, b->ev[i].slot), "event %zu", i);
    cr_assert(eq(u8, a->ev[i].op, b->ev[i].op), "event %zu", i);
    cr_assert(eq(u32, a->line[i], b->line[i]), "event %zu", i);
  }
}

static void write_text(const char *path, const char *text) {
  FILE *p = fopen(path, "w");
  cr_assert(ne(ptr, p, NULL));
  fputs(text, p);
  cr_assert(eq(int, fclose(p), 0));
}

/* Chunks of two threads out of time order, streamed: the events, their
 * order and the counts are those of the same text held in memory. */
Test(load_file, streamed_equals_held) {
  static char text[1 << 16];
  size_t len = (size_t)snprintf(text, sizeof text, "Thread,Time,Action,Pointer,Size,Stream\n");
  for (int chunk = 0; chunk < 40; chunk++)
    for (int k = 0; k < 20; k++) {
      int thread = chunk % 2 + 1, i = chunk / 2 * 20 + k; /* thread 2's chunk lags thread 1's */
      double time = (thread == 1 ? 1.0 : 0.5) * i;
      len += (size_t)snprintf(text + len, sizeof text - len,
                              "%d,%.3f,allocate,0x%x,%d,(nil)\n%d,%.3f,free,0x%x,0,(nil)\n", thread, time,
                              0x1000 * (thread * 1000 + i), 512 * (k + 1), thread, time + 0.0001,
                              0x1000 * (thread * 1000 + i));
    }
  char path[96];
  snprintf(path, sizeof path, "%s/chunks.csv", tmpdir);
  write_text(path, text);
  rp_load_opts_t o = {.name = "x", .err = stderr, .stop_on_error = true};
  rp_trace_t held, streamed;
  cr_assert(eq(int, rp_load_mem(text, len, &o, &held), 0));
  cr_assert(eq(int, rp_load_file(path, &o, &streamed), 0));
  cr_assert(ne(ptr, streamed.path, NULL), "streamed, not held");
  cr_assert(eq(ptr, streamed.ev, NULL));
  cr_assert(streamed.reordered);
  cr_assert(held.reordered);
  cr_assert(eq(sz, streamed.n, held.n));
  cr_assert(eq(sz, streamed.n, 1600));
  cr_assert(eq(u32, streamed.nslots, held.nslots));
  cr_assert(eq(u64, streamed.peak_live, held.peak_live));
  events_t a = all_events(&held), b = all_events(&streamed);
  same_events(&a, &b);
  for (size_t i = 1; i < b.n; i++)
    cr_assert(le(dbl, b.time[i - 1], b.time[i]), "event %zu out of time order", i);
  free_events(&a);
  free_events(&b);
  rp_trace_free(&held);
  rp_trace_free(&streamed);
}

/* A line that arrives after more than the window's worth of later lines
 * cannot be put in order while streaming: the file is held and sorted. */
Test(load_file, too_far_out_of_order_is_held_and_sorted) {
  char path[96];
  snprintf(path, sizeof path, "%s/late.csv", tmpdir);
  FILE *p = fopen(path, "w");
  cr_assert(ne(ptr, p, NULL));
  const int n = 300000; /* pairs: 600,000 lines, more than the window */
  for (int i = 0; i < n; i++)
    fprintf(p, "1,%d.5,allocate,0x%x,512,(nil)\n1,%d.6,free,0x%x,0,(nil)\n", i + 1, 0x1000 * (i + 1), i + 1,
            0x1000 * (i + 1));
  fputs("2,0.1,allocate,0x7,4096,(nil)\n", p);
  cr_assert(eq(int, fclose(p), 0));
  rp_load_opts_t o = {.name = "late", .err = stderr, .stop_on_error = true};
  rp_trace_t t;
  cr_assert(eq(int, rp_load_file(path, &o, &t), 0));
  cr_assert(eq(ptr, t.path, NULL), "held");
  cr_assert(t.reordered);
  cr_assert(eq(sz, t.n, 2 * (size_t)n + 1));
  cr_assert(eq(u32, t.line[0], 2 * (uint32_t)n + 1), "the late line goes first");
  cr_assert(eq(u64, t.ev[0].size, 4096));
  rp_trace_free(&t);
}

Test(load_file, gzip_and_plain_give_the_same_trace) {
  const char *text = "Thread,Time,Action,Pointer,Size,Stream\n"
                     "9,0.1,allocate,0x100,4096,(nil)\n"
                     "9,0.2,sync_stream,(nil),0,(nil)\n"
                     "9,0.3,free,0x100,0,(nil)\n";
  char gz[96], plain[96];
  snprintf(gz, sizeof gz, "%s/t.csv.gz", tmpdir);
  snprintf(plain, sizeof plain, "%s/t.csv", tmpdir);
  gzFile f = gzopen(gz, "wb");
  cr_assert(not(eq(ptr, f, NULL)));
  cr_assert(eq(int, gzputs(f, text), (int)strlen(text)));
  cr_assert(eq(int, gzclose(f), Z_OK));
  write_text(plain, text);
  rp_load_opts_t o = {.name = "x", .err = stderr};
  rp_trace_t a, b;
  cr_assert(eq(int, rp_load_file(gz, &o, &a), 0));
  cr_assert(eq(int, rp_load_file(plain, &o, &b), 0));
  cr_assert(eq(sz, a.n, 3));
  events_t ea = all_events(&a), eb = all_events(&b);
  same_events(&ea, &eb);
  cr_assert(eq(sz, a.syncs, 1));
  free_events(&ea);
  free_events(&eb);
  rp_trace_free(&a);
  rp_trace_free(&b);
}

Test(load_file, truncated_gzip_keeps_the_lines_before) {
  char gz[96];
  snprintf(gz, sizeof gz, "%s/cut.csv.gz", tmpdir);
  gzFile f = gzopen(gz, "wb");
  for (int i = 0; i < 2000; i++) gzprintf(f, "1,%d.0,allocate,0x%x,512,(nil)\n", i, 0x1000 + i * 0x1000);
  gzclose(f);
  FILE *p = fopen(gz, "r+");
  fseek(p, 0, SEEK_END);
  long size = ftell(p);
  fclose(p);
  cr_assert(eq(int, truncate(gz, size / 2), 0));
  char *msgs = NULL;
  size_t len = 0;
  FILE *err = open_memstream(&msgs, &len);
  rp_load_opts_t o = {.name = "cut", .err = err};
  rp_trace_t t;
  cr_assert(eq(int, rp_load_file(gz, &o, &t), 0));
  fclose(err);
  cr_assert(gt(sz, t.n, 100));
  cr_assert(lt(sz, t.n, 2000));
  cr_assert(not(eq(ptr, strstr(msgs, "bad gzip data"), NULL)), "%s", msgs);
  rp_trace_free(&t);
  free(msgs);
}

Test(load_file, missing_file_and_long_line) {
  char path[96];
  snprintf(path, sizeof path, "%s/none.csv", tmpdir);
  rp_load_opts_t o = {.name = path, .err = NULL};
  rp_trace_t t;
  cr_assert(eq(int, rp_load_file(path, &o, &t), ENOENT));

  snprintf(path, sizeof path, "%s/long.csv", tmpdir);
  FILE *p = fopen(path, "w");
  fputs("1,0,allocate,0x10,8,(nil)\n", p);
  for (int i = 0; i < 10000; i++) fputc('x', p);
  fputs("\n1,1,free,0x10,0,(nil)\n", p);
  fclose(p);
  char *msgs = NULL;
  size_t len = 0;
  FILE *err = open_memstream(&msgs, &len);
  o = (rp_load_opts_t){.name = "long", .err = err};
  cr_assert(eq(int, rp_load_file(path, &o, &t), 0));
  fclose(err);
  cr_assert(eq(str, msgs, "long:2: line longer than 4096 bytes\n"));
  cr_assert(eq(sz, t.n, 2));
  events_t e = all_events(&t);
  cr_assert(eq(u32, e.line[1], 3));
  free_events(&e);
  rp_trace_free(&t);
  free(msgs);
}
