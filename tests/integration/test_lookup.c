/* Finding and controlling one job (issue 9 §1, issue 8 §2), against a real
 * Redis with real worker and scheduler processes: `job show` in every state
 * (text and JSON), `job run-now`, `job delete`, `jobs --state` pages,
 * `cancel` of delayed, retrying, ready and running jobs (process and inline
 * isolation; a SIGKILLed worker's cancelled job is not run again), cancel
 * racing promotion and fetch over 1,000 jobs, and lookups of generated,
 * explicit, retried and promoted ids, with stale index entries. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"
#include "redis.h"
#include "redis_produce.h"
#include "redis_admin.h"

JRT_RECORDED_SUITE(lookup, .timeout = 300);

/* A config file: the Redis URL plus `extra` YAML. */
static void config(const char *extra) {
    jrt_config(&R, extra, cfgpath, sizeof cfgpath);
}

static pid_t start_worker(const char *queue) {
    return jrt_worker(&R, cfgpath, JRT_CANCEL_PLUGIN, wlog, (const char *[]){"-q", queue, NULL});
}

/* Run jobrunner with up to 12 args after "-c cfg"; output in out/err. */
static int cli(char *out, size_t outlen, char *err, size_t errlen, const char *a0, const char *a1, const char *a2,
               const char *a3, const char *a4, const char *a5, const char *a6) {
    const char *args[16] = {a0, "-c", cfgpath, a1, a2, a3, a4, a5, a6, NULL};
    static char scratch[1 << 16];
    return jrt_run(out ? out : scratch, out ? outlen : sizeof scratch, err, errlen, args);
}
#define CLI(out, ...) cli(out, sizeof out, NULL, 0, __VA_ARGS__)

/* Enqueue with the CLI; the id into id. */
static void enqueue(char *id, size_t len, const char *queue, const char *flag, const char *flagval,
                    const char *idopt, const char *handler) {
    const char *args[16] = {"-q", queue};
    int n = 2;
    if (flag) args[n++] = flag, args[n++] = flagval;
    if (idopt) args[n++] = "--id", args[n++] = idopt;
    args[n++] = handler;
    args[n] = NULL;
    jrt_cli_enqueue(&R, cfgpath, args, id, len < 128 ? len : 128);
}

/* `job show` as JSON, parsed; *status = its exit status. */
static json_t *show_json(const char *queue, const char *id, int *status) {
    static char out[1 << 16];
    char err[1024];
    *status = cli(out, sizeof out, err, sizeof err, "job", "show", "-q", queue, id, "--json", NULL);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    cr_assert(doc, "job show --json %s is not JSON (%s): %s %s", id, je.text, out, err);
    return doc;
}

/* The state `job show` gives (and its exit status agrees: 0 found, 1 not). */
static const char *state_of(const char *queue, const char *id) {
    static char state[32];
    int st;
    json_t *doc = show_json(queue, id, &st);
    snprintf(state, sizeof state, "%s", json_string_value(json_object_get(doc, "state")));
    cr_expect_eq(st, strcmp(state, "not found") ? 0 : 1, "exit status %d for state %s", st, state);
    json_decref(doc);
    return state;
}

/* Wait up to timeout_ms until the record has `n` lines containing `needle`. */
static int wait_record(const char *needle, int n, int timeout_ms) { return jrt_wait_count(record, needle, n, timeout_ms); }

/* 1 once job id of queue is in `state` (polling job show every 50 ms), 0 after timeout_ms. */
static int wait_state(const char *queue, const char *id, const char *state, int timeout_ms) {
    return jrt_wait_state(state_of, queue, id, state, timeout_ms);
}

/* ---- every state, with a worker ---- */

