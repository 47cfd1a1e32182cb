/* Configuration loading: see config.h.
 *
 * The YAML document is read with libyaml's event API by a small recursive
 * descent: top-level mapping of sections, each a mapping of keys. Every key
 * is one row of `keys` below, which says where its value goes, its default
 * and how it is checked; adding a key is adding a row. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "contract.h"
#include "jobrunner/plugin.h"
#include "partition.h"
#include "jr.h"
#include "jr_limits.h"
#include "metrics.h"
#include "redis.h"
#include "util.h"

typedef enum {
    T_URL,       /* char *: a Redis URL, checked with jr_redis_url_parse */
    T_ADDR,      /* char *: HOST:PORT, checked with jr_metrics_parse_addr */
    T_QUEUE,     /* char *: one queue name */
    T_PATH,      /* char *: a file or directory path (non-empty; read where it is used) */
    T_SECRET,    /* char *: a password, any text; never quoted in a message */
    T_DURATION,  /* int64_t ms, min..max */
    T_INT,       /* int64_t, min..max */
    T_ENUM,      /* int: index into names */
    T_PATHS,     /* jr_strlist_t of non-empty strings */
    T_QUEUES,    /* jr_strlist_t of distinct queue names */
    T_WQUEUES,   /* T_QUEUES whose items may also be {name: Q, weight: N} (worker.queues) */
    T_HANDLERS,  /* the handlers section: NAME -> mapping of "jobs" policy keys */
    T_PERIODIC,  /* the periodic section: a sequence of schedules (jr_cron_def_t) */
    T_PSETTINGS, /* the plugin_settings section: PLUGIN -> mapping of KEY: value */
    T_QSECTION,  /* the queues section: QUEUE -> mapping of queue keys (partitions) */
} key_type_t;

typedef struct {
    const char *section;
    const char *key;
    key_type_t type;
    size_t off; /* offset of the field in jr_config_t */
    /* The default, written as in the file and applied by jr_config_init
     * through the same checks as a value from the file (so it lies in the
     * row's range); NULL = nothing (an empty list, no string, an empty
     * section). config/jobrunner.yaml shows it (test_config checks). */
    const char *def;
    int64_t min, max;
    const char *const *names; /* T_ENUM: NULL-terminated; value = index */
} key_def_t;

static const char *const log_formats[] = {"text", "json", NULL};
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const isolations[] = {"process", "inline", NULL};
static const char *const orders[] = {"weighted", "strict", NULL};
static const char *const booleans[] = {"false", "true", NULL};

_Static_assert(JR_LOG_TEXT == 0 && JR_LOG_JSON == 1, "log_formats order");
_Static_assert(JR_LOG_DEBUG == 0 && JR_LOG_INFO == 1 && JR_LOG_WARN == 2 && JR_LOG_ERROR == 3,
               "log_levels order");
_Static_assert(sizeof(jr_log_format_t) == sizeof(int), "T_ENUM fields are stored as int");
_Static_assert(JR_ISOLATION_PROCESS == 0 && JR_ISOLATION_INLINE == 1, "isolations order");
_Static_assert(JR_ORDER_WEIGHTED == 0 && JR_ORDER_STRICT == 1, "orders order");

#define F(field) offsetof(jr_config_t, field)
#define MS_S 1000LL
#define MS_M (60 * MS_S)
#define MS_H (60 * MS_M)
#define J(field) (F(jobs) + offsetof(jr_policy_t, field))

/* Every key: where it goes, its default, its range. Rows of one section
 * must be adjacent. A section named "S.N" is the mapping N inside section
 * S (redis.tls). Adding a key is adding a row (and its field in
 * jr_config_t, its line in config/jobrunner.yaml and the man page). */
static const key_def_t keys[] = {
    /* section, key, type, field, default, min, max, names */
    {"redis", "url", T_URL, F(redis_url), NULL, 0, 0, NULL}, /* NULL: JR_DEFAULT_REDIS_URL */
    {"redis", "connect_timeout", T_DURATION, F(connect_timeout_ms), "2s", 10, 5 * MS_M, NULL},
    {"redis", "wait", T_DURATION, F(redis_wait_ms), "0s", 0, MS_H, NULL},
    {"redis", "wait_replicas", T_INT, F(redis_wait_replicas), "0", 0, JR_WAIT_REPLICAS_MAX, NULL},
    {"redis", "wait_timeout", T_DURATION, F(redis_wait_timeout_ms), "1s", 1, JR_WAIT_TIMEOUT_MAX_MS, NULL},
    /* A sub-section: the mapping redis.tls (its variables JOBRUNNER_REDIS_TLS_<KEY>). */
    {"redis.tls", "ca_file", T_PATH, F(tls_ca_file), NULL, 0, 0, NULL},
    {"redis.tls", "ca_dir", T_PATH, F(tls_ca_dir), NULL, 0, 0, NULL},
    {"redis.tls", "cert_file", T_PATH, F(tls_cert_file), NULL, 0, 0, NULL},
    {"redis.tls", "key_file", T_PATH, F(tls_key_file), NULL, 0, 0, NULL},
    {"redis.tls", "server_name", T_PATH, F(tls_server_name), NULL, 0, 0, NULL},
    {"redis.tls", "verify", T_ENUM, F(tls_verify), "true", 0, 0, booleans},
    {"redis", "password_file", T_PATH, F(redis_password_file), NULL, 0, 0, NULL}, /* NULL: none */
    {"redis", "sentinel_password", T_SECRET, F(redis_sentinel_password), NULL, 0, 0, NULL}, /* NULL: none */
    {"log", "format", T_ENUM, F(log_format), "text", 0, 0, log_formats},
    {"log", "level", T_ENUM, F(log_level), "info", 0, 0, log_levels},
    {"plugins", "paths", T_PATHS, F(plugin_paths), NULL, 0, 0, NULL}, /* []: JR_JOBS_DIR */
    {"worker", "queues", T_WQUEUES, F(worker_queues), NULL, 0, 0, NULL}, /* []: [default] */
    {"worker", "batch", T_INT, F(worker_batch), "512", 1, 10000, NULL},
    {"worker", "prefetch", T_INT, F(worker_prefetch), "512", 0, 100000, NULL},
    {"worker", "block", T_DURATION, F(worker_block_ms), "5s", 100, 60 * MS_S, NULL},
    {"worker", "concurrency", T_INT, F(worker_concurrency), "4", 1, 256, NULL},
    {"worker", "isolation", T_ENUM, F(worker_isolation), "process", 0, 0, isolations},
    {"worker", "lease", T_DURATION, F(worker_lease_ms), "30s", 100, MS_H, NULL},
    {"worker", "grace", T_DURATION, F(worker_grace_ms), "8s", 0, MS_H, NULL},
    {"worker", "handler_wait", T_DURATION, F(worker_handler_wait_ms), "10m", 0, 24 * MS_H, NULL},
    {"worker", "order", T_ENUM, F(worker_order), "weighted", 0, 0, orders},
    /* The first four "jobs" rows are also the keys of each handler override. */
    {"jobs", "timeout", T_DURATION, J(timeout_ms), "5m", 1, JR_TIMEOUT_MAX_MS, NULL},
    {"jobs", "max_attempts", T_INT, J(max_attempts), "10", 1, JR_ATTEMPTS_MAX, NULL},
    {"jobs", "backoff", T_DURATION, J(backoff_ms), "1s", 0, JR_BACKOFF_MAX_MS, NULL},
    {"jobs", "backoff_max", T_DURATION, J(backoff_max_ms), "1h", 0, JR_BACKOFF_MAX_MS, NULL},
    {"jobs", "max_deliveries", T_INT, F(max_deliveries), "5", 1, 1000, NULL},
    {"jobs", "max_payload", T_INT, F(max_payload), "1048576", 1, 512 << 20, NULL},
    {"dead", "max", T_INT, F(dead_max), "10000", 1, 10000000, NULL},
    {"handlers", "*", T_HANDLERS, 0, NULL, 0, 0, NULL},
    {"scheduler", "queues", T_QUEUES, F(scheduler_queues), NULL, 0, 0, NULL}, /* []: all */
    {"scheduler", "batch", T_INT, F(scheduler_batch), "1000", 1, 100000, NULL},
    {"scheduler", "block", T_DURATION, F(scheduler_block_ms), "5s", 100, 60 * MS_S, NULL},
    {"metrics", "listen", T_ADDR, F(metrics_listen), NULL, 0, 0, NULL}, /* NULL: off */
    {"metrics", "port_offset", T_INT, F(metrics_port_offset), "0", 0, 65535, NULL},
    {"web", "listen", T_ADDR, F(web_listen), "127.0.0.1:8080", 0, 0, NULL},
    {"web", "password", T_SECRET, F(web_password), NULL, 0, 0, NULL}, /* NULL: none (localhost only) */
    {"web", "read_only", T_ENUM, F(web_read_only), "false", 0, 0, booleans},
    {"enqueue", "queue", T_QUEUE, F(default_queue), JR_DEFAULT_QUEUE, 0, 0, NULL},
    {"periodic", "*", T_PERIODIC, 0, NULL, 0, 0, NULL},
    {"plugin_settings", "*", T_PSETTINGS, 0, NULL, 0, 0, NULL},
    {"queues", "*", T_QSECTION, 0, NULL, 0, 0, NULL},
};
#define NKEYS (sizeof keys / sizeof keys[0])

