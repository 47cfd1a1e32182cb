/* The worker's jobs: the entries of a read checked and held in slots,
 * handed to the executor, and their outcomes turned into results
 * (outbox.c). See worker.c. */
#include "worker_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "followup.h"
#include "jr_limits.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

/* The end of slot s's job, with `outcome` ("ok", "retry", "dead",
 * "cancelled", "interrupted", "unrecorded"): counted in the metrics and
 * logged as "job finished" (INFO for ok, WARN otherwise), with the error
 * (if any) and retry_in (if >= 0, ms). */
void jrw_log_outcome(const worker_t *w, const slot_t *s, const char *outcome, int64_t duration_us,
                     const char *error, int64_t retry_in) {
    jr_metrics_job_done(w->shown[s->queue], s->handler, outcome, (double)duration_us / 1e6);
    if (!jr_log_enabled(outcome[0] == 'o' ? JR_LOG_INFO : JR_LOG_WARN)) return;
    char attempt[16], dur[32], retry[32];
    snprintf(attempt, sizeof attempt, "%u", s->attempt);
    snprintf(dur, sizeof dur, "%lld.%03lld", (long long)(duration_us / 1000), (long long)(duration_us % 1000));
    snprintf(retry, sizeof retry, "%lldms", (long long)retry_in);
    jr_log_kv(outcome[0] == 'o' ? JR_LOG_INFO : JR_LOG_WARN, "job finished", "job", s->id, "queue",
              w->shown[s->queue], "handler", s->handler, "attempt", attempt, "outcome", outcome,
              "duration_ms", dur, "error", error && error[0] ? error : NULL, "retry_in",
              retry_in >= 0 ? retry : NULL, NULL);
}

/* Bury an entry that cannot run, saying why. */
static int reject(worker_t *w, uint32_t q, const char *entry, const char *reason) {
    jr_log_kv(JR_LOG_ERROR, "invalid job; moved to the dead-letter stream", "entry", entry, "queue",
              w->shown[q], "partition", w->part[q] >= 0 ? w->queues[q] : NULL, "reason", reason, NULL);
    return jrw_push_op(w, OP_DEAD, q, entry, 0, reason, "invalid");
}

/* A job whose handler is not loaded here. During a rolling upgrade another
 * worker may have it, so the job is deferred (jr_fail "defer": the same
 * attempt, back through the delayed set, for any worker to take) while it
 * has waited less than worker.handler_wait since it first fell due; the
 * next try is after half its wait so far, 1 s to 30 s. Then it is dead. */
static int no_handler(worker_t *w, uint32_t q, const char *entry, const jr_envelope_t *env) {
    char err[256];
    snprintf(err, sizeof err, "no handler named \"%.64s\" is loaded", env->handler);
    int64_t waited = jrw_redis_now_ms(w) - env->due_ms;
    if (waited < 0) waited = 0;
    if (waited >= w->cfg->worker_handler_wait_ms) {
        if (w->cfg->worker_handler_wait_ms > 0)
            snprintf(err + strlen(err), sizeof err - strlen(err),
                     " here or on any worker that took it in %lld s (worker.handler_wait)",
                     (long long)(waited / 1000));
        return reject(w, q, entry, err);
    }
    int64_t delay = waited / 2 < 1000 ? 1000 : waited / 2 > 30000 ? 30000 : waited / 2;
    char in[32];
    snprintf(in, sizeof in, "%lldms", (long long)delay);
    jr_log_kv(JR_LOG_WARN, "no handler for this job here: deferred for a worker that has it", "entry", entry,
              "queue", w->shown[q], "handler", env->handler, "retry_in", in, NULL);
    char h[JR_HANDLER_NAME_MAX + 1]; /* the envelope's strings are not NUL-terminated */
    size_t hl = env->handler_len < JR_HANDLER_NAME_MAX ? env->handler_len : JR_HANDLER_NAME_MAX;
    snprintf(h, sizeof h, "%.*s", (int)hl, env->handler);
    jr_metrics_deferred(w->shown[q], h);
    return jrw_push_op(w, OP_DEFER, q, entry, delay, err, NULL);
}

