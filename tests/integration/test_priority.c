/* Priorities and pause (issue 8 §3, §4), against a real Redis and real
 * worker processes with the recording plugin (each job's payload is its
 * queue's name, so the record file says which queue each started job came
 * from, and when):
 *   - weighted: with every queue full, the first 10,000 jobs started come
 *     from the queues in the proportions of their weights (±5%), also when
 *     the weights come from the YAML mapping form; an empty queue gives its
 *     share to the others; an idle worker serving several queues makes one
 *     blocking read per block period;
 *   - strict: no job of a later queue starts while an earlier one has jobs;
 *   - pause: a job enqueued after `pause` returned never starts while the
 *     queue is paused, also after the worker restarts; a busy worker stops
 *     starting the queue's jobs within the bound; `stats` shows it paused
 *     (text and JSON); `resume` runs them. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "jr.h"
#include "redis.h"
#include "redis_produce.h"
#include "redis_admin.h"

JRT_RECORDED_SUITE(priority, .timeout = 300);

/* A config file: the Redis URL, warn-level logs, plus `extra` YAML. */
static void config(const char *extra) {
    char text[2048];
    snprintf(text, sizeof text, "log:\n  level: warn\n%s", extra);
    jrt_config(&R, text, cfgpath, sizeof cfgpath);
}

/* Enqueue n jobs of `handler` into queue, payload `payload` (NULL: the
 * queue's name), pipelined in chunks. */
static void enqueue_n(const char *queue, const char *handler, const char *payload, size_t n) {
    jrt_enqueue(&R, jrt_job(queue, handler, payload ? payload : queue), n, NULL);
}

/* Start a worker with the config and extra args (NULL-terminated). */
static pid_t worker(const char *const *extra) { return jrt_worker(&R, cfgpath, NULL, wlog, extra); }

/* A started job: its start time (Unix us) and queue (its payload). */
typedef struct {
    long long us;
    char queue[32];
} start_t;

static int by_time(const void *a, const void *b) {
    long long x = ((const start_t *)a)->us, y = ((const start_t *)b)->us;
    return x < y ? -1 : x > y;
}

/* The jobs started so far, in the order they started. */
static start_t *starts(size_t *n) {
    char *text = jrt_slurp(record);
    size_t cap = 1024, k = 0;
    start_t *v = malloc(cap * sizeof *v);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char id[200];
        unsigned attempt;
        if (k == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        cr_assert(v);
        if (sscanf(line, "%199s %u %lld %31s", id, &attempt, &v[k].us, v[k].queue) == 4) k++;
    }
    free(text);
    qsort(v, k, sizeof *v, by_time);
    *n = k;
    return v;
}

/* Of the first `first` jobs started, how many came from queue. */
static size_t count_of(const start_t *v, size_t first, const char *queue) {
    size_t c = 0;
    for (size_t i = 0; i < first; i++) c += !strcmp(v[i].queue, queue);
    return c;
}

/* Expect `got` of `total` to be share x total, within ±5% of that. */
static void expect_share(const char *queue, size_t got, size_t total, double share) {
    double want = share * (double)total;
    cr_expect(got >= want * 0.95 && got <= want * 1.05,
              "queue %s: %zu of the first %zu jobs started, expected %.0f ±5%%", queue, got, total, want);
}

/* Wait until the record has n lines (fails the test after timeout_ms). */
static void wait_runs(size_t n, int timeout_ms) {
    size_t got = jrt_wait_lines(record, n, timeout_ms);
    cr_assert_geq(got, n, "only %zu of %zu jobs ran; worker log:\n%s", got, n, jrt_slurp(wlog));
}

static void pause_queue(const char *queue, int on) {
    char out[512];
    const char *a[] = {on ? "pause" : "resume", "-c", cfgpath, queue, NULL};
    jrt_run_expect(0, out, sizeof out, a);
    char want[200];
    snprintf(want, sizeof want, "%s %s", queue, on ? "paused" : "resumed");
    cr_expect(strstr(out, want), "%s printed: %s", a[0], out);
}

