/* The Redis layer, worker part: see redis_worker.h. */
#include "redis_worker.h"
#include "redis_internal.h"
#include "followup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jr.h"
#include "jr_limits.h"
#include "util.h"

/* 1 if rep is the refusal of a command for a Redis Cluster primary that
 * is down (jr_redis_node_down): that queue's shard, not the others. */
static int node_down_reply(const redisReply *rep) {
    return rep->type == REDIS_REPLY_ERROR && jr_redis_node_down(rep->str);
}

/* Send `head... <ready key of queue i> tail...` for each queue in one
 * pipeline. An error reply containing `ignore` counts as success; the first
 * other one is returned as JR_EREDIS with its queue and Redis's text. With
 * `found` (XINFO GROUPS), found[i] = 1 if queue i has the group JR_GROUP.
 * With `bad`, a refusal sets bad[i] = 1 instead (its text kept in r->err,
 * the first one's) and the call returns 0. With `found`, a queue on a
 * Redis Cluster primary that is down ("CLUSTERDOWN node ... unreachable")
 * counts as found: neither refused nor created (its reads fail until it,
 * or its replica, serves again).
 * nhead + 1 + ntail <= 8 (the callers below). */
static int pipeline_per_queue(jr_redis_t *r, const char *const *queues, size_t n, const char *const *head,
                              int nhead, const char *const *tail, int ntail, const char *ignore,
                              unsigned char *found, unsigned char *bad) {
    const char *argv[8];
    jr_qkeys_t k;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        jr_qkeys(&k, queues[i]);
        int a = 0;
        for (int j = 0; j < nhead; j++) argv[a++] = head[j];
        argv[a++] = k.ready;
        for (int j = 0; j < ntail; j++) argv[a++] = tail[j];
        rc = jri_append_argv(r, a, argv, NULL);
    }
    if (rc || (rc = jr_redis_flush(r))) return rc;
    int first_err = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *rep;
        if ((rc = jri_recv_reply(r, &rep, r->timeout_us))) return rc; /* the connection is broken */
        if (found && node_down_reply(rep)) {
            found[i] = 1; /* its primary is down (cluster.c): looked at again when a read there fails */
        } else if (rep->type == REDIS_REPLY_ERROR && !strstr(rep->str, ignore) && bad) {
            if (!bad[i] && !r->err[0]) jri_fail(r, JR_EREDIS, "%s %s of queue %s: %s", head[0], head[1], queues[i], rep->str);
            bad[i] = 1;
        } else if (rep->type == REDIS_REPLY_ERROR && !strstr(rep->str, ignore) && !first_err) {
            first_err = jri_fail(r, JR_EREDIS, "%s %s of queue %s: %s", head[0], head[1], queues[i], rep->str);
        }
        /* XINFO GROUPS: [[name, <group>, ...], ...] */
        for (size_t g = 0; found && rep->type == REDIS_REPLY_ARRAY && g < rep->elements; g++) {
            const redisReply *e = rep->element[g];
            if (e->type == REDIS_REPLY_ARRAY && e->elements >= 2 &&
                e->element[1]->type == REDIS_REPLY_STRING && !strcmp(e->element[1]->str, JR_GROUP))
                found[i] = 1;
        }
        freeReplyObject(rep);
    }
    return first_err;
}

int jr_redis_ensure_groups(jr_redis_t *r, const char *const *queues, size_t n, unsigned char *bad) {
    static const char *const info[] = {"XINFO", "GROUPS"};
    static const char *const create[] = {"XGROUP", "CREATE"};
    static const char *const create_tail[] = {JR_GROUP, "0", "MKSTREAM"};
    unsigned char *found = calloc(n ? n : 1, 1);
    const char **missing = malloc((n ? n : 1) * sizeof *missing);
    if (!found || !missing) {
        free(found), free(missing);
        return jri_fail(r, JR_ENOMEM, "out of memory");
    }
    /* Look first (a read works in an out-of-memory Redis); create only what
     * is missing (BUSYGROUP: another process just did). */
    r->err[0] = '\0';
    if (bad) memset(bad, 0, n);
    int rc = pipeline_per_queue(r, queues, n, info, 2, NULL, 0, "no such key", found, bad);
    size_t m = 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (!found[i] && !(bad && bad[i])) missing[m++] = queues[i];
    if (!rc && m) rc = pipeline_per_queue(r, missing, m, create, 2, create_tail, 3, "BUSYGROUP", NULL, NULL);
    free(found), free(missing);
    return rc;
}

