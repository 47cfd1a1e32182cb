/* /metrics and /healthz of real worker and scheduler processes, scraped over
 * HTTP (a tiny GET client below) and parsed, against a real redis-server. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"
#include "redis.h"
#include "redis_produce.h"

static jrt_redis_t R;
static char record[192], wlog[192];

static void setup(void) {
    jrt_start_recorded(&R, record, sizeof record);
    snprintf(wlog, sizeof wlog, "%s/proc.log", R.dir);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(metrics, .init = setup, .fini = teardown, .timeout = 180);

static int http_get(int port, const char *path, char **body) { return jrt_http_get(port, path, body); }

/* Wait until the server answers (any status); returns that status. */
static int wait_http(int port, const char *path, int timeout_ms) {
    for (int t = 0;; t += 50) {
        char *b;
        int st = http_get(port, path, &b);
        free(b);
        if (st > 0 || t >= timeout_ms) return st;
        jrt_sleep_ms(50);
    }
}

/* Check the text exposition format line by line: HELP and TYPE lines, then
 * samples `name{label="value",...} number` of the family typed last (with
 * _bucket/_sum/_count for histograms). Fails the test on any bad line. */
static void check_format(const char *text) {
    char family[128] = "", type[32] = "";
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        cr_assert(nl, "the exposition must end with a newline");
        char l[2048];
        snprintf(l, sizeof l, "%.*s", (int)(nl - line), line);
        line = nl + 1;
        if (!strncmp(l, "# HELP ", 7)) {
            cr_assert(strchr(l + 7, ' '), "HELP without text: %s", l);
            continue;
        }
        if (!strncmp(l, "# TYPE ", 7)) {
            cr_assert_eq(sscanf(l, "# TYPE %127s %31s", family, type), 2, "bad TYPE line: %s", l);
            cr_assert(!strcmp(type, "counter") || !strcmp(type, "gauge") || !strcmp(type, "histogram"), "%s", l);
            if (!strcmp(type, "counter")) cr_assert(strstr(family, "_total"), "counter without _total: %s", l);
            continue;
        }
        size_t fl = strlen(family);
        cr_assert(fl && !strncmp(l, family, fl), "sample outside its family %s: %s", family, l);
        const char *rest = l + fl;
        if (!strcmp(type, "histogram")) {
            if (!strncmp(rest, "_bucket", 7)) {
                rest += 7;
                cr_assert(strstr(rest, "le=\""), "bucket without le: %s", l);
            }
            else if (!strncmp(rest, "_sum", 4)) rest += 4;
            else if (!strncmp(rest, "_count", 6)) rest += 6;
            else cr_assert_fail("histogram sample without _bucket/_sum/_count: %s", l);
        }
        if (*rest == '{') {
            const char *p = rest + 1;
            while (*p != '}') {
                while ((*p >= 'a' && *p <= 'z') || *p == '_') p++;
                cr_assert(p[0] == '=' && p[1] == '"', "bad label in %s", l);
                for (p += 2; *p != '"'; p++) {
                    cr_assert(*p, "unterminated label value in %s", l);
                    if (*p == '\\') cr_assert(strchr("\\\"n", *++p), "bad escape in %s", l);
                }
                p++;
                if (*p == ',') p++;
                else cr_assert_eq(*p, '}', "bad label list in %s", l);
            }
            rest = p + 1;
        }
        cr_assert_eq(*rest, ' ', "no value in %s", l);
        char *end;
        strtod(rest + 1, &end);
        cr_assert(end != rest + 1 && !*end, "bad value in %s", l);
    }
}

/* The value of the sample written exactly as `series` (name{labels}), or
 * -1 if absent. */
