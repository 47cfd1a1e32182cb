/* The scheduler's calls: promotion of due jobs, the queue registry and the
 * wake streams it blocks on, periodic schedules.
 * See redis.h for the connection and the conventions shared by every call. */
#ifndef JR_REDIS_SCHED_H
#define JR_REDIS_SCHED_H

#include "redis.h"

/* Take up to `limit` due members of `queue`'s delayed set: envelopes into
 * the ready stream, garbage into the dead stream (trimmed to about
 * dead_max). *moved = members taken, *buried = of those, how many were
 * garbage. *next_due_ms = earliest due time left (-1 if none) and *now_ms =
 * Redis's time of the call, both Unix ms; wake_id (JR_ID_MAX bytes) = the
 * queue's last wake entry id. *cascaded (if not NULL) = of the members
 * taken, the time-wheel bucket items moved into the sorted set, not yet
 * promoted (0 from a library before revision 5). When Redis refuses
 * jr_promote for lack of memory (OOM), jr_promote_due (allow-oom, no
 * time-wheel cascade) is called instead: jobs already due still go. */
int jr_redis_promote(jr_redis_t *r, const char *queue, int64_t limit, int64_t dead_max,
                     int64_t *moved, int64_t *buried, double *next_due_ms, double *now_ms,
                     char *wake_id, int64_t *cascaded);

/* Every registered queue (replaces *out's contents; a member that breaks
 * the queue-name rule is left out), and the registry's last wake entry id
 * into wake_id (JR_ID_MAX bytes). */
int jr_redis_queues(jr_redis_t *r, jr_strlist_t *out, char *wake_id);

/* Send XREAD BLOCK timeout_ms STREAMS <keys> <ids> without waiting for the
 * reply: blocks until an entry newer than ids[i] arrives in keys[i]. Redis
 * ends the block only on its hz tick: the timeout is a backstop, the
 * caller's timer (jr_redis_wait) is the precise one. Keys with skip[i] set
 * (skip may be NULL) are left out (one key of another type makes Redis
 * refuse the whole XREAD); with every key left out nothing is sent and 1
 * is returned. */
int jr_redis_send_wake_read(jr_redis_t *r, const char *const *keys, char (*ids)[JR_ID_MAX],
                            const unsigned char *skip, size_t n, int64_t timeout_ms);
/* The type of `key` ("none", "string", "stream", ...; len bytes) from TYPE. */
int jr_redis_key_type(jr_redis_t *r, const char *key, char *type, size_t len);
/* Read its reply: for each stream that had entries, ids[i] becomes the
 * newest id and fired[i] = 1 (others 0). Returns how many fired (0 also
 * when the read was ended by CLIENT UNBLOCK ... ERROR), or a JR_E* code. */
int jr_redis_recv_wake_read(jr_redis_t *r, const char *const *keys, char (*ids)[JR_ID_MAX],
                            unsigned char *fired, size_t n);

/* ---- periodic schedules (see docs/redis-contract.md, runner/src/cron.h) --- */

/* The keys: JR_CRON_KEY, JR_CRON_LAST_KEY, JR_CRON_WAKE_KEY (contract.h). */

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
/* The latest tick of schedule `name` any scheduler recorded as fired
 * (jr:{cron}:last) into *tick_ms, -1 if none or unreadable. 0 or an error. */
int jr_redis_cron_last(jr_redis_t *r, const char *name, int64_t *tick_ms);

/* One stored schedule as read (strings owned; last = "" if never fired). */
typedef struct jr_cron_entry {
    char *name, *def, *last;
} jr_cron_entry_t;
/* Every schedule (*out malloc'd, free with jr_cron_entries_free), and the
 * wake stream's last id into wake_id (JR_ID_MAX bytes), read atomically. */
int jr_redis_cron_list(jr_redis_t *r, jr_cron_entry_t **out, size_t *n, char *wake_id);
void jr_cron_entries_free(jr_cron_entry_t *v, size_t n);
/* Enable (on = 1) or disable schedule `name`: its stored definition is
 * read (jr_cron_list), its "enabled" set and written back (jr_cron_set,
 * which pokes the wake stream on a change, so running schedulers follow at
 * once). *found = 0 when there is no such schedule, *changed = 0 when it
 * already was so. Not atomic with a `cron add` of the same name at the
 * same moment (the later write wins). A schedule of a scheduler's
 * configuration (periodic:) is written again, as configured, by each
 * scheduler at its start. A stored definition that cannot be decoded is
 * JR_EINVAL naming it. */
int jr_redis_cron_enable(jr_redis_t *r, const char *name, int on, int *found, int *changed);

/* Fire schedule `name` now (also when disabled): one job of its handler,
 * payload and queue, ready now, with the id NAME@fire-<Redis's time, Unix
 * microseconds> into id (JR_ID_MAX bytes). A tick's job is NAME@<digits>
 * and a schedule name holds no '@', so the two never collide, and two
 * fires differ by their microsecond. The schedule's ticks and its
 * last-fired record are not changed. *found = 0 (nothing enqueued) when
 * there is no such schedule. Refusals of the enqueue: JR_EREDIS or
 * JR_EINVAL with the reason. */
int jr_redis_cron_fire(jr_redis_t *r, const char *name, char *id, int *found);

/* Parse a last-fired record "<tick ms> <job id>": returns the tick and
 * points *job at the id, or returns -1 (malformed, or NULL or "") with
 * *job = "". */
int64_t jr_cron_last_parse(const char *last, const char **job);

#endif
