/* Pure parsing and formatting helpers: see util.h. */
#include "util.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "jr.h"
#include "jr_limits.h"

const char *jr_strerror(int err) {
    switch (err) {
    case JR_EOK:
        return "success";
#define JR__ERR_CASE(name, msg) \
    case JR_E##name:            \
        return msg;
        JR_ERRNO_MAP(JR__ERR_CASE)
#undef JR__ERR_CASE
    }
    return "unknown error";
}

/* Locale-independent, and safe for any char value (unlike isdigit). */
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* ---- durations ---------------------------------------------------------- */

/* Durations are parsed by jr_duration_parse (contract.c: the rule of the
 * value); formatted here. */

char *jr_duration_format(int64_t ms, char *buf, size_t len) {
    const int64_t s = 1000, m = 60 * s, h = 60 * m, day = 24 * h;
    if (ms == 0) snprintf(buf, len, "0");
    else if (ms > 0 && ms % day == 0 && ms >= 2 * day)
        snprintf(buf, len, "%lldh (%lld days)", (long long)(ms / h), (long long)(ms / day));
    else if (ms > 0 && ms % h == 0 && ms >= 2 * h) snprintf(buf, len, "%lldh", (long long)(ms / h));
    else if (ms > 0 && ms % m == 0 && ms >= 2 * m) snprintf(buf, len, "%lldm", (long long)(ms / m));
    else if (ms % s == 0) snprintf(buf, len, "%llds", (long long)(ms / s));
    else snprintf(buf, len, "%lldms", (long long)ms);
    return buf;
}

/* ---- calendar ----------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil); valid for any year, independent of TZ and timegm. */
int64_t jr_days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Inverse of jr_days_from_civil. */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int days_in_month(int64_t y, int m) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* Read exactly n digits at *p into *out and advance *p; 0 or -1. */
static int take_digits(const char **p, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit((*p)[i])) return -1;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

/* Read a '.' and one or more digits at *p if present; the first six give
 * microseconds (later ones are dropped: rounding down). 0, or -1 for a '.'
 * without digits. */
static int take_fraction_us(const char **p, int64_t *us) {
    *us = 0;
    if (**p != '.') return 0;
    (*p)++;
    size_t n = 0; /* any number of digits: no int to overflow */
    for (; is_digit(**p); (*p)++, n++)
        if (n < 6) *us = *us * 10 + (**p - '0');
    if (n == 0) return -1;
    for (; n < 6; n++) *us *= 10;
    return 0;
}

static int parse_rfc3339(const char *p, int64_t *us) {
    int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
    int64_t frac;
    if (take_digits(&p, 4, &y) || *p++ != '-' || take_digits(&p, 2, &mo) || *p++ != '-' ||
        take_digits(&p, 2, &d))
        return -1;
    if (*p != 'T' && *p != 't') return -1;
    p++;
    if (take_digits(&p, 2, &h) || *p++ != ':' || take_digits(&p, 2, &mi) || *p++ != ':' ||
        take_digits(&p, 2, &sec) || take_fraction_us(&p, &frac))
        return -1;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        sign = *p++ == '+' ? 1 : -1;
        if (take_digits(&p, 2, &oh) || *p++ != ':' || take_digits(&p, 2, &om)) return -1;
    } else {
        return -1; /* the zone is required */
    }
    if (*p != '\0') return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo)) return -1;
    /* Leap seconds (:60) are refused: Unix time cannot represent them. */
    if (h > 23 || mi > 59 || sec > 59 || oh > 23 || om > 59) return -1;
    int64_t secs = jr_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec -
                   sign * (oh * 3600 + om * 60);
    /* An offset can move the instant out of years 0000..9999. */
    if (secs < JR_TIME_MIN_US / 1000000 || secs > JR_TIME_MAX_US / 1000000) return -1;
    *us = secs * 1000000 + frac;
    return 0;
}

/* Non-negative Unix seconds up to the end of year 9999, optionally with a
 * fraction. */
