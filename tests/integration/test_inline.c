/* Inline isolation keeps the promises of process isolation (issue 18 §3),
 * against a real Redis and real workers (`isolation: inline`):
 *   - leases: two inline workers with a 2 s lease run every one of 260
 *     short jobs exactly once, no fault injected, also while one of them
 *     holds seconds of fetched work; a handler that runs past the lease is
 *     not taken over while its worker lives;
 *   - pause: no job starts later than the bound after `pause` returned; the
 *     jobs held and not started go back to the queue;
 *   - cancel: a job held (fetched, not started) and cancelled never runs,
 *     and is acknowledged as cancelled;
 *   - shutdown: SIGTERM hands back the held jobs, another worker runs them,
 *     each once;
 *   - prefetch: jobs longer than a fetch round trip are not hoarded.
 * Times are generous (a loaded 2-core machine); what is asserted is what a
 * user would check: the record of runs and the counts of the queue. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"
#include "redis.h"
#include "redis_admin.h"
#include "redis_produce.h"

JRT_RECORDED_SUITE(inline, .timeout = 240);

/* A config file: the Redis URL, inline isolation, plus `extra` YAML under
 * worker:. */
static void config(const char *extra) {
    char text[1024];
    snprintf(text, sizeof text, "worker:\n  isolation: inline\n%s", extra ? extra : "");
    jrt_config(&R, text, cfgpath, sizeof cfgpath);
}

/* Enqueue n jobs of `handler` with `payload` into queue `q` (ids NULL:
 * generated; else ids[i]). */
static void enqueue_n(const char *q, const char *handler, const char *payload, size_t n, const char *const *ids) {
    jr_enqueue_t *jobs = calloc(n, sizeof *jobs);
    cr_assert(jobs);
    for (size_t i = 0; i < n; i++) {
        jobs[i] = jrt_job(q, handler, payload);
        jobs[i].id = ids ? ids[i] : NULL, jobs[i].env.max_attempts = 5;
    }
    jrt_enqueue_jobs(&R, jobs, n, NULL);
    free(jobs);
}

static pid_t start_worker(const char *q) { return jrt_worker(&R, cfgpath, NULL, wlog, (const char *[]){"-q", q, NULL}); }

/* A run in the record: job id, start (Unix us), payload. */
typedef struct {
    char id[128];
    long long us;
    char payload[64];
} run_t;

/* Every run recorded so far (malloc'ed; *n of them). */
static run_t *runs(size_t *n) {
    char *text = jrt_slurp(record);
    size_t cap = 256, k = 0;
    run_t *v = malloc(cap * sizeof *v);
    cr_assert(v);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned attempt;
        if (k == cap) cr_assert(v = realloc(v, (cap *= 2) * sizeof *v));
        if (sscanf(line, "%127s %u %lld %63s", v[k].id, &attempt, &v[k].us, v[k].payload) == 4) k++;
    }
    free(text);
    *n = k;
    return v;
}

static int by_id(const void *a, const void *b) { return strcmp(((const run_t *)a)->id, ((const run_t *)b)->id); }

/* Expect `want` runs in the record, each of a different job. */
static void expect_each_once(size_t want) {
    size_t n, twice = 0;
    run_t *v = runs(&n);
    qsort(v, n, sizeof *v, by_id);
    for (size_t i = 1; i < n; i++) twice += !strcmp(v[i].id, v[i - 1].id);
    cr_expect_eq(twice, 0, "%zu runs repeated a job that had run already (%zu runs); worker log:\n%s", twice, n,
                 jrt_slurp(wlog));
    cr_expect_eq(n - twice, want, "%zu different jobs ran, expected %zu", n - twice, want);
    free(v);
}

/* The pending counts of the group's consumers of queue q: the largest. */
static long long max_consumer_pending(redisContext *c, const char *q) {
    redisReply *rep = redisCommand(c, "XINFO CONSUMERS jr:{%s}:ready jr", q);
    cr_assert(rep, "XINFO CONSUMERS: %s", c->errstr);
    long long best = 0;
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        for (size_t k = 0; k + 1 < e->elements; k += 2)
            if (!strcmp(e->element[k]->str, "pending") && e->element[k + 1]->integer > best)
                best = e->element[k + 1]->integer;
    }
    freeReplyObject(rep);
    return best;
}