Test(priority, weighted_proportions_hold_over_10000_jobs_and_idle_costs_one_read_per_period) {
    config("worker:\n  block: 1s\n");
    /* More than each queue's share of 10,000: every queue stays full. */
    enqueue_n("critical", "record", NULL, 7000);
    enqueue_n("default", "record", NULL, 3600);
    enqueue_n("low", "record", NULL, 1400);
    const char *q[] = {"-q", "critical:6", "-q", "default:3", "-q", "low:1", NULL};
    pid_t w = worker(q);
    wait_runs(12000, 120000);
    size_t n;
    start_t *v = starts(&n);
    expect_share("critical", count_of(v, 10000, "critical"), 10000, 0.6);
    expect_share("default", count_of(v, 10000, "default"), 10000, 0.3);
    expect_share("low", count_of(v, 10000, "low"), 10000, 0.1);
    free(v);
    /* Idle now: one blocking read per block period (1 s), not one per queue
     * nor a poll. Over 3 s: at most 3 periods plus the read in flight. */
    jrt_sleep_ms(1500);
    long long before = jrt_calls(&R, "xreadgroup");
    jrt_sleep_ms(3000);
    long long reads = jrt_calls(&R, "xreadgroup") - before;
    cr_expect(reads <= 5, "an idle worker of 3 queues made %lld XREADGROUP calls in 3 s (block 1s)", reads);
    /* ...and nothing with it: the paused set is not read after reads that
     * time out (see "Idle cost" in docs/operations.md). */
    before = jrt_calls(&R, "hmget");
    jrt_sleep_ms(3000);
    long long hmgets = jrt_calls(&R, "hmget") - before;
    cr_expect_eq(hmgets, 0, "an idle worker read the paused set %lld times in 3 s", hmgets);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* An idle worker's read goes without the paused set; a pause that does not
 * wake it (here: the hash written by hand, no CLIENT UNBLOCK — as when the
 * pause lands between two reads) must still keep the queue's jobs from
 * starting: the read that brings them reads the paused set before any
 * starts, and hands them back. */
Test(priority, a_pause_that_misses_the_idle_read_still_stops_the_jobs_it_brings) {
    config("worker:\n  block: 1s\n");
    const char *q[] = {"-q", "mail", NULL};
    pid_t w = worker(q);
    enqueue_n("mail", "record", NULL, 1);
    wait_runs(1, 20000);
    jrt_sleep_ms(2500); /* at least one read timed out: the worker reads alone now */
    redisContext *c = jrt_connect(&R);
    cr_assert_eq(jrt_int(c, "HSETNX jr:{queues}:paused mail %lld", (long long)(jrt_wall_us() / 1000)), 1);
    enqueue_n("mail", "record", "after-pause", 3);
    jrt_sleep_ms(1500);
    cr_expect_eq(jrt_count(record, "after-pause"), 0, "a job of the paused queue ran; worker log:\n%s", jrt_slurp(wlog));
    jr_qstats_t s = jrt_stats(&R, "mail");
    for (int t = 0; t < 5000 && (s.ready != 3 || s.pending); t += 100, jrt_sleep_ms(100)) s = jrt_stats(&R, "mail");
    cr_expect_eq(s.ready, 3, "the jobs should be back in the queue (ready %lld, pending %lld)", (long long)s.ready,
                 (long long)s.pending);
    pause_queue("mail", 0);
    size_t got = jrt_wait_lines(record, 4, 5000);
    cr_expect_eq(got, 4, "the jobs did not run after resume");
    cr_expect_eq(jrt_count(record, "after-pause"), 3);
    redisFree(c);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

Test(priority, yaml_weights_and_an_empty_queue_gives_its_share_to_the_others) {
    config("worker:\n  queues:\n    - {name: critical, weight: 6}\n    - {name: default, weight: 3}\n"
           "    - {name: low}\n");
    /* critical is empty: default and low share everything 3:1. */
    enqueue_n("default", "record", NULL, 3600);
    enqueue_n("low", "record", NULL, 1400);
    pid_t w = worker(NULL);
    wait_runs(5000, 120000);
    size_t n;
    start_t *v = starts(&n);
    expect_share("default", count_of(v, 4000, "default"), 4000, 0.75);
    expect_share("low", count_of(v, 4000, "low"), 4000, 0.25);
    cr_expect_eq(count_of(v, n, "critical"), 0);
    free(v);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* A queue that Redis refuses in the middle of a drain (its stream replaced
 * by a string: WRONGTYPE) costs the other queue nothing: the entries its
 * read brought in the same round are started at once, not left pending
 * for a take-over after the lease (60 s here). */
Test(priority, a_queue_refused_mid_drain_does_not_hold_back_the_others) {
    config("worker:\n  queues: [a, b]\n  lease: 60s\n");
    enqueue_n("a", "record", NULL, 8000);
    enqueue_n("b", "record", NULL, 8000);
    pid_t w = worker(NULL);
    cr_assert_geq(jrt_wait_lines(record, 2000, 60000), 2000, "the drain did not start");
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "DEL", "jr:{b}:ready", NULL));
    freeReplyObject(jrt_cmd(c, "SET", "jr:{b}:ready", "garbage", NULL));
    redisFree(c);
    /* every job of a runs well within the lease */
    int64_t t0 = jrt_wall_us();
    size_t n = 0, ran_a = 0;
    while (ran_a < 8000 && jrt_wall_us() - t0 < 40000000) {
        jrt_sleep_ms(200);
        start_t *v = starts(&n);
        ran_a = count_of(v, n, "a");
        free(v);
    }
    cr_expect_eq(ran_a, 8000, "%zu of a's 8000 jobs ran in %lld ms (%s)", ran_a,
                 (long long)((jrt_wall_us() - t0) / 1000), wlog);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

Test(priority, strict_order_starts_no_later_queue_job_while_an_earlier_queue_has_jobs) {
    config("worker:\n  order: strict\n  concurrency: 1\n  queues: [urgent, normal, bulk]\n");
    enqueue_n("bulk", "record", NULL, 600);
    enqueue_n("normal", "record", NULL, 600);
    enqueue_n("urgent", "record", NULL, 600);
    pid_t w = worker(NULL);
    wait_runs(1800, 120000);
    size_t n;
    start_t *v = starts(&n);
    cr_assert_eq(n, 1800);
    cr_expect_eq(count_of(v, 600, "urgent"), 600, "the first 600 started must all be urgent");
    cr_expect_eq(count_of(v, 1200, "normal"), 600, "then the 600 normal ones");
    free(v);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* A job enqueued 200 ms after `pause` returned never starts while the
 * queue is paused (also across a worker restart); stats shows it; resume
 * runs it. */
Test(priority, pause_stops_fetching_survives_a_worker_restart_and_resume_restarts_it) {
    config("worker:\n  block: 5s\n");
    const char *q[] = {"-q", "mail", "-q", "other", NULL};
    pid_t w = worker(q);
    enqueue_n("mail", "record", NULL, 1);
    wait_runs(1, 20000); /* the worker is up and blocked in its read */
    jrt_sleep_ms(300);
    pause_queue("mail", 1);
    jrt_sleep_ms(200);
    enqueue_n("mail", "record", "after-pause", 1);
    enqueue_n("other", "record", NULL, 1); /* the other queue keeps going */
    /* Delayed jobs still fall due into the paused queue. */
    pid_t sched = jrt_scheduler(&R, cfgpath, wlog);
    char out[4096];
    const char *later[] = {"enqueue", "-c", cfgpath, "-q", "mail", "--in", "300ms", "record", "delayed", NULL};
    jrt_run_expect(0, out, sizeof out, later);
    wait_runs(2, 20000);
    jrt_sleep_ms(1500);
    cr_expect_eq(jrt_count(record, "after-pause"), 0, "a job of the paused queue ran");
    cr_expect_eq(jrt_count(record, "delayed"), 0, "a delayed job of the paused queue ran");
    jr_qstats_t s = jrt_stats(&R, "mail");
    cr_expect_eq(s.ready, 2, "the job enqueued and the delayed one promoted should be ready");
    cr_expect_eq(s.delayed, 0);
    cr_expect_eq(s.pending, 0);

    const char *text[] = {"stats", "-c", cfgpath, "-q", "mail", "-q", "other", NULL};
    jrt_run_expect(0, out, sizeof out, text);
    cr_expect(strstr(out, "PAUSED"), "%s", out);
    char *mail = strstr(out, "\nmail");
    cr_expect(mail && strstr(mail, "since "), "stats does not show mail paused:\n%s", out);
    const char *json[] = {"stats", "-c", cfgpath, "-q", "mail", "-q", "other", "--json", NULL};
    jrt_run_expect(0, out, sizeof out, json);
    cr_expect(strstr(out, "\"queue\":\"mail\",\"ready\":2,\"pending\":0,\"delayed\":0,\"dead\":0,\"paused\":true"),
              "%s", out);
    cr_expect(strstr(out, "\"queue\":\"other\",\"ready\":0,\"pending\":0,\"delayed\":0,\"dead\":0,\"paused\":false"),
              "%s", out);

    /* The state is in Redis: a new worker does not take the job either. */
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    w = worker(q);
    jrt_sleep_ms(1500);
    cr_expect_eq(jrt_count(record, "after-pause"), 0, "a restarted worker ran a job of the paused queue");

    pause_queue("mail", 0);
    size_t got = jrt_wait_lines(record, 4, 3000); /* woken at once, not after the 5 s block */
    cr_expect_eq(got, 4, "the jobs did not run within 3 s of resume");
    cr_expect_eq(jrt_count(record, "after-pause"), 1);
    cr_expect_eq(jrt_count(record, "delayed"), 1);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(sched, SIGTERM, 10000), 0);
}

/* A busy worker (jobs fetched and waiting for a runner) stops starting
 * the paused queue's jobs within the bound: none starts later than 1 s
 * (a generous bound for the 100 ms target on a loaded machine) after
 * `pause` returned; the fetched ones go back to the queue. */
Test(priority, pause_stops_a_busy_worker_within_the_bound) {
    config("worker:\n  concurrency: 2\n");
    enqueue_n("busy", "nap", "5", 3000); /* ~7.5 s of work for 2 runners */
    const char *q[] = {"-q", "busy", NULL};
    pid_t w = worker(q);
    wait_runs(100, 20000);
    pause_queue("busy", 1);
    int64_t paused_at = jrt_wall_us();
    jrt_sleep_ms(2500);
    size_t n;
    start_t *v = starts(&n);
    long long late = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].us > paused_at + 1000000) late++;
    cr_expect_eq(late, 0, "%lld jobs started more than 1 s after the pause returned", late);
    cr_expect_lt(n, 3000);
    free(v);
    jr_qstats_t s = jrt_stats(&R, "busy");
    cr_expect_eq(s.pending, 0, "fetched jobs were not handed back");
    cr_expect_eq((size_t)s.ready, 3000 - n);
    pause_queue("busy", 0);
    wait_runs(3000, 60000);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}
