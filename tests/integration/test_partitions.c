/* Partitioned queues (issue 21, "One hot queue over N shards") on a single
 * real Redis, with real CLI, worker and scheduler processes: setting the
 * count (refused while the queue holds jobs, a no-op for the same count,
 * allowed on an empty queue; from the CLI, the client library and the
 * configuration), 1,000 jobs with and without ids and keys through the CLI
 * and the client library run exactly once by a worker over the queue and
 * spread over the partitions, one key's jobs in one partition and in
 * order, job show / cancel of generated and explicit ids in a constant
 * number of Redis calls whatever the count, stats summed over the
 * partitions, pause of every partition, and the names users may not give. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jobrunner/client.h>

#include "contract.h"
#include "harness.h"
#include "jr.h"
#include "partition.h"
#include "redis_partition.h"

JRT_RECORDED_SUITE(partitions, .timeout = 240);

/* The internal names of the n partitions of q. */
static void names_of(const char *q, unsigned n, char (*names)[JR_INTERNAL_QUEUE_MAX + 1]) {
    uint32_t j[JR_PARTITIONS_MAX];
    cr_assert_eq(jr_partition_numbers(q, n, j), 0);
    for (unsigned i = 0; i < n; i++) jr_partition_name(names[i], sizeof names[i], q, j[i]);
}

/* XLEN of partition i's ready stream. */
static long long ready_len(redisContext *c, const char *internal) {
    char key[JR_KEY_MAX];
    jr_queue_key(key, internal, JR_QK_READY);
    return jrt_int(c, "XLEN %s", key);
}

/* Run the CLI with --redis after the command's first `words` words; exit
 * status, stdout into out, stderr into err. */
static int cli(char *out, size_t outlen, char *err, size_t errlen, size_t words, const char *const *args) {
    const char *argv[32];
    size_t n = 0, k = 0;
    while (k < words) argv[n++] = args[k++];
    argv[n++] = "--redis", argv[n++] = R.url;
    while (args[k]) argv[n++] = args[k++];
    argv[n] = NULL;
    static char o[1 << 16], e[1 << 14];
    return jrt_run(out ? out : o, out ? outlen : sizeof o, err ? err : e, err ? errlen : sizeof e, argv);
}

/* The count field of queue q in the partitions hash (0: absent). */
static long long hget_count(redisContext *c, const char *q) {
    redisReply *rep = jrt_cmd(c, "HGET", JR_PARTITIONS_KEY, q, NULL);
    long long n = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return n;
}

/* GET /metrics from 127.0.0.1:port: the body (malloc'd) or NULL. */
static char *metrics(int port) {
    char *body = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (!connect(fd, (struct sockaddr *)&a, sizeof a) && write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1) &&
        jrt_http_read(fd, 0, &body) != 200) {
        free(body);
        body = NULL;
    }
    close(fd);
    return body;
}

/* Jobs run from the unpartitioned queue "orders" itself (its stats). */
static long long processed_unpartitioned(redisContext *c) {
    redisReply *rep = jrt_cmd(c, "HGET", "jr:{orders}:stats", "processed", NULL);
    long long n = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return n;
}

static jr_client_t *client(void) {
    jr_client_t *c = jr_client_connect(R.url, 2000, 5000);
    cr_assert(c && jr_client_err(c) == 0, "connect: %s", c ? jr_client_errstr(c) : "out of memory");
    return c;
}

/* The count `jobrunner queue partitions Q` prints. */
static unsigned shown_count(const char *q) {
    char out[256];
    cr_assert_eq(cli(out, sizeof out, NULL, 0, 1, (const char *[]){"queue", "partitions", q, NULL}), 0);
    unsigned n = 0;
    const char *p = strstr(out, ": ");
    cr_assert(p && sscanf(p + 2, "%u", &n) == 1, "%s", out);
    return n;
}

/* Sum of every command's calls in INFO commandstats. */
static long long all_calls(redisContext *c) {
    redisReply *rep = redisCommand(c, "INFO commandstats");
    cr_assert(rep && rep->type == REDIS_REPLY_STRING);
    long long sum = 0;
    for (const char *p = rep->str; (p = strstr(p, ":calls=")); p++) sum += atoll(p + 7);
    freeReplyObject(rep);
    return sum;
}

