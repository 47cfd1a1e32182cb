/* The admin commands: see admin.h. */
#include "admin.h"
#include "redis_produce.h"
#include "redis_sched.h"
#include "redis_admin.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "json.h"
#include "util.h"

#include "jr.h"
#include "proc.h"

/* ---- text from Redis on a terminal ------------------------------------------
 * Anything read from Redis can have been written there by anyone who can
 * reach it: a consumer name, a presence entry, a schedule, a job's fields.
 * The text outputs show it through these, so no byte of it can move the
 * cursor, clear the screen, retitle the window, end a table row or hide
 * what follows: printable ASCII as is, every other byte and '\' as \xNN
 * (the JSON outputs escape with jansson instead). */

/* Print n bytes of s so escaped. */
static void print_bytes(FILE *out, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') fputc(c, out);
        else fprintf(out, "\\x%02x", c);
    }
}

/* One table cell: s (NULL: "") escaped, then spaces up to `width` columns
 * (none past it: a long value shifts the row, never loses bytes). */
static void print_cell(FILE *out, const char *s, int width) {
    size_t n = s ? strlen(s) : 0, cols = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        cols += c >= 0x20 && c < 0x7f && c != '\\' ? 1 : 4;
    }
    print_bytes(out, s ? s : "", n);
    for (; (int)cols < width; cols++) fputc(' ', out);
}

#define ESC_BUFS 4
#define ESC_LEN (4 * JR_ERRLEN + 8)
/* s escaped as print_bytes for a printf argument (a message on stderr):
 * one of ESC_BUFS static buffers in turn, so up to that many can appear in
 * one call; cut with "..." past ESC_LEN. */
static const char *esc(const char *s) {
    static char bufs[ESC_BUFS][ESC_LEN];
    static unsigned next;
    char *b = bufs[next++ % ESC_BUFS];
    size_t o = 0;
    for (const unsigned char *u = (const unsigned char *)(s ? s : ""); *u; u++) {
        if (o + 8 >= ESC_LEN) {
            memcpy(b + o, "...", 4);
            return b;
        }
        if (*u >= 0x20 && *u < 0x7f && *u != '\\') b[o++] = (char)*u;
        else o += (size_t)snprintf(b + o, ESC_LEN - o, "\\x%02x", *u);
    }
    b[o] = '\0';
    return b;
}

/* ---- how a command ends --------------------------------------------------------
 * A command's output may go to a pipe whose reader is gone (`jobrunner jobs
 * | head -1`, `stats --watch` into a pager that quit), and its connection to
 * a Redis that went away: either ends the command with a message and exit
 * status 1, never with a silent death by SIGPIPE (the signal's default
 * action). So a command ignores SIGPIPE from its first connection on (the
 * CLI is one thread and starts no program), and checks at its end that
 * its output was written. */
static void cli_signals(void) { signal(SIGPIPE, SIG_IGN); }

/* status, or 1 (status if non-zero) with a message when out could not be
 * written. */
static int out_done(FILE *out, int status) {
    errno = 0;
    if (fflush(out) == 0 && !ferror(out)) return status;
    fprintf(stderr, "jobrunner: cannot write the output: %s\n", errno ? strerror(errno) : "an earlier write failed");
    return status ? status : 1;
}

/* Connect and load the function library. A command that only reads or
 * deletes (stats, dead list/show/purge: `required` = 0) goes on when the
 * load fails, e.g. on an out-of-memory Redis, with the library already in
 * Redis; then a later failure shows Redis's own error. */
static jr_redis_t *admin_connect(const jr_config_t *cfg, int required) {
    cli_signals();
    char err[JR_ERRLEN];
    /* redis.wait (--wait): retry a Redis that cannot be reached yet (not
     * started, its name not resolvable yet) until that much time has passed,
     * every 100 ms doubling to 1 s. */
    int64_t until = jr_mono_us() + cfg->redis_wait_ms * 1000, pause_ms = 100;
    jr_redis_t *r;
    while (!(r = jr_redis_connect(jr_config_redis_url(cfg), cfg->connect_timeout_ms, err, sizeof err))) {
        int64_t left_ms = (until - jr_mono_us()) / 1000;
        if (left_ms <= 0) {
            fprintf(stderr, "jobrunner: %s%s\n", esc(err), cfg->redis_wait_ms ? " (gave up after redis.wait)" : "");
            return NULL;
        }
        if (jr_sleep_interruptible(pause_ms < left_ms ? pause_ms : left_ms)) return NULL;
        pause_ms = pause_ms * 2 > 1000 ? 1000 : pause_ms * 2;
    }
    if (jr_redis_load_library(r) != 0) {
        fprintf(stderr, "jobrunner: %sloading the function library: %s\n", required ? "" : "note: ",
                esc(jr_redis_errstr(r)));
        if (required || !jr_redis_ok(r)) {
            jr_redis_free(r);
            return NULL;
        }
    }
    return r;
}

