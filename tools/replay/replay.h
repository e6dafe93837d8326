/* replay.h: cudapool-replay, the trace replayer, internal interfaces.
 *
 * Three stages, one file each:
 *   parse.c  one CSV line -> rp_line_t (pure: no allocation, no I/O; fuzzed)
 *   load.c   a trace (file, .gz or memory) -> rp_trace_t: lines parsed,
 *            put in time order, trace pointers resolved to dense slot numbers
 *            so that the replay loop does no hashing; a file is streamed
 *            (each run reads it again through an rp_cursor_t), not held
 *   run.c    rp_trace_t + options -> rp_result_t by driving the real core
 *            (core/pool.h) on the simulated device (core/testing/sim_backend.h)
 * report.c prints results (text, JSON, the --compare table) and main.c is the
 * command line.
 *
 * Invariants of a loaded trace: every RP_OP_FREE names a slot that an earlier
 * RP_OP_ALLOC filled and no other free names; slots are < nslots; events are
 * in the order the program made them. */
#ifndef CUDAPOOL_REPLAY_H
#define CUDAPOOL_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pool.h"

/* ---- parse.c ---------------------------------------------------------- */

/* Longest line the parser accepts (a valid line is under 120 bytes). */
#define RP_MAX_LINE 4096

enum rp_kind {
  RP_LINE_BLANK,      /* empty, comment, or nothing to replay (cudaFree(NULL)) */
  RP_LINE_HEADER,     /* Thread,Time,Action,Pointer,Size,Stream */
  RP_LINE_EXTRA,      /* an action replay skips (segment_alloc, barrier, ...) */
  RP_LINE_ALLOC,      /* allocate */
  RP_LINE_FREE,       /* free / deallocate */
  RP_LINE_ALLOC_FAIL, /* allocate failure: the recorded run failed here */
  RP_LINE_SYNC_STREAM,
  RP_LINE_SYNC_DEVICE,
  RP_LINE_EMPTY_CACHE,
  RP_LINE_ZERO_ALLOC, /* allocate of 0 bytes returning NULL: cudaMalloc(&p, 0) */
  /* cudapool's decision events (common/trace.h) */
  RP_LINE_STREAM_CREATE, /* Size 1: non-blocking */
  RP_LINE_STREAM_DESTROY,
  RP_LINE_CAPTURE_BEGIN, /* Size 1: relaxed */
  RP_LINE_CAPTURE_END,
  RP_LINE_PER_THREAD_STREAM,
  RP_LINE_ORDER, /* Size: the learned order's new mode (0 EMPTY, 1 SOLE, 2 MIXED) */
  RP_LINE_SEGMENT_ALLOC, /* Pointer, Size: where the live pool's segment was */
};

typedef struct rp_line {
  enum rp_kind kind;
  bool clock_time; /* Time was HH:MM:SS.us (RMM), not seconds */
  uint64_t thread;
  double time; /* seconds */
  uint64_t ptr;
  uint64_t size;
  uint64_t stream;
} rp_line_t;

/* Parse one line (len bytes, without its newline; need not be
 * NUL-terminated). 0 and *out filled, or -1 and a message (no line number)
 * in err. */
int rp_parse_line(const char *s, size_t len, rp_line_t *out, char *err, size_t errlen);

/* ---- load.c ----------------------------------------------------------- */

enum rp_op {
  RP_OP_ALLOC,
  RP_OP_FREE,
  RP_OP_SYNC_STREAM,
  RP_OP_SYNC_DEVICE,
  RP_OP_EMPTY_CACHE,
  RP_OP_STREAM_CREATE, /* size: 1 non-blocking */
  RP_OP_STREAM_DESTROY,
  RP_OP_CAPTURE_BEGIN, /* size: 1 relaxed */
  RP_OP_CAPTURE_END,
  RP_OP_PER_THREAD_STREAM,
  RP_OP_ORDER, /* size: the learned order's new mode */
};

