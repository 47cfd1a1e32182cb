/* The worker's leases: heartbeats for the entries it holds, the lease
 * keeper thread of inline mode, cancels, and taking over the entries of
 * workers that stopped (XAUTOCLAIM). See worker.c. */
#include "worker_int.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "report.h"
#include "util.h"

static const char SAY_RECLAIM_REFUSED[] = "Redis refused to hand over the jobs of stopped workers; trying again later";
static const char SAY_AUX_GARBAGE[] = "keys of this queue hold garbage; its jobs run, without what those keys keep";

/* Inline mode: api->cancelled asks Redis (HEXISTS jr:{Q}:cancelled
 * <entry>, at most every 500 ms per job), since no heartbeat runs while the
 * handler does. 1 if cancelled. */
int jrw_cancel_probe(void *ctx, uint32_t tag) {
    worker_t *w = ctx;
    pthread_mutex_lock(&w->keep_mu); /* called by a handler: the lease keeper may be at work */
    int c = 0;
    if (tag < w->nslots && w->slots[tag].state != SLOT_FREE && w->ctl) {
        slot_t *s = &w->slots[tag];
        if (!s->cancelled && jr_redis_entry_cancelled(w->ctl, w->queues[s->queue], s->entry) == 1) s->cancelled = 1;
        c = s->cancelled;
    }
    pthread_mutex_unlock(&w->keep_mu);
    return c;
}

/* The WAITING jobs flagged cancelled are not started: each is finished
 * as cancelled at once (acknowledged, outcome "cancelled"). */
static int drop_cancelled_waiting(worker_t *w) {
    size_t keep = w->wq_head;
    int rc = 0;
    for (size_t i = w->wq_head; i < w->wq_n; i++) {
        slot_t *s = &w->slots[w->waitq[i]];
        if (!s->cancelled || rc) {
            w->waitq[keep++] = w->waitq[i];
            continue;
        }
        jr_outcome_t o = {.tag = w->waitq[i], .kind = JR_OUT_UNSTARTED, .retry_after_ms = -1};
        rc = jrw_finish(w, &o);
    }
    w->wq_n = keep;
    return rc;
}

/* Flag the jobs of queue q whose entries ids[i] have cancelled[i] set, and
 * tell the executor (again each time: a task moved to another runner loses
 * the flag; a task not started yet is then not started, see exec.h). Jobs
 * still waiting here are finished as cancelled, unstarted. */
static int mark_cancelled(worker_t *w, uint32_t q, const char *const *ids, size_t n,
                          const unsigned char *cancelled) {
    int waiting = 0;
    for (size_t i = 0; i < n; i++) {
        if (!cancelled[i]) continue;
        for (size_t k = 0; k < w->nslots; k++) {
            slot_t *s = &w->slots[k];
            if (s->state == SLOT_FREE || s->queue != q || strcmp(s->entry, ids[i])) continue;
            if (!s->cancelled)
                jr_log_kv(JR_LOG_INFO, "job cancelled while it runs", "job", s->id, "queue", w->shown[q], NULL);
            s->cancelled = 1;
            if (s->state == SLOT_SUBMITTED) jr_exec_cancel(w->exec, (uint32_t)k);
            waiting |= s->state == SLOT_WAITING;
        }
    }
    return waiting ? drop_cancelled_waiting(w) : 0;
}

/* Ask which held jobs were cancelled (see CANCEL_CHECK_US) and flag them
 * (mark_cancelled). An error reply is ignored (the next check or heartbeat
 * asks again); returns 0, a transport error, or JR_ENOMEM. */
int jrw_cancel_check(worker_t *w) {
    const char **ids = malloc((w->nslots ? w->nslots : 1) * sizeof *ids);
    unsigned char *cancelled = malloc(w->nslots ? w->nslots : 1);
    int rc = ids && cancelled ? 0 : JR_ENOMEM;
    for (uint32_t q = 0; q < w->nq && !rc; q++) {
        size_t n = 0;
        for (size_t i = 0; i < w->nslots; i++)
            if (w->slots[i].state != SLOT_FREE && w->slots[i].queue == q) ids[n++] = w->slots[i].entry;
        if (!n) continue;
        int got = jr_redis_cancelled_entries(w->ctl, w->queues[q], ids, n, cancelled);
        if (got > 0) rc = mark_cancelled(w, q, ids, n, cancelled);
        else if (got < 0 && got != JR_EREDIS) rc = got;
    }
    free(ids), free(cancelled);
    return rc;
}

/* The entries of queue q whose leases we keep, into ids (room for nslots +
 * nops): running, waiting, and finished with their result not yet accepted
 * (so nobody takes those over while Redis refuses the result). */
