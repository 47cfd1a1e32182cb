/* The queues: stats, dead, pause, resume, queue partitions|remove (rows of
 * cli.c; see cli.h). stats, pause and resume go through the client
 * library; dead lists the dead-letter stream through the Redis layer and
 * changes it through bulk.h; queue remove through the Redis layer. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "contract.h"
#include "bulk.h"
#include "envelope.h"
#include "jr.h"
#include "proc.h"
#include "partition.h"
#include "redis_admin.h"
#include "redis_partition.h"
#include "redis_sched.h"
#include "util.h"

/* ---- stats ---------------------------------------------------------------- */

/* A count as text: "?" when it could not be read (-1). buf holds 24 bytes. */
static const char *count_text(int64_t n, char *buf) {
    if (n < 0) snprintf(buf, 24, "?");
    else snprintf(buf, 24, "%lld", (long long)n);
    return buf;
}

/* A count as JSON: null when it could not be read (-1). */
static json_t *json_count(int64_t n) { return n < 0 ? json_null() : json_integer(n); }

/* An age in ms as "850ms", "12.5s", "7m12s", "3h05m", "2d04h"; "-" if < 0. */
static const char *age_text(long long ms, char *buf, size_t len) {
    if (ms < 0) snprintf(buf, len, "-");
    else if (ms < 1000) snprintf(buf, len, "%lldms", ms);
    else if (ms < 60000) snprintf(buf, len, "%.1fs", (double)ms / 1000.0);
    else if (ms < 3600000) snprintf(buf, len, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
    else if (ms < 86400000) snprintf(buf, len, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
    else snprintf(buf, len, "%lldd%02lldh", ms / 86400000, ms / 3600000 % 24);
    return buf;
}

/* The registry holds the partitions "Q#J" of a partitioned queue: one row
 * of Q stands for them (its counts are their sums). Keeps the order of
 * first appearance. 0, or JR_ENOMEM. */
int jr_cli_queue_rows(jr_strlist_t *l) {
    jr_strlist_t out = {0};
    for (size_t i = 0; i < l->n; i++) {
        size_t qlen;
        uint32_t j;
        char q[JR_INTERNAL_QUEUE_MAX + 1];
        snprintf(q, sizeof q, "%s", l->v[i]);
        if (jr_partition_split(q, strlen(q), &qlen, &j) && !jr_contract_queue_name(q, qlen)) q[qlen] = '\0';
        int seen = 0;
        for (size_t k = 0; k < out.n && !seen; k++) seen = !strcmp(out.v[k], q);
        if (!seen && jr_strlist_push(&out, q)) {
            jr_strlist_free(&out);
            return JR_ENOMEM;
        }
    }
    jr_strlist_free(l);
    *l = out;
    return 0;
}

/* One stats table, or JSON document, of `queues` (every registered queue if
 * none). The JSON is one object {"queues": [{"queue", "ready", "pending",
 * "delayed", "dead", "paused", "processed", "failed", "jobs_per_second",
 * "oldest_ready_ms"}, ...]}, counts as numbers, paused a boolean (with
 * "paused_since", Unix ms, when true); a count whose key holds another type
 * and a paused state that cannot be read are null, as are jobs_per_second
 * when unknown and oldest_ready_ms when no job is ready. 0, or 1 after
 * saying why. */
/* The partition rows of queue q (--partitions): a table row per partition,
 * named by its internal queue, or the JSON array "partitions" of the
 * queue's object (obj), [{"partition", "name", "ready", "pending",
 * "delayed", "dead", "processed", "failed"}, ...]. Nothing for a queue that
 * is not partitioned. 0, or 1 after saying why. */
static int stats_partitions(jr_client_t *c, const char *q, json_t *obj, jr_table_t *tab) {
    jr_redis_t *r = jr_client_redis(c);
    jr_partmap_t m = {0};
    jr_qpart_t *p;
    int status = 0;
    if (!r || jr_partmap_get(&m, r, q, &p)) {
        fprintf(stderr, "jobrunner: stats: %s: %s\n", jr_cli_esc(q), r ? jr_cli_esc(jr_redis_errstr(r)) : "not connected");
        jr_partmap_free(&m);
        return 1;
    }
    json_t *arr = obj && p->n > 1 ? json_array() : NULL;
    if (arr && json_object_set_new(obj, "partitions", arr)) status = 1;
    for (unsigned i = 0; !status && p->n > 1 && i < p->n; i++) {
        jr_qstats_t s;
        if (jr_redis_stats(r, p->names[i], &s)) {
            fprintf(stderr, "jobrunner: stats: %s: %s\n", jr_cli_esc(p->names[i]), jr_cli_esc(jr_redis_errstr(r)));
            status = 1;
        } else if (arr) {
            json_t *o = json_pack("{s:i,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "partition", (int)i, "name", p->names[i], "ready",
                                  json_count(s.ready), "pending", json_count(s.pending), "delayed", json_count(s.delayed),
                                  "dead", json_count(s.dead), "processed", json_count(s.processed), "failed",
                                  json_count(s.failed));
            if (!o || json_array_append_new(arr, o)) status = 1;
        } else if (!obj) {
            char n[6][24], label[JR_INTERNAL_QUEUE_MAX + 8];
            snprintf(label, sizeof label, "  %s", p->names[i]);
            const char *row[] = {label, count_text(s.ready, n[0]), count_text(s.pending, n[1]),
                                 count_text(s.delayed, n[2]), count_text(s.dead, n[3]), count_text(s.processed, n[4]),
                                 count_text(s.failed, n[5]), "", "", ""};
            if (jr_table_add(tab, row)) status = 1;
        }
    }
    jr_partmap_free(&m);
    return status;
}

static const char *const stats_heads[] = {"QUEUE", "READY", "PENDING", "DELAYED", "DEAD", "PROCESSED",
                                           "FAILED", "JOBS/S", "OLDEST", "PAUSED"};

static int stats_once(jr_client_t *c, const jr_strlist_t *queues, int json, int parts, size_t limit, FILE *out) {
    jr_table_t tab;
    jr_table_init(&tab, stats_heads, "lrrrrrrrrl");
    jr_strlist_t all = {0};
    char wake[JR_ID_MAX];
    int rc = 0, failed = 0; /* rc: a Redis error; failed: JSON building or writing */
    if (!queues->n) {
        jr_redis_t *r = jr_client_redis(c);
        if (!r) {
            fprintf(stderr, "jobrunner: stats: %s\n", jr_client_strerror(JR_CLIENT_ECONNECT));
            return 1;
        }
        if ((rc = jr_redis_queues(r, &all, wake))) fprintf(stderr, "jobrunner: stats: %s\n", jr_cli_esc(jr_redis_errstr(r)));
        if (!rc && (rc = jr_cli_queue_rows(&all))) fprintf(stderr, "jobrunner: stats: out of memory\n");
        queues = &all;
    }
    json_t *doc = NULL, *arr = NULL;
    if (!rc && json) {
        doc = json_object();
        arr = json_array();
        if (!doc || !arr || json_object_set_new(doc, "queues", arr)) failed = jr_cli_json_oom(&doc);
    }
    for (size_t i = 0; !rc && !failed && i < queues->n; i++) {
        jr_client_stats_t s;
        if ((rc = jr_client_stats(c, queues->v[i], &s))) {
            fprintf(stderr, "jobrunner: stats: %s: %s\n", jr_cli_esc(queues->v[i]), jr_cli_esc(jr_client_errstr(c)));
            break;
        }
        long long since = s.paused > 0 ? s.paused_since_ms : -1;
        /* A count of -1: its key holds garbage (the client's note names it). */
        if (s.ready < 0 || s.pending < 0 || s.delayed < 0 || s.dead < 0 || s.processed < 0 || s.paused < 0)
            fprintf(stderr, "jobrunner: stats: %s: %s; its counts shown as ?\n", jr_cli_esc(queues->v[i]),
                    jr_cli_esc(jr_client_errstr(c)));
        if (json) {
            json_t *q = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "queue",
                                  jr_json_bytes(queues->v[i], strlen(queues->v[i])), "ready", json_count(s.ready),
                                  "pending", json_count(s.pending), "delayed", json_count(s.delayed), "dead",
                                  json_count(s.dead), "paused", s.paused < 0 ? json_null() : json_boolean(s.paused), "processed", json_count(s.processed),
                                  "failed", json_count(s.failed), "jobs_per_second",
                                  s.jobs_per_second >= 0 ? json_real(s.jobs_per_second) : json_null(),
                                  "oldest_ready_ms",
                                  s.oldest_ready_ms >= 0 ? json_integer(s.oldest_ready_ms) : json_null());
            if (q && since >= 0 && json_object_set_new(q, "paused_since", json_integer(since))) {
                json_decref(q);
                q = NULL;
            }
            if (q && parts && stats_partitions(c, queues->v[i], q, NULL)) {
                json_decref(q);
                q = NULL;
            }
            if (!q || json_array_append_new(arr, q)) failed = jr_cli_json_oom(&doc);
        } else {
            char t[JR_TIME_LEN], age[32], n[6][24], rate[24], paused[JR_TIME_LEN + 8];
            if (s.jobs_per_second >= 0) snprintf(rate, sizeof rate, "%.1f", s.jobs_per_second);
            else snprintf(rate, sizeof rate, "?");
            /* within a width limit: "yes" (the time with --wide or --json) */
            snprintf(paused, sizeof paused, "%s%s", since >= 0 ? (limit ? "yes" : "since ") : s.paused < 0 ? "?" : "-",
                     since >= 0 && !limit ? jr_time_format(since, t) : "");
            const char *row[] = {queues->v[i], count_text(s.ready, n[0]), count_text(s.pending, n[1]),
                                 count_text(s.delayed, n[2]), count_text(s.dead, n[3]), count_text(s.processed, n[4]),
                                 count_text(s.failed, n[5]), rate, age_text(s.oldest_ready_ms, age, sizeof age), paused};
            if (jr_table_add(&tab, row)) {
                fprintf(stderr, "jobrunner: stats: out of memory\n");
                rc = 1;
                break;
            }
            if (parts && (rc = stats_partitions(c, queues->v[i], NULL, &tab))) break;
        }
    }
    if (rc || failed) json_decref(doc);
    else if (json) failed = jr_cli_json_out(out, doc);
    else jr_table_print(&tab, out, limit);
    jr_table_free(&tab);
    jr_strlist_free(&all);
    return rc || failed ? 1 : 0;
}

/* Say on stderr, for each of the n queues nothing ever used
 * (jr_redis_queues_known: not registered, not paused, no key of it), that it
 * may be a typo: "jobrunner CMD: queue "X" is not known: ...", as an error,
 * or with fatal = 0 as a warning (pause, resume and stats go on: a pause
 * ahead of time is meant to work). Returns how many; 0 also when Redis
 * cannot tell (the command then goes on and meets the error itself). */
int jr_cli_unknown_queues(jr_redis_t *r, const char *cmd, const char *const *queues, size_t n, int fatal) {
    unsigned char *known = n ? calloc(n, 1) : NULL;
    size_t nunknown = 0;
    if (r && known && !jr_redis_queues_known(r, queues, n, known))
        for (size_t i = 0; i < n; i++)
            if (!known[i]) {
                nunknown++;
                fprintf(stderr, "jobrunner: %s: %squeue \"%s\" is not known: no job was ever "
                                "enqueued to it (a typo? 'jobrunner stats' lists the known queues)\n",
                        cmd, fatal ? "" : "warning: ", jr_cli_esc(queues[i]));
            }
    free(known);
    return (int)nunknown;
}

/* A connection for `stats --watch` after Redis went away: as jr_cli_client
 * without its messages (the screen says why). NULL with why (len bytes). */
static jr_client_t *watch_connect(const jr_config_t *cfg, char *why, size_t len) {
    jr_redis_opts_t o;
    jr_config_redis_opts(cfg, &o);
    jr_redis_t *r = jr_redis_open(&o, why, len);
    if (!r) return NULL;
    if (jr_redis_load_library(r) && !jr_redis_ok(r)) { /* a library Redis refuses is met by the reads */
        snprintf(why, len, "%s", jr_redis_errstr(r));
        jr_redis_free(r);
        return NULL;
    }
    jr_client_t *c = jr_client_adopt(r);
    if (!c) {
        snprintf(why, len, "out of memory");
        jr_redis_free(r);
    }
    return c;
}

/* Print, per queue of `queues`: ready, pending, delayed and dead counts,
 * processed and failed totals, jobs per second over the last minute, the age
 * of the oldest ready job, paused; as a table or JSON on `out`. With
 * `watch`, clear the screen and redraw every second until interrupted
 * (exit status 0), and when Redis cannot be read (gone, frozen, refusing)
 * show "Redis unreachable: WHY, retrying" instead and keep trying every
 * second with a new connection: only output that cannot be written ends
 * it (jr_cli_done says so). Returns the exit status. */
static int cmd_stats(const jr_config_t *cfg, const jr_strlist_t *queues, int json, int watch, int parts, int wide,
                     FILE *out) {
    jr_client_t *c = jr_cli_client(cfg, 0);
    if (!c) return 1;
    int status;
    if (queues->n) jr_cli_unknown_queues(jr_client_redis(c), "stats", (const char *const *)queues->v, queues->n, 0);
    for (;;) {
        char why[JR_ERRLEN] = "", t[JR_TIME_LEN];
        if (!c) c = watch_connect(cfg, why, sizeof why);
        if (watch) fputs("\033[H\033[2J", out); /* home, clear: redraw in place */
        status = c ? stats_once(c, queues, json, parts, jr_table_limit(out, wide), out) : 1;
        if (!watch) break;
        if (status) { /* show why, and start again on a new connection */
            jr_redis_t *r = c ? jr_client_redis(c) : NULL;
            if (c) snprintf(why, sizeof why, "%s", jr_client_errstr(c)[0] ? jr_client_errstr(c) : r ? jr_redis_errstr(r) : "");
            fprintf(out, "Redis unreachable: %s, retrying\n", jr_cli_esc(why[0] ? why : "the connection was lost"));
            jr_client_free(c);
            c = NULL;
        }
        fprintf(out, "\n%s  (every 1 s; Ctrl-C stops)\n", jr_time_format(jr_wall_ms(), t));
        if (fflush(out) || ferror(out)) break; /* its reader is gone: out_done says so */
        if (jr_sleep_interruptible(1000)) {
            status = 0;
            break;
        }
    }
    jr_client_free(c);
    return jr_cli_done(out, status);
}

int jr_cli_stats(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)cmd, (void)argc, (void)argv;
    return cmd_stats(cfg, &f->queues, jr_flag(f, JR_O_JSON), jr_flag(f, JR_O_WATCH), jr_flag(f, JR_O_PARTITIONS),
                     jr_flag(f, JR_O_WIDE), stdout);
}