/* Append (not send) the XREADGROUP of jr_redis_send_read. */
static int append_read(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                       int64_t count, int64_t block_ms) {
    char cnt[24], blk[24];
    char (*keys)[JR_KEY_MAX] = malloc((n ? n : 1) * sizeof *keys);
    const char **argv = malloc((9 + 2 * n) * sizeof *argv);
    if (!keys || !argv) {
        free(keys), free(argv);
        return jri_fail(r, JR_ENOMEM, "out of memory");
    }
    size_t a = 0;
    snprintf(cnt, sizeof cnt, "%lld", (long long)count);
    snprintf(blk, sizeof blk, "%lld", (long long)block_ms);
    argv[a++] = "XREADGROUP", argv[a++] = "GROUP", argv[a++] = JR_GROUP, argv[a++] = consumer;
    argv[a++] = "COUNT", argv[a++] = cnt, argv[a++] = "BLOCK", argv[a++] = blk;
    argv[a++] = "STREAMS";
    for (size_t i = 0; i < n; i++) {
        jr_queue_key(keys[i], queues[i], JR_QK_READY);
        argv[a++] = keys[i];
    }
    for (size_t i = 0; i < n; i++) argv[a++] = ">";
    int rc = jri_append_argv(r, (int)a, argv, NULL);
    free(keys), free(argv);
    return rc;
}

int jr_redis_send_read(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                       int64_t count, int64_t block_ms) {
    int rc = append_read(r, consumer, queues, n, count, block_ms);
    return rc ? rc : jr_redis_flush(r);
}

int jr_redis_recv_read(jr_redis_t *r, jr_batch_t *b, const char *const *queues, size_t n) {
    jri_batch_reset(b);
    redisReply *rep;
    int rc = jri_recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "UNBLOCKED", 9) == 0) {
        freeReplyObject(rep);
        return 0;
    }
    if ((rc = jri_reply_error(r, rep))) return rc;
    return jri_parse_streams(r, b, rep, queues, n, 0);
}

/* The arguments of a job's end in the worker's calls: KEEP_COUNT
 * KEEP_AGE_MS DURATION_MS into the buffers (rec NULL: keep nothing). */
static void end_args(const jr_end_rec_t *rec, char keep[24], char age[24], char dur[32]) {
    snprintf(keep, 24, "%lld", rec ? (long long)rec->keep_count : 0LL);
    snprintf(age, 24, "%lld", rec ? (long long)rec->keep_age_ms : 0LL);
    snprintf(dur, 32, "%.3f", rec ? (double)rec->duration_us / 1000.0 : 0.0);
}

int jr_redis_append_fail_end(jr_redis_t *r, const char *queue, const char *entry, const char *consumer,
                             const char *action, int64_t delay_ms, const char *error, const char *why,
                             int64_t dead_max, const jr_end_rec_t *rec) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char delay[24], max[24], keep[24], age[24], dur[32];
    snprintf(delay, sizeof delay, "%lld", (long long)delay_ms);
    snprintf(max, sizeof max, "%lld", (long long)dead_max);
    end_args(rec, keep, age, dur);
    const char *argv[] = {"FCALL", "jr_fail", "15", k.ready, k.delayed, k.wake, k.dead, k.ids, k.cancelled, k.stats,
                          k.wheel, k.wheel_n, k.seq, k.finished, k.finished_ids, k.waiters, k.done, k.history, entry, consumer,
                          action, delay, error, why, max, keep, age, dur, rec && rec->result ? rec->result : ""};
    size_t lens[sizeof argv / sizeof *argv], last = sizeof argv / sizeof *argv - 1;
    for (size_t i = 0; i < last; i++) lens[i] = strlen(argv[i]);
    lens[last] = rec && rec->result ? rec->result_len : 0; /* the result: bytes, no NUL */
    return jri_append_argv(r, (int)(sizeof argv / sizeof *argv), argv, lens);
}

