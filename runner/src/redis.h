/* The Redis layer: connections, the Function library, and one typed call per
 * operation jobrunner performs. hiredis types never leave redis.c.
 *
 * All I/O goes through poll() with our own deadlines, so a blocking command
 * (XREADGROUP BLOCK, XREAD BLOCK) can be waited on with a precise client-side timer
 * and interrupted by a signal pipe, and a slow reply never kills the context
 * the way a hiredis socket timeout does. Any transport error leaves the
 * connection broken (jr_redis_ok() == 0): the caller frees it and reconnects. */
#ifndef JR_REDIS_H
#define JR_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "envelope.h"

typedef struct jr_redis jr_redis_t;

#define JR_QUEUE_MAX 128 /* longest queue name */
#define JR_KEY_MAX (JR_QUEUE_MAX + 32)
#define JR_ID_MAX 160    /* longest job id */
#define JR_GROUP "jr"

/* Connect to `url` (see jr_redis_url_parse), authenticate (AUTH [user]
 * password; without a password, a PING checks that none is needed) and
 * select the db. `timeout_ms` bounds the connect and every non-blocking
 * command. Returns NULL with a message in err if that fails; the password is
 * never in it, Redis's own error text always is ("Redis at URL refused the
 * password for user "u" (WRONGPASS ...)", "... requires a password
 * (NOAUTH ...)"). */
jr_redis_t *jr_redis_connect(const char *url, int64_t timeout_ms, char *err, size_t errlen);
void jr_redis_free(jr_redis_t *r);

/* The last error on this connection ("" if none). */
const char *jr_redis_errstr(const jr_redis_t *r);
/* 1 while the connection is usable; 0 after a transport error. */
int jr_redis_ok(const jr_redis_t *r);

/* Make sure Redis has the embedded function library. Writes nothing (works
 * in an out-of-memory Redis) when Redis holds our code already. Otherwise
 * line 2 of the code ("-- jobrunner: contract C, revision R.") decides:
 * missing, an older revision, or other code of our revision -> FUNCTION LOAD
 * REPLACE ours; a newer revision of our contract -> kept (it serves us: a
 * contract only grows), see jr_redis_library_kept; a newer contract ->
 * JR_EPROTO, this process is too old. The check and the load run under the
 * lock key jr:{lib}:loading (SET NX PX 10 s), so an older process starting
 * beside a newer one never replaces the newer library. Errors carry Redis's
 * text. */
int jr_redis_load_library(jr_redis_t *r);
/* The newer revision jr_redis_load_library found and kept, or 0. */
long jr_redis_library_kept(const jr_redis_t *r);
/* Parse line 2 of a library's code. 0, or -1 when it has no such line. */
int jr_lua_revision(const char *code, size_t len, long *contract, long *revision);

/* CLIENT ID of this connection / CLIENT UNBLOCK another one. */
int jr_redis_client_id(jr_redis_t *r, long long *id);
int jr_redis_unblock(jr_redis_t *r, long long client_id);

/* CONFIG GET maxmemory-policy into buf ("" if not readable). */
int jr_redis_maxmemory_policy(jr_redis_t *r, char *buf, size_t len);

/* 1 if q is a valid queue name: 1..JR_QUEUE_MAX of [A-Za-z0-9_.:-]. */
int jr_queue_name_valid(const char *q);

/* The keys of a queue (see runner/lua/jobrunner.lua). */
typedef struct jr_qkeys {
    char ready[JR_KEY_MAX], delayed[JR_KEY_MAX], wake[JR_KEY_MAX],
        seq[JR_KEY_MAX], dead[JR_KEY_MAX];
} jr_qkeys_t;
void jr_qkeys(jr_qkeys_t *k, const char *queue);
#define JR_REGISTRY_KEY "jr:{queues}"
#define JR_REGISTRY_WAKE_KEY "jr:{queues}:wake"

/* One job to enqueue. */
typedef struct jr_enqueue {
    const char *queue;  /* a valid queue name */
    const char *id;     /* NULL = generated; otherwise idempotent */
    int64_t delay_ms;   /* > 0: due this long after Redis's now */
    int64_t at_us;      /* > 0: due at this Unix time (us); wins over delay */
    int64_t uniq_ms;    /* idempotency window after the due time; 0 = 24 h */
    jr_envelope_t env;  /* handler, payload, max_attempts, timeout_ms */
} jr_enqueue_t;

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
    JR_ENQ_UNKNOWN       /* sent, but the connection failed before its answer */
};
typedef struct jr_enq_outcome {
    unsigned char status; /* JR_ENQ_* */
    uint32_t why;         /* when not CREATED/EXISTED: index of the reason in `reasons`
                             (UINT32_MAX: none kept, see jr_redis_errstr) */
} jr_enq_outcome_t;