typedef struct rp_event {
  uint64_t size;   /* RP_OP_ALLOC: bytes requested */
  uint64_t stream; /* stream of the alloc or sync */
  uint64_t key;    /* thread of the call + 1 (never 0) */
  uint32_t slot;   /* RP_OP_ALLOC/FREE: the block's slot */
  uint8_t op;      /* enum rp_op */
} rp_event_t;

typedef struct rp_trace {
  /* The events: held here (ev, line, time; rp_load_mem, or a file too far
   * out of time order to stream), or, when path is set, read again from
   * the file by each rp_cursor_t. Read them through a cursor either way. */
  char *path;
  rp_event_t *ev;
  uint32_t *line; /* line of each event in the input */
  double *time;   /* seconds of each event */
  size_t n, cap;
  uint32_t nslots; /* slots are recycled: the most blocks live at once */
  /* what the input held */
  size_t lines, allocs, frees, syncs, alloc_failures, skipped, zero_allocs, errors;
  size_t decisions; /* stream, capture and per-thread-stream events */
  size_t unknown_frees; /* frees of pointers no earlier line allocated (counted in errors too) */
  /* The live pool's segments, in order (segment_alloc): the simulated device
   * hands out the same addresses while the replay follows the live run. */
  uintptr_t *segment_addr;
  size_t *segment_size;
  size_t nsegments, capsegments;
  uint64_t peak_live; /* most bytes live at once, exact request sizes */
  bool reordered;     /* lines were not in time order and were sorted */
} rp_trace_t;

typedef struct rp_load_opts {
  const char *name;      /* prefix of messages ("trace.csv:12: ...") */
  FILE *err;             /* where messages go (NULL: nowhere) */
  bool stop_on_error;    /* stop at the first bad line */
  unsigned max_messages; /* print at most this many (0 = no limit) */
} rp_load_opts_t;

/* 0: loaded (bad lines skipped and counted in t->errors); 2: a bad line with
 * stop_on_error (t->errors > 0: the counts stay after a failure); an errno
 * when the file cannot be read or memory runs out (message written; ENOENT
 * is 2 as well, with t->errors 0). rp_load_file reads the whole file once
 * for the counts and messages and keeps its name for the cursors; only a
 * file whose lines are out of time order by more than the loader's window
 * (load.c) is held in memory. rp_load_mem holds the events. */
int rp_load_file(const char *path, const rp_load_opts_t *o, rp_trace_t *t);
int rp_load_mem(const char *buf, size_t len, const rp_load_opts_t *o, rp_trace_t *t);
void rp_trace_free(rp_trace_t *t);

/* The events of a loaded trace, in order, a batch at a time: after
 * rp_cursor_next returns n > 0, ev[0..n), line[0..n) and time[0..n) are the
 * next n events (valid until the next call). */
typedef struct rp_cursor {
  const rp_event_t *ev;
  const uint32_t *line;
  const double *time;
  size_t n;
  const rp_trace_t *t;
  struct loader *loader; /* streamed: the file read again */
  rp_trace_t *counts;    /* the second reading's own counts (unused) */
  bool done;
} rp_cursor_t;
/* 0, or an errno (the file cannot be opened again, no memory). */
int rp_cursor_open(rp_cursor_t *c, const rp_trace_t *t);
size_t rp_cursor_next(rp_cursor_t *c); /* 0 at the end */
void rp_cursor_close(rp_cursor_t *c);

/* ---- model.c ---------------------------------------------------------- */

typedef struct rp_model_stream {
  uint64_t handle;
  bool nonblocking;
} rp_model_stream_t;

typedef struct rp_model_capture {
  uint64_t stream;
  bool relaxed;
} rp_model_capture_t;

typedef struct rp_model {
  rp_model_stream_t *streams;
  size_t nstreams, capstreams;
  unsigned nonblocking;
  bool per_thread;
  rp_model_capture_t *captures;
  size_t ncaptures, capcaptures;
  /* The learned order (shim/state/order.h), from its "order" events: on
   * from the first, its mode and window (a new one at each MIXED to SOLE or
   * EMPTY). */
  bool order_on;
  unsigned order_mode;
  uint64_t order_window;
} rp_model_t;