int jr_redis_append_fail(jr_redis_t *r, const char *queue, const char *entry, const char *consumer,
                         const char *action, int64_t delay_ms, const char *error, const char *why,
                         int64_t dead_max) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char delay[24], max[24];
    snprintf(delay, sizeof delay, "%lld", (long long)delay_ms);
    snprintf(max, sizeof max, "%lld", (long long)dead_max);
    const char *argv[] = {"FCALL", "jr_fail", "11", k.ready, k.delayed, k.wake, k.dead, k.ids, k.cancelled, k.stats,
                          k.wheel, k.wheel_n, k.seq, k.history, entry, consumer, action, delay, error, why, max};
    return jri_append_argv(r, (int)(sizeof argv / sizeof *argv), argv, NULL);
}

/* Append FCALL fn 3 <ready> <ids> <cancelled> consumer ids... */
static int append_ids_call(jr_redis_t *r, const char *fn, const char *queue, const char *consumer,
                           const char *const *ids, size_t n) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    const char **argv = malloc((n + 7) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    size_t a = 0;
    argv[a++] = "FCALL", argv[a++] = fn, argv[a++] = "3", argv[a++] = k.ready, argv[a++] = k.ids, argv[a++] = k.cancelled;
    if (consumer) argv[a++] = consumer;
    memcpy(argv + a, ids, n * sizeof *ids);
    int rc = jri_append_argv(r, (int)(a + n), argv, NULL);
    free(argv);
    return rc;
}

int jr_redis_append_handback(jr_redis_t *r, const char *queue, const char *consumer,
                             const char *const *ids, size_t n) {
    return append_ids_call(r, "jr_handback", queue, consumer, ids, n);
}

/* Mark in flags[] each of ids[] named in the array reply `list`; returns
 * how many were. */
static int mark_named(const redisReply *list, const char *const *ids, size_t n, unsigned char *flags) {
    int marked = 0;
    for (size_t i = 0; list->type == REDIS_REPLY_ARRAY && i < list->elements; i++)
        for (size_t j = 0; j < n; j++)
            if (list->element[i]->type == REDIS_REPLY_STRING && !strcmp(list->element[i]->str, ids[j])) {
                flags[j] = 1;
                marked++;
            }
    return marked;
}

int jr_redis_heartbeat(jr_redis_t *r, const char *queue, const char *consumer,
                       const char *const *ids, size_t n, unsigned char *lost, unsigned char *cancelled) {
    memset(lost, 0, n);
    if (cancelled) memset(cancelled, 0, n);
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    const char **argv = malloc((n + 8) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    size_t a = 0;
    /* with the cancel flags also the index and stats, which its note reads */
    argv[a++] = "FCALL", argv[a++] = "jr_heartbeat", argv[a++] = cancelled ? "4" : "1", argv[a++] = k.ready;
    if (cancelled) argv[a++] = k.cancelled, argv[a++] = k.ids, argv[a++] = k.stats;
    argv[a++] = consumer;
    memcpy(argv + a, ids, n * sizeof *ids);
    int rc = jri_append_argv(r, (int)(a + n), argv, NULL);
    free(argv);
    redisReply *rep;
    if (rc || (rc = jr_redis_flush(r)) || (rc = jri_recv_reply(r, &rep, r->timeout_us))) return rc;
    if ((rc = jri_reply_error(r, rep))) return rc;
    int nlost;
    r->err[0] = '\0';
    if (cancelled) {
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 || rep->elements > 3) {
            freeReplyObject(rep);
            return jri_fail(r, JR_EPROTO, "jr_heartbeat: unexpected reply");
        }
        nlost = mark_named(rep->element[0], ids, n, lost);
        mark_named(rep->element[1], ids, n, cancelled);
        if (rep->elements == 3) jri_copy_str(r->err, sizeof r->err, rep->element[2]); /* revision 15 */
    } else {
        nlost = mark_named(rep, ids, n, lost);
    }
    freeReplyObject(rep);
    return nlost;
}