/* Enqueue n jobs, any mix of queues in any order: one FCALL jr_enqueue_many
 * per queue and run of up to 1000 of its jobs (jobs sorted by queue, each
 * queue's in their order), registering their queues once per connection,
 * pipelined 16,000 jobs at a time. Every job is checked first (valid queue
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
 * were written. */
int jr_redis_enqueue_each(jr_redis_t *r, const jr_enqueue_t *jobs, size_t n, char (*ids)[JR_ID_MAX],
                          jr_enq_outcome_t *out, jr_strlist_t *reasons);

/* Bound every later non-blocking command by timeout_ms (> 0) instead of the
 * connect timeout. */
void jr_redis_set_timeout(jr_redis_t *r, int64_t timeout_ms);

/* Take up to `limit` due members of `queue`'s delayed set: envelopes into
 * the ready stream, garbage into the dead stream (trimmed to about
 * dead_max). *moved = members taken, *buried = of those, how many were
 * garbage. *next_due_ms = earliest due time left (-1 if none) and *now_ms =
 * Redis's time of the call, both Unix ms; wake_id (JR_ID_MAX bytes) = the
 * queue's last wake entry id. */
int jr_redis_promote(jr_redis_t *r, const char *queue, int64_t limit, int64_t dead_max,
                     int64_t *moved, int64_t *buried, double *next_due_ms, double *now_ms,
                     char *wake_id);

/* Every registered queue (replaces *out's contents), and the registry's last
 * wake entry id into wake_id (JR_ID_MAX bytes). */
int jr_redis_queues(jr_redis_t *r, jr_strlist_t *out, char *wake_id);

/* Send XREAD BLOCK timeout_ms STREAMS <keys> <ids> without waiting for the
 * reply: blocks until an entry newer than ids[i] arrives in keys[i]. Redis
 * ends the block only on its hz tick: the timeout is a backstop, the
 * caller's timer (jr_redis_wait) is the precise one. */
int jr_redis_send_wake_read(jr_redis_t *r, const char *const *keys, char (*ids)[JR_ID_MAX],
                            size_t n, int64_t timeout_ms);
/* Read its reply: for each stream that had entries, ids[i] becomes the
 * newest id and fired[i] = 1 (others 0). Returns how many fired. */
int jr_redis_recv_wake_read(jr_redis_t *r, const char *const *keys, char (*ids)[JR_ID_MAX],
                            unsigned char *fired, size_t n);

/* Wait until a reply can be read, `timeout_us` passes (-1 = forever), or
 * `extra_fd` (-1 = none) becomes readable. Returns JR_WAIT_* or an error. */
enum { JR_WAIT_TIMEOUT = 0, JR_WAIT_READY = 1, JR_WAIT_EXTRA = 2 };
int jr_redis_wait(jr_redis_t *r, int64_t timeout_us, int extra_fd);

/* The connection's socket, to poll() next to other fds, and whether a
 * reply is already buffered (then poll would not report it). */
int jr_redis_fd(const jr_redis_t *r);
int jr_redis_has_reply(jr_redis_t *r);

/* Create the consumer group of each queue if missing (stream too). Looks
 * first (XINFO GROUPS, pipelined) and writes only for what is missing, so it
 * works in an out-of-memory Redis when every group exists. */
int jr_redis_ensure_groups(jr_redis_t *r, const char *const *queues, size_t n);

/* A batch of stream entries read by XREADGROUP. Pointers stay valid until
 * the next jr_redis_recv_read or jr_batch_free on the batch. */
typedef struct jr_entry {
    uint32_t queue; /* index into the queues given to send_read */
    const char *id; /* stream entry id */
    size_t nfields;
    int odd; /* 1 if the entry had an odd number of field/value items */
    const char *const *names, *const *values;
    const size_t *name_lens, *value_lens;
} jr_entry_t;
typedef struct jr_batch {
    jr_entry_t *v;
    size_t n, cap;
    const char **strs; /* storage behind names/values */
    size_t *lens;
    size_t nstrs, strcap;
    void *reply; /* owned */
    void **more; /* further replies owned (jr_redis_read_each) */
    size_t nmore, morecap;
} jr_batch_t;
void jr_batch_free(jr_batch_t *b);

/* Send XREADGROUP GROUP jr <consumer> COUNT count BLOCK block_ms STREAMS
 * <ready keys> > ... for the queues (any number), without waiting. COUNT is
 * per stream: the reply may hold up to n x count entries. */
