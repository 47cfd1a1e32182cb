/* Configuration loading: see config.h.
 *
 * The YAML document is read with libyaml's event API by a small recursive
 * descent: top-level mapping of sections, each a mapping of keys. Every key
 * is one row of `keys` below, which says where its value goes and how it is
 * checked; adding a key is adding a row. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "jobrunner/plugin.h"
#include "jr.h"
#include "util.h"

typedef enum {
    T_URL,       /* char *: a Redis URL, checked with jr_redis_url_parse */
    T_QUEUE,     /* char *: one queue name */
    T_DURATION,  /* int64_t ms, min..max */
    T_INT,       /* int64_t, min..max */
    T_ENUM,      /* int: index into names */
    T_PATHS,     /* jr_strlist_t of non-empty strings */
    T_QUEUES,    /* jr_strlist_t of distinct queue names */
    T_HANDLERS,  /* the handlers section: NAME -> mapping of "jobs" policy keys */
} key_type_t;

typedef struct {
    const char *section;
    const char *key;
    key_type_t type;
    size_t off; /* offset of the field in jr_config_t */
    int64_t min, max;
    const char *const *names; /* T_ENUM: NULL-terminated; value = index */
} key_def_t;

static const char *const log_formats[] = {"text", "json", NULL};
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const isolations[] = {"process", "inline", NULL};

_Static_assert(JR_LOG_TEXT == 0 && JR_LOG_JSON == 1, "log_formats order");
_Static_assert(JR_LOG_DEBUG == 0 && JR_LOG_INFO == 1 && JR_LOG_WARN == 2 && JR_LOG_ERROR == 3,
               "log_levels order");
_Static_assert(sizeof(jr_log_format_t) == sizeof(int), "T_ENUM fields are stored as int");
_Static_assert(JR_ISOLATION_PROCESS == 0 && JR_ISOLATION_INLINE == 1, "isolations order");

#define F(field) offsetof(jr_config_t, field)
#define MS_S 1000LL
#define MS_M (60 * MS_S)
#define MS_H (60 * MS_M)
#define J(field) (F(jobs) + offsetof(jr_policy_t, field))

/* Rows of one section must be adjacent. */
static const key_def_t keys[] = {
    {"redis", "url", T_URL, F(redis_url), 0, 0, NULL},
    {"redis", "connect_timeout", T_DURATION, F(connect_timeout_ms), 10, 5 * MS_M, NULL},
    {"log", "format", T_ENUM, F(log_format), 0, 0, log_formats},
    {"log", "level", T_ENUM, F(log_level), 0, 0, log_levels},
    {"plugins", "paths", T_PATHS, F(plugin_paths), 0, 0, NULL},
    {"worker", "queues", T_QUEUES, F(worker_queues), 0, 0, NULL},
    {"worker", "batch", T_INT, F(worker_batch), 1, 10000, NULL},
    {"worker", "prefetch", T_INT, F(worker_prefetch), 0, 100000, NULL},
    {"worker", "block", T_DURATION, F(worker_block_ms), 100, 60 * MS_S, NULL},
    {"worker", "concurrency", T_INT, F(worker_concurrency), 1, 256, NULL},
    {"worker", "isolation", T_ENUM, F(worker_isolation), 0, 0, isolations},
    {"worker", "lease", T_DURATION, F(worker_lease_ms), 100, MS_H, NULL},
    {"worker", "grace", T_DURATION, F(worker_grace_ms), 0, MS_H, NULL},
    /* The first four "jobs" rows are also the keys of each handler override. */
    {"jobs", "timeout", T_DURATION, J(timeout_ms), 1, 7 * 24 * MS_H, NULL},
    {"jobs", "max_attempts", T_INT, J(max_attempts), 1, 1000, NULL},
    {"jobs", "backoff", T_DURATION, J(backoff_ms), 0, 30 * 24 * MS_H, NULL},
    {"jobs", "backoff_max", T_DURATION, J(backoff_max_ms), 0, 30 * 24 * MS_H, NULL},
    {"jobs", "max_deliveries", T_INT, F(max_deliveries), 1, 1000, NULL},
    {"jobs", "max_payload", T_INT, F(max_payload), 1, 512 << 20, NULL},
    {"dead", "max", T_INT, F(dead_max), 1, 10000000, NULL},
    {"handlers", "*", T_HANDLERS, 0, 0, 0, NULL},
    {"scheduler", "queues", T_QUEUES, F(scheduler_queues), 0, 0, NULL},
    {"scheduler", "batch", T_INT, F(scheduler_batch), 1, 100000, NULL},
    {"scheduler", "block", T_DURATION, F(scheduler_block_ms), 100, 60 * MS_S, NULL},
    {"enqueue", "queue", T_QUEUE, F(default_queue), 0, 0, NULL},
};
#define NKEYS (sizeof keys / sizeof keys[0])

