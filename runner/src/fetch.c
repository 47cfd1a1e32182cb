/* The worker's fetching: how much to fetch, the reads (one blocking read,
 * or rounds over several queues by priority), and pause. See worker.c. */
#include "worker_int.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "prio.h"
#include "redis_admin.h"
#include "report.h"
#include "util.h"

static const char SAY_PAUSED_REFUSED[] = "Redis refused to read the paused queues; taking none as paused";
static const char SAY_RESUMED_REFUSED[] =
    "Redis refused the wait on the resume key; with every queue paused, the paused set is read again every worker.block";

/* Jobs fetched but not started that this worker may hold. Jobs that take
 * longer than a fetch round trip (the time a full read takes until its jobs
 * are handed over): what the runners start within one round trip, runners x
 * round trip / average job duration, so long jobs spread over the workers
 * instead of queuing in one. None until a job's duration is known, and none
 * while no job has finished for several round trips (idle, or busy with
 * long jobs now whatever the average says). Shorter jobs: worker.prefetch,
 * as a read must bring many of them to keep the runners busy (each is
 * started within milliseconds anyway). */
static size_t prefetch(const worker_t *w) {
    size_t max = (size_t)w->cfg->worker_prefetch;
    if (w->job_us <= 0) return 0;
    int64_t rtt = w->rtt_us > 0 ? w->rtt_us : 1000;
    int64_t quiet = 4 * rtt > 10000 ? 4 * rtt : 10000;
    if (jr_mono_us() - w->last_outcome_us > quiet) return 0;
    if (w->job_us <= rtt) return max;
    size_t p = (size_t)((double)w->runners * (double)rtt / (double)w->job_us);
    return p < max ? p : max;
}

/* How many entries to fetch now (0 = none): up to runners + prefetch held,
 * at most worker.batch; and, while jobs are still waiting for a runner, only
 * once half of that bound is free (so reads stay large). */
size_t jrw_room(const worker_t *w) {
    size_t cap = w->runners + prefetch(w), batch = (size_t)w->cfg->worker_batch;
    size_t n = w->used < cap ? cap - w->used : 0;
    if (n > batch) n = batch;
    size_t worth = cap / 2 < batch ? cap / 2 : batch;
    return w->wq_n > w->wq_head && n < worth ? 0 : n;
}

/* After a read of the paused set on r: garbage there (a refusal, taken as
 * no queue paused) is reported once, and its end once. */
void jrw_paused_note(jr_redis_t *r) {
    const char *e = jr_redis_paused_refused(r);
    if (e[0])
        jr_report_once(JR_LOG_ERROR, SAY_PAUSED_REFUSED, "key",
                       JR_PAUSED_KEY, e);
    else
        jr_report_clear(SAY_PAUSED_REFUSED, "the paused queues can be read again", "key", JR_PAUSED_KEY);
}

/* After a wait on JR_RESUMED_KEY (every queue paused): a refusal (the key
 * holds garbage; the wait ended at once) is reported once, and the next
 * wait is held back for worker.block (read_due), so the paused set is read
 * again on that period instead of in a loop; its end is reported once. */
void jrw_resumed_note(worker_t *w) {
    const char *e = jr_redis_resumed_refused(w->rd);
    if (e[0]) {
        jr_report_once(JR_LOG_ERROR, SAY_RESUMED_REFUSED, "key", JR_RESUMED_KEY, e);
        w->resumed_retry_us = jr_mono_us() + w->cfg->worker_block_ms * 1000;
    } else {
        jr_report_clear(SAY_RESUMED_REFUSED, "the resume key can be waited on again", "key", JR_RESUMED_KEY);
        w->resumed_retry_us = 0;
    }
}

/* Put the batch's entries in the order their jobs should start
 * (jr_prio_order): interleaved by weight, or queue by queue when strict.
 * Returns 0 or JR_ENOMEM (the batch then unchanged). */
