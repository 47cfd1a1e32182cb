/* The worker's connections: connecting (the consumer groups, the paused
 * set, Redis's clock), dropping them after an error, and the queues left out
 * because their stream key holds garbage. See worker.c. */
#include "worker_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "proc.h"
#include "report.h"
#include "util.h"

static const char SAY_STREAM_GARBAGE[] = "a queue's stream key holds garbage; not reading this queue until it is fixed (looked at every 10 s)";

#define BROKEN_CHECK_US 10000000 /* see jrw_check_broken */

/* Every time this worker compares with a time stored in Redis (a job's
 * due time) is Redis's clock, never the host's: a host clock that is off
 * by seconds must not make a job wait too little or too long. TIME is read
 * at connect and every CLOCK_REFRESH_US, and advanced in between with the
 * monotonic clock (the error: half a round trip, plus the drift of the two
 * clocks over 10 s). jrw_clock_sync reads it (on ctl): returns 0 or the
 * error of TIME, the clock then as it was. */
#define CLOCK_REFRESH_US 10000000
int jrw_clock_sync(worker_t *w) {
    int64_t sent = jr_mono_us();
    double t;
    int rc = jr_redis_time_ms(w->ctl, &t);
    if (rc) return rc;
    int64_t recv = jr_mono_us();
    w->clock_redis_ms = t, w->clock_mono_us = sent + (recv - sent) / 2;
    w->next_clock_us = recv + CLOCK_REFRESH_US;
    return 0;
}

/* Redis's clock now (Unix ms), from the last jrw_clock_sync; read now if there
 * was none (the host's clock only if Redis cannot answer). */
int64_t jrw_redis_now_ms(worker_t *w) {
    if (!w->clock_mono_us && (!w->ctl || jrw_clock_sync(w))) return jr_wall_ms();
    return (int64_t)(w->clock_redis_ms + (double)(jr_mono_us() - w->clock_mono_us) / 1000.0);
}

/* Close the connections (rd, ctl, and the keeper's), saying why (Redis's
 * text, from the connection that failed), and reconnect after the backoff.
 * Queued operations stay queued; a read in flight is forgotten (its entries
 * stay pending for a reclaim). */
void jrw_drop_conns(worker_t *w, int rc) {
    const jr_redis_t *bad = w->rd && !jr_redis_ok(w->rd) ? w->rd
                            : w->ctl && (!jr_redis_ok(w->ctl) || jr_redis_errstr(w->ctl)[0]) ? w->ctl
                                                                                              : w->rd;
    const char *why = bad && jr_redis_errstr(bad)[0] ? jr_redis_errstr(bad) : jr_strerror(rc);
    jr_log_kv(JR_LOG_ERROR, "Redis error; jobs keep running, reconnecting", "error", why, NULL);
    jr_metrics_reconnect();
    jrw_forget_registered(w);
    jr_redis_free(w->rd);
    jr_redis_free(w->ctl);
    jr_redis_free(w->keep_conn);
    w->rd = w->ctl = w->keep_conn = NULL;
    w->keeper_broken = 0;
    w->reading = 0, w->reconnect_after_read = 0, w->read_with_ops = 0;
    w->next_connect = jr_mono_us() + w->backoff_ms * 1000;
}

/* Connect rd and ctl (and the keeper's connection, inline mode), make sure
 * the consumer groups exist, and read rd's client id, the paused set and
 * Redis's clock. A queue whose stream key holds another type is left out
 * (broken, reported once), not an error. Returns 0; or an error, with the
 * connections dropped and the next try after a backoff doubling from
 * 100 ms to 5 s (1 s through Sentinel: jr_reconnect_cap_ms) (JR_EIO when a connection could not be made;
 * JR_EINTR, none kept and no backoff, when a stop signal arrived between them). */