int jr_redis_reclaim(jr_redis_t *r, const char *queue, uint32_t qi, const char *consumer,
                     int64_t min_idle_ms, char *cursor, int64_t count, int64_t max_deliveries,
                     int64_t dead_max, jr_batch_t *b, long long *deleted, long long *poisoned) {
    jri_batch_reset(b);
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char idle[24], cnt[24], maxd[24], dmax[24];
    snprintf(idle, sizeof idle, "%lld", (long long)min_idle_ms);
    snprintf(cnt, sizeof cnt, "%lld", (long long)count);
    snprintf(maxd, sizeof maxd, "%lld", (long long)max_deliveries);
    snprintf(dmax, sizeof dmax, "%lld", (long long)dead_max);
    redisReply *rep;
    int rc = jri_exec(r, &rep, "FCALL", "jr_reclaim", "4", k.ready, k.dead, k.ids, k.cancelled, consumer, idle,
                      cursor, cnt, maxd, dmax, NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 4 ||
        rep->element[0]->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_reclaim: unexpected reply");
    }
    snprintf(cursor, JR_ID_MAX, "%s", rep->element[0]->str);
    *deleted = rep->element[1]->integer;
    *poisoned = rep->element[2]->integer;
    /* Keep the whole reply alive: the batch points into its 4th element. */
    redisReply *streams = rep->element[3];
    rc = jri_parse_streams(r, b, streams, NULL, 0, qi);
    b->reply = rep;
    return rc;
}

int jr_redis_append_ack(jr_redis_t *r, const char *queue, const char *const *ids, size_t n) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    const char **argv = malloc((n + 4) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "FCALL", argv[1] = "jr_ack", argv[2] = "1", argv[3] = k.ready;
    memcpy(argv + 4, ids, n * sizeof *ids);
    int rc = jri_append_argv(r, (int)(n + 4), argv, NULL);
    free(argv);
    return rc;
}

/* Format a follow-up's WHEN argument ("" now, "+MS", "@MS"). */
static void fu_when(const jr_fu_item_t *it, char *out, size_t len) {
    if (it->at_ms > 0) snprintf(out, len, "@%lld", (long long)it->at_ms);
    else if (it->delay_ms > 0) snprintf(out, len, "+%lld", (long long)it->delay_ms);
    else out[0] = '\0';
}

int jr_redis_append_ack_follow(jr_redis_t *r, const char *queue, const char *entry, const char *fu,
                               size_t fu_len, int register_targets) {
    return jr_redis_append_ack_follow_end(r, queue, entry, fu, fu_len, register_targets, NULL, NULL);
}

