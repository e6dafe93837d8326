/* regions_mt.c: two threads in different regions at once (the program
 * tests/programs/runtime/regions.c "threads"): each region counts only its
 * own thread's allocation, and both saw the process's peak, 3 MiB, since
 * "left" was still open when "right" allocated. */
#include <string.h>

#include "it_check.h"

Test(regions_mt, two_threads_count_their_own_allocations_and_share_the_peak) {
  it_result r;
  it_run_ok(&r, IT_SHIM, (const char *const[]){"CUDAPOOL_STATS=1", NULL}, "regions", IT_ARGS("threads"));
  cr_assert(eq(long, it_val(&r, "regions", "errors", -1), 0), "%s", r.out);
  const char *expected = "cudapool: regions (peak: most bytes allocated while open):\n"
      "cudapool:   left: peak 3145728 bytes, 1048576 bytes in 1 allocation, entered 1 time\n"
      "cudapool:   right: peak 3145728 bytes, 2097152 bytes in 1 allocation, entered 1 time\n";
  cr_assert(ne(ptr, strstr(r.err, expected), NULL), "%s", r.err);
  it_free(&r);
}