jr_redis_t *jr_admin_connect(const jr_config_t *cfg) { return admin_connect(cfg, 1); }

/* A client around a connection made for a one-shot command (NULL after
 * printing why on stderr). The CLI's commands on jobs and queues go through
 * the client library, so both are one code path. */
static jr_client_t *admin_client(const jr_config_t *cfg, int required) {
    jr_redis_t *r = admin_connect(cfg, required);
    if (!r) return NULL;
    jr_client_t *c = jr_client_adopt(r);
    if (!c) {
        fprintf(stderr, "jobrunner: out of memory\n");
        jr_redis_free(r);
    }
    return c;
}

int jr_cmd_enqueue(const jr_config_t *cfg, const jr_enqueue_t *job, FILE *out) {
    jr_client_t *c = admin_client(cfg, 1);
    if (!c) return 1;
    /* --at keeps the millisecond (the client API's unit) */
    jr_client_job_t j = {.queue = job->queue, .handler = job->env.handler, .payload = job->env.payload,
                         .payload_len = job->env.payload_len, .id = job->id, .delay_ms = job->delay_ms,
                         .at_ms = job->at_us > 0 ? (job->at_us + 999) / 1000 : 0,
                         .max_attempts = job->env.max_attempts, .timeout_ms = job->env.timeout_ms,
                         .backoff_ms = job->env.backoff_ms, .uniq_ms = job->uniq_ms};
    jr_client_result_t res;
    int rc = jr_client_enqueue(c, &j, &res);
    if (rc) {
        fprintf(stderr, "jobrunner: enqueue failed: %s\n", esc(res.error ? res.error : jr_client_errstr(c)));
    } else {
        fprintf(out, "%s\n", esc(res.id));
        if (res.status == JR_CLIENT_JOB_EXISTED)
            fprintf(stderr, "jobrunner: job %s was already enqueued; not enqueued again\n", esc(res.id));
    }
    jr_client_free(c);
    return out_done(out, rc ? 1 : 0);
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
 * "delayed", "dead", "paused"}, ...]}, counts as numbers, paused a boolean
 * (with "paused_since", Unix ms, when true). */
/* An age in ms as "850ms", "12.5s", "7m12s", "3h05m", "2d04h"; "-" if < 0. */
/* A count as text: "?" when it could not be read (-1). buf holds 24 bytes. */
static const char *count_text(int64_t n, char *buf) {
    if (n < 0) snprintf(buf, 24, "?");
    else snprintf(buf, 24, "%lld", (long long)n);
    return buf;
}

/* A count as JSON: null when it could not be read (-1). */
static json_t *json_count(int64_t n) { return n < 0 ? json_null() : json_integer(n); }

