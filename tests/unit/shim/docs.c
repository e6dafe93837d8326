/* docs.c: the man page (docs/cudapool.1) and docs/USAGE.md against the code.
 *
 * The truth is the option table (common/options.c, through cp_option_name),
 * the launcher (scripts/cudapool: its --help for the flags, its die calls
 * for the exit statuses) and the counter lists of include/cudapool.h. The
 * man page must give every option, flag, counter and exit status an entry
 * of its own; both documents may name only variables and launcher flags
 * that exist. Runs from the repository root (make test does). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cudapool.h"
#include "options.h"

/* Variables read by the tools rather than the library: the launcher's
 * CUDAPOOL_LIB, cudapool-plot's CUDAPOOL_REPLAY, the Python module's
 * CUDAPOOL_LAUNCHER and CUDAPOOL_HEADER. */
static const char *const tool_variables[] = {"CUDAPOOL_LIB", "CUDAPOOL_REPLAY", "CUDAPOOL_LAUNCHER",
                                             "CUDAPOOL_HEADER", "CUDAPOOL_LIBRARY"};

#define TEXT_MAX (1 << 17)

/* The whole file into a malloc'd string (the caller frees it). */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert(ne(ptr, f, NULL), "%s: run from the repository root", path);
  char *text = malloc(TEXT_MAX);
  cr_assert(ne(ptr, text, NULL));
  size_t n = fread(text, 1, TEXT_MAX - 1, f);
  fclose(f);
  cr_assert(lt(sz, n, (size_t)TEXT_MAX - 1), "%s is larger than this test reads", path);
  text[n] = '\0';
  return text;
}

/* The man page as roff source, with every "\-" turned into "-": what a
 * reader sees of flags and names. */
static char *man_source(void) {
  char *text = slurp("docs/cudapool.1"), *w = text;
  for (const char *r = text; *r; r++) {
    if (r[0] == '\\' && r[1] == '-') r++;
    *w++ = *r;
  }
  *w = '\0';
  return text;
}

/* Run cmd under sh; its stdout into a malloc'd string. */
static char *output_of(const char *cmd) {
  FILE *p = popen(cmd, "r");
  cr_assert(ne(ptr, p, NULL));
  char *text = malloc(TEXT_MAX);
  cr_assert(ne(ptr, text, NULL));
  size_t n = fread(text, 1, TEXT_MAX - 1, p);
  text[n] = '\0';
  int st = pclose(p);
  cr_assert(eq(int, WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0), "%s", cmd);
  return text;
}

/* The text of group (0: the whole match) of each distinct match of pattern
 * (an extended regex) in text, one per line: a malloc'd "\nA\nB\n". */
static char *matches(const char *text, const char *pattern, int group) {
  regex_t re;
  cr_assert(eq(int, regcomp(&re, pattern, REG_EXTENDED), 0), "%s", pattern);
  size_t cap = strlen(text) + 2, len = 1;
  char *list = calloc(cap + 2, 1);
  cr_assert(ne(ptr, list, NULL));
  list[0] = '\n';
  regmatch_t m[4];
  cr_assert(lt(int, group, 4));
  for (const char *p = text; regexec(&re, p, 4, m, p == text ? 0 : REG_NOTBOL) == 0; p += m[0].rm_eo) {
    regmatch_t g = m[group];
    char item[128];
    int n = snprintf(item, sizeof item, "\n%.*s\n", (int)(g.rm_eo - g.rm_so), p + g.rm_so);
    if (strstr(list, item) == NULL && len + (size_t)n <= cap) {
      memcpy(list + len, item + 1, (size_t)n - 1);
      len += (size_t)n - 1;
      list[len] = '\0';
    }
    if (m[0].rm_eo == 0) break;
  }
  regfree(&re);
  return list;
}

/* The launcher's flags, from the Options part of its --help (the examples
 * after it pass flags to programs): "\n--limit\n--max-cached\n...". */
