/* libjobrunner: the public client API (<jobrunner/client.h>) over the
 * internal Redis layer. The CLI's enqueue, cancel, job show, stats, pause
 * and resume call these same functions (client_internal.h wraps a
 * connection it made itself), so for them producers and the CLI share one
 * code path to Redis; its other commands have no call here. */
#include <jobrunner/client.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"
#include "contract.h"
#include "jr.h"
#include "jr_limits.h"
#include "log.h"
#include "redis.h"
#include "redis_admin.h"
#include "redis_finished.h"
#include "redis_produce.h"
#include "redis_partition.h"
#include "util.h"

struct jr_client {
    jr_redis_t *r;          /* NULL until connected, and after a connection error */
    char *url;              /* NULL when adopted (the owner reconnects) */
    int64_t connect_ms, command_ms;
    jr_redis_opts_t opts;   /* how to connect (its strings are owned copies; url is the field above) */
    int err;                /* the last call's code */
    char errstr[JR_ERRLEN]; /* and its message */
    jr_strlist_t reasons;   /* the texts the last enqueue's results point at */
    jr_partmap_t parts;     /* the partition counts of the queues used, read again after 10 s */
};

#define DEFAULT_TIMEOUT_MS 5000
#define MAX_TIMEOUT_MS 3600000

JR_CLIENT_EXPORT const char *jr_client_version(void) { return "1.3"; }

JR_CLIENT_EXPORT const char *jr_client_strerror(int code) {
    switch (code) {
    case JR_CLIENT_OK: return "success";
    case JR_CLIENT_ENOMEM: return "out of memory";
    case JR_CLIENT_EINVAL: return "invalid argument";
    case JR_CLIENT_ECONNECT: return "cannot connect to Redis, or the connection was lost";
    case JR_CLIENT_ETIMEOUT: return "Redis did not answer in time";
    case JR_CLIENT_EREFUSED: return "Redis refused the command";
    case JR_CLIENT_EPROTO: return "unexpected reply from Redis";
    case JR_CLIENT_EREPLICAS: return "written to the primary, but not confirmed by enough replicas";
    default: return "unknown error";
    }
}

/* Record a failure of the current call: its code and message. Returns code. */
static int cfail(jr_client_t *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cfail(jr_client_t *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errstr, sizeof c->errstr, fmt, ap);
    va_end(ap);
    c->err = code;
    return code;
}

/* An internal JR_E* code as a client code. */
static int map_code(int rc) {
    switch (rc) {
    case 0: return JR_CLIENT_OK;
    case JR_ENOMEM: return JR_CLIENT_ENOMEM;
    case JR_EINVAL: return JR_CLIENT_EINVAL;
    case JR_EREDIS: return JR_CLIENT_EREFUSED;
    case JR_EPROTO: return JR_CLIENT_EPROTO;
    case JR_ETIMEOUT: return JR_CLIENT_ETIMEOUT;
    case JR_EREPLICAS: return JR_CLIENT_EREPLICAS;
    default: return JR_CLIENT_ECONNECT;
    }
}

/* A library must not kill its host with SIGPIPE when Redis goes away while
 * a command is written: SIGPIPE is blocked in the calling thread during each
 * call, and one raised by the call is consumed before it is unblocked. */
typedef struct sigpipe_guard {
    sigset_t old;
    int was_pending, blocked;
} sigpipe_guard_t;

static void sigpipe_block(sigpipe_guard_t *g) {
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
    g->blocked = pthread_sigmask(SIG_BLOCK, &pipe, &g->old) == 0;
}

static void sigpipe_restore(sigpipe_guard_t *g) {
    if (!g->blocked) return;
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE)) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe, NULL, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* The failure rc of an internal call on c->r, with the layer's message. A
 * broken connection is dropped (owned ones; the next call reconnects). */
static int redis_fail(jr_client_t *c, int rc, const char *what) {
    cfail(c, map_code(rc), "%s%s%s", what ? what : "", what ? ": " : "", jr_redis_errstr(c->r));
    if (!jr_redis_ok(c->r) && c->url) {
        jr_redis_free(c->r);
        c->r = NULL;
    }
    return c->err;
}

