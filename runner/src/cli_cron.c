/* The periodic schedules: cron add|remove|enable|disable|fire|list (a row
 * of cli.c; see cli.h), through the Redis layer (the client library has no
 * call for them). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "cron.h"
#include "jr.h"
#include "proc.h"
#include "jr_limits.h"
#include "redis_sched.h"
#include "util.h"

/* `cron add`: store the schedule *d (checked with jr_cron_def_check first:
 * exit status 2 when it is bad) in Redis, replacing one of that name;
 * running schedulers learn of it at once. Prints "NAME added|updated|
 * unchanged, next firing UTC". Returns the exit status. */
static int cmd_cron_add(const jr_config_t *cfg, jr_cron_def_t *d, FILE *out) {
    char err[JR_ERRLEN];
    if (jr_cron_def_check(d, err, sizeof err)) {
        fprintf(stderr, "jobrunner cron add: %s\n", err);
        return 2;
    }
    char *def = jr_cron_def_encode(d);
    if (!def) {
        fprintf(stderr, "jobrunner cron add: %s\n", jr_strerror(JR_ENOMEM));
        return 1;
    }
    jr_redis_t *r = jr_cli_connect(cfg, 1);
    if (!r) {
        free(def);
        return 1;
    }
    jr_cron_entry_t *v = NULL;
    size_t n = 0;
    char wake[JR_ID_MAX];
    int existed = 0, changed = 0;
    int rc = jr_redis_cron_list(r, &v, &n, wake);
    for (size_t i = 0; !rc && i < n; i++) existed |= strcmp(v[i].name, d->name) == 0;
    jr_cron_entries_free(v, n);
    double now = 0;
    if (!rc) rc = jr_redis_cron_set(r, d->name, def, &changed);
    if (!rc) rc = jr_redis_time_ms(r, &now);
    if (rc) {
        fprintf(stderr, "jobrunner cron add: %s\n", jr_redis_errstr(r)[0] ? jr_cli_esc(jr_redis_errstr(r)) : jr_strerror(rc));
    } else {
        int64_t next = jr_cron_def_next(d, (int64_t)now);
        char t[JR_TIME_LEN];
        fprintf(out, "%s %s, next firing %s\n", d->name, !existed ? "added" : changed ? "updated" : "unchanged",
                next < 0 ? "never" : jr_time_format(next, t));
    }
    free(def);
    jr_redis_free(r);
    return jr_cli_done(out, rc ? 1 : 0);
}

/* `cron remove NAME...`: prints "NAME removed" or "NAME not found" per
 * name; exit status 0 when every name was found. */
static int cmd_cron_remove(const jr_config_t *cfg, char **names, size_t n, FILE *out) {
    jr_redis_t *r = jr_cli_connect(cfg, 1);
    if (!r) return 1;
    int missing = 0, rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        int removed = 0;
        rc = jr_redis_cron_del(r, names[i], &removed);
        if (!rc) fprintf(out, "%s %s\n", names[i], removed ? "removed" : "not found");
        missing += !rc && !removed;
    }
    if (rc) fprintf(stderr, "jobrunner cron remove: %s\n", jr_redis_errstr(r)[0] ? jr_cli_esc(jr_redis_errstr(r)) : jr_strerror(rc));
    jr_redis_free(r);
    return jr_cli_done(out, rc || missing ? 1 : 0);
}

/* `cron enable|disable NAME...` (on = 1: enable): "NAME enabled|disabled"
 * or "NAME was already enabled|disabled" or "NAME not found" per name;
 * exit status 0 when every name was found. */
static int cmd_cron_enable(const jr_config_t *cfg, char **names, size_t n, int on, FILE *out) {
    jr_redis_t *r = jr_cli_connect(cfg, 1);
    if (!r) return 1;
    int missing = 0, rc = 0;
    const char *word = on ? "enabled" : "disabled";
    for (size_t i = 0; !rc && i < n; i++) {
        int found = 0, changed = 0;
        rc = jr_redis_cron_enable(r, names[i], on, &found, &changed);
        if (!rc && !found) fprintf(out, "%s not found\n", jr_cli_esc(names[i]));
        else if (!rc) fprintf(out, "%s %s%s\n", jr_cli_esc(names[i]), changed ? "" : "was already ", word);
        missing += !rc && !found;
    }
    if (rc)
        fprintf(stderr, "jobrunner cron %s: %s\n", on ? "enable" : "disable",
                jr_redis_errstr(r)[0] ? jr_cli_esc(jr_redis_errstr(r)) : jr_strerror(rc));
    jr_redis_free(r);
    return jr_cli_done(out, rc || missing ? 1 : 0);
}

