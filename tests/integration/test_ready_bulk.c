/* Bulk enqueue of jobs due now without ids: jr_redis_enqueue_each sends
 * them as FCALL jr_ready_prepare then one plain XADD per job (no Lua per
 * job). A job written that way must be the job the Lua path writes, run the
 * same, and each job's outcome must be its own XADD's. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "config.h"
#include "jr.h"
#include "redis.h"
#include "redis_produce.h"

static jrt_redis_t R;
static redisContext *C;
static char record[192], wlog[192];

static void setup(void) {
    jrt_redis_start(&R, NULL);
    C = jrt_connect(&R);
    snprintf(record, sizeof record, "%s/record.txt", R.dir);
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    setenv("JRT_RECORD", record, 1);
}
static void teardown(void) {
    if (C) redisFree(C);
    C = NULL;
    jrt_redis_stop(&R);
}

TestSuite(ready_bulk, .init = setup, .fini = teardown, .timeout = 120);

/* A command of NUL-terminated words, NULL-terminated, on C. */
#define cmd(...) jrt_cmd(C, __VA_ARGS__)

static jr_enqueue_t job(const char *queue, const char *payload, size_t len) {
    return (jr_enqueue_t){.queue = queue,
                          .env = {.handler = "record", .handler_len = 6, .payload = payload, .payload_len = len,
                                  .attempt = 1, .max_attempts = 5, .timeout_ms = 60000, .backoff_ms = 250}};
}

/* The field array of stream entry `id` of `key` (caller frees the reply
 * through *whole). */
static const redisReply *entry_fields(const char *key, const char *id, redisReply **whole) {
    *whole = cmd("XRANGE", key, id, id, NULL);
    cr_assert(*whole && (*whole)->type == REDIS_REPLY_ARRAY && (*whole)->elements == 1, "entry %s of %s", id, key);
    return (*whole)->element[0]->element[1];
}

static int same_fields(const redisReply *a, const redisReply *b) {
    if (a->elements != b->elements) return 0;
    for (size_t i = 0; i < a->elements; i++)
        if (a->element[i]->len != b->element[i]->len ||
            memcmp(a->element[i]->str, b->element[i]->str, a->element[i]->len) != 0)
            return 0;
    return 1;
}

/* Lines of the record file whose first word is id. */
static int runs_of(const char *id) { return jrt_runs_of(record, id, NULL); }

/* One job alone (jr_enqueue_many, Lua) and the same job in a bulk (plain
 * XADDs): the same stored fields byte for byte, the same answer from
 * lookup, and a worker runs each once. */
Test(ready_bulk, a_job_alone_and_in_a_bulk_is_stored_found_and_run_the_same) {
    enum { N = 4 };
    static const char payload[] = "a\0b \"c\"\r\n";
    jr_redis_t *r = jrt_jr_connect(&R);
    jr_enqueue_t jobs[N];
    char ids[N][JR_ID_MAX];
    for (int i = 0; i < N; i++) jobs[i] = job("same", payload, sizeof payload - 1);
    cr_assert_eq(jr_redis_enqueue(r, jobs, 1, ids, NULL), 0, "%s", jr_redis_errstr(r));
    cr_assert_eq(jr_redis_enqueue(r, jobs + 1, N - 1, ids + 1, NULL), 0, "%s", jr_redis_errstr(r));
    /* the bulk went as plain XADDs: the producer's last command was one */
    redisReply *cl = cmd("CLIENT", "LIST", NULL);
    cr_assert(strstr(cl->str, "cmd=xadd"), "no client's last command was an XADD:\n%s", cl->str);
    freeReplyObject(cl);
    redisReply *w0, *wi;
    const redisReply *f0 = entry_fields("jr:{same}:ready", ids[0], &w0);
    for (int i = 1; i < N; i++) {
        const redisReply *fi = entry_fields("jr:{same}:ready", ids[i], &wi);
        cr_assert(same_fields(f0, fi), "job %d (%s) is stored unlike the job enqueued alone", i, ids[i]);
        freeReplyObject(wi);
    }
    freeReplyObject(w0);
    for (int i = 0; i < N; i++) {
        jr_jobinfo_t info = {0};
        cr_assert_eq(jr_redis_job_locate(r, "same", ids[i], &info), 0, "%s", jr_redis_errstr(r));
        cr_assert_str_eq(info.state, "ready", "job %d", i);
        cr_assert_str_eq(info.entry, ids[i]);
        jr_jobinfo_free(&info);
    }
    jr_redis_free(r);
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *[]){"--queue", "same", NULL});
    cr_assert_eq(jrt_wait_lines(record, N, 30000), N, "not every job ran");
    jrt_sleep_ms(200);
    for (int i = 0; i < N; i++) cr_expect_eq(runs_of(ids[i]), 1, "job %d (%s) ran %d times", i, ids[i], runs_of(ids[i]));
    
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
}

