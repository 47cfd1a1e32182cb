/* Redis Sentinel (issue 20): redis-sentinel:// URLs, connecting through the
 * sentinels, and following a failover (the primary SIGKILLed, SENTINEL
 * failover, a primary frozen with SIGSTOP) in the worker, the scheduler, the
 * CLI and the client library. Each test starts one primary and two replicas
 * (redis-server on 127.0.0.1 TCP ports) and three redis-sentinel processes
 * (down-after 1 s, failover-timeout 5 s), and stops them all by pid. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jobrunner/client.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"

#define NODES 3
#define SENTINELS 3

static struct cluster {
    char dir[64];
    int port[NODES], sport[SENTINELS];
    pid_t pid[NODES], spid[SENTINELS];
    char url[256];    /* redis-sentinel://127.0.0.1:S1,.../m */
    char cfg[192];    /* DIR/jobrunner.yaml */
    char record[192]; /* DIR/record.txt */
} C;

/* fork + exec argv with stdout and stderr appended to log; tied to our life. */
static pid_t launch(const char *log, const char *const *argv) {
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        FILE *f = freopen(log, "a", stdout);
        if (f) dup2(fileno(stdout), 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static const char *sentinel_pass; /* the sentinels' requirepass, NULL = none */

static redisContext *tcp(int port) {
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && !c->err) redisSetTimeout(c, tv);
    int sentinel = 0;
    for (int i = 0; i < SENTINELS; i++) sentinel |= C.sport[i] == port;
    if (c && !c->err && sentinel && sentinel_pass) {
        redisReply *rep = redisCommand(c, "AUTH %s", sentinel_pass);
        if (rep) freeReplyObject(rep);
    }
    return c;
}

/* The reply of a command to 127.0.0.1:port, as text into out ("" if none). */
static void ask(int port, char *out, size_t len, const char *fmt, ...) {
    out[0] = '\0';
    redisContext *c = tcp(port);
    if (!c || c->err) {
        if (c) redisFree(c);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (rep && (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS))
        snprintf(out, len, "%s", rep->str);
    else if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
             rep->element[1]->type == REDIS_REPLY_STRING)
        snprintf(out, len, "%s:%s", rep->element[0]->str, rep->element[1]->str);
    if (rep) freeReplyObject(rep);
    redisFree(c);
}

/* The primary as sentinel number i names it ("127.0.0.1:P", "" if none). */
static void named_primary(int i, char *out, size_t len) {
    ask(C.sport[i], out, len, "SENTINEL get-master-addr-by-name m");
}

static int port_of(const char *addr) {
    const char *colon = strrchr(addr, ':');
    return colon ? atoi(colon + 1) : 0;
}

/* Each sentinel knows both replicas and the other two sentinels. */
static int cluster_ready(const void *arg) {
    (void)arg;
    for (int i = 0; i < SENTINELS; i++) {
        redisContext *c = tcp(C.sport[i]);
        if (!c || c->err) {
            if (c) redisFree(c);
            return 0;
        }
        redisReply *rep = redisCommand(c, "SENTINEL master m");
        int slaves = -1, others = -1;
        for (size_t j = 0; rep && rep->type == REDIS_REPLY_ARRAY && j + 1 < rep->elements; j += 2) {
            if (!strcmp(rep->element[j]->str, "num-slaves")) slaves = atoi(rep->element[j + 1]->str);
            if (!strcmp(rep->element[j]->str, "num-other-sentinels")) others = atoi(rep->element[j + 1]->str);
        }
        if (rep) freeReplyObject(rep);
        redisFree(c);
        if (slaves != NODES - 1 || others != SENTINELS - 1) return 0;
    }
    char info[64];
    ask(C.port[0], info, sizeof info, "ROLE"); /* not parsed: the primary answers */
    return 1;
}

static const char *path_in(const char *name) {
    static char buf[8][192];
    static int i;
    i = (i + 1) % 8;
    snprintf(buf[i], sizeof buf[i], "%s/%s", C.dir, name);
    return buf[i];
}

/* On stderr (CTest shows it with the failure): whether each process still
 * runs, what each node and sentinel answers, and the last lines of each
 * log; the temp dir goes with the test, so this is what is left of it. */
static void setup_report(void) {
    for (int i = 0; i < NODES + SENTINELS; i++) {
        int s = i >= NODES, k = s ? i - NODES : i;
        pid_t pid = s ? C.spid[k] : C.pid[k];
        int port = s ? C.sport[k] : C.port[k];
        char name[32], answer[512];
        snprintf(name, sizeof name, s ? "sentinel%d.log" : "redis%d.log", k);
        siginfo_t info = {0}; /* WNOWAIT: left for cluster_stop to reap */
        waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT);
        const char *alive = info.si_pid == pid ? "exited" : "running";
        if (s)
            ask(port, answer, sizeof answer, "SENTINEL get-master-addr-by-name m");
        else
            ask(port, answer, sizeof answer, "INFO replication");
        fprintf(stderr, "== %s %d (pid %d, port %d): %s; answers \"%s\"\n", s ? "sentinel" : "node", k, (int)pid,
                port, alive, answer);
        if (s) {
            redisContext *c = tcp(port);
            redisReply *rep = c && !c->err ? redisCommand(c, "SENTINEL master m") : NULL;
            for (size_t j = 0; rep && rep->type == REDIS_REPLY_ARRAY && j + 1 < rep->elements; j += 2)
                fprintf(stderr, "%s=%s%s", rep->element[j]->str, rep->element[j + 1]->str,
                        j + 2 < rep->elements ? " " : "\n");
            if (rep) freeReplyObject(rep);
            if (c) redisFree(c);
        }
        char *log = jrt_slurp(path_in(name));
        const char *tail = log + strlen(log); /* the last 15 lines */
        int lines = 0;
        while (tail > log && !(tail[-1] == '\n' && ++lines > 16)) tail--;
        fprintf(stderr, "%s\n", tail);
        free(log);
    }
}

