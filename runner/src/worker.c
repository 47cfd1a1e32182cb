/* The worker: its loop (see worker_int.h for the files it is made of).
 *
 * Connections: `rd` carries the reads: the blocking XREADGROUP ... BLOCK
 * (so a blocked read never delays anything else), sent together with the
 * results queued before it when it is the read to make next
 * (jrw_flush_ops_on), and the non-blocking rounds over several queues
 * (fetch.c); each read may carry the paused set after it. `ctl` carries
 * everything else, pipelined: the other results (acknowledgements,
 * retries, dead letters, hand-backs), heartbeats, cancel checks, reclaims,
 * Redis's clock, presence, the paused set between reads, and CLIENT
 * UNBLOCK of `rd` at shutdown. In inline mode a third, `keep_conn`,
 * carries the heartbeats the lease keeper thread sends while a handler
 * runs (see lease.c).
 *
 * The loop fetches while the worker holds fewer jobs than its runners plus
 * its prefetch bound (see fetch.c), keeps fetched jobs waiting in memory
 * until a runner (exec.h) is free, and meanwhile polls the read, the
 * runners, and the signal pipe. Every outcome becomes an operation queued in
 * memory (outbox.c) and sent to Redis; if Redis goes away or refuses them
 * they wait there (nothing is fetched meanwhile), jobs keep running, and the
 * worker reconnects or retries with capped backoff. Each operation is safe
 * to send twice (the Redis side checks ownership), so nothing is lost or
 * doubled across a reconnect. */
#include "worker.h"
#include "worker_int.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "proc.h"
#include "util.h"

/* The worker's title in ps: "jobrunner: worker q1,q2 (3 of 4 busy)", set
 * at start and rewritten when the number busy changed, at a loop turn at
 * most 4 times a second (a snprintf and a memcpy; the name of ps -o comm
 * once, at start). */
static void worker_title(const worker_t *w, size_t busy) {
    static size_t shown_busy = (size_t)-1;
    static int64_t next_us;
    static char queues[256];
    int first = shown_busy == (size_t)-1;
    if (busy == shown_busy || (!first && jr_mono_us() < next_us)) return;
    if (first) {
        const jr_strlist_t *q = &w->cfg->worker_queues;
        snprintf(queues, sizeof queues, "%s", q->n ? "" : JR_DEFAULT_QUEUE);
        for (size_t i = 0; i < q->n && strlen(queues) + 2 < sizeof queues; i++)
            snprintf(queues + strlen(queues), sizeof queues - strlen(queues), "%s%s", i ? "," : "", q->v[i]);
    }
    shown_busy = busy, next_us = jr_mono_us() + 250000;
    jr_proc_title(first ? "jobrunner-work" : NULL, "jobrunner: worker %s (%zu of %zu busy)", queues, busy,
                  w->runners);
}

/* Log a refusal by Redis (with Redis's own text) once per state change:
 * when it starts, or its text changes; and when it ends. */
void jrw_refused(refusal_t *r, const char *what, const char *err) {
    if (r->on && !strcmp(r->err, err)) return;
    r->on = 1;
    snprintf(r->err, sizeof r->err, "%s", err);
    jr_log_kv(JR_LOG_ERROR, what, "error", err, NULL);
}

void jrw_accepted(refusal_t *r, const char *what) {
    if (!r->on) return;
    r->on = 0;
    jr_log_kv(JR_LOG_INFO, what, NULL);
}

/* The first signal: stop taking jobs, ask the runners to stop after their
 * current job, hand back the jobs waiting here, and end the read in
 * flight. Returns 0 or JR_ENOMEM (a hand-back could not be queued). */
static int begin_stop(worker_t *w) {
    if (w->stopping) return 0;
    char grace[32];
    snprintf(grace, sizeof grace, "%lldms", (long long)w->cfg->worker_grace_ms);
    jr_log_kv(JR_LOG_INFO, "stopping: running jobs may finish, the rest go back to the queue", "grace",
              grace, NULL);
    w->stopping = 1;
    w->grace_deadline = jr_mono_us() + w->cfg->worker_grace_ms * 1000;
    jr_exec_stop(w->exec);
    int rc = jrw_hand_back_waiting(w);
    if (w->reading && w->ctl && jr_redis_unblock(w->ctl, w->rd_id) != 0) jrw_drop_conns(w, JR_EIO);
    return rc;
}

