/* sigterm.h: the exit report and the trace of a process stopped with
 * SIGTERM, the signal Slurm, Kubernetes and most job runners stop a job
 * with. Its default action ends the process without running exit handlers,
 * so without this it leaves no report and loses the trace's last events.
 *
 * Rules (docs/OPTIONS.md, "Stopped by SIGTERM"):
 *   - armed at the shim's activation (layer.c, the first CUDA call), only
 *     when there is something to write (CUDAPOOL_STATS or CUDAPOOL_TRACE)
 *     or a live stats file to remove (live.h), and only when SIGTERM's
 *     disposition is still SIG_DFL: a program that
 *     handles or ignores SIGTERM keeps it as it is, and one that installs a
 *     handler later replaces cudapool's;
 *   - on SIGTERM the report is written and the trace closed as at exit, then
 *     SIGTERM is raised again with the default action: the process ends
 *     killed by SIGTERM, the status it has natively (a shell's 143);
 *   - the child of a fork() gets SIG_DFL back (it has no reporter thread,
 *     and reports nothing: outputs.h);
 *   - one report per process, whichever comes first: SIGTERM or exit. */
#ifndef CUDAPOOL_SHIM_SIGTERM_H
#define CUDAPOOL_SHIM_SIGTERM_H

#include <stdbool.h>

/* At activation, once the options are loaded: arm as above. */
void cp_sigterm_arm(void);
/* At exit, after the report (outputs.c): when a SIGTERM came in and its
 * report was being written when the program exited on its own, end the
 * process as that SIGTERM would have. Returns only when none came in. */
void cp_sigterm_after_exit_report(void);

#endif
