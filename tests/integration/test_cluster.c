/* Redis Cluster (issue 21): jobrunner on a real cluster of redis-server
 * processes (tests/harness.h jrt_cluster_start), through the connection
 * layer's facade (runner/src/cluster.c):
 *   - the slot of a key (CRC16 of its hash tag) equals CLUSTER KEYSLOT's,
 *     for many random keys; every URL form connects, bad forms are refused
 *     naming what is wrong;
 *   - a worker and a scheduler over 6 queues spread over 3 primaries: every
 *     job runs once (ready, delayed, a retry); a blocked worker wakes for a
 *     job on any primary within a bound; pause, resume and SIGTERM reach a
 *     blocked worker promptly;
 *   - MOVED (a queue's slot moved to another primary with its keys, while
 *     jobs are enqueued and run): nothing lost, nothing run twice, and the
 *     redirect was followed;
 *   - ASK and TRYAGAIN (a slot half migrated): a call reaching a moved key
 *     follows ASK (ASKING counted on the target), a call of several keys
 *     gets TRYAGAIN and succeeds once the migration completes;
 *   - WAIT per node (wait_replicas: 1) with a replica for each primary;
 *   - every node unresponsive: SIGTERM is acted on within about the
 *     connect timeout; a primary killed (no replica): the other primaries'
 *     queues run on, and its own once it is back. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "harness.h"
#include "redis_admin.h"
#include "redis_produce.h"
#include "util.h"

static jrt_cluster_t C;
static jrt_redis_t R; /* R.url = C.url, R.dir = C.dir: for jrt_config and the CLI helpers */
static char record[192], cfgpath[192], wlog[192], slog[192];
static pid_t worker, scheduler;

static void start(int replicas) {
    jrt_cluster_start(&C, 3, replicas, NULL);
    jrt_cluster_view(&C, &R);
    snprintf(record, sizeof record, "%s/record.txt", C.dir);
    snprintf(wlog, sizeof wlog, "%s/worker.log", C.dir);
    snprintf(slog, sizeof slog, "%s/scheduler.log", C.dir);
    setenv("JRT_RECORD", record, 1);
}
static void setup(void) { start(0); }
static void setup_replicas(void) { start(1); }
static void teardown(void) {
    if (worker > 0) jrt_stop(worker, SIGKILL, 5000);
    if (scheduler > 0) jrt_stop(scheduler, SIGKILL, 5000);
    worker = scheduler = 0;
    jrt_cluster_stop(&C);
}

TestSuite(cluster, .init = setup, .fini = teardown, .timeout = 180);

static jr_redis_t *open_url(const char *url, int wait_replicas) {
    char err[JR_ERRLEN];
    jr_redis_opts_t o = {.url = url, .timeout_ms = 5000, .wait_replicas = wait_replicas};
    jr_redis_t *r = jr_redis_open(&o, err, sizeof err);
    cr_assert(r, "connect to %s: %s", url, err);
    cr_assert_eq(jr_redis_load_library(r), 0, "load the library: %s", jr_redis_errstr(r));
    return r;
}

/* Queue names: `per` queues whose keys live on each of the 3 primaries, in
 * node order (names[i * per + k] on node i). */
static void queues_per_node(char (*names)[16], int per) {
    int have[3] = {0, 0, 0};
    for (int n = 0; have[0] + have[1] + have[2] < 3 * per; n++) {
        char q[16], key[64];
        snprintf(q, sizeof q, "q%d", n);
        snprintf(key, sizeof key, "jr:{%s}:ready", q);
        int node = jrt_cluster_primary_of(&C, 0, key);
        cr_assert(node >= 0 && node < 3, "the primary of %s", key);
        if (have[node] < per) snprintf(names[node * per + have[node]++], 16, "%s", q);
    }
}

static long long node_calls(int i, const char *cmd) {
    redisContext *x = jrt_cluster_connect(&C, i);
    redisReply *rep = jrt_cmd(x, "INFO", "commandstats", NULL);
    char want[64];
    snprintf(want, sizeof want, "cmdstat_%s:calls=", cmd);
    const char *p = rep->type == REDIS_REPLY_STRING ? strstr(rep->str, want) : NULL;
    long long n = p ? atoll(p + strlen(want)) : 0;
    freeReplyObject(rep);
    redisFree(x);
    return n;
}