static double sample(const char *text, const char *series) {
    size_t n = strlen(series);
    for (const char *p = text; (p = strstr(p, series)); p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return strtod(p + n + 1, NULL);
    return -1;
}

static double scrape(int port, const char *series) {
    char *body;
    int st = http_get(port, "/metrics", &body);
    cr_assert_eq(st, 200, "GET /metrics: %d", st);
    double v = sample(body, series);
    free(body);
    return v;
}

/* Poll until the sample equals want, up to timeout_ms; returns the last value. */
static double wait_sample(int port, const char *series, double want, int timeout_ms) {
    double v = -1;
    for (int t = 0; t <= timeout_ms; t += 100) {
        if ((v = scrape(port, series)) == want) break;
        jrt_sleep_ms(100);
    }
    return v;
}

static void enqueue_n(const char *queue, const char *handler, size_t n, int64_t delay_ms) {
    jr_enqueue_t job = jrt_job(queue, handler, "x");
    job.delay_ms = delay_ms, job.env.attempt = 0;
    jrt_enqueue(&R, job, n, NULL);
}

/* Every metric of the role has HELP and TYPE lines. */
static void check_documented(const char *text, const char *const *names) {
    for (size_t i = 0; names[i]; i++) {
        char help[160], type[160];
        snprintf(help, sizeof help, "# HELP %s ", names[i]);
        snprintf(type, sizeof type, "# TYPE %s ", names[i]);
        cr_expect(strstr(text, help) && strstr(text, type), "metric %s missing:\n%s", names[i], text);
    }
}

static const char *const worker_metrics[] = {"jobrunner_jobs_total", "jobrunner_job_duration_seconds",
                                             "jobrunner_jobs_running", "jobrunner_fetch_batch_jobs",
                                             "jobrunner_redis_reconnects_total",
                                             "jobrunner_http_connections_dropped_total", NULL};
static const char *const sched_metrics[] = {"jobrunner_jobs_promoted_total", "jobrunner_promotion_lateness_seconds",
                                            "jobrunner_queue_delayed_jobs", "jobrunner_queue_ready_jobs",
                                            "jobrunner_redis_reconnects_total",
                                            "jobrunner_http_connections_dropped_total", NULL};

/* Start a worker or scheduler serving metrics on port: given with
 * --metrics, or by the config file (metrics.listen) when flag is 0. */
static pid_t start_with(const char *role, int port, const char *config, int flag) {
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    const char *args[16] = {role, "--redis", R.url, "--metrics", addr};
    size_t n = flag ? 5 : 3;
    if (!strcmp(role, "worker")) args[n++] = "--plugin", args[n++] = JRT_RECORD_PLUGIN;
    if (config) args[n++] = "-c", args[n++] = config;
    args[n] = NULL;
    pid_t pid = jrt_spawn(wlog, args);
    cr_assert_gt(wait_http(port, "/healthz", 10000), 0, "no HTTP server on %s", addr);
    return pid;
}
static pid_t start(const char *role, int port, const char *config) { return start_with(role, port, config, 1); }

/* Ask /healthz every 100 ms until it answers 200 (until_ok) or other than
 * 200 (!until_ok), for up to timeout_ms: the last status, its body
 * (malloc'd or NULL) into *body (body NULL: freed). */
static int healthz_wait(int port, int until_ok, int timeout_ms, char **body) {
    int64_t t0 = jrt_wall_us();
    int st = until_ok ? 0 : 200;
    char *b = NULL;
    while ((st == 200) != until_ok && jrt_wall_us() - t0 < timeout_ms * 1000LL) {
        free(b);
        jrt_sleep_ms(100);
        st = http_get(port, "/healthz", &b);
    }
    if (body) *body = b;
    else free(b);
    return st;
}

Test(metrics, worker_counts_every_finished_job_by_outcome) {
    int port = jrt_free_port();
    pid_t w = start("worker", port, NULL);
    char *body;
    cr_assert_eq(http_get(port, "/metrics", &body), 200);
    check_format(body);
    check_documented(body, worker_metrics);
    cr_expect_eq(sample(body, "jobrunner_jobs_running"), 0);
    cr_expect_eq(sample(body, "jobrunner_redis_reconnects_total"), 0);
    free(body);

    enum { N = 500, F = 7 };
    enqueue_n("default", "record", N, 0);
    enqueue_n("mq", "fail", F, 0); /* not consumed: the worker serves "default" only */
    enqueue_n("default", "fail", F, 0);
    double ok = wait_sample(port, "jobrunner_jobs_total{queue=\"default\",handler=\"record\",outcome=\"ok\"}", N, 30000);
    cr_assert_eq(ok, N, "ok jobs counted: %g of %d", ok, N);
    double dead = wait_sample(port, "jobrunner_jobs_total{queue=\"default\",handler=\"fail\",outcome=\"dead\"}", F, 30000);
    cr_assert_eq(dead, F, "failed jobs counted: %g of %d", dead, F);

    cr_assert_eq(http_get(port, "/metrics", &body), 200);
    check_format(body);
    check_documented(body, worker_metrics);
    cr_expect_eq(sample(body, "jobrunner_job_duration_seconds_count{queue=\"default\",handler=\"record\"}"), N);
    cr_expect_eq(sample(body, "jobrunner_job_duration_seconds_bucket{queue=\"default\",handler=\"record\",le=\"+Inf\"}"), N);
    cr_expect_geq(sample(body, "jobrunner_job_duration_seconds_sum{queue=\"default\",handler=\"record\"}"), 0);
    cr_expect_eq(sample(body, "jobrunner_fetch_batch_jobs_sum"), N + F, "every job fetched once");
    cr_expect_geq(sample(body, "jobrunner_fetch_batch_jobs_count"), 1);
    cr_expect_eq(sample(body, "jobrunner_jobs_running"), 0);
    cr_expect_eq(sample(body, "jobrunner_redis_reconnects_total"), 0);
    cr_expect(!strstr(body, "queue=\"mq\""), "only the worker's queues");
    free(body);

    cr_expect_eq(http_get(port, "/nope", &body), 404);
    free(body);
    jrt_stop(w, SIGTERM, 10000);
}

Test(metrics, worker_health_follows_redis) {
    int port = jrt_free_port();
    char cfg[256];
    jrt_write(&R, "w.yaml", "worker:\n  block: 500ms\n", cfg, sizeof cfg);
    pid_t w = start("worker", port, cfg);
    int st = 0;
    char *body = NULL;
    for (int t = 0; t < 10000 && st != 200; t += 100) { /* the first Redis reply */
        free(body);
        st = http_get(port, "/healthz", &body);
        jrt_sleep_ms(100);
    }
    cr_assert_eq(st, 200, "healthy with Redis up: %d %s", st, body);
    free(body);

    /* Redis stops answering (frozen): 503 with the reason, within a block
     * period and a second (the bound here is generous). */
    kill(R.pid, SIGSTOP);
    st = healthz_wait(port, 0, 10000, &body);
    cr_expect_eq(st, 503, "unhealthy with Redis frozen: %d", st);
    cr_expect(body && strstr(body, "redis"), "the reason names Redis: %s", body);
    free(body);
    kill(R.pid, SIGCONT);
    st = healthz_wait(port, 1, 15000, NULL);
    cr_expect_eq(st, 200, "healthy again once Redis answers");

    /* Redis dies and comes back: 503, then 200; the reconnect is counted. */
    kill(R.pid, SIGKILL);
    st = healthz_wait(port, 0, 10000, NULL);
    cr_expect_eq(st, 503, "unhealthy with Redis dead");
    jrt_redis_restart(&R, NULL);
    st = healthz_wait(port, 1, 15000, NULL);
    cr_expect_eq(st, 200, "healthy again after Redis restarted");
    cr_expect_geq(scrape(port, "jobrunner_redis_reconnects_total"), 1);
    jrt_stop(w, SIGTERM, 10000);
}

Test(metrics, scheduler_counts_promotions_and_depths) {
    int port = jrt_free_port();
    char cfg[256], text[256];
    snprintf(text, sizeof text, "scheduler:\n  block: 500ms\nmetrics:\n  listen: 127.0.0.1:%d\n", port);
    jrt_write(&R, "s.yaml", text, cfg, sizeof cfg);
    enqueue_n("sq", "record", 3, 0);         /* ready */
    enqueue_n("sq", "record", 4, 3600000);   /* delayed an hour */
    enqueue_n("sq", "record", 5, 300);       /* promoted soon */
    pid_t s = start_with("scheduler", port, cfg, 0); /* metrics.listen */
    double promoted = wait_sample(port, "jobrunner_jobs_promoted_total{queue=\"sq\"}", 5, 20000);
    cr_assert_eq(promoted, 5, "promoted jobs counted: %g", promoted);
    cr_expect_eq(wait_sample(port, "jobrunner_queue_ready_jobs{queue=\"sq\"}", 8, 20000), 8);
    cr_expect_eq(wait_sample(port, "jobrunner_queue_delayed_jobs{queue=\"sq\"}", 4, 20000), 4);
    char *body;
    cr_assert_eq(http_get(port, "/metrics", &body), 200);
    check_format(body);
    check_documented(body, sched_metrics);
    double n = sample(body, "jobrunner_promotion_lateness_seconds_count{queue=\"sq\"}");
    cr_expect_geq(n, 1, "lateness observed: %g", n);
    cr_expect_eq(sample(body, "jobrunner_promotion_lateness_seconds_bucket{queue=\"sq\",le=\"+Inf\"}"), n);
    free(body);
    int st = http_get(port, "/healthz", &body);
    cr_expect_eq(st, 200, "%s", body);
    free(body);

    kill(R.pid, SIGSTOP);
    st = healthz_wait(port, 0, 10000, &body);
    cr_expect_eq(st, 503, "scheduler unhealthy with Redis frozen");
    cr_expect(body && strstr(body, "redis"), "%s", body);
    free(body);
    kill(R.pid, SIGCONT);
    st = healthz_wait(port, 1, 15000, NULL);
    cr_expect_eq(st, 200, "scheduler healthy again");
    jrt_stop(s, SIGTERM, 10000);
}

/* Bind errors and bad addresses stop the process at startup, naming the address. */
Test(metrics, bad_listen_address_is_a_startup_error) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    cr_assert(!bind(fd, (struct sockaddr *)&a, sizeof a) && !listen(fd, 1) &&
              !getsockname(fd, (struct sockaddr *)&a, &l));
    char busy[64];
    snprintf(busy, sizeof busy, "127.0.0.1:%d", ntohs(a.sin_port));
    static const struct {
        const char *addr, *says;
        int status;
    } cases[] = {
        {NULL, "Address already in use", 1},   /* the port held above */
        {"192.0.2.1:9464", "cannot assign", 1}, /* not an address of this host */
        {"no-such-host.invalid:9464", "cannot serve metrics on no-such-host.invalid:9464", 1},
        {"127.0.0.1", "HOST:PORT", 2},
        {"127.0.0.1:70000", "0 to 65535", 2},
        {"::1:9464", "brackets", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *addr = cases[i].addr ? cases[i].addr : busy;
        for (int role = 0; role < 2; role++) {
            const char *worker[] = {"worker", "--redis", R.url, "--plugin", JRT_RECORD_PLUGIN, "--metrics", addr, NULL};
            const char *sched[] = {"scheduler", "--redis", R.url, "--metrics", addr, NULL};
            const char **args = role ? sched : worker;
            char out[256], err[4096];
            int st = jrt_run(out, sizeof out, err, sizeof err, args);
            cr_expect_eq(st, cases[i].status, "%s --metrics %s: status %d: %s", args[0], addr, st, err);
            cr_expect(strstr(err, addr), "%s: the error names the address: %s", args[0], err);
            cr_expect(strcasestr(err, cases[i].says), "%s --metrics %s: expected \"%s\" in: %s", args[0], addr,
                      cases[i].says, err);
        }
    }
    /* The same checks for the configuration key. */
    char cfg[256], out[256], err[2048];
    jrt_write(&R, "bad.yaml", "metrics:\n  listen: \"localhost\"\n", cfg, sizeof cfg);
    const char *args[] = {"worker", "--redis", R.url, "-c", cfg, NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, args), 2);
    cr_expect(strstr(err, "metrics.listen") && strstr(err, "HOST:PORT"), "%s", err);
    close(fd);
}

