/* Issue 21 (Redis Cluster), revision 18: every key a library function
 * reaches is one of the KEYS of its call, but for the time-wheel buckets
 * jr:{Q}:wheel:<start> of the call's queue (docs/redis-contract.md, *Keys
 * a call reaches*). Redis Cluster only promises a function the keys it
 * declares; an undeclared key works today only because it has the same
 * hash tag.
 *
 * How it is checked, without trusting the library's own account: a real
 * Redis, a MONITOR connection opened before anything runs, and a
 * realistic workload through the real jobrunner (CLI, C API, a scheduler
 * and workers): jobs ready now (alone, in bulk, with ids), delayed near
 * and far (the wheel), retried, failed to the dead stream, dead-retried,
 * cancelled waiting and running, shown, run now, deleted, listed, follow-
 * ups, a cron schedule set, fired, listed and removed, pause and resume,
 * heartbeats, a worker killed and its job reclaimed, a hand-back, a dead
 * process forgotten. MONITOR prints each FCALL and then, as "[0 lua]"
 * lines, every command the function ran, in order. For every FCALL and
 * FCALL_RO seen, each key of each inner command (by the command's key
 * positions; an inner command this test does not know fails it, so a new
 * one cannot slip through unchecked) must be a declared key of that call,
 * or a wheel bucket of the queue of its first key; and the declared keys
 * must share one hash tag (the Cluster rule for one call). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"
#include "redis_worker.h"

JRT_RECORDED_SUITE(keys, .timeout = 180);

#define Q "kq"

/* ---- MONITOR lines ------------------------------------------------------ */

typedef struct {
    char src[64];  /* what is between [ and ]: "0 lua", "0 unix:/..." */
    char **argv;   /* the quoted words, unescaped (may hold NUL bytes: len) */
    size_t *len;
    size_t argc;
} mline_t;

