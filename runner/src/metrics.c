/* Metrics and health over HTTP: see metrics.h. */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jr.h"
#include "log.h"
#include "redis.h"
#include "util.h"

/* The Function library built in (redis.c): build_info names its revision. */
extern const char jr_lua_library[];
extern const size_t jr_lua_library_len;

/* ---- address ------------------------------------------------------------ */

int jr_metrics_parse_addr(const char *addr, char *host, size_t hostlen, int *port, char *err,
                          size_t errlen) {
    const char *colon = strrchr(addr, ':'), *h = addr;
    size_t hl;
    if (!colon) {
        snprintf(err, errlen, "\"%s\" is not HOST:PORT (e.g. 127.0.0.1:9464)", addr);
        return JR_EINVAL;
    }
    hl = (size_t)(colon - addr);
    if (hl && addr[0] == '[') { /* [IPv6]:PORT */
        if (addr[hl - 1] != ']') {
            snprintf(err, errlen, "\"%s\": an IPv6 address goes in brackets, [::1]:9464", addr);
            return JR_EINVAL;
        }
        h++, hl -= 2;
    } else if (memchr(addr, ':', hl)) {
        snprintf(err, errlen, "\"%s\": an IPv6 address goes in brackets, [::1]:9464", addr);
        return JR_EINVAL;
    }
    if (hl >= hostlen) {
        snprintf(err, errlen, "\"%s\": host name too long", addr);
        return JR_EINVAL;
    }
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || p < 0 || p > 65535 || colon[1] == '-' || colon[1] == '+') {
        snprintf(err, errlen, "\"%s\": the port must be a number from 0 to 65535", addr);
        return JR_EINVAL;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

int jr_metrics_addr_offset(const char *addr, int64_t offset, char *out, size_t outlen, char *err,
                           size_t errlen) {
    char host[256];
    int port;
    if (jr_metrics_parse_addr(addr, host, sizeof host, &port, err, errlen)) return JR_EINVAL;
    if (port && offset && port + offset > 65535) {
        snprintf(err, errlen, "metrics.listen \"%s\" with metrics.port_offset %lld is port %lld, past 65535", addr,
                 (long long)offset, (long long)(port + offset));
        return JR_EINVAL;
    }
    int n = snprintf(out, outlen, strchr(host, ':') ? "[%s]:%lld" : "%s:%lld", host,
                     (long long)(port ? port + offset : 0));
    if (n < 0 || (size_t)n >= outlen) {
        snprintf(err, errlen, "metrics.listen \"%s\": too long", addr);
        return JR_EINVAL;
    }
    return 0;
}

/* ---- registry ------------------------------------------------------------ */

typedef struct series {
    char *labels[JR_MLABELS_MAX];
    double value;      /* counter, gauge; histogram: sum */
    uint64_t count;    /* histogram */
    uint64_t *buckets; /* histogram: per bound, not cumulative; [nbounds] = above the last */
} series_t;

typedef struct family {
    const jr_mfamily_t *def;
    series_t *v;
    size_t n, cap;
    size_t last; /* the series updated last: tried first (jobs come in runs) */
} family_t;

struct jr_mreg {
    family_t *f;
    size_t n;
};

jr_mreg_t *jr_mreg_new(const jr_mfamily_t *fams, size_t n) {
    jr_mreg_t *m = calloc(1, sizeof *m);
    if (!m || !(m->f = calloc(n ? n : 1, sizeof *m->f))) {
        free(m);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) m->f[i].def = &fams[i];
    m->n = n;
    return m;
}

void jr_mreg_free(jr_mreg_t *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) {
        for (size_t j = 0; j < m->f[i].n; j++) {
            for (size_t k = 0; k < JR_MLABELS_MAX; k++) free(m->f[i].v[j].labels[k]);
            free(m->f[i].v[j].buckets);
        }
        free(m->f[i].v);
    }
    free(m->f);
    free(m);
}

/* The series of f with these labels, created if new; NULL if out of memory. */
static series_t *find_series(family_t *f, const char *const *labels) {
    size_t nl = f->def->nlabels;
    for (size_t j = 0; j <= f->n; j++) {
        size_t i = j == 0 ? f->last : j - 1, k = 0;
        if (i >= f->n) continue;
        while (k < nl && !strcmp(f->v[i].labels[k], labels[k])) k++;
        if (k == nl) return &f->v[f->last = i];
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        series_t *v = realloc(f->v, cap * sizeof *v);
        if (!v) return NULL;
        f->v = v, f->cap = cap;
    }
    series_t s = {0};
    int bad = 0;
    for (size_t k = 0; k < nl; k++) bad |= !(s.labels[k] = strdup(labels[k]));
    if (f->def->type == JR_MT_HISTOGRAM) bad |= !(s.buckets = calloc(f->def->nbounds + 1, sizeof *s.buckets));
    if (bad) {
        for (size_t k = 0; k < nl; k++) free(s.labels[k]);
        free(s.buckets);
        return NULL;
    }
    f->v[f->n] = s;
    f->last = f->n;
    return &f->v[f->n++];
}