/* ---- the per-minute history (jr:{Q}:history, written by the workers) ---- */

/* The sums of the last `minutes` minutes of queue q's history; fails the
 * test if the read fails. */
static void history_sums(jr_redis_t *r, const char *q, int64_t minutes, long long *p, long long *f) {
    long long proc[JR_HISTORY_MINUTES], failed[JR_HISTORY_MINUTES];
    int64_t start = -1;
    cr_assert_eq(jr_redis_history(r, q, minutes, &start, proc, failed), 0, "%s", jr_redis_errstr(r));
    redisContext *c = jrt_connect(&R);
    long long now_min = jrt_redis_ms(c) / 60000;
    redisFree(c);
    cr_expect(start + minutes - 1 == now_min || start + minutes - 1 == now_min - 1,
              "the last minute read is the current one: start %lld + %lld, now %lld", (long long)start,
              (long long)minutes, now_min);
    *p = *f = 0;
    for (int64_t i = 0; i < minutes; i++) *p += proc[i], *f += failed[i];
}

/* What the dashboard charts: the jobs a worker finished and the attempts
 * that failed are in the queue's history, in the minutes they happened,
 * equal to the totals of `jobrunner stats`; the ring stays bounded and a
 * slot of another day reads as 0. */
Test(metrics, history_counts_processed_and_failed_per_minute) {
    enum { N = 300, F = 5 };
    redisContext *c = jrt_connect(&R);
    long long now_min = jrt_redis_ms(c) / 60000;
    /* a slot of yesterday at this minute (stale: must read 0 and be reused),
     * and garbage in the slot of a minute ago */
    char slot[32], stale[64];
    snprintf(slot, sizeof slot, "%lld", now_min % JR_HISTORY_MINUTES);
    snprintf(stale, sizeof stale, "%lld 1000 1000", now_min - JR_HISTORY_MINUTES);
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{default}:history", slot, stale, NULL));
    snprintf(slot, sizeof slot, "%lld", (now_min + JR_HISTORY_MINUTES - 1) % JR_HISTORY_MINUTES);
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{default}:history", slot, "not a count", NULL));
    jr_redis_t *r = jrt_jr_connect(&R);
    long long p, f;
    history_sums(r, "default", 60, &p, &f);
    cr_expect(p == 0 && f == 0, "stale and garbage slots read as 0: %lld %lld", p, f);

    int port = jrt_free_port();
    pid_t w = start("worker", port, NULL);
    enqueue_n("default", "record", N, 0);
    enqueue_n("default", "fail", F, 0);
    double dead = wait_sample(port, "jobrunner_jobs_total{queue=\"default\",handler=\"fail\",outcome=\"dead\"}", F, 30000);
    cr_assert_eq(dead, F);
    cr_assert_eq(wait_sample(port, "jobrunner_jobs_total{queue=\"default\",handler=\"record\",outcome=\"ok\"}", N, 30000), N);
    jrt_stop(w, SIGTERM, 10000);

    jr_qstats_t s = jrt_stats(&R, "default");
    history_sums(r, "default", 60, &p, &f);
    cr_expect_eq(p, N, "processed in the last hour of the history: %lld of %d", p, N);
    cr_expect_eq(f, F, "failed attempts in the last hour of the history: %lld of %d", f, F);
    cr_expect(p == s.processed && f == s.failed, "the history agrees with stats: %lld/%lld vs %lld/%lld", p, f,
              s.processed, s.failed);
    history_sums(r, "default", JR_HISTORY_MINUTES, &p, &f);
    cr_expect(p == N && f == F, "the whole day: %lld %lld", p, f);
    /* bounded: one field per minute that saw work (the two planted ones too) */
    long long fields = jrt_int(c, "HLEN jr:{default}:history");
    cr_expect(fields >= 2 && fields <= 4, "one field per minute used, the stale slot reused: %lld", fields);

    /* out of range is refused, naming the range */
    long long a[2], b[2];
    int64_t st;
    cr_expect_eq(jr_redis_history(r, "default", 0, &st, a, b), JR_EINVAL);
    cr_expect(strstr(jr_redis_errstr(r), "1..1440"), "%s", jr_redis_errstr(r));
    /* another type in the key: refused, naming the key */
    freeReplyObject(jrt_cmd(c, "SET", "jr:{gq}:history", "x", NULL));
    cr_expect_eq(jr_redis_history(r, "gq", 2, &st, a, b), JR_EREDIS);
    cr_expect(strstr(jr_redis_errstr(r), "WRONGTYPE"), "%s", jr_redis_errstr(r));
    jr_redis_free(r);
    redisFree(c);
}