Test(partitions, changing_the_count_is_refused_while_the_queue_holds_jobs) {
    char out[1024], err[1024];
    cr_assert_eq(shown_count("orders"), 1, "absent = 1");
    cr_assert_eq(cli(out, sizeof out, err, sizeof err, 1, (const char *[]){"queue", "partitions", "orders", "8", NULL}), 0,
                 "%s", err);
    cr_expect(strstr(out, "orders: 8 partitions (was 1)"), "%s", out);
    redisContext *c = jrt_connect(&R);
    cr_assert_eq(hget_count(c, "orders"), 8);
    /* the same count: a no-op */
    cr_assert_eq(cli(out, sizeof out, err, sizeof err, 1, (const char *[]){"queue", "partitions", "orders", "8", NULL}), 0);
    cr_expect(strstr(out, "already 8"), "%s", out);
    /* a ready job and a delayed one: any other count is refused, nothing changes */
    jrt_cli_enqueue(&R, NULL, (const char *[]){"-q", "orders", "record", "a", NULL}, NULL, 0);
    jrt_cli_enqueue(&R, NULL, (const char *[]){"-q", "orders", "--in", "1h", "record", "b", NULL}, NULL, 0);
    cr_assert_eq(cli(out, sizeof out, err, sizeof err, 1, (const char *[]){"queue", "partitions", "orders", "4", NULL}), 1);
    cr_expect(strstr(err, "queue \"orders\" has 8 partition(s)") && strstr(err, "cannot change to 4") &&
                  strstr(err, "1 ready or running") && strstr(err, "1 in the time wheel"),
              "%s", err);
    cr_assert_eq(hget_count(c, "orders"), 8);
    cr_assert_eq(shown_count("orders"), 8);
    /* the client library says the same */
    jr_client_t *cl = client();
    int before = 0;
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 1, &before), JR_CLIENT_EREFUSED);
    cr_expect(strstr(jr_client_errstr(cl), "holds jobs"), "%s", jr_client_errstr(cl));
    /* a dead job counts too: empty the queue but one dead job */
    char names[8][JR_INTERNAL_QUEUE_MAX + 1];
    names_of("orders", 8, names);
    for (int i = 0; i < 8; i++) {
        jr_qkeys_t k;
        jr_qkeys(&k, names[i]);
        freeReplyObject(jrt_cmd(c, "DEL", k.ready, k.delayed, k.wheel, k.wheel_n, NULL));
    }
    jr_qkeys_t k0;
    jr_qkeys(&k0, names[3]);
    freeReplyObject(jrt_cmd(c, "XADD", k0.dead, "*", "h", "record", "why", "failed", NULL));
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 2, &before), JR_CLIENT_EREFUSED);
    cr_expect(strstr(jr_client_errstr(cl), "1 dead"), "%s", jr_client_errstr(cl));
    /* and the unpartitioned queue's own keys */
    freeReplyObject(jrt_cmd(c, "DEL", k0.dead, NULL));
    freeReplyObject(jrt_cmd(c, "XADD", "jr:{orders}:ready", "*", "h", "record", NULL));
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 2, &before), JR_CLIENT_EREFUSED);
    freeReplyObject(jrt_cmd(c, "DEL", "jr:{orders}:ready", NULL));
    /* empty: allowed */
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 2, &before), 0, "%s", jr_client_errstr(cl));
    cr_expect_eq(before, 8);
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 1, &before), 0, "%s", jr_client_errstr(cl));
    cr_expect_eq(jrt_int(c, "HEXISTS %s orders", JR_PARTITIONS_KEY), 0, "1 = absent");
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 1025, &before), JR_CLIENT_EINVAL);
    cr_assert_eq(cli(out, sizeof out, err, sizeof err, 1, (const char *[]){"queue", "partitions", "orders", "0", NULL}), 2);
    jr_client_free(cl);
    redisFree(c);
}

/* 1,000 jobs of 8 partitions: 40 through the CLI (with and without ids and
 * keys), 960 through the client library (a third each with no id, an id,
 * a key); each runs exactly once on a worker over "orders", under the id
 * its producer printed, and every partition holds a fair share. */
