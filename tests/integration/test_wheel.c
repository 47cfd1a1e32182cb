/* The time wheel for delayed jobs (issue 10), against a real Redis: jobs due
 * 2 s or more ahead wait in 1 s buckets (jr:{Q}:wheel:<start>), cascade into
 * the sorted set or go straight to the stream. Checked: never early across
 * bucket boundaries, through a cascade and through the direct path; a
 * property test of random due times, cancels, run-nows and retries over many
 * jobs (each runs once per attempt, never early, nothing left behind); one of
 * three schedulers SIGKILLed mid-cascade (no job lost or promoted twice);
 * delayed jobs written in the old layout (the sorted set only) still run and
 * are found by id next to jobs in the wheel. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"
#include "redis.h"
#include "redis_sched.h"

static jrt_redis_t R;
static redisContext *C;
static char cfgpath[192];

static void setup(void) {
    jrt_redis_start(&R, NULL);
    jr_redis_free(jrt_jr_connect(&R)); /* loads the library */
    C = jrt_connect(&R);
}
static void teardown(void) {
    if (C) redisFree(C), C = NULL;
    jrt_redis_stop(&R);
}

TestSuite(wheel, .init = setup, .fini = teardown, .timeout = 300);

#define QK(q) "jr:{" q "}:ready", "jr:{" q "}:delayed", "jr:{" q "}:wake", "jr:{" q "}:seq"

static redisReply *cmdv(int argc, const char **argv) {
    redisReply *r = redisCommandArgv(C, argc, argv, NULL);
    cr_assert(r, "redis: %s", C->errstr);
    return r;
}

/* Redis's clock, ms. */
static long long redis_ms(void) { return jrt_redis_ms(C); }

/* Enqueue one job of queue q due at `at` (Unix ms) with id `id` ("" =
 * generated); the job id into out. */
static void enqueue_at(const char *q, long long at, const char *id, char *out, size_t outlen) {
    char when[32], k[4][96], uniq[256];
    snprintf(when, sizeof when, "@%lld", at);
    snprintf(k[0], sizeof k[0], "jr:{%s}:ready", q), snprintf(k[1], sizeof k[1], "jr:{%s}:delayed", q);
    snprintf(k[2], sizeof k[2], "jr:{%s}:wake", q), snprintf(k[3], sizeof k[3], "jr:{%s}:seq", q);
    snprintf(uniq, sizeof uniq, "jr:{%s}:uniq:%s", q, id);
    const char *v[] = {"FCALL", "jr_enqueue", id[0] ? "5" : "4", k[0], k[1], k[2], k[3], uniq, when, id, "86400000",
                       "h", "echo", "p", "payload"};
    const char *w[] = {"FCALL", "jr_enqueue", "4", k[0], k[1], k[2], k[3], when, id, "86400000", "h", "echo", "p",
                       "payload"};
    redisReply *r = id[0] ? cmdv(15, v) : cmdv(14, w);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "jr_enqueue: %s",
              r->type == REDIS_REPLY_ERROR ? r->str : "?");
    snprintf(out, outlen, "%s", r->element[0]->str);
    freeReplyObject(r);
}

/* One jr_promote of queue q; returns moved. */
static long long promote(const char *q, int limit) {
    char k[4][96], lim[16];
    snprintf(k[0], sizeof k[0], "jr:{%s}:ready", q), snprintf(k[1], sizeof k[1], "jr:{%s}:delayed", q);
    snprintf(k[2], sizeof k[2], "jr:{%s}:wake", q), snprintf(k[3], sizeof k[3], "jr:{%s}:dead", q);
    snprintf(lim, sizeof lim, "%d", limit);
    const char *v[] = {"FCALL", "jr_promote", "4", k[0], k[1], k[2], k[3], lim};
    redisReply *r = cmdv(8, v);
    cr_assert(r->type == REDIS_REPLY_ARRAY, "jr_promote: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
    long long moved = r->element[0]->integer;
    freeReplyObject(r);
    return moved;
}

/* jr_locate: state into state, due (score string) into due. */
static void locate(const char *q, const char *id, char *state, size_t slen, char *due, size_t dlen) {
    char k[4][96];
    snprintf(k[0], sizeof k[0], "jr:{%s}:ready", q), snprintf(k[1], sizeof k[1], "jr:{%s}:delayed", q);
    snprintf(k[2], sizeof k[2], "jr:{%s}:ids", q), snprintf(k[3], sizeof k[3], "jr:{%s}:dead", q);
    const char *v[] = {"FCALL", "jr_locate", "4", k[0], k[1], k[2], k[3], id};
    redisReply *r = cmdv(8, v);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 8, "jr_locate: %s",
              r->type == REDIS_REPLY_ERROR ? r->str : "?");
    snprintf(state, slen, "%s", r->element[0]->str);
    if (due) snprintf(due, dlen, "%s", r->element[3]->str);
    freeReplyObject(r);
}

/* A job of the property test's model. */
typedef struct {
    char id[64];
    double due;   /* of the current attempt, ms (may carry a fraction) */
    int attempt;  /* attempts started */
    int state;    /* 0 waiting, 1 cancelled, 2 done */
    int explicit_id;
} mjob_t;

enum { WAITING, CANCELLED, DONE };
#define NJOBS 600
static mjob_t J[NJOBS];
static int nj;

static mjob_t *find(const char *id) {
    for (int i = 0; i < nj; i++)
        if (!strcmp(J[i].id, id)) return &J[i];
    return NULL;
}

/* Read entries from the ready stream (group jr) and check each one: a
 * known waiting job, never early. Then ack it (done) or retry it with a
 * random delay (jr_fail), by coin. Returns entries read. */
static int consume(const char *q, int retry_pct) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "jr:{%s}:ready", q);
    redisReply *r = redisCommand(C, "XREADGROUP GROUP jr t COUNT 50 STREAMS %s >", cmd);
    cr_assert(r, "redis: %s", C->errstr);
    int n = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
        redisReply *es = r->element[0]->element[1];
        for (size_t i = 0; i < es->elements; i++, n++) {
            redisReply *e = es->element[i], *f = e->element[1];
            const char *entry = e->element[0]->str, *id = entry;
            for (size_t k = 0; k + 1 < f->elements; k += 2)
                if (!strcmp(f->element[k]->str, "id")) id = f->element[k + 1]->str;
            mjob_t *j = find(id);
            cr_assert(j, "unknown job %s in the stream", id);
            cr_assert_eq(j->state, WAITING, "job %s ran while %s", id, j->state == CANCELLED ? "cancelled" : "done");
            long long ems = atoll(entry);
            cr_assert_geq((double)ems + 0.001, (double)(long long)j->due,
                          "job %s promoted early: entry %s, due %.3f (attempt %d)", id, entry, j->due, j->attempt + 1);
            j->attempt++;
            if (rand() % 100 < retry_pct && j->attempt < 3) {
                char delay[16];
                snprintf(delay, sizeof delay, "%d", (rand() % 2) ? rand() % 1500 : 2000 + rand() % 3000);
                char k[4][96];
                snprintf(k[0], sizeof k[0], "jr:{%s}:ready", q), snprintf(k[1], sizeof k[1], "jr:{%s}:delayed", q);
                snprintf(k[2], sizeof k[2], "jr:{%s}:wake", q), snprintf(k[3], sizeof k[3], "jr:{%s}:dead", q);
                const char *v[] = {"FCALL", "jr_fail", "4", k[0], k[1], k[2], k[3], entry, "t", "retry", delay,
                                   "boom", "failed", "1000"};
                redisReply *x = cmdv(14, v);
                cr_assert(x->type == REDIS_REPLY_INTEGER && x->integer == 1, "jr_fail: %s",
                          x->type == REDIS_REPLY_ERROR ? x->str : "not 1");
                freeReplyObject(x);
                char st[32], due[64];
                locate(q, id, st, sizeof st, due, sizeof due);
                if (!strcmp(st, "retrying")) {
                    j->due = atof(due);
                } else {
                    cr_assert_str_eq(st, "ready", "a retried job is %s", st);
                    j->due = 0;
                }
            } else {
                snprintf(cmd, sizeof cmd, "jr:{%s}:ids", q);
                redisReply *x = redisCommand(C, "FCALL jr_ack 2 jr:{%s}:ready jr:{%s}:ids %s %s", q, q, entry,
                                             strcmp(id, entry) ? id : "");
                cr_assert(x && x->type == REDIS_REPLY_INTEGER && x->integer == 1, "jr_ack");
                freeReplyObject(x);
                j->state = DONE;
            }
        }
    }
    freeReplyObject(r);
    return n;
}

