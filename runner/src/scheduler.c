/* The scheduler.
 *
 * Two connections: `cmd` runs every call (jr_promote, the registry, the
 * schedules, presence, the depth gauges); `blk` keeps one XREAD BLOCK
 * outstanding on the wake streams of the queues served, jr:{cron}:wake and
 * (when following every queue) the registry's. The precise timer is ours:
 * we poll() the blocked connection with a deadline at the earliest due
 * time, and promote on `cmd` when it passes, leaving the XREAD in place.
 * Redis's own BLOCK timeout (scheduler.block) is only a backstop, because
 * Redis ends blocked commands on its hz tick, up to 100 ms late. While idle
 * the Redis traffic is that one XREAD per backstop period, the presence
 * refresh (one PEXPIRE every third of worker.lease) and, with metrics on,
 * the gauges of each queue once a second (sched_depth).
 *
 * Any number of schedulers may run: jr_promote is atomic, and the wake
 * streams are read (not popped), so every scheduler learns of an earlier job.
 *
 * A queue whose promotion Redis refuses (an error reply: a key holding
 * garbage, out of memory) is reported by name (report.h: once per reason)
 * and retried after a backoff (1 s doubling to 60 s); the other queues go
 * on as before. Garbage elsewhere costs what it belongs to likewise (issue
 * 18): a wake stream of another type is left out of the XREAD (which Redis
 * would refuse whole) and what it wakes is looked at every block period;
 * unreadable schedule keys keep the schedules loaded; a refused periodic
 * job holds back its own schedule; an unreadable registry keeps the queues
 * known. Only a broken connection makes the scheduler reconnect.
 *
 * Periodic schedules (cron.h): every scheduler reads them all from jr:{cron}
 * (after upserting the configured ones) and keeps each one's next tick T in
 * its timer, on Redis's clock (TIME). From CRON_PREWAKE_US before T it stops
 * sleeping and reads TIME each turn instead (a timer wakes us and Redis too
 * late on a busy or virtual host; nothing between ticks). When Redis time >=
 * T, by that estimate and its error bound, it enqueues the tick's job with
 * the idempotent enqueue: id NAME@T, due at T (a scheduler whose clock runs
 * early still makes a job that is never due early), idempotency window max(1
 * day, 2 intervals): any number of schedulers firing one tick make one job.
 * Then it records T as last fired. Ticks before this scheduler started and
 * after the last fired are missed: `skip` fires none, `once` fires one job
 * for the latest (due now). Every tick at or after the start fires, however
 * late. Changes arrive on jr:{cron}:wake, which the blocking XREAD also
 * waits on. */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "jr.h"
#include "jr_limits.h"
#include "log.h"
#include "metrics.h"
#include "presence.h"
#include "proc.h"
#include "redis.h"
#include "redis_partition.h"
#include "redis_produce.h"
#include "redis_sched.h"
#include "redis_admin.h"
#include "report.h"
#include "util.h"

/* What jr_report_once says of each problem (jr_report_clear names it too). */
static const char SAY_REGISTRY_REFUSED[] = "Redis refused to list the registered queues; serving the ones known";
static const char SAY_PROMOTE_REFUSED[] = "Redis refused to promote this queue; trying it again after a backoff (1 s doubling to 60 s)";
static const char SAY_TICK_REFUSED[] = "Redis refused the job of a periodic schedule; trying again every second";
static const char SAY_CRON_REFUSED[] = "Redis refused to list the periodic schedules; keeping the ones loaded, reading them again every 5 s";

typedef struct sched {
    const jr_config_t *cfg;
    int follow;           /* serving every registered queue */
    jr_strlist_t queues;
    char (*wake_ids)[JR_ID_MAX]; /* per queue, then the registry's */
    char (*wake_keys)[JR_KEY_MAX];
    const char **keyv;
    unsigned char *fired;
    unsigned char *wake_off; /* per wake key: it holds another type, left out of the XREAD (see sched_wake_refused) */
    int64_t *retry_at_us; /* per queue: monotonic time of the next try after a refusal, 0 = none */
    int64_t *backoff_ms;  /* per queue: the last backoff, 0 = none */
    size_t nwake;
    int64_t deadline_us;  /* monotonic time of the next due job, -1 = none */
    double *due_ms;       /* per queue: earliest due time (Redis Unix ms) the last promotion left, -1 = none */
    int64_t next_depth_us; /* metrics: when to refresh the depth gauges next */
    jr_redis_t *cmd, *blk;
    int blocked;          /* an XREAD is outstanding on blk */
    jr_presence_t presence; /* this scheduler in the live list */
    /* periodic schedules */
    struct cron_state *crons;
    size_t ncrons;
    int cron_started;       /* the first load (which handles missed ticks) is done */
    int64_t cron_reload_us;  /* Redis refused to list the schedules: monotonic time to try again, 0 = none */
    int64_t backstop_us;     /* while a wake key is left out: monotonic time of the next look (sched_backstop) */
    int64_t cron_deadline_us; /* monotonic time to wake for the next tick, -1 = none */
    int64_t cron_tick_us;     /* monotonic time of the next tick itself (cron_deadline_us is
                                 CRON_PREWAKE_US before it when that is far enough) */
    int cron_spin;            /* the next tick is near: read Redis's clock again instead of sleeping */
    char cron_wake[JR_ID_MAX]; /* last entry id seen on jr:{cron}:wake */
    double clock_redis_ms;    /* Redis's clock (Unix ms) at monotonic clock_mono_us */
    int64_t clock_mono_us, clock_half_rtt_us;
    /* partition counts: of the -q queues, read at connect and every
     * JR_PARTITIONS_REREAD_MS; of the schedules' queues, read at most that often */
    jr_partmap_t parts;
    int64_t parts_us;         /* monotonic time of the next read, 0 = at connect
                                 (the schedules' jobs use the counts too) */
    int parts_applied;        /* the configuration's counts (queues section) were set in Redis */
} sched_t;

/* One schedule as this scheduler keeps it. */
typedef struct cron_state {
    jr_cron_def_t def;
    char *stored;        /* its definition as stored, to see changes */
    int64_t next;        /* next tick to fire (Unix ms, Redis time), -1 = none */
    int64_t after;       /* the tick after next, -1 = none */
    int64_t retry_at_us; /* after a refused enqueue: monotonic time to try again, 0 = none */
    int refused;         /* its last job was refused (reported) */
} cron_state_t;

static void sched_drop_conns(sched_t *s) {
    jr_redis_free(s->cmd);
    jr_redis_free(s->blk);
    s->cmd = s->blk = NULL;
    s->blocked = 0;
}

/* (Re)build the wake key arrays for the current queue list, keeping the ids
 * already known for queues that stay. Returns 0 or JR_ENOMEM. */