/* Free slot s (its strings, and its place onto the free stack); a FREE
 * slot is left alone. It stays in waitq if it was there (the caller's
 * business). */
void jrw_free_slot(worker_t *w, slot_t *s) {
    if (s->state == SLOT_FREE) return; /* never twice onto the free stack */
    free(s->id), free(s->handler), free(s->payload);
    s->id = s->handler = s->payload = NULL;
    s->state = SLOT_FREE;
    w->freeslots[w->nfree++] = (uint32_t)(s - w->slots);
    w->used--;
}

void jrw_ack_jobid(const worker_t *w, op_t *o, const char *id) {
    size_t n = strlen(id), gen;
    unsigned i;
    if (w->part[o->queue] >= 0 && jr_partition_id_parse(id, n, &gen, &i)) n = gen;
    if (n != strlen(o->entry) || strncmp(id, o->entry, n) != 0) snprintf(o->jobid, sizeof o->jobid, "%.*s", (int)n, id);
}

/* Queue the acknowledgement of slot s's entry, with its job id. */
static int push_ack(worker_t *w, const slot_t *s) {
    int rc = jrw_push_op(w, OP_ACK, s->queue, s->entry, 0, NULL, NULL);
    if (!rc) jrw_ack_jobid(w, &w->ops[w->nops - 1], s->id);
    return rc;
}

/* The op just queued for slot s, whose job ended with `outcome`, takes the
 * job's log data: its line is written when Redis answers (log_settled);
 * and what its finished record needs: the keep_finished of its queue and
 * handler, and its result (moved from *o). */
static void log_when_settled(worker_t *w, slot_t *s, int64_t duration_us, const char *outcome, jr_outcome_t *o) {
    op_t *op = &w->ops[w->nops - 1];
    op->keep = jr_config_keep(w->cfg, w->queues[s->queue], s->handler);
    op->result = o->result, op->result_len = o->result_len; /* moved */
    o->result = NULL, o->result_len = 0;
    op->done_outcome = outcome;
    op->done_id = s->id, op->done_handler = s->handler; /* moved: jrw_free_slot frees NULL */
    s->id = s->handler = NULL;
    op->done_attempt = s->attempt, op->done_us = duration_us;
}

/* Turn an outcome into an operation and a log line. A job cancelled while
 * it ran is acknowledged whatever its result (never retried or buried: the
 * flag in Redis is certain once a heartbeat reported it), outcome
 * "cancelled", and its follow-ups are dropped. Any other job that ran is
 * logged when its operation is answered: Redis checks the flag in the same
 * step (jr_ack, jr_ack_follow, jr_fail), so a job cancelled after the last
 * heartbeat is "cancelled" too: not retried, without its follow-ups.
 * A job stopped by our shutdown (unstarted, interrupted) is handed back, no
 * attempt used; a failed one retried with backoff, or buried once out of
 * attempts. Frees the slot. Returns 0, or JR_ENOMEM (nothing queued: the
 * entry stays pending in Redis). */