Test(wheel, property_random_due_cancel_run_now_retry_each_runs_once_never_early) {
    const char *q = "pw";
    unsigned seed = (unsigned)(getenv("JRT_SEED") ? atol(getenv("JRT_SEED")) : jrt_wall_us());
    srand(seed);
    cr_log_info("property test: JRT_SEED=%u", seed);
    freeReplyObject(redisCommand(C, "XGROUP CREATE jr:{%s}:ready jr 0 MKSTREAM", q));
    long long t0 = redis_ms(), end = t0 + 9000;
    int in_wheel_seen = 0;
    while (redis_ms() < end || nj < NJOBS / 2) {
        int op = rand() % 10;
        if (op < 4 && nj < NJOBS) { /* enqueue: due now .. 7 s ahead, across buckets */
            mjob_t *j = &J[nj];
            long long at = redis_ms() + (rand() % 4 ? 2000 + rand() % 5000 : rand() % 2000);
            j->explicit_id = rand() % 2;
            char id[64] = "";
            if (j->explicit_id) snprintf(id, sizeof id, "x-%d", nj);
            enqueue_at(q, at, id, j->id, sizeof j->id);
            j->due = (double)at;
            nj++;
        } else if (op < 5 && nj > 0) { /* cancel a waiting job */
            mjob_t *j = &J[rand() % nj];
            if (j->state != WAITING) continue;
            char uniq[128];
            snprintf(uniq, sizeof uniq, "jr:{%s}:uniq:%s", q, j->id);
            redisReply *r = redisCommand(C, "FCALL jr_cancel 5 jr:{%s}:ready jr:{%s}:delayed jr:{%s}:ids "
                                            "jr:{%s}:cancelled %s %s", q, q, q, q, uniq, j->id);
            cr_assert(r && r->type == REDIS_REPLY_STRING, "jr_cancel");
            cr_assert_str_eq(r->str, "cancelled", "cancel of waiting job %s: %s", j->id, r->str);
            freeReplyObject(r);
            j->state = CANCELLED;
        } else if (op < 6 && nj > 0) { /* locate, and sometimes run now */
            mjob_t *j = &J[rand() % nj];
            if (j->state != WAITING) continue;
            char st[32], due[64];
            locate(q, j->id, st, sizeof st, due, sizeof due);
            cr_assert(!strcmp(st, "delayed") || !strcmp(st, "retrying") || !strcmp(st, "ready"),
                      "waiting job %s is %s", j->id, st);
            if (strcmp(st, "ready")) {
                cr_assert(due[0] && (long long)atof(due) == (long long)j->due, "job %s due %s, model %.3f", j->id,
                          due, j->due);
                redisReply *ix = redisCommand(C, "HGET jr:{%s}:ids %s", q, j->id);
                in_wheel_seen += ix->type == REDIS_REPLY_STRING && ix->str[0] == '~';
                in_wheel_seen += jrt_int(C, "ZCARD jr:{%s}:wheel", q) > 0;
                freeReplyObject(ix);
            }
            if (strcmp(st, "ready") && rand() % 4 == 0) {
                redisReply *r = redisCommand(C, "FCALL jr_run_now 3 jr:{%s}:ready jr:{%s}:delayed jr:{%s}:ids %s",
                                             q, q, q, j->id);
                cr_assert(r && r->type == REDIS_REPLY_ARRAY, "jr_run_now");
                cr_assert_str_eq(r->element[0]->str, st);
                freeReplyObject(r);
                j->due = 0;
            }
        } else if (op < 8) {
            promote(q, 1 + rand() % 40);
        } else {
            consume(q, 30);
        }
    }
    /* drain: everything not cancelled runs, each attempt once */
    long long stop = redis_ms() + 30000;
    for (;;) {
        while (promote(q, 1000) == 1000) {}
        int n = consume(q, 0);
        int waiting = 0;
        for (int i = 0; i < nj; i++) waiting += J[i].state == WAITING;
        if (!waiting) break;
        cr_assert_lt(redis_ms(), stop, "%d jobs never ran", waiting);
        if (!n) usleep(20000);
    }
    cr_expect_gt(in_wheel_seen, 0, "no job was seen in the time wheel");
    cr_expect_eq(jrt_delayed_count(C, q), 0, "delayed jobs left (or a wrong wheel counter)");
    cr_expect_eq(jrt_int(C, "EXISTS jr:{%s}:wheel", q), 0, "the bucket index is left behind");
    cr_expect_eq(jrt_int(C, "XLEN jr:{%s}:ready", q), 0);
    cr_expect_eq(jrt_int(C, "XLEN jr:{%s}:dead", q), 0);
    redisReply *ks = redisCommand(C, "KEYS jr:{%s}:wheel:*", q);
    for (size_t i = 0; i < ks->elements; i++)
        cr_expect_str_eq(ks->element[i]->str, "jr:{pw}:wheel:n", "a bucket left behind: %s", ks->element[i]->str);
    freeReplyObject(ks);
}

/* Jobs due at whole ms across several bucket boundaries, some buckets
 * wholly due before a scheduler runs (the direct path), the others
 * cascading while it runs: every stream entry's time >= its due time. */
Test(wheel, never_early_across_buckets_direct_and_cascade) {
    const char *q = "ne";
    char text[512];
    snprintf(text, sizeof text, "redis:\n  url: %s\nscheduler:\n  queues: [ne]\nlog:\n  level: warn\n", R.url);
    jrt_write(&R, "jobrunner.yaml", text, cfgpath, sizeof cfgpath);
    long long now = redis_ms();
    /* 400 jobs due from now + 3.2 s to now + 8.2 s, every 12.5 ms, both id kinds (all in
     * buckets starting over 2 s ahead: revision 13) */
    char id[64];
    static char ids[400][64];
    static long long dues[400];
    for (int i = 0; i < 400; i++) {
        dues[i] = now + 3200 + i * 25 / 2;
        char want[32] = "";
        if (i % 3 == 0) snprintf(want, sizeof want, "ne-%d", i);
        enqueue_at(q, dues[i], want, id, sizeof id);
        snprintf(ids[i], sizeof ids[i], "%s", id);
    }
    cr_assert_gt(jrt_int(C, "ZCARD jr:{%s}:wheel", q), 3, "the jobs are not in several buckets");
    cr_assert_eq(jrt_int(C, "ZCARD jr:{%s}:delayed", q), 0, "far jobs went to the sorted set");
    cr_assert_eq(jrt_delayed_count(C, q), 400);
    /* the first buckets fall wholly due before any scheduler runs */
    while (redis_ms() < now + 5300) usleep(20000);
    pid_t s = jrt_scheduler(&R, cfgpath, jrt_path(&R, "scheduler.log"));
    long long stop = redis_ms() + 30000;
    while (jrt_int(C, "XLEN jr:{%s}:ready", q) < 400 && redis_ms() < stop) usleep(50000);
    cr_assert_eq(jrt_stop(s, SIGTERM, 10000), 0);
    redisReply *x = redisCommand(C, "XRANGE jr:{%s}:ready - +", q);
    cr_assert_eq(x->elements, 400, "%zu of 400 jobs promoted", x->elements);
    int early = 0, seen[400] = {0};
    for (size_t i = 0; i < x->elements; i++) {
        redisReply *f = x->element[i]->element[1];
        const char *jid = NULL;
        for (size_t k = 0; k + 1 < f->elements; k += 2)
            if (!strcmp(f->element[k]->str, "id")) jid = f->element[k + 1]->str;
        cr_assert(jid, "a promoted entry without its id");
        int n = -1;
        for (int k = 0; k < 400; k++)
            if (!strcmp(ids[k], jid)) n = k;
        cr_assert_geq(n, 0, "unknown job %s", jid);
        seen[n]++;
        if (atoll(x->element[i]->element[0]->str) < dues[n]) early++;
    }
    freeReplyObject(x);
    for (int k = 0; k < 400; k++) cr_expect_eq(seen[k], 1, "job %s promoted %d times", ids[k], seen[k]);
    cr_expect_eq(early, 0, "%d jobs promoted early", early);
    cr_expect_eq(jrt_delayed_count(C, q), 0);
}

/* Three schedulers over 60,000 jobs in the wheel; one SIGKILLed while the
 * buckets cascade and promote: every job reaches the stream exactly once. */
