/* The Redis layer, sched part: see redis_sched.h. */
#include "redis_sched.h"
#include "redis_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "jr.h"
#include "jr_limits.h"
#include "redis_partition.h"
#include "util.h"

/* Parse a "%.3f" ms string from the Lua side ("" -> -1). */
static double ms_value(const redisReply *e) {
    if (e->type == REDIS_REPLY_STRING && e->len > 0) return strtod(e->str, NULL);
    return -1;
}

int jr_redis_promote(jr_redis_t *r, const char *queue, int64_t limit, int64_t dead_max,
                     int64_t *moved, int64_t *buried, double *next_due_ms, double *now_ms,
                     char *wake_id, int64_t *cascaded) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char lim[24], dmax[24];
    snprintf(lim, sizeof lim, "%lld", (long long)limit);
    snprintf(dmax, sizeof dmax, "%lld", (long long)dead_max);
    redisReply *rep;
    int rc = jri_exec(r, &rep, "FCALL", "jr_promote", "8", k.ready, k.delayed, k.wake, k.dead, k.ids, k.wheel,
                      k.wheel_n, k.moved, lim, dmax, NULL);
    /* Out of memory (maxmemory, noeviction): jr_promote, which may cascade
     * a bucket into the sorted set (more memory), is refused; the due jobs
     * still go, by jr_promote_due (allow-oom, no cascade). */
    if (rc == JR_EREDIS && !strncmp(jr_redis_errstr(r), "OOM", 3))
        rc = jri_exec(r, &rep, "FCALL", "jr_promote_due", "8", k.ready, k.delayed, k.wake, k.dead, k.ids, k.wheel,
                      k.wheel_n, k.moved, lim, dmax, NULL);
    if (rc) return rc;
    /* A library older than this binary answers without the 5th element. */
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 4 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[3]->type != REDIS_REPLY_STRING ||
        (rep->elements > 4 && rep->element[4]->type != REDIS_REPLY_INTEGER) ||
        (rep->elements > 5 && rep->element[5]->type != REDIS_REPLY_INTEGER)) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_promote: unexpected reply");
    }
    *moved = rep->element[0]->integer;
    *buried = rep->elements > 4 ? rep->element[4]->integer : 0;
    if (cascaded) *cascaded = rep->elements > 5 ? rep->element[5]->integer : 0; /* revision 5: the time wheel */
    *next_due_ms = ms_value(rep->element[1]);
    *now_ms = ms_value(rep->element[2]);
    snprintf(wake_id, JR_ID_MAX, "%s", rep->element[3]->str);
    freeReplyObject(rep);
    return 0;
}

int jr_redis_queues(jr_redis_t *r, jr_strlist_t *out, char *wake_id) {
    redisReply *rep;
    int rc = jri_exec(r, &rep, "FCALL", "jr_queues", "2", JR_REGISTRY_KEY, JR_REGISTRY_WAKE_KEY, NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        rep->element[0]->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_queues: unexpected reply");
    }
    snprintf(wake_id, JR_ID_MAX, "%s", rep->element[0]->str);
    jr_strlist_free(out);
    for (size_t i = 1; i < rep->elements; i++)
        if (rep->element[i]->type == REDIS_REPLY_STRING && /* a queue or a partition Q#J */
            !jr_contract_key_queue(rep->element[i]->str, rep->element[i]->len))
            if (jr_strlist_push(out, rep->element[i]->str)) {
                rc = jri_fail(r, JR_ENOMEM, "out of memory");
                break;
            }
    freeReplyObject(rep);
    return rc;
}

