/* The Redis layer, finished jobs and waits: see redis_finished.h. */
#include "redis_finished.h"
#include "redis_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jr.h"
#include "util.h"

int jr_redis_finished_page(jr_redis_t *r, const char *queue, const char *after, int64_t count, jr_batch_t *b,
                           char *next, size_t nextlen) {
    jri_batch_reset(b);
    next[0] = '\0';
    if (count < 1) return jri_fail(r, JR_EINVAL, "finished page: count must be at least 1");
    char key[JR_KEY_MAX], end[JR_ID_MAX + 2], cnt[24];
    if (jr_queue_key(key, queue, JR_QK_FINISHED)) return jri_fail(r, JR_EINVAL, "queue name too long");
    if (after && after[0]) snprintf(end, sizeof end, "(%s", after);
    else snprintf(end, sizeof end, "+");
    snprintf(cnt, sizeof cnt, "%lld", (long long)count + 1); /* one more: is there a next page? */
    redisReply *rep;
    int rc = jri_exec(r, &rep, "XREVRANGE", key, end, "-", "COUNT", cnt, NULL);
    if (rc) return rc;
    if ((rc = jri_reply_error(r, rep))) return rc;
    if (rep->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "XREVRANGE %s: unexpected reply", key);
    }
    if (rep->elements > (size_t)count) { /* the extra one only says there is more */
        for (size_t i = (size_t)count; i < rep->elements; i++) freeReplyObject(rep->element[i]);
        rep->elements = (size_t)count;
        const redisReply *last = rep->element[count - 1];
        if (last->type == REDIS_REPLY_ARRAY && last->elements == 2 && last->element[0]->type == REDIS_REPLY_STRING &&
            last->element[0]->len < nextlen)
            memcpy(next, last->element[0]->str, last->element[0]->len + 1);
    }
    return jri_batch_of_entries(r, key, rep, b);
}

int jr_redis_finished_get(jr_redis_t *r, const char *queue, const char *id, jr_batch_t *b) {
    jri_batch_reset(b);
    jr_qkeys_t k;
    if (jr_qkeys(&k, queue)) return jri_fail(r, JR_EINVAL, "queue name too long");
    redisReply *rep;
    int rc = jri_exec(r, &rep, "HGET", k.finished_ids, id, NULL);
    if (rc) return rc;
    if ((rc = jri_reply_error(r, rep))) return rc;
    char entry[JR_ID_MAX] = "";
    if (rep->type == REDIS_REPLY_STRING && rep->len < sizeof entry) memcpy(entry, rep->str, rep->len + 1);
    freeReplyObject(rep);
    if (!entry[0]) return 0;
    if ((rc = jr_redis_xrange_between(r, k.finished, entry, entry, 1, b))) return rc;
    /* the record must be the job's (the index entry may be stale) */
    if (b->n != 1) return 0;
    for (size_t i = 0; i < b->v[0].nfields; i++)
        if (!strcmp(b->v[0].names[i], JR_FIN_ID))
            return b->v[0].value_lens[i] == strlen(id) && !memcmp(b->v[0].values[i], id, strlen(id));
    return 0;
}

void jr_job_end_free(jr_job_end_t *e) {
    free(e->result), free(e->error);
    e->result = e->error = NULL;
}

/* Fill *end from a record's field/value list (a finished or done entry, or
 * a dead entry: outcome then "failed"). */