/* Each job's outcome is its own XADD's: in a stream with two entry ids
 * left, the first two jobs of a bulk are written and the others refused
 * with Redis's reason (jr_enqueue_many refused the whole call). */
Test(ready_bulk, a_stream_with_two_ids_left_takes_two_jobs_and_refuses_the_rest) {
    enum { N = 5 };
    freeReplyObject(cmd("XADD", "jr:{full}:ready", "18446744073709551615-18446744073709551613", "h", "x", NULL));
    freeReplyObject(cmd("XGROUP", "CREATE", "jr:{full}:ready", "jr", "0", NULL));
    jr_redis_t *r = jrt_jr_connect(&R);
    jr_enqueue_t jobs[N];
    char ids[N][JR_ID_MAX];
    jr_enq_outcome_t out[N];
    jr_strlist_t reasons = {0};
    for (int i = 0; i < N; i++) jobs[i] = job("full", "x", 1);
    int rc = jr_redis_enqueue_each(r, jobs, N, ids, out, &reasons);
    cr_assert_eq(rc, JR_EREDIS, "rc %d: %s", rc, jr_redis_errstr(r));
    cr_assert(strstr(jr_redis_errstr(r), "full"), "the error does not name the queue: %s", jr_redis_errstr(r));
    cr_assert_eq(out[0].status, JR_ENQ_CREATED);
    cr_assert_str_eq(ids[0], "18446744073709551615-18446744073709551614");
    cr_assert_eq(out[1].status, JR_ENQ_CREATED);
    cr_assert_str_eq(ids[1], "18446744073709551615-18446744073709551615");
    for (int i = 2; i < N; i++) {
        cr_assert_eq(out[i].status, JR_ENQ_REFUSED, "job %d: status %d", i, out[i].status);
        cr_assert(out[i].why < reasons.n && strstr(reasons.v[out[i].why], "full"), "job %d: no reason", i);
        cr_assert_str_eq(ids[i], "");
    }
    cr_assert_eq(jrt_int(C, "XLEN jr:{full}:ready"), 3);
    jr_strlist_free(&reasons);
    jr_redis_free(r);
}

/* A stream made by a plain XADD (no group) gets the group at 0 before the
 * bulk's jobs: a worker's group sees the old entry and the new ones. */
Test(ready_bulk, a_stream_without_the_group_gets_it_with_every_entry) {
    freeReplyObject(cmd("XADD", "jr:{raw}:ready", "*", "h", "record", NULL));
    jr_redis_t *r = jrt_jr_connect(&R);
    jr_enqueue_t jobs[3];
    for (int i = 0; i < 3; i++) jobs[i] = job("raw", "x", 1);
    cr_assert_eq(jr_redis_enqueue(r, jobs, 3, NULL, NULL), 0, "%s", jr_redis_errstr(r));
    jr_redis_free(r);
    redisReply *g = cmd("XREADGROUP", "GROUP", "jr", "c1", "COUNT", "10", "STREAMS", "jr:{raw}:ready", ">", NULL);
    cr_assert(g->type == REDIS_REPLY_ARRAY && g->elements == 1, "no group or no entries (type %d)", g->type);
    cr_assert_eq(g->element[0]->element[1]->elements, 4);
    freeReplyObject(g);
}

/* Jobs due now, due later and with ids in one queue: every one written,
 * the ready ones in the stream in the order given. */
