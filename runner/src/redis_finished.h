/* Finished jobs (keep_finished) and the waits on a job's end (job wait):
 * the reading side of jr:{Q}:finished, jr:{Q}:finished:ids, jr:{Q}:waiters
 * and jr:{Q}:done (docs/redis-contract.md, "Finished jobs"). The records
 * are written by the worker's calls (jr_ack, jr_ack_follow, jr_fail) in the
 * same FCALL as the acknowledgement; nothing here writes a record.
 * See redis.h for the connection and the conventions shared by every call. */
#ifndef JR_REDIS_FINISHED_H
#define JR_REDIS_FINISHED_H

#include "redis.h"

/* The fields of a finished record, an entry of jr:{Q}:finished, in this
 * order; err and result only when there is one. */
#define JR_FIN_ID "id"              /* the job id */
#define JR_FIN_HANDLER "h"          /* its handler */
#define JR_FIN_OUTCOME "outcome"    /* ok | failed (dead-lettered) | cancelled */
#define JR_FIN_ATTEMPT "a"          /* the attempt that ended it */
#define JR_FIN_DURATION "duration_ms" /* the attempt's run time, ms (3 decimals) */
#define JR_FIN_WORKER "worker"      /* the consumer that ran it */
#define JR_FIN_AT "finished_at"     /* Redis's TIME when recorded, Unix ms */
#define JR_FIN_ERROR "err"          /* the error of a failure */
#define JR_FIN_RESULT "result"      /* what the handler set with api->set_result */

/* The most a keep_finished count may be (config.c refuses more; the Lua
 * function refuses more too). */
#define JR_KEEP_FINISHED_MAX 1000000

/* A page of queue's finished records, newest first (XREVRANGE
 * jr:{Q}:finished): at most count (1..) entries into *b, each entry id the
 * record's stream entry id and its fields as above. after = NULL/"" for the
 * first page, else a cursor a page returned (the records older than it).
 * next = the cursor of the next page, "" on the last. A queue without
 * records (keep_finished off) gives an empty page. Returns 0 or an error
 * (a key of another type: JR_EREDIS with Redis's text). */
int jr_redis_finished_page(jr_redis_t *r, const char *queue, const char *after, int64_t count, jr_batch_t *b,
                           char *next, size_t nextlen);

/* The finished record of job `id` of queue, by its index entry in
 * jr:{Q}:finished:ids (HGET, then XRANGE of that one entry: no scan).
 * Returns 1 with the record as the one entry of *b, 0 when there is none
 * (never kept, or trimmed away: a stale index entry counts as none), or an
 * error. */
int jr_redis_finished_get(jr_redis_t *r, const char *queue, const char *id, jr_batch_t *b);

/* A job's end as a waiter learns it (jr_redis_job_wait). */
typedef struct jr_job_end {
    char outcome[16];  /* ok | failed | cancelled, or "unknown": neither found waiting, running nor
                          finished (never there, or finished without keep_finished before the wait) */
    char *result;      /* malloc'd, result_len bytes + a NUL; NULL = none */
    size_t result_len;
    char *error;       /* malloc'd; NULL = none */
    char attempt[24];  /* "" = unknown */
    char duration_ms[32];
    char worker[JR_PROC_NAME_MAX];
    char finished_at[24];
} jr_job_end_t;
void jr_job_end_free(jr_job_end_t *e);

/* Wait until job `id` of queue has finished, at most timeout_ms (> 0):
 * FCALL jr_wait registers the waiter and reads the job's state in one
 * atomic step (a finished record, or the job nowhere: answered at once);
 * otherwise the call blocks in XREAD BLOCK on jr:{Q}:done after the id
 * jr_wait returned, where the worker's acknowledgement, dead-lettering or
 * cancel of a job someone waits for writes its outcome. Returns 1 with
 * *end filled, 0 on timeout (end->outcome ""), or an error. The connection
 * is blocked meanwhile (use one of its own). */
int jr_redis_job_wait(jr_redis_t *r, const char *queue, const char *id, int64_t timeout_ms, jr_job_end_t *end);

#endif
