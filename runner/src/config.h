/* Configuration: defaults, the YAML file, then environment and flags. */
#ifndef JR_CONFIG_H
#define JR_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cron.h"

typedef struct jr_strlist {
    char **v;
    size_t n;
} jr_strlist_t;

typedef enum { JR_LOG_TEXT = 0, JR_LOG_JSON = 1 } jr_log_format_t;
typedef enum { JR_ISOLATION_PROCESS = 0, JR_ISOLATION_INLINE = 1 } jr_isolation_t;
/* How a worker shares its fetches among its queues (worker.order). */
typedef enum { JR_ORDER_WEIGHTED = 0, JR_ORDER_STRICT = 1 } jr_order_t;
#define JR_WEIGHT_MAX 1000 /* largest queue weight */

/* How a job is run and retried. In a handler override, -1 = inherit. */
typedef struct jr_policy {
    int64_t timeout_ms;     /* one attempt's time limit */
    int64_t max_attempts;   /* attempts before the job is dead */
    int64_t backoff_ms;     /* ceiling of the first retry delay */
    int64_t backoff_max_ms; /* cap of the retry delay ceiling */
} jr_policy_t;

/* keep_finished of a queue or a handler: keep the records of the last
 * `count` finished jobs (0 = off; at most JR_KEEP_FINISHED_MAX), none older
 * than age_ms (0 = no age limit). */
typedef struct jr_keep {
    int64_t count;
    int64_t age_ms;
} jr_keep_t;
#define JR_KEEP_FINISHED_MAX 1000000 /* the largest keep_finished count */

typedef struct jr_handler_policy {
    char *name;
    jr_policy_t p;
    jr_keep_t keep; /* handlers.NAME.keep_finished; count -1 = the queue's */
} jr_handler_policy_t;

/* queues.NAME.keep_finished */
typedef struct jr_queue_keep {
    char *queue;
    jr_keep_t keep;
} jr_queue_keep_t;

/* Each field is set by one key (named in its comment). The key's default
 * and range are in its row of the table in config.c, and
 * config/jobrunner.yaml shows them to users. Durations are in ms. */