Test(ready_bulk, a_mix_of_plain_and_lua_jobs_keeps_the_order_of_one_queue) {
    enum { N = 9 };
    jr_redis_t *r = jrt_jr_connect(&R);
    jr_enqueue_t jobs[N];
    char pay[N][4];
    jr_enq_outcome_t out[N];
    for (int i = 0; i < N; i++) {
        snprintf(pay[i], sizeof pay[i], "%d", i);
        jobs[i] = job("mix", pay[i], strlen(pay[i]));
    }
    jobs[2].delay_ms = 3600000;
    jobs[5].id = "mine";
    int rc = jr_redis_enqueue_each(r, jobs, N, NULL, out, NULL);
    cr_assert_eq(rc, 0, "%s", jr_redis_errstr(r));
    for (int i = 0; i < N; i++) cr_assert_eq(out[i].status, JR_ENQ_CREATED, "job %d", i);
    jr_redis_free(r);
    redisReply *x = cmd("XRANGE", "jr:{mix}:ready", "-", "+", NULL);
    cr_assert_eq(x->elements, N - 1);
    const char *want[] = {"0", "1", "3", "4", "5", "6", "7", "8"};
    for (size_t e = 0; e < x->elements; e++) {
        const redisReply *f = x->element[e]->element[1];
        const char *p = NULL;
        for (size_t k = 0; k + 1 < f->elements; k += 2)
            if (!strcmp(f->element[k]->str, "p")) p = f->element[k + 1]->str;
        cr_assert(p && !strcmp(p, want[e]), "entry %zu: payload %s, want %s", e, p ? p : "(none)", want[e]);
    }
    freeReplyObject(x);
    cr_assert_eq(jrt_delayed_count(C, "mix"), 1);
}

/* Out of memory: the bulk's jobs are each refused with Redis's OOM error,
 * nothing is written. */
/* A registration refused for garbage in the registry (jr:{queues} holds a
 * string) costs the registration only: the call succeeds and the bulk's jobs
 * are written, each CREATED with its entry id. */
Test(ready_bulk, a_registry_holding_garbage_fails_no_call_and_every_job_is_written) {
    jr_redis_t *r = jrt_jr_connect(&R);
    freeReplyObject(cmd("SET", "jr:{queues}", "not a set", NULL));
    enum { N = 5 };
    jr_enqueue_t jobs[N];
    jr_enq_outcome_t out[N];
    char ids[N][JR_ID_MAX];
    for (int i = 0; i < N; i++) jobs[i] = job("regbulk", "x", 1);
    int rc = jr_redis_enqueue_each(r, jobs, N, ids, out, NULL);
    cr_assert_eq(rc, 0, "rc %d: %s", rc, jr_redis_errstr(r));
    cr_assert_eq(jrt_int(C, "XLEN jr:{regbulk}:ready"), N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(out[i].status, JR_ENQ_CREATED, "job %d: status %d", i, out[i].status);
        redisReply *whole;
        entry_fields("jr:{regbulk}:ready", ids[i], &whole); /* its id is its entry */
        freeReplyObject(whole);
    }
    jr_redis_free(r);
}

Test(ready_bulk, out_of_memory_refuses_every_job_with_the_reason) {
    jr_redis_t *r = jrt_jr_connect(&R);
    freeReplyObject(cmd("CONFIG", "SET", "maxmemory", "1", NULL));
    enum { N = 3 };
    jr_enqueue_t jobs[N];
    jr_enq_outcome_t out[N];
    jr_strlist_t reasons = {0};
    for (int i = 0; i < N; i++) jobs[i] = job("oom", "x", 1);
    int rc = jr_redis_enqueue_each(r, jobs, N, NULL, out, &reasons);
    freeReplyObject(cmd("CONFIG", "SET", "maxmemory", "0", NULL));
    cr_assert_eq(rc, JR_EREDIS, "rc %d: %s", rc, jr_redis_errstr(r));
    for (int i = 0; i < N; i++) {
        cr_assert_eq(out[i].status, JR_ENQ_REFUSED, "job %d: status %d", i, out[i].status);
        cr_assert(out[i].why < reasons.n && strstr(reasons.v[out[i].why], "OOM"), "job %d: reason %s", i,
                  out[i].why < reasons.n ? reasons.v[out[i].why] : "(none)");
    }
    cr_assert_eq(jrt_int(C, "EXISTS jr:{oom}:ready"), 0);
    jr_strlist_free(&reasons);
    jr_redis_free(r);
}

/* ---- Property: each job's reported outcome is what Redis holds ---------- */

/* Where the jobs of one round are in Redis. Job i of round k carries the
 * payload "<k>:<i>" (distinct, so each can be found); seen[i] counts the
 * entries with it across every stream scanned, id the last one's entry id. */
typedef struct seen {
    int n;
    char id[JR_ID_MAX];
} seen_t;

