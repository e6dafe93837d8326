/* it_info.h: reading one "info:" line of a test program's output by its own
 * tag, for programs that print several: "info: TAG key=value ..." or
 * "info: TAG: key=value ...". */
#ifndef CUDAPOOL_IT_INFO_H
#define CUDAPOOL_IT_INFO_H

#include <stdlib.h>
#include <string.h>

#include "it_run.h"

/* The value of key in the info line tagged tag; missing if there is none. */
static inline long it_info_val(const it_result *r, const char *tag, const char *key, long missing) {
  size_t tl = strlen(tag), kl = strlen(key);
  for (const char *l = r->out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    if (strncmp(l, "info: ", 6) != 0 || strncmp(l + 6, tag, tl) != 0) continue;
    const char *rest = l + 6 + tl;
    if (*rest == ':') rest++;
    if (*rest != ' ') continue;
    const char *end = strchr(rest, '\n');
    for (const char *p = rest; p && (!end || p < end); p = strchr(p + 1, ' '))
      if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == '=') return strtol(p + 2 + kl, NULL, 10);
  }
  return missing;
}

#endif