static char *launcher_flags(void) {
  char *help = output_of("scripts/cudapool --help");
  char *options = strstr(help, "\nOptions"), *end = options ? strstr(options, "\nEnvironment") : NULL;
  cr_assert(end != NULL, "no Options part before Environment in scripts/cudapool --help");
  *end = '\0';
  char *flags = matches(options, "(^|[ ,\\[])(-h|--[a-z][a-z-]*)", 2);
  free(help);
  cr_assert(ne(ptr, strstr(flags, "\n--limit\n"), NULL), "no flags found in --help:%s", flags);
  return flags;
}

static bool known_variable(const char *name) {
  for (size_t i = 0; i < cp_option_count(); i++)
    if (strcmp(name, cp_option_name(i)) == 0) return true;
  for (size_t i = 0; i < sizeof tool_variables / sizeof *tool_variables; i++)
    if (strcmp(name, tool_variables[i]) == 0) return true;
  return false;
}

/* Every CUDAPOOL_* name in text is an option or a tool's variable. */
static void only_known_variables(const char *what, const char *text) {
  char *names = matches(text, "CUDAPOOL_[A-Z][A-Z_]*[A-Z]", 0);
  for (char *name = strtok(names, "\n"); name != NULL; name = strtok(NULL, "\n"))
    cr_expect(known_variable(name), "%s names %s, which is no option of common/options.c nor a tool's", what,
              name);
  free(names);
}

/* ---- the man page ---------------------------------------------------------- */

/* An entry of its own: a ".B NAME" line (an environment variable, a
 * counter, an exit status). */
static void has_entry(const char *man, const char *name, const char *what) {
  char line[128];
  snprintf(line, sizeof line, "\n.B %s\n", name);
  cr_expect(ne(ptr, strstr(man, line), NULL), "docs/cudapool.1 has no entry (\".B %s\") for %s", name, what);
}

Test(manpage, an_entry_for_every_option_of_the_table) {
  char *man = man_source();
  for (size_t i = 0; i < cp_option_count(); i++)
    has_entry(man, cp_option_name(i), "an option of common/options.c");
  for (size_t i = 0; i < sizeof tool_variables / sizeof *tool_variables; i++)
    cr_expect(ne(ptr, strstr(man, tool_variables[i]), NULL), "docs/cudapool.1 lacks %s", tool_variables[i]);
  free(man);
}

Test(manpage, names_only_variables_that_exist) {
  char *man = man_source();
  only_known_variables("docs/cudapool.1", man);
  free(man);
}

/* Each flag of the launcher's --help starts a tagged paragraph in OPTIONS
 * (".TP", then a line naming it). */
Test(manpage, an_entry_for_every_launcher_flag) {
  char *man = man_source(), *flags = launcher_flags();
  const char *options = strstr(man, "\n.SH OPTIONS\n"), *end = strstr(man, "\n.SH SUBCOMMANDS\n");
  cr_assert(options != NULL && end != NULL, "no OPTIONS section before SUBCOMMANDS");
  for (char *flag = strtok(flags, "\n"); flag != NULL; flag = strtok(NULL, "\n")) {
    bool found = false;
    for (const char *p = strstr(options, "\n.TP\n"); p != NULL && p < end; p = strstr(p + 1, "\n.TP\n")) {
      const char *tag = p + 5, *eol = strchr(tag, '\n');
      size_t n = strlen(flag);
      for (const char *f = strstr(tag, flag); f != NULL && f < eol; f = strstr(f + 1, flag))
        if (f[n] != '-' && (f[n] < 'a' || f[n] > 'z') && (f == tag || f[-1] == ' ' || f[-1] == '"'))
          found = true;
    }
    cr_expect(found, "docs/cudapool.1 has no OPTIONS entry for %s (scripts/cudapool --help has it)", flag);
  }
  free(flags);
  free(man);
}

#define NAME_OF(name, desc) #name,
static const char *const counters[] = {CUDAPOOL_GAUGES(NAME_OF) CUDAPOOL_COUNTERS(NAME_OF)
                                           CUDAPOOL_SNAPSHOT(NAME_OF)};

