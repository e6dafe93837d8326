/* fuzz_trace_parse.c: libFuzzer target over the replayer's input path.
 *
 * Feeds the bytes to rp_parse_line as one line, then to rp_load_mem as a
 * whole trace (line splitting, header, time sort, pointer resolution, error
 * messages). Neither may crash, leak, overflow or hit undefined behaviour;
 * a loaded trace must keep its invariant: every free names a slot an earlier
 * allocate filled. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rp_line_t l;
  char err[160];
  if (rp_parse_line((const char *)data, size, &l, err, sizeof err) != 0 && strlen(err) == 0)
    abort(); /* an error must say something */

  rp_load_opts_t o = {.name = "fuzz", .err = NULL};
  rp_trace_t t;
  if (rp_load_mem((const char *)data, size, &o, &t) != 0) return 0;
  uint8_t *filled = calloc(t.nslots ? t.nslots : 1, 1);
  for (size_t i = 0; i < t.n && filled; i++) {
    const rp_event_t *e = &t.ev[i];
    /* A slot is taken by one live block at a time (slots are recycled). */
    if (e->op == RP_OP_ALLOC) {
      if (e->slot >= t.nslots || filled[e->slot]) abort();
      filled[e->slot] = 1;
    } else if (e->op == RP_OP_FREE) {
      if (e->slot >= t.nslots || filled[e->slot] != 1) abort();
      filled[e->slot] = 0;
    }
  }
  free(filled);
  rp_trace_free(&t);
  return 0;
}