static int sched_set_queues(sched_t *s, jr_strlist_t *queues, const char *registry_id) {
    size_t n = queues->n + (s->follow ? 1 : 0) + 1; /* + jr:{cron}:wake, last */
    char(*ids)[JR_ID_MAX] = calloc(n ? n : 1, sizeof *ids);
    char(*keys)[JR_KEY_MAX] = calloc(n ? n : 1, sizeof *keys);
    const char **keyv = calloc(n ? n : 1, sizeof *keyv);
    unsigned char *fired = calloc(n ? n : 1, 1);
    unsigned char *off = calloc(n ? n : 1, 1);
    int64_t *retry_at = calloc(n ? n : 1, sizeof *retry_at);
    int64_t *backoff = calloc(n ? n : 1, sizeof *backoff);
    double *due = calloc(n ? n : 1, sizeof *due);
    if (!ids || !keys || !keyv || !fired || !off || !retry_at || !backoff || !due) {
        free(ids), free(keys), free(keyv), free(fired), free(off), free(retry_at), free(backoff), free(due);
        return JR_ENOMEM;
    }
    for (size_t i = 0; i < queues->n; i++) {
        jr_qkeys_t k;
        jr_qkeys(&k, queues->v[i]);
        snprintf(keys[i], JR_KEY_MAX, "%s", k.wake);
        snprintf(ids[i], JR_ID_MAX, "0-0");
        due[i] = -1;
        for (size_t j = 0; j < s->nwake; j++)
            if (strcmp(s->wake_keys[j], keys[i]) == 0) {
                memcpy(ids[i], s->wake_ids[j], JR_ID_MAX);
                retry_at[i] = s->retry_at_us[j], backoff[i] = s->backoff_ms[j], due[i] = s->due_ms[j];
                off[i] = s->wake_off[j];
            }
        keyv[i] = keys[i];
    }
    if (s->follow) {
        snprintf(keys[n - 2], JR_KEY_MAX, "%s", JR_REGISTRY_WAKE_KEY);
        snprintf(ids[n - 2], JR_ID_MAX, "%s", registry_id);
        keyv[n - 2] = keys[n - 2];
        if (s->nwake && s->follow) off[n - 2] = s->wake_off[s->nwake - 2];
    }
    snprintf(keys[n - 1], JR_KEY_MAX, "%s", JR_CRON_WAKE_KEY);
    snprintf(ids[n - 1], JR_ID_MAX, "%s", s->cron_wake);
    keyv[n - 1] = keys[n - 1];
    if (s->nwake) off[n - 1] = s->wake_off[s->nwake - 1];
    free(s->wake_ids), free(s->wake_keys), free(s->keyv), free(s->fired), free(s->wake_off);
    free(s->retry_at_us), free(s->backoff_ms), free(s->due_ms);
    jr_strlist_free(&s->queues);
    s->queues = *queues;
    memset(queues, 0, sizeof *queues);
    s->wake_ids = ids, s->wake_keys = keys, s->keyv = keyv, s->fired = fired, s->wake_off = off, s->nwake = n;
    s->retry_at_us = retry_at, s->backoff_ms = backoff, s->due_ms = due;
    return 0;
}

/* Read the registry and serve what it lists. A registry Redis refuses to
 * read (a key of another type) is reported once and the queues known
 * stay served; it is read again when its wake stream fires (every block
 * period while that stream is left out, sched_backstop). */
static int sched_refresh(sched_t *s) {
    jr_strlist_t q = {0};
    char reg_id[JR_ID_MAX];
    int rc = jr_redis_queues(s->cmd, &q, reg_id);
    if (rc == JR_EREDIS && jr_redis_ok(s->cmd)) {
        jr_strlist_free(&q);
        jr_report_once(JR_LOG_ERROR, SAY_REGISTRY_REFUSED,
                       "key", JR_REGISTRY_KEY, jr_redis_errstr(s->cmd));
        return 0;
    }
    if (rc) return rc;
    jr_report_clear(SAY_REGISTRY_REFUSED, "the registered queues can be listed again", "key", JR_REGISTRY_KEY);
    if (s->follow) s->wake_off[s->nwake - 2] = 0;
    if (q.n != s->queues.n) {
        char n[24];
        snprintf(n, sizeof n, "%zu", q.n);
        jr_log_kv(JR_LOG_INFO, "serving registered queues", "count", n, NULL);
    }
    rc = sched_set_queues(s, &q, reg_id);
    jr_strlist_free(&q);
    return rc;
}

static void sched_fold_deadline(sched_t *s, int64_t at) {
    if (s->deadline_us < 0 || at < s->deadline_us) s->deadline_us = at;
}

/* Redis refused to promote queue i (an error reply): report it by name
 * (once per reason) and try that queue again after a backoff, 1 s doubling
 * to 60 s. */
static void sched_back_off(sched_t *s, size_t i) {
    int64_t b = s->backoff_ms[i] ? s->backoff_ms[i] * 2 : 1000;
    if (b > 60000) b = 60000;
    s->backoff_ms[i] = b;
    s->retry_at_us[i] = jr_mono_us() + b * 1000;
    sched_fold_deadline(s, s->retry_at_us[i]);
    jr_report_once(JR_LOG_ERROR, SAY_PROMOTE_REFUSED,
                   "queue", s->queues.v[i], jr_redis_errstr(s->cmd));
}

/* The LIMIT of the next jr_promote of a backlog (issue 10): a call that
 * came back full took `took_us` (round trip) for `limit` members. While
 * such a call takes under half of SCHED_CALL_US (so that the doubled one
 * stays near the bound), the limit doubles (fewer, larger calls:
 * less per-call work in Redis and fewer round trips, each one a chance for
 * the scheduler to be descheduled on a busy machine), up to
 * SCHED_LIMIT_GROWTH x batch (at most jr_promote's largest LIMIT, 100,000);
 * over twice the bound it halves, never below `batch`. A call blocks Redis
 * for its whole duration, so the bound is also the longest pause the
 * promotion of a backlog imposes on the other clients: 20 ms (about 2,500
 * jobs of 8 us of Redis CPU each on this project's loaded 2-core test
 * machine, 10,000 and more on a quiet one). Pure: no I/O. */
#define SCHED_CALL_US 20000
#define SCHED_LIMIT_GROWTH 16
static int64_t sched_next_limit(int64_t limit, int64_t batch, int64_t took_us) {
    int64_t most = batch * SCHED_LIMIT_GROWTH;
    if (most > 100000) most = 100000;
    if (most < batch) most = batch;
    if (took_us < SCHED_CALL_US / 2 && limit < most) limit = limit * 2 < most ? limit * 2 : most;
    else if (took_us > 2 * SCHED_CALL_US && limit > batch) limit = limit / 2 > batch ? limit / 2 : batch;
    return limit;
}

