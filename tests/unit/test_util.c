/* Unit tests for util.c: durations, times, Redis URLs, error strings. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "jr.h"
#include "util.h"

/* ---- durations ---------------------------------------------------------- */

static int64_t dur(const char *s) {
    int64_t ms = -12345;
    int rc = jr_duration_parse(s, &ms);
    cr_assert_eq(rc, 0, "jr_duration_parse(\"%s\") failed: %d", s, rc);
    return ms;
}

static void dur_bad(const char *s) {
    int64_t ms = -12345;
    cr_expect_eq(jr_duration_parse(s, &ms), JR_EINVAL, "\"%s\" should be rejected", s);
    cr_expect_eq(ms, -12345, "\"%s\": *ms must stay unchanged on error", s);
}

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

Test(duration, fractions_round_down) {
    cr_expect_eq(dur("1.5s"), 1500);
    cr_expect_eq(dur("0.25h"), 900000);
    cr_expect_eq(dur("1.5ms"), 1);
    cr_expect_eq(dur("0.0019s"), 1);
    cr_expect_eq(dur("1.9999s"), 1999);
    /* Far more digits than fit in an integer still round down exactly. */
    cr_expect_eq(dur("0.99999999999999999999999999s"), 999);
}

Test(duration, compound) {
    cr_expect_eq(dur("1h30m"), 5400000);
    cr_expect_eq(dur("1m30s"), 90000);
    cr_expect_eq(dur("1h1m1s1ms"), 3661001);
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
    dur_bad("9223372036854775807.9ms1ms");
}

Test(duration, null_rejected) {
    int64_t ms = 7;
    cr_expect_eq(jr_duration_parse(NULL, &ms), JR_EINVAL);
    cr_expect_eq(ms, 7);
}

/* ---- time parsing ------------------------------------------------------- */

static int64_t tp(const char *s) {
    int64_t us = -12345;
    int rc = jr_time_parse(s, &us);
    cr_assert_eq(rc, 0, "jr_time_parse(\"%s\") failed: %d", s, rc);
    return us;
}

static void tp_bad(const char *s) {
    int64_t us = -12345;
    cr_expect_eq(jr_time_parse(s, &us), JR_EINVAL, "\"%s\" should be rejected", s);
    cr_expect_eq(us, -12345, "\"%s\": *us must stay unchanged on error", s);
}

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

Test(redis_url, host_only_defaults) {
    jr_redis_url_t u = url_ok("redis://localhost");
    cr_expect_eq(u.is_unix, 0);
    cr_expect_str_eq(u.host, "localhost");
    cr_expect_eq(u.port, 6379);
    cr_expect_eq(u.db, 0);
    cr_expect_null(u.path);
    cr_expect_null(u.user);
    cr_expect_null(u.password);
    jr_redis_url_free(&u);
}

Test(redis_url, default_url) {
    jr_redis_url_t u = url_ok(JR_DEFAULT_REDIS_URL);
    cr_expect_str_eq(u.host, "127.0.0.1");
    cr_expect_eq(u.port, 6379);
    jr_redis_url_free(&u);
}

Test(redis_url, host_port_db) {
    jr_redis_url_t u = url_ok("redis://10.0.0.5:6380/3");
    cr_expect_str_eq(u.host, "10.0.0.5");
    cr_expect_eq(u.port, 6380);
    cr_expect_eq(u.db, 3);
    jr_redis_url_free(&u);
    u = url_ok("redis://cache.example.com/");
    cr_expect_str_eq(u.host, "cache.example.com");
    cr_expect_eq(u.db, 0);
    jr_redis_url_free(&u);
}

Test(redis_url, password_only) {
    jr_redis_url_t u = url_ok("redis://:s3cret@host:7000/1");
    cr_expect_null(u.user);
    cr_expect_str_eq(u.password, "s3cret");
    cr_expect_str_eq(u.host, "host");
    cr_expect_eq(u.port, 7000);
    cr_expect_eq(u.db, 1);
    jr_redis_url_free(&u);
}

Test(redis_url, user_and_password_percent_decoded) {
    jr_redis_url_t u = url_ok("redis://app%2Duser:p%40ss%3Aw%2Fd%25@host");
    cr_expect_str_eq(u.user, "app-user");
    cr_expect_str_eq(u.password, "p@ss:w/d%");
    cr_expect_str_eq(u.host, "host");
    jr_redis_url_free(&u);
    /* The password may hold ':' and (before the last '@') '@' unescaped. */
    u = url_ok("redis://u:a:b@c@host");
    cr_expect_str_eq(u.user, "u");
    cr_expect_str_eq(u.password, "a:b@c");
    cr_expect_str_eq(u.host, "host");
    jr_redis_url_free(&u);
}

Test(redis_url, ipv6) {
    jr_redis_url_t u = url_ok("redis://[::1]:6390/2");
    cr_expect_str_eq(u.host, "::1");
    cr_expect_eq(u.port, 6390);
    cr_expect_eq(u.db, 2);
    jr_redis_url_free(&u);
    u = url_ok("redis://:pw@[2001:db8::7]");
    cr_expect_str_eq(u.host, "2001:db8::7");
    cr_expect_eq(u.port, 6379);
    cr_expect_str_eq(u.password, "pw");
    jr_redis_url_free(&u);
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

Test(redis_url, scheme_case_insensitive) {
    jr_redis_url_t u = url_ok("REDIS://h:1");
    cr_expect_str_eq(u.host, "h");
    cr_expect_eq(u.port, 1);
    jr_redis_url_free(&u);
}

Test(redis_url, bad_scheme) {
    url_bad("http://localhost", "unsupported scheme \"http\"", "redis://", "unix://", NULL);
    url_bad("rediss://localhost", "unsupported scheme \"rediss\"", NULL);
    url_bad("localhost:6379", "missing scheme", "\"localhost:6379\"", NULL);
    url_bad("", "empty", NULL);
}

Test(redis_url, bad_port) {
    url_bad("redis://h:99999", "bad port \"99999\"", "in redis URL \"redis://h:99999\"", NULL);
    url_bad("redis://h:0", "bad port \"0\"", NULL);
    url_bad("redis://h:", "bad port \"\"", NULL);
    url_bad("redis://h:12ab/0", "bad port \"12ab\"", NULL);
    url_bad("redis://[::1]:x", "bad port \"x\"", NULL);
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
    url_bad("redis://host?x=1", "bad host \"host?x=1\"", NULL);
}

Test(redis_url, bad_db) {
    url_bad("redis://h/abc", "bad database \"abc\"", NULL);
    url_bad("redis://h/-1", "bad database \"-1\"", NULL);
    url_bad("redis://h/99999999999", "bad database \"99999999999\"", NULL);
    url_bad("unix:///s?db=x", "bad database \"x\"", NULL);
}

Test(redis_url, bad_userinfo) {
    url_bad("redis://user@host", "missing \":\"", NULL);
    url_bad("redis://:p%4@host", "percent-escape", NULL);
    url_bad("redis://:p%zz@host", "percent-escape", NULL);
    url_bad("redis://:p%00@host", "percent-escape", NULL);
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
    url_bad("unix:///s?password=x", "unknown parameter \"password=x\"", NULL);
    char long_url[300] = "unix:///";
    memset(long_url + 8, 'a', 200);
    long_url[208] = '\0';
    url_bad(long_url, "socket path longer than", NULL);
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
