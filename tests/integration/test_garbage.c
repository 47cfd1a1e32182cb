/* Garbage in jobrunner's keys (issue 18, class 1): a key of another type,
 * or wrong members inside the right type, costs at most the queue, schedule
 * or entry it belongs to. While jobs flow through two healthy queues, random
 * garbage of every type is written into the keys of a third queue and into
 * the shared keys (schedules, live processes, paused set) and wrong members
 * into the healthy queues' own keys; then every job of the healthy queues
 * ran exactly once within a bound, the processes make a bounded number of
 * Redis calls per second (no reconnect loop, no spin), and each bad key is
 * named in their logs a bounded number of times (reported once, not per
 * turn). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"
#include "redis_produce.h"

static jrt_redis_t R;
static char record[192], cfgpath[192], wlog[192], slog[192];

static void setup(void) {
    jrt_start_recorded(&R, record, sizeof record);
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    snprintf(slog, sizeof slog, "%s/scheduler.log", R.dir);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(garbage, .init = setup, .fini = teardown, .timeout = 150);

static pid_t start_worker(void) { return jrt_worker(&R, cfgpath, NULL, wlog, NULL); }
static pid_t start_scheduler(void) { return jrt_scheduler(&R, cfgpath, slog); }
static void run_ok(const char *const *args) { jrt_run_expect(0, NULL, 0, args); }

/* Enqueue one record job to queue q (payload q), due in delay_ms (0 = now),
 * on connection r; its id into id. */
static void enqueue(jr_redis_t *r, const char *q, int64_t delay_ms, char *id) {
    jr_enqueue_t job = jrt_job(q, "record", q);
    job.delay_ms = delay_ms;
    char ids[1][JR_ID_MAX];
    cr_assert_eq(jr_redis_enqueue(r, &job, 1, ids, NULL), 0, "enqueue to %s: %s", q, jr_redis_errstr(r));
    snprintf(id, JR_ID_MAX, "%s", ids[0]);
}

/* How many times job `id` of queue q ran (its payload is q: entry ids
 * repeat across queues), in the record's text. */
static int runs_of(const char *rec, const char *id, const char *q) { return jrt_runs_in(rec, id, q); }

/* Calls of the commands jobrunner's processes send themselves (INFO
 * commandstats also counts the commands a function runs inside, which
 * follow the jobs, not the loop). */
static long long loop_calls(void) {
    static const char *const cmds[] = {"fcall", "xreadgroup", "xread", "hmget", "hexists", "exec", "ping",
                                       "function|list", "client|id", "pexpire", "eval"};
    long long n = 0;
    static long long last[16];
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        long long k = jrt_calls(&R, cmds[i]);
        if (getenv("JRT_CALLS")) fprintf(stderr, "garbage: %s +%lld\n", cmds[i], k - last[i]);
        last[i] = k;
        n += k;
    }
    return n;
}

/* Overwrite `key` with a value of type `kind` (0 string, 1 list, 2 set,
 * 3 zset, 4 hash, 5 stream), its members garbage. A key that already has
 * that type gets the garbage members added beside its own (wrong members
 * inside the right type; replacing them would be deleting the registry or
 * the schedules, not garbage in them). */
static const char *const KINDS[] = {"string", "list", "set", "zset", "hash", "stream"};
static void garble(redisContext *c, const char *key, int kind) {
    redisReply *t = jrt_cmd(c, "TYPE", key, NULL);
    if (!(t->type == REDIS_REPLY_STATUS && !strcmp(t->str, KINDS[kind]))) freeReplyObject(jrt_cmd(c, "DEL", key, NULL));
    freeReplyObject(t);
    redisReply *rep = NULL;
    switch (kind) {
    case 0: rep = jrt_cmd(c, "SET", key, "\x01garbage\xff", NULL); break;
    case 1: rep = jrt_cmd(c, "RPUSH", key, "\x93garbage", "x", NULL); break;
    case 2: rep = jrt_cmd(c, "SADD", key, "garbage", NULL); break;
    case 3: rep = jrt_cmd(c, "ZADD", key, "1", "garbage", "inf", "77", NULL); break;
    case 4: rep = jrt_cmd(c, "HSET", key, "garbage", "\xc1", "processed", "-x", NULL); break;
    default: rep = jrt_cmd(c, "XADD", key, "*", "garbage", "\xc1", NULL); break;
    }
    cr_assert(rep && rep->type != REDIS_REPLY_ERROR, "writing garbage to %s: %s", key, rep ? rep->str : "");
    freeReplyObject(rep);
}