/* Promote everything due in queue i; fold its next due time into the
 * deadline. Returns 0 (also when Redis refused this queue: it backs off
 * alone), or an error that needs a reconnect. */
static int sched_promote(sched_t *s, size_t i) {
    const char *q = s->queues.v[i];
    int64_t moved, buried, cascaded, total = 0, total_buried = 0;
    int64_t limit = s->cfg->scheduler_batch; /* grows while a backlog is due */
    double next_due, now;
    if (s->retry_at_us[i] > jr_mono_us()) {
        sched_fold_deadline(s, s->retry_at_us[i]);
        return 0;
    }
    for (;;) {
        int64_t sent = jr_mono_us();
        int rc = jr_redis_promote(s->cmd, q, limit, s->cfg->dead_max, &moved,
                                  &buried, &next_due, &now, s->wake_ids[i], &cascaded);
        /* A missing library (FUNCTION FLUSH) is fixed by reconnecting. */
        if (rc == JR_EREDIS && !strstr(jr_redis_errstr(s->cmd), "Function not found")) {
            sched_back_off(s, i);
            break;
        }
        if (rc) {
            jr_log_kv(JR_LOG_ERROR, "promoting this queue failed", "queue", q, "error",
                      jr_redis_errstr(s->cmd)[0] ? jr_redis_errstr(s->cmd) : jr_strerror(rc), NULL);
            return rc;
        }
        if (s->backoff_ms[i]) jr_report_clear(SAY_PROMOTE_REFUSED, "Redis promotes this queue again", "queue", q);
        s->retry_at_us[i] = s->backoff_ms[i] = 0;
        s->wake_off[i] = 0; /* jr_promote checked its type */
        jr_metrics_redis_ok();
        /* Lateness: this call's Redis time minus the earliest due time the
         * previous call left, i.e. of the earliest job this call moved (a
         * job enqueued since, due earlier, is not seen). */
        int64_t promoted = moved - buried - cascaded; /* cascaded: still waiting, in the sorted set */
        if (promoted > 0 && jr_metrics_on())
            jr_metrics_promoted(q, promoted, s->due_ms[i] >= 0 && now >= s->due_ms[i]
                                                 ? (now - s->due_ms[i]) / 1000.0 : -1);
        s->due_ms[i] = next_due;
        total += promoted;
        total_buried += buried;
        if (moved < limit) {
            if (next_due >= 0) {
                /* Due times are Redis time: convert the distance to our
                 * monotonic clock, measured from before the call so we never
                 * wake late (waking a little early costs one more call).
                 * A score past any due time a function writes (a ZADD by
                 * hand: 1e16, inf) is capped, or the conversion would wrap
                 * and lose the timer of every queue. */
                double ahead_us = (next_due - now) * 1000.0;
                if (!(ahead_us < JR_DELAY_MAX_MS * 1000.0)) ahead_us = JR_DELAY_MAX_MS * 1000.0;
                /* A call that moved nothing and says a job is due now
                 * or past (bucket items that were all cancelled, or garbage
                 * in the time wheel's index that a library before revision
                 * 15 misread) is called again after 100 ms at the earliest:
                 * the loop never spins on it. Only then: a call that came a
                 * hair early (our timer runs on our clock, the due time is
                 * Redis's) moved nothing either, and its job, due in
                 * microseconds, waited those 100 ms. */
                if (moved == 0 && ahead_us <= 0) ahead_us = 100000;
                sched_fold_deadline(s, sent + (int64_t)ahead_us);
            }
            break;
        }
        limit = sched_next_limit(limit, s->cfg->scheduler_batch, jr_mono_us() - sent);
    }
    char n[24];
    if (total_buried > 0) {
        snprintf(n, sizeof n, "%lld", (long long)total_buried);
        jr_log_kv(JR_LOG_WARN, "delayed set members that are not jobs moved to the dead stream (why=invalid)",
                  "queue", q, "members", n, NULL);
    }
    if (total > 0 && jr_log_enabled(JR_LOG_INFO)) {
        snprintf(n, sizeof n, "%lld", (long long)total);
        jr_log_kv(JR_LOG_INFO, "promoted due jobs", "queue", q, "jobs", n, NULL);
    }
    return 0;
}

/* Metrics: refresh the gauges of every queue (jr_qgauges_t: ready,
 * pending, delayed, dead, paused, oldest ready), at most once a second (the
 * loop turns at least once per scheduler.block), labelled with the queue's
 * name: the partitions Q#J of a partitioned queue add up under Q (the
 * oldest ready: the oldest of them). Every scheduler exports them as Redis
 * holds them, so two schedulers give the same values: max by (queue).
 * Cost per queue and second: jr_redis_stats (7 commands, 2 more while
 * jobs are ready), and one HMGET of the paused hash for all. A refused
 * call skips that queue (and the queue its partition belongs to); a
 * broken connection is returned. */
static int sched_depth(sched_t *s) {
    if (!jr_metrics_on() || !s->cmd || jr_mono_us() < s->next_depth_us) return 0;
    s->next_depth_us = jr_mono_us() + 1000000;
    struct depth {
        char queue[JR_INTERNAL_QUEUE_MAX + 1];
        long long delayed, ready, pending, dead, oldest_ms; /* delayed -1: a part could not be read */
    } *d = calloc(s->queues.n ? s->queues.n : 1, sizeof *d);
    const char **names = calloc(s->queues.n ? s->queues.n : 1, sizeof *names);
    unsigned char *paused = calloc(s->queues.n ? s->queues.n : 1, 1);
    if (!d || !names || !paused) {
        free(d), free(names), free(paused);
        return JR_ENOMEM;
    }
    size_t nd = 0;
    int rc = 0;
    for (size_t i = 0; i < s->queues.n && !rc; i++) {
        jr_qstats_t st;
        char q[JR_INTERNAL_QUEUE_MAX + 1];
        size_t qlen;
        uint32_t j;
        snprintf(q, sizeof q, "%s", s->queues.v[i]);
        if (jr_partition_split(q, strlen(q), &qlen, &j)) q[qlen] = '\0';
        size_t k = 0;
        while (k < nd && strcmp(d[k].queue, q)) k++;
        if (k == nd) snprintf(d[nd++].queue, sizeof d->queue, "%s", q);
        rc = jr_redis_stats(s->cmd, s->queues.v[i], &st);
        if (rc == JR_EREDIS || (!rc && (st.delayed < 0 || st.ready < 0 || st.dead < 0))) {
            d[k].delayed = -1, rc = 0;
        } else if (!rc && d[k].delayed >= 0) {
            d[k].delayed += st.delayed, d[k].ready += st.ready, d[k].pending += st.pending, d[k].dead += st.dead;
            if (st.oldest_ready_ms > d[k].oldest_ms) d[k].oldest_ms = st.oldest_ready_ms;
        }
    }
    for (size_t k = 0; k < nd; k++) names[k] = d[k].queue;
    int prc = rc ? rc : jr_redis_paused(s->cmd, names, nd, paused);
    if (prc == JR_EREDIS) prc = 0, memset(paused, 0xff, nd); /* garbage in the paused hash: unknown */
    if (!rc) rc = prc;
    for (size_t k = 0; !rc && k < nd; k++) {
        if (d[k].delayed < 0) continue;
        jr_qgauges_t g = {.ready = d[k].ready, .pending = d[k].pending, .delayed = d[k].delayed, .dead = d[k].dead,
                          .paused = paused[k] == 0xff ? -1 : paused[k] ? 1 : 0,
                          .oldest_ready_s = (double)d[k].oldest_ms / 1000.0};
        jr_metrics_queue(d[k].queue, &g);
    }
    free(d), free(names), free(paused);
    return rc;
}