int jr_redis_append_ack_follow_end(jr_redis_t *r, const char *queue, const char *entry, const char *fu,
                                   size_t fu_len, int register_targets, const char *consumer,
                                   const jr_end_rec_t *rec) {
    long n = jr_fu_count(fu, fu_len);
    if (n <= 0) return jri_invalid(r, "follow-ups of entry %s are corrupt or empty", entry);
    size_t nq = 0, nuniq = 0, off = 0;
    jr_fu_item_t *items = calloc((size_t)n, sizeof *items);
    uint32_t *qi = calloc((size_t)n, sizeof *qi);
    char (*qnames)[JR_INTERNAL_QUEUE_MAX + 1] = calloc((size_t)n, sizeof *qnames); /* a partition's: Q#J */
    jr_qkeys_t *qk = calloc((size_t)n, sizeof *qk);
    char (*uniq)[JR_UNIQ_KEY_MAX] = calloc((size_t)n, sizeof *uniq);
    char (*when)[32] = calloc((size_t)n, sizeof *when);
    char (*qix)[12] = calloc((size_t)n, sizeof *qix);
    size_t max = 21 + (size_t)n * (7 + 4 + 1 + 7);
    const char **argv = malloc(max * sizeof *argv);
    size_t *lens = malloc(max * sizeof *lens);
    int rc = 0;
    if (!items || !qi || !qnames || !qk || !uniq || !when || !qix || !argv || !lens) {
        rc = jri_fail(r, JR_ENOMEM, "out of memory");
        goto out;
    }
    for (long i = 0; i < n; i++) {
        jr_fu_next(fu, fu_len, &off, &items[i]);
        jr_fu_item_t *it = &items[i];
        if (it->queue_len > JR_INTERNAL_QUEUE_MAX || it->id_len > JR_ID_MAX - 2) {
            rc = jri_invalid(r, "follow-up %ld of entry %s: queue name or id too long", i + 1, entry);
            goto out;
        }
        size_t q = 0;
        while (q < nq && !(strlen(qnames[q]) == it->queue_len && !memcmp(qnames[q], it->queue, it->queue_len))) q++;
        if (q == nq) {
            memcpy(qnames[q], it->queue, it->queue_len);
            qnames[q][it->queue_len] = '\0';
            jr_qkeys(&qk[q], qnames[q]);
            nq++;
        }
        qi[i] = (uint32_t)q;
        if (it->id_len && jr_uniq_key(uniq[nuniq++], sizeof uniq[0], qnames[q], it->id, it->id_len)) {
            rc = jri_invalid(r, "follow-up %ld of entry %s: its id does not make a key", i + 1, entry);
            goto out;
        }
    }
    /* Register the target queues first (for schedulers serving every
     * queue); harmless if the acknowledgement then finds the job gone. */
    size_t a = 0;
    argv[a++] = "FCALL", argv[a++] = "jr_register", argv[a++] = "2";
    argv[a++] = JR_REGISTRY_KEY, argv[a++] = JR_REGISTRY_WAKE_KEY;
    for (size_t q = 0; q < nq; q++) argv[a++] = qnames[q];
    if (register_targets && (rc = jri_append_argv(r, (int)a, argv, NULL))) goto out;

    jr_qkeys_t own;
    jr_qkeys(&own, queue);
    char nkeys[24], nqs[24], uniq_ms[24], keep[24], age[24], dur[32];
    int ended = consumer != NULL; /* the worker's form: the job's end too (revision 20) */
    end_args(rec, keep, age, dur);
    snprintf(nkeys, sizeof nkeys, "%zu", 5 + (ended ? 4 : 0) + 7 * nq + nuniq);
    snprintf(uniq_ms, sizeof uniq_ms, "%lld", (long long)JR_UNIQ_DEFAULT_MS);
    snprintf(nqs, sizeof nqs, "%zu", nq);
    a = 0;
    argv[a++] = "FCALL", argv[a++] = "jr_ack_follow", argv[a++] = nkeys, argv[a++] = own.ready;
    argv[a++] = own.cancelled, argv[a++] = own.ids, argv[a++] = own.stats;
    if (ended) argv[a++] = own.finished, argv[a++] = own.finished_ids, argv[a++] = own.waiters, argv[a++] = own.done;
    argv[a++] = own.history; /* last of Q's keys (revision 21) */
    for (size_t q = 0; q < nq; q++) {
        argv[a++] = qk[q].ready, argv[a++] = qk[q].delayed, argv[a++] = qk[q].wake, argv[a++] = qk[q].seq;
        argv[a++] = qk[q].ids, argv[a++] = qk[q].wheel, argv[a++] = qk[q].wheel_n;
    }
    for (size_t u = 0; u < nuniq; u++) argv[a++] = uniq[u];
    size_t result_at = 0;
    if (ended) {
        argv[a++] = consumer, argv[a++] = keep, argv[a++] = age, argv[a++] = dur;
        result_at = a;
        argv[a++] = rec && rec->result ? rec->result : "";
    }
    argv[a++] = entry, argv[a++] = nqs, argv[a++] = uniq_ms;
    for (size_t i = 0; i < a; i++) /* the result: bytes, no NUL */
        lens[i] = ended && i == result_at ? (rec && rec->result ? rec->result_len : 0) : strlen(argv[i]);
    for (long i = 0; i < n; i++) {
        const jr_fu_item_t *it = &items[i];
        snprintf(qix[i], sizeof qix[i], "%u", qi[i] + 1);
        fu_when(it, when[i], sizeof when[i]);
        argv[a] = qix[i], lens[a++] = strlen(qix[i]);
        argv[a] = when[i], lens[a++] = strlen(when[i]);
        argv[a] = it->id_len ? it->id : "", lens[a++] = it->id_len;
        argv[a] = "2", lens[a++] = 1; /* pairs: h and p */
        argv[a] = JR_F_HANDLER, lens[a++] = 1;
        argv[a] = it->handler, lens[a++] = it->handler_len;
        argv[a] = JR_F_PAYLOAD, lens[a++] = 1;
        argv[a] = it->payload_len ? it->payload : "", lens[a++] = it->payload_len;
    }
    rc = jri_append_argv(r, (int)a, argv, lens);
out:
    free(items), free(qi), free(qnames), free(qk), free(uniq), free(when), free(qix), free(argv), free(lens);
    return rc;
}