int jr_mreg_update(jr_mreg_t *m, size_t fam, const char *const *labels, double v) {
    if (!m || fam >= m->n) return JR_EINVAL;
    family_t *f = &m->f[fam];
    if (f->def->type == JR_MT_COUNTER && !(v >= 0)) return JR_EINVAL;
    series_t *s = find_series(f, labels);
    if (!s) return JR_ENOMEM;
    switch (f->def->type) {
    case JR_MT_COUNTER: s->value += v; break;
    case JR_MT_GAUGE: s->value = v; break;
    case JR_MT_HISTOGRAM: {
        size_t b = 0;
        while (b < f->def->nbounds && v > f->def->bounds[b]) b++;
        s->buckets[b]++, s->count++, s->value += v;
        break;
    }
    }
    return 0;
}

/* A growing text buffer; `bad` latches out of memory. */
typedef struct text {
    char *p;
    size_t n, cap;
    int bad;
} text_t;

static void put(text_t *t, const char *s, size_t n) {
    if (t->bad) return;
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->n + n + 1) cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->bad = 1;
            return;
        }
        t->p = p, t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = '\0';
}

static void puts_(text_t *t, const char *s) { put(t, s, strlen(s)); }

static void putf(text_t *t, const char *fmt, ...) {
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put(t, buf, n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* s escaped: backslash and newline always, the double quote in label
 * values (the exposition format's rules for HELP text and label values). */
static void put_escaped(text_t *t, const char *s, int quote) {
    for (; *s; s++) {
        if (*s == '\\') puts_(t, "\\\\");
        else if (*s == '\n') puts_(t, "\\n");
        else if (*s == '"' && quote) puts_(t, "\\\"");
        else put(t, s, 1);
    }
}

/* A sample value: integers without a fraction, others in the shortest of
 * 15 or 17 significant digits that reads back as the same double. */
static void put_value(text_t *t, double v) {
    char buf[40];
    if (v == (double)(long long)v && v > -1e15 && v < 1e15) {
        putf(t, "%lld", (long long)v);
        return;
    }
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    puts_(t, buf);
}

/* name{labels[,le="bound"]} value */
static void put_sample(text_t *t, const family_t *f, const series_t *s, const char *suffix,
                       const char *le, double v) {
    puts_(t, f->def->name);
    puts_(t, suffix);
    if (f->def->nlabels || le) {
        puts_(t, "{");
        for (size_t k = 0; k < f->def->nlabels; k++) {
            putf(t, "%s%s=\"", k ? "," : "", f->def->labels[k]);
            put_escaped(t, s->labels[k], 1);
            puts_(t, "\"");
        }
        if (le) putf(t, "%sle=\"%s\"", f->def->nlabels ? "," : "", le);
        puts_(t, "}");
    }
    puts_(t, " ");
    put_value(t, v);
    puts_(t, "\n");
}

char *jr_mreg_encode(const jr_mreg_t *m, size_t *len) {
    static const char *const types[] = {"counter", "gauge", "histogram"};
    text_t t = {0};
    puts_(&t, "");
    for (size_t i = 0; i < m->n; i++) {
        const family_t *f = &m->f[i];
        putf(&t, "# HELP %s ", f->def->name);
        put_escaped(&t, f->def->help, 0);
        putf(&t, "\n# TYPE %s %s\n", f->def->name, types[f->def->type]);
        for (size_t j = 0; j < f->n; j++) {
            const series_t *s = &f->v[j];
            if (f->def->type != JR_MT_HISTOGRAM) {
                put_sample(&t, f, s, "", NULL, s->value);
                continue;
            }
            uint64_t cum = 0;
            for (size_t b = 0; b <= f->def->nbounds; b++) {
                char le[32];
                if (b < f->def->nbounds) snprintf(le, sizeof le, "%g", f->def->bounds[b]);
                else snprintf(le, sizeof le, "+Inf");
                cum += s->buckets[b];
                put_sample(&t, f, s, "_bucket", le, (double)cum);
            }
            put_sample(&t, f, s, "_sum", NULL, s->value);
            put_sample(&t, f, s, "_count", NULL, (double)s->count);
        }
    }
    if (t.bad) {
        free(t.p);
        return NULL;
    }
    *len = t.n;
    return t.p;
}

/* ---- the process's metrics ------------------------------------------------ */

static const double duration_bounds[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                         1,     2.5,   5,    10,    30,   60,  300, 1800};
static const double batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
static const double lateness_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                         0.25,  0.5,    1,     2.5,  5,     10,   60};
#define NB(a) (sizeof a / sizeof a[0])

/* Both roles: connections the HTTP server refused or cut (see "the HTTP
 * server" below). */
#define HTTP_DROPPED_FAMILY                                                                               \
    {"jobrunner_http_connections_dropped_total",                                                          \
     "HTTP connections refused at accept (full: every slot taken; per_client: too many from one address) " \
     "or closed for not completing a request in time (slow).",                                            \
     JR_MT_COUNTER, 1, {"reason"}, NULL, 0}

/* Both roles: the process itself (jobrunner_up, jobrunner_build_info). */
#define UP_FAMILY \
    {"jobrunner_up", "1 while this process serves its metrics (absent or stale: the process is gone).", \
     JR_MT_GAUGE, 0, {0}, NULL, 0}
#define REDIS_UP_FAMILY                                                                                 \
    {"jobrunner_redis_up",                                                                              \
     "1 while Redis has answered this process within its health limit (block period + 1 s), as /healthz " \
     "says; 0 when not (Redis down, unreachable or stalled).",                                          \
     JR_MT_GAUGE, 0, {0}, NULL, 0}
#define BUILD_FAMILY                                                                                 \
    {"jobrunner_build_info", "Always 1; the labels say which jobrunner this is and what it runs as.", \
     JR_MT_GAUGE, 3, {"version", "role", "library_revision"}, NULL, 0}

enum { W_JOBS, W_DURATION, W_RUNNING, W_FETCH, W_RECONNECTS, W_HTTP, W_UP, W_BUILD, W_REDIS_UP, W_CAPACITY,
       W_DEFERRED };
static const jr_mfamily_t worker_fams[] = {
    {"jobrunner_jobs_total",
     "Attempts finished by this worker, by queue, handler and outcome: ok (the job succeeded), retried (this "
     "attempt failed and the job will run again, so one job can count several times), dead (to the dead-letter "
     "stream), cancelled, interrupted (stopped by shutdown, handed back), unrecorded (Redis refused the result).",
     JR_MT_COUNTER, 3, {"queue", "handler", "outcome"}, NULL, 0},
    {"jobrunner_job_duration_seconds", "Run time of finished jobs (every outcome), by queue and handler.",
     JR_MT_HISTOGRAM, 2, {"queue", "handler"}, duration_bounds, NB(duration_bounds)},
    {"jobrunner_jobs_running", "Jobs running in this worker's runners now.", JR_MT_GAUGE, 0, {0}, NULL, 0},
    {"jobrunner_fetch_batch_jobs", "Jobs per read from Redis (reads that brought any).", JR_MT_HISTOGRAM, 0, {0},
     batch_bounds, NB(batch_bounds)},
    {"jobrunner_redis_reconnects_total", "Redis connections lost or refused and made again.", JR_MT_COUNTER, 0,
     {0}, NULL, 0},
    HTTP_DROPPED_FAMILY,
    UP_FAMILY,
    BUILD_FAMILY,
    REDIS_UP_FAMILY,
    {"jobrunner_worker_capacity",
     "Jobs this worker can run at once (worker.concurrency); busy: jobrunner_jobs_running.", JR_MT_GAUGE, 0, {0},
     NULL, 0},
    {"jobrunner_jobs_deferred_total",
     "Jobs this worker fetched but has no handler for, put back for a worker that has it (worker.handler_wait); "
     "one job counts once per deferral.",
     JR_MT_COUNTER, 2, {"queue", "handler"}, NULL, 0},
};

enum { S_PROMOTED, S_LATENESS, S_DELAYED, S_READY, S_RECONNECTS, S_HTTP, S_UP, S_BUILD, S_REDIS_UP, S_PENDING, S_DEAD,
       S_PAUSED, S_OLDEST, S_CRON_LAST, S_CRON_LATE };
static const jr_mfamily_t sched_fams[] = {
    {"jobrunner_jobs_promoted_total", "Delayed jobs moved into their queue's ready stream.", JR_MT_COUNTER, 1,
     {"queue"}, NULL, 0},
    {"jobrunner_promotion_lateness_seconds",
     "Per promotion that moved jobs: Redis time of the promotion minus the due time of the earliest job it "
     "moved, as known from the previous promotion of the queue.",
     JR_MT_HISTOGRAM, 1, {"queue"}, lateness_bounds, NB(lateness_bounds)},
    {"jobrunner_queue_delayed_jobs", "Jobs waiting for their due time (refreshed by the scheduler about once a second).",
     JR_MT_GAUGE, 1, {"queue"}, NULL, 0},
    {"jobrunner_queue_ready_jobs", "Jobs due and not yet delivered to a worker (refreshed about once a second).",
     JR_MT_GAUGE, 1, {"queue"}, NULL, 0},
    {"jobrunner_redis_reconnects_total", "Redis connections lost or refused and made again.", JR_MT_COUNTER, 0,
     {0}, NULL, 0},
    HTTP_DROPPED_FAMILY,
    UP_FAMILY,
    BUILD_FAMILY,
    REDIS_UP_FAMILY,
    {"jobrunner_queue_pending_jobs", "Jobs delivered to a worker and not yet acknowledged (running or held).",
     JR_MT_GAUGE, 1, {"queue"}, NULL, 0},
    {"jobrunner_queue_dead_jobs", "Jobs in the dead-letter stream.", JR_MT_GAUGE, 1, {"queue"}, NULL, 0},
    {"jobrunner_queue_paused", "1 while the queue is paused (jobrunner pause), else 0.", JR_MT_GAUGE, 1, {"queue"},
     NULL, 0},
    {"jobrunner_queue_oldest_ready_age_seconds",
     "How long the oldest ready job (due, not yet delivered) has waited in the stream, by Redis's clock; 0 when "
     "none is ready.",
     JR_MT_GAUGE, 1, {"queue"}, NULL, 0},
    {"jobrunner_cron_last_fire_timestamp_seconds",
     "Unix time of the last tick of the schedule whose job this scheduler enqueued.", JR_MT_GAUGE, 1,
     {"schedule"}, NULL, 0},
    {"jobrunner_cron_lateness_seconds",
     "For that tick: Redis time when this scheduler enqueued its job minus the tick's time.", JR_MT_GAUGE, 1,
     {"schedule"}, NULL, 0},
};

/* ---- the HTTP server: what a bystander can reach ----------------------------
 *
 * metrics.listen may face a network (the container's 0.0.0.0:9464), so a
 * client must not be able to keep /healthz or /metrics from answering:
 * - one thread runs libmicrohttpd on epoll (no thread per connection: a
 *   thousand idle clients cost no threads); every answer carries
 *   "Connection: close", so a connection serves one request;
 * - a connection that has not received its whole request and sent its whole
 *   answer HTTP_DEADLINE_MS after it was accepted is closed (shutdown(2) by
 *   the same thread, so the descriptor is still MHD's): a client that
 *   dribbles header bytes (slowloris) or never reads holds a slot for that
 *   long at most, however it times its bytes (MHD's own timeout is an idle
 *   timeout, which each byte resets);
 * - at most HTTP_PER_CLIENT connections from one address, and at most
 *   HTTP_CONN_MAX from all others than 127.0.0.1 and ::1; those two have
 *   HTTP_LOCAL_RESERVE slots more, kept for them: the container's
 *   healthcheck (config/healthcheck) connects from 127.0.0.1, and answers
 *   while the network holds every other slot.
 * Refused and cut connections are counted in
 * jobrunner_http_connections_dropped_total{reason} and logged at most once
 * a minute (a flood must not flood the log too). */
#define HTTP_DEADLINE_MS 5000
#define HTTP_PER_CLIENT 8
#define HTTP_CONN_MAX 64
#define HTTP_LOCAL_RESERVE 8
#define HTTP_SLOTS (HTTP_CONN_MAX + HTTP_LOCAL_RESERVE)
#define HTTP_NOTE_US (60 * 1000000LL) /* between two log lines about dropped connections */

enum { DROP_FULL, DROP_PER_CLIENT, DROP_SLOW, DROP_N };
static const char *const drop_names[DROP_N] = {"full", "per_client", "slow"};

/* One open connection (all touched by the HTTP thread only). */
typedef struct conn {
    int used, cut;
    int fd;
    int64_t deadline_us; /* monotonic */
    struct sockaddr_storage addr;
} conn_t;

static struct {
    pthread_mutex_t mu; /* guards reg */
    jr_mreg_t *reg;
    jr_metrics_role_t role;
    struct MHD_Daemon *d;
    int fd, port;
    int64_t stale_us;
    /* the HTTP thread */
    pthread_t thread;
    int thread_on, wake; /* wake: an eventfd written by jr_metrics_stop */
    conn_t conns[HTTP_SLOTS];
    size_t nconns;
    uint64_t dropped[DROP_N]; /* since the last log line */
    int64_t next_note_us;
} M = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .wake = -1};
static atomic_int on;
static _Atomic int64_t last_turn_us, last_redis_us;

int jr_metrics_on(void) { return atomic_load_explicit(&on, memory_order_relaxed); }
int jr_metrics_port(void) { return jr_metrics_on() ? M.port : 0; }

void jr_metrics_turned(void) {
    if (jr_metrics_on()) atomic_store_explicit(&last_turn_us, jr_mono_us(), memory_order_relaxed);
}
void jr_metrics_redis_ok(void) {
    if (jr_metrics_on()) atomic_store_explicit(&last_redis_us, jr_mono_us(), memory_order_relaxed);
}
int64_t jr_metrics_redis_age_us(void) {
    int64_t t = atomic_load_explicit(&last_redis_us, memory_order_relaxed);
    return t ? jr_mono_us() - t : INT64_MAX;
}

static void update(size_t fam, const char *const *labels, double v) {
    if (!jr_metrics_on()) return;
    pthread_mutex_lock(&M.mu);
    int rc = jr_mreg_update(M.reg, fam, labels, v);
    pthread_mutex_unlock(&M.mu);
    (void)rc; /* out of memory: the sample is lost, the job is not */
}

void jr_metrics_job_done(const char *queue, const char *handler, const char *outcome, double seconds) {
    if (!jr_metrics_on() || M.role != JR_METRICS_WORKER) return;
    /* the label says what it counts: an attempt that will be retried */
    const char *l[] = {queue, handler, strcmp(outcome, "retry") ? outcome : "retried"};
    pthread_mutex_lock(&M.mu);
    jr_mreg_update(M.reg, W_JOBS, l, 1);
    jr_mreg_update(M.reg, W_DURATION, l, seconds);
    pthread_mutex_unlock(&M.mu);
}
void jr_metrics_running(size_t n) {
    if (M.role == JR_METRICS_WORKER) update(W_RUNNING, NULL, (double)n);
}
void jr_metrics_fetched(size_t n) {
    if (M.role == JR_METRICS_WORKER && n) update(W_FETCH, NULL, (double)n);
}
void jr_metrics_reconnect(void) {
    update(M.role == JR_METRICS_WORKER ? W_RECONNECTS : S_RECONNECTS, NULL, 1);
}
void jr_metrics_promoted(const char *queue, int64_t n, double lateness_s) {
    if (!jr_metrics_on() || M.role != JR_METRICS_SCHEDULER) return;
    pthread_mutex_lock(&M.mu);
    jr_mreg_update(M.reg, S_PROMOTED, &queue, (double)n);
    if (lateness_s >= 0) jr_mreg_update(M.reg, S_LATENESS, &queue, lateness_s);
    pthread_mutex_unlock(&M.mu);
}
void jr_metrics_queue(const char *queue, const jr_qgauges_t *g) {
    if (!jr_metrics_on() || M.role != JR_METRICS_SCHEDULER) return;
    pthread_mutex_lock(&M.mu);
    if (g->delayed >= 0) jr_mreg_update(M.reg, S_DELAYED, &queue, (double)g->delayed);
    if (g->ready >= 0) jr_mreg_update(M.reg, S_READY, &queue, (double)g->ready);
    if (g->pending >= 0) jr_mreg_update(M.reg, S_PENDING, &queue, (double)g->pending);
    if (g->dead >= 0) jr_mreg_update(M.reg, S_DEAD, &queue, (double)g->dead);
    if (g->paused >= 0) jr_mreg_update(M.reg, S_PAUSED, &queue, (double)g->paused);
    if (g->oldest_ready_s >= 0) jr_mreg_update(M.reg, S_OLDEST, &queue, g->oldest_ready_s);
    pthread_mutex_unlock(&M.mu);
}
void jr_metrics_capacity(size_t n) {
    if (M.role == JR_METRICS_WORKER) update(W_CAPACITY, NULL, (double)n);
}
void jr_metrics_deferred(const char *queue, const char *handler) {
    const char *l[] = {queue, handler};
    if (M.role == JR_METRICS_WORKER) update(W_DEFERRED, l, 1);
}
void jr_metrics_cron_fired(const char *schedule, int64_t tick_ms, double lateness_s) {
    if (!jr_metrics_on() || M.role != JR_METRICS_SCHEDULER) return;
    pthread_mutex_lock(&M.mu);
    jr_mreg_update(M.reg, S_CRON_LAST, &schedule, (double)tick_ms / 1000.0);
    jr_mreg_update(M.reg, S_CRON_LATE, &schedule, lateness_s);
    pthread_mutex_unlock(&M.mu);
}

/* /healthz: NULL when healthy, else the reason (in buf). */
static const char *unhealthy(char *buf, size_t len) {
    int64_t now = jr_mono_us(), lim = M.stale_us;
    int64_t redis = atomic_load_explicit(&last_redis_us, memory_order_relaxed);
    int64_t turn = atomic_load_explicit(&last_turn_us, memory_order_relaxed);
    if (!redis) return snprintf(buf, len, "redis: no reply yet\n"), buf;
    if (now - redis > lim)
        return snprintf(buf, len, "redis: no reply for %lld ms (limit %lld ms)\n",
                        (long long)((now - redis) / 1000), (long long)(lim / 1000)), buf;
    if (now - turn > lim)
        return snprintf(buf, len, "loop: not turned for %lld ms (limit %lld ms)\n",
                        (long long)((now - turn) / 1000), (long long)(lim / 1000)), buf;
    return NULL;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body, size_t len,
                             const char *type) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close"); /* one request per connection */
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *data, size_t *data_size, void **state) {
    (void)cls, (void)version, (void)data, (void)data_size, (void)state;
    static const char plain[] = "text/plain; charset=utf-8";
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, strdup("only GET\n"), 9, plain);
    if (!strcmp(url, "/metrics")) {
        size_t len = 0;
        char why[160];
        int redis_up = !unhealthy(why, sizeof why) || strncmp(why, "redis", 5);
        pthread_mutex_lock(&M.mu);
        jr_mreg_update(M.reg, M.role == JR_METRICS_WORKER ? W_REDIS_UP : S_REDIS_UP, NULL, redis_up);
        char *text = jr_mreg_encode(M.reg, &len);
        pthread_mutex_unlock(&M.mu);
        if (!text) return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, strdup("out of memory\n"), 14, plain);
        return reply(c, MHD_HTTP_OK, text, len, "text/plain; version=0.0.4; charset=utf-8");
    }
    if (!strcmp(url, "/healthz")) {
        char why[160];
        const char *bad = unhealthy(why, sizeof why);
        char *body = strdup(bad ? bad : "ok\n");
        if (!body) return MHD_NO;
        return reply(c, bad ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK, body, strlen(body), plain);
    }
    char *nf = strdup("not found: try /metrics or /healthz\n");
    return reply(c, MHD_HTTP_NOT_FOUND, nf, nf ? strlen(nf) : 0, plain);
}

