/* The admin commands: see admin.h. */
#include "admin.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

#include "jr.h"
#include "proc.h"

/* Connect and load the function library. A command that only reads or
 * deletes (stats, dead list/show/purge: `required` = 0) goes on when the
 * load fails, e.g. on an out-of-memory Redis, with the library already in
 * Redis; then a later failure shows Redis's own error. */
static jr_redis_t *admin_connect(const jr_config_t *cfg, int required) {
    char err[JR_ERRLEN];
    jr_redis_t *r = jr_redis_connect(jr_config_redis_url(cfg), cfg->connect_timeout_ms, err, sizeof err);
    if (!r) {
        fprintf(stderr, "jobrunner: %s\n", err);
        return NULL;
    }
    if (jr_redis_load_library(r) != 0) {
        fprintf(stderr, "jobrunner: %sloading the function library: %s\n", required ? "" : "note: ",
                jr_redis_errstr(r));
        if (required || !jr_redis_ok(r)) {
            jr_redis_free(r);
            return NULL;
        }
    }
    return r;
}

jr_redis_t *jr_admin_connect(const jr_config_t *cfg) { return admin_connect(cfg, 1); }

int jr_cmd_enqueue(const jr_config_t *cfg, const jr_enqueue_t *job, FILE *out) {
    jr_redis_t *r = jr_admin_connect(cfg);
    if (!r) return 1;
    char id[1][JR_ID_MAX];
    int created = 0;
    int rc = jr_redis_enqueue(r, job, 1, id, &created);
    if (rc) {
        fprintf(stderr, "jobrunner: enqueue failed: %s\n", jr_redis_errstr(r));
    } else {
        fprintf(out, "%s\n", id[0]);
        if (!created)
            fprintf(stderr, "jobrunner: job %s was already enqueued; not enqueued again\n", id[0]);
    }
    jr_redis_free(r);
    return rc ? 1 : 0;
}

/* Out of memory while building a JSON document: drop it, and say so. */
static int json_oom(json_t **doc) {
    json_decref(*doc);
    *doc = NULL;
    fprintf(stderr, "jobrunner: out of memory building the JSON output\n");
    return 1;
}

/* Print a finished JSON document (released). 0, or 1 with a message. */
static int json_out(FILE *out, json_t *doc) {
    if (jr_json_print(out, doc) == 0 && fflush(out) == 0) return 0;
    fprintf(stderr, "jobrunner: cannot write the JSON output\n");
    return 1;
}

/* stats --json prints one object: {"queues": [{"queue", "ready", "pending",
 * "delayed", "dead"}, ...]}, counts as numbers. */
int jr_cmd_stats(const jr_config_t *cfg, const jr_strlist_t *queues, int json, FILE *out) {
    jr_redis_t *r = admin_connect(cfg, 0);
    if (!r) return 1;
    jr_strlist_t all = {0};
    char wake[JR_ID_MAX];
    int rc = 0, failed = 0; /* rc: a Redis error; failed: JSON building or writing */
    if (!queues->n) {
        rc = jr_redis_queues(r, &all, wake);
        queues = &all;
    }
    json_t *doc = NULL, *arr = NULL;
    if (!rc && json) {
        doc = json_object();
        arr = json_array();
        if (!doc || !arr || json_object_set_new(doc, "queues", arr)) failed = json_oom(&doc);
    } else if (!rc) {
        fprintf(out, "%-24s %12s %12s %12s %12s\n", "QUEUE", "READY", "PENDING", "DELAYED", "DEAD");
    }
    for (size_t i = 0; !rc && !failed && i < queues->n; i++) {
        jr_qstats_t s;
        if ((rc = jr_redis_stats(r, queues->v[i], &s))) break;
        if (json) {
            json_t *q = json_pack("{s:o,s:I,s:I,s:I,s:I}", "queue", jr_json_bytes(queues->v[i], strlen(queues->v[i])),
                                  "ready", (json_int_t)s.ready, "pending", (json_int_t)s.pending,
                                  "delayed", (json_int_t)s.delayed, "dead", (json_int_t)s.dead);
            if (json_array_append_new(arr, q)) failed = json_oom(&doc);
        } else {
            fprintf(out, "%-24s %12lld %12lld %12lld %12lld\n", queues->v[i], s.ready, s.pending,
                    s.delayed, s.dead);
        }
    }
    if (rc) fprintf(stderr, "jobrunner: stats: %s\n", jr_redis_errstr(r));
    if (rc || failed) json_decref(doc);
    else if (json) failed = json_out(out, doc);
    jr_strlist_free(&all);
    jr_redis_free(r);
    return rc || failed ? 1 : 0;
}