Test(lookup, show_run_now_delete_and_cancel_in_every_state) {
    config("worker:\n  concurrency: 2\n  lease: 3s\n");
    char d[128], x[128], r[128], out[1 << 14];
    /* queue "still" has no worker: delayed and ready stay so */
    enqueue(d, sizeof d, "still", "--in", "1h", NULL, "quick");
    enqueue(x, sizeof x, "still", "--in", "30m", "x-later", "quick");
    enqueue(r, sizeof r, "still", NULL, NULL, NULL, "quick");
    cr_expect_eq(strncmp(d, "d", 1), 0, "generated delayed id %s", d);
    cr_expect_str_eq(state_of("still", d), "delayed");
    cr_expect_str_eq(state_of("still", x), "delayed");
    cr_expect_str_eq(state_of("still", r), "ready");
    cr_expect_str_eq(state_of("still", "no-such-job"), "not found");
    cr_expect_eq(CLI(out, "job", "show", "-q", "still", "no-such-job", NULL, NULL), 1);
    cr_expect(strstr(out, "finished jobs are not kept"), "%s", out);
    cr_expect_eq(CLI(out, "job", "show", "-q", "still", d, NULL, NULL), 0);
    cr_expect(strstr(out, "state: delayed") && strstr(out, "due: ") && strstr(out, "h: quick"), "%s", out);

    /* a worker on queue "main": running, retrying, dead */
    pid_t w = start_worker("main");
    char run[128], rt[128], bad[128];
    enqueue(run, sizeof run, "main", NULL, NULL, "long-1", "waitcancel");
    enqueue(rt, sizeof rt, "main", NULL, NULL, "again-1", "again");
    enqueue(bad, sizeof bad, "main", NULL, NULL, "bad-1", "bad");
    cr_assert_eq(wait_record("long-1 1 started", 1, 20000), 1);
    cr_assert(wait_state("main", "again-1", "retrying", 20000));
    cr_assert(wait_state("main", "bad-1", "dead", 20000));
    int st;
    json_t *doc = show_json("main", "long-1", &st);
    cr_expect_eq(st, 0);
    cr_expect_str_eq(json_string_value(json_object_get(doc, "state")), "running");
    cr_expect(json_string_value(json_object_get(doc, "consumer")), "a running job names its consumer");
    cr_expect_eq(json_integer_value(json_object_get(doc, "deliveries")), 1);
    cr_expect_str_eq(json_string_value(json_object_get(doc, "handler")), "waitcancel");
    json_decref(doc);
    doc = show_json("main", "again-1", &st);
    cr_expect_eq(json_integer_value(json_object_get(doc, "attempt")), 2);
    cr_expect(json_is_string(json_object_get(doc, "due")));
    json_decref(doc);
    doc = show_json("main", "bad-1", &st);
    cr_expect_str_eq(json_string_value(json_object_get(doc, "why")), "failed");
    cr_expect(strstr(json_string_value(json_object_get(doc, "error")), "refused by test"));
    json_decref(doc);

    /* pages of running and dead */
    cr_expect_eq(CLI(out, "jobs", "-q", "main", "--state", "running", NULL, NULL), 0);
    cr_expect(strstr(out, "long-1"), "%s", out);
    cr_expect_eq(CLI(out, "jobs", "-q", "main", "--state", "dead", NULL, NULL), 0);
    cr_expect(strstr(out, "bad-1") && strstr(out, "failed"), "%s", out);

    /* run-now: a retrying job runs again now (attempt 2), a delayed one becomes ready */
    cr_expect_eq(CLI(out, "job", "run-now", "-q", "main", "again-1", NULL, NULL), 0, "%s", out);
    cr_expect_eq(wait_record("again-1 2 ran", 1, 20000), 1, "the retrying job did not run now");
    cr_expect_eq(CLI(out, "job", "run-now", "-q", "still", x, NULL, NULL), 0);
    cr_expect(strstr(out, "ready now"), "%s", out);
    cr_expect_str_eq(state_of("still", x), "ready");
    cr_expect_eq(CLI(out, "job", "run-now", "-q", "still", "no-such-job", NULL, NULL), 1);
    cr_expect_eq(CLI(out, "job", "run-now", "-q", "still", x, NULL, NULL), 0);
    cr_expect(strstr(out, "already ready"), "%s", out);
    cr_expect_eq(CLI(out, "job", "run-now", "-q", "main", "long-1", NULL, NULL), 0);
    cr_expect(strstr(out, "already running"), "%s", out);
    char d2[128];
    enqueue(d2, sizeof d2, "still", "--in", "2h", NULL, "quick");
    cr_expect_eq(CLI(out, "job", "delete", "-q", "still", d2, NULL, NULL), 0, "%s", out);
    cr_expect(strstr(out, "deleted (was delayed)"), "%s", out);
    cr_expect_str_eq(state_of("still", d2), "not found");
    cr_expect_eq(CLI(out, "job", "delete", "-q", "still", d2, NULL, NULL), 1);

    /* delete: a running job is refused, the others go */
    char err[1024];
    cr_expect_eq(cli(out, sizeof out, err, sizeof err, "job", "delete", "-q", "main", "long-1", NULL, NULL), 1);
    cr_expect(strstr(err, "running; use cancel"), "%s", err);
    cr_expect_str_eq(state_of("main", "long-1"), "running");
    cr_expect_eq(CLI(out, "job", "delete", "-q", "main", "bad-1", NULL, NULL), 0, "%s", out);
    cr_expect_str_eq(state_of("main", "bad-1"), "not found");
    cr_expect_eq(CLI(out, "job", "delete", "-q", "still", r, NULL, NULL), 0, "%s", out);
    cr_expect_str_eq(state_of("still", r), "not found");

    /* cancel: retrying (attempt 3 by now), delayed, ready, running, unknown */
    cr_assert(wait_state("main", "again-1", "retrying", 20000));
    cr_expect_eq(cli(out, sizeof out, err, sizeof err, "cancel", "-q", "main", "again-1", "long-1", "nope", NULL), 1);
    cr_expect_str_eq(out, "again-1 cancelled\nlong-1 running\nnope not found\n");
    cr_expect_eq(CLI(out, "cancel", "-q", "still", d, x, NULL, NULL), 0);
    char want[512];
    snprintf(want, sizeof want, "%s cancelled\n%s cancelled\n", d, x);
    cr_expect_str_eq(out, want);
    cr_expect_str_eq(state_of("still", d), "not found");
    cr_expect_str_eq(state_of("main", "again-1"), "not found");
    /* the running handler sees api->cancelled; the job is not retried nor dead */
    cr_expect_eq(wait_record("long-1 1 saw-cancel", 1, 10000), 1, "the handler never saw the cancel");
    cr_expect(wait_state("main", "long-1", "not found", 10000));
    jrt_sleep_ms(1500);
    cr_expect_eq(jrt_count(record, "long-1 "), 2, "the cancelled job ran again");
    cr_expect_eq(jrt_count(wlog, "\"outcome\":\"cancelled\"") + jrt_count(wlog, "outcome=cancelled"), 1,
                 "no log line with outcome cancelled");
    jr_qstats_t s = jrt_stats(&R, "main");
    cr_expect_eq(s.dead, 0);
    cr_expect_eq(s.ready + s.pending + s.delayed, 0);
    /* a cancelled explicit id is not enqueued again within its window: its
     * idempotency key stays, as a tombstone (issue 18 §2) */
    char again[128];
    enqueue(again, sizeof again, "still", "--in", "1h", "x-later", "quick");
    cr_expect_str_eq(state_of("still", "x-later"), "not found");
    /* nothing left in the index for jobs that are gone */
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_int(c, "HLEN jr:{main}:ids"), 0);
    cr_expect_eq(jrt_int(c, "EXISTS jr:{main}:cancelled"), 0);
    redisFree(c);
    jrt_stop(w, SIGTERM, 10000);
}

