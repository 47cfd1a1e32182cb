/* No silent typos: a queue nothing ever used is named as such, a job looked
 * for in the wrong queue says where it was not, --all-queues finds it by
 * id, and `queue remove` deletes an empty queue only. Real processes
 * against a real redis-server. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static jrt_redis_t R;
static char out[16384], err[16384];

static void setup(void) {
    jrt_redis_start(&R, NULL);
    setenv("JOBRUNNER_REDIS_URL", R.url, 1);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(typos, .init = setup, .fini = teardown, .timeout = 60);

#define RUN(...) jrt_run(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

Test(typos, job_show_cancel_and_jobs_name_a_queue_never_used_and_exit_1) {
    cr_assert_eq(RUN("enqueue", "-q", "orders", "--in", "1h", "--id", "close-1042", "echo", "x"), 0, "%s", err);
    cr_assert_eq(RUN("enqueue", "-q", "mail", "echo", "y"), 0, "%s", err);

    cr_expect_eq(RUN("job", "show", "-q", "ordres", "close-1042"), 1);
    cr_expect(strstr(err, "queue \"ordres\" is not known"), "job show: %s", err);
    cr_expect_eq(RUN("cancel", "-q", "ordres", "close-1042"), 1);
    cr_expect(strstr(err, "queue \"ordres\" is not known"), "cancel: %s", err);
    cr_expect_eq(RUN("jobs", "-q", "ordres", "--state", "delayed"), 1);
    cr_expect(strstr(err, "queue \"ordres\" is not known"), "jobs: %s", err);
    cr_expect_eq(RUN("jobs", "-q", "orders", "--state", "delayed"), 0, "%s", err);
    cr_expect(strstr(out, "close-1042"), "%s", out);

    /* the wrong queue, one that is used: where it looked, and how to look everywhere */
    cr_expect_eq(RUN("job", "show", "-q", "mail", "close-1042"), 1);
    cr_expect(strstr(err, "job close-1042 is not in queue mail") && strstr(err, "--all-queues"), "%s", err);
    cr_expect_eq(RUN("job", "show", "--all-queues", "close-1042"), 0, "%s", err);
    cr_expect(strstr(out, "queue: orders") && strstr(out, "state: delayed"), "%s", out);
    cr_expect_eq(RUN("job", "show", "--all-queues", "no-such-job"), 1);
    cr_expect(strstr(err, "job no-such-job is in none of the 2 queues"), "%s", err);
    /* and the job is still there: nothing was cancelled in the typo */
    cr_expect_eq(RUN("job", "show", "-q", "orders", "close-1042"), 0, "%s", err);
}

/* The display columns of a line: the ellipsis mark (3 bytes) is one. */
static size_t cols(const char *line, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)line[i] & 0xc0) != 0x80;
    return c;
}

/* Every line of text within max display columns. */
static void expect_within(const char *text, size_t max) {
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        cr_expect_leq(cols(p, n), max, "a line of %zu columns: %.*s", cols(p, n), (int)n, p);
        p += n + (p[n] == '\n');
    }
}

Test(typos, tables_fit_80_columns_padded_to_their_headers_and_wide_shows_all) {
    const char *q = "orders-of-the-european-region-by-priority-and-customer-class";
    const char *id = "close-order-1042-of-customer-77-after-thirty-minutes-unpaid";
    cr_assert_eq(RUN("enqueue", "-q", q, "--in", "1h", "--id", id, "order_autoclose", "/srv/orders/1042"), 0, "%s", err);
    cr_assert_eq(RUN("cron", "add", "nightly-summary-of-all-the-orders", "--cron", "0 2 * * *", "--tz", "Europe/Berlin",
                     "-q", q, "order_autoclose", "{}"),
                 0, "%s", err);
    setenv("COLUMNS", "80", 1);
    const char *const cmds[][8] = {{"stats", NULL}, {"jobs", "-q", q, "--state", "delayed", NULL},
                                   {"cron", "list", NULL}, {"dead", "list", "-q", q, NULL}, {"workers", NULL}};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, cmds[i]), 0, "%s: %s", cmds[i][0], err);
        expect_within(out, 80);
    }
    cr_assert_eq(RUN("stats"), 0);
    cr_expect(strstr(out, "orders-of-the-") && strstr(out, "\xe2\x80\xa6") && !strstr(out, q),
              "the long queue name cut with an ellipsis:\n%s", out);
    /* padded to the header: each count ends where its header ends */
    const char *head = out, *row = strstr(out, "orders-of-the-");
    cr_assert(row);
    const char *ready = strstr(head, "READY");
    size_t head_end = (size_t)(ready - head) + 5;
    size_t row_end = 0, c = 0;
    const char *cut = strstr(row, "\xe2\x80\xa6");
    cr_assert(cut);
    for (const char *p = row; *p && *p != '\n'; p++) { /* the end of the count after the name, in columns */
        if (((unsigned char)*p & 0xc0) != 0x80) c++;
        if (p > cut && *p >= '0' && *p <= '9' && (p[1] == ' ' || p[1] == '\n')) {
            row_end = c;
            break;
        }
    }
    cr_expect_eq(row_end, head_end, "READY column: header ends at %zu, its count at %zu:\n%s", head_end, row_end, out);
    cr_assert_eq(RUN("jobs", "-q", q, "--state", "delayed", "--wide"), 0);
    cr_expect(strstr(out, id), "--wide shows the whole id:\n%s", out);
    cr_assert_eq(RUN("cron", "list", "--wide"), 0);
    cr_expect(strstr(out, "nightly-summary-of-all-the-orders") && strstr(out, "+01:00"), "%s", out);
    cr_assert_eq(RUN("cron", "list"), 0);
    cr_expect(strstr(out, "Europe/Berlin: next ") && strstr(out, "+01:00"), "the zone's times under the row:\n%s", out);
    unsetenv("COLUMNS");
    cr_assert_eq(RUN("jobs", "-q", q, "--state", "delayed"), 0);
    cr_expect(strstr(out, id), "output to a program is not cut (no COLUMNS, not a terminal):\n%s", out);
}