/* The rows that take a list: a sequence in the file; from a variable or a
 * flag, "a,b" or YAML flow "[a, b]". */
static int row_is_list(const key_def_t *d) { return d->type == T_PATHS || d->type == T_QUEUES || d->type == T_WQUEUES; }

/* A row whose key is "*" is a whole section (handlers, periodic,
 * plugin_settings): its variable is JOBRUNNER_<SECTION> and takes the
 * section's value in YAML flow syntax. */
static int row_is_section(const key_def_t *d) { return !strcmp(d->key, "*"); }

/* ---- lists and defaults ------------------------------------------------- */

/* Make room for item number n+1 in v, an array of n items of `size` bytes
 * that only this function grows: it doubles the array whenever n is a power
 * of two, so the capacity is always at least the power of two >= n (also
 * after items are dropped) and appending n items costs O(n). Returns the
 * array (moved or not), or NULL if memory ran out (v is then unchanged). */
static void *grow(void *v, size_t n, size_t size) {
    if (n & (n - 1)) return v; /* not a power of two: there is room */
    size_t cap = n ? 2 * n : 1;
    return cap <= SIZE_MAX / size ? realloc(v, cap * size) : NULL;
}

/* jr_strlist_push and jr_strlist_free are in strlist.c (the client library
 * needs them without the config loader). */

/* ---- a string set, for duplicate checks in linear time ----------------- */

/* Open addressing over strings owned elsewhere, each with a value (an
 * index or a line number); kept at most half full, so an insert or a lookup
 * costs O(1) on average. */
typedef struct {
    const char *key; /* NULL = empty */
    size_t val;
} slot_t;
typedef struct {
    slot_t *slot;
    size_t cap, n; /* cap: 0 or a power of two */
} strset_t;

static size_t hash_str(const char *s) { /* FNV-1a */
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)(h ^ (h >> 32));
}

/* The slot holding key, or NULL if key is not in the set. */
static slot_t *strset_get(const strset_t *set, const char *key) {
    if (!set->cap) return NULL;
    for (size_t i = hash_str(key) & (set->cap - 1);; i = (i + 1) & (set->cap - 1)) {
        if (!set->slot[i].key) return NULL;
        if (!strcmp(set->slot[i].key, key)) return &set->slot[i];
    }
}

/* Add key (not yet in the set) with its value. Returns 0 or JR_ENOMEM. */
static int strset_add(strset_t *set, const char *key, size_t val) {
    if (2 * (set->n + 1) > set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 16;
        slot_t *slot = cap <= SIZE_MAX / sizeof *slot ? calloc(cap, sizeof *slot) : NULL;
        if (!slot) return JR_ENOMEM;
        for (size_t i = 0; i < set->cap; i++) {
            if (!set->slot[i].key) continue;
            size_t j = hash_str(set->slot[i].key) & (cap - 1);
            while (slot[j].key) j = (j + 1) & (cap - 1);
            slot[j] = set->slot[i];
        }
        free(set->slot);
        set->slot = slot, set->cap = cap;
    }
    size_t j = hash_str(key) & (set->cap - 1);
    while (set->slot[j].key) j = (j + 1) & (set->cap - 1);
    set->slot[j] = (slot_t){key, val};
    set->n++;
    return 0;
}

static void strset_free(strset_t *set) {
    free(set->slot);
    memset(set, 0, sizeof *set);
}

static int parse_value(const key_def_t *d, const char *v, void *field, char *why, size_t whylen);

int jr_config_init(jr_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char why[JR_ERRLEN];
    for (size_t i = 0; i < NKEYS; i++) {
        int rc = keys[i].def ? parse_value(&keys[i], keys[i].def, (char *)cfg + keys[i].off, why,
                                           sizeof why)
                             : 0;
        if (rc) {
            jr_config_free(cfg);
            return rc;
        }
    }
    return 0;
}

void jr_config_free(jr_config_t *cfg) {
    free(cfg->redis_url);
    free(cfg->redis_sentinel_password);
    free(cfg->tls_ca_file), free(cfg->tls_ca_dir), free(cfg->tls_cert_file), free(cfg->tls_key_file);
    free(cfg->tls_server_name);
    free(cfg->redis_password_file);
    free(cfg->default_queue);
    free(cfg->metrics_listen);
    free(cfg->web_listen), free(cfg->web_password);
    jr_strlist_free(&cfg->plugin_paths);
    jr_strlist_free(&cfg->plugin_settings);
    jr_strlist_free(&cfg->queue_partitions);
    for (size_t i = 0; i < cfg->nqueue_keep; i++) free(cfg->queue_keep[i].queue);
    free(cfg->queue_keep);
    jr_strlist_free(&cfg->worker_queues);
    free(cfg->worker_weights);
    jr_strlist_free(&cfg->scheduler_queues);
    for (size_t i = 0; i < cfg->nhandlers; i++) free(cfg->handlers[i].name);
    free(cfg->handlers);
    for (size_t i = 0; i < cfg->nperiodic; i++) jr_cron_def_free(&cfg->periodic[i]);
    free(cfg->periodic);
    memset(cfg, 0, sizeof *cfg);
}

static int cmp_handler(const void *a, const void *b) {
    return strcmp(((const jr_handler_policy_t *)a)->name, ((const jr_handler_policy_t *)b)->name);
}

jr_keep_t jr_config_keep(const jr_config_t *cfg, const char *queue, const char *handler) {
    jr_keep_t off = {0, 0};
    if (handler && cfg->nhandlers) {
        jr_handler_policy_t key = {.name = (char *)handler};
        const jr_handler_policy_t *h = bsearch(&key, cfg->handlers, cfg->nhandlers, sizeof key, cmp_handler);
        if (h && h->keep.count >= 0) return h->keep;
    }
    size_t qlen = strlen(queue);
    const char *hash = strrchr(queue, '#'); /* a partition has its queue's setting */
    if (hash && hash[1] && strspn(hash + 1, "0123456789") == strlen(hash + 1)) qlen = (size_t)(hash - queue);
    for (size_t i = 0; i < cfg->nqueue_keep; i++)
        if (strlen(cfg->queue_keep[i].queue) == qlen && !memcmp(cfg->queue_keep[i].queue, queue, qlen))
            return cfg->queue_keep[i].keep;
    return off;
}

jr_policy_t jr_config_policy(const jr_config_t *cfg, const char *handler) {
    jr_policy_t p = cfg->jobs;
    if (!handler || !cfg->nhandlers) return p;
    /* The loader keeps the overrides sorted by name, without duplicates. */
    jr_handler_policy_t key = {.name = (char *)handler};
    const jr_handler_policy_t *h =
        bsearch(&key, cfg->handlers, cfg->nhandlers, sizeof key, cmp_handler);
    if (!h) return p;
    const jr_policy_t *o = &h->p;
    if (o->timeout_ms >= 0) p.timeout_ms = o->timeout_ms;
    if (o->max_attempts >= 0) p.max_attempts = o->max_attempts;
    if (o->backoff_ms >= 0) p.backoff_ms = o->backoff_ms;
    if (o->backoff_max_ms >= 0) p.backoff_max_ms = o->backoff_max_ms;
    return p;
}

/* ---- the loader --------------------------------------------------------- */

typedef struct {
    yaml_parser_t parser;
    yaml_event_t ev; /* the current event, owned while have_ev */
    int have_ev;
    const char *name; /* file name for messages */
    int no_lines;     /* messages without ":LINE" (a document made from one setting) */
    const char *text; /* the document, to place reader errors */
    size_t len;
    char *err;
    size_t errlen;
    jr_config_t *cfg;
    char *base; /* where row offsets point: the config, or shifted onto a handler override */
    size_t handlers_start; /* overrides before this index came from earlier loads */
    strset_t handler_names;  /* name -> index in cfg->handlers, while loading "handlers" */
    size_t *handler_lines;   /* line of each override this load added */
    size_t seen_line[NKEYS]; /* line where key i was set, 0 = not yet */
    size_t section_line[NKEYS]; /* same for the section starting at row i */
} loader_t;