/* ---- metrics for alerting (issue 22, part 3) ---------------------------- */

/* Run `promtool check metrics` on text (stdin) or `promtool check rules
 * FILE` / `promtool test rules FILE` (text NULL); returns its exit status
 * and its output in out. Skips the test, saying so, without promtool. */
static int promtool(const char *text, const char *const *args, char *out, size_t outlen) {
    if (access("/usr/bin/promtool", X_OK) && system("command -v promtool >/dev/null 2>&1")) {
        cr_skip_test("promtool is not installed (Debian package prometheus; .ci/deps.sh installs it)");
    }
    char in[256], cmd[1024] = "promtool";
    snprintf(in, sizeof in, "%s/promtool.in", R.dir);
    for (size_t i = 0; args[i]; i++) snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " '%s'", args[i]);
    if (text) {
        FILE *f = fopen(in, "w");
        cr_assert(f);
        fputs(text, f);
        fclose(f);
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " < '%s'", in);
    }
    snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " 2>&1");
    FILE *p = popen(cmd, "r");
    cr_assert(p, "cannot run %s", cmd);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *scrape_body(int port) {
    char *body;
    cr_assert_eq(http_get(port, "/metrics", &body), 200);
    return body;
}

/* A worker's process metrics (up, build_info, capacity, busy), the
 * retried outcome named for what it counts, deferrals by handler; and a
 * real scrape passes promtool check metrics. */
