/* Logging: one line per event, "TIME LEVEL COMPONENT[PID] MESSAGE k=v ...",
 * where the message, each key and each value is written as is when it is
 * printable and cannot be mistaken for more keys, and otherwise in double
 * quotes with escapes (\" \\ \n \r \t \uXXXX, \xHH for a byte that is not
 * UTF-8), so a line reads back as exactly the message and the keys given,
 * whatever bytes they hold (docs/operations.md, "Log lines");
 * or the same keys as one JSON object per line (encoded by jansson; values
 * that are not UTF-8 as {"base64": ...}; the values of the count keys
 * listed in log.c and of keys ending in _ms, _us or _seconds as numbers
 * when they are number literals: see README.md, "JSON output"). TIME is UTC
 * RFC 3339 with milliseconds. Lines go to stderr, buffered; a warn or error
 * line is flushed at once, the others by jr_log_flush() (called before any
 * blocking wait, so nothing sits in the buffer while idle).
 * From jr_log_setup on they go to a private duplicate of stderr (close-on-exec,
 * fd >= 100), so a handler closing or reopening fds 0-2 does not divert them. */
#ifndef JR_LOG_H
#define JR_LOG_H

#include "jobrunner/plugin.h"
#include "config.h"

/* Set format, minimum level and component name (e.g. "worker"); the first
 * call takes the duplicate of stderr. */
void jr_log_setup(jr_log_format_t format, int min_level, const char *component);

/* Log `msg` followed by key/value string pairs, terminated by NULL:
 *   jr_log_kv(JR_LOG_INFO, "job finished", "job", id, "queue", q, NULL);
 * A pair whose value is NULL is left out; the line holds at most the first
 * 32 pairs (use jr_log_kvv for more). */
void jr_log_kv(jr_log_level_t level, const char *msg, ...);

/* printf-style message with no keys, cut at 1023 bytes. */
void jr_log(jr_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like jr_log_kv with the pairs given as arrays (n pairs). */
void jr_log_kvv(jr_log_level_t level, const char *msg, size_t n, const char *const *keys,
                const char *const *vals);

/* The line of a Sentinel failover this process follows (the Redis layer's
 * jr_redis_on_failover hook, set by main and by the client library): INFO
 * "following the failover of master NAME: FROM -> TO". */
void jr_log_failover(const char *master, const char *from, const char *to);

int jr_log_enabled(jr_log_level_t level);
void jr_log_flush(void);

#endif
