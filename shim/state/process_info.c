/* process_info.c: who this process is, for the JSON report.
 *
 * Read once at start, before the program can change them: the command line
 * (/proc/self/cmdline, arguments joined by spaces, cut at 255 bytes) and the
 * rank, from the first of the variables the usual launchers set (torchrun's
 * RANK, Open MPI, MPICH/PMI, PMIx, MVAPICH, Slurm) that holds a number
 * from 0 to INT_MAX. The host is asked at report time (a container may be
 * renamed), the wall time from the monotonic clock.
 *
 * Threads: written once by start (under init.c's pthread_once), read after. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "state/process_info.h"
#include "state/shim.h"
#include "util.h"

static char command[256];
static int rank = -1;
static uint64_t started_ns;
static char host[256];

static const char *const rank_variables[] = {"RANK",     "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                             "MV2_COMM_WORLD_RANK", "SLURM_PROCID"};

static int parse_rank(const char *text) {
  if (text == NULL || *text < '0' || *text > '9') return -1;
  errno = 0;
  char *end;
  long v = strtol(text, &end, 10);
  return errno == 0 && *end == '\0' && v <= INT_MAX ? (int)v : -1;
}

static void read_command(void) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, command, sizeof command - 1);
  close(fd);
  if (n <= 0) {
    command[0] = '\0';
    return;
  }
  while (n > 0 && command[n - 1] == '\0') n--; /* the last argument's end */
  for (ssize_t i = 0; i < n; i++)
    if (command[i] == '\0') command[i] = ' ';
  command[n] = '\0';
}

void cp_process_info_start(void) {
  started_ns = cp_monotonic_ns();
  read_command();
  for (size_t i = 0; i < sizeof rank_variables / sizeof rank_variables[0] && rank < 0; i++)
    rank = parse_rank(getenv(rank_variables[i]));
}

void cp_process_info(cp_report_process_t *out, bool at_end) {
  if (gethostname(host, sizeof host) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  *out = (cp_report_process_t){
      .pid = (long)getpid(),
      .host = host[0] ? host : NULL,
      .rank = rank,
      .command = command[0] ? command : NULL,
      .mode = cp_mode_word(cp_opts.mode),
      .limit = &cp_opts.limit,
      .wall_s = started_ns ? (double)(cp_monotonic_ns() - started_ns) / 1e9 : -1.0,
      .at_end = at_end,
  };
}