static size_t ev_line(const loader_t *ld) { return ld->ev.start_mark.line + 1; }

/* Report "NAME:LINE: KEY: message" at the current event ("NAME: KEY:
 * message" if no_lines, KEY left out if NULL); returns JR_EINVAL. */
static int fail(loader_t *ld, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(loader_t *ld, const char *key, const char *fmt, ...) {
    char msg[JR_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ld->no_lines)
        jr_errf(ld->err, ld->errlen, "%s%s%s%s%s", ld->name, *ld->name ? ": " : "", key ? key : "",
                key ? ": " : "", msg);
    else
        jr_errf(ld->err, ld->errlen, "%s:%zu: %s%s%s", ld->name, ev_line(ld), key ? key : "",
                key ? ": " : "", msg);
    return JR_EINVAL;
}

/* Advance to the next event, freeing the previous one. On a YAML error,
 * report it and return JR_EINVAL (JR_ENOMEM if libyaml ran out of memory);
 * no event is then held. */
static int next(loader_t *ld) {
    if (ld->have_ev) yaml_event_delete(&ld->ev);
    ld->have_ev = 0;
    if (yaml_parser_parse(&ld->parser, &ld->ev)) {
        ld->have_ev = 1;
        return 0;
    }
    const yaml_parser_t *p = &ld->parser;
    if (p->error == YAML_MEMORY_ERROR) {
        jr_errf(ld->err, ld->errlen, "%s: %s", ld->name, jr_strerror(JR_ENOMEM));
        return JR_ENOMEM;
    }
    size_t line = p->problem_mark.line + 1;
    if (p->error == YAML_READER_ERROR) { /* reader errors give a byte offset only */
        line = 1;
        for (size_t i = 0; i < p->problem_offset && i < ld->len; i++) line += ld->text[i] == '\n';
    }
    char where[32] = "";
    if (!ld->no_lines) snprintf(where, sizeof where, ":%zu", line);
    jr_errf(ld->err, ld->errlen, "%s%s: YAML syntax error: %s%s%s%s", ld->name, where,
            p->problem ? p->problem : "unknown problem", p->context ? " (" : "",
            p->context ? p->context : "", p->context ? ")" : "");
    return JR_EINVAL;
}

static const char *ev_text(const loader_t *ld) { return (const char *)ld->ev.data.scalar.value; }

/* A plain empty, "~" or "null" scalar: YAML's null. */
static int ev_is_null(const loader_t *ld) {
    if (ld->ev.type != YAML_SCALAR_EVENT || ld->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = ev_text(ld);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
           !strcmp(s, "NULL");
}

static const char *ev_kind(const loader_t *ld) {
    switch (ld->ev.type) {
    case YAML_SCALAR_EVENT: return ev_is_null(ld) ? "an empty value" : "a scalar";
    case YAML_SEQUENCE_START_EVENT: return "a sequence";
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_ALIAS_EVENT: return "an alias (not supported)";
    default: return "something else";
    }
}

/* Queue names: the rule of contract.h. */
static int queue_name_ok(const char *s) { return jr_contract_queue_name(s, strlen(s)) == NULL; }

/* Size of a dotted key path ("worker.batch") in messages. */
#define PATH_LEN 160

#define QUEUE_RULE JR_QUEUE_RULE

/* Strict decimal integer (optional '-'), no spaces; 0 or -1. */
static int parse_int64(const char *s, int64_t *out) {
    char *end;
    if (!*s || (*s != '-' && (*s < '0' || *s > '9'))) return -1;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* Check the text v as a value of scalar row d and store it in field (a
 * string replaces the one there). Returns 0, JR_ENOMEM, or JR_EINVAL with
 * what is wrong in why (e.g. "must be an integer from 1 to 256, got "x""),
 * the field then unchanged. */
static int parse_value(const key_def_t *d, const char *v, void *field, char *why, size_t whylen) {
    switch (d->type) {
    case T_URL: {
        jr_redis_url_t u;
        int rc = jr_redis_url_parse(v, &u, why, whylen);
        jr_redis_url_free(&u);
        if (rc) return rc;
        break;
    }
    case T_ADDR: {
        char host[256];
        int port;
        if (jr_metrics_parse_addr(v, host, sizeof host, &port, why, whylen)) return JR_EINVAL;
        break;
    }
    case T_PATH:
        if (!*v) {
            jr_errf(why, whylen, "must not be empty");
            return JR_EINVAL;
        }
        break;
    case T_QUEUE:
        if (!queue_name_ok(v)) {
            jr_errf(why, whylen, "bad queue name \"%s\" (must be %s)", v, QUEUE_RULE);
            return JR_EINVAL;
        }
        break;
    case T_SECRET:
        break;
    case T_DURATION: {
        char range[JR_ERRLEN];
        if (jr_duration_parse_range(v, d->min, d->max, (int64_t *)field, range, sizeof range)) {
            jr_errf(why, whylen, "%s, got \"%s\"", range, v);
            return JR_EINVAL;
        }
        return 0;
    }
    case T_INT: {
        int64_t n;
        if (parse_int64(v, &n) || n < d->min || n > d->max) {
            jr_errf(why, whylen, "must be an integer from %lld to %lld, got \"%s\"",
                    (long long)d->min, (long long)d->max, v);
            return JR_EINVAL;
        }
        *(int64_t *)field = n;
        return 0;
    }
    case T_ENUM:
        for (int i = 0; d->names[i]; i++) {
            if (strcmp(v, d->names[i]) == 0) {
                *(int *)field = i;
                return 0;
            }
        }
        char choices[128] = "";
        for (int i = 0; d->names[i]; i++)
            snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s%s",
                     i ? (d->names[i + 1] ? ", " : " or ") : "", d->names[i]);
        jr_errf(why, whylen, "must be %s, got \"%s\"", choices, v);
        return JR_EINVAL;
    default:
        jr_errf(why, whylen, "internal error: not a scalar key");
        return JR_EINVAL;
    }
    /* T_URL, T_ADDR, T_PATH, T_QUEUE and T_SECRET: replace the string. */
    char *copy = strdup(v);
    if (!copy) return JR_ENOMEM;
    free(*(char **)field);
    *(char **)field = copy;
    return 0;
}

/* Apply the scalar value of the current event to row d. */
static int set_scalar(loader_t *ld, const key_def_t *d, const char *path) {
    char why[JR_ERRLEN];
    int rc = parse_value(d, ev_text(ld), ld->base + d->off, why, sizeof why);
    return rc == JR_EINVAL ? fail(ld, path, "%s", why) : rc;
}

static int check_key_event(loader_t *ld, const char *where);

/* The current event opens a mapping item of worker.queues: {name: Q,
 * weight: N}; name is required, weight is 1..JR_WEIGHT_MAX (default 1).
 * Reads through the mapping's end. The name goes into *name (NULL on entry;
 * malloc'd, the caller frees it, also on error). */
static int weighted_item(loader_t *ld, const char *item, char **name, int64_t *weight) {
    int rc;
    size_t name_line = 0, weight_line = 0;
    char key[PATH_LEN + 40];
    *weight = 1;
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, item))) return rc;
        snprintf(key, sizeof key, "%s.%s", item, ev_text(ld));
        int is_name = !strcmp(ev_text(ld), "name"), is_weight = !strcmp(ev_text(ld), "weight");
        if (!is_name && !is_weight) return fail(ld, key, "unknown key (a queue has name and weight)");
        size_t *seen = is_name ? &name_line : &weight_line;
        if (*seen) return fail(ld, key, "duplicate key (first given on line %zu)", *seen);
        *seen = ev_line(ld);
        if ((rc = next(ld))) return rc;
        if (ld->ev.type != YAML_SCALAR_EVENT || ev_is_null(ld))
            return fail(ld, key, "expected a single value, got %s", ev_kind(ld));
        const char *v = ev_text(ld);
        if (is_name) {
            if (!queue_name_ok(v))
                return fail(ld, key, "bad queue name \"%s\" (must be %s)", v, QUEUE_RULE);
            if (!(*name = strdup(v))) return JR_ENOMEM;
        } else if (parse_int64(v, weight) || *weight < 1 || *weight > JR_WEIGHT_MAX) {
            return fail(ld, key, "must be an integer from 1 to %d, got \"%s\"", JR_WEIGHT_MAX, v);
        }
    }
    if (rc) return rc;
    if (!name_line) return fail(ld, item, "a queue given as a mapping needs a name");
    return 0;
}

