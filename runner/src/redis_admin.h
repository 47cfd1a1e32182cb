/* The operator's calls: dead letters, queue statistics, the process
 * registry and consumer pruning, pages of a queue, pause and resume.
 * See redis.h for the connection and the conventions shared by every call. */
#ifndef JR_REDIS_ADMIN_H
#define JR_REDIS_ADMIN_H

#include <limits.h>

#include "redis.h"

/* Re-enqueue dead entries (attempts reset). *moved = how many. */
int jr_redis_dead_retry(jr_redis_t *r, const char *queue, const char *const *entries, size_t n,
                        long long *moved);
/* Delete dead entries (n == 0: all of them). *removed = how many. */
int jr_redis_dead_purge(jr_redis_t *r, const char *queue, const char *const *entries, size_t n,
                        long long *removed);

/* Counts of one queue. A count whose key holds another type (garbage) is
 * -1 and `problem` names the first such key ("" when every key was read):
 * garbage in one key costs only the counts it holds, and the call returns
 * 0. A refusal of another kind, or a broken connection, is returned. */
typedef struct jr_qstats {
    long long ready;   /* in the stream, not yet delivered */
    long long pending; /* delivered to a worker, not yet acknowledged */
    long long delayed; /* waiting for their due time */
    long long dead;    /* in the dead-letter stream */
    long long processed, failed; /* totals from jr:{Q}:stats: jobs finished with success; failed attempts */
    double rate;                 /* jobs processed per second over the last minute */
    long long oldest_ready_ms;   /* how long the oldest ready job has waited in the stream; -1 = none */
    char problem[JR_KEY_MAX + 48]; /* 'key "jr:{Q}:..." holds another type', or "" */
} jr_qstats_t;
int jr_redis_stats(jr_redis_t *r, const char *queue, jr_qstats_t *s);

/* The last `minutes` minutes (1..JR_HISTORY_MINUTES) of queue `queue` (a
 * queue or an internal partition name) from its history jr:{Q}:history,
 * which the workers' acknowledgements and failures write (jr_ack,
 * jr_ack_follow, jr_fail; docs/redis-contract.md, History): processed[i]
 * (jobs finished with success) and failed[i] (failed attempts) of minute
 * *start_minute + i, oldest first, the last one the current minute by
 * Redis's clock (minutes are Unix seconds / 60). A minute with no entry, a
 * slot holding another minute (a day old) or a value that is not a count
 * is 0. Two round trips: TIME, then one HMGET of those slots. Returns 0;
 * JR_EINVAL for minutes out of range; JR_EREDIS when the key holds
 * another type (WRONGTYPE, the key named) or another refusal; or a
 * connection error. */
#define JR_HISTORY_MINUTES 1440 /* the slots of the ring: 24 h */
int jr_redis_history(jr_redis_t *r, const char *queue, int64_t minutes, int64_t *start_minute,
                     long long *processed, long long *failed);

/* ---- the process registry (see docs/redis-contract.md) -------------------- */

/* The keys: JR_PROCS_KEY (contract.h) and jr:{procs}:<name>. */

/* A live jobrunner process as announced in Redis. */
typedef struct jr_proc {
    char name[JR_PROC_NAME_MAX]; /* its consumer name: host-pid */
    char role[16];               /* worker | scheduler */
    char host[HOST_NAME_MAX + 1];
    long long pid;
    char *queues;                /* comma-separated; owned, "" = every registered queue */
    char version[32];
    long long started_ms;        /* Unix ms */
    long long running;           /* jobs running at the last refresh */
    long long capacity;          /* a worker's jobs at once (worker.concurrency; 1 inline); 0 = not said
                                    (a scheduler, or a worker before this field) */
    long long lease_ms;          /* the key lives this long after each refresh */
    long long seen_ago_ms;       /* since the last refresh, by Redis's clock */
    long long client_id;         /* a worker's CLIENT ID of its blocking read connection, 0 = none
                                    (`pause` and `resume` CLIENT UNBLOCK it to wake the worker) */
} jr_proc_t;

/* Announce or refresh p (name, role, host, pid, queues, version, started,
 * running, lease_ms): one MULTI/EXEC writing the hash jr:{procs}:<name> with
 * a time to live of p->lease_ms and its name into JR_PROCS_KEY. */
