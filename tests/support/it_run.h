/* it_run.h: running the test programs of tests/programs/ for the shim's
 * integration tests, natively or with libcudapool.so preloaded, and reading
 * their "tag: key=value ..." output lines.
 *
 * Programs come from $CUDAPOOL_TEST_BUILD/progs (the build folder, exported
 * by the Makefile; without it, the folder above this test binary's). Each
 * run gets the caller's environment minus every LD_PRELOAD, FAKECUDA_* and
 * CUDAPOOL_* setting (CUDAPOOL_TEST_* kept), plus the settings given, plus
 * CUDAPOOL_RECLAIM_INTERVAL=0 unless they set it (the reclaimer's passes
 * come with time: exact figures would vary), plus LD_PRELOAD =
 * $CUDAPOOL_TEST_SAN_PRELOAD [libcudapool.so or another name of it]. */
#ifndef CUDAPOOL_IT_RUN_H
#define CUDAPOOL_IT_RUN_H

#include <stddef.h>
#include <sys/types.h>

/* IT_SHIM preloads libcudapool.so; the other two the same library by its
 * other names (mk/shim.mk): libcudapool.so.X (the SONAME) and
 * libcudapool.so.X.Y.Z (the file). */
enum { IT_NATIVE = 0, IT_SHIM = 1, IT_SHIM_SONAME = 2, IT_SHIM_FILE = 3 };

#define IT_MAX_KEPT 64

typedef struct it_result {
  int status; /* exit code; 128 + signal number when killed */
  pid_t pid;
  char *out, *err;         /* everything written to stdout, stderr */
  char *kept[IT_MAX_KEPT]; /* strings handed out by it_line/it_compared */
  int nkept;
} it_result;

/* The build folder (absolute). */
const char *it_build(void);
/* "LD_LIBRARY_PATH=<build>/fakecuda", for the driver-level programs: they
 * dlopen("libcuda.so.1") and find the fake through their RUNPATH, but a
 * sanitizer's dlopen interceptor makes glibc search the sanitizer
 * runtime's instead. */
const char *it_fake_driver_env(void);
/* The library's file name that how preloads ("" for IT_NATIVE). */
const char *it_shim_name(int how);
/* Runs progs/<prog> with argv (NULL-terminated, may be NULL) and env
 * ("NAME=value" strings, NULL-terminated, may be NULL); how: IT_NATIVE or
 * one of the IT_SHIM names. Returns 0, or -1 if it could not be started. */
int it_run(it_result *r, int how, const char *const *env, const char *prog, const char *const *argv);
void it_free(it_result *r);
/* The first stdout line whose tag is tag ("tag: ..."), without the newline;
 * NULL if none. */
const char *it_line(it_result *r, const char *tag);
/* The value of key in that line; `missing` if the line or key is absent. */
long it_val(it_result *r, const char *tag, const char *key, long missing);
/* stdout without the "pool:" and "info:" lines: what must be identical
 * natively and under the shim. */
const char *it_compared(it_result *r);
/* Number of lines of text containing needle. */
int it_count_lines(const char *text, const char *needle);
/* Runs a shell command and returns its stdout (kept in r, NULL on error). */
const char *it_shell(it_result *r, const char *cmd);

/* it_json.c: just enough JSON to check the exit report. */
typedef struct it_json it_json;
enum it_json_type { IT_JSON_NULL, IT_JSON_BOOL, IT_JSON_NUM, IT_JSON_STR, IT_JSON_ARR, IT_JSON_OBJ };
it_json *it_json_parse(const char *text); /* NULL if not exactly one valid value */
void it_json_free(it_json *j);
enum it_json_type it_json_type(const it_json *j);
const it_json *it_json_get(const it_json *obj, const char *key); /* NULL if absent */
size_t it_json_len(const it_json *arr);
const it_json *it_json_at(const it_json *arr, size_t i);
double it_json_num(const it_json *j);

#endif