/* The current event is the value of a list key: read the whole sequence,
 * check each item, then replace the list in the config (and, for
 * worker.queues, the weights). On error the config is unchanged. */
static int set_list(loader_t *ld, const key_def_t *d, const char *path) {
    jr_strlist_t list = {0};
    strset_t seen = {0};
    int64_t *weights = NULL;
    int rc = 0, weighted = 0;
    int queues = d->type == T_QUEUES || d->type == T_WQUEUES;
    char item[PATH_LEN + 24]; /* path plus "[index]" */
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_SEQUENCE_END_EVENT) {
        snprintf(item, sizeof item, "%s[%zu]", path, list.n);
        int64_t weight = 1;
        const char *v;
        size_t line = ev_line(ld);
        char *wname = NULL; /* the name of a {name: Q, weight: N} item */
        if (d->type == T_WQUEUES && ld->ev.type == YAML_MAPPING_START_EVENT) {
            if ((rc = weighted_item(ld, item, &wname, &weight))) {
                free(wname);
                break;
            }
            v = wname, weighted = 1;
        } else if (ld->ev.type != YAML_SCALAR_EVENT || ev_is_null(ld)) {
            rc = fail(ld, item, "expected a %s, got %s",
                      d->type == T_WQUEUES ? "queue name or {name: Q, weight: N}" : "string", ev_kind(ld));
            break;
        } else {
            v = ev_text(ld);
        }
        if (d->type == T_PATHS && !*v) {
            rc = fail(ld, item, "must not be empty");
        } else if (queues && !queue_name_ok(v)) {
            rc = fail(ld, item, "bad queue name \"%s\" (must be %s)", v, QUEUE_RULE);
        } else if (queues && strset_get(&seen, v)) {
            rc = fail(ld, item, "queue \"%s\" is listed twice (first given on line %zu)", v,
                      strset_get(&seen, v)->val);
        }
        if (!rc && d->type == T_WQUEUES) {
            int64_t *w = grow(weights, list.n, sizeof *w);
            if (!w) rc = JR_ENOMEM;
            else weights = w, weights[list.n] = weight;
        }
        if (!rc) rc = jr_strlist_push(&list, v);
        if (!rc && queues) rc = strset_add(&seen, list.v[list.n - 1], line);
        free(wname);
        if (rc) break;
    }
    strset_free(&seen);
    if (rc) {
        jr_strlist_free(&list);
        free(weights);
        return rc;
    }
    jr_strlist_t *field = (jr_strlist_t *)((char *)ld->cfg + d->off);
    jr_strlist_free(field);
    *field = list;
    if (d->type == T_WQUEUES) { /* the weights go with the list; all 1 = none */
        free(ld->cfg->worker_weights);
        ld->cfg->worker_weights = weighted ? weights : NULL;
        if (!weighted) free(weights);
    }
    return 0;
}

/* The name N when section `sec` is "PARENT.N" (a mapping inside section
 * parent), else NULL. */
static const char *subsection_of(const char *sec, const char *parent) {
    size_t n = strlen(parent);
    return !strncmp(sec, parent, n) && sec[n] == '.' ? sec + n + 1 : NULL;
}

/* Comma-separated names of the keys of `section` (or of all sections if
 * section is NULL), for "unknown key" messages. */
static const char *known_names(const char *section, char *buf, size_t len) {
    buf[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++) {
        const char *name, *sub = section ? subsection_of(keys[i].section, section) : NULL;
        int first = i == 0 || strcmp(keys[i].section, keys[i - 1].section);
        if (sub)
            name = first ? sub : NULL;
        else if (section)
            name = strcmp(keys[i].section, section) == 0 ? keys[i].key : NULL;
        else
            name = first && !strchr(keys[i].section, '.') ? keys[i].section : NULL;
        if (name)
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? ", " : "", name);
    }
    return buf;
}

/* The current event is a key (scalar) in the top-level mapping, or in the
 * mapping of a section; find its row (first row of the section if `section`
 * is NULL). */
static int find_row(const loader_t *ld, const char *section) {
    const char *k = ev_text(ld);
    for (size_t i = 0; i < NKEYS; i++) {
        if (section ? !strcmp(keys[i].section, section) && !strcmp(keys[i].key, k)
                    : !strcmp(keys[i].section, k) && !strchr(k, '.'))
            return (int)i;
    }
    return -1;
}

/* Index of the first row of a section. */
static int find_row_index(const char *section) {
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section)) return (int)i;
    return -1;
}

/* Refuse anything but a plain string as a mapping key. */
static int check_key_event(loader_t *ld, const char *where) {
    if (ld->ev.type == YAML_SCALAR_EVENT) return 0;
    return fail(ld, where, "expected a key name, got %s", ev_kind(ld));
}

/* Handler names as in plugins: the rule of contract.h. */
static int handler_name_ok(const char *s) { return jr_contract_handler_name(s, strlen(s)) == NULL; }

/* The current event is the value of a keep_finished key (`path` names it):
 * a mapping {count: 0..JR_KEEP_FINISHED_MAX (required; 0 = off), age: a
 * duration (optional; none = no age limit)} into *k. */
static int load_keep(loader_t *ld, const char *path, jr_keep_t *k) {
    if (ld->ev.type != YAML_MAPPING_START_EVENT)
        return fail(ld, path, "expected a mapping {count: N, age: D} (count 0..%d required, age optional), got %s",
                    JR_KEEP_FINISHED_MAX, ev_kind(ld));
    char key[2 * PATH_LEN + 16], why[JR_ERRLEN];
    size_t seen[2] = {0}, line0 = ev_line(ld);
    jr_keep_t v = {-1, 0};
    int rc;
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, path))) return rc;
        snprintf(key, sizeof key, "%s.%s", path, ev_text(ld));
        int which = !strcmp(ev_text(ld), "count") ? 0 : !strcmp(ev_text(ld), "age") ? 1 : -1;
        if (which < 0) return fail(ld, key, "unknown key (keep_finished has count and age)");
        if (seen[which]) return fail(ld, key, "duplicate key (first given on line %zu)", seen[which]);
        seen[which] = ev_line(ld);
        if ((rc = next(ld))) return rc;
        if (ld->ev.type != YAML_SCALAR_EVENT || ev_is_null(ld))
            return fail(ld, key, "expected a single value, got %s", ev_kind(ld));
        if (which == 0 && (parse_int64(ev_text(ld), &v.count) || v.count < 0 || v.count > JR_KEEP_FINISHED_MAX))
            return fail(ld, key, "must be an integer from 0 (off) to %d, got \"%s\"", JR_KEEP_FINISHED_MAX, ev_text(ld));
        if (which == 1 && jr_duration_parse_range(ev_text(ld), 1, JR_DELAY_MAX_MS, &v.age_ms, why, sizeof why))
            return fail(ld, key, "%s", why);
    }
    if (rc) return rc;
    if (v.count < 0)
        return fail(ld, path, "count is required (keep_finished on line %zu: the most records kept, 0..%d)", line0,
                    JR_KEEP_FINISHED_MAX);
    *k = v;
    return 0;
}

/* The current event opens the "handlers" section: a mapping of handler
 * name -> mapping of the four policy keys of "jobs". Values go into an
 * override whose unset fields stay -1 (inherit). */
