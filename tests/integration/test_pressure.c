/* Redis under pressure and the worker's bounds, each injected for real:
 * an out-of-memory Redis (maxmemory reached, noeviction), Redis frozen for
 * longer than the lease (SIGSTOP), several full queues at concurrency 1,
 * more than 64 queues, and long jobs that must spread over two workers. */
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
#include "redis_produce.h"
#include "redis_admin.h"

static jrt_redis_t R;
static char record[192], cfgpath[192];

static void setup(void) {
    jrt_start_recorded(&R, record, sizeof record);
}
static void teardown(void) {
    if (R.pid > 0) kill(R.pid, SIGCONT); /* in case a test failed while Redis was frozen */
    jrt_redis_stop(&R);
}

TestSuite(pressure, .init = setup, .fini = teardown, .timeout = 180);

/* A config file for this test: the Redis URL (plus `redis_extra` keys of
 * that section) and `extra` YAML. */
static const char *config2(const char *redis_extra, const char *extra) {
    size_t len = strlen(redis_extra) + strlen(extra) + 1;
    char *text = malloc(len);
    cr_assert(text, "out of memory");
    snprintf(text, len, "%s%s", redis_extra, extra);
    jrt_config(&R, text, cfgpath, sizeof cfgpath);
    free(text);
    return cfgpath;
}
static const char *config(const char *extra) { return config2("", extra); }

static pid_t start_worker(const char *log) { return jrt_worker(&R, cfgpath, NULL, jrt_path(&R, log), NULL); }

static jr_redis_t *conn(void) { return jrt_jr_connect(&R); }

/* Enqueue n jobs of handler h with payload p on queue q. */
static void enqueue(const char *q, size_t n, const char *h, const char *p, char (*ids)[JR_ID_MAX]) {
    jrt_enqueue(&R, jrt_job(q, h, p), n, ids);
}

static jr_qstats_t stats(const char *q) { return jrt_stats(&R, q); }

static int settled(const char *q) {
    jr_qstats_t s = stats(q);
    return s.ready == 0 && s.pending == 0 && s.delayed == 0 && s.dead == 0;
}

/* Wait until every queue of qs[0..n) is empty (nothing ready, pending,
 * delayed or dead). Returns 1 if they all are. */
typedef struct {
    const char *const *qs;
    size_t n;
} queues_t;

static int all_settled(const void *arg) {
    const queues_t *q = arg;
    size_t ok = 0;
    while (ok < q->n && settled(q->qs[ok])) ok++;
    return ok == q->n;
}

static int wait_all_settled(const char *const *qs, size_t n, int timeout_ms) {
    return jrt_wait_for(timeout_ms, 100, all_settled, &(queues_t){qs, n});
}

/* Make Redis refuse writes: maxmemory a little above what it uses, fill it
 * with keys until a write is refused for lack of memory, then lower
 * maxmemory below what is used (query buffers come and go: without that,
 * small writes would still slip in). Returns how many filler keys were
 * written (fill:0..n-1). */
static int fill_memory(redisContext *c) {
    long long used = jrt_info_int(c, "memory", "used_memory");
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory-policy noeviction"));
    redisReply *rep = redisCommand(c, "CONFIG SET maxmemory %lld", used + 2 * 1024 * 1024);
    cr_assert(rep && rep->type != REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    static char value[64 * 1024];
    memset(value, 'x', sizeof value);
    for (int i = 0; i < 10000; i++) {
        rep = redisCommand(c, "SET fill:%d %b", i, value, sizeof value);
        int oom = rep && rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "OOM");
        freeReplyObject(rep);
        if (oom) {
            used = jrt_info_int(c, "memory", "used_memory");
            freeReplyObject(redisCommand(c, "CONFIG SET maxmemory %lld", used - 1024 * 1024));
            return i;
        }
    }
    cr_assert_fail("Redis never refused a write");
    return 0;
}

static void free_memory(redisContext *c, int n) {
    for (int i = 0; i < n; i++) freeReplyObject(redisCommand(c, "DEL fill:%d", i));
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory 0"));
}

/* ---- class 4: Redis under pressure ---------------------------------------- */