Test(metrics, worker_exports_up_build_capacity_busy_retried_deferred) {
    int port = jrt_free_port();
    char cfg[256];
    jrt_write(&R, "w.yaml", "worker:\n  concurrency: 3\n", cfg, sizeof cfg);
    pid_t w = start("worker", port, cfg), sched = jrt_scheduler(&R, NULL, NULL); /* promotes the retries */
    jr_enqueue_t crash = jrt_job("default", "crash", "x");
    crash.env.max_attempts = 2, crash.env.backoff_ms = 1;
    jrt_enqueue(&R, crash, 2, NULL);     /* each: attempt 1 retried, attempt 2 dead */
    enqueue_n("default", "nosuch", 1, 0); /* no such handler here: deferred */
    enqueue_n("default", "nap", 1, 0);    /* payload "x": 0 ms; then a long one below */
    double dead = wait_sample(port, "jobrunner_jobs_total{queue=\"default\",handler=\"crash\",outcome=\"dead\"}", 2, 30000);
    cr_assert_eq(dead, 2, "crashed jobs dead after 2 attempts: %g", dead);
    jr_enqueue_t nap = jrt_job("default", "nap", "3000");
    jrt_enqueue(&R, nap, 1, NULL);
    cr_expect_eq(wait_sample(port, "jobrunner_jobs_running", 1, 10000), 1, "busy: the napping job");

    char *body = scrape_body(port);
    check_format(body);
    cr_expect_eq(sample(body, "jobrunner_jobs_total{queue=\"default\",handler=\"crash\",outcome=\"retried\"}"), 2,
                 "one retried attempt per crashed job:\n%s", body);
    cr_expect(!strstr(body, "outcome=\"retry\""), "the old label is gone");
    cr_expect(strstr(body, "retried (this attempt failed and the job will run again"), "HELP says it counts attempts");
    cr_expect_eq(sample(body, "jobrunner_up"), 1);
    char build[128];
    snprintf(build, sizeof build, "jobrunner_build_info{version=\"%s\",role=\"worker\",library_revision=\"", JR_VERSION);
    cr_expect(strstr(body, build), "build_info with version and role:\n%s", body);
    cr_expect_eq(sample(body, "jobrunner_worker_capacity"), 3);
    cr_expect_geq(sample(body, "jobrunner_jobs_deferred_total{queue=\"default\",handler=\"nosuch\"}"), 1,
                  "the deferral counted by handler");
    char out[8192];
    const char *check[] = {"check", "metrics", NULL};
    int st = promtool(body, check, out, sizeof out);
    cr_expect_eq(st, 0, "promtool check metrics on a worker's scrape: %d\n%s\n%s", st, out, body);
    free(body);
    jrt_stop(w, SIGTERM, 10000);
    jrt_stop(sched, SIGTERM, 10000);
}