/* The keys that may be garbled: every key of queue `bad` (and one of its
 * time-wheel buckets) and the shared keys of schedules, live processes,
 * pausing, the queue registry (every enqueue registers its queue there:
 * garbage costs the registration, not the enqueue) and the library's load
 * lock and fence. */
static const char *const BAD_KEYS[] = {
    "jr:{bad}:ready", "jr:{bad}:delayed", "jr:{bad}:wheel",     "jr:{bad}:wheel:n", "jr:{bad}:wake",
    "jr:{bad}:seq",   "jr:{bad}:ids",     "jr:{bad}:cancelled", "jr:{bad}:stats",   "jr:{bad}:dead",
    "jr:{bad}:wheel:<bucket>", "jr:{cron}", "jr:{cron}:last",   "jr:{cron}:wake",   "jr:{queues}:paused",
    "jr:{procs}:garbage-1", "jr:{queues}", "jr:{queues}:wake", "jr:{queues}:resumed", "jr:{lib}:loading",
    "jr:{lib}:fence"};
#define NBAD (sizeof BAD_KEYS / sizeof BAD_KEYS[0])

/* Wrong members inside the right type, in the healthy queues' own keys:
 * each costs at most that member. */
static void garble_members(redisContext *c, const char *q, int64_t now_ms) {
    char key[64], start[32], later[32];
    snprintf(start, sizeof start, "%lld", (long long)((now_ms / 1000 + 4) * 1000));
    snprintf(later, sizeof later, "%lld", (long long)(now_ms + 3600000));
    snprintf(key, sizeof key, "jr:{%s}:wheel", q); /* a start scored far off, a start scored "due", not a start */
    freeReplyObject(jrt_cmd(c, "ZADD", key, "inf", start, "1", later, "5", "not-a-start", NULL));
    snprintf(key, sizeof key, "jr:{%s}:ids", q);
    freeReplyObject(jrt_cmd(c, "HSET", key, "ghost", "~x@y", "ghost2", "@nan", NULL));
    snprintf(key, sizeof key, "jr:{%s}:cancelled", q);
    freeReplyObject(jrt_cmd(c, "HSET", key, "1-1", "soon", NULL));
    snprintf(key, sizeof key, "jr:{%s}:stats", q);
    freeReplyObject(jrt_cmd(c, "HSET", key, "processed", "lots", "t3", "\xff", NULL));
    snprintf(key, sizeof key, "jr:{%s}:delayed", q);
    freeReplyObject(jrt_cmd(c, "ZADD", key, "1", "\xc1not msgpack", NULL));
}

#define NJOBS 120