/* With the config `extra` and a worker for queue main, job `id` of
 * `handler` started, then cancelled: `cancel` exits 0 and says it was
 * running. Returns the worker. */
static pid_t cancel_started(const char *extra, const char *id, const char *handler) {
    config(extra);
    pid_t w = start_worker("main");
    char got[64], out[1024], needle[96], said[96];
    enqueue(got, sizeof got, "main", NULL, NULL, id, handler);
    snprintf(needle, sizeof needle, "%s 1 started", id);
    cr_assert_eq(wait_record(needle, 1, 20000), 1);
    cr_expect_eq(CLI(out, "cancel", "-q", "main", id, NULL, NULL, NULL), 0);
    snprintf(said, sizeof said, "%s running\n", id);
    cr_expect_str_eq(out, said);
    return w;
}

/* ---- cancel in inline isolation ---- */

Test(lookup, cancel_running_job_inline) {
    pid_t w = cancel_started("worker:\n  isolation: inline\n  lease: 3s\n", "long-inline", "waitcancel");
    cr_expect_eq(wait_record("long-inline 1 saw-cancel", 1, 10000), 1, "the inline handler never saw the cancel");
    cr_expect(wait_state("main", "long-inline", "not found", 10000));
    jrt_sleep_ms(1000);
    cr_expect_eq(jrt_count(record, "started"), 1, "the cancelled job ran again");
    cr_expect(jrt_count(wlog, "cancelled") >= 1);
    cr_expect_eq(jrt_stats(&R, "main").dead, 0);
    jrt_stop(w, SIGTERM, 10000);
}

