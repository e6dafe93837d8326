/* reload.c: libcudart unloaded and loaded again under a running process.
 * This program is not linked to libcudart (mk/fakecudart.mk gives it its
 * own link line): its only user is a plugin, build/progs/libreload_plugin.so
 * (plugin/reload_plugin.c, linked to the fake runtime), that it loads with
 * dlopen(RTLD_LOCAL), calls, and closes, three rounds. Natively each close
 * unloads the runtime and the next open loads a fresh one. A preloaded
 * interposer that kept pointers into the first runtime (its functions, its
 * memory, its events) must keep that runtime loaded, or the second round
 * calls into an unmapped library.
 * Lines: one reload line per round and a final one (identical natively and
 * under the shim); whether libcudart stayed loaded after the last close and
 * the pool's hits (info, pool: they differ). */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "pool_probe.h"

#define ROUNDS 3

int main(void) {
  /* The plugin lies next to this program. (Not through a RUNPATH of
   * $ORIGIN: a sanitizer runtime that intercepts dlopen is its caller.) */
  char exe[PATH_MAX] = "", plugin[PATH_MAX + 32];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[len > 0 ? len : 0] = '\0';
  snprintf(plugin, sizeof plugin, "%s/libreload_plugin.so", dirname(exe));
  int failures = 0;
  for (int round = 1; round <= ROUNDS; round++) {
    void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    int (*fn)(int) = h ? (int (*)(int))dlsym(h, "reload_plugin_round") : NULL;
    int errors = fn ? fn(0x40 + round) : -1;
    int closed = h ? dlclose(h) : -1;
    printf("reload: round=%d loaded=%d errors=%d closed=%d\n", round, fn != NULL, errors, closed);
    if (!fn) fprintf(stderr, "reload: %s\n", dlerror());
    failures += !fn || errors != 0 || closed != 0;
  }
  printf("reload: rounds=%d failures=%d\n", ROUNDS, failures);
  void *rt = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
  printf("info: cudart_loaded_after_close=%d\n", rt != NULL);
  if (rt) dlclose(rt);
  cudapool_stats_t s;
  if (pool_stats(0, &s) == 0)
    printf("pool: hits=%llu misses=%llu num_alloc=%llu num_free=%llu\n", (unsigned long long)s.hits,
           (unsigned long long)s.misses, (unsigned long long)s.num_alloc, (unsigned long long)s.num_free);
  else
    printf("pool: nopool\n");
  return 0;
}