Test(wheel, one_of_three_schedulers_sigkilled_mid_cascade_loses_nothing) {
    const char *q = "sk";
    char text[512];
    snprintf(text, sizeof text,
             "redis:\n  url: %s\nscheduler:\n  queues: [sk]\n  batch: 200\nlog:\n  level: warn\n", R.url);
    jrt_write(&R, "jobrunner.yaml", text, cfgpath, sizeof cfgpath);
    const int N = 60000;
    long long now = redis_ms();
    /* enqueue in calls of 1,000, due 3.5 .. 5.5 s ahead: 3 buckets (a bucket starting
     * within 2 s would not be one: revision 13) */
    for (int b = 0; b < N / 1000; b++) {
        static const char *v[4 + 1000 * 7 + 8];
        static char when[1000][32];
        int a = 0;
        v[a++] = "FCALL", v[a++] = "jr_enqueue_many", v[a++] = "4";
        const char *keys[] = {QK("sk")};
        for (int k = 0; k < 4; k++) v[a++] = keys[k];
        v[a++] = "0";
        for (int i = 0; i < 1000; i++) {
            snprintf(when[i], sizeof when[i], "@%lld", now + 3500 + (b * 1000 + i) * 2000LL / N);
            v[a++] = when[i], v[a++] = "", v[a++] = "2", v[a++] = "h", v[a++] = "echo", v[a++] = "p", v[a++] = "x";
        }
        redisReply *r = cmdv(a, v);
        cr_assert(r->type == REDIS_REPLY_ARRAY, "jr_enqueue_many: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
        freeReplyObject(r);
    }
    cr_assert_eq(jrt_delayed_count(C, q), N);
    cr_assert_geq(jrt_int(C, "ZCARD jr:{%s}:wheel", q), 2, "the jobs are not in the time wheel");
    pid_t s[3];
    for (int i = 0; i < 3; i++) s[i] = jrt_scheduler(&R, cfgpath, jrt_path(&R, "scheduler.log"));
    /* kill one once the cascade has begun (some jobs moved, not all) */
    long long stop = redis_ms() + 30000;
    while (jrt_int(C, "XLEN jr:{%s}:ready", q) + jrt_int(C, "ZCARD jr:{%s}:delayed", q) == 0 && redis_ms() < stop)
        usleep(1000);
    long long moved = jrt_int(C, "XLEN jr:{%s}:ready", q) + jrt_int(C, "ZCARD jr:{%s}:delayed", q);
    cr_assert_eq(kill(s[0], SIGKILL), 0);
    cr_log_info("SIGKILL with %lld of %d jobs out of the buckets", moved, N);
    cr_expect_lt(moved, N, "the cascade was over before the kill (not mid-cascade)");
    while (jrt_int(C, "XLEN jr:{%s}:ready", q) < N && redis_ms() < stop) usleep(50000);
    jrt_stop(s[0], SIGKILL, 5000);
    cr_assert_eq(jrt_stop(s[1], SIGTERM, 10000), 0);
    cr_assert_eq(jrt_stop(s[2], SIGTERM, 10000), 0);
    cr_expect_eq(jrt_int(C, "XLEN jr:{%s}:ready", q), N, "jobs lost or promoted twice");
    /* each id once */
    redisReply *u = redisCommand(C, "EVAL %s 1 jr:{%s}:ready",
                                 "local s, n = {}, 0 for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do "
                                 "local id = e[2][2] if not s[id] then s[id] = true n = n + 1 end end return n",
                                 q);
    cr_assert(u && u->type == REDIS_REPLY_INTEGER, "EVAL: %s", u && u->type == REDIS_REPLY_ERROR ? u->str : "?");
    cr_expect_eq(u->integer, N, "distinct job ids in the stream: %lld", u->integer);
    freeReplyObject(u);
    cr_expect_eq(jrt_delayed_count(C, q), 0);
}

/* The layout of revision 4 and before: a delayed job is a member of the
 * sorted set (msgpack id, field, value, ...), an explicit id indexed as
 * "@<score>". Such jobs, written before the upgrade, are found by id,
 * cancelled and promoted by this library, next to new jobs in the wheel. */
Test(wheel, old_layout_delayed_jobs_still_run_and_are_found) {
    const char *q = "up";
    long long now = redis_ms();
    char score[3][32], member[3][256], gen[3][64];
    /* three old members: a generated id due in 1 s, an explicit id due in 1.5 s, one due in an hour */
    snprintf(gen[0], sizeof gen[0], "d%lld-1", now + 1000);
    snprintf(gen[1], sizeof gen[1], "old-explicit");
    snprintf(gen[2], sizeof gen[2], "d%lld-2", now + 3600000);
    long long due[3] = {now + 1000, now + 1500, now + 3600000};
    size_t mlen[3];
    for (int i = 0; i < 3; i++) {
        /* msgpack: fixstr id, "h" "echo", "e" <ms>, "d" <ms> */
        char e[32], d[32];
        snprintf(e, sizeof e, "%lld", now), snprintf(d, sizeof d, "%lld", due[i]);
        const char *items[] = {gen[i], "h", "echo", "e", e, "d", d};
        size_t n = 0;
        for (int k = 0; k < 7; k++) {
            size_t l = strlen(items[k]);
            member[i][n++] = (char)(0xa0 | l);
            memcpy(member[i] + n, items[k], l), n += l;
        }
        mlen[i] = n;
        snprintf(score[i], sizeof score[i], "%lld", due[i]);
        const char *v[] = {"ZADD", "jr:{up}:delayed", score[i], member[i]};
        size_t lens[] = {4, 15, strlen(score[i]), mlen[i]};
        redisReply *r = redisCommandArgv(C, 4, v, lens);
        cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        freeReplyObject(r);
    }
    freeReplyObject(redisCommand(C, "HSET jr:{up}:ids old-explicit @%lld.000", due[1]));
    /* a new job in the wheel, next to them */
    char newid[64];
    enqueue_at(q, now + 3000, "", newid, sizeof newid);
    cr_assert_eq(jrt_int(C, "ZCARD jr:{up}:delayed"), 3, "the old members moved");
    cr_assert_eq(jrt_delayed_count(C, q), 4, "stats do not count both layouts");
    char st[32], d[64];
    for (int i = 0; i < 3; i++) {
        locate(q, gen[i], st, sizeof st, d, sizeof d);
        cr_expect_str_eq(st, "delayed", "old job %s: %s", gen[i], st);
    }
    locate(q, newid, st, sizeof st, d, sizeof d);
    cr_expect_str_eq(st, "delayed", "new job %s: %s", newid, st);
    /* cancel the hour-away old one */
    redisReply *r = redisCommand(C, "FCALL jr_cancel 5 jr:{up}:ready jr:{up}:delayed jr:{up}:ids jr:{up}:cancelled "
                                    "jr:{up}:uniq:%s %s", gen[2], gen[2]);
    cr_assert(r && r->type == REDIS_REPLY_STRING);
    cr_expect_str_eq(r->str, "cancelled");
    freeReplyObject(r);
    /* promote: the other three run, the cancelled one does not */
    long long stop = now + 20000;
    while (jrt_int(C, "XLEN jr:{up}:ready") < 3 && redis_ms() < stop) {
        promote(q, 100);
        usleep(20000);
    }
    cr_expect_eq(jrt_int(C, "XLEN jr:{up}:ready"), 3);
    cr_expect_eq(jrt_delayed_count(C, q), 0);
    locate(q, gen[1], st, sizeof st, NULL, 0);
    cr_expect_str_eq(st, "ready", "the old explicit job: %s", st);
    locate(q, newid, st, sizeof st, NULL, 0);
    cr_expect_str_eq(st, "ready", "the new job: %s", st);
    locate(q, gen[2], st, sizeof st, NULL, 0);
    cr_expect_str_eq(st, "not found", "the cancelled job: %s", st);
}

/* A dense second cascades early: a bucket of 300,000 jobs cascades 2 s +
 * 10 us per job (3 s) = 5 s before its start, not 2 s, so that its jobs are
 * in the sorted set before they fall due. jr_promote is called by hand: its
 * next wake-up says so, and a call 4 s before the start cascades. */
Test(wheel, a_dense_bucket_cascades_earlier) {
    const char *q = "dn";
    const int N = 300000;
    long long now = redis_ms();
    long long start = (now + 40000) / 1000 * 1000;
    char when[32];
    snprintf(when, sizeof when, "@%lld", start + 500);
    static const char *v[8 + 1000 * 7];
    for (int b = 0; b < N / 1000; b++) {
        int a = 0;
        v[a++] = "FCALL", v[a++] = "jr_enqueue_many", v[a++] = "4";
        const char *keys[] = {QK("dn")};
        for (int k = 0; k < 4; k++) v[a++] = keys[k];
        v[a++] = "0";
        for (int i = 0; i < 1000; i++)
            v[a++] = when, v[a++] = "", v[a++] = "2", v[a++] = "h", v[a++] = "echo", v[a++] = "p", v[a++] = "x";
        redisReply *r = cmdv(a, v);
        cr_assert(r->type == REDIS_REPLY_ARRAY, "jr_enqueue_many: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
        freeReplyObject(r);
    }
    cr_assert_eq(jrt_int(C, "LLEN jr:{dn}:wheel:%lld", start), N, "not one bucket");
    cr_assert_lt(redis_ms(), start - 6000, "the enqueue took too long for this test (%lld ms left)",
                 start - redis_ms());
    /* 31 s before the start, within the 32 s window: nothing to do; the next
     * wake-up is the cascade time, start - 5 s (further away, a bucket is
     * looked at again 32 s before its start) */
    while (redis_ms() < start - 31000) usleep(10000);
    redisReply *r = redisCommand(C, "FCALL jr_promote 4 jr:{dn}:ready jr:{dn}:delayed jr:{dn}:wake jr:{dn}:dead 100");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 6, "jr_promote");
    cr_expect_eq(r->element[0]->integer, 0);
    cr_expect_eq((long long)atof(r->element[1]->str), start - 5000, "next wake-up %s, bucket start %lld",
                 r->element[1]->str, start);
    freeReplyObject(r);
    while (redis_ms() < start - 4000) usleep(10000);
    r = redisCommand(C, "FCALL jr_promote 4 jr:{dn}:ready jr:{dn}:delayed jr:{dn}:wake jr:{dn}:dead 100");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 6, "jr_promote");
    cr_expect_eq(r->element[5]->integer, 100, "4 s before its start the dense bucket did not cascade");
    cr_expect_eq(jrt_int(C, "XLEN jr:{dn}:ready"), 0, "promoted early");
    freeReplyObject(r);
    cr_expect_eq(jrt_delayed_count(C, q), N);
}

