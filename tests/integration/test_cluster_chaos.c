/* The Redis Cluster scenario of issue 21, end to end with real processes: a
 * cluster of 3 primaries and 3 replicas (node timeout 1500 ms) on 127.0.0.1
 * ports, 3 workers (the record plugin) and 2 schedulers on its
 * redis-cluster:// URL, redis.wait_replicas: 1 for everyone. Jobs flow over
 * 6 queues: 3 plain, one on each primary (queue[0], [2], [4]), and 3 of 3
 * partitions each (queue[1], [3], [5]: one partition on each primary,
 * set with `jobrunner queue partitions` before anything starts): a producer (the client library,
 * batches of 50 with ids, retried until confirmed) enqueues
 * JRT_CLUSTER_CHAOS_JOBS jobs (default 20,000, the issue's number), every
 * 4th delayed (0.5 to 4 s: both delayed tiers); the CLI enqueues 18 more
 * (12 of them with --in), and two `every: 1s` schedules tick on a queue of
 * the primary that is resharded and one of the primary that is killed.
 * Mid-run, `redis-cli --cluster reshard` moves 1,000 slots (one queue among
 * them) from the first primary to the second; then the third primary is
 * SIGKILLed, its replica takes over, and the killed node is started again
 * (it rejoins as the new primary's replica, so WAIT 1 can be met again).
 *
 * Then the ledger: every confirmed enqueue ran (none lost: each was on a
 * replica before it was confirmed), and ran once; a second run is allowed
 * only by the at-least-once rules, for a job whose first run started from a
 * lease before the kill to 1 s after the failover (its worker lost the
 * primary mid-run: the delivery or the acknowledgement went with it). Each
 * periodic tick ran at most once (same rule) and never before its tick; no
 * process made a cross-slot call (no CROSSSLOT in any log). It prints
 * enqueued, ran, lost, repeats and the times (reshard, failover, the
 * killed shard's service gap, the other shards' longest stretch without a
 * run), and the error lines of one worker and one scheduler. About 45 s. */
#include <criterion/criterion.h>
#include <jobrunner/client.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define NQ 6
#define LEASE_MS 3000

static jrt_cluster_t C;
static char cfg[192], record[192];
static char queue[NQ][16]; /* [0] moved by the reshard, [0..1] first primary, [2..3] second, [4..5] third;
                              [1], [3], [5] partitioned (3 partitions over the 3 primaries) */
static int owner[NQ];      /* the node serving each queue at the start */
static pid_t workers[3], schedulers[2], producer_pid;

/* C.dir/name, in one of 8 static buffers used in turn. */
static const char *in_dir(const char *name) {
    static char buf[8][192];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 192, "%s/%s", C.dir, name);
    return b;
}

static void teardown(void) {
    if (producer_pid > 0) {
        kill(producer_pid, SIGKILL);
        waitpid(producer_pid, NULL, 0);
    }
    producer_pid = 0;
    for (int i = 0; i < 3; i++)
        if (workers[i] > 0) jrt_stop(workers[i], SIGKILL, 5000), workers[i] = 0;
    for (int i = 0; i < 2; i++)
        if (schedulers[i] > 0) jrt_stop(schedulers[i], SIGKILL, 5000), schedulers[i] = 0;
    jrt_cluster_stop(&C);
}

TestSuite(cluster_chaos, .fini = teardown, .timeout = 300);

/* A live node (index) to ask about the cluster. */
static int live_node(void) {
    for (int i = 0; i < C.n; i++)
        if (C.pid[i] > 0) return i;
    return -1;
}

static long long slot_of(const char *q) {
    redisContext *x = jrt_cluster_connect(&C, live_node());
    char key[40];
    snprintf(key, sizeof key, "{%s}", q);
    redisReply *r = jrt_cmd(x, "CLUSTER", "KEYSLOT", key, NULL);
    long long s = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    redisFree(x);
    return s;
}

static int node_of_queue(const char *q) {
    char key[40];
    snprintf(key, sizeof key, "jr:{%s}:ready", q);
    return jrt_cluster_primary_of(&C, live_node(), key);
}

