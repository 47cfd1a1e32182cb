/* The worker's results outbox: every outcome is an operation queued here
 * until Redis has taken it (sent on ctl, or on rd with the read). See
 * worker.c. */
#include "worker_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "followup.h"
#include "log.h"
#include "redis_produce.h"
#include "report.h"
#include "util.h"

static const char SAY_REGISTRY_GARBAGE[] =
    "the queue registry holds garbage; writing follow-ups without registering their queues";

#define RETRY_MAX_MS 5000 /* longest wait between tries of a refused operation */

/* Forget which follow-up targets are registered (a new connection, or the
 * worker's end). */
void jrw_forget_registered(worker_t *w) {
    for (size_t i = 0; i < w->nfu_registered; i++) free(w->fu_registered[i]);
    w->nfu_registered = 0;
}

/* 1 if every target queue of op's follow-ups is known registered (on
 * this connection); with `remember`, add them (best effort) instead. */
static int targets_registered(worker_t *w, const op_t *o, int remember) {
    size_t off = 0;
    jr_fu_item_t it;
    while (jr_fu_next(o->fu, o->fu_len, &off, &it) == 1) {
        size_t i = 0;
        while (i < w->nfu_registered && !(strlen(w->fu_registered[i]) == it.queue_len &&
                                           !memcmp(w->fu_registered[i], it.queue, it.queue_len)))
            i++;
        if (i < w->nfu_registered) continue;
        if (!remember) return 0;
        if (w->nfu_registered < FU_REGISTERED_MAX &&
            (w->fu_registered[w->nfu_registered] = strndup(it.queue, it.queue_len)))
            w->nfu_registered++;
    }
    return 1;
}

/* Queue an operation on queue's entry (error copied; why, a static string,
 * kept; see op_t). Returns 0, or JR_ENOMEM with nothing queued. */
int jrw_push_op(worker_t *w, op_kind_t kind, uint32_t queue, const char *entry, int64_t delay_ms,
                const char *error, const char *why) {
    if (w->nops == w->opcap) {
        size_t cap = w->opcap ? w->opcap * 2 : 256;
        op_t *v = realloc(w->ops, cap * sizeof *v);
        if (!v) return JR_ENOMEM;
        w->ops = v, w->opcap = cap;
    }
    op_t *o = &w->ops[w->nops];
    o->kind = kind, o->queue = queue, o->delay_ms = delay_ms, o->why = why;
    o->jobid[0] = '\0';
    o->fu = NULL, o->fu_len = 0;
    o->done_id = o->done_handler = NULL;
    o->keep = (jr_keep_t){0, 0};
    o->result = NULL, o->result_len = 0;
    snprintf(o->entry, sizeof o->entry, "%s", entry);
    o->error = error ? strdup(error) : NULL;
    if (error && !o->error) return JR_ENOMEM;
    w->nops++;
    return 0;
}

/* Drop every queued operation (the worker's end). */
void jrw_clear_ops(worker_t *w) {
    for (size_t i = 0; i < w->nops; i++)
        free(w->ops[i].error), free(w->ops[i].fu), free(w->ops[i].done_id), free(w->ops[i].done_handler),
            free(w->ops[i].result);
    w->nops = 0;
}

/* Log the end of a job whose op o was settled: "cancelled" when Redis said
 * in the same step that it was flagged (jr_ack's list, jr_ack_follow or
 * jr_fail returning 2: not retried, not buried, its follow-ups not
 * written), else its own outcome (or `outcome` with `error`, when not
 * NULL). Frees the op's log data; nothing for an op without it. */
static void log_settled(const worker_t *w, op_t *o, int cancelled, const char *outcome, const char *error) {
    if (!o->done_id) return;
    slot_t s = {.queue = o->queue, .id = o->done_id, .handler = o->done_handler, .attempt = o->done_attempt};
    if (outcome)
        jrw_log_outcome(w, &s, outcome, o->done_us, error, -1);
    else
        jrw_log_outcome(w, &s, cancelled ? "cancelled" : o->done_outcome, o->done_us, o->error,
                        !cancelled && o->kind == OP_RETRY ? o->delay_ms : -1);
    free(o->done_id), free(o->done_handler);
    o->done_id = o->done_handler = NULL;
}

