/* Unit tests for util.c: durations, times, Redis URLs, error strings. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract.h"
#include "jr.h"
#include "jr_limits.h"
#include "util.h"

/* The parsers of a string into an int64 (durations, times): 0 and the
 * value, or JR_EINVAL with the output left as it was. */
typedef int (*parse_fn)(const char *s, int64_t *out);

/* What parse (named `name`) makes of s; fails the test if it refuses s. */
static int64_t parsed(parse_fn parse, const char *name, const char *s) {
    int64_t v = -12345;
    int rc = parse(s, &v);
    cr_assert_eq(rc, 0, "%s(\"%s\") failed: %d", name, s, rc);
    return v;
}

/* parse refuses s (JR_EINVAL) and leaves its output unchanged. */
static void refused(parse_fn parse, const char *s) {
    int64_t v = -12345;
    cr_expect_eq(parse(s, &v), JR_EINVAL, "\"%s\" should be rejected", s);
    cr_expect_eq(v, -12345, "\"%s\": the output must stay unchanged on error", s);
}

/* ---- durations ---------------------------------------------------------- */

static int64_t dur(const char *s) { return parsed(jr_duration_parse, "jr_duration_parse", s); }
static void dur_bad(const char *s) { refused(jr_duration_parse, s); }

Test(duration, each_unit) {
    cr_expect_eq(dur("250ms"), 250);
    cr_expect_eq(dur("30s"), 30000);
    cr_expect_eq(dur("5m"), 300000);
    cr_expect_eq(dur("2h"), 7200000);
}

Test(duration, zero) {
    cr_expect_eq(dur("0"), 0);
    cr_expect_eq(dur("0s"), 0);
    cr_expect_eq(dur("0ms"), 0);
}

/* README: "ASCII digits and the units ms, s, m, h only": no fraction. */
Test(duration, fractions_refused) {
    dur_bad("1.5s");
    dur_bad("0.25h");
    dur_bad("1.5ms");
    dur_bad("0.0019s");
    dur_bad("0.99999999999999999999999999s");
}

Test(duration, compound) {
    cr_expect_eq(dur("1h30m"), 5400000);
    cr_expect_eq(dur("1m30s"), 90000);
    cr_expect_eq(dur("1h1m1s1ms"), 3661001);
    cr_expect_eq(dur("1h1ms"), 3600001);
    cr_expect_eq(dur("90m"), 5400000);
    cr_expect_eq(dur("1h90m"), 9000000);
}

/* Each unit at most once, in the order h, m, s, ms: "1s1s" and "5m1h" are
 * typos, not sums. */
Test(duration, units_repeated_or_out_of_order_refused) {
    const char *bad[] = {"1s1s", "5m1h", "1ms1s", "1h1h", "1m1h", "30s1m", "1ms1ms", "1s1m", "1h2m3s4ms5ms"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) dur_bad(bad[i]);
}

Test(duration, large_but_fits) {
    cr_expect_eq(dur("2562047788015h"), INT64_C(2562047788015) * 3600000);
    cr_expect_eq(dur("9223372036854775807ms"), INT64_MAX);
}

Test(duration, rejects) {
    dur_bad("");
    dur_bad("-1s");
    dur_bad("+1s");
    dur_bad("5");    /* bare number other than "0" */
    dur_bad("00");
    dur_bad("10");
    dur_bad("5d");   /* unknown unit */
    dur_bad("5sec");
    dur_bad("5S");
    dur_bad("s");
    dur_bad("1.s");
    dur_bad(".5s");
    dur_bad(" 5s");
    dur_bad("5s ");
    dur_bad("1h30");  /* trailing number without unit */
    dur_bad("abc");
}

Test(duration, rejects_overflow) {
    dur_bad("9223372036854775808ms");
    dur_bad("2562047788016h");
    dur_bad("99999999999999999999999999s");
    dur_bad("9223372036854775807ms1ms");
    dur_bad("2562047788015h13m"); /* each group fits, the sum does not */
}

Test(duration, null_rejected) {
    int64_t ms = 7;
    cr_expect_eq(jr_duration_parse(NULL, &ms), JR_EINVAL);
    cr_expect_eq(ms, 7);
}

/* Inputs an attacker or a typo could give: each is refused, never read as
 * something else (no sign, space, exponent, hex, NaN, non-ASCII digit,
 * arithmetic or unit outside ms/s/m/h), and nothing too long wraps. */
Test(duration, hostile_inputs_refused) {
    const char *bad[] = {
        "99999999999999999999h", "3000000000000000h", "1e400s", "1e3s", "-5s", "-0s", "5",
        "5 s", " 5s", "5s\n", "1h-30m", "1h+30m", "1h 30m", "nan", "NaNs", "inf", "infs",
        "0x10s", "0x10", "1_000s", "1,5s", "1..5s", "1.5.5s", "\xef\xbc\x95s" /* fullwidth 5 */,
        "\xd9\xa5s" /* Arabic-Indic 5 */, "5\xc2\xb5s" /* micro sign */, "5us", "5ns", "5d",
        "5w", "5y", "5H", "5M", "5Ms", "5mss", "5sm", "ms", "h", ".", "1.", "0.", "00",
        "9223372036854775807ms1ms", "2562047788015h1h",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) dur_bad(bad[i]);
}

Test(duration, very_long_inputs_are_exact) {
    /* 100,000 leading zeros: exact, not slow. */
    enum { N = 100000 };
    char *s = malloc(2 * N + 16);
    memset(s, '0', N);
    strcpy(s + N, "7s");
    cr_expect_eq(dur(s), 7000);
    /* 100,000 digits of 9: refused, not wrapped. */
    memset(s, '9', 2 * N);
    strcpy(s + 2 * N, "ms");
    dur_bad(s);
    free(s);
}

/* An independent reference for the property test: the grammar checked
 * token by token and the value summed in 128 bits (the generator keeps
 * digit runs under 21 digits, so nothing overflows here). Returns -1 for
 * "not a duration", else 0 with the exact value in *v. */
static int ref_duration(const char *s, __int128 *v) {
    if (!strcmp(s, "0")) return *v = 0, 0;
    if (!*s) return -1;
    __int128 total = 0, last = INT64_MAX; /* units strictly decreasing: h m s ms */
    while (*s) {
        __int128 whole = 0;
        if (*s < '0' || *s > '9') return -1;
        while (*s >= '0' && *s <= '9') whole = whole * 10 + (*s++ - '0');
        __int128 unit;
        if (!strncmp(s, "ms", 2)) unit = 1, s += 2;
        else if (*s == 's') unit = 1000, s++;
        else if (*s == 'm') unit = 60000, s++;
        else if (*s == 'h') unit = 3600000, s++;
        else return -1;
        if (unit >= last) return -1;
        last = unit;
        total += whole * unit;
    }
    *v = total;
    return 0;
}

