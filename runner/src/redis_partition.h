/* Partitioned queues, the Redis side (partition.h has the pure rules): the
 * counts of JR_PARTITIONS_KEY cached per process, setting a count
 * (jr_partitions_set), enqueueing to a queue that may be partitioned, and
 * finding the partition of one job for a lookup by id.
 * See redis.h for the connection and the conventions shared by every call. */
#ifndef JR_REDIS_PARTITION_H
#define JR_REDIS_PARTITION_H

#include "partition.h"
#include "redis.h"
#include "redis_admin.h"
#include "redis_produce.h"

/* One queue's partitions as read from Redis. */
typedef struct jr_qpart {
    char queue[JR_QUEUE_MAX + 1];
    unsigned n;                          /* 1 = not partitioned */
    char (*names)[JR_INTERNAL_QUEUE_MAX + 1]; /* n internal names (n > 1), NULL when n == 1 */
    unsigned next;                       /* the round robin of jobs with neither key nor id */
    int64_t read_us;                     /* monotonic us of the read */
} jr_qpart_t;

/* The counts this process knows, one entry per queue asked about. */
typedef struct jr_partmap {
    jr_qpart_t *v;
    size_t n, cap;
    int64_t max_age_us; /* an entry older than this is read again; 0 = never */
} jr_partmap_t;

void jr_partmap_free(jr_partmap_t *m);

/* The partitions of queue q (a valid queue name): cached, else one HGET of
 * JR_PARTITIONS_KEY. *out points into m (valid until the next call on m).
 * A field that is not a count 1..1024 is an error naming the key and the
 * queue (JR_EREDIS, the connection stays usable). */
int jr_partmap_get(jr_partmap_t *m, jr_redis_t *r, const char *q, jr_qpart_t **out);

/* Read the counts of queues[0..n) (valid queue names) again in one HMGET
 * and keep them in m (as jr_partmap_get would, read now). Errors as
 * jr_partmap_get's; on error m keeps what it held. */
int jr_partmap_refresh(jr_partmap_t *m, jr_redis_t *r, const char *const *queues, size_t n);

/* The internal queue of partition i of p (p->queue itself when n == 1). */
const char *jr_qpart_name(const jr_qpart_t *p, unsigned i);

/* The partition of an internal queue name of p (Q#J), or -1. */
int jr_qpart_index(const jr_qpart_t *p, const char *internal);

/* jr_redis_stats of every partition of p and of p->queue itself (a
 * producer unaware of the partitions may put jobs there), summed (one
 * queue when p->n == 1):
 * the counts add up (a -1 count of garbage stays -1), the rate too, the
 * oldest ready job is the oldest of all; problem names the first bad key. */
int jr_redis_stats_parts(jr_redis_t *r, const jr_qpart_t *p, jr_qstats_t *s);

/* Set the partitions of queue q to n (1..1024; 1 = not partitioned): HGET,
 * then one FCALL jr_partitions_set over the keys of q and of every
 * partition of the current and the new count, which refuses while any of
 * them holds a job (the message names the queue, both counts and what it
 * holds). *before = the count before. Where Redis refuses that call as
 * CROSSSLOT (a Redis Cluster: the keys span slots), it is done as
 * jr_redis_partitions_set_split does. */
int jr_redis_partitions_set(jr_redis_t *r, const char *q, unsigned n, unsigned *before);

/* The cluster way (docs/redis-contract.md "Partitions"): jr_redis_stats of
 * q and of every partition of both counts (each a call of one slot), a
 * refusal in C with the same message when any holds a job, else FCALL
 * jr_partitions_set with the hash key alone (which still refuses if the
 * count changed meanwhile). Not atomic: a job enqueued between the reads
 * and the write is not seen. */
int jr_redis_partitions_set_split(jr_redis_t *r, const char *q, unsigned n, unsigned *before);

/* Set the counts of the configuration's queues section (pairs queue,
 * count: jr_config_t.queue_partitions) with jr_redis_partitions_set, as a
 * worker or scheduler does at start: a change is logged; a refusal (the
 * queue holds jobs) is logged as an error naming the queue and what it
 * holds, and the count in Redis stays. Returns 0 or a transport error. */
int jr_partitions_apply(jr_redis_t *r, const jr_strlist_t *pairs);

/* The internal queue and id of job `id` of queue q for a lookup (job show,
 * cancel, run-now, delete): the partition in a generated id's "~<i>", else
 * of the key (key non-NULL, non-empty), else of the id. iq gets the
 * internal queue name, iid the id as stored. One HGET at most (cached). */
int jr_partition_locate(jr_partmap_t *m, jr_redis_t *r, const char *q, const char *id, const char *key,
                        char iq[JR_INTERNAL_QUEUE_MAX + 1], char iid[JR_ID_MAX]);

/* jr_redis_enqueue_each for jobs of queues that may be partitioned: each
 * job of a queue of N > 1 partitions goes to partition hash(keys[i]) mod N
 * when keys (may be NULL) has keys[i] non-NULL and non-empty, else
 * hash(id) mod N for an explicit id, else the next partition of the
 * queue's round robin; then one call per partition and chunk, as
 * jr_redis_enqueue_each does. A generated id of a job in partition i comes
 * back as "<id>~<i>" (partition.h). A queue name holding '#' (or otherwise
 * not a queue name) goes as it is: jr_redis_enqueue_each refuses the call,
 * nothing sent. Reading a count may fail before anything is sent: then
 * every job is NOT_SENT. */
int jr_redis_enqueue_parts(jr_redis_t *r, jr_partmap_t *m, const jr_enqueue_t *jobs, const char *const *keys,
                           size_t n, char (*ids)[JR_ID_MAX], jr_enq_outcome_t *out, jr_strlist_t *reasons);

#endif