/* ---- a SIGKILLed worker's cancelled job is not run again ---- */

Test(lookup, killed_workers_cancelled_job_does_not_run_again) {
    pid_t w = cancel_started("worker:\n  lease: 1s\n", "sleeper", "sleepy");
    jrt_stop(w, SIGKILL, 5000);
    pid_t w2 = start_worker("main");
    /* the lease (1 s) runs out; the new worker reclaims (every lease/2) and drops it */
    cr_expect(wait_state("main", "sleeper", "not found", 20000), "the cancelled entry was never dropped");
    jrt_sleep_ms(2000);
    cr_expect_eq(jrt_count(record, "sleeper 1 started"), 1, "the cancelled job ran again after its worker died");
    jr_qstats_t s = jrt_stats(&R, "main");
    cr_expect_eq(s.ready + s.pending + s.dead, 0);
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_int(c, "EXISTS jr:{main}:cancelled"), 0);
    redisFree(c);
    jrt_stop(w2, SIGTERM, 10000);
}

/* ---- pages ---- */

/* Collect the first-column job ids of every page of `jobs --state`. */
static size_t all_pages(const char *queue, const char *state, const char *limit, char ids[][64], size_t max) {
    static char out[1 << 16];
    char after[128] = "", err[1024];
    size_t n = 0;
    for (int page = 0; page < 100; page++) {
        const char *args[20] = {"jobs", "-c", cfgpath, "-q", queue, "--state", state, "--limit", limit, "--json", NULL};
        if (after[0]) args[10] = "--after", args[11] = after, args[12] = NULL;
        cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, args), 0, "%s", err);
        json_t *doc = json_loads(out, 0, NULL);
        cr_assert(doc, "%s", out);
        json_t *jobs = json_object_get(doc, "jobs"), *j;
        size_t i;
        json_array_foreach(jobs, i, j) {
            cr_assert(n < max);
            snprintf(ids[n++], 64, "%s", json_string_value(json_object_get(j, "job")));
        }
        const char *next = json_string_value(json_object_get(doc, "next"));
        if (next) snprintf(after, sizeof after, "%s", next);
        json_decref(doc);
        if (!next) break;
    }
    return n;
}

Test(lookup, jobs_pages_cover_each_job_once_oldest_first) {
    config("");
    char ids[16][64], got[32][64], at[64];
    /* 7 jobs due at the same instant, 3 later: ties across page boundaries */
    long long now_s = (long long)(jrt_wall_us() / 1000000) + 3600;
    snprintf(at, sizeof at, "%lld", now_s);
    for (int i = 0; i < 7; i++) enqueue(ids[i], sizeof ids[i], "pg", "--at", at, NULL, "quick");
    for (int i = 7; i < 10; i++) {
        snprintf(at, sizeof at, "%lld", now_s + i);
        enqueue(ids[i], sizeof ids[i], "pg", "--at", at, NULL, "quick");
    }
    size_t n = all_pages("pg", "delayed", "3", got, 32);
    cr_assert_eq(n, 10, "delayed pages listed %zu jobs", n);
    for (int i = 0; i < 10; i++) {
        int seen = 0;
        for (size_t k = 0; k < n; k++) seen += !strcmp(got[k], ids[i]);
        cr_expect_eq(seen, 1, "%s listed %d times", ids[i], seen);
    }
    for (int i = 7; i < 10; i++) cr_expect_str_eq(got[i], ids[i], "later jobs come last, in due order");
    /* ready: 5 jobs, pages of 2 */
    char rid[5][64];
    for (int i = 0; i < 5; i++) enqueue(rid[i], sizeof rid[i], "pg", NULL, NULL, NULL, "quick");
    n = all_pages("pg", "ready", "2", got, 32);
    cr_assert_eq(n, 5);
    for (int i = 0; i < 5; i++) cr_expect_str_eq(got[i], rid[i]);
    char out[1024], err[1024];
    cr_expect_eq(cli(out, sizeof out, err, sizeof err, "jobs", "-q", "pg", "--state", "bogus", NULL, NULL), 2);
    cr_expect_eq(cli(out, sizeof out, err, sizeof err, "jobs", "-q", "pg", "--state", "delayed", "--after", "x"), 2);
}