static void node_id(int i, char *out, size_t len) {
    redisContext *x = jrt_cluster_connect(&C, i);
    redisReply *r = jrt_cmd(x, "CLUSTER", "MYID", NULL);
    cr_assert(r->type == REDIS_REPLY_STRING, "CLUSTER MYID of node %d", i);
    snprintf(out, len, "%s", r->str);
    freeReplyObject(r);
    redisFree(x);
}

/* Queue names cq<k> such that two sit on each primary, the first of them
 * in the slots the reshard moves (redis-cli moves the source's lowest
 * slots: 0..999 of the first primary's 0..5460). */
static void choose_queues(void) {
    int have[3] = {0, 0, 0};
    for (int k = 0; k < 2000 && have[0] + have[1] + have[2] < NQ; k++) {
        char q[16];
        snprintf(q, sizeof q, "cq%d", k);
        int n = node_of_queue(q);
        cr_assert(n >= 0 && n < 3, "queue %s is served by node %d, not a primary", q, n);
        if (have[n] == 2) continue;
        long long s = slot_of(q);
        if (n == 0 && have[0] == 0 && s >= 1000) continue; /* the first one of primary 0 must move */
        if (n == 0 && have[0] == 1 && s < 1000) continue;  /* the second one must stay */
        int i = 2 * n + have[n]++;
        snprintf(queue[i], sizeof queue[i], "%s", q);
        owner[i] = n;
    }
    cr_assert(have[0] == 2 && have[1] == 2 && have[2] == 2, "no 6 queues spread over the 3 primaries");
}

static void write_config(void) {
    snprintf(cfg, sizeof cfg, "%s", in_dir("jobrunner.yaml"));
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fprintf(f,
            "redis:\n  url: %s\n  wait_replicas: 1\n  wait_timeout: 1s\n"
            "worker:\n  queues: [%s, %s, %s, %s, %s, %s]\n  lease: 3s\n  block: 1s\n"
            "scheduler:\n  block: 1s\n"
            "periodic:\n"
            "  - name: tick\n    handler: record\n    queue: %s\n    every: 1s\n    payload: tick\n"
            "  - name: tock\n    handler: record\n    queue: %s\n    every: 1s\n    payload: tock\n",
            C.url, queue[0], queue[1], queue[2], queue[3], queue[4], queue[5], queue[4], queue[0]);
    fclose(f);
}

/* ---- the producer (a child process) ------------------------------------ */

static volatile sig_atomic_t producer_stop;
static void on_term(int sig) {
    (void)sig;
    producer_stop = 1;
}

/* Enqueue jobs c0..c<n-1> through the client library in batches of 50,
 * paced to take about spread_ms, each batch retried (same ids: the enqueue
 * is idempotent) until every job in it is CREATED or EXISTED; then one
 * line "ID WALL_US" per job in ledger. Job i goes to queue[i % NQ]; every
 * 4th is delayed 500, 1500, 2500 or 4000 ms. Gives up at SIGTERM or after
 * 150 s (the test then reports what was never confirmed). */
static pid_t producer(int n, int spread_ms, const char *ledger, const char *log) {
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid) return pid;
    signal(SIGTERM, on_term);
    FILE *l = freopen(log, "a", stderr);
    if (l) setvbuf(stderr, NULL, _IONBF, 0);
    FILE *f = fopen(ledger, "a");
    jr_client_options_t o = {.url = C.url, .connect_timeout_ms = 1000, .command_timeout_ms = 2000,
                             .wait_replicas = 1, .wait_timeout_ms = 1000};
    jr_client_t *c = jr_client_open(&o);
    enum { B = 50 };
    static const int64_t delays[] = {500, 1500, 2500, 4000};
    int64_t start = jrt_wall_us(), give_up = start + 150 * 1000000LL;
    int batches = (n + B - 1) / B, failed = 0;
    for (int b = 0; b < batches && !producer_stop && c; b++) {
        char ids[B][16];
        jr_client_job_t jobs[B];
        jr_client_result_t res[B];
        int k = 0;
        for (int i = b * B; i < n && k < B; i++, k++) {
            snprintf(ids[k], sizeof ids[k], "c%d", i);
            jobs[k] = (jr_client_job_t){.queue = queue[i % NQ], .handler = "record", .payload = ids[k],
                                        .payload_len = strlen(ids[k]), .id = ids[k],
                                        .delay_ms = i % 4 == 3 ? delays[(i / 4) % 4] : 0};
        }
        int tries = 0;
        while (!producer_stop && jr_client_enqueue_many(c, jobs, (size_t)k, res) != 0) {
            if (tries++ == 0)
                fprintf(stderr, "producer: batch %d not confirmed (%s), retrying\n", b, jr_client_errstr(c));
            if (jrt_wall_us() > give_up) goto out;
            usleep(100000);
        }
        if (producer_stop) break;
        failed += tries > 0;
        int64_t now = jrt_wall_us();
        for (int j = 0; j < k; j++) fprintf(f, "%s %lld\n", ids[j], (long long)now);
        fflush(f);
        int64_t due = start + (int64_t)spread_ms * 1000 * (b + 1) / batches;
        if (due > now) usleep((useconds_t)(due - now));
    }