/* ---- dead ------------------------------------------------------------------- */


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

/* What `jobrunner dead list|show` does over the partitions of a queue
 * (one, when it is not partitioned). */
typedef struct dead_run {
    const char *sub;
    int list, show, json;
    char **ids;
    size_t nids;
    FILE *out;
    json_t *arr;          /* --json: the entries so far */
    unsigned char *found; /* per id: found in some partition */
    int missing;          /* an id named no dead job */
    size_t shown;         /* entries shown (show) */
    jr_table_t tab;       /* list: the rows so far */
} dead_run_t;

/* `jobrunner dead list|show` on one internal queue (partition p, -1:
 * none). 0, or 1 after saying why. */
static int dead_part(jr_redis_t *r, dead_run_t *run, const char *queue, int p) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    jr_batch_t b = {0};
    int status = 0;
    FILE *out = run->out;
    const char **sel = NULL;
    size_t nsel = 0;
    if (jr_redis_xrange(r, k.dead, 0, &b) != 0) {
        fprintf(stderr, "jobrunner dead: %s\n", jr_cli_esc(jr_redis_errstr(r)));
        status = 1;
        goto out;
    }
    /* Which entries the command is about: all, or those of the named jobs
     * (a job id, or the dead entry's own id: garbage buried without a job
     * id is named that way). */
    if (!(sel = calloc(b.n + 1, sizeof *sel))) {
        status = 1;
        goto out;
    }
    for (size_t i = 0; i < b.n; i++) {
        size_t len;
        const char *id = jr_cli_field(&b.v[i], JR_F_ID, &len);
        int want = run->list && !run->nids;
        for (size_t j = 0; j < run->nids; j++)
            if (jr_bulk_dead_names(&b.v[i], id, len, p, run->ids[j])) want = 1, run->found[j] = 1;
        if (want) sel[nsel++] = b.v[i].id;
    }
    {
        for (size_t i = 0; i < b.n && (run->arr || !run->json); i++) {
            const jr_entry_t *e = &b.v[i];
            int pick = 0;
            for (size_t s2 = 0; s2 < nsel && !pick; s2++) pick = sel[s2] == e->id;
            if (!pick) continue;
            char t[JR_TIME_LEN];
            dead_time(e, t);
            if (run->json) {
                if (json_array_append_new(run->arr, dead_json(e, t))) status = jr_cli_json_oom(&run->arr);
            } else if (run->list) {
                size_t len;
                const char *id = jr_cli_field(e, JR_F_ID, &len);
                static const char *const names[] = {JR_F_HANDLER, JR_F_ATTEMPT, JR_F_WHY, JR_F_ERROR};
                static const char *const dflt[] = {"?", "1", "?", ""};
                const char *row[6] = {t, id ? id : "?"};
                size_t lens[6] = {strlen(t), id ? len : 1};
                char shown[JR_ID_MAX + 16]; /* a partition's generated id as users see it: "~p" */
                if (id && p >= 0 && len < JR_ID_MAX && jr_contract_id_reserved(id, len)) {
                    snprintf(shown, sizeof shown, "%.*s~%d", (int)len, id, p);
                    row[1] = shown, lens[1] = strlen(shown);
                }
                for (int c = 0; c < 4; c++) {
                    row[2 + c] = jr_cli_field(e, names[c], &lens[2 + c]);
                    if (!row[2 + c]) row[2 + c] = dflt[c], lens[2 + c] = strlen(dflt[c]);
                }
                if (jr_table_add_n(&run->tab, row, lens)) status = 1;
            } else {
                fprintf(out, "%sdead_at: %s\nentry: %s\n", run->shown++ ? "\n" : "", t, jr_cli_esc(e->id));
                for (size_t f = 0; f < e->nfields; f++) {
                    jr_cli_print_bytes(out, e->names[f], e->name_lens[f]);
                    fputs(": ", out);
                    jr_cli_print_bytes(out, e->values[f], e->value_lens[f]);
                    fputs("\n", out);
                }
            }
        }
    }
