/* Failure modes, each injected for real: crashing and hanging handlers,
 * SIGKILLed workers, SIGTERM mid-run, long jobs and leases, Redis killed and
 * restarted, garbage in the stream, poison jobs, dead-letter handling. */
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

JRT_RECORDED_SUITE(faults, .timeout = 180);

/* A config file for this test: the Redis URL plus `extra` YAML. */
static const char *config(const char *extra) {
    jrt_config(&R, extra, cfgpath, sizeof cfgpath);
    return cfgpath;
}

/* A worker (record plugin) or a scheduler with the config, its output in
 * R.dir/log. */
static pid_t start(const char *what, const char *log) {
    return strcmp(what, "worker") ? jrt_scheduler(&R, cfgpath, jrt_path(&R, log))
                                  : jrt_worker(&R, cfgpath, NULL, jrt_path(&R, log), NULL);
}

/* Enqueue n jobs of handler h with payload p (and options) through the C API. */
static void enqueue(size_t n, const char *h, const char *p, uint32_t max_attempts, int64_t timeout_ms,
                    char (*ids)[JR_ID_MAX]) {
    jr_enqueue_t job = jrt_job("default", h, p);
    job.env.max_attempts = max_attempts, job.env.timeout_ms = timeout_ms;
    jrt_enqueue(&R, job, n, ids);
}

static jr_qstats_t stats(void) { return jrt_stats(&R, "default"); }

static jr_qstats_t wait_settled(long long dead, int timeout_ms) {
    return jrt_wait_settled(&R, "default", dead, timeout_ms);
}

static int runs_of(const char *id) { return jrt_runs_of(record, id, NULL); }

static void dead_entry(const char *id, char *out, size_t len) { jrt_dead_entry(&R, "default", id, out, len); }

Test(faults, segfaulting_handler_neither_kills_the_worker_nor_other_jobs) {
    config("jobs:\n  backoff: 20ms\n  backoff_max: 50ms\n");
    pid_t w = start("worker", "worker.log"), s = start("scheduler", "sched.log");
    char crash_id[1][JR_ID_MAX], ok_ids[40][JR_ID_MAX];
    enqueue(20, "record", "before", 0, 0, ok_ids);
    enqueue(1, "crash", "", 3, 0, crash_id);
    enqueue(20, "record", "after", 0, 0, ok_ids + 20);
    jr_qstats_t st = wait_settled(1, 20000);
    cr_expect_eq(st.dead, 1, "dead=%lld ready=%lld pending=%lld delayed=%lld", st.dead, st.ready, st.pending, st.delayed);
    cr_expect_eq(runs_of(crash_id[0]), 3, "the crashing job ran %d times, not max_attempts=3", runs_of(crash_id[0]));
    for (int i = 0; i < 40; i++) cr_expect_eq(runs_of(ok_ids[i]), 1, "job %s ran %d times", ok_ids[i], runs_of(ok_ids[i]));
    char dead[2048];
    dead_entry(crash_id[0], dead, sizeof dead);
    cr_expect(strstr(dead, "crashed: SIGSEGV") && strstr(dead, "a=3;") && strstr(dead, "why=failed"), "%s", dead);
    cr_expect_eq(waitpid(w, NULL, WNOHANG), 0, "the worker died");
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
}

Test(faults, hanging_handler_is_killed_at_its_timeout_retried_then_dead) {
    config("jobs:\n  backoff: 10ms\n  backoff_max: 10ms\n");
    pid_t w = start("worker", "worker.log"), s = start("scheduler", "sched.log");
    char id[1][JR_ID_MAX], other[1][JR_ID_MAX];
    int64_t t0 = jrt_wall_us();
    enqueue(1, "hang", "", 2, 300, id);
    enqueue(1, "record", "", 0, 0, other);
    jr_qstats_t st = wait_settled(1, 20000);
    int64_t took = jrt_wall_us() - t0;
    cr_expect_eq(st.dead, 1);
    cr_expect_eq(runs_of(id[0]), 2, "ran %d times, not 2", runs_of(id[0]));
    cr_expect_eq(runs_of(other[0]), 1, "the job after it did not run once");
    cr_expect_geq(took, 600000, "two attempts of 300 ms took only %lld us", took);
    char dead[2048];
    dead_entry(id[0], dead, sizeof dead);
    cr_expect(strstr(dead, "timeout") && strstr(dead, "a=2;"), "%s", dead);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
}