typedef struct jr_config {
    /* redis: */
    char *redis_url;            /* redis.url; NULL = not configured (then JR_DEFAULT_REDIS_URL) */
    int64_t connect_timeout_ms; /* redis.connect_timeout */
    int64_t redis_wait_ms;      /* redis.wait: how long commands retry an unreachable Redis */
    int64_t redis_wait_replicas;   /* redis.wait_replicas: replicas that must confirm enqueues and results */
    int64_t redis_wait_timeout_ms; /* redis.wait_timeout: how long to wait for them */
    char *tls_ca_file, *tls_ca_dir; /* redis.tls.ca_file, .ca_dir; NULL = the system's CAs */
    char *tls_cert_file, *tls_key_file; /* redis.tls.cert_file, .key_file; NULL = no client certificate */
    char *tls_server_name;      /* redis.tls.server_name; NULL = the URL's host */
    int tls_verify;             /* redis.tls.verify: 1 = verify the server's certificate */
    char *redis_password_file;  /* redis.password_file: the password's file, read at each connect; NULL = none */
    char *redis_sentinel_password; /* redis.sentinel_password: the sentinels' own; NULL = none */

    /* log: */
    jr_log_format_t log_format; /* log.format */
    int log_level;              /* log.level (jr_log_level_t) */

    /* plugins: */
    jr_strlist_t plugin_paths;  /* plugins.paths: files or directories; empty = JR_JOBS_DIR */
    jr_strlist_t plugin_settings; /* plugin_settings: triples plugin, key, value (api->setting) */

    /* worker: */
    jr_strlist_t worker_queues; /* worker.queues, empty = ["default"] */
    int64_t worker_batch;       /* worker.batch: entries per XREADGROUP */
    int64_t worker_prefetch;    /* worker.prefetch: most fetched-but-not-started jobs a worker holds */
    int64_t worker_block_ms;    /* worker.block: longest blocking read */
    int64_t worker_concurrency; /* worker.concurrency: handler processes per worker */
    int worker_isolation;       /* worker.isolation (jr_isolation_t) */
    int64_t worker_lease_ms;    /* worker.lease: idle time after which another worker takes a job over */
    int64_t worker_grace_ms;    /* worker.grace: how long running jobs may finish after SIGTERM */
    int64_t worker_handler_wait_ms; /* worker.handler_wait: how long a job whose handler is not loaded
                                     * waits for a worker that has it before it is dead */
    int64_t *worker_weights;    /* weight of worker_queues.v[i] (1..JR_WEIGHT_MAX), set with it by the
                                   loader; NULL = every weight 1 */
    int worker_order;           /* worker.order (jr_order_t) */

    /* jobs: defaults for every handler */
    jr_policy_t jobs;           /* jobs.timeout, jobs.max_attempts, jobs.backoff, jobs.backoff_max */
    int64_t max_deliveries;     /* jobs.max_deliveries: deliveries (crashed workers) before a job is poison */
    int64_t max_payload;        /* jobs.max_payload: largest payload in bytes */

    /* handlers: NAME: {timeout, max_attempts, backoff, backoff_max}; sorted
     * by name, without duplicates (see jr_config_policy) */
    jr_handler_policy_t *handlers;
    size_t nhandlers;

    /* dead: */
    int64_t dead_max;           /* dead.max: dead jobs kept per queue (oldest trimmed) */

    /* scheduler: */
    jr_strlist_t scheduler_queues; /* scheduler.queues, empty = every registered queue */
    int64_t scheduler_batch;       /* scheduler.batch: jobs per promotion call */
    int64_t scheduler_block_ms;    /* scheduler.block: backstop of the blocking wait */

    /* metrics: */
    char *metrics_listen;          /* metrics.listen: HOST:PORT serving /metrics and /healthz, NULL = off */
    int64_t metrics_port_offset;   /* metrics.port_offset: added to that port (systemd: the instance number) */

    /* web (jobrunner web): */
    char *web_listen;              /* web.listen: HOST:PORT of the dashboard */
    char *web_password;            /* web.password: HTTP Basic password, NULL = none (then localhost only) */
    int web_read_only;             /* web.read_only: 1 = no actions (POSTs refused with 403) */

    /* enqueue: */
    char *default_queue;        /* enqueue.queue */

    /* periodic: a list of schedules a scheduler upserts into Redis at start
     * (each checked with jr_cron_def_check; names distinct) */
    jr_cron_def_t *periodic;
    size_t nperiodic;

    /* queues: the partition counts a worker or scheduler sets in Redis at
     * start (pairs queue name, count 1..1024 as text; a later load replaces
     * the count of the same queue). JOBRUNNER_QUEUES (YAML flow) or
     * JOBRUNNER_QUEUES_PARTITIONS="orders:8,emails:4". */
    jr_strlist_t queue_partitions;
    /* queues.NAME.keep_finished, one per queue named (a later load replaces
     * the setting of the same queue); read by the worker that finishes the
     * job (jr_config_keep) */
    jr_queue_keep_t *queue_keep;
    size_t nqueue_keep;
} jr_config_t;

/* The environment variable of the queues section's partitions. */
#define JR_QUEUES_PARTITIONS_ENV "JOBRUNNER_QUEUES_PARTITIONS"

/* Fill *cfg with every key's default (its row in config.c, checked as a
 * value from the file would be): lists empty, no handler overrides, no
 * schedules, no plugin settings, redis_url and metrics_listen NULL.
 * Returns 0 or JR_ENOMEM (JR_EINVAL only for a row whose default its own
 * checks refuse, which test_config's setup would show); on error *cfg is
 * freed. */
int jr_config_init(jr_config_t *cfg);

/* Read a YAML file into *cfg (which jr_config_init filled), overriding the
 * keys it sets; a list given in the file (also periodic) replaces the list
 * in *cfg, a handler override replaces the earlier one of that name, a
 * plugin setting the earlier one of that plugin and key. An empty file, or
 * a section with no keys, is fine. Unknown keys, duplicate keys, wrong
 * types, out-of-range values and bad names are errors: returns JR_EINVAL
 * with a message in err of the form "FILE:LINE: KEY: what is wrong", JR_EIO
 * if the file cannot be read ("FILE: cannot open: why"), or JR_ENOMEM. On
 * error *cfg keeps whatever was applied before the bad key; the caller
 * frees it either way. */
int jr_config_load_file(jr_config_t *cfg, const char *path, char *err, size_t errlen);

/* Same as jr_config_load_file on an in-memory document; `name` stands in for
 * the file name in messages. */