Test(cluster, key_slots_match_cluster_keyslot_and_every_url_form_connects) {
    /* The slot of 2,000 random keys (hash tags, empty tags, braces
     * anywhere) against CLUSTER KEYSLOT, pipelined. */
    redisContext *x = jrt_cluster_connect(&C, 0);
    enum { N = 2000 };
    static char keys[N][24];
    static size_t lens[N];
    srand(12345);
    const char alphabet[] = "ab{}{}:xyz01";
    for (int i = 0; i < N; i++) {
        lens[i] = 1 + (size_t)(rand() % 20);
        for (size_t k = 0; k < lens[i]; k++)
            keys[i][k] = i % 3 ? alphabet[rand() % (int)(sizeof alphabet - 1)] : (char)(1 + rand() % 255);
        redisAppendCommand(x, "CLUSTER KEYSLOT %b", keys[i], lens[i]);
    }
    for (int i = 0; i < N; i++) {
        redisReply *rep;
        cr_assert_eq(redisGetReply(x, (void **)&rep), REDIS_OK);
        cr_assert_eq(rep->type, REDIS_REPLY_INTEGER);
        cr_assert_eq(jr_cluster_key_slot(keys[i], lens[i]), rep->integer, "key %d \"%.*s\": ours %d, Redis %lld", i,
                     (int)lens[i], keys[i], jr_cluster_key_slot(keys[i], lens[i]), rep->integer);
        freeReplyObject(rep);
    }
    redisFree(x);

    /* One seed; every node; a dead seed first; upper-case scheme. */
    char url[256];
    const char *forms[4];
    char one[64], dead[96], upper[64];
    snprintf(one, sizeof one, "redis-cluster://127.0.0.1:%d", C.port[1]);
    snprintf(dead, sizeof dead, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", jrt_free_port(), C.port[2]);
    snprintf(upper, sizeof upper, "REDIS-CLUSTER://127.0.0.1:%d", C.port[0]);
    forms[0] = one, forms[1] = C.url, forms[2] = dead, forms[3] = upper;
    for (int f = 0; f < 4; f++) {
        jr_redis_t *r = open_url(forms[f], 0);
        /* Something on every primary, through the facade. */
        char names[3][16];
        queues_per_node(names, 1);
        for (int q = 0; q < 3; q++) {
            jr_enqueue_t j = jrt_job(names[q], "record", "x");
            cr_assert_eq(jr_redis_enqueue(r, &j, 1, NULL, NULL), 0, "%s: enqueue to %s: %s", forms[f], names[q],
                         jr_redis_errstr(r));
            jr_qstats_t s;
            cr_assert_eq(jr_redis_stats(r, names[q], &s), 0, "%s", jr_redis_errstr(r));
            cr_assert_eq(s.ready, f + 1, "%s: %s has %lld ready", forms[f], names[q], s.ready);
        }
        jr_redis_free(r);
    }
    (void)url;

    /* Bad forms, each refused naming what is wrong. */
    struct {
        const char *url, *says;
    } bad[] = {
        {"redis-cluster://127.0.0.1:7000/1", "only db 0"},
        {"redis-cluster://127.0.0.1:7000,,127.0.0.1:7001", "empty node address (number 2"},
        {"redis-cluster://127.0.0.1:99999", "bad port of node number 1"},
        {"redis-cluster://127.0.0.1:7000?db=2", "only db 0"},
        {"redis-cluster://user:secretpw@127.0.0.1:7000,bad host:1", "bad or missing host of node number 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        jr_redis_url_t u;
        char err[JR_ERRLEN];
        cr_assert_neq(jr_redis_url_parse(bad[i].url, &u, err, sizeof err), 0, "%s taken", bad[i].url);
        cr_expect(strstr(err, bad[i].says), "%s: \"%s\" does not say \"%s\"", bad[i].url, err, bad[i].says);
        cr_expect(!strstr(err, "secretpw"), "the password shown: %s", err);
    }
    jr_redis_url_t u;
    char err[JR_ERRLEN];
    cr_assert_eq(jr_redis_url_parse("rediss-cluster://u:p@a:1,b", &u, err, sizeof err), 0, "%s", err);
    cr_expect(u.is_cluster && u.is_tls && u.nseeds == 2 && u.seeds[1].port == 6379 && !strcmp(u.user, "u"));
    jr_redis_url_free(&u);
    /* No node reachable: every one named. */
    int p1 = jrt_free_port(), p2 = jrt_free_port();
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", p1, p2);
    jr_redis_opts_t o = {.url = url, .timeout_ms = 2000};
    /* (the nodes learnt above are tried too, so a dead seed list still connects) */
    jr_redis_t *r = jr_redis_open(&o, err, sizeof err);
    cr_expect(r != NULL, "a reconnect with dead seeds uses the nodes learnt earlier: %s", err);
    jr_redis_free(r);
}

static void config(const char *queues, const char *extra) {
    char text[1024];
    snprintf(text, sizeof text,
             "worker:\n  queues: [%s]\n  concurrency: 4\n  block: 5s\nscheduler:\n  block: 5s\njobs:\n  backoff: 10ms\n%s",
             queues, extra ? extra : "");
    jrt_config(&R, text, cfgpath, sizeof cfgpath);
}

/* The milliseconds until the record file has n lines, at most timeout_ms. */
static int64_t ms_until_lines(size_t n, int timeout_ms) {
    int64_t t0 = jrt_wall_us();
    jrt_wait_lines(record, n, timeout_ms);
    return (jrt_wall_us() - t0) / 1000;
}

Test(cluster, a_worker_and_a_scheduler_over_three_primaries_run_every_job_once) {
    char names[6][16];
    queues_per_node(names, 2);
    char list[200] = "";
    for (int q = 0; q < 6; q++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", q ? ", " : "", names[q]);
    config(list, NULL);
    worker = jrt_worker(&R, cfgpath, NULL, wlog, NULL);
    scheduler = jrt_scheduler(&R, cfgpath, slog);
    size_t want = 0;
    for (int q = 0; q < 6; q++) {
        for (int k = 0; k < 5; k++) {
            char pay[128];
            snprintf(pay, sizeof pay, "%s-r%d", names[q], k);
            const char *a[] = {"-q", names[q], "record", pay, NULL};
            jrt_cli_enqueue(&R, cfgpath, a, NULL, 0);
            want++;
        }
        char pay[128];
        snprintf(pay, sizeof pay, "%s-d", names[q]);
        const char *d[] = {"-q", names[q], "--in", "1s", "record", pay, NULL};
        jrt_cli_enqueue(&R, cfgpath, d, NULL, 0);
        want++;
    }
    const char *c[] = {"-q", names[5], "--max-attempts", "2", "crash", "retried", NULL};
    jrt_cli_enqueue(&R, cfgpath, c, NULL, 0);
    want += 2; /* it runs twice: the retry, then it is dead */
    size_t got = jrt_wait_lines(record, want, 30000);
    cr_assert_eq(got, want, "%zu of %zu runs; worker log:\n%s\nscheduler log:\n%s", got, want, jrt_slurp(wlog),
                 jrt_slurp(slog));
    jrt_sleep_ms(500);
    cr_assert_eq(jrt_lines(record), want, "a job ran twice:\n%s", jrt_slurp(record));
    char *text = jrt_slurp(record);
    for (int q = 0; q < 6; q++)
        for (int k = 0; k < 5; k++) {
            char pay[128];
            snprintf(pay, sizeof pay, " %s-r%d\n", names[q], k);
            cr_expect(strstr(text, pay), "%s did not run", pay);
        }
    cr_expect_eq(jrt_count(record, " retried"), 2, "the crashing job ran %d times", jrt_count(record, " retried"));
    free(text);

    /* Idle (blocked over 3 primaries): a job on any of them wakes it. */
    jrt_sleep_ms(1500);
    jr_redis_t *r = open_url(C.url, 0);
    for (int q = 0; q < 6; q++) {
        jr_enqueue_t j = jrt_job(names[q], "record", "wake");
        cr_assert_eq(jr_redis_enqueue(r, &j, 1, NULL, NULL), 0, "%s", jr_redis_errstr(r));
        int64_t ms = ms_until_lines(++want, 5000);
        cr_expect_lt(ms, 1000, "a job on %s (node %d) ran %lld ms after it was enqueued", names[q], q / 2, (long long)ms);
        jrt_sleep_ms(300); /* blocked again */
    }

    /* Pause and resume of a blocked worker (its read ended by CLIENT UNBLOCK). */
    char out[512];
    const char *pa[] = {"pause", "-c", cfgpath, names[4], NULL};
    jrt_run_expect(0, out, sizeof out, pa);
    jrt_sleep_ms(300);
    jr_enqueue_t j = jrt_job(names[4], "record", "paused");
    cr_assert_eq(jr_redis_enqueue(r, &j, 1, NULL, NULL), 0, "%s", jr_redis_errstr(r));
    jrt_sleep_ms(1000);
    cr_expect_eq(jrt_count(record, " paused"), 0, "a job of a paused queue ran");
    const char *re[] = {"resume", "-c", cfgpath, names[4], NULL};
    jrt_run_expect(0, out, sizeof out, re);
    int64_t ms = ms_until_lines(++want, 5000);
    cr_expect_lt(ms, 1500, "the paused job ran %lld ms after resume (block period 5 s)", (long long)ms);
    cr_expect_eq(jrt_count(record, " paused"), 1);
    jr_redis_free(r);

    /* SIGTERM of the blocked worker: it stops well within its block period. */
    jrt_sleep_ms(500);
    int64_t t0 = jrt_wall_us();
    int st = jrt_stop(worker, SIGTERM, 10000);
    worker = 0;
    int64_t stop_ms = (jrt_wall_us() - t0) / 1000;
    cr_expect_eq(st, 0, "the worker exited %d; log:\n%s", st, jrt_slurp(wlog));
    cr_expect_lt(stop_ms, 2500, "the worker took %lld ms to stop (block period 5 s)", (long long)stop_ms);
    /* No Redis error on the way (a refused read, a reconnect). */
    cr_expect_eq(jrt_count(wlog, "reconnecting"), 0, "worker log:\n%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_count(wlog, "Redis unavailable"), 0, "worker log:\n%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_count(slog, "error"), 0, "scheduler log:\n%s", jrt_slurp(slog));
}

/* MIGRATE every key of slot from node `from` to node `to` (both primaries,
 * by index). */
static void migrate_keys(int from, int to, long long slot) {
    redisContext *x = jrt_cluster_connect(&C, from);
    char s[16], port[16];
    snprintf(s, sizeof s, "%lld", slot);
    snprintf(port, sizeof port, "%d", C.port[to]);
    for (;;) {
        redisReply *k = jrt_cmd(x, "CLUSTER", "GETKEYSINSLOT", s, "100", NULL);
        cr_assert_eq(k->type, REDIS_REPLY_ARRAY);
        if (k->elements == 0) {
            freeReplyObject(k);
            break;
        }
        for (size_t i = 0; i < k->elements; i++) {
            redisReply *m = jrt_cmd(x, "MIGRATE", "127.0.0.1", port, k->element[i]->str, "0", "5000", NULL);
            cr_assert(m->type == REDIS_REPLY_STATUS, "MIGRATE %s: %s", k->element[i]->str,
                      m->type == REDIS_REPLY_ERROR ? m->str : "?");
            freeReplyObject(m);
        }
        freeReplyObject(k);
    }
    redisFree(x);
}

static const char *node_id(int i) {
    static char ids[JRT_CLUSTER_MAX][64];
    redisContext *x = jrt_cluster_connect(&C, i);
    redisReply *rep = jrt_cmd(x, "CLUSTER", "MYID", NULL);
    snprintf(ids[i], sizeof ids[i], "%s", rep->str);
    freeReplyObject(rep);
    redisFree(x);
    return ids[i];
}

static void setslot(int on, long long slot, const char *how, int node) {
    redisContext *x = jrt_cluster_connect(&C, on);
    char s[16];
    snprintf(s, sizeof s, "%lld", slot);
    redisReply *rep = jrt_cmd(x, "CLUSTER", "SETSLOT", s, how, node_id(node), NULL);
    cr_assert(rep->type == REDIS_REPLY_STATUS, "SETSLOT %s %s on node %d: %s", s, how, on,
              rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    freeReplyObject(rep);
    redisFree(x);
}

/* The slot of a queue's keys (jr:{QUEUE}:...). */
static long long slot_of(const char *queue) { return jr_cluster_key_slot(queue, strlen(queue)); }

Test(cluster, moved_slot_loses_nothing_and_runs_nothing_twice) {
    char names[3][16];
    queues_per_node(names, 1);
    char list[64];
    snprintf(list, sizeof list, "%s, %s, %s", names[0], names[1], names[2]);
    config(list, NULL);
    worker = jrt_worker(&R, cfgpath, NULL, wlog, NULL);
    jr_redis_t *p = open_url(C.url, 0);
    /* Move the slot of names[0] from node 0 to node 1 while jobs flow. */
    long long slot = slot_of(names[0]);
    long long moved_before = 0;
    size_t want = 0;
    for (int round = 0; round < 40; round++) {
        for (int q = 0; q < 3; q++) {
            char pay[128];
            snprintf(pay, sizeof pay, "m%d-%d", round, q);
            jr_enqueue_t j = jrt_job(names[q], "record", pay);
            cr_assert_eq(jr_redis_enqueue(p, &j, 1, NULL, NULL), 0, "round %d: %s", round, jr_redis_errstr(p));
            want++;
        }
        if (round == 15) {
            moved_before = node_calls(1, "asking");
            setslot(1, slot, "IMPORTING", 0);
            setslot(0, slot, "MIGRATING", 1);
            migrate_keys(0, 1, slot);
            for (int n = 0; n < 3; n++) setslot(n, slot, "NODE", 1);
        }
        jrt_sleep_ms(20);
    }
    (void)moved_before;
    size_t got = jrt_wait_lines(record, want, 20000);
    cr_assert_eq(got, want, "%zu of %zu jobs ran; worker log:\n%s", got, want, jrt_slurp(wlog));
    jrt_sleep_ms(500);
    cr_assert_eq(jrt_lines(record), want, "a job ran twice:\n%s", jrt_slurp(record));
    /* The facade followed MOVED: node 1 now answers for the queue's keys,
     * and node 0 refused (MOVED) commands the facade then resent. */
    jr_qstats_t s;
    cr_assert_eq(jr_redis_stats(p, names[0], &s), 0, "%s", jr_redis_errstr(p));
    cr_expect_eq(s.ready + s.pending, 0);
    redisContext *x = jrt_cluster_connect(&C, 0);
    redisReply *rep = jrt_cmd(x, "INFO", "errorstats", NULL);
    cr_expect(rep->type == REDIS_REPLY_STRING && strstr(rep->str, "errorstat_MOVED:count="),
              "node 0 sent no MOVED: %s", rep->str);
    freeReplyObject(rep);
    redisFree(x);

    /* A primary without the library (as a node added by a reshard): the
     * worker's result there is refused ("Function not found"), it
     * reconnects, the reconnect loads the library on every primary, and the
     * job is acknowledged (it ran once). */
    jr_enqueue_t j = jrt_job(names[2], "nap", "700");
    cr_assert_eq(jr_redis_enqueue(p, &j, 1, NULL, NULL), 0, "%s", jr_redis_errstr(p));
    want++;
    cr_assert_eq(jrt_wait_lines(record, want, 10000), want, "the nap job did not start");
    redisContext *x2 = jrt_cluster_connect(&C, 2);
    freeReplyObject(jrt_cmd(x2, "FUNCTION", "DELETE", "jobrunner", NULL));
    int back = 0;
    for (int t = 0; t < 100 && !back; t++) {
        jrt_sleep_ms(100);
        rep = jrt_cmd(x2, "FUNCTION", "LIST", "LIBRARYNAME", "jobrunner", NULL);
        back = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1;
        freeReplyObject(rep);
    }
    redisFree(x2);
    cr_expect(back, "the library was not loaded again on node 2; worker log:\n%s", jrt_slurp(wlog));
    int settled = 0;
    for (int t = 0; t < 100 && !settled; t++) {
        cr_assert_eq(jr_redis_stats(p, names[2], &s), 0, "%s", jr_redis_errstr(p));
        settled = s.ready + s.pending == 0;
        if (!settled) jrt_sleep_ms(100);
    }
    cr_expect(settled, "the nap job was not acknowledged; worker log:\n%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_count(record, " 700\n"), 1, "the nap job ran %d times", jrt_count(record, " 700\n"));
    jr_redis_free(p);
}

/* A worker blocked over 80 queues (80 slots, so 80 blocking parts): a job
 * on the last of them wakes it within a fraction of its 5 s block period,
 * as one on the first does. */
Test(cluster, a_blocked_read_over_eighty_slots_wakes_for_any_of_them) {
    enum { NQ = 80 };
    static char text[NQ * 8 + 256];
    size_t off = 0;
    for (int q = 0; q < NQ; q++) off += (size_t)snprintf(text + off, sizeof text - off, "%sw%d", q ? ", " : "", q);
    config(text, NULL);
    worker = jrt_worker(&R, cfgpath, NULL, wlog, NULL);
    jr_redis_t *p = open_url(C.url, 0);
    const char *order[] = {"w0", "w79", "w41"};
    for (int k = 0; k < 3; k++) {
        jrt_sleep_ms(1500); /* idle: blocked on every slot */
        jr_enqueue_t j = jrt_job(order[k], "record", "wake");
        cr_assert_eq(jr_redis_enqueue(p, &j, 1, NULL, NULL), 0, "%s", jr_redis_errstr(p));
        int64_t ms = ms_until_lines((size_t)k + 1, 8000);
        cr_expect_lt(ms, 1500, "a job on %s woke the worker after %lld ms (block period 5 s); log:\n%s", order[k],
                     (long long)ms, jrt_slurp(wlog));
    }
    jr_redis_free(p);
}

/* Nodes that disagree on a slot's owner for good (node 0 gives the slot
 * of a queue to node 1, which never took it: each answers MOVED to the
 * other): a call of that queue is refused with the MOVED, after a bounded
 * number of redirections, within its command timeout, instead of going
 * back and forth for ever; the queues of other slots are served. */
Test(cluster, a_slot_no_node_takes_is_refused_not_followed_for_ever) {
    char names[3][16];
    queues_per_node(names, 1);
    long long slot = slot_of(names[0]);
    setslot(0, slot, "NODE", 1);
    char out[512], err[2048];
    const char *a[] = {"enqueue", "--redis", C.url, "-q", names[0], "record", "loop", NULL};
    int64_t t0 = jrt_wall_us();
    int st = jrt_run(out, sizeof out, err, sizeof err, a);
    int64_t ms = (jrt_wall_us() - t0) / 1000;
    cr_assert_eq(st, 1, "enqueue to a slot both nodes disown exited %d after %lld ms: %s", st, (long long)ms, err);
    cr_assert(strstr(err, "MOVED"), "the refusal is Redis's MOVED: %s", err);
    cr_assert_lt(ms, 10000, "it took %lld ms", (long long)ms);
    const char *b[] = {"enqueue", "--redis", C.url, "-q", names[1], "record", "other", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, b), 0, "a queue of another slot: %s", err);
    setslot(0, slot, "NODE", 0);
}

Test(cluster, ask_during_a_migration_and_tryagain_for_several_keys) {
    char names[3][16];
    queues_per_node(names, 1);
    const char *q = names[0];
    jr_redis_t *r = open_url(C.url, 0);
    /* Two keys of the queue's slot, outside jobrunner's: one moved, one not. */
    char k1[64], k2[64];
    snprintf(k1, sizeof k1, "jrt:{%s}:a", q);
    snprintf(k2, sizeof k2, "jrt:{%s}:b", q);
    redisContext *x0 = jrt_cluster_connect(&C, 0);
    freeReplyObject(jrt_cmd(x0, "SET", k1, "1", NULL));
    freeReplyObject(jrt_cmd(x0, "SET", k2, "2", NULL));
    redisFree(x0);
    long long slot = jr_cluster_key_slot(q, strlen(q));
    setslot(1, slot, "IMPORTING", 0);
    setslot(0, slot, "MIGRATING", 1);
    redisContext *m = jrt_cluster_connect(&C, 0);
    char port[16];
    snprintf(port, sizeof port, "%d", C.port[1]);
    redisReply *rep = jrt_cmd(m, "MIGRATE", "127.0.0.1", port, k1, "0", "5000", NULL);
    cr_assert(rep->type == REDIS_REPLY_STATUS, "MIGRATE: %s", rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    freeReplyObject(rep);
    redisFree(m);
    long long asking = node_calls(1, "asking");
    /* A call reaching the moved key: ASK, followed. */
    redisReply *got;
    const char *get[] = {"GET", k1};
    cr_assert_eq(jri_exec_argv(r, &got, 2, get, NULL), 0, "GET %s: %s", k1, jr_redis_errstr(r));
    cr_assert(got->type == REDIS_REPLY_STRING && !strcmp(got->str, "1"), "GET %s after ASK", k1);
    freeReplyObject(got);
    cr_expect_gt(node_calls(1, "asking"), asking, "no ASKING reached the importing node");
    /* A call of both keys (one moved, one not): TRYAGAIN until the
     * migration completes (done 300 ms later by a child), then it goes. */
    pid_t child = fork();
    cr_assert(child >= 0);
    if (child == 0) {
        jrt_sleep_ms(300);
        migrate_keys(0, 1, slot);
        for (int n = 0; n < 3; n++) setslot(n, slot, "NODE", 1);
        _exit(0);
    }
    jr_redis_set_timeout(r, 5000);
    const char *mget[] = {"EVAL", "return redis.call('GET', KEYS[1]) .. redis.call('GET', KEYS[2])", "2", k1, k2};
    cr_assert_eq(jri_exec_argv(r, &got, 5, mget, NULL), 0, "EVAL of both keys: %s", jr_redis_errstr(r));
    cr_expect(got->type == REDIS_REPLY_STRING && !strcmp(got->str, "12"), "EVAL after TRYAGAIN: %s",
              got->type == REDIS_REPLY_STRING ? got->str : "?");
    freeReplyObject(got);
    int st;
    waitpid(child, &st, 0);
    /* And jobrunner's own calls on that queue work after it. */
    jr_enqueue_t j = jrt_job(q, "record", "after");
    cr_assert_eq(jr_redis_enqueue(r, &j, 1, NULL, NULL), 0, "%s", jr_redis_errstr(r));
    /* Keys of two slots in one call: refused, never sent (an error reply:
     * the connection stays usable). */
    long long evals = 0;
    for (int n = 0; n < 3; n++) evals += node_calls(n, "eval");
    const char *two[] = {"EVAL", "return 1", "2", "jrt:{a}", "jrt:{b}"};
    cr_expect_eq(jri_exec_argv(r, &got, 5, two, NULL), JR_EREDIS);
    cr_expect(strstr(jr_redis_errstr(r), "keys in 2 slots"), "%s", jr_redis_errstr(r));
    cr_expect(jr_redis_ok(r), "the refusal broke the connection");
    long long evals_after = 0;
    for (int n = 0; n < 3; n++) evals_after += node_calls(n, "eval");
    cr_expect_eq(evals_after, evals, "the call of two slots was sent");
    cr_assert_eq(jr_redis_enqueue(r, &j, 1, NULL, NULL), 0, "after the refusal: %s", jr_redis_errstr(r));
    jr_redis_free(r);
}

/* Every node stopped (SIGSTOP: connects are taken by the kernel, nothing
 * answers): a worker and a scheduler that keep trying to connect act on
 * SIGTERM within about the connect timeout (2 s), not the timeout per node
 * asked (3 nodes: 6 s), and the scheduler does not lose a signal that
 * arrived during an attempt. */
Test(cluster, sigterm_with_every_node_unresponsive_stops_within_the_connect_timeout) {
    jrt_config(&R, "  connect_timeout: 2s\nworker:\n  queues: [q0]\n  block: 5s\nscheduler:\n  block: 5s\n", cfgpath,
               sizeof cfgpath);
    for (int i = 0; i < C.n; i++) kill(C.pid[i], SIGSTOP);
    worker = jrt_worker(&R, cfgpath, NULL, wlog, NULL);
    scheduler = jrt_scheduler(&R, cfgpath, slog);
    int wtried = jrt_wait_count(wlog, "Redis unavailable", 1, 20000);
    int stried = jrt_wait_count(slog, "Redis unavailable", 1, 20000);
    jrt_sleep_ms(300); /* both in their next attempt */
    kill(worker, SIGTERM);
    kill(scheduler, SIGTERM);
    int64_t t0 = jrt_wall_us();
    int wst = jrt_stop(worker, SIGTERM, 10000);
    int64_t wms = (jrt_wall_us() - t0) / 1000;
    int sst = jrt_stop(scheduler, SIGTERM, 10000);
    int64_t sms = (jrt_wall_us() - t0) / 1000;
    worker = scheduler = 0;
    for (int i = 0; i < C.n; i++) kill(C.pid[i], SIGCONT);
    cr_assert(wtried && stried, "no failed connect logged; worker log:\n%s\nscheduler log:\n%s", jrt_slurp(wlog),
              jrt_slurp(slog));
    cr_expect_eq(wst, 0, "the worker's exit status %d; log:\n%s", wst, jrt_slurp(wlog));
    cr_expect_lt(wms, 3500, "the worker stopped %lld ms after SIGTERM; log:\n%s", (long long)wms, jrt_slurp(wlog));
    cr_expect_eq(sst, 0, "the scheduler's exit status %d (-1: it had to be SIGKILLed); log:\n%s", sst,
                 jrt_slurp(slog));
    cr_expect_lt(sms, 3500, "the scheduler stopped %lld ms after SIGTERM; log:\n%s", (long long)sms, jrt_slurp(slog));
}

/* A primary other than the home node with an evicting maxmemory-policy:
 * the worker warns at connect, naming it. */
Test(cluster, an_evicting_primary_is_warned_about_by_name) {
    int home = jrt_cluster_primary_of(&C, 0, "jr:{queues}"), other = (home + 1) % 3;
    redisContext *x = jrt_cluster_connect(&C, other);
    freeReplyObject(jrt_cmd(x, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru", NULL));
    redisFree(x);
    config("q0", NULL);
    worker = jrt_worker(&R, cfgpath, NULL, wlog, NULL);
    char want[64];
    snprintf(want, sizeof want, "allkeys-lru (node 127.0.0.1:%d)", C.port[other]);
    cr_expect(jrt_wait_count(wlog, want, 1, 10000) >= 1 && jrt_count(wlog, "Redis may evict keys") >= 1,
              "no warning naming node %d (%s); worker log:\n%s", other, want, jrt_slurp(wlog));
}

/* ---- one primary dead, no replica to take over ---------------------------- */

static void setup_no_full_coverage(void) {
    static const char *const extra[] = {"--cluster-require-full-coverage", "no", NULL};
    jrt_cluster_start(&C, 3, 0, extra);
    memset(&R, 0, sizeof R);
    snprintf(R.dir, sizeof R.dir, "%s", C.dir);
    snprintf(R.url, sizeof R.url, "%.159s", C.url);
    snprintf(record, sizeof record, "%s/record.txt", C.dir);
    snprintf(wlog, sizeof wlog, "%s/worker.log", C.dir);
    snprintf(slog, sizeof slog, "%s/scheduler.log", C.dir);
    setenv("JRT_RECORD", record, 1);
}
TestSuite(cluster_down, .init = setup_no_full_coverage, .fini = teardown, .timeout = 120);

/* A primary SIGKILLed (the others serve on: cluster-require-full-coverage
 * no) costs its own queues only: jobs due on the other two primaries after
 * the kill are promoted by the scheduler and run by the worker while it is
 * down; once it is back, a job on its queue runs too. */
Test(cluster_down, a_dead_primary_stops_only_its_own_queues) {
    char names[3][16];
    queues_per_node(names, 1);
    char list[64];
    snprintf(list, sizeof list, "%s, %s, %s", names[0], names[1], names[2]);
    config(list, NULL);
    worker = jrt_worker(&R, cfgpath, NULL, wlog, NULL);
    scheduler = jrt_scheduler(&R, cfgpath, slog);
    for (int q = 0; q < 3; q++) {
        const char *a[] = {"-q", names[q], "record", "warm", NULL};
        jrt_cli_enqueue(&R, cfgpath, a, NULL, 0);
    }
    cr_assert_eq(jrt_wait_lines(record, 3, 20000), 3, "warm-up; worker log:\n%s", jrt_slurp(wlog));
    for (int q = 0; q < 2; q++) { /* due after the kill */
        char pay[64];
        snprintf(pay, sizeof pay, "late-%s", names[q]);
        const char *a[] = {"-q", names[q], "--in", "2s", "record", pay, NULL};
        jrt_cli_enqueue(&R, cfgpath, a, NULL, 0);
    }
    jrt_sleep_ms(1500); /* idle: the worker's and the scheduler's reads blocked on every primary */
    jrt_cluster_kill(&C, 2);
    size_t got = jrt_wait_lines(record, 5, 8000);
    cr_assert_eq(got, 5, "%zu of the 2 jobs due on the live primaries ran with node 2 dead; worker log:\n%s\n"
                 "scheduler log:\n%s", got - 3, jrt_slurp(wlog), jrt_slurp(slog));
    jrt_cluster_restart(&C, 2);
    cr_assert(jrt_cluster_wait_ok(&C, 30000), "the cluster did not settle after node 2 came back");
    const char *a[] = {"-q", names[2], "record", "back", NULL};
    jrt_cli_enqueue(&R, cfgpath, a, NULL, 0);
    got = jrt_wait_lines(record, 6, 15000);
    cr_assert_eq(got, 6, "the job on %s (node 2, back) did not run; worker log:\n%s", names[2], jrt_slurp(wlog));
}

/* A job of a primary that dies while it runs: its result waits for that
 * node, and the worker goes on taking the other primaries' jobs
 * meanwhile (results first holds back only for results it can give). */
Test(cluster_down, a_result_held_for_a_dead_primary_does_not_stop_the_others) {
    char names[3][16];
    queues_per_node(names, 1);
    char list[64];
    snprintf(list, sizeof list, "%s, %s, %s", names[0], names[1], names[2]);
    config(list, NULL);
    worker = jrt_worker(&R, cfgpath, NULL, wlog, NULL);
    const char *a[] = {"-q", names[2], "nap", "1500", NULL};
    jrt_cli_enqueue(&R, cfgpath, a, NULL, 0);
    cr_assert_eq(jrt_wait_lines(record, 1, 20000), 1, "the nap did not start; worker log:\n%s", jrt_slurp(wlog));
    jrt_cluster_kill(&C, 2); /* while it naps: its acknowledgement will be refused */
    jrt_sleep_ms(2500);      /* it has ended, its result is held */
    for (int q = 0; q < 2; q++) {
        char pay[64];
        snprintf(pay, sizeof pay, "after-%s", names[q]);
        const char *b[] = {"-q", names[q], "record", pay, NULL};
        jrt_cli_enqueue(&R, cfgpath, b, NULL, 0);
    }
    size_t got = jrt_wait_lines(record, 3, 5000);
    cr_assert_eq(got, 3, "%zu of the 2 jobs of the live primaries ran while a result for dead node 2 was held; worker "
                 "log:\n%s", got - 1, jrt_slurp(wlog));
}

/* A job whose follow-up goes to a queue of a primary that is down: the
 * job is neither dead-lettered nor acknowledged without it; it waits, the
 * worker goes on with the other primaries' jobs, and once the primary is
 * back the follow-up is written (once) and runs. */
Test(cluster_down, a_follow_up_to_a_dead_primary_waits_for_it) {
    char names[3][16];
    queues_per_node(names, 1);
    char list[64];
    snprintf(list, sizeof list, "%s, %s, %s", names[0], names[1], names[2]);
    config(list, NULL);
    worker = jrt_worker(&R, cfgpath, JRT_FOLLOW_PLUGIN, wlog, NULL);
    const char *warm[] = {"-q", names[2], "record", "warm", NULL};
    jrt_cli_enqueue(&R, cfgpath, warm, NULL, 0);
    cr_assert_eq(jrt_wait_count(record, " record warm", 1, 20000), 1, "warm-up; log:\n%s", jrt_slurp(wlog));
    jrt_cluster_kill(&C, 2);
    char spec[64], id[JR_ID_MAX], out[4096];
    snprintf(spec, sizeof spec, "q=%s,n=1", names[2]);
    const char *a[] = {"-q", names[0], "follow", spec, NULL};
    jrt_cli_enqueue(&R, cfgpath, a, id, sizeof id);
    char ran[JR_ID_MAX + 8];
    snprintf(ran, sizeof ran, "%s 1\n", id);
    cr_assert_eq(jrt_wait_count(record, ran, 1, 10000), 1, "the job did not run; log:\n%s", jrt_slurp(wlog));
    const char *b[] = {"-q", names[1], "record", "meanwhile", NULL};
    jrt_cli_enqueue(&R, cfgpath, b, NULL, 0);
    cr_assert_eq(jrt_wait_count(record, " record meanwhile", 1, 5000), 1,
                 "a job of a live primary did not run while the follow-up waited; log:\n%s", jrt_slurp(wlog));
    const char *dead[] = {"dead", "list", "-q", names[0], NULL};
    cr_assert_eq(jrt_cli(&R, out, sizeof out, dead), 0, "dead list: %s", out);
    cr_assert(!strstr(out, id), "the job went to the dead stream for want of its follow-up's primary: %s", out);
    jrt_cluster_restart(&C, 2);
    cr_assert(jrt_cluster_wait_ok(&C, 30000), "the cluster did not settle after node 2 came back");
    char fu[JR_ID_MAX + 16];
    snprintf(fu, sizeof fu, " record %s#1\n", id);
    cr_assert_eq(jrt_wait_count(record, fu, 1, 20000), 1, "the follow-up did not run once node 2 was back; log:\n%s",
                 jrt_slurp(wlog));
    jrt_sleep_ms(1500);
    cr_assert_eq(jrt_count(record, fu), 1, "the follow-up ran %d times", jrt_count(record, fu));
    cr_assert_eq(jrt_count(record, ran), 1, "the job ran %d times", jrt_count(record, ran));
}

/* A primary none of the worker's queues is on, connected (the library
 * load) and idle, SIGKILLed: the worker is not thrown off its blocked read
 * (no reconnect, no wait for the command timeout); a job on its queue runs
 * promptly. */
Test(cluster_down, a_primary_dying_while_idle_does_not_stall_the_read) {
    char names[3][16];
    queues_per_node(names, 1);
    int home = jrt_cluster_primary_of(&C, 0, "jr:{queues}"), victim = (home + 1) % 3;
    config(names[home], NULL);
    worker = jrt_worker(&R, cfgpath, NULL, wlog, NULL);
    const char *a[] = {"-q", names[home], "record", "warm", NULL};
    jrt_cli_enqueue(&R, cfgpath, a, NULL, 0);
    cr_assert_eq(jrt_wait_lines(record, 1, 20000), 1, "warm-up; worker log:\n%s", jrt_slurp(wlog));
    jrt_sleep_ms(500);
    jrt_cluster_kill(&C, victim);
    jrt_sleep_ms(3000); /* past the command timeout (2 s) */
    const char *b[] = {"-q", names[home], "record", "after", NULL};
    jrt_cli_enqueue(&R, cfgpath, b, NULL, 0);
    int64_t ms = ms_until_lines(2, 5000);
    cr_expect_lt(ms, 1500, "the job ran %lld ms after it was enqueued; worker log:\n%s", (long long)ms, jrt_slurp(wlog));
    cr_expect_eq(jrt_count(wlog, "reconnecting"), 0, "the worker reconnected; log:\n%s", jrt_slurp(wlog));
}

TestSuite(cluster_replicas, .init = setup_replicas, .fini = teardown, .timeout = 180);

Test(cluster_replicas, wait_replicas_waits_on_every_node_written) {
    char names[3][16];
    queues_per_node(names, 1);
    jr_redis_t *r = open_url(C.url, 1);
    long long waits[3];
    for (int n = 0; n < 3; n++) waits[n] = node_calls(n, "wait");
    jr_enqueue_t jobs[3];
    for (int q = 0; q < 3; q++) jobs[q] = jrt_job(names[q], "record", "w");
    for (int q = 0; q < 3; q++) cr_assert_eq(jr_redis_enqueue(r, &jobs[q], 1, NULL, NULL), 0, "%s", jr_redis_errstr(r));
    for (int n = 0; n < 3; n++) cr_expect_gt(node_calls(n, "wait"), waits[n], "no WAIT on node %d", n);
    /* A replica stopped: an enqueue to its primary is not confirmed. */
    int rep_of0 = -1;
    for (int i = 3; i < C.n && rep_of0 < 0; i++) {
        redisContext *x = jrt_cluster_connect(&C, i);
        redisReply *info = jrt_cmd(x, "INFO", "replication", NULL);
        char want[32];
        snprintf(want, sizeof want, "master_port:%d", C.port[0]);
        if (strstr(info->str, want)) rep_of0 = i;
        freeReplyObject(info);
        redisFree(x);
    }
    cr_assert(rep_of0 >= 0, "no replica of node 0");
    kill(C.pid[rep_of0], SIGSTOP);
    int rc = jr_redis_enqueue(r, &jobs[0], 1, NULL, NULL);
    kill(C.pid[rep_of0], SIGCONT);
    cr_expect_eq(rc, JR_EREPLICAS, "an enqueue with its replica stopped: %d %s", rc, jr_redis_errstr(r));
    jr_redis_free(r);
}
