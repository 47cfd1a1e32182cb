/* One clock: Redis's (issue 18 §4). Workers and schedulers whose host clock
 * is 30 s ahead or behind (libfaketime preloaded: CLOCK_REALTIME skewed,
 * CLOCK_MONOTONIC not) against a real redis-server: a job for a handler the
 * worker lacks is deferred, not dead-lettered early, and dead-lettered
 * after worker.handler_wait, not 30 s late; each periodic tick fires once,
 * at its time on Redis's clock; a retry is due when asked, not early;
 * presence is not reported stale, the stats window counts the jobs, and a
 * pause records Redis's time. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"

JRT_RECORDED_SUITE(clock, .timeout = 120);

/* Redis's clock, Unix ms. */
static long long redis_ms(void) {
    redisContext *c = jrt_connect(&R);
    long long ms = jrt_redis_ms(c);
    redisFree(c);
    return ms;
}

/* The skew a process's log shows: the time of its first line minus Redis's
 * clock when it was read (ms), once the log has a line. */
static long long log_skew_ms(const char *log) {
    for (int i = 0; i < 200 && jrt_lines(log) == 0; i++) jrt_sleep_ms(50);
    char *text = jrt_slurp(log);
    struct tm tm = {0};
    int ms = 0;
    const char *end = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
    cr_assert(end, "no time at the start of %s: %.200s", log, text);
    if (*end == '.') ms = atoi(end + 1);
    free(text);
    return (long long)timegm(&tm) * 1000 + ms;
}

/* Run jobrunner with args ("--redis URL" added: jrt_cli); stdout into out. */
static int cli(char *out, size_t len, const char *const *args) { return jrt_cli(&R, out, len, args); }

/* job show --json ID in queue: the parsed document (caller frees). */
static json_t *show(const char *queue, const char *id) {
    static char out[1 << 16];
    const char *args[] = {"job", "show", "--json", "-q", queue, id, NULL};
    cli(out, sizeof out, args);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    cr_assert(doc, "job show --json: %s", out);
    return doc;
}

static char *state_of(const char *queue, const char *id) {
    static char state[32];
    json_t *doc = show(queue, id);
    snprintf(state, sizeof state, "%s", json_string_value(json_object_get(doc, "state")));
    json_decref(doc);
    return state;
}

/* A worker for queue main whose clock is skewed by `skew`, and a scheduler
 * (true clock: see skewed_schedulers_... for skewed ones) that promotes
 * its deferred and retried jobs; their pids into pid[0], pid[1]. */
static void worker(const char *skew, const char *log, const char *extra, pid_t *pid) {
    jrt_config(&R, extra, cfgpath, sizeof cfgpath);
    pid[1] = jrt_scheduler(&R, cfgpath, jrt_path(&R, "scheduler.log"));
    const char *w[] = {"worker", "-c", cfgpath, "-q", "main", "--plugin", JRT_CANCEL_PLUGIN, NULL};
    pid[0] = jrt_spawn_skewed(skew, log, w);
    long long skewed = log_skew_ms(log) - redis_ms();
    long long want = skew[0] == '+' ? 30000 : -30000;
    cr_assert(skewed > want - 5000 && skewed < want + 5000, "the worker's clock is off by %lld ms, not %s", skewed,
              skew);
}

/* 30 s ahead, worker.handler_wait 20 s: the job for a handler it lacks has
 * waited ~0 s by Redis's clock, so it is deferred, again and again, not
 * dead-lettered. */
/* worker(skew, wlog, extra, w), and job `id` of main for a handler no
 * worker has (enqueued with the CLI). */
static void missing_handler(const char *skew, const char *extra, const char *id, pid_t *w) {
    worker(skew, wlog, extra, w);
    char out[512];
    const char *e[] = {"enqueue", "-q", "main", "--id", id, "missing", NULL};
    cr_assert_eq(cli(out, sizeof out, e), 0);
}

Test(clock, worker_ahead_defers_a_job_for_a_missing_handler) {
    const char *log = wlog;
    pid_t w[2];
    missing_handler("+30s", "worker:\n  handler_wait: 20s\n", "nh-1", w);
    for (int i = 0; i < 200 && jrt_count(log, "deferred") < 2; i++) jrt_sleep_ms(50);
    cr_expect_geq(jrt_count(log, "deferred"), 2, "the job was not deferred (twice)");
    cr_expect_eq(jrt_count(log, "moved to the dead-letter stream"), 0, "dead-lettered by a clock 30 s ahead");
    cr_expect_eq(jrt_stats(&R, "main").dead, 0);
    const char *st = state_of("main", "nh-1");
    cr_expect(strcmp(st, "dead") != 0, "nh-1 is %s", st);
    jrt_stop(w[0], SIGTERM, 10000);
    jrt_stop(w[1], SIGTERM, 10000);
}