/* 1 for 127.0.0.1, ::1 and ::ffff:127.0.0.1: the addresses the reserve is for. */
static int is_local(const struct sockaddr *a) {
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
    if (a->sa_family != AF_INET6) return 0;
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
    static const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    return IN6_IS_ADDR_LOOPBACK(v6) || !memcmp(v6->s6_addr, mapped, 16);
}

/* 1 if a and b are the same host address (the port aside). */
static int same_host(const struct sockaddr *a, const struct sockaddr *b) {
    if (a->sa_family != b->sa_family) return 0;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                       sizeof(struct in6_addr));
    return 0;
}

/* Count a dropped connection (metric), and log what was dropped at most once
 * per HTTP_NOTE_US: the first drop at once, later ones with the next drop
 * after that time. HTTP thread. */
static void drop(int why) {
    const char *label = drop_names[why];
    update(M.role == JR_METRICS_WORKER ? W_HTTP : S_HTTP, &label, 1);
    M.dropped[why]++;
    int64_t now = jr_mono_us();
    if (now < M.next_note_us) return;
    M.next_note_us = now + HTTP_NOTE_US;
    char n[DROP_N][24];
    for (int i = 0; i < DROP_N; i++) snprintf(n[i], sizeof n[i], "%llu", (unsigned long long)M.dropped[i]);
    char lim[96];
    snprintf(lim, sizeof lim, "%d per client address, %d in all (+%d for 127.0.0.1 and ::1), %d ms per request",
             HTTP_PER_CLIENT, HTTP_CONN_MAX, HTTP_LOCAL_RESERVE, HTTP_DEADLINE_MS);
    jr_log_kv(JR_LOG_WARN, "metrics server: connections refused or cut (counted in "
              "jobrunner_http_connections_dropped_total; logged at most once a minute)",
              "full", n[DROP_FULL], "per_client", n[DROP_PER_CLIENT], "slow", n[DROP_SLOW], "limits", lim, NULL);
    memset(M.dropped, 0, sizeof M.dropped);
}