int jr_config_load_string(jr_config_t *cfg, const char *yaml, size_t len,
                          const char *name, char *err, size_t errlen);

/* The policy for a handler: its override's values where set, the jobs
 * defaults elsewhere. O(log n) in the number of overrides. */
jr_policy_t jr_config_policy(const jr_config_t *cfg, const char *handler);

/* The keep_finished of a job of `handler` in `queue` (a queue name, or the
 * internal name "<queue>#<J>" of one of its partitions, which has its
 * queue's setting): the handler's override where it sets one, else the
 * queue's, else off (count 0). */
jr_keep_t jr_config_keep(const jr_config_t *cfg, const char *queue, const char *handler);

/* Apply the environment envp (NULL-terminated "NAME=value" strings, e.g.
 * `environ`): every key of the file can be set by the variable
 * JOBRUNNER_<SECTION>_<KEY>, upper-case, with '.' and '-' as '_'
 * (JOBRUNNER_WORKER_CONCURRENCY); a section set whole (handlers, periodic,
 * plugin_settings) by JOBRUNNER_<SECTION> in YAML flow syntax. The names
 * come from the rows of the key table (see jr_config_key). A scalar value
 * is taken literally; a list is "a,b,c" or YAML flow "[a, b, c]"; an empty
 * value counts as unset. Values are checked exactly as in the file, in the
 * order of the table. A bad value: returns JR_EINVAL with
 * "VARIABLE="VALUE": KEY: what is wrong" in err (a URL's value is not
 * repeated: it may hold a password), leaving the keys before it applied.
 * JOBRUNNER_* variables that name no key (other than JR_CONFIG_ENV_FILE and
 * the plugin settings JR_PLUGIN_ENV_PREFIX..., read elsewhere) are not
 * refused, since an orchestrator may set some (Kubernetes service links:
 * JOBRUNNER_PORT...): each gets a warning line on `warn` (if not NULL).
 * Returns 0, JR_EINVAL or JR_ENOMEM. */
int jr_config_apply_env(jr_config_t *cfg, char *const *envp, FILE *warn, char *err, size_t errlen);

/* The variable naming the configuration file when -c is not given. */
#define JR_CONFIG_ENV_FILE "JOBRUNNER_CONFIG"

/* Set one key ("worker.concurrency") from text, checked as the same value
 * in the file would be (used for flags). Returns 0, JR_EINVAL with
 * "KEY: what is wrong" in err (the key unchanged), or JR_ENOMEM. */
int jr_config_set(jr_config_t *cfg, const char *key, const char *value, char *err, size_t errlen);

/* Key number i of the table in config.c, for tests and documentation: its
 * name ("worker.batch"; a section set whole, like "handlers", by the
 * section's name), its variable (JOBRUNNER_WORKER_BATCH) and its default as
 * the file writes it ("512", "5s"; NULL where the default is nothing: an
 * empty list or section, no URL, no address). Returns 0, or -1 past the
 * last key. */
typedef struct jr_config_key {
    char name[64];
    char env[80];
    const char *def;
} jr_config_key_t;
int jr_config_key(size_t i, jr_config_key_t *k);

/* Free everything *cfg owns; safe to call twice. */
void jr_config_free(jr_config_t *cfg);

/* Parse a worker's `-q` argument NAME[:WEIGHT]: when what follows the last
 * ':' is all digits it is the weight (1..JR_WEIGHT_MAX), else the whole
 * argument is the name and the weight is 1 (so queue "a:6" is given as
 * "a:6:1"). name gets JR's queue-name rules. Returns 0, or JR_EINVAL with
 * "why" (e.g. "weight must be an integer from 1 to 1000"). Pure. */
int jr_queue_weight_parse(const char *arg, char *name, size_t namelen, int64_t *weight, char *why,
                          size_t whylen);

/* Replace the worker's queues with names[i] of weight weights[i] (weights
 * NULL = all 1). Returns 0 or JR_ENOMEM (then the config is unchanged). */
int jr_config_set_worker_queues(jr_config_t *cfg, const char *const *names, const int64_t *weights,
                                size_t n);

/* Append a copy of s to a list. Returns 0 or JR_ENOMEM. */
int jr_strlist_push(jr_strlist_t *l, const char *s);
void jr_strlist_free(jr_strlist_t *l);

#endif
