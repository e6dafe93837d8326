/* manpages.c: the man page of each installed tool (docs/cudapool-*.1)
 * against the tool's own --help, which is the truth: a flag that one names
 * and the other does not fails, either way. docs.c holds docs/cudapool.1 to
 * the launcher, the option table and the counters; here its OPTIONS section
 * is held to the launcher's --help the other way round as well.
 *
 * A flag is a word that starts with "-" and a letter ("-o") or with "--"
 * ("--max-split", up to "=", a blank or punctuation), not glued to a word
 * before it (so "apt-get" is none). In roff source "\-" reads as "-" and
 * font changes ("\fB") as nothing. Runs from the repository root (make
 * test does), with the build folder in $CUDAPOOL_TEST_BUILD (else build/). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define TEXT_MAX (1 << 17)

typedef struct tool {
  const char *page; /* under docs/ */
  const char *name; /* the program, as NAME and --help call it */
  bool built;       /* in the build folder, else in scripts/ */
} tool_t;

/* One for each program mk/install.mk installs besides the launcher
 * (tests/unit/shim/install.c checks that each has its page installed). */
static const tool_t tools[] = {
    {"docs/cudapool-replay.1", "cudapool-replay", true},
    {"docs/cudapool-plot.1", "cudapool-plot", false},
    {"docs/cudapool-stats.1", "cudapool-stats", true},
    {"docs/cudapool-view.1", "cudapool-view", false},
    {"docs/cudapool-export.1", "cudapool-export", false},
};
#define N_TOOLS (sizeof tools / sizeof *tools)

/* What the test read: a malloc'd string (the caller frees it). */
static char *read_all(FILE *f, const char *what) {
  cr_assert(ne(ptr, f, NULL), "%s: cannot open (run from the repository root)", what);
  char *text = malloc(TEXT_MAX);
  cr_assert(ne(ptr, text, NULL));
  size_t n = fread(text, 1, TEXT_MAX - 1, f);
  cr_assert(lt(sz, n, (size_t)TEXT_MAX - 1), "%s is larger than this test reads", what);
  text[n] = '\0';
  return text;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  char *text = read_all(f, path);
  fclose(f);
  return text;
}

/* cmd's stdout; it must exit 0. */
static char *output_of(const char *cmd) {
  FILE *p = popen(cmd, "r");
  char *text = read_all(p, cmd);
  int st = pclose(p);
  cr_assert(eq(int, WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0), "%s", cmd);
  return text;
}

/* The page's roff source as a reader sees its words: "\-" is "-", font
 * changes (\fB, \fI, \fR, \fP) and comment lines (.\") are gone. */
static char *man_source(const char *page) {
  char *text = slurp(page), *w = text;
  for (const char *r = text; *r; r++) {
    if ((r == text || r[-1] == '\n') && strncmp(r, ".\\\"", 3) == 0) {
      const char *eol = strchr(r, '\n');
      if (eol == NULL) break;
      r = eol;
      continue;
    }
    if (r[0] == '\\' && r[1] == '-') {
      r++;
    } else if (r[0] == '\\' && r[1] == 'f' && r[2] != '\0') {
      r += 2;
      continue;
    }
    *w++ = *r;
  }
  *w = '\0';
  return text;
}

static char *help_of(const tool_t *t) {
  char cmd[4200];
  const char *build = getenv("CUDAPOOL_TEST_BUILD");
  if (t->built)
    snprintf(cmd, sizeof cmd, "'%s/%s' --help", build && *build ? build : "build", t->name);
  else
    snprintf(cmd, sizeof cmd, "scripts/%s --help", t->name);
  return output_of(cmd);
}

static bool flag_char(char c) { return isalnum((unsigned char)c) || c == '-'; }

/* Each distinct flag of text, one per line: a malloc'd "\n-o\n--limit\n". */
static char *flags_of(const char *text) {
  size_t cap = strlen(text) + 2, len = 1;
  char *list = calloc(cap + 1, 1);
  cr_assert(ne(ptr, list, NULL));
  list[0] = '\n';
  for (const char *p = text; *p; p++) {
    if (p[0] != '-' || (p != text && (flag_char(p[-1]) || p[-1] == '_' || p[-1] == '.' || p[-1] == '/')))
      continue;
    size_t n = 0;
    if (isalpha((unsigned char)p[1]) && !flag_char(p[2]) && p[2] != '_')
      n = 2;
    else if (p[1] == '-' && islower((unsigned char)p[2]))
      for (n = 2; flag_char(p[n]);) n++;
    while (n > 2 && p[n - 1] == '-') n--; /* "--foo-" is not a flag: "--foo" */
    if (n == 0) continue;
    char item[80];
    int k = snprintf(item, sizeof item, "\n%.*s\n", (int)n, p);
    if (k < (int)sizeof item && strstr(list, item) == NULL) {
      memcpy(list + len, item + 1, (size_t)k - 1);
      len += (size_t)k - 1;
    }
    p += n - 1;
  }
  return list;
}

/* Every flag of `have` is in `want`; each one missing is reported. */
static void each_flag_in(const char *have, const char *have_what, const char *want, const char *want_what) {
  char *copy = strdup(have), *save = NULL;
  cr_assert(ne(ptr, copy, NULL));
  for (char *flag = strtok_r(copy, "\n", &save); flag != NULL; flag = strtok_r(NULL, "\n", &save)) {
    char item[80];
    snprintf(item, sizeof item, "\n%s\n", flag);
    cr_expect(ne(ptr, strstr(want, item), NULL), "%s names %s, %s does not", have_what, flag, want_what);
  }
  free(copy);
}