static uint64_t rnd(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* Append 1..max random digits (sometimes a value at an edge) to s. */
static void put_digits(char *s, size_t len, uint64_t *x, int max) {
    static const char *const edges[] = {"0", "9223372036854775807", "9223372036854775808",
                                        "2562047788015", "2562047788016", "153722867280912",
                                        "87600", "168", "720", "99999999999999999999"};
    if (rnd(x) % 4 == 0 && max >= 20) {
        strncat(s, edges[rnd(x) % 10], len - strlen(s) - 1);
        return;
    }
    size_t at = strlen(s);
    for (int n = 1 + (int)(rnd(x) % (uint64_t)max); n > 0 && at + 1 < len; n--)
        s[at++] = (char)('0' + rnd(x) % 10);
    s[at] = '\0';
}

/* Many generated strings, mostly near-durations: jr_duration_parse gives
 * exactly the reference value when it fits in int64, else an error with
 * *ms untouched; jr_duration_parse_range gives a value inside its range or
 * an error naming the range. */
Test(duration, property_exact_or_refused) {
    static const char *const units[] = {"h", "m", "s", "ms"};
    static const char *const bad_units[] = {"d", "us", " ", "S", "sec", "\xc2\xb5s"};
    static const char *const junk[] = {"-", "+", " ", "e", "x", ".", "\xef\xbc\x95", "nan",
                                       "ms", "s", "h", "m", "\n", "0x", "1e3"};
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    int accepted = 0, too_big = 0, refused = 0;
    for (int i = 0; i < 200000; i++) {
        char s[512] = "";
        int next = 0; /* mostly the units in order (accepted), now and then any */
        for (int k = 1 + (int)(rnd(&x) % 6); k > 0; k--) {
            uint64_t r = rnd(&x) % 16;
            if (r == 0) { /* junk: never a digit next to a group's digits */
                strncat(s, junk[rnd(&x) % 15], sizeof s - strlen(s) - 1);
                continue;
            }
            put_digits(s, sizeof s, &x, 20);
            if (rnd(&x) % 8 == 0) {
                strncat(s, ".", sizeof s - strlen(s) - 1);
                put_digits(s, sizeof s, &x, 18);
            }
            int u = rnd(&x) % 5 == 0 || next > 3 ? (int)(rnd(&x) % 4) : next + (int)(rnd(&x) % (4 - next));
            next = u + 1;
            strncat(s, r == 1 ? bad_units[rnd(&x) % 6] : units[u], sizeof s - strlen(s) - 1);
        }
        if (i % 1000 == 0) snprintf(s, sizeof s, "0"); /* the bare zero, now and then */
        __int128 want = 0;
        int ok = ref_duration(s, &want) == 0;
        int64_t got = -12345;
        int rc = jr_duration_parse(s, &got);
        if (ok && want <= INT64_MAX) {
            cr_assert_eq(rc, 0, "\"%s\" refused", s);
            cr_assert(got == (int64_t)want, "\"%s\": got %lld", s, (long long)got);
            accepted++;
        } else {
            cr_assert_eq(rc, JR_EINVAL, "\"%s\" accepted as %lld", s, (long long)got);
            cr_assert_eq(got, -12345, "\"%s\": *ms changed", s);
            ok ? too_big++ : refused++;
        }
        char err[JR_ERRLEN] = "";
        int64_t r = -12345;
        rc = jr_duration_parse_range(s, 1, JR_TIMEOUT_MAX_MS, &r, err, sizeof err);
        if (ok && want >= 1 && want <= JR_TIMEOUT_MAX_MS) {
            cr_assert(rc == 0 && r == (int64_t)want, "\"%s\": %s", s, err);
        } else {
            cr_assert(rc == JR_EINVAL && r == -12345, "\"%s\" accepted as %lld", s, (long long)r);
            cr_assert(strstr(err, ok ? "from 1ms to 168h (7 days)" : "must be a duration like"),
                      "\"%s\": %s", s, err);
        }
    }
    /* The generator must reach each outcome often. */
    cr_log_info("accepted %d, too big %d, refused %d", accepted, too_big, refused);
    cr_expect_gt(accepted, 20000, "accepted %d", accepted);
    cr_expect_gt(too_big, 2000, "too big %d", too_big);
    cr_expect_gt(refused, 20000, "refused %d", refused);
}

Test(duration, range_messages_name_the_maximum) {
    struct {
        const char *s;
        int64_t min, max;
        const char *says; /* NULL = accepted */
    } cases[] = {
        {"3000000000h", 0, JR_DELAY_MAX_MS, "from 0 to 87600h (3650 days)"},
        {"87600h1ms", 0, JR_DELAY_MAX_MS, "from 0 to 87600h (3650 days)"},
        {"87600h", 0, JR_DELAY_MAX_MS, NULL},
        {"99999999999999999999h", 1, JR_TIMEOUT_MAX_MS, "from 1ms to 168h (7 days)"},
        {"168h", 1, JR_TIMEOUT_MAX_MS, NULL},
        {"0", 1, JR_TIMEOUT_MAX_MS, "from 1ms to 168h (7 days)"},
        {"721h", 1, JR_BACKOFF_MAX_MS, "to 720h (30 days)"},
        {"99ms", 100, 60000, "from 100ms to 60s"},
        {"1h", 10, 300000, "from 10ms to 5m"},
        {"soon", 0, 1000, "must be a duration like 500ms, 5s, 1m or 1h30m"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[JR_ERRLEN] = "";
        int64_t ms = -1;
        int rc = jr_duration_parse_range(cases[i].s, cases[i].min, cases[i].max, &ms, err, sizeof err);
        if (!cases[i].says) {
            cr_expect_eq(rc, 0, "\"%s\": %s", cases[i].s, err);
            continue;
        }
        cr_expect_eq(rc, JR_EINVAL, "\"%s\" accepted", cases[i].s);
        cr_expect_eq(ms, -1);
        cr_expect(strstr(err, cases[i].says), "\"%s\": \"%s\" lacks \"%s\"", cases[i].s, err,
                  cases[i].says);
    }
}

Test(duration, format) {
    char b[JR_DURATION_LEN];
    cr_expect_str_eq(jr_duration_format(0, b, sizeof b), "0");
    cr_expect_str_eq(jr_duration_format(250, b, sizeof b), "250ms");
    cr_expect_str_eq(jr_duration_format(60000, b, sizeof b), "60s");
    cr_expect_str_eq(jr_duration_format(3600000, b, sizeof b), "60m");
    cr_expect_str_eq(jr_duration_format(7200000, b, sizeof b), "2h");
    cr_expect_str_eq(jr_duration_format(JR_DELAY_MAX_MS, b, sizeof b), "87600h (3650 days)");
    cr_expect_str_eq(jr_duration_format(INT64_MAX, b, sizeof b), "9223372036854775807ms");
    cr_expect_lt(strlen(jr_duration_format(INT64_MIN, b, sizeof b)), sizeof b);
}

/* ---- time parsing ------------------------------------------------------- */

static int64_t tp(const char *s) { return parsed(jr_time_parse, "jr_time_parse", s); }
static void tp_bad(const char *s) { refused(jr_time_parse, s); }

Test(time_parse, rfc3339_utc) {
    cr_expect_eq(tp("1970-01-01T00:00:00Z"), 0);
    /* date -u -d 2026-12-01T09:30:00Z +%s -> 1796117400 */
    cr_expect_eq(tp("2026-12-01T09:30:00Z"), INT64_C(1796117400) * 1000000);
    cr_expect_eq(tp("2000-01-01T00:00:00Z"), INT64_C(946684800) * 1000000);
}

Test(time_parse, lowercase_t_and_z) {
    cr_expect_eq(tp("2026-12-01t09:30:00z"), tp("2026-12-01T09:30:00Z"));
}

Test(time_parse, fractions) {
    int64_t base = tp("2026-12-01T09:30:00Z");
    cr_expect_eq(tp("2026-12-01T09:30:00.25Z"), base + 250000);
    cr_expect_eq(tp("2026-12-01T09:30:00.123456Z"), base + 123456);
    /* Digits beyond microseconds are dropped (round down). */
    cr_expect_eq(tp("2026-12-01T09:30:00.1234569999Z"), base + 123456);
    cr_expect_eq(tp("2026-12-01T09:30:00.5Z"), base + 500000);
}

Test(time_parse, offsets) {
    int64_t utc = tp("2026-12-01T08:30:00.250Z");
    cr_expect_eq(tp("2026-12-01T09:30:00.250+01:00"), utc);
    cr_expect_eq(tp("2026-12-01T03:00:00.250-05:30"), utc);
    cr_expect_eq(tp("2026-12-01T08:30:00.250+00:00"), utc);
    cr_expect_eq(tp("2026-12-01T08:30:00.250-00:00"), utc);
    /* An offset can move the instant to another day. */
    cr_expect_eq(tp("2026-12-02T00:30:00+16:00"), utc - 250000);
}

Test(time_parse, before_1970) {
    cr_expect_eq(tp("1969-12-31T23:59:59Z"), -1000000);
    cr_expect_eq(tp("1969-12-31T23:59:59.5Z"), -500000);
}

Test(time_parse, leap_days) {
    cr_expect_eq(tp("2024-03-01T00:00:00Z") - tp("2024-02-29T00:00:00Z"), INT64_C(86400000000));
    cr_expect_eq(tp("2000-02-29T00:00:00Z"), INT64_C(951782400) * 1000000);
    tp_bad("2023-02-29T00:00:00Z"); /* not a leap year */
    tp_bad("1900-02-29T00:00:00Z"); /* divisible by 100, not by 400 */
    tp_bad("2024-02-30T00:00:00Z");
}

Test(time_parse, invalid_dates_and_times) {
    tp_bad("2026-00-01T00:00:00Z");
    tp_bad("2026-13-01T00:00:00Z");
    tp_bad("2026-01-00T00:00:00Z");
    tp_bad("2026-01-32T00:00:00Z");
    tp_bad("2026-04-31T00:00:00Z");
    tp_bad("2026-01-01T24:00:00Z");
    tp_bad("2026-01-01T00:60:00Z");
    tp_bad("2026-01-01T00:00:60Z");
    tp_bad("2026-01-01T00:00:00+24:00");
    tp_bad("2026-01-01T00:00:00+01:60");
}

Test(time_parse, malformed) {
    tp_bad("");
    tp_bad("2026-12-01T09:30:00");       /* missing zone */
    tp_bad("2026-12-01 09:30:00Z");      /* space instead of T */
    tp_bad("2026-12-01");                /* date only */
    tp_bad("2026-12-01T09:30Z");         /* no seconds */
    tp_bad("2026-12-01T09:30:00.Z");     /* '.' without digits */
    tp_bad("2026-12-01T09:30:00Zjunk");  /* trailing garbage */
    tp_bad("2026-12-01T09:30:00+0100");  /* offset without ':' */
    tp_bad("2026-12-01T09:30:00+01");
    tp_bad("26-12-01T09:30:00Z");
    tp_bad("2026-1-01T09:30:00Z");
}

Test(time_parse, unix_seconds) {
    cr_expect_eq(tp("0"), 0);
    cr_expect_eq(tp("1764581400"), INT64_C(1764581400) * 1000000);
    cr_expect_eq(tp("1764581400.25"), INT64_C(1764581400) * 1000000 + 250000);
    cr_expect_eq(tp("1764581400.0000019"), INT64_C(1764581400) * 1000000 + 1);
    cr_expect_eq(tp("1796117400"), tp("2026-12-01T09:30:00Z"));
}

Test(time_parse, unix_seconds_malformed) {
    tp_bad("-1");
    tp_bad("+1");
    tp_bad("1.");
    tp_bad(".5");
    tp_bad("12x");
    tp_bad("1764581400 ");
    tp_bad("1e9");
    tp_bad("99999999999999999999"); /* microseconds overflow int64 */
}

/* Times are refused outside the years 0000..9999, also when an offset
 * moves them there, and Unix seconds past 9999-12-31T23:59:59Z. */
Test(time_parse, range_is_years_0000_to_9999) {
    cr_expect_eq(tp("9999-12-31T23:59:59.999999Z"), JR_TIME_MAX_US);
    cr_expect_eq(tp("0000-01-01T00:00:00Z"), JR_TIME_MIN_US);
    cr_expect_eq(tp("253402300799.999999"), JR_TIME_MAX_US);
    cr_expect_eq(tp("9999-12-31T23:59:59+01:00"), tp("9999-12-31T22:59:59Z"));
    tp_bad("253402300800");
    tp_bad("9223372036854");
    tp_bad("9999-12-31T23:59:59-00:01");
    tp_bad("0000-01-01T00:00:00+00:01");
    tp_bad("10000-01-01T00:00:00Z");
    tp_bad("+2026-01-01T00:00:00Z");
    tp_bad("-001-01-01T00:00:00Z");
    tp_bad("2026-01-01T00:00:00+99:00");
    tp_bad("2026-01-01T00:00:00+1:00");
    tp_bad("2026-01-01T00:00:00\xef\xbc\x8b" "01:00"); /* fullwidth plus */
    tp_bad("\xd9\xa2\xd9\xa0\xd9\xa2\xd9\xa6-01-01T00:00:00Z"); /* Arabic-Indic 2026 */
}

/* Generated RFC 3339 times with fields in and out of range (years 0..9999,
 * month 13, day 32, hour 24, minute 60, second 60, offsets past 23:59)
 * against timegm as the reference: a valid one gives exactly its instant,
 * inside JR_TIME_MIN_US..JR_TIME_MAX_US; any other is refused. */
Test(time_parse, property_against_timegm) {
    uint64_t x = 0xD1B54A32D192ED03ULL;
    int valid = 0, refused = 0;
    for (int i = 0; i < 100000; i++) {
        int y = (int)(rnd(&x) % 4 == 0 ? (rnd(&x) % 2 ? rnd(&x) % 3 : 9997 + rnd(&x) % 3) : rnd(&x) % 10000);
        int mo = (int)(rnd(&x) % 14), d = (int)(rnd(&x) % 33), h = (int)(rnd(&x) % 25);
        int mi = (int)(rnd(&x) % 61), sec = (int)(rnd(&x) % 61);
        int oh = (int)(rnd(&x) % 25), om = (int)(rnd(&x) % 61), zone = (int)(rnd(&x) % 3);
        unsigned frac = (unsigned)(rnd(&x) % 1000000);
        char s[64];
        int n = snprintf(s, sizeof s, "%04d-%02d-%02dT%02d:%02d:%02d.%06u", y, mo, d, h, mi, sec, frac);
        if (zone == 0) snprintf(s + n, sizeof s - (size_t)n, "Z");
        else snprintf(s + n, sizeof s - (size_t)n, "%c%02d:%02d", zone == 1 ? '+' : '-', oh, om);
        if (zone == 0) oh = om = 0;
        int sign = zone == 2 ? -1 : 1;

        struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                        .tm_min = mi, .tm_sec = sec};
        time_t t = timegm(&tm); /* normalizes: compare to see if the date was real */
        int ok = mo >= 1 && mo <= 12 && d >= 1 && h <= 23 && mi <= 59 && sec <= 59 && oh <= 23 &&
                 om <= 59 && tm.tm_mday == d && tm.tm_mon == mo - 1;
        int64_t want = ((int64_t)t - sign * (oh * 3600 + om * 60)) * 1000000 + frac;
        ok = ok && want >= JR_TIME_MIN_US && want <= JR_TIME_MAX_US;
        int64_t got = -12345;
        int rc = jr_time_parse(s, &got);
        if (ok) {
            cr_assert(rc == 0 && got == want, "\"%s\": rc %d, %lld != %lld", s, rc, (long long)got,
                      (long long)want);
            valid++;
        } else {
            cr_assert(rc == JR_EINVAL && got == -12345, "\"%s\" accepted as %lld", s, (long long)got);
            refused++;
        }
    }
    cr_expect(valid > 20000 && refused > 20000, "valid %d, refused %d", valid, refused);
}

/* ---- time formatting ---------------------------------------------------- */

Test(time_format, known_values) {
    char buf[JR_TIME_LEN];
    cr_expect_str_eq(jr_time_format(0, buf), "1970-01-01T00:00:00.000Z");
    cr_expect_str_eq(jr_time_format(INT64_C(1796117400123), buf), "2026-12-01T09:30:00.123Z");
    cr_expect_str_eq(jr_time_format(INT64_C(951782400000), buf), "2000-02-29T00:00:00.000Z");
    cr_expect_str_eq(jr_time_format(-1, buf), "1969-12-31T23:59:59.999Z");
    cr_expect_eq(jr_time_format(5, buf), buf);
}

Test(time_format, extreme_values_fit) {
    char buf[JR_TIME_LEN];
    cr_expect_lt(strlen(jr_time_format(INT64_MAX, buf)), (size_t)JR_TIME_LEN);
    cr_expect_lt(strlen(jr_time_format(INT64_MIN, buf)), (size_t)JR_TIME_LEN);
}

Test(time_format, round_trips_through_parse) {
    /* Every day boundary and leap day from 1960 to 2105, plus odd millis. */
    char buf[JR_TIME_LEN];
    for (int64_t ms = INT64_C(-315619200000); ms < INT64_C(4291747200000);
         ms += INT64_C(86400000) * 7 + 3600000 + 61001) {
        int64_t us;
        jr_time_format(ms, buf);
        cr_assert_eq(strlen(buf), 24, "bad length: %s", buf);
        cr_assert_eq(jr_time_parse(buf, &us), 0, "cannot parse %s", buf);
        cr_assert_eq(us, ms * 1000, "%s: %lld != %lld", buf, (long long)us,
                     (long long)(ms * 1000));
    }
}

/* ---- Redis URLs --------------------------------------------------------- */

static jr_redis_url_t url_ok(const char *s) {
    jr_redis_url_t u;
    char err[JR_ERRLEN] = "";
    int rc = jr_redis_url_parse(s, &u, err, sizeof err);
    cr_assert_eq(rc, 0, "\"%s\": %s", s, err);
    return u;
}

/* Parse a bad URL; assert the message contains each of the NULL-terminated
 * fragments and that the struct is left zeroed. */
static void url_bad(const char *s, ...) {
    jr_redis_url_t u;
    char err[JR_ERRLEN] = "";
    memset(&u, 0x5a, sizeof u);
    cr_assert_eq(jr_redis_url_parse(s, &u, err, sizeof err), JR_EINVAL, "\"%s\" accepted", s);
    cr_expect(u.host == NULL && u.path == NULL && u.user == NULL && u.password == NULL &&
                  u.port == 0 && u.db == 0 && u.is_unix == 0,
              "\"%s\": struct not zeroed", s);
    va_list ap;
    va_start(ap, s);
    for (const char *frag; (frag = va_arg(ap, const char *));)
        cr_expect(strstr(err, frag) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", s, err,
                  frag);
    va_end(ap);
}

/* TCP URLs, each with every part it gives: the defaults (port 6379, db 0,
 * no user, no password) where it names none. */
Test(redis_url, tcp_parts) {
    static const struct {
        const char *url, *host;
        int port, db;
        const char *user, *password;
    } cases[] = {
        {"redis://localhost", "localhost", 6379, 0, NULL, NULL},
        {JR_DEFAULT_REDIS_URL, "127.0.0.1", 6379, 0, NULL, NULL},
        {"redis://10.0.0.5:6380/3", "10.0.0.5", 6380, 3, NULL, NULL},
        {"redis://cache.example.com/", "cache.example.com", 6379, 0, NULL, NULL},
        {"redis://:s3cret@host:7000/1", "host", 7000, 1, NULL, "s3cret"},
        /* user and password percent-decoded */
        {"redis://app%2Duser:p%40ss%3Aw%2Fd%25@host", "host", 6379, 0, "app-user", "p@ss:w/d%"},
        /* the password may hold ':' and (before the last '@') '@' unescaped */
        {"redis://u:a:b@c@host", "host", 6379, 0, "u", "a:b@c"},
        {"redis://[::1]:6390/2", "::1", 6390, 2, NULL, NULL},
        {"redis://:pw@[2001:db8::7]", "2001:db8::7", 6379, 0, NULL, "pw"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *url = cases[i].url;
        jr_redis_url_t u = url_ok(url);
        cr_expect_eq(u.is_unix, 0, "%s", url);
        cr_expect_null(u.path, "%s", url);
        cr_expect_str_eq(u.host, cases[i].host, "%s", url);
        cr_expect_eq(u.port, cases[i].port, "%s", url);
        cr_expect_eq(u.db, cases[i].db, "%s", url);
        if (cases[i].user) cr_expect_str_eq(u.user, cases[i].user, "%s", url);
        else cr_expect_null(u.user, "%s", url);
        if (cases[i].password) cr_expect_str_eq(u.password, cases[i].password, "%s", url);
        else cr_expect_null(u.password, "%s", url);
        jr_redis_url_free(&u);
    }
}

Test(redis_url, unix_socket) {
    jr_redis_url_t u = url_ok("unix:///run/redis/redis.sock");
    cr_expect_eq(u.is_unix, 1);
    cr_expect_str_eq(u.path, "/run/redis/redis.sock");
    cr_expect_null(u.host);
    cr_expect_eq(u.db, 0);
    jr_redis_url_free(&u);
    u = url_ok("unix:///tmp/r.sock?db=5");
    cr_expect_str_eq(u.path, "/tmp/r.sock");
    cr_expect_eq(u.db, 5);
    jr_redis_url_free(&u);
}

/* rediss:// is redis:// over TLS: the same form, is_tls set, and the
 * password hidden as in redis:// URLs. */
Test(redis_url, rediss_is_tls) {
    jr_redis_url_t u = url_ok("rediss://app:s%40cret@db.example.com:6380/3");
    cr_expect_eq(u.is_tls, 1);
    cr_expect_eq(u.is_unix, 0);
    cr_expect_str_eq(u.host, "db.example.com");
    cr_expect_eq(u.port, 6380);
    cr_expect_str_eq(u.user, "app");
    cr_expect_str_eq(u.password, "s@cret");
    cr_expect_eq(u.db, 3);
    jr_redis_url_free(&u);
    u = url_ok("REDISS://127.0.0.1");
    cr_expect_eq(u.is_tls, 1);
    cr_expect_eq(u.port, 6379);
    jr_redis_url_free(&u);
    u = url_ok("redis://h");
    cr_expect_eq(u.is_tls, 0);
    jr_redis_url_free(&u);
    char shown[128];
    jr_redis_url_redact("rediss://app:sekret@h:6380/1", shown, sizeof shown);
    cr_expect_str_eq(shown, "rediss://app:***@h:6380/1");
    jr_redis_url_redact("rediss://app:sekret", shown, sizeof shown);
    cr_expect_null(strstr(shown, "sekret"), "%s", shown);
    url_bad("rediss://h?ca=x", "unexpected parameters", NULL);
}

Test(redis_url, scheme_case_insensitive) {
    jr_redis_url_t u = url_ok("REDIS://h:1");
    cr_expect_str_eq(u.host, "h");
    cr_expect_eq(u.port, 1);
    jr_redis_url_free(&u);
}

Test(redis_url, bad_scheme) {
    url_bad("http://localhost", "unsupported scheme \"http\"", "redis://", "unix://", NULL);
    url_bad("redisss://localhost", "unsupported scheme \"redisss\"", "rediss://", NULL);
    url_bad("localhost:6379", "missing scheme", "\"localhost:6379\"", NULL);
    url_bad("", "empty", NULL);
}

Test(redis_url, bad_port) {
    url_bad("redis://h:99999", "bad port \"99999\"", "in redis URL \"redis://h:99999\"", NULL);
    url_bad("redis://h:0", "bad port \"0\"", NULL);
    url_bad("redis://h:", "bad port \"\"", NULL);
    url_bad("redis://h:12ab/0", "bad port (not a number)", "\"redis://h:***\"", NULL);
    url_bad("redis://[::1]:x", "bad port (not a number)", NULL);
}

Test(redis_url, bad_host) {
    url_bad("redis://", "missing host", NULL);
    url_bad("redis://:pw@:6379", "missing host", NULL);
    url_bad("redis://[]:6379", "missing host", NULL);
    url_bad("redis://::1:6379", "bad host", "brackets", NULL);
    url_bad("redis://[::1:6379", "missing \"]\"", NULL);
    url_bad("redis://[::1]x", "unexpected \"x\"", NULL);
    url_bad("redis://[zz::1]", "bad IPv6 host \"zz::1\"", NULL);
    url_bad("redis://bad host", "bad host \"bad host\"", NULL);
    url_bad("redis://host?x=1", "unexpected parameters after \"?\"", NULL);
}

Test(redis_url, bad_db) {
    url_bad("redis://h/abc", "bad database \"abc\"", NULL);
    url_bad("redis://h/-1", "bad database \"-1\"", NULL);
    url_bad("redis://h/99999999999", "bad database \"99999999999\"", NULL);
    url_bad("unix:///s?db=x", "bad database \"x\"", NULL);
}

Test(redis_url, bad_userinfo) {
    url_bad("redis://:p%4@host", "percent-escape", NULL);
    url_bad("redis://:p%zz@host", "percent-escape", NULL);
    url_bad("redis://:p%00@host", "percent-escape", NULL);
}

/* A userinfo without ':' is the password, as redis-cli reads it: used, and
 * never shown. */
Test(redis_url, userinfo_without_colon_is_the_password) {
    jr_redis_url_t u = url_ok("redis://SECRET@host:7000");
    cr_expect_null(u.user);
    cr_expect_str_eq(u.password, "SECRET");
    cr_expect_str_eq(u.host, "host");
    cr_expect_eq(u.port, 7000);
    jr_redis_url_free(&u);
    char out[256], err[JR_ERRLEN];
    jr_redis_url_redact("redis://SECRET@host:7000", out, sizeof out);
    cr_expect_str_eq(out, "redis://***@host:7000");
    cr_expect_eq(jr_redis_url_parse("redis://SECRET@host:x", &u, err, sizeof err), JR_EINVAL);
    cr_expect_null(strstr(err, "SECRET"), "%s", err);
    cr_expect(strstr(err, "bad port (not a number)"), "%s", err);
}

/* A password with '/', '?' or '#' unescaped stays the password: never
 * parsed as a port, host or database and quoted as one. */
Test(redis_url, unescaped_password_is_not_parsed_as_host_or_port) {
    jr_redis_url_t u = url_ok("redis://u:ab/cd?ef#gh@host:7000/3");
    cr_expect_str_eq(u.password, "ab/cd?ef#gh");
    cr_expect_str_eq(u.host, "host");
    cr_expect_eq(u.port, 7000);
    cr_expect_eq(u.db, 3);
    jr_redis_url_free(&u);
}

Test(redis_url, password_not_in_messages) {
    char err[JR_ERRLEN];
    jr_redis_url_t u;
    cr_assert_eq(jr_redis_url_parse("redis://bob:hunter2@h:99999", &u, err, sizeof err),
                 JR_EINVAL);
    cr_expect_null(strstr(err, "hunter2"), "password leaked: %s", err);
    cr_expect(strstr(err, "redis://bob:***@h:99999") != NULL, "%s", err);
}

Test(redis_url, bad_unix) {
    url_bad("unix://", "missing absolute socket path", NULL);
    url_bad("unix:///", "missing absolute socket path", NULL);
    url_bad("unix://relative.sock", "missing absolute socket path", NULL);
    url_bad("unix:///s?pass=x", "unknown parameter \"pass\"", "db, user or password", NULL);
    char long_url[300] = "unix:///";
    memset(long_url + 8, 'a', 200);
    long_url[208] = '\0';
    url_bad(long_url, "socket path longer than", NULL);
}

/* The documented forms of a password-protected unix socket: userinfo
 * before the path, or parameters; percent-escapes decoded in both. */
Test(redis_url, unix_socket_with_password) {
    struct {
        const char *url;
        const char *user, *password, *path;
        int db;
    } cases[] = {
        {"unix://:secret@/tmp/r.sock", NULL, "secret", "/tmp/r.sock", 0},
        {"unix://alice:s3cret@/tmp/r.sock?db=3", "alice", "s3cret", "/tmp/r.sock", 3},
        {"unix://:p%40ss%3Aw%2Frd%25%26%3F%20x@/tmp/r.sock", NULL, "p@ss:w/rd%&? x", "/tmp/r.sock", 0},
        {"unix://:a@b:c@/tmp/r.sock", NULL, "a@b:c", "/tmp/r.sock", 0},
        {"unix://:pw@/tmp/with@sign/r.sock", NULL, "pw", "/tmp/with@sign/r.sock", 0},
        {"unix:///tmp/r.sock?password=secret", NULL, "secret", "/tmp/r.sock", 0},
        {"unix:///tmp/r.sock?db=2&user=bob&password=p%26w%3D%2F", "bob", "p&w=/", "/tmp/r.sock", 2},
        {"unix:///tmp/r.sock?password=x&db=7", NULL, "x", "/tmp/r.sock", 7},
        {"unix:///tmp/a@b/r.sock?db=1", NULL, NULL, "/tmp/a@b/r.sock", 1},
        {"UNIX://:pw@/tmp/r.sock", NULL, "pw", "/tmp/r.sock", 0},
        {"unix://alice@/tmp/r.sock", NULL, "alice", "/tmp/r.sock", 0},
        {"unix://:pa/ss@/tmp/r.sock", NULL, "pa/ss", "/tmp/r.sock", 0},
        {"unix://:pa@/ss@/tmp/r.sock", NULL, "pa@/ss", "/tmp/r.sock", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jr_redis_url_t u = url_ok(cases[i].url);
        cr_expect_eq(u.is_unix, 1, "%s", cases[i].url);
        cr_expect_str_eq(u.path, cases[i].path, "%s", cases[i].url);
        cr_expect_eq(u.db, cases[i].db, "%s", cases[i].url);
        if (cases[i].user) cr_expect_str_eq(u.user, cases[i].user, "%s", cases[i].url);
        else cr_expect_null(u.user, "%s", cases[i].url);
        if (cases[i].password) cr_expect_str_eq(u.password, cases[i].password, "%s", cases[i].url);
        else cr_expect_null(u.password, "%s", cases[i].url);
        jr_redis_url_free(&u);
    }
}

Test(redis_url, bad_unix_auth) {
    url_bad("unix://:pw/tmp/r.sock", "missing absolute socket path", NULL);
    url_bad("unix://:pw@tmp/r.sock", "missing absolute socket path", NULL);
    url_bad("unix://:pw@/", "missing absolute socket path", NULL);
    url_bad("unix://:a@/s?password=b", "password given twice", NULL);
    url_bad("unix:///s?password=a&password=b", "password given twice", NULL);
    url_bad("unix://u:p@/s?user=v", "user given twice", NULL);
    url_bad("unix:///s?db=1&db=2", "\"db\" given twice", NULL);
    /* A user whose password comes from elsewhere (redis.password_file). */
    const char *userless[] = {"unix:///s?user=bob", "unix://bob:@/s", "redis://bob:@host"};
    for (size_t i = 0; i < 3; i++) {
        jr_redis_url_t u = url_ok(userless[i]);
        cr_expect_str_eq(u.user, "bob", "%s", userless[i]);
        cr_expect_null(u.password, "%s", userless[i]);
        jr_redis_url_free(&u);
    }
    url_bad("unix:///s?password=", "empty password", NULL);
    url_bad("unix:///s?password", "empty password", NULL);
    url_bad("unix:///s?password=%zz", "bad percent-escape in password", NULL);
    url_bad("unix:///s?password=%00", "bad percent-escape in password", NULL);
    url_bad("unix://:%4@/s", "percent-escape", NULL);
    url_bad("unix:///s?", "unknown parameter \"\"", NULL);
    url_bad("unix:///s?db=1&", "unknown parameter \"\"", NULL);
}

/* The password never shows in a message or log, in any form. */
Test(redis_url, unix_password_redacted) {
    struct {
        const char *url, *shown;
    } cases[] = {
        {"unix://:hunter2@/tmp/r.sock", "unix://:***@/tmp/r.sock"},
        {"unix://alice:hunter2@/tmp/r.sock?db=1", "unix://alice:***@/tmp/r.sock?db=1"},
        {"unix://:hun/ter2@/tmp/r.sock", "unix://:***@/tmp/r.sock"},
        {"unix:///tmp/r.sock?db=1&password=hunter2&user=bob", "unix:///tmp/r.sock?db=1&password=***"},
        {"unix:///tmp/r.sock?password=hunter2", "unix:///tmp/r.sock?password=***"},
        {"unix:///tmp/a@b:c/r.sock", "unix:///tmp/a@b:c/r.sock"},
        {"redis://:hun/ter2@host", "redis://:***@host"},
        {"redis://:hun?ter2@host", "redis://:***@host"},
        {"redis://:hun#ter2@host/1", "redis://:***@host/1"},
        {"unix://:hun?ter2@/tmp/r.sock?db=1", "unix://:***@/tmp/r.sock?db=1"},
        {"redis://u:hunter2@host/1", "redis://u:***@host/1"},
        {"redis://host:6379", "redis://host:6379"},
        {"redis://[::1]:6379/2", "redis://[::1]:6379/2"},
        {"redis://[2001:db8::7]", "redis://[2001:db8::7]"},
        {"redis://:pw@[::1]:6379", "redis://:***@[::1]:6379"},
        {"redis://u:hunter2", "redis://u:***"},
        {"unix://hunter2", "unix://***"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256];
        jr_redis_url_redact(cases[i].url, out, sizeof out);
        cr_expect_str_eq(out, cases[i].shown);
    }
    /* A cut output never shows a part of the password either. */
    char small[12];
    jr_redis_url_redact("unix:///s?password=hunter2", small, sizeof small);
    cr_expect_null(strstr(small, "hun"), "%s", small);
    /* Nor does an error message about a URL with a password. */
    const char *bad[] = {"unix://:hunter2@/s?db=x", "unix:///s?password=hunter2&db=x",
                         "unix://:hunter2@/s?frob=1", "redis://:hun/ter2@host:x"};
    for (size_t i = 0; i < 4; i++) {
        char err[JR_ERRLEN];
        jr_redis_url_t u;
        cr_expect_eq(jr_redis_url_parse(bad[i], &u, err, sizeof err), JR_EINVAL, "%s", bad[i]);
        cr_expect_null(strstr(err, "hunter2"), "leaked: %s", err);
        cr_expect_null(strstr(err, "ter2"), "leaked: %s", err);
    }
}

/* Random passwords of any printable bytes, percent-encoded where needed,
 * in each URL form: each decodes to itself, and neither the redacted URL
 * nor the message about a bad URL holding it shows it (raw or encoded). */
Test(redis_url, any_password_round_trips_and_stays_hidden) {
    static const char specials[] = "@:/?&=%#+ !$'()*,;[]~\"\\";
    uint64_t x = 0x2545F4914F6CDD1DULL;
    for (int i = 0; i < 5000; i++) {
        char pw[40], enc[130], url[400], shown[400], err[JR_ERRLEN];
        size_t n = 8 + rnd(&x) % 24, e = 0;
        for (size_t k = 0; k < n; k++) {
            char c = rnd(&x) % 3 ? (char)('a' + rnd(&x) % 26) : specials[rnd(&x) % (sizeof specials - 1)];
            pw[k] = c;
            if ((c >= 'a' && c <= 'z')) enc[e++] = c;
            else e += (size_t)snprintf(enc + e, 4, "%%%02X", (unsigned char)c);
        }
        pw[n] = enc[e] = '\0';
        const char *forms[] = {"redis://u:%s@host:7000/2", "unix://u:%s@/tmp/r.sock?db=2",
                               "unix:///tmp/r.sock?db=2&user=u&password=%s",
                               "unix:///tmp/r.sock?password=%s&user=u&db=2"};
        for (int f = 0; f < 4; f++) {
            snprintf(url, sizeof url, forms[f], enc);
            jr_redis_url_t u = url_ok(url);
            cr_assert_str_eq(u.password, pw, "%s", url);
            cr_assert_str_eq(u.user, "u");
            cr_assert_eq(u.db, 2);
            jr_redis_url_free(&u);
            jr_redis_url_redact(url, shown, sizeof shown);
            cr_assert_null(strstr(shown, enc), "%s -> %s", url, shown);
            cr_assert(strstr(shown, "***"), "%s -> %s", url, shown);
            /* The same URL made invalid after the password. */
            strcat(url, f == 0 ? "x" : "&frob=1");
            cr_assert_eq(jr_redis_url_parse(url, &u, err, sizeof err), JR_EINVAL, "%s", url);
            cr_assert_null(strstr(err, enc), "%s -> %s", url, err);
        }
    }
}

/* 1 if hay holds pw or any 4-byte piece of it. */
static int holds_piece(const char *hay, const char *pw) {
    size_t n = strlen(pw);
    for (size_t i = 0; i + 4 <= n; i++)
        if (memmem(hay, strlen(hay), pw + i, 4)) return 1;
    return strstr(hay, pw) != NULL;
}

/* Random raw (unescaped) passwords with every URL-special byte, in random
 * well-formed and malformed URLs (bad scheme, host, port, db, path,
 * parameters, a missing '@', typos): neither the parser's message nor the
 * redacted URL ever shows the password or any 4-byte piece of it. Every
 * 4-byte window of a password holds a letter of QXZJKW, which no message
 * text or URL part around it has, so a hit is always a leak. */
Test(redis_url, no_piece_of_a_password_in_any_message) {
    static const char specials[] = "@:/?&=%#+!$*,;[]~\"\\ .-_0123456789";
    static const char marks[] = "QXZJKW";
    static const char *forms[] = {
        "redis://%s@host:6379", "redis://u:%s@host:6379/1", "redis://u:%s@host:99999",
        "redis://u:%s@host:abc", "redis://u:%s@ho st", "redis://u:%s@host/xyz",
        "redis://u:%s@[::1", "redis://u:%s@[zz::1]:1", "redis://u:%s@", "redis://u:%s@host?db=1",
        "redis://:%s@:6379", "redis:/u:%s@host", "redis//u:%s@host", "rediss://u:%s@host",
        "u:%s@host", "http://u:%s@host", "redis://u:%s", "unix://u:%s@/tmp/s",
        "unix://u:%s@relative", "unix://u:%s@/tmp/s?db=x", "unix://u:%s@/tmp/s?frob=1",
        "unix://u:%s@/", "unix:///tmp/s?password=%s", "unix:///tmp/s?password=%s&db=x",
        "unix:///tmp/s?password=%s&frob=1", "unix:///tmp/s?pasword=%s",
        "unix://:%s@/tmp/s?password=again", "unix://%s@/tmp/s?user=bob", "unix://%s",
        "unix:%s@/tmp/s", "redis://u:%s@host:1:2", "redis://u:%s@host/1?x", "unix://%s@/s",
        "redis://%s@host:x", "u:%s",
        "redis-sentinel://u:%s@h:1,h:2/m", "redis-sentinel://%s@h/m", "redis-sentinel://u:%s@h:1,/m",
        "redis-sentinel://u:%s@h:x/m", "redis-sentinel://u:%s@h:1", "redis-sentinel://u:%s",
        "redis-sentinel://h:1/m?password=%s", "redis-sentinel://u:%s@h/b@d", "redis-sentinel://u:%s@h/m?db=x",
    };
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < 3000; i++) {
        char pw[40], url[200], shown[256], err[JR_ERRLEN];
        size_t n = 4 + rnd(&x) % 30;
        for (size_t k = 0; k < n; k++)
            pw[k] = k % 3 == 0 ? marks[rnd(&x) % 6] : specials[rnd(&x) % (sizeof specials - 1)];
        pw[n] = '\0';
        const char *form = forms[rnd(&x) % (sizeof forms / sizeof forms[0])];
        /* What the URL grammar makes something else: a ':' in a userinfo
         * without a user (its head is the user), an "@/" in a unix userinfo
         * (it ends there), an '@' where none follows (the last one ends it). */
        for (size_t k = 0; k < n; k++) {
            if (pw[k] == ':' && strstr(form, ":%s") == NULL && strstr(form, "=%s") == NULL)
                pw[k] = '+';
            if (pw[k] == '@' && pw[k + 1] == '/' && !strncmp(form, "unix", 4)) pw[k] = '-';
            if (pw[k] == '@' && !strchr(form, '@')) pw[k] = '-'; /* the last '@' ends it */
        }
        snprintf(url, sizeof url, form, pw);
        jr_redis_url_t u;
        err[0] = '\0';
        int rc = jr_redis_url_parse(url, &u, err, sizeof err);
        if (rc == 0) jr_redis_url_free(&u);
        cr_assert(!holds_piece(err, pw), "password \"%s\" in \"%s\": message \"%s\"", pw, url, err);
        jr_redis_url_redact(url, shown, sizeof shown);
        cr_assert(!holds_piece(shown, pw), "password \"%s\" in \"%s\": shown \"%s\"", pw, url, shown);
    }
}

/* redis-sentinel://: the sentinels in order (port 26379 by default), the
 * master name, and the userinfo and db of the primary. */
Test(redis_url, sentinel_parts) {
    jr_redis_url_t u = url_ok("redis-sentinel://bob:p%40ss@10.0.0.1:26380,s2,[::1]:5000/mymaster?db=3");
    cr_assert(u.is_sentinel && !u.is_unix && u.host == NULL && u.path == NULL);
    cr_assert_eq(u.nsentinels, 3);
    cr_expect_str_eq(u.sentinels[0].host, "10.0.0.1");
    cr_expect_eq(u.sentinels[0].port, 26380);
    cr_expect_str_eq(u.sentinels[1].host, "s2");
    cr_expect_eq(u.sentinels[1].port, 26379);
    cr_expect_str_eq(u.sentinels[2].host, "::1");
    cr_expect_eq(u.sentinels[2].port, 5000);
    cr_expect_str_eq(u.master, "mymaster");
    cr_expect_str_eq(u.user, "bob");
    cr_expect_str_eq(u.password, "p@ss");
    cr_expect_eq(u.db, 3);
    jr_redis_url_free(&u);
    u = url_ok("REDIS-SENTINEL://h/m");
    cr_expect(u.is_sentinel && u.nsentinels == 1 && u.sentinels[0].port == 26379 && !u.password && !u.db);
    jr_redis_url_free(&u);
    cr_expect(jr_redis_url_is_sentinel("redis-sentinel://h/m") && !jr_redis_url_is_sentinel("redis://h"));
    char out[128];
    jr_redis_url_redact("redis-sentinel://u:SECRET@h:1,h:2/m?db=1", out, sizeof out);
    cr_expect_str_eq(out, "redis-sentinel://u:***@h:1,h:2/m?db=1");
    jr_redis_url_redact("redis-sentinel://h:1,h:2/m", out, sizeof out);
    cr_expect_str_eq(out, "redis-sentinel://h:1,h:2/m");
}

Test(redis_url, sentinel_errors) {
    url_bad("redis-sentinel://h:26379", "missing master name", "redis-sentinel://h:26379", NULL);
    url_bad("redis-sentinel://h:26379/", "missing master name", NULL);
    url_bad("redis-sentinel://h:26379/?db=1", "missing master name", NULL);
    url_bad("redis-sentinel://h:1,,h:2/m", "empty sentinel address (number 2 in the list)", NULL);
    url_bad("redis-sentinel://,h/m", "empty sentinel address (number 1 in the list)", NULL);
    url_bad("redis-sentinel:///m", "empty sentinel address (number 1", NULL);
    url_bad("redis-sentinel://h:1,h:99999/m", "bad port of sentinel number 2", "(1 to 65535)", NULL);
    url_bad("redis-sentinel://h:0/m", "bad port of sentinel number 1", NULL);
    url_bad("redis-sentinel://h:x/m", "bad port of sentinel number 1", NULL);
    url_bad("redis-sentinel://h:1,b d:2/m", "bad or missing host of sentinel number 2", NULL);
    url_bad("redis-sentinel://[zz]:1/m", "bad or missing host of sentinel number 1", NULL);
    url_bad("redis-sentinel://h/m m", "bad master name", NULL);
    url_bad("redis-sentinel://h/m?db=x", "bad database", NULL);
    url_bad("redis-sentinel://h/m?frob=1", "unknown parameter", NULL);
    /* a master name as long as the buffers that hold it is taken whole; a
     * longer one is refused, not cut (the +switch-master of a cut name
     * would never match) */
    char url[400] = "redis-sentinel://h/";
    size_t n = strlen(url);
    memset(url + n, 'm', JR_MASTER_NAME_MAX);
    url[n + JR_MASTER_NAME_MAX] = '\0';
    jr_redis_url_t u = url_ok(url);
    cr_expect_eq(strlen(u.master), JR_MASTER_NAME_MAX);
    jr_redis_url_free(&u);
    strcat(url, "m");
    url_bad(url, "master name of 256 bytes", "(at most 255)", NULL);
}

Test(redis_url, free_is_safe_twice_and_on_zeroed) {
    jr_redis_url_t u = url_ok("redis://:x@h");
    jr_redis_url_free(&u);
    jr_redis_url_free(&u);
    jr_redis_url_t z = {0};
    jr_redis_url_free(&z);
    cr_expect_null(u.host);
}

Test(redis_url, null_err_buffer_ok) {
    jr_redis_url_t u;
    cr_expect_eq(jr_redis_url_parse("http://x", &u, NULL, 0), JR_EINVAL);
}

/* ---- errors and clocks -------------------------------------------------- */

Test(strerror, every_code_has_text) {
    cr_expect_str_eq(jr_strerror(JR_ENOMEM), "out of memory");
    cr_expect_str_eq(jr_strerror(JR_EINVAL), "invalid value");
    cr_expect_str_eq(jr_strerror(JR_EINTR), "interrupted");
    cr_expect_str_eq(jr_strerror(0), "success");
    cr_expect_str_eq(jr_strerror(-1000), "unknown error");
    cr_expect_str_eq(jr_strerror(5), "unknown error");
    /* Codes are distinct and negative. */
    cr_expect_lt(JR_ENOMEM, 0);
    cr_expect_neq(JR_ENOMEM, JR_EINVAL);
}

Test(clock, wall_is_unix_ms) {
    int64_t before = (int64_t)time(NULL) * 1000;
    int64_t now = jr_wall_ms();
    cr_expect_geq(now, before);
    cr_expect_lt(now, before + 2000);
}

Test(clock, monotonic_advances) {
    int64_t a = jr_mono_us();
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int64_t b = jr_mono_us();
    cr_expect_geq(b - a, 20000);
    cr_expect_lt(b - a, 2000000);
}

/* ---- backoff ------------------------------------------------------------- */

Test(backoff, ceiling_doubles_per_attempt_up_to_the_cap) {
    /* The largest random number gives the ceiling itself. */
    cr_expect_eq(jr_backoff_ms(1, 1000, 3600000, UINT64_MAX - (UINT64_MAX % 1001)), 0);
    int64_t expect[] = {1000, 2000, 4000, 8000, 16000};
    for (uint32_t a = 1; a <= 5; a++) {
        uint64_t top = (uint64_t)expect[a - 1];
        cr_expect_eq(jr_backoff_ms(a, 1000, 3600000, top), (int64_t)top, "attempt %u", a);
        cr_expect_eq(jr_backoff_ms(a, 1000, 3600000, top + 1), 0, "attempt %u wraps to 0", a);
    }
    cr_expect_eq(jr_backoff_ms(40, 1000, 3600000, 3600000), 3600000, "capped");
    cr_expect_eq(jr_backoff_ms(UINT32_MAX, 1000, 3600000, 3600000), 3600000, "no overflow");
    cr_expect_eq(jr_backoff_ms(70, INT64_MAX / 4, INT64_MAX, 5), 5, "no overflow near INT64_MAX");
    cr_expect_eq(jr_backoff_ms(3, 0, 1000, 12345), 0, "zero base = retry at once");
}

Test(backoff, full_jitter_spreads_over_the_whole_range) {
    /* Attempt 4 with base 100 ms: uniform in [0, 800]. */
    uint64_t x = 88172645463325252ULL;
    int64_t lo = INT64_MAX, hi = -1, sum = 0;
    enum { N = 20000 };
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t d = jr_backoff_ms(4, 100, 3600000, x);
        cr_assert(d >= 0 && d <= 800, "delay %lld outside [0, 800]", (long long)d);
        lo = d < lo ? d : lo, hi = d > hi ? d : hi, sum += d;
    }
    cr_expect_leq(lo, 5, "never near 0: min %lld", (long long)lo);
    cr_expect_geq(hi, 795, "never near the ceiling: max %lld", (long long)hi);
    cr_expect(sum / N > 380 && sum / N < 420, "mean %lld, expected about 400", (long long)(sum / N));
}
