/* The contract on the C side: the key builders and the rules of the values
 * a job carries; see contract.h. */
#include "contract.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "jr.h"
#include "jr_limits.h"
#include "util.h"

_Static_assert(JR_ID_MAX == JR_JOB_ID_MAX + 2, "JR_ID_MAX holds an id, a NUL and one byte to spare");

/* ---- keys ---------------------------------------------------------------- */

#define KEY_PREFIX "jr:{"
#define KEY_TAG_END "}:"

static const struct {
    const char *s;
    size_t len;
} suffixes[JR_QK_COUNT] = {
#define SUFFIX_(NAME, member, suffix) [JR_QK_##NAME] = {suffix, sizeof suffix - 1},
    JR_QUEUE_KEYS(SUFFIX_)
#undef SUFFIX_
};

/* Every key of a valid queue fits JR_KEY_MAX. */
#define FITS_(NAME, member, suffix)                                                                      \
    _Static_assert(sizeof KEY_PREFIX - 1 + JR_INTERNAL_QUEUE_MAX + sizeof KEY_TAG_END - 1 + sizeof suffix <= JR_KEY_MAX, \
                   "jr:{Q}:" suffix " fits JR_KEY_MAX");
JR_QUEUE_KEYS(FITS_)
#undef FITS_
_Static_assert(sizeof KEY_PREFIX - 1 + JR_INTERNAL_QUEUE_MAX + sizeof KEY_TAG_END - 1 + sizeof "uniq:" - 1 + JR_JOB_ID_MAX + 1 <=
                   JR_UNIQ_KEY_MAX,
               "the uniq key of a valid queue and id fits JR_UNIQ_KEY_MAX");

/* Write "jr:{q}:" into buf (at least JR_KEY_MAX bytes) and return its
 * length, or 0 when q is longer than JR_INTERNAL_QUEUE_MAX. */
static size_t key_prefix(char *buf, const char *q, size_t qlen) {
    if (qlen > JR_INTERNAL_QUEUE_MAX) return 0;
    char *p = buf;
    memcpy(p, KEY_PREFIX, sizeof KEY_PREFIX - 1), p += sizeof KEY_PREFIX - 1;
    memcpy(p, q, qlen), p += qlen;
    memcpy(p, KEY_TAG_END, sizeof KEY_TAG_END - 1), p += sizeof KEY_TAG_END - 1;
    return (size_t)(p - buf);
}

int jr_queue_key(char *buf, const char *q, enum jr_qkey which) {
    size_t n = key_prefix(buf, q, strlen(q));
    if (!n || (unsigned)which >= JR_QK_COUNT) {
        buf[0] = '\0';
        return JR_EINVAL;
    }
    memcpy(buf + n, suffixes[which].s, suffixes[which].len + 1);
    return 0;
}

int jr_qkeys(jr_qkeys_t *k, const char *q) {
    char prefix[JR_KEY_MAX];
    size_t n = key_prefix(prefix, q, strlen(q));
    char *keys[JR_QK_COUNT] = {
#define MEMBER_(NAME, member, suffix) [JR_QK_##NAME] = k->member,
        JR_QUEUE_KEYS(MEMBER_)
#undef MEMBER_
    };
    for (int i = 0; i < JR_QK_COUNT; i++) {
        if (!n) {
            keys[i][0] = '\0';
            continue;
        }
        memcpy(keys[i], prefix, n);
        memcpy(keys[i] + n, suffixes[i].s, suffixes[i].len + 1);
    }
    return n ? 0 : JR_EINVAL;
}

int jr_queue_key_is(const char *key, const char *q, enum jr_qkey which) {
    size_t n = strlen(q);
    if ((unsigned)which >= JR_QK_COUNT) return 0;
    return !strncmp(key, KEY_PREFIX, sizeof KEY_PREFIX - 1) && !strncmp(key + sizeof KEY_PREFIX - 1, q, n) &&
           !strncmp(key + sizeof KEY_PREFIX - 1 + n, KEY_TAG_END, sizeof KEY_TAG_END - 1) &&
           !strcmp(key + sizeof KEY_PREFIX - 1 + n + sizeof KEY_TAG_END - 1, suffixes[which].s);
}

int jr_uniq_key(char *buf, size_t len, const char *q, const char *id, size_t id_len) {
    size_t qlen = strlen(q), tail = sizeof "uniq:" - 1;
    size_t n = qlen <= len && len - qlen >= sizeof KEY_PREFIX + sizeof KEY_TAG_END + tail - 1 ? key_prefix(buf, q, qlen) : 0;
    if (!n || id_len > len - n - tail - 1 || memchr(id, '\0', id_len)) {
        if (len) buf[0] = '\0';
        return JR_EINVAL;
    }
    memcpy(buf + n, "uniq:", tail);
    memcpy(buf + n + tail, id, id_len);
    buf[n + tail + id_len] = '\0';
    return 0;
}

/* ---- the rules of the values --------------------------------------------- */

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

int jr_queue_name_valid(const char *q) { return q && !jr_contract_queue_name(q, strlen(q)); }

const char *jr_contract_key_queue(const char *q, size_t n) {
    size_t d = 0;
    while (q && d < n && d < 8 && is_digit(q[n - 1 - d])) d++;
    if (q && d >= 1 && d <= 7 && d < n && q[n - 1 - d] == '#') n -= d + 1;
    return jr_contract_queue_name(q, n);
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
    const char *tilde = memchr(id, '~', n);
    if (tilde) { /* <generated>~<digits>: the generated form is before it */
        if (tilde + 1 == end || digits(tilde + 1, end) != end) return 0;
        end = tilde, n = (size_t)(tilde - id);
    }
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
    if (jr_contract_id_reserved(id, n)) return "has a reserved form (d<n>-<n>, d<n> or <n>-<n>, alone or with ~<n>)";
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
    } units[] = {{"h", JR_HOUR_MS}, {"m", JR_MINUTE_MS}, {"s", JR_SECOND_MS}, {"ms", 1}};
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

int jr_stream_id_cmp(const char *a, const char *b) {
    unsigned long long am = strtoull(a, NULL, 10), bm = strtoull(b, NULL, 10);
    const char *ad = strchr(a, '-'), *bd = strchr(b, '-');
    unsigned long long as = ad ? strtoull(ad + 1, NULL, 10) : 0, bs = bd ? strtoull(bd + 1, NULL, 10) : 0;
    if (am != bm) return am < bm ? -1 : 1;
    return as < bs ? -1 : as > bs;
}
