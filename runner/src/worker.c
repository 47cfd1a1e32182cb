/* The worker.
 *
 * Connections: `rd` carries only XREADGROUP ... BLOCK (so a blocked read
 * never delays anything else); `ctl` carries everything else, pipelined:
 * acknowledgements, retries, dead letters, hand-backs, heartbeats, reclaims,
 * and CLIENT UNBLOCK of `rd` at shutdown. In inline mode a third,
 * `keep_conn`, carries the heartbeats the lease keeper thread sends while a
 * handler runs (see "leases").
 *
 * The loop fetches while the worker holds fewer jobs than its runners plus
 * its prefetch bound (see prefetch()), keeps fetched jobs waiting in memory
 * until a runner (exec.h) is free, and meanwhile polls the read, the
 * runners, and the signal pipe. Every outcome becomes an operation queued in
 * memory and sent on `ctl`; if Redis goes away or refuses them they wait
 * there (nothing is fetched meanwhile), jobs keep running, and the worker
 * reconnects or retries with capped backoff. Each operation is safe to send
 * twice (the Redis side checks ownership), so nothing is lost or doubled
 * across a reconnect. */
#include "worker.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "envelope.h"
#include "exec.h"
#include "followup.h"
#include "jr.h"
#include "jr_limits.h"
#include "log.h"
#include "metrics.h"
#include "presence.h"
#include "prio.h"
#include "proc.h"
#include "redis.h"
#include "redis_produce.h"
#include "redis_worker.h"
#include "report.h"
#include "redis_admin.h"
#include "util.h"

/* What jr_report_once says of each problem (jr_report_clear names it too). */
static const char SAY_RECLAIM_REFUSED[] = "Redis refused to hand over the jobs of stopped workers; trying again later";
static const char SAY_PAUSED_REFUSED[] = "Redis refused to read the paused queues; taking none as paused";
static const char SAY_AUX_GARBAGE[] = "keys of this queue hold garbage; its jobs run, without what those keys keep";
static const char SAY_RESUMED_REFUSED[] =
    "Redis refused the wait on the resume key; with every queue paused, the paused set is read again every worker.block";
static const char SAY_REGISTRY_GARBAGE[] =
    "the queue registry holds garbage; writing follow-ups without registering their queues";
static const char SAY_STREAM_GARBAGE[] = "a queue's stream key holds garbage; not reading this queue until it is fixed (looked at every 10 s)";

#define ENTRY_MAX 48 /* "<20 digits>-<20 digits>" */
#define RETRY_MAX_MS 5000 /* longest wait between tries of a refused operation */
/* While jobs run, the worker asks this often which were cancelled
 * (jobrunner cancel): one HMGET of jr:{Q}:cancelled per queue, a read that
 * works while Redis refuses writes. A handler's api->cancelled turns true
 * within about this long. (Heartbeats, every lease/3, report it too.) */
#define CANCEL_CHECK_US 1000000
/* Follow-up target queues remembered as registered on the current
 * connection; past this many, a job's targets are registered with every
 * acknowledgement that has follow-ups (correct, one more call). */
#define FU_REGISTERED_MAX 64

/* A job fetched from Redis: WAITING in the worker (its payload copied) until
 * a runner is free, then SUBMITTED to the executor until its outcome. */
enum { SLOT_FREE, SLOT_WAITING, SLOT_SUBMITTED };
typedef struct slot {
    int state;
    uint32_t queue;
    char entry[ENTRY_MAX];
    char *id, *handler, *payload; /* payload: only while WAITING */
    size_t payload_len;
    uint32_t attempt, max_attempts;
    int64_t timeout_ms;
    jr_policy_t policy;
    int cancelled; /* jr_cancel flagged it (seen in a heartbeat's reply) */
} slot_t;

/* OP_FOLLOW: an acknowledgement with the follow-ups of the job (its own
 * call, jr_ack_follow; plain acknowledgements stay batched). OP_DEFER: a
 * job whose handler is not loaded here goes back for another worker. */
typedef enum { OP_ACK, OP_RETRY, OP_DEAD, OP_HANDBACK, OP_DEFER, OP_FOLLOW } op_kind_t;

/* Something to tell Redis about an entry. */
typedef struct op {
    op_kind_t kind;
    uint32_t queue;
    char entry[ENTRY_MAX];
    int64_t delay_ms;
    char *error;     /* RETRY, DEAD */
    const char *why; /* DEAD: failed | invalid */
    char jobid[JR_ID_MAX]; /* ACK: the job id, "" when it is the entry id */
    char *fu;        /* FOLLOW: the follow-ups (followup.h encoding), owned */
    size_t fu_len;
    /* ACK, FOLLOW, RETRY, DEAD of a job that ran: its log line (outcome
     * done_outcome) waits for the reply, which says whether the job was
     * cancelled meanwhile (done_id, done_handler owned). */
    const char *done_outcome;
    char *done_id, *done_handler;
    uint32_t done_attempt;
    int64_t done_us;
} op_t;

/* Whether Redis is refusing a kind of call, and its last error text. */
typedef struct refusal {
    int on;
    char err[JR_ERRLEN];
} refusal_t;

#define BROKEN_CHECK_US 10000000 /* see check_broken */

typedef struct worker {
    const jr_config_t *cfg;
    const jr_registry_t *reg;
    const char **queues;
    size_t nq;
    char consumer[128];
    jr_redis_t *rd, *ctl;
    long long rd_id;
    int reading;
    int64_t next_connect, backoff_ms;
    jr_exec_t *exec;
    size_t runners;
    slot_t *slots;       /* grows: a read may bring more than was asked for */
    size_t nslots, used; /* used = WAITING + SUBMITTED */
    uint32_t *freeslots; /* the FREE slots' indices, a stack (room for nslots) */
    size_t nfree;
    uint32_t *waitq;     /* WAITING slots in the order fetched: [wq_head, wq_n) */
    size_t wq_head, wq_n, wq_cap;
    jr_task_t *tasks;    /* worker.batch: one submission */
    jr_outcome_t *outcomes; /* worker.batch x runners: all the executor can hold */
    size_t noutcomes;
    op_t *ops;
    size_t nops, opcap;
    int64_t next_flush, flush_backoff_ms;
    refusal_t ops_refused, hb_refused;
    int64_t rtt_us, job_us; /* moving averages: a fetch's round trip, a job's run */
    int64_t read_sent_us;   /* when the read in flight was sent */
    int64_t ran_us;         /* time spent in jr_exec_collect (inline mode: running handlers) */
    int64_t read_sent_ran_us; /* ran_us when the read in flight was sent */
    int64_t last_outcome_us; /* when a job last finished */
    size_t read_count;      /* its COUNT */
    int last_read_full;     /* the last read brought all it asked for */
    jr_batch_t batch;
    int64_t next_heartbeat, next_reclaim, next_cancel_check;
    int64_t next_broken_check; /* while a queue is broken: when to look at its stream key again (check_broken) */
    /* Redis's clock (TIME) clock_redis_ms read at monotonic clock_mono_us
     * (0: not read yet); read again at next_clock_us (see redis_now_ms). */
    double clock_redis_ms;
    int64_t clock_mono_us, next_clock_us;
    size_t reclaim_q;
    char cursor[JR_ID_MAX];
    int stopping, signals_seen, said_waiting;
    int64_t grace_deadline;
    uint64_t rng;
    jr_presence_t presence; /* this worker in the live list */
    /* Priorities and pause (see "fetching"): per queue */
    const int64_t *weights;  /* worker.queues weights, NULL = all 1 */
    int64_t *swrr;           /* jr_prio_split's credit per queue */
    unsigned char *paused;   /* as Redis said last, or broken */
    unsigned char *broken;   /* its stream key holds another type (found at connect): not read, like a paused one, until check_broken finds it fixed */
    unsigned char *on;       /* scratch: the queues a read covers */
    int64_t *counts;         /* scratch: COUNT per queue */
    int64_t *got;            /* scratch: entries per queue in a read */
    int64_t *cur;            /* scratch: 3 x nq for jr_prio_order */
    jr_entry_t *order;       /* scratch: a batch's entries in starting order */
    uint32_t *order_q;       /* scratch: their queues */
    size_t *order_perm;      /* scratch: the order */
    size_t order_cap;
    int read_on_any;         /* the blocking read in flight covers some queue */
    int went_idle;           /* the last blocking read brought nothing: block again */
    int quiet;               /* the last one timed out, every queue in play: the next goes without the paused set */
    int read_with_paused;    /* the read in flight carries the paused set */
    int64_t read_block_ms;   /* its BLOCK */
    int64_t next_pause_check; /* while jobs wait and nothing is read: re-read the paused set then */
    unsigned char *order_scratch; /* scratch: a paused set just read (nq bytes) */
    char *fu_registered[FU_REGISTERED_MAX]; /* see FU_REGISTERED_MAX; cleared on reconnect */
    size_t nfu_registered;
    int64_t resumed_retry_us; /* no wait on JR_RESUMED_KEY before this (mono us): it held garbage */
    int reconnect_after_read; /* the library is missing: reconnect once the read in flight is in */
    int read_with_ops;        /* the read in flight went with results (flush_ops_on) */
    /* Inline mode: the lease keeper (see "leases") */
    int keeper_on, keeper_quit, keeper_broken;
    pthread_t keeper;
    pthread_mutex_t keep_mu;  /* held by the worker except inside jr_exec_collect */
    pthread_cond_t keep_cv;
    jr_redis_t *keep_conn;    /* the keeper's own connection */
    char keep_err[JR_ERRLEN]; /* the keeper's last refusal or error, for the worker to log; "" = none */
} worker_t;