int jr_redis_append_ack_report(jr_redis_t *r, const char *queue, const char *const *entries,
                               const char *const *jobids, size_t n) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    const char **argv = malloc((2 * n + 10) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    size_t a = 0;
    argv[a++] = "FCALL", argv[a++] = "jr_ack", argv[a++] = jobids ? "7" : "6", argv[a++] = k.ready;
    if (jobids) argv[a++] = k.ids;
    argv[a++] = k.cancelled, argv[a++] = k.stats, argv[a++] = k.waiters, argv[a++] = k.done, argv[a++] = k.history;
    for (size_t i = 0; i < n; i++) {
        argv[a++] = entries[i];
        if (jobids) argv[a++] = jobids[i] ? jobids[i] : "";
    }
    int rc = jri_append_argv(r, (int)a, argv, NULL);
    free(argv);
    return rc;
}

int jr_redis_append_ack_records(jr_redis_t *r, const char *queue, const char *consumer, const jr_end_rec_t *recs,
                                size_t n) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    size_t argc = 13 + 8 * n;
    const char **argv = malloc(argc * sizeof *argv);
    size_t *lens = malloc(argc * sizeof *lens);
    char (*nums)[3][32] = malloc((n ? n : 1) * sizeof *nums), (*att)[12] = malloc((n ? n : 1) * sizeof *att);
    if (!argv || !lens || !nums || !att) {
        free(argv), free(lens), free(nums), free(att);
        return jri_fail(r, JR_ENOMEM, "out of memory");
    }
    size_t a = 0;
    argv[a++] = "FCALL", argv[a++] = "jr_ack", argv[a++] = "9", argv[a++] = k.ready, argv[a++] = k.ids;
    argv[a++] = k.cancelled, argv[a++] = k.stats, argv[a++] = k.waiters, argv[a++] = k.done;
    argv[a++] = k.finished, argv[a++] = k.finished_ids, argv[a++] = k.history, argv[a++] = consumer;
    for (size_t i = 0; i < a; i++) lens[i] = strlen(argv[i]);
    for (size_t i = 0; i < n; i++) {
        const jr_end_rec_t *e = &recs[i];
        end_args(e, nums[i][0], nums[i][1], nums[i][2]);
        snprintf(att[i], sizeof att[i], "%u", e->attempt);
        const char *v[8] = {e->entry, e->jobid ? e->jobid : "", nums[i][0], nums[i][1], e->handler ? e->handler : "",
                            att[i], nums[i][2], e->result ? e->result : ""};
        for (int j = 0; j < 7; j++) argv[a] = v[j], lens[a++] = strlen(v[j]);
        argv[a] = v[7], lens[a++] = e->result ? e->result_len : 0; /* the result: bytes, no NUL */
    }
    int rc = jri_append_argv(r, (int)a, argv, lens);
    free(argv), free(lens), free(nums), free(att);
    return rc;
}

