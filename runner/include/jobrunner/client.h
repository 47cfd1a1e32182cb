/* libjobrunner: enqueue and control jobrunner jobs from a C program.
 *
 * Build with:  cc app.c $(pkg-config --cflags --libs jobrunner-client)
 * See docs/client.md for a complete producer.
 *
 * One handle (jr_client_t) is one Redis connection; use it from one thread
 * at a time (open one per thread). Every int function returns JR_CLIENT_OK
 * (0) or a negative jr_client_error_t; jr_client_errstr(c) then says what
 * was wrong, naming the argument, the job or Redis's own error text (never
 * a password). A call refused for bad input (JR_CLIENT_EINVAL) sends
 * nothing. After a connection error the next call reconnects.
 *
 * Ownership: every `const char *` the library returns points into memory
 * the library owns; the text of jr_client_errstr and of the `error` of an
 * enqueue result stays valid until the next call on the same handle (or
 * jr_client_free); a jr_client_job_info_t and everything it points to until
 * jr_client_job_info_free. Nothing the caller passes in is kept after a
 * call returns.
 *
 * Compatibility: the shared object's SONAME carries the major version
 * (libjobrunner.so.1). Within a major version, functions and enum values
 * are only added; the structs below never change size or layout.
 */
#ifndef JOBRUNNER_CLIENT_H
#define JOBRUNNER_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define JR_CLIENT_EXPORT __attribute__((visibility("default")))
#else
#define JR_CLIENT_EXPORT
#endif

#define JR_CLIENT_VERSION_MAJOR 1
#define JR_CLIENT_VERSION_MINOR 3

/* Longest job id, with its terminating NUL (ids are at most 158 bytes). */
#define JR_CLIENT_ID_MAX 160
/* Longest queue name (1..128 of A-Z a-z 0-9 _ . : -). */
#define JR_CLIENT_QUEUE_MAX 128

typedef struct jr_client jr_client_t;

/* Error codes (negative). */
typedef enum jr_client_error {
    JR_CLIENT_OK = 0,
    JR_CLIENT_ENOMEM = -1,   /* out of memory */
    JR_CLIENT_EINVAL = -2,   /* a bad argument; nothing was sent */
    JR_CLIENT_ECONNECT = -3, /* cannot connect, or the connection was lost */
    JR_CLIENT_ETIMEOUT = -4, /* Redis did not answer within the command timeout */
    JR_CLIENT_EREFUSED = -5, /* Redis refused a command (its text in errstr) */
    JR_CLIENT_EPROTO = -6,   /* an unexpected reply (e.g. an incompatible function library) */
    JR_CLIENT_EREPLICAS = -7 /* since 1.1: an enqueue was written to the primary but fewer than
                                wait_replicas replicas confirmed it within wait_timeout_ms: its
                                jobs are UNKNOWN (they may not survive a failover) */
} jr_client_error_t;

/* "major.minor" of the library actually loaded (compare with the macros). */
JR_CLIENT_EXPORT const char *jr_client_version(void);

/* The text of an error code ("cannot connect to Redis", ...). Never NULL. */
JR_CLIENT_EXPORT const char *jr_client_strerror(int code);

/* Connect to Redis and make sure it holds the jobrunner function library
 * (loading it, as `jobrunner functions load` does, if it is missing or
 * older). `url` is what the CLI's --redis takes: redis://[[user]:password@]
 * host[:port][/db], rediss://... (the same over TLS: jr_client_open's tls
 * options; docs/tls.md) or unix://[[user]:password@]/path/to.sock[?db=N];
 * NULL = redis://127.0.0.1:6379. connect_timeout_ms bounds the connect and
 * the library check, command_timeout_ms every later command (0 = 5000 ms;
 * both 1..3600000).
 *
 * Returns NULL only when out of memory. Otherwise a handle, which the
 * caller frees with jr_client_free even when the connect failed: check
 * jr_client_err(c) (0 = connected) and jr_client_errstr(c). A handle whose
 * connect failed retries it on each later call. */
