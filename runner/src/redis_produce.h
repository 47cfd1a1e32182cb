/* The producer's calls: enqueue, and one job by id (jr_locate, jr_cancel,
 * jr_run_now, jr_delete). Used by the CLI and the client library.
 * See redis.h for the connection and the conventions shared by every call. */
#ifndef JR_REDIS_PRODUCE_H
#define JR_REDIS_PRODUCE_H

#include "config.h"
#include "redis.h"

/* One job to enqueue. */
typedef struct jr_enqueue {
    const char *queue;  /* a valid queue name */
    const char *id;     /* NULL = generated; otherwise idempotent */
    int64_t delay_ms;   /* > 0: due this long after Redis's now */
    int64_t at_us;      /* > 0: due at this Unix time (us); wins over delay */
    int64_t uniq_ms;    /* idempotency window after the due time; 0 = 24 h */
    jr_envelope_t env;  /* handler, payload, max_attempts, timeout_ms */
    int partition;      /* 1: queue is the internal name of a partition, Q#J (redis_partition.h) */
} jr_enqueue_t;

/* 1 if err (Redis's text of a refused jr_register) says a registry key
 * (JR_REGISTRY_KEY, JR_REGISTRY_WAKE_KEY) holds another type: the queue is
 * then not registered, and its enqueue goes on without it. Pure. */
int jr_redis_registry_garbage(const char *err);

/* Enqueue n jobs (jr_redis_enqueue_each) and tell less: ids (may be NULL)
 * receives each job id; created (may be NULL) 1 per job written, 0 for any
 * other outcome. Returns 0 when every job was written or already existed,
 * else the first error, its text in jr_redis_errstr. */
int jr_redis_enqueue(jr_redis_t *r, const jr_enqueue_t *jobs, size_t n, char (*ids)[JR_ID_MAX],
                     int *created);

/* What became of one job of jr_redis_enqueue_each. */
enum {
    JR_ENQ_NOT_SENT = 0, /* not sent: not written */
    JR_ENQ_CREATED,      /* written */
    JR_ENQ_EXISTED,      /* its explicit id was enqueued already: nothing written */
    JR_ENQ_REFUSED,      /* refused (by our check or by Redis): not written */
    JR_ENQ_UNKNOWN       /* sent, but the connection failed before its answer; or written to the
                            primary but not confirmed by redis.wait_replicas replicas (its id kept) */
};
typedef struct jr_enq_outcome {
    unsigned char status; /* JR_ENQ_* */
    uint32_t why;         /* when not CREATED/EXISTED: index of the reason in `reasons`
                             (UINT32_MAX: none kept, see jr_redis_errstr) */
} jr_enq_outcome_t;

/* Jobs per FCALL jr_enqueue_many of jr_redis_enqueue_each. */
#define JR_ENQUEUE_CHUNK 1000

/* Set the jobs per FCALL jr_enqueue_many (process-wide; 0 keeps it) and
 * return the previous value. For benchmarks and tests: a larger chunk
 * makes fewer calls but holds Redis longer per call (~2-5 us per job). */
size_t jr_redis_set_enqueue_chunk(size_t jobs);

/* Enqueue n jobs, any mix of queues in any order: one FCALL jr_enqueue_many
 * per queue and run of up to JR_ENQUEUE_CHUNK of its jobs (jobs sorted by
 * queue, each queue's in their order) — or, for a run of 2 or more jobs due
 * now without an id, FCALL jr_ready_prepare and one plain XADD per job, each
 * job then refused or written on its own — registering their queues once per
 * connection, pipelined: call k+1 is sent before call k's replies are read
 * (at most 2 calls wait for replies). Every job is checked first (valid queue
 * name, non-empty handler, id not of a reserved form and at most 158 bytes,
 * every time and count within runner/src/jr_limits.h): bad jobs get
 * REFUSED, the others NOT_SENT, nothing is sent, and the call returns
 * JR_EINVAL with the first bad job's text ("job K: ...").
 *
 * out[i] (n of them) tells exactly what became of job i: a refusal by Redis
 * (a key holding the wrong type, say) refuses that call's jobs only and the
 * others still go; a transport error stops the batch: jobs whose call was
 * sent become UNKNOWN, the rest NOT_SENT. ids (may be NULL) receives each
 * job id (the given id, or "", when not written). reasons (may be NULL)
 * gets one text per distinct reason, appended. Returns 0 when every job was
 * CREATED or EXISTED, else the first error (its text in jr_redis_errstr);
 * a refused jr_register of a queue is an error (JR_EREDIS) though its jobs
 * were written, except when a registry key holds another type
 * (jr_redis_registry_garbage): then the queue is not registered, that is
 * logged once per connection, and the call's outcome is its jobs'.
 *
 * With redis.wait_replicas N > 0 (jr_redis_wait_replicas), WAIT N
 * redis.wait_timeout goes in the write of the last call and its reply is
 * read last: when fewer than N replicas confirmed (or Redis refused WAIT),
 * the CREATED jobs become UNKNOWN (ids keeps their ids; the reason says
 * "written to the primary, but confirmed by only K of N replica(s) within T ms: it
 * may not survive a failover") and, unless an earlier error came first,
 * the call returns JR_EREPLICAS (JR_EREDIS for a refused WAIT) with that
 * text. */
int jr_redis_enqueue_each(jr_redis_t *r, const jr_enqueue_t *jobs, size_t n, char (*ids)[JR_ID_MAX],
                          jr_enq_outcome_t *out, jr_strlist_t *reasons);

/* ---- one job by id (jr_locate, jr_cancel, jr_run_now, jr_delete) ---------- */

/* Where a job is. fields holds one entry (id: the stream entry, or the job
 * id for a delayed job) with the job's fields as stored. */
typedef struct jr_jobinfo {
    char state[16];                  /* delayed retrying ready running dead finished, or "not found" */
    char entry[JR_ID_MAX];           /* stream, dead or finished record entry id; "" when delayed or not found */
    char due[48];                    /* delayed, retrying: the score, Unix ms with 3 decimals */
    char consumer[JR_PROC_NAME_MAX]; /* running: who holds it */
    long long idle_ms, deliveries;   /* running: since its last delivery/heartbeat; times delivered */
    jr_batch_t fields;
} jr_jobinfo_t;
/* Locate job `id` of `queue` in one atomic read (jr_locate); a job not
 * found there is then looked for among the finished records
 * (jr_redis_finished_get, keep_finished): state "finished", fields = its
 * record (id h outcome a duration_ms worker finished_at [err] [result]). */
int jr_redis_job_locate(jr_redis_t *r, const char *queue, const char *id, jr_jobinfo_t *info);
void jr_jobinfo_free(jr_jobinfo_t *info);
/* Call fn = "jr_cancel", "jr_run_now" or "jr_delete" for one job; state
 * gets its first reply element (cancel: cancelled | running | not found;
 * run_now, delete: the state before), detail the second (run_now: the
 * entry id; delete: "1" if deleted, else "0"). */
int jr_redis_job_change(jr_redis_t *r, const char *fn, const char *queue, const char *id, char *state,
                        size_t statelen, char *detail, size_t detaillen);

#endif