static int sched_promote_all(sched_t *s) {
    s->deadline_us = -1;
    for (size_t i = 0; i < s->queues.n; i++) {
        int rc = sched_promote(s, i);
        if (rc) return rc;
    }
    return 0;
}

/* ---- periodic schedules ---------------------------------------------------- */

static void cron_free_all(cron_state_t *v, size_t n) {
    for (size_t i = 0; v && i < n; i++) jr_cron_def_free(&v[i].def), free(v[i].stored);
    free(v);
}

/* Redis's clock now (Unix ms) at monotonic *mono_us. With keep_best, a
 * reading whose round trip was longer than the one kept is dropped and the
 * kept one returned (near a tick: Redis's clock and ours do not drift apart
 * measurably in a few ms, and the shorter round trip bounds the error
 * tighter). */
static int cron_clock(sched_t *s, double *redis_ms, int64_t *mono_us, int keep_best) {
    int64_t sent = jr_mono_us();
    double t;
    int rc = jr_redis_time_ms(s->cmd, &t);
    if (rc) return rc;
    int64_t recv = jr_mono_us();
    /* Redis read its clock between sent and recv: take the middle, with an
     * error of at most half the round trip. */
    if (!keep_best || (recv - sent) / 2 <= s->clock_half_rtt_us)
        s->clock_redis_ms = t, s->clock_mono_us = sent + (recv - sent) / 2, s->clock_half_rtt_us = (recv - sent) / 2;
    *redis_ms = s->clock_redis_ms, *mono_us = s->clock_mono_us;
    return 0;
}

/* Redis's clock now as estimated from the last cron_clock. */
static double cron_now(const sched_t *s) {
    return s->clock_redis_ms + (double)(jr_mono_us() - s->clock_mono_us) / 1000.0;
}

/* The idempotency window of a tick's job (`after`: the tick after it, -1
 * if none): at least a day and two intervals, so every scheduler firing the
 * tick makes one job. */
static int64_t cron_window(int64_t tick, int64_t after) {
    int64_t w = JR_UNIQ_DEFAULT_MS;
    if (after > tick && 2 * (after - tick) > w) w = 2 * (after - tick);
    return w < JR_UNIQ_MAX_MS ? w : JR_UNIQ_MAX_MS;
}

/* Set a schedule's next tick, and the one after it (computed now, so that
 * firing costs no time zone work). */
static void cron_set_next(cron_state_t *c, int64_t t) {
    c->next = t;
    c->after = t >= 0 ? jr_cron_def_next(&c->def, t) : -1;
}

/* The job of `tick` (id NAME@TICK into id), due at the tick, or now when
 * catch_up. */
static void cron_job(const jr_cron_def_t *d, int64_t tick, int64_t after, int catch_up, char *id,
                     jr_enqueue_t *job) {
    snprintf(id, JR_ID_MAX, "%s@%lld", d->name, (long long)tick);
    *job = (jr_enqueue_t){.queue = d->queue, .id = id, .at_us = catch_up ? 0 : tick * 1000,
                          .uniq_ms = cron_window(tick, after)};
    if (!catch_up && job->at_us <= 0) job->at_us = 1; /* "at the epoch" = now */
    job->env.handler = d->handler;
    job->env.handler_len = strlen(d->handler);
    job->env.payload = d->payload;
    job->env.payload_len = d->payload ? strlen(d->payload) : 0;
    job->env.attempt = 1;
}

/* After a job was enqueued (created: by this call): record the tick as
 * last fired and log it. Returns 0 or a transport error. */
static int cron_fired(sched_t *s, const jr_cron_def_t *d, int64_t tick, const char *id, int created,
                      int catch_up) {
    int rc = jr_redis_cron_fired(s->cmd, d->name, tick, id);
    if (rc == JR_EREDIS && jr_redis_ok(s->cmd)) {
        jr_report_once(JR_LOG_ERROR, "Redis refused to record a fired tick", "schedule", d->name,
                       jr_redis_errstr(s->cmd));
        rc = 0;
    }
    if (created && jr_metrics_on()) jr_metrics_cron_fired(d->name, tick, (cron_now(s) - (double)tick) / 1000.0);
    char t[JR_TIME_LEN];
    if (created || jr_log_enabled(JR_LOG_DEBUG))
        jr_log_kv(created ? JR_LOG_INFO : JR_LOG_DEBUG,
                  catch_up ? "fired a periodic job for a missed tick"
                  : created ? "fired a periodic job" : "periodic job already fired by another scheduler",
                  "schedule", d->name, "job", id, "queue", d->queue, "tick", jr_time_format(tick, t), NULL);
    return rc;
}

/* Enqueue the job of one tick now and record it (the catch-up of missed
 * ticks). Returns 0 (a refusal is logged), or a transport error. */
static int cron_fire_one(sched_t *s, const jr_cron_def_t *d, int64_t tick, int catch_up) {
    char id[JR_ID_MAX];
    jr_enqueue_t job;
    cron_job(d, tick, jr_cron_def_next(d, tick), catch_up, id, &job);
    /* a partitioned queue: into the partition of the tick's id */
    jr_enq_outcome_t o = {0};
    int rc = jr_redis_enqueue_parts(s->cmd, &s->parts, &job, NULL, 1, NULL, &o, NULL);
    int created = o.status == JR_ENQ_CREATED;
    if ((rc == JR_EREDIS && jr_redis_ok(s->cmd)) || rc == JR_EINVAL) {
        jr_report_once(JR_LOG_ERROR, "Redis refused the catch-up job of a periodic schedule", "schedule", d->name,
                       jr_redis_errstr(s->cmd));
        return 0;
    }
    return rc ? rc : cron_fired(s, d, tick, id, created, catch_up);
}