/* Start the primary, its replicas and the sentinels (with requirepass
 * spass unless NULL); write the config file of the jobrunner processes
 * (extra: more YAML). */
static void cluster_start2(const char *extra, const char *spass) {
    memset(&C, 0, sizeof C);
    sentinel_pass = spass;
    snprintf(C.dir, sizeof C.dir, "/tmp/jrt-sentinel.XXXXXX");
    cr_assert(mkdtemp(C.dir), "mkdtemp: %s", strerror(errno));
    for (int i = 0; i < NODES; i++) C.port[i] = jrt_free_port();
    for (int i = 0; i < SENTINELS; i++) C.sport[i] = jrt_free_port();
    for (int i = 0; i < NODES; i++) {
        char port[16], dir[128], log[160], primary[16];
        snprintf(port, sizeof port, "%d", C.port[i]);
        snprintf(primary, sizeof primary, "%d", C.port[0]);
        snprintf(dir, sizeof dir, "%s/n%d", C.dir, i);
        snprintf(log, sizeof log, "%s/redis%d.log", C.dir, i);
        cr_assert(mkdir(dir, 0700) == 0);
        const char *argv[] = {JRT_REDIS_SERVER, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly",
                              "no", "--dir", dir, "--repl-diskless-sync-delay", "0", i ? "--replicaof" : NULL, "127.0.0.1",
                              primary, NULL};
        C.pid[i] = launch(log, argv);
    }
    for (int i = 0; i < SENTINELS; i++) {
        char conf[160], text[1024], log[160];
        snprintf(conf, sizeof conf, "%s/sentinel%d.conf", C.dir, i);
        snprintf(log, sizeof log, "%s/sentinel%d.log", C.dir, i);
        snprintf(text, sizeof text,
                 "port %d\nbind 127.0.0.1\ndir %s\n"
                 "sentinel monitor m 127.0.0.1 %d 2\n"
                 "sentinel down-after-milliseconds m 1000\n"
                 "sentinel failover-timeout m 5000\n"
                 "%s%s\n",
                 C.sport[i], C.dir, C.port[0], spass ? "requirepass " : "", spass ? spass : "");
        FILE *f = fopen(conf, "w");
        cr_assert(f);
        fputs(text, f);
        fclose(f);
        const char *argv[] = {JRT_REDIS_SERVER, conf, "--sentinel", NULL};
        C.spid[i] = launch(log, argv);
    }
    int ready = jrt_wait_for(30000, 100, cluster_ready, NULL);
    if (!ready) setup_report();
    cr_assert(ready, "the sentinels did not find the replicas and each other within 30 s (what each process says "
                     "and the ends of their logs are above)");
    snprintf(C.url, sizeof C.url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/m", C.sport[0],
             C.sport[1], C.sport[2]);
    snprintf(C.record, sizeof C.record, "%s/record.txt", C.dir);
    setenv("JRT_RECORD", C.record, 1);
    char text[2048];
    snprintf(text, sizeof text, "redis:\n  url: %s\n  connect_timeout: 1s\n%s", C.url, extra ? extra : "");
    snprintf(C.cfg, sizeof C.cfg, "%s/jobrunner.yaml", C.dir);
    FILE *f = fopen(C.cfg, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

static void cluster_start(const char *extra) { cluster_start2(extra, NULL); }

static void cluster_stop(void) {
    for (int i = 0; i < SENTINELS; i++)
        if (C.spid[i] > 0) jrt_stop(C.spid[i], SIGTERM, 5000);
    for (int i = 0; i < NODES; i++)
        if (C.pid[i] > 0) {
            kill(C.pid[i], SIGCONT);
            jrt_stop(C.pid[i], SIGTERM, 5000);
        }
    if (getenv("JRT_KEEP")) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", C.dir);
    if (system(cmd) != 0) {
    }
}

TestSuite(sentinel, .fini = cluster_stop, .timeout = 120);

/* The index of the node listening on port. */
static int node_of(int port) {
    for (int i = 0; i < NODES; i++)
        if (C.port[i] == port) return i;
    cr_assert_fail("no node on port %d", port);
    return -1;
}

/* Wait until every sentinel names a primary other than old_port, up to
 * timeout_ms; returns its port (0 on timeout). */
static int wait_switch(int old_port, int timeout_ms) {
    for (int t = 0; t < timeout_ms; t += 20) {
        char a[64];
        int moved = 1, port = 0;
        for (int i = 0; i < SENTINELS && moved; i++) {
            named_primary(i, a, sizeof a);
            port = port_of(a);
            moved = port && port != old_port;
        }
        if (moved) return port;
        jrt_sleep_ms(20);
    }
    return 0;
}

/* The wall-clock ms of the first "+switch-master" line of sentinel logs
 * ("PID:X 02 Dec 2026 02:40:01.123 # +switch-master ..."), as time of day
 * in ms, or -1. */
static long long switch_logged_tod_ms(void) {
    long long best = -1;
    for (int i = 0; i < SENTINELS; i++) {
        char *s = jrt_slurp(path_in(i == 0 ? "sentinel0.log" : i == 1 ? "sentinel1.log" : "sentinel2.log"));
        char *p = strstr(s, "+switch-master");
        if (p) {
            while (p > s && p[-1] != '\n') p--;
            int h, m, sec, ms;
            const char *t = strchr(p, ':');
            t = t ? strchr(t + 1, ':') : NULL; /* the hh:mm:ss after the date */
            if (t && sscanf(t - 2, "%d:%d:%d.%d", &h, &m, &sec, &ms) == 4) {
                long long v = ((h * 60LL + m) * 60 + sec) * 1000 + ms;
                if (best < 0 || v < best) best = v;
            }
        }
        free(s);
    }
    return best;
}

static long long tod_ms(int64_t wall_us) { return (wall_us / 1000) % (24LL * 3600 * 1000); }

/* How many failovers the sentinels logged (the most "+switch-master" lines
 * of one sentinel's log), the time of day (ms) of the last line into *last. */
static int switches_logged(long long *last) {
    int most = 0;
    *last = -1;
    for (int i = 0; i < SENTINELS; i++) {
        char name[32];
        snprintf(name, sizeof name, "sentinel%d.log", i);
        char *s = jrt_slurp(path_in(name));
        int n = 0;
        for (char *p = strstr(s, "+switch-master"); p; p = strstr(p + 1, "+switch-master")) {
            n++;
            char *b = p;
            while (b > s && b[-1] != '\n') b--;
            int h, m, sec, ms;
            const char *t = strchr(b, ':');
            t = t ? strchr(t + 1, ':') : NULL;
            if (t && sscanf(t - 2, "%d:%d:%d.%d", &h, &m, &sec, &ms) == 4) {
                long long v = ((h * 60LL + m) * 60 + sec) * 1000 + ms;
                if (v > *last) *last = v;
            }
        }
        if (n > most) most = n;
        free(s);
    }
    return most;
}

/* ---- (1) URL forms and errors ------------------------------------------ */

Test(sentinel, url_errors) {
    cluster_start2(NULL, "sentinel-secret");
    char out[4096], err[4096];
    /* The sentinels want their own password: said, and not shown. */
    const char *nopw[] = {"stats", "--redis", C.url, NULL};
    unsetenv("JOBRUNNER_REDIS_SENTINEL_PASSWORD");
    cr_assert_neq(jrt_run(out, sizeof out, err, sizeof err, nopw), 0);
    cr_assert(strstr(err, "NOAUTH"), "%s", err);
    setenv("JOBRUNNER_REDIS_SENTINEL_PASSWORD", "wrong-one", 1);
    cr_assert_neq(jrt_run(out, sizeof out, err, sizeof err, nopw), 0);
    cr_assert(strstr(err, "AUTH with redis.sentinel_password") && !strstr(err, "wrong-one"), "%s", err);
    setenv("JOBRUNNER_REDIS_SENTINEL_PASSWORD", "sentinel-secret", 1);
    /* Through the sentinels: works. */
    const char *ok[] = {"stats", "--redis", C.url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, ok), 0, "stats through %s: %s", C.url, err);
    /* A long-running worker holding the sentinels' password (from the
     * environment) shows it neither in its log nor in `workers`. */
    const char *wargv[] = {"worker", "--redis", C.url, "--plugin", JRT_RECORD_PLUGIN, NULL};
    pid_t w = jrt_spawn(path_in("secret-worker.log"), wargv);
    cr_assert_geq(jrt_wait_count(path_in("secret-worker.log"), "worker starting", 1, 10000), 1, "%s",
                  jrt_slurp(path_in("secret-worker.log")));
    const char *ls[] = {"workers", "--redis", C.url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, ls), 0, "%s", err);
    cr_assert(!strstr(out, "sentinel-secret") && !strstr(err, "sentinel-secret"), "workers shows it: %s%s", out, err);
    char *wlogtext = jrt_slurp(path_in("secret-worker.log"));
    cr_assert(!strstr(wlogtext, "sentinel-secret"), "in its log: %s", wlogtext);
    free(wlogtext);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    /* A second URL form: one sentinel, a db and the sentinel list's first
     * address unreachable (the next one is asked). */
    int dead = jrt_free_port();
    char url[256];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d/m?db=2", dead, C.sport[1]);
    const char *next[] = {"stats", "--redis", url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, next), 0, "stats through %s: %s", url, err);
    /* No sentinel reachable: each one named, with why. */
    int dead2 = jrt_free_port();
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d/m", dead, dead2);
    const char *none[] = {"stats", "--redis", url, NULL};
    cr_assert_neq(jrt_run(out, sizeof out, err, sizeof err, none), 0);
    char want[128];
    snprintf(want, sizeof want, "sentinel 127.0.0.1:%d: Connection refused", dead);
    cr_assert(strstr(err, want), "no \"%s\" in: %s", want, err);
    snprintf(want, sizeof want, "sentinel 127.0.0.1:%d: Connection refused", dead2);
    cr_assert(strstr(err, want), "no \"%s\" in: %s", want, err);
    cr_assert(strstr(err, url), "the URL is not named in: %s", err);
    /* An unknown master name. */
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d/nope", C.sport[0], C.sport[2]);
    const char *unknown[] = {"stats", "--redis", url, NULL};
    cr_assert_neq(jrt_run(out, sizeof out, err, sizeof err, unknown), 0);
    cr_assert(strstr(err, "no sentinel knows master nope"), "%s", err);
    /* A password for the data nodes is hidden in the messages. */
    snprintf(url, sizeof url, "redis-sentinel://u:s3cret@127.0.0.1:%d/nope", C.sport[0]);
    const char *pw[] = {"stats", "--redis", url, NULL};
    cr_assert_neq(jrt_run(out, sizeof out, err, sizeof err, pw), 0);
    cr_assert(!strstr(err, "s3cret") && strstr(err, "u:***@"), "%s", err);
    /* A bad URL is refused before anything is asked. */
    const char *bad[] = {"stats", "--redis", "redis-sentinel://127.0.0.1:26379", NULL};
    cr_assert_neq(jrt_run(out, sizeof out, err, sizeof err, bad), 0);
    cr_assert(strstr(err, "missing master name"), "%s", err);
    unsetenv("JOBRUNNER_REDIS_SENTINEL_PASSWORD");
}