Test(partitions, a_thousand_jobs_spread_and_run_exactly_once, .timeout = 200) {
    jrt_config(&R, "queues:\n  orders:\n    partitions: 8\n", cfgpath, sizeof cfgpath);
    /* the configuration sets the count (a scheduler applies it at start) */
    int port = jrt_free_port();
    char ytext[512], scfg[192];
    snprintf(ytext, sizeof ytext, "redis:\n  url: %s\nqueues:\n  orders:\n    partitions: 8\nmetrics:\n  listen: 127.0.0.1:%d\n",
             R.url, port);
    jrt_write(&R, "sched.yaml", ytext, scfg, sizeof scfg);
    pid_t sched = jrt_scheduler(&R, scfg, jrt_path(&R, "sched.log"));
    redisContext *c = jrt_connect(&R);
    for (int i = 0; i < 200 && jrt_int(c, "HEXISTS %s orders", JR_PARTITIONS_KEY) == 0; i++) jrt_sleep_ms(50);
    cr_assert_eq(hget_count(c, "orders"), 8);
    enum { TOTAL = 1000, CLI_JOBS = 40 };
    static char ids[TOTAL][JR_ID_MAX];
    for (int i = 0; i < CLI_JOBS; i++) {
        char id[32], key[32];
        snprintf(id, sizeof id, "cli-%d", i);
        snprintf(key, sizeof key, "k%d", i % 5);
        const char *args[10] = {"-q", "orders"};
        int n = 2;
        if (i % 3 == 1) args[n++] = "--id", args[n++] = id;
        if (i % 3 == 2) args[n++] = "--key", args[n++] = key;
        args[n++] = "record", args[n] = NULL;
        jrt_cli_enqueue(&R, NULL, args, ids[i], sizeof ids[i]);
    }
    jr_client_t *cl = client();
    static jr_client_job_t jobs[TOTAL - CLI_JOBS];
    static const char *keys[TOTAL - CLI_JOBS];
    static jr_client_result_t res[TOTAL - CLI_JOBS];
    static char given[TOTAL - CLI_JOBS][32], keytext[TOTAL - CLI_JOBS][32];
    for (int i = 0; i < TOTAL - CLI_JOBS; i++) {
        jobs[i] = (jr_client_job_t){.queue = "orders", .handler = "record"};
        if (i % 3 == 1) snprintf(given[i], sizeof given[i], "lib-%d", i), jobs[i].id = given[i];
        if (i % 3 == 2) snprintf(keytext[i], sizeof keytext[i], "customer-%d", i), keys[i] = keytext[i];
    }
    cr_assert_eq(jr_client_enqueue_many_keyed(cl, jobs, keys, TOTAL - CLI_JOBS, res), 0, "%s", jr_client_errstr(cl));
    for (int i = 0; i < TOTAL - CLI_JOBS; i++) {
        cr_assert_eq(res[i].status, JR_CLIENT_JOB_CREATED);
        snprintf(ids[CLI_JOBS + i], sizeof ids[0], "%s", res[i].id);
        size_t g;
        unsigned p;
        if (!jobs[i].id) cr_assert(jr_partition_id_parse(res[i].id, strlen(res[i].id), &g, &p) && p < 8, "%s", res[i].id);
        else cr_assert_str_eq(res[i].id, given[i]);
    }
    jr_client_free(cl);
    /* the spread: each partition within a generous bound of 1/8 */
    char names[8][JR_INTERNAL_QUEUE_MAX + 1];
    names_of("orders", 8, names);
    long long sum = 0;
    for (int i = 0; i < 8; i++) {
        long long n = ready_len(c, names[i]);
        sum += n;
        cr_expect(n >= TOTAL / 8 / 2 && n <= TOTAL / 8 * 3 / 2, "partition %d (%s) holds %lld of %d", i, names[i], n,
                  TOTAL);
    }
    cr_assert_eq(sum, TOTAL, "every job in a partition");
    cr_expect_eq(jrt_int(c, "XLEN jr:{orders}:ready"), 0, "nothing in the unpartitioned queue");
    /* the scheduler's depth gauge: one series for the queue, the sum */
    const char *want_series = "jobrunner_queue_ready_jobs{queue=\"orders\"} 1000";
    char *m = NULL;
    for (int i = 0; i < 100; i++) {
        free(m);
        if ((m = metrics(port)) && strstr(m, want_series)) break;
        jrt_sleep_ms(100);
    }
    cr_expect(m && strstr(m, want_series), "metrics: %s", m ? m : "(none)");
    cr_expect(m && !strstr(m, "orders#"), "a partition in the metrics: %s", m ? m : "");
    free(m);
    /* one worker over the queue runs each exactly once, under its id */
    pid_t w = jrt_worker(&R, cfgpath, NULL, wlog, (const char *[]){"-q", "orders", NULL});
    size_t got = jrt_wait_lines(record, TOTAL, 60000);
    jrt_sleep_ms(300); /* a run twice would show now */
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_eq(jrt_stop(sched, SIGTERM, 10000), 0);
    cr_assert_eq(got, TOTAL, "ran %zu of %d", got, TOTAL);
    char *text;
    size_t n, distinct;
    char **ran = jrt_record_ids(record, TOTAL + 10, &text, &n, &distinct);
    cr_assert_eq(n, TOTAL);
    cr_assert_eq(distinct, TOTAL, "each exactly once");
    static const char *want[TOTAL];
    for (int i = 0; i < TOTAL; i++) want[i] = ids[i];
    qsort(want, TOTAL, sizeof *want, jrt_cmp_str);
    for (int i = 0; i < TOTAL; i++) cr_assert_str_eq(ran[i], want[i], "the ids the handler saw are the ids printed");
    free(ran), free(text);
    /* the log names the queue, never a partition */
    char *log = jrt_slurp(wlog);
    cr_expect(strstr(log, "queue=orders "), "the worker's log");
    cr_expect(!strstr(log, "queue=orders#"), "no partition in the log");
    free(log);
    redisFree(c);
}

/* One key's jobs all go to one partition and a single worker with
 * concurrency 1 runs them in enqueue order. */
