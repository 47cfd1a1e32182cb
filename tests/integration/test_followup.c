/* Follow-up jobs (issue 8 §5): a handler's api->enqueue, written with the
 * job's acknowledgement, against a real redis-server and real worker
 * processes, in both isolation modes: exactly once on success, none on
 * failure (once on the successful retry), none when the worker is
 * SIGKILLed before the acknowledgement (once after the job runs again),
 * once when it is SIGKILLed right after; delays, times, ids, other queues,
 * payloads larger than a socket buffer; bad follow-ups refused at the call
 * (the job fails, dead, with the reason); a refusal by Redis fails the job
 * without wedging the worker. Then jr_ack_follow's own contract: every
 * refusal changes nothing, an entry already acknowledged writes nothing.
 *
 * The follow-ups go to queue "next", which no worker here serves, so what
 * exists is counted in Redis itself. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"
#include "redis.h"
#include "redis_produce.h"
#include "redis_admin.h"

static jrt_redis_t R;
static char record[192], blockf[192], cfgpath[192], wlog[192];

static void setup(void) {
    jrt_start_recorded(&R, record, sizeof record);
    snprintf(blockf, sizeof blockf, "%s/block", R.dir);
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    setenv("JRT_BLOCK", blockf, 1);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(follow, .init = setup, .fini = teardown, .timeout = 240);

static void config(const char *isolation, const char *extra) {
    char text[2048];
    snprintf(text, sizeof text, "redis:\n  url: %s\nworker:\n  isolation: %s\n  lease: 1s\n%s", R.url, isolation,
             extra ? extra : "");
    jrt_write(&R, "jobrunner.yaml", text, cfgpath, sizeof cfgpath);
}

static pid_t start_worker(void) {
    const char *w[] = {"worker", "-c", cfgpath, "-q", "default", "--plugin", JRT_FOLLOW_PLUGIN, NULL};
    return jrt_spawn(wlog, w);
}

/* Enqueue job `id` with handler `follow` and settings `spec` on default. */
static void enqueue(const char *id, const char *spec) {
    jr_redis_t *r = jrt_jr_connect(&R);
    jr_enqueue_t j = {.queue = "default", .id = id,
                      .env = {.handler = "follow", .handler_len = 6, .payload = spec,
                              .payload_len = strlen(spec), .attempt = 1, .max_attempts = 3,
                              .timeout_ms = 60000, .backoff_ms = 1}};
    cr_assert_eq(jr_redis_enqueue(r, &j, 1, NULL, NULL), 0, "%s", jr_redis_errstr(r));
    jr_redis_free(r);
}

/* Wait (up to 30 s) until queue default has nothing ready, pending or
 * delayed: every job there has reached its end. */
static void wait_settled(void) {
    for (int i = 0; i < 3000; i++) {
        jr_qstats_t s = jrt_stats(&R, "default");
        if (s.ready == 0 && s.pending == 0 && s.delayed == 0) return;
        jrt_sleep_ms(10);
    }
    cr_assert_fail("queue default did not settle in 30 s; worker log:\n%s", jrt_slurp(wlog));
}

/* Entries of jr:{q}:ready whose payload starts with `prefix`. */
static int entries(const char *q, const char *prefix) {
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommand(c, "XRANGE jr:{%s}:ready - +", q);
    int n = 0;
    for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        redisReply *f = rep->element[i]->element[1];
        for (size_t k = 0; k + 1 < f->elements; k += 2)
            if (!strcmp(f->element[k]->str, "p") && !strncmp(f->element[k + 1]->str, prefix, strlen(prefix))) n++;
    }
    if (rep) freeReplyObject(rep);
    redisFree(c);
    return n;
}

static long long zcard(const char *key) {
    redisContext *c = jrt_connect(&R);
    long long n = jrt_int(c, "ZCARD %s", key);
    redisFree(c);
    return n;
}

/* Lines of the record file equal to `line` (without its newline). */
static int lines(const char *line) {
    char *s = jrt_slurp(record);
    int n = 0;
    size_t len = strlen(line);
    for (char *p = s; *p;) {
        char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        n += l == len && !strncmp(p, line, len);
        p = nl ? nl + 1 : p + l;
    }
    free(s);
    return n;
}

