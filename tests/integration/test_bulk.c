/* Bulk actions (bulk.h, and the CLI's `dead retry|purge --handler`, `job
 * delete|run-now --state S --handler`): against a real redis-server, with
 * more jobs than one page, in each tier of the delayed state and in the
 * dead stream. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bulk.h"
#include "harness.h"
#include "redis_admin.h"

static jrt_redis_t R;
static char out[8192], err[8192];

static void setup(void) { jrt_redis_start(&R, NULL); }
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(bulk, .init = setup, .fini = teardown, .timeout = 60);

#define N 1300 /* more than two pages of JR_BULK_PAGE */

/* N jobs of queue q due at at_us (all the same due time), handler "a" for
 * the first `head` and every third after, else "b". Returns how many are
 * "a". */
static long long enqueue_mix(const char *q, int64_t at_us, int head, int attempt) {
    static jr_enqueue_t jobs[N];
    long long na = 0;
    for (int i = 0; i < N; i++) {
        int a = i < head || i % 3 == 0;
        na += a;
        jobs[i] = jrt_job(q, a ? "a" : "b", a ? "pay-a" : "pay-b");
        jobs[i].at_us = at_us;
        jobs[i].env.attempt = attempt;
    }
    jrt_enqueue_jobs(&R, jobs, N, NULL);
    return na;
}

/* Delete every "a" job of q with jr_bulk: all of them go, every "b" stays. */
static void delete_a(const char *q, long long na) {
    jr_redis_t *r = jrt_jr_connect(&R);
    jr_filter_t f = {.handler = "a"};
    jr_bulk_result_t res;
    cr_assert_eq(jr_bulk(r, q, JR_BULK_DELAYED, JR_BULK_DELETE, &f, NULL, 0, NULL, &res), 0, "%s", jr_redis_errstr(r));
    cr_expect_eq(res.acted, na, "deleted %lld of the %lld a jobs", res.acted, na);
    cr_expect_eq(res.matched, na);
    cr_expect_eq(res.seen, N, "looked at %lld of %d jobs", res.seen, N);
    jr_qstats_t s;
    cr_assert_eq(jr_redis_stats(r, q, &s), 0);
    cr_expect_eq(s.delayed, N - na, "%lld delayed left, want the %lld b jobs", s.delayed, N - na);
    /* nothing of "a" left: a second pass finds none */
    cr_assert_eq(jr_bulk(r, q, JR_BULK_DELAYED, JR_BULK_DELETE, &f, NULL, 0, NULL, &res), 0);
    cr_expect_eq(res.matched, 0, "%lld a jobs were passed over", res.matched);
    jr_redis_free(r);
}

Test(bulk, delete_by_handler_in_one_time_wheel_bucket_leaves_exactly_the_others) {
    /* one second an hour ahead: one bucket of the time wheel; its head
     * all "a", so removing them pops the bucket's head */
    int64_t at = (jrt_wall_us() / 1000000 + 3600) * 1000000 + 250000;
    delete_a("wheel", enqueue_mix("wheel", at, 700, 1));
}

Test(bulk, delete_by_handler_among_jobs_of_one_due_time_in_the_sorted_set) {
    /* due in a moment: the sorted set, every member of the same score */
    int64_t at = jrt_wall_us() + 600 * 1000;
    delete_a("near", enqueue_mix("near", at, 10, 1));
}

Test(bulk, run_now_of_retrying_jobs_leaves_the_delayed_ones) {
    int64_t at = (jrt_wall_us() / 1000000 + 3600) * 1000000;
    long long na = enqueue_mix("retry", at, 0, 2); /* attempt 2: retrying */
    (void)na;
    jr_enqueue_t d = jrt_job("retry", "a", "first try");
    d.at_us = at;
    jrt_enqueue(&R, d, 5, NULL); /* attempt 1: delayed */
    jr_redis_t *r = jrt_jr_connect(&R);
    jr_bulk_result_t res;
    cr_assert_eq(jr_bulk(r, "retry", JR_BULK_RETRYING, JR_BULK_RUN_NOW, NULL, NULL, 0, NULL, &res), 0, "%s",
                 jr_redis_errstr(r));
    cr_expect_eq(res.acted, N);
    jr_qstats_t s;
    cr_assert_eq(jr_redis_stats(r, "retry", &s), 0);
    cr_expect_eq(s.ready, N, "ready %lld", s.ready);
    cr_expect_eq(s.delayed, 5, "the delayed jobs (attempt 1) stay: %lld", s.delayed);
    jr_redis_free(r);
}

/* n dead entries of handler h, payloads "<p>-<i>", in queue q's dead stream. */
static void bury(redisContext *c, const char *q, const char *h, const char *p, int n) {
    for (int i = 0; i < n; i++) {
        char key[128], id[64], pay[64];
        snprintf(key, sizeof key, "jr:{%s}:dead", q);
        snprintf(id, sizeof id, "%s-%s-%d", h, p, i);
        snprintf(pay, sizeof pay, "%s-%d", p, i);
        freeReplyObject(jrt_cmd(c, "XADD", key, "*", "id", id, "h", h, "p", pay, "a", "3", "why", "failed", "err", "boom", NULL));
    }
}

