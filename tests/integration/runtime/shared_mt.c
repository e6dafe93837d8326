/* shared_mt.c: CUDAPOOL_SHARED_LIMIT, one budget for the cudapool
 * processes of a group on a device (issue 26, item 3; shim/state/
 * shared_limit.c). Each process has its own fake device (16 GiB): the
 * shared limit is what they share. Threaded (peers answer give-back
 * requests on their publisher threads): runs under TSan.
 *
 * Decisions pinned here, documented in docs/OPTIONS.md and docs/DESIGN.md:
 *   - four processes churning 256 MiB blocks under a 3 GiB limit: the
 *     group's total, read from the budget file after every allocation
 *     served, never passes the limit, and every refusal is
 *     cudaErrorMemoryAllocation;
 *   - the share of a peer killed with SIGKILL is taken back: an allocation
 *     that needs it succeeds;
 *   - a stopped peer (SIGSTOP) holding only cache: the asker waits at most
 *     CUDAPOOL_COOP_WAIT, then fails with the shared limit's OOM line;
 *   - a truncated or garbage budget file of this user is replaced; a
 *     symbolic link is refused in one warning and the process is held to
 *     the limit alone; a forged slot of a dead pid counts nothing;
 *   - cudaMemGetInfo answers from the shared limit.
 * Each test names its own group (CUDAPOOL_SHARED_NAME), so tests running at
 * once do not meet. Program: tests/programs/runtime/shared.c. */
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget_layout.h"
#include "it_check.h"

#include <criterion/parameterized.h>

static char group_env[96], path[256];

static void mk(void) {
  static int n;
  snprintf(group_env, sizeof group_env, "CUDAPOOL_SHARED_NAME=shared-it-%ld-%d", (long)getpid(), n++);
  /* The budget file of fake device 0 (tests/fakes/cudart/device.c's UUID). */
  snprintf(path, sizeof path, CP_BUDGET_DIR "/" CP_BUDGET_PREFIX "%lu.uuid-637066616b6564657600000000000001.%s",
           (unsigned long)geteuid(), strchr(group_env, '=') + 1);
  unlink(path);
}

static void rm(void) { unlink(path); }

TestSuite(shared, .init = mk, .fini = rm);

#define ENV(...) IT_ARGS("FAKECUDA_MEMORY=16G", group_env, __VA_ARGS__)

Test(shared, four_churning_processes_never_pass_the_limit) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=3G", "CUDAPOOL_COOP_WAIT=5000"), "shared",
            IT_ARGS("churn", "4", "60"));
  int workers = 0, served = 0, refused = 0;
  for (const char *line = s.out; (line = strstr(line, "worker: ")); line++) {
    int a, r, over, bad;
    cr_assert(eq(int, sscanf(line, "worker: served=%d refused=%d over=%d badcode=%d", &a, &r, &over, &bad), 4));
    cr_assert(eq(int, over, 0), "%s", s.out);
    cr_assert(eq(int, bad, 0), "%s", s.out);
    cr_assert(eq(int, a + r, 60), "%s", s.out);
    workers++, served += a, refused += r;
  }
  cr_assert(eq(int, workers, 4), "%s\n%s", s.out, s.err);
  cr_assert(eq(int, it_count_lines(s.out, "status=0"), 4), "%s", s.out);
  /* Each worker alone wants more than the room its peers leave it. */
  cr_assert(gt(int, refused, 0), "%s", s.out);
  cr_assert(gt(int, served, 0), "%s", s.out);
  it_free(&s);
}

Test(shared, a_killed_peers_share_comes_back) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G"), "shared", IT_ARGS("killed", "3072"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(str, (char *)s.err, ""));
  it_free(&s);
}

Test(shared, a_peers_idle_cache_comes_back) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G", "CUDAPOOL_COOP_WAIT=5000"), "shared",
            IT_ARGS("stopped", "3072"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(str, (char *)s.err,
               "cudapool: out of memory on device 0 avoided: asked 3.00 GiB; asked 1 other cudapool processes to "
               "give back: 1 answered, 3.00 GiB came back\n"));
  it_free(&s);
}

