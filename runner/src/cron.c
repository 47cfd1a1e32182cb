/* Periodic schedules: parser, next firing, definitions (see cron.h).
 *
 * Next firing works in civil (wall-clock) time: find the first local date
 * and time at or after local(T+1s) that the expression matches (a field by
 * field search with carries, pure arithmetic), then map it to an instant
 * with the zone's UTC offsets around it. No instant: the time falls in a DST
 * gap, and fires at the first instant after the gap. Two instants: the
 * first one. An instant not after T (the second pass through a repeated
 * hour) means that time already fired: search on from the next second. */
#define _DEFAULT_SOURCE /* tm_gmtoff, setenv */
#include "cron.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "contract.h"
#include "jr.h"
#include "util.h"

/* ---- parsing -------------------------------------------------------------- */

enum { F_SEC, F_MIN, F_HOUR, F_DOM, F_MON, F_DOW, F_N };

static const struct {
    const char *name;
    int min, max;
} FIELDS[F_N] = {{"second", 0, 59},      {"minute", 0, 59}, {"hour", 0, 23},
                 {"day of month", 1, 31}, {"month", 1, 12},  {"day of week", 0, 7}};

static const char *const MONTHS[12] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
static const char *const DAYS[7] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

static const struct {
    const char *macro, *expr;
} MACROS[] = {{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
              {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},     {"@midnight", "0 0 * * *"},
              {"@hourly", "0 * * * *"}};

/* Read a value (digits or a name of this field) at *p, advancing it.
 * Returns 0, or -1 with a message (without the field prefix) in err. */
static int parse_value(int f, const char **p, int *out, char *err, size_t errlen) {
    const char *s = *p;
    if (isdigit((unsigned char)*s)) {
        long v = 0;
        while (isdigit((unsigned char)*s)) {
            if (v < 100000) v = v * 10 + (*s - '0');
            s++;
        }
        if (v < FIELDS[f].min || v > FIELDS[f].max) {
            snprintf(err, errlen, "%ld is out of %d-%d", v, FIELDS[f].min, FIELDS[f].max);
            return -1;
        }
        *out = (int)v, *p = s;
        return 0;
    }
    if (isalpha((unsigned char)*s)) {
        size_t n = 0;
        while (isalpha((unsigned char)s[n])) n++;
        const char *const *names = f == F_MON ? MONTHS : f == F_DOW ? DAYS : NULL;
        int count = f == F_MON ? 12 : 7;
        if (names && n == 3)
            for (int i = 0; i < count; i++)
                if (strncasecmp(s, names[i], 3) == 0) {
                    *out = f == F_MON ? i + 1 : i, *p = s + 3;
                    return 0;
                }
        if (n == 1 && strchr("LWlw", *s))
            snprintf(err, errlen, "'%c' is not supported (no L, W, # or ?)", *s);
        else if (names)
            snprintf(err, errlen, "\"%.*s\" is not a number or a %s name (%s)", (int)(n > 40 ? 40 : n), s,
                     f == F_MON ? "month" : "weekday", f == F_MON ? "JAN..DEC" : "SUN..SAT");
        else
            snprintf(err, errlen, "\"%.*s\" is not a number", (int)(n > 40 ? 40 : n), s);
        return -1;
    }
    if (*s == '#' || *s == '?')
        snprintf(err, errlen, "'%c' is not supported (no L, W, # or ?)", *s);
    else if (*s)
        snprintf(err, errlen, "unexpected '%c'", *s);
    else
        snprintf(err, errlen, "a value is missing");
    return -1;
}

/* Parse one field (a NUL-terminated word) into a bit set. */
static int parse_field(int f, const char *s, uint64_t *bits, char *err, size_t errlen) {
    *bits = 0;
    for (;;) {
        int lo, hi, step = 1;
        if (*s == ',' || !*s) {
            snprintf(err, errlen, "an empty list item");
            return -1;
        }
        if (*s == '*') {
            lo = FIELDS[f].min, hi = FIELDS[f].max, s++;
            if (f == F_DOW) hi = 6;
        } else {
            if (parse_value(f, &s, &lo, err, errlen)) return -1;
            hi = lo;
            if (*s == '-') {
                s++;
                if (parse_value(f, &s, &hi, err, errlen)) return -1;
                if (hi < lo) {
                    snprintf(err, errlen, "the range %d-%d goes backwards", lo, hi);
                    return -1;
                }
            } else if (*s == '/') {
                hi = FIELDS[f].max; /* N/STEP = N-max/STEP */
            }
        }
        if (*s == '/') {
            s++;
            long v = 0;
            if (!isdigit((unsigned char)*s)) {
                snprintf(err, errlen, "a step must be a number");
                return -1;
            }
            while (isdigit((unsigned char)*s)) {
                if (v < 100000) v = v * 10 + (*s - '0');
                s++;
            }
            long span = FIELDS[f].max - FIELDS[f].min + 1;
            if (v < 1 || v > span) {
                snprintf(err, errlen, "step %ld is out of 1-%ld", v, span);
                return -1;
            }
            step = (int)v;
        }
        for (int v = lo; v <= hi; v += step) *bits |= UINT64_C(1) << (f == F_DOW && v == 7 ? 0 : v);
        if (!*s) return 0;
        if (*s != ',') {
            char tmp[8];
            if (parse_value(f, &s, &lo, tmp, sizeof tmp) == 0 || !strchr("LW#?lw", *s))
                snprintf(err, errlen, "unexpected '%c'", *s);
            else
                snprintf(err, errlen, "'%c' is not supported (no L, W, # or ?)", *s);
            return -1;
        }
        s++;
    }
}

int jr_cron_parse(const char *expr, jr_cron_t *c, char *err, size_t errlen) {
    while (*expr == ' ' || *expr == '\t') expr++;
    if (*expr == '@') {
        size_t n = strcspn(expr, " \t");
        for (size_t i = 0; i < sizeof MACROS / sizeof *MACROS; i++)
            if (strlen(MACROS[i].macro) == n && strncasecmp(expr, MACROS[i].macro, n) == 0 &&
                !expr[n + strspn(expr + n, " \t")])
                return jr_cron_parse(MACROS[i].expr, c, err, errlen);
        snprintf(err, errlen, "unknown macro \"%.*s\" (use @yearly, @annually, @monthly, @weekly, @daily, "
                              "@midnight or @hourly)", (int)(n > 40 ? 40 : n), expr);
        return JR_EINVAL;
    }
    char words[F_N][64];
    int nw = 0;
    const char *p = expr;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        size_t n = strcspn(p, " \t");
        if (nw < F_N) {
            if (n >= sizeof words[0]) {
                snprintf(err, errlen, "field %d is longer than %zu characters", nw + 1, sizeof words[0] - 1);
                return JR_EINVAL;
            }
            memcpy(words[nw], p, n);
            words[nw][n] = '\0';
        }
        nw++, p += n;
    }
    if (nw != 5 && nw != 6) {
        snprintf(err, errlen, "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (with seconds "
                              "first), or a macro like @daily; got %d", nw);
        return JR_EINVAL;
    }
    memset(c, 0, sizeof *c);
    uint64_t bits[F_N];
    bits[F_SEC] = 1; /* 5 fields: at second 0 */
    int first = nw == 6 ? F_SEC : F_MIN;
    for (int i = 0; i < nw; i++) {
        int f = first + i;
        char why[200];
        if (parse_field(f, words[i], &bits[f], why, sizeof why)) {
            snprintf(err, errlen, "field %d (%s): %s", i + 1, FIELDS[f].name, why);
            return JR_EINVAL;
        }
    }
    c->sec = bits[F_SEC], c->min = bits[F_MIN], c->hour = (uint32_t)bits[F_HOUR];
    c->dom = (uint32_t)bits[F_DOM], c->mon = (uint16_t)bits[F_MON], c->dow = (uint8_t)bits[F_DOW];
    c->dom_any = strcmp(words[F_DOM - first], "*") == 0;
    c->dow_any = strcmp(words[F_DOW - first], "*") == 0;
    return 0;
}