Test(faults, a_job_longer_than_the_lease_is_not_taken_over_while_its_worker_lives) {
    config("worker:\n  lease: 600ms\n");
    pid_t w1 = start("worker", "w1.log"), w2 = start("worker", "w2.log");
    char id[1][JR_ID_MAX];
    enqueue(1, "nap", "2500", 0, 0, id);
    jrt_sleep_ms(3500);
    jr_qstats_t st = wait_settled(0, 5000);
    cr_expect(st.pending == 0 && st.ready == 0, "pending=%lld ready=%lld", st.pending, st.ready);
    cr_expect_eq(runs_of(id[0]), 1, "a 2.5 s job with a 0.6 s lease ran %d times", runs_of(id[0]));
    cr_expect_eq(jrt_count(jrt_path(&R, "w1.log"), "took over") + jrt_count(jrt_path(&R, "w2.log"), "took over"), 0);
    cr_expect_eq(jrt_stop(w1, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(w2, SIGTERM, 10000), 0);
}

Test(faults, sigterm_lets_running_jobs_finish_and_hands_back_the_rest) {
    config("worker:\n  batch: 16\n  grace: 3s\n");
    pid_t w1 = start("worker", "w1.log");
    enum { N = 120 };
    static char ids[N][JR_ID_MAX];
    enqueue(N, "nap", "30", 0, 0, ids);
    jrt_sleep_ms(400); /* w1 is busy, with jobs fetched but not started */
    int64_t t0 = jrt_wall_us();
    int st = jrt_stop(w1, SIGTERM, 6000);
    int64_t took = jrt_wall_us() - t0;
    cr_expect_eq(st, 0, "worker exit status %d after SIGTERM", st);
    cr_expect_lt(took, 3500000, "took %lld us to stop with a 3 s grace period", took);
    jr_qstats_t mid = stats();
    cr_expect_eq(mid.pending, 0, "%lld entries left pending by a graceful stop", mid.pending);
    pid_t w2 = start("worker", "w2.log");
    jr_qstats_t end = wait_settled(0, 30000);
    cr_expect(end.ready == 0 && end.pending == 0, "ready=%lld pending=%lld", end.ready, end.pending);
    for (int i = 0; i < N; i++) cr_expect_eq(runs_of(ids[i]), 1, "job %s ran %d times", ids[i], runs_of(ids[i]));
    cr_expect_eq(jrt_stop(w2, SIGTERM, 10000), 0);
}

Test(faults, sigkill_random_workers_loses_nothing, .timeout = 240) {
    config("worker:\n  batch: 16\n  lease: 1s\njobs:\n  max_deliveries: 50\n");
    enum { N = 5000, W = 3 };
    static char ids[N][JR_ID_MAX];
    enqueue(N, "nap", "2", 0, 0, ids);
    pid_t w[W];
    char name[32];
    for (int i = 0; i < W; i++) {
        snprintf(name, sizeof name, "w%d.log", i);
        w[i] = start("worker", name);
    }
    srand((unsigned)getpid());
    int kills = 0;
    for (int round = 0; round < 60; round++) {
        jrt_sleep_ms(150 + rand() % 200);
        jr_qstats_t s = stats();
        if (s.ready == 0 && s.pending == 0) break;
        int k = rand() % W;
        kill(w[k], SIGKILL);
        waitpid(w[k], NULL, 0);
        kills++;
        snprintf(name, sizeof name, "w%d.log", k);
        w[k] = start("worker", name);
    }
    jr_qstats_t s = wait_settled(0, 60000);
    cr_expect(s.ready == 0 && s.pending == 0 && s.delayed == 0 && s.dead == 0,
              "left: ready=%lld pending=%lld delayed=%lld dead=%lld", s.ready, s.pending, s.delayed, s.dead);
    /* Every job ran; count the extra runs. */
    char *text;
    size_t nlines, distinct;
    char **lines = jrt_record_ids(record, N * 4, &text, &nlines, &distinct);
    size_t dups = nlines - distinct;
    /* A killed worker can have run at most what it held (batch 16 per
     * runner, 4 runners) without the acknowledgements reaching Redis. */
    fprintf(stderr, "kill test: jobs=%d workers=%d kills=%d runs=%zu distinct=%zu duplicates=%zu lost=%d\n", N, W,
            kills, nlines, distinct, dups, N - (int)distinct);
    cr_expect_eq(distinct, N, "%zu of %d jobs ran", distinct, N);
    cr_expect_leq(dups, (size_t)kills * 64, "%zu duplicates for %d kills", dups, kills);
    cr_expect_gt(kills, 3, "the test killed only %d workers", kills);
    free(lines);
    free(text);
    for (int i = 0; i < W; i++) jrt_stop(w[i], SIGTERM, 10000);
}

Test(faults, redis_killed_and_restarted_with_aof_loses_nothing) {
    const char *aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    jrt_redis_restart(&R, aof); /* same socket, now with AOF */
    config("worker:\n  batch: 8\n");
    pid_t w = start("worker", "worker.log"), s = start("scheduler", "sched.log");
    enum { N = 300, D = 50 };
    static char ids[N][JR_ID_MAX], dids[D][JR_ID_MAX];
    enqueue(N, "nap", "5", 0, 0, ids);
    jr_enqueue_t j[D];
    for (int i = 0; i < D; i++) j[i] = jrt_job("default", "record", NULL), j[i].delay_ms = 1500 + i * 10;
    jrt_enqueue_jobs(&R, j, D, dids);
    jrt_sleep_ms(500);
    jrt_redis_restart(&R, aof); /* SIGKILL: only what AOF has survives */
    jrt_sleep_ms(1500);
    jrt_redis_restart(&R, aof);
    jr_qstats_t st = wait_settled(0, 60000);
    cr_expect(st.ready == 0 && st.pending == 0 && st.delayed == 0 && st.dead == 0,
              "ready=%lld pending=%lld delayed=%lld dead=%lld", st.ready, st.pending, st.delayed, st.dead);
    for (int i = 0; i < N; i++) cr_expect_geq(runs_of(ids[i]), 1, "job %s never ran", ids[i]);
    for (int i = 0; i < D; i++) cr_expect_geq(runs_of(dids[i]), 1, "delayed job %s never ran", dids[i]);
    cr_expect_gt(jrt_count(jrt_path(&R, "worker.log"), "reconnecting"), 0, "the worker never saw Redis go");
    cr_expect_eq(waitpid(w, NULL, WNOHANG), 0, "the worker died");
    cr_expect_eq(waitpid(s, NULL, WNOHANG), 0, "the scheduler died");
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
}

Test(faults, garbage_entries_are_dead_lettered_with_the_reason) {
    config("jobs:\n  max_payload: 100\nworker:\n  handler_wait: 0s\n");
    pid_t w = start("worker", "worker.log");
    jrt_sleep_ms(300);
    redisContext *c = jrt_connect(&R);
    const char *garbage[][2] = {
        {"XADD jr:{default}:ready * p nohandler", "missing field \"h\""},
        {"XADD jr:{default}:ready * h record a two", "non-numeric or out-of-range field \"a\""},
        {"XADD jr:{default}:ready * h no_such_handler", "no handler named \"no_such_handler\""},
        {"XADD jr:{default}:ready * h record zz 1", "unknown field \"zz\""},
    };
    for (size_t i = 0; i < 4; i++) freeReplyObject(redisCommand(c, garbage[i][0]));
    char big[201];
    memset(big, 'x', 200);
    big[200] = '\0';
    freeReplyObject(redisCommand(c, "XADD jr:{default}:ready * h record p %s", big));
    freeReplyObject(redisCommand(c, "XADD jr:{default}:ready * h record p fine"));
    jr_qstats_t st = wait_settled(5, 10000);
    cr_expect_eq(st.dead, 5, "dead=%lld", st.dead);
    cr_expect_eq(jrt_lines(record), 1, "only the good entry runs");
    redisReply *rep = redisCommand(c, "XRANGE jr:{default}:dead - +");
    char all[8192] = "";
    for (size_t i = 0; rep && i < rep->elements; i++) {
        redisReply *f = rep->element[i]->element[1];
        for (size_t j = 0; j + 1 < f->elements; j += 2)
            snprintf(all + strlen(all), sizeof all - strlen(all), "%s=%s;", f->element[j]->str, f->element[j + 1]->str);
        strcat(all, "\n");
    }
    freeReplyObject(rep);
    for (size_t i = 0; i < 4; i++) cr_expect(strstr(all, garbage[i][1]), "no dead entry says %s:\n%s", garbage[i][1], all);
    cr_expect(strstr(all, "over the limit of 100"), "%s", all);
    cr_expect_eq(jrt_count(jrt_path(&R, "worker.log"), "why=invalid") + 0, 0); /* why is in Redis, not a log key */
    cr_expect(strstr(all, "why=invalid"), "%s", all);
    redisFree(c);
    cr_expect_eq(waitpid(w, NULL, WNOHANG), 0, "a garbage entry killed the worker");
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

Test(faults, a_job_that_keeps_killing_its_worker_becomes_poison) {
    /* Inline mode: the crash takes the whole worker down every time. */
    config("worker:\n  isolation: inline\n  lease: 300ms\njobs:\n  max_deliveries: 2\n");
    char id[1][JR_ID_MAX];
    enqueue(1, "crash", "", 0, 0, id);
    /* Under AddressSanitizer, let the intended crash be a plain SIGSEGV. */
    jrt_asan_option("handle_segv=0");
    pid_t w = -1;
    jr_qstats_t st = {0};
    for (int i = 0; i < 40; i++) {
        if (w <= 0 || waitpid(w, NULL, WNOHANG) == w) w = start("worker", "worker.log");
        jrt_sleep_ms(250);
        st = stats();
        if (st.dead == 1) break;
    }
    cr_expect_eq(st.dead, 1, "never dead-lettered: pending=%lld", st.pending);
    char dead[2048];
    dead_entry(id[0], dead, sizeof dead);
    cr_expect(strstr(dead, "why=poison") && strstr(dead, "delivered 3 times"), "%s", dead);
    cr_expect_eq(runs_of(id[0]), 2, "a poison job ran %d times with max_deliveries 2", runs_of(id[0]));
    if (w > 0) jrt_stop(w, SIGTERM, 10000);
}

Test(faults, enqueue_refuses_a_payload_over_the_limit) {
    config("jobs:\n  max_payload: 10\n");
    char out[256], err[512];
    const char *args[] = {"enqueue", "-c", cfgpath, "record", "eleven bytes", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, args), 1);
    cr_expect(strstr(err, "12 bytes, over the limit of 10"), "%s", err);
    cr_expect_eq(stats().ready, 0);
}

Test(faults, dead_jobs_can_be_listed_shown_retried_and_purged) {
    config("");
    pid_t w = start("worker", "worker.log");
    char id[1][JR_ID_MAX];
    enqueue(1, "fail", "payload-1", 0, 0, id);
    cr_assert_eq(wait_settled(1, 10000).dead, 1);
    char out[4096], err[1024];
    const char *list[] = {"dead", "list", "-c", cfgpath, NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, list), 0, "%s", err);
    cr_expect(strstr(out, id[0]) && strstr(out, "refused by test") && strstr(out, "fail"), "%s", out);
    const char *show[] = {"dead", "show", "-c", cfgpath, id[0], NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, show), 0, "%s", err);
    cr_expect(strstr(out, "p: payload-1") && strstr(out, "why: failed"), "%s", out);
    const char *missing[] = {"dead", "show", "-c", cfgpath, "nope", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, missing), 1);
    cr_expect(strstr(err, "no dead job \"nope\""), "%s", err);
    const char *retry[] = {"dead", "retry", "-c", cfgpath, id[0], NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, retry), 0, "%s", err);
    cr_expect(strstr(out, "re-enqueued 1"), "%s", out);
    cr_expect_eq(wait_settled(1, 10000).dead, 1);
    cr_expect_eq(runs_of(id[0]), 2, "retried job ran %d times in all", runs_of(id[0]));
    char *rec = jrt_slurp(record);
    char want[256];
    snprintf(want, sizeof want, "%s 1 ", id[0]);
    cr_expect(strstr(strchr(rec, '\n') + 1, want), "the retry did not start again at attempt 1:\n%s", rec);
    free(rec);
    const char *purge[] = {"dead", "purge", "-c", cfgpath, "--all", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, purge), 0, "%s", err);
    cr_expect(strstr(out, "purged 1"), "%s", out);
    cr_expect_eq(stats().dead, 0);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