void rp_model_stream_create(rp_model_t *m, uint64_t handle, bool nonblocking);
void rp_model_stream_destroy(rp_model_t *m, uint64_t handle);
void rp_model_capture_begin(rp_model_t *m, uint64_t stream, bool relaxed);
void rp_model_capture_end(rp_model_t *m, uint64_t stream);
/* The shim's rules, as of the events so far. */
bool rp_model_keys_on(const rp_model_t *m);
unsigned rp_model_barrier_cost(const rp_model_t *m);
bool rp_model_barrier_allowed(const rp_model_t *m);
bool rp_model_legacy_sync_covers_device(const rp_model_t *m);
void rp_model_order(rp_model_t *m, unsigned mode);
/* The key the shim passed for a call of thread_key: the order's while it
 * reuses at once, else the thread's while keys are on (thread_key: the
 * option --key=thread), else 0. */
uint64_t rp_model_key(const rp_model_t *m, uint64_t thread_key, bool thread_keys);
void rp_model_free(rp_model_t *m);

/* ---- run.c ------------------------------------------------------------ */

enum rp_reuse {
  RP_REUSE_BARRIER,   /* a barrier makes freed blocks reusable (shim default) */
  RP_REUSE_SYNC,      /* only the trace's sync_stream/sync_device do */
  RP_REUSE_IMMEDIATE, /* a free is reusable at once */
};

typedef struct rp_opts {
  cp_config_t cfg; /* limit, max_split, ... (cfg.reuse set from reuse) */
  enum rp_reuse reuse;
  uint64_t device_memory; /* capacity of the simulated device */
  bool thread_key;        /* pass the thread as cp_alloc/cp_free key */
  bool assume_order;      /* --key=order: the learned order SOLE from the start */
  unsigned repeat;        /* timed runs; ns_per_op is the best */
  size_t page;            /* --expandable: the simulated device's page (2 MiB) */
  FILE *timeline;         /* per-event CSV (untimed run), or NULL */
} rp_opts_t;

typedef struct rp_oom {
  uint32_t line;
  double time;
  uint64_t size, reserved, allocated, cached, largest_free;
  double fragmentation; /* 1 - largest_free / cached (0 when nothing cached) */
} rp_oom_t;

typedef struct rp_result {
  uint64_t peak_allocated, peak_requested, peak_reserved;
  double utilization, hit_rate, ns_per_op;
  uint64_t ops, hits, misses, num_ooms, alloc_retries, skipped_frees;
  uint64_t device_allocs, device_frees, barriers, fences, fence_waits, backend_calls;
  uint64_t sync_points, immediate_reuse, free_errors;
  /* --expandable: what the simulated device mapped (pages and calls) */
  bool expandable;
  uint64_t pages_mapped, pages_unmapped, map_calls, unmap_calls;
  rp_oom_t *ooms; /* every OOM, in order */
  int check_rc;   /* cp_pool_check at the end: 0 = consistent */
  char check_why[160];
} rp_result_t;

void rp_opts_default(rp_opts_t *o);
/* 0, or an errno when the pool cannot be created (bad config). */
int rp_run(const rp_trace_t *t, const rp_opts_t *o, rp_result_t *r);
void rp_result_free(rp_result_t *r);
/* Smallest limit (a multiple of 2 MiB) at which the trace runs with no OOM,
 * by bisection; 0 when none up to the device memory does. */
uint64_t rp_find_limit(const rp_trace_t *t, const rp_opts_t *o, unsigned *runs);

/* ---- report.c --------------------------------------------------------- */

const char *rp_reuse_name(enum rp_reuse r);
void rp_print_text(FILE *f, const char *trace_name, const rp_trace_t *t, const rp_opts_t *o,
                   const rp_result_t *r);
/* One JSON object, no newline; find_limit printed when != UINT64_MAX. */
void rp_print_json(FILE *f, const char *trace_name, const rp_trace_t *t, const rp_opts_t *o,
                   const rp_result_t *r, uint64_t find_limit);
void rp_print_compare(FILE *f, const char *trace_name, const rp_trace_t *t, size_t n,
                      const char *const *labels, const rp_result_t *r);

#endif