out:
    free(sel);
    jr_batch_free(&b);
    return status;
}

/* `jobrunner dead retry|purge` (delete: purge): the named jobs (job ids or
 * dead entry ids), every dead job (all), or those the filter passes
 * (filtered: after jr_cli_confirm), through jr_bulk, page by page. Prints
 * how many it changed. Returns the exit status: 1 when a named job is not
 * dead or Redis fails. */
static int cmd_dead_change(const jr_config_t *cfg, const char *queue, const char *sub, char **ids, size_t nids,
                           const jr_filter_t *flt, int filtered, int yes, FILE *out) {
    int retry = !strcmp(sub, "retry"), status;
    char what[2 * JR_ERRLEN], ft[JR_ERRLEN];
    jr_cli_filter_text(flt, ft, sizeof ft);
    snprintf(what, sizeof what, "%s every dead job of queue %s%s", retry ? "retry" : "delete", jr_cli_esc(queue), ft);
    if (filtered && (status = jr_cli_confirm(retry ? "dead retry" : "dead purge", yes, what))) return status;
    jr_redis_t *r = jr_cli_connect(cfg, retry);
    if (!r) return 1;
    unsigned char *found = calloc(nids + 1, 1);
    jr_bulk_result_t res;
    int rc = found ? jr_bulk(r, queue, JR_BULK_DEAD, retry ? JR_BULK_RUN_NOW : JR_BULK_DELETE, filtered ? flt : NULL,
                             (const char *const *)ids, nids, found, &res)
                   : JR_ENOMEM;
    status = rc != 0;
    if (rc) fprintf(stderr, "jobrunner dead %s: %s\n", sub, rc == JR_ENOMEM ? "out of memory" : jr_cli_esc(jr_redis_errstr(r)));
    int missing = 0;
    for (size_t j = 0; !rc && j < nids; j++) /* a job id that is not dead is an error */
        if (!found[j]) {
            fprintf(stderr, "jobrunner dead %s: no dead job \"%s\" in queue %s\n", sub, jr_cli_esc(ids[j]),
                    jr_cli_esc(queue));
            missing = 1;
        }
    if (!rc && res.matched) {
        fprintf(out, "%s %lld dead job%s%s\n", retry ? "re-enqueued" : "purged", res.acted, res.acted == 1 ? "" : "s",
                filtered ? ft : "");
        if (retry && res.acted < res.matched)
            fprintf(stderr, "jobrunner dead retry: %lld left in the dead stream: they cannot run "
                    "(no handler, or kept whole in a raw field)\n", res.matched - res.acted);
    } else if (!rc && !missing) {
        fprintf(out, "no dead jobs%s in queue %s\n", filtered ? ft : "", jr_cli_esc(queue));
    }
    free(found);
    jr_redis_free(r);
    return jr_cli_done(out, status || missing);
}