/* Upsert the configured schedules. Refusals are logged; a transport error
 * (or JR_ENOMEM) is returned. */
static int cron_upsert(sched_t *s) {
    for (size_t i = 0; i < s->cfg->nperiodic; i++) {
        const jr_cron_def_t *d = &s->cfg->periodic[i];
        char *def = jr_cron_def_encode(d);
        if (!def) return JR_ENOMEM;
        int changed = 0, rc = jr_redis_cron_set(s->cmd, d->name, def, &changed);
        free(def);
        if (rc == JR_EREDIS && jr_redis_ok(s->cmd)) {
            jr_report_once(JR_LOG_ERROR, "Redis refused a configured schedule", "schedule", d->name,
                           jr_redis_errstr(s->cmd));
        } else if (rc) {
            return rc;
        } else if (changed) {
            jr_log_kv(JR_LOG_INFO, "stored a configured schedule", "schedule", d->name, NULL);
        }
    }
    return 0;
}

/* Near a tick, a sleep is no timer: a process woken from one starts late,
 * 1-2 ms typically on a virtual machine whose idle vCPUs halt, 4 ms and more
 * on a busy host, and so does a Redis that slept (bench/RESULTS.md). So a
 * scheduler wakes this much before a tick and from then on does not sleep
 * until the tick: each turn of its loop looks at its connection and signals
 * without waiting and reads Redis's clock once (`TIME`, cron_near), which
 * keeps both processes awake and the clock estimate's error down to half of
 * a warm round trip (tens of us); it fires on the first turn past the tick.
 * A busy spin on our own clock instead would starve Redis of the CPU it needs
 * to answer (3 schedulers on 2 cores: 5-11 ms enqueue round trips). Cost per
 * tick and scheduler: a few dozen TIME calls; nothing between ticks. */
#define CRON_PREWAKE_US 3000

/* Fold the schedules' next ticks into cron_deadline_us (Redis time `now`
 * measured at monotonic `mono`). */
static void cron_set_deadline(sched_t *s, double now, int64_t mono) {
    s->cron_deadline_us = -1;
    for (size_t i = 0; i < s->ncrons; i++) {
        cron_state_t *c = &s->crons[i];
        int64_t at = -1;
        if (c->retry_at_us) {
            at = c->retry_at_us;
        } else if (c->next >= 0) {
            double ahead_us = ((double)c->next - now) * 1000.0;
            if (ahead_us < 0) ahead_us = 0;
            if (ahead_us > JR_DELAY_MAX_MS * 1000.0) ahead_us = JR_DELAY_MAX_MS * 1000.0;
            /* Half a round trip late: by then Redis's clock has passed the
             * tick even if the estimate erred the other way (an early job
             * would wait in the delayed set: never early, but later). */
            at = mono + (int64_t)ahead_us + s->clock_half_rtt_us;
        }
        if (at >= 0 && (s->cron_deadline_us < 0 || at < s->cron_deadline_us)) s->cron_deadline_us = at;
    }
    s->cron_tick_us = s->cron_deadline_us;
    s->cron_spin = s->cron_deadline_us >= 0 && s->cron_deadline_us - jr_mono_us() <= 2 * CRON_PREWAKE_US;
    if (s->cron_deadline_us >= 0 && !s->cron_spin) s->cron_deadline_us -= CRON_PREWAKE_US;
}

/* A turn near a tick (from CRON_PREWAKE_US before it): read Redis's clock
 * again (the first read of a spin afresh, later ones keeping the best) and
 * set the timer from it. Returns 0 or a transport error. */
static int cron_near(sched_t *s) {
    double now;
    int64_t mono;
    int rc = cron_clock(s, &now, &mono, s->cron_spin);
    if (!rc) cron_set_deadline(s, now, mono);
    return rc;
}

/* Fire every tick that is due by the estimated Redis clock (no call before
 * the enqueue: the timer woke us), in order per schedule: the jobs of up to
 * CRON_BATCH ticks in one pipeline, then their last-fired records; then read
 * Redis's clock again and set the timer. A job Redis refuses (its queue's
 * keys hold garbage; reported once per schedule and reason) costs its own
 * schedule: its ticks from that one on are tried again after 1 s (the jobs
 * that were made are not made twice), while the other schedules' jobs of
 * the same pipeline are recorded as fired. */
#define CRON_BATCH 256

/* Before a backlog of c's ticks (two or more due: this scheduler was away,
 * stopped or cut off for an interval or more), skip those another
 * scheduler has fired meanwhile: up to the latest tick recorded in
 * jr:{cron}:last. A tick's id keeps it from running twice only while its
 * idempotency window lasts (a day, or two intervals); a scheduler away
 * longer would otherwise fire every tick of its absence again. One HGET,
 * only then. A refusal (the key holds garbage) skips nothing: the ids still
 * guard the window; so does a recorded tick later than now. Returns 0 or
 * a transport error. */
static int cron_skip_fired(sched_t *s, cron_state_t *c, double now) {
    if (c->next < 0 || c->after < 0 || (double)c->after > now) return 0;
    int64_t last;
    int rc = jr_redis_cron_last(s->cmd, c->def.name, &last);
    if (rc == JR_EREDIS && jr_redis_ok(s->cmd)) return 0;
    if (rc) return rc;
    /* a tick is fired at or after its time: a later one is garbage (written
     * by hand), which would silence the schedule until then */
    if (last >= c->next && (double)last <= now) cron_set_next(c, jr_cron_def_next(&c->def, last));
    return 0;
}

