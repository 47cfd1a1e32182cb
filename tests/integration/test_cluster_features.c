/* Every feature of jobrunner on a real Redis Cluster of 3 primaries, used
 * as a user would: the CLI, a worker, a scheduler, all given the
 * redis-cluster:// URL, over three queues chosen to sit on the three
 * primaries (so every check crosses shards). One cluster serves the whole
 * file (a cluster takes seconds to form): one test, its steps in turn,
 * each assert naming the step. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "jobrunner/client.h"

static jrt_cluster_t C;
static jrt_redis_t V; /* the cluster as the harness's helpers see a Redis: its URL and a dir */
static char record[192], cfgpath[192], wlog[192], slog[192];
static char Q[3][16]; /* Q[i] sits on primary i */

/* Three queue names, one per primary. */
static void pick_queues(void) {
    int have = 0;
    for (int k = 0; k < 200 && have != 7; k++) {
        char name[16], key[48];
        snprintf(name, sizeof name, "cq%d", k);
        snprintf(key, sizeof key, "jr:{%s}:ready", name);
        int p = jrt_cluster_primary_of(&C, 0, key);
        if (p >= 0 && p < 3 && !(have & (1 << p))) {
            snprintf(Q[p], sizeof Q[p], "%s", name);
            have |= 1 << p;
        }
    }
    cr_assert_eq(have, 7, "no queue names found for all three primaries");
}

/* Run the CLI on the cluster; its exit status, stdout into out. */
static int cli(char *out, size_t len, const char *const *args) { return jrt_cli(&V, out, len, args); }

static void enqueue(const char *q, const char *when_flag, const char *when, const char *handler, const char *payload,
                    char *id, size_t idlen) {
    const char *a[12] = {"-q", q};
    size_t n = 2;
    if (when_flag) a[n++] = when_flag, a[n++] = when;
    a[n++] = handler, a[n++] = payload, a[n] = NULL;
    jrt_cli_enqueue(&V, cfgpath, a, id, idlen);
}

/* Lines "<id> record <payload>" (the follow plugin's record handler). */
static int recorded(const char *payload) {
    char needle[256];
    snprintf(needle, sizeof needle, " record %s\n", payload);
    return jrt_count(record, needle);
}
static int wait_recorded(const char *payload, int n, int timeout_ms) {
    char needle[256];
    snprintf(needle, sizeof needle, " record %s\n", payload);
    return jrt_wait_count(record, needle, n, timeout_ms);
}

static void teardown(void) { jrt_cluster_stop(&C); }

/* A cluster of 3 primaries (over TLS: tls), seen as V; the record file
 * and the logs in its dir. */
static void start(int tls) {
    if (tls) jrt_cluster_start_tls(&C, 3, 0, NULL);
    else jrt_cluster_start(&C, 3, 0, NULL);
    jrt_cluster_view(&C, &V);
    snprintf(record, sizeof record, "%s/record.txt", C.dir);
    snprintf(wlog, sizeof wlog, "%s/worker.log", C.dir);
    snprintf(slog, sizeof slog, "%s/scheduler.log", C.dir);
    setenv("JRT_RECORD", record, 1);
}

