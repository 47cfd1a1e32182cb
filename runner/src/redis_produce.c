/* The Redis layer, produce part: see redis_produce.h. */
#include "redis_produce.h"
#include "redis_finished.h"
#include "redis_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "jr.h"
#include "jr_limits.h"
#include "log.h"
#include "util.h"

/* Append FCALL jr_register for `queue` unless this connection did already.
 * Returns 1 if appended, 0 if not needed, or an error. Only the first
 * REGISTERED_MAX queues are remembered: later ones are registered again on
 * every call (harmless, SADD of a member already there). */
static int append_register(jr_redis_t *r, const char *queue) {
    for (size_t i = 0; i < r->nregistered; i++)
        if (strcmp(r->registered[i], queue) == 0) return 0;
    const char *argv[] = {"FCALL", "jr_register", "2", JR_REGISTRY_KEY, JR_REGISTRY_WAKE_KEY, queue};
    int rc = jri_append_argv(r, 6, argv, NULL);
    if (rc) return rc;
    if (r->nregistered < REGISTERED_MAX) {
        char *copy = strdup(queue);
        if (copy) r->registered[r->nregistered++] = copy;
    }
    return 1;
}

/* Per-job strings of an enqueue call, formatted before the argv points at
 * them. */
typedef struct enq_scratch {
    char when[48], npairs[8], uniq[JR_UNIQ_KEY_MAX], nums[JR_ENVELOPE_NUMBUF];
} enq_scratch_t;

/* Append FCALL jr_enqueue_many for jobs[0..n) (all of one queue). */
static int append_enqueue_many(jr_redis_t *r, const jr_enqueue_t *jobs, size_t n, int64_t window_ms) {
    jr_qkeys_t k;
    jr_qkeys(&k, jobs[0].queue);
    size_t max = 12 + n * (4 + 2 * JR_ENVELOPE_MAX_FIELDS);
    /* argv, lens, then the per-job strings, in the connection's scratch. */
    char *buf = jri_scratch(r, max * (sizeof(const char *) + sizeof(size_t)) + n * sizeof(enq_scratch_t));
    if (!buf) return JR_ENOMEM;
    const char **argv = (const char **)(void *)buf;
    size_t *lens = (size_t *)(void *)(buf + max * sizeof *argv);
    enq_scratch_t *sc = (enq_scratch_t *)(void *)(buf + max * (sizeof *argv + sizeof *lens));
    char nkeys[16], window[24];
    size_t a = 0, nuniq = 0;
    argv[a++] = "FCALL", argv[a++] = "jr_enqueue_many", argv[a++] = nkeys;
    argv[a++] = k.ready, argv[a++] = k.delayed, argv[a++] = k.wake;
    argv[a++] = k.seq, argv[a++] = k.ids, argv[a++] = k.wheel, argv[a++] = k.wheel_n; /* every key it reaches */
    for (size_t i = 0; i < n; i++)
        if (jobs[i].id && jobs[i].id[0]) {
            if (jr_uniq_key(sc[i].uniq, sizeof sc[i].uniq, jobs[i].queue, jobs[i].id, strlen(jobs[i].id)))
                return jri_fail(r, JR_EINVAL, "job id \"%.64s\": queue name or id too long for a key", jobs[i].id);
            argv[a++] = sc[i].uniq;
            nuniq++;
        }
    snprintf(nkeys, sizeof nkeys, "%zu", 7 + nuniq);
    snprintf(window, sizeof window, "%lld", (long long)(window_ms > 0 ? window_ms : JR_UNIQ_DEFAULT_MS));
    argv[a++] = window;
    for (size_t i = 0; i < a; i++) lens[i] = strlen(argv[i]);
    for (size_t i = 0; i < n; i++) {
        const jr_enqueue_t *j = &jobs[i];
        if (j->at_us > 0)
            snprintf(sc[i].when, sizeof sc[i].when, "@%lld.%03lld", (long long)(j->at_us / 1000),
                     (long long)(j->at_us % 1000));
        else if (j->delay_ms > 0)
            snprintf(sc[i].when, sizeof sc[i].when, "+%lld", (long long)j->delay_ms);
        else
            sc[i].when[0] = '\0';
        const char *names[JR_ENVELOPE_MAX_FIELDS], *vals[JR_ENVELOPE_MAX_FIELDS];
        size_t vlens[JR_ENVELOPE_MAX_FIELDS];
        size_t nf = jr_envelope_encode(&j->env, names, vals, vlens, sc[i].nums, sizeof sc[i].nums);
        snprintf(sc[i].npairs, sizeof sc[i].npairs, "%zu", nf);
        const char *id = j->id && j->id[0] ? j->id : "";
        argv[a] = sc[i].when, lens[a] = strlen(sc[i].when), a++;
        argv[a] = id, lens[a] = strlen(id), a++;
        argv[a] = sc[i].npairs, lens[a] = strlen(sc[i].npairs), a++;
        for (size_t f = 0; f < nf; f++) {
            argv[a] = names[f], lens[a] = strlen(names[f]), a++;
            argv[a] = vals[f], lens[a] = vlens[f], a++;
        }
    }
    return jri_append_argv(r, (int)a, argv, lens);
}

