/* The worker's calls: consumer groups, blocking and paused-aware reads,
 * acknowledgements (with follow-ups), failures, hand-backs, leases
 * (heartbeat), reclaiming stalled entries, cancel flags.
 * See redis.h for the connection and the conventions shared by every call. */
#ifndef JR_REDIS_WORKER_H
#define JR_REDIS_WORKER_H

#include "redis.h"

/* Create the consumer group of each queue if missing (stream too). Looks
 * first (XINFO GROUPS, pipelined) and writes only for what is missing, so it
 * works in an out-of-memory Redis when every group exists. With bad (n
 * flags), a queue whose look is refused (its stream key holds another type)
 * gets bad[i] = 1 and is skipped, the others are set up, and the first
 * refusal's text is left in jr_redis_errstr (empty if none). */
int jr_redis_ensure_groups(jr_redis_t *r, const char *const *queues, size_t n, unsigned char *bad);

/* Send XREADGROUP GROUP jr <consumer> COUNT count BLOCK block_ms STREAMS
 * <ready keys> > ... for the queues (any number), without waiting. COUNT is
 * per stream: the reply may hold up to n x count entries. */
int jr_redis_send_read(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                       int64_t count, int64_t block_ms);
/* Read its reply into *b (empty batch on timeout or unblock). A stream of
 * none of the queues in the reply is JR_EPROTO. */
int jr_redis_recv_read(jr_redis_t *r, jr_batch_t *b, const char *const *queues, size_t n);

/* How a job ended, for its finished record (keep_finished) and its waiters
 * (job wait): see redis_finished.h and docs/redis-contract.md, Finished
 * jobs. The strings are read while the call is appended only. */
typedef struct jr_end_rec {
    const char *entry, *jobid;       /* jobid NULL or "" = the entry id */
    int64_t keep_count, keep_age_ms; /* keep_finished; count 0 = no record (waiters are told still) */
    const char *handler;             /* NULL = "" */
    uint32_t attempt;
    int64_t duration_us;             /* the attempt's run time */
    const char *result;              /* api->set_result, result_len bytes; NULL = none */
    size_t result_len;
} jr_end_rec_t;

/* Append (not send) an acknowledge-and-remove of stream entries of a queue
 * (the 1-key jr_ack; integer reply). Workers use jr_redis_append_ack_report. */
int jr_redis_append_ack(jr_redis_t *r, const char *queue, const char *const *ids, size_t n);

/* Append a failed attempt's outcome for a stream entry this consumer holds:
 * action "retry" (attempt+1, due after delay_ms) or "dead" (into the dead
 * stream, trimmed to about dead_max, with error and why), counted as failed
 * in the stats and this minute of the history. Its reply is an integer:
 * 1 done, 0 if the entry is no longer ours. */
int jr_redis_append_fail(jr_redis_t *r, const char *queue, const char *entry, const char *consumer,
                         const char *action, int64_t delay_ms, const char *error, const char *why,
                         int64_t dead_max);
/* jr_redis_append_fail in the worker's form (revision 20): a job that ends
 * here (dead, or cancelled while it ran) gets its finished record when
 * rec->keep_count > 0, and its waiters are told; rec NULL = keep nothing
 * (waiters are told still). Same reply. */
int jr_redis_append_fail_end(jr_redis_t *r, const char *queue, const char *entry, const char *consumer,
                             const char *action, int64_t delay_ms, const char *error, const char *why,
                             int64_t dead_max, const jr_end_rec_t *rec);

/* Append the acknowledgement of an entry of `queue` together with the
 * follow-up jobs its handler enqueued (fu: followup.h encoding, at least
 * one): if register_targets, first FCALL jr_register of the target queues;
 * then FCALL jr_ack_follow. Replies: jr_register's (an integer) if sent,
 * then an integer:
 * 1 = acknowledged and every follow-up written, 0 = the entry was not
 * pending (acknowledged already, by us or a worker that took it over):
 * nothing written. A refusal ("ERR jobrunner: jr_ack_follow: ...") wrote
 * nothing either. Returns 0, JR_EINVAL for a corrupt fu (nothing
 * appended), or an error. */
int jr_redis_append_ack_follow(jr_redis_t *r, const char *queue, const char *entry, const char *fu,
                               size_t fu_len, int register_targets);
/* The same in the worker's form (revision 20): with the job's end for its
 * record and waiters (rec; its entry is `entry`), consumer = who ran it. */
int jr_redis_append_ack_follow_end(jr_redis_t *r, const char *queue, const char *entry, const char *fu,
                                   size_t fu_len, int register_targets, const char *consumer,
                                   const jr_end_rec_t *rec);

/* Append a hand-back of entries fetched but never started. Integer reply. */
int jr_redis_append_handback(jr_redis_t *r, const char *queue, const char *consumer,
                             const char *const *ids, size_t n);

/* Extend the lease of running entries. lost[i] = 1 for each entry no longer
 * held by this consumer; unless cancelled is NULL, cancelled[i] = 1 for each
 * one held that was cancelled (jr_cancel). Returns how many were lost, or an
 * error. With cancelled, jr_redis_errstr then names the queue's job index,
 * cancel flags or stats key if one holds garbage (which jr_ack, jr_fail
 * and the others leave alone, revision 15), and is empty otherwise. */
