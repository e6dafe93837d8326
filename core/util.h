/* util.h: small helpers the core, the shim and the tools share: emptying a
 * uthash table or a singly-linked list whose entries were malloc'ed,
 * linking into and out of a doubly-linked list, appending to a growable
 * array, a failure's message into the caller's buffer, and the monotonic
 * clock in nanoseconds. Header-only; no state. */
#ifndef CUDAPOOL_CORE_UTIL_H
#define CUDAPOOL_CORE_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Delete every entry of the uthash table `head` (handle `hh`) and free it. */
#define CP_HASH_FREE_ALL(head, type)       \
  do {                                     \
    type *cp_el_, *cp_tmp_;                \
    HASH_ITER(hh, head, cp_el_, cp_tmp_) { \
      HASH_DEL(head, cp_el_);              \
      free(cp_el_);                        \
    }                                      \
  } while (0)

/* Free every element of the singly-linked list `head` (linked by `next`). */
#define CP_LIST_FREE_ALL(head)        \
  do {                                \
    while (head) {                    \
      __typeof__(head) cp_el_ = head; \
      head = cp_el_->next;            \
      free(cp_el_);                   \
    }                                 \
  } while (0)

/* Doubly-linked lists that run from `first` to `last` through the fields
 * `prev` and `next` of their elements. */

/* Put `el` into the list after `at` (NULL: at the head). */
#define CP_LIST_INSERT_AFTER(first, last, at, el, prev, next) \
  do {                                                        \
    (el)->prev = (at);                                        \
    (el)->next = (at) ? (at)->next : (first);                 \
    *((el)->next ? &(el)->next->prev : &(last)) = (el);       \
    *((el)->prev ? &(el)->prev->next : &(first)) = (el);      \
  } while (0)

/* Take `el` out of the list; el's own links are left as they were. */
#define CP_LIST_UNLINK(first, last, el, prev, next)            \
  do {                                                         \
    *((el)->prev ? &(el)->prev->next : &(first)) = (el)->next; \
    *((el)->next ? &(el)->next->prev : &(last)) = (el)->prev;  \
  } while (0)

/* Zeroed memory for a struct with cache-line-aligned members (calloc
 * promises 16 bytes), or NULL; free() releases it. */
static inline void *cp_zalloc_aligned(size_t size, size_t align) {
  size_t rounded = (size + align - 1) / align * align;
  void *p = aligned_alloc(align, rounded);
  if (p) memset(p, 0, rounded);
  return p;
}

/* A new last element of the array whose pointer is at array_ptr (n used,
 * cap allocated, elem bytes each; the capacity doubles, from 16), or NULL
 * without memory (then nothing changed). The pointer is copied in and out
 * with memcpy: array_ptr points to some T *, never to a char *. */
static inline void *cp_push(void *array_ptr, size_t *n, size_t *cap, size_t elem) {
  char *array;
  memcpy(&array, array_ptr, sizeof array);
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    char *grown = realloc(array, c * elem);
    if (!grown) return NULL;
    array = grown;
    memcpy(array_ptr, &array, sizeof array);
    *cap = c;
  }
  return array + (*n)++ * elem;
}

/* A failure's message, written into buf (cap bytes; nothing when either is
 * 0) with printf's format; returns -1 for the caller to return. */
static inline int cp_fail_msg(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int cp_fail_msg(char *buf, size_t cap, const char *fmt, ...) {
  if (buf && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static inline uint64_t cp_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