int jrw_finish(worker_t *w, jr_outcome_t *o) {
    slot_t *s = &w->slots[o->tag];
    int rc = 0;
    if (s->cancelled) { /* its follow-ups are not written: it was cancelled */
        free(o->followups);
        o->followups = NULL;
        rc = push_ack(w, s);
        if (!rc) log_when_settled(w, s, o->duration_us, "cancelled", o); /* and its record says so */
    } else if (o->kind == JR_OUT_OK && o->followups) { /* the operation takes them */
        /* a job of a partition: its follow-ups to its own queue stay in its partition */
        char *renamed = NULL;
        size_t rlen = 0;
        int ren = w->part[s->queue] >= 0 ? jr_fu_rename(o->followups, o->followups_len, w->shown[s->queue],
                                                        w->queues[s->queue], &renamed, &rlen)
                                         : 0;
        if (ren == 1) {
            free(o->followups);
            o->followups = renamed, o->followups_len = rlen;
        }
        rc = ren == JR_ENOMEM ? JR_ENOMEM : jrw_push_op(w, OP_FOLLOW, s->queue, s->entry, 0, NULL, NULL);
        if (!rc) w->ops[w->nops - 1].fu = o->followups, w->ops[w->nops - 1].fu_len = o->followups_len;
        else free(o->followups);
        o->followups = NULL;
        if (!rc) log_when_settled(w, s, o->duration_us, "ok", o);
    } else if (o->kind == JR_OUT_OK) {
        rc = push_ack(w, s);
        if (!rc) log_when_settled(w, s, o->duration_us, "ok", o);
    } else if (o->kind == JR_OUT_UNSTARTED || o->kind == JR_OUT_INTERRUPTED) {
        /* Stopped by our shutdown, not by the job: no attempt used. */
        if (o->kind == JR_OUT_INTERRUPTED)
            jrw_log_outcome(w, s, "interrupted", o->duration_us, o->error, -1);
        rc = jrw_push_op(w, OP_HANDBACK, s->queue, s->entry, 0, NULL, NULL);
    } else {
        const char *err = o->error[0] ? o->error
                          : o->kind == JR_OUT_RETRY ? "the handler asked for a retry"
                                                    : "the handler failed";
        /* A retry delay past the maximum would be refused by jr_fail
         * forever, and a refused result is kept and stops this worker's
         * fetching: it fails the job instead, saying so. */
        int too_far = o->kind == JR_OUT_RETRY && o->retry_after_ms > JR_DELAY_MAX_MS;
        if (o->kind == JR_OUT_FAIL || too_far || s->attempt >= s->max_attempts) {
            char why[400];
            if (too_far)
                snprintf(why, sizeof why, "%s; the handler asked for a retry in %lld ms, more than the maximum %lld ms "
                         "(10 years)", err, (long long)o->retry_after_ms, (long long)JR_DELAY_MAX_MS);
            else if (o->kind != JR_OUT_FAIL)
                snprintf(why, sizeof why, "%s (attempt %u of %u)", err, s->attempt, s->max_attempts);
            else
                snprintf(why, sizeof why, "%s (permanent failure)", err);
            rc = jrw_push_op(w, OP_DEAD, s->queue, s->entry, 0, why, "failed");
            if (!rc) log_when_settled(w, s, o->duration_us, "dead", o);
        } else {
            int64_t delay = o->retry_after_ms >= 0
                                ? o->retry_after_ms
                                : jr_backoff_ms(s->attempt, s->policy.backoff_ms,
                                                s->policy.backoff_max_ms, jrw_next_rand(w));
            rc = jrw_push_op(w, OP_RETRY, s->queue, s->entry, delay, err, NULL);
            if (!rc) log_when_settled(w, s, o->duration_us, "retry", o);
            if (!rc) free(w->ops[w->nops - 1].result), w->ops[w->nops - 1].result = NULL; /* a retry keeps none */
        }
    }
    free(o->result); /* not taken by an op */
    o->result = NULL;
    jrw_free_slot(w, s);
    return rc;
}

/* A free slot (growing the array if all are used), or NULL if out of
 * memory. O(1): the free slots are a stack (a worker holds hundreds of
 * prefetched jobs; a scan for a free one per job cost microseconds). */