/* `jobrunner dead list|show`: ids are job ids or dead entry ids (list: none
 * = every dead job). With json it prints one JSON array of dead entries,
 * one object each (dead_json), even for one id. Returns the exit status:
 * 1 when a named job is not dead or Redis fails. */
static int cmd_dead(const jr_config_t *cfg, const char *queue, const char *sub, char **ids, size_t nids, int json,
                    int wide, FILE *out) {
    int list = !strcmp(sub, "list"), show = !strcmp(sub, "show");
    jr_redis_t *r = jr_cli_connect(cfg, 0);
    if (!r) return 1;
    jr_partmap_t parts = {0};
    jr_qpart_t *qp = NULL;
    dead_run_t run = {.sub = sub, .list = list, .show = show, .json = json, .ids = ids, .nids = nids, .out = out};
    int status = 0;
    if (!(run.found = calloc(nids + 1, 1))) status = 1;
    else if (jr_partmap_get(&parts, r, queue, &qp)) {
        fprintf(stderr, "jobrunner dead: %s\n", jr_cli_esc(jr_redis_errstr(r)));
        status = 1;
    }
    if (!status && json && !(run.arr = json_array())) status = jr_cli_json_oom(&run.arr);
    static const char *const heads[] = {"DEAD AT", "JOB", "HANDLER", "ATTEMPT", "WHY", "ERROR"};
    jr_table_init(&run.tab, heads, "LllLll");
    /* a partitioned queue: every partition in turn, then Q itself (jobs a
     * producer unaware of the partitions put there), as one */
    for (unsigned p = 0; !status && qp && p < qp->n + (qp->n > 1); p++)
        status = dead_part(r, &run, p < qp->n ? jr_qpart_name(qp, p) : queue, qp->n > 1 && p < qp->n ? (int)p : -1);
    for (size_t j = 0; !status && j < nids; j++) /* a job id that is not dead is an error */
        if (!run.found[j]) {
            fprintf(stderr, "jobrunner dead %s: no dead job \"%s\" in queue %s\n", sub, jr_cli_esc(ids[j]), jr_cli_esc(queue));
            run.missing = 1;
        }
    if (run.arr && status) json_decref(run.arr);
    else if (run.arr && jr_cli_json_out(out, run.arr)) status = 1; /* it takes the array */
    if (!status && list && !json) jr_table_print(&run.tab, out, jr_table_limit(out, wide));
    jr_table_free(&run.tab);
    free(run.found);
    jr_partmap_free(&parts);
    jr_redis_free(r);
    return jr_cli_done(out, status || run.missing);
}

