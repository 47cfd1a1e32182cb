/* JSON output helpers on jansson, shared by every --json command and the
 * JSON log format.
 *
 * Bytes that are valid UTF-8 (NUL included, written \u0000) become a JSON
 * string. Bytes that are not become {"base64": "..."} (RFC 4648, padded): the
 * one lossless form for non-UTF-8 data everywhere jobrunner prints JSON. */
#ifndef JR_JSON_H
#define JR_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* s[0..n) as a JSON string, or {"base64": ...} when not valid UTF-8.
 * NULL only when out of memory. */
json_t *jr_json_bytes(const char *s, size_t n);

/* RFC 4648 base64 of s[0..n), padded, NUL-terminated, malloc'd (NULL when
 * out of memory). */
char *jr_base64(const char *s, size_t n);

/* Write `doc` to `out` as one compact JSON document and a newline, and
 * release it (doc may be NULL: out of memory). Returns 0, or -1 when doc is
 * NULL or encoding or writing failed. */
int jr_json_print(FILE *out, json_t *doc);

#endif