Test(faults, schedulers_killed_mid_promotion_lose_and_double_nothing) {
    config("scheduler:\n  batch: 50\n");
    enum { N = 20000 };
    static jr_enqueue_t jobs[N];
    for (int i = 0; i < N; i++) jobs[i] = jrt_job("default", "record", NULL), jobs[i].delay_ms = 400 + i % 7;
    jrt_enqueue_jobs(&R, jobs, N, NULL);
    pid_t s[2] = {start("scheduler", "s0.log"), start("scheduler", "s1.log")};
    int kills = 0;
    jr_qstats_t st = stats();
    for (int round = 0; round < 400 && st.delayed > 0; round++) {
        jrt_sleep_ms(5 + round % 7);
        int k = round % 2;
        kill(s[k], SIGKILL);
        waitpid(s[k], NULL, 0);
        kills++;
        s[k] = start("scheduler", k ? "s1.log" : "s0.log");
        st = stats();
    }
    for (int i = 0; i < 200 && (st = stats()).delayed > 0; i++) jrt_sleep_ms(50);
    cr_expect_eq(st.delayed, 0, "%lld never promoted", st.delayed);
    cr_expect_eq(st.ready, N, "%lld stream entries for %d jobs (%d scheduler kills)", st.ready, N, kills);
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_int(c, "ZCARD jr:{default}:delayed"), 0, "envelopes left behind");
    redisFree(c);
    fprintf(stderr, "scheduler kill test: jobs=%d kills=%d promoted=%lld\n", N, kills, st.ready);
    for (int i = 0; i < 2; i++) jrt_stop(s[i], SIGTERM, 5000);
}