static const char *age_text(long long ms, char *buf, size_t len) {
    if (ms < 0) snprintf(buf, len, "-");
    else if (ms < 1000) snprintf(buf, len, "%lldms", ms);
    else if (ms < 60000) snprintf(buf, len, "%.1fs", (double)ms / 1000.0);
    else if (ms < 3600000) snprintf(buf, len, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
    else if (ms < 86400000) snprintf(buf, len, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
    else snprintf(buf, len, "%lldd%02lldh", ms / 86400000, ms / 3600000 % 24);
    return buf;
}

/* One stats table (or JSON document) of `queues` (all registered if none). */
static int stats_once(jr_client_t *c, const jr_strlist_t *queues, int json, FILE *out) {
    jr_strlist_t all = {0};
    char wake[JR_ID_MAX];
    int rc = 0, failed = 0; /* rc: a Redis error; failed: JSON building or writing */
    if (!queues->n) {
        jr_redis_t *r = jr_client_redis(c);
        if (!r) {
            fprintf(stderr, "jobrunner: stats: %s\n", jr_client_strerror(JR_CLIENT_ECONNECT));
            return 1;
        }
        if ((rc = jr_redis_queues(r, &all, wake))) fprintf(stderr, "jobrunner: stats: %s\n", esc(jr_redis_errstr(r)));
        queues = &all;
    }
    json_t *doc = NULL, *arr = NULL;
    if (!rc && json) {
        doc = json_object();
        arr = json_array();
        if (!doc || !arr || json_object_set_new(doc, "queues", arr)) failed = json_oom(&doc);
    } else if (!rc) {
        fprintf(out, "%-20s %9s %9s %9s %9s %11s %9s %8s %8s  %s\n", "QUEUE", "READY", "PENDING", "DELAYED", "DEAD",
                "PROCESSED", "FAILED", "JOBS/S", "OLDEST", "PAUSED");
    }
    for (size_t i = 0; !rc && !failed && i < queues->n; i++) {
        jr_client_stats_t s;
        if ((rc = jr_client_stats(c, queues->v[i], &s))) {
            fprintf(stderr, "jobrunner: stats: %s: %s\n", esc(queues->v[i]), esc(jr_client_errstr(c)));
            break;
        }
        long long since = s.paused > 0 ? s.paused_since_ms : -1;
        /* A count of -1: its key holds garbage (the client's note names it). */
        if (s.ready < 0 || s.pending < 0 || s.delayed < 0 || s.dead < 0 || s.processed < 0 || s.paused < 0)
            fprintf(stderr, "jobrunner: stats: %s: %s; its counts shown as ?\n", esc(queues->v[i]),
                    esc(jr_client_errstr(c)));
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
            if (!q || json_array_append_new(arr, q)) failed = json_oom(&doc);
        } else {
            char t[JR_TIME_LEN], age[32], n[6][24], rate[24];
            print_cell(out, queues->v[i], 20);
            if (s.jobs_per_second >= 0) snprintf(rate, sizeof rate, "%.1f", s.jobs_per_second);
            else snprintf(rate, sizeof rate, "?");
            fprintf(out, " %9s %9s %9s %9s %11s %9s %8s %8s  %s%s\n", count_text(s.ready, n[0]),
                    count_text(s.pending, n[1]), count_text(s.delayed, n[2]), count_text(s.dead, n[3]),
                    count_text(s.processed, n[4]), count_text(s.failed, n[5]), rate,
                    age_text(s.oldest_ready_ms, age, sizeof age), since >= 0 ? "since " : s.paused < 0 ? "?" : "-",
                    since >= 0 ? jr_time_format(since, t) : "");
        }
    }
    if (rc || failed) json_decref(doc);
    else if (json) failed = json_out(out, doc);
    jr_strlist_free(&all);
    return rc || failed ? 1 : 0;
}

int jr_cmd_stats(const jr_config_t *cfg, const jr_strlist_t *queues, int json, int watch, FILE *out) {
    jr_client_t *c = admin_client(cfg, 0);
    if (!c) return 1;
    int status;
    for (;;) {
        if (watch) fputs("\033[H\033[2J", out); /* home, clear: redraw in place */
        status = stats_once(c, queues, json, out);
        if (!watch || status) break;
        char t[JR_TIME_LEN];
        fprintf(out, "\n%s  (every 1 s; Ctrl-C stops)\n", jr_time_format(jr_wall_ms(), t));
        if (fflush(out) || ferror(out)) break; /* its reader is gone: out_done says so */
        if (jr_sleep_interruptible(1000)) break;
    }
    jr_client_free(c);
    return out_done(out, status);
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
        fprintf(stderr, "jobrunner dead: %s\n", esc(jr_redis_errstr(r)));
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
                fprintf(out, "%sdead_at: %s\nentry: %s\n", shown++ ? "\n" : "", t, esc(e->id));
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
            fprintf(stderr, "jobrunner dead %s: %s\n", sub, esc(jr_redis_errstr(r)));
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
    return out_done(out, status);
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
        fprintf(stderr, "jobrunner workers: %s\n", jr_redis_errstr(r)[0] ? esc(jr_redis_errstr(r)) : jr_strerror(rc));
    } else if (json) {
        if (jr_json_print(out, workers_json(v, n)) != 0) rc = JR_ENOMEM;
    } else {
        fprintf(out, "%-32s %-9s %-20s %8s %-20s %-8s %-24s %7s %9s\n", "NAME", "ROLE", "HOST", "PID", "QUEUES",
                "VERSION", "STARTED", "RUNNING", "LAST SEEN");
        for (size_t i = 0; i < n; i++) {
            char t[JR_TIME_LEN], seen[32];
            jr_time_format(v[i].started_ms, t);
            snprintf(seen, sizeof seen, "%.1fs ago", (double)v[i].seen_ago_ms / 1000.0);
            print_cell(out, v[i].name, 32), fputc(' ', out);
            print_cell(out, v[i].role, 9), fputc(' ', out);
            print_cell(out, v[i].host, 20);
            fprintf(out, " %8lld ", v[i].pid);
            print_cell(out, v[i].queues[0] ? v[i].queues : "*", 20), fputc(' ', out);
            print_cell(out, v[i].version, 8);
            fprintf(out, " %-24s %7lld %9s\n", t, v[i].running, seen);
        }
    }
    jr_procs_free(v, n);
    jr_redis_free(r);
    return out_done(out, rc ? 1 : 0);
}

/* ---- functions: the Redis function library for producers --------------- */

extern const char jr_lua_library[];
extern const size_t jr_lua_library_len;

int jr_cmd_functions(const jr_config_t *cfg, const char *sub, FILE *out) {
    if (!strcmp(sub, "dump")) {
        cli_signals();
        /* Only the library: a pipe into `redis-cli -x FUNCTION LOAD` gets exactly it. */
        if (fwrite(jr_lua_library, 1, jr_lua_library_len, out) != jr_lua_library_len || fflush(out)) {
            fprintf(stderr, "jobrunner functions: cannot write the library\n");
            return 1;
        }
        return 0;
    }
    /* sub is "load" (main checks). */
    char shown[512];
    jr_redis_t *r = admin_connect(cfg, 1); /* waits up to redis.wait, loads the library, says why not */
    if (!r) return 1;
    fprintf(out, "function library \"jobrunner\" is loaded in Redis at %s\n",
            jr_config_redis_url_shown(cfg, shown, sizeof shown));
    jr_redis_free(r);
    return out_done(out, 0);
}