/* Say that the worker stops for want of memory; its exit status (1). */
static int out_of_memory(void) {
    jr_log_kv(JR_LOG_ERROR, "out of memory: stopping; unfinished jobs stay pending (exit status 1)", NULL);
    return 1;
}

static int64_t min_deadline(int64_t a, int64_t b) { return a < 0 ? b : b < 0 ? a : a < b ? a : b; }

/* Whether turn() makes the read now, and its size: *want entries (at most
 * jrw_room; after the queues ran dry, at most what the free runners can
 * start), blocking *block ms (worker.block, or less: until the next
 * reclaim is due). Not while disconnected, stopping or reading, with no
 * room, while a reclaim scan is under way and due (its next step comes
 * first), or with every queue paused while the resume key holds garbage
 * (resumed_retry_us). Queued operations are the caller's business. */
static int read_due(const worker_t *w, int64_t now, size_t *want, int64_t *block) {
    if (!w->rd || w->stopping || w->reading) return 0;
    if (now >= w->next_reclaim && strcmp(w->cursor, "0-0")) return 0; /* a reclaim step first */
    size_t n = jrw_room(w);
    if (!w->last_read_full) { /* the queues ran dry: this read will likely block until jobs come; */
        size_t free_runners = w->runners > w->used ? w->runners - w->used : 0; /* take what can start */
        if (n > free_runners) n = free_runners;
    }
    if (n == 0) return 0;
    if (now < w->resumed_retry_us) { /* the resume key holds garbage: see jrw_resumed_note */
        size_t active = 0;
        for (size_t q = 0; q < w->nq; q++) active += !w->paused[q];
        if (!active) return 0;
    }
    int64_t b = w->cfg->worker_block_ms;
    int64_t until = w->next_reclaim > now ? (w->next_reclaim - now) / 1000 + 1 : b;
    *want = n, *block = until < b ? until : b;
    return 1;
}

/* Whether the queued operations go now with the read, in one write on rd
 * (jrw_flush_ops_on): the read is due, it is the single blocking read (one queue
 * in play, or the queues ran dry), and Redis is not refusing results (then
 * they wait for their backoff and nothing is fetched, as below). */
static int ack_with_read(const worker_t *w, int64_t now, size_t *want, int64_t *block) {
    /* A reclaim due goes first, and only once the operations are settled
     * (see turn()). */
    if (!w->nops || now < w->next_flush || w->ops_refused.on || now >= w->next_reclaim) return 0;
    size_t active = 0;
    for (size_t q = 0; q < w->nq; q++) active += !w->paused[q];
    if (active > 1 && !w->went_idle) return 0;
    return read_due(w, now, want, block);
}

/* One turn of the loop: send the queued results; take over (reclaim) or
 * fetch entries if there is room; wait (poll) for the read, a runner, a
 * signal or the next timer; take the read's entries; collect the runners'
 * outcomes; then heartbeats, Redis's clock, cancel checks and presence as
 * they fall due; and send the results again unless the next turn sends
 * them with its read. Runs without a connection too (jobs keep running).
 *
 * Queued operations go first, and nothing is fetched (read or reclaimed)
 * while any is queued, except the blocking read that goes in the same write
 * right after them (jrw_flush_ops_on), which Redis runs only after them:
 * after an outage longer than the lease, XAUTOCLAIM would otherwise hand
 * this worker back its own finished jobs before their acknowledgements, and
 * they would run again; and while Redis refuses results, fetching more
 * would only pile up finished jobs.
 *
 * Returns 0; JR_ENOMEM (the caller stops the worker); or another error,
 * after which the caller drops the connections and reconnects: a transport
 * error, a refusal not handled here (e.g. of the health check's CLIENT ID),
 * JR_EREDIS when the function library is missing (jrw_flush_ops_on), JR_EIO
 * when poll failed or the lease keeper's connection broke. */