/* The value of field `name` in a stream entry, or NULL (length in *len). */
static const char *field(const jr_entry_t *e, const char *name, size_t *len) {
    for (size_t i = 0; i < e->nfields; i++)
        if (e->name_lens[i] == strlen(name) && !memcmp(e->names[i], name, e->name_lens[i])) {
            if (len) *len = e->value_lens[i];
            return e->values[i];
        }
    return NULL;
}

/* Print bytes as text: printable ASCII as is, the rest as \xNN. */
static void print_bytes(FILE *out, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) fputc(c, out);
        else fprintf(out, "\\x%02x", c);
    }
}

static void print_field(FILE *out, const jr_entry_t *e, const char *name, const char *dflt) {
    size_t len = 0;
    const char *v = field(e, name, &len);
    if (!v) v = dflt, len = strlen(dflt);
    print_bytes(out, v, len);
}

/* One dead entry as JSON (NULL when out of memory): {"entry": stream id,
 * "dead_at": time, then each field under its own name, values as
 * jr_json_bytes}. A field whose name is not valid UTF-8, repeats an earlier
 * name or is "entry", "dead_at" or "other_fields" goes, in order, into
 * "other_fields": [[name, value], ...] (present only then), names and values
 * as jr_json_bytes: nothing the entry holds is lost. */
