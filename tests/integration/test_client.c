/* libjobrunner (<jobrunner/client.h>) against a real redis-server, linked
 * to the shared library itself: a batch of 5,000 jobs over 40 queues in
 * random order lands exactly once; a key of the wrong type in the middle of
 * a batch refuses that queue's jobs only, and the caller learns which; bad
 * input is refused with a message and writes nothing; cancel, job show,
 * stats, pause and resume round trips; a lost Redis is reported job by job
 * and reconnected. JRT_SEED=n replays the random batch. */
#include <criterion/criterion.h>
#include <jobrunner/client.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>

#include "harness.h"

static jrt_redis_t R;
static redisContext *C; /* raw hiredis connection, to read back what was written */
static jr_client_t *J;

static void setup(void) {
    jrt_redis_start(&R, NULL);
    C = jrt_connect(&R);
    J = jr_client_connect(R.url, 5000, 10000);
    cr_assert(J);
    cr_assert_eq(jr_client_err(J), 0, "%s", jr_client_errstr(J));
}
static void teardown(void) {
    jr_client_free(J);
    if (C) redisFree(C);
    J = NULL, C = NULL;
    jrt_redis_stop(&R);
}

TestSuite(client, .init = setup, .fini = teardown, .timeout = 300);

/* A command of NUL-terminated words, NULL-terminated, on C. */
#define cmd(...) jrt_cmd(C, __VA_ARGS__)

/* Every key of the jobrunner data (not the library's lock). */
static long long data_keys(void) {
    redisReply *k = cmd("KEYS", "jr:*", NULL);
    long long n = 0;
    for (size_t i = 0; i < k->elements; i++)
        if (!strstr(k->element[i]->str, "{lib}")) n++;
    freeReplyObject(k);
    return n;
}

/* The value of field `name` in a stream entry's field array, or NULL. */
static const redisReply *entry_field(const redisReply *fields, const char *name) {
    for (size_t f = 0; f + 1 < fields->elements; f += 2)
        if (!strcmp(fields->element[f]->str, name)) return fields->element[f + 1];
    return NULL;
}

