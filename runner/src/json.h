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

/* Write `doc` to `out` as one compact JSON document (through
 * jr_json_write) and a newline, and release it (doc may be NULL: out of
 * memory). Returns 0, or -1 when doc is NULL or encoding or writing failed. */
int jr_json_print(FILE *out, json_t *doc);

/* Write n bytes of JSON text as jansson dumps it, with the control
 * characters jansson leaves as they are -- DEL and C1 (U+0080-U+009F) -- as
 * \u escapes. In a dump they can only be inside strings, where an escape
 * means the same character: a reader gets the same document, and a
 * terminal shown it acts on none of its bytes (jansson escapes the other
 * control characters itself). Returns 0, or -1 when writing failed. */
int jr_json_write(FILE *out, const char *s, size_t n);

#endif