out:
    fprintf(stderr, "producer: done, %d batches retried\n", failed);
    fclose(f);
    jr_client_free(c);
    fflush(stderr); /* (a freopened stderr is fully buffered; _exit flushes nothing) */
    _exit(0);
}

/* ---- the ledger -------------------------------------------------------- */

typedef struct entry {
    char id[48];
    long long us;
} entry_t;

static int cmp_entry(const void *a, const void *b) { return strcmp(((const entry_t *)a)->id, ((const entry_t *)b)->id); }

/* The lines "ID US" (field us_field, 1 or 2, counted from 0 after the id)
 * of a file, sorted by id. */
static entry_t *read_entries(const char *path, int us_field, size_t *n) {
    char *s = jrt_slurp(path);
    size_t cap = 4096;
    entry_t *v = malloc(cap * sizeof *v);
    *n = 0;
    for (char *save = NULL, *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (*n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        long long a = 0, b = 0;
        int k = sscanf(line, "%47s %lld %lld", v[*n].id, &a, &b);
        if (k < 1 + us_field) continue;
        v[*n].us = us_field == 2 ? b : a;
        (*n)++;
    }
    free(s);
    qsort(v, *n, sizeof *v, cmp_entry);
    return v;
}

/* The runs of id in runs (sorted): how many, and the earliest start. */
static size_t runs_of(const entry_t *runs, size_t n, const char *id, long long *first) {
    entry_t key;
    snprintf(key.id, sizeof key.id, "%s", id);
    const entry_t *hit = bsearch(&key, runs, n, sizeof *runs, cmp_entry);
    if (!hit) return 0;
    while (hit > runs && !strcmp(hit[-1].id, id)) hit--;
    size_t k = 0;
    *first = hit->us;
    for (; hit + k < runs + n && !strcmp(hit[k].id, id); k++)
        if (hit[k].us < *first) *first = hit[k].us;
    return k;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Every id of `ok` has a run in the record file (re-read). */
static int all_ran(const void *arg) {
    const entry_t *ok = ((const entry_t *const *)arg)[0];
    size_t nok = *((const size_t *const *)arg)[1];
    size_t nruns;
    entry_t *runs = read_entries(record, 2, &nruns);
    size_t missing = 0;
    for (size_t i = 0; i < nok; i++) {
        long long first;
        if (!runs_of(runs, nruns, ok[i].id, &first)) missing++;
    }
    free(runs);
    return missing == 0;
}

/* Run `cmd` by sh in a child; its pid. */
static pid_t sh_bg(const char *cmd) {
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (!pid) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Wait up to timeout_ms for pid; its exit status, -1 if it is still running
 * (then SIGKILLed). */
static int wait_child(pid_t pid, int timeout_ms) {
    for (int t = 0; t <= timeout_ms; t += 50) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        jrt_sleep_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* Node *arg says role:slave with its link to its primary up and no sync
 * under way. */
static int is_synced_replica(const void *arg) {
    redisContext *x = jrt_cluster_connect(&C, *(const int *)arg);
    redisReply *r = jrt_cmd(x, "INFO", "replication", NULL);
    int ok = r->type == REDIS_REPLY_STRING && strstr(r->str, "role:slave") &&
             strstr(r->str, "master_link_status:up") && strstr(r->str, "master_sync_in_progress:0");
    freeReplyObject(r);
    redisFree(x);
    return ok;
}

static void cli_enqueue(const char *q, const char *in, const char *id) {
    char out[256], err[2048];
    const char *with_in[] = {"enqueue", "-c", cfg, "-q", q, "--in", in, "--id", id, "record", id, NULL};
    const char *now[] = {"enqueue", "-c", cfg, "-q", q, "--id", id, "record", id, NULL};
    int st = jrt_run(out, sizeof out, err, sizeof err, in ? with_in : now);
    cr_assert_eq(st, 0, "jobrunner enqueue -q %s --id %s through %s exited %d: %s", q, id, C.url, st, err);
}

Test(cluster_chaos, reshard_and_primary_killed_every_job_runs_once) {
    int64_t t0 = jrt_wall_us();
    const char *env = getenv("JRT_CLUSTER_CHAOS_JOBS");
    int n = env && atoi(env) > 0 ? atoi(env) : 20000;
    int spread_ms = 30000; /* the producer's enqueues spread over this long */
    const char *extra[] = {"--cluster-node-timeout", "1500", "--repl-diskless-sync-delay", "0", NULL};
    jrt_cluster_start(&C, 3, 1, extra);
    int64_t t_cluster = jrt_wall_us();
    choose_queues();
    write_config();
    snprintf(record, sizeof record, "%s", in_dir("record.txt"));
    setenv("JRT_RECORD", record, 1);
    for (int i = 0; i < NQ; i++)
        printf("queue %s: slot %lld, node %d (port %d)%s\n", queue[i], slot_of(queue[i]), owner[i],
               C.port[owner[i]], i % 2 ? ", 3 partitions" : "");
    for (int i = 1; i < NQ; i += 2) {
        char out[256], err[1024];
        const char *set[] = {"queue", "partitions", "-c", cfg, queue[i], "3", NULL};
        int st = jrt_run(out, sizeof out, err, sizeof err, set);
        cr_assert_eq(st, 0, "jobrunner queue partitions %s 3 exited %d: %s", queue[i], st, err);
    }

    for (int i = 0; i < 3; i++) {
        char log[32];
        snprintf(log, sizeof log, "worker%d.log", i);
        const char *argv[] = {"worker", "-c", cfg, "--plugin", JRT_RECORD_PLUGIN, NULL};
        workers[i] = jrt_spawn(in_dir(log), argv);
    }
    for (int i = 0; i < 2; i++) {
        char log[32];
        snprintf(log, sizeof log, "scheduler%d.log", i);
        const char *argv[] = {"scheduler", "-c", cfg, NULL};
        schedulers[i] = jrt_spawn(in_dir(log), argv);
    }
    /* The CLI: 2 jobs per queue, one ready and one due in 3 s. */
    char cli_ids[18][16];
    size_t ncli = 0;
    for (int i = 0; i < NQ; i++) {
        snprintf(cli_ids[ncli], sizeof cli_ids[ncli], "cli-r%d", i);
        cli_enqueue(queue[i], NULL, cli_ids[ncli++]);
        snprintf(cli_ids[ncli], sizeof cli_ids[ncli], "cli-d%d", i);
        cli_enqueue(queue[i], "3s", cli_ids[ncli++]);
    }
    producer_pid = producer(n, spread_ms, in_dir("ledger.txt"), in_dir("producer.log"));

    /* A fifth of the jobs ran: reshard 1,000 slots while they flow. */
    size_t seen = jrt_wait_lines(record, (size_t)n / 5, 90000);
    cr_assert_geq(seen, (size_t)n / 5, "only %zu runs within 90 s of the start through %s (see %s)", seen, C.url,
                  C.dir);
    char from[64], to[64], cmd[1024];
    node_id(0, from, sizeof from);
    node_id(1, to, sizeof to);
    snprintf(cmd, sizeof cmd,
             "%s --cluster reshard 127.0.0.1:%d --cluster-from %s --cluster-to %s --cluster-slots 1000 "
             "--cluster-yes >'%s' 2>&1",
             JRT_REDIS_CLI, C.port[0], from, to, in_dir("reshard.log"));
    size_t runs_at_reshard = jrt_lines(record);
    int64_t reshard_us = jrt_wall_us();
    int st = wait_child(sh_bg(cmd), 120000);
    int64_t resharded_us = jrt_wall_us();
    cr_assert_eq(st, 0, "redis-cli --cluster reshard exited %d:\n%s", st, jrt_slurp(in_dir("reshard.log")));
    cr_assert(jrt_cluster_wait_ok(&C, 30000), "the cluster did not settle after the reshard (logs in %s)", C.dir);
    cr_assert_eq(node_of_queue(queue[0]), 1, "queue %s (slot %lld) did not move to node 1", queue[0],
                 slot_of(queue[0]));
    /* A CLI enqueue to every queue right after it. */
    for (int i = 0; i < NQ; i++) {
        snprintf(cli_ids[ncli], sizeof cli_ids[ncli], "cli-m%d", i);
        cli_enqueue(queue[i], i % 2 ? "1s" : NULL, cli_ids[ncli++]);
    }

    /* Jobs flow a little more; then the third primary is killed. */
    jrt_wait_lines(record, jrt_lines(record) + (size_t)n / 10, 30000);
    int victim = node_of_queue(queue[4]);
    cr_assert_eq(victim, 2, "queue %s is on node %d before the kill", queue[4], victim);
    size_t runs_at_kill = jrt_lines(record);
    int64_t killed_us = jrt_wall_us();
    jrt_cluster_kill(&C, victim);
    int heir = -1;
    for (int t = 0; t < 30000 && (heir < 0 || heir == victim); t += 100) {
        heir = node_of_queue(queue[4]);
        if (heir < 0 || heir == victim) jrt_sleep_ms(100);
    }
    int64_t failover_us = jrt_wall_us();
    cr_assert(heir >= 0 && heir != victim, "no replica took over the slots of node %d within 30 s", victim);
    cr_assert(jrt_cluster_wait_ok(&C, 30000), "the cluster did not settle after the failover (logs in %s)", C.dir);
    /* The killed node comes back as the new primary's replica: WAIT 1 can
     * be met again on that shard. */
    jrt_cluster_restart(&C, victim);
    const int node = victim;
    cr_assert(jrt_wait_for(60000, 100, is_synced_replica, &node) && jrt_cluster_wait_ok(&C, 60000),
              "node %d did not rejoin as a replica in sync (logs in %s)", victim, C.dir);
    int64_t rejoined_us = jrt_wall_us();

    /* The producer ends by itself; then every confirmed job must run. */
    st = wait_child(producer_pid, 180000);
    producer_pid = 0;
    cr_assert_eq(st, 0, "the producer did not finish: %s", jrt_slurp(in_dir("producer.log")));
    size_t nok;
    entry_t *ok = read_entries(in_dir("ledger.txt"), 1, &nok);
    ok = realloc(ok, (nok + ncli) * sizeof *ok);
    for (size_t i = 0; i < ncli; i++) {
        snprintf(ok[nok].id, sizeof ok[nok].id, "%.15s", cli_ids[i]);
        ok[nok++].us = 0;
    }
    qsort(ok, nok, sizeof *ok, cmp_entry);
    size_t confirmed_n = nok;
    const void *arg[] = {ok, &confirmed_n};
    int drained = jrt_wait_for(90000, 250, all_ran, arg);
    jrt_sleep_ms(LEASE_MS + 1000); /* the repeats of a lease taken over, if any */
    int64_t drained_us = jrt_wall_us();
    for (int i = 0; i < 3; i++) jrt_stop(workers[i], SIGTERM, 10000), workers[i] = 0;
    for (int i = 0; i < 2; i++) jrt_stop(schedulers[i], SIGTERM, 10000), schedulers[i] = 0;

    /* The ledger. */
    size_t nruns;
    entry_t *runs = read_entries(record, 2, &nruns);
    size_t lost = 0, repeats = 0, repeats_killed_shard = 0, bad_repeats = 0;
    int64_t lo = killed_us - LEASE_MS * 1000LL - 500000, hi = failover_us + 1000000;
    for (size_t i = 0; i < nok; i++) {
        long long first = 0;
        size_t k = runs_of(runs, nruns, ok[i].id, &first);
        if (k == 0) {
            lost++;
            if (lost <= 20)
                cr_expect_fail("job %s, confirmed by a replica (wait_replicas: 1) %lld ms after the start, never "
                               "ran",
                               ok[i].id, ok[i].us ? (ok[i].us - t0) / 1000 : -1);
            continue;
        }
        if (k > 1) {
            repeats++;
            int q = ok[i].id[0] == 'c' && ok[i].id[1] != 'l' ? atoi(ok[i].id + 1) % NQ : -1;
            if (q >= 4) repeats_killed_shard++;
            int allowed = first >= lo && first <= hi;
            printf("ran %zu times: %s (queue %s), first run %+lld ms from the kill: %s\n", k, ok[i].id,
                   q >= 0 ? queue[q] : "?", (first - killed_us) / 1000,
                   allowed ? "allowed (at-least-once: its worker lost the primary mid-run)" : "NOT ALLOWED");
            if (!allowed && ++bad_repeats <= 20)
                cr_expect_fail("job %s ran %zu times, the first %+lld ms from the kill: outside the failover "
                               "(a repeat is allowed only from a lease before the kill to 1 s after the "
                               "failover)",
                               ok[i].id, k, (first - killed_us) / 1000);
        }
    }
    /* The periodic jobs: each tick's job at most once (same rule), never
     * before its tick, and both schedules kept ticking. */
    size_t ticks[2] = {0, 0}, tick_repeats = 0;
    long long first_tick[2] = {0, 0}, last_tick[2] = {0, 0};
    for (size_t i = 0; i < nruns; i++) {
        int which = !strncmp(runs[i].id, "tick@", 5) ? 0 : !strncmp(runs[i].id, "tock@", 5) ? 1 : -1;
        if (which < 0 || (i > 0 && !strcmp(runs[i - 1].id, runs[i].id))) continue;
        long long tick = atoll(runs[i].id + 5), firstrun = 0;
        size_t k = runs_of(runs, nruns, runs[i].id, &firstrun);
        ticks[which]++;
        if (!first_tick[which] || tick < first_tick[which]) first_tick[which] = tick;
        if (tick > last_tick[which]) last_tick[which] = tick;
        cr_expect_geq(firstrun / 1000, tick, "periodic job %s ran %lld ms before its tick", runs[i].id,
                      tick - firstrun / 1000);
        if (k > 1) {
            tick_repeats++;
            cr_expect(firstrun >= lo && firstrun <= hi, "periodic job %s ran %zu times, the first %+lld ms from "
                      "the kill (outside the failover)", runs[i].id, k, (firstrun - killed_us) / 1000);
        }
    }
    /* The first run of a job of the killed primary's queues that started
     * after the kill: the service gap of that shard. */
    long long first_after = 0;
    for (size_t i = 0; i < nruns; i++) {
        int q = runs[i].id[0] == 'c' && runs[i].id[1] != 'l' ? atoi(runs[i].id + 1) % NQ : -1;
        if (q == 4 && runs[i].us > killed_us && (!first_after || runs[i].us < first_after)) first_after = runs[i].us;
    }
    /* (Both measures look at plain queues only: a partitioned queue is on
     * every primary.) The longest stretch without a run start on the plain
     * queues of the two primaries that stayed up, from the kill to the rejoin and 3 s more:
     * whether the other shards were served through the failover. */
    long long prev = killed_us, longest = 0, at = 0;
    long long *starts = malloc(nruns * sizeof *starts);
    size_t ns = 0;
    for (size_t i = 0; i < nruns; i++) {
        int q = runs[i].id[0] == 'c' && runs[i].id[1] != 'l' ? atoi(runs[i].id + 1) % NQ : -1;
        if ((q == 0 || q == 2) && runs[i].us > killed_us && runs[i].us < rejoined_us + 3000000) starts[ns++] = runs[i].us;
    }
    qsort(starts, ns, sizeof *starts, cmp_ll);
    for (size_t i = 0; i < ns; i++) {
        if (starts[i] - prev > longest) longest = starts[i] - prev, at = prev;
        prev = starts[i];
    }
    free(starts);
    printf("the other two primaries' queues: %zu runs from the kill to 3 s after the rejoin, the longest stretch without "
           "one %lld ms (from %+lld ms after the kill)\n",
           ns, longest / 1000, (at - killed_us) / 1000);
    char *plog = jrt_slurp(in_dir("producer.log"));
    const char *retried = strstr(plog, "done, ");
    if (!retried) retried = "no summary line";
    printf("during the run: %zu runs before the reshard, %zu before the kill of node %d (port %d); the producer: %.*s; "
           "the killed primary's queues ran their first job %lld ms after the kill\n",
           runs_at_reshard, runs_at_kill, victim, C.port[victim], (int)strcspn(retried, "\n"), retried,
           first_after ? (first_after - killed_us) / 1000 : -1);
    free(plog);
    double secs = (double)(drained_us - t0) / 1e6;
    printf("ledger: %zu enqueued and confirmed (%zu by the CLI), %zu runs; lost %zu, repeats %zu (%zu on the killed "
           "primary's queues, %zu not allowed); periodic: tick %zu jobs over %lld s, tock %zu over %lld s, repeats "
           "%zu; time %.1f s (cluster start %.1f s, reshard of 1,000 slots %.1f s, failover %.1f s after the kill, "
           "rejoined %.1f s after)\n",
           nok, ncli, nruns, lost, repeats, repeats_killed_shard, bad_repeats, ticks[0],
           (last_tick[0] - first_tick[0]) / 1000, ticks[1], (last_tick[1] - first_tick[1]) / 1000, tick_repeats,
           secs, (double)(t_cluster - t0) / 1e6, (double)(resharded_us - reshard_us) / 1e6,
           (double)(failover_us - killed_us) / 1e6, (double)(rejoined_us - failover_us) / 1e6);
    fflush(stdout);
    /* No process made a cross-slot call (Redis refuses one: CROSSSLOT);
     * its errors are one line each, so a count of them shows how the
     * reshard and the failover went. */
    for (int i = 0; i < 6; i++) {
        char log[32];
        if (i < 3) snprintf(log, sizeof log, "worker%d.log", i);
        else if (i < 5) snprintf(log, sizeof log, "scheduler%d.log", i - 3);
        else snprintf(log, sizeof log, "producer.log");
        int crossslot = jrt_count(in_dir(log), "CROSSSLOT") + jrt_count(in_dir(log), "cannot be sent to a Redis Cluster"),
            errors = jrt_count(in_dir(log), " error ");
        printf("%s: %d error lines\n", log, errors);
        if (i == 0 || i == 3) { /* what a worker and a scheduler said, for the reader */
            char *text = jrt_slurp(in_dir(log));
            int shown = 0;
            for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && shown < 12; l = strtok_r(NULL, "\n", &save))
                if (strstr(l, " error ") || strstr(l, " warn ")) printf("  %.300s\n", l), shown++;
            free(text);
        }
        cr_expect_eq(crossslot, 0, "%s: %d calls refused as CROSSSLOT (a call over several slots): %s", log, crossslot,
                     jrt_slurp(in_dir(log)));
    }
    cr_expect(drained, "not every confirmed job ran within 90 s of the producer's end (%zu lost)", lost);
    cr_expect_eq(lost, 0, "%zu enqueues confirmed by a replica never ran", lost);
    cr_expect_eq(nok, (size_t)n + ncli, "the producer confirmed %zu of its %d jobs (see %s)", nok - ncli, n,
                 in_dir("producer.log"));
    cr_expect_geq(ticks[0], 5, "the schedule on the killed primary's queue made %zu jobs", ticks[0]);
    cr_expect_geq(ticks[1], 5, "the schedule on the resharded queue made %zu jobs", ticks[1]);
    free(ok);
    free(runs);
}
