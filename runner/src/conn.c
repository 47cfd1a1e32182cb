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
    /* A queue whose stream key holds garbage costs that queue: it is not
     * read (as if paused) until it is fixed (jrw_check_broken). */
    int rc = jr_redis_ensure_groups(w->ctl, w->queues, w->nq, w->broken);
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