/* Wait until the record holds a run with this payload (fails after timeout_ms). */
static void wait_payload(const char *payload, int timeout_ms) {
    char needle[80];
    snprintf(needle, sizeof needle, " %s\n", payload);
    for (int waited = 0; jrt_count(record, needle) == 0; waited += 10) {
        cr_assert_lt(waited, timeout_ms, "no run of \"%s\" within %d ms; worker log:\n%s", payload, timeout_ms,
                     jrt_slurp(wlog));
        jrt_sleep_ms(10);
    }
}

/* 20 no-op jobs (so the workers measure jobs as shorter than a fetch and
 * fetch many at once) followed by 240 jobs of 15 ms: 3.6 s of work, more
 * than the lease, that one worker may hold as one batch. Two inline
 * workers, no fault: each job runs once. */
Test(inline, two_workers_with_a_2s_lease_run_260_short_jobs_each_once) {
    config("  lease: 2s\n");
    enqueue_n("q", "noop", "", 20, NULL);
    enqueue_n("q", "nap", "15", 240, NULL);
    pid_t a = start_worker("q"), b = start_worker("q");
    jr_qstats_t s = jrt_wait_settled(&R, "q", 0, 60000);
    cr_expect_eq(s.ready + s.pending + s.delayed, 0, "jobs left: ready %lld pending %lld", s.ready, s.pending);
    jrt_sleep_ms(500); /* a run that started late would show now */
    expect_each_once(240); /* the no-ops record nothing */
    cr_expect_eq(jrt_count(wlog, "took over jobs"), 0, "a live worker's jobs were taken over:\n%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_stop(a, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(b, SIGTERM, 10000), 0);
}

/* One handler that runs three leases long: its worker lives, so the other
 * worker never takes it over. */
Test(inline, a_handler_running_past_the_lease_is_not_taken_over) {
    config("  lease: 1s\n");
    enqueue_n("q", "nap", "3000", 1, NULL);
    pid_t a = start_worker("q");
    wait_payload("3000", 10000);
    pid_t b = start_worker("q");
    jr_qstats_t s = jrt_wait_settled(&R, "q", 0, 20000);
    cr_expect_eq(s.pending + s.ready, 0);
    jrt_sleep_ms(300);
    expect_each_once(1);
    cr_expect_eq(jrt_stop(a, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(b, SIGTERM, 10000), 0);
}

/* A worker holding ~3 s of fetched 5 ms jobs stops starting them within
 * the bound after `pause` returned (1 s here: generous for the 100 ms
 * target on a loaded machine; at most the job running then finishes); the
 * held ones go back to the queue. */
Test(inline, pause_stops_starts_within_the_bound_and_hands_back_held_jobs) {
    config(NULL);
    enqueue_n("q", "noop", "", 20, NULL);
    enqueue_n("q", "nap", "5", 480, NULL);
    pid_t w = start_worker("q");
    cr_assert_geq(jrt_wait_lines(record, 60, 20000), 60);
    redisContext *c = jrt_connect(&R);
    long long held = max_consumer_pending(c, "q");
    redisFree(c);
    cr_expect_geq(held, 100, "the worker held only %lld jobs: the test would not show the hand-back; log:\n%s", held, jrt_slurp(wlog));
    char out[512], err[512];
    const char *pa[] = {"pause", "-c", cfgpath, "q", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, pa), 0, "pause: %s%s", out, err);
    int64_t paused_at = jrt_wall_us();
    jrt_sleep_ms(2000);
    size_t n, late = 0;
    long long last = 0;
    run_t *v = runs(&n);
    for (size_t i = 0; i < n; i++) {
        late += v[i].us > paused_at + 1000000;
        if (v[i].us - paused_at > last) last = v[i].us - paused_at;
    }
    free(v);
    cr_log_info("the last job started %lld ms after the pause returned", last / 1000);
    cr_expect_eq(late, 0, "%zu jobs started more than 1 s after the pause returned (%zu in all)", late, n);
    jr_qstats_t s = jrt_stats(&R, "q");
    cr_expect_eq(s.pending, 0, "%lld fetched jobs were not handed back", s.pending);
    cr_expect_eq((size_t)s.ready, 480 - n, "ready %lld, %zu ran", s.ready, n);
    const char *ra[] = {"resume", "-c", cfgpath, "q", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, ra), 0);
    jrt_wait_settled(&R, "q", 0, 60000);
    expect_each_once(480);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* A job the worker holds behind a 1.5 s one is cancelled: it never runs,
 * and it is gone (not found); the jobs around it run. */
Test(inline, a_cancelled_held_job_never_starts) {
    config(NULL);
    enqueue_n("q", "noop", "", 20, NULL);
    enqueue_n("q", "nap", "1500", 1, NULL);
    const char *ids[] = {"held-1"};
    enqueue_n("q", "record", "held-1", 1, ids);
    enqueue_n("q", "record", "after", 10, NULL);
    pid_t w = start_worker("q");
    wait_payload("1500", 20000);
    redisContext *c = jrt_connect(&R);
    cr_assert_geq(max_consumer_pending(c, "q"), 12, "the worker does not hold the jobs behind the slow one");
    redisFree(c);
    char out[512], err[512];
    const char *ca[] = {"cancel", "-c", cfgpath, "-q", "q", "held-1", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, ca), 0, "cancel: %s%s", out, err);
    cr_expect_str_eq(out, "held-1 running\n");
    jrt_wait_settled(&R, "q", 0, 20000);
    jrt_sleep_ms(300);
    cr_expect_eq(jrt_count(record, " held-1\n"), 0, "the cancelled job ran");
    cr_expect_eq(jrt_count(record, " after\n"), 10);
    const char *sa[] = {"job", "show", "-c", cfgpath, "-q", "q", "held-1", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, sa), 1, "job show: %s%s", out, err);
    cr_expect(strstr(out, "not found"), "the cancelled job is still there: %s", out);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* SIGTERM to a worker that has held ~5 s of 5 ms jobs for longer than
 * the lease (2 s), beside another worker: it ends soon (the job running
 * finishes), handing back the rest; the other worker runs them; each job
 * runs once. */