int jr_redis_send_wake_read(jr_redis_t *r, const char *const *keys, char (*ids)[JR_ID_MAX],
                            const unsigned char *skip, size_t n, int64_t timeout_ms) {
    const char **argv = malloc((2 * n + 4) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    char t[24];
    snprintf(t, sizeof t, "%lld", (long long)timeout_ms);
    size_t a = 0;
    argv[a++] = "XREAD", argv[a++] = "BLOCK", argv[a++] = t, argv[a++] = "STREAMS";
    for (size_t i = 0; i < n; i++)
        if (!skip || !skip[i]) argv[a++] = keys[i];
    size_t m = a - 4;
    for (size_t i = 0; i < n; i++)
        if (!skip || !skip[i]) argv[a++] = ids[i];
    if (m == 0) { /* every key left out */
        free(argv);
        return 1;
    }
    int rc = jri_append_argv(r, (int)a, argv, NULL);
    free(argv);
    return rc ? rc : jr_redis_flush(r);
}

int jr_redis_recv_wake_read(jr_redis_t *r, const char *const *keys, char (*ids)[JR_ID_MAX],
                            unsigned char *fired, size_t n) {
    memset(fired, 0, n);
    redisReply *rep;
    int rc = jri_recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "UNBLOCKED", 9) == 0) rc = 0;
    else if ((rc = jri_reply_error(r, rep))) return rc;
    for (size_t s = 0; rep->type == REDIS_REPLY_ARRAY && s < rep->elements; s++) {
        redisReply *st = rep->element[s];
        if (st->type != REDIS_REPLY_ARRAY || st->elements != 2 || st->element[0]->type != REDIS_REPLY_STRING ||
            st->element[1]->type != REDIS_REPLY_ARRAY || st->element[1]->elements == 0)
            continue;
        redisReply *last = st->element[1]->element[st->element[1]->elements - 1];
        if (last->type != REDIS_REPLY_ARRAY || last->elements < 1 || last->element[0]->type != REDIS_REPLY_STRING) continue;
        for (size_t i = 0; i < n; i++)
            if (strcmp(keys[i], st->element[0]->str) == 0) {
                snprintf(ids[i], JR_ID_MAX, "%s", last->element[0]->str);
                fired[i] = 1;
                rc++;
            }
    }
    freeReplyObject(rep);
    return rc;
}

/* ---- periodic schedules --------------------------------------------------- */

static int int_reply(jr_redis_t *r, redisReply *rep, const char *fn, long long *v) {
    if (rep->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "%s: unexpected reply", fn);
    }
    *v = rep->integer;
    freeReplyObject(rep);
    return 0;
}

int jr_redis_cron_set(jr_redis_t *r, const char *name, const char *def, int *changed) {
    redisReply *rep;
    long long v = 0;
    int rc = jri_exec(r, &rep, "FCALL", "jr_cron_set", "2", JR_CRON_KEY, JR_CRON_WAKE_KEY, name, def, NULL);
    if (!rc) rc = int_reply(r, rep, "jr_cron_set", &v);
    if (changed) *changed = v == 1;
    return rc;
}

int jr_redis_cron_del(jr_redis_t *r, const char *name, int *removed) {
    redisReply *rep;
    long long v = 0;
    int rc = jri_exec(r, &rep, "FCALL", "jr_cron_del", "3", JR_CRON_KEY, JR_CRON_LAST_KEY, JR_CRON_WAKE_KEY, name,
                  NULL);
    if (!rc) rc = int_reply(r, rep, "jr_cron_del", &v);
    if (removed) *removed = v == 1;
    return rc;
}

int jr_redis_cron_fired(jr_redis_t *r, const char *name, int64_t tick_ms, const char *job_id) {
    redisReply *rep;
    long long v;
    char t[24];
    snprintf(t, sizeof t, "%lld", (long long)tick_ms);
    int rc = jri_exec(r, &rep, "FCALL", "jr_cron_fired", "2", JR_CRON_KEY, JR_CRON_LAST_KEY, name, t, job_id, NULL);
    return rc ? rc : int_reply(r, rep, "jr_cron_fired", &v);
}

int jr_redis_cron_last(jr_redis_t *r, const char *name, int64_t *tick_ms) {
    redisReply *rep;
    *tick_ms = -1;
    int rc = jri_exec(r, &rep, "HGET", JR_CRON_LAST_KEY, name, NULL);
    if (rc) return rc;
    const char *job;
    if (rep->type == REDIS_REPLY_STRING) *tick_ms = jr_cron_last_parse(rep->str, &job);
    freeReplyObject(rep);
    return 0;
}

void jr_cron_entries_free(jr_cron_entry_t *v, size_t n) {
    for (size_t i = 0; v && i < n; i++) free(v[i].name), free(v[i].def), free(v[i].last);
    free(v);
}