/* The end of op o's job, for its finished record and its waiters. */
static jr_end_rec_t end_rec(const op_t *o) {
    return (jr_end_rec_t){.entry = o->entry, .jobid = o->jobid, .keep_count = o->keep.count,
                          .keep_age_ms = o->keep.age_ms, .handler = o->done_handler, .attempt = o->done_attempt,
                          .duration_us = o->done_us, .result = o->result, .result_len = o->result_len};
}

/* Read the reply of the WAIT sent after a flush's operations (rc: 0 or a
 * transport error). Fewer replicas than asked, or WAIT refused, is no
 * error: the results are Redis's already and are not sent again; a
 * failover now may lose them and run their jobs again (at-least-once
 * holds). That is logged once per episode (a warning; again only after
 * replicas confirmed a flush in between, which is logged too). */
static int recv_confirm(worker_t *w, jr_redis_t *conn) {
    int rc = jr_redis_recv_wait(conn, NULL);
    if (rc == 0) {
        if (w->unconfirmed)
            jr_log_kv(JR_LOG_INFO, "replicas confirm the results of finished jobs again", NULL);
        w->unconfirmed = 0;
        return 0;
    }
    if (rc != JR_EREPLICAS && rc != JR_EREDIS) return rc;
    if (!w->unconfirmed)
        jr_log_kv(JR_LOG_WARN, "results of finished jobs not confirmed by the replicas: a failover may run "
                  "those jobs again", "error", jr_redis_errstr(conn), NULL);
    w->unconfirmed = 1;
    return 0;
}

/* A job's own-queue follow-ups stay in its op (fu rebuilt from them);
 * the others have been written. None left: the op becomes the plain
 * acknowledgement it now is. Returns 0 or JR_ENOMEM (op unchanged). */
static int keep_own_followups(const worker_t *w, op_t *o, const char *own) {
    jr_fu_list_t l = {.max_payload = INT64_MAX};
    size_t off = 0;
    jr_fu_item_t it;
    char why[256];
    while (jr_fu_next(o->fu, o->fu_len, &off, &it) == 1) {
        if (it.queue_len != strlen(own) || memcmp(it.queue, own, it.queue_len)) continue;
        char *h = strndup(it.handler, it.handler_len), *id = strndup(it.id, it.id_len);
        jr_followup_t f = {.queue = own, .handler = h, .payload = it.payload, .payload_len = it.payload_len,
                           .delay_ms = it.delay_ms, .at_ms = it.at_ms, .id = id};
        int bad = !h || !id || jr_fu_append(&l, &f, own, why, sizeof why);
        free(h), free(id);
        if (bad) {
            jr_fu_reset(&l);
            return JR_ENOMEM;
        }
    }
    free(o->fu);
    o->fu = l.buf, o->fu_len = l.len;
    if (!l.n) { /* no follow-up left for the atomic call: a plain acknowledgement */
        o->kind = OP_ACK, o->fu = NULL, o->fu_len = 0;
        free(l.buf);
        if (o->done_id) jrw_ack_jobid(w, o, o->done_id); /* as push_ack names it */
    }
    return 0;
}

/* On a Redis Cluster a follow-up to another queue (another hash tag, so
 * maybe another shard) cannot be written in the call that acknowledges
 * the job (one call reaches one slot). Those are enqueued first, here, in
 * their own calls, each under an id: its own, or one derived from the job
 * (fu-<hash of the queue>-<entry id>-<k>, k its place among the job's
 * follow-ups), so that a worker that dies between this and the
 * acknowledgement, whose job then runs again, writes each once (the
 * idempotency window of an id: a day). Then the op keeps its own-queue
 * follow-ups for the atomic call. A follow-up Redis refuses makes the job
 * go to the dead stream, as a refused jr_ack_follow does (op becomes
 * OP_DEAD); one whose target's primary is down, or a refusal of the call
 * as a whole (the registry), holds that op (held: left out of this flush
 * and kept, its reason into held_err), not the others. On one Redis
 * nothing happens here. Returns 0, a transport error (every op stays
 * queued; the ids make the next try harmless) or JR_ENOMEM. */