static slot_t *alloc_slot(worker_t *w, uint32_t *index) {
    if (w->nfree == 0) {
        size_t cap = w->nslots ? w->nslots * 2 : 16;
        uint32_t *f = realloc(w->freeslots, cap * sizeof *f);
        if (!f) return NULL;
        w->freeslots = f;
        slot_t *v = realloc(w->slots, cap * sizeof *v);
        if (!v) return NULL;
        memset(v + w->nslots, 0, (cap - w->nslots) * sizeof *v);
        for (size_t k = cap; k > w->nslots; k--) w->freeslots[w->nfree++] = (uint32_t)(k - 1);
        w->slots = v, w->nslots = cap;
    }
    if (w->wq_n == w->wq_cap) {
        size_t cap = w->wq_cap ? w->wq_cap * 2 : 16;
        uint32_t *q = realloc(w->waitq, cap * sizeof *q);
        if (!q) return NULL;
        w->waitq = q, w->wq_cap = cap;
    }
    *index = w->freeslots[--w->nfree];
    return &w->slots[*index];
}

/* 1 if this worker already holds the entry: running or waiting, or with an
 * operation queued for it (finished, its result not yet accepted). */
int jrw_held(const worker_t *w, uint32_t q, const char *entry) {
    for (size_t i = 0; i < w->nslots; i++)
        if (w->slots[i].state != SLOT_FREE && w->slots[i].queue == q && !strcmp(w->slots[i].entry, entry))
            return 1;
    for (size_t i = 0; i < w->nops; i++)
        if (w->ops[i].queue == q && !strcmp(w->ops[i].entry, entry)) return 1;
    return 0;
}

/* Hand WAITING jobs, oldest first, to the idle runners, spread evenly over
 * them (at most worker.batch per runner: a runner's batch costs one message,
 * so short jobs go in large batches). Jobs so short that one runner runs all
 * of them within SPLIT_MIN_US (by the average duration so far) go to one
 * runner: waking each runner costs more than the work it would take over
 * (two context switches and a message, tens of microseconds in a VM); a
 * slow one among them is moved on by the executor (MOVE_AFTER_US). Returns 0
 * (what no runner takes now waits for the next call) or JR_ENOMEM. */
#define SPLIT_MIN_US 1000
static int start(worker_t *w) {
    size_t idle = jr_exec_idle(w->exec);
    while (w->wq_head < w->wq_n && idle > 0) {
        size_t waiting = w->wq_n - w->wq_head;
        int quick = w->job_us > 0 && (int64_t)waiting * w->job_us <= SPLIT_MIN_US;
        size_t n = quick ? waiting : (waiting + idle - 1) / idle;
        if (n > (size_t)w->cfg->worker_batch) n = (size_t)w->cfg->worker_batch;
        for (size_t i = 0; i < n; i++) {
            uint32_t k = w->waitq[w->wq_head + i];
            const slot_t *s = &w->slots[k];
            w->tasks[i] = (jr_task_t){.tag = k, .id = s->id, .queue = w->shown[s->queue],
                                      .handler = s->handler, .payload = s->payload,
                                      .payload_len = s->payload_len, .attempt = s->attempt,
                                      .timeout_ms = s->timeout_ms};
        }
        int rc = jr_exec_submit(w->exec, w->tasks, n);
        if (rc == JR_ENOMEM) return rc;
        if (rc) break; /* no runner after all: later */
        for (size_t i = 0; i < n; i++) { /* the executor copied the strings */
            slot_t *s = &w->slots[w->waitq[w->wq_head + i]];
            s->state = SLOT_SUBMITTED;
            free(s->payload);
            s->payload = NULL;
            if (s->cancelled) jr_exec_cancel(w->exec, w->waitq[w->wq_head + i]);
        }
        w->wq_head += n, idle--;
    }
    if (w->wq_head == w->wq_n) w->wq_head = w->wq_n = 0;
    return 0;
}

/* Take the entries of a read: bury the invalid ones, keep the others
 * WAITING (in fetch order) and start what the idle runners can take. A
 * batch may be larger than what was asked for (a read over several queues
 * returns up to COUNT per queue): the slots grow, and no new read is made
 * until they are below the bound again. `reclaimed`: the entries come from
 * XAUTOCLAIM, which can give back entries this worker still holds (after an
 * outage longer than the lease); those are not run again. (XREADGROUP ">"
 * delivers only entries never delivered before, so it cannot.) Returns 0
 * or JR_ENOMEM. */
