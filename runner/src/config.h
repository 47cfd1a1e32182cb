/* Configuration: defaults, the YAML file, then environment and flags. */
#ifndef JR_CONFIG_H
#define JR_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "cron.h"

typedef struct jr_strlist {
    char **v;
    size_t n;
} jr_strlist_t;

typedef enum { JR_LOG_TEXT = 0, JR_LOG_JSON = 1 } jr_log_format_t;
typedef enum { JR_ISOLATION_PROCESS = 0, JR_ISOLATION_INLINE = 1 } jr_isolation_t;

/* How a job is run and retried. In a handler override, -1 = inherit. */
typedef struct jr_policy {
    int64_t timeout_ms;     /* one attempt's time limit */
    int64_t max_attempts;   /* attempts before the job is dead */
    int64_t backoff_ms;     /* ceiling of the first retry delay */
    int64_t backoff_max_ms; /* cap of the retry delay ceiling */
} jr_policy_t;

typedef struct jr_handler_policy {
    char *name;
    jr_policy_t p;
} jr_handler_policy_t;

typedef struct jr_config {
    /* redis: */
    char *redis_url;            /* NULL = not configured (see JR_DEFAULT_REDIS_URL) */
    int64_t connect_timeout_ms; /* redis.connect_timeout: 10ms..5m, default 2000 */

    /* log: */
    jr_log_format_t log_format; /* log.format: text | json, default text */
    int log_level;              /* log.level: debug|info|warn|error (jr_log_level_t), default info */

    /* plugins: */
    jr_strlist_t plugin_paths;  /* plugins.paths: files or directories; empty = JR_JOBS_DIR */

    /* worker: */
    jr_strlist_t worker_queues; /* worker.queues, empty = ["default"] */
    int64_t worker_batch;       /* worker.batch: entries per XREADGROUP, 1..10000, default 128 */
    int64_t worker_prefetch;    /* worker.prefetch: most fetched-but-not-started jobs a worker holds, 0..100000, default 512 */
    int64_t worker_block_ms;    /* worker.block: longest blocking read, 100ms..60s, default 5s */
    int64_t worker_concurrency; /* worker.concurrency: handler processes per worker, 1..256, default 4 */
    int worker_isolation;       /* worker.isolation: process | inline (jr_isolation_t), default process */
    int64_t worker_lease_ms;    /* worker.lease: idle time after which another worker takes a job over, 100ms..1h, default 30s */
    int64_t worker_grace_ms;    /* worker.grace: how long running jobs may finish after SIGTERM, 0..1h, default 8s */

    /* jobs: defaults for every handler */
    jr_policy_t jobs;           /* jobs.timeout 5m (1ms..JR_TIMEOUT_MAX_MS), jobs.max_attempts 10 (1..JR_ATTEMPTS_MAX),
                                   jobs.backoff 1s, jobs.backoff_max 1h (0..JR_BACKOFF_MAX_MS) */
    int64_t max_deliveries;     /* jobs.max_deliveries: deliveries (crashed workers) before a job is poison, 1..1000, default 5 */
    int64_t max_payload;        /* jobs.max_payload: largest payload in bytes, 1..512 MiB, default 1 MiB */

    /* handlers: NAME: {timeout, max_attempts, backoff, backoff_max}; sorted
     * by name, without duplicates (see jr_config_policy) */
    jr_handler_policy_t *handlers;
    size_t nhandlers;

    /* dead: */
    int64_t dead_max;           /* dead.max: dead jobs kept per queue (oldest trimmed), 1..10000000, default 10000 */

    /* scheduler: */
    jr_strlist_t scheduler_queues; /* scheduler.queues, empty = every registered queue */
    int64_t scheduler_batch;       /* scheduler.batch: jobs per promotion call, 1..100000, default 1000 */
    int64_t scheduler_block_ms;    /* scheduler.block: backstop of the blocking wait, 100ms..60s, default 5s */

    /* metrics: */
    char *metrics_listen;          /* metrics.listen: HOST:PORT serving /metrics and /healthz, NULL = off */

    /* enqueue: */
    char *default_queue;        /* enqueue.queue, default "default" */

    /* periodic: a list of schedules a scheduler upserts into Redis at start
     * (each checked with jr_cron_def_check; names distinct) */
    jr_cron_def_t *periodic;
    size_t nperiodic;
} jr_config_t;

/* Fill *cfg with the defaults above (all lists empty, strings NULL except
 * default_queue). Returns 0 or JR_ENOMEM. */
int jr_config_init(jr_config_t *cfg);

/* Read a YAML file into *cfg (which jr_config_init filled), overriding the
 * keys it sets; a list given in the file replaces the list in *cfg, a
 * handler override replaces the earlier one of that name. An empty
 * file, or a section with no keys, is fine. Unknown keys, duplicate keys,
 * wrong types, out-of-range values and bad queue names are errors:
 * returns JR_EINVAL (or JR_EIO if the file cannot be read) with a message in
 * err of the form "FILE:LINE: KEY: what is wrong". On error *cfg keeps
 * whatever was applied before the bad key; the caller frees it either way. */
int jr_config_load_file(jr_config_t *cfg, const char *path, char *err, size_t errlen);

/* Same as jr_config_load_file on an in-memory document; `name` stands in for
 * the file name in messages. */
int jr_config_load_string(jr_config_t *cfg, const char *yaml, size_t len,
                          const char *name, char *err, size_t errlen);

/* The policy for a handler: its override's values where set, the jobs
 * defaults elsewhere. O(log n) in the number of overrides. */
jr_policy_t jr_config_policy(const jr_config_t *cfg, const char *handler);

/* Apply environment overrides: JOBRUNNER_REDIS_URL. Returns 0 or JR_ENOMEM. */
int jr_config_apply_env(jr_config_t *cfg);

/* Free everything *cfg owns; safe to call twice. */
void jr_config_free(jr_config_t *cfg);

/* Append a copy of s to a list. Returns 0 or JR_ENOMEM. */
int jr_strlist_push(jr_strlist_t *l, const char *s);
void jr_strlist_free(jr_strlist_t *l);

#endif