static int cross_queue_followups(worker_t *w, jr_redis_t *conn, char *held_err, size_t held_len) {
    int rc = 0;
    for (size_t i = 0; i < w->nops; i++) w->ops[i].held = 0;
    if (!jr_redis_is_cluster(conn)) return 0;
    for (size_t i = 0; i < w->nops && !rc; i++) {
        op_t *o = &w->ops[i];
        if (o->kind != OP_FOLLOW) continue;
        const char *own = w->queues[o->queue];
        long n = jr_fu_count(o->fu, o->fu_len);
        if (n <= 0) continue; /* corrupt: jr_redis_append_ack_follow refuses it, the job goes dead */
        jr_enqueue_t *jobs = calloc((size_t)n, sizeof *jobs);
        char (*qs)[JR_QUEUE_MAX + 1] = calloc((size_t)n, sizeof *qs);
        char (*ids)[JR_ID_MAX] = calloc((size_t)n, sizeof *ids);
        char (*got)[JR_ID_MAX] = calloc((size_t)n, sizeof *got);
        jr_enq_outcome_t *out = calloc((size_t)n, sizeof *out);
        if (!jobs || !qs || !ids || !got || !out) rc = JR_ENOMEM;
        size_t off = 0, m = 0;
        jr_fu_item_t it;
        uint64_t qh = jr_fnv1a64(own, strlen(own));
        for (long k = 1; !rc && jr_fu_next(o->fu, o->fu_len, &off, &it) == 1; k++) {
            if (it.queue_len > JR_QUEUE_MAX || it.id_len >= JR_ID_MAX) continue; /* refused by the ack's encoder */
            if (it.queue_len == strlen(own) && !memcmp(it.queue, own, it.queue_len)) continue;
            memcpy(qs[m], it.queue, it.queue_len);
            if (it.id_len) memcpy(ids[m], it.id, it.id_len);
            else snprintf(ids[m], sizeof ids[m], "fu-%016llx-%s-%ld", (unsigned long long)qh, o->entry, k);
            jr_enqueue_t *j = &jobs[m++];
            j->queue = qs[m - 1], j->id = ids[m - 1];
            if (it.at_ms > 0) j->at_us = it.at_ms * 1000;
            else j->delay_ms = it.delay_ms;
            j->env.handler = it.handler, j->env.handler_len = it.handler_len;
            j->env.payload = it.payload, j->env.payload_len = it.payload_len;
            j->env.attempt = 1;
        }
        jr_strlist_t reasons = {0};
        int erc = rc || !m ? 0 : jr_redis_enqueue_each(conn, jobs, m, got, out, &reasons);
        int refused = 0;
        const char *down = NULL; /* the refusal of a target whose primary is down */
        for (size_t j = 0; j < m && !rc; j++)
            if (out[j].status == JR_ENQ_REFUSED) {
                refused = 1;
                /* a primary down, or one back without the library (a
                 * restarted node: the reconnect loads it): hold, not dead */
                if (out[j].why < reasons.n && (jr_redis_node_down(reasons.v[out[j].why]) ||
                                               strstr(reasons.v[out[j].why], "Function not found")))
                    down = reasons.v[out[j].why];
            }
        if (!rc && down) { /* a target's primary is down: this job waits for it, the others go on */
            o->held = 1;
            snprintf(held_err, held_len, "%s", down);
        } else if (!rc && refused) { /* into the dead stream, saying why (as a refused jr_ack_follow) */
            char why[JR_ERRLEN + 80];
            snprintf(why, sizeof why, "the handler succeeded but Redis refused its follow-ups: %s",
                     reasons.n ? reasons.v[0] : jr_redis_errstr(conn));
            jr_log_kv(JR_LOG_ERROR, "follow-ups refused by Redis; the job goes to the dead-letter stream", "entry",
                      o->entry, "queue", own, "error", why, NULL);
            free(o->fu), free(o->error);
            o->fu = NULL, o->fu_len = 0;
            o->kind = OP_DEAD, o->why = "failed";
            o->error = strdup(why);
            o->done_outcome = "dead";
        } else if (!rc && erc && erc != JR_EREPLICAS && !jr_redis_ok(conn)) {
            rc = erc; /* the connection failed: everything stays queued */
        } else if (!rc && erc == JR_ENOMEM) {
            rc = erc;
        } else if (!rc && erc && erc != JR_EREPLICAS) { /* refused as a whole (e.g. the registry): tried again */
            o->held = 1;
            snprintf(held_err, held_len, "%s", jr_redis_errstr(conn));
        } else if (!rc && m) {
            rc = keep_own_followups(w, o, own);
        }
        jr_strlist_free(&reasons);
        free(jobs), free(qs), free(ids), free(got), free(out);
    }
    return rc;
}