/* Start a call: clear the last error; connect if not connected. */
static int begin(jr_client_t *c) {
    c->err = 0;
    c->errstr[0] = '\0';
    if (c->r) return 0;
    if (!c->url) return cfail(c, JR_CLIENT_ECONNECT, "the connection was lost");
    char err[JR_ERRLEN];
    c->opts.url = c->url, c->opts.timeout_ms = c->connect_ms;
    c->r = jr_redis_open(&c->opts, err, sizeof err);
    if (!c->r) {
        /* A bad URL is the caller's mistake, not the network's. */
        jr_redis_url_t u;
        char perr[8];
        int bad = jr_redis_url_parse(c->url, &u, perr, sizeof perr) == JR_EINVAL;
        jr_redis_url_free(&u);
        return cfail(c, bad ? JR_CLIENT_EINVAL : JR_CLIENT_ECONNECT, "%s", err);
    }
    int rc = jr_redis_load_library(c->r);
    if (rc) return redis_fail(c, rc, "loading the jobrunner function library");
    jr_redis_set_timeout(c->r, c->command_ms);
    return 0;
}

/* The strings of c->opts, owned by c. */
static void opts_free(jr_redis_opts_t *o) {
    free((char *)o->password), free((char *)o->sentinel_password);
    free((char *)o->tls.ca_file), free((char *)o->tls.ca_dir), free((char *)o->tls.cert_file);
    free((char *)o->tls.key_file), free((char *)o->tls.server_name);
    memset(o, 0, sizeof *o);
}

/* Copy s into *dst (NULL stays NULL); 0, or -1 when out of memory. */
static int opt_copy(const char **dst, const char *s) {
    *dst = NULL;
    return s && !(*dst = strdup(s)) ? -1 : 0;
}

JR_CLIENT_EXPORT jr_client_t *jr_client_open(const jr_client_options_t *o) {
    static const jr_client_options_t none;
    if (!o) o = &none;
    jr_client_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    jr_redis_opts_t *p = &c->opts;
    p->role = "producer";
    jr_redis_on_failover(jr_log_failover); /* redis-sentinel://: one line per failover followed */
    p->tls.no_verify = o->tls.no_verify;
    p->wait_replicas = o->wait_replicas, p->wait_timeout_ms = o->wait_timeout_ms;
    if (!(c->url = strdup(o->url ? o->url : JR_DEFAULT_REDIS_URL)) || opt_copy(&p->password, o->password) ||
        opt_copy(&p->sentinel_password, o->sentinel_password) || opt_copy(&p->tls.ca_file, o->tls.ca_file) ||
        opt_copy(&p->tls.ca_dir, o->tls.ca_dir) || opt_copy(&p->tls.cert_file, o->tls.cert_file) ||
        opt_copy(&p->tls.key_file, o->tls.key_file) || opt_copy(&p->tls.server_name, o->tls.server_name)) {
        opts_free(p);
        free(c->url);
        free(c);
        return NULL;
    }
    int64_t connect_timeout_ms = o->connect_timeout_ms, command_timeout_ms = o->command_timeout_ms;
    c->connect_ms = connect_timeout_ms ? connect_timeout_ms : DEFAULT_TIMEOUT_MS;
    c->command_ms = command_timeout_ms ? command_timeout_ms : DEFAULT_TIMEOUT_MS;
    if (c->connect_ms < 1 || c->connect_ms > MAX_TIMEOUT_MS || c->command_ms < 1 ||
        c->command_ms > MAX_TIMEOUT_MS) {
        cfail(c, JR_CLIENT_EINVAL, "timeouts must be 1..%d ms (0 = %d): connect %lld, command %lld", MAX_TIMEOUT_MS,
              DEFAULT_TIMEOUT_MS, (long long)connect_timeout_ms, (long long)command_timeout_ms);
        c->connect_ms = c->command_ms = DEFAULT_TIMEOUT_MS; /* a retry must not use them */
        free(c->url);
        c->url = NULL; /* never connects: every call says so */
        return c;
    }
    if (o->wait_replicas < 0 || o->wait_replicas > JR_WAIT_REPLICAS_MAX || o->wait_timeout_ms < 0 ||
        o->wait_timeout_ms > JR_WAIT_TIMEOUT_MAX_MS) {
        cfail(c, JR_CLIENT_EINVAL, "wait_replicas must be 0..%d and wait_timeout_ms 0..%d (0 = 1000): %d, %lld",
              JR_WAIT_REPLICAS_MAX, JR_WAIT_TIMEOUT_MAX_MS, o->wait_replicas, (long long)o->wait_timeout_ms);
        free(c->url);
        c->url = NULL; /* never connects: every call says so */
        return c;
    }
    sigpipe_guard_t g;
    sigpipe_block(&g);
    begin(c);
    sigpipe_restore(&g);
    return c;
}

JR_CLIENT_EXPORT jr_client_t *jr_client_connect(const char *url, int64_t connect_timeout_ms,
                                                int64_t command_timeout_ms) {
    jr_client_options_t o = {.url = url, .connect_timeout_ms = connect_timeout_ms,
                             .command_timeout_ms = command_timeout_ms};
    return jr_client_open(&o);
}