/* Count, into seen[0..n), the entries of stream `key` that carry a payload
 * of round `round`; an entry of the round naming no job of it fails. */
static void scan_stream(const char *key, int round, size_t n, seen_t *seen) {
    char start[JR_ID_MAX + 2] = "-";
    for (;;) {
        redisReply *x = cmd("XRANGE", key, start, "+", "COUNT", "5000", NULL);
        cr_assert(x->type == REDIS_REPLY_ARRAY, "XRANGE %s: type %d %s", key, x->type,
                  x->type == REDIS_REPLY_ERROR ? x->str : "");
        size_t got = x->elements;
        for (size_t e = 0; e < got; e++) {
            const redisReply *id = x->element[e]->element[0], *f = x->element[e]->element[1];
            const char *p = NULL;
            for (size_t k = 0; k + 1 < f->elements; k += 2)
                if (!strcmp(f->element[k]->str, "p")) p = f->element[k + 1]->str;
            char *end;
            if (!p || strtol(p, &end, 10) != round || *end != ':') continue;
            unsigned long i = strtoul(end + 1, &end, 10);
            cr_assert(i < n && !*end, "entry %s of %s: payload \"%s\" is no job of round %d", id->str, key, p, round);
            seen[i].n++;
            snprintf(seen[i].id, sizeof seen[i].id, "%s", id->str);
        }
        if (got) snprintf(start, sizeof start, "(%s", x->element[got - 1]->element[0]->str);
        freeReplyObject(x);
        if (got < 5000) return;
    }
}

/* Scan every stream of queue q: its ready stream and the streams it was
 * renamed to (jr:{q}:moved:...). */
static void scan_queue(const char *q, int round, size_t n, seen_t *seen) {
    char pattern[JR_KEY_MAX];
    snprintf(pattern, sizeof pattern, "jr:{%s}:*", q);
    redisReply *keys = cmd("KEYS", pattern, NULL);
    for (size_t k = 0; k < keys->elements; k++) {
        const char *key = keys->element[k]->str;
        if (!strstr(key, ":moved:") && strcmp(strrchr(key, ':'), ":ready") != 0) continue;
        redisReply *t = cmd("TYPE", key, NULL);
        int stream = !strcmp(t->str, "stream");
        freeReplyObject(t);
        if (stream) scan_stream(key, round, n, seen);
    }
    freeReplyObject(keys);
}

/* Outcomes of a round, by kind. */
typedef struct tally {
    size_t created, refused_missing, refused_type, not_sent, unknown;
    size_t renamed_in_run; /* of refused_missing: jr_ready_prepare had answered, the XADD nil */
    size_t unknown_written; /* of unknown: found in Redis */
} tally_t;

/* The property, for every job i of jobs[0..n) (queues among qs[0..nq)):
 * CREATED => its payload is in exactly one entry, whose id is ids[i];
 * REFUSED or NOT_SENT => in none; UNKNOWN => in at most one; never
 * EXISTED (no job has an id). A refusal's reason names the queue and what
 * happened: the stream was missing, or the key held another type. Adds the
 * outcomes to *t. */