static int end_of_fields(jr_redis_t *r, const redisReply *f, const char *outcome, jr_job_end_t *end) {
    snprintf(end->outcome, sizeof end->outcome, "%s", outcome ? outcome : "");
    for (size_t i = 0; f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2) {
        const redisReply *n = f->element[i], *v = f->element[i + 1];
        if (n->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        if (!strcmp(n->str, JR_FIN_OUTCOME) && !outcome) jri_copy_str(end->outcome, sizeof end->outcome, v);
        else if (!strcmp(n->str, JR_FIN_ATTEMPT)) jri_copy_str(end->attempt, sizeof end->attempt, v);
        else if (!strcmp(n->str, JR_FIN_DURATION)) jri_copy_str(end->duration_ms, sizeof end->duration_ms, v);
        else if (!strcmp(n->str, JR_FIN_WORKER)) jri_copy_str(end->worker, sizeof end->worker, v);
        else if (!strcmp(n->str, JR_FIN_AT)) jri_copy_str(end->finished_at, sizeof end->finished_at, v);
        else if (!strcmp(n->str, JR_FIN_ERROR) && !end->error) {
            if (!(end->error = strndup(v->str, v->len))) return jri_fail(r, JR_ENOMEM, "out of memory");
        } else if (!strcmp(n->str, JR_FIN_RESULT) && !end->result) {
            if (!(end->result = malloc(v->len + 1))) return jri_fail(r, JR_ENOMEM, "out of memory");
            memcpy(end->result, v->str, v->len);
            end->result[v->len] = '\0', end->result_len = v->len;
        }
    }
    return 0;
}

/* The value of field `name` in a field/value list, or NULL. */
static const redisReply *field_of(const redisReply *f, const char *name) {
    for (size_t i = 0; f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2)
        if (f->element[i]->type == REDIS_REPLY_STRING && !strcmp(f->element[i]->str, name)) return f->element[i + 1];
    return NULL;
}

int jr_redis_job_wait(jr_redis_t *r, const char *queue, const char *id, int64_t timeout_ms, jr_job_end_t *end) {
    memset(end, 0, sizeof *end);
    jr_qkeys_t k;
    if (jr_qkeys(&k, queue)) return jri_fail(r, JR_EINVAL, "queue name too long");
    char tmo[24];
    snprintf(tmo, sizeof tmo, "%lld", (long long)timeout_ms);
    redisReply *rep;
    int rc = jri_exec(r, &rep, "FCALL", "jr_wait", "10", k.ready, k.delayed, k.ids, k.dead, k.wheel, k.wheel_n,
                      k.finished, k.finished_ids, k.waiters, k.done, id, tmo, NULL);
    if (rc) return rc;
    if ((rc = jri_reply_error(r, rep))) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 || rep->element[0]->type != REDIS_REPLY_STRING ||
        (rep->elements < 2 && strcmp(rep->element[0]->str, "unknown"))) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_wait: unexpected reply");
    }
    const char *st = rep->element[0]->str;
    if (!strcmp(st, "unknown")) {
        snprintf(end->outcome, sizeof end->outcome, "unknown");
        freeReplyObject(rep);
        return 1;
    }
    if (!strcmp(st, "finished") || !strcmp(st, "dead")) {
        rc = end_of_fields(r, rep->element[1], !strcmp(st, "dead") ? "failed" : NULL, end);
        freeReplyObject(rep);
        return rc ? rc : 1;
    }
    if (strcmp(st, "wait") || rep->element[1]->type != REDIS_REPLY_STRING || rep->element[1]->len >= JR_ID_MAX) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_wait: unexpected reply");
    }
    char last[JR_ID_MAX];
    memcpy(last, rep->element[1]->str, rep->element[1]->len + 1);
    freeReplyObject(rep);
    /* Block on the queue's done stream after `last` until our job's entry
     * comes or the deadline passes: every end of a job someone waits for is
     * written there, so each wake-up carries news (no poll). */
    int64_t deadline = jr_mono_us() + timeout_ms * 1000;
    for (;;) {
        int64_t left_ms = (deadline - jr_mono_us()) / 1000;
        if (left_ms <= 0) return 0;
        char blk[24];
        snprintf(blk, sizeof blk, "%lld", (long long)left_ms);
        const char *argv[] = {"XREAD", "COUNT", "100", "BLOCK", blk, "STREAMS", k.done, last};
        if ((rc = jri_append_argv(r, 8, argv, NULL)) || (rc = jr_redis_flush(r))) return rc;
        if ((rc = jri_recv_reply(r, &rep, r->timeout_us + left_ms * 1000))) return rc;
        if ((rc = jri_reply_error(r, rep))) return rc;
        if (rep->type == REDIS_REPLY_NIL) {
            freeReplyObject(rep);
            return 0;
        }
        /* [[key, [[entry, fields], ...]]] */
        int found = 0;
        const redisReply *es = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
                                       rep->element[0]->type == REDIS_REPLY_ARRAY && rep->element[0]->elements == 2
                                   ? rep->element[0]->element[1]
                                   : NULL;
        for (size_t i = 0; es && i < es->elements && !found && !rc; i++) {
            const redisReply *en = es->element[i];
            if (en->type != REDIS_REPLY_ARRAY || en->elements != 2 || en->element[0]->type != REDIS_REPLY_STRING)
                continue;
            if (en->element[0]->len < sizeof last) memcpy(last, en->element[0]->str, en->element[0]->len + 1);
            const redisReply *v = field_of(en->element[1], JR_FIN_ID);
            if (v && v->type == REDIS_REPLY_STRING && v->len == strlen(id) && !memcmp(v->str, id, v->len)) {
                rc = end_of_fields(r, en->element[1], NULL, end);
                found = 1;
            }
        }
        freeReplyObject(rep);
        if (rc) return rc;
        if (found) return 1;
    }
}
