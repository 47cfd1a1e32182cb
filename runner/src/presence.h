/* Presence: each worker and scheduler announces itself in Redis (see
 * jr_redis_proc_announce) and refreshes that every third of a lease (one
 * PEXPIRE while nothing in its entry changed), so it is listed while it
 * lives and gone within one lease after it dies; a clean exit removes it at
 * once. Workers also prune the consumers of stopped processes from their
 * queues' groups: at start, then every JR_PRUNE_LEASES leases. */
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
    int announced;            /* the last announce went through: refresh with PEXPIRE while running is the same */
    int64_t init_us;          /* monotonic, at jr_presence_init */
    int started_redis;        /* self.started_ms is on Redis's clock (read at the first announce) */
} jr_presence_t;

/* Prune passes are this many leases apart: a stopped worker's consumer is
 * only clutter in XINFO (it holds no job), and each pass costs a listing of
 * every live process. */
#define JR_PRUNE_LEASES 10

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

/* If due (at the first call, then every JR_PRUNE_LEASES leases): remove
 * from each queue's group the consumers of processes that are not live,
 * hold no pending entry and were idle for a lease (jr_redis_prune_consumers).
 * A refusal by Redis is logged and tried again at the next pass; returns 0,
 * the error of a broken connection, or JR_ENOMEM. */
int jr_presence_prune(jr_presence_t *p, jr_redis_t *r, const char *const *queues, size_t nq);

/* Remove this process's entry (clean exit); best effort. */
void jr_presence_leave(jr_presence_t *p, jr_redis_t *r);

#endif
