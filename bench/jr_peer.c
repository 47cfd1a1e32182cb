/* jr_peer: the jobrunner producer of the peer benchmark (bench/peers/), the
 * counterpart of bullmq_peer.js, sidekiq_peer.rb, rq_peer.py, ... It enqueues
 * through the C API (jr_redis_enqueue, pipelined), the way the CLI does.
 *
 *   jr_peer bulk N                      N jobs "0 <pad>", BENCH_BATCH per
 *                                       jr_redis_enqueue call (pipelined in
 *                                       runs of BENCH_CHUNK jobs: since
 *                                       library revision 14 a jr_ready_prepare
 *                                       and one plain XADD per job)
 *   jr_peer warm N                      same as bulk (warm-up jobs)
 *   jr_peer paced N RATE                one job at a time at RATE/s on an absolute
 *                                       schedule; payload t = monotonic ms just
 *                                       before the enqueue call
 *   jr_peer delayed N SPREAD_MS DELAY_MS  N jobs spread evenly over SPREAD_MS,
 *                                       each with delay_ms = DELAY_MS; payload
 *                                       t = intended due = monotonic ms just
 *                                       before the call + DELAY_MS
 *   jr_peer bulkdelayed N DELAY_MS      N delayed jobs, as bulk
 *                                       (for the memory figure of delayed jobs)
 *   jr_peer clientbulk N DELAY_MS       N jobs as bulk (DELAY_MS 0 = ready),
 *                                       BENCH_BATCH per jr_client_enqueue_many
 *                                       call of the client library (client.c,
 *                                       in jrcore as in libjobrunner): the path
 *                                       that routes the jobs of a partitioned
 *                                       queue over its partitions (bulk and
 *                                       bulkdelayed write into the queue
 *                                       itself); bench/cluster.sh PARTITIONS=K
 *   jr_peer mono                        print CLOCK_MONOTONIC ms (for scripts)
 *   jr_peer waitkey get|llen KEY TARGET TIMEOUT_S
 *                                       poll GET KEY (or LLEN KEY) every 10 ms on one
 *                                       connection until >= TARGET; gives up after
 *                                       TIMEOUT_S, or 20 s without progress; prints
 *                                       the last value (exit 1 if short). A quiet
 *                                       waiter: no process per poll to steal CPU.
 *   jr_peer stallprobe SECONDS          PING every 1 ms on its own connection for
 *                                       SECONDS: how long Redis itself was unable
 *                                       to answer (max and total of the round
 *                                       trips over 2 ms) — the machine's share
 *                                       of a lateness figure measured meanwhile
 *   jr_peer waitempty TIMEOUT_S         poll the queue's counts (jobrunner stats)
 *                                       every 2 ms until ready, pending and delayed
 *                                       are all 0; print t_empty=<monotonic ms>
 *
 * Prints one line: enqueue_mode=... enqueue_s=... [achieved_rate=...]; the
 * time counts from after the connection is up and the library loaded.
 *
 * env: BENCH_URL (a jobrunner Redis URL), else BENCH_SOCKET (unix socket),
 *      else 127.0.0.1:BENCH_PORT (6390); BENCH_QUEUE (bench); BENCH_HANDLER
 *      (bench; bench/bench_job.c also has "noop"); BENCH_CHUNK: jobs per
 *      FCALL jr_enqueue_many (1000, JR_ENQUEUE_CHUNK); BENCH_BATCH: jobs per
 *      jr_redis_enqueue call (100000; 1000 before pipelining, when one call
 *      was one FCALL); BENCH_PAYLOAD_BYTES (pad the payload to this size; default:
 *      "<t> " + 44 characters, as the other peers); BENCH_TLS_CA_FILE: the CA
 *      of a rediss:// BENCH_URL. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include <jobrunner/client.h>

#include "jr.h"
#include "redis.h"
#include "redis_produce.h"
#include "redis_admin.h"

#define PAD_LEN 44
#define PAYLOAD_MAX 4096

static jr_redis_t *r;
static const char *queue = "bench";
static const char *handler = "bench";
static size_t payload_bytes; /* 0 = "<t> " + PAD_LEN */

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static void sleep_until_ms(double at) {
    struct timespec ts = {(time_t)(at / 1000.0), 0};
    ts.tv_nsec = (long)((at - (double)ts.tv_sec * 1000.0) * 1e6);
    if (ts.tv_nsec < 0) ts.tv_nsec = 0;
    if (ts.tv_nsec > 999999999) ts.tv_nsec = 999999999;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void die(const char *what) {
    fprintf(stderr, "jr_peer: %s: %s\n", what, r ? jr_redis_errstr(r) : "");
    exit(1);
}

/* Format the payload for time t into buf; returns its length. */
static size_t payload(char *buf, double t) {
    int n = t > 0 ? snprintf(buf, PAYLOAD_MAX, "%.3f ", t) : snprintf(buf, PAYLOAD_MAX, "0 ");
    size_t len = (size_t)n;
    size_t want = payload_bytes ? payload_bytes : len + PAD_LEN;
    if (want >= PAYLOAD_MAX) want = PAYLOAD_MAX - 1;
    while (len < want) buf[len++] = 'x';
    buf[len] = '\0';
    return len;
}

static void job_init(jr_enqueue_t *j, const char *p, size_t len) {
    memset(j, 0, sizeof *j);
    j->queue = queue;
    j->env.handler = handler;
    j->env.handler_len = strlen(handler);
    j->env.payload = p;
    j->env.payload_len = len;
    j->env.attempt = 1;
}

/* N jobs, `batch` per jr_redis_enqueue call; delay_ms 0 = run now. */
static void bulk(long n, int64_t delay_ms, size_t batch, size_t chunk) {
    jr_enqueue_t *jobs = calloc(batch, sizeof *jobs);
    char buf[PAYLOAD_MAX];
    size_t len = payload(buf, 0);
    if (!jobs) die("out of memory");
    for (size_t i = 0; i < batch; i++) {
        job_init(&jobs[i], buf, len);
        jobs[i].delay_ms = delay_ms;
    }
    double t0 = mono_ms();
    for (long done = 0; done < n;) {
        size_t k = (size_t)(n - done) < batch ? (size_t)(n - done) : batch;
        if (jr_redis_enqueue(r, jobs, k, NULL, NULL) != 0) die("enqueue");
        done += (long)k;
    }
    double s = (mono_ms() - t0) / 1000.0;
    printf("enqueue_mode=jr_redis_enqueue(pipeline,chunk=%zu,batch=%zu%s) enqueue_s=%.3f enqueue_jobs_per_s=%.0f\n",
           chunk, batch, delay_ms > 0 ? ",delayed" : "", s, (double)n / s);
    free(jobs);
}

/* clientbulk: N jobs through the client library (jr_client_enqueue_many,
 * `batch` per call), which spreads a partitioned queue's jobs over its
 * partitions; delay_ms 0 = ready. Uses its own connection (url); exits on
 * the first job not CREATED, naming it. */
static void clientbulk(const char *url, long n, int64_t delay_ms, size_t batch) {
    const char *at = getenv("BENCH_AT_MS"); /* all due at this Unix ms (a burst with the scheduler running) */
    int64_t at_ms = at && at[0] ? (int64_t)strtoll(at, NULL, 10) : 0;
    jr_client_options_t o = {.url = url, .connect_timeout_ms = 5000, .command_timeout_ms = 60000};
    jr_client_t *c = jr_client_open(&o);
    if (!c || jr_client_err(c)) {
        fprintf(stderr, "jr_peer: clientbulk: %s\n", c ? jr_client_errstr(c) : "out of memory");
        exit(1);
    }
    char buf[PAYLOAD_MAX];
    size_t len = payload(buf, 0);
    jr_client_job_t *jobs = calloc(batch, sizeof *jobs);
    jr_client_result_t *res = calloc(batch, sizeof *res);
    if (!jobs || !res) die("out of memory");
    for (size_t i = 0; i < batch; i++)
        jobs[i] = (jr_client_job_t){.queue = queue, .handler = handler, .payload = buf, .payload_len = len,
                                    .delay_ms = delay_ms, .at_ms = at_ms};
    double t0 = mono_ms();
    for (long done = 0; done < n;) {
        size_t k = (size_t)(n - done) < batch ? (size_t)(n - done) : batch;
        if (jr_client_enqueue_many(c, jobs, k, res) != 0) {
            fprintf(stderr, "jr_peer: clientbulk: %s\n", jr_client_errstr(c));
            exit(1);
        }
        for (size_t i = 0; i < k; i++)
            if (res[i].status != JR_CLIENT_JOB_CREATED) {
                fprintf(stderr, "jr_peer: clientbulk: job %zu of a call not created: %s\n", i,
                        res[i].error ? res[i].error : "(no reason)");
                exit(1);
            }
        done += (long)k;
    }
    double s = (mono_ms() - t0) / 1000.0;
    printf("enqueue_mode=jr_client_enqueue_many(batch=%zu%s) enqueue_s=%.3f enqueue_jobs_per_s=%.0f\n", batch,
           delay_ms > 0 || at_ms > 0 ? ",delayed" : "", s, (double)n / s);
    free(jobs);
    free(res);
    jr_client_free(c);
}

/* One at a time on an absolute schedule of `rate` per second. delay_ms > 0:
 * delayed jobs whose payload carries the intended due time. */
static void paced(long n, double rate, int64_t delay_ms) {
    char buf[PAYLOAD_MAX];
    jr_enqueue_t j;
    double t0 = mono_ms();
    for (long i = 0; i < n; i++) {
        sleep_until_ms(t0 + (double)i * 1000.0 / rate);
        double t = mono_ms();
        size_t len = payload(buf, t + (double)delay_ms);
        job_init(&j, buf, len);
        j.delay_ms = delay_ms;
        if (jr_redis_enqueue(r, &j, 1, NULL, NULL) != 0) die("enqueue");
    }
    double s = (mono_ms() - t0) / 1000.0;
    printf("enqueue_mode=single enqueue_s=%.3f achieved_rate=%.1f\n", s, (double)n / s);
}

static long arg_long(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0) {
        fprintf(stderr, "jr_peer: bad number \"%s\"\n", s);
        exit(2);
    }
    return v;
}

