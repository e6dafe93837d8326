/* shared_file.h: the budget file of CUDAPOOL_SHARED_LIMIT found, checked
 * and mapped (common/budget_layout.h has the layout; shared_limit.c uses
 * it; docs/DESIGN.md, "A limit shared by processes", "Whom it trusts").
 *
 * Rules: a file is used only when it is a regular file of this user with
 * one link, exactly one budget file long (checked on the descriptor before
 * mapping), with the magic, layout, slot count, device key and group this
 * process expects. A file of this user that is not one (short, garbage) is
 * replaced, only while the name still holds the file judged; anything else
 * (another user's, a link, another layout) is refused. A new file is made
 * whole under a private name and then linked, so no one maps one half
 * made. Nothing here prints; no lock. */
#ifndef CUDAPOOL_SHIM_SHARED_FILE_H
#define CUDAPOOL_SHIM_SHARED_FILE_H

#include "budget_layout.h"

/* The budget file at path for device key (created when missing, replaced
 * when it is garbage of this user), mapped read-write; NULL with *why
 * saying what was wrong. */
cp_budget_file_t *cp_shared_map_file(const char *path, const char *key, const char **why);

#endif