JR_CLIENT_EXPORT jr_client_t *jr_client_connect(const char *url, int64_t connect_timeout_ms,
                                                int64_t command_timeout_ms);
/* Everything jr_client_open can be told besides the URL. Zero it and set
 * what you need: each field's zero is its default. The strings are copied. */
typedef struct jr_client_options {
    const char *url;            /* as jr_client_connect's; NULL = redis://127.0.0.1:6379 */
    int64_t connect_timeout_ms; /* as jr_client_connect's */
    int64_t command_timeout_ms; /* as jr_client_connect's */
    const char *password;       /* kept out of the URL (a user then reads "redis://USER:@host");
                                   a URL holding one too is refused; NULL = none */
    const char *sentinel_password; /* redis-sentinel:// URLs: the sentinels' own; NULL = none */
    struct {
        const char *ca_file, *ca_dir;     /* CAs that sign the server; NULL = the system's */
        const char *cert_file, *key_file; /* a client certificate (mutual TLS); NULL = none */
        const char *server_name;          /* the name the server's certificate must hold; NULL = the URL's host */
        int no_verify;                    /* 1 = accept any server certificate (tests only) */
    } tls;                                /* rediss:// URLs only */
    int wait_replicas;          /* > 0: an enqueue returns only once this many replicas hold it
                                   (WAIT in the same round trip); fewer within wait_timeout_ms:
                                   JR_CLIENT_EREPLICAS, its jobs UNKNOWN. 0..100 */
    int64_t wait_timeout_ms;    /* how long it waits for them; 0 = 1000 ms; 1..60000 */
} jr_client_options_t;

/* jr_client_connect with options (since 1.1; NULL = all defaults). */
JR_CLIENT_EXPORT jr_client_t *jr_client_open(const jr_client_options_t *o);

/* Close the connection and free the handle (NULL is fine). */
JR_CLIENT_EXPORT void jr_client_free(jr_client_t *c);

/* The code of the last call on c (0 if it succeeded) and its message ("" if
 * none; owned by c, valid until the next call on c). */
JR_CLIENT_EXPORT int jr_client_err(const jr_client_t *c);
JR_CLIENT_EXPORT const char *jr_client_errstr(const jr_client_t *c);

/* ---- enqueue ----------------------------------------------------------- */

/* One job. Zero it (jr_client_job_t j = {0};) and set what you need. */
typedef struct jr_client_job {
    const char *queue;    /* NULL or "" = "default" */
    const char *handler;  /* required: the handler name a worker plugin registered */
    const void *payload;  /* payload bytes (binary-safe; may hold NULs); NULL = empty */
    size_t payload_len;
    const char *id;       /* NULL or "" = generated; otherwise idempotent: while the id is
                             known (see uniq_ms), enqueueing it again writes nothing */
    int64_t delay_ms;     /* > 0: due this long after Redis's clock (at most 10 years) */
    int64_t at_ms;        /* > 0: due at this Unix time in ms; wins over delay_ms */
    int64_t max_attempts; /* 0 = the worker's default; 1..1000 */
    int64_t timeout_ms;   /* 0 = the worker's default; 1 ms..7 days */
    int64_t backoff_ms;   /* 0 = the worker's default; 1 ms..30 days */
    int64_t uniq_ms;      /* with an id: how long after the due time the id stays known
                             (0 = 24 h; at most 10 years) */
} jr_client_job_t;

/* What happened to one job of an enqueue call. */
typedef enum jr_client_job_status {
    JR_CLIENT_JOB_NOT_SENT = 0, /* never sent (a bad job in the call, or the connection
                                   failed first): not written */
    JR_CLIENT_JOB_CREATED = 1,  /* written */
    JR_CLIENT_JOB_EXISTED = 2,  /* its id was already enqueued: nothing written */
    JR_CLIENT_JOB_REFUSED = 3,  /* Redis refused it: not written (error says why) */
    JR_CLIENT_JOB_UNKNOWN = 4   /* sent, but the connection failed before the answer:
                                   maybe written (enqueue it again with an id to be sure);
                                   or (wait_replicas, since 1.1) written to the primary, its
                                   id in the result, but fewer replicas than asked confirmed
                                   it: it may be lost in a failover (error says how many) */
} jr_client_job_status_t;