Test(faults, a_redis_that_may_evict_keys_gets_a_warning) {
    const char *lru[] = {"--maxmemory-policy", "allkeys-lru", NULL};
    jrt_redis_restart(&R, lru);
    config("");
    pid_t w = start("worker", "worker.log");
    int found = 0;
    for (int i = 0; i < 100 && !found; i++) {
        jrt_sleep_ms(20);
        found = jrt_count(jrt_path(&R, "worker.log"), "set maxmemory-policy noeviction");
    }
    cr_expect(found, "no warning in the worker log");
    cr_expect(jrt_count(jrt_path(&R, "worker.log"), "maxmemory_policy=allkeys-lru"), "the policy is not named");
    jrt_stop(w, SIGTERM, 5000);
}

Test(faults, a_second_signal_stops_at_once_and_leaves_the_job_pending) {
    config("worker:\n  grace: 20s\n");
    pid_t w = start("worker", "worker.log");
    char id[1][JR_ID_MAX];
    enqueue(1, "nap", "10000", 0, 0, id);
    cr_assert_eq(jrt_wait_lines(record, 1, 5000), 1);
    kill(w, SIGTERM);
    jrt_sleep_ms(300);
    cr_expect_eq(waitpid(w, NULL, WNOHANG), 0, "the first signal did not wait for the running job");
    int64_t t0 = jrt_wall_us();
    int st = jrt_stop(w, SIGTERM, 5000);
    cr_expect_lt(jrt_wall_us() - t0, 2000000, "the second signal did not stop it at once");
    cr_expect_eq(st, 0);
    jr_qstats_t s = stats();
    cr_expect_eq(s.pending, 1, "the unfinished job must stay pending (pending=%lld ready=%lld)", s.pending, s.ready);
}