static void check_outcomes(int round, const jr_enqueue_t *jobs, size_t n, const char *const *qs, size_t nq,
                           char (*ids)[JR_ID_MAX], const jr_enq_outcome_t *out, const jr_strlist_t *reasons,
                           tally_t *t) {
    seen_t *seen = calloc(n, sizeof *seen);
    cr_assert(seen);
    for (size_t q = 0; q < nq; q++) scan_queue(qs[q], round, n, seen);
    for (size_t i = 0; i < n; i++) {
        const char *why = out[i].why < reasons->n ? reasons->v[out[i].why] : "(no reason)";
        cr_assert_leq(seen[i].n, 1, "round %d, job %zu (%s, status %d) was written %d times", round, i,
                      jobs[i].queue, out[i].status, seen[i].n);
        switch (out[i].status) {
        case JR_ENQ_CREATED:
            cr_assert_eq(seen[i].n, 1, "round %d, job %zu (%s): CREATED as %s but not in Redis", round, i,
                         jobs[i].queue, ids[i]);
            cr_assert_str_eq(ids[i], seen[i].id, "round %d, job %zu: CREATED as %s, stored as %s", round, i, ids[i],
                             seen[i].id);
            t->created++;
            break;
        case JR_ENQ_REFUSED:
            cr_assert_eq(seen[i].n, 0, "round %d, job %zu (%s): REFUSED (%s) but stored as %s", round, i,
                         jobs[i].queue, why, seen[i].id);
            cr_assert(strstr(why, jobs[i].queue), "round %d, job %zu: the reason does not name queue %s: %s", round,
                      i, jobs[i].queue, why);
            if (strstr(why, "renamed after jr_ready_prepare")) t->renamed_in_run++;
            if (strstr(why, "missing")) t->refused_missing++;
            else if (strstr(why, "WRONGTYPE") || strstr(why, "not a stream")) t->refused_type++;
            else cr_assert_fail("round %d, job %zu: the reason says neither missing nor wrong type: %s", round, i, why);
            break;
        case JR_ENQ_NOT_SENT:
            cr_assert_eq(seen[i].n, 0, "round %d, job %zu (%s): NOT_SENT (%s) but stored as %s", round, i,
                         jobs[i].queue, why, seen[i].id);
            t->not_sent++;
            break;
        case JR_ENQ_UNKNOWN:
            t->unknown++;
            t->unknown_written += (size_t)seen[i].n;
            break;
        default:
            cr_assert_fail("round %d, job %zu: status %d", round, i, out[i].status);
        }
        if (out[i].status != JR_ENQ_CREATED)
            cr_assert(out[i].why < reasons->n, "round %d, job %zu: status %d without a reason", round, i,
                      out[i].status);
    }
    free(seen);
}

/* jobs[i] of round k: queue qs[rand % nq], payload "<k>:<i>" in pay[i]. */
static void make_round(int round, unsigned seed, jr_enqueue_t *jobs, char (*pay)[24], size_t n,
                       const char *const *qs, size_t nq) {
    for (size_t i = 0; i < n; i++) {
        snprintf(pay[i], sizeof pay[i], "%d:%zu", round, i);
        jobs[i] = job(qs[rand_r(&seed) % nq], pay[i], strlen(pay[i]));
    }
}

/* The interference: a thread on its own connection, until stop is set,
 * takes turns of one of: RENAME a ready stream of the queues qs (the first
 * that exists from a random one: the producer's queue of the moment, most
 * often) to jr:{Q}:moved:<round>:<n>, the entries kept, so the XADDs after
 * it answer nil and nothing written is lost; the same, then a string in its
 * place for 0.2-1 ms (the XADDs answer WRONGTYPE, jr_ready_prepare refuses)
 * then DEL of that string; XGROUP DESTROY of a random queue's group
 * (jr_ready_prepare makes it again); the first half the time, the others a
 * quarter each. 0-0.25 ms between turns. */
typedef struct interferer {
    const char *sock;
    const char *const *qs;
    size_t nq;
    int round;
    unsigned seed;
    atomic_int stop;
    long renames, strings; /* turns that moved a stream, that put a string */
} interferer_t;

enum { IQ_MAX = 4 }; /* queues an interferer takes */