static size_t leased(const worker_t *w, uint32_t q, const char **ids) {
    size_t n = 0;
    for (size_t i = 0; i < w->nslots; i++)
        if (w->slots[i].state != SLOT_FREE && w->slots[i].queue == q) ids[n++] = w->slots[i].entry;
    for (size_t i = 0; i < w->nops; i++)
        if (w->ops[i].queue == q) ids[n++] = w->ops[i].entry;
    return n;
}

/* Extend the lease of every entry we hold (leased()), per queue; log the
 * leases lost (another worker took the entry over) and flag the jobs the
 * reply says were cancelled (mark_cancelled). A refused heartbeat is logged
 * once and tried again at the next one; it does not break the connection.
 * Returns 0, a transport error, or JR_ENOMEM. */
int jrw_heartbeat(worker_t *w) {
    size_t max = w->nslots + w->nops;
    const char **ids = malloc((max ? max : 1) * sizeof *ids);
    unsigned char *lost = malloc(max ? max : 1), *cancelled = malloc(max ? max : 1);
    int rc = ids && lost && cancelled ? 0 : JR_ENOMEM, refusals = 0;
    for (uint32_t q = 0; q < w->nq && !rc; q++) {
        size_t n = leased(w, q, ids);
        if (!n) continue;
        int nlost = jr_redis_heartbeat(w->ctl, w->queues[q], w->consumer, ids, n, lost, cancelled);
        if (nlost == JR_EREDIS) {
            jrw_refused(&w->hb_refused, "Redis refused a heartbeat; trying again at the next one",
                        jr_redis_errstr(w->ctl));
            refusals++;
            continue;
        }
        if (nlost < 0) rc = nlost;
        if (nlost >= 0 && cancelled && jr_redis_errstr(w->ctl)[0])
            jr_report_once(JR_LOG_ERROR, SAY_AUX_GARBAGE,
                           "queue", w->queues[q], jr_redis_errstr(w->ctl));
        else if (nlost >= 0 && cancelled)
            jr_report_clear(SAY_AUX_GARBAGE, "the keys of this queue hold no garbage any more", "queue", w->queues[q]);
        for (size_t i = 0; i < n && nlost > 0; i++)
            if (lost[i])
                jr_log_kv(JR_LOG_WARN, "lease lost: another worker took this job over", "entry", ids[i],
                          "queue", w->queues[q], NULL);
        if (nlost >= 0 && (rc = mark_cancelled(w, q, ids, n, cancelled))) break;
    }
    if (!rc && !refusals) jrw_accepted(&w->hb_refused, "Redis accepts heartbeats again");
    free(ids), free(lost), free(cancelled);
    return rc;
}

/* Inline mode: the lease keeper. A handler runs on the worker's own
 * thread there, so the loop's heartbeat cannot run while one does; a
 * handler running past a third of the lease would let the lease of every
 * job held lapse (another worker would then run them again). This thread
 * sends that heartbeat instead, on a connection of its own (keep_conn,
 * opened and closed by the worker). The worker holds keep_mu except inside
 * jr_exec_collect, where handlers run, so the keeper reads the worker's
 * state only while it cannot change. It logs nothing (the log is
 * single-threaded): a refusal or error is left in keep_err for the worker,
 * a broken connection (keeper_broken) makes the worker reconnect, and out
 * of memory (keeper_nomem) stops it, as anywhere else in the worker. Lost
 * leases and cancel flags are left to the worker's next heartbeat. */
static void keeper_heartbeat(worker_t *w) {
    size_t max = w->nslots + w->nops;
    const char **ids = malloc((max ? max : 1) * sizeof *ids);
    unsigned char *lost = malloc(max ? max : 1);
    for (uint32_t q = 0; q < w->nq && ids && lost; q++) {
        size_t n = leased(w, q, ids);
        int rc = n ? jr_redis_heartbeat(w->keep_conn, w->queues[q], w->consumer, ids, n, lost, NULL) : 0;
        if (rc >= 0) continue;
        snprintf(w->keep_err, sizeof w->keep_err, "%s", jr_redis_errstr(w->keep_conn));
        if (rc != JR_EREDIS || !jr_redis_ok(w->keep_conn)) {
            w->keeper_broken = 1;
            break;
        }
    }
    if (!ids || !lost) w->keeper_nomem = 1;
    free(ids), free(lost);
}

static void *keeper_main(void *arg) {
    worker_t *w = arg;
    pthread_mutex_lock(&w->keep_mu);
    while (!w->keeper_quit) {
        int64_t now = jr_mono_us();
        if (now >= w->next_heartbeat && w->keep_conn && !w->keeper_broken && !w->keeper_nomem &&
            (w->used || w->nops)) {
            w->next_heartbeat = now + jrw_lease_us(w) / 3;
            keeper_heartbeat(w);
        }
        int64_t at = w->next_heartbeat > now ? w->next_heartbeat : now + jrw_lease_us(w) / 3;
        struct timespec ts = {.tv_sec = (time_t)(at / 1000000), .tv_nsec = (long)(at % 1000000) * 1000};
        pthread_cond_timedwait(&w->keep_cv, &w->keep_mu, &ts);
    }
    pthread_mutex_unlock(&w->keep_mu);
    return NULL;
}