jr_client_t *jr_client_adopt(jr_redis_t *r) {
    jr_client_t *c = calloc(1, sizeof *c);
    if (c) c->r = r;
    return c;
}

jr_redis_t *jr_client_redis(jr_client_t *c) { return c ? c->r : NULL; }

jr_redis_t *jr_client_release(jr_client_t *c) {
    if (!c) return NULL;
    jr_redis_t *r = c->r;
    c->r = NULL;
    jr_client_free(c);
    return r;
}

JR_CLIENT_EXPORT void jr_client_free(jr_client_t *c) {
    if (!c) return;
    if (c->r) jr_redis_free(c->r);
    jr_strlist_free(&c->reasons);
    jr_partmap_free(&c->parts);
    opts_free(&c->opts);
    free(c->url);
    free(c);
}

JR_CLIENT_EXPORT int jr_client_err(const jr_client_t *c) { return c ? c->err : JR_CLIENT_EINVAL; }
JR_CLIENT_EXPORT const char *jr_client_errstr(const jr_client_t *c) { return c ? c->errstr : "no client (NULL)"; }

/* ---- enqueue ----------------------------------------------------------- */

static const char *queue_or_default(const char *q) { return q && q[0] ? q : JR_DEFAULT_QUEUE; }

/* Check what the internal layer cannot see (the public struct's ranges) and
 * fill *e. Returns 0, or writes why into why. */
static int convert_job(const jr_client_job_t *j, jr_enqueue_t *e, char *why, size_t whylen) {
    memset(e, 0, sizeof *e);
    why[0] = '\0';
    if (!j->handler || !j->handler[0])
        snprintf(why, whylen, "no handler (handler is NULL or empty)");
    else if (j->max_attempts < 0 || j->max_attempts > JR_ATTEMPTS_MAX)
        snprintf(why, whylen, "max_attempts %lld is not in 0..%d", (long long)j->max_attempts, JR_ATTEMPTS_MAX);
    else if (j->at_ms < 0 || j->at_ms > INT64_MAX / 1000)
        snprintf(why, whylen, "at_ms %lld is not a Unix time in ms", (long long)j->at_ms);
    if (why[0]) return -1;
    e->queue = queue_or_default(j->queue);
    e->id = j->id && j->id[0] ? j->id : NULL;
    e->delay_ms = j->delay_ms;
    e->at_us = j->at_ms * 1000;
    e->uniq_ms = j->uniq_ms;
    e->env.handler = j->handler;
    e->env.handler_len = strlen(j->handler);
    e->env.payload = j->payload ? j->payload : (j->payload_len ? NULL : "");
    e->env.payload_len = j->payload_len;
    e->env.attempt = 1;
    e->env.max_attempts = (uint32_t)j->max_attempts;
    e->env.timeout_ms = j->timeout_ms;
    e->env.backoff_ms = j->backoff_ms;
    return 0;
}

/* Add a reason text for this call's results; its index, or -1 (no memory). */
static long add_reason(jr_client_t *c, const char *text) {
    if (jr_strlist_push(&c->reasons, text)) return -1;
    return (long)c->reasons.n - 1;
}

/* The partition counts, read again when older than JR_PARTITIONS_REREAD_MS. */
static jr_partmap_t *parts_of(jr_client_t *c) {
    c->parts.max_age_us = JR_PARTITIONS_REREAD_MS * 1000;
    return &c->parts;
}