int jr_redis_recv_ack(jr_redis_t *r, long long *n, char ***flagged, size_t *nflagged) {
    *flagged = NULL, *nflagged = 0;
    redisReply *rep;
    int rc = jri_recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    if ((rc = jri_reply_error(r, rep))) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_ack: expected the reply {count, {cancelled entries}}");
    }
    *n = rep->element[0]->integer;
    const redisReply *f = rep->element[1];
    if (f->elements && !(*flagged = calloc(f->elements, sizeof **flagged))) rc = jri_fail(r, JR_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < f->elements; i++) {
        if (f->element[i]->type != REDIS_REPLY_STRING) {
            rc = jri_fail(r, JR_EPROTO, "jr_ack: a cancelled entry that is not a string");
        } else if (!((*flagged)[i] = strndup(f->element[i]->str, f->element[i]->len))) {
            rc = jri_fail(r, JR_ENOMEM, "out of memory");
        } else {
            ++*nflagged;
        }
    }
    if (rc) {
        for (size_t i = 0; i < *nflagged; i++) free((*flagged)[i]);
        free(*flagged);
        *flagged = NULL, *nflagged = 0;
    }
    freeReplyObject(rep);
    return rc;
}

int jr_redis_entry_cancelled(jr_redis_t *r, const char *queue, const char *entry) {
    char key[JR_KEY_MAX];
    jr_queue_key(key, queue, JR_QK_CANCELLED);
    redisReply *rep;
    int rc = jri_exec(r, &rep, "HEXISTS", key, entry, NULL);
    if (rc) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    freeReplyObject(rep);
    return rc;
}

int jr_redis_cancelled_entries(jr_redis_t *r, const char *queue, const char *const *ids, size_t n,
                               unsigned char *cancelled) {
    memset(cancelled, 0, n);
    char key[JR_KEY_MAX];
    jr_queue_key(key, queue, JR_QK_CANCELLED);
    const char **argv = malloc((n + 2) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "HMGET", argv[1] = key;
    memcpy(argv + 2, ids, n * sizeof *ids);
    redisReply *rep;
    int rc = jri_exec_argv(r, &rep, (int)(n + 2), argv, NULL);
    free(argv);
    if (rc) return rc;
    int got = 0;
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements && i < n; i++)
        if (rep->element[i]->type == REDIS_REPLY_STRING) cancelled[i] = 1, got++;
    freeReplyObject(rep);
    return got;
}

const char *jr_redis_paused_refused(const jr_redis_t *r) { return r->paused_err; }

const char *jr_redis_resumed_refused(const jr_redis_t *r) { return r->resumed_err; }

int jr_redis_paused(jr_redis_t *r, const char *const *queues, size_t n, unsigned char *paused) {
    int rc = jri_append_paused(r, queues, n);
    if (rc || (rc = jr_redis_flush(r))) return rc;
    return jri_recv_paused(r, n, paused);
}