int jr_redis_send_read(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                       int64_t count, int64_t block_ms);
/* Read its reply into *b (empty batch on timeout or unblock). A stream of
 * none of the queues in the reply is JR_EPROTO. */
int jr_redis_recv_read(jr_redis_t *r, jr_batch_t *b, const char *const *queues, size_t n);

/* Append (not send) an acknowledge-and-remove of stream entries of a queue. */
int jr_redis_append_ack(jr_redis_t *r, const char *queue, const char *const *ids, size_t n);
/* Send everything appended. */
int jr_redis_flush(jr_redis_t *r);
/* Read one reply expected to be an integer (or an error reply -> JR_EREDIS). */
int jr_redis_recv_int(jr_redis_t *r, long long *v);

/* Append a failed attempt's outcome for a stream entry this consumer holds:
 * action "retry" (attempt+1, due after delay_ms) or "dead" (into the dead
 * stream, trimmed to about dead_max, with error and why). Its reply is an
 * integer: 1 done, 0 if the entry is no longer ours. */
int jr_redis_append_fail(jr_redis_t *r, const char *queue, const char *entry, const char *consumer,
                         const char *action, int64_t delay_ms, const char *error, const char *why,
                         int64_t dead_max);

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

/* Append a hand-back of entries fetched but never started. Integer reply. */
int jr_redis_append_handback(jr_redis_t *r, const char *queue, const char *consumer,
                             const char *const *ids, size_t n);

/* Extend the lease of running entries. lost[i] = 1 for each entry no longer
 * held by this consumer; unless cancelled is NULL, cancelled[i] = 1 for each
 * one held that was cancelled (jr_cancel). Returns how many were lost, or an
 * error. */
int jr_redis_heartbeat(jr_redis_t *r, const char *queue, const char *consumer,
                       const char *const *ids, size_t n, unsigned char *lost, unsigned char *cancelled);

/* One XAUTOCLAIM step over the entries of `queue` idle longer than min_idle:
 * claimed entries come into *b (queue index qi), poison ones go to the dead
 * stream. cursor (JR_ID_MAX bytes) is read and updated ("0-0" = done).
 * *deleted = ids Redis found deleted, *poisoned = entries buried. */
int jr_redis_reclaim(jr_redis_t *r, const char *queue, uint32_t qi, const char *consumer,
                     int64_t min_idle_ms, char *cursor, int64_t count, int64_t max_deliveries,
                     int64_t dead_max, jr_batch_t *b, long long *deleted, long long *poisoned);

/* Read the entries of a stream (oldest first, at most count; 0 = all) into
 * *b, as a batch of queue index 0. */
int jr_redis_xrange(jr_redis_t *r, const char *key, int64_t count, jr_batch_t *b);

/* Re-enqueue dead entries (attempts reset). *moved = how many. */
int jr_redis_dead_retry(jr_redis_t *r, const char *queue, const char *const *entries, size_t n,
                        long long *moved);
/* Delete dead entries (n == 0: all of them). *removed = how many. */
int jr_redis_dead_purge(jr_redis_t *r, const char *queue, const char *const *entries, size_t n,
                        long long *removed);

/* Counts of one queue. */
typedef struct jr_qstats {
    long long ready;   /* in the stream, not yet delivered */
    long long pending; /* delivered to a worker, not yet acknowledged */
    long long delayed; /* waiting for their due time */
    long long dead;    /* in the dead-letter stream */
    long long processed, failed; /* totals from jr:{Q}:stats: jobs finished with success; failed attempts */
    double rate;                 /* jobs processed per second over the last minute */
    long long oldest_ready_ms;   /* how long the oldest ready job has waited in the stream; -1 = none */
} jr_qstats_t;
int jr_redis_stats(jr_redis_t *r, const char *queue, jr_qstats_t *s);

/* ---- the process registry (see docs/redis-contract.md) -------------------- */

#define JR_PROCS_KEY "jr:{procs}" /* sorted set of process names, scored by start (Unix ms) */
#define JR_PROC_NAME_MAX 128

/* A live jobrunner process as announced in Redis. */
typedef struct jr_proc {
    char name[JR_PROC_NAME_MAX]; /* its consumer name: host-pid */
    char role[16];               /* worker | scheduler */
    char host[64];
    long long pid;
    char *queues;                /* comma-separated; owned, "" = every registered queue */
    char version[32];
    long long started_ms;        /* Unix ms */
    long long running;           /* jobs running at the last refresh */
    long long lease_ms;          /* the key lives this long after each refresh */
    long long seen_ago_ms;       /* since the last refresh, by Redis's clock */
    long long client_id;         /* a worker's CLIENT ID of its blocking read connection, 0 = none
                                    (`pause` and `resume` CLIENT UNBLOCK it to wake the worker) */
} jr_proc_t;