Test(shared, a_stopped_peer_bounds_the_wait) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G", "CUDAPOOL_COOP_WAIT=100"), "shared",
            IT_ARGS("stopped", "3072", "stop"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 0), "%s\n%s", s.out, s.err);
  cr_assert(eq(long, it_val(&s, "take", "code", -1), 2 /* cudaErrorMemoryAllocation */), "%s", s.out);
  cr_assert(eq(long, it_val(&s, "hold", "status", -1), 0), "%s", s.out);
  char want[512];
  snprintf(want, sizeof want,
           "cudapool: out of memory on device 0: asked 3.00 GiB; allocated 0 B, reserved 0 B, cached 0 B (largest "
           "free block 0 B), limit none; shared limit 4.00 GiB reached (CUDAPOOL_SHARED_LIMIT): 2 cudapool "
           "processes of group %s hold 3.00 GiB; asked 1 other cudapool processes to give back: 0 answered, 0 B "
           "came back\n",
           strchr(group_env, '=') + 1);
  cr_assert(eq(str, (char *)s.err, want));
  it_free(&s);
}

Test(shared, meminfo_answers_from_the_shared_limit) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G"), "shared", IT_ARGS("meminfo", "1024"));
  /* The peer holds 1 GiB of 4; this process's own cache is free to it. */
  cr_assert(eq(str, (char *)it_line(&s, "info"), "info: when=peer code=0 free=3221225472 total=4294967296"),
            "%s", s.out);
  cr_assert(eq(int, it_count_lines(s.out, "info: when=cached code=0 free=3221225472 total=4294967296"), 1), "%s",
            s.out);
  it_free(&s);
}

/* cudaDeviceReset hands the pool's share back at once, also an idle
 * process's, whatever CUDAPOOL_SHARED_GRACE says (the grace is for dead
 * processes only). */
Test(shared, a_reset_hands_the_share_back_at_once) {
  static const char *const kept[] = {"info: when=cached code=0 free=4294967296 total=4294967296",
                                     "info: when=reset code=0 free=4294967296 total=4294967296",
                                     "info: when=again code=0 free=4293918720 total=4294967296"};
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G", "CUDAPOOL_SHARED_GRACE=60000"), "shared",
            IT_ARGS("reset", "1024"));
  for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
    cr_assert(eq(int, it_count_lines(s.out, kept[i]), 1), "%s\n%s", kept[i], s.out);
  it_free(&s);
}

Test(shared, an_idle_peers_reset_share_is_free_at_once) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G", "CUDAPOOL_SHARED_GRACE=60000", "CUDAPOOL_COOP_WAIT=0"),
            "shared", IT_ARGS("resetpeer", "3072"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(long, it_val(&s, "hold", "status", -1), 0), "%s", s.out);
  it_free(&s);
}

/* A free CUDA refused left the memory where it was (the runtime's teardown
 * at exit refuses them: a peer asking a process that exits empties its
 * cache then): the share stays. Measured on an H100, released anyway, four
 * processes exiting one by one reached 3.8-4.9 GiB under a 3 GiB limit. */
Test(shared, a_free_cuda_refused_keeps_the_share) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G"), "shared", IT_ARGS("refused", "1024"));
  cr_assert(eq(str, (char *)it_compared(&s),
               "budget: when=cached total=1073741824\n"
               "budget: when=refused rc=0 total=1073741824\n"),
            "%s", s.err);
  it_free(&s);
}

static void plant(const void *bytes, size_t n) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  cr_assert(ge(int, fd, 0), "%s", path);
  cr_assert(eq(long, (long)write(fd, bytes, n), (long)n));
  close(fd);
}