Test(partitions, one_keys_jobs_stay_in_one_partition_in_order, .timeout = 120) {
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 8, NULL), 0, "%s", jr_client_errstr(cl));
    enum { N = 60 };
    static jr_client_job_t jobs[2 * N];
    static const char *keys[2 * N];
    static char pay[2 * N][32];
    for (int i = 0; i < 2 * N; i++) {
        const char *key = i % 2 ? "cust-B" : "cust-A";
        snprintf(pay[i], sizeof pay[i], "%s:%03d", key, i / 2);
        jobs[i] = (jr_client_job_t){.queue = "orders", .handler = "record", .payload = pay[i],
                                    .payload_len = strlen(pay[i])};
        keys[i] = key;
    }
    cr_assert_eq(jr_client_enqueue_many_keyed(cl, jobs, keys, N, NULL), 0, "%s", jr_client_errstr(cl));
    for (int i = N; i < 2 * N; i++) /* one at a time too */
        cr_assert_eq(jr_client_enqueue_many_keyed(cl, &jobs[i], &keys[i], 1, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    char names[8][JR_INTERNAL_QUEUE_MAX + 1];
    names_of("orders", 8, names);
    redisContext *c = jrt_connect(&R);
    unsigned pa = jr_partition_of("cust-A", 6, 8), pb = jr_partition_of("cust-B", 6, 8);
    for (unsigned i = 0; i < 8; i++) {
        long long want = (i == pa ? N : 0) + (i == pb ? N : 0);
        cr_assert_eq(ready_len(c, names[i]), want, "partition %u", i);
    }
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *[]){"-q", "orders", "--concurrency", "1", NULL});
    size_t got = jrt_wait_lines(record, 2 * N, 30000);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_eq(got, 2 * N);
    char *text = jrt_slurp(record);
    int next[2] = {0, 0};
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *p = strstr(line, "cust-");
        cr_assert(p, "%s", line);
        int k = p[5] == 'B', seq = atoi(p + 7);
        cr_assert_eq(seq, next[k], "key cust-%c: job %d ran after %d", 'A' + k, seq, next[k] - 1);
        next[k]++;
    }
    cr_assert_eq(next[0], N);
    cr_assert_eq(next[1], N);
    free(text);
    redisFree(c);
}