static uint64_t next_rand(worker_t *w) { /* xorshift64* */
    w->rng ^= w->rng >> 12, w->rng ^= w->rng << 25, w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ULL;
}

static int64_t lease_us(const worker_t *w) { return w->cfg->worker_lease_ms * 1000; }

static int64_t ewma(int64_t avg, int64_t sample) { return avg <= 0 ? sample : avg + (sample - avg) / 8; }

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
static size_t room(const worker_t *w) {
    size_t cap = w->runners + prefetch(w), batch = (size_t)w->cfg->worker_batch;
    size_t n = w->used < cap ? cap - w->used : 0;
    if (n > batch) n = batch;
    size_t worth = cap / 2 < batch ? cap / 2 : batch;
    return w->wq_n > w->wq_head && n < worth ? 0 : n;
}

/* Log a refusal by Redis (with Redis's own text) once per state change:
 * when it starts, or its text changes; and when it ends. */
static void refused(refusal_t *r, const char *what, const char *err) {
    if (r->on && !strcmp(r->err, err)) return;
    r->on = 1;
    snprintf(r->err, sizeof r->err, "%s", err);
    jr_log_kv(JR_LOG_ERROR, what, "error", err, NULL);
}

static void accepted(refusal_t *r, const char *what) {
    if (!r->on) return;
    r->on = 0;
    jr_log_kv(JR_LOG_INFO, what, NULL);
}

/* ---- operations ---------------------------------------------------------- */

