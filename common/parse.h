/* parse.h: numbers to text and back, without the locale, for the options and
 * the report.
 *
 * Owns the pure conversions: the size/percent/bool parsers declared in
 * options.h, and here the keyword matcher, the %p expansion and the
 * formatters. No allocation, no global state, no libc call whose result
 * depends on LC_NUMERIC or LC_CTYPE: a program that calls setlocale() sees
 * the same behaviour. Every function writes its output only on success; every
 * formatter NUL-terminates within cap (cap > 0) and returns the length it
 * wrote, or 0 when the text did not fit. */
#ifndef CUDAPOOL_SHIM_PARSE_H
#define CUDAPOOL_SHIM_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

/* *index := i for the words[i] that text equals, ignoring ASCII case and
 * blanks around it. 0 or -1. */
int cp_parse_keyword(const char *text, const char *const *words, int nwords, int *index);
/* 1 when text is empty or only blanks. */
int cp_is_blank(const char *text);
/* Copy pattern to out with every "%p" replaced by pid. 0, or -1 when the
 * result (with its NUL) does not fit in cap. */
int cp_expand_pid(const char *pattern, long pid, char *out, size_t cap);

/* "8G", "1536K", "1000": the shortest form cp_parse_size reads back exactly. */
size_t cp_format_size_exact(uint64_t bytes, char *buf, size_t cap);
/* "512 B", "2.14 GiB": two decimals, the largest unit that keeps the value
 * under 1024. */
size_t cp_format_size_human(uint64_t bytes, char *buf, size_t cap);
/* value rounded to max_dec decimals, trailing zeros dropped down to min_dec
 * ("0.92", "1.0" with 4/1; "80" with 6/0). Negative and NaN values print as
 * 0; values from 2^63 on (infinity too) print as 2^63 - 1. */
size_t cp_format_decimal(long double value, int max_dec, int min_dec, char *buf, size_t cap);

#endif