static int parse_unix_seconds(const char *p, int64_t *us) {
    const int64_t max_secs = JR_TIME_MAX_US / 1000000;
    int64_t secs = 0, frac;
    if (!is_digit(*p)) return -1;
    for (; is_digit(*p); p++) {
        secs = secs * 10 + (*p - '0');
        if (secs > max_secs) return -1;
    }
    if (take_fraction_us(&p, &frac) || *p != '\0') return -1;
    *us = secs * 1000000 + frac;
    return 0;
}

int jr_time_parse(const char *s, int64_t *us) {
    if (!s || !*s) return JR_EINVAL;
    int64_t v;
    /* "YYYY-" starts every RFC 3339 time; Unix seconds have no '-'. */
    int rfc = strlen(s) > 4 && s[4] == '-';
    if ((rfc ? parse_rfc3339(s, &v) : parse_unix_seconds(s, &v)) != 0) return JR_EINVAL;
    *us = v;
    return 0;
}

char *jr_time_format(int64_t unix_ms, char *buf) {
    int64_t days = unix_ms / JR_DAY_MS, rem = unix_ms % JR_DAY_MS;
    if (rem < 0) { /* floor division for times before 1970 */
        days--;
        rem += JR_DAY_MS;
    }
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    snprintf(buf, JR_TIME_LEN, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
             (int)(rem / JR_HOUR_MS), (int)(rem / JR_MINUTE_MS % 60), (int)(rem / JR_SECOND_MS % 60),
             (int)(rem % JR_SECOND_MS));
    return buf;
}

/* ---- Redis URLs --------------------------------------------------------- */

void jr_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Append n bytes of p to out (outlen bytes, *w used), cutting at the end. */
static void put(char *out, size_t outlen, size_t *w, const char *p, size_t n) {
    if (*w + 1 >= outlen) return;
    if (n > outlen - 1 - *w) n = outlen - 1 - *w;
    memcpy(out + *w, p, n);
    *w += n;
    out[*w] = '\0';
}

/* The length of the scheme of s: its leading letters when "://" follows
 * them, else 0 (so a "://" inside a password is never taken for one). */
static size_t scheme_len(const char *s) {
    size_t n = 0;
    while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') || (n && s[n] == '-')) n++;
    return n && strncmp(s + n, "://", 3) == 0 ? n : 0;
}

/* The '@' that ends the userinfo of URL s, or NULL when it has none. The
 * parser and the redactor both split here, so that no part of a password
 * is ever parsed (and quoted) as a host, port, path or parameter:
 * - unix:// with a path right after "//": none; otherwise the last "@/"
 *   (a password may hold '/', '?' and '@'), none without one;
 * - any other URL, or one without a scheme: the last '@' (nothing after
 *   the host may hold one). */
static const char *userinfo_end(const char *s) {
    size_t n = scheme_len(s);
    const char *rest = n ? s + n + 3 : s, *at = NULL;
    if (n == 4 && strncasecmp(s, "unix", 4) == 0) {
        if (*rest == '/') return NULL;
        for (const char *q = strstr(rest, "@/"); q; q = strstr(q + 1, "@/")) at = q;
        return at;
    }
    return strrchr(rest, '@');
}