static void wait_line(const char *line, int timeout_ms) {
    for (int t = 0; t < timeout_ms; t += 10) {
        if (lines(line) > 0) return;
        jrt_sleep_ms(10);
    }
    cr_assert_fail("no line \"%s\" in %d ms; worker log:\n%s", line, timeout_ms, jrt_slurp(wlog));
}

/* ---- on success, on failure, on retry ---- */

static void success_failure_retry(const char *isolation) {
    config(isolation, NULL);
    enqueue("ok1", "n=3");
    enqueue("fail1", "n=2,result=fail");
    enqueue("retry1", "n=2,result=retry1");
    enqueue("plain1", "n=0");
    pid_t w = start_worker();
    wait_settled();
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(entries("next", "ok1#"), 3, "a successful job's 3 follow-ups, each once");
    cr_expect_eq(entries("next", "ok1#1"), 1);
    cr_expect_eq(entries("next", "ok1#3"), 1);
    cr_expect_eq(entries("next", "fail1#"), 0, "a failed job's follow-ups were written");
    cr_expect_eq(lines("retry1 1 enqueued 0"), 1);
    cr_expect_eq(lines("retry1 2 enqueued 0"), 1, "the retry did not run");
    cr_expect_eq(entries("next", "retry1#"), 2, "follow-ups of the failed attempt and the retry: once, not twice");
    jr_qstats_t d = jrt_stats(&R, "default");
    cr_expect_eq(d.dead, 1, "only fail1 is dead");
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_int(c, "SISMEMBER jr:{queues} next"), 1, "the target queue is registered");
    redisFree(c);
}

Test(follow, once_on_success_none_on_failure_once_on_retry_process) { success_failure_retry("process"); }
Test(follow, once_on_success_none_on_failure_once_on_retry_inline) { success_failure_retry("inline"); }

/* One runner, one batch: a job with follow-ups, then one whose handler
 * crashes the runner. The first job's follow-ups, sent before the crash,
 * are written once; the crashed one's never. */
Test(follow, a_runner_crash_after_a_job_with_follow_ups_keeps_them_once) {
    config("process", "  concurrency: 1\n");
    enqueue("c0", "n=2");
    enqueue("c1", "n=2,result=crash");
    enqueue("c2", "n=1");
    char slog[192];
    snprintf(slog, sizeof slog, "%s/scheduler.log", R.dir);
    const char *sa[] = {"scheduler", "-c", cfgpath, "-q", "default", NULL};
    pid_t s = jrt_spawn(slog, sa); /* promotes the crashed job's retries */
    pid_t w = start_worker();
    wait_settled();
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_eq(jrt_stop(s, SIGTERM, 10000), 0);
    cr_expect_eq(entries("next", "c0#"), 2, "follow-ups of the job before the crash");
    cr_expect_eq(entries("next", "c1#"), 0, "follow-ups of a crashed attempt were written");
    cr_expect_eq(entries("next", "c2#"), 1, "follow-ups of the job after the crash");
    cr_expect_eq(lines("c0 1"), 1, "the job before the crash ran again");
    cr_expect_eq(jrt_stats(&R, "default").dead, 1, "the crashing job is not dead after its 3 attempts");
}

/* ---- SIGKILL before and right after the acknowledgement ---- */

static void kill_before_ack(const char *isolation) {
    config(isolation, NULL);
    jrt_write(&R, "block", "", blockf, sizeof blockf);
    enqueue("k1", "n=2,block=1");
    pid_t w1 = start_worker();
    wait_line("k1 1 enqueued 0", 20000);
    jrt_sleep_ms(300); /* would an early write show? */
    cr_expect_eq(entries("next", "k1#"), 0, "follow-ups written before the acknowledgement");
    cr_assert_eq(jrt_stop(w1, SIGKILL, 5000), 128 + SIGKILL);
    unlink(blockf);
    cr_expect_eq(entries("next", "k1#"), 0, "follow-ups of a worker killed before its ack");
    pid_t w2 = start_worker(); /* takes the job over after the 1 s lease */
    wait_settled();
    cr_assert_eq(jrt_stop(w2, SIGTERM, 10000), 0);
    cr_expect_eq(lines("k1 1 enqueued 0"), 2, "the job did not run again");
    cr_expect_eq(entries("next", "k1#"), 2, "follow-ups after the job ran again: exactly once each");
    cr_expect_eq(entries("next", "k1#1"), 1);
}