/* MHD's accept policy (HTTP thread): the per-address cap and the reserve. */
static enum MHD_Result admit(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    (void)cls, (void)addrlen;
    int local = is_local(addr), same = 0;
    for (size_t i = 0; i < HTTP_SLOTS; i++)
        same += M.conns[i].used && same_host((const struct sockaddr *)&M.conns[i].addr, addr);
    if (same >= HTTP_PER_CLIENT) {
        drop(DROP_PER_CLIENT);
        return MHD_NO;
    }
    if (M.nconns >= (local ? HTTP_SLOTS : HTTP_CONN_MAX)) {
        drop(DROP_FULL);
        return MHD_NO;
    }
    return MHD_YES;
}

/* MHD's connection notifier (HTTP thread): a connection takes a slot, with
 * its deadline, from its start to its close. */
static void track(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode code) {
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_t *k = *ctx;
        if (k && k->used) k->used = 0, M.nconns--;
        *ctx = NULL;
        return;
    }
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ad = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    conn_t *k = NULL;
    for (size_t i = 0; i < HTTP_SLOTS && !k; i++)
        if (!M.conns[i].used) k = &M.conns[i];
    if (!k || !fd) { /* cannot happen: MHD's own limit is HTTP_SLOTS; never keep one untracked */
        if (fd) shutdown(fd->connect_fd, SHUT_RDWR);
        *ctx = NULL;
        return;
    }
    memset(k, 0, sizeof *k);
    k->used = 1, k->fd = fd->connect_fd;
    k->deadline_us = jr_mono_us() + HTTP_DEADLINE_MS * 1000LL;
    if (ad && ad->client_addr) {
        socklen_t len = ad->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        memcpy(&k->addr, ad->client_addr, len);
    }
    M.nconns++;
    *ctx = k;
}