void jr_redis_url_redact(const char *s, char *out, size_t outlen) {
    if (outlen == 0) return;
    out[0] = '\0';
    size_t w = 0, n = scheme_len(s);
    const char *rest = n ? s + n + 3 : s, *at = userinfo_end(s), *p = s;
    if (at) { /* keep the user (before the first ':'), mask the rest */
        const char *colon = memchr(rest, ':', (size_t)(at - rest));
        put(out, outlen, &w, s, (size_t)((colon ? colon + 1 : rest) - s));
        put(out, outlen, &w, "***", 3);
        p = at;
    } else if (n == 4 && strncasecmp(s, "unix", 4) == 0) {
        if (*rest != '/') { /* "unix://user:password" with the path left out */
            put(out, outlen, &w, s, (size_t)(rest - s));
            put(out, outlen, &w, "***", 3);
            return;
        }
    } else { /* "redis://user:password" with the host left out: no such port */
        const char *h = rest, *rb = *rest == '[' ? strchr(rest, ']') : NULL;
        if (rb) h = rb + 1; /* an IPv6 host's colons are no port */
        const char *colon = strchr(h, ':');
        size_t digits = colon ? strspn(colon + 1, "0123456789") : 0;
        int list = (jr_redis_url_is_sentinel(s) || jr_redis_url_is_cluster(s)) && colon &&
                   colon[1 + digits] == ','; /* the next sentinel or node */
        if (colon && colon[1 + digits] != '\0' && colon[1 + digits] != '/' && !list) {
            put(out, outlen, &w, s, (size_t)(colon + 1 - s));
            put(out, outlen, &w, "***", 3);
            return;
        }
    }
    const char *qm = strchr(p, '?');
    if (!qm) {
        put(out, outlen, &w, p, strlen(p));
        return;
    }
    put(out, outlen, &w, p, (size_t)(qm + 1 - p));
    /* Each parameter: db shown, any other value masked (a mistyped
     * "pasword=" too) and nothing after it shown (an unescaped '&' in it
     * would make its tail look like more parameters). */
    for (p = qm + 1;; p++) {
        size_t len = strcspn(p, "&"), klen = strcspn(p, "=&");
        if (p[klen] == '=' && !(klen == 2 && strncmp(p, "db", 2) == 0)) {
            put(out, outlen, &w, p, klen + 1);
            put(out, outlen, &w, "***", 3);
            return;
        }
        put(out, outlen, &w, p, len);
        p += len;
        if (!*p) break;
        put(out, outlen, &w, "&", 1);
    }
}

/* Decimal digits only, value <= max; 0 or -1. */
static int parse_uint(const char *s, size_t n, long max, long *out) {
    long v = 0;
    if (n == 0) return -1;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i])) return -1;
        v = v * 10 + (s[i] - '0');
        if (v > max) return -1;
    }
    *out = v;
    return 0;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) into a new string in *out (NULL when n == 0).
 * Returns 0, JR_ENOMEM, or JR_EINVAL for a bad escape or an escaped NUL. */
static int percent_decode(const char *s, size_t n, char **out) {
    *out = NULL;
    if (n == 0) return 0;
    char *r = malloc(n + 1), *w = r;
    if (!r) return JR_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *w++ = s[i];
            continue;
        }
        int hi = i + 2 < n ? hex_value(s[i + 1]) : -1;
        int lo = hi >= 0 ? hex_value(s[i + 2]) : -1;
        if (lo < 0 || (hi == 0 && lo == 0)) {
            free(r);
            return JR_EINVAL;
        }
        *w++ = (char)(hi * 16 + lo);
        i += 2;
    }
    *w = '\0';
    *out = r;
    return 0;
}

static int copy_str(const char *s, size_t n, char **out) {
    *out = strndup(s, n);
    return *out ? 0 : JR_ENOMEM;
}

static int host_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' ||
           c == '.' || c == '_';
}

/* Decode "[user:]password" in [p, at) into u->user and u->password. With
 * no ':' the whole userinfo is the password (as redis-cli reads
 * "redis://SECRET@host"). */
static int parse_userinfo(const char *p, const char *at, jr_redis_url_t *u, const char *shown,
                          char *err, size_t errlen) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    int rc = colon ? percent_decode(p, (size_t)(colon - p), &u->user) : 0;
    const char *pw = colon ? colon + 1 : p;
    if (rc == 0) rc = percent_decode(pw, (size_t)(at - pw), &u->password);
    if (rc == JR_EINVAL)
        jr_errf(err, errlen, "bad percent-escape in user or password of redis URL \"%s\"", shown);
    return rc;
}

/* Parse what follows "redis://"; its userinfo ends at `at` (userinfo_end,
 * or NULL). `shown` is the redacted URL for messages. */