/* ---- (2) the primary SIGKILLed while jobs flow --------------------------- */

static volatile sig_atomic_t producer_stop;
static void on_term(int sig) {
    (void)sig;
    producer_stop = 1;
}

/* A producer (a child process): enqueue jobs "pN-i" (every 5th delayed by
 * 300 ms) through the client library until SIGTERM, each retried with its
 * id until it is enqueued; a line "ID WALL_US" in ledger after each
 * success. Its stderr (the library's log lines) goes to log. */
static int producer_wait; /* the producers' wait_replicas (set before forking them) */

static pid_t producer(int n, const char *ledger, const char *log) {
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid) return pid;
    signal(SIGTERM, on_term);
    FILE *l = freopen(log, "a", stderr);
    (void)l;
    FILE *f = fopen(ledger, "a");
    jr_client_options_t o = {.url = C.url, .connect_timeout_ms = 1000, .command_timeout_ms = 1000,
                             .wait_replicas = producer_wait, .wait_timeout_ms = 1000};
    jr_client_t *c = jr_client_open(&o);
    for (int i = 0; !producer_stop && c; i++) {
        char id[32];
        snprintf(id, sizeof id, "p%d-%d", n, i);
        jr_client_job_t j = {.queue = "sq", .handler = "record", .payload = id, .payload_len = strlen(id),
                             .id = id, .delay_ms = i % 5 == 0 ? 300 : 0};
        while (!producer_stop && jr_client_enqueue(c, &j, NULL) != 0) usleep(50000);
        if (producer_stop) break;
        fprintf(f, "%s %lld\n", id, (long long)jrt_wall_us());
        fflush(f);
        usleep(10000);
    }
    fclose(f);
    jr_client_free(c);
    _exit(0);
}

