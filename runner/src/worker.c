/* The worker.
 *
 * One connection carries everything in order: the acknowledgements of the
 * batch just run, then the next XREADGROUP ... BLOCK, written together, so a
 * batch costs one round trip. A second connection exists only to CLIENT
 * UNBLOCK the first when a stop signal arrives while it is blocked. */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "jr.h"
#include "log.h"
#include "proc.h"
#include "redis.h"
#include "util.h"

typedef struct worker {
    const jr_config_t *cfg;
    const jr_registry_t *reg;
    const char **queues;
    size_t nq;
    char consumer[128];
    jr_redis_t *rd, *ctl;
    long long rd_id;
    jr_batch_t batch;
    const char **ack_ids; /* per queue: ids to acknowledge, batch.n slots each */
    size_t *nack;
    size_t ack_cmds; /* acknowledgement replies still to read */
    volatile int stop;
} worker_t;

static void worker_drop_conns(worker_t *w) {
    jr_redis_free(w->rd);
    jr_redis_free(w->ctl);
    w->rd = w->ctl = NULL;
    w->ack_cmds = 0;
}

static int worker_connect(worker_t *w) {
    if (!(w->rd = jr_connect_retry(w->cfg))) return JR_EINTR;
    if (!(w->ctl = jr_connect_retry(w->cfg))) return JR_EINTR;
    int rc = jr_redis_ensure_groups(w->rd, w->queues, w->nq);
    if (!rc) rc = jr_redis_client_id(w->rd, &w->rd_id);
    return rc;
}

static const char *outcome_name(jr_result_t r) {
    switch (r) {
    case JR_RESULT_OK: return "ok";
    case JR_RESULT_RETRY: return "retry";
    default: return "failed";
    }
}

/* Log an entry that cannot be run and leave it pending. */
static void reject_entry(const jr_entry_t *e, const char *queue, const char *reason) {
    jr_log_kv(JR_LOG_ERROR, "cannot run entry; left pending", "entry", e->id, "queue", queue,
              "reason", reason, NULL);
}

/* Run one entry; returns 1 if it is to be acknowledged. */
static int run_entry(worker_t *w, const jr_entry_t *e) {
    const char *queue = w->queues[e->queue];
    jr_envelope_t env;
    char err[JR_ERRLEN];
    if (e->odd) {
        reject_entry(e, queue, "odd number of field/value items");
        return 0;
    }
    if (jr_envelope_decode(&env, e->id, e->nfields, e->names, e->name_lens, e->values,
                           e->value_lens, err, sizeof err) != 0) {
        reject_entry(e, queue, err);
        return 0;
    }
    /* Values from Redis replies are NUL-terminated. */
    const jr_handler_t *h = jr_registry_find(w->reg, env.handler);
    if (!h) {
        snprintf(err, sizeof err, "no handler named \"%s\" is loaded", env.handler);
        reject_entry(e, queue, err);
        return 0;
    }
    jr_job_t job = {.id = env.id,
                    .queue = queue,
                    .handler = env.handler,
                    .payload = env.payload,
                    .payload_len = env.payload_len,
                    .attempt = env.attempt,
                    .stop_flag = &w->stop};
    int64_t t0 = jr_mono_us();
    jr_result_t res = jr_handler_run(h, &job);
    int64_t dt = jr_mono_us() - t0;
    char attempt[16], dur[32];
    snprintf(attempt, sizeof attempt, "%u", env.attempt);
    snprintf(dur, sizeof dur, "%lld.%03lld", (long long)(dt / 1000), (long long)(dt % 1000));
    jr_log_kv(res == JR_RESULT_OK ? JR_LOG_INFO : JR_LOG_WARN, "job finished", "job", env.id,
              "queue", queue, "handler", env.handler, "attempt", attempt, "outcome",
              outcome_name(res), "duration_ms", dur, "error", job.error[0] ? job.error : NULL,
              NULL);
    return res == JR_RESULT_OK;
}