/* The limit holds: 4 GiB of a 4 GiB limit is served, 5000 MiB is not. */
static void limit_holds(const char *want_err) {
  it_result s = {0}, t = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G"), "shared", IT_ARGS("take", "4096"));
  cr_assert(eq(long, it_val(&s, "take", "ok", -1), 1), "%s\n%s", s.out, s.err);
  cr_assert(eq(str, (char *)s.err, (char *)want_err));
  it_run_ok(&t, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G", "CUDAPOOL_COOP_WAIT=0"), "shared", IT_ARGS("take", "5000"));
  cr_assert(eq(long, it_val(&t, "take", "code", -1), 2), "%s\n%s", t.out, t.err);
  it_free(&s);
  it_free(&t);
}

Test(shared, a_truncated_budget_file_is_replaced) {
  char zeros[100] = {0};
  plant(zeros, sizeof zeros);
  limit_holds("");
  struct stat st;
  cr_assert(eq(int, stat(path, &st), 0));
  cr_assert(eq(long, (long)st.st_size, (long)sizeof(cp_budget_file_t)));
}

Test(shared, a_garbage_budget_file_is_replaced) {
  static char junk[sizeof(cp_budget_file_t)];
  memset(junk, 0x5a, sizeof junk);
  plant(junk, sizeof junk);
  limit_holds("");
}

Test(shared, a_symbolic_link_is_refused) {
  cr_assert(eq(int, symlink("/dev/null", path), 0));
  char want[512];
  snprintf(want, sizeof want,
           "cudapool: warning: CUDAPOOL_SHARED_LIMIT: cannot use %s (a symbolic link); the limit holds this process "
           "alone on device 0\n",
           path);
  limit_holds(want);
}

Test(shared, a_forged_slot_of_a_dead_pid_counts_nothing) {
  static cp_budget_file_t f;
  memset(&f, 0, sizeof f);
  memcpy(f.magic, CP_BUDGET_MAGIC, sizeof CP_BUDGET_MAGIC);
  f.layout = CP_BUDGET_LAYOUT;
  f.slots = CP_BUDGET_SLOTS;
  snprintf(f.key, sizeof f.key, "uuid-637066616b6564657600000000000001");
  snprintf(f.group, sizeof f.group, "%s", strchr(group_env, '=') + 1);
  /* The test's own pid with a start time not its own, holding 2^62 bytes;
   * a free slot claiming bytes; a total that says so. */
  atomic_store(&f.slot[3].owner, ((uint64_t)7 << 32) | (uint32_t)getpid());
  atomic_store(&f.slot[3].start_time, 1);
  atomic_store(&f.slot[3].reserved, (uint64_t)1 << 62);
  atomic_store(&f.slot[5].reserved, UINT64_MAX);
  atomic_store(&f.total, (uint64_t)1 << 62);
  plant(&f, sizeof f);
  limit_holds("");
}

/* A process's share outlives its exit until it is gone: its device memory
 * goes back only as it dies (the fake holds the child's exit where a driver
 * still holds its memory; an H100 showed four churning processes at 4.5 GiB
 * under a 3 GiB limit when shares were given up in the exit's destructors). */
Test(shared, an_exiting_peers_share_stays_until_it_is_gone) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, ENV("CUDAPOOL_SHARED_LIMIT=4G", "CUDAPOOL_COOP_WAIT=100"), "shared",
            IT_ARGS("exiting", "3072"));
  cr_assert(eq(str, (char *)s.out, "take: ok=0 code=2\ntake: ok=1 code=0\nexiter: status=0\n"), "%s\n%s", s.out,
            s.err);
  cr_assert(eq(int, it_count_lines(s.err, "shared limit 4.00 GiB reached (CUDAPOOL_SHARED_LIMIT): 2 cudapool"), 1),
            "%s", s.err);
  it_free(&s);
}

/* ---- a dead peer's memory the driver still holds ------------------------------------ */

/* The driver may free a dead process's memory after it can be found dead
 * (a zombie: on an H100, 57-89 ms after the exit began, about when it was
 * reaped; NVML unlisted it 30-35 ms later). These run `shared dead`:
 * this process holds 64 MiB of a 4 GiB device and a 4 GiB limit, a child
 * took 3 GiB and died; then this process asks for 3 GiB. */
static char mem_env[128], nvml_env[PATH_MAX + 32];

