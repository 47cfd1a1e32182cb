/* Unit tests for cron.c: the parser, next firing (month ends, leap days, DST
 * in Europe/Berlin and America/New_York, names, steps, the OR rule, 6
 * fields), schedule definitions, and a seeded fuzz of both. */
#define _DEFAULT_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cron.h"
#include "jr.h"
#include "util.h"

static int64_t ms_of(const char *rfc3339) {
    int64_t us;
    cr_assert_eq(jr_time_parse(rfc3339, &us), 0, "bad test time %s", rfc3339);
    return us / 1000;
}

/* next(expr, tz, after) must be `want` (RFC 3339, or NULL for never). */
static void expect_next(const char *expr, const char *tz, const char *after, const char *want) {
    jr_cron_t c;
    char err[JR_ERRLEN] = "";
    cr_assert_eq(jr_cron_parse(expr, &c, err, sizeof err), 0, "\"%s\": %s", expr, err);
    int64_t got = 0;
    cr_assert_eq(jr_cron_next(&c, tz, ms_of(after), &got), 0);
    char g[JR_TIME_LEN];
    if (!want) {
        cr_expect_eq(got, -1, "\"%s\" in %s after %s: want never, got %s", expr, tz, after,
                     jr_time_format(got, g));
        return;
    }
    cr_expect_eq(got, ms_of(want), "\"%s\" in %s after %s: want %s, got %s", expr, tz, after, want,
                 got < 0 ? "never" : jr_time_format(got, g));
}

static void expect_error(const char *expr, const char *want) {
    jr_cron_t c;
    char err[JR_ERRLEN] = "";
    cr_expect_eq(jr_cron_parse(expr, &c, err, sizeof err), JR_EINVAL, "\"%s\" should be refused", expr);
    cr_expect(strstr(err, want) != NULL, "\"%s\": want an error containing \"%s\", got \"%s\"", expr, want, err);
}