static int load_handlers(loader_t *ld) {
    if (ev_is_null(ld)) return 0;
    if (ld->ev.type != YAML_MAPPING_START_EVENT)
        return fail(ld, "handlers", "expected a mapping of handler names, got %s", ev_kind(ld));
    int rc;
    char path[PATH_LEN];
    for (size_t i = 0; i < ld->cfg->nhandlers; i++) /* from earlier loads */
        if ((rc = strset_add(&ld->handler_names, ld->cfg->handlers[i].name, i))) return rc;
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, "handlers"))) return rc;
        const char *name = ev_text(ld);
        snprintf(path, sizeof path, "handlers.%s", name);
        if (!handler_name_ok(name))
            return fail(ld, path, "bad handler name (" JR_HANDLER_RULE ")");
        jr_config_t *c = ld->cfg;
        slot_t *old = strset_get(&ld->handler_names, name);
        if (old && old->val >= ld->handlers_start)
            return fail(ld, path, "duplicate key (first given on line %zu)",
                        ld->handler_lines[old->val - ld->handlers_start]);
        size_t at = c->nhandlers, nnew = at - ld->handlers_start;
        char *copy = strdup(name);
        jr_handler_policy_t *hs = copy ? grow(c->handlers, at, sizeof *hs) : NULL;
        if (hs) c->handlers = hs;
        size_t *lines = hs ? grow(ld->handler_lines, nnew, sizeof *lines) : NULL;
        if (!lines) {
            free(copy);
            return JR_ENOMEM;
        }
        ld->handler_lines = lines;
        jr_handler_policy_t *h = &c->handlers[at];
        *h = (jr_handler_policy_t){copy, {-1, -1, -1, -1}, {-1, 0}};
        ld->handler_lines[nnew] = ev_line(ld);
        c->nhandlers++;
        if (old) { /* set by an earlier file: this one replaces it */
            free(c->handlers[old->val].name);
            c->handlers[old->val].name = NULL; /* dropped by finish_handlers */
            *old = (slot_t){copy, at};
        } else if ((rc = strset_add(&ld->handler_names, copy, at))) {
            return rc;
        }
        if ((rc = next(ld))) return rc;
        if (ev_is_null(ld)) continue;
        if (ld->ev.type != YAML_MAPPING_START_EVENT)
            return fail(ld, path, "expected a mapping (timeout, max_attempts, backoff, backoff_max), got %s",
                        ev_kind(ld));
        size_t seen[4] = {0}, seen_keep = 0;
        while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
            char key[PATH_LEN + 70];
            if ((rc = check_key_event(ld, path))) return rc;
            snprintf(key, sizeof key, "%s.%s", path, ev_text(ld));
            if (!strcmp(ev_text(ld), "keep_finished")) {
                if (seen_keep) return fail(ld, key, "duplicate key (first given on line %zu)", seen_keep);
                seen_keep = ev_line(ld);
                if ((rc = next(ld)) || (rc = load_keep(ld, key, &h->keep))) return rc;
                continue;
            }
            int row = find_row(ld, "jobs");
            int first = find_row_index("jobs");
            if (row < 0 || row - first >= 4)
                return fail(ld, key, "unknown key (a handler has timeout, max_attempts, backoff, backoff_max, "
                            "keep_finished)");
            if (seen[row - first]) return fail(ld, key, "duplicate key (first given on line %zu)", seen[row - first]);
            seen[row - first] = ev_line(ld);
            if ((rc = next(ld))) return rc;
            if (ld->ev.type != YAML_SCALAR_EVENT || ev_is_null(ld))
                return fail(ld, key, "expected a single value, got %s", ev_kind(ld));
            ld->base = (char *)&h->p - F(jobs);
            rc = set_scalar(ld, &keys[row], key);
            ld->base = (char *)ld->cfg;
            if (rc) return rc;
        }
        if (rc) return rc;
    }
    return rc;
}

/* ---- periodic: a sequence of schedules ------------------------------------ */

static const char *const periodic_keys[] = {"name", "handler", "queue", "payload", "cron",
                                            "every", "timezone", "missed", "enabled", NULL};
#define PERIODIC_KEYS "name, handler, queue, payload, cron, every, timezone, missed, enabled"

static void free_defs(jr_cron_def_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) jr_cron_def_free(&v[i]);
    free(v);
}

/* Read the mapping of one schedule (the current event opens it) into *d.
 * `at` names the entry in messages ("periodic[2]"); `names` holds the
 * names of the entries before it (value: line). */
static int load_schedule(loader_t *ld, jr_cron_def_t *d, const char *at, strset_t *names) {
    size_t seen[9] = {0}, line0 = ev_line(ld);
    char path[PATH_LEN + 40], entry[PATH_LEN];
    int rc;
    snprintf(entry, sizeof entry, "%s", at);
    d->enabled = 1;
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, entry))) return rc;
        snprintf(path, sizeof path, "%s.%s", entry, ev_text(ld));
        int k = 0;
        while (periodic_keys[k] && strcmp(periodic_keys[k], ev_text(ld))) k++;
        if (!periodic_keys[k]) return fail(ld, path, "unknown key (a schedule has " PERIODIC_KEYS ")");
        if (seen[k]) return fail(ld, path, "duplicate key (first given on line %zu)", seen[k]);
        seen[k] = ev_line(ld);
        if ((rc = next(ld))) return rc;
        if (ld->ev.type != YAML_SCALAR_EVENT || (ev_is_null(ld) && k != 3))
            return fail(ld, path, "expected a single value, got %s", ev_kind(ld));
        const char *v = ev_text(ld);
        char why[JR_ERRLEN], **str = NULL;
        jr_cron_t parsed;
        switch (k) {
        case 0:
            if (!jr_cron_name_valid(v))
                return fail(ld, path, "bad schedule name \"%s\" (1 to %d of A-Z a-z 0-9 _ . : -)", v, JR_CRON_NAME_MAX);
            if (strset_get(names, v))
                return fail(ld, path, "schedule \"%s\" is listed twice (first given on line %zu)", v,
                            strset_get(names, v)->val);
            str = &d->name;
            snprintf(entry, sizeof entry, "periodic.%s", v);
            break;
        case 1:
            if (!*v) return fail(ld, path, "must not be empty");
            str = &d->handler;
            break;
        case 2:
            if (!queue_name_ok(v)) return fail(ld, path, "bad queue name \"%s\" (must be %s)", v, QUEUE_RULE);
            str = &d->queue;
            break;
        case 3:
            if (!ev_is_null(ld)) str = &d->payload;
            break;
        case 4:
            if (jr_cron_parse(v, &parsed, why, sizeof why)) return fail(ld, path, "%s", why);
            str = &d->cron;
            break;
        case 5:
            if (jr_duration_parse_range(v, JR_CRON_EVERY_MIN_MS, JR_CRON_EVERY_MAX_MS, &d->every_ms, why, sizeof why))
                return fail(ld, path, "%s, got \"%s\"", why, v);
            break;
        case 6:
            if (!jr_tz_valid(v))
                return fail(ld, path, "unknown time zone \"%s\" (an IANA name from the system tz database, "
                            "like Europe/Berlin, or UTC)", v);
            str = &d->tz;
            break;
        case 7:
            if (strcmp(v, "skip") && strcmp(v, "once")) return fail(ld, path, "must be skip or once, got \"%s\"", v);
            d->missed = strcmp(v, "once") == 0 ? JR_MISSED_ONCE : JR_MISSED_SKIP;
            break;
        default:
            if (strcmp(v, "true") && strcmp(v, "false")) return fail(ld, path, "must be true or false, got \"%s\"", v);
            d->enabled = strcmp(v, "true") == 0;
            break;
        }
        if (str && !(*str = strdup(v))) return JR_ENOMEM;
    }
    if (rc) return rc;
    if (!d->queue && !(d->queue = strdup(JR_DEFAULT_QUEUE))) return JR_ENOMEM;
    if (!d->tz && !(d->tz = strdup("UTC"))) return JR_ENOMEM;
    const char *missing = !d->name ? "name" : !d->handler ? "handler" : NULL;
    if (missing || !d->cron == !d->every_ms) {
        jr_errf(ld->err, ld->errlen, "%s:%zu: %s: %s", ld->name, line0, entry,
                missing ? (!d->name ? "the key name is missing" : "the key handler is missing")
                        : "give exactly one of cron and every");
        return JR_EINVAL;
    }
    char why[JR_ERRLEN];
    if (jr_cron_def_check(d, why, sizeof why)) {
        jr_errf(ld->err, ld->errlen, "%s:%zu: %s: %s", ld->name, line0, entry, why);
        return JR_EINVAL;
    }
    return strset_add(names, d->name, line0);
}

/* The current event opens the "periodic" section: a sequence of schedules.
 * The list replaces any list of an earlier file. */
static int load_periodic(loader_t *ld) {
    jr_cron_def_t *v = NULL;
    size_t n = 0;
    strset_t names = {0};
    int rc = 0;
    if (!ev_is_null(ld)) {
        if (ld->ev.type != YAML_SEQUENCE_START_EVENT)
            return fail(ld, "periodic", "expected a sequence of schedules, got %s", ev_kind(ld));
        while ((rc = next(ld)) == 0 && ld->ev.type != YAML_SEQUENCE_END_EVENT) {
            char at[PATH_LEN];
            snprintf(at, sizeof at, "periodic[%zu]", n);
            if (ld->ev.type != YAML_MAPPING_START_EVENT) {
                rc = fail(ld, at, "expected a mapping (" PERIODIC_KEYS "), got %s", ev_kind(ld));
                break;
            }
            jr_cron_def_t *g = grow(v, n, sizeof *v);
            if (!g) {
                rc = JR_ENOMEM;
                break;
            }
            v = g;
            memset(&v[n], 0, sizeof *v);
            if ((rc = load_schedule(ld, &v[n++], at, &names))) break;
        }
    }
    strset_free(&names);
    if (rc) {
        free_defs(v, n);
        return rc;
    }
    free_defs(ld->cfg->periodic, ld->cfg->nperiodic);
    ld->cfg->periodic = v, ld->cfg->nperiodic = n;
    return 0;
}