/* Redis calls of `job show ID` (and of `cancel`) on a queue of n partitions. */
static long long lookup_calls(unsigned n, const char *kind) {
    jr_client_t *cl = client();
    char q[16];
    snprintf(q, sizeof q, "q%u", n);
    cr_assert_eq(jr_client_set_partitions(cl, q, (int)n, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_job_t j[3] = {{.queue = q, .handler = "record", .delay_ms = 3600000},
                            {.queue = q, .handler = "record", .id = "order-17"},
                            {.queue = q, .handler = "record", .id = "keyed-1"}};
    const char *keys[3] = {NULL, NULL, "customer-9"};
    jr_client_result_t res[3];
    cr_assert_eq(jr_client_enqueue_many_keyed(cl, j, keys, 3, res), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "CONFIG", "RESETSTAT", NULL));
    long long base = all_calls(c); /* the INFO itself */
    char out[4096];
    const char *id = !strcmp(kind, "generated") ? res[0].id : !strcmp(kind, "explicit") ? res[1].id : res[2].id;
    const char *show[] = {"job", "show", "-q", q, id, NULL, NULL, NULL};
    if (!strcmp(kind, "keyed")) show[5] = "--key", show[6] = "customer-9";
    cr_assert_eq(cli(out, sizeof out, NULL, 0, 2, show), 0, "job show %s: %s", id, out);
    cr_assert(strstr(out, !strcmp(kind, "generated") ? "state: delayed" : "state: ready"), "%s", out);
    const char *cancel[] = {"cancel", "-q", q, id, NULL, NULL, NULL};
    if (!strcmp(kind, "keyed")) cancel[4] = "--key", cancel[5] = "customer-9";
    cr_assert_eq(cli(out, sizeof out, NULL, 0, 1, cancel), 0, "cancel %s: %s", id, out);
    cr_assert(strstr(out, "cancelled"), "%s", out);
    long long calls = all_calls(c) - base;
    redisFree(c);
    return calls;
}

Test(partitions, job_show_and_cancel_find_a_job_in_constant_calls, .timeout = 120) {
    static const char *kinds[] = {"generated", "explicit", "keyed"};
    for (int k = 0; k < 3; k++) {
        long long two = lookup_calls(2, kinds[k]), many = lookup_calls(64, kinds[k]);
        cr_log_info("%s id: %lld calls with 2 partitions, %lld with 64", kinds[k], two, many);
        cr_expect_eq(two, many, "%s id: %lld Redis calls with 2 partitions, %lld with 64", kinds[k], two, many);
    }
}

Test(partitions, stats_sum_the_partitions_and_pause_stops_them_all, .timeout = 120) {
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 4, NULL), 0, "%s", jr_client_errstr(cl));
    static jr_client_job_t jobs[20];
    for (int i = 0; i < 20; i++) jobs[i] = (jr_client_job_t){.queue = "orders", .handler = "record"};
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 20, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_stats_t s;
    cr_assert_eq(jr_client_stats(cl, "orders", &s), 0);
    cr_expect_eq(s.ready, 20);
    char out[4096];
    cr_assert_eq(cli(out, sizeof out, NULL, 0, 1, (const char *[]){"stats", "--json", NULL}), 0);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    cr_assert(doc, "%s", out);
    json_t *qs = json_object_get(doc, "queues");
    cr_assert_eq(json_array_size(qs), 1, "one row for the queue, not one per partition: %s", out);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(qs, 0), "queue")), "orders");
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(qs, 0), "ready")), 20);
    json_decref(doc);
    cr_assert_eq(cli(out, sizeof out, NULL, 0, 1, (const char *[]){"stats", "-q", "orders", "--partitions", NULL}), 0);
    char names[4][JR_INTERNAL_QUEUE_MAX + 1];
    names_of("orders", 4, names);
    for (int i = 0; i < 4; i++) cr_expect(strstr(out, names[i]), "stats --partitions lacks %s:\n%s", names[i], out);
    /* pause: no partition is read */
    cr_assert_eq(cli(out, sizeof out, NULL, 0, 1, (const char *[]){"pause", "orders", NULL}), 0);
    /* a queue paused before it is partitioned stays paused */
    cr_assert_eq(cli(out, sizeof out, NULL, 0, 1, (const char *[]){"pause", "later", NULL}), 0);
    cr_assert_eq(jr_client_set_partitions(cl, "later", 3, NULL), 0, "%s", jr_client_errstr(cl));
    jobs[0].queue = "later";
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 1, NULL), 0, "%s", jr_client_errstr(cl));
    pid_t w2 = jrt_worker(&R, NULL, NULL, jrt_path(&R, "w2.log"), (const char *[]){"-q", "later", NULL});
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *[]){"-q", "orders", NULL});
    jrt_sleep_ms(1500);
    cr_expect_eq(jrt_lines(record), 0, "a paused queue's jobs ran");
    cr_assert_eq(jrt_stop(w2, SIGTERM, 10000), 0);
    cr_assert_eq(jr_client_stats(cl, "orders", &s), 0);
    cr_expect_eq(s.ready, 20);
    cr_expect_eq(s.paused, 1);
    cr_assert_eq(cli(out, sizeof out, NULL, 0, 1, (const char *[]){"resume", "orders", NULL}), 0);
    cr_expect_eq(jrt_wait_lines(record, 20, 20000), 20);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_eq(jr_client_stats(cl, "orders", &s), 0);
    cr_expect_eq(s.processed, 20);
    jr_client_free(cl);
}

/* Users never name a partition nor give a generated id; the library takes
 * partition names in keys; the longest queue name works over 1024
 * partitions. */
Test(partitions, names_users_may_not_give_and_the_longest_name) {
    char out[1024], err[1024];
    cr_assert_eq(cli(out, sizeof out, err, sizeof err, 1, (const char *[]){"enqueue", "-q", "orders#1", "record", NULL}), 2);
    cr_expect(strstr(err, JR_QUEUE_RULE), "%s", err);
    cr_assert_eq(cli(out, sizeof out, err, sizeof err, 1, (const char *[]){"enqueue", "--id", "5-5~1", "record", NULL}), 2);
    cr_expect(strstr(err, "reserved form"), "%s", err);
    jr_client_t *cl = client();
    jr_client_job_t j = {.queue = "orders#1", .handler = "record"};
    jr_client_result_t res;
    cr_assert_eq(jr_client_enqueue(cl, &j, &res), JR_CLIENT_EINVAL);
    cr_expect(strstr(jr_client_errstr(cl), JR_QUEUE_RULE), "%s", jr_client_errstr(cl));
    j = (jr_client_job_t){.queue = "orders", .handler = "record", .id = "d17-3~0"};
    cr_assert_eq(jr_client_enqueue(cl, &j, &res), JR_CLIENT_EINVAL);
    cr_assert_eq(jr_client_set_partitions(cl, "orders#1", 2, NULL), JR_CLIENT_EINVAL);
    /* Lua: a partition's keys are a queue's keys; 8 digits are not */
    redisContext *c = jrt_connect(&R);
    redisReply *rep = jrt_cmd(c, "FCALL", "jr_enqueue", "4", "jr:{o#12}:ready", "jr:{o#12}:delayed", "jr:{o#12}:wake",
                              "jr:{o#12}:seq", "", "", "0", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_ERROR); /* no handler: refused, but not for the key */
    cr_expect(!strstr(rep->str, "queue name"), "%s", rep->str);
    freeReplyObject(rep);
    rep = jrt_cmd(c, "FCALL", "jr_enqueue", "4", "jr:{o#123456789}:ready", "jr:{o#123456789}:delayed",
                  "jr:{o#123456789}:wake", "jr:{o#123456789}:seq", "", "", "0", "h", "record", NULL);
    cr_assert_eq(rep->type, REDIS_REPLY_ERROR);
    cr_expect(strstr(rep->str, "queue name"), "%s", rep->str);
    freeReplyObject(rep);
    /* the longest queue name over the most partitions */
    char q[JR_QUEUE_MAX + 1];
    memset(q, 'q', JR_QUEUE_MAX), q[JR_QUEUE_MAX] = '\0';
    cr_assert_eq(jr_client_set_partitions(cl, q, JR_PARTITIONS_MAX, NULL), 0, "%s", jr_client_errstr(cl));
    j = (jr_client_job_t){.queue = q, .handler = "record", .delay_ms = 3600000};
    cr_assert_eq(jr_client_enqueue(cl, &j, &res), 0, "%s", jr_client_errstr(cl));
    jr_client_job_info_t *info;
    cr_assert_eq(jr_client_job_show(cl, q, res.id, &info), 0, "%s", jr_client_errstr(cl));
    cr_expect_eq(info->state, JR_CLIENT_STATE_DELAYED, "%s", res.id);
    jr_client_job_info_free(info);
    jr_client_free(cl);
    redisFree(c);
}