static void *interfere(void *arg) {
    interferer_t *it = arg;
    /* KEYS: the ready streams, then the names to move each to; ARGV: '1' to
     * put a string in place, the queue to start at (1-based). Returns the
     * queue moved, or minus the start queue when none existed. */
    static const char move[] = "local n, s = #KEYS / 2, tonumber(ARGV[2])\n"
                               "for k = 0, n - 1 do\n"
                               "  local i = (s - 1 + k) % n + 1\n"
                               "  if redis.call('EXISTS', KEYS[i]) == 1 then\n"
                               "    redis.call('RENAME', KEYS[i], KEYS[n + i])\n"
                               "    if ARGV[1] == '1' then redis.call('SET', KEYS[i], 'x') end\n"
                               "    return i\n"
                               "  end\n"
                               "end\n"
                               "if ARGV[1] == '1' then redis.call('SET', KEYS[s], 'x') end\n"
                               "return -s";
    static const char unset[] = "if redis.call('TYPE', KEYS[1]).ok == 'string' then\n"
                                "  return redis.call('DEL', KEYS[1])\n"
                                "end\n"
                                "return 0";
    if (it->nq > IQ_MAX) return NULL; /* no assertion off the test thread */
    redisContext *c = redisConnectUnix(it->sock);
    if (!c || c->err) return c ? (redisFree(c), NULL) : NULL;
    char ready[IQ_MAX][JR_KEY_MAX], moved[IQ_MAX][JR_KEY_MAX], nkeys[24], start[24];
    for (size_t q = 0; q < it->nq; q++) snprintf(ready[q], sizeof ready[q], "jr:{%s}:ready", it->qs[q]);
    snprintf(nkeys, sizeof nkeys, "%zu", 2 * it->nq);
    for (long n = 0; !atomic_load(&it->stop); n++) {
        size_t s = rand_r(&it->seed) % it->nq;
        int kind = (int)(rand_r(&it->seed) % 4);
        kind = kind == 3 ? 0 : kind; /* renames half the time */
        redisReply *rep;
        if (kind == 2) {
            rep = redisCommand(c, "XGROUP DESTROY %s jr", ready[s]);
        } else {
            const char *argv[5 + 2 * IQ_MAX];
            int a = 0;
            argv[a++] = "EVAL", argv[a++] = move, argv[a++] = nkeys;
            for (size_t q = 0; q < it->nq; q++) argv[a++] = ready[q];
            for (size_t q = 0; q < it->nq; q++) {
                snprintf(moved[q], sizeof moved[q], "jr:{%s}:moved:%d:%ld", it->qs[q], it->round, n);
                argv[a++] = moved[q];
            }
            snprintf(start, sizeof start, "%zu", s + 1);
            argv[a++] = kind ? "1" : "0", argv[a++] = start;
            rep = redisCommandArgv(c, a, argv, NULL);
            long long which = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
            if (which > 0) it->renames++;
            if (rep && kind == 1 && which != 0) {
                it->strings++;
                freeReplyObject(rep);
                usleep(200 + rand_r(&it->seed) % 800);
                rep = redisCommand(c, "EVAL %s 1 %s", unset, ready[(which > 0 ? which : -which) - 1]);
            }
        }
        if (!rep) break;
        freeReplyObject(rep);
        usleep(rand_r(&it->seed) % 250);
    }
    redisFree(c);
    return NULL;
}

/* Bulks of ready jobs over three queues while their streams are renamed,
 * swapped for a string and stripped of their group under them: for every
 * job, the outcome reported is what Redis holds (check_outcomes), across
 * seeds and chunk sizes; the interference did hit (jobs refused because
 * the stream was renamed after their run's jr_ready_prepare — nil XADD
 * replies — and because the key held a string). A run must span several of
 * Redis's 16 KB reads of the pipeline for a rename to land inside it: the
 * small chunk (97 jobs, ~10 KB) rarely sees one, the large ones always. */
Test(ready_bulk, each_outcome_is_what_redis_holds_while_the_stream_is_renamed_under_the_bulk) {
    enum { N = 20000, ROUNDS = 4 };
    static const char *const qs[] = {"ia", "ib", "ic"};
    static const size_t chunks[ROUNDS] = {1000, 97, 4000, 20000};
    static jr_enqueue_t jobs[N];
    static char pay[N][24], ids[N][JR_ID_MAX];
    static jr_enq_outcome_t out[N];
    tally_t t = {0};
    long renames = 0, strings = 0;
    jr_redis_t *r = jrt_jr_connect(&R);
    for (int round = 0; round < ROUNDS; round++) {
        make_round(round, 7u + (unsigned)round, jobs, pay, N, qs, 3);
        size_t old = jr_redis_set_enqueue_chunk(chunks[round]);
        interferer_t it = {.sock = R.sock, .qs = qs, .nq = 3, .round = round, .seed = 11u + (unsigned)round};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, interfere, &it), 0);
        jrt_sleep_ms(5); /* the thread connected and turning */
        jr_strlist_t reasons = {0};
        int rc = jr_redis_enqueue_each(r, jobs, N, ids, out, &reasons);
        atomic_store(&it.stop, 1);
        pthread_join(th, NULL);
        jr_redis_set_enqueue_chunk(old);
        tally_t before = t;
        check_outcomes(round, jobs, N, qs, 3, ids, out, &reasons, &t);
        cr_assert_eq(t.not_sent, 0, "round %d: jobs not sent, but the connection never broke", round);
        cr_assert_eq(t.unknown, 0, "round %d: jobs UNKNOWN, but the connection never broke", round);
        int refused = t.refused_missing + t.refused_type > before.refused_missing + before.refused_type;
        cr_assert_eq(rc, refused ? JR_EREDIS : 0, "round %d: rc %d (%s)", round, rc, jr_redis_errstr(r));
        cr_assert(jr_redis_ok(r), "round %d: a refusal broke the connection", round);
        cr_log_info("round %d (chunk %zu): %zu created, %zu refused as missing (%zu after jr_ready_prepare), %zu as "
                    "another type", round, chunks[round], t.created - before.created,
                    t.refused_missing - before.refused_missing, t.renamed_in_run - before.renamed_in_run,
                    t.refused_type - before.refused_type);
        jr_strlist_free(&reasons);
        renames += it.renames, strings += it.strings;
    }
    jr_redis_free(r);
    cr_log_info("interference: %ld renames, %ld strings; jobs: %zu created, %zu refused as missing (%zu of them "
                "in a run jr_ready_prepare had let through), %zu as another type",
                renames, strings, t.created, t.refused_missing, t.renamed_in_run, t.refused_type);
    cr_assert_gt(t.created, 0);
    cr_assert_gt(t.renamed_in_run, 0, "no XADD met a stream renamed after its jr_ready_prepare: the test proved "
                 "nothing of nil replies");
    cr_assert_gt(t.refused_type, 0, "no job met a string in place of the stream");
}