int jr_redis_heartbeat(jr_redis_t *r, const char *queue, const char *consumer,
                       const char *const *ids, size_t n, unsigned char *lost, unsigned char *cancelled);

/* One XAUTOCLAIM step over the entries of `queue` idle longer than min_idle:
 * claimed entries come into *b (queue index qi), poison ones go to the dead
 * stream. cursor (JR_ID_MAX bytes) is read and updated ("0-0" = done).
 * *deleted = ids Redis found deleted, *poisoned = entries buried. */
int jr_redis_reclaim(jr_redis_t *r, const char *queue, uint32_t qi, const char *consumer,
                     int64_t min_idle_ms, char *cursor, int64_t count, int64_t max_deliveries,
                     int64_t dead_max, jr_batch_t *b, long long *deleted, long long *poisoned);

/* 1 if the running entry was cancelled (HEXISTS jr:{Q}:cancelled entry),
 * 0 if not, or an error. */
int jr_redis_entry_cancelled(jr_redis_t *r, const char *queue, const char *entry);

/* Which of the entries ids[] of `queue` were cancelled: one HMGET of
 * jr:{Q}:cancelled (a read). cancelled[i] = 1 for those. Returns how many,
 * or an error. */
int jr_redis_cancelled_entries(jr_redis_t *r, const char *queue, const char *const *ids, size_t n,
                               unsigned char *cancelled);

/* Append jr_ack's reporting form (the worker's): each entry, with its job
 * id when jobids is not NULL (NULL or "" when the job id is the entry id),
 * and the keys jr:{Q}:cancelled jr:{Q}:stats jr:{Q}:waiters jr:{Q}:done
 * jr:{Q}:history after them, so the reply (jr_redis_recv_ack) says which
 * of the acknowledged entries were flagged cancelled (the check is part of
 * the acknowledgement, atomic with it), and a job someone waits for (job
 * wait) has its end written for the waiter (outcome, when; revision 20: one
 * EXISTS of jr:{Q}:waiters per call when nobody waits). The jobs are counted
 * in the stats and in this minute of the history. */
int jr_redis_append_ack_report(jr_redis_t *r, const char *queue, const char *const *entries,
                               const char *const *jobids, size_t n);
/* jr_redis_append_ack_report's record form (revision 20), for a batch in
 * which some job is kept (keep_finished) or has a result: one jr_ack with
 * every job's end (recs, n), consumer = who ran them. Same reply. */
int jr_redis_append_ack_records(jr_redis_t *r, const char *queue, const char *consumer, const jr_end_rec_t *recs,
                                size_t n);

/* Read the reply of jr_redis_append_ack_report: *n acknowledged, and in
 * *flagged (malloc'd strings in a malloc'd array, the caller frees both;
 * NULL when none) the entries that were flagged cancelled. An error reply
 * is JR_EREDIS, a reply of another shape JR_EPROTO (nothing returned). */
int jr_redis_recv_ack(jr_redis_t *r, long long *n, char ***flagged, size_t *nflagged);

/* One pipeline without blocking: for each queue i with counts[i] > 0,
 * XREADGROUP ... COUNT counts[i] STREAMS <ready i> >; then HMGET of the
 * paused state of all n queues, which Redis runs after the reads. Waits for
 * every reply: the entries go into *b (queue index i, queue by queue in
 * order), paused[i] = 1 if queue i is paused (as of just after the reads:
 * entries of a queue paused meanwhile are to be handed back). An error reply
 * to a read counts as that queue empty and makes the call return JR_EREDIS
 * with its text, b holding the other queues' entries (delivered to this
 * consumer: the caller starts them before it acts on the error); for a
 * queue whose Redis Cluster primary is down (cluster.c) the read counts as
 * empty and is no error. */
int jr_redis_read_each(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                       const int64_t *counts, jr_batch_t *b, unsigned char *paused);

/* Send, without waiting: XREADGROUP ... COUNT count BLOCK block_ms over the
 * queues i with on[i] (or, when none is on, XREAD BLOCK block_ms on
 * JR_RESUMED_KEY, which only the timeout or CLIENT UNBLOCK ends; Redis's
 * refusal of that wait, as when the key holds garbage, is no error: see
 * jr_redis_resumed_refused), then, if
 * with_paused, HMGET of the paused state of all n queues (run by Redis
 * after the read returns). Read the replies with jr_redis_recv_read_paused
 * (any_on = some on[i]; paused = NULL when sent without the HMGET). One
 * write, carrying also whatever was appended on r before (the worker's
 * acknowledgements: their replies come first). */
int jr_redis_send_read_paused(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                              const unsigned char *on, int64_t count, int64_t block_ms, int with_paused);
int jr_redis_recv_read_paused(jr_redis_t *r, jr_batch_t *b, const char *const *queues, size_t n, int any_on,
                              unsigned char *paused);

/* Every read of the paused set above takes a refusal (JR_PAUSED_KEY holds
 * another type) as no queue paused, so garbage there costs pausing only.
 * This is Redis's text of the last read's refusal, "" when it was read. */
const char *jr_redis_paused_refused(const jr_redis_t *r);
/* Redis's text of its refusal of the last wait on JR_RESUMED_KEY (the key
 * holds another type: the wait ended at once), "" when it waited. */
const char *jr_redis_resumed_refused(const jr_redis_t *r);

#endif