int jr_redis_read_each(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                       const int64_t *counts, jr_batch_t *b, unsigned char *paused) {
    jri_batch_reset(b);
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (counts[i] <= 0) continue;
        char cnt[24];
        jr_qkeys_t q;
        jr_qkeys(&q, queues[i]);
        snprintf(cnt, sizeof cnt, "%lld", (long long)counts[i]);
        const char *argv[] = {"XREADGROUP", "GROUP", JR_GROUP, consumer, "COUNT", cnt, "STREAMS", q.ready, ">"};
        rc = jri_append_argv(r, 9, argv, NULL);
        k++;
    }
    if (rc || (rc = jri_append_paused(r, queues, n)) || (rc = jr_redis_flush(r))) return rc;
    if (k > b->morecap + 1) {
        void **m = realloc(b->more, (k - 1) * sizeof *m);
        if (!m) return jri_fail(r, JR_ENOMEM, "out of memory"); /* the connection is then dropped */
        b->more = m, b->morecap = k - 1;
    }
    /* Read every reply (the batch owns them), then count, reserve and fill. */
    int first_err = 0;
    size_t entries = 0, strs = 0;
    for (size_t i = 0; i < k; i++) {
        redisReply *rep;
        if ((rc = jri_recv_reply(r, &rep, r->timeout_us))) return rc;
        if (node_down_reply(rep)) { /* as if empty: that queue comes back short (not the others) */
            freeReplyObject(rep);
            if (!(rep = calloc(1, sizeof *rep))) return jri_fail(r, JR_ENOMEM, "out of memory");
            rep->type = REDIS_REPLY_NIL;
        }
        if (rep->type == REDIS_REPLY_ERROR) { /* that queue refused (NOGROUP...): the others' entries are ours */
            if (!first_err) first_err = jri_fail(r, JR_EREDIS, "%s", rep->str);
            freeReplyObject(rep);
            if (!(rep = calloc(1, sizeof *rep))) return jri_fail(r, JR_ENOMEM, "out of memory");
            rep->type = REDIS_REPLY_NIL;
        }
        if (i == 0) b->reply = rep;
        else b->more[b->nmore++] = rep;
        if ((rc = jri_count_streams(r, rep, &entries, &strs))) return rc;
    }
    if ((rc = jri_recv_paused(r, n, paused))) return rc;
    if (jri_batch_reserve(b, entries, strs)) return jri_fail(r, JR_ENOMEM, "out of memory");
    for (size_t i = 0; i < k && !rc; i++) rc = jri_fill_streams(r, b, i ? b->more[i - 1] : b->reply, queues, n, 0);
    return rc ? rc : first_err;
}

int jr_redis_send_read_paused(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                              const unsigned char *on, int64_t count, int64_t block_ms, int with_paused) {
    const char **sel = malloc((n ? n : 1) * sizeof *sel);
    if (!sel) return jri_fail(r, JR_ENOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (on[i]) sel[m++] = queues[i];
    int rc;
    if (m) {
        rc = append_read(r, consumer, sel, m, count, block_ms); /* the HMGET follows in the same write */
    } else { /* nothing to read: wait on a key nobody writes until the period ends or CLIENT UNBLOCK */
        char blk[24];
        snprintf(blk, sizeof blk, "%lld", (long long)block_ms);
        const char *argv[] = {"XREAD", "BLOCK", blk, "STREAMS", JR_RESUMED_KEY, "$"};
        rc = jri_append_argv(r, 6, argv, NULL);
    }
    free(sel);
    if (!rc && with_paused) rc = jri_append_paused(r, queues, n);
    return rc ? rc : jr_redis_flush(r);
}

int jr_redis_recv_read_paused(jr_redis_t *r, jr_batch_t *b, const char *const *queues, size_t n, int any_on,
                              unsigned char *paused) {
    jri_batch_reset(b);
    redisReply *rep;
    int rc = jri_recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    int prc = paused ? jri_recv_paused(r, n, paused) : 0; /* always read: the connection stays in step */
    if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "UNBLOCKED", 9) == 0) {
        freeReplyObject(rep);
        return prc;
    }
    if (!any_on) { /* the wait on JR_RESUMED_KEY: nothing to take; a refusal (the key holds garbage) is kept */
        if (rep->type == REDIS_REPLY_ERROR) {
            snprintf(r->resumed_err, sizeof r->resumed_err, "%s", rep->str);
            jri_explain(r, r->resumed_err, sizeof r->resumed_err);
        }
        else r->resumed_err[0] = '\0';
        freeReplyObject(rep);
        return prc;
    }
    if ((rc = jri_reply_error(r, rep))) return rc;
    if ((rc = jri_parse_streams(r, b, rep, queues, n, 0))) return rc;
    return prc;
}