static int do_enqueue_many(jr_client_t *c, const jr_client_job_t *jobs, const char *const *keys, size_t n,
                           jr_client_result_t *results) {
    if (!c) return JR_CLIENT_EINVAL;
    c->err = 0;
    c->errstr[0] = '\0';
    jr_strlist_free(&c->reasons);
    for (size_t i = 0; results && i < n; i++) {
        results[i].status = JR_CLIENT_JOB_NOT_SENT;
        results[i].error = NULL;
        snprintf(results[i].id, sizeof results[i].id, "%s", jobs && jobs[i].id ? jobs[i].id : "");
    }
    if (n == 0) return 0;
    if (!jobs) return cfail(c, JR_CLIENT_EINVAL, "jobs is NULL with n = %zu", n);
    jr_enqueue_t *in = malloc(n * sizeof *in);
    jr_enq_outcome_t *out = calloc(n, sizeof *out);
    char (*ids)[JR_ID_MAX] = malloc(n * sizeof *ids);
    jr_strlist_t reasons = {0};
    int rc = 0;
    if (!in || !out || !ids) {
        rc = cfail(c, JR_CLIENT_ENOMEM, "out of memory for %zu jobs", n);
        goto done;
    }
    /* The checks only the public struct needs; the layer checks the rest. */
    size_t bad = n;
    char why[JR_ERRLEN - 64];
    for (size_t i = 0; i < n; i++)
        if (convert_job(&jobs[i], &in[i], why, sizeof why)) {
            if (bad == n) bad = i;
            char msg[JR_ERRLEN];
            snprintf(msg, sizeof msg, "enqueue refused, nothing sent: job %zu: %s", i + 1, why);
            if (bad == i) cfail(c, JR_CLIENT_EINVAL, "%s", msg);
            long k = add_reason(c, msg);
            if (results) {
                results[i].status = JR_CLIENT_JOB_REFUSED;
                results[i].error = k >= 0 ? c->reasons.v[k] : "refused (out of memory for the reason)";
            }
        }
    if (bad < n) {
        char msg[JR_ERRLEN];
        snprintf(msg, sizeof msg, "not sent: job %zu of the call is bad", bad + 1);
        long k = add_reason(c, msg);
        for (size_t i = 0; results && i < n; i++)
            if (!results[i].error) results[i].error = k >= 0 ? c->reasons.v[k] : "not sent";
        rc = JR_CLIENT_EINVAL;
        goto done;
    }
    if ((rc = begin(c))) {
        for (size_t i = 0; results && i < n; i++) results[i].error = c->errstr;
        goto done;
    }
    int lrc = jr_redis_enqueue_parts(c->r, parts_of(c), in, keys, n, ids, out, &reasons);
    if (lrc) redis_fail(c, lrc, NULL);
    rc = c->err;
    /* The layer's reasons become ours (they live until the next call). */
    size_t base = c->reasons.n;
    for (size_t k = 0; k < reasons.n; k++)
        if (jr_strlist_push(&c->reasons, reasons.v[k])) {
            rc = cfail(c, JR_CLIENT_ENOMEM, "out of memory (the jobs' outcomes below are exact)");
            break;
        }
    for (size_t i = 0; results && i < n; i++) {
        static const jr_client_job_status_t st[] = {
            [JR_ENQ_NOT_SENT] = JR_CLIENT_JOB_NOT_SENT, [JR_ENQ_CREATED] = JR_CLIENT_JOB_CREATED,
            [JR_ENQ_EXISTED] = JR_CLIENT_JOB_EXISTED, [JR_ENQ_REFUSED] = JR_CLIENT_JOB_REFUSED,
            [JR_ENQ_UNKNOWN] = JR_CLIENT_JOB_UNKNOWN};
        results[i].status = st[out[i].status];
        if (out[i].status == JR_ENQ_CREATED || out[i].status == JR_ENQ_EXISTED) {
            snprintf(results[i].id, sizeof results[i].id, "%s", ids[i]);
        } else {
            if (out[i].status == JR_ENQ_UNKNOWN) /* its id, when written to the primary (wait_replicas) */
                snprintf(results[i].id, sizeof results[i].id, "%s", ids[i]);
            size_t k = base + out[i].why;
            results[i].error = out[i].why < reasons.n && k < c->reasons.n ? c->reasons.v[k]
                               : c->errstr[0]                          ? c->errstr
                                                                       : "not sent";
        }
    }
done:
    jr_strlist_free(&reasons);
    free(in), free(out), free(ids);
    return rc;
}

JR_CLIENT_EXPORT int jr_client_enqueue(jr_client_t *c, const jr_client_job_t *job, jr_client_result_t *result) {
    jr_client_result_t local;
    if (!job) {
        if (!c) return JR_CLIENT_EINVAL;
        c->errstr[0] = '\0';
        return cfail(c, JR_CLIENT_EINVAL, "job is NULL");
    }
    return jr_client_enqueue_many(c, job, 1, result ? result : &local);
}

/* ---- one job by id ------------------------------------------------------- */

/* Check a queue name and job id argument. */
static int check_queue_id(jr_client_t *c, const char *queue, const char *id, int need_id) {
    const char *rule = jr_contract_queue_name(queue, strlen(queue));
    if (rule) return cfail(c, JR_CLIENT_EINVAL, "queue name \"%.64s\" %s", queue, rule);
    if (need_id && (!id || !id[0])) return cfail(c, JR_CLIENT_EINVAL, "no job id (NULL or empty)");
    if (need_id && (rule = jr_contract_stored_id(id, strlen(id))))
        return cfail(c, JR_CLIENT_EINVAL, "job id \"%.40s%s\" %s", id, strlen(id) > 40 ? "..." : "", rule);
    return 0;
}