static int parse_tcp(const char *p, const char *at, jr_redis_url_t *u, const char *shown, char *err,
                     size_t errlen) {
    if (at) {
        int rc = parse_userinfo(p, at, u, shown, err, errlen);
        if (rc) return rc;
        p = at + 1;
    }
    if (strchr(p, '?')) {
        jr_errf(err, errlen,
                "unexpected parameters after \"?\" in redis URL \"%s\" (redis:// takes none: "
                "write redis://[user]:password@host[:port][/db])",
                shown);
        return JR_EINVAL;
    }
    const char *end = p + strcspn(p, "/");

    const char *host = p, *host_end, *port = NULL;
    if (*p == '[') {
        host = p + 1;
        host_end = memchr(host, ']', (size_t)(end - host));
        if (!host_end) {
            jr_errf(err, errlen, "missing \"]\" after IPv6 host in redis URL \"%s\"", shown);
            return JR_EINVAL;
        }
        for (const char *q = host; q < host_end; q++) {
            if (hex_value(*q) < 0 && *q != ':' && *q != '.') {
                jr_errf(err, errlen, "bad IPv6 host \"%.*s\" in redis URL \"%s\"",
                        (int)(host_end - host), host, shown);
                return JR_EINVAL;
            }
        }
        const char *after = host_end + 1;
        if (after < end && *after != ':') {
            jr_errf(err, errlen, "unexpected \"%.*s\" after IPv6 host in redis URL \"%s\"",
                    (int)(end - after), after, shown);
            return JR_EINVAL;
        }
        if (after < end) port = after + 1;
    } else {
        host_end = memchr(p, ':', (size_t)(end - p));
        if (!host_end) host_end = end;
        else port = host_end + 1;
        if (port && memchr(port, ':', (size_t)(end - port))) {
            jr_errf(err, errlen,
                    "bad host in redis URL \"%s\" (more than one ':' after it; put IPv6 addresses "
                    "in brackets, e.g. [::1])",
                    shown);
            return JR_EINVAL;
        }
        for (const char *q = host; q < host_end; q++) {
            if (!host_char_ok(*q)) {
                jr_errf(err, errlen, "bad host \"%.*s\" in redis URL \"%s\"",
                        (int)(host_end - host), host, shown);
                return JR_EINVAL;
            }
        }
    }
    if (host_end == host) {
        jr_errf(err, errlen, "missing host in redis URL \"%s\"", shown);
        return JR_EINVAL;
    }
    int rc = copy_str(host, (size_t)(host_end - host), &u->host);
    if (rc) return rc;

    u->port = 6379;
    if (port) {
        long v;
        if (parse_uint(port, (size_t)(end - port), 65535, &v) || v == 0) {
            /* Only digits are quoted: without an '@', "redis://user:SECRET"
             * reads SECRET as the port. */
            size_t digits = strspn(port, "0123456789");
            if (port + digits == end)
                jr_errf(err, errlen, "bad port \"%.*s\" in redis URL \"%s\" (1 to 65535)",
                        (int)(end - port), port, shown);
            else
                jr_errf(err, errlen,
                        "bad port (not a number) in redis URL \"%s\" (a password goes before an "
                        "'@': redis://[user:]password@host:port)",
                        shown);
            return JR_EINVAL;
        }
        u->port = (int)v;
    }

    if (*end == '/' && end[1] != '\0') {
        long v;
        if (parse_uint(end + 1, strlen(end + 1), INT_MAX, &v)) {
            jr_errf(err, errlen, "bad database \"%s\" in redis URL \"%s\"", end + 1, shown);
            return JR_EINVAL;
        }
        u->db = (int)v;
    }
    return 0;
}

/* Parse the parameters after the '?' of a unix URL: "key=value" joined by
 * '&', keys db, user and password, each at most once. */