Test(pressure, connecting_writes_nothing_when_the_right_library_is_loaded) {
    jr_redis_t *r = conn(); /* loads it */
    redisContext *c = jrt_connect(&R);
    int n = fill_memory(c);
    cr_expect_eq(jr_redis_load_library(r), 0, "an out-of-memory Redis refused a connect: %s", jr_redis_errstr(r));
    /* A different library under our name must be replaced, and a refusal
     * then says what Redis said. */
    freeReplyObject(redisCommand(c, "FUNCTION DELETE jobrunner"));
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory 1")); /* deleting it freed some */
    cr_expect_neq(jr_redis_load_library(r), 0, "loading a missing library in an out-of-memory Redis worked?");
    cr_expect(strstr(jr_redis_errstr(r), "OOM command not allowed"), "error not Redis's own: %s",
              jr_redis_errstr(r));
    cr_expect(!strstr(jr_redis_errstr(r), "Redis >= 7.0"), "blames the Redis version: %s", jr_redis_errstr(r));
    free_memory(c, n);
    cr_expect_eq(jr_redis_load_library(r), 0, "%s", jr_redis_errstr(r));
    redisReply *rep = redisCommand(c, "FCALL jr_version 0");
    cr_expect(rep && rep->type == REDIS_REPLY_STRING, "the library was not loaded again");
    freeReplyObject(rep);
    redisFree(c);
    jr_redis_free(r);
}

/* A worker with 2 runners (its output in R.dir/log) for n jobs that nap
 * `ms` (ids into ids), once two of them have started. */
static pid_t two_running(int n, const char *ms, char (*ids)[JR_ID_MAX], const char *log) {
    config("worker:\n  concurrency: 2\n");
    enqueue("default", (size_t)n, "nap", ms, ids);
    pid_t w = start_worker(log);
    cr_assert_geq(jrt_wait_lines(record, 2, 10000), 2, "no job started");
    return w;
}

/* Out of memory (noeviction): the functions that finish work (ack, fail,
 * hand-back, heartbeat, reclaim) are allowed to run, so jobs finished in the
 * window are acknowledged in the window, exactly once; and a worker started
 * in the window connects (no write is needed when the library is loaded). */
Test(pressure, results_of_jobs_finished_while_redis_is_out_of_memory_are_acked_once) {
    enum { N = 6 };
    char ids[N][JR_ID_MAX];
    pid_t w1 = two_running(N, "400", ids, "w1.log");
    redisContext *c = jrt_connect(&R);
    int n = fill_memory(c); /* the 2 running jobs finish in the window */
    jrt_sleep_ms(1500);
    pid_t w2 = start_worker("w2.log"); /* a worker (re)started in the window connects */
    jrt_sleep_ms(1500);
    redisReply *rep = redisCommand(c, "SET probe 1");
    cr_expect(rep && rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "OOM"), "the window is not out of memory");
    freeReplyObject(rep);
    cr_expect_eq(jrt_count(jrt_path(&R, "w1.log"), "Redis refused results"), 0, "results were refused when out of memory");
    cr_expect_eq(jrt_count(jrt_path(&R, "w2.log"), "Redis unavailable"), 0, "a worker cannot connect to an out-of-memory Redis");
    cr_expect_eq(waitpid(w2, NULL, WNOHANG), 0, "the second worker died");
    free_memory(c, n);
    redisFree(c);
    const char *qs[] = {"default"};
    cr_expect(wait_all_settled(qs, 1, 30000), "jobs are left: ready=%lld pending=%lld", stats("default").ready,
              stats("default").pending);
    for (int i = 0; i < N; i++) cr_expect_eq(jrt_runs_of(record, ids[i], NULL), 1, "job %s ran %d times", ids[i], jrt_runs_of(record, ids[i], NULL));
    cr_expect_eq(jrt_stop(w1, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(w2, SIGTERM, 10000), 0);
}

/* Redis refuses every write (here: min-replicas-to-write with no replica,
 * "NOREPLICAS"; the same path as any refusal that ends): a failed job's
 * dead letter is kept and retried, the refusal logged once in Redis's words,
 * a stopping worker waits for Redis to take it, and it is buried once. */