/* ---- civil time (proleptic Gregorian, pure) -------------------------------- */

typedef struct civil {
    int64_t y;
    int mo, d, h, mi, s;
} civil_t;

static int is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int64_t y, int m) {
    static const int D[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : D[m - 1];
}


static int64_t civil_secs(const civil_t *c) {
    return jr_days_from_civil(c->y, c->mo, c->d) * 86400 + c->h * 3600 + c->mi * 60 + c->s;
}

static int weekday(int64_t y, int m, int d) {
    int64_t z = jr_days_from_civil(y, m, d);
    return (int)(((z + 4) % 7 + 7) % 7); /* 1970-01-01 was a Thursday */
}

/* Carry overflowing fields upwards. */
static void civil_carry(civil_t *c) {
    if (c->s > 59) c->s = 0, c->mi++;
    if (c->mi > 59) c->mi = 0, c->h++;
    if (c->h > 23) c->h = 0, c->d++;
    if (c->d > days_in_month(c->y, c->mo)) c->d = 1, c->mo++;
    if (c->mo > 12) c->mo = 1, c->y++;
}

static int day_matches(const jr_cron_t *c, int64_t y, int m, int d) {
    int dom = (c->dom >> d) & 1, dow = (c->dow >> weekday(y, m, d)) & 1;
    return c->dom_any || c->dow_any ? dom && dow : dom || dow;
}

/* Move *t forward to the first civil time >= *t that c matches. Returns 0
 * if there is none before the year `limit`. */
static int civil_search(const jr_cron_t *c, civil_t *t, int64_t limit) {
    for (;;) {
        if (t->y > limit) return 0;
        if (!((c->mon >> t->mo) & 1)) {
            t->mo++, t->d = 1, t->h = t->mi = t->s = 0;
            if (t->mo > 12) t->mo = 1, t->y++;
        } else if (!day_matches(c, t->y, t->mo, t->d)) {
            t->d++, t->h = t->mi = t->s = 0;
            civil_carry(t);
        } else if (!((c->hour >> t->h) & 1)) {
            t->h++, t->mi = t->s = 0;
            civil_carry(t);
        } else if (!((c->min >> t->mi) & 1)) {
            t->mi++, t->s = 0;
            civil_carry(t);
        } else if (!((c->sec >> t->s) & 1)) {
            t->s++;
            civil_carry(t);
        } else {
            return 1;
        }
    }
}

/* ---- the zone ------------------------------------------------------------ */

int jr_tz_valid(const char *tz) {
    size_t n = strlen(tz);
    if (!n || n > 200 || tz[0] == '/' || strstr(tz, "..")) return 0;
    for (const char *p = tz; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_+-/", *p)) return 0;
    if (strcmp(tz, "UTC") == 0) return 1;
    const char *dir = getenv("TZDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", tz);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    return got == 4 && memcmp(magic, "TZif", 4) == 0;
}

/* Switch TZ to zone, remembering the old value in *saved (malloc'd or NULL). */
static int tz_enter(const char *tz, char **saved, int *had) {
    const char *old = getenv("TZ");
    *had = old != NULL;
    *saved = old ? strdup(old) : NULL;
    if (old && !*saved) return JR_ENOMEM;
    if (setenv("TZ", tz, 1)) {
        free(*saved);
        return JR_ENOMEM;
    }
    tzset();
    return 0;
}

static void tz_leave(char *saved, int had) {
    if (had) setenv("TZ", saved, 1);
    else unsetenv("TZ");
    tzset();
    free(saved);
}

/* UTC offset (seconds) of the current zone at instant u. */
static long gmtoff_at(int64_t u) {
    time_t t = (time_t)u;
    struct tm tm;
    if (!localtime_r(&t, &tm)) return 0;
    return tm.tm_gmtoff;
}

/* The instant a local civil time L (seconds, as if UTC) maps to: the first
 * of its occurrences, or for a time a DST gap skips, the first instant after
 * the gap (the transition). */
static int64_t resolve_local(int64_t L) {
    long ob = gmtoff_at(L - 86400), oa = gmtoff_at(L + 86400);
    int64_t ub = L - ob, ua = L - oa, best = INT64_MAX;
    if (ub + gmtoff_at(ub) == L) best = ub;
    if (ua + gmtoff_at(ua) == L && ua < best) best = ua;
    if (best != INT64_MAX) return best;
    if (oa <= ob) return ua; /* not a plain gap (two changes within a day): best effort */
    /* A gap: local(ua) < L < local(ub). The first u with local(u) > L is the
     * transition. */
    int64_t lo = ua, hi = ub;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (mid + gmtoff_at(mid) > L) hi = mid;
        else lo = mid;
    }
    return hi;
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

int jr_cron_next(const jr_cron_t *c, const char *tz, int64_t after_ms, int64_t *next_ms) {
    if (!jr_tz_valid(tz)) return JR_EINVAL;
    char *saved;
    int had, rc = tz_enter(tz, &saved, &had);
    if (rc) return rc;
    int64_t s0 = floor_div(after_ms, 1000) + 1;
    time_t t0 = (time_t)s0;
    struct tm tm;
    localtime_r(&t0, &tm);
    civil_t cv = {tm.tm_year + 1900LL, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec};
    if (cv.s > 59) cv.s = 59; /* a leap second in a "right/" zone */
    int64_t limit = cv.y + 400;
    *next_ms = -1;
    while (civil_search(c, &cv, limit)) {
        int64_t u = resolve_local(civil_secs(&cv));
        if (u >= s0) {
            *next_ms = u * 1000;
            break;
        }
        cv.s++; /* fired already, at its first occurrence */
        civil_carry(&cv);
    }
    tz_leave(saved, had);
    return 0;
}

char *jr_cron_local_format(int64_t unix_ms, const char *tz, char *buf) {
    char *saved;
    int had;
    buf[0] = '\0';
    if (!jr_tz_valid(tz) || tz_enter(tz, &saved, &had)) return buf;
    time_t t = (time_t)floor_div(unix_ms, 1000);
    struct tm tm;
    if (localtime_r(&t, &tm)) {
        long off = tm.tm_gmtoff, a = off < 0 ? -off : off;
        snprintf(buf, JR_CRON_LOCAL_LEN, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d",
                 (tm.tm_year + 1900) % 100000, (tm.tm_mon + 1) % 100, tm.tm_mday % 100, tm.tm_hour % 100,
                 tm.tm_min % 100, tm.tm_sec % 100, off < 0 ? '-' : '+',
                 (int)(a / 3600 % 100), (int)(a / 60 % 60));
    }
    tz_leave(saved, had);
    return buf;
}

/* ---- definitions ---------------------------------------------------------- */

int jr_cron_name_valid(const char *s) { return jr_contract_schedule_name(s, strlen(s)) == NULL; }

static int queue_ok(const char *q) { return jr_contract_queue_name(q, strlen(q)) == NULL; }

static int utf8_ok(const char *s) {
    json_t *j = json_string(s);
    json_decref(j);
    return j != NULL;
}

int jr_cron_def_check(jr_cron_def_t *d, char *err, size_t errlen) {
    char why[JR_ERRLEN];
    if (!d->name || !jr_cron_name_valid(d->name)) {
        snprintf(err, errlen, "name: \"%.100s\" must be 1-%d of A-Z a-z 0-9 _ . : -", d->name ? d->name : "",
                 JR_CRON_NAME_MAX);
        return JR_EINVAL;
    }
    if (!d->handler || jr_contract_handler_name(d->handler, strlen(d->handler))) {
        snprintf(err, errlen, "handler: \"%.100s\" must be " JR_HANDLER_RULE, d->handler ? d->handler : "");
        return JR_EINVAL;
    }
    if (!d->queue || !queue_ok(d->queue)) {
        snprintf(err, errlen, "queue: \"%.100s\" must be " JR_QUEUE_RULE, d->queue ? d->queue : "");
        return JR_EINVAL;
    }
    if (d->payload && !utf8_ok(d->payload)) {
        snprintf(err, errlen, "payload: must be UTF-8 text");
        return JR_EINVAL;
    }
    if (!d->cron == !d->every_ms) {
        snprintf(err, errlen, "give exactly one of cron and every");
        return JR_EINVAL;
    }
    if (d->cron && jr_cron_parse(d->cron, &d->parsed, why, sizeof why)) {
        snprintf(err, errlen, "cron: %s", why);
        return JR_EINVAL;
    }
    if (!d->cron && (d->every_ms < JR_CRON_EVERY_MIN_MS || d->every_ms > JR_CRON_EVERY_MAX_MS)) {
        snprintf(err, errlen, "every: must be from 1s to 8784h (366 days)");
        return JR_EINVAL;
    }
    if (!d->tz || !jr_tz_valid(d->tz)) {
        snprintf(err, errlen, "timezone: unknown zone \"%.100s\" (an IANA name like Europe/Berlin, or UTC)",
                 d->tz ? d->tz : "");
        return JR_EINVAL;
    }
    if (d->missed != JR_MISSED_SKIP && d->missed != JR_MISSED_ONCE) {
        snprintf(err, errlen, "missed: must be skip or once");
        return JR_EINVAL;
    }
    return 0;
}

int64_t jr_cron_def_next(const jr_cron_def_t *d, int64_t after_ms) {
    if (!d->cron) return (floor_div(after_ms, d->every_ms) + 1) * d->every_ms;
    int64_t next;
    if (jr_cron_next(&d->parsed, d->tz, after_ms, &next)) return -1;
    return next;
}

int64_t jr_cron_def_latest(const jr_cron_def_t *d, int64_t last, int64_t before) {
    if (!d->cron) {
        int64_t m = floor_div(before - 1, d->every_ms) * d->every_ms;
        return m > last ? m : -1;
    }
    /* No "previous tick" function. next(from) < before holds for every
     * `from` below the latest tick M and for none from M on: find one from
     * where it holds (doubling the distance back from 2 s, not before
     * `last`), then bisect to M - 1: about 45 calls to next(), however many
     * ticks lie in between. */
    int64_t lo = -1, hi = before - 1;
    for (int64_t w = 2000;; w *= 2) {
        int64_t from = before - w < last ? last : before - w;
        int64_t t = jr_cron_def_next(d, from);
        if (t >= 0 && t < before) {
            lo = from;
            break;
        }
        if (from == last || w > INT64_C(400) * 366 * 86400000) return -1;
        hi = from;
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2, t = jr_cron_def_next(d, mid);
        if (t >= 0 && t < before) lo = mid;
        else hi = mid;
    }
    return jr_cron_def_next(d, lo);
}

char *jr_cron_def_encode(const jr_cron_def_t *d) {
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = json_object_set_new(o, "handler", json_string(d->handler));
    bad |= json_object_set_new(o, "queue", json_string(d->queue));
    if (d->payload) bad |= json_object_set_new(o, "payload", json_string(d->payload));
    if (d->cron) bad |= json_object_set_new(o, "cron", json_string(d->cron));
    else bad |= json_object_set_new(o, "every_ms", json_integer(d->every_ms));
    bad |= json_object_set_new(o, "timezone", json_string(d->tz));
    bad |= json_object_set_new(o, "missed", json_string(d->missed == JR_MISSED_ONCE ? "once" : "skip"));
    bad |= json_object_set_new(o, "enabled", json_boolean(d->enabled));
    char *s = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

static int dup_str(json_t *o, const char *key, int required, char **out, char *err, size_t errlen) {
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (required) snprintf(err, errlen, "%s: missing", key);
        return required ? JR_EINVAL : 0;
    }
    if (!json_is_string(v)) {
        snprintf(err, errlen, "%s: must be a string", key);
        return JR_EINVAL;
    }
    if (!(*out = strdup(json_string_value(v)))) {
        snprintf(err, errlen, "out of memory");
        return JR_ENOMEM;
    }
    return 0;
}

int jr_cron_def_decode(const char *name, const char *json, jr_cron_def_t *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    json_error_t je;
    json_t *o = json_loads(json, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        snprintf(err, errlen, "not a JSON object: %s", o ? "another type" : je.text);
        json_decref(o);
        return JR_EINVAL;
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        static const char *const KNOWN[] = {"handler", "queue", "payload", "cron", "every_ms",
                                            "timezone", "missed", "enabled"};
        size_t i = 0;
        while (i < 8 && strcmp(key, KNOWN[i]) != 0) i++;
        if (i == 8) {
            snprintf(err, errlen, "unknown key \"%.60s\"", key);
            json_decref(o);
            return JR_EINVAL;
        }
    }
    char *missed = NULL;
    int rc = (d->name = strdup(name)) ? 0 : JR_ENOMEM;
    if (rc) snprintf(err, errlen, "out of memory");
    if (!rc) rc = dup_str(o, "handler", 1, &d->handler, err, errlen);
    if (!rc) rc = dup_str(o, "queue", 1, &d->queue, err, errlen);
    if (!rc) rc = dup_str(o, "payload", 0, &d->payload, err, errlen);
    if (!rc) rc = dup_str(o, "cron", 0, &d->cron, err, errlen);
    if (!rc) rc = dup_str(o, "timezone", 1, &d->tz, err, errlen);
    if (!rc) rc = dup_str(o, "missed", 0, &missed, err, errlen);
    if (!rc && (v = json_object_get(o, "every_ms"))) {
        if (!json_is_integer(v) || json_integer_value(v) <= 0) {
            snprintf(err, errlen, "every_ms: must be a positive integer");
            rc = JR_EINVAL;
        } else {
            d->every_ms = json_integer_value(v);
        }
    }
    d->enabled = 1;
    if (!rc && (v = json_object_get(o, "enabled"))) {
        if (!json_is_boolean(v)) {
            snprintf(err, errlen, "enabled: must be true or false");
            rc = JR_EINVAL;
        } else {
            d->enabled = json_is_true(v);
        }
    }
    if (!rc && missed) {
        if (!strcmp(missed, "once")) d->missed = JR_MISSED_ONCE;
        else if (!strcmp(missed, "skip")) d->missed = JR_MISSED_SKIP;
        else d->missed = -1;
    }
    free(missed);
    json_decref(o);
    return rc ? rc : jr_cron_def_check(d, err, errlen);
}

void jr_cron_def_free(jr_cron_def_t *d) {
    free(d->name), free(d->handler), free(d->queue), free(d->payload), free(d->cron), free(d->tz);
    memset(d, 0, sizeof *d);
}
