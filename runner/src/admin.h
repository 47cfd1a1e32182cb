/* The admin commands: enqueue, stats. Each connects once and reports a
 * failure on stderr rather than retrying. */
#ifndef JR_ADMIN_H
#define JR_ADMIN_H

#include <stdio.h>

#include "config.h"
#include "redis.h"

/* Enqueue one job and print its id on `out`. Returns the exit status. */
int jr_cmd_enqueue(const jr_config_t *cfg, const jr_enqueue_t *job, FILE *out);

/* Print ready/pending/delayed counts of `queues` (every registered queue if
 * empty) as a table or JSON on `out`. Returns the exit status. */
int jr_cmd_stats(const jr_config_t *cfg, const jr_strlist_t *queues, int json, FILE *out);

/* `jobrunner dead SUB`: sub is list, show, retry or purge; ids are job ids
 * (all = every dead job). Returns the exit status. With json (list and show
 * only) it prints one JSON array of dead entries, one object each (see
 * dead_json in admin.c and docs/operations.md), even for one id. */
int jr_cmd_dead(const jr_config_t *cfg, const char *queue, const char *sub, char **ids, size_t nids,
                int all, int json, FILE *out);

/* `jobrunner workers`: the live workers and schedulers as a table or JSON
 * on `out`. Returns the exit status. */
int jr_cmd_workers(const jr_config_t *cfg, int json, FILE *out);

/* Connect for a one-shot command; NULL after printing why on stderr. */
jr_redis_t *jr_admin_connect(const jr_config_t *cfg);

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