int jr_cli_dead(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    if (argc < 1) return jr_cli_die(cmd->name, "%s", "expected list, show, retry or purge");
    if (f->queues.n > 1) return jr_cli_die(cmd->name, "%s", "dead takes one -q");
    const char *sub = argv[0], *queue = f->queues.n ? f->queues.v[0] : cfg->default_queue;
    int all = jr_flag(f, JR_O_ALL), json = jr_flag(f, JR_O_JSON);
    jr_filter_t flt;
    int filtered = jr_cli_filter(f, &flt);
    char **ids = argv + 1;
    size_t nids = (size_t)(argc - 1);
    int list = !strcmp(sub, "list"), show = !strcmp(sub, "show");
    int retry = !strcmp(sub, "retry"), purge = !strcmp(sub, "purge") || !strcmp(sub, "delete");
    if (!list && !show && !retry && !purge)
        return jr_cli_die(cmd->name, "unknown subcommand \"%s\" (list, show, retry, purge or delete)", sub);
    if (all && nids) return jr_cli_die(cmd->name, "%s", "give job ids or --all, not both");
    if (filtered && (nids || all))
        return jr_cli_die(cmd->name, "%s", "give job ids, --all or --handler/--match, one of them");
    if (filtered && !retry && !purge) return jr_cli_die(cmd->name, "%s", "--handler and --match go with retry and purge");
    if (jr_flag(f, JR_O_YES) && !filtered) return jr_cli_die(cmd->name, "%s", "--yes goes with --handler/--match");
    if (json && !list && !show) return jr_cli_die(cmd->name, "%s", "--json applies to list and show");
    if (show && !nids) return jr_cli_die(cmd->name, "%s", "dead show: name one or more job ids");
    if ((retry || purge) && !all && !nids && !filtered)
        return jr_cli_die(cmd->name, "%s", "name job ids, or give --all or --handler H [--match TEXT]");
    if (retry || purge)
        return cmd_dead_change(cfg, queue, retry ? "retry" : "purge", ids, nids, &flt, filtered, jr_flag(f, JR_O_YES),
                               stdout);
    return cmd_dead(cfg, queue, sub, ids, nids, json, jr_flag(f, JR_O_WIDE), stdout);
}