/* Set plugin setting plugin.key to value in cfg->plugin_settings (triples
 * plugin, key, value), replacing one an earlier file set. */
static int psetting_put(jr_config_t *cfg, const char *plugin, const char *key, const char *value) {
    jr_strlist_t *l = &cfg->plugin_settings;
    for (size_t i = 0; i + 2 < l->n; i += 3)
        if (!strcmp(l->v[i], plugin) && !strcmp(l->v[i + 1], key)) {
            char *v = strdup(value);
            if (!v) return JR_ENOMEM;
            free(l->v[i + 2]);
            l->v[i + 2] = v;
            return 0;
        }
    return jr_strlist_push(l, plugin) || jr_strlist_push(l, key) || jr_strlist_push(l, value) ? JR_ENOMEM : 0;
}

/* The current event opens the "plugin_settings" section: a mapping of
 * plugin names (as in their descriptors) to mappings of their own keys and
 * single values, which a plugin reads with api->setting. */
static int load_plugin_settings(loader_t *ld) {
    if (ev_is_null(ld)) return 0;
    if (ld->ev.type != YAML_MAPPING_START_EVENT)
        return fail(ld, "plugin_settings", "expected a mapping of plugin names, got %s", ev_kind(ld));
    int rc;
    char path[PATH_LEN], key[2 * PATH_LEN];
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, "plugin_settings"))) return rc;
        snprintf(path, sizeof path, "plugin_settings.%s", ev_text(ld));
        char *plugin = strdup(ev_text(ld));
        if (!plugin) return JR_ENOMEM;
        if ((rc = next(ld))) goto out;
        if (ev_is_null(ld)) goto next_plugin;
        if (ld->ev.type != YAML_MAPPING_START_EVENT) {
            rc = fail(ld, path, "expected a mapping of the plugin's settings, got %s", ev_kind(ld));
            goto out;
        }
        while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
            if ((rc = check_key_event(ld, path))) goto out;
            snprintf(key, sizeof key, "%s.%s", path, ev_text(ld));
            char *name = strdup(ev_text(ld));
            if (!name) {
                rc = JR_ENOMEM;
                goto out;
            }
            if (!(rc = next(ld)) && (ld->ev.type != YAML_SCALAR_EVENT || ev_is_null(ld)))
                rc = fail(ld, key, "expected a single value, got %s", ev_kind(ld));
            if (!rc) rc = psetting_put(ld->cfg, plugin, name, ev_text(ld));
            free(name);
            if (rc) goto out;
        }
    next_plugin:
        free(plugin);
        plugin = NULL;
        continue;
    out:
        free(plugin);
        return rc;
    }
    return rc;
}

/* Set queue's keep_finished (replacing an earlier one). 0 or JR_ENOMEM. */
static int set_queue_keep(jr_config_t *c, const char *queue, jr_keep_t k) {
    for (size_t i = 0; i < c->nqueue_keep; i++)
        if (!strcmp(c->queue_keep[i].queue, queue)) {
            c->queue_keep[i].keep = k;
            return 0;
        }
    char *copy = strdup(queue);
    jr_queue_keep_t *v = copy ? realloc(c->queue_keep, (c->nqueue_keep + 1) * sizeof *v) : NULL;
    if (!v) {
        free(copy);
        return JR_ENOMEM;
    }
    c->queue_keep = v;
    v[c->nqueue_keep++] = (jr_queue_keep_t){copy, k};
    return 0;
}

/* The current event opens the "queues" section: a mapping of queue names
 * (each a queue name by the rule of contract.h) to a mapping of the keys of
 * a queue: partitions (1..1024, see partition.h) and keep_finished (see
 * load_keep; read by the worker, jr_config_keep). A queue named twice in
 * one section is refused; a later layer (the environment after the file)
 * replaces what an earlier one set. */
static int load_queues(loader_t *ld) {
    if (ev_is_null(ld)) return 0;
    if (ld->ev.type != YAML_MAPPING_START_EVENT)
        return fail(ld, "queues", "expected a mapping of queue names, got %s", ev_kind(ld));
    int rc;
    char path[PATH_LEN], key[2 * PATH_LEN];
    jr_strlist_t seen = {0}; /* the queues of this section */
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, "queues"))) break;
        snprintf(path, sizeof path, "queues.%s", ev_text(ld));
        const char *rule = jr_contract_queue_name(ev_text(ld), strlen(ev_text(ld)));
        if (rule) {
            rc = fail(ld, path, "queue name %s", rule);
            break;
        }
        size_t k = 0;
        while (k < seen.n && strcmp(seen.v[k], ev_text(ld))) k++;
        if (k < seen.n) {
            rc = fail(ld, path, "queue \"%s\" is given twice", ev_text(ld));
            break;
        }
        if ((rc = jr_strlist_push(&seen, ev_text(ld)))) break;
        char *queue = strdup(ev_text(ld));
        if (!queue) {
            rc = JR_ENOMEM;
            break;
        }
        if ((rc = next(ld))) goto out;
        if (ev_is_null(ld)) goto next_queue;
        if (ld->ev.type != YAML_MAPPING_START_EVENT) {
            rc = fail(ld, path, "expected a mapping of the queue's keys (partitions, keep_finished), got %s", ev_kind(ld));
            goto out;
        }
        size_t seen_keep = 0, seen_parts = 0; /* the line each was given on */
        while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
            if ((rc = check_key_event(ld, path))) goto out;
            snprintf(key, sizeof key, "%s.%s", path, ev_text(ld));
            size_t *seen_at = !strcmp(ev_text(ld), "keep_finished") ? &seen_keep
                              : !strcmp(ev_text(ld), "partitions")  ? &seen_parts
                                                                      : NULL;
            if (seen_at && *seen_at) {
                rc = fail(ld, key, "duplicate key (first given on line %zu)", *seen_at);
                goto out;
            }
            if (seen_at) *seen_at = ev_line(ld);
            if (!strcmp(ev_text(ld), "keep_finished")) {
                jr_keep_t kf;
                if ((rc = next(ld)) || (rc = load_keep(ld, key, &kf)) || (rc = set_queue_keep(ld->cfg, queue, kf)))
                    goto out;
                continue;
            }
            if (strcmp(ev_text(ld), "partitions")) {
                rc = fail(ld, key, "unknown key (a queue takes: partitions, keep_finished)");
                goto out;
            }
            int64_t n = 0;
            if (!(rc = next(ld)) && (ld->ev.type != YAML_SCALAR_EVENT || parse_int64(ev_text(ld), &n) || n < 1 ||
                                     n > JR_PARTITIONS_MAX))
                rc = fail(ld, key, "must be an integer from 1 to %d", JR_PARTITIONS_MAX);
            if (rc) goto out;
            char count[16];
            snprintf(count, sizeof count, "%lld", (long long)n);
            jr_strlist_t *l = &ld->cfg->queue_partitions;
            size_t i = 0;
            while (i + 1 < l->n && strcmp(l->v[i], queue)) i += 2;
            if (i + 1 < l->n) {
                char *v = strdup(count);
                if (!v) {
                    rc = JR_ENOMEM;
                    goto out;
                }
                free(l->v[i + 1]);
                l->v[i + 1] = v;
            } else if (jr_strlist_push(l, queue) || jr_strlist_push(l, count)) {
                rc = JR_ENOMEM;
                goto out;
            }
        }
        if (rc) goto out;
    next_queue:
        free(queue);
        continue;
    out:
        free(queue);
        break;
    }
    jr_strlist_free(&seen);
    return rc;
}

/* The current event opens a section's value; read its keys (or hand the
 * sections set whole to their readers). */
