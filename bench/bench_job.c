/* bench: the benchmark job, the same body as every peer's (see
 * bench/peers/bench_common.py job_body and bench/peers/common.js).
 *
 * Payload: "<t> <pad>", t = CLOCK_MONOTONIC ms (3 decimals), 0 for bulk jobs.
 *   if t > 0:            RPUSH bench:lat (start - t)      (ms, 3 decimals)
 *                        INCR bench:done -> n
 *   with BENCH_CHECK=1:  HINCRBY bench:seen <job id> 1    (exactly-once check)
 *   if n == 1:           SET bench:t_first <now>
 *   if n == BENCH_N:     SET bench:t_last <now>
 * RPUSH, INCR and HINCRBY go out as one pipeline: one round trip per job
 * (plus one for the first and the N-th).
 *
 * The signal connection is the plugin's own, opened lazily once per process
 * (reopened after a fork or an error) to the unix socket $BENCH_SOCKET if
 * set, else 127.0.0.1:$BENCH_PORT (default 6390).
 *
 * A second handler, `noop`, does nothing at all: it measures jobrunner's own
 * cost per job (bench/run.sh waits for the queue to be empty instead). */
#include <hiredis/hiredis.h>
#include <jobrunner/plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static redisContext *conn;
static pid_t conn_pid;
static long long target = -1; /* BENCH_N */
static int check;             /* BENCH_CHECK */

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static void drop_conn(void) {
    /* A context inherited across fork() belongs to the parent: forget it
     * without closing the parent's socket state from here. */
    if (conn && conn_pid == getpid()) redisFree(conn);
    conn = NULL;
}

static redisContext *get_conn(const jr_job_t *job, const jr_host_api_t *api) {
    if (conn && conn_pid == getpid() && !conn->err) return conn;
    drop_conn();
    if (target < 0) {
        const char *n = getenv("BENCH_N");
        target = n ? atoll(n) : 0;
        const char *c = getenv("BENCH_CHECK");
        check = c && c[0] == '1';
    }
    struct timeval tv = {5, 0};
    const char *sock = getenv("BENCH_SOCKET");
    if (sock && sock[0]) {
        conn = redisConnectUnixWithTimeout(sock, tv);
    } else {
        const char *p = getenv("BENCH_PORT");
        conn = redisConnectWithTimeout("127.0.0.1", p ? atoi(p) : 6390, tv);
    }
    if (!conn || conn->err) {
        api->log(job, JR_LOG_ERROR, "bench: cannot connect to the signal Redis: %s",
                 conn ? conn->errstr : "out of memory");
        if (conn) redisFree(conn);
        conn = NULL;
        return NULL;
    }
    redisSetTimeout(conn, tv);
    conn_pid = getpid();
    return conn;
}

/* Read one reply; returns it (caller frees) or NULL after logging. */
static redisReply *reply(redisContext *c, const jr_job_t *job, const jr_host_api_t *api) {
    void *r = NULL;
    if (redisGetReply(c, &r) != REDIS_OK || !r) {
        api->log(job, JR_LOG_ERROR, "bench: Redis: %s", c->errstr);
        return NULL;
    }
    redisReply *rep = r;
    if (rep->type == REDIS_REPLY_ERROR) {
        api->log(job, JR_LOG_ERROR, "bench: Redis error reply: %s", rep->str);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

static jr_result_t bench(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    double start = mono_ms();
    size_t len;
    const char *p = api->job_payload(job, &len); /* NUL-terminated */
    double t = len ? strtod(p, NULL) : 0.0;
    redisContext *c = get_conn(job, api);
    if (!c) {
        api->set_error(job, "bench: no signal connection");
        return JR_RESULT_RETRY;
    }
    int sent = 0;
    if (t > 0) {
        char lat[48];
        snprintf(lat, sizeof lat, "%.3f", start - t);
        redisAppendCommand(c, "RPUSH bench:lat %s", lat);
        sent++;
    }
    redisAppendCommand(c, "INCR bench:done");
    if (check) redisAppendCommand(c, "HINCRBY bench:seen %s 1", api->job_id(job));
    long long n = -1;
    int ok = 1;
    for (int i = 0; i < sent + 1 + check; i++) {
        redisReply *rep = reply(c, job, api);
        if (!rep) {
            ok = 0;
            if (c->err) break; /* transport error: the rest will not come */
            continue;
        }
        if (i == sent && rep->type == REDIS_REPLY_INTEGER) n = rep->integer;
        freeReplyObject(rep);
    }
    if (ok && (n == 1 || (target > 0 && n == target))) {
        char now[48];
        snprintf(now, sizeof now, "%.3f", mono_ms());
        redisReply *rep = redisCommand(c, "SET %s %s", n == 1 ? "bench:t_first" : "bench:t_last", now);
        if (rep) freeReplyObject(rep);
        else ok = 0;
        if (ok && n == 1 && n == target) { /* BENCH_N == 1 */
            rep = redisCommand(c, "SET bench:t_last %s", now);
            if (rep) freeReplyObject(rep);
        }
    }
    if (c->err) drop_conn();
    if (!ok) {
        api->set_error(job, "bench: signal to Redis failed");
        return JR_RESULT_RETRY;
    }
    return JR_RESULT_OK;
}

static jr_result_t noop(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)job, (void)api, (void)udata;
    return JR_RESULT_OK;
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "bench", bench, NULL) != 0 ||
           api->register_handler(ctx, "noop", noop, NULL) != 0;
}

static void fini(void) { drop_conn(); }

static const jr_plugin_t desc = {
    JR_PLUGIN_HEADER, .name = "bench", .version = "1.0", .init = init, .fini = fini};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
