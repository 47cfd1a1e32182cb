/* Periodic schedules: parser, next firing, definitions (see cron.h).
 *
 * Next firing works in civil (wall-clock) time: find the first local date
 * and time at or after local(T+1s) that the expression matches (a field by
 * field search with carries, pure arithmetic), then map it to an instant
 * with the zone's UTC offsets around it. No instant: the time falls in a DST
 * gap, and fires at the first instant after the gap. Two instants: the
 * first one. An instant not after T (the second pass through a repeated
 * hour) means that time already fired: search on from the next second.
 * The zone's offsets come from its TZif file, read here (see zone_t): the
 * process's TZ is never changed. */
#include "cron.h"

#include <ctype.h>
#include <limits.h>
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

/* The TZif file of zone tz into path (under TZDIR, else
 * /usr/share/zoneinfo): 0, or -1 when the path does not fit (never a
 * shorter one: "Etc/GMT+10" cut is "Etc/GMT+1", another zone). */
static int zone_path(const char *tz, char *path, size_t len) {
    const char *dir = getenv("TZDIR");
    int n = snprintf(path, len, "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", tz);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

int jr_tz_valid(const char *tz) {
    size_t n = strlen(tz);
    if (!n || n > 200 || tz[0] == '/' || strstr(tz, "..")) return 0;
    for (const char *p = tz; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_+-/", *p)) return 0;
    if (strcmp(tz, "UTC") == 0) return 1;
    char path[PATH_MAX];
    if (zone_path(tz, path, sizeof path)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    return got == 4 && memcmp(magic, "TZif", 4) == 0;
}

/* A zone, read from its TZif file (RFC 8536) by our own parser: glibc has
 * no thread-safe way to convert in a zone other than TZ's, and changing TZ
 * (setenv, tzset) in a threaded process is not safe. A zone is the UTC
 * offset in effect from each transition on, and for instants after the
 * last one the rule of the file's footer (a POSIX TZ string such as
 * "EST5EDT,M3.2.0,M11.1.0"). Leap seconds ("right/" zones) are ignored. */
typedef struct rule_date {
    char kind;          /* 'J' (Jn, no Feb 29), 'D' (n, 0-based), 'M' (Mm.w.d) */
    int n, m, w, d;
    int32_t time;       /* local seconds after midnight (may be < 0 or > 24 h) */
} rule_date_t;

typedef struct zone {
    size_t n;             /* transitions */
    int64_t *at;          /* their instants, ascending */
    int32_t *off;         /* the UTC offset from at[i] on */
    int32_t off0;         /* before the first one (time type 0) */
    int has_rule, has_dst; /* a footer rule; with a DST part */
    int32_t std_off, dst_off;
    rule_date_t start, end; /* DST begins (in standard time), ends (in DST) */
} zone_t;

static void zone_free(zone_t *z) {
    free(z->at);
    free(z->off);
}

static int64_t be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    if (n == 4) return (int32_t)(uint32_t)v;
    return (int64_t)v;
}

/* "[+-]hh[:mm[:ss]]" at *p into *out (seconds, the sign as written: a
 * POSIX zone offset is west-positive, a rule's /time is plain), hours up to
 * 167 (RFC 8536). Advances *p; 0 or -1. */
static int tz_hms(const char **p, int32_t *out) {
    const char *s = *p;
    int sign = 1;
    if (*s == '+' || *s == '-') sign = *s++ == '-' ? -1 : 1;
    if (!isdigit((unsigned char)*s)) return -1;
    long h = strtol(s, (char **)&s, 10), m = 0, sec = 0;
    if (*s == ':') m = strtol(s + 1, (char **)&s, 10);
    if (*s == ':') sec = strtol(s + 1, (char **)&s, 10);
    if (h > 167 || m > 59 || sec > 59) return -1;
    *out = (int32_t)(sign * (h * 3600 + m * 60 + sec));
    *p = s;
    return 0;
}

/* Skip a zone abbreviation: "<...>" or 3+ letters. 0 or -1. */
static int tz_name(const char **p) {
    const char *s = *p;
    if (*s == '<') {
        const char *e = strchr(s, '>');
        if (!e) return -1;
        *p = e + 1;
        return 0;
    }
    while (isalpha((unsigned char)*s)) s++;
    if (s - *p < 3) return -1;
    *p = s;
    return 0;
}

/* A rule date "Jn", "n" or "Mm.w.d", with an optional "/time" (default
 * 02:00). Advances *p; 0 or -1. */
static int tz_date(const char **p, rule_date_t *r) {
    const char *s = *p;
    memset(r, 0, sizeof *r);
    r->time = 7200;
    if (*s == 'M') {
        r->kind = 'M';
        r->m = (int)strtol(s + 1, (char **)&s, 10);
        if (*s++ != '.') return -1;
        r->w = (int)strtol(s, (char **)&s, 10);
        if (*s++ != '.') return -1;
        r->d = (int)strtol(s, (char **)&s, 10);
        if (r->m < 1 || r->m > 12 || r->w < 1 || r->w > 5 || r->d < 0 || r->d > 6) return -1;
    } else {
        r->kind = *s == 'J' ? 'J' : 'D';
        if (*s == 'J') s++;
        if (!isdigit((unsigned char)*s)) return -1;
        r->n = (int)strtol(s, (char **)&s, 10);
        if (r->n > 365 || (r->kind == 'J' && r->n < 1)) return -1;
    }
    if (*s == '/' && (s++, tz_hms(&s, &r->time))) return -1;
    *p = s;
    return 0;
}

/* Parse a footer "STD off[DST[off][,start[/t],end[/t]]]" into z. */
static int tz_rule(const char *s, zone_t *z) {
    int32_t off;
    if (tz_name(&s) || tz_hms(&s, &off)) return -1;
    z->std_off = -off;
    z->has_rule = 1;
    if (!*s) return 0;
    if (tz_name(&s)) return -1;
    z->dst_off = z->std_off + 3600;
    if (*s && *s != ',') {
        if (tz_hms(&s, &off)) return -1;
        z->dst_off = -off;
    }
    if (*s != ',') return -1; /* no rule given: not in any file of tzdata */
    s++;
    if (tz_date(&s, &z->start) || *s++ != ',' || tz_date(&s, &z->end) || *s) return -1;
    z->has_dst = 1;
    return 0;
}

/* Read zone tz (jr_tz_valid accepts it) into *z. Returns 0, JR_ENOMEM, or
 * JR_EINVAL when the file cannot be read or is not a TZif file. */
static int zone_load(const char *tz, zone_t *z) {
    memset(z, 0, sizeof *z);
    if (strcmp(tz, "UTC") == 0) return 0;
    char path[PATH_MAX];
    if (zone_path(tz, path, sizeof path)) return JR_EINVAL;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f) return JR_EINVAL;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 44 || st.st_size > (1 << 20)) { /* tzdata's are < 4 KiB */
        fclose(f);
        return JR_EINVAL;
    }
    unsigned char *buf = malloc((size_t)st.st_size);
    size_t len = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!buf) return JR_ENOMEM;
    int rc = JR_EINVAL;
    const unsigned char *p = buf, *end = buf + len;
    for (int pass = 0; pass < 2; pass++) {
        if (end - p < 44 || memcmp(p, "TZif", 4) != 0) goto out;
        int v2 = p[4] >= '2';
        int64_t cnt[6];
        for (int i = 0; i < 6; i++) cnt[i] = be(p + 20 + 4 * i, 4);
        int64_t isut = cnt[0], isstd = cnt[1], leap = cnt[2], timecnt = cnt[3], typecnt = cnt[4],
                chars = cnt[5];
        int tsz = pass == 0 ? 4 : 8;
        if (typecnt < 1 || timecnt < 0 || isut < 0 || isstd < 0 || leap < 0 || chars < 0) goto out;
        int64_t body = timecnt * (tsz + 1) + typecnt * 6 + chars + leap * (tsz + 4) + isstd + isut;
        if (body > end - p - 44) goto out;
        p += 44;
        if (pass == 0 && v2) { /* skip the 32-bit data: the 64-bit block follows */
            p += body;
            continue;
        }
        const unsigned char *times = p, *idx = p + timecnt * tsz, *types = idx + timecnt;
        z->n = (size_t)timecnt;
        z->at = malloc((z->n ? z->n : 1) * sizeof *z->at);
        z->off = malloc((z->n ? z->n : 1) * sizeof *z->off);
        if (!z->at || !z->off) {
            rc = JR_ENOMEM;
            goto out;
        }
        z->off0 = (int32_t)be(types, 4);
        for (size_t i = 0; i < z->n; i++) {
            if (idx[i] >= typecnt) goto out;
            z->at[i] = be(times + i * (size_t)tsz, tsz);
            z->off[i] = (int32_t)be(types + idx[i] * 6, 4);
        }
        p += body;
        if (v2 && pass == 1 && p < end && *p == '\n') { /* the footer */
            const unsigned char *nl = memchr(p + 1, '\n', (size_t)(end - p - 1));
            if (nl && nl > p + 1) {
                char foot[128];
                size_t n = (size_t)(nl - p - 1);
                if (n >= sizeof foot) goto out;
                memcpy(foot, p + 1, n);
                foot[n] = '\0';
                if (tz_rule(foot, z)) goto out;
            }
        }
        rc = 0;
        break;
    }