/* ---- one job: job show / run-now / delete, cancel, jobs --state ---------- */

/* Decode a delayed-set member: a msgpack sequence of strings (fixstr, str
 * 8/16/32, bin 8/16/32), at most max items into v/lens (pointing into p).
 * Returns how many, or -1 if p is not such a sequence or has more. Pure. */
int jr_msgpack_strings(const char *p, size_t n, const char **v, size_t *lens, size_t max) {
    const unsigned char *u = (const unsigned char *)p;
    size_t i = 0, k = 0;
    while (i < n) {
        unsigned char t = u[i++];
        size_t len, hdr;
        if ((t & 0xe0) == 0xa0) len = t & 0x1f, hdr = 0;
        else if (t == 0xd9 || t == 0xc4) hdr = 1;
        else if (t == 0xda || t == 0xc5) hdr = 2;
        else if (t == 0xdb || t == 0xc6) hdr = 4;
        else return -1;
        if (hdr) {
            if (n - i < hdr) return -1;
            len = 0;
            for (size_t b = 0; b < hdr; b++) len = len << 8 | u[i + b];
            i += hdr;
        }
        if (n - i < len || k == max) return -1;
        v[k] = p + i, lens[k++] = len;
        i += len;
    }
    return (int)k;
}

/* "<ms with fraction>" -> a printable time ("" stays ""). */
static void score_time(const char *score, char *buf) {
    if (!score[0]) buf[0] = '\0';
    else jr_time_format((int64_t)strtod(score, NULL), buf);
}