static int parse_params(const char *q, jr_redis_url_t *u, const char *shown, char *err,
                        size_t errlen) {
    int seen_db = 0, seen_pw = 0; /* after a password, nothing is quoted: an unescaped '&' in
                                    * it makes its tail look like more parameters */
    for (;; q++) {
        size_t n = strcspn(q, "&");
        const char *eq = memchr(q, '=', n);
        size_t klen = eq ? (size_t)(eq - q) : n;
        const char *v = eq ? eq + 1 : q + n;
        size_t vlen = (size_t)(q + n - v);
        char **str = NULL;
        if (klen == 2 && !strncmp(q, "db", 2)) {
            long db;
            if (seen_db++) {
                jr_errf(err, errlen, "parameter \"db\" given twice in redis URL \"%s\"", shown);
                return JR_EINVAL;
            }
            if (parse_uint(v, vlen, INT_MAX, &db)) {
                jr_errf(err, errlen, "bad database \"%.*s\" in redis URL \"%s\"",
                        seen_pw ? 3 : (int)vlen, seen_pw ? "***" : v, shown);
                return JR_EINVAL;
            }
            u->db = (int)db;
        } else if ((klen == 4 && !strncmp(q, "user", 4)) ||
                   (klen == 8 && !strncmp(q, "password", 8))) {
            str = klen == 4 ? &u->user : &u->password;
            seen_pw |= klen == 8;
            if (*str) {
                jr_errf(err, errlen, "%s given twice in redis URL \"%s\"",
                        klen == 4 ? "user" : "password", shown);
                return JR_EINVAL;
            }
            if (vlen == 0) {
                jr_errf(err, errlen, "empty %s in redis URL \"%s\"", klen == 4 ? "user" : "password",
                        shown);
                return JR_EINVAL;
            }
            int rc = percent_decode(v, vlen, str);
            if (rc == JR_EINVAL)
                jr_errf(err, errlen, "bad percent-escape in %s of redis URL \"%s\"",
                        klen == 4 ? "user" : "password", shown);
            if (rc) return rc;
        } else if (seen_pw) {
            jr_errf(err, errlen,
                    "unknown parameter after the password in redis URL \"%s\" (use db, user or "
                    "password; write a '&' in a password as %%26)",
                    shown);
            return JR_EINVAL;
        } else {
            jr_errf(err, errlen,
                    "unknown parameter \"%.*s\" in redis URL \"%s\" (use db, user or password)",
                    (int)klen, q, shown);
            return JR_EINVAL;
        }
        q += n;
        if (!*q) return 0;
    }
}

/* Parse what follows "unix://": optional "[user:]password@" (up to `at`,
 * the last "@/"), an absolute path, and optional parameters after a '?'. */
static int parse_unix(const char *p, const char *at, jr_redis_url_t *u, const char *shown,
                      char *err, size_t errlen) {
    /* The limit of sockaddr_un.sun_path, including its NUL. */
    const size_t max_path = 107;
    int rc;
    if (*p != '/') { /* a userinfo ends with the '@' just before the path */
        if (!at || at[1] != '/') {
            jr_errf(err, errlen,
                    "missing absolute socket path in redis URL \"%s\" (use unix:///path/to/sock "
                    "or unix://[user]:password@/path/to/sock)",
                    shown);
            return JR_EINVAL;
        }
        if ((rc = parse_userinfo(p, at, u, shown, err, errlen))) return rc;
        p = at + 1;
    }
    size_t n = strcspn(p, "?");
    if (n <= 1) {
        jr_errf(err, errlen,
                "missing absolute socket path in redis URL \"%s\" (use unix:///path/to/sock)",
                shown);
        return JR_EINVAL;
    }
    if (n > max_path) {
        jr_errf(err, errlen, "socket path longer than %zu bytes in redis URL \"%s\"", max_path,
                shown);
        return JR_EINVAL;
    }
    if ((rc = copy_str(p, n, &u->path))) return rc;
    if (p[n] == '?' && (rc = parse_params(p + n + 1, u, shown, err, errlen))) return rc;
    u->is_unix = 1;
    return 0;
}

int jr_redis_url_is_sentinel(const char *s) {
    return s && scheme_len(s) == 14 && strncasecmp(s, "redis-sentinel", 14) == 0;
}

int jr_redis_url_is_cluster(const char *s) {
    size_t n = s ? scheme_len(s) : 0;
    return (n == 13 && strncasecmp(s, "redis-cluster", 13) == 0) ||
           (n == 14 && strncasecmp(s, "rediss-cluster", 14) == 0);
}

/* One address "host[:port]" in [p, end), the n-th (1-based) of a list of
 * `what`s ("sentinel", "node"; default port def_port), into *a. IPv6 hosts
 * in brackets. */