Test(cluster_features, every_feature_across_three_primaries, .fini = teardown, .timeout = 300) {
    start(0);
    pick_queues();
    int mport = jrt_free_port();
    char extra[256];
    snprintf(extra, sizeof extra, "worker:\n  block: 1s\n  lease: 5s\nscheduler:\n  block: 1s\n");
    jrt_config(&V, extra, cfgpath, sizeof cfgpath);
    char maddr[32];
    snprintf(maddr, sizeof maddr, "127.0.0.1:%d", mport);
    const char *wargs[] = {"-q", Q[0], "-q", Q[1], "-q", Q[2], "--metrics", maddr, NULL};
    pid_t w = jrt_worker(&V, cfgpath, JRT_FOLLOW_PLUGIN, wlog, wargs);
    pid_t s = jrt_scheduler(&V, cfgpath, slog);
    char out[16384], id[JR_ID_MAX], id2[JR_ID_MAX];

    /* Ready jobs on each primary's queue run. */
    for (int i = 0; i < 3; i++) {
        char p[32];
        snprintf(p, sizeof p, "ready-%d", i);
        enqueue(Q[i], NULL, NULL, "record", p, NULL, 0);
    }
    for (int i = 0; i < 3; i++) {
        char p[32];
        snprintf(p, sizeof p, "ready-%d", i);
        cr_assert_eq(wait_recorded(p, 1, 15000), 1, "ready job on %s (primary %d) did not run once (%s)", Q[i], i,
                     wlog);
    }

    /* Delayed: near (sorted set) and far (time wheel), on every primary. */
    for (int i = 0; i < 3; i++) {
        char p[32];
        snprintf(p, sizeof p, "near-%d", i);
        enqueue(Q[i], "--in", "500ms", "record", p, NULL, 0);
        snprintf(p, sizeof p, "far-%d", i);
        enqueue(Q[i], "--in", "4s", "record", p, NULL, 0);
    }
    /* job show and jobs of a delayed job on the second primary. */
    enqueue(Q[1], "--in", "1h", "record", "later", id, sizeof id);
    const char *show[] = {"job", "show", "-q", Q[1], id, NULL};
    cr_assert_eq(cli(out, sizeof out, show), 0, "job show of a delayed job: %s", out);
    cr_assert(strstr(out, "delayed"), "job show says where the job is: %s", out);
    const char *list[] = {"jobs", "-q", Q[1], "--state", "delayed", NULL};
    cr_assert_eq(cli(out, sizeof out, list), 0, "jobs --state delayed: %s", out);
    cr_assert(strstr(out, id), "jobs --state delayed lists %s: %s", id, out);
    for (int i = 0; i < 3; i++) {
        char p[32];
        snprintf(p, sizeof p, "near-%d", i);
        cr_assert_eq(wait_recorded(p, 1, 15000), 1, "near delayed job on %s did not run once", Q[i]);
        snprintf(p, sizeof p, "far-%d", i);
        cr_assert_eq(wait_recorded(p, 1, 20000), 1, "far (wheel) delayed job on %s did not run once", Q[i]);
    }

    /* run-now of the delayed job; delete and cancel of others. */
    const char *runnow[] = {"job", "run-now", "-q", Q[1], id, NULL};
    cr_assert_eq(cli(out, sizeof out, runnow), 0, "job run-now: %s", out);
    cr_assert_eq(wait_recorded("later", 1, 15000), 1, "a job made ready by run-now did not run");
    enqueue(Q[2], "--in", "1h", "record", "deleted", id, sizeof id);
    const char *del[] = {"job", "delete", "-q", Q[2], id, NULL};
    cr_assert_eq(cli(out, sizeof out, del), 0, "job delete: %s", out);
    const char *show2[] = {"job", "show", "-q", Q[2], id, NULL};
    cr_assert_eq(cli(out, sizeof out, show2), 1, "job show of a deleted job finds it: %s", out);
    enqueue(Q[0], "--in", "2s", "record", "cancelled", id, sizeof id);
    const char *cancel[] = {"cancel", "-q", Q[0], id, NULL};
    cr_assert_eq(cli(out, sizeof out, cancel), 0, "cancel: %s", out);
    cr_assert(strstr(out, "cancelled"), "cancel says so: %s", out);

    /* Dead letters: a job that fails, listed, retried (it runs again). */
    enqueue(Q[2], NULL, NULL, "follow", "n=0,result=fail", id, sizeof id);
    char needle[JR_ID_MAX + 8];
    snprintf(needle, sizeof needle, "%s 1\n", id);
    cr_assert_eq(jrt_wait_count(record, needle, 1, 15000), 1, "the failing job did not run");
    const char *dlist[] = {"dead", "list", "-q", Q[2], NULL};
    int found = 0;
    for (int t = 0; t < 100 && !found; t++) {
        found = cli(out, sizeof out, dlist) == 0 && strstr(out, id);
        if (!found) jrt_sleep_ms(100);
    }
    cr_assert(found, "dead list of %s does not show %s: %s", Q[2], id, out);
    const char *dretry[] = {"dead", "retry", "-q", Q[2], id, NULL};
    cr_assert_eq(cli(out, sizeof out, dretry), 0, "dead retry: %s", out);
    cr_assert_eq(jrt_wait_count(record, needle, 2, 15000), 2, "a dead job retried did not run again");

    /* Pause stops fetching from a queue; resume starts it again. */
    const char *pause[] = {"pause", Q[1], NULL}, *resume[] = {"resume", Q[1], NULL};
    cr_assert_eq(cli(out, sizeof out, pause), 0, "pause: %s", out);
    jrt_sleep_ms(500);
    enqueue(Q[1], NULL, NULL, "record", "paused", NULL, 0);
    jrt_sleep_ms(2000);
    cr_assert_eq(recorded("paused"), 0, "a job of a paused queue ran");
    const char *st[] = {"stats", "-q", Q[1], "--json", NULL};
    cr_assert_eq(cli(out, sizeof out, st), 0, "stats: %s", out);
    cr_assert(strstr(out, "\"paused\":true") || strstr(out, "\"paused\": true"), "stats shows the pause: %s", out);
    cr_assert_eq(cli(out, sizeof out, resume), 0, "resume: %s", out);
    cr_assert_eq(wait_recorded("paused", 1, 10000), 1, "a resumed queue's job did not run");

    /* Follow-ups: to the job's own queue and to a queue on another primary. */
    char spec[64];
    enqueue(Q[0], NULL, NULL, "follow", "q=,n=1", id, sizeof id);
    snprintf(spec, sizeof spec, "q=%s,n=1", Q[2]);
    enqueue(Q[0], NULL, NULL, "follow", spec, id2, sizeof id2);
    char fp[JR_ID_MAX + 8];
    snprintf(fp, sizeof fp, "%s#1", id);
    cr_assert_eq(wait_recorded(fp, 1, 15000), 1, "a follow-up to the job's own queue did not run once (%s)", wlog);
    snprintf(fp, sizeof fp, "%s#1", id2);
    cr_assert_eq(wait_recorded(fp, 1, 15000), 1, "a follow-up to a queue on another primary did not run once (%s)",
                 wlog);

    /* Periodic jobs: fired by the scheduler, each tick once. */
    const char *cron[] = {"cron", "add", "tick", "--every", "1s", "-q", Q[2], "record", "cron", NULL};
    cr_assert_eq(cli(out, sizeof out, cron), 0, "cron add: %s", out);
    cr_assert_geq(wait_recorded("cron", 2, 15000), 2, "an every-1s schedule did not fire twice");
    const char *cronrm[] = {"cron", "remove", "tick", NULL};
    cr_assert_eq(cli(out, sizeof out, cronrm), 0, "cron remove: %s", out);

    /* workers, stats and metrics see the cluster's work. */
    const char *workers[] = {"workers", NULL};
    cr_assert_eq(cli(out, sizeof out, workers), 0, "workers: %s", out);
    cr_assert(strstr(out, "worker") && strstr(out, "scheduler"), "workers lists both processes: %s", out);
    const char *stall[] = {"stats", "--json", NULL};
    cr_assert_eq(cli(out, sizeof out, stall), 0, "stats: %s", out);
    for (int i = 0; i < 3; i++) cr_assert(strstr(out, Q[i]), "stats lists %s: %s", Q[i], out);
    char *body = NULL;
    cr_assert_eq(jrt_http_get(mport, "/metrics", &body), 200, "GET /metrics");
    cr_assert(body && strstr(body, "jobrunner_jobs_total"), "the worker's metrics count jobs: %s", body ? body : "");
    free(body);

    /* Nothing ran twice: every recorded payload once (but the retried dead
     * job, counted above, and the cron ticks). */
    const char *once[] = {"ready-0", "ready-1", "ready-2", "near-0", "near-1", "near-2", "far-0", "far-1", "far-2",
                          "later", "paused", NULL};
    for (size_t i = 0; once[i]; i++) cr_assert_eq(recorded(once[i]), 1, "%s ran %d times", once[i], recorded(once[i]));
    cr_assert_eq(recorded("deleted") + recorded("cancelled"), 0, "a deleted or cancelled job ran");

    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0, "the worker did not stop cleanly on SIGTERM (%s)", wlog);
    cr_assert_eq(jrt_stop(s, SIGTERM, 10000), 0, "the scheduler did not stop cleanly on SIGTERM (%s)", slog);
}