static int load_section(loader_t *ld, const char *section) {
    if (!strcmp(section, "handlers")) return load_handlers(ld);
    if (!strcmp(section, "queues")) return load_queues(ld);
    if (!strcmp(section, "plugin_settings")) return load_plugin_settings(ld);
    if (!strcmp(section, "periodic")) return load_periodic(ld);
    if (ev_is_null(ld)) return 0; /* "worker:" with every key commented out */
    if (ld->ev.type != YAML_MAPPING_START_EVENT)
        return fail(ld, section, "expected a mapping of keys, got %s", ev_kind(ld));
    int rc;
    char path[PATH_LEN], names[256];
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, section))) return rc;
        snprintf(path, sizeof path, "%s.%s", section, ev_text(ld));
        int row = find_row(ld, section), sub = row < 0 ? find_row_index(path) : -1;
        if (sub >= 0) { /* a mapping inside this section (redis.tls) */
            if (ld->section_line[sub])
                return fail(ld, path, "duplicate key (first given on line %zu)", ld->section_line[sub]);
            ld->section_line[sub] = ev_line(ld);
            char subsection[PATH_LEN];
            snprintf(subsection, sizeof subsection, "%s", path);
            if ((rc = next(ld)) || (rc = load_section(ld, subsection))) return rc;
            continue;
        }
        if (row < 0)
            return fail(ld, path, "unknown key (%s has %s)", section,
                        known_names(section, names, sizeof names));
        if (ld->seen_line[row])
            return fail(ld, path, "duplicate key (first given on line %zu)", ld->seen_line[row]);
        ld->seen_line[row] = ev_line(ld);

        const key_def_t *d = &keys[row];
        if ((rc = next(ld))) return rc;
        int is_list = row_is_list(d);
        if (is_list && ld->ev.type != YAML_SEQUENCE_START_EVENT)
            return fail(ld, path, "expected a sequence (e.g. [a, b] or []), got %s",
                        ev_kind(ld));
        if (!is_list && (ld->ev.type != YAML_SCALAR_EVENT || ev_is_null(ld)))
            return fail(ld, path, "expected a single value, got %s", ev_kind(ld));
        if ((rc = is_list ? set_list(ld, d, path) : set_scalar(ld, d, path))) return rc;
    }
    return rc;
}

/* The current event opens the document's root node. */
static int load_root(loader_t *ld) {
    char section[64], names[128];
    if (ev_is_null(ld)) return 0; /* a document with no content */
    if (ld->ev.type != YAML_MAPPING_START_EVENT)
        return fail(ld, NULL, "top level must be a mapping of sections (%s), got %s",
                    known_names(NULL, names, sizeof names), ev_kind(ld));
    int rc;
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, NULL))) return rc;
        int row = find_row(ld, NULL);
        if (row < 0)
            return fail(ld, ev_text(ld), "unknown section (expected %s)",
                        known_names(NULL, names, sizeof names));
        if (ld->section_line[row])
            return fail(ld, keys[row].section, "duplicate key (first given on line %zu)",
                        ld->section_line[row]);
        ld->section_line[row] = ev_line(ld);
        snprintf(section, sizeof section, "%s", keys[row].section);
        if ((rc = next(ld)) || (rc = load_section(ld, section))) return rc;
    }
    return rc;
}

/* Walk the event stream: at most one document, whose root is a mapping. */
static int load_stream(loader_t *ld) {
    int rc;
    if ((rc = next(ld)) || (rc = next(ld))) return rc; /* STREAM-START, then... */
    if (ld->ev.type == YAML_STREAM_END_EVENT) return 0;  /* empty file */
    /* DOCUMENT-START, root node, DOCUMENT-END */
    if ((rc = next(ld)) || (rc = load_root(ld)) || (rc = next(ld)) || (rc = next(ld))) return rc;
    if (ld->ev.type != YAML_STREAM_END_EVENT)
        return fail(ld, NULL, "only one YAML document is allowed");
    return 0;
}

/* Drop the overrides a later file replaced and sort the rest by name, for
 * jr_config_policy's binary search. */
static void finish_handlers(jr_config_t *cfg) {
    size_t j = 0;
    for (size_t i = 0; i < cfg->nhandlers; i++)
        if (cfg->handlers[i].name) cfg->handlers[j++] = cfg->handlers[i];
    cfg->nhandlers = j;
    if (j) qsort(cfg->handlers, j, sizeof *cfg->handlers, cmp_handler);
}

/* jr_config_load_string, with messages without line numbers if no_lines. */
static int load_doc(jr_config_t *cfg, const char *yaml, size_t len, const char *name, int no_lines,
                    char *err, size_t errlen) {
    loader_t ld;
    memset(&ld, 0, sizeof ld);
    ld.no_lines = no_lines;
    if (!yaml_parser_initialize(&ld.parser)) {
        jr_errf(err, errlen, "%s: %s", name, jr_strerror(JR_ENOMEM));
        return JR_ENOMEM;
    }
    yaml_parser_set_input_string(&ld.parser, (const unsigned char *)yaml, len);
    ld.name = name;
    ld.text = yaml;
    ld.len = len;
    ld.err = err;
    ld.errlen = errlen;
    ld.cfg = cfg;
    ld.base = (char *)cfg;
    ld.handlers_start = cfg->nhandlers;
    int rc = load_stream(&ld);
    finish_handlers(cfg);
    strset_free(&ld.handler_names);
    free(ld.handler_lines);
    if (rc == JR_ENOMEM) jr_errf(err, errlen, "%s: %s", name, jr_strerror(rc));
    if (ld.have_ev) yaml_event_delete(&ld.ev);
    yaml_parser_delete(&ld.parser);
    return rc;
}

int jr_config_load_string(jr_config_t *cfg, const char *yaml, size_t len, const char *name,
                          char *err, size_t errlen) {
    return load_doc(cfg, yaml, len, name, 0, err, errlen);
}

int jr_config_load_file(jr_config_t *cfg, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        jr_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return JR_EIO;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = JR_ENOMEM;
                jr_errf(err, errlen, "%s: %s", path, jr_strerror(rc));
                break;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) {
                rc = JR_EIO;
                jr_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
            }
            break;
        }
    }
    fclose(f);
    if (rc == 0) {
        buf[len] = '\0'; /* lets reader errors be placed with a C-string scan */
        rc = jr_config_load_string(cfg, buf, len, path, err, errlen);
    }
    free(buf);
    return rc;
}

/* ---- one setting from text: environment variables and flags ------------ */

/* JOBRUNNER_<SECTION>_<KEY> of a row, upper-case, '.' and '-' as '_'. */
static void env_name(const key_def_t *d, char *buf, size_t len) {
    snprintf(buf, len, row_is_section(d) ? "JOBRUNNER_%s" : "JOBRUNNER_%s_%s", d->section, d->key);
    for (char *p = buf; *p; p++) {
        if (*p == '.' || *p == '-') *p = '_';
        else if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    }
}

/* Append s[0..n) to *w as a YAML double-quoted scalar: taken literally,
 * whatever it holds. Needs at most 4 * n + 2 bytes. */
static char *put_quoted(char *w, const char *s, size_t n) {
    *w++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *w++ = '\\', *w++ = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            w += sprintf(w, "\\x%02x", c);
        } else {
            *w++ = (char)c;
        }
    }
    *w++ = '"';
    return w;
}

/* Set row d from the text v, by loading the one-key YAML document it
 * makes: so a setting from the environment or a flag is checked exactly
 * as the same setting in a file. A scalar key takes v literally; a list key
 * takes "a,b,c" (items trimmed of spaces) or a YAML flow sequence "[...]";
 * a section row takes a YAML flow value. Messages are "NAME: KEY: what is
 * wrong" (NAME omitted if empty). On error a scalar or list key is
 * unchanged; a section may be partly applied (the caller stops anyway). */
static int set_from_text(jr_config_t *cfg, const key_def_t *d, const char *v, const char *name,
                         char *err, size_t errlen) {
    size_t n = strlen(v);
    int flow = row_is_section(d) || (row_is_list(d) && v[0] == '[');
    if (flow) {
        for (const char *p = v; *p; p++)
            if ((unsigned char)*p < 0x20) {
                jr_errf(err, errlen, "%s%s%s%s%s: YAML flow syntax must be on one line", name,
                        *name ? ": " : "", d->section, row_is_section(d) ? "" : ".",
                        row_is_section(d) ? "" : d->key);
                return JR_EINVAL;
            }
    }
    /* Each item of a list costs at most 4 bytes per input byte plus 4. */
    size_t cap = strlen(d->section) + strlen(d->key) + 16 + (n + 1) * 8;
    char *doc = n < SIZE_MAX / 16 ? malloc(cap) : NULL;
    if (!doc) {
        jr_errf(err, errlen, "%s", jr_strerror(JR_ENOMEM));
        return JR_ENOMEM;
    }
    char *w = doc;
    if (row_is_section(d)) {
        w += sprintf(w, "%s: %s\n", d->section, v);
    } else {
        const char *dot = strchr(d->section, '.'); /* "S.N": the mapping N in section S */
        if (dot)
            w += sprintf(w, "%.*s:\n  %s:\n    %s: ", (int)(dot - d->section), d->section, dot + 1, d->key);
        else
            w += sprintf(w, "%s:\n  %s: ", d->section, d->key);
        if (flow) {
            w += sprintf(w, "%s", v);
        } else if (row_is_list(d)) {
            *w++ = '[';
            for (const char *item = v;; item++) {
                const char *end = strchr(item, ',');
                if (!end) end = item + strlen(item);
                const char *a = item, *b = end;
                while (a < b && *a == ' ') a++;
                while (b > a && b[-1] == ' ') b--;
                if (item != v) *w++ = ',', *w++ = ' ';
                w = put_quoted(w, a, (size_t)(b - a));
                if (!*end) break;
                item = end;
            }
            *w++ = ']';
        } else {
            w = put_quoted(w, v, n);
        }
        *w++ = '\n';
    }
    *w = '\0';
    int rc = load_doc(cfg, doc, (size_t)(w - doc), name, 1, err, errlen);
    free(doc);
    return rc;
}