typedef struct run {
    char id[32];
    long long us;
} run_t;

static int cmp_run(const void *a, const void *b) { return strcmp(((const run_t *)a)->id, ((const run_t *)b)->id); }

/* The lines "ID US ..." of a file (record: "ID ATTEMPT US PAYLOAD"). */
static run_t *read_runs(const char *path, int us_field, size_t *n) {
    char *s = jrt_slurp(path);
    size_t cap = 1024;
    run_t *v = malloc(cap * sizeof *v);
    *n = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        if (*n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        char id[32];
        long long a, b;
        int k = sscanf(line, "%31s %lld %lld", id, &a, &b);
        if (k < 2 || (us_field == 2 && k < 3)) continue;
        snprintf(v[*n].id, sizeof v[*n].id, "%s", id);
        v[*n].us = us_field == 2 ? b : a;
        (*n)++;
    }
    free(s);
    qsort(v, *n, sizeof *v, cmp_run);
    return v;
}

/* The first run of id that started after us (0 if none). */
static long long run_after(const run_t *runs, size_t n, const char *id, long long us) {
    long long best = 0;
    for (size_t i = 0; i < n; i++)
        if (runs[i].us > us && !strcmp(runs[i].id, id) && (!best || runs[i].us < best)) best = runs[i].us;
    return best;
}

