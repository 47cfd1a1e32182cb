/* The worker's private header: its state, shared by the files that make up
 * the worker (as redis's server.h is), and nothing else includes it.
 *
 *   worker.c  the loop: connect, turn, stop (and jr_worker_run)
 *   conn.c    the connections, Redis's clock, queues whose stream key is garbage
 *   fetch.c   what to fetch and when: priorities, pause, the reads
 *   jobs.c    fetched jobs: checked, held, handed to the executor, finished
 *   outbox.c  the results: operations queued for Redis, sent and settled
 *   lease.c   leases: heartbeats, the inline lease keeper, cancels, reclaims
 *
 * Names: jrw_ for what these files share; the rest is static in its file. */
#ifndef JR_WORKER_INT_H
#define JR_WORKER_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "exec.h"
#include "jr.h"
#include "plugin.h"
#include "presence.h"
#include "redis.h"
#include "redis_partition.h"
#include "redis_worker.h"

#define ENTRY_MAX 48 /* "<20 digits>-<20 digits>" */
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
    int held;        /* FOLLOW on a cluster: its follow-ups to other queues not written yet (a refusal
                        that may pass): left out of this flush, kept (outbox.c) */
    size_t fu_len;
    /* ACK, FOLLOW, RETRY, DEAD of a job that ran: its log line (outcome
     * done_outcome) waits for the reply, which says whether the job was
     * cancelled meanwhile (done_id, done_handler owned). */
    const char *done_outcome;
    char *done_id, *done_handler;
    uint32_t done_attempt;
    int64_t done_us;
    /* ACK, FOLLOW, DEAD of a job that ran: its finished record (revision
     * 20): keep_finished of its queue and handler, and api->set_result's
     * result (owned; NULL = none). */
    jr_keep_t keep;
    char *result;
    size_t result_len;
} op_t;

/* Whether Redis is refusing a kind of call, and its last error text. */
typedef struct refusal {
    int on;
    char err[JR_ERRLEN];
} refusal_t;

typedef struct worker {
    /* What it runs, and as whom (set at start). */
    const jr_config_t *cfg;
    const jr_registry_t *reg;
    /* The queues read: the configured ones, a partitioned queue Q as its
     * partitions Q#J and Q itself (conn.c, jrw_partitions). shown[q] is
     * the name users see (Q), part[q] the partition (-1: Q itself). */
    const char **queues;
    size_t nq;
    const char **shown;
    int *part;
    const char **uq;         /* the configured queues */
    size_t nuq;
    const int64_t *uweights; /* their weights, NULL = all 1 */
    int64_t *pweights;       /* the weights per queue read (w->weights points here when set) */
    jr_partmap_t parts;      /* their partition counts */
    int64_t next_parts_us;   /* when to read the counts again */
    int parts_applied;       /* the configuration's counts were set in Redis */
    char consumer[128];
    uint64_t rng;           /* jrw_next_rand */
    jr_presence_t presence; /* this worker in the live list */

    /* Connections (conn.c): rd carries the reads (and results sent with one), ctl the rest (see worker.c). */
    jr_redis_t *rd, *ctl;
    long long rd_id;        /* rd's CLIENT ID, for CLIENT UNBLOCK */
    int64_t next_connect, backoff_ms;
    int reconnect_after_read; /* the library is missing: reconnect once the read in flight is in */
    int64_t next_broken_check; /* while a queue is broken: when to look at its stream key again (jrw_check_broken) */
    /* Redis's clock (TIME) clock_redis_ms read at monotonic clock_mono_us
     * (0: not read yet); read again at next_clock_us (see jrw_redis_now_ms). */
    double clock_redis_ms;
    int64_t clock_mono_us, next_clock_us;

    /* Jobs (jobs.c): the slots and the executor. */
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
    int64_t job_us;          /* moving average of a job's run */
    int64_t ran_us;          /* time spent in jr_exec_collect (inline mode: running handlers) */
    int64_t last_outcome_us; /* when a job last finished */

    /* The results outbox (outbox.c): operations waiting for Redis. */
    op_t *ops;
    size_t nops, opcap;
    int64_t next_flush, flush_backoff_ms;
    refusal_t ops_refused;
    int ops_down; /* every result kept is for a Redis Cluster node that is down: fetching goes on (outbox.c) */
    int unconfirmed;        /* the last flush's results were not confirmed by redis.wait_replicas replicas (outbox.c) */
    char *fu_registered[FU_REGISTERED_MAX]; /* see FU_REGISTERED_MAX; cleared on reconnect */
    size_t nfu_registered;

    /* Leases (lease.c): heartbeats, cancels, reclaims. */
    refusal_t hb_refused;
    int64_t next_heartbeat, next_reclaim, next_cancel_check;
    size_t reclaim_q;       /* the queue whose XAUTOCLAIM scan is under way */
    char cursor[JR_ID_MAX]; /* its cursor, "0-0" between scans */
    /* Inline mode: the lease keeper thread (see lease.c) */
    int keeper_on, keeper_quit;
    int keeper_broken; /* its connection broke: the worker reconnects */
    int keeper_nomem;  /* it ran out of memory: the worker stops */
    pthread_t keeper;
    pthread_mutex_t keep_mu;  /* held by the worker except inside jr_exec_collect */
    pthread_cond_t keep_cv;
    jr_redis_t *keep_conn;    /* the keeper's own connection */
    char keep_err[JR_ERRLEN]; /* the keeper's last refusal or error, for the worker to log; "" = none */

    /* Fetching (fetch.c): the read in flight, priorities and pause, per queue. */
    int reading;            /* a blocking read is in flight on rd */
    int64_t rtt_us;         /* moving average of a fetch's round trip */
    int64_t read_sent_us;   /* when the read in flight was sent */
    int64_t read_sent_ran_us; /* ran_us when the read in flight was sent */
    size_t read_count;      /* its COUNT */
    int last_read_full;     /* the last read brought all it asked for */
    jr_batch_t batch;       /* the entries of the last read or reclaim */
    const int64_t *weights;  /* worker.queues weights, NULL = all 1 */
    int64_t *swrr;           /* jr_prio_split's credit per queue */
    unsigned char *paused;   /* as Redis said last, or broken */
    unsigned char *broken;   /* its stream key holds another type (found at connect): not read, like a paused one, until jrw_check_broken finds it fixed */
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
    int read_with_ops;       /* the read in flight went with results (jrw_flush_ops_on) */
    int64_t next_pause_check; /* while jobs wait and nothing is read: re-read the paused set then */
    unsigned char *order_scratch; /* scratch: a paused set just read (nq bytes) */
    int64_t resumed_retry_us; /* no wait on JR_RESUMED_KEY before this (mono us): it held garbage */

    /* Stopping (worker.c). */
    int stopping, signals_seen, said_waiting;
    int64_t grace_deadline;
} worker_t;

