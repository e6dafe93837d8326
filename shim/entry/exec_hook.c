/* exec_hook.c: the exec family, interposed so that what cudapool recorded
 * survives the exec: before the new image replaces this one, the trace is
 * flushed and complete, the exit report written and the live-stats file
 * removed (outputs.h: cp_outputs_before_exec); the new image runs no
 * destructor, so nothing else would. If the exec fails, the process goes on
 * as before (cp_outputs_after_failed_exec) and errno is the exec's.
 *
 * Every exported entry point is wrapped: glibc's execvp, execl and the rest
 * reach execve internally, not through the PLT, so wrapping execve alone
 * would miss them. The execl forms build their argv and call the real
 * execv, execvp or execve, as glibc's own do. posix_spawn is not wrapped:
 * it makes a new process and leaves this one as it was.
 *
 * The child of a vfork() shares its parent's memory: cp_outputs_before_exec
 * does nothing there (its pid is not the one the shim started in), so a
 * child that execs never closes its parent's trace. Nothing here prints. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "state/outputs.h"
#include "state/shim.h"

typedef int execve_fn(const char *, char *const[], char *const[]);
typedef int execv_fn(const char *, char *const[]);
typedef int fexecve_fn(int, char *const[], char *const[]);

enum { EXECVE, EXECV, EXECVP, EXECVPE, FEXECVE, NREAL };
static const char *const real_names[NREAL] = {"execve", "execv", "execvp", "execvpe", "fexecve"};
static _Atomic(void *) reals[NREAL];

/* The next definition of the name after this library (glibc's); NULL, with
 * errno ENOSYS, when there is none. */
static void *real(int which) {
  void *fn = atomic_load_explicit(&reals[which], memory_order_acquire);
  if (fn == NULL) {
    fn = dlsym(RTLD_NEXT, real_names[which]);
    atomic_store_explicit(&reals[which], fn, memory_order_release);
  }
  if (fn == NULL) errno = ENOSYS;
  return fn;
}

/* An exec's result, with the outputs put back when it failed. */
static int after(bool held, int rc) {
  int err = errno;
  if (held) cp_outputs_after_failed_exec();
  errno = err;
  return rc;
}

static int do_execve(const char *path, char *const argv[], char *const envp[]) {
  execve_fn *fn = (execve_fn *)real(EXECVE);
  if (fn == NULL) return -1;
  bool held = cp_outputs_before_exec();
  return after(held, fn(path, argv, envp));
}

static int do_execv(const char *path, char *const argv[]) {
  execv_fn *fn = (execv_fn *)real(EXECV);
  if (fn == NULL) return -1;
  bool held = cp_outputs_before_exec();
  return after(held, fn(path, argv));
}

static int do_execvp(const char *file, char *const argv[]) {
  execv_fn *fn = (execv_fn *)real(EXECVP);
  if (fn == NULL) return -1;
  bool held = cp_outputs_before_exec();
  return after(held, fn(file, argv));
}

CP_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  return do_execve(path, argv, envp);
}

CP_EXPORT int execv(const char *path, char *const argv[]) { return do_execv(path, argv); }

CP_EXPORT int execvp(const char *file, char *const argv[]) { return do_execvp(file, argv); }

CP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  execve_fn *fn = (execve_fn *)real(EXECVPE);
  if (fn == NULL) return -1;
  bool held = cp_outputs_before_exec();
  return after(held, fn(file, argv, envp));
}

CP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  fexecve_fn *fn = (fexecve_fn *)real(FEXECVE);
  if (fn == NULL) return -1;
  bool held = cp_outputs_before_exec();
  return after(held, fn(fd, argv, envp));
}

/* ---- the execl forms: argv from the variadic list ------------------------ */

#define ARGV_ON_STACK 64

enum execl_kind { KIND_EXECL, KIND_EXECLP, KIND_EXECLE };

/* arg0 and the arguments in ap up to the NULL, as a NULL-terminated argv in
 * stack (when it fits) or on the heap (*heap, for the caller to free); for
 * execle, *envp gets the pointer after the NULL. NULL: no memory. */
static char **collect(const char *arg0, va_list ap, char **stack, char ***heap, char *const **envp) {
  va_list count;
  va_copy(count, ap);
  size_t n = 1;
  if (arg0 != NULL)
    while (va_arg(count, char *) != NULL) n++;
  va_end(count);
  char **v = stack;
  *heap = NULL;
  if (n + 1 > ARGV_ON_STACK && (v = *heap = malloc((n + 1) * sizeof *v)) == NULL) return NULL;
  v[0] = (char *)arg0;
  for (size_t i = 1; i < n; i++) v[i] = va_arg(ap, char *);
  if (arg0 != NULL) (void)va_arg(ap, char *); /* the NULL */
  v[n] = NULL;
  if (envp != NULL) *envp = va_arg(ap, char *const *);
  return v;
}

static int execl_any(enum execl_kind kind, const char *path, const char *arg0, va_list ap) {
  char *stack[ARGV_ON_STACK], **heap;
  char *const *envp = NULL;
  char **argv = collect(arg0, ap, stack, &heap, kind == KIND_EXECLE ? &envp : NULL);
  if (argv == NULL) {
    errno = ENOMEM;
    return -1;
  }
  int rc = kind == KIND_EXECLP   ? do_execvp(path, argv)
           : kind == KIND_EXECLE ? do_execve(path, argv, envp)
                                 : do_execv(path, argv);
  int err = errno;
  free(heap);
  errno = err;
  return rc;
}

CP_EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int rc = execl_any(KIND_EXECL, path, arg, ap);
  va_end(ap);
  return rc;
}

CP_EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int rc = execl_any(KIND_EXECLP, file, arg, ap);
  va_end(ap);
  return rc;
}

CP_EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int rc = execl_any(KIND_EXECLE, path, arg, ap);
  va_end(ap);
  return rc;
}