static void mk_dead(void) {
  mk();
  snprintf(mem_env, sizeof mem_env, "FAKECUDA_SHARED_MEM=/dev/shm/shared-it-mem.%ld", (long)getpid());
  unlink(strchr(mem_env, '=') + 1);
  snprintf(nvml_env, sizeof nvml_env, "LD_LIBRARY_PATH=%s/fakenvml", it_build());
}

static void rm_dead(void) {
  rm();
  unlink(strchr(mem_env, '=') + 1);
}

TestSuite(shared_dead, .init = mk_dead, .fini = rm_dead);

#define DEAD_ENV(...) \
  IT_ARGS("FAKECUDA_MEMORY=4G", mem_env, group_env, "CUDAPOOL_SHARED_LIMIT=4G", "CUDAPOOL_COOP_WAIT=100", __VA_ARGS__)

/* NVML still lists the dead child: its share stays until the driver (the
 * fake, released by the program's thread once NVML has been asked) frees
 * its memory, and then serves the take. Taken back at death, the take
 * would pass the limit while the device is still full, and fail there. */
Test(shared_dead, a_dead_peers_share_stays_while_nvml_lists_it) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, DEAD_ENV(nvml_env), "shared", IT_ARGS("dead", "3072", "release"));
  cr_assert(eq(str, (char *)s.out, "take: ok=1 code=0\nreleased: before=1 rc=0\ntaken: gone=1 grace=0 cap=0\n"),
            "%s\n%s", s.out, s.err);
  cr_assert(eq(str, (char *)s.err, ""));
  it_free(&s);
}

/* NVML's list as old drivers give it (_v1 only). */
Test(shared_dead, the_first_process_list_of_nvml_serves_too) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, DEAD_ENV(nvml_env, "FAKENVML_MODE=v1"), "shared", IT_ARGS("dead", "3072", "release"));
  cr_assert(eq(str, (char *)s.out, "take: ok=1 code=0\nreleased: before=1 rc=0\ntaken: gone=1 grace=0 cap=0\n"),
            "%s\n%s", s.out, s.err);
  it_free(&s);
}

/* No NVML (no library on the path): the dead child's share stays the
 * grace long; cudaMemGetInfo still counts it (4 GiB less this process's
 * 64 MiB and the child's 3 GiB). */
Test(shared_dead, without_nvml_a_dead_share_stays_the_grace) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, DEAD_ENV("CUDAPOOL_SHARED_GRACE=60000"), "shared", IT_ARGS("dead", "3072", "info"));
  cr_assert(eq(str, (char *)s.out,
               "info: when=dead code=0 free=1006632960 total=4294967296\ntaken: gone=0 grace=0 cap=0\n"),
            "%s\n%s", s.out, s.err);
  it_free(&s);
}

/* ... and comes back once the grace is over (the refused allocation waits
 * for it: no sleep here, the shim's own bounded wait). */
Test(shared_dead, without_nvml_a_dead_share_comes_back_after_the_grace) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, DEAD_ENV("CUDAPOOL_SHARED_GRACE=200"), "shared", IT_ARGS("dead", "3072", "take"));
  cr_assert(eq(str, (char *)s.out, "take: ok=1 code=0\ntaken: gone=0 grace=1 cap=0\n"), "%s\n%s", s.out, s.err);
  cr_assert(eq(str, (char *)s.err, ""));
  it_free(&s);
}

/* An NVML that lists the dead pid for ever: taken back after
 * CUDAPOOL_SHARED_GRACE_MAX, counted as such. */
Test(shared_dead, an_nvml_that_keeps_listing_a_dead_pid_is_capped) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, DEAD_ENV(nvml_env, "FAKENVML_MODE=stuck", "CUDAPOOL_SHARED_GRACE=60000",
                                  "CUDAPOOL_SHARED_GRACE_MAX=300"),
            "shared", IT_ARGS("dead", "3072", "take"));
  cr_assert(eq(str, (char *)s.out, "take: ok=1 code=0\ntaken: gone=0 grace=0 cap=1\n"), "%s\n%s", s.out, s.err);
  it_free(&s);
}

/* A broken or hostile NVML is not believed: the grace decides, nothing
 * hangs or crashes. */
