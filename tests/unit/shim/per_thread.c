/* per_thread.c: shim/entry/per_thread.h against the CUDA runtime header it was
 * written from. Every entry point cuda_runtime_api.h gives a per-thread
 * twin (`#define NAME __CUDART_API_PTSZ(NAME)` or `_PTDS`) must be in
 * CP_PT_WORK (wrapped: its per-thread work turns same-thread keys off) with
 * the same kind, or in CP_PT_NO_WORK: a CUDA that adds one fails here until
 * it is sorted. Skipped without the header. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry/per_thread.h"

typedef struct {
  const char *name, *kind;
} entry_t;

static const entry_t work[] = {
#define CP_PT_ENTRY(name, kind, params, args, stream) {#name, #kind},
    CP_PT_WORK(CP_PT_ENTRY)
#undef CP_PT_ENTRY
};
static const char *const no_work[] = {
#define CP_PT_NAME(name) #name,
    CP_PT_NO_WORK(CP_PT_NAME)
#undef CP_PT_NAME
};

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  cr_assert(ne(ptr, text, NULL));
  text[fread(text, 1, (size_t)n, f)] = '\0';
  fclose(f);
  return text;
}

Test(per_thread, every_per_thread_twin_of_the_header_is_sorted) {
  char *text = slurp(CP_CUDA_HOME "/include/cuda_runtime_api.h");
  if (!text) cr_skip_test("no %s/include/cuda_runtime_api.h", CP_CUDA_HOME);
  regex_t re;
  cr_assert(eq(int, regcomp(&re, "#define[ \t]+([A-Za-z0-9_]+)[ \t]+__CUDART_API_PT(SZ|DS)\\(", REG_EXTENDED), 0));
  regmatch_t m[3];
  int seen = 0;
  for (const char *p = text; regexec(&re, p, 3, m, 0) == 0; p += m[0].rm_eo) {
    char name[128], kind[8];
    snprintf(name, sizeof name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), p + m[1].rm_so);
    snprintf(kind, sizeof kind, "PT%.*s", (int)(m[2].rm_eo - m[2].rm_so), p + m[2].rm_so);
    seen++;
    const entry_t *w = NULL;
    for (size_t i = 0; i < sizeof work / sizeof *work; i++)
      if (strcmp(work[i].name, name) == 0) w = &work[i];
    bool quiet = false;
    for (size_t i = 0; i < sizeof no_work / sizeof *no_work; i++)
      if (strcmp(no_work[i], name) == 0) quiet = true;
    cr_assert(w || quiet, "%s (%s) is in neither CP_PT_WORK nor CP_PT_NO_WORK (shim/entry/per_thread.h)", name, kind);
    cr_assert(not(w && quiet), "%s is in both lists", name);
    if (w) cr_assert(eq(str, (char *)w->kind, kind), "%s", name);
  }
  regfree(&re);
  free(text);
  cr_assert(gt(int, seen, 60), "the header's twins were not found (%d)", seen);
}