int jr_redis_cron_list(jr_redis_t *r, jr_cron_entry_t **out, size_t *n, char *wake_id) {
    redisReply *rep;
    *out = NULL, *n = 0;
    int rc = jri_exec(r, &rep, "FCALL", "jr_cron_list", "3", JR_CRON_KEY, JR_CRON_LAST_KEY, JR_CRON_WAKE_KEY, NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 || (rep->elements - 1) % 3 != 0) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_cron_list: unexpected reply");
    }
    for (size_t i = 0; i < rep->elements; i++)
        if (rep->element[i]->type != REDIS_REPLY_STRING) {
            freeReplyObject(rep);
            return jri_fail(r, JR_EPROTO, "jr_cron_list: unexpected reply");
        }
    snprintf(wake_id, JR_ID_MAX, "%s", rep->element[0]->str);
    size_t k = (rep->elements - 1) / 3;
    jr_cron_entry_t *v = calloc(k ? k : 1, sizeof *v);
    if (!v) rc = jri_fail(r, JR_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < k; i++) {
        v[i].name = strdup(rep->element[1 + 3 * i]->str);
        v[i].def = strdup(rep->element[2 + 3 * i]->str);
        v[i].last = strdup(rep->element[3 + 3 * i]->str);
        if (!v[i].name || !v[i].def || !v[i].last) rc = jri_fail(r, JR_ENOMEM, "out of memory");
    }
    freeReplyObject(rep);
    if (rc) {
        jr_cron_entries_free(v, k);
        return rc;
    }
    *out = v, *n = k;
    return 0;
}

/* Schedule `name` decoded into *d (jr_cron_def_free it either way):
 * *found = 0 when there is none. */
static int cron_get(jr_redis_t *r, const char *name, jr_cron_def_t *d, int *found) {
    jr_cron_entry_t *v = NULL;
    size_t n = 0;
    char wake[JR_ID_MAX], why[JR_ERRLEN];
    memset(d, 0, sizeof *d);
    *found = 0;
    int rc = jr_redis_cron_list(r, &v, &n, wake);
    for (size_t i = 0; !rc && i < n && !*found; i++) {
        if (strcmp(v[i].name, name)) continue;
        *found = 1;
        if ((rc = jr_cron_def_decode(name, v[i].def, d, why, sizeof why)))
            rc = jri_fail(r, rc, "schedule %s: its stored definition cannot be read: %s", name, why);
    }
    jr_cron_entries_free(v, n);
    return rc;
}

int jr_redis_cron_enable(jr_redis_t *r, const char *name, int on, int *found, int *changed) {
    jr_cron_def_t d;
    *changed = 0;
    int rc = cron_get(r, name, &d, found);
    if (!rc && *found && d.enabled != on) {
        d.enabled = on;
        char *def = jr_cron_def_encode(&d);
        rc = def ? jr_redis_cron_set(r, name, def, changed) : jri_fail(r, JR_ENOMEM, "out of memory");
        free(def);
    }
    jr_cron_def_free(&d);
    return rc;
}

int jr_redis_cron_fire(jr_redis_t *r, const char *name, char *id, int *found) {
    jr_cron_def_t d;
    double now = 0;
    id[0] = '\0';
    int rc = cron_get(r, name, &d, found);
    if (!rc && *found) rc = jr_redis_time_ms(r, &now);
    if (!rc && *found) {
        snprintf(id, JR_ID_MAX, "%s@fire-%lld", name, (long long)(now * 1000.0));
        jr_enqueue_t job = {.queue = d.queue, .id = id};
        job.env.handler = d.handler;
        job.env.handler_len = strlen(d.handler);
        job.env.payload = d.payload;
        job.env.payload_len = d.payload ? strlen(d.payload) : 0;
        job.env.attempt = 1;
        jr_partmap_t parts = {0};
        jr_enq_outcome_t o = {0};
        char ids[1][JR_ID_MAX];
        rc = jr_redis_enqueue_parts(r, &parts, &job, NULL, 1, ids, &o, NULL);
        if (!rc && o.status == JR_ENQ_CREATED) snprintf(id, JR_ID_MAX, "%s", ids[0]);
        else if (!rc) rc = jri_fail(r, JR_EREDIS, "schedule %s: job %s was not enqueued", name, id);
        jr_partmap_free(&parts);
    }
    jr_cron_def_free(&d);
    return rc;
}

int64_t jr_cron_last_parse(const char *last, const char **job) {
    char *end;
    *job = "";
    if (!last || !*last) return -1;
    long long t = strtoll(last, &end, 10);
    if (end == last || *end != ' ' || t < 0) return -1;
    *job = end + 1;
    return t;
}

int jr_redis_key_type(jr_redis_t *r, const char *key, char *type, size_t len) {
    redisReply *rep;
    int rc = jri_exec(r, &rep, "TYPE", key, NULL);
    if (rc) return rc;
    jri_copy_str(type, len, rep);
    if (rep->type == REDIS_REPLY_STATUS) snprintf(type, len, "%s", rep->str);
    freeReplyObject(rep);
    return 0;
}
