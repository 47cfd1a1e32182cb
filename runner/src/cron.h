/* Periodic schedules: the cron expression parser, "next firing after T" and
 * the schedule definition stored in Redis. Pure: no I/O except reading the
 * system tz database (jr_tz_valid, jr_cron_next and what calls them; see
 * jr_cron_next for how), no process-global state (TZDIR is read).
 *
 * Cron syntax: 5 fields (minute hour day-of-month month day-of-week) or 6
 * with a leading seconds field. Each field is a comma list of `*`, `N`,
 * `N-M`, each optionally `/STEP` (`N/STEP` = `N-max/STEP`). Months take
 * JAN..DEC, weekdays SUN..SAT (case-insensitive); weekday 7 is Sunday too.
 * Macros: @yearly @annually @monthly @weekly @daily @midnight @hourly.
 * Day rule (Vixie cron): when both day-of-month and day-of-week are
 * restricted (not exactly `*`), a day matches if EITHER matches; otherwise
 * both must. Not supported (refused with a message): `L`, `W`, `#`, `?`,
 * @reboot, a year field. */
#ifndef JR_CRON_H
#define JR_CRON_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* A parsed cron expression: one bit per allowed value. */
typedef struct jr_cron {
    uint64_t sec;  /* bits 0..59 */
    uint64_t min;  /* bits 0..59 */
    uint32_t hour; /* bits 0..23 */
    uint32_t dom;  /* bits 1..31 */
    uint16_t mon;  /* bits 1..12 */
    uint8_t dow;   /* bits 0..6, 0 = Sunday */
    unsigned char dom_any, dow_any; /* the field was exactly `*` */
} jr_cron_t;

/* Parse `expr`. Returns 0, or JR_EINVAL with a message in err naming the
 * field and what is wrong ("field 3 (day of month): 32 is out of 1-31"),
 * leaving *c unspecified. */
int jr_cron_parse(const char *expr, jr_cron_t *c, char *err, size_t errlen);

/* 1 if `tz` names a zone of the system tz database (a file under $TZDIR or
 * /usr/share/zoneinfo; "UTC" always), 0 otherwise (also for names with
 * "..", a leading '/' or characters outside [A-Za-z0-9_+-/]). */
int jr_tz_valid(const char *tz);

/* The first firing of c strictly after Unix time after_ms, in zone tz (a
 * name jr_tz_valid accepts), into *next_ms (Unix ms, whole seconds), or -1
 * when c never fires (e.g. `0 0 31 2 *`: nothing within 400 years, the
 * Gregorian cycle). Local times a DST change skips fire once, at the first
 * instant after the gap; local times that occur twice fire once, at the
 * first occurrence. Returns 0, or JR_EINVAL for a zone jr_tz_valid
 * refuses.
 *
 * How the zone is read: its TZif file ($TZDIR or /usr/share/zoneinfo) is
 * parsed here, transitions and the footer rule for later instants (leap
 * seconds of "right/" zones ignored); TZ and the C library's zone state are
 * never touched, so any thread may call this. JR_ENOMEM, or JR_EINVAL for
 * a file that is not a valid TZif file, are possible too. */
int jr_cron_next(const jr_cron_t *c, const char *tz, int64_t after_ms, int64_t *next_ms);

/* Local time of unix_ms in zone tz as "2026-12-01T09:30:00+01:00"
 * (JR_CRON_LOCAL_LEN bytes), the zone read as by jr_cron_next; "" for a
 * zone it cannot read. Returns buf. */
#define JR_CRON_LOCAL_LEN 48
char *jr_cron_local_format(int64_t unix_ms, const char *tz, char *buf);

/* ---- schedule definitions ------------------------------------------------ */

#define JR_CRON_NAME_MAX 100 /* bytes of a schedule name: [A-Za-z0-9_.:-] */
#define JR_CRON_EVERY_MIN_MS 1000
#define JR_CRON_EVERY_MAX_MS (INT64_C(366) * 24 * 3600 * 1000)

typedef enum { JR_MISSED_SKIP = 0, JR_MISSED_ONCE = 1 } jr_missed_t;

/* One periodic schedule. Strings are owned (malloc'd). */
typedef struct jr_cron_def {
    char *name;
    char *handler;
    char *queue;    /* default "default" */
    char *payload;  /* NULL = none */
    char *cron;     /* exactly one of cron and every_ms */
    int64_t every_ms; /* 0 = a cron schedule */
    char *tz;       /* default "UTC" */
    int missed;     /* jr_missed_t */
    int enabled;    /* 1 or 0 */
    jr_cron_t parsed; /* filled by jr_cron_def_check for cron schedules */
} jr_cron_def_t;

/* 1 if s is a valid schedule name (jr_contract_schedule_name). */
int jr_cron_name_valid(const char *s);

/* Check every field of d (name, handler, queue, payload UTF-8, exactly one
 * of cron and every in JR_CRON_EVERY_MIN_MS..JR_CRON_EVERY_MAX_MS, zone,
 * missed) and
 * parse its expression into d->parsed. Returns 0 or JR_EINVAL with a
 * message in err naming the key ("cron: field 2 (hour): 24 is out of
 * 0-23", "timezone: unknown zone \"Mars/Base\""). */
int jr_cron_def_check(jr_cron_def_t *d, char *err, size_t errlen);

/* The first tick of d strictly after after_ms (see jr_cron_next; an `every`
 * schedule ticks at the multiples of its interval since the Unix epoch), or
 * -1 for never (and when its zone cannot be read now). d must have passed
 * jr_cron_def_check. */
int64_t jr_cron_def_next(const jr_cron_def_t *d, int64_t after_ms);

/* The latest tick of d in (last, before) (Unix ms), or -1 if none: the
 * missed tick a `missed: once` schedule fires when a scheduler starts at
 * `before`. Costs about 45 calls of jr_cron_def_next however many ticks lie
 * in between; looks back at most 400 years. */
int64_t jr_cron_def_latest(const jr_cron_def_t *d, int64_t last, int64_t before);

/* The stored form: a JSON object {"handler", "queue", "payload"?, "cron" |
 * "every_ms", "timezone", "missed": "skip"|"once", "enabled"} (the name is
 * the hash field). Returns a malloc'd compact string, NULL when out of
 * memory (or when a string of d is not UTF-8, which jr_cron_def_check
 * refuses). */
char *jr_cron_def_encode(const jr_cron_def_t *d);

/* Decode and check a stored definition (name given separately; unknown
 * keys refused). Returns 0, or JR_EINVAL or JR_ENOMEM with a message in
 * err; *d is zeroed first and must be freed with jr_cron_def_free either
 * way. */
int jr_cron_def_decode(const char *name, const char *json, jr_cron_def_t *d, char *err, size_t errlen);

void jr_cron_def_free(jr_cron_def_t *d);

#endif
