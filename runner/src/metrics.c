/* Metrics and health over HTTP: see metrics.h. */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jr.h"
#include "log.h"
#include "util.h"

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

enum { W_JOBS, W_DURATION, W_RUNNING, W_FETCH, W_RECONNECTS };
static const jr_mfamily_t worker_fams[] = {
    {"jobrunner_jobs_total", "Jobs finished by this worker, by queue, handler and outcome (ok, retry, dead, interrupted).",
     JR_MT_COUNTER, 3, {"queue", "handler", "outcome"}, NULL, 0},
    {"jobrunner_job_duration_seconds", "Run time of finished jobs (every outcome), by queue and handler.",
     JR_MT_HISTOGRAM, 2, {"queue", "handler"}, duration_bounds, NB(duration_bounds)},
    {"jobrunner_jobs_running", "Jobs running in this worker's runners now.", JR_MT_GAUGE, 0, {0}, NULL, 0},
    {"jobrunner_fetch_batch_jobs", "Jobs per read from Redis (reads that brought any).", JR_MT_HISTOGRAM, 0, {0},
     batch_bounds, NB(batch_bounds)},
    {"jobrunner_redis_reconnects_total", "Redis connections lost or refused and made again.", JR_MT_COUNTER, 0,
     {0}, NULL, 0},
};

enum { S_PROMOTED, S_LATENESS, S_DELAYED, S_READY, S_RECONNECTS };
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
};

static struct {
    pthread_mutex_t mu; /* guards reg */
    jr_mreg_t *reg;
    jr_metrics_role_t role;
    struct MHD_Daemon *d;
    int fd, port;
    int64_t stale_us;
} M = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1};
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
    const char *l[] = {queue, handler, outcome};
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
void jr_metrics_depth(const char *queue, long long delayed, long long ready) {
    if (!jr_metrics_on() || M.role != JR_METRICS_SCHEDULER) return;
    pthread_mutex_lock(&M.mu);
    jr_mreg_update(M.reg, S_DELAYED, &queue, (double)delayed);
    jr_mreg_update(M.reg, S_READY, &queue, (double)ready);
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
        pthread_mutex_lock(&M.mu);
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

/* Bind and listen on addr ourselves (so a failure says why), returning the
 * socket or -1 with err set. */
static int listen_on(const char *addr, int *port_out, int *v6, char *err, size_t errlen) {
    char host[256], port[8];
    int p;
    if (jr_metrics_parse_addr(addr, host, sizeof host, &p, err, errlen)) return -1;
    snprintf(port, sizeof port, "%d", p);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res = NULL;
    int g = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (g) {
        snprintf(err, errlen, "cannot serve metrics on %s: %s", addr, gai_strerror(g));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 64)) {
        snprintf(err, errlen, "cannot serve metrics on %s: %s", addr, strerror(errno));
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

int jr_metrics_start(const char *addr, jr_metrics_role_t role, int64_t stale_ms, char *err,
                     size_t errlen) {
    int v6 = 0;
    jr_metrics_stop();
    M.role = role;
    M.stale_us = stale_ms * 1000;
    M.reg = role == JR_METRICS_WORKER ? jr_mreg_new(worker_fams, NB(worker_fams))
                                      : jr_mreg_new(sched_fams, NB(sched_fams));
    if (!M.reg) {
        snprintf(err, errlen, "out of memory");
        return JR_ENOMEM;
    }
    /* Series without labels exist from the start, at 0. */
    jr_mreg_update(M.reg, role == JR_METRICS_WORKER ? W_RECONNECTS : S_RECONNECTS, NULL, 0);
    if (role == JR_METRICS_WORKER) jr_mreg_update(M.reg, W_RUNNING, NULL, 0);
    if ((M.fd = listen_on(addr, &M.port, &v6, err, errlen)) < 0) {
        jr_metrics_stop();
        return JR_EIO;
    }
    M.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | (v6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL, serve,
                           NULL, MHD_OPTION_LISTEN_SOCKET, M.fd, MHD_OPTION_CONNECTION_TIMEOUT,
                           (unsigned)10, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_END);
    if (!M.d) {
        snprintf(err, errlen, "cannot serve metrics on %s: libmicrohttpd failed to start", addr);
        jr_metrics_stop();
        return JR_EIO;
    }
    M.fd = -1; /* the daemon owns and closes it */
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
    if (M.d) MHD_stop_daemon(M.d);
    M.d = NULL;
    if (M.fd >= 0) close(M.fd);
    M.fd = -1, M.port = 0;
    pthread_mutex_lock(&M.mu);
    jr_mreg_free(M.reg);
    M.reg = NULL;
    pthread_mutex_unlock(&M.mu);
}