Test(garbage, random_garbage_in_every_key_kind_costs_only_its_own_queue_or_schedule) {
    unsigned seed = (unsigned)getpid() ^ (unsigned)jrt_wall_us();
    if (getenv("JRT_SEED")) seed = (unsigned)strtoul(getenv("JRT_SEED"), NULL, 10);
    srand(seed);
    fprintf(stderr, "garbage: seed %u (JRT_SEED=%u to repeat)\n", seed, seed);
    jrt_config(&R,
               "worker:\n  queues: [g1, g2, bad]\n  lease: 3s\n  block: 1s\n"
               "scheduler:\n  block: 1s\n",
               cfgpath, sizeof cfgpath);
    const char *cron_ok[] = {"cron", "add", "ok", "--every", "1s", "-q", "g1", "-c", cfgpath, "record", "tick", NULL};
    const char *cron_bad[] = {"cron", "add", "broken", "--every", "1s", "-q", "bad", "-c", cfgpath, "record", "x", NULL};
    run_ok(cron_ok);
    run_ok(cron_bad);
    jr_redis_t *r = jrt_jr_connect(&R);
    char bad_id[JR_ID_MAX];
    enqueue(r, "bad", 0, bad_id); /* registered, with a job */
    enqueue(r, "bad", 3000, bad_id);
    enqueue(r, "g1", 0, bad_id), enqueue(r, "g2", 0, bad_id); /* registered: a scheduler keeps what it knew */
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "ZADD", "jr:{procs}", "1", "garbage-1", NULL));

    pid_t w = start_worker(), s = start_scheduler();
    /* The scheduler has listed the registry (garbage there costs only the
     * queues registered after it: see docs/operations.md). */
    for (int t = 0; t < 200 && jrt_count(slog, "serving registered queues") < 1; t++) jrt_sleep_ms(50);
    /* Which keys get garbage, of which type, and when (job k). */
    int when[NBAD], kind[NBAD], garbled[NBAD] = {0};
    for (size_t i = 0; i < NBAD; i++) when[i] = rand() % 3 ? rand() % NJOBS : -1, kind[i] = rand() % 6;
    int cron_garbled = 0;
    char (*ids)[JR_ID_MAX] = calloc(NJOBS, sizeof *ids);
    int64_t t0 = jrt_wall_us();
    for (int k = 0; k < NJOBS; k++) {
        for (size_t i = 0; i < NBAD; i++) {
            if (when[i] != k) continue;
            char key[64];
            snprintf(key, sizeof key, "%s", BAD_KEYS[i]);
            char *b = strstr(key, "<bucket>");
            if (b) { /* a bucket of the wheel, listed in its index */
                long long start = (jrt_wall_us() / 1000000 + 5) * 1000;
                snprintf(b, sizeof key - (size_t)(b - key), "%lld", start);
                char st[24];
                snprintf(st, sizeof st, "%lld", start);
                freeReplyObject(jrt_cmd(c, "ZADD", "jr:{bad}:wheel", st, st, NULL));
            }
            garble(c, key, kind[i]);
            garbled[i] = 1;
            cron_garbled |= !strncmp(key, "jr:{cron}", 9);
            fprintf(stderr, "garbage: job %d: %s <- %s\n", k, key, KINDS[kind[i]]);
        }
        if (k == NJOBS / 2) garble_members(c, "g2", jrt_wall_us() / 1000);
        /* a mix of now, the near tier (< 2 s) and the time wheel (>= 2 s) */
        int64_t delay = k % 4 == 0 ? 0 : k % 4 == 1 ? 300 + rand() % 1200 : k % 4 == 2 ? 2000 + rand() % 2000 : 0;
        enqueue(r, k % 2 ? "g1" : "g2", delay, ids[k]);
        if (k % 10 == 5) { /* a new queue: its enqueue registers it (the registry may hold garbage) */
            char fresh[16], fid[JR_ID_MAX];
            snprintf(fresh, sizeof fresh, "fresh%d", k);
            enqueue(r, fresh, 0, fid);
        }
        if (k % 10 == 0) { /* work for the bad queue too, results and retries included (may be refused) */
            jr_enqueue_t b[2] = {{.queue = "bad", .env = {.handler = "fail", .handler_len = 4, .attempt = 1,
                                                           .max_attempts = 3, .backoff_ms = 2500}},
                                 {.queue = "bad", .env = {.handler = "record", .handler_len = 6, .attempt = 1}}};
            jr_redis_enqueue(r, b, 2, NULL, NULL);
        }
        jrt_sleep_ms(25);
    }
    /* Every job of the healthy queues ran exactly once, in bounded time
     * (the last ones are due at most 4 s after they were enqueued). */
    int missing = NJOBS;
    char *rec = NULL;
    for (int t = 0; t < 400 && missing; t++) {
        jrt_sleep_ms(50);
        free(rec);
        rec = jrt_slurp(record);
        missing = 0;
        for (int k = 0; k < NJOBS; k++) missing += runs_of(rec, ids[k], k % 2 ? "g1" : "g2") == 0;
    }
    double took = (double)(jrt_wall_us() - t0) / 1e6;
    for (int k = 0; k < NJOBS; k++)
        cr_expect_eq(runs_of(rec, ids[k], k % 2 ? "g1" : "g2"), 1,
                     "job %s of %s ran %d times (seed %u)\nworker:\n%s\nscheduler:\n%s", ids[k], k % 2 ? "g1" : "g2",
                     runs_of(rec, ids[k], k % 2 ? "g1" : "g2"), seed, jrt_slurp(wlog), jrt_slurp(slog));
    cr_expect(took < 25, "the healthy queues took %.1f s (seed %u)", took, seed);

    /* The periodic schedule of a healthy queue fired and was recorded
     * beside the refused one (unless the schedule keys are the garbage). */
    if (!cron_garbled) {
        redisReply *last = jrt_cmd(c, "HGET", "jr:{cron}:last", "ok", NULL);
        cr_expect(last->type == REDIS_REPLY_STRING, "schedule ok never recorded as fired (seed %u)\n%s", seed,
                  jrt_slurp(slog));
        freeReplyObject(last);
        cr_expect(strstr(rec, "ok@") != NULL, "schedule ok never ran (seed %u)", seed);
    }

    /* No spin, no reconnect loop with the garbage in place. Not idle: the
     * bad queue's jobs whose results Redis refuses stay pending and run
     * again after each lease (3 s), and two schedules fire every second, so
     * the steady state is some 20-50 calls per second, by which keys the
     * seed garbled. A reconnect loop shows as new connections (none is
     * due: the test's own connection c reads the count); a busy loop as
     * hundreds of calls per second or more. */
    long long before = loop_calls();
    long long conns = jrt_info_int(c, "stats", "total_connections_received");
    jrt_sleep_ms(3000);
    conns = jrt_info_int(c, "stats", "total_connections_received") - conns;
    long long per_s = (loop_calls() - before) / 3;
    redisReply *cs = jrt_cmd(c, "INFO", "commandstats", NULL);
    fprintf(stderr, "garbage: %lld calls per second while idle, %lld new connections in 3 s\n", per_s, conns);
    cr_expect(per_s < 150 && conns == 0,
              "%lld Redis commands per second and %lld new connections in 3 s with garbage in place (seed %u)\n%s\n"
              "worker:\n%s\nscheduler:\n%s",
              per_s, conns, seed, cs->str, jrt_slurp(wlog), jrt_slurp(slog));
    freeReplyObject(cs);

    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    /* Each bad key is reported, not once per turn: a few lines at most
     * (each process once, again when what is wrong changed). */
    char *logs[2] = {jrt_slurp(wlog), jrt_slurp(slog)};
    for (size_t i = 0; i < NBAD; i++) {
        if (!garbled[i] || strstr(BAD_KEYS[i], "<bucket>")) continue;
        int n = 0;
        for (int l = 0; l < 2; l++)
            for (const char *p = logs[l]; (p = strstr(p, BAD_KEYS[i])); p++)
                n += p[strlen(BAD_KEYS[i])] != ':' && p[strlen(BAD_KEYS[i])] != '}'; /* not a longer key */
        cr_expect(n <= 6, "%s is named %d times in the logs (seed %u)\nworker:\n%s\nscheduler:\n%s", BAD_KEYS[i], n,
                  seed, logs[0], logs[1]);
    }
    free(logs[0]), free(logs[1]), free(rec), free(ids);
    jr_redis_free(r);
    redisFree(c);
}