/* 1 if job j can go as a plain XADD (see append_ready_xadds): due now, no
 * id (so no idempotency window, nothing to index). */
static int plain_ready(const jr_enqueue_t *j) {
    return (!j->id || !j->id[0]) && j->at_us == 0 && j->delay_ms == 0;
}

/* Bytes of one RESP bulk string of length len (header, data, CRLF). */
static size_t resp_bulk_size(size_t len) { return 1 + 20 + 2 + len + 2; }

/* Write one RESP bulk string at p; returns the end. */
static char *resp_bulk(char *p, const char *s, size_t len) {
    p += sprintf(p, "$%zu\r\n", len);
    memcpy(p, s, len);
    p += len;
    *p++ = '\r', *p++ = '\n';
    return p;
}

/* Append, for jobs[0..n) (all of one queue, all plain_ready, checked by
 * check_job), FCALL jr_ready_prepare jr:{Q}:ready, then one
 * XADD jr:{Q}:ready NOMKSTREAM * <fields> per job, with exactly the fields
 * jr_enqueue_many would XADD (jr_envelope_encode's). Redis runs each XADD
 * with no Lua around it: ~1.7 us of its CPU per job against ~3 us for the
 * same job inside jr_enqueue_many (bench/RESULTS.md). The commands are
 * formatted into one buffer (RESP) and appended at once. */
static int append_ready_xadds(jr_redis_t *r, const jr_enqueue_t *jobs, size_t n) {
    char ready[JR_KEY_MAX];
    jr_queue_key(ready, jobs[0].queue, JR_QK_READY);
    const char *prep[] = {"FCALL", "jr_ready_prepare", "1", ready};
    int rc = jri_append_argv(r, 4, prep, NULL);
    if (rc) return rc;
    size_t klen = strlen(ready), size = 0;
    for (size_t i = 0; i < n; i++) {
        const jr_envelope_t *e = &jobs[i].env;
        size += 16 + resp_bulk_size(4) + resp_bulk_size(klen) + resp_bulk_size(10) + resp_bulk_size(1);
        size += JR_ENVELOPE_MAX_FIELDS * (resp_bulk_size(8) + resp_bulk_size(24)); /* names, numbers */
        size += e->handler_len + (e->payload ? e->payload_len : 0);
    }
    char *buf = jri_scratch(r, size), *p = buf;
    if (!buf) return JR_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *names[JR_ENVELOPE_MAX_FIELDS], *vals[JR_ENVELOPE_MAX_FIELDS];
        size_t vlens[JR_ENVELOPE_MAX_FIELDS];
        char nums[JR_ENVELOPE_NUMBUF];
        size_t nf = jr_envelope_encode(&jobs[i].env, names, vals, vlens, nums, sizeof nums);
        p += sprintf(p, "*%zu\r\n", 4 + 2 * nf);
        p = resp_bulk(p, "XADD", 4);
        p = resp_bulk(p, ready, klen);
        p = resp_bulk(p, "NOMKSTREAM", 10);
        p = resp_bulk(p, "*", 1);
        for (size_t f = 0; f < nf; f++) {
            p = resp_bulk(p, names[f], strlen(names[f]));
            p = resp_bulk(p, vals[f], vlens[f]);
        }
    }
    return jri_append_formatted(r, buf, (size_t)(p - buf));
}

/* Check job i against the contract (the bounds of jr_limits.h), the way the
 * Lua side will, so that a call is refused whole before anything is sent.
 * "@" times are checked against our clock here and Redis's there. Returns 0,
 * or JR_EINVAL with the reason in r->err (the connection stays usable). */