Test(inline, sigterm_hands_back_held_jobs_to_another_worker) {
    config("  lease: 2s\n  batch: 2000\n  prefetch: 2000\n");
    enqueue_n("q", "noop", "", 20, NULL);
    enqueue_n("q", "nap", "5", 1000, NULL);
    pid_t a = start_worker("q");
    cr_assert_geq(jrt_wait_lines(record, 40, 20000), 40);
    pid_t b = start_worker("q");
    jrt_sleep_ms(2500);
    redisContext *c = jrt_connect(&R);
    long long held = max_consumer_pending(c, "q");
    redisFree(c);
    cr_expect_geq(held, 100, "the worker held only %lld jobs: the test would not show the hand-back; log:\n%s", held, jrt_slurp(wlog));
    int64_t t0 = jrt_wall_us();
    cr_expect_eq(jrt_stop(a, SIGTERM, 10000), 0, "the worker did not stop cleanly on SIGTERM");
    cr_expect_lt(jrt_wall_us() - t0, 3000000, "the worker took %lld ms to stop", (long long)(jrt_wall_us() - t0) / 1000);
    jr_qstats_t s = jrt_wait_settled(&R, "q", 0, 60000);
    cr_expect_eq(s.ready + s.pending, 0);
    jrt_sleep_ms(500);
    expect_each_once(1000);
    cr_expect_eq(jrt_stop(b, SIGTERM, 10000), 0);
}

/* Jobs of 20 ms take far longer than a fetch round trip: an inline worker
 * holds about what it runs (its one runner plus prefetch = round trip / job
 * duration), never the queue. */
Test(inline, prefetch_stays_bounded_for_jobs_longer_than_a_fetch) {
    config(NULL);
    enqueue_n("q", "nap", "20", 150, NULL);
    pid_t w = start_worker("q");
    redisContext *c = jrt_connect(&R);
    long long most = 0;
    for (int i = 0; i < 400 && jrt_lines(record) < 150; i++) {
        long long p = max_consumer_pending(c, "q");
        if (p > most) most = p;
        jrt_sleep_ms(10);
    }
    cr_expect_leq(most, 5, "the worker held %lld jobs of 20 ms at once", most);
    jrt_wait_settled(&R, "q", 0, 30000);
    expect_each_once(150);
    redisFree(c);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}