int jrw_try_connect(worker_t *w) {
    char err[JR_ERRLEN];
    /* A stop signal between the connects: not the next (each may take the
     * connect timeout); the main loop then acts on it. */
    if (!(w->ctl = jr_connect_once(w->cfg, err, sizeof err)) || jr_signals_count() != w->signals_seen ||
        !(w->rd = jr_connect_once(w->cfg, err, sizeof err)) || jr_signals_count() != w->signals_seen ||
        (w->keeper_on && !(w->keep_conn = jr_connect_once(w->cfg, err, sizeof err)))) {
        int stop = w->ctl && jr_signals_count() != w->signals_seen;
        jr_redis_free(w->ctl);
        jr_redis_free(w->rd);
        w->ctl = w->rd = NULL;
        if (stop) return JR_EINTR; /* tried again at once if the stop needs Redis */
        char retry[32];
        snprintf(retry, sizeof retry, "%lldms", (long long)w->backoff_ms);
        jr_log_kv(JR_LOG_ERROR, "Redis unavailable, retrying", "error", err, "retry_in", retry, NULL);
        w->next_connect = jr_mono_us() + w->backoff_ms * 1000;
        w->backoff_ms = w->backoff_ms * 2 > jr_reconnect_cap_ms(w->cfg) ? jr_reconnect_cap_ms(w->cfg) : w->backoff_ms * 2;
        return JR_EIO;
    }
    /* The partitions of the queues: the configuration's (queues section)
     * set once, then as Redis holds them now. */
    int rc = 0;
    if (!w->parts_applied && !(rc = jr_partitions_apply(w->ctl, &w->cfg->queue_partitions))) w->parts_applied = 1;
    if (!rc) rc = jrw_partitions(w, 1);
    /* A queue whose stream key holds garbage costs that queue: it is not
     * read (as if paused) until it is fixed (jrw_check_broken). */
    if (!rc) rc = jr_redis_ensure_groups(w->ctl, w->queues, w->nq, w->broken);
    for (size_t q = 0; !rc && q < w->nq; q++) {
        jr_qkeys_t k;
        jr_qkeys(&k, w->queues[q]);
        if (w->broken[q])
            jr_report_once(JR_LOG_ERROR, SAY_STREAM_GARBAGE,
                           "key", k.ready, jr_redis_errstr(w->ctl));
        else
            jr_report_clear(SAY_STREAM_GARBAGE, "the queue's stream key is a stream again; reading the queue", "key",
                            k.ready);
    }
    w->next_broken_check = jr_mono_us() + BROKEN_CHECK_US;
    if (!rc) rc = jr_redis_client_id(w->rd, &w->rd_id);
    if (!rc) { /* start with the paused set as it is (a refusal: the first read tells) */
        int prc = jr_redis_paused(w->ctl, w->queues, w->nq, w->order_scratch);
        if (!prc) jrw_paused_note(w->ctl);
        if (!prc) memcpy(w->paused, w->order_scratch, w->nq);
        else if (!jr_redis_ok(w->ctl)) rc = prc;
        for (size_t q = 0; q < w->nq; q++) w->paused[q] |= w->broken[q];
    }
    w->presence.self.client_id = w->rd_id; /* pause and resume wake the blocking read */
    w->quiet = 0;
    if (!rc) rc = jrw_clock_sync(w);
    if (rc) { /* e.g. a queue's stream key of another type: back off, do not flood the log */
        jrw_drop_conns(w, rc);
        w->backoff_ms = w->backoff_ms * 2 > jr_reconnect_cap_ms(w->cfg) ? jr_reconnect_cap_ms(w->cfg) : w->backoff_ms * 2;
        return rc;
    }
    jr_presence_reset(&w->presence); /* its entry may have expired meanwhile */
    jr_metrics_redis_ok();
    if (w->backoff_ms > 100) jr_log_kv(JR_LOG_INFO, "connected to Redis", NULL);
    w->backoff_ms = 100;
    return 0;
}

/* Every 10 s (BROKEN_CHECK_US) while a queue is left out for garbage in its
 * stream key, look again (jr_redis_ensure_groups of those queues): a fixed
 * one is read again. A refusal is 0 (looked at again in 10 s); returns 0, a
 * transport error, or JR_ENOMEM. */
int jrw_check_broken(worker_t *w) {
    int64_t now = jr_mono_us();
    if (now < w->next_broken_check) return 0;
    w->next_broken_check = now + BROKEN_CHECK_US;
    const char **sel = malloc(w->nq * sizeof *sel);
    unsigned char *bad = calloc(w->nq, 1);
    size_t *at = malloc(w->nq * sizeof *at), n = 0;
    int rc = sel && bad && at ? 0 : JR_ENOMEM;
    for (size_t q = 0; !rc && q < w->nq; q++)
        if (w->broken[q]) at[n] = q, sel[n++] = w->queues[q];
    if (!rc && n) rc = jr_redis_ensure_groups(w->ctl, sel, n, bad);
    for (size_t j = 0; !rc && j < n; j++) {
        if (bad[j]) continue;
        jr_qkeys_t k;
        jr_qkeys(&k, sel[j]);
        jr_report_clear(SAY_STREAM_GARBAGE, "the queue's stream key is a stream again; reading the queue", "key",
                        k.ready);
        w->broken[at[j]] = 0, w->paused[at[j]] = 0; /* the next read of the paused set tells */
    }
    free(sel), free(bad), free(at);
    return rc == JR_EREDIS && jr_redis_ok(w->ctl) ? 0 : rc;
}

/* ---- partitioned queues --------------------------------------------------- */

/* Free the list of queues read (the names are owned copies). */
static void free_list(const char **names, const char **shown, int *part, size_t n) {
    for (size_t i = 0; names && i < n; i++) free((char *)names[i]);
    free(names), free(shown), free(part);
}