Test(follow, sigkill_before_ack_writes_none_then_once_process) { kill_before_ack("process"); }
Test(follow, sigkill_before_ack_writes_none_then_once_inline) { kill_before_ack("inline"); }

static void kill_after_ack(const char *isolation) {
    config(isolation, NULL);
    enqueue("a1", "n=2");
    pid_t w1 = start_worker();
    for (int i = 0; i < 20000 && entries("next", "a1#") < 2; i++) jrt_sleep_ms(1);
    cr_assert_eq(entries("next", "a1#"), 2, "no follow-ups in 20 s");
    kill(w1, SIGKILL); /* the ack just committed: the follow-ups came with it */
    cr_assert_eq(jrt_stop(w1, SIGKILL, 5000), 128 + SIGKILL);
    pid_t w2 = start_worker();
    jrt_sleep_ms(2500); /* past the lease: anything left pending is taken over */
    wait_settled();
    cr_assert_eq(jrt_stop(w2, SIGTERM, 10000), 0);
    cr_expect_eq(lines("a1 1"), 1, "the acknowledged job ran again");
    cr_expect_eq(entries("next", "a1#"), 2, "follow-ups: exactly once each");
}

Test(follow, sigkill_right_after_ack_keeps_them_once_process) { kill_after_ack("process"); }
Test(follow, sigkill_right_after_ack_keeps_them_once_inline) { kill_after_ack("inline"); }

/* Two workers both run the job to success: the first (inline, stopped by
 * SIGSTOP while in the handler, so it cannot heartbeat) loses its lease,
 * the second takes the job over; both then acknowledge it with the same
 * follow-ups. Only the acknowledgement that lands first writes them. */
Test(follow, two_successful_runs_after_a_lost_lease_write_them_once) {
    config("inline", NULL);
    jrt_write(&R, "block", "", blockf, sizeof blockf);
    enqueue("l1", "n=2,block=1");
    pid_t w1 = start_worker();
    wait_line("l1 1 enqueued 0", 20000);
    kill(w1, SIGSTOP);
    pid_t w2 = start_worker(); /* takes it over once the 1 s lease is gone */
    for (int i = 0; i < 2000 && lines("l1 1 enqueued 0") < 2; i++) jrt_sleep_ms(10);
    kill(w1, SIGCONT);
    cr_assert_eq(lines("l1 1 enqueued 0"), 2, "the second worker did not take the job over");
    unlink(blockf); /* both runs succeed now */
    wait_settled();
    jrt_sleep_ms(500); /* the later acknowledgement too */
    cr_assert_eq(jrt_stop(w1, SIGTERM, 10000), 0);
    cr_assert_eq(jrt_stop(w2, SIGTERM, 10000), 0);
    cr_expect_eq(entries("next", "l1#"), 2, "two successful runs: each follow-up once, not twice");
    cr_expect_eq(entries("next", "l1#2"), 1);
}

/* ---- delay, time, id, other queue, own queue, big payloads ---- */