/* ---- lists and defaults ------------------------------------------------- */

int jr_strlist_push(jr_strlist_t *l, const char *s) {
    char *copy = strdup(s);
    char **v = copy ? realloc(l->v, (l->n + 1) * sizeof *v) : NULL;
    if (!v) {
        free(copy);
        return JR_ENOMEM;
    }
    v[l->n++] = copy;
    l->v = v;
    return 0;
}

void jr_strlist_free(jr_strlist_t *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int jr_config_init(jr_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->connect_timeout_ms = 2000;
    cfg->log_format = JR_LOG_TEXT;
    cfg->log_level = JR_LOG_INFO;
    cfg->worker_batch = 128;
    cfg->worker_prefetch = 512;
    cfg->worker_block_ms = 5000;
    cfg->scheduler_batch = 1000;
    cfg->scheduler_block_ms = 5000;
    cfg->worker_concurrency = 4;
    cfg->worker_isolation = JR_ISOLATION_PROCESS;
    cfg->worker_lease_ms = 30000;
    cfg->worker_grace_ms = 8000;
    cfg->jobs = (jr_policy_t){.timeout_ms = 5 * MS_M, .max_attempts = 10, .backoff_ms = 1000,
                              .backoff_max_ms = MS_H};
    cfg->max_deliveries = 5;
    cfg->max_payload = 1 << 20;
    cfg->dead_max = 10000;
    cfg->default_queue = strdup(JR_DEFAULT_QUEUE);
    return cfg->default_queue ? 0 : JR_ENOMEM;
}

void jr_config_free(jr_config_t *cfg) {
    free(cfg->redis_url);
    free(cfg->default_queue);
    jr_strlist_free(&cfg->plugin_paths);
    jr_strlist_free(&cfg->worker_queues);
    jr_strlist_free(&cfg->scheduler_queues);
    for (size_t i = 0; i < cfg->nhandlers; i++) free(cfg->handlers[i].name);
    free(cfg->handlers);
    memset(cfg, 0, sizeof *cfg);
}

jr_policy_t jr_config_policy(const jr_config_t *cfg, const char *handler) {
    jr_policy_t p = cfg->jobs;
    for (size_t i = 0; handler && i < cfg->nhandlers; i++) {
        if (strcmp(cfg->handlers[i].name, handler) != 0) continue;
        const jr_policy_t *o = &cfg->handlers[i].p;
        if (o->timeout_ms >= 0) p.timeout_ms = o->timeout_ms;
        if (o->max_attempts >= 0) p.max_attempts = o->max_attempts;
        if (o->backoff_ms >= 0) p.backoff_ms = o->backoff_ms;
        if (o->backoff_max_ms >= 0) p.backoff_max_ms = o->backoff_max_ms;
    }
    return p;
}

int jr_config_apply_env(jr_config_t *cfg) {
    const char *url = getenv("JOBRUNNER_REDIS_URL");
    if (!url || !*url) return 0;
    char *copy = strdup(url);
    if (!copy) return JR_ENOMEM;
    free(cfg->redis_url);
    cfg->redis_url = copy;
    return 0;
}

/* ---- the loader --------------------------------------------------------- */

typedef struct {
    yaml_parser_t parser;
    yaml_event_t ev; /* the current event, owned while have_ev */
    int have_ev;
    const char *name; /* file name for messages */
    const char *text; /* the document, to place reader errors */
    size_t len;
    char *err;
    size_t errlen;
    jr_config_t *cfg;
    char *base; /* where row offsets point: the config, or shifted onto a handler override */
    size_t handlers_start; /* overrides before this index came from earlier loads */
    size_t seen_line[NKEYS]; /* line where key i was set, 0 = not yet */
    size_t section_line[NKEYS]; /* same for the section starting at row i */
} loader_t;

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static size_t ev_line(const loader_t *ld) { return ld->ev.start_mark.line + 1; }

/* Report "NAME:LINE: KEY: message" at the current event; returns JR_EINVAL. */
static int fail(loader_t *ld, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(loader_t *ld, const char *key, const char *fmt, ...) {
    char msg[JR_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_err(ld->err, ld->errlen, "%s:%zu: %s%s%s", ld->name, ev_line(ld), key ? key : "",
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
        set_err(ld->err, ld->errlen, "%s: %s", ld->name, jr_strerror(JR_ENOMEM));
        return JR_ENOMEM;
    }
    size_t line = p->problem_mark.line + 1;
    if (p->error == YAML_READER_ERROR) { /* reader errors give a byte offset only */
        line = 1;
        for (size_t i = 0; i < p->problem_offset && i < ld->len; i++) line += ld->text[i] == '\n';
    }
    set_err(ld->err, ld->errlen, "%s:%zu: YAML syntax error: %s%s%s%s", ld->name, line,
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

/* Queue names: 1..128 chars of [A-Za-z0-9_.:-]. */
static int queue_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 128) return 0;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") == n;
}

/* Size of a dotted key path ("worker.batch") in messages. */
#define PATH_LEN 160

#define QUEUE_RULE "1 to 128 characters of A-Z a-z 0-9 _ . : -"

/* 1500 -> "1500ms", 60000 -> "60s", 300000 -> "5m": for range messages. */
static const char *fmt_ms(int64_t ms, char *buf, size_t len) {
    if (ms % MS_M == 0 && ms >= 2 * MS_M) snprintf(buf, len, "%lldm", (long long)(ms / MS_M));
    else if (ms % MS_S == 0) snprintf(buf, len, "%llds", (long long)(ms / MS_S));
    else snprintf(buf, len, "%lldms", (long long)ms);
    return buf;
}

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

/* Apply the scalar value of the current event to row d. */
static int set_scalar(loader_t *ld, const key_def_t *d, const char *path) {
    void *field = ld->base + d->off;
    const char *v = ev_text(ld);
    char lo[32], hi[32];
    switch (d->type) {
    case T_URL: {
        jr_redis_url_t u;
        char why[JR_ERRLEN];
        int rc = jr_redis_url_parse(v, &u, why, sizeof why);
        jr_redis_url_free(&u);
        if (rc == JR_ENOMEM) return rc;
        if (rc) return fail(ld, path, "%s", why);
        break;
    }
    case T_QUEUE:
        if (!queue_name_ok(v))
            return fail(ld, path, "bad queue name \"%s\" (must be %s)", v, QUEUE_RULE);
        break;
    case T_DURATION: {
        int64_t ms;
        if (jr_duration_parse(v, &ms))
            return fail(ld, path, "must be a duration like 500ms, 5s, 1m or 1h30m, got \"%s\"",
                        v);
        if (ms < d->min || ms > d->max)
            return fail(ld, path, "must be a duration from %s to %s, got \"%s\"",
                        fmt_ms(d->min, lo, sizeof lo), fmt_ms(d->max, hi, sizeof hi), v);
        *(int64_t *)field = ms;
        return 0;
    }
    case T_INT: {
        int64_t n;
        if (parse_int64(v, &n) || n < d->min || n > d->max)
            return fail(ld, path, "must be an integer from %lld to %lld, got \"%s\"",
                        (long long)d->min, (long long)d->max, v);
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
        return fail(ld, path, "must be %s, got \"%s\"", choices, v);
    default:
        return fail(ld, path, "internal error: not a scalar key");
    }
    /* T_URL and T_QUEUE: replace the string. */
    char *copy = strdup(v);
    if (!copy) return JR_ENOMEM;
    free(*(char **)field);
    *(char **)field = copy;
    return 0;
}

/* The current event is the value of a list key: read the whole sequence,
 * check each item, then replace the list in the config. */
static int set_list(loader_t *ld, const key_def_t *d, const char *path) {
    jr_strlist_t list = {0};
    int rc = 0;
    char item[PATH_LEN + 24]; /* path plus "[index]" */
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_SEQUENCE_END_EVENT) {
        snprintf(item, sizeof item, "%s[%zu]", path, list.n);
        if (ld->ev.type != YAML_SCALAR_EVENT || ev_is_null(ld)) {
            rc = fail(ld, item, "expected a string, got %s", ev_kind(ld));
            break;
        }
        const char *v = ev_text(ld);
        if (d->type == T_PATHS && !*v) {
            rc = fail(ld, item, "must not be empty");
        } else if (d->type == T_QUEUES && !queue_name_ok(v)) {
            rc = fail(ld, item, "bad queue name \"%s\" (must be %s)", v, QUEUE_RULE);
        } else if (d->type == T_QUEUES) {
            for (size_t i = 0; i < list.n && !rc; i++)
                if (strcmp(list.v[i], v) == 0)
                    rc = fail(ld, item, "queue \"%s\" is listed twice", v);
        }
        if (!rc) rc = jr_strlist_push(&list, v);
        if (rc) break;
    }
    if (rc) {
        jr_strlist_free(&list);
        return rc;
    }
    jr_strlist_t *field = (jr_strlist_t *)((char *)ld->cfg + d->off);
    jr_strlist_free(field);
    *field = list;
    return 0;
}

/* Comma-separated names of the keys of `section` (or of all sections if
 * section is NULL), for "unknown key" messages. */
static const char *known_names(const char *section, char *buf, size_t len) {
    buf[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++) {
        const char *name;
        if (section)
            name = strcmp(keys[i].section, section) == 0 ? keys[i].key : NULL;
        else
            name = i == 0 || strcmp(keys[i].section, keys[i - 1].section) ? keys[i].section : NULL;
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
                    : !strcmp(keys[i].section, k))
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

/* Handler names as in plugins: 1..64 of [A-Za-z0-9_.:-]. */
static int handler_name_ok(const char *s) {
    size_t n = strlen(s);
    return n >= 1 && n <= 64 &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") == n;
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
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, "handlers"))) return rc;
        const char *name = ev_text(ld);
        snprintf(path, sizeof path, "handlers.%s", name);
        if (!handler_name_ok(name))
            return fail(ld, path, "bad handler name (1 to 64 of A-Z a-z 0-9 _ . : -)");
        jr_config_t *c = ld->cfg;
        for (size_t i = 0; i < c->nhandlers; i++) {
            if (strcmp(c->handlers[i].name, name) != 0) continue;
            if (i >= ld->handlers_start) return fail(ld, path, "duplicate key");
            /* Set by an earlier file: this one replaces it. */
            free(c->handlers[i].name);
            memmove(&c->handlers[i], &c->handlers[i + 1], (c->nhandlers - i - 1) * sizeof *c->handlers);
            c->nhandlers--, ld->handlers_start--;
            break;
        }
        jr_handler_policy_t *v = realloc(ld->cfg->handlers, (ld->cfg->nhandlers + 1) * sizeof *v);
        if (!v) return JR_ENOMEM;
        ld->cfg->handlers = v;
        jr_handler_policy_t *h = &v[ld->cfg->nhandlers];
        if (!(h->name = strdup(name))) return JR_ENOMEM;
        h->p = (jr_policy_t){-1, -1, -1, -1};
        ld->cfg->nhandlers++;
        if ((rc = next(ld))) return rc;
        if (ev_is_null(ld)) continue;
        if (ld->ev.type != YAML_MAPPING_START_EVENT)
            return fail(ld, path, "expected a mapping (timeout, max_attempts, backoff, backoff_max), got %s",
                        ev_kind(ld));
        size_t seen[4] = {0};
        while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
            char key[PATH_LEN + 70];
            if ((rc = check_key_event(ld, path))) return rc;
            snprintf(key, sizeof key, "%s.%s", path, ev_text(ld));
            int row = find_row(ld, "jobs");
            int first = find_row_index("jobs");
            if (row < 0 || row - first >= 4)
                return fail(ld, key, "unknown key (a handler has timeout, max_attempts, backoff, backoff_max)");
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

/* The current event opens a section's value; read its keys. */
static int load_section(loader_t *ld, const char *section) {
    if (!strcmp(section, "handlers")) return load_handlers(ld);
    if (ev_is_null(ld)) return 0; /* "worker:" with every key commented out */
    if (ld->ev.type != YAML_MAPPING_START_EVENT)
        return fail(ld, section, "expected a mapping of keys, got %s", ev_kind(ld));
    int rc;
    char path[PATH_LEN], names[256];
    while ((rc = next(ld)) == 0 && ld->ev.type != YAML_MAPPING_END_EVENT) {
        if ((rc = check_key_event(ld, section))) return rc;
        snprintf(path, sizeof path, "%s.%s", section, ev_text(ld));
        int row = find_row(ld, section);
        if (row < 0)
            return fail(ld, path, "unknown key (%s has %s)", section,
                        known_names(section, names, sizeof names));
        if (ld->seen_line[row])
            return fail(ld, path, "duplicate key (first given on line %zu)", ld->seen_line[row]);
        ld->seen_line[row] = ev_line(ld);

        const key_def_t *d = &keys[row];
        if ((rc = next(ld))) return rc;
        int is_list = d->type == T_PATHS || d->type == T_QUEUES;
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

int jr_config_load_string(jr_config_t *cfg, const char *yaml, size_t len, const char *name,
                          char *err, size_t errlen) {
    loader_t ld;
    memset(&ld, 0, sizeof ld);
    if (!yaml_parser_initialize(&ld.parser)) {
        set_err(err, errlen, "%s: %s", name, jr_strerror(JR_ENOMEM));
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
    if (rc == JR_ENOMEM) set_err(err, errlen, "%s: %s", name, jr_strerror(rc));
    if (ld.have_ev) yaml_event_delete(&ld.ev);
    yaml_parser_delete(&ld.parser);
    return rc;
}

int jr_config_load_file(jr_config_t *cfg, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
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
                set_err(err, errlen, "%s: %s", path, jr_strerror(rc));
                break;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) {
                rc = JR_EIO;
                set_err(err, errlen, "%s: cannot read: %s", path, strerror(errno));
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
