/* Finished jobs and their results (issue 22 §2), against a real Redis with
 * real worker processes running the finished plugin (finished_job.c):
 * keep_finished records for ok, dead and cancelled jobs with every field,
 * written in the acknowledgement's call; the cap by count and by age (with
 * the index job show reads); nothing written without keep_finished;
 * api->set_result round trips (text, binary, too large: refused); `job
 * wait` answering at once, blocking until a worker finishes the job, timing
 * out, ending when the job is cancelled before it ran, and saying when a job
 * is unknown. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

JRT_RECORDED_SUITE(finished, .timeout = 120);

static pid_t start_worker(const char *queue) {
    return jrt_worker(&R, cfgpath, JRT_FINISHED_PLUGIN, wlog, (const char *[]){"-q", queue, NULL});
}

/* Enqueue a job of `handler` with `payload` on `queue` (the CLI); its id into id. */
static void enqueue(char *id, const char *queue, const char *handler, const char *payload) {
    jrt_cli_enqueue(&R, cfgpath, (const char *[]){"-q", queue, handler, payload, NULL}, id, 128);
}

/* The fields of job id's finished record as "name=value\n..." (values as
 * stored), "" if it has none: read through the index jr:{Q}:finished:ids,
 * as job show does. */
static const char *record_of(redisContext *c, const char *queue, const char *id) {
    static char out[8192];
    out[0] = '\0';
    char key[256];
    snprintf(key, sizeof key, "jr:{%s}:finished:ids", queue);
    redisReply *at = jrt_cmd(c, "HGET", key, id, NULL);
    if (at->type == REDIS_REPLY_STRING) {
        snprintf(key, sizeof key, "jr:{%s}:finished", queue);
        redisReply *e = jrt_cmd(c, "XRANGE", key, at->str, at->str, NULL);
        if (e->type == REDIS_REPLY_ARRAY && e->elements == 1) {
            const redisReply *f = e->element[0]->element[1];
            size_t n = 0;
            for (size_t i = 0; i + 1 < f->elements; i += 2)
                n += (size_t)snprintf(out + n, sizeof out - n, "%s=%.*s\n", f->element[i]->str,
                                      (int)f->element[i + 1]->len, f->element[i + 1]->str);
        }
        freeReplyObject(e);
    }
    freeReplyObject(at);
    return out;
}

struct rec_arg {
    redisContext *c;
    const char *queue, *id;
};
static int has_record(const void *p) {
    const struct rec_arg *a = p;
    return record_of(a->c, a->queue, a->id)[0] != '\0';
}
/* Wait (up to 20 s) until job id of queue has its record; returns it. */
static const char *wait_record_of(redisContext *c, const char *queue, const char *id) {
    struct rec_arg a = {c, queue, id};
    cr_assert(jrt_wait_for(20000, 20, has_record, &a), "no finished record of %s in %s", id, queue);
    return record_of(c, queue, id);
}

/* The value of field `name` in a record_of text (static), NULL if absent. */
static const char *field(const char *rec, const char *name) {
    static char v[4200];
    char want[64];
    snprintf(want, sizeof want, "%s=", name);
    for (const char *p = rec; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (!strncmp(p, want, strlen(want))) {
            const char *s = p + strlen(want), *e = strchr(s, '\n');
            snprintf(v, sizeof v, "%.*s", (int)(e ? e - s : (long)strlen(s)), s);
            return v;
        }
    }
    return NULL;
}

static long long xlen(redisContext *c, const char *key) { return jrt_int(c, "XLEN %s", key); }

/* ---- the records ---- */