/* Send every queued operation on conn in one pipeline and read the
 * replies. Acknowledgements and hand-backs of a queue go as one call each
 * (jr_ack, jr_handback); an acknowledgement with follow-ups (OP_FOLLOW) as
 * its own jr_register + jr_ack_follow pair (jr_register only when a
 * target is not known registered on this connection), so jobs without
 * follow-ups keep the batched path; retries, dead letters and deferrals as
 * one jr_fail each.
 *
 * A call's reply settles its operations, whatever its value: 0 means the
 * entry is not ours any more (another worker took it over, or it was
 * deleted), so there is nothing left to do for it; a job Redis says was
 * cancelled (in jr_ack's list, or jr_ack_follow or jr_fail returning 2) is
 * logged "cancelled", any other one with its own outcome (log_settled). An
 * error reply (out of memory, LOADING, BUSY, READONLY, MASTERDOWN, ...)
 * settles nothing: the operations stay queued and are tried again after a
 * capped backoff (next_flush, 100 ms doubling to RETRY_MAX_MS; the refusal
 * logged once, jrw_refused), never dropped, since jobrunner cannot know
 * which refusals are temporary and a dropped ack runs the job again.
 * Except for refusals that would come back forever:
 *   - jr_ack_follow refused by its own checks ("ERR jobrunner:
 *     jr_ack_follow: ...", e.g. a target key of another type), or
 *     follow-ups the Redis layer will not encode: the job goes to the dead
 *     stream instead, with that error (the latter in this pipeline, the
 *     former with the next flush, without a backoff);
 *   - a key of the queue holding another type ("ERR jobrunner: ... holds
 *     ..."): the result is let go (reported once, the job logged
 *     "unrecorded"); the entry stays pending for a reclaim to take over;
 *   - a refused jr_register is best effort: reported once, the follow-ups
 *     and the acknowledgement go on, the targets not remembered.
 * A missing function ("Function not found") is answered by reconnecting,
 * which loads the library: JR_EREDIS is returned, or, with a read sent
 * after the operations, that read is ended (CLIENT UNBLOCK on ctl) and
 * reconnect_after_read set, so its entries are taken first.
 *
 * With redis.wait_replicas, one WAIT follows the operations in the same
 * write (before the read, if any) and its reply is read after theirs
 * (recv_confirm): one per flush, not per job.
 *
 * With want > 0 (conn is then rd), the blocking read of `want` entries
 * (jrw_send_read, BLOCK `block` ms) goes in the same write right after the
 * operations, so Redis runs the acknowledgements and then the read without
 * waiting for this worker, and the worker wakes once for both. The
 * operations' replies come first and are settled here as above; the read's
 * reply is taken later by turn() (read_with_ops says it went with them).
 * An entry is still acknowledged only after its job ended (only finished
 * jobs have operations), and an operation leaves the queue only once its
 * reply said so: a connection lost in between keeps them all queued, and
 * the read's entries, delivered but never seen, stay pending under this
 * consumer until a reclaim takes them (as for any read lost in flight).
 *
 * Returns 0; a transport error (everything stays queued for the next
 * connection); JR_EREDIS for a missing function (above); or JR_ENOMEM
 * (everything stays queued). */
