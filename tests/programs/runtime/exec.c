/* exec.c: a process that used the pool replaces itself with exec.
 * argv[1] names the exec call (execve, execv, execvp, execvpe, execl,
 * execlp, execle, fexecve); argv[2] is a shell script that the new image,
 * /bin/sh (same pid, same environment), runs to look at what the old one
 * left: its trace, its report, its live-stats file. Before the exec: 64
 * blocks allocated, then freed. argv[1] "fail" execs a program that does not
 * exist instead and goes on: one more pair, then a normal exit.
 * Lines: "exec: pairs=64" before the exec; with "fail" also
 * "exec_failed: rc=-1 enoent=1 live=1 pairs=65" (live: the live-stats file
 * is there again after the failed exec). argv[1] "vfork": a vfork()ed
 * child execs /bin/true while the parent waits, then the parent goes on:
 * "exec_vfork: status=0 live=1 pairs=65" (the child's exec touched none of
 * the parent's outputs, which share its memory). */
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"

extern char **environ;

static int pairs(int n) {
  void *p[64];
  int ok = 0;
  for (int i = 0; i < n; i++) ok += cudaMalloc(&p[i], (size_t)(i % 8 + 1) * 4096) == cudaSuccess;
  for (int i = 0; i < n; i++) cudaFree(p[i]);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  const char *how = argv[1], *script = argv[2];
  int done = pairs(64);
  printf("exec: pairs=%d\n", done);
  fflush(stdout);
  char *const args[] = {"sh", "-c", (char *)script, NULL};
  if (strcmp(how, "fail") == 0) {
    int rc = execv("/nonexistent/cudapool-exec-test", args);
    int enoent = errno == ENOENT;
    char live[96];
    snprintf(live, sizeof live, "/dev/shm/cudapool.%lu.%ld", (unsigned long)geteuid(), (long)getpid());
    int has_live = access(live, F_OK) == 0;
    done += pairs(1);
    printf("exec_failed: rc=%d enoent=%d live=%d pairs=%d\n", rc, enoent, has_live, done);
    return 0;
  }
  if (strcmp(how, "vfork") == 0) {
    pid_t child = vfork();
    if (child == 0) {
      execv("/bin/true", (char *const[]){"true", NULL});
      _exit(127);
    }
    int status = -1;
    if (child > 0) waitpid(child, &status, 0);
    char live[96];
    snprintf(live, sizeof live, "/dev/shm/cudapool.%lu.%ld", (unsigned long)geteuid(), (long)getpid());
    int has_live = access(live, F_OK) == 0;
    done += pairs(1);
    printf("exec_vfork: status=%d live=%d pairs=%d\n", status, has_live, done);
    return 0;
  }
  if (strcmp(how, "execve") == 0) execve("/bin/sh", args, environ);
  if (strcmp(how, "execv") == 0) execv("/bin/sh", args);
  if (strcmp(how, "execvp") == 0) execvp("sh", args);
  if (strcmp(how, "execvpe") == 0) execvpe("sh", args, environ);
  if (strcmp(how, "execl") == 0) execl("/bin/sh", "sh", "-c", script, (char *)NULL);
  if (strcmp(how, "execlp") == 0) execlp("sh", "sh", "-c", script, (char *)NULL);
  if (strcmp(how, "execle") == 0) execle("/bin/sh", "sh", "-c", script, (char *)NULL, environ);
  if (strcmp(how, "fexecve") == 0) {
    int fd = open("/bin/sh", O_RDONLY);
    if (fd >= 0) fexecve(fd, args, environ);
  }
  printf("exec: %s failed: %s\n", how, strerror(errno));
  return 1;
}