static int do_cancel(jr_client_t *c, const char *queue, const char *id, const char *key, jr_client_cancel_t *outcome) {
    if (!c) return JR_CLIENT_EINVAL;
    c->err = 0, c->errstr[0] = '\0';
    if (outcome) *outcome = JR_CLIENT_CANCEL_NOT_FOUND;
    queue = queue_or_default(queue);
    int rc = check_queue_id(c, queue, id, 1);
    if (rc || (rc = begin(c))) return rc;
    char state[32], iq[JR_INTERNAL_QUEUE_MAX + 1], iid[JR_ID_MAX];
    if ((rc = jr_partition_locate(parts_of(c), c->r, queue, id, key, iq, iid)) ||
        (rc = jr_redis_job_change(c->r, "jr_cancel", iq, iid, state, sizeof state, NULL, 0)))
        return redis_fail(c, rc, "cancel");
    jr_client_cancel_t o;
    if (!strcmp(state, "cancelled")) o = JR_CLIENT_CANCELLED;
    else if (!strcmp(state, "running")) o = JR_CLIENT_CANCEL_RUNNING;
    else if (!strcmp(state, "not found")) o = JR_CLIENT_CANCEL_NOT_FOUND;
    else return cfail(c, JR_CLIENT_EPROTO, "cancel: unexpected answer \"%s\"", state);
    if (outcome) *outcome = o;
    return 0;
}

/* A job info and what its pointers point into. */
typedef struct info_box {
    jr_client_job_info_t pub; /* first: the public pointer is the box's */
    jr_jobinfo_t in;
    jr_client_field_t *fields;
    char *queue, *id;
} info_box_t;

/* The value of field `name` of e (NULL if absent). */
static const char *field_of(const jr_entry_t *e, const char *name, size_t *len) {
    for (size_t f = 0; e && f < e->nfields; f++)
        if (e->name_lens[f] == strlen(name) && !memcmp(e->names[f], name, e->name_lens[f])) {
            *len = e->value_lens[f];
            return e->values[f];
        }
    return NULL;
}

static int64_t num_field(const jr_entry_t *e, const char *name, int64_t dflt) {
    size_t len;
    const char *v = field_of(e, name, &len);
    return v ? (int64_t)strtoll(v, NULL, 10) : dflt;
}

JR_CLIENT_EXPORT void jr_client_job_info_free(jr_client_job_info_t *info) {
    if (!info) return;
    info_box_t *b = (info_box_t *)info;
    jr_jobinfo_free(&b->in);
    free(b->fields), free(b->queue), free(b->id), free(b);
}