/* ---- lookups of every kind of id, stale index entries ---- */

static redisReply *fcall_locate(redisContext *c, const char *queue, const char *id) {
    char k[4][160];
    snprintf(k[0], sizeof k[0], "jr:{%s}:ready", queue);
    snprintf(k[1], sizeof k[1], "jr:{%s}:delayed", queue);
    snprintf(k[2], sizeof k[2], "jr:{%s}:ids", queue);
    snprintf(k[3], sizeof k[3], "jr:{%s}:dead", queue);
    redisReply *rep = redisCommand(c, "FCALL jr_locate 4 %s %s %s %s %s", k[0], k[1], k[2], k[3], id);
    cr_assert(rep && rep->type == REDIS_REPLY_ARRAY, "%s", rep && rep->str ? rep->str : "no reply");
    return rep;
}

Test(lookup, generated_explicit_retried_promoted_ids_and_stale_index) {
    config("worker:\n  lease: 3s\n");
    redisContext *c = jrt_connect(&R);
    char gen[64], exp[64], now[64], out[4096];
    enqueue(gen, sizeof gen, "lk", "--in", "1h", NULL, "quick");
    enqueue(exp, sizeof exp, "lk", "--in", "1h", "exp-1", "quick");
    enqueue(now, sizeof now, "lk", NULL, NULL, NULL, "quick");
    /* the generated delayed id carries its due time; no index entry for it */
    long long due = 0, nseq = 0;
    cr_assert_eq(sscanf(gen, "d%lld-%lld", &due, &nseq), 2, "generated id %s", gen);
    long long wall = jrt_wall_us() / 1000;
    cr_expect(due > wall + 3500000 && due < wall + 3700000, "due %lld is not an hour from %lld", due, wall);
    cr_expect_eq(jrt_int(c, "HEXISTS jr:{lk}:ids %s", gen), 0, "a generated delayed id got an index entry");
    cr_expect_eq(jrt_int(c, "HEXISTS jr:{lk}:ids %s", now), 0, "a generated ready id got an index entry");
    cr_expect_eq(jrt_int(c, "HEXISTS jr:{lk}:ids exp-1"), 1);
    cr_expect_str_eq(state_of("lk", gen), "delayed");
    cr_expect_str_eq(state_of("lk", "exp-1"), "delayed");
    cr_expect_str_eq(state_of("lk", now), "ready");
    /* old d<n> ids and the new form are refused as explicit ids */
    char err[1024];
    const char *a1[] = {"enqueue", "-c", cfgpath, "-q", "lk", "--id", "d12-3", "quick", NULL};
    cr_expect_neq(jrt_run(out, sizeof out, err, sizeof err, a1), 0);
    cr_expect(strstr(err, "reserved form"), "%s", err);
    /* stale entries count as not there: a generated id's form still finds it */
    freeReplyObject(redisCommand(c, "HSET jr:{lk}:ids %s @12345.000", gen));
    cr_expect_str_eq(state_of("lk", gen), "delayed");
    freeReplyObject(redisCommand(c, "HSET jr:{lk}:ids %s 1-1", now));
    cr_expect_str_eq(state_of("lk", now), "ready");
    freeReplyObject(redisCommand(c, "HSET jr:{lk}:ids ghost @12345.000"));
    cr_expect_str_eq(state_of("lk", "ghost"), "not found");
    freeReplyObject(redisCommand(c, "HSET jr:{lk}:ids ghost2 %s", now)); /* another job's entry */
    cr_expect_str_eq(state_of("lk", "ghost2"), "not found");
    freeReplyObject(redisCommand(c, "HSET jr:{lk}:ids ghost3 garbage"));
    cr_expect_str_eq(state_of("lk", "ghost3"), "not found");
    /* a locate changes nothing */
    redisReply *rep = fcall_locate(c, "lk", "exp-1");
    cr_expect_str_eq(rep->element[0]->str, "delayed");
    freeReplyObject(rep);
    freeReplyObject(redisCommand(c, "HDEL jr:{lk}:ids ghost ghost2 ghost3"));

    /* promoted: an explicit and a generated job due in 300 ms, a scheduler moves them */
    char pe[64], pg[64];
    enqueue(pe, sizeof pe, "lk2", "--in", "300ms", "prom-1", "again");
    enqueue(pg, sizeof pg, "lk2", "--in", "300ms", NULL, "again");
    const char *sa[] = {"scheduler", "-c", cfgpath, "-q", "lk2", NULL};
    char slog[192];
    snprintf(slog, sizeof slog, "%s/scheduler.log", R.dir);
    pid_t s = jrt_spawn(slog, sa);
    cr_assert(wait_state("lk2", "prom-1", "ready", 10000));
    cr_assert(wait_state("lk2", pg, "ready", 10000));
    rep = fcall_locate(c, "lk2", pg);
    cr_expect_neq(strcmp(rep->element[2]->str, pg), 0, "a promoted job has a new entry");
    freeReplyObject(rep);
    /* retried: the worker runs `again`, which retries in an hour: index "@<score>" */
    pid_t w = start_worker("lk2");
    cr_assert(wait_state("lk2", "prom-1", "retrying", 20000));
    cr_assert(wait_state("lk2", pg, "retrying", 20000));
    redisReply *ix = redisCommand(c, "HGET jr:{lk2}:ids %s", pg);
    cr_expect(ix->type == REDIS_REPLY_STRING && ix->str[0] == '~', "retried job's index entry (in the time wheel)");
    freeReplyObject(ix);
    /* run it now, then let it finish OK? `again` always retries: cancel both */
    cr_expect_eq(CLI(out, "cancel", "-q", "lk2", "prom-1", pg, NULL, NULL), 0);
    cr_expect_eq(jrt_int(c, "HLEN jr:{lk2}:ids"), 0);
    /* a ready now job acknowledged by a worker leaves no index entry */
    char q1[64];
    enqueue(q1, sizeof q1, "lk2", NULL, NULL, "quick-1", "quick");
    cr_assert_eq(wait_record("quick-1 1 ran", 1, 10000), 1);
    cr_expect(wait_state("lk2", "quick-1", "not found", 10000));
    cr_expect_eq(jrt_int(c, "HLEN jr:{lk2}:ids"), 0, "an acknowledged job left its index entry");
    jrt_stop(w, SIGTERM, 10000);
    jrt_stop(s, SIGTERM, 10000);
    redisFree(c);
}