static void forget_registered(worker_t *w) {
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

static int push_op(worker_t *w, op_kind_t kind, uint32_t queue, const char *entry,
                   int64_t delay_ms, const char *error, const char *why) {
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
    snprintf(o->entry, sizeof o->entry, "%s", entry);
    o->error = error ? strdup(error) : NULL;
    if (error && !o->error) return JR_ENOMEM;
    w->nops++;
    return 0;
}

static void clear_ops(worker_t *w) {
    for (size_t i = 0; i < w->nops; i++)
        free(w->ops[i].error), free(w->ops[i].fu), free(w->ops[i].done_id), free(w->ops[i].done_handler);
    w->nops = 0;
}

static void log_outcome(const worker_t *w, const slot_t *s, const char *outcome,
                        int64_t duration_us, const char *error, int64_t retry_in);

/* Log the end of a job whose op o was settled: "cancelled" when Redis said
 * in the same step that it was flagged (jr_ack's list, jr_ack_follow or
 * jr_fail returning 2: not retried, not buried, its follow-ups not
 * written), else its own outcome (or `outcome` with `error`, when not
 * NULL). Frees the op's log data; nothing for an op without it. */
static void log_settled(const worker_t *w, op_t *o, int cancelled, const char *outcome, const char *error) {
    if (!o->done_id) return;
    slot_t s = {.queue = o->queue, .id = o->done_id, .handler = o->done_handler, .attempt = o->done_attempt};
    if (outcome)
        log_outcome(w, &s, outcome, o->done_us, error, -1);
    else
        log_outcome(w, &s, cancelled ? "cancelled" : o->done_outcome, o->done_us, o->error,
                    !cancelled && o->kind == OP_RETRY ? o->delay_ms : -1);
    free(o->done_id), free(o->done_handler);
    o->done_id = o->done_handler = NULL;
}

/* Send every queued operation on ctl in one pipeline and read the replies.
 * Acknowledgements and hand-backs of a queue go as one call each; an
 * acknowledgement with follow-ups (OP_FOLLOW) as its own jr_register +
 * jr_ack_follow pair, so jobs without follow-ups keep the batched path.
 *
 * A call's integer reply settles its operations, whatever the value: 0
 * means the entry is not ours any more (another worker took it over, or it
 * was deleted), so there is nothing left to do for it. An error reply (out
 * of memory, LOADING, BUSY, READONLY, MASTERDOWN, ...) settles nothing: the
 * operations stay queued and are tried again after a capped backoff, never
 * dropped, since jobrunner cannot know which refusals are temporary and a
 * dropped ack runs the job again. The one exception: jr_ack_follow
 * refused by its own checks ("ERR jobrunner: jr_ack_follow: ...", e.g. a
 * target key of another type) would be refused forever, so the job goes to
 * the dead stream instead, with that error. A missing function is answered by
 * reconnecting (which loads the library). Transport errors keep everything
 * queued for the next connection and are returned.
 *
 * flush_ops_on(w, conn, want, block) does it on conn; with want > 0 (conn
 * is then rd), the blocking read of `want` entries (send_read) goes in
 * the same write right after the operations, so Redis runs the
 * acknowledgements and then the read without waiting for this worker, and
 * the worker wakes once for both. The operations' replies come first and
 * are settled here as above; the read's reply is taken later by turn().
 * An entry is still acknowledged only after its job ended (only finished
 * jobs have operations), and an operation leaves the queue only once its
 * reply said so: a connection lost in between keeps them all queued, and
 * the read's entries, delivered but never seen, stay pending under this
 * consumer until a reclaim takes them (as for any read lost in flight). */
static int send_read(worker_t *w, size_t want, int64_t block);
static int flush_ops_on(worker_t *w, jr_redis_t *conn, size_t want, int64_t block) {
    int rc = 0;
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
    if (!jobids) {
        free(ids), free(call), free(ackcall), free(flagged), free(nflagged), free(val);
        return JR_ENOMEM;
    }
    for (uint32_t q = 0; q < w->nq && !rc; q++) {
        for (int kind = OP_ACK; kind <= OP_HANDBACK && !rc; kind += OP_HANDBACK - OP_ACK) {
            size_t n = 0;
            for (size_t i = 0; i < w->nops; i++)
                if (w->ops[i].queue == q && (int)w->ops[i].kind == kind)
                    jobids[n] = w->ops[i].jobid, ids[n++] = w->ops[i].entry, call[i] = calls;
            if (!n) continue;
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
    free(ids), free(jobids);
    size_t first_follow = calls; /* calls from here on: jr_register (if regs) + jr_ack_follow */
    unsigned char *regs = calloc(w->nops, 1);
    if (!regs) rc = JR_ENOMEM;
    for (size_t i = 0; i < w->nops && !rc; i++) {
        const op_t *o = &w->ops[i];
        if (o->kind != OP_FOLLOW) continue;
        regs[calls - first_follow] = !targets_registered(w, o, 0);
        rc = jr_redis_append_ack_follow(conn, w->queues[o->queue], o->entry, o->fu, o->fu_len,
                                        regs[calls - first_follow]);
        /* Cannot happen (exec.c validated them; nothing was appended): the
         * job goes to the dead stream rather than lose them unseen. */
        if (rc == JR_EINVAL) {
            char why[JR_ERRLEN + 64];
            snprintf(why, sizeof why, "the handler succeeded but its follow-ups are invalid: %s",
                     jr_redis_errstr(conn));
            jr_log_kv(JR_LOG_ERROR, "invalid follow-ups; the job goes to the dead-letter stream", "entry",
                      o->entry, "error", why, NULL);
            rc = jr_redis_append_fail(conn, w->queues[o->queue], o->entry, w->consumer, "dead", 0, why,
                                      "failed", w->cfg->dead_max);
            regs[calls - first_follow] = 0;
            w->ops[i].done_outcome = "dead"; /* logged as what it is when jr_fail answers */
        }
        call[i] = calls++;
    }
    size_t first_fail = calls;
    for (size_t i = 0; i < w->nops && !rc; i++) {
        const op_t *o = &w->ops[i];
        if (o->kind != OP_RETRY && o->kind != OP_DEAD && o->kind != OP_DEFER) continue;
        rc = jr_redis_append_fail(conn, w->queues[o->queue], o->entry, w->consumer,
                                  o->kind == OP_RETRY ? "retry" : o->kind == OP_DEFER ? "defer" : "dead", o->delay_ms,
                                  o->error ? o->error : "", o->why ? o->why : "failed",
                                  w->cfg->dead_max);
        call[i] = calls++;
    }
    /* bad[c]: 1 = refused (kept, tried again later), 2 = follow-ups
     * refused by jr_ack_follow itself (the job fails instead, see below). */
    if (!rc && !(bad = calloc(calls ? calls : 1, 1))) rc = JR_ENOMEM;
    if (!rc) rc = want ? send_read(w, want, block) : jr_redis_flush(conn);
    if (!rc && want) w->read_with_ops = 1;
    char err[JR_ERRLEN] = "", drop_err[JR_ERRLEN] = "";
    char **follow_err = NULL; /* per follow-up call: jr_ack_follow's refusal */
    if (!rc && first_fail > first_follow &&
        !(follow_err = calloc(first_fail - first_follow, sizeof *follow_err)))
        rc = JR_ENOMEM;
    int nofunc = 0;
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
            nofunc |= strstr(e, "Function not found") != NULL;
        }
    }
    if (!rc) {
        size_t kept = 0, failed = 0;
        for (size_t i = 0; i < w->nops; i++) {
            op_t *o = &w->ops[i];
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
                free(o->error), free(o->fu);
            } else if (bad[call[i]]) {
                w->ops[kept++] = *o;
            } else {
                if (o->kind == OP_FOLLOW && regs[call[i] - first_follow]) targets_registered(w, o, 1);
                int cancelled = o->kind != OP_ACK && val[call[i]] == 2; /* FOLLOW, RETRY, DEAD */
                for (size_t f = 0; o->kind == OP_ACK && f < nflagged[call[i]] && !cancelled; f++)
                    cancelled = !strcmp(flagged[call[i]][f], o->entry);
                log_settled(w, o, cancelled, NULL, NULL);
                free(o->error), free(o->fu);
            }
        }
        for (size_t c = first_follow; follow_err && c < first_fail; c++) free(follow_err[c - first_follow]);
        free(follow_err);
        follow_err = NULL;
        kept -= failed; /* those go out at the next flush, not after a backoff */
        w->nops = kept + failed;
        if (kept) {
            refused(&w->ops_refused, "Redis refused results of finished jobs; keeping them and retrying", err);
            w->next_flush = jr_mono_us() + w->flush_backoff_ms * 1000;
            w->flush_backoff_ms = w->flush_backoff_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : w->flush_backoff_ms * 2;
            /* Reconnect: connecting loads the library. With a read sent
             * after them (flush_ops_on with want), first take its entries
             * (else they would wait a lease in Redis): end its wait now
             * and reconnect once its reply is in (turn()). */
            if (nofunc && want && w->reading && !(rc = jr_redis_unblock(w->ctl, w->rd_id)))
                w->reconnect_after_read = 1;
            else if (nofunc && !rc)
                rc = JR_EREDIS;
        } else {
            accepted(&w->ops_refused, "Redis accepts results again; the kept ones went through");
            w->next_flush = 0, w->flush_backoff_ms = 100;
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

static int flush_ops(worker_t *w) {
    if (!w->nops || jr_mono_us() < w->next_flush) return 0;
    return flush_ops_on(w, w->ctl, 0, 0);
}

/* After a read of the paused set on r: garbage there (a refusal, taken as
 * no queue paused) is reported once, and its end once. */
static void paused_note(jr_redis_t *r) {
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
static void resumed_note(worker_t *w) {
    const char *e = jr_redis_resumed_refused(w->rd);
    if (e[0]) {
        jr_report_once(JR_LOG_ERROR, SAY_RESUMED_REFUSED, "key", JR_RESUMED_KEY, e);
        w->resumed_retry_us = jr_mono_us() + w->cfg->worker_block_ms * 1000;
    } else {
        jr_report_clear(SAY_RESUMED_REFUSED, "the resume key can be waited on again", "key", JR_RESUMED_KEY);
        w->resumed_retry_us = 0;
    }
}

/* ---- jobs ---------------------------------------------------------------- */

static void log_outcome(const worker_t *w, const slot_t *s, const char *outcome,
                        int64_t duration_us, const char *error, int64_t retry_in) {
    jr_metrics_job_done(w->queues[s->queue], s->handler, outcome, (double)duration_us / 1e6);
    if (!jr_log_enabled(outcome[0] == 'o' ? JR_LOG_INFO : JR_LOG_WARN)) return;
    char attempt[16], dur[32], retry[32];
    snprintf(attempt, sizeof attempt, "%u", s->attempt);
    snprintf(dur, sizeof dur, "%lld.%03lld", (long long)(duration_us / 1000), (long long)(duration_us % 1000));
    snprintf(retry, sizeof retry, "%lldms", (long long)retry_in);
    jr_log_kv(outcome[0] == 'o' ? JR_LOG_INFO : JR_LOG_WARN, "job finished", "job", s->id, "queue",
              w->queues[s->queue], "handler", s->handler, "attempt", attempt, "outcome", outcome,
              "duration_ms", dur, "error", error && error[0] ? error : NULL, "retry_in",
              retry_in >= 0 ? retry : NULL, NULL);
}

/* Every time this worker compares with a time stored in Redis (a job's
 * due time) is Redis's clock, never the host's: a host clock that is off
 * by seconds must not make a job wait too little or too long. TIME is read
 * at connect and every CLOCK_REFRESH_US, and advanced in between with the
 * monotonic clock (the error: half a round trip, plus the drift of the two
 * clocks over 10 s). */
#define CLOCK_REFRESH_US 10000000
static int clock_sync(worker_t *w) {
    int64_t sent = jr_mono_us();
    double t;
    int rc = jr_redis_time_ms(w->ctl, &t);
    if (rc) return rc;
    int64_t recv = jr_mono_us();
    w->clock_redis_ms = t, w->clock_mono_us = sent + (recv - sent) / 2;
    w->next_clock_us = recv + CLOCK_REFRESH_US;
    return 0;
}

/* Redis's clock now (Unix ms), from the last clock_sync; read now if there
 * was none (the host's clock only if Redis cannot answer). */
static int64_t redis_now_ms(worker_t *w) {
    if (!w->clock_mono_us && (!w->ctl || clock_sync(w))) return jr_wall_ms();
    return (int64_t)(w->clock_redis_ms + (double)(jr_mono_us() - w->clock_mono_us) / 1000.0);
}

/* Bury an entry that cannot run, saying why. */
static int reject(worker_t *w, uint32_t q, const char *entry, const char *reason) {
    jr_log_kv(JR_LOG_ERROR, "invalid job; moved to the dead-letter stream", "entry", entry, "queue",
              w->queues[q], "reason", reason, NULL);
    return push_op(w, OP_DEAD, q, entry, 0, reason, "invalid");
}

/* A job whose handler is not loaded here. During a rolling upgrade another
 * worker may have it, so the job is deferred (jr_fail "defer": the same
 * attempt, back through the delayed set, for any worker to take) while it
 * has waited less than worker.handler_wait since it first fell due; the
 * next try is after half its wait so far, 1 s to 30 s. Then it is dead. */
static int no_handler(worker_t *w, uint32_t q, const char *entry, const jr_envelope_t *env) {
    char err[256];
    snprintf(err, sizeof err, "no handler named \"%.64s\" is loaded", env->handler);
    int64_t waited = redis_now_ms(w) - env->due_ms;
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
              "queue", w->queues[q], "handler", env->handler, "retry_in", in, NULL);
    return push_op(w, OP_DEFER, q, entry, delay, err, NULL);
}

static void free_slot(worker_t *w, slot_t *s) {
    if (s->state == SLOT_FREE) return; /* never twice onto the free stack */
    free(s->id), free(s->handler), free(s->payload);
    s->id = s->handler = s->payload = NULL;
    s->state = SLOT_FREE;
    w->freeslots[w->nfree++] = (uint32_t)(s - w->slots);
    w->used--;
}

/* Queue the acknowledgement of slot s's entry, with its job id. */
static int push_ack(worker_t *w, const slot_t *s) {
    int rc = push_op(w, OP_ACK, s->queue, s->entry, 0, NULL, NULL);
    if (!rc && strcmp(s->id, s->entry) != 0)
        snprintf(w->ops[w->nops - 1].jobid, sizeof w->ops[w->nops - 1].jobid, "%s", s->id);
    return rc;
}

/* Inline mode: api->cancelled asks Redis (HEXISTS jr:{Q}:cancelled
 * <entry>, at most every 500 ms per job), since no heartbeat runs while the
 * handler does. 1 if cancelled. */
static int cancel_probe(void *ctx, uint32_t tag) {
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

/* The op just queued for slot s, whose job ended with `outcome`, takes the
 * job's log data: its line is written when Redis answers (log_settled). */
static void log_when_settled(worker_t *w, slot_t *s, int64_t duration_us, const char *outcome) {
    op_t *op = &w->ops[w->nops - 1];
    op->done_outcome = outcome;
    op->done_id = s->id, op->done_handler = s->handler; /* moved: free_slot frees NULL */
    s->id = s->handler = NULL;
    op->done_attempt = s->attempt, op->done_us = duration_us;
}

/* Turn an outcome into an operation and a log line. A job cancelled while
 * it ran is acknowledged whatever its result (never retried or buried: the
 * flag in Redis is certain once a heartbeat reported it), outcome
 * "cancelled", and its follow-ups are dropped. Any other job that ran is
 * logged when its operation is answered: Redis checks the flag in the same
 * step (jr_ack, jr_ack_follow, jr_fail), so a job cancelled after the last
 * heartbeat is "cancelled" too: not retried, without its follow-ups. */
static int finish(worker_t *w, jr_outcome_t *o) {
    slot_t *s = &w->slots[o->tag];
    int rc = 0;
    if (s->cancelled) { /* its follow-ups are not written: it was cancelled */
        log_outcome(w, s, "cancelled", o->duration_us, o->error, -1);
        free(o->followups);
        o->followups = NULL;
        rc = push_ack(w, s);
    } else if (o->kind == JR_OUT_OK && o->followups) { /* the operation takes them */
        rc = push_op(w, OP_FOLLOW, s->queue, s->entry, 0, NULL, NULL);
        if (!rc) w->ops[w->nops - 1].fu = o->followups, w->ops[w->nops - 1].fu_len = o->followups_len;
        else free(o->followups);
        o->followups = NULL;
        if (!rc) log_when_settled(w, s, o->duration_us, "ok");
    } else if (o->kind == JR_OUT_OK) {
        rc = push_ack(w, s);
        if (!rc) log_when_settled(w, s, o->duration_us, "ok");
    } else if (o->kind == JR_OUT_UNSTARTED || o->kind == JR_OUT_INTERRUPTED) {
        /* Stopped by our shutdown, not by the job: no attempt used. */
        if (o->kind == JR_OUT_INTERRUPTED)
            log_outcome(w, s, "interrupted", o->duration_us, o->error, -1);
        rc = push_op(w, OP_HANDBACK, s->queue, s->entry, 0, NULL, NULL);
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
            rc = push_op(w, OP_DEAD, s->queue, s->entry, 0, why, "failed");
            if (!rc) log_when_settled(w, s, o->duration_us, "dead");
        } else {
            int64_t delay = o->retry_after_ms >= 0
                                ? o->retry_after_ms
                                : jr_backoff_ms(s->attempt, s->policy.backoff_ms,
                                                s->policy.backoff_max_ms, next_rand(w));
            rc = push_op(w, OP_RETRY, s->queue, s->entry, delay, err, NULL);
            if (!rc) log_when_settled(w, s, o->duration_us, "retry");
        }
    }
    free_slot(w, s);
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
static int held(const worker_t *w, uint32_t q, const char *entry) {
    for (size_t i = 0; i < w->nslots; i++)
        if (w->slots[i].state != SLOT_FREE && w->slots[i].queue == q && !strcmp(w->slots[i].entry, entry))
            return 1;
    for (size_t i = 0; i < w->nops; i++)
        if (w->ops[i].queue == q && !strcmp(w->ops[i].entry, entry)) return 1;
    return 0;
}

/* Take the entries of a read: bury the invalid ones, keep the others
 * WAITING (in fetch order) and start what the idle runners can take. A
 * batch may be larger than what was asked for (a read over several queues
 * returns up to COUNT per queue): the slots grow, and no new read is made
 * until they are below the bound again. `reclaimed`: the entries come from
 * XAUTOCLAIM, which can give back entries this worker still holds (after an
 * outage longer than the lease); those are not run again. (XREADGROUP ">"
 * delivers only entries never delivered before, so it cannot.) */
static int start(worker_t *w);
static int dispatch(worker_t *w, const jr_batch_t *b, int reclaimed) {
    for (size_t i = 0; i < b->n; i++) {
        const jr_entry_t *e = &b->v[i];
        jr_envelope_t env;
        char err[JR_ERRLEN];
        int rc = 0;
        if (reclaimed && strlen(e->id) < ENTRY_MAX && held(w, e->queue, e->id)) {
            jr_log_kv(JR_LOG_WARN, "Redis gave back a job this worker already holds; not running it again",
                      "entry", e->id, "queue", w->queues[e->queue], NULL);
        } else if (w->stopping || w->paused[e->queue]) { /* paused: fetched before it was seen */
            rc = push_op(w, OP_HANDBACK, e->queue, e->id, 0, NULL, NULL);
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
            s->id = strndup(env.id, env.id_len);
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

/* Hand WAITING jobs, oldest first, to the idle runners, spread evenly over
 * them (at most worker.batch per runner: a runner's batch costs one message,
 * so short jobs go in large batches). Jobs so short that one runner runs all
 * of them within SPLIT_MIN_US (by the average duration so far) go to one
 * runner: waking each runner costs more than the work it would take over
 * (two context switches and a message, tens of microseconds in a VM); a
 * slow one among them is moved on by the executor (MOVE_AFTER_US). */
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
            w->tasks[i] = (jr_task_t){.tag = k, .id = s->id, .queue = w->queues[s->queue],
                                      .handler = s->handler, .payload = s->payload,
                                      .payload_len = s->payload_len, .attempt = s->attempt,
                                      .timeout_ms = s->timeout_ms};
        }
        if (jr_exec_submit(w->exec, w->tasks, n) != 0) break; /* no runner after all: later */
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

/* Hand every WAITING job back to the queue (the worker is stopping). */
static int hand_back_waiting(worker_t *w) {
    for (; w->wq_head < w->wq_n; w->wq_head++) {
        slot_t *s = &w->slots[w->waitq[w->wq_head]];
        int rc = push_op(w, OP_HANDBACK, s->queue, s->entry, 0, NULL, NULL);
        free_slot(w, s);
        if (rc) return rc;
    }
    w->wq_head = w->wq_n = 0;
    return 0;
}

static int collect(worker_t *w) {
    size_t n, max = w->noutcomes;
    do {
        int64_t t0 = jr_mono_us();
        if (w->keeper_on) pthread_mutex_unlock(&w->keep_mu); /* handlers run: the keeper may heartbeat */
        n = jr_exec_collect(w->exec, w->outcomes, max);
        if (w->keeper_on) pthread_mutex_lock(&w->keep_mu);
        w->ran_us += jr_mono_us() - t0;
        if (w->keep_err[0]) { /* what the keeper met meanwhile */
            refused(&w->hb_refused, "Redis refused a heartbeat; trying again at the next one", w->keep_err);
            w->keep_err[0] = '\0';
        }
        for (size_t i = 0; i < n; i++) {
            /* the run-time average counts jobs that ran: not those handed
             * back, nor those whose runner died before starting them (a
             * zero-length "run" would make prefetch take a full batch) */
            if (w->outcomes[i].kind != JR_OUT_UNSTARTED &&
                !(w->outcomes[i].kind == JR_OUT_CRASH && w->outcomes[i].duration_us == 0)) {
                w->job_us = ewma(w->job_us, w->outcomes[i].duration_us > 0 ? w->outcomes[i].duration_us : 1);
                w->last_outcome_us = jr_mono_us();
            }
            int rc = finish(w, &w->outcomes[i]);
            if (rc) return rc;
        }
    } while (n == max);
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
static int64_t shed_after_us(const worker_t *w) {
    int64_t rtt = w->rtt_us > 0 ? w->rtt_us : 1000;
    return 4 * rtt > 10000 ? 4 * rtt : 10000;
}

static int shed(worker_t *w) {
    if (!jr_exec_stalled(w->exec, shed_after_us(w))) return 0;
    size_t n, k = w->wq_n - w->wq_head;
    while ((n = jr_exec_shed(w->exec, w->outcomes, w->noutcomes)) > 0) {
        k += n;
        for (size_t i = 0; i < n; i++) {
            int rc = finish(w, &w->outcomes[i]);
            if (rc) return rc;
        }
    }
    if (k == 0) return 0;
    char total[24];
    snprintf(total, sizeof total, "%zu", k);
    jr_log_kv(JR_LOG_INFO, "every runner is busy with a long job: handing back the jobs waiting for one", "jobs",
              total, NULL);
    return hand_back_waiting(w);
}

/* ---- leases -------------------------------------------------------------- */

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
        rc = finish(w, &o);
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
                jr_log_kv(JR_LOG_INFO, "job cancelled while it runs", "job", s->id, "queue", w->queues[q], NULL);
            s->cancelled = 1;
            if (s->state == SLOT_SUBMITTED) jr_exec_cancel(w->exec, (uint32_t)k);
            waiting |= s->state == SLOT_WAITING;
        }
    }
    return waiting ? drop_cancelled_waiting(w) : 0;
}

/* Ask which held jobs were cancelled (see CANCEL_CHECK_US). An error
 * reply is ignored (the next check or heartbeat asks again); a transport
 * error is returned. */
static int cancel_check(worker_t *w) {
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

/* Extend the lease of every entry we hold (leased()), per queue. A refused
 * heartbeat is logged once and tried again at the next one; it does not
 * break the connection. */
static int heartbeat(worker_t *w) {
    size_t max = w->nslots + w->nops;
    const char **ids = malloc((max ? max : 1) * sizeof *ids);
    unsigned char *lost = malloc(max ? max : 1), *cancelled = malloc(max ? max : 1);
    int rc = ids && lost && cancelled ? 0 : JR_ENOMEM, refusals = 0;
    for (uint32_t q = 0; q < w->nq && !rc; q++) {
        size_t n = leased(w, q, ids);
        if (!n) continue;
        int nlost = jr_redis_heartbeat(w->ctl, w->queues[q], w->consumer, ids, n, lost, cancelled);
        if (nlost == JR_EREDIS) {
            refused(&w->hb_refused, "Redis refused a heartbeat; trying again at the next one",
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
    if (!rc && !refusals) accepted(&w->hb_refused, "Redis accepts heartbeats again");
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
 * and a broken connection (keeper_broken) makes the worker reconnect. Lost
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
    if (!ids || !lost) snprintf(w->keep_err, sizeof w->keep_err, "out of memory");
    free(ids), free(lost);
}

static void *keeper_main(void *arg) {
    worker_t *w = arg;
    pthread_mutex_lock(&w->keep_mu);
    while (!w->keeper_quit) {
        int64_t now = jr_mono_us();
        if (now >= w->next_heartbeat && w->keep_conn && !w->keeper_broken && (w->used || w->nops)) {
            w->next_heartbeat = now + lease_us(w) / 3;
            keeper_heartbeat(w);
        }
        int64_t at = w->next_heartbeat > now ? w->next_heartbeat : now + lease_us(w) / 3;
        struct timespec ts = {.tv_sec = (time_t)(at / 1000000), .tv_nsec = (long)(at % 1000000) * 1000};
        pthread_cond_timedwait(&w->keep_cv, &w->keep_mu, &ts);
    }
    pthread_mutex_unlock(&w->keep_mu);
    return NULL;
}

/* Start the keeper (the worker then holds keep_mu). Returns 0, or -1 with
 * the reason in err. */
static int keeper_start(worker_t *w, char *err, size_t errlen) {
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

static void keeper_stop(worker_t *w) {
    if (!w->keeper_on) return;
    w->keeper_quit = 1;
    pthread_cond_signal(&w->keep_cv);
    pthread_mutex_unlock(&w->keep_mu);
    pthread_join(w->keeper, NULL);
    pthread_cond_destroy(&w->keep_cv);
    w->keeper_on = 0;
}

/* One XAUTOCLAIM step on one queue, taking over at most `want` entries;
 * moves to the next queue when a queue's scan is complete. A refused step is
 * logged once and tried again half a lease later. */
static int reclaim(worker_t *w, size_t want) {
    long long deleted = 0, poisoned = 0;
    if (w->broken[w->reclaim_q]) { /* its stream key is garbage: nothing to take over */
        w->reclaim_q = (w->reclaim_q + 1) % w->nq;
        if (w->reclaim_q == 0) w->next_reclaim = jr_mono_us() + lease_us(w) / 2;
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
        if (w->reclaim_q == 0) w->next_reclaim = jr_mono_us() + lease_us(w) / 2;
        return 0;
    }
    if (rc) return rc;
    jr_report_clear(SAY_RECLAIM_REFUSED, "Redis hands over the jobs of stopped workers of this queue again", "queue",
                    w->queues[w->reclaim_q]);
    size_t others = 0; /* entries not already this worker's (see dispatch) */
    for (size_t i = 0; i < w->batch.n; i++)
        others += strlen(w->batch.v[i].id) >= ENTRY_MAX || !held(w, w->batch.v[i].queue, w->batch.v[i].id);
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
        if (w->reclaim_q == 0) w->next_reclaim = jr_mono_us() + lease_us(w) / 2;
    }
    return dispatch(w, &w->batch, 1);
}

/* ---- connections ---------------------------------------------------------- */

/* Close both connections, saying why (Redis's text, from the connection that
 * failed), and reconnect after the backoff. Queued operations stay queued. */
static void drop_conns(worker_t *w, int rc) {
    const jr_redis_t *bad = w->rd && !jr_redis_ok(w->rd) ? w->rd
                            : w->ctl && (!jr_redis_ok(w->ctl) || jr_redis_errstr(w->ctl)[0]) ? w->ctl
                                                                                              : w->rd;
    const char *why = bad && jr_redis_errstr(bad)[0] ? jr_redis_errstr(bad) : jr_strerror(rc);
    jr_log_kv(JR_LOG_ERROR, "Redis error; jobs keep running, reconnecting", "error", why, NULL);
    jr_metrics_reconnect();
    forget_registered(w);
    jr_redis_free(w->rd);
    jr_redis_free(w->ctl);
    jr_redis_free(w->keep_conn);
    w->rd = w->ctl = w->keep_conn = NULL;
    w->keeper_broken = 0;
    w->reading = 0, w->reconnect_after_read = 0, w->read_with_ops = 0;
    w->next_connect = jr_mono_us() + w->backoff_ms * 1000;
}

static int try_connect(worker_t *w) {
    char err[JR_ERRLEN];
    if (!(w->ctl = jr_connect_once(w->cfg, err, sizeof err)) ||
        !(w->rd = jr_connect_once(w->cfg, err, sizeof err)) ||
        (w->keeper_on && !(w->keep_conn = jr_connect_once(w->cfg, err, sizeof err)))) {
        jr_redis_free(w->ctl);
        jr_redis_free(w->rd);
        w->ctl = w->rd = NULL;
        char retry[32];
        snprintf(retry, sizeof retry, "%lldms", (long long)w->backoff_ms);
        jr_log_kv(JR_LOG_ERROR, "Redis unavailable, retrying", "error", err, "retry_in", retry, NULL);
        w->next_connect = jr_mono_us() + w->backoff_ms * 1000;
        w->backoff_ms = w->backoff_ms * 2 > 5000 ? 5000 : w->backoff_ms * 2;
        return JR_EIO;
    }
    /* A queue whose stream key holds garbage costs that queue: it is not
     * read (as if paused) until it is fixed (check_broken). */
    int rc = jr_redis_ensure_groups(w->ctl, w->queues, w->nq, w->broken);
    for (size_t q = 0; !rc && q < w->nq; q++) {
        char key[JR_KEY_MAX];
        snprintf(key, sizeof key, "jr:{%s}:ready", w->queues[q]);
        if (w->broken[q])
            jr_report_once(JR_LOG_ERROR, SAY_STREAM_GARBAGE,
                           "key", key, jr_redis_errstr(w->ctl));
        else
            jr_report_clear(SAY_STREAM_GARBAGE, "the queue's stream key is a stream again; reading the queue", "key", key);
    }
    w->next_broken_check = jr_mono_us() + BROKEN_CHECK_US;
    if (!rc) rc = jr_redis_client_id(w->rd, &w->rd_id);
    if (!rc) { /* start with the paused set as it is (a refusal: the first read tells) */
        int prc = jr_redis_paused(w->ctl, w->queues, w->nq, w->order_scratch);
        if (!prc) paused_note(w->ctl);
        if (!prc) memcpy(w->paused, w->order_scratch, w->nq);
        else if (!jr_redis_ok(w->ctl)) rc = prc;
        for (size_t q = 0; q < w->nq; q++) w->paused[q] |= w->broken[q];
    }
    w->presence.self.client_id = w->rd_id; /* pause and resume wake the blocking read */
    w->quiet = 0;
    if (!rc) rc = clock_sync(w);
    if (rc) { /* e.g. a queue's stream key of another type: back off, do not flood the log */
        drop_conns(w, rc);
        w->backoff_ms = w->backoff_ms * 2 > 5000 ? 5000 : w->backoff_ms * 2;
        return rc;
    }
    jr_presence_reset(&w->presence); /* its entry may have expired meanwhile */
    jr_metrics_redis_ok();
    if (w->backoff_ms > 100) jr_log_kv(JR_LOG_INFO, "connected to Redis", NULL);
    w->backoff_ms = 100;
    return 0;
}

/* ---- fetching: priorities and pause -------------------------------------- */

/* Put the batch's entries in the order their jobs should start
 * (jr_prio_order): interleaved by weight, or queue by queue when strict. */
static int interleave(worker_t *w, jr_batch_t *b) {
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
 * the pause is seen. */
static int see_paused(worker_t *w, const unsigned char *now) {
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
        for (size_t i = 0; i < n && !rc; i++) rc = finish(w, &w->outcomes[i]);
    size_t keep = w->wq_head;
    for (size_t i = w->wq_head; i < w->wq_n; i++) {
        slot_t *s = &w->slots[w->waitq[i]];
        /* A job stays waiting unless its hand-back is queued (after an error,
         * every later one stays too): a slot is freed once, never twice. */
        if (!w->paused[s->queue] || rc || (rc = push_op(w, OP_HANDBACK, s->queue, s->entry, 0, NULL, NULL))) {
            w->waitq[keep++] = w->waitq[i];
            continue;
        }
        free_slot(w, s);
    }
    w->wq_n = keep;
    return rc;
}

/* Read without blocking, in rounds: each round asks every queue still in
 * play for its share of what is still wanted (weighted: jr_prio_split; strict:
 * the first queue in play for all of it) in one pipeline, with the paused
 * set read after it; a queue that comes back short is out of play, and
 * what it did not give is asked of the others in the next round. Returns
 * the entries taken (dispatched), or an error. */
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
        if ((rc = jr_redis_read_each(w->rd, w->consumer, w->queues, w->nq, w->got, &w->batch, now))) break;
        paused_note(w->rd);
        if ((rc = see_paused(w, now))) break;
        size_t n = w->batch.n;
        for (size_t q = 0; q < w->nq; q++) { /* w->got = asked; a queue that came back short is out */
            int64_t g = 0;
            for (size_t i = 0; i < n; i++) g += w->batch.v[i].queue == q;
            if ((w->got[q] > 0 && g < w->got[q]) || w->paused[q]) inplay[q] = 0;
        }
        if (n == left) w->rtt_us = ewma(w->rtt_us, jr_mono_us() - sent);
        if ((rc = interleave(w, &w->batch))) break;
        jr_metrics_fetched(n);
        *taken += n;
        if ((rc = dispatch(w, &w->batch, 0))) break;
    }
    return rc;
}

/* Fetch up to `want` entries. One queue in play (or the last fetch found
 * every queue empty): the one blocking read, sent now and taken in turn()
 * — XREADGROUP BLOCK answers at once when entries are there. Several:
 * read_rounds; only if they bring nothing, the blocking read over all the
 * queues in play (whatever comes first). Every queue paused: a blocking
 * wait that a resume (CLIENT UNBLOCK) or the period ends. The paused set
 * is read with every read, after it. */
static int fetch(worker_t *w, size_t want, int64_t block) {
    size_t active = 0, taken = 0;
    for (size_t q = 0; q < w->nq; q++) active += !w->paused[q];
    if (active > 1 && !w->went_idle) {
        int rc = read_rounds(w, want, &taken);
        if (rc || taken) {
            w->last_read_full = taken >= want;
            return rc;
        }
    }
    return send_read(w, want, block); /* counts the queues again: the rounds may have seen pauses */
}

/* The blocking read of fetch() over the queues not paused, sent (with
 * whatever was appended on rd before it, see flush_ops_on) in one write. */
static int send_read(worker_t *w, size_t want, int64_t block) {
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
static int jobs_wait(const worker_t *w) {
    return w->wq_n > w->wq_head || jr_exec_busy(w->exec) > w->runners;
}

/* While jobs wait to start and nothing is read, the paused set is read
 * every 50 ms (on ctl), so a pause stops them within the bound even when no
 * read brings the news. */
#define PAUSE_CHECK_US 50000
static int check_paused(worker_t *w) {
    if (w->reading || !jobs_wait(w) || jr_mono_us() < w->next_pause_check) return 0;
    w->next_pause_check = jr_mono_us() + PAUSE_CHECK_US;
    unsigned char *now = w->order_scratch;
    int rc = jr_redis_paused(w->ctl, w->queues, w->nq, now);
    if (rc == JR_EREDIS && jr_redis_ok(w->ctl)) rc = 0; /* refused: the next read tells */
    else if (!rc) paused_note(w->ctl), rc = see_paused(w, now);
    return rc;
}

/* Every 10 s while a queue is left out for garbage in its stream key, look
 * again (jr_redis_ensure_groups of those queues): a fixed one is read
 * again. Returns 0 or a transport error. */
static int check_broken(worker_t *w) {
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
        char key[JR_KEY_MAX];
        snprintf(key, sizeof key, "jr:{%s}:ready", sel[j]);
        jr_report_clear(SAY_STREAM_GARBAGE, "the queue's stream key is a stream again; reading the queue", "key", key);
        w->broken[at[j]] = 0, w->paused[at[j]] = 0; /* the next read of the paused set tells */
    }
    free(sel), free(bad), free(at);
    return rc == JR_EREDIS && jr_redis_ok(w->ctl) ? 0 : rc;
}

/* ---- the loop ------------------------------------------------------------- */

static void begin_stop(worker_t *w) {
    if (w->stopping) return;
    char grace[32];
    snprintf(grace, sizeof grace, "%lldms", (long long)w->cfg->worker_grace_ms);
    jr_log_kv(JR_LOG_INFO, "stopping: running jobs may finish, the rest go back to the queue", "grace",
              grace, NULL);
    w->stopping = 1;
    w->grace_deadline = jr_mono_us() + w->cfg->worker_grace_ms * 1000;
    jr_exec_stop(w->exec);
    if (hand_back_waiting(w)) jr_log_kv(JR_LOG_ERROR, "out of memory", NULL);
    if (w->reading && w->ctl && jr_redis_unblock(w->ctl, w->rd_id) != 0) drop_conns(w, JR_EIO);
}

static int64_t min_deadline(int64_t a, int64_t b) { return a < 0 ? b : b < 0 ? a : a < b ? a : b; }

/* Whether turn() makes the blocking read now (connected, not stopping, no
 * read in flight, room for entries, no reclaim due; queued operations
 * aside; a reclaim step due and not begun comes first), and its size:
 * *want entries, blocking *block ms. */
static int read_due(const worker_t *w, int64_t now, size_t *want, int64_t *block) {
    if (!w->rd || w->stopping || w->reading) return 0;
    if (now >= w->next_reclaim && strcmp(w->cursor, "0-0")) return 0; /* a reclaim step first */
    size_t n = room(w);
    if (!w->last_read_full) { /* the queues ran dry: this read will likely block until jobs come; */
        size_t free_runners = w->runners > w->used ? w->runners - w->used : 0; /* take what can start */
        if (n > free_runners) n = free_runners;
    }
    if (n == 0) return 0;
    if (now < w->resumed_retry_us) { /* the resume key holds garbage: see resumed_note */
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
 * (flush_ops_on): the read is due, it is the single blocking read (one queue
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

/* One turn of the loop. Returns an error only for a broken connection.
 *
 * Queued operations go first, and nothing is fetched (read or reclaimed)
 * while any is queued: after an outage longer than the lease, XAUTOCLAIM
 * would otherwise hand this worker back its own finished jobs before their
 * acknowledgements, and they would run again; and while Redis refuses
 * results, fetching more would only pile up finished jobs. */
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
    if (connected && w->nops && !piggyback && (rc = flush_ops(w))) return rc;
    /* Stopping, and the last results (left by the turn before for a read
     * that a signal then called off) just went: done, back to the loop. */
    if (w->stopping && !w->reading && w->used == 0 && w->nops == 0) return 0;
    int may_fetch = connected && !w->stopping && !w->reading && w->nops == 0, again = 0;
    if (piggyback) { /* the operations, then the read, in one write on rd */
        if ((rc = flush_ops_on(w, w->rd, pwant, pblock))) return rc;
        may_fetch = 0;
    }
    if (may_fetch && now >= w->next_reclaim && room(w) > 0 && (rc = reclaim(w, room(w)))) return rc;
    size_t want = 0;
    int64_t block = 0;
    if (may_fetch && w->nops == 0 && read_due(w, now, &want, &block)) {
        size_t before = w->used + w->nops;
        if ((rc = fetch(w, want, block))) return rc;
        /* Entries taken without blocking: fetch again at once if there is room. */
        again = !w->reading && w->used + w->nops != before;
    }
    if (connected && (rc = check_paused(w))) return rc;
    if (connected && (rc = check_broken(w))) return rc;
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
    if (connected && !w->reading && !w->stopping && !w->nops && room(w) > 0)
        deadline = min_deadline(deadline, w->next_reclaim);
    if (!w->stopping && jr_exec_idle(w->exec) == 0 &&
        (jr_exec_busy(w->exec) > w->runners || w->wq_n > w->wq_head)) /* jobs wait: see shed() */
        deadline = min_deadline(deadline, now + shed_after_us(w));
    if (connected && !w->reading && jobs_wait(w)) deadline = min_deadline(deadline, w->next_pause_check);
    if (connected && !w->reading && w->resumed_retry_us > now) deadline = min_deadline(deadline, w->resumed_retry_us);
    int timeout = ready_now || again ? 0 : deadline < 0 ? -1 : (int)((deadline - now + 999) / 1000);
    if (timeout < 0 && deadline >= 0) timeout = 0;
    jr_log_flush();
    if (poll(fds, nf, timeout) < 0 && errno != EINTR) return JR_EIO;

    if (w->reading && (ready_now || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))) {
        w->reading = 0;
        unsigned char *paused_now = w->read_with_paused ? w->order_scratch : NULL;
        rc = jr_redis_recv_read_paused(w->rd, &w->batch, w->queues, w->nq, w->read_on_any, paused_now);
        if (!rc && paused_now) paused_note(w->rd);
        if (!rc && !w->read_on_any) resumed_note(w);
        int64_t waited_ms = (jr_mono_us() - w->read_sent_us) / 1000;
        /* A read that went with results Redis refused was refused too (a
         * write refused: NOREPLICAS, READONLY...): nothing was read; the
         * refusal is logged once (flush_ops), no new read is made until
         * the results go through, and the connection stays. */
        int refused_too = rc == JR_EREDIS && jr_redis_ok(w->rd) && w->read_with_ops && w->ops_refused.on && w->nops;
        w->read_with_ops = 0;
        if (refused_too) rc = 0; /* the batch is empty */
        if (!rc && !refused_too && !paused_now && w->batch.n > 0) { /* a read sent alone brought entries */
            paused_now = w->order_scratch;
            int prc = jr_redis_paused(w->ctl, w->queues, w->nq, paused_now);
            if (!prc) paused_note(w->ctl);
            if (prc == JR_EREDIS && jr_redis_ok(w->ctl)) paused_now = NULL; /* refused: the next read tells */
            else if (prc) rc = prc;
        }
        if (rc || (!refused_too && paused_now && (rc = see_paused(w, paused_now))) || (rc = interleave(w, &w->batch)))
            return rc;
        /* Timed out (not woken early, e.g. by a pause's CLIENT UNBLOCK) with
         * nothing paused: the next read may go alone. */
        w->quiet = !refused_too && w->batch.n == 0 && w->read_on_any && waited_ms >= w->read_block_ms;
        for (size_t q = 0; q < w->nq && w->quiet; q++) w->quiet = !w->paused[q];
        jr_metrics_redis_ok();
        jr_metrics_fetched(w->batch.n);
        w->went_idle = w->batch.n == 0;
        if ((rc = dispatch(w, &w->batch, 0))) return rc;
        /* A full batch was there already (the read did not block): its
         * time, until the jobs were handed over, is a fetch round trip;
         * not counting the handlers run meanwhile (inline mode), or the
         * round trip would grow with the jobs held, and so would prefetch(). */
        w->last_read_full = w->batch.n >= w->read_count;
        if (w->last_read_full)
            w->rtt_us = ewma(w->rtt_us, jr_mono_us() - w->read_sent_us - (w->ran_us - w->read_sent_ran_us));
    }
    if (w->reconnect_after_read && !w->reading) return JR_EREDIS; /* see flush_ops_on */
    if ((rc = collect(w))) return rc;
    if (!w->stopping && (rc = shed(w))) return rc;
    if (jr_metrics_on()) {
        size_t busy = jr_exec_busy(w->exec);
        jr_metrics_running(busy < w->runners ? busy : w->runners);
    }
    now = jr_mono_us();
    if (w->rd && (w->used || w->nops) && now >= w->next_heartbeat) {
        w->next_heartbeat = now + lease_us(w) / 3;
        if ((rc = heartbeat(w))) return rc;
    }
    if (w->ctl && now >= w->next_clock_us && (rc = clock_sync(w))) return rc;
    if (w->rd && w->used && now >= w->next_cancel_check) {
        w->next_cancel_check = now + CANCEL_CHECK_US;
        if ((rc = cancel_check(w))) return rc;
    }
    if (w->ctl && ((rc = jr_presence_tick(&w->presence, w->ctl, (long long)jr_exec_busy(w->exec))) ||
                   (!w->stopping && (rc = jr_presence_prune(&w->presence, w->ctl, w->queues, w->nq)))))
        return rc;
    /* Results that the next turn sends with its read wait for it (no
     * waiting happens in between). */
    if (w->nops && w->rd && ack_with_read(w, jr_mono_us(), &pwant, &pblock)) return 0;
    return w->ctl ? flush_ops(w) : 0;
}

static void free_fetch(worker_t *w) {
    free(w->swrr), free(w->counts), free(w->got), free(w->cur), free(w->paused), free(w->broken), free(w->on), free(w->order_scratch);
    free(w->order), free(w->order_q), free(w->order_perm);
}

int jr_worker_run(const jr_config_t *cfg, const jr_registry_t *reg) {
    static const char *dflt[] = {JR_DEFAULT_QUEUE};
    worker_t w = {.cfg = cfg, .reg = reg, .backoff_ms = 100, .keep_mu = PTHREAD_MUTEX_INITIALIZER};
    w.queues = cfg->worker_queues.n ? (const char **)cfg->worker_queues.v : dflt;
    w.nq = cfg->worker_queues.n ? cfg->worker_queues.n : 1;
    w.weights = cfg->worker_queues.n ? cfg->worker_weights : NULL;
    w.swrr = calloc(w.nq, sizeof *w.swrr);
    w.counts = calloc(w.nq, sizeof *w.counts);
    w.got = calloc(w.nq, sizeof *w.got);
    w.cur = calloc(3 * w.nq, sizeof *w.cur);
    w.paused = calloc(w.nq, 1);
    w.broken = calloc(w.nq, 1);
    w.on = calloc(w.nq, 1);
    w.order_scratch = calloc(w.nq, 1);
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
    int nomem = jr_presence_init(&w.presence, "worker", w.consumer, w.queues, w.nq, cfg->worker_lease_ms) ||
                !w.tasks || !w.outcomes || !w.swrr || !w.counts || !w.got || !w.cur || !w.paused || !w.broken || !w.on ||
                !w.order_scratch;
    if (nomem ||
        !(w.exec = jr_exec_new(reg, inline_mode, (int)runners, (size_t)cfg->worker_batch, cfg->max_payload, err,
                              sizeof err))) {
        jr_log_kv(JR_LOG_ERROR, "cannot start the worker", "error", nomem ? "out of memory" : err, NULL);
        free(w.tasks), free(w.outcomes);
        free_fetch(&w);
        jr_presence_free(&w.presence);
        return 1;
    }
    jr_exec_set_cancel_probe(w.exec, cancel_probe, &w);
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
        jr_metrics_start(cfg->metrics_listen, JR_METRICS_WORKER, cfg->worker_block_ms + 1000, err, sizeof err)) {
        jr_log_kv(JR_LOG_ERROR, "cannot start the worker", "error", err, NULL);
        jr_exec_free(w.exec);
        free(w.tasks), free(w.outcomes);
        free_fetch(&w);
        jr_presence_free(&w.presence);
        return 1;
    }
    if (inline_mode && keeper_start(&w, err, sizeof err) != 0) {
        jr_log_kv(JR_LOG_ERROR, "cannot start the worker", "error", err, NULL);
        jr_metrics_stop();
        jr_exec_free(w.exec);
        free(w.tasks), free(w.outcomes);
        free_fetch(&w);
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
            begin_stop(&w);
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
        if (!w.rd && jr_mono_us() >= w.next_connect) rc = try_connect(&w);
        if (rc == 0 || w.rd == NULL) rc = turn(&w, sigfd);
        if (rc == JR_ENOMEM) {
            jr_log_kv(JR_LOG_ERROR, "out of memory: stopping; unfinished jobs stay pending (exit status 1)",
                      NULL);
            status = 1;
            break;
        }
        if (rc && w.rd) drop_conns(&w, rc);
    }
    w.next_flush = 0;
    if (w.ctl) flush_ops(&w); /* best effort: what is not sent stays pending in Redis */
    keeper_stop(&w);
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
    clear_ops(&w);
    forget_registered(&w);
    free(w.ops);
    jr_batch_free(&w.batch);
    free(w.slots), free(w.freeslots), free(w.waitq), free(w.tasks), free(w.outcomes);
    free_fetch(&w);
    return status;
}