static int do_job_show(jr_client_t *c, const char *queue, const char *id, const char *key,
                       jr_client_job_info_t **info) {
    if (!c) return JR_CLIENT_EINVAL;
    c->err = 0, c->errstr[0] = '\0';
    if (!info) return cfail(c, JR_CLIENT_EINVAL, "info is NULL");
    *info = NULL;
    queue = queue_or_default(queue);
    int rc = check_queue_id(c, queue, id, 1);
    if (rc || (rc = begin(c))) return rc;
    info_box_t *b = calloc(1, sizeof *b);
    if (!b || !(b->queue = strdup(queue)) || !(b->id = strdup(id))) {
        if (b) free(b->queue), free(b);
        return cfail(c, JR_CLIENT_ENOMEM, "out of memory");
    }
    char iq[JR_INTERNAL_QUEUE_MAX + 1], iid[JR_ID_MAX];
    if ((rc = jr_partition_locate(parts_of(c), c->r, queue, id, key, iq, iid)) ||
        (rc = jr_redis_job_locate(c->r, iq, iid, &b->in))) {
        jr_client_job_info_free(&b->pub);
        return redis_fail(c, rc, "job show");
    }
    static const struct {
        const char *name;
        jr_client_state_t state;
    } states[] = {{"not found", JR_CLIENT_STATE_NOT_FOUND}, {"delayed", JR_CLIENT_STATE_DELAYED},
                  {"retrying", JR_CLIENT_STATE_RETRYING},   {"ready", JR_CLIENT_STATE_READY},
                  {"running", JR_CLIENT_STATE_RUNNING},     {"dead", JR_CLIENT_STATE_DEAD},
                  {"finished", JR_CLIENT_STATE_FINISHED}};
    jr_client_job_info_t *p = &b->pub;
    p->state_name = NULL;
    for (size_t s = 0; s < sizeof states / sizeof states[0]; s++)
        if (!strcmp(b->in.state, states[s].name)) p->state = states[s].state, p->state_name = states[s].name;
    if (!p->state_name) {
        rc = cfail(c, JR_CLIENT_EPROTO, "job show: unexpected state \"%s\"", b->in.state);
        jr_client_job_info_free(p);
        return rc;
    }
    const jr_entry_t *e = p->state != JR_CLIENT_STATE_NOT_FOUND && b->in.fields.n ? &b->in.fields.v[0] : NULL;
    p->queue = b->queue, p->id = b->id;
    p->entry = b->in.entry;
    p->due_ms = b->in.due[0] ? strtod(b->in.due, NULL) : -1;
    int running = p->state == JR_CLIENT_STATE_RUNNING;
    p->consumer = running ? b->in.consumer : "";
    p->idle_ms = running ? b->in.idle_ms : -1;
    p->deliveries = running ? b->in.deliveries : -1;
    p->handler = field_of(e, JR_F_HANDLER, &p->handler_len);
    p->payload = field_of(e, JR_F_PAYLOAD, &p->payload_len);
    if (!p->payload) p->payload = "", p->payload_len = 0;
    p->attempt = num_field(e, JR_F_ATTEMPT, 1);
    p->max_attempts = num_field(e, JR_F_MAX, 0);
    p->timeout_ms = num_field(e, JR_F_TIMEOUT, 0);
    p->backoff_ms = num_field(e, JR_F_BACKOFF, 0);
    p->enqueued_ms = num_field(e, JR_F_ENQUEUED, 0);
    p->due_field_ms = num_field(e, JR_F_DUE, 0);
    p->error = field_of(e, JR_F_ERROR, &p->error_len);
    p->why = p->state == JR_CLIENT_STATE_DEAD ? field_of(e, JR_F_WHY, &p->why_len) : NULL;
    if (e && e->nfields) {
        if (!(b->fields = malloc(e->nfields * sizeof *b->fields))) {
            jr_client_job_info_free(p);
            return cfail(c, JR_CLIENT_ENOMEM, "out of memory");
        }
        for (size_t f = 0; f < e->nfields; f++)
            b->fields[f] = (jr_client_field_t){e->names[f], e->name_lens[f], e->values[f], e->value_lens[f]};
        p->nfields = e->nfields;
    }
    p->fields = b->fields;
    *info = p;
    return 0;
}

/* ---- waiting for a job's end --------------------------------------------- */

static int do_wait(jr_client_t *c, const char *queue, const char *id, const char *key, int64_t timeout_ms,
                   jr_client_end_t *end) {
    if (!c) return JR_CLIENT_EINVAL;
    c->err = 0, c->errstr[0] = '\0';
    if (!end) return cfail(c, JR_CLIENT_EINVAL, "end is NULL");
    memset(end, 0, sizeof *end);
    end->duration_ms = -1;
    if (timeout_ms < 1 || timeout_ms > JR_DELAY_MAX_MS)
        return cfail(c, JR_CLIENT_EINVAL, "timeout_ms must be 1..%lld, got %lld", (long long)JR_DELAY_MAX_MS,
                     (long long)timeout_ms);
    queue = queue_or_default(queue);
    int rc = check_queue_id(c, queue, id, 1);
    if (rc || (rc = begin(c))) return rc;
    char iq[JR_INTERNAL_QUEUE_MAX + 1], iid[JR_ID_MAX];
    jr_job_end_t e;
    memset(&e, 0, sizeof e);
    if ((rc = jr_partition_locate(parts_of(c), c->r, queue, id, key, iq, iid))) return redis_fail(c, rc, "job wait");
    rc = jr_redis_job_wait(c->r, iq, iid, timeout_ms, &e);
    if (rc < 0) {
        jr_job_end_free(&e);
        return redis_fail(c, rc, "job wait");
    }
    static const struct {
        const char *name;
        jr_client_outcome_t o;
    } outs[] = {{"ok", JR_CLIENT_END_OK}, {"failed", JR_CLIENT_END_FAILED}, {"cancelled", JR_CLIENT_END_CANCELLED},
                {"unknown", JR_CLIENT_END_UNKNOWN}};
    end->outcome = JR_CLIENT_END_TIMEOUT, end->outcome_name = "timeout";
    if (rc == 1) {
        end->outcome = JR_CLIENT_END_UNKNOWN, end->outcome_name = "unknown";
        for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
            if (!strcmp(e.outcome, outs[i].name)) end->outcome = outs[i].o, end->outcome_name = outs[i].name;
    }
    end->result = e.result, end->result_len = e.result_len;
    end->error = e.error, end->error_len = e.error ? strlen(e.error) : 0;
    end->attempt = e.attempt[0] ? strtoll(e.attempt, NULL, 10) : 0;
    end->duration_ms = e.duration_ms[0] ? strtod(e.duration_ms, NULL) : -1;
    snprintf(end->worker, sizeof end->worker, "%s", e.worker);
    end->finished_ms = e.finished_at[0] ? strtoll(e.finished_at, NULL, 10) : 0;
    return 0;
}

