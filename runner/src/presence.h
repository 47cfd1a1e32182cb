/* Presence: each worker and scheduler announces itself in Redis (see
 * jr_redis_proc_announce) and refreshes that every third of a lease, so it
 * is listed while it lives and gone within one lease after it dies; a clean
 * exit removes it at once. Workers also prune the consumers of stopped
 * processes from their queues' groups, once per lease. */
#ifndef JR_PRESENCE_H
#define JR_PRESENCE_H

#include <stddef.h>
#include <stdint.h>

#include "redis.h"
#include "redis_admin.h"

typedef struct jr_presence {
    jr_proc_t self;
    int64_t next_announce_us; /* monotonic; 0 = now */
    int64_t next_prune_us;    /* monotonic; 0 = now */
    int refused;              /* the last announce was refused (logged once) */
} jr_presence_t;

/* Describe this process: role "worker" or "scheduler", its consumer name,
 * the queues it serves (none = every registered queue) and lease_ms (how
 * long its entry outlives its last refresh). Returns 0 or JR_ENOMEM. */
int jr_presence_init(jr_presence_t *p, const char *role, const char *name, const char *const *queues,
                     size_t nq, int64_t lease_ms);
void jr_presence_free(jr_presence_t *p);

/* Announce now at the next jr_presence_tick (after a reconnect). */
void jr_presence_reset(jr_presence_t *p);
/* When the next announce is due (monotonic us). */
int64_t jr_presence_deadline(const jr_presence_t *p);

/* Announce or refresh if due, with `running` jobs. A refusal by Redis
 * (out of memory, ...) is logged once and tried again at the next refresh;
 * only a broken connection is returned as an error. */
int jr_presence_tick(jr_presence_t *p, jr_redis_t *r, long long running);

/* If due (once per lease): remove from each queue's group the consumers of
 * processes that are not live, hold no pending entry and were idle for a
 * lease (jr_redis_prune_consumers). Errors as for jr_presence_tick. */
int jr_presence_prune(jr_presence_t *p, jr_redis_t *r, const char *const *queues, size_t nq);

/* Remove this process's entry (clean exit); best effort. */
void jr_presence_leave(jr_presence_t *p, jr_redis_t *r);

#endif