static int parse_list_addr(const char *p, const char *end, size_t n, struct jr_redis_addr *a, const char *what,
                           int def_port, const char *shown, char *err, size_t errlen) {
    const char *host = p, *host_end, *port = NULL;
    if (p == end) {
        jr_errf(err, errlen, "empty %s address (number %zu in the list) in redis URL \"%s\"", what, n, shown);
        return JR_EINVAL;
    }
    if (*p == '[') {
        host = p + 1;
        host_end = memchr(host, ']', (size_t)(end - host));
        if (!host_end || (host_end + 1 < end && host_end[1] != ':')) {
            jr_errf(err, errlen, "bad IPv6 host of %s number %zu in redis URL \"%s\" (write [::1]:%d)", what, n,
                    shown, def_port);
            return JR_EINVAL;
        }
        for (const char *q = host; q < host_end; q++)
            if (hex_value(*q) < 0 && *q != ':' && *q != '.') host_end = host; /* refused below */
        if (host_end + 1 < end) port = host_end + 2;
    } else {
        host_end = memchr(p, ':', (size_t)(end - p));
        if (host_end) port = host_end + 1;
        else host_end = end;
        for (const char *q = host; q < host_end; q++)
            if (!host_char_ok(*q)) host_end = host;
    }
    if (host_end == host) {
        jr_errf(err, errlen, "bad or missing host of %s number %zu in redis URL \"%s\"", what, n, shown);
        return JR_EINVAL;
    }
    long v = def_port;
    if (port && (parse_uint(port, (size_t)(end - port), 65535, &v) || v == 0)) {
        jr_errf(err, errlen, "bad port of %s number %zu in redis URL \"%s\" (1 to 65535)", what, n, shown);
        return JR_EINVAL;
    }
    a->port = (int)v;
    return copy_str(host, (size_t)(host_end - host), &a->host);
}

/* Parse what follows "redis-sentinel://": the userinfo (up to `at`), the
 * sentinels, "/MASTER" and optional parameters as unix://'s. */
static int parse_sentinel(const char *p, const char *at, jr_redis_url_t *u, const char *shown, char *err,
                          size_t errlen) {
    int rc;
    if (at) {
        if ((rc = parse_userinfo(p, at, u, shown, err, errlen))) return rc;
        p = at + 1;
    }
    const char *slash = strchr(p, '/'), *qm = slash ? strchr(slash, '?') : NULL;
    const char *name = slash ? slash + 1 : NULL, *name_end = qm ? qm : name ? name + strlen(name) : NULL;
    if (!name || name == name_end) {
        jr_errf(err, errlen,
                "missing master name in redis URL \"%s\" (write "
                "redis-sentinel://[user:password@]host:port[,host:port...]/MASTER_NAME)",
                shown);
        return JR_EINVAL;
    }
    size_t n = 1;
    for (const char *q = p; q < slash; q++) n += *q == ',';
    if (!(u->sentinels = calloc(n, sizeof *u->sentinels))) return JR_ENOMEM;
    for (const char *q = p; u->nsentinels < n; q++) {
        const char *e = memchr(q, ',', (size_t)(slash - q));
        if (!e) e = slash;
        if ((rc = parse_list_addr(q, e, u->nsentinels + 1, &u->sentinels[u->nsentinels], "sentinel", 26379, shown,
                                  err, errlen)))
            return rc;
        u->nsentinels++;
        q = e;
    }
    /* Not quoted: without an '@', what follows a '/' may be a password's. */
    if (name_end - name > JR_MASTER_NAME_MAX) {
        jr_errf(err, errlen, "master name of %zu bytes in redis URL \"%s\" (at most %d)", (size_t)(name_end - name),
                shown, JR_MASTER_NAME_MAX);
        return JR_EINVAL;
    }
    for (const char *q = name; q < name_end; q++) {
        if (!host_char_ok(*q) && *q != ':') {
            jr_errf(err, errlen, "bad master name in redis URL \"%s\" (letters, digits and \"._-:\")", shown);
            return JR_EINVAL;
        }
    }
    if ((rc = copy_str(name, (size_t)(name_end - name), &u->master))) return rc;
    if (qm && qm[1] && (rc = parse_params(qm + 1, u, shown, err, errlen))) return rc;
    u->is_sentinel = 1;
    return 0;
}

/* Parse what follows "redis-cluster://": the userinfo (up to `at`) and
 * the seed nodes; nothing may follow them (a cluster has only db 0). */