/* The Redis client id of the connection made last, besides C's: the
 * producer's, when the caller has just connected it. */
static long long newest_client_id(void) {
    long long self = jrt_int(C, "CLIENT ID"), found = -1;
    redisReply *l = cmd("CLIENT", "LIST", NULL);
    for (const char *p = l->str; p && *p;) {
        long long id;
        if (sscanf(p, "id=%lld", &id) == 1 && id != self && id > found) found = id;
        p = strchr(p, '\n');
        if (p) p++;
    }
    freeReplyObject(l);
    cr_assert_geq(found, 0, "no client besides the test's");
    return found;
}

/* How a bulk in flight is cut off. */
typedef enum cut_how {
    CUT_CONNECTION, /* CLIENT KILL ID of the producer's connection */
    CUT_SERVER,     /* SIGKILL of Redis (on AOF, appendfsync always), restarted after */
    CUT_PAUSE       /* CLIENT PAUSE WRITE: Redis holds the producer's commands past its timeout */
} cut_how_t;

static const char *const cut_name[] = {"CLIENT KILL", "SIGKILL", "CLIENT PAUSE"};

/* A thread that waits until `key` holds `after` entries (XLEN on its own
 * connection), then cuts the producer off as `how` says. Gives up when stop
 * is set. */
typedef struct cutter {
    const char *sock, *key;
    long long after, client; /* client: the producer's Redis client id */
    pid_t pid;               /* Redis */
    cut_how_t how;
    atomic_int stop, cut;
} cutter_t;

static void *cut_when_written(void *arg) {
    cutter_t *ct = arg;
    redisContext *c = redisConnectUnix(ct->sock);
    if (!c || c->err) return c ? (redisFree(c), NULL) : NULL;
    while (!atomic_load(&ct->stop)) {
        redisReply *rep = redisCommand(c, "XLEN %s", ct->key);
        long long len = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
        if (rep) freeReplyObject(rep);
        if (!rep) break;
        if (len < ct->after) {
            usleep(100);
            continue;
        }
        if (ct->how == CUT_SERVER) {
            atomic_store(&ct->cut, kill(ct->pid, SIGKILL) == 0);
        } else {
            rep = ct->how == CUT_CONNECTION ? redisCommand(c, "CLIENT KILL ID %lld", ct->client)
                                            : redisCommand(c, "CLIENT PAUSE 600000 WRITE");
            atomic_store(&ct->cut, rep && rep->type != REDIS_REPLY_ERROR && (rep->type != REDIS_REPLY_INTEGER ||
                                                                                rep->integer == 1));
            if (rep) freeReplyObject(rep);
        }
        break;
    }
    redisFree(c);
    return NULL;
}

/* A plain bulk of N jobs of one queue cut off once 4,000 of them are in
 * the stream (see cut_how_t). The call fails with a transport error (a
 * timeout for CUT_PAUSE), and for every job the outcome is what Redis holds
 * (after a restart: what survived it): CREATED once, NOT_SENT nowhere,
 * UNKNOWN at most once; the jobs the cut left unanswered are UNKNOWN or
 * NOT_SENT, each with a reason. CUT_PAUSE is checked twice: while Redis
 * still holds the producer's commands, and after CLIENT UNPAUSE, once Redis
 * ran what it had been sent — some UNKNOWN jobs are then written, which is
 * why they were not NOT_SENT. Should a bulk end before the cut (a starved
 * thread), it must be whole, and the next one (another queue) is cut: up
 * to 3 bulks. */