out:
    free(buf);
    if (rc) zone_free(z), memset(z, 0, sizeof *z);
    return rc;
}

/* The instant (UTC seconds) a rule date of year y happens, its time being
 * local with UTC offset off. */
static int64_t rule_instant(const rule_date_t *r, int64_t y, int32_t off) {
    int64_t day; /* days since the epoch */
    if (r->kind == 'J') {
        day = jr_days_from_civil(y, 1, 1) + r->n - 1 + (is_leap(y) && r->n >= 60);
    } else if (r->kind == 'D') {
        day = jr_days_from_civil(y, 1, 1) + r->n;
    } else {
        int64_t first = jr_days_from_civil(y, r->m, 1);
        int wd = weekday(y, r->m, 1);
        day = first + (r->d - wd + 7) % 7 + (int64_t)(r->w - 1) * 7;
        int64_t last = first + days_in_month(y, r->m) - 1;
        while (day > last) day -= 7; /* week 5: the last such day */
    }
    return day * 86400 + r->time - off;
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* The civil date of day number z (days since 1970-01-01). */
static void civil_from_day(int64_t z, civil_t *c) {
    z += 719468;
    int64_t era = floor_div(z, 146097), doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    c->d = (int)(doy - (153 * mp + 2) / 5 + 1);
    c->mo = (int)(mp < 10 ? mp + 3 : mp - 9);
    c->y = yoe + era * 400 + (c->mo <= 2);
}

/* UTC offset (seconds) of zone z at instant u. */
static long gmtoff_at(const zone_t *z, int64_t u) {
    if (z->n && u < z->at[0]) return z->off0;
    if (z->n && (u < z->at[z->n - 1] || !z->has_rule)) {
        size_t lo = 0, hi = z->n; /* the last transition <= u */
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (z->at[mid] <= u) lo = mid;
            else hi = mid;
        }
        return z->off[lo];
    }
    if (!z->has_rule) return z->off0;
    if (!z->has_dst) return z->std_off;
    civil_t c;
    civil_from_day(floor_div(u + z->std_off, 86400), &c);
    int64_t start = rule_instant(&z->start, c.y, z->std_off), end = rule_instant(&z->end, c.y, z->dst_off);
    int dst = start < end ? (u >= start && u < end) : !(u >= end && u < start);
    return dst ? z->dst_off : z->std_off;
}