static void kinds(const char *isolation) {
    config(isolation, NULL);
    char at[64];
    snprintf(at, sizeof at, "at=%lld", (long long)(jrt_wall_us() / 1000 + 3600000));
    enqueue("del1", "delay=60000");
    enqueue("tim1", at);
    enqueue("i1", "id=fixed-one");
    enqueue("i2", "id=fixed-one"); /* the same follow-up id: enqueued once */
    enqueue("o1", "q=,h=record");  /* its own queue: the worker runs it */
    enqueue("o2", "q=other,n=2");
    enqueue("big1", "size=600000,n=4"); /* 2.4 MB: more than a socket buffer */
    int64_t t0 = jrt_wall_us() / 1000;
    pid_t w = start_worker();
    wait_settled();
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_delayed_count(c, "next"), 2, "the delayed and the timed follow-up");
    redisReply *z = jrt_delayed_all(c, "next"); /* both wait in the time wheel, in due order */
    cr_assert(z && z->elements == 6);
    double first = atof(z->element[1]->str), second = atof(z->element[4]->str);
    cr_expect_geq(first, (double)t0 + 60000 - 1000, "delay 60 s: due at %.0f, enqueued after %lld", first,
                  (long long)t0);
    cr_expect_geq(second, (double)t0 + 3600000 - 5000, "at: due at %.0f", second);
    freeReplyObject(z);
    redisReply *x = redisCommand(c, "XRANGE jr:{next}:ready - +");
    int fixed = 0, big = 0;
    for (size_t i = 0; i < x->elements; i++) {
        redisReply *f = x->element[i]->element[1];
        for (size_t k = 0; k + 1 < f->elements; k += 2) {
            fixed += !strcmp(f->element[k]->str, "id") && !strcmp(f->element[k + 1]->str, "fixed-one");
            big += !strcmp(f->element[k]->str, "p") && f->element[k + 1]->len == 600000;
        }
    }
    freeReplyObject(x);
    cr_expect_eq(fixed, 1, "a follow-up id enqueued by two jobs exists %d times, not once", fixed);
    cr_expect_eq(big, 4, "follow-ups of 600000 bytes: %d of 4", big);
    cr_expect_eq(jrt_int(c, "SISMEMBER jr:{queues} other"), 1);
    redisFree(c);
    cr_expect_eq(entries("other", "o2#"), 2);
    char *s = jrt_slurp(record);
    cr_expect(strstr(s, " record o1#1\n"), "the follow-up on the job's own queue did not run:\n%s", s);
    free(s);
}

Test(follow, delay_time_id_queues_and_big_payloads_process) { kinds("process"); }
Test(follow, delay_time_id_queues_and_big_payloads_inline) { kinds("inline"); }

/* ---- refusals ---- */

static void refusals(const char *isolation) {
    config(isolation, "jobs:\n  max_payload: 1000\n");
    enqueue("b1", "q=bad queue!");
    enqueue("b2", "h=");
    enqueue("b3", "size=1001");
    enqueue("b4", "id=d12"); /* a reserved id form */
    /* The form of a delayed job's generated id: refused by api->enqueue
     * (-1), not accepted there and refused later by Redis (issue 19). */
    enqueue("b5", "id=d1764581403250-1");
    pid_t w = start_worker();
    wait_settled();
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    struct {
        const char *id, *says;
    } t[] = {{"b1", "follow-up refused: queue name \"bad queue!\" is not valid"},
             {"b2", "follow-up refused: no handler name"},
             {"b3", "payload of 1001 bytes is over the limit of 1000 (jobs.max_payload)"},
             {"b4", "has a reserved form"},
             {"b5", "follow-up refused: job id \"d1764581403250-1\" has a reserved form"}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char dead[2048];
        jrt_dead_entry(&R, "default", t[i].id, dead, sizeof dead);
        cr_expect(strstr(dead, t[i].says), "%s: dead entry \"%s\" does not say \"%s\"", t[i].id, dead, t[i].says);
        char line[64];
        snprintf(line, sizeof line, "%s 1 enqueued -1", t[i].id);
        cr_expect_eq(lines(line), 1, "%s: enqueue did not return -1 once (or the job ran again)", t[i].id);
    }
    cr_expect_eq(entries("next", ""), 0, "a refused attempt wrote follow-ups");
    cr_expect_geq(jrt_count(wlog, "follow-up refused"), 5, "refusals not logged:\n%s", jrt_slurp(wlog));
}

Test(follow, bad_follow_ups_are_refused_and_fail_the_job_process) { refusals("process"); }
Test(follow, bad_follow_ups_are_refused_and_fail_the_job_inline) { refusals("inline"); }