static json_t *dead_json(const jr_entry_t *e, const char *dead_at) {
    json_t *o = json_pack("{s:s,s:s}", "entry", e->id, "dead_at", dead_at), *other = NULL;
    for (size_t f = 0; o && f < e->nfields; f++) {
        json_t *v = jr_json_bytes(e->values[f], e->value_lens[f]);
        const char *name = e->names[f];
        size_t len = e->name_lens[f];
        json_t *probe = v ? json_stringn(name, len) : NULL; /* NULL: not UTF-8 */
        int flat = probe && !memchr(name, '\0', len) && !json_object_getn(o, name, len) &&
                   !(len == 12 && !memcmp(name, "other_fields", 12)), rc;
        json_decref(probe);
        if (flat) {
            rc = json_object_setn_new(o, name, len, v);
        } else {
            if (!other && (!(other = json_array()) || json_object_set_new(o, "other_fields", other))) {
                json_decref(v);
                rc = -1;
            } else {
                rc = json_array_append_new(other, json_pack("[o,o]", jr_json_bytes(name, len), v));
            }
        }
        if (rc) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* When the entry was buried: its stream id's time. */
static void dead_time(const jr_entry_t *e, char *buf) {
    jr_time_format(strtoll(e->id, NULL, 10), buf);
}

int jr_cmd_dead(const jr_config_t *cfg, const char *queue, const char *sub, char **ids, size_t nids,
                int all, int json, FILE *out) {
    int list = !strcmp(sub, "list"), show = !strcmp(sub, "show");
    int retry = !strcmp(sub, "retry"), purge = !strcmp(sub, "purge");
    if (!list && !show && !retry && !purge) {
        fprintf(stderr, "jobrunner dead: unknown subcommand \"%s\" (list, show, retry or purge)\n", sub);
        return 2;
    }
    if ((retry || purge) && !all && !nids) {
        fprintf(stderr, "jobrunner dead %s: name job ids or give --all\n", sub);
        return 2;
    }
    if (json && !list && !show) {
        fprintf(stderr, "jobrunner dead %s: --json applies to list and show\n", sub);
        return 2;
    }
    if (show && !nids) {
        fprintf(stderr, "jobrunner dead show: name one or more job ids\n");
        return 2;
    }
    jr_redis_t *r = admin_connect(cfg, retry);
    if (!r) return 1;
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    jr_batch_t b = {0};
    int status = 0;
    if (jr_redis_xrange(r, k.dead, 0, &b) != 0) {
        fprintf(stderr, "jobrunner dead: %s\n", jr_redis_errstr(r));
        status = 1;
        goto out;
    }
    /* Which entries the command is about: all, or those of the named jobs
     * (a job id, or the dead entry's own id: garbage buried without a job
     * id is named that way). */
    const char **sel = calloc(b.n + 1, sizeof *sel);
    size_t nsel = 0;
    if (!sel) {
        status = 1;
        goto out;
    }
    for (size_t i = 0; i < b.n; i++) {
        size_t len;
        const char *id = field(&b.v[i], "id", &len);
        int want = all || (list && !nids);
        for (size_t j = 0; j < nids && !want; j++)
            want = (id && strlen(ids[j]) == len && !memcmp(ids[j], id, len)) || !strcmp(ids[j], b.v[i].id);
        if (want) sel[nsel++] = b.v[i].id;
    }
    for (size_t j = 0; j < nids; j++) { /* a job id that is not dead is an error */
        int found = 0;
        for (size_t i = 0; i < b.n && !found; i++) {
            size_t len;
            const char *id = field(&b.v[i], "id", &len);
            found = (id && strlen(ids[j]) == len && !memcmp(ids[j], id, len)) || !strcmp(ids[j], b.v[i].id);
        }
        if (!found) {
            fprintf(stderr, "jobrunner dead %s: no dead job \"%s\" in queue %s\n", sub, ids[j], queue);
            status = 1;
        }
    }
    if (list || show) {
        json_t *arr = json ? json_array() : NULL;
        if (json && !arr) status = json_oom(&arr);
        if (list && !json) fprintf(out, "%-24s %-28s %-16s %-8s %-8s %s\n", "DEAD AT", "JOB", "HANDLER", "ATTEMPT", "WHY", "ERROR");
        size_t shown = 0;
        for (size_t i = 0; i < b.n && (arr || !json); i++) {
            const jr_entry_t *e = &b.v[i];
            int pick = 0;
            for (size_t s2 = 0; s2 < nsel && !pick; s2++) pick = sel[s2] == e->id;
            if (!pick) continue;
            char t[JR_TIME_LEN];
            dead_time(e, t);
            if (json) {
                if (json_array_append_new(arr, dead_json(e, t))) status = json_oom(&arr);
            } else if (list) {
                fprintf(out, "%-24s ", t);
                print_field(out, e, "id", "?");
                fputs(" ", out);
                print_field(out, e, "h", "?");
                fputs(" ", out);
                print_field(out, e, "a", "1");
                fputs(" ", out);
                print_field(out, e, "why", "?");
                fputs(" ", out);
                print_field(out, e, "err", "");
                fputs("\n", out);
            } else {
                fprintf(out, "%sdead_at: %s\nentry: %s\n", shown++ ? "\n" : "", t, e->id);
                for (size_t f = 0; f < e->nfields; f++) {
                    print_bytes(out, e->names[f], e->name_lens[f]);
                    fputs(": ", out);
                    print_bytes(out, e->values[f], e->value_lens[f]);
                    fputs("\n", out);
                }
            }
        }
        if (arr && json_out(out, arr)) status = 1;
    } else if (nsel) {
        long long n = 0;
        int rc = retry ? jr_redis_dead_retry(r, queue, sel, nsel, &n)
                       : jr_redis_dead_purge(r, queue, all ? NULL : sel, all ? 0 : nsel, &n);
        if (rc) {
            fprintf(stderr, "jobrunner dead %s: %s\n", sub, jr_redis_errstr(r));
            status = 1;
        } else {
            fprintf(out, "%s %lld dead job%s\n", retry ? "re-enqueued" : "purged", n, n == 1 ? "" : "s");
            if (retry && (size_t)n < nsel)
                fprintf(stderr, "jobrunner dead retry: %zu left in the dead stream: they cannot run "
                        "(no handler, or kept whole in a raw field)\n", nsel - (size_t)n);
        }
    } else if (!status) {
        fprintf(out, "no dead jobs in queue %s\n", queue);
    }
    free(sel);
out:
    jr_batch_free(&b);
    jr_redis_free(r);
    return status;
}

/* The live processes as one JSON document: {"workers":[{...},...]}
 * (strings through jr_json_bytes, like every --json output). */
static json_t *workers_json(const jr_proc_t *v, size_t n) {
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        char t[JR_TIME_LEN];
        jr_time_format(v[i].started_ms, t);
        json_t *queues = json_array();
        for (const char *q = v[i].queues; queues && *q;) { /* the comma-separated list */
            size_t len = strcspn(q, ",");
            json_array_append_new(queues, jr_json_bytes(q, len));
            q += len + (q[len] == ',');
        }
        json_t *o = json_pack("{s:o, s:o, s:o, s:I, s:o, s:o, s:s, s:I, s:I, s:I}", "name",
                              jr_json_bytes(v[i].name, strlen(v[i].name)), "role",
                              jr_json_bytes(v[i].role, strlen(v[i].role)), "host",
                              jr_json_bytes(v[i].host, strlen(v[i].host)), "pid", (json_int_t)v[i].pid, "queues",
                              queues, "version", jr_json_bytes(v[i].version, strlen(v[i].version)), "started", t,
                              "running", (json_int_t)v[i].running, "last_seen_ms", (json_int_t)v[i].seen_ago_ms,
                              "lease_ms", (json_int_t)v[i].lease_ms);
        if (!o || json_array_append_new(list, o) != 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list ? json_pack("{s:o}", "workers", list) : NULL;
}

int jr_cmd_workers(const jr_config_t *cfg, int json, FILE *out) {
    jr_redis_t *r = admin_connect(cfg, 0);
    if (!r) return 1;
    jr_proc_t *v = NULL;
    size_t n = 0;
    int rc = jr_redis_proc_list(r, &v, &n);
    if (rc) {
        fprintf(stderr, "jobrunner workers: %s\n", jr_redis_errstr(r)[0] ? jr_redis_errstr(r) : jr_strerror(rc));
    } else if (json) {
        if (jr_json_print(out, workers_json(v, n)) != 0) rc = JR_ENOMEM;
    } else {
        fprintf(out, "%-32s %-9s %-20s %8s %-20s %-8s %-24s %7s %9s\n", "NAME", "ROLE", "HOST", "PID", "QUEUES",
                "VERSION", "STARTED", "RUNNING", "LAST SEEN");
        for (size_t i = 0; i < n; i++) {
            char t[JR_TIME_LEN], seen[32];
            jr_time_format(v[i].started_ms, t);
            snprintf(seen, sizeof seen, "%.1fs ago", (double)v[i].seen_ago_ms / 1000.0);
            fprintf(out, "%-32s %-9s %-20s %8lld %-20s %-8s %-24s %7lld %9s\n", v[i].name, v[i].role, v[i].host,
                    v[i].pid, v[i].queues[0] ? v[i].queues : "*", v[i].version, t, v[i].running, seen);
        }
    }
    jr_procs_free(v, n);
    jr_redis_free(r);
    return rc ? 1 : 0;
}

/* ---- periodic schedules ---------------------------------------------------- */

int jr_cmd_cron_add(const jr_config_t *cfg, jr_cron_def_t *d, FILE *out) {
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
    jr_redis_t *r = jr_admin_connect(cfg);
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
        fprintf(stderr, "jobrunner cron add: %s\n", jr_redis_errstr(r)[0] ? jr_redis_errstr(r) : jr_strerror(rc));
    } else {
        int64_t next = jr_cron_def_next(d, (int64_t)now);
        char t[JR_TIME_LEN];
        fprintf(out, "%s %s, next firing %s\n", d->name, !existed ? "added" : changed ? "updated" : "unchanged",
                next < 0 ? "never" : jr_time_format(next, t));
    }
    free(def);
    jr_redis_free(r);
    return rc ? 1 : 0;
}

int jr_cmd_cron_remove(const jr_config_t *cfg, char **names, size_t n, FILE *out) {
    jr_redis_t *r = jr_admin_connect(cfg);
    if (!r) return 1;
    int missing = 0, rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        int removed = 0;
        rc = jr_redis_cron_del(r, names[i], &removed);
        if (!rc) fprintf(out, "%s %s\n", names[i], removed ? "removed" : "not found");
        missing += !rc && !removed;
    }
    if (rc) fprintf(stderr, "jobrunner cron remove: %s\n", jr_redis_errstr(r)[0] ? jr_redis_errstr(r) : jr_strerror(rc));
    jr_redis_free(r);
    return rc || missing ? 1 : 0;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const jr_cron_entry_t *)a)->name, ((const jr_cron_entry_t *)b)->name);
}