Test(typos, queue_remove_deletes_an_empty_queue_only) {
    char id[256];
    cr_assert_eq(RUN("enqueue", "-q", "tmp", "--in", "1h", "echo", "x"), 0, "%s", err);
    snprintf(id, sizeof id, "%.200s", out);
    id[strcspn(id, "\n")] = '\0';
    cr_expect_eq(RUN("queue", "remove", "tmp"), 1);
    cr_expect(strstr(err, "queue \"tmp\" holds jobs") && strstr(err, "1 in the time wheel"), "%s", err);
    cr_expect_eq(RUN("job", "show", "-q", "tmp", id), 0, "the job stays: %s", err);
    cr_assert_eq(RUN("cancel", "-q", "tmp", id), 0, "%s", err);
    cr_expect_eq(RUN("queue", "remove", "tmp"), 0, "%s", err);
    cr_expect(strstr(out, "tmp removed"), "%s", out);
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_int(c, "EXISTS jr:{tmp}:ready jr:{tmp}:delayed jr:{tmp}:wheel jr:{tmp}:wheel:n jr:{tmp}:ids "
                            "jr:{tmp}:seq jr:{tmp}:wake jr:{tmp}:stats"),
                 0, "keys of the removed queue are left");
    cr_expect_eq(jrt_int(c, "SISMEMBER jr:{queues} tmp"), 0, "still registered");
    redisFree(c);
    cr_expect_eq(RUN("stats"), 0);
    cr_expect(!strstr(out, "tmp"), "stats still lists it:\n%s", out);
    cr_expect_eq(RUN("jobs", "-q", "tmp", "--state", "ready"), 1, "a removed queue is not known");
    cr_expect_eq(RUN("queue", "remove", "tmp"), 1);
    cr_expect(strstr(err, "queue \"tmp\" is not known"), "%s", err);

    /* a queue a live worker serves stays */
    cr_assert_eq(RUN("enqueue", "-q", "busy", "echo", "y"), 0, "%s", err);
    pid_t w = jrt_worker(&R, NULL, NULL, NULL, (const char *const[]){"-q", "busy", NULL});
    int listed = 0;
    for (int t = 0; t < 15000 && !listed; t += 100) {
        listed = RUN("workers") == 0 && strstr(out, "busy");
        if (!listed) jrt_sleep_ms(100);
    }
    cr_assert(listed, "the worker was not listed:\n%s", out);
    cr_expect_eq(RUN("queue", "remove", "busy"), 1);
    cr_expect(strstr(err, "is served by the live worker"), "%s", err);
    jrt_stop(w, SIGTERM, 10000);
}

/* A --state typo is a usage error (exit 2) named before anything else:
 * with Redis unreachable, and for a queue nothing used; it was reported as
 * "cannot connect" or "queue not known" (exit 1) before the state was read. */
Test(typos, a_state_typo_is_a_usage_error_whatever_redis_says) {
    char dead[64];
    snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", jrt_free_port());
    cr_expect_eq(RUN("jobs", "--redis", dead, "--state", "retryng"), 2, "%s", err);
    cr_expect(strstr(err, "--state") && strstr(err, "retryng"), "%s", err);
    cr_expect_eq(RUN("jobs", "-q", "never-used", "--state", "bogus"), 2, "%s", err);
    cr_expect(strstr(err, "--state") && !strstr(err, "never-used"), "%s", err);
}