/* Jobs of the record plugin recorded so far whose payload starts with
 * prefix. */
static int recorded_prefix(const char *prefix) {
    char needle[64];
    snprintf(needle, sizeof needle, " record %s", prefix);
    return jrt_count(record, needle);
}

/* A queue of 9 partitions on 3 primaries is one queue to its users and
 * spreads over the primaries: 3 partitions and about a third of the jobs
 * on each; lookups of generated ids work; every job runs once. */
Test(cluster_features, a_partitioned_queue_spreads_over_the_primaries, .fini = teardown, .timeout = 240) {
    start(0);
    char out[8192];
    const char *set[] = {"queue", "partitions", "hot", "9", NULL};
    cr_assert_eq(cli(out, sizeof out, set), 0, "queue partitions hot 9: %s", out);
    /* Each partition's stream is on a primary: count them per primary. */
    int per[3] = {0};
    jr_client_options_t o = {.url = C.url};
    jr_client_t *c = jr_client_open(&o);
    cr_assert(c && !jr_client_errstr(c)[0], "client: %s", c ? jr_client_errstr(c) : "out of memory");
    enum { N = 900 };
    static jr_client_job_t jobs[N];
    static jr_client_result_t res[N];
    static char payloads[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(payloads[i], sizeof payloads[i], "hot-%d", i);
        jobs[i] = (jr_client_job_t){.queue = "hot", .handler = "record", .payload = payloads[i],
                                    .payload_len = strlen(payloads[i])};
    }
    cr_assert_eq(jr_client_enqueue_many(c, jobs, N, res), 0, "enqueue: %s", jr_client_errstr(c));
    /* A generated id names its partition (~i): job show finds it. */
    cr_assert(strchr(res[0].id, '~'), "a generated id of a partitioned queue names its partition: %s", res[0].id);
    const char *show[] = {"job", "show", "-q", "hot", res[0].id, NULL};
    cr_assert_eq(cli(out, sizeof out, show), 0, "job show %s: %s", res[0].id, out);
    cr_assert(strstr(out, "ready"), "job show says ready: %s", out);
    /* Where the jobs are: XLEN of each partition's stream, by primary. */
    long long total = 0;
    for (int n = 0; n < 3; n++) {
        redisContext *x = jrt_cluster_connect(&C, n);
        redisReply *keys = redisCommand(x, "KEYS jr:{hot#*}:ready");
        cr_assert(keys && keys->type == REDIS_REPLY_ARRAY, "KEYS on node %d", n);
        long long here = 0;
        for (size_t k = 0; k < keys->elements; k++) {
            redisReply *l = redisCommand(x, "XLEN %s", keys->element[k]->str);
            here += l && l->type == REDIS_REPLY_INTEGER ? l->integer : 0;
            if (l) freeReplyObject(l);
        }
        per[n] = (int)keys->elements;
        cr_log_info("primary %d: %zu partitions, %lld jobs", n, keys->elements, here);
        cr_assert(here >= N / 3 * 85 / 100 && here <= N / 3 * 115 / 100,
                  "primary %d holds %lld of %d jobs: not within 15%% of a third", n, here, N);
        total += here;
        freeReplyObject(keys);
        redisFree(x);
    }
    cr_assert_eq(total, N, "the partitions hold %lld jobs, not %d", total, N);
    cr_assert(per[0] == 3 && per[1] == 3 && per[2] == 3, "9 partitions over 3 primaries: %d/%d/%d", per[0], per[1],
              per[2]);
    /* stats treats the queue as one; a worker of "hot" runs every job once. */
    const char *st[] = {"stats", "-q", "hot", "--json", NULL};
    cr_assert_eq(cli(out, sizeof out, st), 0, "stats: %s", out);
    cr_assert(strstr(out, "\"ready\":900") || strstr(out, "\"ready\": 900"), "stats -q hot counts 900 ready: %s", out);
    const char *wargs[] = {"-q", "hot", NULL};
    char cfg[192];
    jrt_config(&V, "worker:\n  block: 1s\nqueues:\n  hot: {keep_finished: {count: 100}}\n", cfg, sizeof cfg);
    pid_t w = jrt_worker(&V, cfg, JRT_FOLLOW_PLUGIN, wlog, wargs);
    for (int t = 0; t < 300 && recorded_prefix("hot-") < N; t++) jrt_sleep_ms(100);
    cr_assert_eq(recorded_prefix("hot-"), N, "%d of %d jobs ran (%s)", recorded_prefix("hot-"), N, wlog);
    char *text = NULL;
    size_t n = 0, distinct = 0;
    char **ids = jrt_record_ids(record, N + 10, &text, &n, &distinct);
    cr_assert_eq(distinct, n, "a job ran twice (%zu runs, %zu ids)", n, distinct);
    free(ids), free(text);
    /* A job with a generated id (~J) whose only follow-up goes to a queue
     * of another hash tag: that follow-up is written first, then the job is
     * acknowledged alone; its finished record is found by the id its
     * enqueue gave (it was once stored under the id with ~J). */
    pick_queues();
    char spec[64], fid[JR_ID_MAX];
    snprintf(spec, sizeof spec, "q=%s,n=1", Q[0]);
    jrt_cli_enqueue(&V, cfg, (const char *const[]){"-q", "hot", "follow", spec, NULL}, fid, sizeof fid);
    cr_assert(strchr(fid, '~'), "a generated id of a partitioned queue: %s", fid);
    const char *fshow[] = {"job", "show", "-q", "hot", fid, NULL};
    int finished = 0;
    for (int t = 0; t < 150 && !finished; t++, jrt_sleep_ms(100))
        finished = cli(out, sizeof out, fshow) == 0 && strstr(out, "state: finished") && strstr(out, "outcome: ok");
    cr_assert(finished, "job show %s does not find its finished record (%s): %s", fid, wlog, out);
    const char *fq[] = {"stats", "-q", Q[0], "--json", NULL};
    cr_assert_eq(cli(out, sizeof out, fq), 0, "stats: %s", out);
    cr_assert(strstr(out, "\"ready\":1") || strstr(out, "\"ready\": 1"), "its follow-up waits in %s: %s", Q[0], out);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0, "the worker did not stop cleanly (%s)", wlog);
    jr_client_free(c);
}