Test(finished, records_ok_dead_and_cancelled_jobs_with_every_field) {
    jrt_config(&R, "queues:\n  orders: {keep_finished: {count: 100, age: 1h}}\n", cfgpath, sizeof cfgpath);
    pid_t w = start_worker("orders");
    redisContext *c = jrt_connect(&R);
    char ok[128], dead[128], gated[128], out[4096];
    long long t0 = jrt_redis_ms(c);
    enqueue(ok, "orders", "answer", "order 1042 closed");
    /* ok ends before dead starts: the listing below is newest first, and two
     * jobs of one fetch run at once and end in either order */
    wait_record_of(c, "orders", ok);
    enqueue(dead, "orders", "boom", "x");
    enqueue(gated, "orders", "gate", "x");
    /* the gated job runs until cancelled */
    cr_assert(jrt_wait_count(wlog, "worker starting", 1, 20000) >= 1);
    for (int i = 0; i < 200; i++) {
        jrt_cli(&R, out, sizeof out, (const char *[]){"job", "show", "-q", "orders", gated, NULL});
        if (strstr(out, "state: running")) break;
        jrt_sleep_ms(50);
    }
    cr_assert(strstr(out, "state: running"), "%s", out);
    jrt_cli(&R, out, sizeof out, (const char *[]){"cancel", "-q", "orders", gated, NULL});
    cr_expect(strstr(out, "running"), "%s", out);

    const char *r = wait_record_of(c, "orders", ok);
    cr_expect_str_eq(field(r, "id"), ok);
    cr_expect_str_eq(field(r, "h"), "answer");
    cr_expect_str_eq(field(r, "outcome"), "ok");
    cr_expect_str_eq(field(r, "a"), "1");
    cr_expect(field(r, "duration_ms") && strtod(field(r, "duration_ms"), NULL) >= 0, "%s", r);
    char host[64];
    gethostname(host, sizeof host);
    cr_expect(field(r, "worker") && !strncmp(field(r, "worker"), host, strlen(host)), "worker of %s", r);
    cr_expect(field(r, "finished_at") && atoll(field(r, "finished_at")) >= t0, "finished_at of %s (t0 %lld)", r, t0);
    cr_expect_str_eq(field(r, "result"), "order 1042 closed");
    cr_expect_null(field(r, "err"), "%s", r);

    r = wait_record_of(c, "orders", dead);
    cr_expect_str_eq(field(r, "outcome"), "failed");
    cr_expect_str_eq(field(r, "h"), "boom");
    cr_expect(field(r, "err") && strstr(field(r, "err"), "boom"), "%s", r);
    cr_expect_str_eq(field(r, "result"), "partial");
    cr_expect(field(r, "worker") && field(r, "duration_ms") && field(r, "finished_at"), "%s", r);

    r = wait_record_of(c, "orders", gated);
    cr_expect_str_eq(field(r, "outcome"), "cancelled");
    cr_expect_str_eq(field(r, "h"), "gate");
    cr_expect(field(r, "duration_ms") && strtod(field(r, "duration_ms"), NULL) > 0, "%s", r);

    /* job show finds a finished job by its id: state finished, with the record */
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "show", "-q", "orders", ok, NULL}), 0, "%s", out);
    cr_expect(strstr(out, "state: finished") && strstr(out, "outcome: ok") && strstr(out, "result: order 1042 closed"),
              "%s", out);
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "show", "-q", "orders", ok, "--json", NULL}), 0,
                 "%s", out);
    cr_expect(strstr(out, "\"state\":\"finished\"") && strstr(out, "\"outcome\":\"ok\"") &&
                  strstr(out, "\"result\":\"order 1042 closed\""),
              "%s", out);
    /* and jobs --state finished lists them, newest first */
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"jobs", "-q", "orders", "--state", "finished", NULL}), 0,
                 "%s", out);
    char *pok = strstr(out, ok), *pdead = strstr(out, dead);
    cr_expect(pok && pdead && pdead < pok, "finished page, newest first: %s", out);
    redisFree(c);
    jrt_stop(w, SIGTERM, 10000);
}