/* Announce or refresh p (name, role, host, pid, queues, version, started,
 * running, lease_ms): one MULTI/EXEC writing the hash jr:{procs}:<name> with
 * a time to live of p->lease_ms and its name into JR_PROCS_KEY. */
int jr_redis_proc_announce(jr_redis_t *r, const jr_proc_t *p);
/* Remove a process's entry at once (clean exit). */
int jr_redis_proc_remove(jr_redis_t *r, const char *name);
/* The live processes, oldest first (*out malloc'ed, free with
 * jr_procs_free). Names whose hash has expired are dropped from the index
 * on the way (best effort: a refused ZREM is ignored). */
int jr_redis_proc_list(jr_redis_t *r, jr_proc_t **out, size_t *n);
void jr_procs_free(jr_proc_t *v, size_t n);
/* Remove from `queue`'s group the consumers with no pending entry, idle at
 * least min_idle_ms and not named in live (jr_prune_consumers: atomic, so
 * a consumer holding an entry is never removed). *removed = how many. */
int jr_redis_prune_consumers(jr_redis_t *r, const char *queue, const char *const *live, size_t nlive,
                             int64_t min_idle_ms, long long *removed);

/* ---- one job by id (jr_locate, jr_cancel, jr_run_now, jr_delete) ---------- */

/* Where a job is. fields holds one entry (id: the stream entry, or the job
 * id for a delayed job) with the job's fields as stored. */
typedef struct jr_jobinfo {
    char state[16];                  /* delayed retrying ready running dead, or "not found" */
    char entry[JR_ID_MAX];           /* stream or dead entry id; "" when delayed or not found */
    char due[48];                    /* delayed, retrying: the score, Unix ms with 3 decimals */
    char consumer[JR_PROC_NAME_MAX]; /* running: who holds it */
    long long idle_ms, deliveries;   /* running: since its last delivery/heartbeat; times delivered */
    jr_batch_t fields;
} jr_jobinfo_t;
/* Locate job `id` of `queue` in one atomic read (jr_locate). */
int jr_redis_job_locate(jr_redis_t *r, const char *queue, const char *id, jr_jobinfo_t *info);
void jr_jobinfo_free(jr_jobinfo_t *info);
/* Call fn = "jr_cancel", "jr_run_now" or "jr_delete" for one job; state
 * gets its first reply element (cancel: cancelled | running | not found;
 * run_now, delete: the state before), detail the second (run_now: the
 * entry id; delete: "1" if deleted, else "0"). */
int jr_redis_job_change(jr_redis_t *r, const char *fn, const char *queue, const char *id, char *state,
                        size_t statelen, char *detail, size_t detaillen);

/* 1 if the running entry was cancelled (HEXISTS jr:{Q}:cancelled entry),
 * 0 if not, or an error. */
int jr_redis_entry_cancelled(jr_redis_t *r, const char *queue, const char *entry);

/* Which of the entries ids[] of `queue` were cancelled: one HMGET of
 * jr:{Q}:cancelled (a read). cancelled[i] = 1 for those. Returns how many,
 * or an error. */
int jr_redis_cancelled_entries(jr_redis_t *r, const char *queue, const char *const *ids, size_t n,
                               unsigned char *cancelled);

/* Append jr_ack's form with the job index: each entry with its job id
 * (NULL or "" when the job id is the entry id). Integer reply. */
int jr_redis_append_ack_ids(jr_redis_t *r, const char *queue, const char *const *entries,
                            const char *const *jobids, size_t n);

/* XRANGE key start end COUNT count (0 = all) into *b (queue index 0). */
int jr_redis_xrange_between(jr_redis_t *r, const char *key, const char *start, const char *end, int64_t count,
                            jr_batch_t *b);
/* The group's last-delivered-id of `queue` ("0-0" without stream or group). */
int jr_redis_group_last_id(jr_redis_t *r, const char *queue, char *last);
/* One pending (running) entry. */
typedef struct jr_pending {
    char entry[JR_ID_MAX], consumer[JR_PROC_NAME_MAX];
    long long idle_ms, deliveries;
} jr_pending_t;
/* XPENDING ready jr start + count: *out malloc'd (free()), *n entries. No
 * stream or group: none. */
int jr_redis_pending_page(jr_redis_t *r, const char *queue, const char *start, int64_t count,
                          jr_pending_t **out, size_t *n);