static int cron_fire(sched_t *s) {
    double now = cron_now(s);
    int64_t mono;
    int rc = 0;
    jr_enqueue_t jobs[CRON_BATCH];
    char (*ids)[JR_ID_MAX] = NULL;
    struct {
        size_t c;
        int64_t tick, after;
    } due[CRON_BATCH];
    jr_enq_outcome_t out[CRON_BATCH];
    jr_strlist_t reasons = {0};
    for (int more = 1; more;) {
        size_t k = 0;
        more = 0;
        for (size_t i = 0; i < s->ncrons && k < CRON_BATCH; i++) {
            cron_state_t *c = &s->crons[i];
            if (c->retry_at_us > jr_mono_us()) continue;
            c->retry_at_us = 0;
            if ((rc = cron_skip_fired(s, c, now))) break;
            for (int64_t t = c->next, a = c->after; t >= 0 && (double)t <= now; t = a, a = -2) {
                if (k == CRON_BATCH) {
                    more = 1;
                    break;
                }
                if (a == -2) a = jr_cron_def_next(&c->def, t); /* a backlog: the second tick on */
                if (!ids && !(ids = malloc(CRON_BATCH * sizeof *ids))) return JR_ENOMEM;
                cron_job(&c->def, t, a, 0, ids[k], &jobs[k]);
                due[k].c = i, due[k].tick = t, due[k].after = a;
                k++;
            }
        }
        if (rc || !k) break;
        /* Each job's own outcome: one refused (its queue's keys hold
         * garbage) costs its schedule only, which tries again after 1 s;
         * the others are recorded. */
        jr_strlist_free(&reasons);
        rc = jr_redis_enqueue_parts(s->cmd, &s->parts, jobs, NULL, k, NULL, out, &reasons);
        if (rc && !jr_redis_ok(s->cmd)) break;
        rc = 0;
        for (size_t j = 0; j < k; j++) {
            cron_state_t *c = &s->crons[due[j].c];
            if (out[j].status == JR_ENQ_CREATED || out[j].status == JR_ENQ_EXISTED) continue;
            /* Redis's own text: the reason's count of refused jobs grows with the backlog */
            const char *why = out[j].why < reasons.n ? reasons.v[out[j].why] : jr_redis_errstr(s->cmd);
            jr_report_once(JR_LOG_ERROR, SAY_TICK_REFUSED,
                           "schedule", c->def.name, strstr(why, "ERR ") ? strstr(why, "ERR ") : why);
            c->retry_at_us = jr_mono_us() + 1000000;
            c->refused = 1;
        }
        for (size_t j = 0; !rc && j < k; j++) {
            cron_state_t *c = &s->crons[due[j].c];
            if (c->retry_at_us) continue; /* a tick of it was refused: none recorded past it */
            if (c->refused) jr_report_clear(SAY_TICK_REFUSED, "Redis accepts the jobs of this schedule again", "schedule", c->def.name);
            c->refused = 0;
            rc = cron_fired(s, &c->def, due[j].tick, ids[j], out[j].status == JR_ENQ_CREATED, 0);
            if (c->next <= due[j].tick) cron_set_next(c, due[j].after);
        }
        if (rc) break;
    }
    free(ids);
    jr_strlist_free(&reasons);
    if (!rc) rc = cron_clock(s, &now, &mono, 0);
    if (!rc) cron_set_deadline(s, now, mono);
    return rc;
}

/* Read the schedules from Redis. A schedule whose stored definition is
 * unchanged keeps its next tick; a new or changed one starts at the first
 * tick at or after now; an unreadable one is reported and not fired. On
 * the first load (this scheduler's start S), missed ticks (after the last
 * fired, before S) of `once` schedules fire one catch-up job. A listing
 * Redis refuses keeps the schedules loaded and is tried again after 5 s. */
static int cron_load(sched_t *s) {
    jr_cron_entry_t *v = NULL;
    size_t n = 0;
    double now;
    int64_t mono;
    int rc = jr_redis_cron_list(s->cmd, &v, &n, s->cron_wake);
    if (rc == JR_EREDIS && jr_redis_ok(s->cmd)) {
        /* A schedule key holding garbage costs the schedules only: the ones
         * loaded keep their timers, the delayed jobs of every queue go on. */
        jr_report_once(JR_LOG_ERROR, SAY_CRON_REFUSED,
                       "key", JR_CRON_KEY, jr_redis_errstr(s->cmd));
        s->cron_reload_us = jr_mono_us() + 5000000;
        return 0;
    }
    if (!rc) s->cron_reload_us = 0, s->wake_off[s->nwake - 1] = 0;
    if (!rc) jr_report_clear(SAY_CRON_REFUSED, "the periodic schedules can be listed again", "key", JR_CRON_KEY);
    if (!rc) rc = cron_clock(s, &now, &mono, 0);
    cron_state_t *nv = !rc ? calloc(n ? n : 1, sizeof *nv) : NULL;
    if (!rc && !nv) rc = JR_ENOMEM;
    if (rc) {
        jr_cron_entries_free(v, n);
        return rc;
    }
    snprintf(s->wake_ids[s->nwake - 1], JR_ID_MAX, "%s", s->cron_wake);
    int64_t start = (int64_t)now;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char why[JR_ERRLEN];
        cron_state_t *c = &nv[k];
        if (jr_cron_def_decode(v[i].name, v[i].def, &c->def, why, sizeof why)) {
            jr_report_once(JR_LOG_ERROR, "a stored schedule is unreadable; not firing it", "schedule", v[i].name, why);
            jr_cron_def_free(&c->def);
            continue;
        }
        c->stored = v[i].def, v[i].def = NULL;
        size_t j = 0;
        while (j < s->ncrons && (strcmp(s->crons[j].def.name, c->def.name) || strcmp(s->crons[j].stored, c->stored)))
            j++;
        if (j < s->ncrons) /* unchanged */
            c->next = s->crons[j].next, c->after = s->crons[j].after, c->retry_at_us = s->crons[j].retry_at_us,
            c->refused = s->crons[j].refused;
        else
            cron_set_next(c, c->def.enabled ? jr_cron_def_next(&c->def, start - 1) : -1);
        const char *job;
        int64_t last = jr_cron_last_parse(v[i].last, &job);
        if (!s->cron_started && c->def.enabled && c->def.missed == JR_MISSED_ONCE && last >= 0) {
            int64_t m = jr_cron_def_latest(&c->def, last, start);
            if (m >= 0 && (rc = cron_fire_one(s, &c->def, m, 1))) {
                k++; /* freed below */
                break;
            }
        }
        k++;
    }
    jr_cron_entries_free(v, n);
    if (rc) {
        cron_free_all(nv, k);
        return rc;
    }
    if (!s->cron_started || k != s->ncrons) {
        char cnt[24];
        snprintf(cnt, sizeof cnt, "%zu", k);
        jr_log_kv(JR_LOG_INFO, "periodic schedules loaded", "count", cnt, NULL);
    }
    cron_free_all(s->crons, s->ncrons);
    s->crons = nv, s->ncrons = k;
    s->cron_started = 1;
    cron_set_deadline(s, now, mono);
    return 0;
}

/* The -q queues, each partitioned one as its partitions Q#J (read from
 * Redis, see redis_partition.h): served from now on when they changed (a
 * change is logged). Returns 1 when the queues served changed, 0 when not,
 * or an error (a count that is garbage is reported and the queues served
 * stay: 0). */