Test(follow, a_refusal_by_redis_fails_the_job_and_the_worker_goes_on) {
    config("process", NULL);
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommand(c, "SET jr:{next}:seq garbage");
    freeReplyObject(rep);
    redisFree(c);
    enqueue("r1", "delay=5000"); /* needs a generated delayed id: jr:{next}:seq */
    enqueue("r2", "q=,h=record");
    pid_t w = start_worker();
    wait_settled();
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    char dead[2048];
    jrt_dead_entry(&R, "default", "r1", dead, sizeof dead);
    cr_expect(strstr(dead, "Redis refused its follow-ups") && strstr(dead, "not a job counter"),
              "dead entry: %s", dead);
    char *s = jrt_slurp(record);
    cr_expect(strstr(s, " record r2#1\n"), "the worker stopped after the refusal:\n%s", s);
    free(s);
    cr_expect_eq(zcard("jr:{next}:delayed"), 0);
}

/* Garbage in the queue registry (issue 18, class 1) costs the registration
 * of the follow-ups' queues only: the follow-ups are written, the jobs end
 * ok, and the worker says once which key is wrong, not that it let results
 * go. */
Test(follow, a_registry_holding_garbage_costs_the_registration_not_the_follow_ups) {
    config("process", NULL);
    enqueue("g1", "n=2");
    enqueue("g2", "n=1,q=other");
    redisContext *c = jrt_connect(&R);
    freeReplyObject(redisCommand(c, "DEL jr:{queues}"));
    freeReplyObject(redisCommand(c, "SET jr:{queues} garbage"));
    pid_t w = start_worker();
    wait_settled();
    enqueue("g3", "n=1,q=third"); /* another target, on the same connection */
    wait_settled();
    /* Once the registry is fixed, the next follow-ups to a queue whose
     * registration was skipped register it (the same worker). */
    freeReplyObject(redisCommand(c, "DEL jr:{queues}"));
    enqueue("g4", "n=1,q=other");
    wait_settled();
    cr_expect_eq(jrt_int(c, "SISMEMBER jr:{queues} other"), 1, "the target queue is registered once fixed");
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(entries("next", "g1#"), 2);
    cr_expect_eq(entries("other", "g2#"), 1);
    cr_expect_eq(entries("third", "g3#"), 1);
    cr_expect_eq(entries("other", "g4#"), 1);
    cr_expect_eq(jrt_stats(&R, "default").dead, 0);
    cr_expect_eq(jrt_count(wlog, "letting them go"), 0, "%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_count(wlog, "key=jr:{queues} "), 1, "reported once:\n%s", jrt_slurp(wlog));
    redisFree(c);
}

/* ---- jr_ack_follow's contract (raw FCALLs) ---- */

static redisContext *C;

static void csetup(void) {
    setup();
    C = jrt_connect(&R);
    jr_redis_t *j = jrt_jr_connect(&R); /* loads the library */
    jr_redis_free(j);
}
static void cteardown(void) {
    if (C) redisFree(C);
    C = NULL;
    teardown();
}

TestSuite(ack_follow, .init = csetup, .fini = cteardown, .timeout = 60);

/* A command of NUL-terminated words, NULL-terminated, on C. */
#define cmd(...) jrt_cmd(C, __VA_ARGS__)

/* Every jr:* key with its DUMP, sorted: equal snapshots = nothing changed. */
static char *snapshot(size_t *len) {
    redisReply *keys = cmd("KEYS", "jr:*", NULL);
    size_t n = keys->elements, cap = 1, used = 0;
    char *out = calloc(1, 1);
    for (size_t i = 0; i < n; i++) /* sort the names: KEYS has no order */
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(keys->element[j]->str, keys->element[i]->str) < 0) {
                redisReply *t = keys->element[i];
                keys->element[i] = keys->element[j], keys->element[j] = t;
            }
    for (size_t i = 0; i < n; i++) {
        redisReply *d = cmd("DUMP", keys->element[i]->str, NULL);
        size_t kl = strlen(keys->element[i]->str) + 1, dl = d->type == REDIS_REPLY_STRING ? d->len : 0;
        if (used + kl + dl + 1 > cap) out = realloc(out, cap = 2 * (used + kl + dl + 1));
        memcpy(out + used, keys->element[i]->str, kl), used += kl;
        if (dl) memcpy(out + used, d->str, dl), used += dl;
        out[used++] = '\n';
        freeReplyObject(d);
    }
    freeReplyObject(keys);
    *len = used;
    return out;
}