/* The config of the examples (a worker and a scheduler for g1, 1 s
 * blocks), and a raw connection into *c after it SET key to a string. */
static void example(const char *key, redisContext **c) {
    jrt_config(&R, "worker:\n  queues: [g1]\n  block: 1s\nscheduler:\n  block: 1s\n", cfgpath, sizeof cfgpath);
    *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(*c, "SET", key, "garbage", NULL));
}

/* The examples of the issue, each alone, so that a failure names it: a
 * string over jr:{cron} stops no promotion; a refused periodic job holds
 * back its own schedule only; a wrong-type live-process entry does not stop
 * `workers`; a wrong-type paused set does not stop the reads. */
Test(garbage, a_string_over_the_schedules_stops_no_promotion_and_makes_no_reconnect_loop) {
    redisContext *c;
    example("jr:{cron}", &c);
    jr_redis_t *r = jrt_jr_connect(&R);
    char id[JR_ID_MAX];
    enqueue(r, "g1", 0, id);
    pid_t w = start_worker(), s = start_scheduler();
    enqueue(r, "g1", 500, id);
    cr_expect(jrt_wait_lines(record, 2, 10000) >= 2, "the delayed job was not promoted\n%s", jrt_slurp(slog));
    jrt_sleep_ms(1000);
    cr_expect_eq(jrt_count(slog, "reconnecting"), 0, "%s", jrt_slurp(slog));
    cr_expect_eq(jrt_count(slog, "key=jr:{cron} "), 1, "reported once:\n%s", jrt_slurp(slog));
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    jr_redis_free(r);
    redisFree(c);
}