int jr_redis_proc_announce(jr_redis_t *r, const jr_proc_t *p);
/* Renew the time to live of a process's entry (PEXPIRE, one command):
 * *renewed = 1, or 0 if the entry is gone (announce it again in full). */
int jr_redis_proc_renew(jr_redis_t *r, const char *name, long long lease_ms, int *renewed);
/* Remove a process's entry at once (clean exit). */
int jr_redis_proc_remove(jr_redis_t *r, const char *name);
/* The live processes, oldest first (*out malloc'ed, free with
 * jr_procs_free). Names whose hash has expired are dropped from the index
 * on the way (jr_procs_forget; best effort: a refusal is ignored). A name
 * whose key holds another type (garbage) is left out, and the first such
 * is described in jr_redis_errstr (empty when there was none), so one bad
 * entry never hides the others. */
int jr_redis_proc_list(jr_redis_t *r, jr_proc_t **out, size_t *n);
void jr_procs_free(jr_proc_t *v, size_t n);
/* Remove from `queue`'s group the consumers with no pending entry, idle at
 * least min_idle_ms and not named in live (jr_prune_consumers: atomic, so
 * a consumer holding an entry is never removed). *removed = how many. */
int jr_redis_prune_consumers(jr_redis_t *r, const char *queue, const char *const *live, size_t nlive,
                             int64_t min_idle_ms, long long *removed);
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
/* A page of queue's delayed jobs, both tiers (FCALL jr_delayed_page): *b as
 * for jr_redis_zrange_page; after = NULL/"" or a cursor a page returned;
 * next = the cursor of the next page ("" at the end). */
int jr_redis_delayed_page(jr_redis_t *r, const char *queue, const char *after, int64_t count, jr_batch_t *b,
                          char *next, size_t nextlen);

/* known[i] = 1 if queues[i] was ever used, as Redis holds it: in the
 * registry (every queue ever enqueued to; a partition Q#J stands for Q),
 * paused, or one of its keys exists (ready, delayed, dead, the time wheel,
 * stats: jobs written by a producer that does not register). Costs one
 * SMEMBERS of the registry and, for the queues not in it, one HMGET of the
 * paused hash and one EXISTS each: no scan. */
int jr_redis_queues_known(jr_redis_t *r, const char *const *queues, size_t n, unsigned char *known);

/* Remove queue q (`jobrunner queue remove`): refused (JR_EREDIS, the
 * reason in jr_redis_errstr naming what is in the way) while it is
 * partitioned, while a live worker or scheduler names it in its queues, or
 * while it holds a job (ready, running, delayed, retrying, dead: checked
 * and deleted in one atomic call, jr_queue_remove, with every key of it).
 * Then its registration: SREM from the registry, HDEL from the paused set
 * and the partition counts (another slot: after the keys). *deleted = the
 * keys that existed. Its idempotency keys (jr:{Q}:uniq:ID) are not
 * touched: they end with their window. A producer still connected that
 * registered q before re-registers it only on its next connection. */
int jr_redis_queue_remove(jr_redis_t *r, const char *q, long long *deleted);

/* paused[i] = 1 if queues[i] is paused now (one HMGET). */
int jr_redis_paused(jr_redis_t *r, const char *const *queues, size_t n, unsigned char *paused);
/* since_ms[i] = when queues[i] was paused (Unix ms), -1 if it is not. */
int jr_redis_paused_since(jr_redis_t *r, const char *const *queues, size_t n, long long *since_ms);

/* Pause (on = 1: HSETNX, keeping the first time) or resume (HDEL) a queue;
 * *changed = 0 if it already was so. Workers are not woken here. */
int jr_redis_pause(jr_redis_t *r, const char *queue, int on, int64_t now_ms, int *changed);

/* Redis's own description of itself: INFO `section` ("server", "memory",
 * "replication", ...) as text into *text (malloc'd; free()). A refusal (an
 * ACL without INFO) is JR_EREDIS with Redis's text. */
int jr_redis_server_info(jr_redis_t *r, const char *section, char **text);

#endif