JR_CLIENT_EXPORT int jr_client_wait(jr_client_t *c, const char *queue, const char *id, const char *key,
                                    int64_t timeout_ms, jr_client_end_t *end) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_wait(c, queue, id, key, timeout_ms, end);
    sigpipe_restore(&g);
    return rc;
}

JR_CLIENT_EXPORT void jr_client_end_free(jr_client_end_t *end) {
    if (!end) return;
    free(end->result), free(end->error);
    end->result = end->error = NULL;
    end->result_len = end->error_len = 0;
}

/* ---- queues -------------------------------------------------------------- */

static int do_stats(jr_client_t *c, const char *queue, jr_client_stats_t *stats) {
    if (!c) return JR_CLIENT_EINVAL;
    c->err = 0, c->errstr[0] = '\0';
    if (!stats) return cfail(c, JR_CLIENT_EINVAL, "stats is NULL");
    memset(stats, 0, sizeof *stats);
    stats->oldest_ready_ms = stats->paused_since_ms = -1;
    queue = queue_or_default(queue);
    int rc = check_queue_id(c, queue, NULL, 0);
    if (rc || (rc = begin(c))) return rc;
    jr_qstats_t s;
    long long since = -1;
    int paused_unknown = 0;
    jr_qpart_t *qp;
    if ((rc = jr_partmap_get(parts_of(c), c->r, queue, &qp)) || (rc = jr_redis_stats_parts(c->r, qp, &s)))
        return redis_fail(c, rc, "stats");
    if ((rc = jr_redis_paused_since(c->r, &queue, 1, &since))) {
        /* garbage in the paused hash: whether the queue is paused is unknown */
        if (rc != JR_EREDIS || strncmp(jr_redis_errstr(c->r), "WRONGTYPE", 9)) return redis_fail(c, rc, "stats");
        paused_unknown = 1, since = -1;
        if (!s.problem[0]) snprintf(s.problem, sizeof s.problem, "key \"%s\" holds another type", JR_PAUSED_KEY);
    }
    *stats = (jr_client_stats_t){.ready = s.ready, .pending = s.pending, .delayed = s.delayed, .dead = s.dead,
                                 .processed = s.processed, .failed = s.failed, .jobs_per_second = s.rate,
                                 .oldest_ready_ms = s.oldest_ready_ms,
                                 .paused = paused_unknown ? -1 : since >= 0, .paused_since_ms = since};
    if (s.problem[0]) snprintf(c->errstr, sizeof c->errstr, "%s", s.problem); /* a note; c->err stays 0 */
    return 0;
}

static int do_set_paused(jr_client_t *c, const char *queue, int on, int *changed, int *woken) {
    if (!c) return JR_CLIENT_EINVAL;
    c->err = 0, c->errstr[0] = '\0';
    if (changed) *changed = 0;
    if (woken) *woken = 0;
    queue = queue_or_default(queue);
    int rc = check_queue_id(c, queue, NULL, 0);
    if (rc || (rc = begin(c))) return rc;
    int ch = 0, chp = 0;
    double now = 0; /* paused_since is on Redis's clock, like every time in Redis */
    jr_qpart_t *qp;
    if ((on && (rc = jr_redis_time_ms(c->r, &now))) || (rc = jr_redis_pause(c->r, queue, on, (int64_t)now, &ch)) ||
        (rc = jr_partmap_get(parts_of(c), c->r, queue, &qp)))
        return redis_fail(c, rc, on ? "pause" : "resume");
    /* a partitioned queue: every partition too (workers read the partitions) */
    for (unsigned i = 0; qp->n > 1 && i < qp->n; i++)
        if ((rc = jr_redis_pause(c->r, qp->names[i], on, (int64_t)now, &chp)))
            return redis_fail(c, rc, on ? "pause" : "resume");
    if (changed) *changed = ch;
    /* Wake the blocked workers: each reads the paused set again on waking.
     * One that was not blocked reads it with its next fetch anyway. */
    jr_proc_t *procs = NULL;
    size_t n = 0;
    int wrc = jr_redis_proc_list(c->r, &procs, &n), w = 0;
    for (size_t i = 0; !wrc && i < n; i++) {
        if (strcmp(procs[i].role, "worker") || procs[i].client_id <= 0) continue;
        if (jr_redis_unblock(c->r, procs[i].client_id) == 0) w++;
        else if (!jr_redis_ok(c->r)) wrc = JR_EIO;
    }
    jr_procs_free(procs, n);
    if (woken) *woken = wrc ? -1 : w;
    if (wrc) {
        /* Not an error of the call: the change is made. Keep the reason for
         * the CLI's note; drop a broken connection. */
        snprintf(c->errstr, sizeof c->errstr, "%s", jr_redis_errstr(c->r));
        if (!jr_redis_ok(c->r) && c->url) {
            jr_redis_free(c->r);
            c->r = NULL;
        }
    }
    return 0;
}