/* One schedule as JSON (d decoded, or NULL with why). */
static json_t *cron_json(const jr_cron_entry_t *e, const jr_cron_def_t *d, const char *why, int64_t now) {
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "name", json_string(e->name));
    if (!d) {
        json_object_set_new(o, "error", json_string(why));
        json_object_set_new(o, "definition", jr_json_bytes(e->def, strlen(e->def)));
        return o;
    }
    char t[JR_TIME_LEN], loc[JR_CRON_LOCAL_LEN], dur[JR_DURATION_LEN];
    json_object_set_new(o, "cron", d->cron ? json_string(d->cron) : json_null());
    json_object_set_new(o, "every", d->cron ? json_null() : json_string(jr_duration_format(d->every_ms, dur, sizeof dur)));
    json_object_set_new(o, "every_ms", d->cron ? json_null() : json_integer(d->every_ms));
    json_object_set_new(o, "timezone", json_string(d->tz));
    json_object_set_new(o, "queue", json_string(d->queue));
    json_object_set_new(o, "handler", json_string(d->handler));
    json_object_set_new(o, "payload", d->payload ? json_string(d->payload) : json_null());
    json_object_set_new(o, "missed", json_string(d->missed == JR_MISSED_ONCE ? "once" : "skip"));
    json_object_set_new(o, "enabled", json_boolean(d->enabled));
    int64_t next = d->enabled ? jr_cron_def_next(d, now) : -1;
    json_object_set_new(o, "next_ms", next < 0 ? json_null() : json_integer(next));
    json_object_set_new(o, "next_utc", next < 0 ? json_null() : json_string(jr_time_format(next, t)));
    json_object_set_new(o, "next_local", next < 0 ? json_null() : json_string(jr_cron_local_format(next, d->tz, loc)));
    const char *job;
    int64_t last = jr_cron_last_parse(e->last, &job);
    json_object_set_new(o, "last_fired_ms", last < 0 ? json_null() : json_integer(last));
    json_object_set_new(o, "last_fired_utc", last < 0 ? json_null() : json_string(jr_time_format(last, t)));
    json_object_set_new(o, "last_job_id", last < 0 ? json_null() : json_string(job));
    return o;
}