static int turn(worker_t *w, int sigfd) {
    int rc = 0;
    int64_t now = jr_mono_us();
    int connected = w->rd != NULL;
    int64_t health_us = w->cfg->worker_block_ms * 500; /* half a block period (see /healthz) */
    jr_metrics_turned();
    if (jr_metrics_on() && connected && !w->reading && jr_metrics_redis_age_us() > health_us) {
        long long id; /* nothing else asked Redis lately: does it answer? */
        if ((rc = jr_redis_client_id(w->ctl, &id))) return rc;
        jr_metrics_redis_ok();
    }
    size_t pwant = 0;
    int64_t pblock = 0;
    int piggyback = connected && w->nops && ack_with_read(w, now, &pwant, &pblock);
    if (connected && w->nops && !piggyback && (rc = jrw_flush_ops(w))) return rc;
    /* Stopping, and the last results (left by the turn before for a read
     * that a signal then called off) just went: done, back to the loop. */
    if (w->stopping && !w->reading && w->used == 0 && w->nops == 0) return 0;
    /* The partitions of the queues, every JR_PARTITIONS_REREAD_MS, between reads. */
    if (connected && !w->reading && now >= w->next_parts_us && (rc = jrw_partitions(w, 1))) return rc;
    /* Results first: nothing is fetched while results wait to be taken, but
     * for results that wait for a cluster node that is down (ops_down). */
    int may_fetch = connected && !w->stopping && !w->reading && (w->nops == 0 || w->ops_down), again = 0;
    if (piggyback) { /* the operations, then the read, in one write on rd */
        if ((rc = jrw_flush_ops_on(w, w->rd, pwant, pblock))) return rc;
        may_fetch = 0;
    }
    if (may_fetch && w->nops == 0 && now >= w->next_reclaim && jrw_room(w) > 0 && (rc = jrw_reclaim(w, jrw_room(w))))
        return rc;
    size_t want = 0;
    int64_t block = 0;
    if (may_fetch && read_due(w, now, &want, &block)) {
        size_t before = w->used + w->nops;
        if ((rc = jrw_fetch(w, want, block))) return rc;
        /* Entries taken without blocking: fetch again at once if there is room. */
        again = !w->reading && w->used + w->nops != before;
    }
    if (connected && (rc = jrw_check_paused(w))) return rc;
    if (connected && (rc = jrw_check_broken(w))) return rc;
    /* Wait for: the read, a runner, a signal, or the next timer. */
    struct pollfd fds[2 + 256];
    size_t nf = 0;
    int ready_now = w->reading && jr_redis_has_reply(w->rd);
    if (w->reading) fds[nf++] = (struct pollfd){.fd = jr_redis_fd(w->rd), .events = POLLIN};
    fds[nf++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
    nf += jr_exec_pollfds(w->exec, fds + nf, 256);
    int64_t deadline = jr_exec_deadline(w->exec);
    if (w->used || w->nops) deadline = min_deadline(deadline, w->next_heartbeat);
    if (w->used) deadline = min_deadline(deadline, w->next_cancel_check);
    /* The grace period bounds running jobs only: once it is over with none
     * left (a stopping worker waiting for Redis to take its results), a
     * past grace deadline would make this loop spin. */
    if (w->stopping && w->used) deadline = min_deadline(deadline, w->grace_deadline);
    if (!connected) deadline = min_deadline(deadline, w->next_connect);
    if (jr_metrics_on()) deadline = min_deadline(deadline, now + health_us);
    if (connected && w->nops) deadline = min_deadline(deadline, w->next_flush);
    if (connected) deadline = min_deadline(deadline, jr_presence_deadline(&w->presence));
    if (connected && !w->reading && !w->stopping && !w->nops && jrw_room(w) > 0)
        deadline = min_deadline(deadline, w->next_reclaim);
    if (!w->stopping && jr_exec_idle(w->exec) == 0 &&
        (jr_exec_busy(w->exec) > w->runners || w->wq_n > w->wq_head)) /* jobs wait: see jrw_shed() */
        deadline = min_deadline(deadline, now + jrw_shed_after_us(w));
    if (connected && !w->reading && jrw_jobs_wait(w)) deadline = min_deadline(deadline, w->next_pause_check);
    if (connected && !w->reading && w->resumed_retry_us > now) deadline = min_deadline(deadline, w->resumed_retry_us);
    int timeout = ready_now || again ? 0 : deadline < 0 ? -1 : (int)((deadline - now + 999) / 1000);
    if (timeout < 0 && deadline >= 0) timeout = 0;
    jr_log_flush();
    if (poll(fds, nf, timeout) < 0 && errno != EINTR) return JR_EIO;

    if (w->reading && (ready_now || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))) {
        w->reading = 0;
        unsigned char *paused_now = w->read_with_paused ? w->order_scratch : NULL;
        rc = jr_redis_recv_read_paused(w->rd, &w->batch, w->queues, w->nq, w->read_on_any, paused_now);
        if (!rc && paused_now) jrw_paused_note(w->rd);
        if (!rc && !w->read_on_any) jrw_resumed_note(w);
        int64_t waited_ms = (jr_mono_us() - w->read_sent_us) / 1000;
        /* A read that went with results Redis refused was refused too (a
         * write refused: NOREPLICAS, READONLY...): nothing was read; the
         * refusal is logged once (jrw_flush_ops_on), no new read is made until
         * the results go through, and the connection stays. */
        int refused_too = rc == JR_EREDIS && jr_redis_ok(w->rd) && w->read_with_ops && w->ops_refused.on && w->nops;
        w->read_with_ops = 0;
        if (refused_too) rc = 0; /* the batch is empty */
        int ctl_rc = 0; /* the control connection failed after entries were read: they are started first */
        if (!rc && !refused_too && !paused_now && w->batch.n > 0) { /* a read sent alone brought entries */
            paused_now = w->order_scratch;
            int prc = jr_redis_paused(w->ctl, w->queues, w->nq, paused_now);
            if (!prc) jrw_paused_note(w->ctl);
            if (prc == JR_EREDIS && jr_redis_ok(w->ctl)) paused_now = NULL; /* refused: the next read tells */
            else if (prc) paused_now = NULL, ctl_rc = prc; /* the pauses unknown: as before the read */
        }
        if (rc || (!refused_too && paused_now && (rc = jrw_see_paused(w, paused_now))) || (rc = jrw_interleave(w, &w->batch)))
            return rc;
        /* Timed out (not woken early, e.g. by a pause's CLIENT UNBLOCK) with
         * nothing paused: the next read may go alone. */
        w->quiet = !refused_too && w->batch.n == 0 && w->read_on_any && waited_ms >= w->read_block_ms;
        for (size_t q = 0; q < w->nq && w->quiet; q++) w->quiet = !w->paused[q];
        jr_metrics_redis_ok();
        jr_metrics_fetched(w->batch.n);
        w->went_idle = w->batch.n == 0;
        if ((rc = jrw_dispatch(w, &w->batch, 0))) return rc;
        if (ctl_rc) return ctl_rc; /* entries already delivered to us are not left for a take-over */
        /* A full batch was there already (the read did not block): its
         * time, until the jobs were handed over, is a fetch round trip;
         * not counting the handlers run meanwhile (inline mode), or the
         * round trip would grow with the jobs held, and so would prefetch(). */
        w->last_read_full = w->batch.n >= w->read_count;
        if (w->last_read_full)
            w->rtt_us = jrw_ewma(w->rtt_us, jr_mono_us() - w->read_sent_us - (w->ran_us - w->read_sent_ran_us));
    }
    if (w->reconnect_after_read && !w->reading) return JR_EREDIS; /* see jrw_flush_ops_on */
    if ((rc = jrw_collect(w))) return rc;
    if (!w->stopping && (rc = jrw_shed(w))) return rc;
    size_t busy = jr_exec_busy(w->exec);
    if (busy > w->runners) busy = w->runners;
    if (jr_metrics_on()) jr_metrics_running(busy);
    worker_title(w, busy);
    now = jr_mono_us();
    if (w->rd && (w->used || w->nops) && now >= w->next_heartbeat) {
        w->next_heartbeat = now + jrw_lease_us(w) / 3;
        if ((rc = jrw_heartbeat(w))) return rc;
    }
    if (w->ctl && now >= w->next_clock_us && (rc = jrw_clock_sync(w))) return rc;
    if (w->rd && w->used && now >= w->next_cancel_check) {
        w->next_cancel_check = now + CANCEL_CHECK_US;
        if ((rc = jrw_cancel_check(w))) return rc;
    }
    if (w->ctl && ((rc = jr_presence_tick(&w->presence, w->ctl, (long long)jr_exec_busy(w->exec))) ||
                   (!w->stopping && (rc = jr_presence_prune(&w->presence, w->ctl, w->queues, w->nq)))))
        return rc;
    /* Results that the next turn sends with its read wait for it (no
     * waiting happens in between). */
    if (w->nops && w->rd && ack_with_read(w, jr_mono_us(), &pwant, &pblock)) return 0;
    return w->ctl ? jrw_flush_ops(w) : 0;
}