/* ---- cancel racing promotion and fetch ---- */

#define RACE_N 1000
#define RACE_CANCELLERS 4

Test(lookup, cancel_racing_promotion_and_fetch_is_never_both) {
    config("worker:\n  concurrency: 2\n  lease: 5s\n");
    static jr_enqueue_t jobs[RACE_N];
    static char ids[RACE_N][JR_ID_MAX], given[RACE_N][32];
    int64_t t0 = jrt_wall_us() + 3000000; /* due in 3 s, spread over 300 ms */
    for (int i = 0; i < RACE_N; i++) {
        snprintf(given[i], sizeof given[i], "race-%d", i);
        jobs[i] = jrt_job("race", "quick", NULL);
        jobs[i].id = i % 2 ? given[i] : NULL, jobs[i].at_us = t0 + (i % 300) * 1000;
    }
    jrt_enqueue_jobs(&R, jobs, RACE_N, ids);
    const char *sa[] = {"scheduler", "-c", cfgpath, "-q", "race", NULL};
    pid_t s = jrt_spawn(NULL, sa);
    pid_t w1 = start_worker("race"), w2 = start_worker("race");
    /* cancellers start just before the jobs fall due, each with every 4th id */
    while (jrt_wall_us() < t0 - 100000) jrt_sleep_ms(5);
    pid_t cp[RACE_CANCELLERS];
    char outp[RACE_CANCELLERS][192];
    for (int k = 0; k < RACE_CANCELLERS; k++) {
        snprintf(outp[k], sizeof outp[k], "%s/cancel%d.txt", R.dir, k);
        cp[k] = fork();
        cr_assert(cp[k] >= 0);
        if (cp[k] == 0) {
            static const char *argv[RACE_N / RACE_CANCELLERS + 16];
            int a = 0;
            argv[a++] = JRT_JOBRUNNER, argv[a++] = "cancel", argv[a++] = "-c", argv[a++] = cfgpath;
            argv[a++] = "-q", argv[a++] = "race";
            for (int i = k; i < RACE_N; i += RACE_CANCELLERS) argv[a++] = ids[i];
            argv[a] = NULL;
            int fd = open(outp[k], O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(fd, 1);
            execv(JRT_JOBRUNNER, (char *const *)argv);
            _exit(127);
        }
    }
    for (int k = 0; k < RACE_CANCELLERS; k++) {
        int st;
        waitpid(cp[k], &st, 0);
    }
    /* let everything that was not cancelled run */
    for (int waited = 0; waited < 60000; waited += 100) {
        jr_qstats_t q = jrt_stats(&R, "race");
        if (q.ready + q.pending + q.delayed == 0) break;
        jrt_sleep_ms(100);
    }
    jrt_sleep_ms(500);
    jr_qstats_t q = jrt_stats(&R, "race");
    cr_expect_eq(q.ready + q.pending + q.delayed + q.dead, 0, "jobs left behind");
    /* cancelled and run: disjoint, covering all; "running" and "not found" ones ran */
    static char state[RACE_N][16];
    int ncancelled = 0, nrunning = 0, nnotfound = 0;
    for (int k = 0; k < RACE_CANCELLERS; k++) {
        char *text = jrt_slurp(outp[k]);
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            char *sp = strchr(line, ' ');
            cr_assert(sp, "bad cancel line %s", line);
            *sp = '\0';
            int i = 0;
            while (i < RACE_N && strcmp(ids[i], line)) i++;
            cr_assert(i < RACE_N, "unknown id %s", line);
            snprintf(state[i], sizeof state[i], "%s", sp + 1);
        }
        free(text);
    }
    char *rec = jrt_slurp(record);
    for (int i = 0; i < RACE_N; i++) {
        char needle[JR_ID_MAX + 16];
        ids[i][JR_ID_MAX - 1] = 0;
        snprintf(needle, sizeof needle, "%.159s 1 ran\n", ids[i]);
        int ran = 0;
        for (char *p = rec; (p = strstr(p, needle)) != NULL; p++) ran += p == rec || p[-1] == '\n';
        cr_assert(state[i][0], "no cancel answer for %s", ids[i]);
        if (!strcmp(state[i], "cancelled")) {
            ncancelled++;
            cr_expect_eq(ran, 0, "%s was cancelled and ran", ids[i]);
        } else {
            nrunning += !strcmp(state[i], "running");
            nnotfound += !strcmp(state[i], "not found");
            cr_expect_eq(ran, 1, "%s (%s) ran %d times", ids[i], state[i], ran);
        }
    }
    free(rec);
    cr_log_info("race: %d cancelled, %d running, %d not found (already run)", ncancelled, nrunning, nnotfound);
    cr_expect_eq(ncancelled + nrunning + nnotfound, RACE_N);
    jrt_stop(w1, SIGTERM, 10000);
    jrt_stop(w2, SIGTERM, 10000);
    jrt_stop(s, SIGTERM, 10000);
}