/* 30 s behind, worker.handler_wait 2 s: dead-lettered after ~2 s of waiting
 * by Redis's clock, not after 32 s. */
Test(clock, worker_behind_buries_after_handler_wait) {
    const char *log = wlog;
    pid_t w[2];
    missing_handler("-30s", "worker:\n  handler_wait: 2s\n", "nh-2", w);
    long long t0 = redis_ms();
    int dead = 0;
    for (int i = 0; i < 300 && !dead; i++) {
        dead = !strcmp(state_of("main", "nh-2"), "dead");
        if (!dead) jrt_sleep_ms(50);
    }
    long long took = redis_ms() - t0;
    char *text = dead ? NULL : jrt_slurp(log);
    cr_expect(dead, "not dead-lettered after %lld ms with handler_wait 2 s (a clock 30 s behind); log: %s", took,
              text ? text : "");
    free(text);
    cr_expect_geq(took, 1500, "dead-lettered after %lld ms, before its handler_wait of 2 s", took);
    jrt_stop(w[0], SIGTERM, 10000);
    jrt_stop(w[1], SIGTERM, 10000);
}

/* One scheduler 30 s ahead, one 30 s behind, a 1 s `every` schedule for
 * ~5 s: each tick once, never ready before its tick, the ticks consecutive,
 * and the last one near Redis's now (not 30 s off). */
Test(clock, skewed_schedulers_fire_each_tick_once_at_redis_time) {
    const char *add[] = {"cron", "add", "sk", "--every", "1s", "-q", "cq", "echo", "{}", NULL};
    cr_assert_eq(cli(NULL, 0, add), 0);
    char l0[256], l1[256];
    snprintf(l0, sizeof l0, "%s/sched0.log", R.dir);
    snprintf(l1, sizeof l1, "%s/sched1.log", R.dir);
    const char *args[] = {"scheduler", "--redis", R.url, NULL};
    pid_t a = jrt_spawn_skewed("+30s", l0, args), b = jrt_spawn_skewed("-30s", l1, args);
    jrt_sleep_ms(5000);
    long long now = redis_ms();
    jrt_stop(a, SIGTERM, 10000);
    jrt_stop(b, SIGTERM, 10000);
    redisContext *c = jrt_connect(&R);
    redisReply *r = jrt_cmd(c, "XRANGE", "jr:{cq}:ready", "-", "+", NULL);
    long long ticks[64];
    size_t n = 0;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *f = r->element[i]->element[1];
        long long entry = strtoll(r->element[i]->element[0]->str, NULL, 10);
        for (size_t j = 0; j + 1 < f->elements; j += 2) {
            if (strcmp(f->element[j]->str, "id") || strncmp(f->element[j + 1]->str, "sk@", 3)) continue;
            cr_assert_lt(n, 64);
            ticks[n] = strtoll(f->element[j + 1]->str + 3, NULL, 10);
            cr_expect_geq(entry, ticks[n], "tick %lld was ready at %lld (Redis time), before it", ticks[n], entry);
            for (size_t k = 0; k < n; k++) cr_expect_neq(ticks[k], ticks[n], "tick %lld fired twice", ticks[n]);
            n++;
        }
    }
    freeReplyObject(r);
    redisFree(c);
    cr_expect_geq(n, 3, "only %zu ticks in ~5 s", n);
    long long lo = n ? ticks[0] : 0, hi = lo;
    for (size_t i = 0; i < n; i++) lo = ticks[i] < lo ? ticks[i] : lo, hi = ticks[i] > hi ? ticks[i] : hi;
    cr_expect_eq((long long)n, (hi - lo) / 1000 + 1, "ticks missing between %lld and %lld", lo, hi);
    cr_expect(hi <= now && hi > now - 3000, "the last tick %lld is not near Redis's now %lld", hi, now);
}

/* A worker 30 s ahead: a retry asked for in 1 h is due 1 h after Redis's
 * now (not early), its presence is fresh, and the stats window counts the
 * jobs it acknowledged. */