/* dead list|show|retry|purge over every partition, ids as users see them. */
Test(partitions, dead_jobs_of_every_partition_as_one, .timeout = 120) {
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 4, NULL), 0, "%s", jr_client_errstr(cl));
    static jr_client_job_t jobs[8];
    jr_client_result_t res[8];
    for (int i = 0; i < 8; i++) jobs[i] = (jr_client_job_t){.queue = "orders", .handler = "fail", .max_attempts = 1};
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 8, res), 0, "%s", jr_client_errstr(cl));
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *[]){"-q", "orders", NULL});
    jr_client_stats_t s = {0};
    for (int i = 0; i < 400 && (jr_client_stats(cl, "orders", &s) || s.dead < 8); i++) jrt_sleep_ms(50);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_eq(s.dead, 8);
    char out[1 << 14], err[1024];
    cr_assert_eq(cli(out, sizeof out, err, sizeof err, 1, (const char *[]){"dead", "list", "-q", "orders", NULL}), 0, "%s",
                 err);
    for (int i = 0; i < 8; i++) cr_expect(strstr(out, res[i].id), "dead list lacks %s:\n%s", res[i].id, out);
    cr_assert_eq(cli(out, sizeof out, err, sizeof err, 1, (const char *[]){"dead", "show", "-q", "orders", res[5].id, NULL}),
                 0, "%s", err);
    cr_expect(strstr(out, "why: failed"), "%s", out);
    cr_assert_eq(cli(out, sizeof out, err, sizeof err, 1, (const char *[]){"dead", "purge", "-q", "orders", "--all", NULL}),
                 0, "%s", err);
    cr_expect(strstr(out, "purged 8 dead jobs"), "%s", out);
    cr_assert_eq(jr_client_stats(cl, "orders", &s), 0);
    cr_expect_eq(s.dead, 0);
    jr_client_free(cl);
}

/* jobs --state pages over the partitions in turn, the cursor saying where;
 * every job once, under the id users see. */
static void page_through(const char *state, jr_client_result_t *res, size_t n) {
    char after[160] = "";
    size_t seen = 0;
    int pages = 0;
    static char out[1 << 16];
    for (;;) {
        const char *args[] = {"jobs", "-q", "orders", "--state", state, "--limit", "3", "--json",
                              after[0] ? "--after" : NULL, after, NULL};
        cr_assert_eq(cli(out, sizeof out, NULL, 0, 1, args), 0, "%s", out);
        json_error_t je;
        json_t *doc = json_loads(out, 0, &je);
        cr_assert(doc, "%s", out);
        json_t *jobs = json_object_get(doc, "jobs");
        cr_assert_leq(json_array_size(jobs), 3);
        for (size_t i = 0; i < json_array_size(jobs); i++) {
            const char *id = json_string_value(json_object_get(json_array_get(jobs, i), "job"));
            int known = 0;
            for (size_t k = 0; k < n && !known; k++) known = !strcmp(res[k].id, id);
            cr_expect(known, "%s page: job %s was not enqueued", state, id);
            seen++;
        }
        const char *next = json_string_value(json_object_get(doc, "next"));
        if (next) snprintf(after, sizeof after, "%s", next);
        json_decref(doc);
        cr_assert_lt(++pages, 40, "the pages do not end");
        if (!next) break;
    }
    cr_expect_eq(seen, n, "%s: %zu jobs listed of %zu", state, seen, n);
}

