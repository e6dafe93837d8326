/* driver_work.c: shim/entry/driver_work.h and the generated table of driver
 * names (backend/driver_names.c) against the cuda.h they were made from.
 * Every function cuda.h declares (preprocessed with
 * __CUDA_API_VERSION_INTERNAL, so each variant under its own name) that
 * takes a CUstream, launches, copies or sets memory must be in CP_DRV_WORK
 * (with the kind its suffix says), CP_DRV_WORK_BY_HAND or CP_DRV_NO_WORK: a
 * CUDA that adds one fails here until it is sorted. Every listed name is
 * declared; CP_DRV_WORK is sorted (the dlsym router searches it); the name
 * table holds every declared function's base name, sorted. Skipped without
 * the header or a C compiler to preprocess it. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry/driver_work.h"

typedef struct {
  const char *name, *kind;
} entry_t;

static const entry_t work[] = {
#define CP_DW_ENTRY(name, kind, params, args, stream) {#name, #kind},
    CP_DRV_WORK(CP_DW_ENTRY)
#undef CP_DW_ENTRY
};
static const char *const by_hand[] = {
#define CP_DW_NAME(name) #name,
    CP_DRV_WORK_BY_HAND(CP_DW_NAME)
};
static const char *const no_work[] = {CP_DRV_NO_WORK(CP_DW_NAME)
#undef CP_DW_NAME
};
static const char *const table[] = {
#include "cuda_names.h"
};

#define N(a) (sizeof a / sizeof *a)

/* cuda.h as the compiler sees it with every variant declared. */
static char *preprocessed(void) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "printf '#include <cuda.h>\\n' | ${CC:-cc} -E -P -D__CUDA_API_VERSION_INTERNAL=1 -I'%s/include' -x c - "
           "2>/dev/null",
           CP_CUDA_HOME);
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  size_t cap = 1 << 20, len = 0;
  char *text = malloc(cap);
  cr_assert(ne(ptr, text, NULL));
  for (size_t got; (got = fread(text + len, 1, cap - len - 1, p)) > 0;) {
    len += got;
    if (cap - len < 4096) {
      cap *= 2;
      text = realloc(text, cap);
      cr_assert(ne(ptr, text, NULL));
    }
  }
  text[len] = '\0';
  int status = pclose(p);
  if (status != 0 || len == 0) {
    free(text);
    return NULL;
  }
  return text;
}

typedef struct {
  char name[96];
  char params[1024];
} decl_t;

static decl_t decls[1024];
static size_t n_decls;

static void read_header(void) {
  FILE *h = fopen(CP_CUDA_HOME "/include/cuda.h", "r");
  if (!h) cr_skip_test("no %s/include/cuda.h", CP_CUDA_HOME);
  fclose(h);
  char *text = preprocessed();
  if (!text) cr_skip_test("cannot preprocess cuda.h (no C compiler?)");
  regex_t re;
  cr_assert(eq(int, regcomp(&re, "CUresult[ \t\n]+(cu[A-Za-z0-9_]+)[ \t\n]*\\(([^;{]*)\\)[ \t\n]*;", REG_EXTENDED), 0));
  regmatch_t m[3];
  n_decls = 0;
  for (const char *p = text; regexec(&re, p, 3, m, 0) == 0; p += m[0].rm_eo) {
    cr_assert(lt(sz, n_decls, N(decls)));
    decl_t *d = &decls[n_decls++];
    snprintf(d->name, sizeof d->name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), p + m[1].rm_so);
    snprintf(d->params, sizeof d->params, "%.*s", (int)(m[2].rm_eo - m[2].rm_so), p + m[2].rm_so);
  }
  regfree(&re);
  free(text);
  cr_assert(gt(sz, n_decls, 500), "the header's declarations were not found (%zu)", n_decls);
}

static bool in(const char *const *list, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i], name) == 0) return true;
  return false;
}

static const entry_t *in_work(const char *name) {
  for (size_t i = 0; i < N(work); i++)
    if (strcmp(work[i].name, name) == 0) return &work[i];
  return NULL;
}

static bool takes_stream(const char *params) {
  for (const char *p = strstr(params, "CUstream"); p; p = strstr(p + 1, "CUstream")) {
    char before = p == params ? ' ' : p[-1], after = p[8];
    bool word = !(before == '_' || (before >= 'A' && before <= 'Z') || (before >= 'a' && before <= 'z') ||
                  (before >= '0' && before <= '9'));
    bool end = !(after == '_' || (after >= 'A' && after <= 'Z') || (after >= 'a' && after <= 'z') ||
                 (after >= '0' && after <= '9'));
    if (word && end) return true;
  }
  return false;
}

static bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static const char *kind_of(const char *name) {
  size_t n = strlen(name);
  if (n > 5 && strcmp(name + n - 5, "_ptsz") == 0) return "PTSZ";
  if (n > 5 && strcmp(name + n - 5, "_ptds") == 0) return "PTDS";
  return "PLAIN";
}

Test(driver_work, every_stream_launch_copy_and_memset_of_the_header_is_sorted) {
  read_header();
  int seen = 0;
  for (size_t i = 0; i < n_decls; i++) {
    const decl_t *d = &decls[i];
    if (!(takes_stream(d->params) || starts(d->name, "cuLaunch") || starts(d->name, "cuMemcpy") ||
          starts(d->name, "cuMemset")))
      continue;
    seen++;
    const entry_t *w = in_work(d->name);
    int lists = (w != NULL) + in(by_hand, N(by_hand), d->name) + in(no_work, N(no_work), d->name);
    cr_assert(eq(int, lists, 1),
              "%s(%s) is in %d of CP_DRV_WORK, CP_DRV_WORK_BY_HAND and CP_DRV_NO_WORK "
              "(shim/entry/driver_work.h): it must be in one",
              d->name, d->params, lists);
    if (w) cr_assert(eq(str, (char *)w->kind, (char *)kind_of(d->name)), "%s", d->name);
  }
  cr_assert(gt(int, seen, 200), "the header's stream entry points were not found (%d)", seen);
}

Test(driver_work, every_listed_name_is_declared) {
  read_header();
  const char *const *lists[] = {by_hand, no_work};
  size_t sizes[] = {N(by_hand), N(no_work)};
  for (size_t i = 0; i < N(work); i++) {
    bool found = false;
    for (size_t j = 0; j < n_decls && !found; j++) found = strcmp(decls[j].name, work[i].name) == 0;
    cr_assert(found, "%s is listed but cuda.h does not declare it", work[i].name);
  }
  for (size_t l = 0; l < N(lists); l++)
    for (size_t i = 0; i < sizes[l]; i++) {
      bool found = false;
      for (size_t j = 0; j < n_decls && !found; j++) found = strcmp(decls[j].name, lists[l][i]) == 0;
      cr_assert(found, "%s is listed but cuda.h does not declare it", lists[l][i]);
    }
}

Test(driver_work, the_work_rows_are_sorted_for_the_router) {
  for (size_t i = 1; i < N(work); i++)
    cr_assert(lt(int, strcmp(work[i - 1].name, work[i].name), 0), "%s before %s", work[i - 1].name, work[i].name);
}

/* The base name cuGetProcAddress is asked for: no _vN, _ptsz or _ptds. */
static void base_of(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s", name);
  size_t n = strlen(out);
  if (n > 5 && (strcmp(out + n - 5, "_ptsz") == 0 || strcmp(out + n - 5, "_ptds") == 0)) out[n -= 5] = '\0';
  size_t d = n;
  while (d > 0 && out[d - 1] >= '0' && out[d - 1] <= '9') d--;
  if (d < n && d >= 2 && out[d - 1] == 'v' && out[d - 2] == '_') out[d - 2] = '\0';
}

Test(driver_work, the_name_table_holds_every_declared_base_name) {
  read_header();
  for (size_t i = 1; i < N(table); i++)
    cr_assert(lt(int, strcmp(table[i - 1], table[i]), 0), "%s before %s", table[i - 1], table[i]);
  for (size_t i = 0; i < n_decls; i++) {
    char base[96];
    base_of(decls[i].name, base, sizeof base);
    cr_assert(in(table, N(table), base), "%s (of %s) is not in the generated name table", base, decls[i].name);
  }
  for (size_t i = 0; i < N(table); i++) {
    char base[96];
    base_of(table[i], base, sizeof base);
    cr_assert(eq(str, base, (char *)table[i]), "the table holds %s, not a base name", table[i]);
  }
  cr_assert(in(table, N(table), "cuMemcpyHtoD"));
  cr_assert(in(table, N(table), "cuLaunchKernel"));
  cr_assert(not(in(table, N(table), "cuMemcpyHtoD_v2")));
}
