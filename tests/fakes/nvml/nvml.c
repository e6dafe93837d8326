/* nvml.c: a fake libnvidia-ml.so.1 for the shim's dead shares (issue 26;
 * shim/backend/nvml.c asks it). It answers from the fake runtime's shared
 * accounting (FAKECUDA_SHARED_MEM, tests/fakes/cudart/shared_mem.h) as a
 * driver's NVML answers from the driver's: a GPU's compute processes are
 * the rows with bytes on that fake device whose process is alive, or dead
 * with its memory held (FAKECUDA_HOLD_AT_EXIT=1) until a test releases it.
 * The fake devices' UUIDs are the fake runtime's (tests/fakes/cudart/
 * device.c: "cpfakedev", zeros, then the device number + 1).
 *
 * Environment, read at nvmlInit_v2:
 *   FAKECUDA_SHARED_MEM   the accounting file (none: no process listed)
 *   FAKENVML_QUERY_FD=W   one byte written to fd W (never blocking) after
 *                         each process list it answers: a test's thread
 *                         reads it to act once the shim has looked
 *   FAKENVML_MODE         a hostile or broken NVML:
 *                           init-fails    nvmlInit_v2 fails
 *                           stuck         every row's last pid listed,
 *                                         dead or not, for ever
 *                           overflow      says it wrote more entries than
 *                                         it was given room for
 *                           insufficient  always NVML_ERROR_INSUFFICIENT_SIZE
 *                           no-self       the caller's own pid left out
 *                                         (another pid namespace's view)
 *                           v1            only the _v1 process list
 *                                         exported in effect (v2/v3 fail
 *                                         with NVML_ERROR_FUNCTION_NOT_FOUND) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cudart/shared_mem.h"

#define EXPORT __attribute__((visibility("default")))
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_UNKNOWN 999

typedef struct {
  unsigned int pid;
  unsigned long long used;
  unsigned int gpu_instance, compute_instance;
} info_v2_t;
typedef struct {
  unsigned int pid;
  unsigned long long used;
} info_v1_t;

static const fc_shm *shm;
static char mode[32];
static int query_fd = -1;
static bool ready;

static void map_accounting(void) {
  const char *path = getenv("FAKECUDA_SHARED_MEM");
  if (!path || !*path) return;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  void *m = MAP_FAILED;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(fc_shm))
    m = mmap(NULL, sizeof(fc_shm), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (m != MAP_FAILED) shm = m;
}

EXPORT int nvmlInit_v2(void) {
  const char *m = getenv("FAKENVML_MODE");
  snprintf(mode, sizeof mode, "%s", m ? m : "");
  if (strcmp(mode, "init-fails") == 0) return NVML_ERROR_UNKNOWN;
  const char *q = getenv("FAKENVML_QUERY_FD");
  query_fd = q && *q ? atoi(q) : -1;
  if (!shm) map_accounting();
  ready = true;
  return NVML_SUCCESS;
}

EXPORT int nvmlShutdown(void) { return NVML_SUCCESS; }

/* "GPU-63706661-6b65-6465-7600-0000000000NN": fake device NN - 1. */
EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev) {
  if (!ready) return NVML_ERROR_UNINITIALIZED;
  if (!uuid || !dev) return NVML_ERROR_INVALID_ARGUMENT;
  static const char prefix[] = "GPU-63706661-6b65-6465-7600-0000000000";
  unsigned n;
  if (strlen(uuid) != sizeof prefix - 1 + 2 || strncmp(uuid, prefix, sizeof prefix - 1) != 0 ||
      sscanf(uuid + sizeof prefix - 1, "%2x", &n) != 1 || n < 1 || n > FC_SHM_DEVICES)
    return NVML_ERROR_NOT_FOUND;
  *dev = (void *)(uintptr_t)n;
  return NVML_SUCCESS;
}

static bool dead(uint32_t pid) {
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return true;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%u/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  const char *q = strrchr(buf, ')');
  return q && q[1] == ' ' && (q[2] == 'Z' || q[2] == 'X');
}

static int list(void *dev, unsigned int *count, void *infos, size_t stride) {
  if (!ready) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  if (strcmp(mode, "insufficient") == 0) {
    *count += 1;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  int d = (int)(uintptr_t)dev - 1;
  unsigned have = 0, room = *count;
  for (int i = 0; shm && i < FC_SHM_PROCS; i++) {
    const fc_shm_proc *r = &shm->procs[i];
    bool stuck = strcmp(mode, "stuck") == 0;
    uint32_t pid = atomic_load(stuck ? &r->last_pid : &r->pid);
    uint64_t bytes = atomic_load(&r->bytes[d]);
    if (pid == 0 || (bytes == 0 && !stuck)) continue;
    if (strcmp(mode, "no-self") == 0 && pid == (uint32_t)getpid()) continue;
    if (!stuck && !atomic_load(&r->held) && dead(pid)) continue;
    if (have < room && infos) {
      char *e = (char *)infos + have * stride;
      memset(e, 0, stride);
      memcpy(e, &pid, sizeof pid);
      memcpy(e + 8, &bytes, sizeof bytes);
    }
    have++;
  }
  if (query_fd >= 0) {
    int fl = fcntl(query_fd, F_GETFL);
    if (fl >= 0 && fcntl(query_fd, F_SETFL, fl | O_NONBLOCK) == 0 && write(query_fd, "q", 1) != 1) {
      /* full or closed: the test has stopped reading */
    }
  }
  if (strcmp(mode, "overflow") == 0) {
    *count = room + 1000;
    return NVML_SUCCESS;
  }
  *count = have;
  return have > room ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *count, info_v2_t *infos) {
  if (strcmp(mode, "v1") == 0) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return list(dev, count, infos, sizeof *infos);
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v2(void *dev, unsigned int *count, info_v2_t *infos) {
  if (strcmp(mode, "v1") == 0) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return list(dev, count, infos, sizeof *infos);
}

EXPORT int nvmlDeviceGetComputeRunningProcesses(void *dev, unsigned int *count, info_v1_t *infos) {
  return list(dev, count, infos, sizeof *infos);
}