Test(garbage, a_refused_periodic_job_holds_back_its_own_schedule_only) {
    jrt_config(&R, "scheduler:\n  block: 1s\n", cfgpath, sizeof cfgpath);
    const char *ok[] = {"cron", "add", "ok", "--every", "1s", "-q", "g1", "-c", cfgpath, "record", "tick", NULL};
    const char *broken[] = {"cron", "add", "broken", "--every", "1s", "-q", "bad", "-c", cfgpath, "record", "x", NULL};
    run_ok(ok);
    run_ok(broken);
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "SET", "jr:{bad}:ready", "garbage", NULL));
    freeReplyObject(jrt_cmd(c, "SET", "jr:{bad}:delayed", "garbage", NULL));
    pid_t s = start_scheduler();
    redisReply *last = NULL;
    for (int t = 0; t < 100; t++) {
        jrt_sleep_ms(50);
        if (last) freeReplyObject(last);
        last = jrt_cmd(c, "HGET", "jr:{cron}:last", "ok", NULL);
        if (last->type == REDIS_REPLY_STRING) break;
    }
    cr_expect(last->type == REDIS_REPLY_STRING, "the healthy schedule's ticks were not recorded\n%s", jrt_slurp(slog));
    freeReplyObject(last);
    jrt_sleep_ms(2500); /* a few more ticks of both */
    cr_expect_eq(jrt_count(slog, "schedule=broken"), 1, "reported once:\n%s", jrt_slurp(slog));
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
    redisFree(c);
}

Test(garbage, a_wrong_type_live_process_entry_and_paused_set_stop_no_worker_and_no_listing) {
    jrt_config(&R, "worker:\n  queues: [g1]\n  block: 1s\n", cfgpath, sizeof cfgpath);
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "ZADD", "jr:{procs}", "1", "garbage-1", NULL));
    freeReplyObject(jrt_cmd(c, "SET", "jr:{procs}:garbage-1", "x", NULL));
    freeReplyObject(jrt_cmd(c, "SET", "jr:{queues}:paused", "x", NULL));
    pid_t w = start_worker();
    jr_redis_t *r = jrt_jr_connect(&R);
    char id[JR_ID_MAX];
    for (int i = 0; i < 5; i++) enqueue(r, "g1", 0, id);
    cr_expect(jrt_wait_lines(record, 5, 10000) >= 5, "the jobs did not run\n%s", jrt_slurp(wlog));
    char out[4096], err[1024];
    const char *ls[] = {"workers", "-c", cfgpath, NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, ls), 0, "workers: %s", err);
    char name[64];
    snprintf(name, sizeof name, "-%d ", (int)w);
    cr_expect(strstr(out, name) != NULL, "the live worker is not listed:\n%s", out);
    cr_expect_eq(jrt_count(wlog, "reconnecting"), 0, "%s", jrt_slurp(wlog));
    cr_expect(jrt_count(wlog, "key=jr:{queues}:paused ") == 1, "reported once:\n%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    jr_redis_free(r);
    redisFree(c);
}