/* `cron fire NAME`: one job of the schedule now (jr_redis_cron_fire);
 * prints "NAME fired: job ID". Exit status 1 when there is no such
 * schedule. */
static int cmd_cron_fire(const jr_config_t *cfg, const char *name, FILE *out) {
    jr_redis_t *r = jr_cli_connect(cfg, 1);
    if (!r) return 1;
    char id[JR_ID_MAX];
    int found = 0, rc = jr_redis_cron_fire(r, name, id, &found);
    if (rc)
        fprintf(stderr, "jobrunner cron fire: %s\n", jr_redis_errstr(r)[0] ? jr_cli_esc(jr_redis_errstr(r)) : jr_strerror(rc));
    else if (!found)
        fprintf(stderr, "jobrunner cron fire: no schedule \"%s\" ('jobrunner cron list' lists them)\n", jr_cli_esc(name));
    else
        fprintf(out, "%s fired: job %s\n", jr_cli_esc(name), jr_cli_esc(id));
    jr_redis_free(r);
    return jr_cli_done(out, rc || !found ? 1 : 0);
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const jr_cron_entry_t *)a)->name, ((const jr_cron_entry_t *)b)->name);
}

/* A string as JSON (jr_json_bytes: not UTF-8 as {"base64": ...}), null for NULL. */
static json_t *str_json(const char *s) { return s ? jr_json_bytes(s, strlen(s)) : json_null(); }

/* One schedule as JSON (d decoded, or NULL with why). Every string read
 * from Redis goes through str_json, so none is dropped for not being UTF-8. */
static json_t *cron_json(const jr_cron_entry_t *e, const jr_cron_def_t *d, const char *why, int64_t now) {
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "name", str_json(e->name));
    if (!d) {
        json_object_set_new(o, "error", str_json(why));
        json_object_set_new(o, "definition", jr_json_bytes(e->def, strlen(e->def)));
        return o;
    }
    char t[JR_TIME_LEN], loc[JR_CRON_LOCAL_LEN], dur[JR_DURATION_LEN];
    json_object_set_new(o, "cron", str_json(d->cron));
    json_object_set_new(o, "every", d->cron ? json_null() : json_string(jr_duration_format(d->every_ms, dur, sizeof dur)));
    json_object_set_new(o, "every_ms", d->cron ? json_null() : json_integer(d->every_ms));
    json_object_set_new(o, "timezone", str_json(d->tz));
    json_object_set_new(o, "queue", str_json(d->queue));
    json_object_set_new(o, "handler", str_json(d->handler));
    json_object_set_new(o, "payload", str_json(d->payload));
    json_object_set_new(o, "missed", json_string(d->missed == JR_MISSED_ONCE ? "once" : "skip"));
    json_object_set_new(o, "enabled", json_boolean(d->enabled));
    int64_t next = d->enabled ? jr_cron_def_next(d, now) : -1;
    json_object_set_new(o, "next_ms", next < 0 ? json_null() : json_integer(next));
    json_object_set_new(o, "next_utc", next < 0 ? json_null() : json_string(jr_time_format(next, t)));
    json_object_set_new(o, "next_local", next < 0 ? json_null() : str_json(jr_cron_local_format(next, d->tz, loc)));
    const char *job;
    int64_t last = jr_cron_last_parse(e->last, &job);
    json_object_set_new(o, "last_fired_ms", last < 0 ? json_null() : json_integer(last));
    json_object_set_new(o, "last_fired_utc", last < 0 ? json_null() : json_string(jr_time_format(last, t)));
    json_object_set_new(o, "last_fired_local", last < 0 ? json_null() : str_json(jr_cron_local_format(last, d->tz, loc)));
    json_object_set_new(o, "last_job_id", last < 0 ? json_null() : str_json(job));
    return o;
}