/* Every scheduler exports each queue's gauges as Redis holds them: two
 * schedulers give the same values (max by (queue) is the queue's value),
 * including pending, dead, paused and the oldest ready job's age; cron
 * schedules fired by a scheduler have their last fire time and lateness;
 * a real scrape passes promtool check metrics. */
Test(metrics, schedulers_export_the_same_queue_gauges_and_cron_times) {
    int p1 = jrt_free_port(), p2 = jrt_free_port();
    char cfg[256];
    jrt_write(&R, "s.yaml",
              "scheduler:\n  block: 500ms\nperiodic:\n  - name: tick\n    handler: record\n    queue: cq\n"
              "    every: 1s\n",
              cfg, sizeof cfg);
    enqueue_n("gq", "record", 5, 0);       /* ready: 2 of them are then held (pending) */
    enqueue_n("gq", "record", 4, 3600000); /* delayed */
    pid_t s1 = start_with("scheduler", p1, cfg, 1), s2 = start_with("scheduler", p2, cfg, 1);
    const char *pause[] = {"pause", "gq", NULL};
    cr_assert_eq(jrt_cli(&R, NULL, 0, pause), 0);
    /* pending: a consumer holds 2 entries (read, not acknowledged) */
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "XREADGROUP", "GROUP", "jr", "holder", "COUNT", "2", "STREAMS", "jr:{gq}:ready", ">",
                            NULL));
    /* dead: 2 entries */
    freeReplyObject(jrt_cmd(c, "XADD", "jr:{gq}:dead", "*", "id", "x1", "h", "record", NULL));
    freeReplyObject(jrt_cmd(c, "XADD", "jr:{gq}:dead", "*", "id", "x2", "h", "record", NULL));
    int ports[] = {p1, p2};
    for (int i = 0; i < 2; i++) {
        int port = ports[i];
        cr_expect_eq(wait_sample(port, "jobrunner_queue_dead_jobs{queue=\"gq\"}", 2, 10000), 2, "dead (%d)", i);
        cr_expect_eq(wait_sample(port, "jobrunner_queue_paused{queue=\"gq\"}", 1, 10000), 1, "paused (%d)", i);
        cr_expect_eq(wait_sample(port, "jobrunner_queue_pending_jobs{queue=\"gq\"}", 2, 10000), 2, "pending (%d)", i);
        cr_expect_eq(wait_sample(port, "jobrunner_queue_ready_jobs{queue=\"gq\"}", 3, 10000), 3, "ready (%d)", i);
        cr_expect_eq(wait_sample(port, "jobrunner_queue_delayed_jobs{queue=\"gq\"}", 4, 10000), 4, "delayed (%d)", i);
        double age = -1; /* refreshed once a second: wait for a refresh after the first second */
        for (int t = 0; t < 100 && age < 1; t++, jrt_sleep_ms(100))
            age = scrape(port, "jobrunner_queue_oldest_ready_age_seconds{queue=\"gq\"}");
        cr_expect(age >= 1 && age < 120, "the oldest ready job's age (%d): %g s", i, age);
        cr_expect_eq(scrape(port, "jobrunner_up"), 1);
    }
    const char *resume[] = {"resume", "gq", NULL};
    cr_assert_eq(jrt_cli(&R, NULL, 0, resume), 0);
    cr_expect_eq(wait_sample(p1, "jobrunner_queue_paused{queue=\"gq\"}", 0, 10000), 0, "resumed");

    /* cron: the ticks are fired by one scheduler or the other; each shows the
     * ticks it fired, and together they cover the latest ones */
    double last = -1, late = -1;
    for (int t = 0; t < 100 && last < 0; t++) {
        for (int i = 0; i < 2 && last < 0; i++) {
            last = scrape(ports[i], "jobrunner_cron_last_fire_timestamp_seconds{schedule=\"tick\"}");
            late = scrape(ports[i], "jobrunner_cron_lateness_seconds{schedule=\"tick\"}");
        }
        if (last < 0) jrt_sleep_ms(100);
    }
    long long now_s = jrt_redis_ms(c) / 1000;
    cr_expect(last > now_s - 30 && last <= now_s + 1, "the last tick fired is recent: %g (now %lld)", last, now_s);
    cr_expect(late >= 0 && late < 30, "its lateness: %g s", late);

    char *body = scrape_body(p1);
    check_format(body);
    char build[128];
    snprintf(build, sizeof build, "jobrunner_build_info{version=\"%s\",role=\"scheduler\",library_revision=\"", JR_VERSION);
    cr_expect(strstr(body, build), "build_info:\n%s", body);
    char out[8192];
    const char *check[] = {"check", "metrics", NULL};
    int st = promtool(body, check, out, sizeof out);
    cr_expect_eq(st, 0, "promtool check metrics on a scheduler's scrape: %d\n%s\n%s", st, out, body);
    free(body);
    redisFree(c);
    jrt_stop(s1, SIGTERM, 10000);
    jrt_stop(s2, SIGTERM, 10000);
}