/* ---- the scanner itself ----------------------------------------------------- */

Test(manpages, flags_are_words_that_start_with_a_dash) {
  char *got = flags_of("-o OUT [--title TEXT] --reuse=sync, apt-get -m torch --expandable[=0|1] "
                       "(-h) x-y --max-split 21M --timeline-- ---- 1-2 _-z a.-b");
  cr_assert(eq(str, got, "\n-o\n--title\n--reuse\n-m\n--expandable\n-h\n--max-split\n--timeline\n"));
  free(got);
}

Test(manpages, roff_dashes_and_fonts_read_as_the_reader_sees_them) {
  char path[] = "/tmp/cudapool-manpages-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(ge(int, fd, 0));
  FILE *f = fdopen(fd, "w");
  fputs(".\\\" a comment: --help\n.BR \\-o \", \" \\fB\\-\\-output\\fR=\\fIFILE\\fP\n", f);
  fclose(f);
  char *text = man_source(path);
  remove(path);
  cr_assert(eq(str, text, ".BR -o \", \" --output=FILE\n"));
  char *flags = flags_of(text);
  cr_assert(eq(str, flags, "\n-o\n--output\n"));
  free(flags);
  free(text);
}

/* ---- each tool's page and --help -------------------------------------------- */

Test(manpages, each_page_names_every_flag_of_its_tools_help) {
  for (size_t i = 0; i < N_TOOLS; i++) {
    char *help = help_of(&tools[i]), *man = man_source(tools[i].page);
    char *help_flags = flags_of(help), *man_flags = flags_of(man);
    cr_expect(ne(ptr, strstr(help_flags, "\n--"), NULL), "%s --help names no flag:\n%s", tools[i].name, help);
    char what[96];
    snprintf(what, sizeof what, "%s --help", tools[i].name);
    each_flag_in(help_flags, what, man_flags, tools[i].page);
    free(help_flags);
    free(man_flags);
    free(help);
    free(man);
  }
}

Test(manpages, each_page_names_only_flags_of_its_tools_help) {
  for (size_t i = 0; i < N_TOOLS; i++) {
    char *help = help_of(&tools[i]), *man = man_source(tools[i].page);
    char *help_flags = flags_of(help), *man_flags = flags_of(man);
    char what[96];
    snprintf(what, sizeof what, "%s --help", tools[i].name);
    each_flag_in(man_flags, tools[i].page, help_flags, what);
    free(help_flags);
    free(man_flags);
    free(help);
    free(man);
  }
}

/* NAME says which program the page is for: what man -k and whatis list. */
Test(manpages, each_page_is_named_for_its_tool) {
  for (size_t i = 0; i < N_TOOLS; i++) {
    char *man = man_source(tools[i].page), want[96];
    snprintf(want, sizeof want, "\n.SH NAME\n%s - ", tools[i].name);
    cr_expect(ne(ptr, strstr(man, want), NULL), "%s: no \"%s\" line after .SH NAME", tools[i].page,
              tools[i].name);
    free(man);
  }
}

Test(manpages, each_page_renders_without_a_warning) {
  if (system("command -v groff >/dev/null 2>&1") != 0) cr_skip("groff not installed: the pages were not rendered");
  for (size_t i = 0; i < N_TOOLS; i++) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "groff -man -Tutf8 -ww -z %s 2>&1", tools[i].page);
    char *out = output_of(cmd);
    cr_expect(eq(str, out, ""), "%s", tools[i].page);
    free(out);
  }
}

/* docs.c requires an OPTIONS entry for each flag of the launcher's --help;
 * this is the other way: no entry for a flag the launcher does not take. */
Test(manpages, the_launcher_page_options_are_flags_of_its_help) {
  char *man = man_source("docs/cudapool.1"), *help = output_of("scripts/cudapool --help");
  char *options = strstr(man, "\n.SH OPTIONS\n"), *end = options ? strstr(options, "\n.SH SUBCOMMANDS\n") : NULL;
  cr_assert(end != NULL, "docs/cudapool.1: no OPTIONS section before SUBCOMMANDS");
  *end = '\0';
  /* The tags only: a paragraph's text may name a subcommand's flag. */
  size_t cap = strlen(options) + 1, len = 0;
  char *tags = calloc(cap, 1);
  cr_assert(ne(ptr, tags, NULL));
  for (const char *p = strstr(options, "\n.TP\n"); p != NULL; p = strstr(p + 1, "\n.TP\n")) {
    const char *tag = p + 5, *eol = strchr(tag, '\n');
    size_t n = eol ? (size_t)(eol - tag) + 1 : strlen(tag);
    memcpy(tags + len, tag, n);
    len += n;
  }
  char *man_flags = flags_of(tags), *help_flags = flags_of(help);
  cr_assert(ne(ptr, strstr(man_flags, "\n--limit\n"), NULL), "no OPTIONS tags found:\n%s", tags);
  each_flag_in(man_flags, "docs/cudapool.1 OPTIONS", help_flags, "scripts/cudapool --help");
  free(man_flags);
  free(help_flags);
  free(tags);
  free(help);
  free(man);
}