/* ---- queue partitions ------------------------------------------------------- */

/* `jobrunner queue partitions QUEUE [N]`: print QUEUE's count, or set it
 * (jr_client_set_partitions: refused while the queue holds jobs). */
/* `jobrunner queue remove QUEUE`: jr_redis_queue_remove (refused, naming
 * what is in the way, unless the queue is empty and served by no live
 * process); "QUEUE removed (N keys deleted)". A queue nothing ever used is
 * an error. Returns the exit status. */
static int cmd_queue_remove(const jr_config_t *cfg, const char *queue, FILE *out) {
    jr_redis_t *r = jr_cli_connect(cfg, 1);
    if (!r) return 1;
    long long deleted = 0;
    int status = 1;
    if (!jr_cli_unknown_queues(r, "queue remove", &queue, 1, 1)) {
        if (jr_redis_queue_remove(r, queue, &deleted))
            fprintf(stderr, "jobrunner queue remove: %s\n", jr_cli_esc(jr_redis_errstr(r)));
        else
            fprintf(out, "%s removed (%lld key%s deleted)\n", jr_cli_esc(queue), deleted, deleted == 1 ? "" : "s"),
                status = 0;
    }
    jr_redis_free(r);
    return jr_cli_done(out, status);
}

int jr_cli_queue(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)f;
    if (argc >= 1 && !strcmp(argv[0], "remove")) {
        if (argc != 2) return jr_cli_die(cmd->name, "%s", "expected remove QUEUE");
        const char *rule = jr_contract_queue_name(argv[1], strlen(argv[1]));
        if (rule) return jr_cli_die2(cmd->name, "queue name", argv[1], rule);
        return cmd_queue_remove(cfg, argv[1], stdout);
    }
    if (argc < 1 || strcmp(argv[0], "partitions"))
        return jr_cli_die(cmd->name, "%s", "expected partitions QUEUE [N] or remove QUEUE");
    if (argc < 2 || argc > 3) return jr_cli_die(cmd->name, "%s", "expected partitions QUEUE [N]");
    const char *queue = argv[1], *rule = jr_contract_queue_name(queue, strlen(queue));
    if (rule) return jr_cli_die2(cmd->name, "queue name", queue, rule);
    int64_t n = 0;
    if (argc == 3 && jr_cli_parse_count(argv[2], 1, JR_PARTITIONS_MAX, &n))
        return jr_cli_die2(cmd->name, "partition count", argv[2], "must be an integer from 1 to 1024");
    jr_client_t *c = jr_cli_client(cfg, 1);
    if (!c) return 1;
    int status = 0;
    if (argc == 2) {
        jr_partmap_t m = {0};
        jr_qpart_t *p;
        jr_redis_t *r = jr_client_redis(c);
        if (!r || jr_partmap_get(&m, r, queue, &p)) {
            fprintf(stderr, "jobrunner queue partitions: %s\n", r ? jr_cli_esc(jr_redis_errstr(r)) : "not connected");
            status = 1;
        } else {
            printf("%s: %u partition%s\n", jr_cli_esc(queue), p->n, p->n == 1 ? " (not partitioned)" : "s");
        }
        jr_partmap_free(&m);
    } else {
        int before = 0;
        if (jr_client_set_partitions(c, queue, (int)n, &before)) {
            fprintf(stderr, "jobrunner queue partitions: %s\n", jr_cli_esc(jr_client_errstr(c)));
            status = 1;
        } else if (before == n) {
            printf("%s: already %d partition%s\n", jr_cli_esc(queue), before, before == 1 ? "" : "s");
        } else {
            printf("%s: %d partition%s (was %d)\n", jr_cli_esc(queue), (int)n, n == 1 ? "" : "s", before);
        }
    }
    jr_client_free(c);
    return jr_cli_done(stdout, status);
}