Test(bulk, dead_retry_and_purge_by_handler_and_payload_from_the_cli) {
    redisContext *c = jrt_connect(&R);
    bury(c, "default", "mail", "order-1042", 600);
    bury(c, "default", "mail", "order-7", 30);
    bury(c, "default", "echo", "order-1042", 20);
    const char *ask[] = {"dead", "retry", "--redis", R.url, "--handler", "mail", "--match", "1042", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, ask), 2, "without --yes, stdin not a terminal: refused");
    cr_expect(strstr(err, "give --yes"), "%s", err);
    cr_expect_eq(jrt_int(c, "XLEN jr:{default}:dead"), 650, "nothing changed");
    const char *retry[] = {"dead", "retry", "--handler", "mail", "--match", "1042", "--yes", NULL};
    cr_assert_eq(jrt_cli(&R, out, sizeof out, retry), 0, "%s", out);
    cr_expect(strstr(out, "re-enqueued 600 dead jobs with handler mail"), "%s", out);
    cr_expect_eq(jrt_int(c, "XLEN jr:{default}:dead"), 50);
    cr_expect_eq(jrt_int(c, "XLEN jr:{default}:ready"), 600);
    const char *purge[] = {"dead", "delete", "--match", "order-7", "--yes", NULL};
    cr_assert_eq(jrt_cli(&R, out, sizeof out, purge), 0, "%s", out);
    cr_expect(strstr(out, "purged 30 dead jobs whose payload contains \"order-7\""), "%s", out);
    const char *job[] = {"job", "delete", "--state", "dead", "--handler", "echo", "--yes", NULL};
    cr_assert_eq(jrt_cli(&R, out, sizeof out, job), 0, "%s", out);
    cr_expect(strstr(out, "deleted 20 dead jobs with handler echo"), "%s", out);
    cr_expect_eq(jrt_int(c, "XLEN jr:{default}:dead"), 0);
    const char *none[] = {"dead", "retry", "--handler", "mail", "--yes", NULL};
    cr_assert_eq(jrt_cli(&R, out, sizeof out, none), 0, "%s", out);
    cr_expect(strstr(out, "no dead jobs with handler mail in queue default"), "%s", out);
    redisFree(c);
}

/* A filter given empty (an unset shell variable) or twice is a usage error
 * that changes nothing: empty meant "any handler" or "any payload", and the
 * second value silently replaced the first, so either widened the action to
 * jobs the user did not name. An empty --key is refused the same way. */
Test(bulk, an_empty_or_repeated_filter_is_refused_and_changes_nothing) {
    redisContext *c = jrt_connect(&R);
    bury(c, "default", "mail", "order-1042", 10);
    bury(c, "default", "echo", "cust-3", 10);
    const char *cases[][10] = {
        {"dead", "delete", "--handler", "", "--yes", NULL},
        {"dead", "retry", "--match", "", "--yes", NULL},
        {"job", "delete", "--state", "dead", "--match", "order-1042", "--match", "cust-3", "--yes", NULL},
        {"dead", "delete", "--handler", "mail", "--handler", "echo", "--yes", NULL},
        {"enqueue", "--key", "", "echo", "x", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *args[12] = {0}; /* jrt_run, not jrt_cli: it logs a warning (exit 1 of the suite) for exit 2 */
        size_t k = 0;
        for (; cases[i][k]; k++) args[k] = cases[i][k];
        args[k++] = "--redis", args[k++] = R.url;
        cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, args), 2, "%s %s %s: not refused: %s", cases[i][0],
                     cases[i][1], cases[i][2], err);
        cr_expect(strstr(err, "given twice") || strstr(err, "not empty"), "%s", err);
    }
    cr_expect_eq(jrt_int(c, "XLEN jr:{default}:dead"), 20, "nothing changed");
    cr_expect_eq(jrt_int(c, "EXISTS jr:{default}:ready"), 0, "nothing enqueued");
    redisFree(c);
}

Test(bulk, a_selection_acts_on_the_named_jobs_in_that_state_only) {
    char ids[3][JR_ID_MAX];
    jr_enqueue_t j[3] = {jrt_job("sel", "a", "1"), jrt_job("sel", "a", "2"), jrt_job("sel", "a", "3")};
    j[0].delay_ms = j[1].delay_ms = 3600 * 1000; /* j[2]: ready now */
    jrt_enqueue_jobs(&R, j, 3, ids);
    jr_redis_t *r = jrt_jr_connect(&R);
    const char *sel[] = {ids[0], ids[2], "no-such-job"};
    unsigned char found[3];
    jr_bulk_result_t res;
    cr_assert_eq(jr_bulk(r, "sel", JR_BULK_DELAYED, JR_BULK_DELETE, NULL, sel, 3, found, &res), 0);
    cr_expect(found[0] && !found[1] && !found[2], "found %d %d %d", found[0], found[1], found[2]);
    cr_expect_eq(res.acted, 1);
    jr_qstats_t s;
    cr_assert_eq(jr_redis_stats(r, "sel", &s), 0);
    cr_expect_eq(s.delayed, 1);
    cr_expect_eq(s.ready, 1, "a ready job named in a selection of delayed jobs stays");
    jr_redis_free(r);
}
