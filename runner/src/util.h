/* Parsing and formatting helpers (durations, times, Redis URLs, backoff),
 * pure: no I/O, no global state, the same result for the same arguments.
 * The exceptions are the two clocks at the end, jr_wall_ms and jr_mono_us,
 * which read the system's clocks. */
#ifndef JR_UTIL_H
#define JR_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* jr_duration_parse and jr_duration_parse_range: contract.h. */

/* Format a duration for messages in the largest of h, m and s of which it
 * is a whole number of at least 2 (else in s when whole, else in ms), a
 * whole number of days from 2 up also in days: "0", "250ms", "60s", "5m",
 * "60m", "48h", "168h (7 days)". Returns buf; a buffer of JR_DURATION_LEN
 * bytes holds any value. */
#define JR_DURATION_LEN 64
char *jr_duration_format(int64_t ms, char *buf, size_t len);

/* The range of jr_time_parse, in Unix microseconds: the years 0000 to 9999
 * (0000-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999Z). */
#define JR_TIME_MIN_US (INT64_C(-62167219200) * 1000000)
#define JR_TIME_MAX_US (INT64_C(253402300799) * 1000000 + 999999)

/* Parse an absolute time: RFC 3339 ("2026-12-01T09:30:00Z",
 * "2026-12-01T09:30:00.250+01:00", 't'/'z' accepted, fractional seconds of
 * any length, offsets up to 23:59) or non-negative Unix seconds
 * ("1764581400", "1764581400.25"). Stores Unix time in microseconds in *us;
 * fraction digits past the microsecond are dropped. Returns 0 or JR_EINVAL
 * (e.g. a bad date like Feb 30, a leap second :60, a missing zone, trailing
 * garbage, an instant outside JR_TIME_MIN_US..JR_TIME_MAX_US), leaving *us
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
    int is_tls;      /* 1 for rediss:// (TLS; see tls.h) */
    char *host;      /* tcp host, NULL for unix */
    int port;        /* tcp port, default 6379 */
    char *path;      /* unix socket path, NULL for tcp */
    char *user;      /* ACL user or NULL */
    char *password;  /* password or NULL */
    int db;          /* database number, default 0 */
    /* redis-sentinel:// only (host, port and path unset): the sentinels to
     * ask, in the URL's order, and the master name they know the primary by. */
    int is_sentinel;
    struct jr_redis_addr {
        char *host;  /* an IPv6 host without its brackets */
        int port;    /* default 26379 */
    } *sentinels;
    size_t nsentinels;
    char *master;
    /* redis-cluster:// and rediss-cluster:// only (host, port and path
     * unset; is_tls for rediss-cluster://): the nodes to ask for the
     * cluster's slot map, in the URL's order. */
    int is_cluster;
    struct jr_redis_addr *seeds;
    size_t nseeds;
} jr_redis_url_t;

/* Format a message into err (errlen bytes; nothing when err is NULL or
 * errlen 0), as snprintf: the error-message helper of the parsers. */
void jr_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Parse "redis://[[user:]password@]host[:port][/db]" (or "rediss://...",
 * the same over TLS: is_tls) or
 * "unix://[[user:]password@]/path/to/sock[?param&...]" with the parameters
 * db=N, user=NAME and password=SECRET (each at most once; a user or
 * password given both before the path and as a parameter is refused).
 * IPv6 hosts go in brackets ("[::1]"). A userinfo without ':' is the
 * password ("redis://SECRET@host", as redis-cli reads it). The userinfo
 * ends at the last '@' (unix://: the last "@/"), so a password may hold
 * '/', '?', '#' and '@' unescaped; a unix path holding "@/" after a
 * userinfo needs the password as a parameter. Percent-escapes in user and
 * password are decoded (a '&' in a parameter is written %26); an empty user
 * or password before the '@' is NULL. A user without a password is taken
 * (its password then comes from elsewhere: jr_redis_open refuses the URL
 * when none does).
 * On error returns JR_EINVAL (or JR_ENOMEM) with a message in err naming
 * what was wrong, and leaves *u zeroed. The message never holds the
 * password or a part of it: it quotes the URL as jr_redis_url_redact shows
 * it, and quotes no fragment of the userinfo or of anything after a
 * password parameter. */
int jr_redis_url_parse(const char *s, jr_redis_url_t *u, char *err, size_t errlen);
/* "redis-sentinel://[[user:]password@]host[:port][,host[:port]...]/MASTER[?db=N]"
 * is parsed by jr_redis_url_parse too: the sentinels (each host as in
 * redis://, the port 26379 by default) and the master name (letters, digits
 * and "._-:", at most JR_MASTER_NAME_MAX bytes), the userinfo and the
 * parameters (db, user, password, as for unix://) being the primary's.
 * Refused with a message: no master name, a longer one, an empty address in
 * the list, a bad host or port (naming its place in the list). */
#define JR_MASTER_NAME_MAX 255
/* "redis-cluster://[[user:]password@]host[:port][,host[:port]...]" and
 * "rediss-cluster://..." (TLS to every node) are parsed by
 * jr_redis_url_parse too: the seed nodes (each host as in redis://, the
 * port 6379 by default) and the userinfo, which is every node's. A cluster
 * has only db 0: a "/N" (and any path or parameter) after the list is
 * refused with a message saying so; an empty address in the list, a bad
 * host or port are refused naming their place in the list. */
/* 1 if s is a redis-sentinel:// URL (the scheme only is looked at). */
int jr_redis_url_is_sentinel(const char *s);
/* 1 if s is a redis-cluster:// or rediss-cluster:// URL (the scheme only). */
int jr_redis_url_is_cluster(const char *s);

/* Copy a Redis URL for logs and messages (the URL need not be valid),
 * cut to outlen: the userinfo's password (everything after the user's ':',
 * or the whole userinfo without one) shown as "***", the first parameter
 * value that is not db's shown as "***" and nothing after it; without an
 * '@', what may be a password with the rest of the URL left out
 * ("redis://user:SECRET", "unix://SECRET") shown as "***". */
void jr_redis_url_redact(const char *url, char *out, size_t outlen);

/* Release the strings of a parsed URL; safe on a zeroed or freed struct. */
void jr_redis_url_free(jr_redis_url_t *u);

/* Delay before the retry that follows failed attempt number `attempt`
 * (1 = the first attempt failed): exponential backoff with full jitter, a
 * uniform value in [0, min(cap_ms, base_ms * 2^(attempt-1))], picked with the
 * uniform random number `rnd` (rnd modulo the ceiling + 1). 0 when base_ms
 * or cap_ms is not positive; attempt 0 counts as 1. Never negative; no
 * overflow for any attempt. */
int64_t jr_backoff_ms(uint32_t attempt, int64_t base_ms, int64_t cap_ms, uint64_t rnd);

/* Days since 1970-01-01 of a proleptic Gregorian date (any year; no time
 * zone involved). */
int64_t jr_days_from_civil(int64_t y, int m, int d);

/* Not pure: the wall clock (CLOCK_REALTIME) as Unix time in ms, and the
 * monotonic clock (CLOCK_MONOTONIC) in microseconds. */
int64_t jr_wall_ms(void);
int64_t jr_mono_us(void);

/* FNV-1a, 64 bits, of len bytes: a stable hash for names derived from
 * others (not for security). Pure. */
uint64_t jr_fnv1a64(const void *data, size_t len);

#endif