static int check_job(jr_redis_t *r, size_t i, const jr_enqueue_t *j, int64_t now_ms) {
    char why[JR_ERRLEN - 64];
    const jr_envelope_t *e = &j->env;
    const char *rule;
    why[0] = '\0';
    if ((rule = j->partition ? jr_contract_key_queue(j->queue, j->queue ? strlen(j->queue) : 0)
                             : jr_contract_queue_name(j->queue, j->queue ? strlen(j->queue) : 0)))
        snprintf(why, sizeof why, "queue name \"%.*s\" %s", 64, j->queue ? j->queue : "", rule);
    else if (j->id && j->id[0] && (rule = jr_contract_job_id(j->id, strlen(j->id))))
        snprintf(why, sizeof why, "job id \"%.64s%s\" %s", j->id, strlen(j->id) > 64 ? "..." : "", rule);
    else if ((rule = jr_contract_handler_name(e->handler, e->handler ? e->handler_len : 0)))
        snprintf(why, sizeof why, "handler name \"%.*s\" %s", (int)(e->handler_len < 64 ? e->handler_len : 64),
                 e->handler ? e->handler : "", rule);
    else if (!e->payload && e->payload_len > 0)
        snprintf(why, sizeof why, "payload is NULL with a length");
    else if (j->delay_ms < 0 || j->delay_ms > JR_DELAY_MAX_MS)
        snprintf(why, sizeof why, "delay %lld ms is not in 0..%lld", (long long)j->delay_ms,
                 (long long)JR_DELAY_MAX_MS);
    else if (j->at_us < 0 || (j->at_us > 0 && j->at_us / 1000 > now_ms + JR_DELAY_MAX_MS))
        snprintf(why, sizeof why, "due time %lld us is more than %lld ms after now", (long long)j->at_us,
                 (long long)JR_DELAY_MAX_MS);
    else if (j->uniq_ms < 0 || j->uniq_ms > JR_UNIQ_MAX_MS)
        snprintf(why, sizeof why, "idempotency window %lld ms is not in 0..%lld", (long long)j->uniq_ms,
                 (long long)JR_UNIQ_MAX_MS);
    else if (e->attempt > JR_ATTEMPTS_MAX || e->max_attempts > JR_ATTEMPTS_MAX)
        snprintf(why, sizeof why, "attempt %u / max attempts %u: at most %d", e->attempt, e->max_attempts,
                 JR_ATTEMPTS_MAX);
    else if (e->timeout_ms < 0 || e->timeout_ms > JR_TIMEOUT_MAX_MS)
        snprintf(why, sizeof why, "timeout %lld ms is not in 1..%lld", (long long)e->timeout_ms,
                 (long long)JR_TIMEOUT_MAX_MS);
    else if (e->backoff_ms < 0 || e->backoff_ms > JR_BACKOFF_MAX_MS)
        snprintf(why, sizeof why, "backoff %lld ms is not in 1..%lld", (long long)e->backoff_ms,
                 (long long)JR_BACKOFF_MAX_MS);
    if (!why[0]) return 0;
    snprintf(r->err, sizeof r->err, "enqueue refused, nothing sent: job %zu: %s", i + 1, why);
    return JR_EINVAL;
}

/* Forget that this connection registered `queue` (its jr_register was
 * refused), so that the next enqueue to it registers it again. */
static void forget_registered(jr_redis_t *r, const char *queue) {
    for (size_t i = 0; i < r->nregistered; i++)
        if (strcmp(r->registered[i], queue) == 0) {
            free(r->registered[i]);
            r->registered[i] = r->registered[--r->nregistered];
            return;
        }
}

/* Sort job positions by queue name, then position (qsort_r with the jobs). */
static int cmp_job_pos(const void *a, const void *b, void *arg) {
    const jr_enqueue_t *jobs = arg;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = strcmp(jobs[x].queue, jobs[y].queue);
    return c ? c : (x > y) - (x < y);
}

/* Record the reason of jobs' outcomes: its index in reasons, or UINT32_MAX
 * when it cannot be kept (no list, no memory). */
static uint32_t add_reason(jr_strlist_t *reasons, const char *text) {
    if (!reasons || jr_strlist_push(reasons, text)) return UINT32_MAX;
    return (uint32_t)(reasons->n - 1);
}

/* Set the outcome of sorted positions [from, to) (order maps them to jobs). */
static void set_outcome(jr_enq_outcome_t *out, const size_t *order, size_t from, size_t to, unsigned char status,
                        uint32_t why) {
    for (size_t p = from; p < to; p++) out[order[p]].status = status, out[order[p]].why = why;
}

/* Jobs per FCALL jr_enqueue_many (see jr_redis_set_enqueue_chunk). */
static size_t enqueue_chunk = JR_ENQUEUE_CHUNK;

size_t jr_redis_set_enqueue_chunk(size_t jobs) {
    size_t old = enqueue_chunk;
    if (jobs > 0) enqueue_chunk = jobs;
    return old;
}

/* One call of a batch in flight: the sorted positions [from, to) of its
 * jobs, and whether a jr_register went before it. */
typedef struct enq_call {
    size_t from, to;
    int reg;
    int plain; /* jr_ready_prepare + one XADD per job, not jr_enqueue_many */
} enq_call_t;

/* Read the reply of a jr_register sent before a call for queue q. A
 * refusal forgets the registration (the next call registers again), though
 * the call's jobs are still written. A registry key of another type
 * (jr_register checks their types before writing and writes nothing) costs
 * the registration only: logged once per connection (again when the text
 * changes), and the call goes on. Any other refusal makes the call fail
 * (*first_err if none yet). Returns a transport error only. */