/* Garbage in a queue's job index costs the lookups of jobs that only the
 * index can find (explicit ids): a job found by its id's form is located,
 * cancelled and promoted, and the queue's jobs run. */
Test(garbage, lookups_cancel_and_promotion_work_around_a_job_index_holding_garbage) {
    redisContext *c;
    example("jr:{g1}:ids", &c);
    jr_redis_t *r = jrt_jr_connect(&R);
    char later[JR_ID_MAX], soon[JR_ID_MAX], now[JR_ID_MAX];
    enqueue(r, "g1", 60000, later);
    enqueue(r, "g1", 500, soon);
    enqueue(r, "g1", 0, now);
    char out[2048], err[512];
    const char *show[] = {"job", "show", "-q", "g1", "-c", cfgpath, later, NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, show), 0, "job show: %s%s", out, err);
    cr_expect(strstr(out, "delayed") != NULL, "job show:\n%s", out);
    const char *cancel[] = {"cancel", "-q", "g1", "-c", cfgpath, later, NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, cancel), 0, "cancel: %s%s", out, err);
    cr_expect(strstr(out, "cancelled") != NULL, "cancel:\n%s", out);
    pid_t w = start_worker(), s = start_scheduler();
    cr_expect(jrt_wait_lines(record, 2, 10000) >= 2, "the jobs did not run\n%s\n%s", jrt_slurp(wlog), jrt_slurp(slog));
    char *rec = jrt_slurp(record);
    cr_expect(runs_of(rec, soon, "g1") == 1 && runs_of(rec, now, "g1") == 1 && runs_of(rec, later, "g1") == 0, "%s",
              rec);
    free(rec);
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    jr_redis_free(r);
    redisFree(c);
}

/* A queue whose reclaim Redis refuses (its dead stream holds another type)
 * does not keep the jobs of a stopped worker in the other queues waiting. */
Test(garbage, a_refused_reclaim_of_one_queue_does_not_hold_the_others_jobs) {
    jrt_config(&R, "worker:\n  queues: [bad, g1]\n  lease: 1s\n  block: 1s\n", cfgpath, sizeof cfgpath);
    jr_redis_t *r = jrt_jr_connect(&R);
    char id[JR_ID_MAX], other[JR_ID_MAX];
    enqueue(r, "bad", 0, other);
    enqueue(r, "g1", 0, id);
    redisContext *c = jrt_connect(&R);
    /* a worker that took both jobs and died */
    freeReplyObject(jrt_cmd(c, "XREADGROUP", "GROUP", "jr", "ghost-1", "COUNT", "10", "STREAMS", "jr:{bad}:ready",
                            "jr:{g1}:ready", ">", ">", NULL));
    freeReplyObject(jrt_cmd(c, "SET", "jr:{bad}:dead", "garbage", NULL));
    pid_t w = start_worker();
    cr_expect(jrt_wait_lines(record, 1, 15000) >= 1, "the stopped worker's job of g1 was not taken over\n%s",
              jrt_slurp(wlog));
    char *rec = jrt_slurp(record);
    cr_expect_eq(runs_of(rec, id, "g1"), 1, "%s", rec);
    free(rec);
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    jr_redis_free(r);
    redisFree(c);
}

/* A worker whose queues are all paused waits on jr:{queues}:resumed, a key
 * nobody writes. Garbage there ends that wait at once with an error: it is
 * reported once, the worker reads the paused set again every worker.block
 * (no reconnect, no spin), and a resume is seen. */