int jrw_flush_ops_on(worker_t *w, jr_redis_t *conn, size_t want, int64_t block) {
    char held_err[JR_ERRLEN] = ""; /* why ops were held (cross_queue_followups) */
    int rc = cross_queue_followups(w, conn, held_err, sizeof held_err);
    if (rc) return rc;
    size_t calls = 0;
    const char **ids = malloc(w->nops * sizeof *ids);
    size_t *call = malloc(w->nops * sizeof *call); /* call carrying op i */
    unsigned char *bad = NULL;
    /* Per call: whether it is a jr_ack (its reply lists cancelled entries),
     * the list, and the integer reply (jr_ack_follow: 2 = cancelled). At
     * most 2 calls per queue, then 2 per op. */
    size_t maxcalls = 2 * w->nq + 2 * w->nops + 1;
    unsigned char *ackcall = calloc(maxcalls, 1);
    char ***flagged = calloc(maxcalls, sizeof *flagged);
    size_t *nflagged = calloc(maxcalls, sizeof *nflagged);
    long long *val = calloc(maxcalls, sizeof *val);
    if (!ids || !call || !ackcall || !flagged || !nflagged || !val) {
        free(ackcall), free(flagged), free(nflagged), free(val);
        free(ids), free(call);
        return JR_ENOMEM;
    }
    const char **jobids = malloc(w->nops * sizeof *jobids);
    jr_end_rec_t *recs = malloc(w->nops * sizeof *recs);
    if (!jobids || !recs) {
        free(ids), free(call), free(ackcall), free(flagged), free(nflagged), free(val), free(jobids), free(recs);
        return JR_ENOMEM;
    }
    for (uint32_t q = 0; q < w->nq && !rc; q++) {
        for (int kind = OP_ACK; kind <= OP_HANDBACK && !rc; kind += OP_HANDBACK - OP_ACK) {
            size_t n = 0;
            int keep = 0; /* a job kept (keep_finished) or with a result: the record form */
            for (size_t i = 0; i < w->nops; i++)
                if (w->ops[i].queue == q && (int)w->ops[i].kind == kind) {
                    keep |= w->ops[i].keep.count > 0 || w->ops[i].result;
                    recs[n] = end_rec(&w->ops[i]);
                    jobids[n] = w->ops[i].jobid, ids[n++] = w->ops[i].entry, call[i] = calls;
                }
            if (!n) continue;
            if (kind == OP_ACK && keep) {
                rc = jr_redis_append_ack_records(conn, w->queues[q], w->consumer, recs, n);
                ackcall[calls++] = 1;
                continue;
            }
            /* Acks carry the job ids, so the job index forgets them. When
             * every job id is its entry id (no index entry to forget: the
             * usual case), the one-key form: half the arguments for Redis. */
            int named = 0;
            for (size_t i = 0; i < n && !named; i++) named = jobids[i][0] != '\0';
            rc = kind != OP_ACK ? jr_redis_append_handback(conn, w->queues[q], w->consumer, ids, n)
                                : jr_redis_append_ack_report(conn, w->queues[q], ids, named ? jobids : NULL, n);
            ackcall[calls++] = kind == OP_ACK;
        }
    }
    free(ids), free(jobids), free(recs);
    size_t first_follow = calls; /* calls from here on: jr_register (if regs) + jr_ack_follow */
    unsigned char *regs = calloc(w->nops, 1);
    if (!regs) rc = JR_ENOMEM;
    for (size_t i = 0; i < w->nops && !rc; i++) {
        const op_t *o = &w->ops[i];
        if (o->kind != OP_FOLLOW || o->held) continue;
        regs[calls - first_follow] = !targets_registered(w, o, 0);
        jr_end_rec_t rec = end_rec(o);
        rc = jr_redis_append_ack_follow_end(conn, w->queues[o->queue], o->entry, o->fu, o->fu_len,
                                            regs[calls - first_follow], w->consumer, &rec);
        /* Cannot happen (exec.c validated them; nothing was appended): the
         * job goes to the dead stream rather than lose them unseen. */
        if (rc == JR_EINVAL) {
            char why[JR_ERRLEN + 64];
            snprintf(why, sizeof why, "the handler succeeded but its follow-ups are invalid: %s",
                     jr_redis_errstr(conn));
            jr_log_kv(JR_LOG_ERROR, "invalid follow-ups; the job goes to the dead-letter stream", "entry",
                      o->entry, "error", why, NULL);
            rc = jr_redis_append_fail_end(conn, w->queues[o->queue], o->entry, w->consumer, "dead", 0, why,
                                          "failed", w->cfg->dead_max, &rec);
            regs[calls - first_follow] = 0;
            w->ops[i].done_outcome = "dead"; /* logged as what it is when jr_fail answers */
        }
        call[i] = calls++;
    }
    size_t first_fail = calls;
    for (size_t i = 0; i < w->nops && !rc; i++) {
        const op_t *o = &w->ops[i];
        if (o->kind != OP_RETRY && o->kind != OP_DEAD && o->kind != OP_DEFER) continue;
        jr_end_rec_t rec = end_rec(o);
        rc = jr_redis_append_fail_end(conn, w->queues[o->queue], o->entry, w->consumer,
                                      o->kind == OP_RETRY ? "retry" : o->kind == OP_DEFER ? "defer" : "dead",
                                      o->delay_ms, o->error ? o->error : "", o->why ? o->why : "failed",
                                      w->cfg->dead_max, &rec);
        call[i] = calls++;
    }
    /* bad[c]: 1 = refused (kept, tried again later), 2 = follow-ups
     * refused by jr_ack_follow itself (the job fails instead, see below),
     * 3 = a key of the queue holds garbage (the result is let go). */
    if (!rc && !(bad = calloc(calls ? calls : 1, 1))) rc = JR_ENOMEM;
    int waited = 0; /* a WAIT follows the operations */
    if (!rc && calls && (rc = jr_redis_append_wait(conn)) > 0) waited = 1, rc = 0;
    if (!rc) rc = want ? jrw_send_read(w, want, block) : jr_redis_flush(conn);
    if (!rc && want) w->read_with_ops = 1;
    char err[JR_ERRLEN] = "", drop_err[JR_ERRLEN] = "";
    char **follow_err = NULL; /* per follow-up call: jr_ack_follow's refusal */
    if (!rc && first_fail > first_follow &&
        !(follow_err = calloc(first_fail - first_follow, sizeof *follow_err)))
        rc = JR_ENOMEM;
    int nofunc = 0, all_down = 1; /* all_down: every refusal so far is of a cluster node that is down */
    for (size_t c = 0; c < calls && !rc; c++) {
        int follow = c >= first_follow && c < first_fail;
        int reg = follow && regs[c - first_follow];
        /* One reply per call; reply 0 is jr_register's before a jr_ack_follow. */
        for (int reply = reg ? 0 : 1; reply <= 1 && !rc; reply++) {
            long long v = 0;
            rc = ackcall[c] ? jr_redis_recv_ack(conn, &v, &flagged[c], &nflagged[c]) : jr_redis_recv_int(conn, &v);
            if (reply == 1) val[c] = v;
            if (rc != JR_EREDIS) continue;
            const char *e = jr_redis_errstr(conn);
            rc = 0;
            if (follow && reply == 1 && !strncmp(e, "ERR jobrunner: jr_ack_follow:", 29)) {
                /* Its own checks refused the follow-ups (a key of another
                 * type, ...): trying again would be refused again and
                 * would wedge this worker; the job fails with the reason. */
                bad[c] = bad[c] ? bad[c] : 2;
                follow_err[c - first_follow] = strdup(e);
                continue;
            }
            if (follow && reply == 0) {
                /* The registration of the targets was refused (the registry
                 * holds garbage, or another refusal): it is best effort, not
                 * remembered, and tried again with the next follow-ups to
                 * them; the follow-ups and the acknowledgement go on (only
                 * their own reply settles the operation). */
                if (jr_redis_registry_garbage(e))
                    jr_report_once(JR_LOG_ERROR, SAY_REGISTRY_GARBAGE, "key",
                                   strstr(e, JR_REGISTRY_WAKE_KEY) ? JR_REGISTRY_WAKE_KEY : JR_REGISTRY_KEY, e);
                else
                    jr_report_once(JR_LOG_ERROR, "Redis refused to register the queues of follow-ups; they are written, "
                                   "registered with the next ones", "key", JR_REGISTRY_KEY, e);
                regs[c - first_follow] = 0;
                continue;
            }
            if (!strncmp(e, "ERR jobrunner: ", 15) && strstr(e, " holds ")) {
                /* A key of the queue holds another type: trying again
                 * would be refused again, and while a result is kept
                 * nothing is fetched from any queue. The result is let go:
                 * the entry stays pending in its queue, which a reclaim
                 * takes over (or buries as poison) like a lost worker's. */
                bad[c] = 3;
                if (!drop_err[0]) snprintf(drop_err, sizeof drop_err, "%s", e);
                continue;
            }
            bad[c] = 1; /* a refused call must not wedge the others */
            if (!err[0]) snprintf(err, sizeof err, "%s", e);
            all_down &= jr_redis_node_down(e);
            nofunc |= strstr(e, "Function not found") != NULL;
        }
    }
    if (!rc && waited) rc = recv_confirm(w, conn);
    if (!rc) {
        size_t kept = 0, failed = 0;
        for (size_t i = 0; i < w->nops; i++) {
            op_t *o = &w->ops[i];
            if (o->held) { /* not sent: kept, as refused */
                w->ops[kept++] = *o;
                all_down &= jr_redis_node_down(held_err);
                nofunc |= strstr(held_err, "Function not found") != NULL;
                if (!err[0]) snprintf(err, sizeof err, "%s", held_err);
                continue;
            }
            if (bad[call[i]] == 2) { /* into the dead stream, saying why */
                const char *e = follow_err[call[i] - first_follow];
                char why[JR_ERRLEN + 80];
                snprintf(why, sizeof why, "the handler succeeded but Redis refused its follow-ups: %s",
                         e ? e : "out of memory");
                jr_log_kv(JR_LOG_ERROR, "follow-ups refused by Redis; the job goes to the dead-letter stream",
                          "entry", o->entry, "queue", w->queues[o->queue], "error", e, NULL);
                free(o->fu), free(o->error);
                o->fu = NULL, o->fu_len = 0;
                o->kind = OP_DEAD, o->why = "failed";
                o->error = strdup(why); /* NULL: sent with an empty error */
                o->done_outcome = "dead"; /* logged when jr_fail answers (cancelled, if it was) */
                w->ops[kept++] = *o;
                failed++;
            } else if (bad[call[i]] == 3) {
                jr_report_once(JR_LOG_ERROR, "Redis refuses the results of this queue's jobs (a key holds garbage); letting them go, the entries stay pending",
                               "queue", w->queues[o->queue], drop_err);
                /* it ran: say so (the key is named once, above, not per job) and free its log fields */
                log_settled(w, o, 0, "unrecorded", "Redis refused its result: a key of the queue holds garbage");
                free(o->error), free(o->fu), free(o->result);
            } else if (bad[call[i]]) {
                w->ops[kept++] = *o;
            } else {
                if (o->kind == OP_FOLLOW && regs[call[i] - first_follow]) targets_registered(w, o, 1);
                int cancelled = o->kind != OP_ACK && val[call[i]] == 2; /* FOLLOW, RETRY, DEAD */
                for (size_t f = 0; o->kind == OP_ACK && f < nflagged[call[i]] && !cancelled; f++)
                    cancelled = !strcmp(flagged[call[i]][f], o->entry);
                log_settled(w, o, cancelled, NULL, NULL);
                free(o->error), free(o->fu), free(o->result);
            }
        }
        for (size_t c = first_follow; follow_err && c < first_fail; c++) free(follow_err[c - first_follow]);
        free(follow_err);
        follow_err = NULL;
        kept -= failed; /* those go out at the next flush, not after a backoff */
        w->nops = kept + failed;
        if (kept) {
            jrw_refused(&w->ops_refused, "Redis refused results of finished jobs; keeping them and retrying", err);
            /* Only results for a cluster node that is down are kept: the
             * others went, and the worker fetches on from the live nodes
             * (a down node's refusal costs no round trip), trying those
             * again every 100 ms, so the results of jobs fetched
             * meanwhile go within that too. */
            w->ops_down = all_down;
            w->next_flush = jr_mono_us() + w->flush_backoff_ms * 1000;
            if (!all_down)
                w->flush_backoff_ms = w->flush_backoff_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : w->flush_backoff_ms * 2;
            /* Reconnect: connecting loads the library. With a read sent
             * after them (jrw_flush_ops_on with want), first take its entries
             * (else they would wait a lease in Redis): end its wait now
             * and reconnect once its reply is in (turn()). */
            if (nofunc && want && w->reading && !(rc = jr_redis_unblock(w->ctl, w->rd_id)))
                w->reconnect_after_read = 1;
            else if (nofunc && !rc)
                rc = JR_EREDIS;
        } else {
            jrw_accepted(&w->ops_refused, "Redis accepts results again; the kept ones went through");
            w->next_flush = 0, w->flush_backoff_ms = 100, w->ops_down = 0;
        }
    }
    free(follow_err), free(regs);
    for (size_t c = 0; c < maxcalls; c++) {
        for (size_t f = 0; f < nflagged[c]; f++) free(flagged[c][f]);
        free(flagged[c]);
    }
    free(ackcall), free(flagged), free(nflagged), free(val);
    free(call), free(bad);
    return rc;
}

/* jrw_flush_ops_on ctl, unless nothing is queued or the backoff of a
 * refusal is not over (then 0). */
int jrw_flush_ops(worker_t *w) {
    if (!w->nops || jr_mono_us() < w->next_flush) return 0;
    return jrw_flush_ops_on(w, w->ctl, 0, 0);
}