/* A plain hiredis connection to the bench Redis (BENCH_SOCKET or
 * BENCH_PORT), for the modes that send generic commands (jr_redis has
 * none); NULL after a message naming `who`. */
static redisContext *plain_connect(const char *who) {
    redisContext *c;
    const char *e;
    struct timeval tv = {5, 0};
    if ((e = getenv("BENCH_SOCKET")) && e[0])
        c = redisConnectUnixWithTimeout(e, tv);
    else
        c = redisConnectWithTimeout("127.0.0.1", (e = getenv("BENCH_PORT")) && e[0] ? atoi(e) : 6390, tv);
    if (!c || c->err) {
        fprintf(stderr, "jr_peer: %s: cannot connect: %s\n", who, c ? c->errstr : "oom");
        if (c) redisFree(c);
        return NULL;
    }
    return c;
}

/* stallprobe: see the top of the file. */
static int stallprobe(double seconds) {
    redisContext *c = plain_connect("stallprobe");
    if (!c) return 1;
    double t0 = mono_ms(), end = t0 + seconds * 1000.0, max = 0.0, stalled = 0.0;
    long pings = 0, stalls = 0;
    for (double now = t0; now < end; now = mono_ms()) {
        redisReply *rep = redisCommand(c, "PING");
        if (!rep) {
            fprintf(stderr, "jr_peer: stallprobe: %s\n", c->errstr);
            redisFree(c);
            return 1;
        }
        freeReplyObject(rep);
        double rtt = mono_ms() - now;
        pings++;
        if (rtt > max) max = rtt;
        if (rtt > 2.0) stalls++, stalled += rtt;
        sleep_until_ms(now + 1.0);
    }
    redisFree(c);
    printf("probe_pings=%ld probe_max_ms=%.2f probe_stalls_over_2ms=%ld probe_stalled_ms=%.1f\n", pings, max,
           stalls, stalled);
    return 0;
}