/* Cut the connections past their deadline (HTTP thread): shutdown(2) makes
 * MHD see the end of the connection at its next run and close it. Returns
 * the earliest deadline still ahead (INT64_MAX if none). */
static int64_t cut_slow(int64_t now) {
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < HTTP_SLOTS; i++) {
        conn_t *k = &M.conns[i];
        if (!k->used || k->cut) continue;
        if (k->deadline_us <= now) {
            shutdown(k->fd, SHUT_RDWR);
            k->cut = 1;
            drop(DROP_SLOW);
        } else if (k->deadline_us < next) {
            next = k->deadline_us;
        }
    }
    return next;
}

/* The HTTP thread: wait on MHD's epoll descriptor (and the stop eventfd) no
 * longer than MHD's own timeout and the next deadline, run MHD, cut. */
static void *http_loop(void *arg) {
    (void)arg;
    const union MHD_DaemonInfo *ep = MHD_get_daemon_info(M.d, MHD_DAEMON_INFO_EPOLL_FD);
    for (;;) {
        int64_t now = jr_mono_us(), next = cut_slow(now);
        int64_t wait_ms = next == INT64_MAX ? 1000 : (next - now + 999) / 1000;
        MHD_UNSIGNED_LONG_LONG t;
        if (MHD_get_timeout(M.d, &t) == MHD_YES && (int64_t)t < wait_ms) wait_ms = (int64_t)t;
        if (wait_ms > 1000) wait_ms = 1000;
        struct pollfd p[2] = {{.fd = ep->epoll_fd, .events = POLLIN}, {.fd = M.wake, .events = POLLIN}};
        if (poll(p, 2, (int)wait_ms) < 0 && errno != EINTR) poll(NULL, 0, 10); /* never spin */
        if (p[1].revents) break;
        MHD_run(M.d);
    }
    return NULL;
}