Test(partitions, jobs_pages_over_every_partition, .timeout = 120) {
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 4, NULL), 0, "%s", jr_client_errstr(cl));
    static jr_client_job_t jobs[10];
    jr_client_result_t later[10], now[10];
    for (int i = 0; i < 10; i++) jobs[i] = (jr_client_job_t){.queue = "orders", .handler = "record", .delay_ms = 3600000};
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 10, later), 0, "%s", jr_client_errstr(cl));
    for (int i = 0; i < 10; i++) jobs[i].delay_ms = 0;
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 10, now), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    page_through("delayed", later, 10);
    page_through("ready", now, 10);
}

/* A periodic schedule of a partitioned queue: its jobs go into the
 * partitions (where the workers read), not the unpartitioned queue. */
Test(partitions, periodic_jobs_reach_the_partitions, .timeout = 120) {
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 4, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    char out[1024];
    cr_assert_eq(jrt_cli(&R, out, sizeof out,
                         (const char *[]){"cron", "add", "tick", "--every", "1s", "-q", "orders", "record", NULL}),
                 0, "%s", out);
    pid_t sched = jrt_scheduler(&R, NULL, jrt_path(&R, "sched.log"));
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *[]){"-q", "orders", NULL});
    int got = jrt_wait_count(record, "tick@", 2, 20000);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_eq(jrt_stop(sched, SIGTERM, 10000), 0);
    cr_expect_geq(got, 2, "the schedule's jobs ran %d times in 20 s", got);
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(processed_unpartitioned(c), 0, "a tick went to the unpartitioned queue");
    redisFree(c);
}

/* Follow-ups of a partitioned queue's job to its own queue (by NULL or by
 * name) stay in the job's partition and run. */
Test(partitions, follow_ups_to_the_own_queue_stay_in_the_partition, .timeout = 120) {
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 4, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_job_t jobs[2] = {{.queue = "orders", .handler = "follow", .payload = "q=,n=3", .payload_len = 6},
                               {.queue = "orders", .handler = "follow", .payload = "q=orders,n=2", .payload_len = 12}};
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 2, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    pid_t w = jrt_worker(&R, NULL, JRT_FOLLOW_PLUGIN, wlog, (const char *[]){"-q", "orders", NULL});
    int got = jrt_wait_count(record, " record ", 5, 20000);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(got, 5, "follow-ups run: %d of 5", got);
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(processed_unpartitioned(c), 0, "a follow-up went to the unpartitioned queue");
    redisFree(c);
}

/* The same with the longest queue name: the partition's internal name
 * (Q#J, up to 8 bytes more) is what the acknowledgement with follow-ups
 * names. Its encoder once refused names over 128 bytes, and the fallback
 * (the job to the dead stream) then met the connection it had marked
 * broken: the worker reconnected for ever and never acknowledged. */
Test(partitions, follow_ups_of_the_longest_queue_name_run, .timeout = 120) {
    char q[JR_QUEUE_MAX + 1];
    memset(q, 'q', JR_QUEUE_MAX), q[JR_QUEUE_MAX] = '\0';
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, q, 1000, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_job_t jobs[3];
    for (int i = 0; i < 3; i++)
        jobs[i] = (jr_client_job_t){.queue = q, .handler = "follow", .payload = "q=,n=2", .payload_len = 6};
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 3, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    pid_t w = jrt_worker(&R, NULL, JRT_FOLLOW_PLUGIN, wlog, (const char *[]){"-q", q, NULL});
    int got = jrt_wait_count(record, " record ", 6, 20000);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0, "the worker did not stop on SIGTERM (%s)", wlog);
    cr_expect_eq(got, 6, "follow-ups run: %d of 6 (%s)", got, wlog);
    cr_expect_eq(jrt_count(wlog, "invalid follow-ups"), 0, "%s", wlog);
}

/* A running worker and scheduler follow a change of the count (they read it
 * every 10 s): the worker logs it and runs the jobs of the new partitions,
 * delayed ones promoted by a scheduler serving the queue by name. */
Test(partitions, running_processes_follow_a_change_of_the_count, .timeout = 120) {
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *[]){"-q", "orders", NULL});
    const char *sargs[] = {"scheduler", "--redis", R.url, "-q", "orders", NULL};
    pid_t sched = jrt_spawn(jrt_path(&R, "sched.log"), sargs);
    jrt_sleep_ms(500);
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 4, NULL), 0, "%s", jr_client_errstr(cl));
    static jr_client_job_t jobs[12];
    for (int i = 0; i < 12; i++)
        jobs[i] = (jr_client_job_t){.queue = "orders", .handler = "record", .delay_ms = i % 2 ? 1000 : 0};
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 12, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    size_t got = jrt_wait_lines(record, 12, 40000);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_eq(jrt_stop(sched, SIGTERM, 10000), 0);
    cr_expect_eq(got, 12, "ran %zu of 12 after the change", got);
    cr_expect_geq(jrt_count(wlog, "reading the partitions of the queues"), 1, "the worker did not log the change");
}

