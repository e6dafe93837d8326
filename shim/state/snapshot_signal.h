/* snapshot_signal.h: CUDAPOOL_SNAPSHOT_SIGNAL, a snapshot from a running
 * process. The handler only posts a semaphore (async-signal-safe); a thread
 * of cudapool's (cudapool-snap), started when the signal is armed, waits on
 * it and writes the snapshot (snapshot.h) from there: a safe point, holding
 * no lock of the program's or of the pool's. Armed only when the signal's
 * action is the default one (a program that handles it keeps it) and
 * CUDAPOOL_OOM_SNAPSHOT names the file; signals arriving while one is being
 * written are counted, and each gets a snapshot of its own. */
#ifndef CUDAPOOL_SHIM_SNAPSHOT_SIGNAL_H
#define CUDAPOOL_SHIM_SNAPSHOT_SIGNAL_H

/* At start (init.c), after the options are loaded; once. */
void cp_snapshot_signal_arm(void);

#endif