static inline uint64_t jrw_next_rand(worker_t *w) { /* xorshift64* */
    w->rng ^= w->rng >> 12, w->rng ^= w->rng << 25, w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ULL;
}

static inline int64_t jrw_lease_us(const worker_t *w) { return w->cfg->worker_lease_ms * 1000; }

static inline int64_t jrw_ewma(int64_t avg, int64_t sample) { return avg <= 0 ? sample : avg + (sample - avg) / 8; }

/* Each function's contract is stated above its definition. */

/* worker.c */
void jrw_refused(refusal_t *r, const char *what, const char *err);
void jrw_accepted(refusal_t *r, const char *what);

/* conn.c */
int jrw_partitions(worker_t *w, int connected);
void jrw_free_partitions(worker_t *w);
int jrw_try_connect(worker_t *w);
void jrw_drop_conns(worker_t *w, int rc);
int jrw_check_broken(worker_t *w);
int jrw_clock_sync(worker_t *w);
int64_t jrw_redis_now_ms(worker_t *w);

/* fetch.c */
size_t jrw_room(const worker_t *w);
int jrw_fetch(worker_t *w, size_t want, int64_t block);
int jrw_send_read(worker_t *w, size_t want, int64_t block);
int jrw_interleave(worker_t *w, jr_batch_t *b);
int jrw_see_paused(worker_t *w, const unsigned char *now);
void jrw_paused_note(jr_redis_t *r);
void jrw_resumed_note(worker_t *w);
int jrw_jobs_wait(const worker_t *w);
int jrw_check_paused(worker_t *w);
void jrw_free_fetch(worker_t *w);

/* jobs.c */
int jrw_dispatch(worker_t *w, const jr_batch_t *b, int reclaimed);
int jrw_collect(worker_t *w);
int jrw_finish(worker_t *w, jr_outcome_t *o);
int jrw_held(const worker_t *w, uint32_t q, const char *entry);
/* Name job `id` in acknowledgement o (o->jobid) as Redis holds it, unless
 * that is o's entry id (o->jobid left ""): a generated id of a partition is
 * shown with "~<partition>" (see dispatch), which Redis never holds. */
void jrw_ack_jobid(const worker_t *w, op_t *o, const char *id);
void jrw_free_slot(worker_t *w, slot_t *s);
int jrw_hand_back_waiting(worker_t *w);
int64_t jrw_shed_after_us(const worker_t *w);
int jrw_shed(worker_t *w);
void jrw_log_outcome(const worker_t *w, const slot_t *s, const char *outcome, int64_t duration_us,
                     const char *error, int64_t retry_in);

/* outbox.c */
int jrw_push_op(worker_t *w, op_kind_t kind, uint32_t queue, const char *entry, int64_t delay_ms,
                const char *error, const char *why);
int jrw_flush_ops_on(worker_t *w, jr_redis_t *conn, size_t want, int64_t block);
int jrw_flush_ops(worker_t *w);
void jrw_clear_ops(worker_t *w);
void jrw_forget_registered(worker_t *w);

/* lease.c */
int jrw_heartbeat(worker_t *w);
int jrw_cancel_check(worker_t *w);
int jrw_cancel_probe(void *ctx, uint32_t tag);
int jrw_reclaim(worker_t *w, size_t want);
int jrw_keeper_start(worker_t *w, char *err, size_t errlen);
void jrw_keeper_stop(worker_t *w);

#endif