static void mline_free(mline_t *m) {
    for (size_t i = 0; i < m->argc; i++) free(m->argv[i]);
    free(m->argv), free(m->len);
    memset(m, 0, sizeof *m);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parse one MONITOR line: `<time> [<src>] "word" "word" ...` (the words as
 * Redis quotes them: sdscatrepr escapes \" \\ \n \r \t \a \b and \xHH).
 * Returns 0, or -1 for a line of another shape. */
static int mline_parse(const char *s, size_t n, mline_t *m) {
    memset(m, 0, sizeof *m);
    const char *end = s + n, *lb = memchr(s, '[', n);
    if (!lb) return -1;
    const char *rb = memchr(lb, ']', (size_t)(end - lb));
    if (!rb || rb - lb - 1 >= (long)sizeof m->src) return -1;
    memcpy(m->src, lb + 1, (size_t)(rb - lb - 1));
    m->src[rb - lb - 1] = '\0';
    size_t cap = 16;
    m->argv = malloc(cap * sizeof *m->argv), m->len = malloc(cap * sizeof *m->len);
    cr_assert(m->argv && m->len);
    const char *p = rb + 1;
    while (p < end) {
        while (p < end && *p == ' ') p++;
        if (p >= end) break;
        if (*p != '"') return -1;
        p++;
        char *w = malloc((size_t)(end - p) + 1);
        cr_assert(w);
        size_t k = 0;
        while (p < end && *p != '"') {
            if (*p == '\\' && p + 1 < end) {
                char e = p[1];
                if (e == 'x' && p + 3 < end && hexval(p[2]) >= 0 && hexval(p[3]) >= 0) {
                    w[k++] = (char)(hexval(p[2]) * 16 + hexval(p[3]));
                    p += 4;
                    continue;
                }
                w[k++] = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e == 'a' ? '\a' : e == 'b' ? '\b' : e;
                p += 2;
                continue;
            }
            w[k++] = *p++;
        }
        if (p >= end) {
            free(w);
            return -1;
        }
        p++; /* the closing quote */
        w[k] = '\0';
        if (m->argc == cap) {
            cap *= 2;
            m->argv = realloc(m->argv, cap * sizeof *m->argv), m->len = realloc(m->len, cap * sizeof *m->len);
            cr_assert(m->argv && m->len);
        }
        m->argv[m->argc] = w, m->len[m->argc++] = k;
    }
    return m->argc ? 0 : -1;
}

/* The hash tag of a key as Redis Cluster takes it: the bytes between the
 * first '{' and the next '}' if not empty, else the whole key. */
static void hash_tag(const char *k, size_t n, const char **tag, size_t *tn) {
    const char *o = memchr(k, '{', n);
    if (o) {
        const char *c = memchr(o + 1, '}', (size_t)(k + n - o - 1));
        if (c && c > o + 1) {
            *tag = o + 1, *tn = (size_t)(c - o - 1);
            return;
        }
    }
    *tag = k, *tn = n;
}

/* The key positions of an inner command (argv[0] its name, any case):
 * keys are argv[first..last] (last -1: to the end), none when first is 0.
 * Returns 0, or -1 for a command this test does not know. */
static int key_span(const mline_t *m, size_t *first, long *last) {
    static const char *const one[] = {
        "XADD", "XACK", "XDEL", "XRANGE", "XREVRANGE", "XPENDING", "XCLAIM", "XAUTOCLAIM", "XTRIM", "XLEN",
        "XSETID", "ZADD", "ZRANGE", "ZREM", "ZREMRANGEBYRANK", "ZREMRANGEBYSCORE", "ZCARD", "ZCOUNT", "ZSCORE",
        "ZRANGEBYSCORE", "ZREVRANGE", "HSET", "HSETNX", "HGET", "HMGET", "HDEL", "HINCRBY", "HEXISTS", "HGETALL",
        "HLEN", "HKEYS", "GET", "SET", "INCR", "INCRBY", "DECR", "DECRBY", "TYPE", "LPOP", "RPOP", "RPUSH", "LPUSH",
        "LLEN", "LSET", "LINDEX", "LRANGE", "LREM", "LTRIM", "SADD", "SREM", "SMEMBERS", "SISMEMBER", "SCARD",
        "PEXPIRE", "EXPIRE", "PTTL", "TTL", "PERSIST"};
    const char *c = m->argv[0];
    *first = 0, *last = 0;
    if (!strcasecmp(c, "TIME")) return 0;
    if (!strcasecmp(c, "DEL") || !strcasecmp(c, "EXISTS") || !strcasecmp(c, "UNLINK")) {
        *first = 1, *last = -1;
        return 0;
    }
    if (!strcasecmp(c, "XINFO") || !strcasecmp(c, "XGROUP")) { /* XINFO STREAM|GROUPS|CONSUMERS key, XGROUP CREATE|... key */
        if (m->argc < 3) return -1;
        *first = 2, *last = 2;
        return 0;
    }
    for (size_t i = 0; i < sizeof one / sizeof *one; i++)
        if (!strcasecmp(c, one[i])) {
            *first = 1, *last = 1;
            return 0;
        }
    return -1;
}

/* A wheel bucket jr:{<tag>}:wheel:<digits> of the queue whose tag is given. */
static int is_bucket(const char *k, size_t n, const char *tag, size_t tn) {
    char pre[200];
    int pn = snprintf(pre, sizeof pre, "jr:{%.*s}:wheel:", (int)tn, tag);
    if (pn < 0 || (size_t)pn >= sizeof pre || n <= (size_t)pn || memcmp(k, pre, (size_t)pn)) return 0;
    for (size_t i = (size_t)pn; i < n; i++)
        if (k[i] < '0' || k[i] > '9') return 0;
    return 1;
}

/* What the check found. */
typedef struct {
    char bad[4096]; /* the first violations, one a line */
    size_t nbad, fcalls, inner, buckets;
    char seen[2048]; /* " fn fn ... " of the functions called */
} verdict_t;

static void violation(verdict_t *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(verdict_t *v, const char *fmt, ...) {
    v->nbad++;
    size_t used = strlen(v->bad);
    if (used + 2 >= sizeof v->bad || v->nbad > 12) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->bad + used, sizeof v->bad - used - 1, fmt, ap);
    va_end(ap);
    used = strlen(v->bad);
    if (used + 1 < sizeof v->bad) v->bad[used] = '\n', v->bad[used + 1] = '\0';
}

static void saw(verdict_t *v, const char *fn) {
    char w[80];
    snprintf(w, sizeof w, " %.70s ", fn);
    if (!v->seen[0]) strcpy(v->seen, " ");
    if (!strstr(v->seen, w) && strlen(v->seen) + strlen(w) < sizeof v->seen) strcat(v->seen, w + 1);
}

/* Read MONITOR replies from mon until the line of `ECHO <marker>`, checking
 * every FCALL against the commands it ran. */
static void check_monitor(redisContext *mon, const char *marker, verdict_t *v) {
    memset(v, 0, sizeof *v);
    mline_t call = {0}; /* the current FCALL (argc 0: none, or an EVAL or other caller of lua lines) */
    int in_fcall = 0;
    for (;;) {
        redisReply *rep = NULL;
        cr_assert(redisGetReply(mon, (void **)&rep) == REDIS_OK && rep, "MONITOR connection: %s", mon->errstr);
        cr_assert(rep->type == REDIS_REPLY_STATUS, "MONITOR sent a reply of type %d", rep->type);
        mline_t m;
        if (mline_parse(rep->str, rep->len, &m)) {
            violation(v, "unparsed MONITOR line: %.200s", rep->str);
            freeReplyObject(rep);
            continue;
        }
        freeReplyObject(rep);
        size_t sl = strlen(m.src);
        if (sl < 4 || strcmp(m.src + sl - 4, " lua") != 0) { /* a client's own command ("<db> lua": a script's) */
            int end = !strcasecmp(m.argv[0], "ECHO") && m.argc == 2 && !strcmp(m.argv[1], marker);
            mline_free(&call);
            in_fcall = 0;
            if (end) {
                mline_free(&m);
                return;
            }
            if ((!strcasecmp(m.argv[0], "FCALL") || !strcasecmp(m.argv[0], "FCALL_RO")) && m.argc >= 3) {
                long nk = strtol(m.argv[2], NULL, 10);
                if (nk < 0 || (size_t)nk + 3 > m.argc) {
                    violation(v, "%s %s: numkeys %s but %zu words", m.argv[0], m.argv[1], m.argv[2], m.argc);
                } else {
                    call = m;
                    in_fcall = 1;
                    v->fcalls++;
                    saw(v, m.argv[1]);
                    /* one hash tag for all declared keys */
                    for (long i = 1; i < nk; i++) {
                        const char *t0, *ti;
                        size_t n0, ni;
                        hash_tag(m.argv[3], m.len[3], &t0, &n0);
                        hash_tag(m.argv[3 + i], m.len[3 + i], &ti, &ni);
                        if (n0 != ni || memcmp(t0, ti, n0))
                            violation(v, "%s: key %ld %.100s has another hash tag than key 1 %.100s", m.argv[1],
                                      i + 1, m.argv[3 + i], m.argv[3]);
                    }
                    continue; /* m is kept as call */
                }
            }
            mline_free(&m);
            continue;
        }
        if (!in_fcall) { /* the commands of an EVAL (none in this test) or of a load: not a function's */
            mline_free(&m);
            continue;
        }
        v->inner++;
        size_t first;
        long last;
        if (key_span(&m, &first, &last)) {
            violation(v, "%s ran %s, a command this test does not know the keys of: add it to key_span",
                      call.argv[1], m.argv[0]);
        } else if (first) {
            size_t stop = last < 0 ? m.argc - 1 : (size_t)last;
            long nk = strtol(call.argv[2], NULL, 10);
            const char *tag = "";
            size_t tn = 0;
            if (nk > 0) hash_tag(call.argv[3], call.len[3], &tag, &tn);
            for (size_t i = first; i <= stop && i < m.argc; i++) {
                int ok = 0;
                for (long j = 0; j < nk && !ok; j++)
                    ok = m.len[i] == call.len[3 + j] && !memcmp(m.argv[i], call.argv[3 + j], m.len[i]);
                if (!ok && nk > 0 && is_bucket(m.argv[i], m.len[i], tag, tn)) {
                    ok = 1;
                    v->buckets++;
                }
                if (!ok)
                    violation(v, "%s (%ld keys: %.60s ...) ran %s on %.100s, not one of its KEYS", call.argv[1], nk,
                              nk > 0 ? call.argv[3] : "", m.argv[0], m.argv[i]);
            }
        }
        mline_free(&m);
    }
}

/* ---- the workload -------------------------------------------------------- */

/* Run `jobrunner WORDS -c cfgpath ARGS` (words: 2 for job, dead and cron,
 * else 1); fail the test unless it exits `want`. */
static void cli(int want, char *out, size_t len, const char *const *args) {
    char buf[16384], err[4096];
    const char *argv[40];
    size_t words = !strcmp(args[0], "job") || !strcmp(args[0], "dead") || !strcmp(args[0], "cron") ? 2 : 1, n = 0, k = 0;
    while (k < words && args[k]) argv[n++] = args[k++];
    argv[n++] = "-c", argv[n++] = cfgpath;
    while (args[k] && n < 39) argv[n++] = args[k++];
    argv[n] = NULL;
    int st = jrt_run(out ? out : buf, out ? len : sizeof buf, err, sizeof err, argv);
    cr_assert_eq(st, want, "jobrunner %s %s: exit %d: %s", args[0], args[1] ? args[1] : "", st, err);
}
#define CLI(want, ...)                                   \
    do {                                                 \
        const char *a_[] = {__VA_ARGS__, NULL};          \
        cli(want, NULL, 0, a_);                          \
    } while (0)

/* Wait up to ms for `needle` in the record file n times. */
static int wait_record(const char *needle, int n, int ms) {
    for (int t = 0; t < ms; t += 50) {
        if (jrt_count(record, needle) >= n) return 1;
        jrt_sleep_ms(50);
    }
    return jrt_count(record, needle) >= n;
}

static long long dead_count(void) { return jrt_stats(&R, Q).dead; }

Test(keys, every_key_a_function_reaches_is_declared_in_its_call) {
    char blockf[256];
    snprintf(blockf, sizeof blockf, "%s/block", R.dir);
    setenv("JRT_BLOCK", blockf, 1);
    FILE *bf = fopen(blockf, "w");
    cr_assert(bf);
    fclose(bf);

    redisContext *mon = jrt_connect(&R);
    struct timeval tv = {60, 0};
    redisSetTimeout(mon, tv);
    redisReply *ok = redisCommand(mon, "MONITOR");
    cr_assert(ok && ok->type == REDIS_REPLY_STATUS, "MONITOR refused");
    freeReplyObject(ok);

    jrt_config(&R, "worker:\n  lease: 1s\n  concurrency: 2\n", cfgpath, sizeof cfgpath);
    pid_t sched = jrt_scheduler(&R, cfgpath, jrt_path(&R, "sched.log")); /* no -q: jr_queues */
    const char *wargs[] = {"-q", Q, NULL};
    pid_t w1 = jrt_worker(&R, cfgpath, JRT_FOLLOW_PLUGIN, wlog, wargs);

    /* ready now: one, a bulk of three (jr_ready_prepare + XADD), one with an id */
    CLI(0, "enqueue", "-q", Q, "record", "one");
    jr_enqueue_t job = jrt_job(Q, "record", "bulk");
    jrt_enqueue(&R, job, 3, NULL);
    CLI(0, "enqueue", "-q", Q, "--id", "r-1", "record", "with-id");
    /* delayed near (sorted set) and far (wheel), with and without ids */
    CLI(0, "enqueue", "-q", Q, "--in", "1s", "--id", "near-1", "record", "near");
    CLI(0, "enqueue", "-q", Q, "--in", "1s", "record", "near-anon");
    CLI(0, "enqueue", "-q", Q, "--in", "4s", "--id", "far-1", "record", "far");
    CLI(0, "enqueue", "-q", Q, "--in", "4s", "record", "far-anon");
    /* waiting far away: shown, listed, run now, cancelled, deleted */
    CLI(0, "enqueue", "-q", Q, "--in", "1h", "--id", "later-1", "record", "later");
    CLI(0, "enqueue", "-q", Q, "--in", "1h", "--id", "can-1", "record", "cancel-me");
    CLI(0, "enqueue", "-q", Q, "--in", "1h", "--id", "del-1", "record", "delete-me");
    CLI(0, "enqueue", "-q", Q, "--in", "1h", "--id", "keep-1", "record", "stays");
    CLI(0, "job", "show", "-q", Q, "later-1");
    CLI(0, "jobs", "-q", Q, "--state", "delayed");
    CLI(0, "job", "run-now", "-q", Q, "later-1");
    CLI(0, "cancel", "-q", Q, "can-1");
    CLI(0, "job", "delete", "-q", Q, "del-1");
    CLI(0, "stats");
    /* the documented producer call, in the form that declares every key */
    {
        redisContext *c = jrt_connect(&R);
        redisReply *e = jrt_cmd(c, "FCALL", "jr_enqueue", "8", "jr:{" Q "}:ready", "jr:{" Q "}:delayed",
                                "jr:{" Q "}:wake", "jr:{" Q "}:seq", "jr:{" Q "}:ids", "jr:{" Q "}:wheel",
                                "jr:{" Q "}:wheel:n", "jr:{" Q "}:uniq:hand-1", "+3000", "hand-1", "86400000", "h",
                                "record", "p", "by-hand", NULL);
        cr_expect(e->type == REDIS_REPLY_ARRAY, "jr_enqueue with every key declared: %s",
                  e->type == REDIS_REPLY_ERROR ? e->str : "not an array");
        freeReplyObject(e);
        redisFree(c);
    }
    /* follow-ups into the job's own queue; a retry; a failure to the dead stream */
    CLI(0, "enqueue", "-q", Q, "follow", "n=2,q=,h=record");
    CLI(0, "enqueue", "-q", Q, "follow", "n=1,q=,h=record,id=fu,delay=2500");
    CLI(0, "enqueue", "-q", Q, "--backoff", "3s", "follow", "n=1,q=,h=record,result=retry1");
    CLI(0, "enqueue", "-q", Q, "--max-attempts", "1", "follow", "n=1,q=,result=fail");
    /* a cron schedule, fired by the scheduler */
    CLI(0, "cron", "add", "k1", "--every", "1s", "-q", Q, "record", "tick");

    cr_assert(wait_record("record one", 1, 20000), "the first job did not run");
    cr_assert(wait_record("record tick", 1, 20000), "the cron schedule did not fire");
    CLI(0, "cron", "list");
    CLI(0, "cron", "remove", "k1");
    for (int t = 0; t < 20000 && dead_count() < 1; t += 50) jrt_sleep_ms(50);
    cr_assert_geq(dead_count(), 1, "the failing job did not reach the dead stream");
    CLI(0, "dead", "retry", "-q", Q, "--all");
    CLI(0, "pause", Q);
    CLI(0, "resume", Q);
    /* a queue made and removed */
    CLI(0, "enqueue", "-q", "gone", "--in", "1h", "--id", "gone-1", "record", "x");
    CLI(0, "cancel", "-q", "gone", "gone-1");
    CLI(0, "queue", "remove", "gone");

    /* a running job: heartbeats, a cancel while it runs */
    char id[64] = "";
    {
        const char *a[] = {"enqueue", "-q", Q, "--id", "run-1", "follow", "n=0,q=,block=1", NULL};
        cli(0, id, sizeof id, a);
    }
    cr_assert(wait_record("run-1 1", 1, 20000), "the blocking job did not start");
    jrt_sleep_ms(800); /* heartbeats at lease/3 */
    CLI(0, "job", "show", "-q", Q, "run-1");
    CLI(0, "cancel", "-q", Q, "run-1");
    jrt_sleep_ms(500);
    /* a worker killed while it runs a job: another one reclaims it */
    CLI(0, "enqueue", "-q", Q, "--id", "run-2", "follow", "n=1,q=,h=record,block=1");
    cr_assert(wait_record("run-2 1", 1, 20000), "the second blocking job did not start");
    jrt_stop(w1, SIGKILL, 5000);
    unlink(blockf);
    pid_t w2 = jrt_worker(&R, cfgpath, JRT_FOLLOW_PLUGIN, wlog, wargs);
    cr_assert(wait_record("run-2 1", 2, 20000), "the killed worker's job was not reclaimed and run again");
    cr_assert(wait_record("record far", 1, 20000), "the far job did not run");
    cr_expect(wait_record("record by-hand", 1, 20000), "the job enqueued by hand did not run");

    /* a hand-back through jobrunner's C API (entries not held: none moves), and a
     * dead process forgotten by `jobrunner workers` */
    {
        jr_redis_t *j = jrt_jr_connect(&R);
        const char *ids[] = {"1-1"};
        long long n = -1;
        cr_assert(jr_redis_append_handback(j, Q, "nobody", ids, 1) == 0 && jr_redis_flush(j) == 0 &&
                  jr_redis_recv_int(j, &n) == 0, "jr_handback: %s", jr_redis_errstr(j));
        cr_expect_eq(n, 0);
        jr_redis_free(j);
        redisContext *c = jrt_connect(&R);
        freeReplyObject(jrt_cmd(c, "ZADD", "jr:{procs}", "1", "ghost-1", NULL));
        redisFree(c);
    }
    CLI(0, "workers");

    jrt_stop(w2, SIGTERM, 15000);
    jrt_stop(sched, SIGTERM, 15000);
    {
        redisContext *c = jrt_connect(&R);
        freeReplyObject(jrt_cmd(c, "ECHO", "keys-declared-end", NULL));
        redisFree(c);
    }
    verdict_t v;
    check_monitor(mon, "keys-declared-end", &v);
    redisFree(mon);
    cr_log_info("%zu function calls, %zu commands inside them (%zu keys of wheel buckets); functions:%s\n", v.fcalls,
                v.inner, v.buckets, v.seen);
    cr_expect_eq(v.nbad, 0, "%zu keys reached but not declared (or other faults), the first:\n%s", v.nbad, v.bad);
    static const char *const want[] = {
        "jr_register", "jr_queues", "jr_enqueue", "jr_enqueue_many", "jr_ready_prepare", "jr_promote", "jr_ack",
        "jr_ack_follow", "jr_fail", "jr_reclaim", "jr_heartbeat", "jr_handback", "jr_dead_retry", "jr_locate",
        "jr_cancel", "jr_run_now", "jr_delete", "jr_delayed_page", "jr_prune_consumers", "jr_procs_forget",
        "jr_cron_set", "jr_cron_del", "jr_cron_fired", "jr_cron_list", "jr_queue_remove"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char w[80];
        snprintf(w, sizeof w, " %s ", want[i]);
        cr_expect(strstr(v.seen, w) != NULL, "the workload never called %s (seen:%s)", want[i], v.seen);
    }
    cr_expect_gt(v.buckets, 0, "no wheel bucket was reached: the workload missed the time wheel");
}

/* ---- the older forms ------------------------------------------------------ */

#define OK(q) "jr:{" q "}:ready", "jr:{" q "}:delayed", "jr:{" q "}:wake", "jr:{" q "}:seq"

/* The entry id of the next entry of jr:{o}:ready read by consumer c1. */
static void read_one(redisContext *c, char *entry, size_t len) {
    redisReply *r = jrt_cmd(c, "XREADGROUP", "GROUP", "jr", "c1", "COUNT", "1", "STREAMS", "jr:{o}:ready", ">", NULL);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->element[1]->elements == 1,
              "XREADGROUP: no entry");
    snprintf(entry, len, "%s", r->element[0]->element[1]->element[0]->element[0]->str);
    freeReplyObject(r);
}

/* Producers in other languages and jobrunner processes of revision 17
 * (during a rolling upgrade, beside a Redis holding revision 18) send the
 * forms that leave out keys the call reaches: each is still taken, and
 * reaches them by name as before. */
Test(keys, the_key_forms_of_revision_17_still_work) {
    jr_redis_free(jrt_jr_connect(&R)); /* loads the library */
    redisContext *c = jrt_connect(&R);
    redisReply *r = jrt_cmd(c, "FCALL", "jr_enqueue", "5", OK("o"), "jr:{o}:uniq:o-1", "+5000", "o-1", "0", "h",
                            "echo", NULL);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->element[1]->integer == 1, "jr_enqueue, 5 keys: %s",
              r->type == REDIS_REPLY_ERROR ? r->str : "not [id, 1]");
    freeReplyObject(r);
    r = jrt_cmd(c, "FCALL", "jr_delayed_page", "1", "jr:{o}:delayed", "", "10", NULL);
    cr_expect(r->type == REDIS_REPLY_ARRAY && r->elements == 3, "jr_delayed_page, 1 key: the job in the wheel: %s",
              r->type == REDIS_REPLY_ERROR ? r->str : "another page");
    freeReplyObject(r);
    r = jrt_cmd(c, "FCALL", "jr_locate", "4", "jr:{o}:ready", "jr:{o}:delayed", "jr:{o}:ids", "jr:{o}:dead", "o-1",
                NULL);
    cr_expect(r->type == REDIS_REPLY_ARRAY && !strcmp(r->element[0]->str, "delayed"), "jr_locate, 4 keys");
    freeReplyObject(r);
    r = jrt_cmd(c, "FCALL", "jr_run_now", "3", "jr:{o}:ready", "jr:{o}:delayed", "jr:{o}:ids", "o-1", NULL);
    cr_expect(r->type == REDIS_REPLY_ARRAY && !strcmp(r->element[0]->str, "delayed"), "jr_run_now, 3 keys: %s",
              r->type == REDIS_REPLY_ERROR ? r->str : "another state");
    freeReplyObject(r);
    char e[64];
    read_one(c, e, sizeof e);
    r = jrt_cmd(c, "FCALL", "jr_heartbeat", "2", "jr:{o}:ready", "jr:{o}:cancelled", "c1", e, NULL);
    cr_expect(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->elements == 0,
              "jr_heartbeat, 2 keys: the entry is held");
    freeReplyObject(r);
    r = jrt_cmd(c, "FCALL", "jr_ack", "3", "jr:{o}:ready", "jr:{o}:ids", "jr:{o}:cancelled", e, "o-1", NULL);
    cr_expect(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1, "jr_ack, 3 keys: acknowledged");
    freeReplyObject(r);
    cr_expect_eq(jrt_int(c, "HEXISTS jr:{o}:ids o-1"), 0, "jr_ack, 3 keys: the index entry is gone");
    r = jrt_cmd(c, "HGET", "jr:{o}:stats", "processed", NULL);
    cr_expect(r->type == REDIS_REPLY_STRING && !strcmp(r->str, "1"), "jr_ack, 3 keys: counted in the stats");
    freeReplyObject(r);
    /* a follow-up with the 1 + 4 keys of revision 17 */
    freeReplyObject(jrt_cmd(c, "FCALL", "jr_enqueue", "4", OK("o"), "", "", "0", "h", "echo", NULL));
    read_one(c, e, sizeof e);
    r = jrt_cmd(c, "FCALL", "jr_ack_follow", "5", "jr:{o}:ready", OK("o"), e, "1", "0", "1", "", "", "1", "h", "next",
                NULL);
    cr_expect(r->type == REDIS_REPLY_INTEGER && r->integer == 1, "jr_ack_follow, 5 keys: %s",
              r->type == REDIS_REPLY_ERROR ? r->str : "not 1");
    freeReplyObject(r);
    cr_expect_eq(jrt_int(c, "XLEN jr:{o}:ready"), 1, "jr_ack_follow, 5 keys: the follow-up is the one entry");
    /* a process whose entry is gone, forgotten with the 1-key form */
    freeReplyObject(jrt_cmd(c, "ZADD", "jr:{procs}", "1", "ghost-2", NULL));
    cr_expect_eq(jrt_int(c, "FCALL jr_procs_forget 1 jr:{procs} ghost-2"), 1, "jr_procs_forget, 1 key");
    redisFree(c);
}