static size_t runs_of(const run_t *runs, size_t n, const char *id, long long *first_us) {
    run_t key;
    snprintf(key.id, sizeof key.id, "%s", id);
    run_t *hit = bsearch(&key, runs, n, sizeof *runs, cmp_run);
    if (!hit) return 0;
    while (hit > runs && !strcmp(hit[-1].id, id)) hit--;
    size_t k = 0;
    *first_us = hit->us;
    for (; hit + k < runs + n && !strcmp(hit[k].id, id); k++)
        if (hit[k].us < *first_us) *first_us = hit[k].us;
    return k;
}

/* The primary SIGKILLed while two producers, three workers and two
 * schedulers work through the sentinels; then the ledger. With `wait` (the
 * producers' and workers' redis.wait_replicas: 1) no enqueue that returned
 * success may be lost: each was on a replica, and the sentinels promote the
 * replica furthest along. Without it, the losses are counted, not failed. */
static void primary_killed(int wait) {
    cluster_start(wait ? "  wait_replicas: 1\n  wait_timeout: 1s\n" /* (continues the redis section) */
                         "worker:\n  queues: [sq]\n  lease: 3s\n  block: 2s\nscheduler:\n  block: 2s\n"
                       : "worker:\n  queues: [sq]\n  lease: 3s\n  block: 2s\nscheduler:\n  block: 2s\n");
    producer_wait = wait;
    pid_t w[3], s[2], p[2];
    for (int i = 0; i < 3; i++) {
        char log[32];
        snprintf(log, sizeof log, "worker%d.log", i);
        const char *argv[] = {"worker", "-c", C.cfg, "--plugin", JRT_RECORD_PLUGIN, NULL};
        w[i] = jrt_spawn(path_in(log), argv);
    }
    for (int i = 0; i < 2; i++) {
        char log[32];
        snprintf(log, sizeof log, "scheduler%d.log", i);
        const char *argv[] = {"scheduler", "-c", C.cfg, NULL};
        s[i] = jrt_spawn(path_in(log), argv);
    }
    for (int i = 0; i < 2; i++) {
        char ledger[32], log[32];
        snprintf(ledger, sizeof ledger, "ledger%d.txt", i);
        snprintf(log, sizeof log, "producer%d.log", i);
        p[i] = producer(i, path_in(ledger), path_in(log));
    }
    cr_assert(jrt_wait_lines(C.record, 50, 20000) >= 50, "jobs do not run through the sentinels");
    jrt_sleep_ms(1000);
    /* Kill the primary mid-run. */
    int64_t killed_us = jrt_wall_us();
    kill(C.pid[0], SIGKILL);
    waitpid(C.pid[0], NULL, 0);
    C.pid[0] = 0;
    int new_port = wait_switch(C.port[0], 30000);
    int64_t switched_us = jrt_wall_us();
    cr_assert(new_port, "no failover within 30 s");
    (void)node_of(new_port);
    /* Jobs keep flowing through the new primary for a while, then stop. */
    jrt_sleep_ms(4000);
    for (int i = 0; i < 2; i++) {
        kill(p[i], SIGTERM);
        waitpid(p[i], NULL, 0);
    }
    size_t nok = 0, nok1 = 0;
    run_t *ok = read_runs(path_in("ledger0.txt"), 1, &nok);
    run_t *ok1 = read_runs(path_in("ledger1.txt"), 1, &nok1);
    ok = realloc(ok, (nok + nok1) * sizeof *ok);
    memcpy(ok + nok, ok1, nok1 * sizeof *ok1);
    nok += nok1;
    free(ok1);
    /* Wait for every job enqueued after the failover to run (at most 20 s). */
    size_t lost = 0, dup = 0, after = 0;
    run_t *runs = NULL;
    size_t nruns = 0;
    for (int t = 0; t < 20000; t += 250) {
        free(runs);
        runs = read_runs(C.record, 2, &nruns);
        size_t missing = 0;
        for (size_t i = 0; i < nok; i++) {
            long long first;
            if (ok[i].us > switched_us && !runs_of(runs, nruns, ok[i].id, &first)) missing++;
        }
        if (!missing) break;
        jrt_sleep_ms(250);
    }
    jrt_sleep_ms(1000); /* the retries of the ones before, if any */
    free(runs);
    runs = read_runs(C.record, 2, &nruns);
    /* On a loaded machine the new primary may miss the sentinels'
     * down-after (1 s) and be failed over in turn: then what a failover may
     * lose is judged against the last one. */
    long long last_tod;
    int nswitch = switches_logged(&last_tod);
    int64_t last_switch_us = switched_us;
    if (nswitch > 1) {
        last_switch_us = killed_us + (last_tod - tod_ms(killed_us)) * 1000 + 1000000;
        printf("the sentinels failed over %d times (the last %lld ms after the kill)\n", nswitch,
               (long long)(last_switch_us - killed_us) / 1000 - 1000);
    }
    long long first_new_us = -1;
    for (size_t i = 0; i < nok; i++) {
        long long first = 0;
        size_t k = runs_of(runs, nruns, ok[i].id, &first);
        /* Confirmed 100 ms after the kill or later: through the new primary
         * (a reply in flight at the kill arrives within a few ms). */
        if (ok[i].us > killed_us + 100000) {
            after++;
            if (ok[i].us > last_switch_us)
                cr_expect_geq(k, 1, "job %s, enqueued through the new primary, never ran", ok[i].id);
            /* (A run before the kill: its enqueue's reply was lost in the
             * kill and the retry found the id there.) */
            long long a = run_after(runs, nruns, ok[i].id, killed_us);
            if (a && (first_new_us < 0 || a < first_new_us)) first_new_us = a;
        }
        if (k == 0) {
            lost++;
            printf("lost (enqueued %lld ms before the kill, the old primary's only): %s\n",
                   (long long)(killed_us - ok[i].us) / 1000, ok[i].id);
            cr_expect(ok[i].us <= last_switch_us, "job %s enqueued after the failover is lost", ok[i].id);
        }
        if (k > 1) {
            dup++;
            printf("ran %zu times (its ack went with the old primary): %s, first run %lld ms before the kill\n",
                   k, ok[i].id, (long long)(killed_us - first) / 1000);
            cr_expect(first <= last_switch_us + 1000000, "job %s ran twice, the first time after the failover",
                      ok[i].id);
        }
    }
    long long logged = switch_logged_tod_ms();
    printf("ledger (wait_replicas %d): %zu enqueues succeeded (%zu after the kill), %zu runs; lost %zu, ran twice or "
           "more %zu\n",
           wait, nok, after, nruns, lost, dup);
    if (wait) cr_expect_eq(lost, 0, "%zu enqueues confirmed by a replica were lost in the failover", lost);
    printf("failover: sentinels switched %lld ms after the kill (polled), +switch-master logged %lld ms after; "
           "first job through the new primary ran %lld ms after the kill\n",
           (long long)(switched_us - killed_us) / 1000, logged < 0 ? -1 : logged - tod_ms(killed_us),
           first_new_us < 0 ? -1 : (first_new_us - killed_us) / 1000);
    cr_expect(after > 0, "nothing was enqueued after the kill");
    cr_expect(first_new_us > 0 && first_new_us - switched_us < 4000000,
              "the first job through the new primary ran %lld ms after the switch (want ~1 s)",
              (long long)(first_new_us - switched_us) / 1000);
    for (int i = 0; i < 3; i++) {
        char log[32];
        snprintf(log, sizeof log, "worker%d.log", i);
        int said = jrt_count(path_in(log), "following the failover of master m");
        cr_expect(said >= 1 && said <= nswitch, "worker %d said %d failovers of %d: %s", i, said, nswitch,
                  jrt_slurp(path_in(log)));
    }
    for (int i = 0; i < 2; i++) {
        char log[32];
        snprintf(log, sizeof log, "scheduler%d.log", i);
        int said = jrt_count(path_in(log), "following the failover of master m");
        cr_expect(said >= 1 && said <= nswitch, "scheduler %d said %d failovers of %d", i, said, nswitch);
        snprintf(log, sizeof log, "producer%d.log", i);
        said = jrt_count(path_in(log), "following the failover of master m");
        cr_expect(said >= 1 && said <= nswitch, "producer %d said %d failovers of %d: %s", i, said, nswitch,
                  jrt_slurp(path_in(log)));
    }
    for (int i = 0; i < 3; i++) jrt_stop(w[i], SIGTERM, 10000);
    for (int i = 0; i < 2; i++) jrt_stop(s[i], SIGTERM, 10000);
    /* The CLI follows too: stats through the sentinels, on the new primary. */
    char out[4096], err[4096];
    const char *stats[] = {"stats", "-c", C.cfg, "-q", "sq", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, stats), 0, "%s", err);
    free(ok), free(runs);
}