static int recv_register(jr_redis_t *r, const char *q, int *first_err) {
    redisReply *rep;
    int rc = jri_recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR) {
        forget_registered(r, q);
        if (jr_redis_registry_garbage(rep->str)) {
            if (strcmp(r->registry_err, rep->str)) {
                snprintf(r->registry_err, sizeof r->registry_err, "%s", rep->str);
                jr_log_kv(JR_LOG_ERROR, "the queue registry holds garbage; enqueueing without registering the queue",
                          "key", strstr(rep->str, JR_REGISTRY_WAKE_KEY) ? JR_REGISTRY_WAKE_KEY : JR_REGISTRY_KEY,
                          "queue", q, "error", rep->str, NULL);
            }
        } else if (!*first_err) {
            *first_err = jri_fail(r, JR_EREDIS, "queue %s: registering the queue failed: %s", q, rep->str);
        }
    } else if (r->registry_err[0]) {
        r->registry_err[0] = '\0';
        jr_log_kv(JR_LOG_INFO, "the queue registry takes registrations again", "key", JR_REGISTRY_KEY, NULL);
    }
    freeReplyObject(rep);
    return 0;
}

int jr_redis_registry_garbage(const char *err) {
    return !strncmp(err, "ERR jobrunner: jr_register: key ", 32) && strstr(err, " holds a ") != NULL;
}

/* Read the replies of call c (its jr_register's first if c->reg) and set
 * its jobs' outcomes. A refusal by Redis refuses c's jobs only (the first
 * such error goes to *first_err) and returns 0: later calls are still read.
 * On a Redis Cluster, the answer the connection layer gives for a node that
 * went down (jr_redis_node_down) makes c's jobs UNKNOWN, not REFUSED: the
 * call may have been sent and run before the node was lost.
 * Returns an error only when no more can be read (transport, protocol); the
 * caller then owns the outcomes of c and what follows. */
static int recv_call(jr_redis_t *r, const jr_enqueue_t *sorted, const size_t *order, const enq_call_t *c,
                     char (*ids)[JR_ID_MAX], jr_enq_outcome_t *out, jr_strlist_t *reasons, int *first_err) {
    size_t from = c->from, cnt = c->to - c->from;
    const char *q = sorted[from].queue;
    int rc = c->reg ? recv_register(r, q, first_err) : 0;
    if (rc) return rc;
    redisReply *rep;
    if ((rc = jri_recv_reply(r, &rep, r->timeout_us))) return rc;
    if (rep->type == REDIS_REPLY_ERROR) {
        char why[JR_ERRLEN];
        /* a Redis Cluster node that went down with the call sent or queued
         * (cluster.c, node_down): the call may have run, so not "refused" */
        int lost = jr_redis_node_down(rep->str);
        snprintf(why, sizeof why, lost ? "queue %s: %zu job%s maybe written, the answer lost: %s"
                                       : "queue %s: Redis refused %zu job%s: %s",
                 q, cnt, cnt == 1 ? "" : "s", rep->str);
        jri_explain(r, why, sizeof why);
        set_outcome(out, order, from, from + cnt, lost ? JR_ENQ_UNKNOWN : JR_ENQ_REFUSED, add_reason(reasons, why));
        if (!*first_err) *first_err = jri_fail(r, JR_EREDIS, "%s", why);
    } else {
        int ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 * cnt;
        for (size_t x = 0; ok && x < cnt; x++)
            ok = rep->element[2 * x]->type == REDIS_REPLY_STRING &&
                 rep->element[2 * x + 1]->type == REDIS_REPLY_INTEGER;
        if (!ok) {
            freeReplyObject(rep);
            return jri_fail(r, JR_EPROTO, "jr_enqueue_many: unexpected reply");
        }
        for (size_t x = 0; x < cnt; x++) {
            size_t i = order[from + x];
            if (ids) snprintf(ids[i], JR_ID_MAX, "%s", rep->element[2 * x]->str);
            out[i].status = rep->element[2 * x + 1]->integer ? JR_ENQ_CREATED : JR_ENQ_EXISTED;
        }
    }
    freeReplyObject(rep);
    return 0;
}

/* recv_call for a plain call (append_ready_xadds): the replies of its
 * jr_register (if c->reg), jr_ready_prepare, then one per XADD. Each job's
 * outcome is its own XADD's: an entry id is CREATED, an error reply (OOM,
 * WRONGTYPE, a stream out of ids) REFUSED with that error (but a Cluster
 * node's going down, UNKNOWN: see recv_call), nil (the stream
 * was missing: jr_ready_prepare refused, or another client deleted or
 * renamed it in between — Redis serves other clients between the 16 KB
 * reads of a pipeline) REFUSED; a nil writes nothing (NOMKSTREAM).
 * Outcomes are set as replies arrive, so a transport error part way
 * leaves the jobs already read with theirs (the caller makes only the
 * NOT_SENT ones UNKNOWN). */
