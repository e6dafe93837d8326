/* threads.h: the threads cudapool starts inside the host program (the
 * SIGTERM reporter, the live stats publisher, the trace writer, the
 * reclaimer). Each is
 * named, detached unless its starter will join it, and
 * starts with every signal blocked, so that no signal meant for the program
 * is ever delivered to it; a fork() waits until each has started
 * (threads.c says why). */
#ifndef CUDAPOOL_SHIM_THREADS_H
#define CUDAPOOL_SHIM_THREADS_H

#include <pthread.h>

/* Runs fn(arg) on a new thread called name (a string that outlives the
 * call). joinable NULL: detached; else the thread is joinable and its id is
 * stored there. 0, or pthread_create's error, or EAGAIN when more than a
 * handful of threads are starting at once (then no thread). */
int cp_thread_start(void *(*fn)(void *), void *arg, const char *name, pthread_t *joinable);

#endif