int jrw_interleave(worker_t *w, jr_batch_t *b) {
    if (b->n < 2 || w->nq < 2) return 0;
    if (b->n > w->order_cap) {
        jr_entry_t *v = realloc(w->order, b->n * sizeof *v);
        uint32_t *q = v ? realloc(w->order_q, b->n * sizeof *q) : NULL;
        size_t *p = q ? realloc(w->order_perm, b->n * sizeof *p) : NULL;
        if (v) w->order = v;
        if (q) w->order_q = q;
        if (!p) return JR_ENOMEM;
        w->order_perm = p, w->order_cap = b->n;
    }
    for (size_t i = 0; i < b->n; i++) w->order_q[i] = b->v[i].queue;
    jr_prio_order(w->weights, w->nq, w->cfg->worker_order == JR_ORDER_STRICT, w->order_q, b->n, w->order_perm,
                  w->cur);
    for (size_t k = 0; k < b->n; k++) w->order[k] = b->v[w->order_perm[k]];
    memcpy(b->v, w->order, b->n * sizeof *b->v);
    return 0;
}

/* The paused set as Redis now says: a queue newly paused gives back the
 * jobs fetched from it and not started (waiting here, and waiting in a
 * runner's batch: those of every queue go back then), so none starts after
 * the pause is seen. Returns 0 or JR_ENOMEM. */
int jrw_see_paused(worker_t *w, const unsigned char *now) {
    int newly = 0, rc = 0;
    for (size_t q = 0; q < w->nq; q++) {
        if ((now[q] || w->broken[q]) == w->paused[q]) continue;
        w->paused[q] = now[q] || w->broken[q];
        newly |= w->paused[q];
        if (!w->broken[q])
            jr_log_kv(JR_LOG_INFO, now[q] ? "queue paused: taking no new jobs from it" : "queue resumed", "queue",
                      w->queues[q], NULL);
    }
    if (!newly) return 0;
    int submitted = 0;
    for (size_t i = 0; i < w->nslots; i++)
        submitted |= w->slots[i].state == SLOT_SUBMITTED && w->paused[w->slots[i].queue];
    size_t n;
    while (submitted && !rc && (n = jr_exec_shed(w->exec, w->outcomes, w->noutcomes)) > 0)
        for (size_t i = 0; i < n && !rc; i++) rc = jrw_finish(w, &w->outcomes[i]);
    size_t keep = w->wq_head;
    for (size_t i = w->wq_head; i < w->wq_n; i++) {
        slot_t *s = &w->slots[w->waitq[i]];
        /* A job stays waiting unless its hand-back is queued (after an error,
         * every later one stays too): a slot is freed once, never twice. */
        if (!w->paused[s->queue] || rc || (rc = jrw_push_op(w, OP_HANDBACK, s->queue, s->entry, 0, NULL, NULL))) {
            w->waitq[keep++] = w->waitq[i];
            continue;
        }
        jrw_free_slot(w, s);
    }
    w->wq_n = keep;
    return rc;
}

/* Read without blocking, in rounds: each round asks every queue still in
 * play for its share of what is still wanted (weighted: jr_prio_split; strict:
 * the first queue in play for all of it) in one pipeline, with the paused
 * set read after it; a queue that comes back short is out of play, and
 * what it did not give is asked of the others in the next round. Sets
 * *taken to the entries taken (dispatched); returns 0, a transport error,
 * or JR_ENOMEM. */
static int read_rounds(worker_t *w, size_t want, size_t *taken) {
    unsigned char *inplay = w->on, *now = w->order_scratch;
    int rc = 0;
    for (size_t q = 0; q < w->nq; q++) inplay[q] = !w->paused[q];
    *taken = 0;
    for (size_t round = 0; round < w->nq && *taken < want && !rc; round++) {
        size_t left = want - *taken, first = w->nq;
        for (size_t q = 0; q < w->nq && first == w->nq; q++)
            if (inplay[q]) first = q;
        if (first == w->nq) break;
        if (w->cfg->worker_order == JR_ORDER_STRICT) {
            for (size_t q = 0; q < w->nq; q++) w->counts[q] = q == first ? (int64_t)left : 0;
        } else {
            jr_prio_split(w->weights, w->swrr, w->nq, inplay, left, w->counts);
        }
        memcpy(w->got, w->counts, w->nq * sizeof *w->got); /* asked */
        int64_t sent = jr_mono_us();
        /* a queue's refusal (NOGROUP, WRONGTYPE...) is acted on after the
         * entries the others delivered to us are started */
        int refused = jr_redis_read_each(w->rd, w->consumer, w->queues, w->nq, w->got, &w->batch, now);
        if (refused && (refused != JR_EREDIS || !jr_redis_ok(w->rd))) {
            rc = refused;
            break;
        }
        jrw_paused_note(w->rd);
        if ((rc = jrw_see_paused(w, now))) break;
        size_t n = w->batch.n;
        for (size_t q = 0; q < w->nq; q++) { /* w->got = asked; a queue that came back short is out */
            int64_t g = 0;
            for (size_t i = 0; i < n; i++) g += w->batch.v[i].queue == q;
            if ((w->got[q] > 0 && g < w->got[q]) || w->paused[q]) inplay[q] = 0;
        }
        if (n == left) w->rtt_us = jrw_ewma(w->rtt_us, jr_mono_us() - sent);
        if ((rc = jrw_interleave(w, &w->batch))) break;
        jr_metrics_fetched(n);
        *taken += n;
        if ((rc = jrw_dispatch(w, &w->batch, 0))) break;
        if (refused) {
            rc = refused;
            break;
        }
    }
    return rc;
}