int jr_cmd_cron_list(const jr_config_t *cfg, int json, FILE *out) {
    jr_redis_t *r = admin_connect(cfg, 0);
    if (!r) return 1;
    jr_cron_entry_t *v = NULL;
    size_t n = 0;
    char wake[JR_ID_MAX];
    double nowf = 0;
    int rc = jr_redis_cron_list(r, &v, &n, wake);
    if (!rc) rc = jr_redis_time_ms(r, &nowf);
    if (rc) {
        fprintf(stderr, "jobrunner cron list: %s\n", jr_redis_errstr(r)[0] ? jr_redis_errstr(r) : jr_strerror(rc));
        jr_cron_entries_free(v, n);
        jr_redis_free(r);
        return 1;
    }
    int64_t now = (int64_t)nowf;
    if (n) qsort(v, n, sizeof *v, cmp_entry);
    json_t *arr = json ? json_array() : NULL;
    if (!json)
        fprintf(out, "%-20s %-20s %-16s %-10s %-16s %-24s %-25s %-24s %-30s %s\n", "NAME", "SCHEDULE", "ZONE", "QUEUE",
                "HANDLER", "NEXT (UTC)", "NEXT (LOCAL)", "LAST FIRED (UTC)", "LAST JOB", "ENABLED");
    for (size_t i = 0; i < n; i++) {
        jr_cron_def_t d;
        char why[JR_ERRLEN];
        int bad = jr_cron_def_decode(v[i].name, v[i].def, &d, why, sizeof why);
        if (json) {
            json_array_append_new(arr, cron_json(&v[i], bad ? NULL : &d, why, now));
        } else if (bad) {
            fprintf(out, "%-20s (unreadable definition: %s)\n", v[i].name, why);
        } else {
            char sched[128], t[JR_TIME_LEN], loc[JR_CRON_LOCAL_LEN], lt[JR_TIME_LEN], dur[JR_DURATION_LEN];
            if (d.cron) snprintf(sched, sizeof sched, "%s", d.cron);
            else snprintf(sched, sizeof sched, "every %s", jr_duration_format(d.every_ms, dur, sizeof dur));
            int64_t next = d.enabled ? jr_cron_def_next(&d, now) : -1;
            const char *job;
            int64_t last = jr_cron_last_parse(v[i].last, &job);
            fprintf(out, "%-20s %-20s %-16s %-10s %-16s %-24s %-25s %-24s %-30s %s\n", d.name, sched, d.tz, d.queue,
                    d.handler, next < 0 ? "-" : jr_time_format(next, t),
                    next < 0 ? "-" : jr_cron_local_format(next, d.tz, loc), last < 0 ? "-" : jr_time_format(last, lt),
                    last < 0 ? "-" : job, d.enabled ? "yes" : "no");
        }
        jr_cron_def_free(&d);
    }
    if (json) {
        json_t *doc = json_object();
        if (doc) json_object_set_new(doc, "schedules", arr);
        else json_decref(arr);
        if (jr_json_print(out, doc) != 0) rc = JR_ENOMEM;
    }
    jr_cron_entries_free(v, n);
    jr_redis_free(r);
    return rc ? 1 : 0;
}