Test(sentinel, primary_killed) { primary_killed(0); }
Test(sentinel, primary_killed_with_wait_replicas_loses_no_enqueue) { primary_killed(1); }

/* ---- (3) a failover without the primary dying ---------------------------- */

/* A worker blocked in its read (worker.block 30 s, nothing to do) while the
 * sentinels fail over (how: `how` is "failover", SENTINEL failover m, or
 * "freeze", the primary stopped with SIGSTOP so that its connections stay
 * open and silent): it follows, and a job enqueued then runs within the
 * failover time and a little. */
static void blocked_worker_follows(const char *how) {
    cluster_start("worker:\n  queues: [sq]\n  block: 30s\n");
    const char *argv[] = {"worker", "-c", C.cfg, "--plugin", JRT_RECORD_PLUGIN, NULL};
    pid_t w = jrt_spawn(path_in("worker.log"), argv);
    jr_client_options_t o = {.url = C.url, .connect_timeout_ms = 1000, .command_timeout_ms = 1000,
                             .wait_replicas = producer_wait, .wait_timeout_ms = 1000};
    jr_client_t *c = jr_client_open(&o);
    cr_assert(c && !jr_client_err(c), "%s", c ? jr_client_errstr(c) : "oom");
    jr_client_job_t j = {.queue = "sq", .handler = "record", .payload = "before", .payload_len = 6};
    cr_assert_eq(jr_client_enqueue(c, &j, NULL), 0, "%s", jr_client_errstr(c));
    cr_assert(jrt_wait_lines(C.record, 1, 10000) >= 1, "the worker does not run jobs");
    jrt_sleep_ms(500); /* it blocks in its read again */
    int64_t t0 = jrt_wall_us();
    if (!strcmp(how, "freeze")) {
        kill(C.pid[0], SIGSTOP);
    } else {
        char a[64];
        ask(C.sport[0], a, sizeof a, "SENTINEL failover m");
        cr_assert_str_eq(a, "OK");
    }
    int new_port = wait_switch(C.port[0], 30000);
    int64_t switched_us = jrt_wall_us();
    cr_assert(new_port, "no failover within 30 s");
    /* Enqueue through the sentinels on a new connection (the old primary
     * takes writes until the sentinels make it a replica, up to 10 s later:
     * the job must go to the new one), then wait for the run. */
    jr_client_free(c);
    c = jr_client_open(&o);
    j.payload = "after", j.payload_len = 5;
    int64_t give_up = jrt_wall_us() + 20000000;
    while (jr_client_enqueue(c, &j, NULL) != 0 && jrt_wall_us() < give_up) jrt_sleep_ms(50);
    cr_assert(jrt_wait_lines(C.record, 2, 20000) >= 2, "the worker did not follow the failover (%s): %s", how,
              jrt_slurp(path_in("worker.log")));
    size_t n;
    run_t *runs = read_runs(C.record, 2, &n);
    long long last = 0;
    for (size_t i = 0; i < n; i++)
        if (runs[i].us > last) last = runs[i].us;
    printf("%s: sentinels switched %lld ms after it began; the job enqueued then ran %lld ms after the switch\n",
           how, (long long)(switched_us - t0) / 1000, (last - switched_us) / 1000);
    cr_expect(last - switched_us < 5000000, "the blocked worker took %lld ms to follow",
              (last - switched_us) / 1000);
    cr_expect_eq(jrt_wait_count(path_in("worker.log"), "following the failover of master m", 1, 5000), 1, "%s",
                 jrt_slurp(path_in("worker.log")));
    free(runs);
    jr_client_free(c);
    jrt_stop(w, SIGTERM, 10000);
}