/* Enqueue one job on q and fetch it as consumer c1: its entry id into e. */
static void pending_job(char *e, size_t len) {
    freeReplyObject(cmd("FCALL", "jr_enqueue", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "jr:{q}:seq",
                        "", "", "0", "h", "work", "p", "x", NULL));
    redisReply *r = cmd("XREADGROUP", "GROUP", "jr", "c1", "COUNT", "1", "STREAMS", "jr:{q}:ready", ">", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    snprintf(e, len, "%s", r->element[0]->element[1]->element[0]->element[0]->str);
    freeReplyObject(r);
}

#define TK(t) "jr:{" t "}:ready", "jr:{" t "}:delayed", "jr:{" t "}:wake", "jr:{" t "}:seq"

typedef struct {
    const char *what, *expect;
    const char *argv[40];
} case_t;

Test(ack_follow, every_refusal_changes_nothing) {
    char e[64];
    pending_job(e, sizeof e);
    freeReplyObject(cmd("SET", "jr:{g}:delayed", "str", NULL));
    freeReplyObject(cmd("SET", "jr:{s}:seq", "abc", NULL));
    freeReplyObject(cmd("RPUSH", "jr:{l}:ready", "x", NULL));
    const char *AF[] = {"FCALL", "jr_ack_follow"};
    case_t t[] = {
        {"key 1 not a ready key", "key 1 must be jr:{Q}:ready",
         {AF[0], AF[1], "5", "jr:{q}:delayed", TK("n"), e, "1", "0", "1", "", "", "2", "h", "x", "p", "", NULL}},
        {"not an entry id", "arguments: ENTRY NQ",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), "nope", "1", "0", "1", "", "", "2", "h", "x", "p", "", NULL}},
        {"NQ 0", "arguments: ENTRY NQ",
         {AF[0], AF[1], "1", "jr:{q}:ready", e, "0", "0", NULL}},
        {"fewer keys than NQ needs", "arguments: ENTRY NQ",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "2", "0", "1", "", "", "2", "h", "x", "p", "", NULL}},
        {"target keys out of order", "key 2 must be",
         {AF[0], AF[1], "5", "jr:{q}:ready", "jr:{n}:ready", "jr:{n}:wake", "jr:{n}:delayed", "jr:{n}:seq", e, "1",
          "0", "1", "", "", "2", "h", "x", "p", "", NULL}},
        {"target queue twice", "is given twice",
         {AF[0], AF[1], "9", "jr:{q}:ready", TK("n"), TK("n"), e, "2", "0", "1", "", "", "2", "h", "x", "p", "",
          NULL}},
        {"bad UNIQ_MS", "UNIQ_MS must be",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "x", "1", "", "", "2", "h", "x", "p", "", NULL}},
        {"QI out of range", "expected QI (1..1)",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "0", "2", "", "", "2", "h", "x", "p", "", NULL}},
        {"NPAIRS past the end", "expected QI",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "0", "1", "", "", "3", "h", "x", "p", "", NULL}},
        {"empty handler", "fields must start with h <handler> (not empty)",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "0", "1", "", "", "2", "h", "", "p", "", NULL}},
        {"unknown field", "unknown field \"zz\"",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "0", "1", "", "", "2", "h", "x", "zz", "", NULL}},
        {"bad due time", "bad due time",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "0", "1", "+1e3", "", "2", "h", "x", "p", "", NULL}},
        {"due past 10 years", "(10 years) after now",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "0", "1", "+315360000001", "", "2", "h", "x", "p", "",
          NULL}},
        {"reserved id", "reserved form",
         {AF[0], AF[1], "6", "jr:{q}:ready", TK("n"), "jr:{n}:uniq:d5", e, "1", "0", "1", "", "d5", "2", "h", "x",
          "p", "", NULL}},
        {"an id without its uniq key", "key 6 must be \"jr:{n}:uniq:a1\"",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "0", "1", "", "a1", "2", "h", "x", "p", "", NULL}},
        {"a second follow-up bad: nothing of the first written", "follow-up 2: fields must start",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "0", "1", "", "", "2", "h", "x", "p", "", "1", "", "",
          "1", "p", "y", NULL}},
        {"no follow-up", "no follow-up given",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("n"), e, "1", "0", NULL}},
        {"a key too many", "takes 1 + 4 x NQ keys",
         {AF[0], AF[1], "6", "jr:{q}:ready", TK("n"), "jr:{n}:extra", e, "1", "0", "1", "", "", "2", "h", "x", "p",
          "", NULL}},
        {"target delayed set of another type", "holds a string, not a zset",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("g"), e, "1", "0", "1", "+5000", "", "2", "h", "x", "p", "", NULL}},
        {"target counter garbage", "not a job counter",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("s"), e, "1", "0", "1", "+5000", "", "2", "h", "x", "p", "", NULL}},
        {"target stream of another type", "holds a list, not a stream",
         {AF[0], AF[1], "5", "jr:{q}:ready", TK("l"), e, "1", "0", "1", "", "", "2", "h", "x", "p", "", NULL}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int n = 0;
        while (t[i].argv[n]) n++;
        size_t l0, l1;
        char *before = snapshot(&l0);
        redisReply *rep = redisCommandArgv(C, n, t[i].argv, NULL);
        char *after = snapshot(&l1);
        cr_assert(rep);
        cr_expect_eq(rep->type, REDIS_REPLY_ERROR, "%s: not refused", t[i].what);
        if (rep->type == REDIS_REPLY_ERROR) {
            cr_expect(strstr(rep->str, t[i].expect), "%s: \"%s\" does not say \"%s\"", t[i].what, rep->str,
                      t[i].expect);
            cr_expect(!strncmp(rep->str, "ERR jobrunner: jr_ack_follow", 28), "%s: \"%s\"", t[i].what, rep->str);
        }
        cr_expect(l0 == l1 && !memcmp(before, after, l0), "%s: a refused call changed the keys", t[i].what);
        freeReplyObject(rep);
        free(before), free(after);
    }
    redisReply *p = cmd("XPENDING", "jr:{q}:ready", "jr", NULL);
    cr_expect_eq(p->element[0]->integer, 1, "the job is still pending after every refusal");
    freeReplyObject(p);
}