Test(pressure, a_result_redis_refuses_is_kept_retried_and_buried_once_and_a_stopping_worker_waits) {
    config("worker:\n  concurrency: 1\n");
    char id[1][JR_ID_MAX];
    enqueue("default", 1, "nap", "1000", id);
    pid_t w = start_worker("w.log");
    cr_assert_geq(jrt_wait_lines(record, 1, 10000), 1, "the job did not start");
    redisContext *c = jrt_connect(&R);
    freeReplyObject(redisCommand(c, "CONFIG SET min-replicas-to-write 1"));
    jrt_sleep_ms(2500); /* the job ends in here; its ack is refused */
    cr_expect_eq(stats("default").pending, 1, "acked while Redis refused writes?");
    /* (a worker started just before may meet the refusal in its start-up
     * work too, e.g. the pruning of stopped consumers: logged on its own) */
    cr_expect_eq(jrt_count(jrt_path(&R, "w.log"), "refused results of finished jobs; keeping them and retrying "
                                                   "error=\"NOREPLICAS"),
                 1, "the refusal is not logged once in Redis's words:\n%s", jrt_slurp(jrt_path(&R, "w.log")));
    kill(w, SIGTERM); /* its result is not in Redis yet: it must wait */
    jrt_sleep_ms(1000);
    cr_expect_eq(waitpid(w, NULL, WNOHANG), 0, "the worker exited with a result Redis never took");
    cr_expect_geq(jrt_count(jrt_path(&R, "w.log"), "waiting for Redis to take the results"), 1);
    freeReplyObject(redisCommand(c, "CONFIG SET min-replicas-to-write 0"));
    redisFree(c);
    int st = jrt_stop(w, 0, 15000); /* no signal: it exits by itself once Redis took it */
    cr_expect_eq(st, 0, "worker exit status %d", st);
    jr_qstats_t s = stats("default");
    cr_expect(s.dead == 0 && s.ready == 0 && s.pending == 0, "dead=%lld ready=%lld pending=%lld", s.dead, s.ready,
              s.pending);
    cr_expect_eq(jrt_runs_of(record, id[0], NULL), 1);
    cr_expect_eq(jrt_count(jrt_path(&R, "w.log"), "Redis accepts results again"), 1);
}