Test(cron_next, strictly_after_and_fields) {
    expect_next("* * * * *", "UTC", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z");
    expect_next("* * * * *", "UTC", "2026-01-01T00:00:59.999Z", "2026-01-01T00:01:00Z");
    expect_next("* * * * * *", "UTC", "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z");
    expect_next("* * * * * *", "UTC", "2026-01-01T00:00:00.500Z", "2026-01-01T00:00:01Z");
    expect_next("*/20 * * * * *", "UTC", "2026-01-01T10:00:05Z", "2026-01-01T10:00:20Z");
    expect_next("30 15 10 * * *", "UTC", "2026-01-01T10:15:30Z", "2026-01-02T10:15:30Z");
    expect_next("0 0 1 * *", "UTC", "2026-01-31T12:00:00Z", "2026-02-01T00:00:00Z");
    expect_next("59 23 31 12 *", "UTC", "2026-06-01T00:00:00Z", "2026-12-31T23:59:00Z");
    expect_next("0 0 1 1 *", "UTC", "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z");
}

Test(cron_next, month_ends_and_leap_days) {
    expect_next("0 0 31 * *", "UTC", "2026-04-01T00:00:00Z", "2026-05-31T00:00:00Z");
    expect_next("0 12 30 * *", "UTC", "2026-01-30T12:00:00Z", "2026-03-30T12:00:00Z");
    expect_next("0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", "2028-02-29T00:00:00Z");
    expect_next("0 0 29 2 *", "UTC", "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z");
    expect_next("0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"); /* 2100 is no leap year */
    expect_next("0 0 29 2 *", "UTC", "1999-03-01T00:00:00Z", "2000-02-29T00:00:00Z"); /* 2000 is */
}

Test(cron_next, never) {
    expect_next("0 0 31 2 *", "UTC", "2026-01-01T00:00:00Z", NULL);
    expect_next("0 0 30 2 *", "Europe/Berlin", "2026-01-01T00:00:00Z", NULL);
    expect_next("0 0 31 4,6,9,11 *", "UTC", "2026-01-01T00:00:00Z", NULL);
}

Test(cron_next, names_steps_and_sunday_7) {
    expect_next("0 9 * JAN-MAR mon-fri", "UTC", "2026-03-31T09:00:00Z", "2027-01-01T09:00:00Z");
    expect_next("0 9 * jan-Mar Sat", "UTC", "2026-12-01T00:00:00Z", "2027-01-02T09:00:00Z");
    expect_next("0 0 * * 7", "UTC", "2026-11-30T00:00:00Z", "2026-12-06T00:00:00Z");
    expect_next("0 0 * * 0", "UTC", "2026-11-30T00:00:00Z", "2026-12-06T00:00:00Z");
    expect_next("0 0 * * 5-7", "UTC", "2026-11-30T00:00:00Z", "2026-12-04T00:00:00Z");
    expect_next("*/15 * * * *", "UTC", "2026-01-01T10:07:00Z", "2026-01-01T10:15:00Z");
    expect_next("1-10/4 * * * *", "UTC", "2026-01-01T10:05:00Z", "2026-01-01T10:09:00Z");
    expect_next("1-10/4 * * * *", "UTC", "2026-01-01T10:09:00Z", "2026-01-01T11:01:00Z");
    expect_next("5/20 * * * *", "UTC", "2026-01-01T10:26:00Z", "2026-01-01T10:45:00Z");
    expect_next("0 0,12 * * *", "UTC", "2026-01-01T00:00:00Z", "2026-01-01T12:00:00Z");
    expect_next("0 0 1 */5 *", "UTC", "2026-02-01T00:00:00Z", "2026-06-01T00:00:00Z"); /* 1, 6, 11 */
}

Test(cron_next, macros) {
    expect_next("@hourly", "UTC", "2026-01-01T10:07:00Z", "2026-01-01T11:00:00Z");
    expect_next("@daily", "UTC", "2026-01-01T10:07:00Z", "2026-01-02T00:00:00Z");
    expect_next("@MIDNIGHT", "UTC", "2026-01-01T10:07:00Z", "2026-01-02T00:00:00Z");
    expect_next("@weekly", "UTC", "2026-11-30T00:00:00Z", "2026-12-06T00:00:00Z");
    expect_next("@monthly", "UTC", "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z");
    expect_next("@yearly", "UTC", "2026-11-30T00:00:00Z", "2027-01-01T00:00:00Z");
    expect_next("@annually", "UTC", "2026-11-30T00:00:00Z", "2027-01-01T00:00:00Z");
}

/* Vixie: both day fields restricted = either matches; one `*` = both. */
Test(cron_next, day_of_month_or_day_of_week) {
    expect_next("0 0 13 * 5", "UTC", "2026-11-30T00:00:00Z", "2026-12-04T00:00:00Z");  /* a Friday */
    expect_next("0 0 13 * 5", "UTC", "2026-12-11T00:00:00Z", "2026-12-13T00:00:00Z");  /* the 13th, a Sunday */
    expect_next("0 0 13 * *", "UTC", "2026-11-30T00:00:00Z", "2026-12-13T00:00:00Z");
    expect_next("0 0 * * 5", "UTC", "2026-12-04T00:00:00Z", "2026-12-11T00:00:00Z");
    expect_next("0 0 */10 * 1", "UTC", "2026-12-01T00:00:00Z", "2026-12-07T00:00:00Z"); /* Monday before the 11th */
    expect_next("0 0 13 * 5", "UTC", "2026-11-12T00:00:00Z", "2026-11-13T00:00:00Z");  /* Friday the 13th: once */
    expect_next("0 0 13 * 5", "UTC", "2026-11-13T00:00:00Z", "2026-11-20T00:00:00Z");
}

/* Berlin 2026: 02:00 CET -> 03:00 CEST on March 29 (01:00Z); 03:00 CEST ->
 * 02:00 CET on October 25 (01:00Z). */
Test(cron_next, dst_europe_berlin) {
    /* 02:30 does not exist: once at the first instant after the gap. */
    expect_next("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z");
    expect_next("30 2 * * *", "Europe/Berlin", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z");
    /* from the last second before the gap: its times still stand for the gap's end */
    expect_next("30 2 * * *", "Europe/Berlin", "2026-03-29T00:59:59Z", "2026-03-29T01:00:00Z");
    expect_next("30 2 * * *", "Europe/Berlin", "2026-03-29T00:59:59.999Z", "2026-03-29T01:00:00Z");
    expect_next("59 59 * * * *", "Europe/Berlin", "2026-03-29T00:59:58Z", "2026-03-29T00:59:59Z");
    expect_next("0 30 2 * * *", "Europe/Berlin", "2026-03-29T00:59:59Z", "2026-03-29T01:00:00Z");
    expect_next("0 3 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z");
    /* 02:00, 02:30 and 03:00 are one instant: one firing. */
    expect_next("*/30 * * * *", "Europe/Berlin", "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z");
    expect_next("*/30 * * * *", "Europe/Berlin", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z");
    /* 02:30 occurs twice: the first (CEST) only. */
    expect_next("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z");
    expect_next("30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z");
    expect_next("*/30 * * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-25T02:00:00Z");
    expect_next("0 9 * * *", "Europe/Berlin", "2026-10-25T12:00:00Z", "2026-10-26T08:00:00Z");
    expect_next("0 9 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T08:00:00Z");
}

/* New York 2026: 02:00 EST -> 03:00 EDT on March 8 (07:00Z); 02:00 EDT ->
 * 01:00 EST on November 1 (06:00Z). */
Test(cron_next, dst_america_new_york) {
    expect_next("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", "2026-03-08T07:00:00Z");
    expect_next("30 2 * * *", "America/New_York", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z");
    expect_next("0 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", "2026-03-08T07:00:00Z");
    expect_next("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", "2026-11-01T05:30:00Z");
    expect_next("30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z");
    expect_next("0 0 * * *", "America/New_York", "2026-11-01T12:00:00Z", "2026-11-02T05:00:00Z");
}

Test(cron_parse, errors_name_the_field) {
    expect_error("0 0 32 * *", "field 3 (day of month): 32 is out of 1-31");
    expect_error("60 * * * *", "field 1 (minute): 60 is out of 0-59");
    expect_error("* 60 * * * *", "field 2 (minute): 60 is out of 0-59");
    expect_error("0 24 * * *", "field 2 (hour): 24 is out of 0-23");
    expect_error("0 0 * 13 *", "field 4 (month): 13 is out of 1-12");
    expect_error("0 0 * * 8", "field 5 (day of week): 8 is out of 0-7");
    expect_error("0 0 0 * *", "field 3 (day of month): 0 is out of 1-31");
    expect_error("0 0 L * *", "field 3 (day of month): 'L' is not supported");
    expect_error("0 0 15W * *", "field 3 (day of month): 'W' is not supported");
    expect_error("0 0 * * 5#3", "field 5 (day of week): '#' is not supported");
    expect_error("0 0 ? * *", "field 3 (day of month): '?' is not supported");
    expect_error("* * * *", "expected 5 fields");
    expect_error("* * * * * * *", "got 7");
    expect_error("", "got 0");
    expect_error("5-2 * * * *", "field 1 (minute): the range 5-2 goes backwards");
    expect_error("*/0 * * * *", "field 1 (minute): step 0 is out of 1-60");
    expect_error("*/ * * * *", "field 1 (minute): a step must be a number");
    expect_error("0 0 * FOO *", "field 4 (month): \"FOO\" is not a number or a month name");
    expect_error("0 0 * * MONDAY", "field 5 (day of week): \"MONDAY\" is not a number or a weekday name");
    expect_error("0 MON * * *", "field 2 (hour): \"MON\" is not a number");
    expect_error("1,,2 * * * *", "field 1 (minute): an empty list item");
    expect_error("1, * * * *", "an empty list item");
    expect_error("1-x * * * *", "field 1 (minute)");
    expect_error("@reboot", "unknown macro \"@reboot\"");
    expect_error("@daily 5", "unknown macro");
    expect_error("99999999999999999999 * * * *", "is out of 0-59");
}

Test(cron_tz, zones) {
    cr_expect(jr_tz_valid("UTC"));
    cr_expect(jr_tz_valid("Europe/Berlin"));
    cr_expect(jr_tz_valid("America/New_York"));
    cr_expect(!jr_tz_valid("Mars/Base"));
    cr_expect(!jr_tz_valid("../../etc/passwd"));
    cr_expect(!jr_tz_valid("/usr/share/zoneinfo/UTC"));
    cr_expect(!jr_tz_valid(""));
    cr_expect(!jr_tz_valid("Europe"));      /* a directory */
    cr_expect(!jr_tz_valid("zone1970.tab")); /* a file that is not a zone */
    jr_cron_t c;
    char err[64];
    int64_t n;
    cr_assert_eq(jr_cron_parse("* * * * *", &c, err, sizeof err), 0);
    cr_expect_eq(jr_cron_next(&c, "Mars/Base", 0, &n), JR_EINVAL);
    char buf[JR_CRON_LOCAL_LEN];
    cr_expect_str_eq(jr_cron_local_format(ms_of("2026-07-01T10:00:00Z"), "Europe/Berlin", buf),
                     "2026-07-01T12:00:00+02:00");
    cr_expect_str_eq(jr_cron_local_format(ms_of("2026-01-01T10:00:00Z"), "America/New_York", buf),
                     "2026-01-01T05:00:00-05:00");
}

extern char **environ;

/* The zone is read without touching the process's TZ (other threads, such
 * as the metrics server, may convert times meanwhile): the TZ entry of the
 * environment is the very same string before and after, set or not. */
Test(cron_tz, never_touches_TZ) {
    jr_cron_t c;
    char err[64], buf[JR_CRON_LOCAL_LEN];
    int64_t n;
    cr_assert_eq(jr_cron_parse("* * * * *", &c, err, sizeof err), 0);
    static char tzvar[] = "TZ=Asia/Tokyo";
    cr_assert_eq(putenv(tzvar), 0);
    const char *before = getenv("TZ");
    cr_assert_eq(jr_cron_next(&c, "Europe/Berlin", 0, &n), 0);
    jr_cron_local_format(0, "America/New_York", buf);
    cr_expect(getenv("TZ") == before && !strcmp(before, "Asia/Tokyo"), "TZ was changed (now %s)", getenv("TZ"));
    unsetenv("TZ");
    char **env = environ, *first = environ[0];
    cr_assert_eq(jr_cron_next(&c, "Europe/Berlin", 0, &n), 0);
    jr_cron_local_format(0, "America/New_York", buf);
    cr_expect_null(getenv("TZ"));
    cr_expect(environ == env && environ[0] == first, "the environment was changed");
}

/* Our TZif reader agrees with glibc's localtime_r (the test sets TZ, being
 * single-threaded) on the local time and UTC offset of random instants
 * from 1950 to 2150 (past the transitions a file lists: its footer rule)
 * in zones with DST north and south, negative DST, half-hour and 45-minute
 * offsets, no DST, and changed rules. */
Test(cron_tz, local_time_agrees_with_glibc, .timeout = 120) {
    static const char *const ZONES[] = {"America/New_York", "Asia/Kolkata", "Europe/Berlin", "Europe/Dublin",
                                        "Australia/Sydney", "Australia/Lord_Howe", "America/Sao_Paulo",
                                        "Pacific/Chatham", "Asia/Tehran", "America/St_Johns", "Africa/Casablanca",
                                        "Pacific/Apia", "Etc/GMT+5", "UTC", "Asia/Kathmandu", "America/Santiago"};
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (size_t zi = 0; zi < sizeof ZONES / sizeof ZONES[0]; zi++) {
        if (!jr_tz_valid(ZONES[zi])) continue;
        setenv("TZ", ZONES[zi], 1);
        tzset();
        for (int i = 0; i < 4000; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int64_t lo = -631152000, hi = 5680281600; /* 1950 .. 2150 */
            time_t t = (time_t)(lo + (int64_t)(x % (uint64_t)(hi - lo)));
            struct tm tm;
            cr_assert(localtime_r(&t, &tm));
            long off = tm.tm_gmtoff, a = off < 0 ? -off : off;
            char want[64], got[JR_CRON_LOCAL_LEN];
            snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, off < 0 ? '-' : '+', (int)(a / 3600),
                     (int)(a / 60 % 60));
            jr_cron_local_format((int64_t)t * 1000, ZONES[zi], got);
            cr_assert_str_eq(got, want, "%s at %lld", ZONES[zi], (long long)t);
        }
    }
    unsetenv("TZ");
    tzset();
}

/* Kolkata: +05:30 all year, no DST. */
Test(cron_next, asia_kolkata) {
    expect_next("30 2 * * *", "Asia/Kolkata", "2026-03-07T12:00:00Z", "2026-03-07T21:00:00Z");
    expect_next("0 9 * * 1", "Asia/Kolkata", "2026-11-01T00:00:00Z", "2026-11-02T03:30:00Z");
    expect_next("0 0 1 1 *", "Asia/Kolkata", "2026-06-01T00:00:00Z", "2026-12-31T18:30:00Z");
    /* Past the transitions the file lists (2037): its rule, gap included. */
    expect_next("30 2 * * *", "America/New_York", "2040-03-10T12:00:00Z", "2040-03-11T07:00:00Z");
    expect_next("30 2 * * *", "America/New_York", "2040-03-11T12:00:00Z", "2040-03-12T06:30:00Z");
    expect_next("30 1 * * *", "America/New_York", "2040-11-04T05:30:00Z", "2040-11-05T06:30:00Z");
}

Test(cron_def, every_aligned_to_the_epoch) {
    jr_cron_def_t d = {.name = "n", .handler = "h", .queue = "default", .every_ms = 5000, .tz = "UTC", .enabled = 1};
    char err[JR_ERRLEN];
    cr_assert_eq(jr_cron_def_check(&d, err, sizeof err), 0, "%s", err);
    cr_expect_eq(jr_cron_def_next(&d, 12345), 15000);
    cr_expect_eq(jr_cron_def_next(&d, 15000), 20000);
    cr_expect_eq(jr_cron_def_next(&d, 14999), 15000);
}

static void def_bad(jr_cron_def_t d, const char *want) {
    char err[JR_ERRLEN] = "";
    cr_expect_eq(jr_cron_def_check(&d, err, sizeof err), JR_EINVAL, "want refusal: %s", want);
    cr_expect(strstr(err, want) != NULL, "want \"%s\", got \"%s\"", want, err);
}

Test(cron_def, check_names_the_key) {
    jr_cron_def_t ok = {.name = "nightly", .handler = "h", .queue = "default", .cron = "0 2 * * *", .tz = "UTC"};
    jr_cron_def_t d = ok;
    d.name = "bad name";
    def_bad(d, "name:");
    d = ok, d.handler = "";
    def_bad(d, "handler:");
    d = ok, d.queue = "a b";
    def_bad(d, "queue:");
    d = ok, d.every_ms = 1000;
    def_bad(d, "exactly one of cron and every");
    d = ok, d.cron = NULL;
    def_bad(d, "exactly one of cron and every");
    d = ok, d.cron = "0 25 * * *";
    def_bad(d, "cron: field 2 (hour): 25 is out of 0-23");
    d = ok, d.cron = NULL, d.every_ms = 999;
    def_bad(d, "every: must be from 1s");
    d = ok, d.tz = "Mars/Base";
    def_bad(d, "timezone: unknown zone \"Mars/Base\"");
    d = ok, d.missed = 7;
    def_bad(d, "missed:");
    d = ok, d.payload = "\xff";
    def_bad(d, "payload:");
}

Test(cron_def, encode_decode_round_trip) {
    jr_cron_def_t d = {.name = "nightly", .handler = "report", .queue = "q1", .payload = "{\"x\":1}",
                       .cron = "0 2 * * *", .tz = "Europe/Berlin", .missed = JR_MISSED_ONCE, .enabled = 0};
    char err[JR_ERRLEN] = "";
    char *s = jr_cron_def_encode(&d);
    cr_assert_not_null(s);
    jr_cron_def_t e;
    cr_assert_eq(jr_cron_def_decode("nightly", s, &e, err, sizeof err), 0, "%s: %s", s, err);
    cr_expect_str_eq(e.handler, "report");
    cr_expect_str_eq(e.queue, "q1");
    cr_expect_str_eq(e.payload, "{\"x\":1}");
    cr_expect_str_eq(e.cron, "0 2 * * *");
    cr_expect_str_eq(e.tz, "Europe/Berlin");
    cr_expect_eq(e.missed, JR_MISSED_ONCE);
    cr_expect_eq(e.enabled, 0);
    jr_cron_def_free(&e);
    free(s);
    cr_expect_eq(jr_cron_def_decode("x", "[1]", &e, err, sizeof err), JR_EINVAL);
    jr_cron_def_free(&e);
    cr_expect_eq(jr_cron_def_decode("x", "{\"handler\":\"h\",\"queue\":\"q\",\"timezone\":\"UTC\",\"every_ms\":1000,"
                                         "\"bogus\":1}", &e, err, sizeof err), JR_EINVAL);
    cr_expect(strstr(err, "unknown key \"bogus\"") != NULL, "%s", err);
    jr_cron_def_free(&e);
    cr_expect_eq(jr_cron_def_decode("x", "{\"handler\":\"h\",\"queue\":\"q\",\"timezone\":\"UTC\",\"every_ms\":1000}",
                                    &e, err, sizeof err), 0, "%s", err);
    cr_expect_eq(e.every_ms, 1000);
    cr_expect_eq(e.enabled, 1);
    cr_expect_eq(e.missed, JR_MISSED_SKIP);
    jr_cron_def_free(&e);
}

/* ---- fuzz --------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}

static const char *const PIECES[] = {"*", "*/", "-", ",", "/", "0", "1", "2", "5", "7", "12", "13", "15", "23",
                                     "29", "30", "31", "59", "60", "99", "JAN", "feb", "Dec", "MON", "sun",
                                     "Sat", "L", "W", "#", "?", "@daily", "@x", " ", "  ", "\t", "x", ""};

/* A random string of cron-ish pieces: mostly 5 or 6 fields of plausible
 * values, sometimes garbage. */
static void random_expr(char *out, size_t len) {
    out[0] = '\0';
    if (rnd() % 4 == 0) { /* garbage */
        int n = (int)(rnd() % 12);
        for (int i = 0; i < n; i++)
            snprintf(out + strlen(out), len - strlen(out), "%s", PIECES[rnd() % (sizeof PIECES / sizeof *PIECES)]);
        return;
    }
    static const int MAX[6] = {59, 59, 23, 31, 12, 7};
    static const int MIN[6] = {0, 0, 0, 1, 1, 0};
    int six = rnd() % 2;
    for (int f = six ? 0 : 1; f < 6; f++) {
        int items = 1 + (int)(rnd() % 3);
        for (int i = 0; i < items; i++) {
            int span = MAX[f] - MIN[f] + 1;
            int a = MIN[f] + (int)(rnd() % span), b = a + (int)(rnd() % (span - (a - MIN[f])));
            int step = 1 + (int)(rnd() % 10);
            char *p = out + strlen(out);
            size_t room = len - strlen(out);
            switch (rnd() % 5) {
            case 0: snprintf(p, room, "%s*", i ? "," : ""); break;
            case 1: snprintf(p, room, "%s%d", i ? "," : "", a); break;
            case 2: snprintf(p, room, "%s%d-%d", i ? "," : "", a, b); break;
            case 3: snprintf(p, room, "%s%d-%d/%d", i ? "," : "", a, b, step); break;
            default: snprintf(p, room, "%s*/%d", i ? "," : "", step); break;
            }
        }
        snprintf(out + strlen(out), len - strlen(out), " ");
    }
}

/* Whether local time of instant t in the current TZ matches c. */
static int matches(const jr_cron_t *c, time_t t) {
    struct tm tm;
    localtime_r(&t, &tm);
    int dom = (c->dom >> tm.tm_mday) & 1, dow = (c->dow >> tm.tm_wday) & 1;
    int day = c->dom_any || c->dow_any ? dom && dow : dom || dow;
    return ((c->sec >> tm.tm_sec) & 1) && ((c->min >> tm.tm_min) & 1) && ((c->hour >> tm.tm_hour) & 1) &&
           ((c->mon >> (tm.tm_mon + 1)) & 1) && day;
}

static long offset_at(time_t t) {
    struct tm tm;
    localtime_r(&t, &tm);
    return tm.tm_gmtoff;
}

/* Random expressions never crash the parser; next() always ends with a
 * time after T that matches (or is the end of a DST gap), or "never". */
Test(cron_fuzz, parse_and_next, .timeout = 300) {
    static const char *const ZONES[] = {"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
                                        "Asia/Kolkata", "Pacific/Chatham"};
    rng_state = 0x9E3779B97F4A7C15ull;
    int parsed = 0, never = 0;
    for (int i = 0; i < 3000; i++) {
        char expr[256], err[JR_ERRLEN];
        random_expr(expr, sizeof expr);
        jr_cron_t c;
        if (jr_cron_parse(expr, &c, err, sizeof err) != 0) {
            cr_assert(err[0] != '\0', "\"%s\": refused without a message", expr);
            continue;
        }
        parsed++;
        const char *tz = ZONES[rnd() % (sizeof ZONES / sizeof *ZONES)];
        int64_t after = (int64_t)(rnd() % (UINT64_C(4102444800) * 1000)); /* 1970..2100 */
        int64_t next;
        cr_assert_eq(jr_cron_next(&c, tz, after, &next), 0);
        if (next < 0) {
            never++;
            continue;
        }
        cr_assert_gt(next, after, "\"%s\" %s after %lld: %lld", expr, tz, (long long)after, (long long)next);
        cr_assert_eq(next % 1000, 0);
        setenv("TZ", tz, 1);
        tzset();
        time_t t = (time_t)(next / 1000);
        cr_assert(matches(&c, t) || offset_at(t - 1) != offset_at(t),
                  "\"%s\" in %s after %lld: %lld matches nothing", expr, tz, (long long)after, (long long)next);
        unsetenv("TZ");
        tzset();
    }
    cr_expect_gt(parsed, 1000);
    cr_log_info("%d parsed, %d never", parsed, never);
}

/* In UTC, next() is the FIRST match: no minute between T and it matches. */
Test(cron_fuzz, next_is_the_first_match, .timeout = 300) {
    rng_state = 12345;
    setenv("TZ", "UTC", 1);
    tzset();
    int checked = 0;
    for (int i = 0; i < 3000 && checked < 300; i++) {
        char expr[256], err[JR_ERRLEN];
        random_expr(expr, sizeof expr);
        jr_cron_t c;
        if (jr_cron_parse(expr, &c, err, sizeof err) != 0 || c.sec != 1) continue;
        int64_t after = (int64_t)(rnd() % (UINT64_C(4102444800))) * 1000;
        int64_t next;
        cr_assert_eq(jr_cron_next(&c, "UTC", after, &next), 0);
        if (next < 0 || next - after > 3 * 86400000LL) continue;
        for (int64_t m = after / 60000 + 1; m * 60000 < next; m++)
            cr_assert(!matches(&c, (time_t)(m * 60)), "\"%s\" after %lld: %lld matches before %lld", expr,
                      (long long)after, (long long)m * 60000, (long long)next);
        checked++;
    }
    cr_expect_gt(checked, 50);
}

/* ---- the periodic: section of the config ---------------------------------- */

#include "config.h"

static int load(jr_config_t *c, const char *yaml, char *err, size_t len) {
    cr_assert_eq(jr_config_init(c), 0);
    return jr_config_load_string(c, yaml, strlen(yaml), "t.yaml", err, len);
}

Test(cron_config, periodic_entries_with_defaults) {
    jr_config_t c;
    char err[JR_ERRLEN] = "";
    cr_assert_eq(load(&c,
                      "periodic:\n"
                      "  - name: nightly\n"
                      "    handler: report\n"
                      "    cron: \"0 2 * * *\"\n"
                      "    timezone: Europe/Berlin\n"
                      "    payload: '{\"day\": \"yesterday\"}'\n"
                      "    missed: once\n"
                      "  - {name: tick, handler: echo, queue: q1, every: 90s, enabled: false}\n",
                      err, sizeof err),
                 0, "%s", err);
    cr_assert_eq(c.nperiodic, 2);
    jr_cron_def_t *a = &c.periodic[0], *b = &c.periodic[1];
    cr_expect_str_eq(a->name, "nightly");
    cr_expect_str_eq(a->queue, "default");
    cr_expect_str_eq(a->tz, "Europe/Berlin");
    cr_expect_str_eq(a->payload, "{\"day\": \"yesterday\"}");
    cr_expect_eq(a->missed, JR_MISSED_ONCE);
    cr_expect_eq(a->enabled, 1);
    cr_expect_eq(b->every_ms, 90000);
    cr_expect_str_eq(b->tz, "UTC");
    cr_expect_eq(b->missed, JR_MISSED_SKIP);
    cr_expect_eq(b->enabled, 0);
    jr_config_free(&c);
}

static void periodic_bad(const char *yaml, const char *want) {
    jr_config_t c;
    char err[JR_ERRLEN] = "";
    cr_expect_eq(load(&c, yaml, err, sizeof err), JR_EINVAL, "accepted: %s", yaml);
    cr_expect(strstr(err, want) != NULL, "want \"%s\", got \"%s\"", want, err);
    jr_config_free(&c);
}

Test(cron_config, bad_entries_name_entry_and_key) {
    periodic_bad("periodic:\n  - {name: n, handler: h, cron: \"0 0 32 * *\"}\n",
                 "t.yaml:2: periodic.n.cron: field 3 (day of month): 32 is out of 1-31");
    periodic_bad("periodic:\n  - {handler: h, cron: \"0 0 32 * *\"}\n",
                 "periodic[0].cron: field 3 (day of month)");
    periodic_bad("periodic:\n  - {name: n, handler: h, every: 1s, cron: \"* * * * *\"}\n",
                 "periodic.n: give exactly one of cron and every");
    periodic_bad("periodic:\n  - {name: n, handler: h}\n", "periodic.n: give exactly one of cron and every");
    periodic_bad("periodic:\n  - {name: n, every: 1s}\n", "periodic.n: the key handler is missing");
    periodic_bad("periodic:\n  - {handler: h, every: 1s}\n", "periodic[0]: the key name is missing");
    periodic_bad("periodic:\n  - {name: n, handler: h, every: 500ms}\n", "periodic.n.every: must be a duration from 1s");
    periodic_bad("periodic:\n  - {name: n, handler: h, every: 1s, timezone: Mars/Base}\n",
                 "periodic.n.timezone: unknown time zone \"Mars/Base\"");
    periodic_bad("periodic:\n  - {name: n, handler: h, every: 1s, missed: twice}\n",
                 "periodic.n.missed: must be skip or once");
    periodic_bad("periodic:\n  - {name: n, handler: h, every: 1s, enabled: maybe}\n",
                 "periodic.n.enabled: must be true or false");
    periodic_bad("periodic:\n  - {name: n, handler: h, every: 1s, color: red}\n", "periodic.n.color: unknown key");
    periodic_bad("periodic:\n  - {name: n, handler: h, every: 1s, queue: \"a b\"}\n", "periodic.n.queue: bad queue name");
    periodic_bad("periodic:\n  - {name: \"a b\", handler: h, every: 1s}\n", "periodic[0].name: bad schedule name");
    periodic_bad("periodic:\n  - {name: n, handler: h, every: 1s}\n  - {name: n, handler: h, every: 2s}\n",
                 "periodic[1].name: schedule \"n\" is listed twice (first given on line 2)");
    periodic_bad("periodic:\n  name: n\n", "periodic: expected a sequence of schedules");
    periodic_bad("periodic:\n  - n\n", "periodic[0]: expected a mapping");
}

/* The latest missed tick: brute force agrees, and a dense backlog (every
 * second of January, asked in December: 2.6 million ticks) is found without
 * walking it. */
Test(cron_def, latest_tick_before) {
    char err[JR_ERRLEN];
    jr_cron_def_t e = {.name = "n", .handler = "h", .queue = "q", .every_ms = 5000, .tz = "UTC"};
    cr_assert_eq(jr_cron_def_check(&e, err, sizeof err), 0, "%s", err);
    cr_expect_eq(jr_cron_def_latest(&e, 0, 12345), 10000);
    cr_expect_eq(jr_cron_def_latest(&e, 10000, 12345), -1);
    cr_expect_eq(jr_cron_def_latest(&e, 0, 10000), 5000);
    jr_cron_def_t d = {.name = "n", .handler = "h", .queue = "q", .cron = "* * * * JAN *", .tz = "Europe/Berlin"};
    cr_assert_eq(jr_cron_def_check(&d, err, sizeof err), 0, "%s", err);
    int64_t t0 = jr_wall_ms();
    cr_expect_eq(jr_cron_def_latest(&d, ms_of("2020-01-01T00:00:00Z"), ms_of("2026-12-01T12:00:00Z")),
                 ms_of("2026-01-31T22:59:59Z")); /* 23:59:59 CET */
    cr_expect_lt(jr_wall_ms() - t0, 5000, "walked the backlog");
    cr_expect_eq(jr_cron_def_latest(&d, ms_of("2026-01-31T22:59:59Z"), ms_of("2026-12-01T12:00:00Z")), -1);
    jr_cron_def_t n = {.name = "n", .handler = "h", .queue = "q", .cron = "0 0 31 2 *", .tz = "UTC"};
    cr_assert_eq(jr_cron_def_check(&n, err, sizeof err), 0, "%s", err);
    cr_expect_eq(jr_cron_def_latest(&n, -1, ms_of("2026-12-01T12:00:00Z")), -1);
    rng_state = 777;
    for (int i = 0; i < 100; i++) {
        char expr[256];
        random_expr(expr, sizeof expr);
        jr_cron_def_t r = {.name = "n", .handler = "h", .queue = "q", .cron = expr, .tz = "America/New_York"};
        if (jr_cron_def_check(&r, err, sizeof err)) continue;
        int64_t before = 1700000000000 + (int64_t)(rnd() % 100000000000), last = before - 3 * 86400000;
        int64_t want = -1, steps = 0;
        for (int64_t t = jr_cron_def_next(&r, last); t >= 0 && t < before && steps < 1000; t = jr_cron_def_next(&r, t))
            want = t, steps++;
        if (steps == 1000) continue; /* too dense to brute-force */
        cr_expect_eq(jr_cron_def_latest(&r, last, before), want, "\"%s\" before %lld", expr, (long long)before);
    }
}

/* A zone's file path that does not fit is no zone: not a shorter name's.
 * TZDIR is made so long that "<TZDIR>/Etc/GMT+10" is 512 bytes, where a
 * 512-byte buffer once cut it to "<TZDIR>/Etc/GMT+1" (another zone, which
 * exists there): the zone is unknown, the other one still valid. */
Test(cron, a_zone_path_is_never_cut_to_another_zone) {
    char dir[600] = "/tmp/jrtz.XXXXXX";
    cr_assert(mkdtemp(dir));
    size_t n = strlen(dir);
    dir[n++] = '/', memset(dir + n, 'a', 240), n += 240, dir[n] = '\0';
    cr_assert_eq(mkdir(dir, 0700), 0);
    dir[n++] = '/', memset(dir + n, 'b', 501 - n), n = 501, dir[n] = '\0';
    cr_assert_eq(mkdir(dir, 0700), 0);
    char etc[620], path[640];
    snprintf(etc, sizeof etc, "%s/Etc", dir);
    cr_assert_eq(mkdir(etc, 0700), 0);
    snprintf(path, sizeof path, "%s/GMT+1", etc);
    FILE *in = fopen("/usr/share/zoneinfo/Etc/GMT+1", "rb"), *out = fopen(path, "wb");
    cr_assert(in && out, "tzdata's Etc/GMT+1 and %s", path);
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0) cr_assert_eq(fwrite(buf, 1, got, out), got);
    fclose(in), fclose(out);
    cr_assert_eq(strlen(dir) + strlen("/Etc/GMT+10"), 512);
    setenv("TZDIR", dir, 1);
    cr_expect(jr_tz_valid("Etc/GMT+1"), "the zone that is there");
    cr_expect(!jr_tz_valid("Etc/GMT+10"), "a zone that is not there is no zone, whatever a cut path names");
    unsetenv("TZDIR");
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%.16s'", dir);
    cr_expect_eq(system(cmd), 0);
}