typedef struct jr_client_result {
    jr_client_job_status_t status;
    char id[JR_CLIENT_ID_MAX]; /* CREATED, EXISTED: the job id; UNKNOWN: the job id when it was
                                  written to the primary, else the id given or ""; otherwise
                                  the id given or "" */
    const char *error;         /* NULL for CREATED and EXISTED; otherwise why (owned by c,
                                  valid until the next call on c) */
} jr_client_result_t;

/* Enqueue one job. result (may be NULL) receives its outcome and id.
 * Returns 0 when the job was written or already existed. */
JR_CLIENT_EXPORT int jr_client_enqueue(jr_client_t *c, const jr_client_job_t *job, jr_client_result_t *result);

/* Enqueue n jobs: any mix of queues, in any order, any n. Jobs of one queue
 * keep their order; the calls are pipelined. Every job is checked first:
 * one bad job refuses the whole call with JR_CLIENT_EINVAL, nothing is
 * sent, and its result says what is wrong (the others: NOT_SENT).
 *
 * results (n of them; may be NULL) receives each job's outcome. Returns 0
 * when every job was written or already existed; otherwise the first error,
 * and results[i] tells exactly which jobs were written: a refusal by Redis
 * (e.g. a key of one queue holding a value of the wrong type) refuses the
 * jobs of that queue sent in the same Redis call (up to 1000 jobs) and
 * nothing else; the rest are still written. */
JR_CLIENT_EXPORT int jr_client_enqueue_many(jr_client_t *c, const jr_client_job_t *jobs, size_t n,
                                            jr_client_result_t *results);

/* jr_client_enqueue_many with a partition key per job (since 1.2): keys (n
 * of them; NULL = none) names, for a job of a partitioned queue (see
 * jr_client_set_partitions), what picks its partition: keys[i] non-NULL and
 * non-empty sends it to partition hash(key) mod N, so one key's jobs stay in
 * one partition and a single worker runs them in order; else an explicit id
 * picks it (hash(id) mod N), else the jobs spread over the partitions. A
 * key is not stored: find a keyed job with an explicit id by its key
 * (jr_client_job_show_keyed). A generated id of a partitioned queue's job
 * ends in "~<partition>". (The key is an argument, not a field of
 * jr_client_job_t: the structs never change size within a major version.) */
JR_CLIENT_EXPORT int jr_client_enqueue_many_keyed(jr_client_t *c, const jr_client_job_t *jobs,
                                                  const char *const *keys, size_t n, jr_client_result_t *results);

/* Set the number of partitions of queue `queue` (NULL = "default") to n
 * (1..1024; 1 = not partitioned), since 1.2. Refused (JR_CLIENT_EREFUSED,
 * nothing changed; errstr names the queue, both counts and the jobs it
 * holds) while the queue holds any job; the same n is a no-op. *before
 * (may be NULL) = the count before. Workers and schedulers see the change
 * within 10 s (docs/operations.md "Partitioned queues"). */
JR_CLIENT_EXPORT int jr_client_set_partitions(jr_client_t *c, const char *queue, int n, int *before);

/* ---- one job by id ------------------------------------------------------- */

typedef enum jr_client_cancel {
    JR_CLIENT_CANCEL_NOT_FOUND = 0, /* finished, never there, or dead */
    JR_CLIENT_CANCELLED = 1,        /* it was waiting (delayed, retrying, ready): removed */
    JR_CLIENT_CANCEL_RUNNING = 2    /* a worker has it: flagged; it ends and is not retried */
} jr_client_cancel_t;