int jrw_dispatch(worker_t *w, const jr_batch_t *b, int reclaimed) {
    for (size_t i = 0; i < b->n; i++) {
        const jr_entry_t *e = &b->v[i];
        jr_envelope_t env;
        char err[JR_ERRLEN];
        int rc = 0;
        if (reclaimed && strlen(e->id) < ENTRY_MAX && jrw_held(w, e->queue, e->id)) {
            jr_log_kv(JR_LOG_WARN, "Redis gave back a job this worker already holds; not running it again",
                      "entry", e->id, "queue", w->shown[e->queue], NULL);
        } else if (w->stopping || w->paused[e->queue]) { /* paused: fetched before it was seen */
            rc = jrw_push_op(w, OP_HANDBACK, e->queue, e->id, 0, NULL, NULL);
        } else if (strlen(e->id) >= ENTRY_MAX) {
            rc = reject(w, e->queue, e->id, "malformed stream entry id");
        } else if (e->odd) {
            rc = reject(w, e->queue, e->id, "odd number of field/value items");
        } else if (jr_envelope_decode(&env, e->id, e->nfields, e->names, e->name_lens, e->values,
                                      e->value_lens, err, sizeof err) != 0) {
            rc = reject(w, e->queue, e->id, err);
        } else if (env.payload_len > (size_t)w->cfg->max_payload) {
            snprintf(err, sizeof err, "payload of %zu bytes is over the limit of %lld (jobs.max_payload)",
                     env.payload_len, (long long)w->cfg->max_payload);
            rc = reject(w, e->queue, e->id, err);
        } else if (!jr_registry_find(w->reg, env.handler)) { /* values are NUL-terminated */
            rc = no_handler(w, e->queue, e->id, &env);
        } else {
            uint32_t k;
            slot_t *s = alloc_slot(w, &k);
            if (!s) return JR_ENOMEM;
            s->state = SLOT_WAITING;
            s->cancelled = 0;
            w->used++;
            w->waitq[w->wq_n++] = k;
            s->queue = e->queue;
            snprintf(s->entry, sizeof s->entry, "%s", e->id);
            /* a generated id in a partition: shown with its partition
             * (partition.h), so that a lookup by it finds the job at once */
            if (w->part[e->queue] >= 0 && jr_contract_id_reserved(env.id, env.id_len)) {
                char shown[JR_ID_MAX + 16];
                snprintf(shown, sizeof shown, "%.*s~%d", (int)env.id_len, env.id, w->part[e->queue]);
                s->id = strdup(shown);
            } else {
                s->id = strndup(env.id, env.id_len);
            }
            s->handler = strdup(env.handler);
            s->payload = malloc(env.payload_len + 1);
            if (!s->id || !s->handler || !s->payload) return JR_ENOMEM;
            memcpy(s->payload, env.payload, env.payload_len);
            s->payload[env.payload_len] = '\0';
            s->payload_len = env.payload_len;
            s->policy = jr_config_policy(w->cfg, env.handler);
            if (env.backoff_ms) s->policy.backoff_ms = env.backoff_ms;
            s->attempt = env.attempt;
            s->max_attempts = env.max_attempts ? env.max_attempts : (uint32_t)s->policy.max_attempts;
            s->timeout_ms = env.timeout_ms ? env.timeout_ms : s->policy.timeout_ms;
        }
        if (rc) return rc;
    }
    return start(w);
}

/* Hand every WAITING job back to the queue (the worker is stopping, or
 * jrw_shed gives them up). Returns 0 or JR_ENOMEM. */