int jr_http_listen(const char *what, const char *addr, const char *host, int p, int *port_out, int *v6, char *err,
                   size_t errlen) {
    char port[8];
    snprintf(port, sizeof port, "%d", p);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res = NULL;
    int g = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (g) {
        snprintf(err, errlen, "cannot serve %s on %s: %s", what, addr, gai_strerror(g));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 64)) {
        snprintf(err, errlen, "cannot serve %s on %s: %s", what, addr, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return -1;
    }
    *v6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    *port_out = getsockname(fd, (struct sockaddr *)&ss, &sl) ? p
                : ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* Bind and listen on addr ourselves (so a failure says why), returning the
 * socket or -1 with err set. */
static int listen_on(const char *addr, int *port_out, int *v6, char *err, size_t errlen) {
    char host[256];
    int p;
    if (jr_metrics_parse_addr(addr, host, sizeof host, &p, err, errlen)) return -1;
    return jr_http_listen("metrics", addr, host, p, port_out, v6, err, errlen);
}

int jr_metrics_start(const char *given, int64_t port_offset, jr_metrics_role_t role, int64_t stale_ms, char *err,
                     size_t errlen) {
    int v6 = 0;
    char addr[300];
    if (jr_metrics_addr_offset(given, port_offset, addr, sizeof addr, err, errlen)) return JR_EIO;
    jr_metrics_stop();
    M.role = role;
    M.stale_us = stale_ms * 1000;
    M.reg = role == JR_METRICS_WORKER ? jr_mreg_new(worker_fams, NB(worker_fams))
                                      : jr_mreg_new(sched_fams, NB(sched_fams));
    if (!M.reg) {
        snprintf(err, errlen, "out of memory");
        return JR_ENOMEM;
    }
    /* Series without labels exist from the start, at 0; up and build_info at 1. */
    int worker = role == JR_METRICS_WORKER;
    char rev[24];
    long contract = 0, revision = 0;
    jr_lua_revision(jr_lua_library, jr_lua_library_len, &contract, &revision);
    snprintf(rev, sizeof rev, "%ld", revision);
    const char *build[] = {JR_VERSION, worker ? "worker" : "scheduler", rev};
    jr_mreg_update(M.reg, worker ? W_RECONNECTS : S_RECONNECTS, NULL, 0);
    jr_mreg_update(M.reg, worker ? W_UP : S_UP, NULL, 1);
    jr_mreg_update(M.reg, worker ? W_BUILD : S_BUILD, build, 1);
    if (worker) jr_mreg_update(M.reg, W_RUNNING, NULL, 0);
    if ((M.fd = listen_on(addr, &M.port, &v6, err, errlen)) < 0) {
        jr_metrics_stop();
        return JR_EIO;
    }
    memset(M.conns, 0, sizeof M.conns);
    memset(M.dropped, 0, sizeof M.dropped);
    M.nconns = 0, M.next_note_us = 0;
    /* epoll, run by our own thread (http_loop); MHD's idle timeout as a
     * second guard, rounded up to whole seconds */
    M.d = MHD_start_daemon(MHD_USE_EPOLL | (v6 ? MHD_USE_IPv6 : 0), 0, admit, NULL, serve, NULL,
                           MHD_OPTION_LISTEN_SOCKET, M.fd, MHD_OPTION_CONNECTION_TIMEOUT,
                           (unsigned)((HTTP_DEADLINE_MS + 999) / 1000), MHD_OPTION_CONNECTION_LIMIT,
                           (unsigned)HTTP_SLOTS, MHD_OPTION_NOTIFY_CONNECTION, track, NULL, MHD_OPTION_END);
    if (!M.d) {
        snprintf(err, errlen, "cannot serve metrics on %s: libmicrohttpd failed to start", addr);
        jr_metrics_stop();
        return JR_EIO;
    }
    M.fd = -1; /* the daemon owns and closes it */
    const union MHD_DaemonInfo *ep = MHD_get_daemon_info(M.d, MHD_DAEMON_INFO_EPOLL_FD);
    if (!ep || (M.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        snprintf(err, errlen, "cannot serve metrics on %s: %s", addr, ep ? strerror(errno) : "no epoll from libmicrohttpd");
        jr_metrics_stop();
        return JR_EIO;
    }
    /* The thread takes no signal: they are the loops' business. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int prc = pthread_create(&M.thread, NULL, http_loop, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prc) {
        snprintf(err, errlen, "cannot serve metrics on %s: cannot start its thread: %s", addr, strerror(prc));
        jr_metrics_stop();
        return JR_EIO;
    }
    M.thread_on = 1;
    atomic_store(&last_turn_us, jr_mono_us());
    atomic_store(&last_redis_us, 0);
    atomic_store(&on, 1);
    char port[16];
    snprintf(port, sizeof port, "%d", M.port);
    jr_log_kv(JR_LOG_INFO, "serving metrics and health", "listen", addr, "port", port, NULL);
    return 0;
}

void jr_metrics_stop(void) {
    atomic_store(&on, 0);
    if (M.thread_on) {
        uint64_t one = 1;
        while (write(M.wake, &one, sizeof one) < 0 && errno == EINTR) {}
        pthread_join(M.thread, NULL);
        M.thread_on = 0;
    }
    if (M.wake >= 0) close(M.wake);
    M.wake = -1;
    if (M.d) MHD_stop_daemon(M.d);
    M.d = NULL;
    if (M.fd >= 0) close(M.fd);
    M.fd = -1, M.port = 0;
    pthread_mutex_lock(&M.mu);
    jr_mreg_free(M.reg);
    M.reg = NULL;
    pthread_mutex_unlock(&M.mu);
}
