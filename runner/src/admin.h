/* The admin commands: enqueue, stats. Each connects once and reports a
 * failure on stderr rather than retrying. */
#ifndef JR_ADMIN_H
#define JR_ADMIN_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "redis.h"
#include "redis_produce.h"

/* Enqueue one job and print its id on `out`. Returns the exit status. */
int jr_cmd_enqueue(const jr_config_t *cfg, const jr_enqueue_t *job, FILE *out);

/* Print, per queue of `queues` (every registered queue if empty): ready,
 * pending, delayed and dead counts, processed and failed totals, jobs per
 * second over the last minute, the age of the oldest ready job, paused; as
 * a table or JSON on `out`. With `watch`, clear the screen and redraw every
 * second until interrupted. Returns the exit status. */
int jr_cmd_stats(const jr_config_t *cfg, const jr_strlist_t *queues, int json, int watch, FILE *out);

/* `jobrunner dead SUB`: sub is list, show, retry or purge; ids are job ids
 * (all = every dead job). Returns the exit status. With json (list and show
 * only) it prints one JSON array of dead entries, one object each (see
 * dead_json in admin.c and docs/operations.md), even for one id. */
int jr_cmd_dead(const jr_config_t *cfg, const char *queue, const char *sub, char **ids, size_t nids,
                int all, int json, FILE *out);

/* `jobrunner workers`: the live workers and schedulers as a table or JSON
 * on `out`. Returns the exit status. */
int jr_cmd_workers(const jr_config_t *cfg, int json, FILE *out);

/* `jobrunner job show`: where job `id` of `queue` is (jr_locate: delayed,
 * retrying, ready, running, dead or not found) with its fields, as text or
 * one JSON object. Returns 0 when found, 1 when not (or on error). */
int jr_cmd_job_show(const jr_config_t *cfg, const char *queue, const char *id, int json, FILE *out);
/* `jobrunner job run-now|delete` (sub) for one job. Returns the exit
 * status: 1 when not found, and for delete of a running job. */
int jr_cmd_job_change(const jr_config_t *cfg, const char *queue, const char *sub, const char *id, FILE *out);
/* `jobrunner cancel`: one line "ID cancelled|running|not found" per id.
 * Returns 0 when every id was found, 1 otherwise. */
int jr_cmd_cancel(const jr_config_t *cfg, const char *queue, char **ids, size_t n, FILE *out);
/* `jobrunner jobs --state`: a page of up to `limit` jobs in that state,
 * oldest first, after the cursor `after` (NULL: from the start), with the
 * cursor of the next page. Returns the exit status (2: bad state/cursor). */
int jr_cmd_jobs(const jr_config_t *cfg, const char *queue, const char *state, int64_t limit, const char *after,
                int json, FILE *out);
/* Decode a msgpack sequence of strings (a delayed-set member) into at most
 * max items pointing into p. Returns how many, or -1. Pure. */
int jr_msgpack_strings(const char *p, size_t n, const char **v, size_t *lens, size_t max);

/* `jobrunner pause|resume QUEUE` (on = 1: pause): record it in Redis, then
 * wake every live worker (CLIENT UNBLOCK of its blocking read) so it reads
 * the paused set at once. Prints "QUEUE paused" / "QUEUE resumed" (or that
 * it already was). Returns the exit status. */
int jr_cmd_pause(const jr_config_t *cfg, const char *queue, int on, FILE *out);

/* Connect for a one-shot command; NULL after printing why on stderr. */
jr_redis_t *jr_admin_connect(const jr_config_t *cfg);

/* `jobrunner functions load|dump`: load: make sure Redis has the function
 * library (FUNCTION LOAD REPLACE only if it is missing or differs), so
 * producers in any language can FCALL at once; dump: print the library
 * (runner/lua/jobrunner.lua) on `out`. Returns the exit status. */
int jr_cmd_functions(const jr_config_t *cfg, const char *sub, FILE *out);

/* `jobrunner cron add`: store the schedule *d (checked with
 * jr_cron_def_check first) in Redis, replacing one of that name; running
 * schedulers learn of it at once. Prints "NAME added|updated|unchanged,
 * next firing UTC". Returns the exit status. */
int jr_cmd_cron_add(const jr_config_t *cfg, jr_cron_def_t *d, FILE *out);
/* `jobrunner cron remove NAME...`: prints "NAME removed" or "NAME not
 * found" per name; exit status 0 when every name was found. */
int jr_cmd_cron_remove(const jr_config_t *cfg, char **names, size_t n, FILE *out);
/* `jobrunner cron list`: every schedule with its next firing (UTC and
 * local, after Redis's now) and last fired tick and job id, as a table or
 * JSON ({"schedules": [...]}, see docs/operations.md). */
int jr_cmd_cron_list(const jr_config_t *cfg, int json, FILE *out);

#endif
