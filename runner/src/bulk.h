/* Bulk actions over one state of a queue, shared by the CLI (`dead retry
 * --handler H`, `job delete --handler H --state delayed`, ...) and the web
 * dashboard: a filter of jobs, and retry / delete / run-now of either a
 * selection (a list of ids) or every job of the state the filter matches.
 *
 * A bulk walks the state by cursor pages of JR_BULK_PAGE jobs (never one
 * call over the whole state, never the state loaded in memory) and changes
 * the jobs of each page with the calls the CLI uses for one job or one
 * dead entry (jr_redis_dead_retry, jr_redis_dead_purge,
 * jr_redis_job_change); each change is atomic per job, the bulk as a whole
 * is not: a job that changes state while the walk goes on (promoted, run,
 * buried) may be missed, never changed twice. A partitioned queue is one
 * queue here: its partitions in turn, then the queue itself (jobs a
 * producer unaware of the partitions put there), as `jobs` and `dead` do. */
#ifndef JR_BULK_H
#define JR_BULK_H

#include <stddef.h>

#include "redis.h"

/* Jobs read per page of a bulk's walk. */
#define JR_BULK_PAGE 500

/* Which jobs a filter keeps. What is searched: the handler name (exact,
 * byte for byte) and the payload bytes of each job as stored in the state
 * walked (field "p" of the dead entry or of the delayed member; no other
 * field, no decoding: a substring of JSON text, say, is matched as
 * bytes). A job without a payload matches no non-empty `match`. */
typedef struct jr_filter {
    const char *handler; /* NULL or "": any handler */
    const char *match;   /* match_len bytes the payload must contain; NULL or 0 bytes: any payload */
    size_t match_len;
} jr_filter_t;

/* 1 if a job of handler (hlen bytes; NULL: none) and payload (plen bytes;
 * NULL: none) passes f (NULL: every job does), else 0. Pure. */
int jr_filter_match(const jr_filter_t *f, const char *handler, size_t hlen, const char *payload, size_t plen);
/* jr_filter_match of a stream entry or decoded delayed member (its fields
 * JR_F_HANDLER and JR_F_PAYLOAD). Pure. */
int jr_filter_match_entry(const jr_filter_t *f, const jr_entry_t *e);

/* The state a bulk walks. Delayed and retrying jobs share the delayed set
 * and the time wheel: a retrying job is one whose attempt is above 1. */
typedef enum jr_bulk_state { JR_BULK_DELAYED, JR_BULK_RETRYING, JR_BULK_DEAD } jr_bulk_state_t;
/* What it does: delete (a dead entry: purge; a waiting job: removed, its
 * id's idempotency key kept as with `job delete`), or run now (a dead job:
 * retried, attempts reset; a delayed or retrying one: ready now). */
typedef enum jr_bulk_action { JR_BULK_DELETE, JR_BULK_RUN_NOW } jr_bulk_action_t;

typedef struct jr_bulk_result {
    long long seen;    /* jobs of the state looked at (a selection: ids looked up) */
    long long matched; /* of those, the ones the filter or selection chose */
    long long acted;   /* of those, the ones changed (a dead job that cannot run, one with no
                          handler or kept whole in a raw field, is not retried; a job that left
                          the state meanwhile is not changed) */
} jr_bulk_result_t;

/* Act on queue's jobs in `state`: with nids > 0, the selection ids (job ids
 * as users see them, a partition's generated ids with "~i"; for dead jobs
 * a dead entry id also names its entry), found[i] (may be NULL) set to 1
 * for each one found in that state; with nids == 0, every job of the state
 * that f passes (f NULL: every job). Dead jobs are walked up to the newest
 * entry buried when the call began (Redis's clock), so a retried job that
 * is buried again is not retried twice by one call.
 *
 * Returns 0 with *res filled, or a JR_E* code with the reason in
 * jr_redis_errstr(r) (res then counts what was done before). */
int jr_bulk(jr_redis_t *r, const char *queue, jr_bulk_state_t state, jr_bulk_action_t action, const jr_filter_t *f,
            const char *const *ids, size_t nids, unsigned char *found, jr_bulk_result_t *res);

/* 1 if dead entry e (its stored job id: id, len) of partition p (-1: not
 * partitioned) is the job named `want`: its id, the id as shown (a
 * generated id with "~p"), or the dead entry's own id. Pure. */
int jr_bulk_dead_names(const jr_entry_t *e, const char *id, size_t len, int p, const char *want);

/* The name of a state ("delayed", "retrying", "dead"), and the state of a
 * name (-1 for another). Pure. */
const char *jr_bulk_state_name(jr_bulk_state_t s);
int jr_bulk_state_parse(const char *name);

/* Decode a delayed-set member: a msgpack sequence of strings (fixstr, str
 * 8/16/32, bin 8/16/32), at most max items into v/lens (pointing into p).
 * Returns how many, or -1 if p is not such a sequence or has more. Pure. */
int jr_msgpack_strings(const char *p, size_t n, const char **v, size_t *lens, size_t max);

#endif
