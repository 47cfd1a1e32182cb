/* The rules of the values a job carries: see contract.h. */
#include "contract.h"

#include <stdio.h>
#include <string.h>

#include "cron.h"
#include "jr.h"
#include "jr_limits.h"
#include "redis.h"
#include "util.h"

_Static_assert(JR_ID_MAX == JR_JOB_ID_MAX + 2, "JR_ID_MAX holds an id, a NUL and one byte to spare");

/* Locale-independent, and safe for any char value (unlike isdigit). */
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* 1 if the n bytes at s are all of [A-Za-z0-9_.:-]. */
static int name_chars(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_' || c == '.' ||
              c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

const char *jr_contract_queue_name(const char *q, size_t n) {
    if (!q || n == 0) return "is empty (" JR_QUEUE_RULE ")";
    if (n > JR_QUEUE_MAX || !name_chars(q, n)) return "is not valid (" JR_QUEUE_RULE ")";
    return NULL;
}

const char *jr_contract_schedule_name(const char *s, size_t n) {
    if (!s || n == 0) return "is empty (" JR_SCHEDULE_RULE ")";
    if (n > JR_CRON_NAME_MAX || !name_chars(s, n)) return "is not valid (" JR_SCHEDULE_RULE ")";
    return NULL;
}

const char *jr_contract_handler_name(const char *h, size_t n) {
    if (!h || n == 0) return "is empty (" JR_HANDLER_RULE ")";
    if (n > JR_HANDLER_NAME_MAX || !name_chars(h, n)) return "is not valid (" JR_HANDLER_RULE ")";
    return NULL;
}

/* The end of the run of digits starting at p (before end). */
static const char *digits(const char *p, const char *end) {
    while (p < end && is_digit(*p)) p++;
    return p;
}

int jr_contract_id_reserved(const char *id, size_t n) {
    const char *p = id, *end = id + n;
    if (n && *p == 'd') {
        const char *q = digits(p + 1, end);
        if (q == p + 1) return 0;
        if (q == end) return 1; /* d<digits> */
        p++;                    /* d<digits>-<digits>: the rest as below */
    }
    const char *q = digits(p, end);
    if (q == p || q == end || *q != '-') return 0;
    const char *r = digits(q + 1, end);
    return r > q + 1 && r == end;
}

const char *jr_contract_stored_id(const char *id, size_t n) {
    if (!id || n == 0) return "is empty (1-158 bytes)";
    if (n > JR_JOB_ID_MAX) return "is longer than 158 bytes";
    if (memchr(id, '\0', n)) return "contains a NUL byte";
    return NULL;
}

const char *jr_contract_job_id(const char *id, size_t n) {
    const char *why = jr_contract_stored_id(id, n);
    if (why) return why;
    if (jr_contract_id_reserved(id, n)) return "has a reserved form (d<n>-<n>, d<n> or <n>-<n>)";
    return NULL;
}

/* ---- durations ---------------------------------------------------------- */

/* Parse a duration (see jr_duration_parse). Returns 0 with *ms set, -1 if s
 * is not a duration, or 1 if it is one but longer than INT64_MAX ms (then
 * the arithmetic stops and only the syntax is checked, so nothing wraps). */
static int duration_parse(const char *s, int64_t *ms) {
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {{"h", 3600 * 1000}, {"m", 60 * 1000}, {"s", 1000}, {"ms", 1}};
    if (!s || !*s) return -1;
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return 0;
    }
    int64_t total = 0;
    int big = 0;
    size_t next = 0; /* the units before units[next] were used or skipped */
    const char *p = s;
    while (*p) {
        if (!is_digit(*p)) return -1;
        int64_t whole = 0;
        for (; is_digit(*p); p++) {
            int d = *p - '0';
            if (whole > (INT64_MAX - d) / 10) big = 1;
            else whole = whole * 10 + d;
        }
        /* "ms" before "m": "5ms" is 5 ms, never 5 minutes and an "s". */
        size_t u = p[0] == 'm' && p[1] == 's' ? 3 : p[0] == 'h' ? 0 : p[0] == 'm' ? 1 : p[0] == 's' ? 2 : 4;
        if (u == 4 || u < next) return -1; /* no unit, another one, or one out of order or repeated */
        next = u + 1;
        p += strlen(units[u].name);
        if (big || whole > INT64_MAX / units[u].ms || total > INT64_MAX - whole * units[u].ms) {
            big = 1;
            continue;
        }
        total += whole * units[u].ms;
    }
    if (big) return 1;
    *ms = total;
    return 0;
}

int jr_duration_parse(const char *s, int64_t *ms) {
    return duration_parse(s, ms) == 0 ? 0 : JR_EINVAL;
}

int jr_duration_parse_range(const char *s, int64_t min_ms, int64_t max_ms, int64_t *ms,
                            char *err, size_t errlen) {
    int64_t v = 0;
    int rc = duration_parse(s, &v);
    if (rc < 0) {
        if (err && errlen)
            snprintf(err, errlen, "must be a duration like 500ms, 5s, 1m or 1h30m "
                                  "(whole numbers, units h m s ms in that order)");
        return JR_EINVAL;
    }
    if (rc > 0 || v < min_ms || v > max_ms) {
        char lo[JR_DURATION_LEN], hi[JR_DURATION_LEN];
        if (err && errlen)
            snprintf(err, errlen, "must be a duration from %s to %s",
                     jr_duration_format(min_ms, lo, sizeof lo),
                     jr_duration_format(max_ms, hi, sizeof hi));
        return JR_EINVAL;
    }
    *ms = v;
    return 0;
}