JR_CLIENT_EXPORT int jr_client_pause(jr_client_t *c, const char *queue, int *changed) {
    int rc = jr_client_set_paused(c, queue, 1, changed, NULL);
    if (!rc) c->errstr[0] = '\0';
    return rc;
}

JR_CLIENT_EXPORT int jr_client_resume(jr_client_t *c, const char *queue, int *changed) {
    int rc = jr_client_set_paused(c, queue, 0, changed, NULL);
    if (!rc) c->errstr[0] = '\0';
    return rc;
}

/* ---- the exported entry points: each call under the SIGPIPE guard ------- */

JR_CLIENT_EXPORT int jr_client_enqueue_many(jr_client_t *c, const jr_client_job_t *jobs, size_t n,
                                            jr_client_result_t *results) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_enqueue_many(c, jobs, NULL, n, results);
    sigpipe_restore(&g);
    return rc;
}

JR_CLIENT_EXPORT int jr_client_enqueue_many_keyed(jr_client_t *c, const jr_client_job_t *jobs, const char *const *keys,
                                                  size_t n, jr_client_result_t *results) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_enqueue_many(c, jobs, keys, n, results);
    sigpipe_restore(&g);
    return rc;
}

static int do_set_partitions(jr_client_t *c, const char *queue, int n, int *before) {
    if (!c) return JR_CLIENT_EINVAL;
    c->err = 0, c->errstr[0] = '\0';
    if (before) *before = 0;
    queue = queue_or_default(queue);
    int rc = check_queue_id(c, queue, NULL, 0);
    if (rc) return rc;
    if (n < 1 || n > JR_PARTITIONS_MAX)
        return cfail(c, JR_CLIENT_EINVAL, "partitions %d of queue \"%s\" must be 1..%d", n, queue, JR_PARTITIONS_MAX);
    if ((rc = begin(c))) return rc;
    unsigned was = 1;
    if ((rc = jr_redis_partitions_set(c->r, queue, (unsigned)n, &was))) return redis_fail(c, rc, "set partitions");
    if (before) *before = (int)was;
    c->parts.max_age_us = 0;
    jr_partmap_free(&c->parts); /* read again at the next use */
    return 0;
}

JR_CLIENT_EXPORT int jr_client_set_partitions(jr_client_t *c, const char *queue, int n, int *before) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_set_partitions(c, queue, n, before);
    sigpipe_restore(&g);
    return rc;
}

JR_CLIENT_EXPORT int jr_client_cancel(jr_client_t *c, const char *queue, const char *id,
                                      jr_client_cancel_t *outcome) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_cancel(c, queue, id, NULL, outcome);
    sigpipe_restore(&g);
    return rc;
}

JR_CLIENT_EXPORT int jr_client_cancel_keyed(jr_client_t *c, const char *queue, const char *id, const char *key,
                                            jr_client_cancel_t *outcome) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_cancel(c, queue, id, key, outcome);
    sigpipe_restore(&g);
    return rc;
}

JR_CLIENT_EXPORT int jr_client_job_show(jr_client_t *c, const char *queue, const char *id,
                                        jr_client_job_info_t **info) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_job_show(c, queue, id, NULL, info);
    sigpipe_restore(&g);
    return rc;
}

JR_CLIENT_EXPORT int jr_client_job_show_keyed(jr_client_t *c, const char *queue, const char *id, const char *key,
                                              jr_client_job_info_t **info) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_job_show(c, queue, id, key, info);
    sigpipe_restore(&g);
    return rc;
}

JR_CLIENT_EXPORT int jr_client_stats(jr_client_t *c, const char *queue, jr_client_stats_t *stats) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_stats(c, queue, stats);
    sigpipe_restore(&g);
    return rc;
}

int jr_client_set_paused(jr_client_t *c, const char *queue, int on, int *changed, int *woken) {
    sigpipe_guard_t g;
    sigpipe_block(&g);
    int rc = do_set_paused(c, queue, on, changed, woken);
    sigpipe_restore(&g);
    return rc;
}