static unsigned rnd(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

Test(client, batch_of_5000_jobs_over_40_queues_lands_once) {
    enum { N = 5000, Q = 40 };
    unsigned seed = getenv("JRT_SEED") ? (unsigned)atoi(getenv("JRT_SEED")) : (unsigned)time(NULL);
    cr_log_info("JRT_SEED=%u", seed);
    static jr_client_job_t jobs[N];
    static jr_client_result_t res[N];
    static char queue[N][16], payload[N][32], id[N][32];
    static size_t plen[N];
    int delayed_of[Q] = {0};
    for (int i = 0; i < N; i++) {
        int q = (int)(rnd(&seed) % Q);
        snprintf(queue[i], sizeof queue[i], "q%02d", q);
        /* binary payloads: a NUL and a byte that is not UTF-8 around the number */
        plen[i] = (size_t)snprintf(payload[i], sizeof payload[i], "job%c%d%c", '\0', i, '\xff');
        jobs[i] = (jr_client_job_t){.queue = queue[i], .handler = "echo", .payload = payload[i],
                                    .payload_len = plen[i]};
        if (rnd(&seed) % 4 == 0) {
            jobs[i].delay_ms = 3600 * 1000; /* delayed an hour */
            delayed_of[q]++;
        }
        if (rnd(&seed) % 3 == 0) {
            snprintf(id[i], sizeof id[i], "job-%d", i);
            jobs[i].id = id[i];
        }
    }
    /* random batch sizes, 1..700 (some over the 1000-job call size when
     * one queue's jobs are many; the whole rest in the last batch) */
    for (int at = 0; at < N;) {
        int k = 1 + (int)(rnd(&seed) % 700);
        if (rnd(&seed) % 8 == 0) k = N; /* now and then, everything left */
        if (k > N - at) k = N - at;
        cr_assert_eq(jr_client_enqueue_many(J, jobs + at, (size_t)k, res + at), 0, "batch at %d: %s", at,
                     jr_client_errstr(J));
        at += k;
    }
    for (int i = 0; i < N; i++) {
        cr_assert_eq(res[i].status, JR_CLIENT_JOB_CREATED, "job %d: status %d", i, res[i].status);
        cr_assert_null(res[i].error);
        if (jobs[i].id) cr_assert_str_eq(res[i].id, jobs[i].id);
        else cr_assert(res[i].id[0], "job %d has no id", i);
    }
    /* Read every ready stream back: each job due now exactly once, in its
     * queue, in the order given. */
    static int seen[N];
    long long ready_total = 0, delayed_total = 0;
    for (int q = 0; q < Q; q++) {
        char key[32], name[8];
        snprintf(name, sizeof name, "q%02d", q);
        snprintf(key, sizeof key, "jr:{%s}:ready", name);
        redisReply *rep = cmd("XRANGE", key, "-", "+", NULL);
        cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
        int last = -1;
        for (size_t e = 0; e < rep->elements; e++) {
            const redisReply *f = rep->element[e]->element[1];
            const redisReply *p = entry_field(f, "p");
            cr_assert(p && p->len > 5 && !memcmp(p->str, "job\0", 4), "queue %s: a payload not ours", name);
            int i = atoi(p->str + 4);
            cr_assert(i >= 0 && i < N && (size_t)p->len == plen[i] && !memcmp(p->str, payload[i], plen[i]),
                      "queue %s: payload of job %d changed", name, i);
            cr_assert_str_eq(queue[i], name, "job %d landed in %s", i, name);
            cr_assert_eq(jobs[i].delay_ms, 0, "delayed job %d is ready", i);
            cr_assert_eq(seen[i]++, 0, "job %d landed twice", i);
            cr_assert_gt(i, last, "queue %s: job %d after job %d", name, i, last);
            last = i;
            const redisReply *jid = entry_field(f, "id");
            cr_assert_str_eq(jid ? jid->str : rep->element[e]->element[0]->str, res[i].id);
        }
        long long nready = (long long)rep->elements;
        ready_total += nready;
        freeReplyObject(rep);
        jr_client_stats_t s;
        cr_assert_eq(jr_client_stats(J, name, &s), 0, "%s", jr_client_errstr(J));
        cr_assert_eq(s.delayed, delayed_of[q], "queue %s: %lld delayed, expected %d", name, (long long)s.delayed,
                     delayed_of[q]);
        cr_assert_eq(s.ready, nready, "queue %s: stats say %lld ready", name, (long long)s.ready);
        delayed_total += s.delayed;
    }
    /* Each delayed job is where it should be, with its payload. */
    for (int i = 0; i < N; i++) {
        if (!jobs[i].delay_ms) {
            cr_assert_eq(seen[i], 1, "job %d did not land", i);
            continue;
        }
        jr_client_job_info_t *info;
        cr_assert_eq(jr_client_job_show(J, queue[i], res[i].id, &info), 0, "%s", jr_client_errstr(J));
        cr_assert_eq(info->state, JR_CLIENT_STATE_DELAYED, "job %d (%s): %s", i, res[i].id, info->state_name);
        cr_assert(info->payload_len == plen[i] && !memcmp(info->payload, payload[i], plen[i]),
                  "delayed job %d: payload", i);
        jr_client_job_info_free(info);
    }
    cr_assert_eq(ready_total + delayed_total, N, "%lld ready + %lld delayed", ready_total, delayed_total);
}

Test(client, wrong_type_key_refuses_that_queue_only_and_says_which_jobs) {
    enum { Q = 40, PER = 3, N = Q * PER };
    /* q17's ready stream is a string: Redis refuses the jobs of q17. */
    freeReplyObject(cmd("SET", "jr:{q17}:ready", "not a stream", NULL));
    jr_client_job_t jobs[N];
    jr_client_result_t res[N];
    char queue[N][8];
    unsigned seed = 17;
    for (int i = 0; i < N; i++) snprintf(queue[i], sizeof queue[i], "q%02d", i % Q);
    for (int i = N - 1; i > 0; i--) { /* shuffle: q17's jobs anywhere in the batch */
        int j = (int)(rnd(&seed) % (unsigned)(i + 1));
        char t[8];
        memcpy(t, queue[i], 8), memcpy(queue[i], queue[j], 8), memcpy(queue[j], t, 8);
    }
    for (int i = 0; i < N; i++) jobs[i] = (jr_client_job_t){.queue = queue[i], .handler = "echo", .payload = "x",
                                                          .payload_len = 1};
    int rc = jr_client_enqueue_many(J, jobs, N, res);
    cr_assert_eq(rc, JR_CLIENT_EREFUSED, "rc %d: %s", rc, jr_client_errstr(J));
    cr_assert(strstr(jr_client_errstr(J), "q17"), "the error does not name the queue: %s", jr_client_errstr(J));
    int refused = 0;
    for (int i = 0; i < N; i++) {
        if (!strcmp(queue[i], "q17")) {
            cr_assert_eq(res[i].status, JR_CLIENT_JOB_REFUSED, "job %d of q17: status %d", i, res[i].status);
            cr_assert(res[i].error && strstr(res[i].error, "q17") && strstr(res[i].error, "stream"),
                      "job %d: why: %s", i, res[i].error ? res[i].error : "(null)");
            cr_assert_str_eq(res[i].id, "");
            refused++;
        } else {
            cr_assert_eq(res[i].status, JR_CLIENT_JOB_CREATED, "job %d (%s): status %d: %s", i, queue[i],
                         res[i].status, res[i].error ? res[i].error : "");
            cr_assert(res[i].id[0]);
        }
    }
    cr_assert_eq(refused, PER);
    for (int q = 0; q < Q; q++) {
        if (q == 17) continue;
        char key[32];
        snprintf(key, sizeof key, "jr:{q%02d}:ready", q);
        cr_assert_eq(jrt_int(C, "XLEN %s", key), PER, "%s", key);
    }
    redisReply *g = cmd("GET", "jr:{q17}:ready", NULL);
    cr_assert_str_eq(g->str, "not a stream", "the refused queue's key was changed");
    freeReplyObject(g);
    cr_assert_eq(jrt_int(C, "EXISTS jr:{q17}:delayed"), 0);
    /* The handle stays usable: once the key is fixed, the same jobs go. */
    freeReplyObject(cmd("DEL", "jr:{q17}:ready", NULL));
    jr_client_result_t one;
    jr_client_job_t j = {.queue = "q17", .handler = "echo"};
    cr_assert_eq(jr_client_enqueue(J, &j, &one), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(one.status, JR_CLIENT_JOB_CREATED);
    cr_assert_str_eq(jr_client_errstr(J), "");
}

/* A bad job: the call is refused with a message naming the job and what is
 * wrong, every result says so, and nothing is written. */
static void expect_refused(const char *what, jr_client_job_t bad, const char *needle) {
    jr_client_job_t jobs[3] = {{.queue = "a", .handler = "echo"}, bad, {.queue = "b", .handler = "echo", .id = "x1"}};
    jr_client_result_t res[3];
    int rc = jr_client_enqueue_many(J, jobs, 3, res);
    cr_expect_eq(rc, JR_CLIENT_EINVAL, "%s: rc %d", what, rc);
    const char *e = jr_client_errstr(J);
    cr_expect(strstr(e, "job 2") && strstr(e, needle), "%s: message \"%s\" lacks \"job 2\" or \"%s\"", what, e,
              needle);
    cr_expect_eq(res[1].status, JR_CLIENT_JOB_REFUSED, "%s", what);
    cr_expect(res[1].error && strstr(res[1].error, needle), "%s: %s", what, res[1].error ? res[1].error : "");
    cr_expect_eq(res[0].status, JR_CLIENT_JOB_NOT_SENT, "%s", what);
    cr_expect_eq(res[2].status, JR_CLIENT_JOB_NOT_SENT, "%s", what);
    cr_expect(res[0].error && strstr(res[0].error, "not sent"), "%s", what);
    cr_expect_str_eq(res[2].id, "x1");
    cr_expect_eq(data_keys(), 0, "%s: something was written", what);
}

Test(client, bad_input_is_refused_with_a_message_and_writes_nothing) {
    expect_refused("no handler", (jr_client_job_t){.queue = "a"}, "handler");
    expect_refused("empty handler", (jr_client_job_t){.queue = "a", .handler = ""}, "handler");
    expect_refused("bad queue", (jr_client_job_t){.queue = "a b", .handler = "echo"}, "queue name");
    expect_refused("reserved id", (jr_client_job_t){.handler = "echo", .id = "d1764581403250-1"}, "reserved");
    char longid[200];
    memset(longid, 'i', sizeof longid - 1), longid[sizeof longid - 1] = '\0';
    expect_refused("long id", (jr_client_job_t){.handler = "echo", .id = longid}, "longer than 158");
    expect_refused("negative delay", (jr_client_job_t){.handler = "echo", .delay_ms = -1}, "delay");
    expect_refused("delay > 10y", (jr_client_job_t){.handler = "echo", .delay_ms = 3651LL * 86400000}, "delay");
    expect_refused("attempts", (jr_client_job_t){.handler = "echo", .max_attempts = 1001}, "max_attempts");
    expect_refused("negative attempts", (jr_client_job_t){.handler = "echo", .max_attempts = -1}, "max_attempts");
    expect_refused("timeout", (jr_client_job_t){.handler = "echo", .timeout_ms = 8 * 86400000LL}, "timeout");
    expect_refused("backoff", (jr_client_job_t){.handler = "echo", .backoff_ms = -5}, "backoff");
    expect_refused("uniq", (jr_client_job_t){.handler = "echo", .uniq_ms = -1}, "idempotency window");
    expect_refused("payload", (jr_client_job_t){.handler = "echo", .payload_len = 3}, "payload");
    expect_refused("at", (jr_client_job_t){.handler = "echo", .at_ms = -2}, "at_ms");

    /* other calls */
    jr_client_cancel_t o;
    cr_expect_eq(jr_client_cancel(J, "bad queue", "x", &o), JR_CLIENT_EINVAL);
    cr_expect(strstr(jr_client_errstr(J), "queue name"), "%s", jr_client_errstr(J));
    cr_expect_eq(jr_client_cancel(J, NULL, "", &o), JR_CLIENT_EINVAL);
    cr_expect(strstr(jr_client_errstr(J), "job id"), "%s", jr_client_errstr(J));
    jr_client_job_info_t *info = (void *)1;
    cr_expect_eq(jr_client_job_show(J, "q", NULL, &info), JR_CLIENT_EINVAL);
    cr_expect_null(info);
    cr_expect_eq(jr_client_pause(J, "", NULL), 0, "an empty queue name is the default queue");
    cr_expect_eq(jr_client_resume(J, NULL, NULL), 0);
    cr_expect_eq(jr_client_pause(J, "no/slash", NULL), JR_CLIENT_EINVAL);
    jr_client_stats_t s;
    cr_expect_eq(jr_client_stats(J, "x y", &s), JR_CLIENT_EINVAL);
    cr_expect_eq(jr_client_enqueue(J, NULL, NULL), JR_CLIENT_EINVAL);
    cr_expect_eq(data_keys(), 0, "something was written");

    /* connect */
    jr_client_t *c = jr_client_connect("http://x", 0, 0);
    cr_assert(c);
    cr_expect_eq(jr_client_err(c), JR_CLIENT_EINVAL);
    cr_expect(strstr(jr_client_errstr(c), "http://x"), "%s", jr_client_errstr(c));
    jr_client_free(c);
    c = jr_client_connect(R.url, -1, 0);
    cr_expect_eq(jr_client_err(c), JR_CLIENT_EINVAL);
    cr_expect(strstr(jr_client_errstr(c), "timeouts"), "%s", jr_client_errstr(c));
    jr_client_job_t j = {.handler = "echo"};
    cr_expect_eq(jr_client_enqueue(c, &j, NULL), JR_CLIENT_ECONNECT, "a client with bad timeouts connected");
    jr_client_free(c);
    cr_expect_eq(data_keys(), 0, "something was written");
}

Test(client, enqueue_show_cancel_stats_pause_resume_round_trip) {
    /* a delayed job with every option, binary payload */
    static const char pl[] = {'c', 'a', 'f', '\xc3', '\xa9', '\0', '\xff', 'z'};
    jr_client_job_t j = {.queue = "mail", .handler = "send_mail", .payload = pl, .payload_len = sizeof pl,
                         .id = "close-1042", .delay_ms = 60000, .max_attempts = 5, .timeout_ms = 30000,
                         .backoff_ms = 2000, .uniq_ms = 1000};
    jr_client_result_t r;
    cr_assert_eq(jr_client_enqueue(J, &j, &r), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(r.status, JR_CLIENT_JOB_CREATED);
    cr_assert_str_eq(r.id, "close-1042");
    cr_assert_eq(jr_client_enqueue(J, &j, &r), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(r.status, JR_CLIENT_JOB_EXISTED, "the same id was enqueued twice");
    double now = (double)jrt_wall_us() / 1000.0;

    jr_client_job_info_t *in;
    cr_assert_eq(jr_client_job_show(J, "mail", "close-1042", &in), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(in->state, JR_CLIENT_STATE_DELAYED);
    cr_assert_str_eq(in->state_name, "delayed");
    cr_assert_str_eq(in->queue, "mail");
    cr_assert_str_eq(in->id, "close-1042");
    cr_assert(in->due_ms > now + 50000 && in->due_ms < now + 61000, "due %.3f, now %.3f", in->due_ms, now);
    cr_assert(in->handler && in->handler_len == 9 && !memcmp(in->handler, "send_mail", 9));
    cr_assert(in->payload_len == sizeof pl && !memcmp(in->payload, pl, sizeof pl), "payload changed");
    cr_assert_eq(in->attempt, 1);
    cr_assert_eq(in->max_attempts, 5);
    cr_assert_eq(in->timeout_ms, 30000);
    cr_assert_eq(in->backoff_ms, 2000);
    cr_assert_null(in->error);
    cr_assert_str_eq(in->consumer, "");
    cr_assert_eq(in->deliveries, -1);
    cr_assert_gt(in->nfields, 2);
    jr_client_job_info_free(in);

    jr_client_stats_t s;
    cr_assert_eq(jr_client_stats(J, "mail", &s), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(s.delayed, 1);
    cr_assert_eq(s.ready, 0);
    cr_assert_eq(s.paused, 0);
    cr_assert_eq(s.paused_since_ms, -1);

    jr_client_cancel_t o;
    cr_assert_eq(jr_client_cancel(J, "mail", "close-1042", &o), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(o, JR_CLIENT_CANCELLED);
    cr_assert_eq(jr_client_cancel(J, "mail", "close-1042", &o), 0);
    cr_assert_eq(o, JR_CLIENT_CANCEL_NOT_FOUND);
    cr_assert_eq(jr_client_job_show(J, "mail", "close-1042", &in), 0);
    cr_assert_eq(in->state, JR_CLIENT_STATE_NOT_FOUND);
    cr_assert_str_eq(in->state_name, "not found");
    cr_assert_eq(in->nfields, 0);
    cr_assert_null(in->handler);
    jr_client_job_info_free(in);
    cr_assert_eq(jr_client_stats(J, "mail", &s), 0);
    cr_assert_eq(s.delayed, 0);
    /* cancelled: the id stays taken for its idempotency window (a
     * tombstone, issue 18 §2), so the same enqueue makes nothing */
    cr_assert_eq(jr_client_enqueue(J, &j, &r), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(r.status, JR_CLIENT_JOB_EXISTED);
    cr_assert_eq(jr_client_stats(J, "mail", &s), 0);
    cr_assert_eq(s.delayed + s.ready, 0);

    /* a ready job of the default queue, then taken by a "worker" (running) */
    jr_client_job_t k = {.handler = "echo", .payload = "hi", .payload_len = 2};
    cr_assert_eq(jr_client_enqueue(J, &k, &r), 0, "%s", jr_client_errstr(J));
    char rid[JR_CLIENT_ID_MAX];
    snprintf(rid, sizeof rid, "%s", r.id);
    cr_assert_eq(jr_client_job_show(J, NULL, rid, &in), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(in->state, JR_CLIENT_STATE_READY, "%s", in->state_name);
    cr_assert_str_eq(in->entry, rid);
    cr_assert_str_eq(in->queue, "default");
    cr_assert_eq(in->due_ms, -1);
    jr_client_job_info_free(in);
    cr_assert_eq(jr_client_stats(J, NULL, &s), 0);
    cr_assert_eq(s.ready, 1);
    cr_assert_geq(s.oldest_ready_ms, 0);
    freeReplyObject(cmd("XREADGROUP", "GROUP", "jr", "host-1", "COUNT", "1", "STREAMS", "jr:{default}:ready", ">",
                        NULL));
    cr_assert_eq(jr_client_job_show(J, "default", rid, &in), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(in->state, JR_CLIENT_STATE_RUNNING, "%s", in->state_name);
    cr_assert_str_eq(in->consumer, "host-1");
    cr_assert_eq(in->deliveries, 1);
    cr_assert_geq(in->idle_ms, 0);
    jr_client_job_info_free(in);
    cr_assert_eq(jr_client_cancel(J, NULL, rid, &o), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(o, JR_CLIENT_CANCEL_RUNNING);
    cr_assert_eq(jr_client_stats(J, "default", &s), 0);
    cr_assert_eq(s.pending, 1);

    /* pause and resume */
    int changed = -1;
    int64_t before = jrt_wall_us() / 1000;
    cr_assert_eq(jr_client_pause(J, "mail", &changed), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(changed, 1);
    cr_assert_eq(jr_client_pause(J, "mail", &changed), 0);
    cr_assert_eq(changed, 0, "paused twice");
    cr_assert_eq(jr_client_stats(J, "mail", &s), 0);
    cr_assert_eq(s.paused, 1);
    cr_assert(s.paused_since_ms >= before - 1000 && s.paused_since_ms <= jrt_wall_us() / 1000 + 1000);
    cr_assert_eq(jr_client_stats(J, "default", &s), 0);
    cr_assert_eq(s.paused, 0, "another queue paused");
    cr_assert_eq(jr_client_resume(J, "mail", &changed), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(changed, 1);
    cr_assert_eq(jr_client_resume(J, "mail", &changed), 0);
    cr_assert_eq(changed, 0);
    cr_assert_eq(jr_client_stats(J, "mail", &s), 0);
    cr_assert_eq(s.paused, 0);
}

Test(client, a_lost_redis_is_told_job_by_job_and_reconnected) {
    jr_client_job_t jobs[3] = {{.queue = "a", .handler = "echo"}, {.queue = "b", .handler = "echo"},
                               {.queue = "a", .handler = "echo", .id = "keep"}};
    jr_client_result_t res[3];
    cr_assert_eq(jr_client_enqueue_many(J, jobs, 3, res), 0, "%s", jr_client_errstr(J));
    jrt_stop(R.pid, SIGKILL, 5000); /* gone, like a crash (its data with it: no persistence) */
    int rc = jr_client_enqueue_many(J, jobs, 3, res);
    cr_assert(rc == JR_CLIENT_ECONNECT || rc == JR_CLIENT_ETIMEOUT, "rc %d: %s", rc, jr_client_errstr(J));
    cr_assert(jr_client_errstr(J)[0]);
    for (int i = 0; i < 3; i++) {
        cr_assert(res[i].status == JR_CLIENT_JOB_NOT_SENT || res[i].status == JR_CLIENT_JOB_UNKNOWN,
                  "job %d: status %d", i, res[i].status);
        cr_assert(res[i].error && res[i].error[0], "job %d: no reason", i);
    }
    /* Later calls reconnect, to the new server on the same socket. */
    redisFree(C);
    C = NULL;
    jrt_redis_restart(&R, NULL);
    C = jrt_connect(&R);
    jr_client_stats_t s;
    cr_assert_eq(jr_client_stats(J, "a", &s), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(jr_client_enqueue_many(J, jobs, 3, res), 0, "%s", jr_client_errstr(J));
    for (int i = 0; i < 3; i++) cr_assert_eq(res[i].status, JR_CLIENT_JOB_CREATED, "job %d", i);
    cr_assert_eq(jrt_int(C, "XLEN jr:{a}:ready"), 2);
}

/* Garbage in the registry (issue 18, class 1) costs the registration, not
 * the enqueue. */
Test(client, a_registry_holding_garbage_refuses_no_enqueue_and_the_queue_is_registered_once_fixed) {
    freeReplyObject(cmd("SET", "jr:{queues}", "not a set", NULL));
    jr_client_job_t j = {.queue = "reg", .handler = "echo"};
    jr_client_result_t r;
    int rc = jr_client_enqueue(J, &j, &r);
    cr_assert_eq(rc, 0, "rc %d: %s", rc, jr_client_errstr(J));
    cr_assert_eq(r.status, JR_CLIENT_JOB_CREATED, "the job was written: its result must say so");
    cr_assert_eq(jrt_int(C, "XLEN jr:{reg}:ready"), 1);
    /* Registration is tried again on the next enqueue, and works once the
     * key is fixed. */
    freeReplyObject(cmd("DEL", "jr:{queues}", NULL));
    cr_assert_eq(jr_client_enqueue(J, &j, &r), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(jrt_int(C, "SISMEMBER jr:{queues} reg"), 1);
}

/* A batch of one queue goes out as pipelined calls of 1,000 jobs (call k+1
 * sent before call k's answer is read). Jobs 1,001-2,000 fall due in a time
 * wheel bucket whose key holds a string: Redis refuses that middle call
 * only; the first and the third calls' jobs are written, and each result
 * says which. */
Test(client, a_refused_middle_call_of_a_pipelined_batch_refuses_its_jobs_only) {
    enum { N = 3000, PER = 1000 };
    static jr_client_job_t jobs[N];
    static jr_client_result_t res[N];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long base = ((long long)ts.tv_sec + 3600) * 1000; /* a whole second: the start of its bucket */
    char bucket[64];
    snprintf(bucket, sizeof bucket, "jr:{bulk}:wheel:%lld", base + 3600000);
    freeReplyObject(cmd("SET", bucket, "not a list", NULL));
    for (int i = 0; i < N; i++)
        jobs[i] = (jr_client_job_t){.queue = "bulk", .handler = "echo", .payload = "x", .payload_len = 1,
                                    .at_ms = base + (long long)(i / PER) * 3600000};
    int rc = jr_client_enqueue_many(J, jobs, N, res);
    cr_assert_eq(rc, JR_CLIENT_EREFUSED, "rc %d: %s", rc, jr_client_errstr(J));
    for (int i = 0; i < N; i++) {
        if (i / PER == 1) {
            cr_assert_eq(res[i].status, JR_CLIENT_JOB_REFUSED, "job %d: status %d", i, res[i].status);
            cr_assert(res[i].error && strstr(res[i].error, bucket) && strstr(res[i].error, "1000 jobs"),
                      "job %d: why: %s", i, res[i].error ? res[i].error : "(null)");
            cr_assert_str_eq(res[i].id, "");
        } else {
            cr_assert_eq(res[i].status, JR_CLIENT_JOB_CREATED, "job %d: status %d: %s", i, res[i].status,
                         res[i].error ? res[i].error : "");
        }
    }
    char key[64];
    snprintf(key, sizeof key, "jr:{bulk}:wheel:%lld", base);
    cr_assert_eq(jrt_int(C, "LLEN %s", key), PER);
    snprintf(key, sizeof key, "jr:{bulk}:wheel:%lld", base + 7200000);
    cr_assert_eq(jrt_int(C, "LLEN %s", key), PER);
    redisReply *g = cmd("GET", "jr:{bulk}:wheel:n", NULL);
    cr_assert(g->type == REDIS_REPLY_STRING && atoll(g->str) == 2 * PER, "jobs counted in the wheel");
    freeReplyObject(g);
    g = cmd("GET", bucket, NULL);
    cr_assert_str_eq(g->str, "not a list", "the refused bucket's key was changed");
    freeReplyObject(g);
    jr_client_job_info_t *info;
    for (int i = 0; i < N; i += 999) {
        if (i / PER == 1) continue;
        cr_assert_eq(jr_client_job_show(J, "bulk", res[i].id, &info), 0, "%s", jr_client_errstr(J));
        cr_assert_eq(info->state, JR_CLIENT_STATE_DELAYED, "job %d (%s): %s", i, res[i].id, info->state_name);
        jr_client_job_info_free(info);
    }
}

/* A generated delayed id carries the job's number in plain digits, also past
 * 10^14 (Lua's own formatting would write 1e+14), so the id returned is the
 * id the job is found by. */
Test(client, a_generated_delayed_id_past_1e14_is_the_id_the_job_is_found_by) {
    freeReplyObject(cmd("SET", "jr:{big}:seq", "99999999999998", NULL));
    jr_client_job_t jobs[3];
    jr_client_result_t res[3];
    for (int i = 0; i < 3; i++)
        jobs[i] = (jr_client_job_t){.queue = "big", .handler = "echo", .delay_ms = 3600000};
    cr_assert_eq(jr_client_enqueue_many(J, jobs, 2, res), 0, "%s", jr_client_errstr(J));
    cr_assert_eq(jr_client_enqueue(J, &jobs[2], &res[2]), 0, "%s", jr_client_errstr(J));
    const char *tail[3] = {"-99999999999999", "-100000000000000", "-100000000000001"};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(res[i].id), t = strlen(tail[i]);
        cr_assert(l > t && !strcmp(res[i].id + l - t, tail[i]), "job %d: id %s", i, res[i].id);
        jr_client_job_info_t *info;
        cr_assert_eq(jr_client_job_show(J, "big", res[i].id, &info), 0, "%s", jr_client_errstr(J));
        cr_assert_eq(info->state, JR_CLIENT_STATE_DELAYED, "job %d (%s): %s", i, res[i].id, info->state_name);
        jr_client_job_info_free(info);
    }
}