/* The example alert rules of docs/operations.md are a valid rules file,
 * and its unit tests (promtool test rules) pass. */
Test(metrics, example_alert_rules_pass_promtool) {
    char out[8192];
    const char *check[] = {"check", "rules", JRT_SOURCE_DIR "/config/prometheus/jobrunner-alerts.yml", NULL};
    int st = promtool(NULL, check, out, sizeof out);
    cr_expect_eq(st, 0, "promtool check rules: %d\n%s", st, out);
    const char *test[] = {"test", "rules", JRT_SOURCE_DIR "/config/prometheus/jobrunner-alerts.test.yml", NULL};
    st = promtool(NULL, test, out, sizeof out);
    cr_expect_eq(st, 0, "promtool test rules: %d\n%s", st, out);
}

/* systemd's jobrunner-worker@N sets JOBRUNNER_METRICS_PORT_OFFSET=N: two
 * workers with one metrics.listen serve on PORT + 1 and PORT + 2, side by
 * side, each answering for itself. */
Test(metrics, port_offset_gives_each_instance_its_own_port) {
    int base = 0, p1 = 0, p2 = 0;
    for (int tries = 0; tries < 50 && !base; tries++) { /* a base with the next two free as well */
        int b = jrt_free_port();
        if (b < 65000) base = b, p1 = b + 1, p2 = b + 2;
    }
    char cfg[256], text[256];
    snprintf(text, sizeof text, "metrics:\n  listen: 127.0.0.1:%d\n", base);
    jrt_write(&R, "w.yaml", text, cfg, sizeof cfg);
    const char *url[] = {"--redis", R.url, NULL};
    setenv("JOBRUNNER_METRICS_PORT_OFFSET", "1", 1);
    pid_t w1 = jrt_worker(&R, cfg, NULL, wlog, url);
    setenv("JOBRUNNER_METRICS_PORT_OFFSET", "2", 1);
    pid_t w2 = jrt_worker(&R, cfg, NULL, wlog, url);
    unsetenv("JOBRUNNER_METRICS_PORT_OFFSET");
    cr_expect_gt(wait_http(p1, "/healthz", 10000), 0, "instance 1 on %d", p1);
    cr_expect_gt(wait_http(p2, "/healthz", 10000), 0, "instance 2 on %d", p2);
    cr_expect_eq(scrape(p1, "jobrunner_up"), 1);
    cr_expect_eq(scrape(p2, "jobrunner_up"), 1);
    cr_expect_eq(jrt_stop(w1, SIGTERM, 10000), 0, "instance 1 ran (no port clash)");
    cr_expect_eq(jrt_stop(w2, SIGTERM, 10000), 0, "instance 2 ran (no port clash)");
    char *log = jrt_slurp(wlog);
    cr_expect(log && !strstr(log, "cannot start"), "%s", log ? log : "");
    free(log);
}

/* ---- process titles ----------------------------------------------------- */

/* /proc/PID/<file> up to its first NUL (cmdline: the title; comm: the name,
 * without its newline) into out. */