static int sched_expand(sched_t *s) {
    jr_strlist_t q = {0};
    int rc = 0, changed = 0;
    s->parts.max_age_us = 0; /* read just below, in one call */
    s->parts_us = jr_mono_us() + JR_PARTITIONS_REREAD_MS * 1000;
    unsigned *before_n = calloc(s->cfg->scheduler_queues.n + 1, sizeof *before_n);
    if (!before_n) return JR_ENOMEM;
    for (size_t i = 0; i < s->cfg->scheduler_queues.n; i++)
        for (size_t k = 0; k < s->parts.n; k++)
            if (!strcmp(s->parts.v[k].queue, s->cfg->scheduler_queues.v[i])) before_n[i] = s->parts.v[k].n;
    rc = jr_partmap_refresh(&s->parts, s->cmd, (const char *const *)s->cfg->scheduler_queues.v,
                            s->cfg->scheduler_queues.n);
    for (size_t i = 0; !rc && i < s->cfg->scheduler_queues.n; i++) {
        const char *name = s->cfg->scheduler_queues.v[i];
        jr_qpart_t *p;
        unsigned before = before_n[i];
        if ((rc = jr_partmap_get(&s->parts, s->cmd, name, &p))) break;
        if (before && before != p->n) {
            char a[16], b[16];
            snprintf(a, sizeof a, "%u", before), snprintf(b, sizeof b, "%u", p->n);
            jr_log_kv(JR_LOG_INFO, "the partitions of a queue changed; serving them", "queue", name, "from", a, "to", b,
                      NULL);
        }
        for (unsigned k = 0; !rc && k < p->n; k++)
            if (jr_strlist_push(&q, jr_qpart_name(p, k))) rc = JR_ENOMEM;
        /* and Q itself, for the jobs a producer unaware of the partitions put there */
        if (!rc && p->n > 1 && jr_strlist_push(&q, name)) rc = JR_ENOMEM;
    }
    free(before_n);
    s->parts.max_age_us = JR_PARTITIONS_REREAD_MS * 1000; /* the schedules' jobs read them at most that often */
    if (rc == JR_EREDIS && jr_redis_ok(s->cmd)) {
        jr_report_once(JR_LOG_ERROR, "Redis refused to read the partitions of the queues; serving the ones known",
                       "key", JR_PARTITIONS_KEY, jr_redis_errstr(s->cmd));
        jr_strlist_free(&q);
        return 0;
    }
    changed = !rc && q.n != s->queues.n;
    for (size_t i = 0; !rc && !changed && i < q.n; i++) changed = strcmp(q.v[i], s->queues.v[i]) != 0;
    if (changed) rc = sched_set_queues(s, &q, "0-0");
    jr_strlist_free(&q);
    return rc ? rc : changed;
}

/* Connect both connections and bring the state up to date. */
static int sched_connect(sched_t *s) {
    if (!(s->cmd = jr_connect_retry(s->cfg)) || jr_signals_count()) return JR_EINTR;
    if (!(s->blk = jr_connect_retry(s->cfg))) return JR_EINTR;
    int rc = 0;
    if (!s->parts_applied && !(rc = jr_partitions_apply(s->cmd, &s->cfg->queue_partitions))) s->parts_applied = 1;
    if (!rc) rc = s->follow ? sched_refresh(s) : sched_expand(s);
    if (rc > 0) rc = 0;
    jr_presence_reset(&s->presence);
    if (!rc) rc = jr_presence_tick(&s->presence, s->cmd, 0);
    if (!rc) jr_metrics_redis_ok();
    if (!rc) rc = cron_upsert(s);
    if (!rc) rc = cron_load(s);
    if (!rc) rc = cron_fire(s);
    return rc ? rc : sched_promote_all(s);
}

/* ---- wake keys holding garbage ---------------------------------------------- */

static int sched_any_off(const sched_t *s) {
    for (size_t i = 0; i < s->nwake; i++)
        if (s->wake_off[i]) return 1;
    return 0;
}

/* Redis refused the wake XREAD (an error reply): one of its keys holds
 * another type. Find which (TYPE of each), report each once by name and
 * leave them out of the next XREADs; the queue, registry or schedules they
 * wake are then looked at every block period (sched_backstop) instead,
 * and a key is taken back once the call that checks its type (jr_promote,
 * jr_queues, jr_cron_list) succeeds. Returns 0 (nothing fired) when one
 * was found, else the refusal (the connection is made again). */
static int sched_wake_refused(sched_t *s) {
    char err[JR_ERRLEN];
    snprintf(err, sizeof err, "%s", jr_redis_errstr(s->blk));
    int found = 0;
    for (size_t i = 0; i < s->nwake; i++) {
        char type[32];
        int rc = jr_redis_key_type(s->cmd, s->keyv[i], type, sizeof type);
        if (rc) return rc == JR_EREDIS && jr_redis_ok(s->cmd) ? JR_EREDIS : rc;
        if (strcmp(type, "stream") && strcmp(type, "none")) {
            char why[JR_ERRLEN + 64];
            snprintf(why, sizeof why, "holds a %s, not a stream (%s)", type, err);
            jr_report_once(JR_LOG_ERROR, "a wake stream holds garbage; not waiting on it, looking every block period instead",
                           "key", s->keyv[i], why);
            s->wake_off[i] = 1;
            found = 1;
        }
    }
    if (found) s->backstop_us = jr_mono_us() + s->cfg->scheduler_block_ms * 1000;
    return found ? 0 : JR_EREDIS;
}

/* Every block period while a wake key is left out (its changes are not
 * seen), and when the schedules are to be read again after a refusal:
 * promote every queue, read the registry and the schedules. Returns 0 or
 * a transport error. */
static int sched_backstop(sched_t *s) {
    int rc = 0, off = sched_any_off(s);
    int64_t now = jr_mono_us();
    if (off && now >= s->backstop_us) {
        s->backstop_us = now + s->cfg->scheduler_block_ms * 1000;
        if (s->follow && s->wake_off[s->nwake - 2]) rc = sched_refresh(s);
        if (!rc) rc = sched_promote_all(s);
        if (!rc && s->wake_off[s->nwake - 1]) s->cron_reload_us = now;
    }
    if (!rc && s->cron_reload_us && now >= s->cron_reload_us) {
        rc = cron_load(s);
        if (!rc) rc = cron_fire(s);
    }
    return rc;
}