Test(pressure, results_refused_for_a_missing_function_library_are_sent_after_it_is_loaded_again) {
    enum { N = 4 };
    char ids[N][JR_ID_MAX];
    pid_t w = two_running(N, "600", ids, "w.log");
    redisContext *c = jrt_connect(&R);
    freeReplyObject(redisCommand(c, "FUNCTION FLUSH")); /* an operator's mistake */
    jrt_sleep_ms(2000); /* the running jobs finish; their acks are refused */
    /* (no helper of this file may run before this check: connecting loads the library) */
    redisReply *rep = redisCommand(c, "FUNCTION LIST LIBRARYNAME jobrunner");
    cr_expect(rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1, "the worker did not load the library again");
    freeReplyObject(rep);
    redisFree(c);
    const char *qs[] = {"default"};
    cr_expect(wait_all_settled(qs, 1, 20000), "jobs are left: ready=%lld pending=%lld", stats("default").ready,
              stats("default").pending);
    for (int i = 0; i < N; i++) cr_expect_eq(jrt_runs_of(record, ids[i], NULL), 1, "job %s ran %d times", ids[i], jrt_runs_of(record, ids[i], NULL));
    cr_expect_geq(jrt_count(jrt_path(&R, "w.log"), "Function not found"), 1, "Redis's error is not shown");
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

Test(pressure, an_outage_longer_than_the_lease_runs_no_finished_job_again) {
    /* Redis with every write on disk, frozen (SIGSTOP) longer than the lease
     * and then killed and restarted: what was in flight on the old
     * connections is lost, the pending entries and their delivery times are
     * not. */
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    jrt_redis_stop(&R);
    jrt_redis_start(&R, aof);
    snprintf(record, sizeof record, "%s/record.txt", R.dir);
    setenv("JRT_RECORD", record, 1);
    config2("  connect_timeout: 300ms\n", "worker:\n  concurrency: 2\n  lease: 1s\n");
    enum { N = 8 };
    char ids[N][JR_ID_MAX];
    enqueue("default", 1, "nap", "5000", ids); /* still running when Redis is back */
    enqueue("default", N - 1, "nap", "400", ids + 1);
    pid_t w = start_worker("w.log");
    cr_assert_geq(jrt_wait_lines(record, 2, 10000), 2, "no job started");
    kill(R.pid, SIGSTOP); /* short jobs finish while Redis is away */
    jrt_sleep_ms(3000);    /* > the 1 s lease */
    jrt_redis_restart(&R, aof);
    const char *qs[] = {"default"};
    cr_expect(wait_all_settled(qs, 1, 30000), "jobs are left: ready=%lld pending=%lld", stats("default").ready,
              stats("default").pending);
    for (int i = 0; i < N; i++) cr_expect_eq(jrt_runs_of(record, ids[i], NULL), 1, "job %s ran %d times", ids[i], jrt_runs_of(record, ids[i], NULL));
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* ---- class 5: bounds ------------------------------------------------------ */

Test(pressure, a_worker_on_three_full_queues_at_concurrency_1_runs_every_job_once) {
    config("worker:\n  concurrency: 1\n  queues: [q1, q2, q3]\n");
    enum { PER = 200 };
    static char ids[3][PER][JR_ID_MAX];
    const char *qs[] = {"q1", "q2", "q3"};
    for (int q = 0; q < 3; q++) enqueue(qs[q], PER, "record", qs[q], ids[q]);
    pid_t w = start_worker("w.log");
    cr_expect(wait_all_settled(qs, 3, 60000), "jobs are left");
    cr_expect_eq(waitpid(w, NULL, WNOHANG), 0, "the worker died");
    for (int q = 0; q < 3; q++)
        for (int i = 0; i < PER; i++)
            cr_expect_eq(jrt_runs_of(record, ids[q][i], qs[q]), 1, "job %s of %s ran %d times", ids[q][i], qs[q],
                         jrt_runs_of(record, ids[q][i], qs[q]));
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

Test(pressure, a_worker_on_100_queues_runs_the_jobs_of_the_last_ones) {
    enum { NQ = 100, FIRST_USED = 90 };
    static char names[NQ][8], yaml[NQ * 8 + 64];
    const char *qs[NQ];
    snprintf(yaml, sizeof yaml, "worker:\n  concurrency: 2\n  queues: [");
    for (int i = 0; i < NQ; i++) {
        snprintf(names[i], sizeof names[i], "q%03d", i);
        qs[i] = names[i];
        snprintf(yaml + strlen(yaml), sizeof yaml - strlen(yaml), "%s%s", i ? ", " : "", names[i]);
    }
    snprintf(yaml + strlen(yaml), sizeof yaml - strlen(yaml), "]\n");
    config(yaml);
    static char ids[NQ - FIRST_USED][2][JR_ID_MAX];
    for (int i = FIRST_USED; i < NQ; i++) enqueue(names[i], 2, "record", names[i], ids[i - FIRST_USED]);
    pid_t w = start_worker("w.log");
    cr_expect(wait_all_settled(qs + FIRST_USED, NQ - FIRST_USED, 20000), "jobs of queues 90..99 are left");
    for (int i = 0; i < NQ - FIRST_USED; i++)
        for (int j = 0; j < 2; j++)
            cr_expect_eq(jrt_runs_of(record, ids[i][j], names[FIRST_USED + i]), 1, "job %s of %s ran %d times",
                         ids[i][j], names[FIRST_USED + i], jrt_runs_of(record, ids[i][j], names[FIRST_USED + i]));
    /* And jobs enqueued while it blocks wake it on any of its queues. */
    char late[1][JR_ID_MAX];
    enqueue("q099", 1, "record", "q099", late);
    cr_expect(wait_all_settled(qs + NQ - 1, 1, 20000));
    cr_expect_eq(jrt_runs_of(record, late[0], "q099"), 1);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* ---- class 6: the prefetch bound ------------------------------------------ */

Test(pressure, long_jobs_spread_over_idle_workers) {
    config("worker:\n  concurrency: 1\n");
    char rec[2][192];
    pid_t w[2];
    for (int i = 0; i < 2; i++) { /* each worker records into its own file */
        snprintf(rec[i], sizeof rec[i], "%s/record.%d.txt", R.dir, i);
        setenv("JRT_RECORD", rec[i], 1);
        w[i] = start_worker(i ? "w1.log" : "w0.log");
    }
    /* Warm both up with quick jobs first: what they learnt about short jobs
     * must not make them grab the long ones. */
    static char warm[400][JR_ID_MAX];
    enqueue("default", 400, "record", "warm", warm);
    const char *qs[] = {"default"};
    cr_assert(wait_all_settled(qs, 1, 30000), "warm-up jobs are left");
    enum { N = 6 };
    char ids[N][JR_ID_MAX];
    int64_t t0 = jrt_wall_us();
    enqueue("default", N, "nap", "1500", ids);
    cr_expect(wait_all_settled(qs, 1, 30000), "jobs are left");
    int64_t took = jrt_wall_us() - t0;
    int ran[2] = {jrt_count(rec[0], " 1500\n"), jrt_count(rec[1], " 1500\n")};
    cr_expect_eq(ran[0] + ran[1], N, "%d + %d runs of %d jobs", ran[0], ran[1], N);
    cr_expect(ran[0] >= 2 && ran[1] >= 2, "one worker took the long jobs: %d and %d", ran[0], ran[1]);
    cr_expect_lt(took, 8000000, "6 jobs of 1.5 s on 2 workers took %lld us", (long long)took);
    for (int i = 0; i < 2; i++) cr_expect_eq(jrt_stop(w[i], SIGTERM, 10000), 0);
}