/* Start the keeper (the worker then holds keep_mu). Returns 0, or -1 with
 * the reason in err. */
int jrw_keeper_start(worker_t *w, char *err, size_t errlen) {
    pthread_condattr_t ca;
    int e = pthread_condattr_init(&ca);
    if (!e) e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* jr_mono_us */
    if (!e) e = pthread_cond_init(&w->keep_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (e) {
        snprintf(err, errlen, "cannot start the lease keeper: %s", strerror(e));
        return -1;
    }
    pthread_mutex_lock(&w->keep_mu);
    sigset_t all, old; /* signals are the worker's thread's */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    e = pthread_create(&w->keeper, NULL, keeper_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        pthread_mutex_unlock(&w->keep_mu);
        pthread_cond_destroy(&w->keep_cv);
        snprintf(err, errlen, "cannot start the lease keeper thread: %s", strerror(e));
        return -1;
    }
    w->keeper_on = 1;
    return 0;
}

/* Stop the keeper and wait for it (the worker then no longer holds
 * keep_mu). Nothing without one. */
void jrw_keeper_stop(worker_t *w) {
    if (!w->keeper_on) return;
    w->keeper_quit = 1;
    pthread_cond_signal(&w->keep_cv);
    pthread_mutex_unlock(&w->keep_mu);
    pthread_join(w->keeper, NULL);
    pthread_cond_destroy(&w->keep_cv);
    w->keeper_on = 0;
}

/* One XAUTOCLAIM step on one queue, taking over at most `want` entries
 * (jrw_dispatch); moves to the next queue when a queue's scan is complete,
 * and after the last queue waits half a lease (next_reclaim). A refused step
 * (that queue's keys hold garbage) is reported once and ends that queue's
 * scan; a queue whose stream key is garbage is skipped. Returns 0, a
 * transport error, or JR_ENOMEM. */
int jrw_reclaim(worker_t *w, size_t want) {
    long long deleted = 0, poisoned = 0;
    if (w->broken[w->reclaim_q]) { /* its stream key is garbage: nothing to take over */
        w->reclaim_q = (w->reclaim_q + 1) % w->nq;
        if (w->reclaim_q == 0) w->next_reclaim = jr_mono_us() + jrw_lease_us(w) / 2;
        return 0;
    }
    int rc = jr_redis_reclaim(w->ctl, w->queues[w->reclaim_q], (uint32_t)w->reclaim_q, w->consumer,
                              w->cfg->worker_lease_ms, w->cursor, (int64_t)want, w->cfg->max_deliveries,
                              w->cfg->dead_max, &w->batch, &deleted, &poisoned);
    if (rc == JR_EREDIS) {
        /* That queue's keys hold garbage: the next queue's turn (a refusal
         * must not keep the others' jobs of stopped workers waiting). */
        jr_report_once(JR_LOG_ERROR, SAY_RECLAIM_REFUSED, "queue", w->queues[w->reclaim_q], jr_redis_errstr(w->ctl));
        snprintf(w->cursor, sizeof w->cursor, "0-0");
        w->reclaim_q = (w->reclaim_q + 1) % w->nq;
        if (w->reclaim_q == 0) w->next_reclaim = jr_mono_us() + jrw_lease_us(w) / 2;
        return 0;
    }
    if (rc) return rc;
    jr_report_clear(SAY_RECLAIM_REFUSED, "Redis hands over the jobs of stopped workers of this queue again", "queue",
                    w->queues[w->reclaim_q]);
    size_t others = 0; /* entries not already this worker's (see jrw_dispatch) */
    for (size_t i = 0; i < w->batch.n; i++)
        others += strlen(w->batch.v[i].id) >= ENTRY_MAX || !jrw_held(w, w->batch.v[i].queue, w->batch.v[i].id);
    if (others || deleted || poisoned) {
        char n[24], d[24], p[24];
        snprintf(n, sizeof n, "%zu", others);
        snprintf(d, sizeof d, "%lld", deleted);
        snprintf(p, sizeof p, "%lld", poisoned);
        jr_log_kv(JR_LOG_WARN, "took over jobs of a worker that stopped heartbeating", "queue",
                  w->queues[w->reclaim_q], "jobs", n, "deleted", d, "poison", p, NULL);
    }
    if (!strcmp(w->cursor, "0-0")) {
        w->reclaim_q = (w->reclaim_q + 1) % w->nq;
        if (w->reclaim_q == 0) w->next_reclaim = jr_mono_us() + jrw_lease_us(w) / 2;
    }
    return jrw_dispatch(w, &w->batch, 1);
}