int jrw_hand_back_waiting(worker_t *w) {
    for (; w->wq_head < w->wq_n; w->wq_head++) {
        slot_t *s = &w->slots[w->waitq[w->wq_head]];
        int rc = jrw_push_op(w, OP_HANDBACK, s->queue, s->entry, 0, NULL, NULL);
        jrw_free_slot(w, s);
        if (rc) return rc;
    }
    w->wq_head = w->wq_n = 0;
    return 0;
}

/* Gather the executor's outcomes (jrw_finish each; in inline mode the
 * handlers run in here, with keep_mu released so the lease keeper may
 * heartbeat), log what the keeper met meanwhile, and start waiting jobs on
 * the idle runners. Returns 0, JR_ENOMEM (here, in the executor or in the
 * keeper), or JR_EIO when the keeper's connection broke (the caller
 * reconnects). */
int jrw_collect(worker_t *w) {
    size_t n, max = w->noutcomes;
    do {
        int64_t t0 = jr_mono_us();
        if (w->keeper_on) pthread_mutex_unlock(&w->keep_mu); /* handlers run: the keeper may heartbeat */
        n = jr_exec_collect(w->exec, w->outcomes, max);
        if (w->keeper_on) pthread_mutex_lock(&w->keep_mu);
        w->ran_us += jr_mono_us() - t0;
        if (w->keep_err[0]) { /* what the keeper met meanwhile */
            jrw_refused(&w->hb_refused, "Redis refused a heartbeat; trying again at the next one", w->keep_err);
            w->keep_err[0] = '\0';
        }
        for (size_t i = 0; i < n; i++) {
            /* the run-time average counts jobs that ran: not those handed
             * back, nor those whose runner died before starting them (a
             * zero-length "run" would make prefetch take a full batch) */
            if (w->outcomes[i].kind != JR_OUT_UNSTARTED &&
                !(w->outcomes[i].kind == JR_OUT_CRASH && w->outcomes[i].duration_us == 0)) {
                w->job_us = jrw_ewma(w->job_us, w->outcomes[i].duration_us > 0 ? w->outcomes[i].duration_us : 1);
                w->last_outcome_us = jr_mono_us();
            }
            int rc = jrw_finish(w, &w->outcomes[i]);
            if (rc) return rc;
        }
    } while (n == max);
    if (w->keeper_nomem || jr_exec_nomem(w->exec)) return JR_ENOMEM;
    if (w->keeper_broken) return JR_EIO; /* reconnect, the keeper's connection too */
    return start(w);
}

/* When every runner has been busy for longer than a fetch can be put to
 * use (a few round trips, at least 10 ms), the jobs waiting for a runner —
 * in the executor and here — go back to the queue, where an idle worker
 * takes them: a worker that prefetched short jobs must not sit on long ones.
 * Its prefetch is then 0 (no job finished lately), so it does not take
 * them again. (Not in inline mode: nothing else can run while its one job
 * runs, and it holds what it fetched until it has run it.) */
int64_t jrw_shed_after_us(const worker_t *w) {
    int64_t rtt = w->rtt_us > 0 ? w->rtt_us : 1000;
    return 4 * rtt > 10000 ? 4 * rtt : 10000;
}

/* jrw_shed does it (a no-op until every runner has been busy that long).
 * Returns 0 or JR_ENOMEM. */
int jrw_shed(worker_t *w) {
    if (!jr_exec_stalled(w->exec, jrw_shed_after_us(w))) return 0;
    size_t n, k = w->wq_n - w->wq_head;
    while ((n = jr_exec_shed(w->exec, w->outcomes, w->noutcomes)) > 0) {
        k += n;
        for (size_t i = 0; i < n; i++) {
            int rc = jrw_finish(w, &w->outcomes[i]);
            if (rc) return rc;
        }
    }
    if (k == 0) return 0;
    char total[24];
    snprintf(total, sizeof total, "%zu", k);
    jr_log_kv(JR_LOG_INFO, "every runner is busy with a long job: handing back the jobs waiting for one", "jobs",
              total, NULL);
    return jrw_hand_back_waiting(w);
}