Test(garbage, a_wrong_type_resume_key_costs_no_reconnect_loop_and_a_resume_is_seen) {
    jrt_config(&R, "worker:\n  queues: [g1]\n  block: 1s\n", cfgpath, sizeof cfgpath);
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{queues}:paused", "g1", "1", NULL));
    freeReplyObject(jrt_cmd(c, "SET", "jr:{queues}:resumed", "garbage", NULL));
    pid_t w = start_worker();
    jrt_sleep_ms(1500);
    long long before = loop_calls();
    jrt_sleep_ms(3000);
    long long per_s = (loop_calls() - before) / 3;
    cr_expect(per_s < 20, "%lld Redis commands per second while paused\n%s", per_s, jrt_slurp(wlog));
    cr_expect_eq(jrt_count(wlog, "reconnecting"), 0, "%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_count(wlog, "Redis unavailable"), 0, "%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_count(wlog, "key=jr:{queues}:resumed "), 1, "reported once:\n%s", jrt_slurp(wlog));
    jr_redis_t *r = jrt_jr_connect(&R);
    char id[JR_ID_MAX];
    enqueue(r, "g1", 0, id);
    jrt_sleep_ms(300);
    cr_expect_eq(jrt_wait_lines(record, 1, 200), 0, "a job of a paused queue ran");
    freeReplyObject(jrt_cmd(c, "HDEL", "jr:{queues}:paused", "g1", NULL));
    cr_expect(jrt_wait_lines(record, 1, 10000) >= 1, "the resumed queue's job did not run\n%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    jr_redis_free(r);
    redisFree(c);
}

/* Garbage in the queue registry (jr:{queues}, jr:{queues}:wake) costs the
 * registration only: every enqueue still writes its job and succeeds, the
 * CLI's too, saying once which key is wrong; a worker runs the jobs. */
Test(garbage, a_wrong_type_registry_refuses_no_enqueue) {
    jrt_config(&R, "worker:\n  queues: [g1, g2]\n  block: 1s\n", cfgpath, sizeof cfgpath);
    redisContext *c = jrt_connect(&R);
    static const char *const keys[] = {"jr:{queues}", "jr:{queues}:wake"};
    for (int k = 0; k < 2; k++) {
        for (int kind = 0; kind < 6; kind++) {
            if ((k == 0 && kind == 2) || (k == 1 && kind == 5)) continue; /* the right type */
            freeReplyObject(jrt_cmd(c, "DEL", "jr:{queues}", "jr:{queues}:wake", NULL));
            garble(c, keys[k], kind);
            jr_redis_t *r = jrt_jr_connect(&R);
            char id[JR_ID_MAX];
            enqueue(r, "g1", 0, id);   /* registers g1: refused for the garbage */
            enqueue(r, "g1", 0, id);   /* and again */
            enqueue(r, "g2", 500, id); /* a delayed job of another queue */
            jr_redis_free(r);
            char out[512], err[1024];
            const char *cli[] = {"enqueue", "--redis", R.url, "-q", "g2", "record", "cli", NULL};
            cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, cli), 0, "%s <- %s: enqueue: %s%s", keys[k],
                         KINDS[kind], out, err);
        }
    }
    redisReply *n1 = jrt_cmd(c, "XLEN", "jr:{g1}:ready", NULL), *n2 = jrt_cmd(c, "XLEN", "jr:{g2}:ready", NULL),
               *d2 = jrt_cmd(c, "ZCARD", "jr:{g2}:delayed", NULL);
    cr_expect_eq(n1->integer, 2 * 10, "jobs written to g1: %lld", n1->integer);
    cr_expect_eq(n2->integer + d2->integer, 2 * 10, "jobs written to g2: %lld + %lld", n2->integer, d2->integer);
    freeReplyObject(n1), freeReplyObject(n2), freeReplyObject(d2);
    redisFree(c);
}

/* A uniq key of another type (jr:{Q}:uniq:ID, a string by the contract)
 * costs that id only: its enqueue is taken as a duplicate (EXISTED, nothing
 * written) while the garbage is there; the other jobs of the same call are
 * written and run. */
