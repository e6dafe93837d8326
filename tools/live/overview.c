/* overview.c: the per-device table of every process (see overview.h).
 *
 * A device is known by its key (common/live_layout.h, layout 4): the
 * process wrote it when it made its pool there. A pool without a key (a
 * segment made again after a failed exec, before the key was noted) is
 * shown under "dev" and the process's own device number, as the shim names
 * a device without a UUID. Devices are in the order of their keys, rows in
 * the order of the pids: the same processes always print alike. */
#include "overview.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "budget_read.h"
#include "parse.h"

#define MAX_KEYS 256
#define MAX_BUDGETS 16
#define COMMAND_SHOWN 60 /* bytes of the command shown, before escaping */

void lv_escape(const char *in, char *out, size_t cap) {
  size_t n = 0;
  for (const unsigned char *c = (const unsigned char *)in; *c && n + 5 <= cap; c++) {
    if (*c == '\\')
      n += (size_t)snprintf(out + n, cap - n, "\\\\");
    else if (*c >= 0x20 && *c < 0x7f)
      out[n++] = (char)*c;
    else
      n += (size_t)snprintf(out + n, cap - n, "\\x%02x", *c);
  }
  out[n] = '\0';
}

/* The key of the pool devices[i] of s, into key. */
static void key_of(const lr_snapshot_t *s, int i, char *key, size_t cap) {
  int d = s->devices[i].device;
  if (d >= 0 && d < CP_LIVE_DEVICES && s->coop[d].key[0])
    snprintf(key, cap, "%s", s->coop[d].key);
  else
    snprintf(key, cap, "dev%d", d);
}

static const char *size(uint64_t bytes, char *buf, size_t cap) {
  cp_format_size_human(bytes, buf, cap);
  return buf;
}

static void print_budgets(FILE *out, const char *key, const char *group) {
  static lb_budget_t b[MAX_BUDGETS];
  size_t n = lb_read(key, group, b, MAX_BUDGETS);
  for (size_t i = 0; i < n; i++) {
    char limit[32], total[32], name[4 * CP_BUDGET_GROUP_MAX + 1];
    lv_escape(b[i].group, name, sizeof name);
    fprintf(out, "  shared budget%s%s: limit %s, claimed %s by %u process%s", name[0] ? " of group " : "", name,
            size(b[i].limit, limit, sizeof limit), size(b[i].total, total, sizeof total), b[i].processes,
            b[i].processes == 1 ? "" : "es");
    char dying[32];
    if (b[i].dying)
      fprintf(out, " (%s of it %u exited processes' memory the driver has not freed yet)",
              size(b[i].dying_bytes, dying, sizeof dying), b[i].dying);
    if (b[i].taken_gone || b[i].taken_grace || b[i].taken_cap)
      fprintf(out, "; exited processes' shares taken back: %llu freed by the driver, %llu after the grace, %llu "
              "after its cap", (unsigned long long)b[i].taken_gone, (unsigned long long)b[i].taken_grace,
              (unsigned long long)b[i].taken_cap);
    fputc('\n', out);
  }
}

static void print_row(FILE *out, long pid, const lr_snapshot_t *s, int i) {
  const cudapool_stats_t *st = &s->devices[i];
  int d = st->device;
  static const lr_coop_t none;
  const lr_coop_t *c = d >= 0 && d < CP_LIVE_DEVICES ? &s->coop[d] : &none;
  char a[32], r[32], ca[32], rel[32], got[32], gave[32];
  char cut[COMMAND_SHOWN + 1], command[4 * COMMAND_SHOWN + 1];
  size_t len = strnlen(s->command, COMMAND_SHOWN);
  memcpy(cut, s->command, len);
  cut[len] = '\0';
  lv_escape(cut, command, sizeof command);
  fprintf(out, "  %7ld %4d %11s %11s %11s %11s %6" PRIu64 " %11s %6" PRIu64 " %6" PRIu64 " %7" PRIu64 " %11s  %s%s\n",
          pid, d, size((uint64_t)st->allocated_bytes.current, a, sizeof a),
          size((uint64_t)st->reserved_bytes.current, r, sizeof r), size((uint64_t)st->cached_bytes.current, ca, sizeof ca),
          size(s->releasable[i], rel, sizeof rel), c->asks, size(c->got, got, sizeof got), c->asked, c->rounds,
          c->limited, size(c->given, gave, sizeof gave), command, s->answered ? "" : " (not answering)");
}

static int by_key(const void *a, const void *b) { return strcmp(a, b); }

static const long *sort_pids;
static int by_pid(const void *a, const void *b) {
  long x = sort_pids[*(const size_t *)a], y = sort_pids[*(const size_t *)b];
  return (x > y) - (x < y);
}

void lv_print_overview(FILE *out, const long *pids, const lr_snapshot_t *snaps, size_t n, const char *group) {
  static char keys[MAX_KEYS][CP_LIVE_KEY_MAX];
  size_t *order = malloc((n ? n : 1) * sizeof *order);
  if (!order) return;
  for (size_t p = 0; p < n; p++) order[p] = p;
  sort_pids = pids;
  qsort(order, n, sizeof *order, by_pid);
  size_t nkeys = 0;
  for (size_t p = 0; p < n; p++) {
    for (int i = 0; i < snaps[p].ndevices; i++) {
      char key[CP_LIVE_KEY_MAX];
      key_of(&snaps[p], i, key, sizeof key);
      size_t k = 0;
      while (k < nkeys && strcmp(keys[k], key) != 0) k++;
      if (k == nkeys && nkeys < MAX_KEYS) memcpy(keys[nkeys++], key, sizeof key);
    }
  }
  qsort(keys, nkeys, sizeof keys[0], by_key);
  for (size_t k = 0; k < nkeys; k++) {
    unsigned procs = 0;
    for (size_t p = 0; p < n; p++) {
      for (int i = 0; i < snaps[p].ndevices; i++) {
        char key[CP_LIVE_KEY_MAX];
        key_of(&snaps[p], i, key, sizeof key);
        procs += strcmp(key, keys[k]) == 0;
      }
    }
    char shown[4 * CP_LIVE_KEY_MAX + 1];
    lv_escape(keys[k], shown, sizeof shown);
    fprintf(out, "%sdevice %s: %u process%s\n", k ? "\n" : "", shown, procs, procs == 1 ? "" : "es");
    print_budgets(out, keys[k], group);
    fprintf(out, "  %7s %4s %11s %11s %11s %11s %6s %11s %6s %6s %7s %11s  %s\n", "PID", "DEV", "ALLOCATED",
            "RESERVED", "CACHED", "RELEASABLE", "ASKS", "GOT", "ASKED", "ROUNDS", "LIMITED", "GAVE", "COMMAND");
    for (size_t q = 0; q < n; q++) {
      size_t p = order[q];
      for (int i = 0; i < snaps[p].ndevices; i++) {
        char key[CP_LIVE_KEY_MAX];
        key_of(&snaps[p], i, key, sizeof key);
        if (strcmp(key, keys[k]) == 0) print_row(out, pids[p], &snaps[p], i);
      }
    }
  }
  free(order);
}