/* ---- pause, resume ------------------------------------------------------------ */

/* One queue, as -q QUEUE or QUEUE (a -q was checked by main). */
int jr_cli_pause_check(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, int argc, char **argv) {
    if (f->queues.n + (size_t)argc != 1)
        return jr_cli_die(cmd->name, "%s", "expected one QUEUE (as -q QUEUE or QUEUE)");
    const char *rule = argc ? jr_contract_queue_name(argv[0], strlen(argv[0])) : NULL;
    return rule ? jr_cli_die2(cmd->name, "queue name", argv[0], rule) : 0;
}

/* `jobrunner pause|resume QUEUE` (on = 1: pause): record it in Redis, then
 * wake every live worker (CLIENT UNBLOCK of its blocking read) so it reads
 * the paused set at once. Prints "QUEUE paused" / "QUEUE resumed" (or that
 * it already was). Returns the exit status. */
static int cmd_pause(const jr_config_t *cfg, const char *queue, int on, FILE *out) {
    jr_client_t *c = jr_cli_client(cfg, 0);
    if (!c) return 1;
    int changed = 0, woken = 0;
    jr_cli_unknown_queues(jr_client_redis(c), on ? "pause" : "resume", &queue, 1, 0);
    if (jr_client_set_paused(c, queue, on, &changed, &woken)) {
        fprintf(stderr, "jobrunner: %s %s: %s\n", on ? "pause" : "resume", jr_cli_esc(queue),
                jr_cli_esc(jr_client_errstr(c)));
        jr_client_free(c);
        return 1;
    }
    /* The library woke the blocked workers; one that was not blocked reads
     * the paused set with its next fetch anyway. */
    if (woken < 0)
        fprintf(stderr, "jobrunner: note: could not wake the workers (%s); they see the change within a "
                        "block period (worker.block)\n", jr_cli_esc(jr_client_errstr(c)));
    jr_client_stats_t s;
    if (changed) {
        fprintf(out, "%s %s\n", queue, on ? "paused" : "resumed");
    } else if (on && jr_client_stats(c, queue, &s) == 0 && s.paused > 0) {
        char t[JR_TIME_LEN];
        fprintf(out, "%s was already paused (since %s)\n", queue, jr_time_format(s.paused_since_ms, t));
    } else {
        fprintf(out, "%s was %s\n", queue, on ? "already paused" : "not paused");
    }
    jr_client_free(c);
    return jr_cli_done(out, 0);
}

int jr_cli_pause(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)argc;
    return cmd_pause(cfg, f->queues.n ? f->queues.v[0] : argv[0], !strcmp(cmd->name, "pause"), stdout);
}