/* `cron list`: every schedule with its next firing (after Redis's now) and
 * last fired tick, each in UTC and in the schedule's zone, and the last
 * job id, as a table (within limit columns, 0: none: one row each; with a
 * limit the zone's times and the job id go on a line under the row) or
 * JSON ({"schedules": [...]}, see README). */
static int cmd_cron_list(const jr_config_t *cfg, int json, size_t limit, FILE *out) {
    jr_redis_t *r = jr_cli_connect(cfg, 0);
    if (!r) return 1;
    jr_cron_entry_t *v = NULL;
    size_t n = 0;
    char wake[JR_ID_MAX];
    double nowf = 0;
    int rc = jr_redis_cron_list(r, &v, &n, wake);
    if (!rc) rc = jr_redis_time_ms(r, &nowf);
    if (rc) {
        fprintf(stderr, "jobrunner cron list: %s\n", jr_redis_errstr(r)[0] ? jr_cli_esc(jr_redis_errstr(r)) : jr_strerror(rc));
        jr_cron_entries_free(v, n);
        jr_redis_free(r);
        return 1;
    }
    int64_t now = (int64_t)nowf;
    if (n) qsort(v, n, sizeof *v, cmp_entry);
    json_t *arr = json ? json_array() : NULL;
    /* the whole row (--wide, or output to a program), or within the limit:
     * the times in the schedule's zone and the last job on a line under it */
    static const char *const wide_heads[] = {"NAME", "SCHEDULE", "ZONE", "QUEUE", "HANDLER", "NEXT (UTC)", "NEXT (ZONE)",
                                             "LAST (UTC)", "LAST (ZONE)", "LAST JOB", "ENABLED"};
    static const char *const heads[] = {"NAME", "SCHEDULE", "QUEUE", "HANDLER", "NEXT (UTC)", "LAST (UTC)", "ON"};
    jr_table_t tab;
    jr_table_init(&tab, limit ? heads : wide_heads, limit ? "llllLLl" : "llllLLLLLll");
    for (size_t i = 0; i < n && !rc; i++) {
        jr_cron_def_t d;
        char why[JR_ERRLEN];
        int bad = jr_cron_def_decode(v[i].name, v[i].def, &d, why, sizeof why);
        if (json) {
            json_array_append_new(arr, cron_json(&v[i], bad ? NULL : &d, why, now));
        } else if (bad) {
            char note[JR_ERRLEN + 32];
            const char *row[11] = {v[i].name, "?", "?", "?", "?", "?", "?", "?", "?", "?", "?"};
            snprintf(note, sizeof note, "unreadable definition: %s", why);
            rc = jr_table_add(&tab, row) || jr_table_note(&tab, note) ? JR_ENOMEM : 0;
        } else {
            char every[JR_DURATION_LEN + 8], t[JR_TIME_LEN], loc[JR_CRON_LOCAL_LEN], lt[JR_TIME_LEN],
                lloc[JR_CRON_LOCAL_LEN], dur[JR_DURATION_LEN], note[512];
            snprintf(every, sizeof every, "every %s", jr_duration_format(d.every_ms, dur, sizeof dur));
            const char *sched = d.cron ? d.cron : every; /* whole: a cron line is up to 6 fields of 63 */
            int64_t next = d.enabled ? jr_cron_def_next(&d, now) : -1;
            const char *job;
            int64_t last = jr_cron_last_parse(v[i].last, &job);
            const char *nu = next < 0 ? "-" : jr_time_format(next, t), *nl = next < 0 ? "-" : jr_cron_local_format(next, d.tz, loc);
            const char *lu = last < 0 ? "-" : jr_time_format(last, lt), *ll = last < 0 ? "-" : jr_cron_local_format(last, d.tz, lloc);
            const char *on = d.enabled ? "yes" : "no";
            if (limit) {
                const char *row[] = {d.name, sched, d.queue, d.handler, nu, lu, on};
                snprintf(note, sizeof note, "%s: next %s, last %s, last job %s", d.tz, nl, ll, last < 0 ? "-" : job);
                rc = jr_table_add(&tab, row) || jr_table_note(&tab, note) ? JR_ENOMEM : 0;
            } else {
                const char *row[] = {d.name, sched, d.tz, d.queue, d.handler, nu, nl, lu, ll, last < 0 ? "-" : job, on};
                rc = jr_table_add(&tab, row) ? JR_ENOMEM : 0;
            }
        }
        jr_cron_def_free(&d);
    }
    if (!json && !rc) jr_table_print(&tab, out, limit);
    jr_table_free(&tab);
    if (json) {
        json_t *doc = json_object();
        if (doc) json_object_set_new(doc, "schedules", arr);
        else json_decref(arr);
        if (jr_json_print(out, doc) != 0) rc = JR_ENOMEM;
    }
    jr_cron_entries_free(v, n);
    jr_redis_free(r);
    return jr_cli_done(out, rc ? 1 : 0);
}