Test(manpage, an_entry_for_every_counter_of_the_report) {
  char *man = man_source();
  for (size_t i = 0; i < sizeof counters / sizeof *counters; i++)
    has_entry(man, counters[i], "a counter of include/cudapool.h");
  cr_expect(ne(ptr, strstr(man, "utilization"), NULL), "docs/cudapool.1 lacks the JSON's utilization");
  free(man);
}

/* 2 (die's default) and every status the launcher's die calls give. */
Test(manpage, an_entry_for_every_exit_status_of_the_launcher) {
  char *man = man_source();
  char *launcher = slurp("scripts/cudapool");
  char *statuses = matches(launcher, "die \"[^\"]*\" ([0-9]+)\n", 1);
  const char *section = strstr(man, "\n.SH EXIT STATUS\n");
  cr_assert(ne(ptr, (void *)section, NULL));
  cr_assert(ne(ptr, strstr(statuses, "\n127\n"), NULL), "no die with a status in scripts/cudapool");
  has_entry(section, "2", "the launcher's usage errors");
  for (char *s = strtok(statuses, "\n"); s != NULL; s = strtok(NULL, "\n"))
    has_entry(section, s, "an exit status of scripts/cudapool");
  free(statuses);
  free(launcher);
  free(man);
}

/* groff is what man(1) renders with; -ww turns every warning on. */
Test(manpage, renders_without_a_warning) {
  if (system("command -v groff >/dev/null 2>&1") != 0)
    cr_skip("groff not installed: the man page was not rendered");
  char *out = output_of("groff -man -Tutf8 -ww -z docs/cudapool.1 2>&1");
  cr_assert(eq(str, out, ""));
  free(out);
}

/* ---- docs/USAGE.md --------------------------------------------------------- */

Test(usage_md, names_only_variables_that_exist) {
  char *usage = slurp("docs/USAGE.md");
  only_known_variables("docs/USAGE.md", usage);
  free(usage);
}

/* In every code block (and the man page's examples), the flags given to
 * the launcher ("cudapool ARGS -- PROGRAM") are its own. */
static void launcher_commands_use_real_flags(const char *what, const char *text, bool fenced_only) {
  char *flags = launcher_flags();
  bool in_code = !fenced_only;
  int commands = 0;
  for (const char *line = text; *line;) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
    if (fenced_only && strncmp(buf, "```", 3) == 0) in_code = !in_code;
    char *at = in_code ? strstr(buf, "cudapool ") : NULL;
    while (at != NULL && at != buf && at[-1] != ' ' && at[-1] != '/' && at[-1] != '\'')
      at = strstr(at + 1, "cudapool ");
    if (at != NULL && strncmp(at, "cudapool replay", 15) != 0 && strncmp(at, "cudapool plot", 13) != 0 &&
        strncmp(at, "cudapool view", 13) != 0 && strncmp(at, "cudapool export", 15) != 0 &&
        strstr(buf, "import") == NULL) {
      commands++;
      for (char *tok = strtok(at + 9, " \\"); tok != NULL && strcmp(tok, "--") != 0;
           tok = strtok(NULL, " \\")) {
        if (strncmp(tok, "--", 2) != 0 && strcmp(tok, "-h") != 0) continue;
        char flag[64], item[70];
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(tok, "=\""), tok);
        snprintf(item, sizeof item, "\n%s\n", flag);
        cr_expect(ne(ptr, strstr(flags, item), NULL), "%s: %s is no flag of scripts/cudapool:\n%s", what,
                  flag, buf);
      }
    }
    line += len + (eol ? 1 : 0);
  }
  cr_assert(gt(int, commands, 0), "%s: no launcher command found", what);
  free(flags);
}

Test(usage_md, launcher_commands_use_its_flags) {
  char *usage = slurp("docs/USAGE.md");
  launcher_commands_use_real_flags("docs/USAGE.md", usage, true);
  free(usage);
}

Test(manpage, examples_use_the_launcher_flags) {
  char *man = man_source();
  char *examples = strstr(man, "\n.SH EXAMPLES\n");
  cr_assert(ne(ptr, examples, NULL));
  launcher_commands_use_real_flags("docs/cudapool.1 EXAMPLES", examples, false);
  free(man);
}