typedef struct nvml_mode {
  char env[40];
} nvml_mode_t;

ParameterizedTestParameters(shared_dead, a_broken_nvml_falls_back_to_the_grace) {
  static nvml_mode_t modes[] = {{"FAKENVML_MODE=init-fails"},
                                {"FAKENVML_MODE=overflow"},
                                {"FAKENVML_MODE=insufficient"},
                                {"FAKENVML_MODE=no-self"}};
  return cr_make_param_array(nvml_mode_t, modes, sizeof modes / sizeof modes[0]);
}

ParameterizedTest(nvml_mode_t *mode, shared_dead, a_broken_nvml_falls_back_to_the_grace) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, DEAD_ENV(nvml_env, mode->env, "CUDAPOOL_SHARED_GRACE=0"), "shared",
            IT_ARGS("dead", "3072", "take"));
  cr_assert(eq(str, (char *)s.out, "take: ok=1 code=0\ntaken: gone=0 grace=1 cap=0\n"), "%s: %s\n%s", mode->env,
            s.out, s.err);
  it_free(&s);
}

/* Workers exiting one by one while the others churn, with the fake NVML
 * and one fake device for all (its driver frees a worker's memory at its
 * exit): the group's total never passes the limit, and no failure is
 * other than out of memory. */
Test(shared_dead, four_processes_exiting_one_by_one_never_pass_the_limit) {
  it_result s = {0};
  it_run_ok(&s, IT_SHIM,
            IT_ARGS("FAKECUDA_MEMORY=16G", mem_env, group_env, nvml_env, "CUDAPOOL_SHARED_LIMIT=3G",
                    "CUDAPOOL_COOP_WAIT=5000"),
            "shared", IT_ARGS("churn", "4", "60", "staggered"));
  int workers = 0;
  for (const char *line = s.out; (line = strstr(line, "worker: ")); line++) {
    int a, r, over, bad;
    cr_assert(eq(int, sscanf(line, "worker: served=%d refused=%d over=%d badcode=%d", &a, &r, &over, &bad), 4));
    cr_assert(eq(int, over, 0), "%s", s.out);
    cr_assert(eq(int, bad, 0), "%s", s.out);
    workers++;
  }
  cr_assert(eq(int, workers, 4), "%s\n%s", s.out, s.err);
  cr_assert(eq(int, it_count_lines(s.out, "status=0"), 4), "%s", s.out);
  cr_assert(eq(int, it_count_lines(s.out, "taken: "), 1), "%s", s.out);
  it_free(&s);
}

/* `cudapool stats --all` shows the share still held for the dead child,
 * then, once the take got it after the grace, why it came back. */
Test(shared_dead, stats_all_shows_a_dead_share_and_why_it_came_back) {
  char reader[PATH_MAX];
  snprintf(reader, sizeof reader, "%s/cudapool-stats", it_build());
  it_result s = {0};
  it_run_ok(&s, IT_SHIM, DEAD_ENV("CUDAPOOL_SHARED_GRACE=200"), "shared", IT_ARGS("dead", "3072", "stats", reader));
  const char *group = strchr(group_env, '=') + 1;
  char before[512], after[512];
  snprintf(before, sizeof before,
           "  shared budget of group %s: limit 4.00 GiB, claimed 3.06 GiB by 1 process (3.00 GiB of it 1 exited "
           "processes' memory the driver has not freed yet)\n",
           group);
  snprintf(after, sizeof after,
           "  shared budget of group %s: limit 4.00 GiB, claimed 3.06 GiB by 1 process; exited processes' shares "
           "taken back: 0 freed by the driver, 1 after the grace, 0 after its cap\n",
           group);
  cr_assert(ne(ptr, strstr(s.out, before), NULL), "%s\n%s", s.out, s.err);
  cr_assert(ne(ptr, strstr(s.out, after), NULL), "%s\n%s", s.out, s.err);
  cr_assert(ne(ptr, strstr(s.out, "take: ok=1 code=0\n"), NULL), "%s", s.out);
  it_free(&s);
}