static int recv_plain(jr_redis_t *r, const jr_enqueue_t *sorted, const size_t *order, const enq_call_t *c,
                      char (*ids)[JR_ID_MAX], jr_enq_outcome_t *out, jr_strlist_t *reasons, int *first_err) {
    const char *q = sorted[c->from].queue;
    char prep_err[JR_ERRLEN] = "", why[JR_ERRLEN + 2 * JR_KEY_MAX + 96], last[sizeof why] = "";
    uint32_t last_why = UINT32_MAX;
    redisReply *rep;
    int rc = c->reg ? recv_register(r, q, first_err) : 0;
    if (rc) return rc;
    if ((rc = jri_recv_reply(r, &rep, r->timeout_us))) return rc;
    if (rep->type == REDIS_REPLY_ERROR) snprintf(prep_err, sizeof prep_err, "%s", rep->str);
    else if (rep->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_ready_prepare: unexpected reply");
    }
    freeReplyObject(rep);
    for (size_t p = c->from; p < c->to; p++) {
        size_t i = order[p];
        if ((rc = jri_recv_reply(r, &rep, r->timeout_us))) return rc;
        if (rep->type == REDIS_REPLY_STRING) {
            if (ids) snprintf(ids[i], JR_ID_MAX, "%s", rep->str);
            out[i].status = JR_ENQ_CREATED;
            freeReplyObject(rep);
            continue;
        }
        int lost = 0;
        if (rep->type == REDIS_REPLY_ERROR && (lost = jr_redis_node_down(rep->str))) { /* as in recv_call */
            snprintf(why, sizeof why, "queue %s: the job maybe written, the answer lost: %s", q, rep->str);
        } else if (rep->type == REDIS_REPLY_ERROR) { /* jr_ready_prepare's refusal says more (which key, which type) */
            snprintf(why, sizeof why, "queue %s: Redis refused the job: %s", q, prep_err[0] ? prep_err : rep->str);
            jri_explain(r, why, sizeof why);
        } else if (rep->type == REDIS_REPLY_NIL) {
            char ready[JR_KEY_MAX];
            jr_queue_key(ready, q, JR_QK_READY);
            snprintf(why, sizeof why, "queue %s: not written, the stream %s was missing: %s", q, ready,
                     prep_err[0] ? prep_err : "deleted or renamed after jr_ready_prepare");
        } else {
            freeReplyObject(rep);
            return jri_fail(r, JR_EPROTO, "XADD: unexpected reply");
        }
        freeReplyObject(rep);
        if (strcmp(why, last) != 0) { /* one reason per run of equal ones, not one per job */
            snprintf(last, sizeof last, "%s", why);
            last_why = add_reason(reasons, why);
        }
        out[i].status = lost ? JR_ENQ_UNKNOWN : JR_ENQ_REFUSED, out[i].why = last_why;
        if (!*first_err) *first_err = jri_fail(r, JR_EREDIS, "%s", why);
    }
    return 0;
}

/* Read the reply of the WAIT sent after the last call of an enqueue (see
 * jr_redis_append_wait). When fewer replicas than asked confirmed, or Redis
 * refused WAIT, every CREATED job of out[0..n) becomes UNKNOWN, its id
 * kept: written to the primary, perhaps to no replica. That is then the
 * call's error (*first_err, r's text, unless an earlier error is there),
 * but only if some job was CREATED: EXISTED jobs were written by an
 * earlier call, which this one cannot confirm either way. Returns 0 or a
 * transport error. */
static int recv_confirm(jr_redis_t *r, size_t n, jr_enq_outcome_t *out, jr_strlist_t *reasons, int *first_err) {
    int rc = jr_redis_recv_wait(r, NULL);
    if (rc != JR_EREPLICAS && rc != JR_EREDIS) return rc;
    char why[JR_ERRLEN];
    snprintf(why, sizeof why, "written to the primary, but %s: it may not survive a failover", jr_redis_errstr(r));
    uint32_t k = UINT32_MAX;
    size_t created = 0;
    for (size_t i = 0; i < n; i++)
        if (out[i].status == JR_ENQ_CREATED) {
            if (!created++) k = add_reason(reasons, why);
            out[i].status = JR_ENQ_UNKNOWN, out[i].why = k;
        }
    if (created && !*first_err) {
        memcpy(r->err, why, sizeof why);
        *first_err = rc;
    }
    return 0;
}