/* waitkey: see the top of the file. */
static int waitkey(const char *how, const char *key, long long target, double timeout_s) {
    redisContext *c = plain_connect("waitkey");
    if (!c) return 1;
    int llen = !strcmp(how, "llen");
    double t0 = mono_ms(), last_change = t0;
    long long v = 0, last = -1;
    for (;;) {
        redisReply *rep = redisCommand(c, llen ? "LLEN %s" : "GET %s", key);
        if (!rep) {
            fprintf(stderr, "jr_peer: waitkey: %s\n", c->errstr);
            return 1;
        }
        v = rep->type == REDIS_REPLY_INTEGER ? rep->integer
            : rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        freeReplyObject(rep);
        double now = mono_ms();
        if (v != last) last = v, last_change = now;
        if (v >= target || now - t0 > timeout_s * 1000.0 || now - last_change > 20000.0) break;
        sleep_until_ms(now + 10.0);
    }
    redisFree(c);
    printf("%lld\n", v);
    return v >= target ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "mono")) { /* for scripts: CLOCK_MONOTONIC ms */
        printf("%.3f\n", mono_ms());
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "stallprobe")) return stallprobe(strtod(argv[2], NULL));
    if (argc == 6 && !strcmp(argv[1], "waitkey"))
        return waitkey(argv[2], argv[3], atoll(argv[4]), strtod(argv[5], NULL));
    if (argc < 3) {
        fprintf(stderr, "usage: jr_peer bulk N | warm N | paced N RATE | delayed N SPREAD_MS DELAY_MS"
                        " | bulkdelayed N DELAY_MS | clientbulk N DELAY_MS | waitempty TIMEOUT_S | mono | stallprobe SECONDS"
                        " | waitkey get|llen KEY TARGET TIMEOUT_S\n");
        return 2;
    }
    const char *mode = argv[1];
    char url[1024];
    const char *e;
    if ((e = getenv("BENCH_URL")) && e[0])
        snprintf(url, sizeof url, "%s", e);
    else if ((e = getenv("BENCH_SOCKET")) && e[0])
        snprintf(url, sizeof url, "unix://%s", e);
    else
        snprintf(url, sizeof url, "redis://127.0.0.1:%s",
                 (e = getenv("BENCH_PORT")) && e[0] ? e : "6390");
    if ((e = getenv("BENCH_QUEUE")) && e[0]) queue = e;
    if ((e = getenv("BENCH_HANDLER")) && e[0]) handler = e;
    size_t chunk = (e = getenv("BENCH_CHUNK")) && e[0] ? (size_t)arg_long(e) : JR_ENQUEUE_CHUNK;
    if (chunk < 1) chunk = 1;
    jr_redis_set_enqueue_chunk(chunk);
    size_t batch = (e = getenv("BENCH_BATCH")) && e[0] ? (size_t)arg_long(e) : 100000;
    if (batch < 1) batch = 1;
    if ((e = getenv("BENCH_PAYLOAD_BYTES")) && e[0]) payload_bytes = (size_t)arg_long(e);

    char err[JR_ERRLEN];
    /* rediss:// (bench/tls.sh): the CA in BENCH_TLS_CA_FILE. */
    jr_redis_opts_t o = {.url = url, .timeout_ms = 5000, .tls.ca_file = getenv("BENCH_TLS_CA_FILE")};
    if (!(r = jr_redis_open(&o, err, sizeof err))) {
        fprintf(stderr, "jr_peer: %s\n", err);
        return 1;
    }
    if (jr_redis_load_library(r) != 0) die("FUNCTION LOAD");

    long n = arg_long(argv[2]);
    if (!strcmp(mode, "bulk") || !strcmp(mode, "warm")) {
        bulk(n, 0, batch, chunk);
    } else if (!strcmp(mode, "bulkdelayed") && argc >= 4) {
        bulk(n, arg_long(argv[3]), batch, chunk);
    } else if (!strcmp(mode, "clientbulk") && argc >= 4) {
        clientbulk(url, n, arg_long(argv[3]), batch);
    } else if (!strcmp(mode, "waitempty")) {
        double end = mono_ms() + (double)n * 1000.0;
        for (;;) {
            jr_qstats_t st;
            if (jr_redis_stats(r, queue, &st) != 0) die("stats");
            double now = mono_ms();
            if (st.ready == 0 && st.pending == 0 && st.delayed == 0) {
                printf("t_empty=%.3f\n", now);
                break;
            }
            if (now > end) {
                printf("t_empty=timeout ready=%lld pending=%lld delayed=%lld\n", st.ready, st.pending,
                       st.delayed);
                fflush(stdout);
                return 1;
            }
            sleep_until_ms(now + 2.0);
        }
    } else if (!strcmp(mode, "paced") && argc >= 4) {
        double rate = strtod(argv[3], NULL);
        if (rate <= 0) return 2;
        paced(n, rate, 0);
    } else if (!strcmp(mode, "delayed") && argc >= 5) {
        double spread = strtod(argv[3], NULL);
        int64_t delay = (int64_t)strtod(argv[4], NULL);
        if (spread <= 0 || delay <= 0) return 2;
        paced(n, (double)n * 1000.0 / spread, delay);
    } else {
        fprintf(stderr, "jr_peer: unknown mode or missing arguments: %s\n", mode);
        return 2;
    }
    fflush(stdout);
    jr_redis_free(r);
    return 0;
}