/* Run the batch just read and append its acknowledgements. */
static int run_batch(worker_t *w) {
    jr_batch_t *b = &w->batch;
    const char **ids = realloc(w->ack_ids, (b->n ? b->n : 1) * w->nq * sizeof *ids);
    if (!ids) return JR_ENOMEM;
    w->ack_ids = ids;
    memset(w->nack, 0, w->nq * sizeof *w->nack);
    for (size_t i = 0; i < b->n; i++) {
        const jr_entry_t *e = &b->v[i];
        if (run_entry(w, e)) w->ack_ids[e->queue * b->n + w->nack[e->queue]++] = e->id;
    }
    for (size_t q = 0; q < w->nq; q++) {
        if (!w->nack[q]) continue;
        int rc = jr_redis_append_ack(w->rd, w->queues[q], w->ack_ids + q * b->n, w->nack[q]);
        if (rc) return rc;
        w->ack_cmds++;
    }
    return 0;
}

/* Read the replies of acknowledgements sent with the last read. */
static int read_acks(worker_t *w) {
    for (; w->ack_cmds > 0; w->ack_cmds--) {
        long long n;
        int rc = jr_redis_recv_int(w->rd, &n);
        if (rc) return rc;
    }
    return 0;
}

/* One turn: send acks + read, wait, run what came. */
static int worker_turn(worker_t *w, int sigfd) {
    int rc = jr_redis_send_read(w->rd, w->consumer, w->queues, w->nq, w->cfg->worker_batch,
                                w->cfg->worker_block_ms);
    if (!rc) rc = read_acks(w);
    if (rc) return rc;
    jr_log_flush();
    for (;;) {
        int r = jr_redis_wait(w->rd, -1, sigfd);
        if (r < 0) return r;
        if (r == JR_WAIT_READY) break;
        jr_signals_drain();
        if (jr_signals_count() > 0 && !w->stop) {
            w->stop = 1;
            /* The blocked read ends at once; entries it already took are
             * still delivered to us and run below before we exit. */
            if ((rc = jr_redis_unblock(w->ctl, w->rd_id))) return rc;
        }
    }
    if ((rc = jr_redis_recv_read(w->rd, &w->batch, w->queues, w->nq))) return rc;
    return run_batch(w);
}

int jr_worker_run(const jr_config_t *cfg, const jr_registry_t *reg) {
    static const char *dflt[] = {JR_DEFAULT_QUEUE};
    worker_t w = {.cfg = cfg, .reg = reg};
    w.queues = cfg->worker_queues.n ? (const char **)cfg->worker_queues.v : dflt;
    w.nq = cfg->worker_queues.n ? cfg->worker_queues.n : 1;
    w.nack = calloc(w.nq, sizeof *w.nack);
    if (!w.nack) return 1;
    jr_consumer_name(w.consumer, sizeof w.consumer);
    int sigfd = jr_signals_install();
    char nh[16];
    snprintf(nh, sizeof nh, "%zu", jr_registry_handlers(reg));
    char shown[512];
    jr_log_kv(JR_LOG_INFO, "worker starting", "consumer", w.consumer, "redis",
              jr_config_redis_url_shown(cfg, shown, sizeof shown), "handlers", nh, NULL);
    while (!w.stop && jr_signals_count() == 0) {
        int rc = 0;
        if (!w.rd && (rc = worker_connect(&w)) == JR_EINTR) break;
        if (!rc) rc = worker_turn(&w, sigfd);
        if (rc) {
            jr_log_kv(JR_LOG_ERROR, "Redis error, reconnecting", "error",
                      w.rd && jr_redis_errstr(w.rd)[0] ? jr_redis_errstr(w.rd)
                      : w.ctl ? jr_redis_errstr(w.ctl) : jr_strerror(rc), NULL);
            worker_drop_conns(&w);
            if (jr_sleep_interruptible(100)) break;
        }
    }
    /* Send the last acknowledgements. */
    if (w.rd && w.ack_cmds && jr_redis_flush(w.rd) == 0) read_acks(&w);
    jr_log_kv(JR_LOG_INFO, "worker stopped", "consumer", w.consumer, NULL);
    jr_log_flush();
    worker_drop_conns(&w);
    jr_batch_free(&w.batch);
    free(w.ack_ids);
    free(w.nack);
    return 0;
}