static void proc_read(pid_t pid, const char *file, char *out, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    FILE *f = fopen(path, "r");
    out[0] = '\0';
    if (!f) return;
    size_t n = fread(out, 1, len - 1, f);
    fclose(f);
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
}

/* The first process whose parent is ppid (from /proc/PID/stat), or -1. */
static pid_t child_of(pid_t ppid) {
    DIR *d = opendir("/proc");
    cr_assert(d);
    pid_t found = -1;
    for (struct dirent *e; found < 0 && (e = readdir(d));) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char stat[512];
        proc_read((pid_t)atoi(e->d_name), "stat", stat, sizeof stat);
        const char *rp = strrchr(stat, ')'); /* after the name, which may hold spaces */
        int pp;
        if (rp && sscanf(rp + 1, " %*c %d", &pp) == 1 && pp == ppid) found = (pid_t)atoi(e->d_name);
    }
    closedir(d);
    return found;
}

static int title_is(pid_t pid, const char *want) {
    char t[512];
    proc_read(pid, "cmdline", t, sizeof t);
    return !strcmp(t, want);
}

/* ps tells a worker (its queues, how many of its runners are busy), its
 * runners (whose worker) and a scheduler apart: /proc/PID/cmdline (ps -o
 * args) and /proc/PID/comm (ps -o comm, top). */
Test(metrics, process_titles_tell_worker_runner_and_scheduler_apart) {
    char cfg[256];
    jrt_write(&R, "w.yaml", "worker:\n  concurrency: 2\n  queues: [tq1, tq2]\n", cfg, sizeof cfg);
    const char *url[] = {"--redis", R.url, NULL};
    pid_t w = jrt_worker(&R, cfg, NULL, wlog, url), s = jrt_scheduler(&R, NULL, NULL);
    char want[128], got[512];
    int ok = 0;
    for (int t = 0; t < 100 && !ok; t++, jrt_sleep_ms(100))
        ok = title_is(w, "jobrunner: worker tq1,tq2 (0 of 2 busy)");
    proc_read(w, "cmdline", got, sizeof got);
    cr_expect(ok, "the worker's title: \"%s\"", got);
    proc_read(w, "comm", got, sizeof got);
    cr_expect_str_eq(got, "jobrunner-work");

    jr_enqueue_t nap = jrt_job("tq2", "nap", "3000");
    jrt_enqueue(&R, nap, 1, NULL);
    ok = 0;
    for (int t = 0; t < 100 && !ok; t++, jrt_sleep_ms(100)) ok = title_is(w, "jobrunner: worker tq1,tq2 (1 of 2 busy)");
    proc_read(w, "cmdline", got, sizeof got);
    cr_expect(ok, "the worker's title while a job runs: \"%s\"", got);

    pid_t r = child_of(w);
    cr_assert_gt(r, 0, "the worker has runner processes");
    snprintf(want, sizeof want, "jobrunner: runner of worker %d", (int)w);
    proc_read(r, "cmdline", got, sizeof got);
    cr_expect_str_eq(got, want);
    proc_read(r, "comm", got, sizeof got);
    cr_expect_str_eq(got, "jobrunner-run");

    ok = 0;
    for (int t = 0; t < 100 && !ok; t++, jrt_sleep_ms(100))
        ok = title_is(s, "jobrunner: scheduler (every registered queue)");
    proc_read(s, "cmdline", got, sizeof got);
    cr_expect(ok, "the scheduler's title: \"%s\"", got);
    proc_read(s, "comm", got, sizeof got);
    cr_expect_str_eq(got, "jobrunner-sched");
    /* the environment survived the move: the worker still found Redis and runs */
    cr_expect_eq(jrt_stop(w, SIGTERM, 15000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 10000), 0);
}

/* A job acknowledged with its follow-up jobs (jr_ack_follow) is in the
 * history too. */
Test(metrics, history_counts_jobs_acknowledged_with_follow_ups) {
    enum { N = 3 };
    pid_t w = jrt_worker(&R, NULL, JRT_FOLLOW_PLUGIN, wlog, NULL);
    jr_enqueue_t job = jrt_job("default", "follow", "n=1");
    jrt_enqueue(&R, job, N, NULL);
    jr_qstats_t s = {0};
    for (int t = 0; t < 200 && s.processed < N; t++, jrt_sleep_ms(100)) s = jrt_stats(&R, "default");
    cr_assert_eq(s.processed, N, "the follow jobs ran: %lld", s.processed);
    jrt_stop(w, SIGTERM, 10000);
    jr_redis_t *r = jrt_jr_connect(&R);
    long long p, f;
    history_sums(r, "default", 60, &p, &f);
    cr_expect(p == N && f == 0, "acknowledged with follow-ups, in the history: %lld processed, %lld failed", p, f);
    jr_redis_free(r);
}