int jr_config_set(jr_config_t *cfg, const char *key, const char *value, char *err, size_t errlen) {
    const char *dot = strrchr(key, '.'); /* redis.tls.ca_file: section redis.tls */
    for (size_t i = 0; dot && i < NKEYS; i++) {
        const key_def_t *d = &keys[i];
        if (strlen(d->section) == (size_t)(dot - key) && !strncmp(d->section, key, (size_t)(dot - key)) &&
            !strcmp(d->key, dot + 1) && !row_is_section(d))
            return set_from_text(cfg, d, value, "", err, errlen);
    }
    jr_errf(err, errlen, "%s: unknown key", key);
    return JR_EINVAL;
}

/* The value of variable `name` in envp, or NULL. */
static const char *env_get(char *const *envp, const char *name) {
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (!strncmp(*envp, name, n) && (*envp)[n] == '=') return *envp + n + 1;
    return NULL;
}

/* JOBRUNNER_QUEUES_PARTITIONS="orders:8,emails:4" (v; NULL or "": unset):
 * the queues section's partitions, as the flow YAML {orders: {partitions:
 * 8}, ...} it stands for (checked as that), after JOBRUNNER_QUEUES. Each
 * item is QUEUE:N (the last ':' splits, as in -q QUEUE:WEIGHT). */
static int queues_partitions_env(jr_config_t *cfg, const char *v, char *err, size_t errlen) {
    if (!v || !*v) return 0;
    const key_def_t *d = NULL;
    for (size_t i = 0; i < NKEYS && !d; i++)
        if (keys[i].type == T_QSECTION) d = &keys[i];
    char name[PATH_LEN + 220];
    snprintf(name, sizeof name, "%s=\"%.200s%s\"", JR_QUEUES_PARTITIONS_ENV, v, strlen(v) > 200 ? "..." : "");
    size_t n = strlen(v);
    char *flow = n < SIZE_MAX / 16 ? malloc(16 + n * 8 + 32 * (n + 1)) : NULL, *w = flow;
    if (!flow) {
        jr_errf(err, errlen, "%s", jr_strerror(JR_ENOMEM));
        return JR_ENOMEM;
    }
    *w++ = '{';
    for (const char *item = v;;) {
        const char *end = strchr(item, ','), *colon;
        if (!end) end = item + strlen(item);
        const char *a = item, *z = end; /* items trimmed of spaces, as a list's */
        while (a < z && *a == ' ') a++;
        while (z > a && z[-1] == ' ') z--;
        for (colon = z; colon > a && colon[-1] != ':'; colon--) {}
        if (colon == a) {
            jr_errf(err, errlen, "%s: item \"%.*s\" is not QUEUE:PARTITIONS", name, (int)(z - a), a);
            free(flow);
            return JR_EINVAL;
        }
        if (item != v) *w++ = ',', *w++ = ' ';
        w = put_quoted(w, a, (size_t)(colon - 1 - a));
        w += sprintf(w, ": {partitions: ");
        w = put_quoted(w, colon, (size_t)(z - colon));
        *w++ = '}';
        if (!*end) break;
        item = end + 1;
    }
    *w++ = '}', *w = '\0';
    int rc = set_from_text(cfg, d, flow, name, err, errlen);
    free(flow);
    return rc;
}

int jr_config_apply_env(jr_config_t *cfg, char *const *envp, FILE *warn, char *err, size_t errlen) {
    char var[PATH_LEN];
    for (size_t i = 0; i < NKEYS; i++) {
        env_name(&keys[i], var, sizeof var);
        const char *v = env_get(envp, var);
        if (!v || !*v) continue;
        /* The name says which variable and which value; a URL's value is
         * not repeated (it may hold a password: the URL parser's message
         * shows it with the password hidden). */
        char name[PATH_LEN + 220];
        if (keys[i].type == T_URL || keys[i].type == T_SECRET)
            snprintf(name, sizeof name, "%s", var);
        else
            snprintf(name, sizeof name, "%s=\"%.200s%s\"", var, v, strlen(v) > 200 ? "..." : "");
        int rc = set_from_text(cfg, &keys[i], v, name, err, errlen);
        if (rc) return rc;
    }
    int rc = queues_partitions_env(cfg, env_get(envp, JR_QUEUES_PARTITIONS_ENV), err, errlen);
    if (rc) return rc;
    for (; warn && envp && *envp; envp++) {
        const char *eq = strchr(*envp, '=');
        if (strncmp(*envp, "JOBRUNNER_", 10) || !eq) continue;
        size_t n = (size_t)(eq - *envp);
        int known = (n == strlen(JR_CONFIG_ENV_FILE) && !strncmp(*envp, JR_CONFIG_ENV_FILE, n)) ||
                    (n == strlen(JR_QUEUES_PARTITIONS_ENV) && !strncmp(*envp, JR_QUEUES_PARTITIONS_ENV, n)) ||
                    !strncmp(*envp, JR_PLUGIN_ENV_PREFIX, strlen(JR_PLUGIN_ENV_PREFIX));
        for (size_t i = 0; !known && i < NKEYS; i++) {
            env_name(&keys[i], var, sizeof var);
            known = n == strlen(var) && !strncmp(*envp, var, n);
        }
        if (!known)
            fprintf(warn, "jobrunner: warning: ignoring %.*s: no such setting "
                          "(JOBRUNNER_<SECTION>_<KEY> of a configuration key; see jobrunner(1))\n",
                    (int)(n > 200 ? 200 : n), *envp);
    }
    return 0;
}

int jr_queue_weight_parse(const char *arg, char *name, size_t namelen, int64_t *weight, char *why,
                          size_t whylen) {
    const char *colon = strrchr(arg, ':');
    size_t len = strlen(arg);
    *weight = 1;
    if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
        int64_t w;
        len = (size_t)(colon - arg);
        if (parse_int64(colon + 1, &w) || w < 1 || w > JR_WEIGHT_MAX) {
            jr_errf(why, whylen, "weight must be an integer from 1 to %d", JR_WEIGHT_MAX);
            return JR_EINVAL;
        }
        *weight = w;
    }
    if (jr_contract_queue_name(arg, len) || len >= namelen) {
        jr_errf(why, whylen, "bad queue name (must be %s)", QUEUE_RULE);
        return JR_EINVAL;
    }
    memcpy(name, arg, len);
    name[len] = '\0';
    return 0;
}

int jr_config_key(size_t i, jr_config_key_t *k) {
    if (i >= NKEYS) return -1;
    const key_def_t *d = &keys[i];
    if (row_is_section(d)) snprintf(k->name, sizeof k->name, "%s", d->section);
    else snprintf(k->name, sizeof k->name, "%s.%s", d->section, d->key);
    env_name(d, k->env, sizeof k->env);
    k->def = d->def;
    return 0;
}

int jr_config_set_worker_queues(jr_config_t *cfg, const char *const *names, const int64_t *weights,
                                size_t n) {
    jr_strlist_t list = {0};
    int64_t *w = NULL;
    int weighted = 0;
    for (size_t i = 0; weights && i < n; i++) weighted |= weights[i] != 1;
    if (weighted && !(w = malloc(n * sizeof *w))) return JR_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (jr_strlist_push(&list, names[i])) {
            jr_strlist_free(&list);
            free(w);
            return JR_ENOMEM;
        }
        if (w) w[i] = weights[i];
    }
    jr_strlist_free(&cfg->worker_queues);
    free(cfg->worker_weights);
    cfg->worker_queues = list;
    cfg->worker_weights = w;
    return 0;
}