/* ---- the delayed-member decoder of `jobs --state delayed` (pure) ---- */

#include "cli.h"

Test(lookup_msgpack, decodes_strings_and_refuses_anything_else, .init = NULL, .fini = NULL) {
    const char *v[8];
    size_t l[8];
    /* fixstr "id", str8 of 40 bytes, bin8 "\xff" */
    char buf[64] = "\xa2id\xd9\x28";
    memset(buf + 5, 'x', 40);
    memcpy(buf + 45, "\xc4\x01\xff", 3);
    cr_assert_eq(jr_msgpack_strings(buf, 48, v, l, 8), 3);
    cr_expect(l[0] == 2 && !memcmp(v[0], "id", 2));
    cr_expect(l[1] == 40 && v[1][0] == 'x');
    cr_expect(l[2] == 1 && (unsigned char)v[2][0] == 0xff);
    cr_expect_eq(jr_msgpack_strings(buf, 47, v, l, 8), -1, "a cut string");
    cr_expect_eq(jr_msgpack_strings(buf, 48, v, l, 2), -1, "more items than asked for");
    cr_expect_eq(jr_msgpack_strings("\x01", 1, v, l, 8), -1, "an integer");
    cr_expect_eq(jr_msgpack_strings("\x91\xa1x", 3, v, l, 8), -1, "an array");
    cr_expect_eq(jr_msgpack_strings("\xda\x00", 2, v, l, 8), -1, "a cut header");
    cr_expect_eq(jr_msgpack_strings("", 0, v, l, 8), 0);
}