/* Cancel job `id` of `queue` (NULL = "default"), atomically. *outcome says
 * what happened (a job not found is not an error). */
JR_CLIENT_EXPORT int jr_client_cancel(jr_client_t *c, const char *queue, const char *id,
                                      jr_client_cancel_t *outcome);
/* jr_client_cancel of a job of a partitioned queue enqueued with an
 * explicit id and a key: the key finds its partition (since 1.2; key NULL
 * or "": as jr_client_cancel). */
JR_CLIENT_EXPORT int jr_client_cancel_keyed(jr_client_t *c, const char *queue, const char *id, const char *key,
                                            jr_client_cancel_t *outcome);

typedef enum jr_client_state {
    JR_CLIENT_STATE_NOT_FOUND = 0, /* never there, or finished without keep_finished */
    JR_CLIENT_STATE_DELAYED = 1,
    JR_CLIENT_STATE_RETRYING = 2,
    JR_CLIENT_STATE_READY = 3,
    JR_CLIENT_STATE_RUNNING = 4,
    JR_CLIENT_STATE_DEAD = 5,
    JR_CLIENT_STATE_FINISHED = 6   /* since 1.3: its finished record (keep_finished); entry = the record's
                                      id, fields = the record: id h outcome a duration_ms worker
                                      finished_at [err] [result] (docs/redis-contract.md) */
} jr_client_state_t;

/* One stored field of a job, as stored (binary-safe). */
typedef struct jr_client_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} jr_client_field_t;

/* Where a job is, and its envelope. Strings are NUL-terminated and also
 * have lengths where they can hold any byte. */
typedef struct jr_client_job_info {
    jr_client_state_t state;
    const char *state_name;   /* "delayed", "retrying", "ready", "running", "dead", "finished", "not found" */
    const char *queue, *id;
    const char *entry;        /* ready, running: the stream entry id; dead: the dead entry id; else "" */
    double due_ms;            /* delayed, retrying: due at (Unix ms); else -1 */
    const char *consumer;     /* running: the worker holding it ("host-pid"); else "" */
    int64_t idle_ms;          /* running: since its delivery or last heartbeat; else -1 */
    int64_t deliveries;       /* running: times delivered; else -1 */
    /* The envelope (absent fields: handler NULL, numbers 0, attempt 1). */
    const char *handler;
    size_t handler_len;
    const char *payload;      /* "" when the job has none */
    size_t payload_len;
    int64_t attempt, max_attempts, timeout_ms, backoff_ms;
    int64_t enqueued_ms, due_field_ms; /* fields e and d (Unix ms) when stored, else 0 */
    const char *error;        /* the last error (a retried or dead job), NULL if none */
    size_t error_len;
    const char *why;          /* dead: why it died, NULL otherwise */
    size_t why_len;
    size_t nfields;           /* every stored field, in order */
    const jr_client_field_t *fields;
} jr_client_job_info_t;

/* Locate job `id` of `queue` (NULL = "default") in one atomic read, without
 * scanning the queue. On success *info is a new object (free it with
 * jr_client_job_info_free), also when the job was not found (state
 * JR_CLIENT_STATE_NOT_FOUND). On error *info is NULL. */
JR_CLIENT_EXPORT int jr_client_job_show(jr_client_t *c, const char *queue, const char *id,
                                        jr_client_job_info_t **info);
JR_CLIENT_EXPORT void jr_client_job_info_free(jr_client_job_info_t *info);
/* jr_client_job_show with the key a job was enqueued with (since 1.2; see
 * jr_client_cancel_keyed). */
JR_CLIENT_EXPORT int jr_client_job_show_keyed(jr_client_t *c, const char *queue, const char *id, const char *key,
                                              jr_client_job_info_t **info);

/* ---- waiting for a job's end (since 1.3) ---------------------------------- */