/* An enqueue sent to a primary that stops answering (frozen: SIGSTOP) is
 * "maybe written" (UNKNOWN), never "refused, not written": the call was
 * sent, and the node runs it when it wakes. A producer that retried a
 * "refused" job without an id would have made it twice. */
Test(cluster_features, an_answer_lost_to_a_frozen_primary_is_unknown, .fini = teardown, .timeout = 120) {
    start(0);
    pick_queues();
    jr_client_options_t o = {.url = C.url, .command_timeout_ms = 1000};
    jr_client_t *c = jr_client_open(&o);
    cr_assert(c && !jr_client_errstr(c)[0], "client: %s", c ? jr_client_errstr(c) : "out of memory");
    jr_client_job_t job = {.queue = Q[2], .handler = "record", .payload = "frozen", .payload_len = 6};
    jr_client_result_t res;
    cr_assert_eq(jr_client_enqueue(c, &job, &res), 0, "warm-up: %s", jr_client_errstr(c));
    cr_assert_eq(kill(C.pid[2], SIGSTOP), 0);
    int rc = jr_client_enqueue(c, &job, &res);
    kill(C.pid[2], SIGCONT);
    cr_assert_neq(rc, 0, "an enqueue to a frozen primary succeeded");
    cr_expect_eq(res.status, JR_CLIENT_JOB_UNKNOWN, "status %d (%s): not UNKNOWN", (int)res.status,
                 res.error ? res.error : jr_client_errstr(c));
    cr_expect(res.error && strstr(res.error, "maybe written"), "%s", res.error ? res.error : "(no reason)");
    /* the others are served meanwhile, and after it wakes so is it */
    job.queue = Q[0];
    cr_expect_eq(jr_client_enqueue(c, &job, &res), 0, "a live primary: %s", jr_client_errstr(c));
    jr_client_free(c);
}