int jr_redis_enqueue_each(jr_redis_t *r, const jr_enqueue_t *jobs, size_t n, char (*ids)[JR_ID_MAX],
                          jr_enq_outcome_t *out, jr_strlist_t *reasons) {
    for (size_t i = 0; i < n; i++) {
        out[i].status = JR_ENQ_NOT_SENT, out[i].why = UINT32_MAX;
        if (ids) snprintf(ids[i], JR_ID_MAX, "%s", jobs[i].id ? jobs[i].id : "");
    }
    if (n == 0) return 0;
    /* Every job is checked before anything is sent. */
    int64_t now = jr_wall_ms();
    size_t bad = n;
    char first[JR_ERRLEN];
    for (size_t i = 0; i < n; i++)
        if (check_job(r, i, &jobs[i], now)) {
            if (bad == n) bad = i, snprintf(first, sizeof first, "%s", r->err);
            out[i].status = JR_ENQ_REFUSED, out[i].why = add_reason(reasons, r->err);
        }
    if (bad < n) {
        char msg[64];
        snprintf(msg, sizeof msg, "not sent: job %zu of the call was refused", bad + 1);
        uint32_t why = add_reason(reasons, msg);
        for (size_t i = 0; i < n; i++)
            if (out[i].status == JR_ENQ_NOT_SENT) out[i].why = why;
        snprintf(r->err, sizeof r->err, "%s", first);
        return JR_EINVAL;
    }
    /* One call per run of jobs of one queue (and one uniq window), at most
     * enqueue_chunk jobs, with the jobs sorted by queue so that a random mix
     * of queues still makes few calls; each queue's jobs keep their order.
     * The calls are pipelined: call k+1 is formatted and sent before call
     * k's replies are read, so the producer formats while Redis runs the
     * previous call; at most ENQ_AHEAD calls wait for their replies, so
     * replies never pile up. */
    enum { ENQ_AHEAD = 2 };
    enq_call_t calls[ENQ_AHEAD + 1]; /* a ring: call c is calls[c % (ENQ_AHEAD + 1)] */
    size_t *order = malloc(n * sizeof *order);
    jr_enqueue_t *sorted = malloc(n * sizeof *sorted);
    int rc = 0, first_err = 0;
    char stop[JR_ERRLEN + 64];
    const char *how = "sent, without an answer"; /* what became of the calls in flight on a stop */
    size_t nsent = 0, nread = 0; /* calls sent, calls whose replies were read */
    size_t unknown = 0, pos = 0; /* outcomes to set on a stop: [unknown, pos) sent, [pos, n) not */
    int waited = 0; /* a WAIT followed the last call */
    if (!order || !sorted) {
        rc = jri_fail(r, JR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) order[i] = i;
    qsort_r(order, n, sizeof *order, cmp_job_pos, (void *)jobs);
    for (size_t p = 0; p < n; p++) sorted[p] = jobs[order[p]];
    while (pos < n || nread < nsent) {
        if (pos < n) {
            size_t i = pos, j = i + 1;
            int plain = plain_ready(&sorted[i]);
            while (j < n && j - i < enqueue_chunk && !strcmp(sorted[j].queue, sorted[i].queue) &&
                   plain_ready(&sorted[j]) == plain && (plain || sorted[j].uniq_ms == sorted[i].uniq_ms))
                j++;
            plain = plain && j - i >= 2; /* one job: jr_enqueue_many is one command, this two */
            if ((rc = append_register(r, sorted[i].queue)) < 0) goto stopped; /* nothing of it was sent */
            enq_call_t *c = &calls[nsent % (ENQ_AHEAD + 1)];
            c->from = i, c->to = j, c->reg = rc, c->plain = plain;
            if ((rc = plain ? append_ready_xadds(r, sorted + i, j - i)
                            : append_enqueue_many(r, sorted + i, j - i, sorted[i].uniq_ms)))
                goto stopped;
            pos = j, nsent++; /* from here on, sent in part or whole */
            /* With redis.wait_replicas, WAIT goes in the last call's write. */
            if (pos == n && (rc = jr_redis_append_wait(r)) < 0) goto stopped;
            if (pos == n) waited = rc, rc = 0;
            if ((rc = jr_redis_flush(r))) {
                how = "sent, maybe in part, without an answer";
                goto stopped;
            }
        }
        while (nread < nsent && (nsent - nread > ENQ_AHEAD - 1 || pos == n)) {
            const enq_call_t *c = &calls[nread % (ENQ_AHEAD + 1)];
            if ((rc = c->plain ? recv_plain(r, sorted, order, c, ids, out, reasons, &first_err)
                               : recv_call(r, sorted, order, c, ids, out, reasons, &first_err))) {
                how = rc == JR_EPROTO ? "sent, the answer not understood" : "sent, but the answer was lost";
                goto stopped;
            }
            nread++;
        }
    }
    if (waited && (rc = recv_confirm(r, n, out, reasons, &first_err))) {
        snprintf(stop, sizeof stop, "written to the primary, but the answer of WAIT was lost: %s", jr_redis_errstr(r));
        uint32_t why = add_reason(reasons, stop);
        for (size_t i = 0; i < n; i++) /* its replicas unknown */
            if (out[i].status == JR_ENQ_CREATED) out[i].status = JR_ENQ_UNKNOWN, out[i].why = why;
    }
    goto out;
stopped:
    /* the calls sent and not read, and the one being sent: their answer is unknown */
    unknown = nread < nsent ? calls[nread % (ENQ_AHEAD + 1)].from : pos;
    if (unknown < pos) {
        snprintf(stop, sizeof stop, "%s: %s", how, r->err);
        uint32_t why = add_reason(reasons, stop);
        for (size_t p = unknown; p < pos; p++) /* a plain call read in part keeps what was read */
            if (out[order[p]].status == JR_ENQ_NOT_SENT) out[order[p]].status = JR_ENQ_UNKNOWN, out[order[p]].why = why;
    }
    if (jr_redis_wait_replicas(r) > 0) { /* no WAIT was read: nothing written is confirmed by a replica */
        snprintf(stop, sizeof stop, "written to the primary, but not confirmed by the replicas (%s): %.300s",
                 how, r->err);
        uint32_t why = UINT32_MAX;
        for (size_t p = 0; p < pos; p++)
            if (out[order[p]].status == JR_ENQ_CREATED) {
                if (why == UINT32_MAX) why = add_reason(reasons, stop);
                out[order[p]].status = JR_ENQ_UNKNOWN, out[order[p]].why = why;
            }
    }
out:
    if (rc && pos < n && order) { /* the rest was never sent */
        snprintf(stop, sizeof stop, "not sent: %s", r->err);
        set_outcome(out, order, pos, n, JR_ENQ_NOT_SENT, add_reason(reasons, stop));
    }
    free(order), free(sorted);
    return rc ? rc : first_err;
}

int jr_redis_enqueue(jr_redis_t *r, const jr_enqueue_t *jobs, size_t n, char (*ids)[JR_ID_MAX],
                     int *created) {
    if (n == 0) return 0;
    jr_enq_outcome_t *out = malloc(n * sizeof *out);
    if (!out) return jri_fail(r, JR_ENOMEM, "out of memory");
    int rc = jr_redis_enqueue_each(r, jobs, n, ids, out, NULL);
    for (size_t i = 0; created && i < n; i++) created[i] = out[i].status == JR_ENQ_CREATED;
    free(out);
    return rc;
}

/* The keys of a job call: key which[i] of queue for each i < n (the last
 * two: wheel, wheel:n, which every job function reaches), then the uniq key
 * of id if `uniq`, into keys[] (storage in buf). JR_EINVAL (with r->err) if
 * a key would not fit. */
static int job_keys(jr_redis_t *r, const char *queue, const char *id, const enum jr_qkey *which, size_t n, int uniq,
                    char (*buf)[JR_UNIQ_KEY_MAX], const char **keys, size_t *nkeys) {
    for (size_t i = 0; i < n; i++) {
        if (jr_queue_key(buf[i], queue, which[i]))
            return jri_fail(r, JR_EINVAL, "queue name of %zu bytes is longer than %d", strlen(queue), JR_QUEUE_MAX);
        keys[i] = buf[i];
    }
    if (uniq) {
        if (jr_uniq_key(buf[n], sizeof buf[n], queue, id, strlen(id)))
            return jri_fail(r, JR_EINVAL, "job id \"%.64s\": queue name or id too long for a key", id);
        keys[n] = buf[n];
        n++;
    }
    *nkeys = n;
    return 0;
}

/* FCALL fn with the keys of job_keys and the one argument id; with uniq
 * (jr_cancel, jr_delete) also jr:{Q}:waiters jr:{Q}:done after the uniq key
 * (revision 20: a waiting job removed is told to those waiting for it). */
static int job_fcall(jr_redis_t *r, const char *fn, const char *queue, const char *id, const enum jr_qkey *which,
                     size_t n, int uniq, redisReply **out) {
    char buf[10][JR_UNIQ_KEY_MAX], nkeys[8];
    const char *argv[18];
    argv[0] = "FCALL", argv[1] = fn, argv[2] = nkeys;
    size_t nk = 0;
    int rc = job_keys(r, queue, id, which, n, uniq, buf, argv + 3, &nk);
    if (rc) return rc;
    if (uniq) {
        jr_queue_key(buf[nk], queue, JR_QK_WAITERS), argv[3 + nk] = buf[nk], nk++;
        jr_queue_key(buf[nk], queue, JR_QK_DONE), argv[3 + nk] = buf[nk], nk++;
    }
    snprintf(nkeys, sizeof nkeys, "%zu", nk);
    argv[3 + nk] = id;
    return jri_exec_argv(r, out, (int)(4 + nk), argv, NULL);
}

int jr_redis_job_locate(jr_redis_t *r, const char *queue, const char *id, jr_jobinfo_t *info) {
    static const enum jr_qkey names[] = {JR_QK_READY, JR_QK_DELAYED, JR_QK_IDS, JR_QK_DEAD, JR_QK_WHEEL, JR_QK_WHEEL_N};
    jri_batch_reset(&info->fields);
    redisReply *rep;
    int rc = job_fcall(r, "jr_locate", queue, id, names, 6, 0, &rep);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 8 || rep->element[7]->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_locate: unexpected reply");
    }
    jri_copy_str(info->state, sizeof info->state, rep->element[0]);
    jri_copy_str(info->entry, sizeof info->entry, rep->element[2]);
    jri_copy_str(info->due, sizeof info->due, rep->element[3]);
    jri_copy_str(info->consumer, sizeof info->consumer, rep->element[4]);
    info->idle_ms = rep->element[5]->type == REDIS_REPLY_INTEGER ? rep->element[5]->integer : 0;
    info->deliveries = rep->element[6]->type == REDIS_REPLY_INTEGER ? rep->element[6]->integer : 0;
    /* The fields become one entry [entry or id, fields] of info->fields. */
    redisReply *entries = calloc(1, sizeof *entries), *en = calloc(1, sizeof *en), *name = calloc(1, sizeof *name);
    redisReply **pe = malloc(sizeof *pe), **pn = malloc(2 * sizeof *pn);
    char *idcopy = strdup(info->entry[0] ? info->entry : id);
    if (!entries || !en || !name || !pe || !pn || !idcopy) {
        free(entries), free(en), free(name), free(pe), free(pn), free(idcopy);
        freeReplyObject(rep);
        return jri_fail(r, JR_ENOMEM, "out of memory");
    }
    name->type = REDIS_REPLY_STRING, name->str = idcopy, name->len = strlen(idcopy);
    en->type = REDIS_REPLY_ARRAY, en->elements = 2, en->element = pn;
    pn[0] = name, pn[1] = rep->element[7];
    rep->element[7] = NULL; /* moved: freeReplyObject skips NULL elements */
    entries->type = REDIS_REPLY_ARRAY, entries->elements = 1, entries->element = pe;
    pe[0] = en;
    freeReplyObject(rep);
    rc = jri_batch_of_entries(r, "job", entries, &info->fields);
    if (rc || strcmp(info->state, "not found")) return rc;
    /* not waiting, running or dead: a finished record (keep_finished)? */
    jr_batch_t fin = {0};
    int got = jr_redis_finished_get(r, queue, id, &fin);
    if (got == 1) {
        jr_batch_free(&info->fields);
        info->fields = fin;
        snprintf(info->state, sizeof info->state, "finished");
        snprintf(info->entry, sizeof info->entry, "%s", fin.v[0].id);
        return 0;
    }
    jr_batch_free(&fin);
    return got < 0 ? got : 0;
}