/* Garbage in a bucket (written by hand) is dead-lettered whole, never
 * dropped or run; the jobs beside it run; a tombstone is dropped. */
Test(wheel, garbage_in_a_bucket_is_dead_lettered_whole) {
    const char *q = "gb";
    long long now = redis_ms();
    char id[64];
    enqueue_at(q, now + 3500, "", id, sizeof id); /* its bucket starts over 2 s ahead: the wheel */
    long long start = (now + 3500) / 1000 * 1000;
    freeReplyObject(redisCommand(C, "RPUSH jr:{gb}:wheel:%lld %b %s %b", start, "\x91\x01", (size_t)2, "not msgpack",
                                 "\x05", (size_t)1));
    cr_assert_eq(jrt_int(C, "LLEN jr:{gb}:wheel:%lld", start), 4);
    while (redis_ms() < start + 1000) usleep(20000); /* the bucket is wholly due: straight to the stream */
    redisReply *r = redisCommand(C, "FCALL jr_promote 4 jr:{gb}:ready jr:{gb}:delayed jr:{gb}:wake jr:{gb}:dead 100");
    cr_assert(r && r->type == REDIS_REPLY_ARRAY, "jr_promote: %s", r && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    cr_expect_eq(r->element[0]->integer, 3, "items moved: the job and the garbage, not the tombstone");
    cr_expect_eq(r->element[4]->integer, 2, "buried: the array and the text");
    freeReplyObject(r);
    cr_expect_eq(jrt_int(C, "XLEN jr:{gb}:ready"), 1, "the job beside the garbage");
    redisReply *d = redisCommand(C, "XRANGE jr:{gb}:dead - +");
    cr_assert_eq(d->elements, 2);
    int raw_text = 0, raw_array = 0;
    for (size_t i = 0; i < d->elements; i++) {
        redisReply *f = d->element[i]->element[1];
        for (size_t k = 0; k + 1 < f->elements; k += 2)
            if (!strcmp(f->element[k]->str, "raw")) {
                raw_text += !strcmp(f->element[k + 1]->str, "not msgpack");
                raw_array += f->element[k + 1]->len == 2 && !memcmp(f->element[k + 1]->str, "\x91\x01", 2);
            }
    }
    freeReplyObject(d);
    cr_expect(raw_text == 1 && raw_array == 1, "the garbage is not kept whole in raw");
    cr_expect_eq(jrt_int(C, "EXISTS jr:{gb}:wheel:%lld", start), 0);
    cr_expect_eq(jrt_int(C, "ZCARD jr:{gb}:wheel"), 0);
    cr_expect_eq(jrt_delayed_count(C, q), 0);
    cr_expect_eq(jrt_int(C, "EXISTS jr:{gb}:wheel:n"), 1);
    redisReply *n = redisCommand(C, "GET jr:{gb}:wheel:n");
    cr_expect_str_eq(n->str, "0", "the counter counts what wheel_add wrote: %s", n->str);
    freeReplyObject(n);
}

/* Enqueue n jobs of queue q (generated ids), all due at `at` (Unix ms), by
 * jr_enqueue_many calls of 1,000. */
static void enqueue_n_at(const char *q, long long at, int n) {
    static const char *v[8 + 1000 * 7];
    static char keys[4][96];
    char when[32];
    snprintf(when, sizeof when, "@%lld", at);
    snprintf(keys[0], sizeof keys[0], "jr:{%s}:ready", q), snprintf(keys[1], sizeof keys[1], "jr:{%s}:delayed", q);
    snprintf(keys[2], sizeof keys[2], "jr:{%s}:wake", q), snprintf(keys[3], sizeof keys[3], "jr:{%s}:seq", q);
    for (int done = 0; done < n;) {
        int a = 0, m = n - done < 1000 ? n - done : 1000;
        v[a++] = "FCALL", v[a++] = "jr_enqueue_many", v[a++] = "4";
        for (int k = 0; k < 4; k++) v[a++] = keys[k];
        v[a++] = "0";
        for (int i = 0; i < m; i++)
            v[a++] = when, v[a++] = "", v[a++] = "2", v[a++] = "h", v[a++] = "echo", v[a++] = "p", v[a++] = "x";
        redisReply *r = cmdv(a, v);
        cr_assert(r->type == REDIS_REPLY_ARRAY, "jr_enqueue_many: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
        freeReplyObject(r);
        done += m;
    }
}

static long long used_memory(void) { return jrt_info_int(C, "memory", "used_memory"); }

/* Issue 10 review, 1: a cascade grows memory (a bucket item -> a sorted-set
 * member); in a Redis at maxmemory (noeviction) jr_promote is refused, and
 * the due jobs must still go: jr_redis_promote falls back to jr_promote_due
 * (allow-oom, no cascade). 50,000 jobs in one bucket, maxmemory = used +
 * 100 B per job: every job is in the stream within 10 s of its due time. */
Test(wheel, out_of_memory_mid_cascade_the_due_jobs_still_go) {
    const char *q = "om";
    const int N = 50000;
    long long start = (redis_ms() + 7000) / 1000 * 1000;
    enqueue_n_at(q, start + 500, N);
    cr_assert_eq(jrt_int(C, "LLEN jr:{om}:wheel:%lld", start), N, "not one bucket");
    freeReplyObject(redisCommand(C, "CONFIG SET maxmemory-policy noeviction"));
    freeReplyObject(redisCommand(C, "CONFIG SET maxmemory %lld", used_memory() + 100LL * N));
    jr_redis_t *P = jrt_jr_connect(&R);
    int oom_seen = 0;
    while (jrt_int(C, "XLEN jr:{om}:ready") < N && redis_ms() < start + 500 + 10000) {
        int64_t moved, buried, cascaded;
        double next, now;
        char wake[JR_ID_MAX];
        do {
            int rc = jr_redis_promote(P, q, 1000, 1000, &moved, &buried, &next, &now, wake, &cascaded);
            cr_assert_eq(rc, 0, "jr_redis_promote: %s", jr_redis_errstr(P));
            cr_assert(now >= start + 500 || moved == cascaded, "promoted early");
        } while (moved == 1000);
        redisReply *r = redisCommand(C, "SET jr:{om}:probe %0100d", 0);
        oom_seen |= r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "OOM") != NULL;
        freeReplyObject(r);
        usleep(20000);
    }
    cr_expect(oom_seen, "the test did not reach maxmemory");
    cr_expect_eq(jrt_int(C, "XLEN jr:{om}:ready"), N, "due jobs stuck behind a refused cascade");
    cr_expect_eq(jrt_delayed_count(C, q), 0);
    jr_redis_free(P);
    freeReplyObject(redisCommand(C, "CONFIG SET maxmemory 0"));
}

/* Issue 10 review, 2: a job due now goes before a cascade. A 100,000-job
 * bucket cascades (its cascade time has come), a job due 100 ms after
 * enqueue is due: one jr_promote of 1,000 promotes it (before: the whole
 * LIMIT went on the cascade, for as many calls as the cascade took). */
Test(wheel, a_due_job_goes_before_a_cascade) {
    const char *q = "st";
    const int N = 100000;
    long long start = (redis_ms() + 15000) / 1000 * 1000;
    enqueue_n_at(q, start + 500, N);
    cr_assert_eq(jrt_int(C, "LLEN jr:{st}:wheel:%lld", start), N, "not one bucket");
    cr_assert_lt(redis_ms(), start - 3500, "the enqueue took too long for this test");
    while (redis_ms() < start - 3000 + 50) usleep(10000); /* 2 s + 10 us x 100,000 before: it cascades */
    cr_assert_eq(promote(q, 1000), 1000, "the cascade did not start");
    char id[64];
    enqueue_at(q, redis_ms() + 100, "", id, sizeof id);
    usleep(300000);
    cr_assert_eq(promote(q, 1000), 1000);
    cr_expect_eq(jrt_int(C, "XLEN jr:{st}:ready"), 1, "the due job waited for the cascade");
}

/* Issue 10 review, 3: a bucket that grows after it became known brings its
 * cascade forward: the wake stream is poked when its cascade time moves a
 * second earlier, so the schedulers' timers follow (before: only a new
 * earliest bucket poked). */
Test(wheel, a_growing_bucket_pokes_the_schedulers) {
    const char *q = "gw";
    long long start = (redis_ms() + 30000) / 1000 * 1000;
    enqueue_n_at(q, start + 500, 1);
    redisReply *w = redisCommand(C, "XREVRANGE jr:{gw}:wake + - COUNT 1");
    cr_assert(w && w->type == REDIS_REPLY_ARRAY && w->elements == 1, "no poke for the new bucket");
    char first[64];
    snprintf(first, sizeof first, "%s", w->element[0]->element[0]->str);
    freeReplyObject(w);
    enqueue_n_at(q, start + 500, 99999); /* 100,000: 1 s more lead */
    w = redisCommand(C, "XREVRANGE jr:{gw}:wake + - COUNT 1");
    cr_assert(w && w->type == REDIS_REPLY_ARRAY && w->elements == 1);
    cr_expect_str_neq(w->element[0]->element[0]->str, first, "the bucket grew by 1 s of lead: no poke");
    freeReplyObject(w);
}

/* jr_cancel of a bucket's job by id. */
static void cancel(const char *q, const char *id) {
    redisReply *r = redisCommand(C, "FCALL jr_cancel 5 jr:{%s}:ready jr:{%s}:delayed jr:{%s}:ids jr:{%s}:cancelled "
                                    "jr:{%s}:uniq:%s %s", q, q, q, q, q, id, id);
    cr_assert(r && r->type == REDIS_REPLY_STRING, "jr_cancel: %s", r && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    cr_assert_str_eq(r->str, "cancelled", "cancel of %s: %s", id, r->str);
    freeReplyObject(r);
}

/* Issue 10 review, 4 and 5: cancelled jobs leave no tombstone at a
 * bucket's ends, nor an empty bucket or its index member; one in the middle
 * is not counted as moved when its bucket is promoted. */
Test(wheel, cancelled_jobs_leave_no_bucket_and_are_not_counted) {
    const char *q = "tb";
    long long at = redis_ms() + 3000, start = at / 1000 * 1000;
    char id[64];
    enqueue_at(q, at, "a", id, sizeof id), enqueue_at(q, at, "b", id, sizeof id), enqueue_at(q, at, "c", id, sizeof id);
    cancel(q, "a"), cancel(q, "c");
    cr_expect_eq(jrt_int(C, "LLEN jr:{tb}:wheel:%lld", start), 1, "tombstones at the ends of the bucket");
    cancel(q, "b");
    cr_expect_eq(jrt_int(C, "EXISTS jr:{tb}:wheel:%lld", start), 0, "an empty bucket is left");
    cr_expect_eq(jrt_int(C, "ZCARD jr:{tb}:wheel"), 0, "the index member of an empty bucket is left");
    enqueue_at(q, at, "x", id, sizeof id), enqueue_at(q, at, "y", id, sizeof id), enqueue_at(q, at, "z", id, sizeof id);
    cancel(q, "y");
    cr_expect_eq(jrt_int(C, "LLEN jr:{tb}:wheel:%lld", start), 3);
    while (redis_ms() < start + 1000) usleep(20000); /* wholly due */
    cr_expect_eq(promote(q, 100), 2, "a cancelled job counted as moved");
    cr_expect_eq(jrt_int(C, "XLEN jr:{tb}:ready"), 2);
}

/* jr_promote takes at most LIMIT jobs when both the sorted set and a bucket
 * wholly due hold some. */
Test(wheel, limit_holds_across_both_tiers) {
    const char *q = "lm";
    long long now = redis_ms();
    long long start = (now + 3000) / 1000 * 1000 + 1000;
    enqueue_n_at(q, start + 100, 5);
    cr_assert_eq(jrt_int(C, "LLEN jr:{lm}:wheel:%lld", start), 5);
    while (redis_ms() < start + 1000 - 1500) usleep(10000);
    enqueue_n_at(q, redis_ms() + 100, 5); /* near: the sorted set */
    cr_assert_eq(jrt_int(C, "ZCARD jr:{lm}:delayed"), 5);
    while (redis_ms() < start + 1000) usleep(10000); /* the bucket is wholly due */
    cr_expect_eq(promote(q, 6), 6);
    cr_expect_eq(jrt_int(C, "XLEN jr:{lm}:ready"), 6, "more than LIMIT promoted");
    cr_expect_eq(promote(q, 6), 4);
    cr_expect_eq(jrt_int(C, "XLEN jr:{lm}:ready"), 10);
}

/* Issue 10 review, 6: garbage in the wheel's index or counter (written by
 * hand) does not stop the queue: a member that is not a bucket start and
 * one whose bucket key is not a list go to the dead stream and out of the
 * index (the key is left as it is); a counter that is not a count is set
 * again; the job in the wheel still runs. */
Test(wheel, garbage_in_the_wheel_index_or_counter_does_not_stop_the_queue) {
    const char *q = "gi";
    long long now = redis_ms();
    char id[64];
    enqueue_at(q, now + 3500, "", id, sizeof id);
    long long start = (now + 3500) / 1000 * 1000; /* cascades 500 ms after now at the soonest */
    long long hstart = start - 5000;
    freeReplyObject(redisCommand(C, "ZADD jr:{gi}:wheel %lld x1", now - 1000));
    freeReplyObject(redisCommand(C, "ZADD jr:{gi}:wheel %lld %lld", hstart, hstart));
    freeReplyObject(redisCommand(C, "HSET jr:{gi}:wheel:%lld f v", hstart));
    freeReplyObject(redisCommand(C, "SET jr:{gi}:wheel:n abc"));
    cr_assert_eq(promote(q, 100), 0); /* not refused */
    cr_expect_eq(jrt_int(C, "ZCARD jr:{gi}:wheel"), 1, "the garbage members are left in the index");
    cr_expect_eq(jrt_int(C, "XLEN jr:{gi}:dead"), 3, "the garbage is not in the dead stream");
    cr_expect_eq(jrt_int(C, "EXISTS jr:{gi}:wheel:%lld", hstart), 1, "the hash was deleted");
    redisReply *n = redisCommand(C, "GET jr:{gi}:wheel:n");
    cr_expect(n && n->type == REDIS_REPLY_STRING && !strcmp(n->str, "1"), "the counter was not set again");
    freeReplyObject(n);
    while (redis_ms() < start + 1000) usleep(20000);
    cr_expect_eq(promote(q, 100), 1);
    cr_expect_eq(jrt_int(C, "XLEN jr:{gi}:ready"), 1);
    cr_expect_eq(jrt_delayed_count(C, q), 0);
}

/* Issue 10, promotion rate: while a backlog is due the scheduler asks for
 * larger batches (up to 16 x scheduler.batch while a call stays short), so
 * 20,000 due jobs with batch 100 take far fewer than 200 calls; still every
 * job reaches the stream exactly once. */
Test(wheel, a_due_backlog_is_promoted_in_calls_larger_than_batch) {
    const char *q = "bl";
    enum { N = 20000 };
    char text[512];
    snprintf(text, sizeof text, "redis:\n  url: %s\nscheduler:\n  queues: [bl]\n  batch: 100\nlog:\n  level: warn\n",
             R.url);
    jrt_write(&R, "jobrunner.yaml", text, cfgpath, sizeof cfgpath);
    /* in the time wheel: its bucket starts over 2 s ahead of the last
     * enqueue too (3 s for 20,000 pipelined enqueues on a loaded machine) */
    long long due = redis_ms() + 6000;
    char when[32];
    snprintf(when, sizeof when, "@%lld", due);
    for (int i = 0; i < N; i++)
        redisAppendCommand(C, "FCALL jr_enqueue 4 jr:{bl}:ready jr:{bl}:delayed jr:{bl}:wake jr:{bl}:seq %s %s 0 h echo p x",
                           when, "");
    for (int i = 0; i < N; i++) {
        redisReply *r = NULL;
        cr_assert_eq(redisGetReply(C, (void **)&r), REDIS_OK);
        cr_assert(r->type == REDIS_REPLY_ARRAY, "jr_enqueue: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
        freeReplyObject(r);
    }
    cr_assert_eq(jrt_delayed_count(C, q), N);
    while (redis_ms() < due + 1100) usleep(20000); /* every bucket wholly due */
    freeReplyObject(redisCommand(C, "CONFIG RESETSTAT"));
    pid_t s = jrt_scheduler(&R, cfgpath, jrt_path(&R, "scheduler.log"));
    long long stop = redis_ms() + 60000;
    while (jrt_int(C, "XLEN jr:{%s}:ready", q) < N && redis_ms() < stop) usleep(50000);
    cr_assert_eq(jrt_stop(s, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_int(C, "XLEN jr:{%s}:ready", q), N, "jobs lost or promoted twice");
    cr_expect_eq(jrt_delayed_count(C, q), 0);
    redisReply *info = redisCommand(C, "INFO commandstats");
    cr_assert(info && info->type == REDIS_REPLY_STRING && info->str);
    const char *f = strstr(info->str, "cmdstat_fcall:calls=");
    cr_assert(f, "no FCALL counted");
    long long calls = atoll(f + strlen("cmdstat_fcall:calls="));
    freeReplyObject(info);
    cr_expect_lt(calls, N / 100 / 2, "%lld jr_promote calls for %d jobs with batch 100: the batch did not grow", calls,
                 N);
}

/* The fast paths of promotion (envelopes of 1 to 4 field pairs, XADDed
 * without a table) and the general one (5 and more pairs) give the same
 * entry: id, the fields in their order, then e and d; from the time wheel
 * (a bucket wholly due) and from the sorted set. */
Test(wheel, promoted_envelopes_keep_every_field_in_order) {
    const char *q = "fo";
    static const char *const fields[][12] = {
        {"h", "echo"},
        {"h", "echo", "p", "one"},
        {"h", "echo", "p", "two", "a", "3"},
        {"h", "echo", "p", "x", "a", "2", "m", "5"},
        {"h", "echo", "t", "9000", "p", "", "a", "2", "m", "5", "b", "100"},
    };
    static const int nf[] = {2, 4, 6, 8, 12};
    char ids[2][5][64];
    long long now = redis_ms(), dues[2] = {now + 3500, now + 500}; /* wheel, sorted set */
    for (int w = 0; w < 2; w++)
        for (int j = 0; j < 5; j++) {
            char when[32];
            snprintf(when, sizeof when, "@%lld", dues[w]);
            const char *v[24] = {"FCALL", "jr_enqueue", "4", "jr:{fo}:ready", "jr:{fo}:delayed", "jr:{fo}:wake",
                                 "jr:{fo}:seq", when, "", "0"};
            for (int k = 0; k < nf[j]; k++) v[10 + k] = fields[j][k];
            redisReply *r = cmdv(10 + nf[j], v);
            cr_assert(r->type == REDIS_REPLY_ARRAY, "jr_enqueue: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
            snprintf(ids[w][j], sizeof ids[w][j], "%s", r->element[0]->str);
            freeReplyObject(r);
        }
    long long after = redis_ms();
    cr_assert_eq(jrt_int(C, "ZCARD jr:{%s}:delayed", q), 5);
    while (redis_ms() < dues[0] + 1100) usleep(20000);
    cr_assert_eq(promote(q, 100), 10);
    redisReply *x = redisCommand(C, "XRANGE jr:{%s}:ready - +", q);
    cr_assert_eq(x->elements, 10);
    int found = 0;
    for (size_t i = 0; i < x->elements; i++) {
        redisReply *f = x->element[i]->element[1];
        cr_assert_geq(f->elements, 2);
        cr_assert_str_eq(f->element[0]->str, "id");
        for (int w = 0; w < 2; w++)
            for (int j = 0; j < 5; j++) {
                if (strcmp(f->element[1]->str, ids[w][j])) continue;
                found++;
                cr_assert_eq(f->elements, (size_t)(2 + nf[j] + 4), "job %s: %zu items", ids[w][j], f->elements);
                for (int k = 0; k < nf[j]; k++)
                    cr_expect_str_eq(f->element[2 + k]->str, fields[j][k], "job %s item %d", ids[w][j], k);
                cr_expect_str_eq(f->element[2 + nf[j]]->str, "e");
                long long e = atoll(f->element[3 + nf[j]]->str);
                cr_expect(e >= now && e <= after, "job %s: e = %lld, enqueued in %lld..%lld", ids[w][j], e, now, after);
                cr_expect_str_eq(f->element[4 + nf[j]]->str, "d");
                cr_expect_eq(atoll(f->element[5 + nf[j]]->str), dues[w], "job %s: d", ids[w][j]);
            }
    }
    freeReplyObject(x);
    cr_expect_eq(found, 10);
    cr_expect_eq(jrt_int(C, "HLEN jr:{%s}:ids", q), 10, "not every promoted job in the index");
}

/* Issue 10, lateness with N waiting: a job due 2 s (NEAR_MS) or more ahead
 * whose bucket starts less than 2 s away would be cascaded into the sorted
 * set by the next jr_promote. Such jobs now go straight into the sorted set:
 * no bucket, and no poke of the schedulers per job (before: each one
 * re-created the bucket the previous cascade had emptied, as the earliest
 * bucket, and poked: one more scheduler wake-up and jr_promote per job).
 * They still run at their due time, never early; a job whose bucket starts
 * later still waits in the wheel. */
Test(wheel, a_job_whose_bucket_would_cascade_at_once_pokes_no_scheduler_and_runs_on_time) {
    const char *q = "nb";
    char id[64], ids[11][64];
    while (redis_ms() % 1000 < 50 || redis_ms() % 1000 >= 150) usleep(2000);
    long long t0 = redis_ms(), due[11];
    long long next_start = (t0 + 2000) / 1000 * 1000 + 1000; /* the bucket after the one of now + 2 s */
    due[0] = t0 + 1500;
    enqueue_at(q, due[0], "", ids[0], sizeof ids[0]); /* the earliest: pokes */
    redisReply *w = redisCommand(C, "XREVRANGE jr:{nb}:wake + - COUNT 1");
    cr_assert(w && w->type == REDIS_REPLY_ARRAY && w->elements == 1, "no poke for the earliest job");
    char first[64];
    snprintf(first, sizeof first, "%s", w->element[0]->element[0]->str);
    freeReplyObject(w);
    for (int i = 1; i < 11; i++) {
        due[i] = redis_ms() + 2010 + 50 * i; /* 2 s or more ahead, in the bucket starting before now + 2 s */
        cr_assert_lt(due[i], next_start, "the enqueues took too long for this test");
        enqueue_at(q, due[i], "", ids[i], sizeof ids[i]);
        promote(q, 1000); /* a scheduler woken by a poke would do this */
    }
    w = redisCommand(C, "XREVRANGE jr:{nb}:wake + - COUNT 1");
    cr_assert(w && w->type == REDIS_REPLY_ARRAY && w->elements == 1);
    cr_expect_str_eq(w->element[0]->element[0]->str, first, "a job whose bucket cascades at once poked the schedulers");
    freeReplyObject(w);
    cr_expect_eq(jrt_int(C, "ZCARD jr:{nb}:delayed"), 11, "those jobs are not all in the sorted set");
    cr_expect_eq(jrt_int(C, "ZCARD jr:{nb}:wheel"), 0, "a bucket was created for a job whose bucket cascades at once");
    enqueue_at(q, next_start + 2500, "", id, sizeof id);
    cr_expect_eq(jrt_int(C, "ZCARD jr:{nb}:wheel"), 1, "a job due later is not in the wheel");
    /* each runs at its due time, never early */
    int got = 0;
    while (got < 11 && redis_ms() < t0 + 20000) {
        promote(q, 1000);
        redisReply *r = redisCommand(C, "XRANGE jr:{nb}:ready - +");
        cr_assert(r && r->type == REDIS_REPLY_ARRAY);
        got = (int)r->elements;
        for (size_t e = 0; e < r->elements; e++) {
            redisReply *f = r->element[e]->element[1];
            const char *jid = NULL;
            for (size_t k = 0; k + 1 < f->elements; k += 2)
                if (!strcmp(f->element[k]->str, "id")) jid = f->element[k + 1]->str;
            cr_assert(jid, "an entry without an id");
            int i = 0;
            while (i < 11 && strcmp(ids[i], jid)) i++;
            cr_assert_lt(i, 11, "unknown job %s", jid);
            cr_assert_geq(atoll(r->element[e]->element[0]->str), due[i], "job %s promoted early", jid);
        }
        freeReplyObject(r);
        usleep(20000);
    }
    cr_expect_eq(got, 11, "not every job ran");
}

/* jr_promote in the scheduler's form (revision 22: with jr:{Q}:moved, the
 * jobs of a bucket wholly due with generated ids are moved by number). */
static long long promote8(const char *q, int limit) {
    char k[8][96], lim[16];
    const char *suf[8] = {"ready", "delayed", "wake", "dead", "ids", "wheel", "wheel:n", "moved"};
    for (int i = 0; i < 8; i++) snprintf(k[i], sizeof k[i], "jr:{%s}:%s", q, suf[i]);
    snprintf(lim, sizeof lim, "%d", limit);
    const char *v[] = {"FCALL", "jr_promote", "8", k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7], lim};
    redisReply *r = cmdv(12, v);
    cr_assert(r->type == REDIS_REPLY_ARRAY, "jr_promote: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
    long long moved = r->element[0]->integer;
    freeReplyObject(r);
    return moved;
}

/* The check of the properties of moves by number over jobs ids[0..n)
 * due at dues[] (ms), all promoted into queue q's stream besides `ready`
 * jobs enqueued due now, with no promotion since Redis's time `after`:
 * each job reaches the stream once, never early, and no entry is ahead of
 * Redis's clock (ids in the stream's order: a run is never started past
 * now); every job is found by its id at its very entry (jr_locate) and one
 * that the index names is named at that entry. Returns how many generated
 * ids have no index entry (moved by number); entry_of[k] = job k's entry. */
static int check_promoted(const char *q, int n, char (*ids)[64], const long long *dues, int ready, long long after,
                          char (*entry_of)[48]) {
    redisReply *x = redisCommand(C, "XRANGE jr:{%s}:ready - +", q);
    cr_assert_eq(x->elements, (size_t)(n + ready), "%zu entries for %d jobs", x->elements, n + ready);
    int *seen = calloc((size_t)n, sizeof *seen), early = 0, ahead = 0;
    for (size_t i = 0; i < x->elements; i++) {
        const char *e = x->element[i]->element[0]->str;
        ahead += atoll(e) > after;
        redisReply *f = x->element[i]->element[1];
        const char *jid = NULL;
        for (size_t k = 0; k + 1 < f->elements; k += 2)
            if (!strcmp(f->element[k]->str, "id")) jid = f->element[k + 1]->str;
        if (!jid) continue; /* a ready job */
        int j = -1;
        for (int k = 0; k < n; k++)
            if (!strcmp(ids[k], jid)) j = k;
        cr_assert_geq(j, 0, "unknown job %s", jid);
        seen[j]++;
        snprintf(entry_of[j], 48, "%s", e);
        if (atoll(e) < dues[j]) early++;
    }
    freeReplyObject(x);
    int unindexed = 0;
    for (int k = 0; k < n; k++) {
        cr_assert_eq(seen[k], 1, "job %s promoted %d times", ids[k], seen[k]);
        redisReply *h = redisCommand(C, "HGET jr:{%s}:ids %s", q, ids[k]);
        if (h->type == REDIS_REPLY_STRING)
            cr_expect_str_eq(h->str, entry_of[k], "the index names job %s at %s, it is at %s", ids[k], h->str,
                             entry_of[k]);
        else if (ids[k][0] == 'd')
            unindexed++;
        freeReplyObject(h);
        char k4[4][96];
        snprintf(k4[0], sizeof k4[0], "jr:{%s}:ready", q), snprintf(k4[1], sizeof k4[1], "jr:{%s}:delayed", q);
        snprintf(k4[2], sizeof k4[2], "jr:{%s}:ids", q), snprintf(k4[3], sizeof k4[3], "jr:{%s}:dead", q);
        const char *v[] = {"FCALL", "jr_locate", "4", k4[0], k4[1], k4[2], k4[3], ids[k]};
        redisReply *r = cmdv(8, v);
        cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 8, "jr_locate %s", ids[k]);
        cr_expect_str_eq(r->element[0]->str, "ready", "job %s: %s", ids[k], r->element[0]->str);
        cr_expect_str_eq(r->element[2]->str, entry_of[k], "job %s found at %s, is at %s", ids[k], r->element[2]->str,
                         entry_of[k]);
        freeReplyObject(r);
    }
    free(seen);
    cr_expect_eq(early, 0, "%d jobs promoted early", early);
    cr_expect_eq(ahead, 0, "%d entries ahead of Redis's clock", ahead);
    return unindexed;
}

/* A moved job is cancelled by its id; once the entries are gone (as
 * acknowledged) the next promotion forgets every run's record. */
static void cancel_one_and_forget(const char *q, int n, char (*ids)[64], int ready) {
    int victim = -1;
    for (int k = 0; k < n && victim < 0; k++)
        if (ids[k][0] == 'd' && !jrt_int(C, "HEXISTS jr:{%s}:ids %s", q, ids[k])) victim = k;
    cr_assert_geq(victim, 0, "no job moved by number");
    redisReply *c = redisCommand(C,
                                 "FCALL jr_cancel 7 jr:{%s}:ready jr:{%s}:delayed jr:{%s}:ids jr:{%s}:cancelled "
                                 "jr:{%s}:wheel jr:{%s}:wheel:n jr:{%s}:uniq:%s %s",
                                 q, q, q, q, q, q, q, ids[victim], ids[victim]);
    cr_assert(c && c->type == REDIS_REPLY_STRING, "jr_cancel: %s", c && c->type == REDIS_REPLY_ERROR ? c->str : "?");
    cr_expect_str_eq(c->str, "cancelled");
    freeReplyObject(c);
    cr_expect_eq(jrt_int(C, "XLEN jr:{%s}:ready", q), n + ready - 1, "the cancelled job is still in the stream");
    freeReplyObject(redisCommand(C, "XTRIM jr:{%s}:ready MAXLEN 0", q));
    promote8(q, 10);
    cr_expect_eq(jrt_int(C, "EXISTS jr:{%s}:moved", q), 0, "the records of gone entries stay");
    redisReply *h = redisCommand(C, "HKEYS jr:{%s}:ids", q);
    for (size_t i = 0; i < h->elements; i++)
        cr_expect(strncmp(h->element[i]->str, "d", 1) || strchr(h->element[i]->str, '-'), "record %s stays",
                  h->element[i]->str);
    freeReplyObject(h);
}

/* Property (revision 22): jobs of buckets wholly due, generated and
 * explicit ids mixed, promoted by calls of random LIMIT with ready jobs
 * written between them (entries "*" that the numbered ones must stay
 * above): each job reaches the stream once, never early, no entry ahead
 * of Redis's clock (revision 23: the buckets' numbers go down from one to
 * the next, since jobs are numbered in enqueue order, not due order); a
 * job with a generated id gets no index entry of its own yet is found by
 * its id at its very entry (jr_locate) and can be cancelled; once the
 * entries are gone the next promotion forgets the runs' records. */
Test(wheel, property_jobs_moved_by_number_are_found_by_id_and_their_records_go) {
    const char *q = "mn";
    unsigned seed = (unsigned)(getenv("JRT_SEED") ? atol(getenv("JRT_SEED")) : jrt_wall_us());
    srand(seed);
    cr_log_info("property test: JRT_SEED=%u", seed);
    enum { N = 500 };
    static char ids[N][64], entry_of[N][48];
    static long long dues[N];
    long long now = redis_ms();
    for (int i = 0; i < N; i++) {
        dues[i] = now + 2600 + rand() % 2400; /* 3-4 buckets, all starting over 2 s ahead or in the sorted set */
        char want[32] = "";
        if (rand() % 4 == 0) snprintf(want, sizeof want, "mn-%d", i);
        enqueue_at(q, dues[i], want, ids[i], sizeof ids[i]);
    }
    cr_assert_gt(jrt_int(C, "ZCARD jr:{%s}:wheel", q), 1, "the jobs are not in the wheel");
    while (redis_ms() < now + 6100) usleep(20000); /* every bucket wholly due */
    int ready = 0;
    for (int calls = 0; jrt_delayed_count(C, q) > 0; calls++) {
        cr_assert_lt(calls, 10000, "the jobs are not promoted");
        promote8(q, 1 + rand() % 40);
        for (int k = rand() % 3; k > 0; k--, ready++) {
            char out[64];
            enqueue_at(q, 0, "", out, sizeof out); /* due now: an entry "*" */
        }
    }
    int unindexed = check_promoted(q, N, ids, dues, ready, redis_ms(), entry_of);
    cr_assert_gt(unindexed, N / 2, "only %d generated ids went without an index entry", unindexed);
    cr_assert_gt(jrt_int(C, "ZCARD jr:{%s}:moved", q), 0, "no run recorded");
    cancel_one_and_forget(q, N, ids, ready);
}

/* Property (revision 23): moves by number of the sorted set. Jobs due
 * within 2.3 s go into the sorted set at their enqueue, later ones into
 * buckets that cascade into it before they are due; generated and
 * explicit ids mixed, and some generated ids given an index entry by hand
 * (as a retried job has: '@<due>'), promoted once due by calls of random
 * LIMIT with entries "*" written between them, while the scheduler's form
 * runs every few ms: each job reaches the stream once, never early, no
 * entry ahead of Redis's clock; a generated id the index did not name is
 * moved by number (no index entry), one it named is named again at its
 * new entry; every job is found by its id at its entry; a moved one can
 * be cancelled and the runs' records go with the entries. */
Test(wheel, property_sorted_set_jobs_move_by_number_unless_the_index_names_them) {
    const char *q = "mz";
    unsigned seed = (unsigned)(getenv("JRT_SEED") ? atol(getenv("JRT_SEED")) : jrt_wall_us());
    srand(seed);
    cr_log_info("property test: JRT_SEED=%u", seed);
    enum { N = 600 };
    static char ids[N][64], entry_of[N][48];
    static long long dues[N];
    long long now = redis_ms();
    /* due times from few distinct ones (many jobs of one ms: long runs) */
    long long at[6];
    for (int i = 0; i < 6; i++) at[i] = now + 300 + rand() % 4000;
    /* numbers that gain a digit halfway (from 8 to 9): members of one score
     * are in the order of their bytes, so the 9-digit ones come first and
     * the 8-digit ones after them in one call go by "*" (a run for them
     * would start after Redis's now) */
    freeReplyObject(redisCommand(C, "SET jr:{%s}:seq %d", q, 100000000 - N / 2));
    int named = 0;
    for (int i = 0; i < N; i++) {
        dues[i] = rand() % 4 ? at[rand() % 6] : now + 300 + rand() % 4000;
        char want[32] = "";
        if (rand() % 5 == 0) snprintf(want, sizeof want, "mz-%d", i);
        enqueue_at(q, dues[i], want, ids[i], sizeof ids[i]);
        if (!want[0] && dues[i] < now + 2000 && rand() % 8 == 0) { /* in the sorted set: as if retried */
            char score[40];
            snprintf(score, sizeof score, "@%lld.000", dues[i]);
            cr_assert_eq(jrt_int(C, "HSET jr:{%s}:ids %s %s", q, ids[i], score), 1);
            named++;
        }
    }
    cr_assert_gt(jrt_int(C, "ZCARD jr:{%s}:delayed", q), 0, "no job in the sorted set");
    cr_assert_gt(jrt_int(C, "ZCARD jr:{%s}:wheel", q), 0, "no job in the wheel");
    cr_log_info("%d generated ids named by the index by hand", named);
    int ready = 0;
    for (int calls = 0; jrt_delayed_count(C, q) > 0; calls++) {
        cr_assert_lt(calls, 200000, "the jobs are not promoted");
        promote8(q, rand() % 3 ? 32 + rand() % 200 : 1 + rand() % 20);
        for (int k = rand() % 4 == 0; k > 0; k--, ready++) {
            char out[64];
            enqueue_at(q, 0, "", out, sizeof out); /* due now: an entry "*" */
        }
        usleep(1000 + rand() % 4000);
    }
    int unindexed = check_promoted(q, N, ids, dues, ready, redis_ms(), entry_of);
    cr_log_info("%d generated ids moved by number", unindexed);
    cr_assert_gt(unindexed, N / 5, "only %d generated ids went without an index entry", unindexed);
    cancel_one_and_forget(q, N, ids, ready);
}

/* Revision 23: a call that moves fewer than 32 sorted-set members with
 * generated ids (a trickle of jobs due at distinct times) gives each its
 * index entry and records no run (a record per call, each rewritten whole,
 * would cost a second of such jobs quadratic bytes). */
Test(wheel, a_trickle_of_sorted_set_jobs_keeps_index_entries_and_records_no_runs) {
    const char *q = "mt";
    enum { N = 40 };
    char ids[N][64];
    long long now = redis_ms();
    for (int i = 0; i < N; i++) enqueue_at(q, now + 200 + 30 * i, "", ids[i], sizeof ids[i]);
    cr_assert_eq(jrt_int(C, "ZCARD jr:{%s}:delayed", q), N, "the jobs are not in the sorted set");
    for (int calls = 0; jrt_delayed_count(C, q) > 0; calls++) {
        cr_assert_lt(calls, 100000, "the jobs are not promoted");
        promote8(q, 1000);
        usleep(2000);
    }
    cr_expect_eq(jrt_int(C, "EXISTS jr:{%s}:moved", q), 0, "runs recorded for a trickle");
    for (int k = 0; k < N; k++) {
        redisReply *h = redisCommand(C, "HGET jr:{%s}:ids %s", q, ids[k]);
        cr_expect(h->type == REDIS_REPLY_STRING, "job %s has no index entry", ids[k]);
        freeReplyObject(h);
    }
}

/* Revision 23: 64 jobs due in one millisecond, at microseconds in the
 * reverse order of their numbers (the sorted set orders them by due time,
 * so n falls from each to the next), promoted by one call: no stretch of
 * rising numbers, so none moves by number (each would be a run of its own:
 * a record per job); each gets its index entry and is found at its entry. */
Test(wheel, sorted_set_jobs_numbered_out_of_due_order_keep_index_entries) {
    const char *q = "mr";
    enum { N = 64 };
    static char ids[N][64], entry_of[N][48];
    static long long dues[N];
    long long now = redis_ms(), ms = now + 300;
    for (int i = 0; i < N; i++) {
        char k[4][96], when[40];
        snprintf(when, sizeof when, "@%lld.%03d", ms, 999 - i * 10);
        snprintf(k[0], sizeof k[0], "jr:{%s}:ready", q), snprintf(k[1], sizeof k[1], "jr:{%s}:delayed", q);
        snprintf(k[2], sizeof k[2], "jr:{%s}:wake", q), snprintf(k[3], sizeof k[3], "jr:{%s}:seq", q);
        const char *w[] = {"FCALL", "jr_enqueue", "4", k[0], k[1], k[2], k[3], when, "", "86400000", "h", "echo"};
        redisReply *r = cmdv(12, w);
        cr_assert(r->type == REDIS_REPLY_ARRAY, "jr_enqueue: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
        snprintf(ids[i], sizeof ids[i], "%s", r->element[0]->str);
        freeReplyObject(r);
        dues[i] = ms;
    }
    while (redis_ms() < ms + 20) usleep(5000);
    cr_assert_eq(promote8(q, 1000), N);
    cr_expect_eq(jrt_int(C, "EXISTS jr:{%s}:moved", q), 0, "runs recorded for numbers out of order");
    cr_expect_eq(check_promoted(q, N, ids, dues, 0, redis_ms(), entry_of), 0, "moved by number");
}

/* Garbage written by hand beside the records of moves by number: a record
 * field d<start> not ending in "," keeps apart from the runs appended to
 * it (the jobs stay found), and a member of jr:{Q}:moved that is not a
 * bucket start is dropped without touching jr:{Q}:ids (where d<it> may be
 * a job's own index entry). */
Test(wheel, garbage_beside_the_run_records_hides_no_job_and_drops_no_index_entry) {
    const char *q = "mg";
    enum { N = 40 };
    static char ids[N][64], entry_of[N][48];
    static long long dues[N];
    long long ms = redis_ms() + 300, start = ms / 1000 * 1000;
    if (ms % 1000 > 900) ms += 200, start = ms / 1000 * 1000; /* not across a second */
    char explicit[64];
    enqueue_at(q, redis_ms() + 30000, "dabc", explicit, sizeof explicit); /* a job whose id is d<garbage> */
    cr_assert_str_eq(explicit, "dabc");
    freeReplyObject(redisCommand(C, "HSET jr:{%s}:ids d%lld x5", q, start));
    freeReplyObject(redisCommand(C, "ZADD jr:{%s}:moved 0 abc", q));
    for (int i = 0; i < N; i++) {
        enqueue_at(q, ms, "", ids[i], sizeof ids[i]);
        dues[i] = ms;
    }
    while (redis_ms() < ms + 20) usleep(5000);
    cr_assert_eq(promote8(q, 1000), N);
    cr_expect_gt(check_promoted(q, N, ids, dues, 0, redis_ms(), entry_of), 0, "none moved by number");
    redisReply *z = redisCommand(C, "ZSCORE jr:{%s}:moved abc", q);
    cr_expect(z && z->type == REDIS_REPLY_NIL, "the garbage member stays");
    freeReplyObject(z);
    cr_expect_eq(jrt_int(C, "HEXISTS jr:{%s}:ids dabc", q), 1, "the index entry of job dabc went");
    char state[32], due[40];
    locate(q, "dabc", state, sizeof state, due, sizeof due);
    cr_expect_str_eq(state, "delayed", "job dabc: %s", state);
}

/* A ready stream whose last id has a millisecond part no Lua number holds
 * exactly (more than 15 digits: written by hand, or by a clock far off):
 * a bucket wholly due is not moved by number then (T-n could land at or
 * below that id, and XADD refuse it after the bucket's items were taken,
 * losing them), its jobs go in by "*" with their index entries: every one
 * reaches the stream once and is found by its id. */
Test(wheel, a_stream_past_2_pow_53_ms_takes_a_wholly_due_bucket_whole) {
    const char *q = "mbig";
    freeReplyObject(redisCommand(C, "XADD jr:{%s}:ready 9007199254740993-0 id junk h noop", q));
    enum { N = 20 };
    char ids[N][64];
    long long now = redis_ms();
    for (int i = 0; i < N; i++) enqueue_at(q, now + 3000 + i, "", ids[i], sizeof ids[i]);
    cr_assert_gt(jrt_int(C, "ZCARD jr:{%s}:wheel", q), 0, "the jobs are not in the wheel");
    while (redis_ms() < now + 4100) usleep(20000); /* the bucket wholly due */
    for (int calls = 0; jrt_delayed_count(C, q) > 0; calls++) {
        cr_assert_lt(calls, 100, "the jobs are not promoted");
        promote8(q, 7);
    }
    cr_expect_eq(jrt_int(C, "XLEN jr:{%s}:ready", q), N + 1, "jobs lost");
    cr_expect_eq(jrt_int(C, "EXISTS jr:{%s}:moved", q), 0, "a run was recorded");
    for (int k = 0; k < N; k++) {
        redisReply *r = redisCommand(C, "FCALL jr_locate 4 jr:{%s}:ready jr:{%s}:delayed jr:{%s}:ids jr:{%s}:dead %s",
                                     q, q, q, q, ids[k]);
        cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 8, "jr_locate %s", ids[k]);
        cr_expect_str_eq(r->element[0]->str, "ready", "job %s: %s", ids[k], r->element[0]->str);
        freeReplyObject(r);
    }
}