/* rediss-cluster://: every node over TLS (the test CA), the worker, the
 * scheduler and the CLI; the cluster's own bus and replication over TLS
 * too. Jobs on the three primaries run, a delayed one too; a client
 * without the CA is refused naming the node and why. */
Test(cluster_features, over_tls_to_every_node, .fini = teardown, .timeout = 240) {
    start(1);
    pick_queues();
    char extra[512], out[4096], err[4096];
    snprintf(extra, sizeof extra, "  tls:\n    ca_file: %s\nworker:\n  block: 1s\nscheduler:\n  block: 1s\n", C.ca);
    jrt_config(&V, extra, cfgpath, sizeof cfgpath);
    const char *wargs[] = {"-q", Q[0], "-q", Q[1], "-q", Q[2], NULL};
    pid_t w = jrt_worker(&V, cfgpath, JRT_FOLLOW_PLUGIN, wlog, wargs);
    pid_t s = jrt_scheduler(&V, cfgpath, slog);
    for (int i = 0; i < 3; i++) {
        char p[32];
        snprintf(p, sizeof p, "tls-%d", i);
        enqueue(Q[i], NULL, NULL, "record", p, NULL, 0);
        snprintf(p, sizeof p, "tls-later-%d", i);
        enqueue(Q[i], "--in", "1s", "record", p, NULL, 0);
    }
    for (int i = 0; i < 3; i++) {
        char p[32];
        snprintf(p, sizeof p, "tls-%d", i);
        cr_assert_eq(wait_recorded(p, 1, 15000), 1, "a job on %s over TLS did not run once (%s)", Q[i], wlog);
        snprintf(p, sizeof p, "tls-later-%d", i);
        cr_assert_eq(wait_recorded(p, 1, 15000), 1, "a delayed job on %s over TLS did not run once (%s)", Q[i], slog);
    }
    /* Without the CA the server is not trusted: refused, saying so. */
    const char *noca[] = {"stats", "--redis", C.tls_url, NULL};
    int st = jrt_run(out, sizeof out, err, sizeof err, noca);
    cr_assert_eq(st, 1, "stats over TLS without the CA exited %d: %s", st, err);
    cr_assert(strstr(err, "not signed by a trusted CA") && strstr(err, "node 127.0.0.1:"),
              "the refusal names the node and the reason: %s", err);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0, "the worker did not stop cleanly (%s)", wlog);
    cr_assert_eq(jrt_stop(s, SIGTERM, 10000), 0, "the scheduler did not stop cleanly (%s)", slog);
}