Test(sentinel, failover_command) { blocked_worker_follows("failover"); }

Test(sentinel, frozen_primary) { blocked_worker_follows("freeze"); }

/* (b) A primary made a replica behind the sentinels' back: a write through
 * the sentinels is refused READONLY and the connection is broken, so its
 * process reconnects through them; the same refusal on a redis:// URL
 * leaves that connection usable (an error reply is not a transport error). */
Test(sentinel, readonly_breaks_the_connection) {
    cluster_start(NULL);
    char err[JR_ERRLEN], a[256], direct[64];
    jr_redis_opts_t o = {.url = C.url, .timeout_ms = 1000};
    jr_redis_t *r = jr_redis_open(&o, err, sizeof err);
    cr_assert(r, "%s", err);
    cr_assert_eq(jr_redis_load_library(r), 0, "%s", jr_redis_errstr(r));
    snprintf(direct, sizeof direct, "redis://127.0.0.1:%d", C.port[0]);
    jr_redis_t *d = jr_redis_connect(direct, 1000, err, sizeof err);
    cr_assert(d, "%s", err);
    jr_enqueue_t job = jrt_job("sq", "record", "x");
    cr_assert_eq(jr_redis_enqueue(r, &job, 1, NULL, NULL), 0, "%s", jr_redis_errstr(r));
    ask(C.port[1], a, sizeof a, "REPLICAOF NO ONE");
    ask(C.port[0], a, sizeof a, "REPLICAOF 127.0.0.1 %d", C.port[1]);
    cr_assert_str_eq(a, "OK");
    cr_assert_eq(jr_redis_enqueue(r, &job, 1, NULL, NULL), JR_EREDIS);
    cr_expect(strstr(jr_redis_errstr(r), "READONLY"), "%s", jr_redis_errstr(r));
    cr_expect_eq(jr_redis_ok(r), 0, "a READONLY through the sentinels left the connection usable");
    cr_assert_eq(jr_redis_enqueue(d, &job, 1, NULL, NULL), JR_EREDIS);
    cr_expect(strstr(jr_redis_errstr(d), "READONLY"), "%s", jr_redis_errstr(d));
    cr_expect_eq(jr_redis_ok(d), 1, "a READONLY on a redis:// URL broke the connection");
    jr_redis_free(r);
    jr_redis_free(d);
}
