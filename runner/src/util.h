/* Pure parsing and formatting helpers: no I/O, no global state. */
#ifndef JR_UTIL_H
#define JR_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Parse a duration: one or more <number><unit> groups, unit one of
 * ms, s, m, h (e.g. "250ms", "30s", "1.5s", "5m", "2h", "1h30m"); "0" alone
 * is allowed. Stores milliseconds in *ms (fractions of a ms are rounded
 * down). Returns 0, or JR_EINVAL for empty, negative, unit-less,
 * unknown-unit or overflowing input (leaving *ms unchanged). */
int jr_duration_parse(const char *s, int64_t *ms);

/* Parse an absolute time: RFC 3339 ("2026-12-01T09:30:00Z",
 * "2026-12-01T09:30:00.250+01:00", 't'/'z' accepted, fractional seconds of
 * any length) or non-negative Unix seconds ("1764581400", "1764581400.25").
 * Stores Unix time in microseconds in *us; fraction digits past the
 * microsecond are dropped. Returns 0 or JR_EINVAL (e.g. a bad date like
 * Feb 30, a leap second :60, a missing zone, trailing garbage), leaving *us
 * unchanged. */
int jr_time_parse(const char *s, int64_t *us);

/* Format Unix time in ms as RFC 3339 UTC with milliseconds,
 * e.g. "2026-11-29T23:07:44.123Z". `buf` must hold JR_TIME_LEN bytes.
 * Returns buf. */
#define JR_TIME_LEN 32
char *jr_time_format(int64_t unix_ms, char *buf);

/* A parsed Redis URL. Strings are owned by the struct. */
typedef struct jr_redis_url {
    int is_unix;     /* 1 for unix:///path */
    char *host;      /* tcp host, NULL for unix */
    int port;        /* tcp port, default 6379 */
    char *path;      /* unix socket path, NULL for tcp */
    char *user;      /* ACL user or NULL */
    char *password;  /* password or NULL */
    int db;          /* database number, default 0 */
} jr_redis_url_t;

/* Parse "redis://[[user]:password@]host[:port][/db]" or
 * "unix:///path/to/sock[?db=N]". IPv6 hosts go in brackets ("[::1]").
 * Percent-escapes in user and password are decoded; an empty user or
 * password is NULL. On error returns JR_EINVAL (or JR_ENOMEM) with a message
 * in err naming what was wrong (quoting the URL with the password shown as
 * "***"), and leaves *u zeroed. */
int jr_redis_url_parse(const char *s, jr_redis_url_t *u, char *err, size_t errlen);

/* Copy a Redis URL with any password replaced by "***", for logs and
 * messages (the URL need not be valid). */
void jr_redis_url_redact(const char *url, char *out, size_t outlen);

/* Release the strings of a parsed URL; safe on a zeroed or freed struct. */
void jr_redis_url_free(jr_redis_url_t *u);

/* Delay before the retry that follows failed attempt number `attempt`
 * (1 = the first attempt failed): exponential backoff with full jitter, a
 * uniform value in [0, min(cap_ms, base_ms * 2^(attempt-1))], picked with the
 * uniform random number `rnd`. Never negative; no overflow for any attempt. */
int64_t jr_backoff_ms(uint32_t attempt, int64_t base_ms, int64_t cap_ms, uint64_t rnd);

/* Wall-clock Unix time in ms / monotonic clock in microseconds. */
int64_t jr_wall_ms(void);
int64_t jr_mono_us(void);

#endif