/* The job's fields as JSON: [[name, value], ...], lossless. */
static json_t *fields_json(const jr_entry_t *e) {
    json_t *a = json_array();
    for (size_t f = 0; a && e && f < e->nfields; f++)
        if (json_array_append_new(a, json_pack("[o,o]", jr_json_bytes(e->names[f], e->name_lens[f]),
                                               jr_json_bytes(e->values[f], e->value_lens[f])))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* A field as JSON (null when absent). */
static json_t *field_json(const jr_entry_t *e, const char *name) {
    size_t len;
    const char *v = e ? field(e, name, &len) : NULL;
    return v ? jr_json_bytes(v, len) : json_null();
}

/* fields_json of a job as the client library shows it. */
static json_t *info_fields_json(const jr_client_job_info_t *in) {
    json_t *a = json_array();
    for (size_t f = 0; a && f < in->nfields; f++)
        if (json_array_append_new(a, json_pack("[o,o]", jr_json_bytes(in->fields[f].name, in->fields[f].name_len),
                                               jr_json_bytes(in->fields[f].value, in->fields[f].value_len)))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* 1 if the job has a stored field `name`. */
static int info_has(const jr_client_job_info_t *in, const char *name) {
    for (size_t f = 0; f < in->nfields; f++)
        if (in->fields[f].name_len == strlen(name) && !memcmp(in->fields[f].name, name, in->fields[f].name_len))
            return 1;
    return 0;
}

/* A string of the job info as JSON (null when absent). */
static json_t *bytes_json(const char *v, size_t len) { return v ? jr_json_bytes(v, len) : json_null(); }

int jr_cmd_job_show(const jr_config_t *cfg, const char *queue, const char *id, int json, FILE *out) {
    jr_client_t *c = admin_client(cfg, 1);
    if (!c) return 1;
    jr_client_job_info_t *in = NULL;
    int status = 0;
    if (jr_client_job_show(c, queue, id, &in)) {
        fprintf(stderr, "jobrunner job show: %s\n", esc(jr_client_errstr(c)));
        jr_client_free(c);
        return 1;
    }
    int found = in->state != JR_CLIENT_STATE_NOT_FOUND, dead = in->state == JR_CLIENT_STATE_DEAD;
    int running = in->state == JR_CLIENT_STATE_RUNNING;
    char due[JR_TIME_LEN], at[JR_TIME_LEN], score[48];
    due[0] = at[0] = score[0] = '\0';
    if (in->due_ms >= 0) {
        jr_time_format((int64_t)in->due_ms, due);
        snprintf(score, sizeof score, "%.3f", in->due_ms);
    }
    if (dead) jr_time_format(strtoll(in->entry, NULL, 10), at);
    if (json) {
        json_t *doc = json_pack("{s:o,s:o,s:s,s:b}", "job", jr_json_bytes(id, strlen(id)), "queue",
                                jr_json_bytes(queue, strlen(queue)), "state", in->state_name, "found", found);
        if (doc && found) {
            json_object_set_new(doc, "entry", in->entry[0] ? json_string(in->entry) : json_null());
            json_object_set_new(doc, "due", due[0] ? json_string(due) : json_null());
            json_object_set_new(doc, "due_ms", in->due_ms >= 0 ? json_real(in->due_ms) : json_null());
            json_object_set_new(doc, "attempt", json_integer(in->attempt));
            if (running) {
                json_object_set_new(doc, "consumer", jr_json_bytes(in->consumer, strlen(in->consumer)));
                json_object_set_new(doc, "idle_ms", json_integer(in->idle_ms));
                json_object_set_new(doc, "deliveries", json_integer(in->deliveries));
            }
            if (at[0]) json_object_set_new(doc, "dead_at", json_string(at));
            json_object_set_new(doc, "handler", bytes_json(in->handler, in->handler_len));
            json_object_set_new(doc, "payload", info_has(in, "p") ? bytes_json(in->payload, in->payload_len) : json_null());
            json_object_set_new(doc, "error", bytes_json(in->error, in->error_len));
            if (dead) json_object_set_new(doc, "why", bytes_json(in->why, in->why_len));
            json_object_set_new(doc, "fields", info_fields_json(in));
        } else if (doc) {
            json_object_set_new(doc, "note", json_string("finished jobs are not kept"));
        }
        if (json_out(out, doc)) status = 1;
    } else {
        fprintf(out, "job: ");
        print_bytes(out, id, strlen(id));
        fprintf(out, "\nqueue: %s\nstate: %s%s\n", esc(queue), esc(in->state_name),
                found ? "" : " (finished jobs are not kept; a job that ran is gone)");
        if (in->state == JR_CLIENT_STATE_DELAYED || in->state == JR_CLIENT_STATE_RETRYING)
            fprintf(out, "due: %s (%s)\n", due, score);
        if (found) fprintf(out, "attempt: %lld\n", (long long)in->attempt);
        if (in->entry[0]) fprintf(out, "entry: %s\n", esc(in->entry));
        if (running)
            fprintf(out, "consumer: %s\nidle: %.1fs (since its start or last heartbeat)\ndeliveries: %lld\n",
                    esc(in->consumer), (double)in->idle_ms / 1000.0, (long long)in->deliveries);
        if (at[0]) fprintf(out, "dead_at: %s\n", at);
        for (size_t f = 0; f < in->nfields; f++) {
            fputs("  ", out);
            print_bytes(out, in->fields[f].name, in->fields[f].name_len);
            fputs(": ", out);
            print_bytes(out, in->fields[f].value, in->fields[f].value_len);
            fputs("\n", out);
        }
    }
    if (!found) status = 1;
    jr_client_job_info_free(in);
    jr_client_free(c);
    return out_done(out, status);
}

int jr_cmd_job_change(const jr_config_t *cfg, const char *queue, const char *sub, const char *id, FILE *out) {
    int run_now = !strcmp(sub, "run-now");
    jr_redis_t *r = admin_connect(cfg, 1);
    if (!r) return 1;
    char state[32], detail[JR_ID_MAX];
    int status = 0;
    if (jr_redis_job_change(r, run_now ? "jr_run_now" : "jr_delete", queue, id, state, sizeof state, detail,
                            sizeof detail)) {
        fprintf(stderr, "jobrunner job %s: %s\n", sub, esc(jr_redis_errstr(r)));
        status = 1;
    } else if (!strcmp(state, "not found")) {
        fprintf(stderr, "jobrunner job %s: no job \"%s\" waiting or running in queue %s (finished jobs are not kept)\n",
                sub, esc(id), esc(queue));
        status = 1;
    } else if (run_now) {
        if (!strcmp(state, "delayed") || !strcmp(state, "retrying"))
            fprintf(out, "%s ready now (was %s; entry %s)\n", esc(id), esc(state), esc(detail));
        else
            fprintf(out, "%s is already %s (entry %s)\n", esc(id), esc(state), esc(detail));
    } else if (!strcmp(state, "running")) {
        fprintf(stderr, "jobrunner job delete: %s is running; use cancel\n", esc(id));
        status = 1;
    } else {
        fprintf(out, "%s deleted (was %s)\n", esc(id), esc(state));
    }
    jr_redis_free(r);
    return out_done(out, status);
}

int jr_cmd_cancel(const jr_config_t *cfg, const char *queue, char **ids, size_t n, FILE *out) {
    jr_client_t *c = admin_client(cfg, 1);
    if (!c) return 1;
    int status = 0;
    for (size_t i = 0; i < n; i++) {
        jr_client_cancel_t o;
        int rc = jr_client_cancel(c, queue, ids[i], &o);
        if (rc) {
            fprintf(stderr, "jobrunner cancel: %s: %s\n", esc(ids[i]), esc(jr_client_errstr(c)));
            status = 1;
            if (rc == JR_CLIENT_ECONNECT || rc == JR_CLIENT_ETIMEOUT || rc == JR_CLIENT_ENOMEM) break;
            continue;
        }
        fprintf(out, "%s %s\n", esc(ids[i]),
                o == JR_CLIENT_CANCELLED ? "cancelled" : o == JR_CLIENT_CANCEL_RUNNING ? "running" : "not found");
        if (o == JR_CLIENT_CANCEL_NOT_FOUND) status = 1;
    }
    fflush(out);
    jr_client_free(c);
    return out_done(out, status);
}

/* -1, 0, 1 as stream id a is before, equal to, after b ("<ms>-<seq>"). */
static int id_cmp(const char *a, const char *b) {
    unsigned long long am = strtoull(a, NULL, 10), bm = strtoull(b, NULL, 10);
    const char *ad = strchr(a, '-'), *bd = strchr(b, '-');
    unsigned long long as = ad ? strtoull(ad + 1, NULL, 10) : 0, bs = bd ? strtoull(bd + 1, NULL, 10) : 0;
    if (am != bm) return am < bm ? -1 : 1;
    return as < bs ? -1 : as > bs;
}

#define MP_ITEMS 41 /* id and 20 field/value pairs: a page shows at most these */

/* One listed job. */
typedef struct listed {
    const jr_entry_t *e; /* its stream fields (NULL: none) */
    const char *id;      /* job id */
    size_t id_len;
    const char *where;   /* entry id, or the due score */
    const jr_pending_t *p;
} listed_t;

static int print_page(FILE *out, const char *state, const char *queue, const listed_t *v, size_t n,
                      const char *next, int json) {
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
            const listed_t *l = &v[i];
            char t[JR_TIME_LEN];
            if (!strcmp(state, "delayed")) score_time(l->where, t);
            else jr_time_format(strtoll(l->where, NULL, 10), t);
            json_t *o = json_pack("{s:o,s:s,s:s,s:o,s:o,s:o}", "job", jr_json_bytes(l->id, l->id_len),
                                  !strcmp(state, "delayed") ? "due_ms" : "entry", l->where,
                                  !strcmp(state, "delayed") ? "due" : !strcmp(state, "dead") ? "dead_at" : "enqueued",
                                  t, "handler", field_json(l->e, "h"), "attempt", field_json(l->e, "a"),
                                  "fields", fields_json(l->e));
            if (o && l->p) {
                json_object_set_new(o, "consumer", jr_json_bytes(l->p->consumer, strlen(l->p->consumer)));
                json_object_set_new(o, "idle_ms", json_integer(l->p->idle_ms));
                json_object_set_new(o, "deliveries", json_integer(l->p->deliveries));
            }
            if (o && !strcmp(state, "dead")) {
                json_object_set_new(o, "why", field_json(l->e, "why"));
                json_object_set_new(o, "error", field_json(l->e, "err"));
            }
            if (!o || json_array_append_new(arr, o)) {
                json_decref(arr);
                arr = NULL;
            }
        }
        json_t *doc = arr ? json_pack("{s:s,s:s,s:o,s:s?}", "queue", queue, "state", state, "jobs", arr, "next", next)
                          : NULL;
        return json_out(out, doc);
    }
    const jr_entry_t none = {0}; /* an entry gone between two reads */
    fprintf(out, "%-32s %-24s %-16s %-7s %s\n", "JOB", !strcmp(state, "delayed") ? "DUE" : !strcmp(state, "dead") ? "DEAD AT" : "ENQUEUED",
            "HANDLER", "ATTEMPT", !strcmp(state, "running") ? "CONSUMER" : !strcmp(state, "dead") ? "WHY" : "");
    for (size_t i = 0; i < n; i++) {
        const listed_t *l = &v[i];
        char t[JR_TIME_LEN];
        if (!strcmp(state, "delayed")) score_time(l->where, t);
        else jr_time_format(strtoll(l->where, NULL, 10), t);
        print_bytes(out, l->id, l->id_len);
        fprintf(out, "%*s %-24s ", l->id_len < 32 ? (int)(32 - l->id_len) : 0, "", t);
        print_field(out, l->e ? l->e : &none, "h", "?");
        fputs(" ", out);
        print_field(out, l->e ? l->e : &none, "a", "1");
        fputs(" ", out);
        if (l->p) fprintf(out, "%s (idle %.1fs, delivered %lld)", esc(l->p->consumer), (double)l->p->idle_ms / 1000.0,
                          l->p->deliveries);
        if (!strcmp(state, "dead")) print_field(out, l->e ? l->e : &none, "why", "?");
        fputs("\n", out);
    }
    if (next) fprintf(out, "next page: --after %s\n", esc(next));
    else fprintf(out, "(end)\n");
    return 0;
}

int jr_cmd_jobs(const jr_config_t *cfg, const char *queue, const char *state, int64_t limit, const char *after,
                int json, FILE *out) {
    int delayed = !strcmp(state, "delayed"), ready = !strcmp(state, "ready"), running = !strcmp(state, "running"),
        dead = !strcmp(state, "dead");
    if (!delayed && !ready && !running && !dead) {
        fprintf(stderr, "jobrunner jobs: --state must be delayed, ready, running or dead, not \"%s\"\n", state);
        return 2;
    }
    char start[JR_ID_MAX + 2] = "-";
    long long skip = 0;
    if (after) { /* delayed: a cursor of jr_delayed_page; the others: the last entry id shown */
        char *end;
        if (delayed) {
            /* "<score>/<skip>" (the sorted set) or "w<bucket start>/<position>" (the time wheel) */
            const char *p = after[0] == 'w' ? after + 1 : after;
            double sc = strtod(p, &end);
            if (end == p || *end != '/' || sc < 0 || sscanf(end + 1, "%lld", &skip) != 1 || skip < 0 ||
                strlen(after) >= 64) {
                fprintf(stderr, "jobrunner jobs: invalid --after \"%s\" for delayed jobs (a cursor printed by a page)\n", after);
                return 2;
            }
        } else {
            unsigned long long ms = strtoull(after, &end, 10);
            (void)ms;
            if (end == after || *end != '-' || strlen(after) >= JR_ID_MAX) {
                fprintf(stderr, "jobrunner jobs: invalid --after \"%s\" (a stream entry id printed by a page)\n", after);
                return 2;
            }
            snprintf(start, sizeof start, "(%s", after);
        }
    }
    jr_redis_t *r = admin_connect(cfg, 0);
    if (!r) return 1;
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    jr_batch_t b = {0};
    jr_batch_t *each = NULL;
    jr_pending_t *pend = NULL;
    size_t npend = 0, n = 0;
    listed_t *v = NULL;
    char next[128], *nextp = NULL;
    int rc = 0, status = 0;
    const char **mv = NULL;
    size_t *ml = NULL;
    char dnext[128] = "";
    if (delayed) {
        rc = jr_redis_delayed_page(r, queue, after, limit, &b, dnext, sizeof dnext);
    } else if (ready) {
        char last[JR_ID_MAX];
        rc = jr_redis_group_last_id(r, queue, last);
        if (!rc && (!after || id_cmp(after, last) < 0) && strcmp(last, "0-0")) snprintf(start, sizeof start, "(%s", last);
        if (!rc) rc = jr_redis_xrange_between(r, k.ready, start, "+", limit, &b);
    } else if (running) {
        rc = jr_redis_pending_page(r, queue, start, limit, &pend, &npend);
        if (!rc && npend && !(each = calloc(npend, sizeof *each))) rc = JR_ENOMEM;
        for (size_t i = 0; !rc && i < npend; i++)
            rc = jr_redis_xrange_between(r, k.ready, pend[i].entry, pend[i].entry, 1, &each[i]);
    } else {
        rc = jr_redis_xrange_between(r, k.dead, start, "+", limit, &b);
    }
    if (rc) {
        fprintf(stderr, "jobrunner jobs: %s\n", rc == JR_ENOMEM ? "out of memory" : esc(jr_redis_errstr(r)));
        status = 1;
        goto out;
    }
    size_t total = running ? npend : b.n;
    v = calloc(total ? total : 1, sizeof *v);
    mv = calloc(total ? total * MP_ITEMS : 1, sizeof *mv);
    ml = calloc(total ? total * MP_ITEMS : 1, sizeof *ml);
    if (!v || !mv || !ml) {
        fprintf(stderr, "jobrunner jobs: out of memory\n");
        status = 1;
        goto out;
    }
    /* delayed members decode into fake entries backed by mv/ml */
    jr_entry_t *fake = delayed ? calloc(total ? total : 1, sizeof *fake) : NULL;
    if (delayed && !fake) {
        status = 1;
        goto out;
    }
    for (size_t i = 0; i < total; i++) {
        listed_t *l = &v[n];
        if (delayed) {
            const jr_entry_t *e = &b.v[i];
            const char **iv = mv + MP_ITEMS * i;
            size_t *il = ml + MP_ITEMS * i;
            int m = e->nfields ? jr_msgpack_strings(e->values[0], e->value_lens[0], iv, il, MP_ITEMS) : -1;
            l->where = e->id;
            if (m < 1 || m % 2 == 0) { /* garbage, or more fields than a page shows: job show has it all */
                l->id = m < 0 ? "(not an envelope, or over 20 fields)" : "(not an envelope)";
                l->id_len = strlen(l->id);
            } else {
                /* id, name, value, ... -> the names then the values, as in a stream entry */
                size_t half = (size_t)(m - 1) / 2;
                const char *tv[MP_ITEMS];
                size_t tl[MP_ITEMS];
                memcpy(tv, iv, (size_t)m * sizeof *tv);
                memcpy(tl, il, (size_t)m * sizeof *tl);
                for (size_t f = 0; f < half; f++) {
                    iv[1 + f] = tv[1 + 2 * f], il[1 + f] = tl[1 + 2 * f];
                    iv[1 + half + f] = tv[2 + 2 * f], il[1 + half + f] = tl[2 + 2 * f];
                }
                jr_entry_t *fe = &fake[i];
                fe->id = e->id, fe->nfields = half;
                fe->names = iv + 1, fe->name_lens = il + 1, fe->values = iv + 1 + half, fe->value_lens = il + 1 + half;
                l->id = iv[0], l->id_len = il[0];
                l->e = fe;
            }
        } else if (running) {
            l->p = &pend[i];
            l->where = pend[i].entry;
            l->e = each[i].n ? &each[i].v[0] : NULL;
        } else {
            l->e = &b.v[i];
            l->where = b.v[i].id;
        }
        if (!delayed) {
            size_t len;
            const char *id = l->e ? field(l->e, "id", &len) : NULL;
            l->id = id ? id : l->where, l->id_len = id ? len : strlen(l->where);
        }
        n++;
    }
    if (delayed) { /* the cursor jr_delayed_page returned */
        if (dnext[0]) snprintf(next, sizeof next, "%s", dnext), nextp = next;
    } else if ((int64_t)n == limit && n > 0) {
        snprintf(next, sizeof next, "%s", v[n - 1].where);
        nextp = next;
    }
    status = print_page(out, state, queue, v, n, nextp, json) ? 1 : 0;
    free(fake);
out:
    free(v), free(mv), free(ml);
    for (size_t i = 0; each && i < npend; i++) jr_batch_free(&each[i]);
    free(each), free(pend);
    jr_batch_free(&b);
    jr_redis_free(r);
    return out_done(out, status);
}

int jr_cmd_pause(const jr_config_t *cfg, const char *queue, int on, FILE *out) {
    jr_client_t *c = admin_client(cfg, 0);
    if (!c) return 1;
    int changed = 0, woken = 0;
    if (jr_client_set_paused(c, queue, on, &changed, &woken)) {
        fprintf(stderr, "jobrunner: %s %s: %s\n", on ? "pause" : "resume", esc(queue), esc(jr_client_errstr(c)));
        jr_client_free(c);
        return 1;
    }
    /* The library woke the blocked workers; one that was not blocked reads
     * the paused set with its next fetch anyway. */
    if (woken < 0)
        fprintf(stderr, "jobrunner: note: could not wake the workers (%s); they see the change within a "
                        "block period (worker.block)\n", esc(jr_client_errstr(c)));
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
    return out_done(out, 0);
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
        fprintf(stderr, "jobrunner cron add: %s\n", jr_redis_errstr(r)[0] ? esc(jr_redis_errstr(r)) : jr_strerror(rc));
    } else {
        int64_t next = jr_cron_def_next(d, (int64_t)now);
        char t[JR_TIME_LEN];
        fprintf(out, "%s %s, next firing %s\n", d->name, !existed ? "added" : changed ? "updated" : "unchanged",
                next < 0 ? "never" : jr_time_format(next, t));
    }
    free(def);
    jr_redis_free(r);
    return out_done(out, rc ? 1 : 0);
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
    if (rc) fprintf(stderr, "jobrunner cron remove: %s\n", jr_redis_errstr(r)[0] ? esc(jr_redis_errstr(r)) : jr_strerror(rc));
    jr_redis_free(r);
    return out_done(out, rc || missing ? 1 : 0);
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
    json_object_set_new(o, "last_job_id", last < 0 ? json_null() : str_json(job));
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
        fprintf(stderr, "jobrunner cron list: %s\n", jr_redis_errstr(r)[0] ? esc(jr_redis_errstr(r)) : jr_strerror(rc));
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
            print_cell(out, v[i].name, 20);
            fprintf(out, " (unreadable definition: %s)\n", esc(why));
        } else {
            char sched[128], t[JR_TIME_LEN], loc[JR_CRON_LOCAL_LEN], lt[JR_TIME_LEN], dur[JR_DURATION_LEN];
            if (d.cron) snprintf(sched, sizeof sched, "%s", d.cron);
            else snprintf(sched, sizeof sched, "every %s", jr_duration_format(d.every_ms, dur, sizeof dur));
            int64_t next = d.enabled ? jr_cron_def_next(&d, now) : -1;
            const char *job;
            int64_t last = jr_cron_last_parse(v[i].last, &job);
            const char *cells[] = {d.name, sched, d.tz, d.queue, d.handler, next < 0 ? "-" : jr_time_format(next, t),
                                   next < 0 ? "-" : jr_cron_local_format(next, d.tz, loc),
                                   last < 0 ? "-" : jr_time_format(last, lt), last < 0 ? "-" : job};
            static const int widths[] = {20, 20, 16, 10, 16, 24, 25, 24, 30};
            for (size_t k = 0; k < sizeof cells / sizeof *cells; k++) print_cell(out, cells[k], widths[k]), fputc(' ', out);
            fprintf(out, "%s\n", d.enabled ? "yes" : "no");
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
    return out_done(out, rc ? 1 : 0);
}