/* ZRANGE key min +inf BYSCORE LIMIT skip count WITHSCORES into *b: one
 * entry per member, its id = the score, one field "m" = the member. */
int jr_redis_zrange_page(jr_redis_t *r, const char *key, const char *min, int64_t skip, int64_t count,
                         jr_batch_t *b);

/* ---- periodic schedules (see docs/redis-contract.md, runner/src/cron.h) --- */

#define JR_CRON_KEY "jr:{cron}"           /* hash: name -> definition (JSON) */
#define JR_CRON_LAST_KEY "jr:{cron}:last" /* hash: name -> "<tick ms> <job id>" */
#define JR_CRON_WAKE_KEY "jr:{cron}:wake" /* stream poked on every change */

/* Add or replace schedule `name` with the encoded definition `def`
 * (jr_cron_def_encode). *changed = 1 if it was new or different (then the
 * wake stream was poked), 0 if identical. Refusals: JR_EREDIS with Redis's
 * text. */
int jr_redis_cron_set(jr_redis_t *r, const char *name, const char *def, int *changed);
/* Remove a schedule and its last-fired record. *removed = 1 or 0 (none). */
int jr_redis_cron_del(jr_redis_t *r, const char *name, int *removed);
/* Record tick_ms (job job_id) as the latest tick fired of `name`, unless a
 * later one is recorded or the schedule is gone. */
int jr_redis_cron_fired(jr_redis_t *r, const char *name, int64_t tick_ms, const char *job_id);

/* One stored schedule as read (strings owned; last = "" if never fired). */
typedef struct jr_cron_entry {
    char *name, *def, *last;
} jr_cron_entry_t;
/* Every schedule (*out malloc'd, free with jr_cron_entries_free), and the
 * wake stream's last id into wake_id (JR_ID_MAX bytes), read atomically. */
int jr_redis_cron_list(jr_redis_t *r, jr_cron_entry_t **out, size_t *n, char *wake_id);
void jr_cron_entries_free(jr_cron_entry_t *v, size_t n);
/* Parse a last-fired record "<tick ms> <job id>": returns the tick (or -1
 * if malformed) and points *job at the id. */
int64_t jr_cron_last_parse(const char *last, const char **job);

/* Redis's clock (TIME) in Unix ms, with the microseconds. */
int jr_redis_time_ms(jr_redis_t *r, double *ms);

#endif

/* ---- priorities and pause (see docs/redis-contract.md) -------------------- */

#define JR_PAUSED_KEY "jr:{queues}:paused"   /* hash: paused queue -> since (Unix ms) */
#define JR_RESUMED_KEY "jr:{queues}:resumed" /* never written: workers whose queues are all
                                                paused block on it (XREAD) until woken */

/* paused[i] = 1 if queues[i] is paused now (one HMGET). */
int jr_redis_paused(jr_redis_t *r, const char *const *queues, size_t n, unsigned char *paused);
/* since_ms[i] = when queues[i] was paused (Unix ms), -1 if it is not. */
int jr_redis_paused_since(jr_redis_t *r, const char *const *queues, size_t n, long long *since_ms);

/* Pause (on = 1: HSETNX, keeping the first time) or resume (HDEL) a queue;
 * *changed = 0 if it already was so. Workers are not woken here. */
int jr_redis_pause(jr_redis_t *r, const char *queue, int on, int64_t now_ms, int *changed);

/* One pipeline without blocking: for each queue i with counts[i] > 0,
 * XREADGROUP ... COUNT counts[i] STREAMS <ready i> >; then HMGET of the
 * paused state of all n queues, which Redis runs after the reads. Waits for
 * every reply: the entries go into *b (queue index i, queue by queue in
 * order), paused[i] = 1 if queue i is paused (as of just after the reads:
 * entries of a queue paused meanwhile are to be handed back). An error reply
 * to a read is JR_EREDIS with its text (b then holds nothing usable). */
int jr_redis_read_each(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                       const int64_t *counts, jr_batch_t *b, unsigned char *paused);

/* Send, without waiting: XREADGROUP ... COUNT count BLOCK block_ms over the
 * queues i with on[i] (or, when none is on, XREAD BLOCK block_ms on
 * JR_RESUMED_KEY, which only the timeout or CLIENT UNBLOCK ends), then
 * HMGET of the paused state of all n queues (run by Redis after the read
 * returns). Read both with jr_redis_recv_read_paused (any_on = some on[i]). */
int jr_redis_send_read_paused(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                              const unsigned char *on, int64_t count, int64_t block_ms);
int jr_redis_recv_read_paused(jr_redis_t *r, jr_batch_t *b, const char *const *queues, size_t n, int any_on,
                              unsigned char *paused);