static int parse_cluster(const char *p, const char *at, jr_redis_url_t *u, const char *shown, char *err,
                         size_t errlen) {
    int rc;
    if (at) {
        if ((rc = parse_userinfo(p, at, u, shown, err, errlen))) return rc;
        p = at + 1;
    }
    const char *end = p + strcspn(p, "/?#");
    if (*end) {
        jr_errf(err, errlen,
                "redis URL \"%s\": a Redis Cluster has only db 0, so nothing may follow the node list (write "
                "redis-cluster://[user:password@]host:port[,host:port...])",
                shown);
        return JR_EINVAL;
    }
    size_t n = 1;
    for (const char *q = p; q < end; q++) n += *q == ',';
    if (!(u->seeds = calloc(n, sizeof *u->seeds))) return JR_ENOMEM;
    for (const char *q = p; u->nseeds < n; q++) {
        const char *e = memchr(q, ',', (size_t)(end - q));
        if (!e) e = end;
        if ((rc = parse_list_addr(q, e, u->nseeds + 1, &u->seeds[u->nseeds], "node", 6379, shown, err, errlen)))
            return rc;
        u->nseeds++;
        q = e;
    }
    u->is_cluster = 1;
    return 0;
}

int jr_redis_url_parse(const char *s, jr_redis_url_t *u, char *err, size_t errlen) {
    memset(u, 0, sizeof *u);
    if (!s || !*s) {
        jr_errf(err, errlen, "empty redis URL");
        return JR_EINVAL;
    }
    char shown[256];
    jr_redis_url_redact(s, shown, sizeof shown);
    size_t n = scheme_len(s);
    const char *sep = n ? s + n : NULL;
    int rc;
    if (!sep) {
        jr_errf(err, errlen, "missing scheme in redis URL \"%s\" (use redis://, rediss://, unix://, redis-sentinel://, redis-cluster:// or rediss-cluster://)",
                shown);
        rc = JR_EINVAL;
    } else if (sep - s == 5 && strncasecmp(s, "redis", 5) == 0) {
        rc = parse_tcp(sep + 3, userinfo_end(s), u, shown, err, errlen);
    } else if (sep - s == 6 && strncasecmp(s, "rediss", 6) == 0) {
        rc = parse_tcp(sep + 3, userinfo_end(s), u, shown, err, errlen);
        u->is_tls = 1;
    } else if (sep - s == 4 && strncasecmp(s, "unix", 4) == 0) {
        rc = parse_unix(sep + 3, userinfo_end(s), u, shown, err, errlen);
    } else if (jr_redis_url_is_sentinel(s)) {
        rc = parse_sentinel(sep + 3, userinfo_end(s), u, shown, err, errlen);
    } else if (jr_redis_url_is_cluster(s)) {
        rc = parse_cluster(sep + 3, userinfo_end(s), u, shown, err, errlen);
        u->is_tls = sep - s == 14;
    } else {
        jr_errf(err, errlen,
                "unsupported scheme \"%.*s\" in redis URL \"%s\" (use redis://, rediss://, unix://, redis-sentinel://, redis-cluster:// or rediss-cluster://)",
                (int)(sep - s), s, shown);
        rc = JR_EINVAL;
    }
    if (rc == JR_ENOMEM) jr_errf(err, errlen, "%s", jr_strerror(rc));
    if (rc) jr_redis_url_free(u);
    return rc;
}

void jr_redis_url_free(jr_redis_url_t *u) {
    for (size_t i = 0; i < u->nsentinels; i++) free(u->sentinels[i].host);
    free(u->sentinels);
    for (size_t i = 0; i < u->nseeds; i++) free(u->seeds[i].host);
    free(u->seeds);
    free(u->master);
    free(u->host);
    free(u->path);
    free(u->user);
    free(u->password);
    memset(u, 0, sizeof *u);
}

/* ---- clocks ------------------------------------------------------------- */

int64_t jr_backoff_ms(uint32_t attempt, int64_t base_ms, int64_t cap_ms, uint64_t rnd) {
    if (base_ms <= 0 || cap_ms <= 0) return 0;
    int64_t ceiling = base_ms;
    for (uint32_t i = 1; i < attempt && ceiling < cap_ms; i++)
        ceiling = ceiling > INT64_MAX / 2 ? INT64_MAX : ceiling * 2;
    if (ceiling > cap_ms) ceiling = cap_ms;
    return (int64_t)(rnd % ((uint64_t)ceiling + 1));
}

int64_t jr_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t jr_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint64_t jr_fnv1a64(const void *data, size_t len) {
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