/* A partitioned queue's own keys are still read: a job a producer unaware
 * of the partitions put into Q itself runs, and stats count it. */
Test(partitions, jobs_put_into_the_queue_itself_still_run, .timeout = 60) {
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, "orders", 4, NULL), 0, "%s", jr_client_errstr(cl));
    jrt_enqueue(&R, jrt_job("orders", "record", "plain"), 3, NULL); /* the C layer, no partitions */
    jr_client_stats_t s;
    cr_assert_eq(jr_client_stats(cl, "orders", &s), 0);
    cr_expect_eq(s.ready, 3, "stats count the queue itself too");
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *[]){"-q", "orders", NULL});
    size_t got = jrt_wait_lines(record, 3, 20000);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(got, 3);
    jr_client_free(cl);
}

/* A partitioned queue's weight applies to the queue as a whole: hot:3 over
 * 4 partitions against cold:1 still starts 3 hot jobs for each cold one. */
Test(partitions, a_queues_weight_is_split_over_its_partitions, .timeout = 120) {
    jr_client_t *cl = client();
    cr_assert_eq(jr_client_set_partitions(cl, "hot", 4, NULL), 0, "%s", jr_client_errstr(cl));
    enum { EACH = 1200, FIRST = 1200 };
    static jr_client_job_t jobs[2 * EACH];
    for (int i = 0; i < 2 * EACH; i++) {
        const char *q = i < EACH ? "hot" : "cold";
        jobs[i] = (jr_client_job_t){.queue = q, .handler = "record", .payload = q, .payload_len = strlen(q)};
    }
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 2 * EACH, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *[]){"-q", "hot:3", "-q", "cold:1", NULL});
    size_t got = jrt_wait_lines(record, FIRST + 200, 60000);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_geq(got, FIRST + 200);
    /* the first FIRST jobs by start time */
    char *text = jrt_slurp(record);
    static struct {
        long long us;
        int hot;
    } v[4 * EACH];
    size_t k = 0;
    for (char *line = strtok(text, "\n"); line && k < 4 * EACH; line = strtok(NULL, "\n")) {
        char id[200], q[16];
        unsigned attempt;
        if (sscanf(line, "%199s %u %lld %15s", id, &attempt, &v[k].us, q) == 4) v[k].hot = !strcmp(q, "hot"), k++;
    }
    free(text);
    for (size_t i = 1; i < k; i++) /* insertion sort by start time */
        for (size_t j = i; j > 0 && v[j].us < v[j - 1].us; j--) {
            long long u = v[j].us;
            int h = v[j].hot;
            v[j].us = v[j - 1].us, v[j].hot = v[j - 1].hot, v[j - 1].us = u, v[j - 1].hot = h;
        }
    size_t hot = 0;
    for (size_t i = 0; i < FIRST && i < k; i++) hot += (size_t)v[i].hot;
    cr_expect(hot >= FIRST * 0.75 * 0.92 && hot <= FIRST * 0.75 * 1.08, "hot: %zu of the first %d jobs, want %.0f +-8%%",
              hot, FIRST, FIRST * 0.75);
}

/* The cluster way of setting the count (the checks as calls of one slot
 * each, then the hash alone) refuses and allows as the atomic one. */
Test(partitions, the_split_check_of_a_cluster_refuses_as_the_atomic_one) {
    jr_redis_t *r = jrt_jr_connect(&R);
    unsigned before = 0;
    cr_assert_eq(jr_redis_partitions_set_split(r, "orders", 4, &before), 0, "%s", jr_redis_errstr(r));
    cr_expect_eq(before, 1);
    jr_client_t *cl = client();
    jr_client_job_t j = {.queue = "orders", .handler = "record", .delay_ms = 3600000};
    cr_assert_eq(jr_client_enqueue(cl, &j, NULL), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    cr_assert_eq(jr_redis_partitions_set_split(r, "orders", 2, &before), JR_EREDIS);
    cr_expect(strstr(jr_redis_errstr(r), "queue \"orders\" has 4 partition(s) and holds jobs") &&
                  strstr(jr_redis_errstr(r), "1 delayed"),
              "%s", jr_redis_errstr(r));
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(hget_count(c, "orders"), 4, "nothing changed");
    cr_assert_eq(jr_redis_partitions_set_split(r, "orders", 4, &before), 0, "the same count: a no-op");
    /* the hash key alone still refuses a stale count */
    redisReply *rep = jrt_cmd(c, "FCALL", "jr_partitions_set", "1", JR_PARTITIONS_KEY, "orders", "2", "1", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_ERROR);
    cr_expect(rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "changed meanwhile"), "%s", rep->str ? rep->str : "");
    freeReplyObject(rep);
    redisFree(c);
    jr_redis_free(r);
}