/* Fetch up to `want` entries. One queue in play (or the last fetch found
 * every queue empty): the one blocking read, sent now and taken in turn()
 * — XREADGROUP BLOCK answers at once when entries are there. Several:
 * read_rounds; only if they bring nothing, the blocking read over all the
 * queues in play (whatever comes first). Every queue paused: a blocking
 * wait that a resume (CLIENT UNBLOCK) or the period ends. The paused set
 * is read with every read, after it (but for the blocking read after an
 * idle timeout: see jrw_send_read). Returns 0, a transport error, or
 * JR_ENOMEM. */
int jrw_fetch(worker_t *w, size_t want, int64_t block) {
    size_t active = 0, taken = 0;
    for (size_t q = 0; q < w->nq; q++) active += !w->paused[q];
    if (active > 1 && !w->went_idle) {
        int rc = read_rounds(w, want, &taken);
        if (rc || taken) {
            w->last_read_full = taken >= want;
            return rc;
        }
    }
    return jrw_send_read(w, want, block); /* counts the queues again: the rounds may have seen pauses */
}

/* The blocking read of jrw_fetch() over the queues not paused, sent (with
 * whatever was appended on rd before it, see jrw_flush_ops_on) in one write. */
int jrw_send_read(worker_t *w, size_t want, int64_t block) {
    size_t active = 0;
    for (size_t q = 0; q < w->nq; q++) active += w->on[q] = !w->paused[q];
    /* COUNT is per stream: ask each queue for its share. */
    int64_t count = active ? (int64_t)((want + active - 1) / active) : 1;
    /* Idle (see "idle cost" in docs/operations.md): after a read that timed
     * out with every queue in play, the next goes alone; if it brings
     * entries, the paused set is read then, before any starts. */
    w->read_with_paused = !(w->quiet && active == w->nq);
    int rc = jr_redis_send_read_paused(w->rd, w->consumer, w->queues, w->nq, w->on, count, block, w->read_with_paused);
    if (rc) return rc;
    w->reading = 1, w->read_on_any = active > 0, w->read_block_ms = block;
    w->read_sent_us = jr_mono_us(), w->read_count = (size_t)count, w->read_sent_ran_us = w->ran_us;
    return 0;
}

/* 1 if fetched jobs wait to start: here, or in a runner's batch. */
int jrw_jobs_wait(const worker_t *w) {
    return w->wq_n > w->wq_head || jr_exec_busy(w->exec) > w->runners;
}

/* While jobs wait to start and nothing is read, the paused set is read
 * every 50 ms (on ctl), so a pause stops them within the bound even when no
 * read brings the news. */
#define PAUSE_CHECK_US 50000
int jrw_check_paused(worker_t *w) {
    if (w->reading || !jrw_jobs_wait(w) || jr_mono_us() < w->next_pause_check) return 0;
    w->next_pause_check = jr_mono_us() + PAUSE_CHECK_US;
    unsigned char *now = w->order_scratch;
    int rc = jr_redis_paused(w->ctl, w->queues, w->nq, now);
    if (rc == JR_EREDIS && jr_redis_ok(w->ctl)) rc = 0; /* refused: the next read tells */
    else if (!rc) jrw_paused_note(w->ctl), rc = jrw_see_paused(w, now);
    return rc;
}

/* Free the per-queue state and scratch of fetching (allocated at start). */
void jrw_free_fetch(worker_t *w) {
    free(w->swrr), free(w->counts), free(w->got), free(w->cur), free(w->paused), free(w->broken), free(w->on), free(w->order_scratch);
    free(w->order), free(w->order_q), free(w->order_perm);
}
