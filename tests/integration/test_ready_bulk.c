/* Bulk enqueue of jobs due now without ids: jr_redis_enqueue_each sends
 * them as FCALL jr_ready_prepare then one plain XADD per job (no Lua per
 * job). A job written that way must be the job the Lua path writes, run the
 * same, and each job's outcome must be its own XADD's. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static redisReply *cmd(const char *first, ...) {
    const char *argv[16];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s && n < 16; s = va_arg(ap, const char *)) argv[n++] = s;
    va_end(ap);
    redisReply *rep = redisCommandArgv(C, n, argv, NULL);
    cr_assert(rep, "connection: %s", C->errstr);
    return rep;
}

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
static int runs_of(const char *id) {
    char *s = jrt_slurp(record);
    int n = 0;
    size_t l = strlen(id);
    for (char *p = s; p && *p;) {
        if (!strncmp(p, id, l) && p[l] == ' ') n++;
        char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
    }
    free(s);
    return n;
}

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
    const char *args[] = {"worker", "--redis", R.url, "--queue", "same", "--plugin", JRT_RECORD_PLUGIN, NULL};
    pid_t w = jrt_spawn(wlog, args);
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