int jr_worker_run(const jr_config_t *cfg, const jr_registry_t *reg) {
    static const char *dflt[] = {JR_DEFAULT_QUEUE};
    worker_t w = {.cfg = cfg, .reg = reg, .backoff_ms = 100, .keep_mu = PTHREAD_MUTEX_INITIALIZER};
    w.uq = cfg->worker_queues.n ? (const char **)cfg->worker_queues.v : dflt;
    w.nuq = cfg->worker_queues.n ? cfg->worker_queues.n : 1;
    w.uweights = cfg->worker_queues.n ? cfg->worker_weights : NULL;
    int parts_nomem = jrw_partitions(&w, 0) != 0; /* the queues as configured, until Redis tells their partitions */
    jr_consumer_name(w.consumer, sizeof w.consumer);
    w.rng = (uint64_t)jr_mono_us() ^ ((uint64_t)getpid() << 32) ^ 0x9E3779B97F4A7C15ULL;
    snprintf(w.cursor, sizeof w.cursor, "0-0");
    int inline_mode = cfg->worker_isolation == JR_ISOLATION_INLINE;
    size_t runners = inline_mode ? 1 : (size_t)cfg->worker_concurrency;
    w.runners = runners;
    w.flush_backoff_ms = 100;
    w.tasks = calloc((size_t)cfg->worker_batch, sizeof *w.tasks);
    w.noutcomes = (size_t)cfg->worker_batch * runners;
    w.outcomes = calloc(w.noutcomes, sizeof *w.outcomes);
    int sigfd = jr_signals_install();
    char err[JR_ERRLEN];
    int nomem = parts_nomem || jr_presence_init(&w.presence, "worker", w.consumer, w.uq, w.nuq, cfg->worker_lease_ms) ||
                !w.tasks || !w.outcomes || !w.swrr || !w.counts || !w.got || !w.cur || !w.paused || !w.broken || !w.on ||
                !w.order_scratch;
    w.presence.self.capacity = (long long)runners; /* "3 of 4 busy" in `workers` and the dashboard */
    if (nomem ||
        !(w.exec = jr_exec_new(reg, inline_mode, (int)runners, (size_t)cfg->worker_batch, cfg->max_payload, err,
                              sizeof err))) {
        jr_log_kv(JR_LOG_ERROR, "cannot start the worker", "error", nomem ? "out of memory" : err, NULL);
        free(w.tasks), free(w.outcomes);
        jrw_free_fetch(&w);
        jrw_free_partitions(&w);
        jr_presence_free(&w.presence);
        return 1;
    }
    jr_exec_set_cancel_probe(w.exec, jrw_cancel_probe, &w);
    char nh[16], shown[512], nr[16];
    snprintf(nh, sizeof nh, "%zu", jr_registry_handlers(reg));
    snprintf(nr, sizeof nr, "%zu", runners);
    jr_log_kv(JR_LOG_INFO, "worker starting", "consumer", w.consumer, "redis",
              jr_config_redis_url_shown(cfg, shown, sizeof shown), "handlers", nh, "isolation",
              inline_mode ? "inline" : "process", "concurrency", nr, NULL);
    w.next_reclaim = jr_mono_us(); /* take over orphans at once */
    /* /healthz: stale after a block period and a second (the loop turns and
     * asks Redis at least every half block period). */
    if (cfg->metrics_listen &&
        jr_metrics_start(cfg->metrics_listen, cfg->metrics_port_offset, JR_METRICS_WORKER,
                         cfg->worker_block_ms + 1000, err, sizeof err)) {
        jr_log_kv(JR_LOG_ERROR, "cannot start the worker", "error", err, NULL);
        jr_exec_free(w.exec);
        free(w.tasks), free(w.outcomes);
        jrw_free_fetch(&w);
        jrw_free_partitions(&w);
        jr_presence_free(&w.presence);
        return 1;
    }
    jr_metrics_capacity(w.runners);
    worker_title(&w, 0);
    if (inline_mode && jrw_keeper_start(&w, err, sizeof err) != 0) {
        jr_log_kv(JR_LOG_ERROR, "cannot start the worker", "error", err, NULL);
        jr_metrics_stop();
        jr_exec_free(w.exec);
        free(w.tasks), free(w.outcomes);
        jrw_free_fetch(&w);
        jrw_free_partitions(&w);
        jr_presence_free(&w.presence);
        return 1;
    }

    int status = 0; /* 1 after an abnormal end */
    for (;;) {
        int sigs = jr_signals_count();
        if (sigs != w.signals_seen) {
            jr_signals_drain();
            if (sigs >= 2) {
                jr_log_kv(JR_LOG_WARN, "second signal: stopping now; unfinished jobs stay pending", NULL);
                break;
            }
            w.signals_seen = sigs;
            if (begin_stop(&w) == JR_ENOMEM) {
                status = out_of_memory();
                break;
            }
        }
        if (w.stopping && !w.reading && w.used == 0 && w.nops == 0) break;
        if (w.stopping && w.used && jr_mono_us() >= w.grace_deadline) {
            jr_log_kv(JR_LOG_WARN, "grace period over: stopping the jobs still running and handing them back", NULL);
            jr_exec_kill(w.exec);
            w.grace_deadline = INT64_MAX;
        }
        if (w.stopping && w.used == 0 && w.nops && (w.ops_refused.on || !w.rd) && !w.said_waiting) {
            char n[24];
            snprintf(n, sizeof n, "%zu", w.nops);
            jr_log_kv(JR_LOG_WARN,
                      "stopping: waiting for Redis to take the results of finished jobs "
                      "(a second signal stops now; those jobs would run again)",
                      "results", n, NULL);
            w.said_waiting = 1;
        }
        int rc = 0;
        if (!w.rd && jr_mono_us() >= w.next_connect) rc = jrw_try_connect(&w);
        if (rc != JR_ENOMEM) rc = turn(&w, sigfd); /* also after a failed connect: jobs keep running */
        if (rc == JR_ENOMEM) {
            status = out_of_memory();
            break;
        }
        if (rc && w.rd) jrw_drop_conns(&w, rc);
    }
    w.next_flush = 0;
    /* Best effort: what is not sent stays pending in Redis. */
    if (w.ctl && jrw_flush_ops(&w) == JR_ENOMEM && !status) status = out_of_memory();
    jrw_keeper_stop(&w);
    jr_presence_leave(&w.presence, w.ctl);
    jr_presence_free(&w.presence);
    jr_log_kv(JR_LOG_INFO, "worker stopped", "consumer", w.consumer, NULL);
    jr_log_flush();
    jr_metrics_stop();
    jr_exec_free(w.exec);
    jr_redis_free(w.rd);
    jr_redis_free(w.ctl);
    jr_redis_free(w.keep_conn);
    for (size_t i = 0; i < w.nslots; i++) free(w.slots[i].id), free(w.slots[i].handler), free(w.slots[i].payload);
    jrw_clear_ops(&w);
    jrw_forget_registered(&w);
    free(w.ops);
    jr_batch_free(&w.batch);
    free(w.slots), free(w.freeslots), free(w.waitq), free(w.tasks), free(w.outcomes);
    jrw_free_fetch(&w);
    jrw_free_partitions(&w);
    return status;
}