/* `jobrunner cron add|remove|enable|disable|fire|list`: check the
 * arguments, then run it. */
int jr_cli_cron(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    const char *name = cmd->name, *sub = argc > 0 ? argv[0] : "";
    const char *cron = f->v[JR_O_CRON], *every = f->v[JR_O_EVERY], *tz = f->v[JR_O_TZ], *missed = f->v[JR_O_MISSED];
    int add = !strcmp(sub, "add"), json = jr_flag(f, JR_O_JSON), disabled = jr_flag(f, JR_O_DISABLED);
    if (!add && (cron || every || tz || missed || disabled || f->queues.n))
        return jr_cli_die(name, "%s", "--cron, --every, --tz, -q, --missed and --disabled go with cron add");
    if (!strcmp(sub, "list")) {
        if (argc > 1) return jr_cli_die(name, "unexpected argument \"%s\"", argv[1]);
        return cmd_cron_list(cfg, json, jr_table_limit(stdout, jr_flag(f, JR_O_WIDE)), stdout);
    }
    if (json) return jr_cli_die(name, "%s", "--json goes with cron list");
    if (!strcmp(sub, "enable") || !strcmp(sub, "disable")) {
        if (argc < 2) return jr_cli_die(name, "expected cron %s NAME...", sub);
        return cmd_cron_enable(cfg, argv + 1, (size_t)(argc - 1), !strcmp(sub, "enable"), stdout);
    }
    if (!strcmp(sub, "fire")) {
        if (argc != 2) return jr_cli_die(name, "%s", "expected cron fire NAME");
        return cmd_cron_fire(cfg, argv[1], stdout);
    }
    if (!strcmp(sub, "remove")) {
        if (argc < 2) return jr_cli_die(name, "%s", "expected cron remove NAME...");
        return cmd_cron_remove(cfg, argv + 1, (size_t)(argc - 1), stdout);
    }
    if (!add) return jr_cli_die(name, "%s", "expected add, remove, enable, disable, fire or list");
    if (argc < 3 || argc > 4)
        return jr_cli_die(name, "%s", "expected cron add NAME (--cron EXPR | --every DURATION) HANDLER [PAYLOAD]");
    if (!cron == !every) return jr_cli_die(name, "%s", "give exactly one of --cron and --every");
    if (f->queues.n > 1) return jr_cli_die(name, "%s", "cron add takes one -q");
    jr_cron_def_t d = {.name = argv[1], .handler = argv[2], .payload = argc == 4 ? argv[3] : NULL,
                       .queue = f->queues.n ? f->queues.v[0] : cfg->default_queue, .cron = (char *)cron,
                       .tz = (char *)(tz ? tz : "UTC"), .enabled = !disabled};
    char why[JR_ERRLEN];
    if (every &&
        jr_duration_parse_range(every, JR_CRON_EVERY_MIN_MS, JR_CRON_EVERY_MAX_MS, &d.every_ms, why, sizeof why))
        return jr_cli_die2(name, "--every", every, why);
    if (missed && strcmp(missed, "skip") && strcmp(missed, "once"))
        return jr_cli_die2(name, "--missed", missed, "must be skip or once");
    d.missed = missed && !strcmp(missed, "once") ? JR_MISSED_ONCE : JR_MISSED_SKIP;
    return cmd_cron_add(cfg, &d, stdout);
}