typedef enum jr_client_outcome {
    JR_CLIENT_END_OK = 0,        /* the handler succeeded */
    JR_CLIENT_END_FAILED = 1,    /* it failed for good: in the dead-letter stream */
    JR_CLIENT_END_CANCELLED = 2, /* cancelled while it ran */
    JR_CLIENT_END_UNKNOWN = 3,   /* not waiting, running, dead or kept: never there, or it finished
                                    before the wait began in a queue without keep_finished (the two
                                    cannot be told apart) */
    JR_CLIENT_END_TIMEOUT = 4    /* it had not finished within the timeout */
} jr_client_outcome_t;

/* How a job ended. Strings are NUL-terminated; result and error also have
 * lengths (binary-safe). Free with jr_client_end_free. */
typedef struct jr_client_end {
    jr_client_outcome_t outcome;
    const char *outcome_name; /* "ok", "failed", "cancelled", "unknown", "timeout" */
    char *result;             /* api->set_result's result, NULL if none */
    size_t result_len;
    char *error;              /* the error of a failure, NULL if none */
    size_t error_len;
    int64_t attempt;          /* the attempt that ended it; 0 = not known */
    double duration_ms;       /* its run time; -1 = not known */
    char worker[128];         /* who ran it ("host-pid"); "" = not known */
    int64_t finished_ms;      /* when (Redis's clock, Unix ms); 0 = not known */
} jr_client_end_t;

/* Wait until job `id` of `queue` (NULL = "default") has finished, at most
 * timeout_ms (1..): returns 0 with *end filled (outcome TIMEOUT when it had
 * not). One atomic call registers the wait and looks at the job (a job
 * finished with a record, dead, or nowhere is answered at once); then the
 * call blocks in Redis, woken only by the end of a job someone waits for
 * in that queue: no polling. The connection is blocked meanwhile (give the
 * wait a client of its own when others use it). A job of a partitioned
 * queue is found by its id (the partition it carries); key as in
 * jr_client_job_show_keyed (NULL = none). What a job's end tells a waiter
 * is written in the call that acknowledges, dead-letters or cancels it
 * (docs/redis-contract.md, Finished jobs). */
JR_CLIENT_EXPORT int jr_client_wait(jr_client_t *c, const char *queue, const char *id, const char *key,
                                    int64_t timeout_ms, jr_client_end_t *end);
JR_CLIENT_EXPORT void jr_client_end_free(jr_client_end_t *end);

/* ---- queues -------------------------------------------------------------- */

typedef struct jr_client_stats {
    int64_t ready;           /* in the stream, not yet delivered */
    int64_t pending;         /* delivered to a worker, not yet finished */
    int64_t delayed;         /* waiting for their due time (and retries) */
    int64_t dead;            /* in the dead-letter stream */
    int64_t processed;       /* total finished with success */
    int64_t failed;          /* total failed attempts */
    double jobs_per_second;  /* processed per second over the last minute */
    int64_t oldest_ready_ms; /* how long the oldest ready job has waited; -1 = none */
    int paused;              /* 1 if paused, 0 if not, -1 if unknown (see jr_client_stats) */
    int64_t paused_since_ms; /* when paused (Unix ms); -1 if not */
} jr_client_stats_t;

/* The counts of one queue (NULL = "default"); an unknown queue has zeros.
 * A count that cannot be read because its key holds another type (garbage
 * written by something else) is -1, the call still returns 0, and
 * jr_client_errstr(c) names the key; the other counts stand. */
JR_CLIENT_EXPORT int jr_client_stats(jr_client_t *c, const char *queue, jr_client_stats_t *stats);

/* Pause a queue: workers start none of its jobs until it is resumed
 * (enqueueing goes on; running jobs finish). Resume undoes it. Both wake the
 * blocked workers at once (best effort: otherwise they see it within one
 * worker.block). *changed (may be NULL) = 0 if it already was so. */
JR_CLIENT_EXPORT int jr_client_pause(jr_client_t *c, const char *queue, int *changed);
JR_CLIENT_EXPORT int jr_client_resume(jr_client_t *c, const char *queue, int *changed);

#ifdef __cplusplus
}
#endif

#endif