void jrw_free_partitions(worker_t *w) {
    free_list(w->queues, w->shown, w->part, w->nq);
    w->queues = w->shown = NULL, w->part = NULL, w->nq = 0;
    free(w->pweights);
    w->pweights = NULL;
    jr_partmap_free(&w->parts);
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

/* The weight of each queue read: Q's weight applies to Q as a whole, so
 * each of the per[i] queues read for it (its N partitions and Q itself)
 * gets W x L / per[i], L the least common multiple of the per[i] (the
 * shares stay exact). With L too large for that (counts with no common
 * factors, rare), W x 1024 / per[i], rounded up: said in the log. NULL
 * when every weight is 1 and no queue is partitioned. */
static int64_t *split_weights(worker_t *w, const unsigned *counts) {
    uint64_t l = 1;
    int any = 0;
    for (size_t i = 0; i < w->nuq; i++) {
        any |= counts[i] > 1 || (w->uweights && w->uweights[i] != 1);
        if (l <= (uint64_t)1 << 40) l = l / gcd64(l, counts[i]) * counts[i];
    }
    if (!any) return NULL;
    int64_t *v = malloc(w->nq * sizeof *v);
    if (!v) return NULL;
    int exact = l <= (uint64_t)1 << 40;
    if (!exact)
        jr_log_kv(JR_LOG_WARN, "the partition counts of the queues have no small common multiple; "
                               "each partition's weight is its queue's x 1024 / count, rounded up", NULL);
    size_t k = 0;
    for (size_t i = 0; i < w->nuq; i++) {
        int64_t wt = w->uweights ? w->uweights[i] : 1;
        for (unsigned j = 0; j < counts[i]; j++)
            v[k++] = exact ? wt * (int64_t)(l / counts[i]) : (wt * 1024 + counts[i] - 1) / counts[i];
    }
    return v;
}

/* The index of name in the list (n names), or -1. */
static long index_of(const char *const *names, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return (long)i;
    return -1;
}

/* Read the partition counts of the configured queues (connected: from
 * Redis on ctl; else every count 1, the first list before any connection)
 * and read their partitions from now on: a partitioned queue Q becomes its
 * partitions Q#J, with Q's weight split among them. A change is logged.
 * While a read is in flight, or a job or result in hand belongs to a queue
 * that would go, the change waits for the next look (every
 * JR_PARTITIONS_REREAD_MS). After a change, connected: the consumer groups
 * of the new queues are made and the paused set read (as at connect).
 * Returns 0, a transport error, or JR_ENOMEM; a count that is garbage is
 * reported and the queues stay. */
int jrw_partitions(worker_t *w, int connected) {
    static const char SAY_PARTS_REFUSED[] = "cannot read the partitions of the queues; reading the queues known";
    w->next_parts_us = jr_mono_us() + JR_PARTITIONS_REREAD_MS * 1000;
    w->parts.max_age_us = 0; /* read below, in one call */
    if (connected) {
        int rrc = jr_partmap_refresh(&w->parts, w->ctl, w->uq, w->nuq);
        if (rrc == JR_EREDIS && jr_redis_ok(w->ctl)) {
            jr_report_once(JR_LOG_ERROR, SAY_PARTS_REFUSED, "key", JR_PARTITIONS_KEY, jr_redis_errstr(w->ctl));
            return 0;
        }
        if (rrc) return rrc;
    }
    unsigned *counts = calloc(w->nuq ? w->nuq : 1, sizeof *counts);
    jr_qpart_t **qp = calloc(w->nuq ? w->nuq : 1, sizeof *qp);
    if (!counts || !qp) {
        free(counts), free(qp);
        return JR_ENOMEM;
    }
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < w->nuq && !rc; i++) {
        counts[i] = 1;
        if (connected && (rc = jr_partmap_get(&w->parts, w->ctl, w->uq[i], &qp[i]))) break;
        /* a partitioned queue: its partitions and Q itself, for the jobs a
         * producer unaware of the partitions puts there */
        if (connected && qp[i]->n > 1) counts[i] = qp[i]->n + 1;
        n += counts[i];
    }
    if (rc) {
        free(counts), free(qp);
        if (rc == JR_EREDIS && jr_redis_ok(w->ctl)) {
            jr_report_once(JR_LOG_ERROR, SAY_PARTS_REFUSED, "key", JR_PARTITIONS_KEY, jr_redis_errstr(w->ctl));
            return 0;
        }
        return rc;
    }
    if (connected) jr_report_clear(SAY_PARTS_REFUSED, "the partitions of the queues can be read again", "key",
                                   JR_PARTITIONS_KEY);
    const char **names = calloc(n, sizeof *names), **shown = calloc(n, sizeof *shown);
    int *part = calloc(n, sizeof *part);
    rc = names && shown && part ? 0 : JR_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < w->nuq && !rc; i++)
        for (unsigned j = 0; j < counts[i] && !rc; j++, k++) {
            int in_part = counts[i] > 1 && j + 1 < counts[i]; /* the last is Q itself */
            names[k] = strdup(in_part ? jr_qpart_name(qp[i], j) : w->uq[i]);
            shown[k] = w->uq[i];
            part[k] = in_part ? (int)j : -1;
            if (!names[k]) rc = JR_ENOMEM;
        }
    int same = !rc && n == w->nq;
    for (size_t i = 0; same && i < n; i++) same = !strcmp(names[i], w->queues[i]);
    /* what is in hand must keep its queue */
    int busy = w->reading;
    for (size_t i = 0; !rc && !same && !busy && w->queues && i < w->nslots; i++)
        busy = w->slots[i].state != SLOT_FREE && index_of(names, n, w->queues[w->slots[i].queue]) < 0;
    for (size_t i = 0; !rc && !same && !busy && w->queues && i < w->nops; i++)
        busy = index_of(names, n, w->queues[w->ops[i].queue]) < 0;
    int64_t *weights = NULL;
    if (!rc && !same && !busy) {
        size_t nq_old = w->nq;
        w->nq = n; /* split_weights sizes by it */
        weights = split_weights(w, counts);
        w->nq = nq_old;
        if (!weights && (w->uweights || n != w->nuq)) rc = JR_ENOMEM;
    }
    int64_t *swrr = NULL, *cnt = NULL, *got = NULL, *cur = NULL;
    unsigned char *paused = NULL, *broken = NULL, *on = NULL, *scratch = NULL;
    if (!rc && !same && !busy) {
        swrr = calloc(n, sizeof *swrr), cnt = calloc(n, sizeof *cnt), got = calloc(n, sizeof *got);
        cur = calloc(3 * n, sizeof *cur);
        paused = calloc(n, 1), broken = calloc(n, 1), on = calloc(n, 1), scratch = calloc(n, 1);
        if (!swrr || !cnt || !got || !cur || !paused || !broken || !on || !scratch) rc = JR_ENOMEM;
    }
    if (rc || same || busy) {
        if (busy && !same)
            jr_log_kv(JR_LOG_INFO, "the partitions of a queue changed; reading them once the jobs in hand are done",
                      NULL);
        free(swrr), free(cnt), free(got), free(cur), free(paused), free(broken), free(on), free(scratch);
        free(weights);
        free_list(names, shown, part, names ? n : 0);
        free(counts), free(qp);
        return rc;
    }
    /* the change: what is in hand moves to the new indices */
    for (size_t i = 0; w->queues && i < w->nslots; i++)
        if (w->slots[i].state != SLOT_FREE)
            w->slots[i].queue = (uint32_t)index_of(names, n, w->queues[w->slots[i].queue]);
    for (size_t i = 0; w->queues && i < w->nops; i++)
        w->ops[i].queue = (uint32_t)index_of(names, n, w->queues[w->ops[i].queue]);
    for (size_t i = 0; w->queues && i < w->nq; i++) {
        long at = index_of(names, n, w->queues[i]);
        if (at >= 0) paused[at] = w->paused[i], broken[at] = w->broken[i];
    }
    if (w->queues && connected) {
        char what[1024] = "";
        for (size_t i = 0; i < w->nuq; i++)
            snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s:%u", i ? "," : "", w->uq[i],
                     counts[i] > 1 ? counts[i] - 1 : 1);
        jr_log_kv(JR_LOG_INFO, "reading the partitions of the queues", "partitions", what, NULL);
    }
    jrw_free_fetch(w);
    w->order = NULL, w->order_q = NULL, w->order_perm = NULL, w->order_cap = 0;
    free_list(w->queues, w->shown, w->part, w->nq);
    free(w->pweights);
    w->queues = names, w->shown = shown, w->part = part, w->nq = n;
    w->pweights = weights;
    w->weights = weights;
    w->swrr = swrr, w->counts = cnt, w->got = got, w->cur = cur;
    w->paused = paused, w->broken = broken, w->on = on, w->order_scratch = scratch;
    w->reclaim_q = 0;
    snprintf(w->cursor, sizeof w->cursor, "0-0");
    free(counts), free(qp);
    if (!connected) return 0;
    /* new queues: their groups, and the paused set (as at connect) */
    rc = jr_redis_ensure_groups(w->ctl, w->queues, w->nq, w->broken);
    if (!rc) {
        int prc = jr_redis_paused(w->ctl, w->queues, w->nq, w->order_scratch);
        if (!prc) memcpy(w->paused, w->order_scratch, w->nq);
        else if (!jr_redis_ok(w->ctl)) rc = prc;
        for (size_t q = 0; q < w->nq; q++) w->paused[q] |= w->broken[q];
    }
    return rc;
}