int jr_redis_job_change(jr_redis_t *r, const char *fn, const char *queue, const char *id, char *state,
                        size_t statelen, char *detail, size_t detaillen) {
    static const enum jr_qkey cancel[] = {JR_QK_READY, JR_QK_DELAYED, JR_QK_IDS, JR_QK_CANCELLED, JR_QK_WHEEL,
                                          JR_QK_WHEEL_N};
    static const enum jr_qkey run_now[] = {JR_QK_READY, JR_QK_DELAYED, JR_QK_IDS, JR_QK_WHEEL, JR_QK_WHEEL_N};
    static const enum jr_qkey del[] = {JR_QK_READY, JR_QK_DELAYED, JR_QK_IDS, JR_QK_DEAD, JR_QK_WHEEL, JR_QK_WHEEL_N};
    redisReply *rep;
    int rc;
    if (!strcmp(fn, "jr_cancel")) rc = job_fcall(r, fn, queue, id, cancel, 6, 1, &rep);
    else if (!strcmp(fn, "jr_run_now")) rc = job_fcall(r, fn, queue, id, run_now, 5, 0, &rep);
    else if (!strcmp(fn, "jr_delete")) rc = job_fcall(r, fn, queue, id, del, 6, 1, &rep);
    else return jri_fail(r, JR_EINVAL, "no job function %s", fn);
    if (rc) return rc;
    if (detail && detaillen) detail[0] = '\0';
    if (rep->type == REDIS_REPLY_STRING) {
        jri_copy_str(state, statelen, rep);
    } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[0]->type == REDIS_REPLY_STRING) {
        jri_copy_str(state, statelen, rep->element[0]);
        if (detail && rep->element[1]->type == REDIS_REPLY_STRING) jri_copy_str(detail, detaillen, rep->element[1]);
        else if (detail) snprintf(detail, detaillen, "%lld", rep->element[1]->integer);
    } else {
        rc = jri_fail(r, JR_EPROTO, "%s: unexpected reply", fn);
    }
    freeReplyObject(rep);
    return rc;
}

void jr_jobinfo_free(jr_jobinfo_t *info) { jr_batch_free(&info->fields); }