Test(garbage, a_wrong_type_uniq_key_costs_only_its_own_id) {
    jrt_config(&R, "worker:\n  queues: [g1]\n  block: 1s\nscheduler:\n  block: 1s\n", cfgpath, sizeof cfgpath);
    redisContext *c = jrt_connect(&R);
    for (int kind = 1; kind < 6; kind++) {
        char key[64], dup[16], fine[16];
        snprintf(dup, sizeof dup, "dup%d", kind), snprintf(fine, sizeof fine, "fine%d", kind);
        snprintf(key, sizeof key, "jr:{g1}:uniq:%s", dup);
        garble(c, key, kind);
        jr_enqueue_t jobs[3];
        for (int j = 0; j < 3; j++)
            jobs[j] = (jr_enqueue_t){.queue = "g1", .id = j == 0 ? dup : j == 1 ? fine : NULL,
                                     .delay_ms = kind % 2 ? 0 : 300,
                                     .env = {.handler = "record", .handler_len = 6, .payload = "g1", .payload_len = 2,
                                             .attempt = 1}};
        jr_redis_t *r = jrt_jr_connect(&R);
        jr_enq_outcome_t out[3];
        char ids[3][JR_ID_MAX];
        int rc = jr_redis_enqueue_each(r, jobs, 3, ids, out, NULL);
        cr_expect_eq(rc, 0, "%s <- %s: %s", key, KINDS[kind], jr_redis_errstr(r));
        cr_expect_eq(out[0].status, JR_ENQ_EXISTED, "%s <- %s: the id with garbage: %d", key, KINDS[kind],
                     out[0].status);
        cr_expect_eq(out[1].status, JR_ENQ_CREATED, "%s <- %s: another id: %d", key, KINDS[kind], out[1].status);
        cr_expect_eq(out[2].status, JR_ENQ_CREATED, "%s <- %s: no id: %d", key, KINDS[kind], out[2].status);
        jr_redis_free(r);
    }
    pid_t w = start_worker(), s = start_scheduler();
    cr_expect(jrt_wait_lines(record, 10, 10000) >= 10, "the jobs did not run\n%s", jrt_slurp(wlog));
    jrt_sleep_ms(500);
    char *rec = jrt_slurp(record);
    cr_expect(strstr(rec, "dup") == NULL, "a job of an id with garbage ran:\n%s", rec);
    free(rec);
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    redisFree(c);
}

/* Garbage of any type in the library's load lock or fence (jr:{lib}:loading,
 * jr:{lib}:fence) with no library loaded: a process still starts, loads the
 * library and works. */
Test(garbage, a_wrong_type_library_lock_or_fence_blocks_no_load) {
    jrt_config(&R, "worker:\n  queues: [g1]\n  block: 1s\n", cfgpath, sizeof cfgpath);
    redisContext *c = jrt_connect(&R);
    static const char *const keys[] = {"jr:{lib}:loading", "jr:{lib}:fence"};
    for (int k = 0; k < 2; k++) {
        for (int kind = 0; kind < 6; kind++) {
            freeReplyObject(jrt_cmd(c, "FUNCTION", "FLUSH", NULL));
            freeReplyObject(jrt_cmd(c, "DEL", "jr:{lib}:loading", "jr:{lib}:fence", NULL));
            garble(c, keys[k], kind);
            char out[512], err[1024];
            const char *cli[] = {"enqueue", "--redis", R.url, "-q", "g1", "record", "g1", NULL};
            int64_t t0 = jrt_wall_us();
            cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, cli), 0, "%s <- %s: enqueue: %s%s", keys[k],
                         KINDS[kind], out, err);
            cr_expect(jrt_wall_us() - t0 < 8000000, "%s <- %s: the load waited %.1f s", keys[k], KINDS[kind],
                      (double)(jrt_wall_us() - t0) / 1e6);
        }
    }
    freeReplyObject(jrt_cmd(c, "FUNCTION", "FLUSH", NULL));
    garble(c, "jr:{lib}:fence", 4);
    garble(c, "jr:{lib}:loading", 1);
    pid_t w = start_worker();
    cr_expect(jrt_wait_lines(record, 12, 15000) >= 12, "the jobs did not run\n%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    redisFree(c);
}