/* Local civil time of instant u in zone z, and its UTC offset. */
static void local_of(const zone_t *z, int64_t u, civil_t *c, long *off) {
    *off = gmtoff_at(z, u);
    int64_t l = u + *off, day = floor_div(l, 86400), sec = l - day * 86400;
    civil_from_day(day, c);
    c->h = (int)(sec / 3600), c->mi = (int)(sec / 60 % 60), c->s = (int)(sec % 60);
}

/* The instant a local civil time L (seconds, as if UTC) maps to: the first
 * of its occurrences, or for a time a DST gap skips, the first instant after
 * the gap (the transition). */
static int64_t resolve_local(const zone_t *z, int64_t L) {
    long ob = gmtoff_at(z, L - 86400), oa = gmtoff_at(z, L + 86400);
    int64_t ub = L - ob, ua = L - oa, best = INT64_MAX;
    if (ub + gmtoff_at(z, ub) == L) best = ub;
    if (ua + gmtoff_at(z, ua) == L && ua < best) best = ua;
    if (best != INT64_MAX) return best;
    if (oa <= ob) return ua; /* not a plain gap (two changes within a day): best effort */
    /* A gap: local(ua) < L < local(ub). The first u with local(u) > L is the
     * transition. */
    int64_t lo = ua, hi = ub;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (mid + gmtoff_at(z, mid) > L) hi = mid;
        else lo = mid;
    }
    return hi;
}

int jr_cron_next(const jr_cron_t *c, const char *tz, int64_t after_ms, int64_t *next_ms) {
    if (!jr_tz_valid(tz)) return JR_EINVAL;
    zone_t z;
    int rc = zone_load(tz, &z);
    if (rc) return rc;
    int64_t s0 = floor_div(after_ms, 1000) + 1;
    civil_t cv;
    long off;
    /* the local second after after_ms's, not the local time of s0: when s0
     * is the end of a gap (spring forward), the gap's times come first, and
     * each stands for that instant */
    local_of(&z, s0 - 1, &cv, &off);
    cv.s++;
    civil_carry(&cv);
    int64_t limit = cv.y + 400;
    *next_ms = -1;
    while (civil_search(c, &cv, limit)) {
        int64_t u = resolve_local(&z, civil_secs(&cv));
        if (u >= s0) {
            *next_ms = u * 1000;
            break;
        }
        cv.s++; /* fired already, at its first occurrence */
        civil_carry(&cv);
    }
    zone_free(&z);
    return 0;
}

char *jr_cron_local_format(int64_t unix_ms, const char *tz, char *buf) {
    buf[0] = '\0';
    zone_t z;
    if (!jr_tz_valid(tz) || zone_load(tz, &z)) return buf;
    civil_t c;
    long off, a;
    local_of(&z, floor_div(unix_ms, 1000), &c, &off);
    a = off < 0 ? -off : off;
    snprintf(buf, JR_CRON_LOCAL_LEN, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", (int)(c.y % 100000),
             c.mo % 100, c.d % 100, c.h % 100, c.mi % 100, c.s % 100, off < 0 ? '-' : '+', (int)(a / 3600 % 100),
             (int)(a / 60 % 60));
    zone_free(&z);
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