Test(finished, the_cap_holds_by_count_and_by_age_with_the_index) {
    jrt_config(&R, "queues:\n  few: {keep_finished: {count: 3}}\n  young: {keep_finished: {count: 100, age: 1s}}\n",
               cfgpath, sizeof cfgpath);
    pid_t w1 = start_worker("few"), w2 = start_worker("young");
    redisContext *c = jrt_connect(&R);
    char ids[6][128], out[4096];
    for (int i = 0; i < 6; i++) {
        char p[16];
        snprintf(p, sizeof p, "r%d", i);
        enqueue(ids[i], "few", "answer", p);
        wait_record_of(c, "few", ids[i]); /* one after another: the order is known */
    }
    cr_expect_eq(xlen(c, "jr:{few}:finished"), 3);
    cr_expect_eq(jrt_int(c, "HLEN jr:{few}:finished:ids"), 3);
    cr_expect_str_eq(record_of(c, "few", ids[2]), "", "the 3rd oldest is trimmed, and its index entry with it");
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "show", "-q", "few", ids[0], NULL}), 1, "%s", out);
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "show", "-q", "few", ids[5], NULL}), 0, "%s", out);

    char a[128], b[128], d[128];
    enqueue(a, "young", "answer", "a");
    enqueue(b, "young", "answer", "b");
    wait_record_of(c, "young", a);
    wait_record_of(c, "young", b);
    jrt_sleep_ms(1300); /* past the age */
    enqueue(d, "young", "answer", "d");
    wait_record_of(c, "young", d);
    cr_expect_eq(xlen(c, "jr:{young}:finished"), 1, "records older than 1 s are trimmed with the next one");
    cr_expect_eq(jrt_int(c, "HLEN jr:{young}:finished:ids"), 1);
    cr_expect_str_eq(record_of(c, "young", a), "");
    redisFree(c);
    jrt_stop(w1, SIGTERM, 10000);
    jrt_stop(w2, SIGTERM, 10000);
}

Test(finished, off_by_default_nothing_is_written) {
    jrt_config(&R, "", cfgpath, sizeof cfgpath);
    pid_t w = start_worker("plain");
    redisContext *c = jrt_connect(&R);
    char id[128], out[4096];
    enqueue(id, "plain", "answer", "x");
    jr_qstats_t s = jrt_wait_settled(&R, "plain", 0, 20000);
    cr_assert_eq(s.processed, 1);
    cr_expect_eq(jrt_int(c, "EXISTS jr:{plain}:finished jr:{plain}:finished:ids jr:{plain}:waiters jr:{plain}:done"), 0);
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "show", "-q", "plain", id, NULL}), 1, "%s", out);
    cr_expect(strstr(out, "state: not found"), "%s", out);
    redisFree(c);
    jrt_stop(w, SIGTERM, 10000);
}

Test(finished, a_handler_keeps_finished_in_a_queue_that_does_not) {
    jrt_config(&R, "handlers:\n  answer: {keep_finished: {count: 10}}\n", cfgpath, sizeof cfgpath);
    pid_t w = start_worker("mixed");
    redisContext *c = jrt_connect(&R);
    char kept[128], not_kept[128];
    enqueue(kept, "mixed", "answer", "yes");
    enqueue(not_kept, "mixed", "bin", "no");
    wait_record_of(c, "mixed", kept);
    jrt_wait_settled(&R, "mixed", 0, 20000);
    cr_expect_eq(xlen(c, "jr:{mixed}:finished"), 1);
    cr_expect_str_eq(record_of(c, "mixed", not_kept), "");
    redisFree(c);
    jrt_stop(w, SIGTERM, 10000);
}

/* ---- api->set_result ---- */

Test(finished, set_result_round_trips_and_a_too_large_one_is_refused) {
    jrt_config(&R, "queues:\n  res: {keep_finished: {count: 10}}\n", cfgpath, sizeof cfgpath);
    pid_t w = start_worker("res");
    redisContext *c = jrt_connect(&R);
    char big[128], bin[128], out[8192];
    enqueue(big, "res", "answer", "big");
    enqueue(bin, "res", "bin", "x");
    cr_expect_str_eq(field(wait_record_of(c, "res", big), "result"), "refused=-1",
                     "a result over JR_RESULT_MAX is refused (-1), the result set after it kept");
    cr_expect(jrt_count(wlog, "set_result refused: 4097 bytes, the most is 4096") >= 1, "the refusal is logged");
    wait_record_of(c, "res", bin);
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "show", "-q", "res", bin, NULL}), 0, "%s", out);
    cr_expect(strstr(out, "result: \\xff\\xfe"), "binary result shown escaped: %s", out);
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "wait", "-q", "res", bin, "--json", NULL}), 0,
                 "%s", out);
    cr_expect(strstr(out, "\"result\":{\"base64\":\"//4=\"}"), "binary result as base64 in JSON: %s", out);
    redisFree(c);
    jrt_stop(w, SIGTERM, 10000);
}