/* A queue whose ready key holds another type cannot be set up: the worker
 * says so once and leaves that queue out, its other queues run (it used to
 * back off whole, reconnecting for every queue); once fixed it is read. */
Test(faults, a_queue_whose_key_has_the_wrong_type_is_left_out_and_the_others_run) {
    config("worker:\n  queues: [wa, default]\n");
    redisContext *c = jrt_connect(&R);
    freeReplyObject(redisCommand(c, "SET jr:{wa}:ready not-a-stream"));
    redisFree(c);
    pid_t w = start("worker", "worker.log");
    enqueue(3, "record", "x", 0, 0, NULL);
    cr_expect(jrt_wait_lines(record, 3, 10000) >= 3, "the other queue's jobs did not run:\n%s",
              jrt_slurp(jrt_path(&R, "worker.log")));
    jrt_sleep_ms(1500);
    int n = jrt_count(jrt_path(&R, "worker.log"), "WRONGTYPE");
    cr_expect(n == 1, "%d lines name the refusal:\n%s", n, jrt_slurp(jrt_path(&R, "worker.log")));
    cr_expect_eq(jrt_count(jrt_path(&R, "worker.log"), "reconnecting"), 0, "%s", jrt_slurp(jrt_path(&R, "worker.log")));
    /* fixed: the queue is read again (looked at every 10 s) */
    c = jrt_connect(&R);
    freeReplyObject(redisCommand(c, "DEL jr:{wa}:ready"));
    redisFree(c);
    jrt_enqueue(&R, jrt_job("wa", "record", NULL), 1, NULL);
    cr_expect(jrt_wait_lines(record, 4, 20000) >= 4, "the fixed queue is not read again:\n%s",
              jrt_slurp(jrt_path(&R, "worker.log")));
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
}

Test(faults, a_jobs_own_backoff_overrides_the_configured_one) {
    /* With the configured 1 h backoff the retry would almost surely wait
     * minutes; the job's own 20 ms must win. */
    config("jobs:\n  backoff: 1h\n  backoff_max: 1h\n");
    pid_t w = start("worker", "worker.log"), s = start("scheduler", "sched.log");
    char out[256], err[512];
    const char *args[] = {"enqueue", "-c", cfgpath, "--backoff", "20ms", "--max-attempts", "2", "crash", "", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, args), 0, "%s", err);
    out[strcspn(out, "\n")] = '\0';
    jr_qstats_t st = wait_settled(1, 10000);
    cr_expect_eq(st.dead, 1, "not dead after 10 s: delayed=%lld", st.delayed);
    cr_expect_eq(runs_of(out), 2, "job %s ran %d times", out, runs_of(out));
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
}