Test(clock, worker_ahead_retry_presence_and_stats) {
    char log[256];
    snprintf(log, sizeof log, "%s/worker.log", R.dir);
    pid_t w[2];
    worker("+30s", log, "worker:\n  lease: 3s\n", w);
    char out[1 << 14];
    const char *e1[] = {"enqueue", "-q", "main", "--id", "again-1", "again", NULL};
    cr_assert_eq(cli(out, sizeof out, e1), 0);
    for (int i = 0; i < 5; i++) {
        const char *e2[] = {"enqueue", "-q", "main", "quick", NULL};
        cr_assert_eq(cli(out, sizeof out, e2), 0);
    }
    int retrying = 0;
    for (int i = 0; i < 200 && !retrying; i++) {
        retrying = !strcmp(state_of("main", "again-1"), "retrying");
        if (!retrying) jrt_sleep_ms(50);
    }
    cr_assert(retrying, "again-1 was not retried");
    json_t *doc = show("main", "again-1");
    long long due = (long long)json_integer_value(json_object_get(doc, "due_ms"));
    if (!due) due = (long long)json_number_value(json_object_get(doc, "due_ms"));
    json_decref(doc);
    long long now = redis_ms();
    cr_expect(due > now + 3590000 && due <= now + 3600000, "the retry in 1 h is due in %lld ms", due - now);
    jr_qstats_t s = jrt_wait_settled(&R, "main", 0, 1); /* counts now */
    (void)s;
    jrt_sleep_ms(1500); /* a presence renewal or two */
    const char *ws[] = {"workers", "--json", NULL};
    cr_assert_eq(cli(out, sizeof out, ws), 0);
    json_error_t je;
    json_t *wd = json_loads(out, 0, &je);
    cr_assert(wd, "workers --json: %s", out);
    json_t *list = json_object_get(wd, "workers");
    int seen = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *p = json_array_get(list, i);
        if (strcmp(json_string_value(json_object_get(p, "role")), "worker")) continue;
        seen = 1;
        long long ago = (long long)json_integer_value(json_object_get(p, "last_seen_ms"));
        cr_expect(ago >= 0 && ago < 3000, "a worker 30 s ahead looks stale: last seen %lld ms ago", ago);
        /* its start (the score in jr:{procs}) is on Redis's clock, not in the future */
        redisContext *c = jrt_connect(&R);
        redisReply *z = jrt_cmd(c, "ZSCORE", "jr:{procs}", json_string_value(json_object_get(p, "name")), NULL);
        long long started = z->type == REDIS_REPLY_STRING ? atoll(z->str) : -1, rnow = redis_ms();
        freeReplyObject(z);
        redisFree(c);
        cr_expect(started > rnow - 25000 && started <= rnow, "a worker 30 s ahead started at %lld, Redis's now %lld",
                  started, rnow);
    }
    json_decref(wd);
    cr_expect(seen, "the worker is not listed: %s", out);
    const char *st[] = {"stats", "--json", "-q", "main", NULL};
    cr_assert_eq(cli(out, sizeof out, st), 0);
    json_t *sd = json_loads(out, 0, &je);
    cr_assert(sd, "stats --json: %s", out);
    json_t *q = json_array_get(json_object_get(sd, "queues"), 0);
    cr_expect_eq(json_integer_value(json_object_get(q, "processed")), 5);
    cr_expect_gt(json_number_value(json_object_get(q, "jobs_per_second")), 0.0,
                 "the last minute's window has none of the 5 jobs: %s", out);
    json_decref(sd);
    /* `pause` from a host 30 s behind: paused_since is Redis's now */
    const char *pause[] = {"pause", "main", NULL};
    jrt_skew_env("-30s");
    int pst = cli(out, sizeof out, pause);
    jrt_skew_env(NULL);
    cr_assert_eq(pst, 0, "pause: %s", out);
    long long at = redis_ms();
    cr_assert_eq(cli(out, sizeof out, st), 0);
    sd = json_loads(out, 0, &je);
    cr_assert(sd, "stats --json: %s", out);
    long long since = (long long)json_integer_value(json_object_get(json_array_get(json_object_get(sd, "queues"), 0),
                                                                   "paused_since"));
    json_decref(sd);
    cr_expect(since > at - 5000 && since <= at, "paused at %lld by a clock 30 s behind, Redis's now %lld", since, at);
    jrt_stop(w[0], SIGTERM, 10000);
    jrt_stop(w[1], SIGTERM, 10000);
}