Test(ack_follow, writes_once_with_the_ack_and_nothing_for_an_entry_not_pending) {
    char e[64];
    pending_job(e, sizeof e);
    const char *argv[] = {"FCALL", "jr_ack_follow", "10", "jr:{q}:ready", TK("n"), TK("q"), "jr:{q}:uniq:f1",
                          e, "2", "86400000",
                          "1", "", "", "2", "h", "x", "p", "now",
                          "1", "+60000", "", "2", "h", "x", "p", "later",
                          "2", "", "f1", "2", "h", "x", "p", "own", NULL};
    int n = 0;
    while (argv[n]) n++;
    redisReply *rep = redisCommandArgv(C, n, argv, NULL);
    cr_assert_eq(rep->type, REDIS_REPLY_INTEGER, "%s", rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    cr_expect_eq(rep->integer, 1);
    freeReplyObject(rep);
    cr_expect_eq(jrt_int(C, "XLEN jr:{n}:ready"), 1);
    cr_expect_eq(jrt_delayed_count(C, "n"), 1);
    cr_expect_eq(jrt_int(C, "XLEN jr:{q}:ready"), 1, "the job's entry deleted, the own-queue follow-up added");
    redisReply *p = cmd("XPENDING", "jr:{q}:ready", "jr", NULL);
    cr_expect_eq(p->element[0]->integer, 0, "the job is still pending");
    freeReplyObject(p);
    /* Again (a worker that also ran it, or a resend): acknowledged already. */
    size_t l0, l1;
    char *before = snapshot(&l0);
    rep = redisCommandArgv(C, n, argv, NULL);
    char *after = snapshot(&l1);
    cr_expect_eq(rep->type, REDIS_REPLY_INTEGER);
    cr_expect_eq(rep->integer, 0);
    cr_expect(l0 == l1 && !memcmp(before, after, l0), "a second acknowledgement wrote something");
    freeReplyObject(rep);
    free(before), free(after);
}