/* ---- job wait ---- */

Test(finished, job_wait_answers_at_once_blocks_until_the_end_and_times_out) {
    jrt_config(&R, "queues:\n  kept: {keep_finished: {count: 10}}\n", cfgpath, sizeof cfgpath);
    pid_t wk = start_worker("kept"), wp = start_worker("plain");
    redisContext *c = jrt_connect(&R);
    char done[128], later[128], never[128], out[4096];
    /* finished before the wait (kept): answered at once */
    enqueue(done, "kept", "answer", "first");
    wait_record_of(c, "kept", done);
    int64_t t = jrt_wall_us();
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "wait", "-q", "kept", done, NULL}), 0, "%s", out);
    cr_expect(strstr(out, "outcome: ok") && strstr(out, "result: first"), "%s", out);
    cr_expect_lt(jrt_wall_us() - t, 5000000, "no wait for a finished job");

    /* a job of a queue without keep_finished, finished later by its worker:
     * the wait blocks until then, and returns its outcome and result */
    char go[256];
    snprintf(go, sizeof go, "%s.go", record);
    unlink(go);
    enqueue(later, "plain", "gate", "x");
    pid_t opener = fork();
    if (opener == 0) { /* let the job end 1.5 s after the wait began */
        usleep(1500000);
        FILE *f = fopen(go, "w");
        if (f) fclose(f);
        _exit(0);
    }
    t = jrt_wall_us();
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "wait", "-q", "plain", later, "--timeout", "20s", NULL}),
                 0, "%s", out);
    int64_t waited = jrt_wall_us() - t;
    cr_expect(strstr(out, "outcome: ok") && strstr(out, "result: gated"), "%s", out);
    cr_expect_geq(waited, 1400000, "it waited for the job (%lld us)", (long long)waited);
    jrt_stop(opener, 0, 5000);
    cr_expect_eq(jrt_int(c, "HLEN jr:{plain}:waiters"), 0, "the waiter is gone with the job");

    /* a job that does not finish in time: exit 3, said on stderr */
    unlink(go);
    enqueue(never, "plain", "gate", "x");
    char err[1024];
    const char *args[] = {"job", "wait", "-c", cfgpath, "-q", "plain", never, "--timeout", "300ms", NULL};
    int st = jrt_run(out, sizeof out, err, sizeof err, args);
    cr_expect_eq(st, 3, "exit %d: %s %s", st, out, err);
    cr_expect(strstr(err, "timeout") && strstr(err, never), "%s", err);
    FILE *f = fopen(go, "w"); /* let it end */
    if (f) fclose(f);

    /* a waiting job cancelled while someone waits for it: the wait ends, cancelled */
    char later2[128];
    jrt_cli_enqueue(&R, cfgpath, (const char *[]){"-q", "plain", "--in", "1h", "answer", "x", NULL}, later2, 128);
    pid_t canceller = fork();
    if (canceller == 0) {
        usleep(1000000);
        const char *cargs[] = {"cancel", "-c", cfgpath, "-q", "plain", later2, NULL};
        char o[256];
        _exit(jrt_run(o, sizeof o, NULL, 0, cargs) == 0 ? 0 : 1);
    }
    t = jrt_wall_us();
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "wait", "-q", "plain", later2, "--timeout", "20s", NULL}),
                 1, "%s", out);
    cr_expect(strstr(out, "outcome: cancelled") && strstr(out, "cancelled before it ran"), "%s", out);
    cr_expect_lt(jrt_wall_us() - t, 15000000, "the cancel ended the wait");
    cr_expect_eq(jrt_stop(canceller, 0, 10000), 0, "the cancel");

    /* unknown: never there (or finished without keep_finished before the wait) */
    cr_expect_eq(jrt_cli(&R, out, sizeof out, (const char *[]){"job", "wait", "-q", "plain", "no-such-job", NULL}), 1,
                 "%s", out);
    cr_expect(strstr(out, "outcome: unknown") && strstr(out, "cannot be told apart"), "%s", out);
    redisFree(c);
    jrt_stop(wk, SIGTERM, 10000);
    jrt_stop(wp, SIGTERM, 10000);
}
