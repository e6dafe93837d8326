/* threads.h: the threads cudapool starts inside the host program (the
 * SIGTERM reporter, the live stats publisher). Each is detached, named, and
 * starts with every signal blocked, so that no signal meant for the program
 * is ever delivered to it; a fork() waits until each has started
 * (threads.c says why). */
#ifndef CUDAPOOL_SHIM_THREADS_H
#define CUDAPOOL_SHIM_THREADS_H

#include <pthread.h>

/* 0, or pthread_create's error (then no thread). */
int cp_thread_start(void *(*fn)(void *), const char *name);

#endif