int jr_scheduler_run(const jr_config_t *cfg) {
    sched_t s = {.cfg = cfg, .deadline_us = -1, .cron_deadline_us = -1, .cron_wake = "0-0",
                 .parts = {.max_age_us = JR_PARTITIONS_REREAD_MS * 1000}};
    int sigfd = jr_signals_install();
    s.follow = cfg->scheduler_queues.n == 0;
    char name[JR_PROC_NAME_MAX];
    jr_consumer_name(name, sizeof name);
    if (jr_presence_init(&s.presence, "scheduler", name, (const char *const *)cfg->scheduler_queues.v,
                         cfg->scheduler_queues.n, cfg->worker_lease_ms)) {
        jr_log_kv(JR_LOG_ERROR, "cannot start the scheduler", "error", "out of memory", NULL);
        return 1;
    }
    {
        jr_strlist_t q = {0};
        for (size_t i = 0; i < cfg->scheduler_queues.n; i++)
            jr_strlist_push(&q, cfg->scheduler_queues.v[i]);
        sched_set_queues(&s, &q, "0-0"); /* when following: rebuilt at connect */
        jr_strlist_free(&q);
    }
    char qs[512] = "";
    for (size_t i = 0; i < cfg->scheduler_queues.n; i++)
        snprintf(qs + strlen(qs), sizeof qs - strlen(qs), "%s%s", i ? "," : "", cfg->scheduler_queues.v[i]);
    char shown[512];
    jr_log_kv(JR_LOG_INFO, "scheduler starting", "redis", jr_config_redis_url_shown(cfg, shown, sizeof shown), "queues",
              s.follow ? "(every registered queue)" : qs, NULL);
    int status = 0;
    char err[JR_ERRLEN];
    jr_proc_title("jobrunner-sched", "jobrunner: scheduler %s", s.follow ? "(every registered queue)" : qs);
    /* /healthz: stale after a block period and a second (the XREAD backstop
     * answers every block period while Redis is up). */
    if (cfg->metrics_listen &&
        jr_metrics_start(cfg->metrics_listen, cfg->metrics_port_offset, JR_METRICS_SCHEDULER,
                         cfg->scheduler_block_ms + 1000, err, sizeof err)) {
        jr_log_kv(JR_LOG_ERROR, "cannot start the scheduler", "error", err, NULL);
        status = 1;
    }
    while (status == 0 && jr_signals_count() == 0) {
        int rc = 0;
        jr_metrics_turned();
        if (!s.cmd && (rc = sched_connect(&s)) == JR_EINTR) break;
        if (!rc && !s.blocked && !s.follow && jr_mono_us() >= s.parts_us && (rc = sched_expand(&s)) > 0)
            rc = sched_promote_all(&s); /* other partitions: promote them now */
        if (!rc && !s.blocked) {
            rc = jr_redis_send_wake_read(s.blk, s.keyv, s.wake_ids, s.wake_off, s.nwake, cfg->scheduler_block_ms);
            s.blocked = rc == 0;
            if (rc == 1) rc = 0; /* every wake key holds garbage: the backstop timer alone */
        }
        int w = 0;
        if (!rc) {
            int64_t until = s.deadline_us < 0 ? jr_presence_deadline(&s.presence)
                            : s.deadline_us < jr_presence_deadline(&s.presence) ? s.deadline_us
                                                                                : jr_presence_deadline(&s.presence);
            if (s.cron_deadline_us >= 0 && s.cron_deadline_us < until) until = s.cron_deadline_us;
            if (s.cron_reload_us && s.cron_reload_us < until) until = s.cron_reload_us;
            if (sched_any_off(&s) && s.backstop_us < until) until = s.backstop_us;
            int64_t wait = until - jr_mono_us();
            /* A tick is next and near: only look (CRON_PREWAKE_US). */
            if (wait < 0 || (s.cron_spin && until == s.cron_deadline_us)) wait = 0;
            jr_log_flush();
            w = jr_redis_wait(s.blk, wait, sigfd);
            if (w < 0) rc = w;
        }
        if (!rc && w == JR_WAIT_EXTRA) {
            jr_signals_drain();
            continue;
        }
        if (!rc && w == JR_WAIT_TIMEOUT) {
            if (s.cron_deadline_us >= 0 && jr_mono_us() >= s.cron_tick_us)
                rc = cron_fire(&s); /* a tick is due (first: its job may be due now) */
            else if (s.cron_spin || (s.cron_deadline_us >= 0 && jr_mono_us() >= s.cron_deadline_us))
                rc = cron_near(&s); /* a tick is near */
            if (!rc && s.deadline_us >= 0 && jr_mono_us() >= s.deadline_us)
                rc = sched_promote_all(&s); /* our timer: the next job is due */
            if (!rc) rc = sched_backstop(&s);
        } else if (!rc && w == JR_WAIT_READY) {
            s.blocked = 0;
            int fired = jr_redis_recv_wake_read(s.blk, s.keyv, s.wake_ids, s.fired, s.nwake);
            if (fired == JR_EREDIS && jr_redis_ok(s.blk)) fired = sched_wake_refused(&s);
            int cron_changed = fired > 0 && s.fired[s.nwake - 1];
            if (cron_changed) snprintf(s.cron_wake, sizeof s.cron_wake, "%s", s.wake_ids[s.nwake - 1]);
            if (fired >= 0) jr_metrics_redis_ok();
            if (fired < 0) rc = fired;
            else if (s.follow && s.fired[s.nwake - 2]) rc = sched_refresh(&s);
            if (!rc && cron_changed) {
                rc = cron_load(&s); /* a schedule was added, changed or removed */
                if (!rc) rc = cron_fire(&s);
            }
            /* A backstop timeout (nothing fired) needs nothing: our timer
             * covers the jobs we know of, the wake streams any earlier one. */
            if (!rc && fired > 0) rc = sched_promote_all(&s);
            if (!rc && fired == 0) rc = sched_backstop(&s);
        }
        if (!rc && s.cmd) rc = jr_presence_tick(&s.presence, s.cmd, 0); /* if due */
        if (!rc) rc = sched_depth(&s);
        if (rc && rc != JR_EINTR) {
            jr_metrics_reconnect();
            jr_log_kv(JR_LOG_ERROR, "Redis error, reconnecting", "error",
                      s.cmd && jr_redis_errstr(s.cmd)[0] ? jr_redis_errstr(s.cmd)
                      : s.blk ? jr_redis_errstr(s.blk) : jr_strerror(rc), NULL);
            sched_drop_conns(&s);
            if (jr_sleep_interruptible(100)) break;
        }
    }
    jr_presence_leave(&s.presence, s.cmd);
    jr_presence_free(&s.presence);
    jr_log_kv(JR_LOG_INFO, "scheduler stopped", NULL);
    jr_log_flush();
    jr_metrics_stop();
    sched_drop_conns(&s);
    free(s.wake_ids), free(s.wake_keys), free(s.keyv), free(s.fired), free(s.wake_off);
    free(s.retry_at_us), free(s.backoff_ms), free(s.due_ms);
    jr_strlist_free(&s.queues);
    jr_partmap_free(&s.parts);
    cron_free_all(s.crons, s.ncrons);
    return status;
}