static void cut_mid_bulk(cut_how_t how) {
    enum { N = 100000, TRIES = 3 };
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    static jr_enqueue_t jobs[N];
    static char pay[N][24], ids[N][JR_ID_MAX];
    static jr_enq_outcome_t out[N];
    signal(SIGPIPE, SIG_IGN); /* the write to a closed connection fails with EPIPE instead */
    if (how == CUT_SERVER) {
        redisFree(C);
        jrt_redis_restart(&R, aof);
        C = jrt_connect(&R);
    }
    int cut_in_flight = 0;
    for (int round = 0; round < TRIES && !cut_in_flight; round++) {
        char q[16], key[JR_KEY_MAX];
        snprintf(q, sizeof q, "cut%d", round);
        snprintf(key, sizeof key, "jr:{%s}:ready", q);
        const char *qs[] = {q};
        jr_redis_t *r = jrt_jr_connect(&R);
        make_round(round, 5u + (unsigned)round, jobs, pay, N, qs, 1);
        cutter_t ct = {.sock = R.sock, .key = key, .after = 4000, .pid = R.pid, .how = how,
                       .client = newest_client_id()};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, cut_when_written, &ct), 0);
        jr_strlist_t reasons = {0};
        int rc = jr_redis_enqueue_each(r, jobs, N, ids, out, &reasons);
        atomic_store(&ct.stop, 1);
        pthread_join(th, NULL);
        int cut = atomic_load(&ct.cut);
        if (how == CUT_SERVER && cut) {
            redisFree(C);
            jrt_redis_restart(&R, aof); /* reaps the killed one, loads the AOF */
            C = jrt_connect(&R);
        }
        tally_t t = {0};
        check_outcomes(round, jobs, N, qs, 1, ids, out, &reasons, &t);
        cr_log_info("bulk %d cut by %s: rc %d, %zu created, %zu unknown (%zu of them written), %zu not sent", round,
                    cut ? cut_name[how] : "nothing", rc, t.created, t.unknown, t.unknown_written, t.not_sent);
        cr_assert_eq(t.refused_missing + t.refused_type, 0);
        if (how == CUT_PAUSE && cut) {
            freeReplyObject(cmd("CLIENT", "UNPAUSE", NULL)); /* answered once Redis ran the producer's commands */
            tally_t after = {0};
            check_outcomes(round, jobs, N, qs, 1, ids, out, &reasons, &after);
            cr_log_info("bulk %d after CLIENT UNPAUSE: %zu unknown (%zu of them written)", round, after.unknown,
                        after.unknown_written);
            if (rc) cr_assert_gt(after.unknown_written, 0, "the producer's commands held by the pause never ran");
        }
        if (rc == 0) {
            cr_assert_eq(t.created, N, "bulk %d: rc 0 but not every job CREATED", round);
        } else {
            cut_in_flight = 1;
            cr_assert(cut, "bulk %d failed without a cut: rc %d: %s", round, rc, jr_redis_errstr(r));
            cr_assert(how == CUT_PAUSE ? rc == JR_ETIMEOUT : rc == JR_EIO, "bulk %d: rc %d, want %s: %s", round, rc,
                      how == CUT_PAUSE ? "a timeout" : "a transport error", jr_redis_errstr(r));
            cr_assert(!jr_redis_ok(r));
            cr_assert_gt(t.unknown + t.not_sent, 0);
        }
        jr_strlist_free(&reasons);
        jr_redis_free(r);
    }
    cr_assert(cut_in_flight, "in %d bulks of %d jobs the cut never came while one was in flight", TRIES, N);
}

Test(ready_bulk, a_connection_killed_mid_bulk_leaves_each_outcome_true) { cut_mid_bulk(CUT_CONNECTION); }

Test(ready_bulk, redis_killed_mid_bulk_on_aof_always_keeps_every_created_job) { cut_mid_bulk(CUT_SERVER); }

Test(ready_bulk, redis_paused_past_the_timeout_mid_bulk_leaves_each_outcome_true) { cut_mid_bulk(CUT_PAUSE); }
