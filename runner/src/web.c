/* `jobrunner web`: see web.h. */
#include "web.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bulk.h"
#include "cli.h"
#include "client_internal.h"
#include "contract.h"
#include "cron.h"
#include "jr.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "partition.h"
#include "proc.h"
#include "redis_admin.h"
#include "redis_finished.h"
#include "redis_partition.h"
#include "redis_produce.h"
#include "redis_sched.h"
#include "util.h"

/* The files of runner/web/, embedded by runner/cmake/embed.cmake. */
typedef struct jr_web_asset {
    const char *path, *type;
    const unsigned char *data;
    size_t len;
} jr_web_asset_t;
extern const jr_web_asset_t jr_web_assets[];
extern const size_t jr_web_nassets;

/* Limits of what a client can make the server hold or do. */
#define WEB_BODY_MAX (1 << 20)  /* bytes of a POST body */
#define WEB_PAGE_MAX 500        /* jobs of one page */
#define WEB_PAGE_DEFAULT 50
#define WEB_SELECT_MAX 1000     /* ids of one bulk action's selection */
#define WEB_CONN_MAX 64
#define WEB_PER_IP 16
#define WEB_IDLE_S 10           /* MHD's idle timeout per connection */

static const char CSP[] = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                          "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

static struct {
    const jr_config_t *cfg;
    jr_client_t *c;        /* NULL until connected; remade after a broken connection */
    char token[65];        /* the CSRF token: 32 random bytes in hex */
    int port;
    int loopback;          /* listening on a loopback address only */
    char err[JR_ERRLEN];   /* why the last connect failed */
} W;

/* ---- pure helpers ----------------------------------------------------------- */

int jr_web_secret_equal(const char *a, size_t al, const char *b, size_t bl) {
    unsigned char d = al != bl;
    for (size_t i = 0; i < bl; i++) d |= (unsigned char)((i < al ? a[i] : 0) ^ b[i]);
    return d == 0;
}

int jr_web_host_is_loopback(const char *host) {
    struct in_addr a4;
    /* a numeric address only: a name that merely starts with "127." (a
     * domain an attacker's DNS points at us: DNS rebinding) is not one */
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    return !strcmp(host, "localhost") || !strcmp(host, "::1") || !strcmp(host, "[::1]");
}

long jr_web_base64_decode(const char *s, size_t n, unsigned char *out, size_t outlen) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (n % 4) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char ch = s[i + k];
            const char *p = ch ? strchr(A, ch) : NULL;
            if (ch == '=' && i + 4 == n && k >= 2) pad++, v <<= 6;
            else if (p && !pad) v = v << 6 | (unsigned)(p - A);
            else return -1;
        }
        for (int k = 0; k < 3 - pad; k++) {
            if (o == outlen) return -1;
            out[o++] = (unsigned char)(v >> (16 - 8 * k));
        }
    }
    return (long)o;
}

char *jr_web_info_field(const char *info, const char *field, char *buf, size_t len) {
    size_t fl = strlen(field);
    buf[0] = '\0';
    for (const char *p = info; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, field, fl) && p[fl] == ':') {
            size_t vl = strcspn(p + fl + 1, "\r\n");
            snprintf(buf, len, "%.*s", (int)vl, p + fl + 1);
            break;
        }
    return buf;
}

/* ---- answers ---------------------------------------------------------------- */

/* Queue an answer with the headers every answer has. Takes body (malloc'd). */
static enum MHD_Result answer(struct MHD_Connection *con, unsigned status, char *body, size_t len, const char *type) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, "Content-Security-Policy", CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Basic realm=\"jobrunner\", charset=\"UTF-8\"");
    enum MHD_Result ok = MHD_queue_response(con, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* doc as compact JSON with <, > and & written \u003c, \u003e, \u0026 (in
 * a dump they only occur inside strings, where the escape means the same
 * character), so no text from Redis reads as markup even to a browser
 * that sniffs; released. NULL when out of memory. */
static char *json_text(json_t *doc, size_t *len) {
    char *raw = NULL, *out = NULL;
    size_t rawlen = 0;
    FILE *m = open_memstream(&raw, &rawlen);
    if (!m) {
        json_decref(doc);
        return NULL;
    }
    int bad = jr_json_print(m, doc); /* releases doc */
    if (fclose(m) || bad || !raw) {
        free(raw);
        return NULL;
    }
    size_t extra = 0;
    for (size_t i = 0; i < rawlen; i++) extra += raw[i] == '<' || raw[i] == '>' || raw[i] == '&';
    if ((out = malloc(rawlen + extra * 5 + 1))) {
        size_t o = 0;
        for (size_t i = 0; i < rawlen; i++) {
            const char *esc = raw[i] == '<' ? "\\u003c" : raw[i] == '>' ? "\\u003e" : raw[i] == '&' ? "\\u0026" : NULL;
            if (esc) memcpy(out + o, esc, 6), o += 6;
            else out[o++] = raw[i];
        }
        out[o] = '\0';
        *len = o;
    }
    free(raw);
    return out;
}

static enum MHD_Result answer_json(struct MHD_Connection *con, unsigned status, json_t *doc) {
    size_t len = 0;
    char *text = doc ? json_text(doc, &len) : NULL;
    if (!text) return answer(con, MHD_HTTP_INTERNAL_SERVER_ERROR, strdup("{\"error\":\"out of memory\"}\n"), 26,
                             "application/json");
    return answer(con, status, text, len, "application/json; charset=utf-8");
}

/* {"error": why} with status. */
static enum MHD_Result answer_error(struct MHD_Connection *con, unsigned status, const char *why) {
    return answer_json(con, status, json_pack("{s:o}", "error", jr_json_bytes(why, strlen(why))));
}

/* ---- the Redis connection --------------------------------------------------- */

/* The client, connected (jr_cli_client: redis.wait, the library loaded),
 * or NULL with the reason in W.err. A broken connection is dropped here and
 * made again at the next request. */
static jr_client_t *client(void) {
    if (W.c && (!jr_client_redis(W.c) || !jr_redis_ok(jr_client_redis(W.c)))) {
        jr_client_free(W.c);
        W.c = NULL;
    }
    if (!W.c && !(W.c = jr_cli_client(W.cfg, 1)))
        snprintf(W.err, sizeof W.err, "cannot reach Redis (the server's log says why)");
    return W.c;
}

/* The reason of the last failed call of the client or its connection. */
static const char *why_failed(void) {
    jr_redis_t *r = W.c ? jr_client_redis(W.c) : NULL;
    if (r && jr_redis_errstr(r)[0]) return jr_redis_errstr(r);
    return W.c ? jr_client_errstr(W.c) : W.err;
}

/* ---- small JSON pieces ---------------------------------------------------- */

/* n bytes as {"text": s} when valid UTF-8, else {"hex": "..."}: the page
 * shows either as text (escaped by the DOM). */
static json_t *bytes_view(const char *s, size_t n) {
    json_t *t = json_stringn(s, n);
    if (t) return json_pack("{s:o}", "text", t);
    char *hex = malloc(n * 2 + 1);
    if (!hex) return NULL;
    for (size_t i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", (unsigned char)s[i]);
    hex[2 * n] = '\0';
    json_t *o = json_pack("{s:s}", "hex", hex);
    free(hex);
    return o;
}

static json_t *count_json(long long v) { return v < 0 ? json_null() : json_integer(v); }

/* The value of field `name` of entry e, or NULL. */
static const char *field(const jr_entry_t *e, const char *name, size_t *len) {
    return e ? jr_cli_field(e, name, len) : NULL;
}

static json_t *field_json(const jr_entry_t *e, const char *name) {
    size_t len;
    const char *v = field(e, name, &len);
    return v ? jr_json_bytes(v, len) : json_null();
}

/* A query argument, or NULL. */
static const char *arg(struct MHD_Connection *con, const char *name) {
    return MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, name);
}

/* A queue name argument checked by the contract's rule: the name, or NULL
 * with why. */
static const char *queue_arg(const char *q, const char **why) {
    if (!q) {
        *why = "name the queue (queue=...)";
        return NULL;
    }
    if ((*why = jr_contract_queue_name(q, strlen(q)))) return NULL;
    return q;
}

/* ---- GET /api/session, /api/overview ------------------------------------ */

static enum MHD_Result get_session(struct MHD_Connection *con) {
    return answer_json(con, MHD_HTTP_OK,
                       json_pack("{s:s,s:b,s:s,s:b}", "csrf", W.token, "read_only", W.cfg->web_read_only, "version",
                                 JR_VERSION, "history", 1));
}

/* The registered queues, one name per queue (a partition Q#J stands for Q),
 * in order of first appearance. */
static int queue_names(jr_redis_t *r, jr_strlist_t *out) {
    jr_strlist_t all = {0};
    char wake[JR_ID_MAX];
    int rc = jr_redis_queues(r, &all, wake);
    for (size_t i = 0; !rc && i < all.n; i++) {
        char q[JR_INTERNAL_QUEUE_MAX + 1];
        size_t qlen;
        uint32_t j;
        snprintf(q, sizeof q, "%s", all.v[i]);
        if (jr_partition_split(q, strlen(q), &qlen, &j) && !jr_contract_queue_name(q, qlen)) q[qlen] = '\0';
        int seen = 0;
        for (size_t k = 0; k < out->n && !seen; k++) seen = !strcmp(out->v[k], q);
        if (!seen && jr_strlist_push(out, q)) rc = JR_ENOMEM;
    }
    jr_strlist_free(&all);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Redis's version, role and memory (INFO server, replication, memory). */
static json_t *redis_json(jr_redis_t *r) {
    char *srv = NULL, *rep = NULL, *mem = NULL, v[64], role[32], used[32], human[32], max[32];
    int rc = jr_redis_server_info(r, "server", &srv);
    if (!rc) rc = jr_redis_server_info(r, "replication", &rep);
    if (!rc) rc = jr_redis_server_info(r, "memory", &mem);
    json_t *o = rc ? json_pack("{s:o}", "error", jr_json_bytes(jr_redis_errstr(r), strlen(jr_redis_errstr(r))))
                   : json_pack("{s:s,s:s,s:I,s:s,s:I}", "version", jr_web_info_field(srv, "redis_version", v, sizeof v),
                               "role", jr_web_info_field(rep, "role", role, sizeof role), "used_memory",
                               (json_int_t)strtoll(jr_web_info_field(mem, "used_memory", used, sizeof used), NULL, 10),
                               "used_memory_human", jr_web_info_field(mem, "used_memory_human", human, sizeof human),
                               "maxmemory",
                               (json_int_t)strtoll(jr_web_info_field(mem, "maxmemory", max, sizeof max), NULL, 10));
    free(srv), free(rep), free(mem);
    return o;
}

/* Every queue's counts (jr_client_stats: O(1) reads per queue, no scan),
 * Redis, and the live processes. */
static enum MHD_Result get_overview(struct MHD_Connection *con) {
    jr_client_t *c = client();
    if (!c) return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    jr_redis_t *r = jr_client_redis(c);
    jr_strlist_t names = {0};
    int rc = queue_names(r, &names);
    if (!rc && names.n) qsort(names.v, names.n, sizeof *names.v, cmp_str);
    json_t *qs = json_array();
    for (size_t i = 0; !rc && qs && i < names.n; i++) {
        jr_client_stats_t s;
        if ((rc = jr_client_stats(c, names.v[i], &s))) break;
        json_t *q = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "queue", jr_json_bytes(names.v[i], strlen(names.v[i])),
                              "ready", count_json(s.ready), "running", count_json(s.pending), "delayed",
                              count_json(s.delayed), "dead", count_json(s.dead), "paused",
                              s.paused < 0 ? json_null() : json_boolean(s.paused), "processed", count_json(s.processed),
                              "failed", count_json(s.failed), "jobs_per_second",
                              s.jobs_per_second >= 0 ? json_real(s.jobs_per_second) : json_null(), "oldest_ready_ms",
                              s.oldest_ready_ms >= 0 ? json_integer(s.oldest_ready_ms) : json_null());
        if (q && s.paused > 0) json_object_set_new(q, "paused_since", json_integer(s.paused_since_ms));
        json_array_append_new(qs, q);
    }
    jr_strlist_free(&names);
    jr_proc_t *procs = NULL;
    size_t np = 0;
    if (!rc) rc = jr_redis_proc_list(r, &procs, &np);
    long long workers = 0, busy = 0, capacity = 0, schedulers = 0;
    for (size_t i = 0; !rc && i < np; i++) {
        if (strcmp(procs[i].role, "worker")) {
            schedulers++;
            continue;
        }
        workers++, busy += procs[i].running, capacity += procs[i].capacity;
    }
    jr_procs_free(procs, np);
    if (rc) {
        json_decref(qs);
        return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
    }
    json_t *redis = redis_json(r);
    return answer_json(con, MHD_HTTP_OK,
                       json_pack("{s:o,s:o,s:{s:I,s:I,s:I,s:I},s:I}", "queues", qs, "redis", redis, "workers", "live",
                                 (json_int_t)workers, "busy", (json_int_t)busy, "capacity", (json_int_t)capacity,
                                 "schedulers", (json_int_t)schedulers, "now_ms", (json_int_t)jr_wall_ms()));
}

/* ---- GET /api/history: processed and failed per minute -------------------- */

/* Add queue q's last `minutes` minutes (jr_redis_history; a partitioned
 * queue: each partition and q itself) into processed/failed, *start the
 * first minute. */
static int add_history(jr_redis_t *r, const char *q, int64_t minutes, int64_t *start, long long *processed,
                       long long *failed, long long *p1, long long *f1) {
    jr_partmap_t parts = {0};
    jr_qpart_t *qp;
    int rc = jr_partmap_get(&parts, r, q, &qp);
    unsigned n = rc ? 0 : qp->n;
    for (unsigned i = 0; !rc && i < n + (n > 1); i++) {
        rc = jr_redis_history(r, i < n ? jr_qpart_name(qp, i) : q, minutes, start, p1, f1);
        for (int64_t m = 0; !rc && m < minutes; m++) processed[m] += p1[m], failed[m] += f1[m];
    }
    jr_partmap_free(&parts);
    return rc;
}

/* GET /api/history[?queue=Q][&minutes=N]: the per-minute history the
 * workers keep in Redis (24 h, jr:{Q}:history), of one queue or summed over
 * every queue: {"start_minute", "processed": [...], "failed": [...]},
 * oldest first, the last the current minute (Unix seconds / 60). One HMGET
 * of N slots per queue: the page asks once a minute. */
static enum MHD_Result get_history(struct MHD_Connection *con) {
    const char *why = NULL, *qa = arg(con, "queue"), *ms = arg(con, "minutes");
    const char *q = qa ? queue_arg(qa, &why) : NULL;
    if (qa && !q) return answer_error(con, MHD_HTTP_BAD_REQUEST, why);
    int64_t minutes = JR_HISTORY_MINUTES;
    if (ms && jr_cli_parse_count(ms, 1, JR_HISTORY_MINUTES, &minutes))
        return answer_error(con, MHD_HTTP_BAD_REQUEST, "minutes must be an integer from 1 to 1440");
    jr_client_t *c = client();
    if (!c) return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    jr_redis_t *r = jr_client_redis(c);
    long long *v = calloc((size_t)minutes * 4, sizeof *v);
    if (!v) return answer_error(con, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    long long *processed = v, *failed = v + minutes, *p1 = v + 2 * minutes, *f1 = v + 3 * minutes;
    int64_t start = 0;
    jr_strlist_t names = {0};
    int rc = q ? jr_strlist_push(&names, q) : queue_names(r, &names);
    for (size_t i = 0; !rc && i < names.n; i++) rc = add_history(r, names.v[i], minutes, &start, processed, failed, p1, f1);
    jr_strlist_free(&names);
    if (rc) {
        free(v);
        return answer_error(con, MHD_HTTP_BAD_GATEWAY, rc == JR_ENOMEM ? "out of memory" : why_failed());
    }
    if (!start) start = jr_wall_ms() / 60000 - minutes + 1; /* no queue: an empty history ending now */
    json_t *pa = json_array(), *fa = json_array();
    for (int64_t m = 0; pa && fa && m < minutes; m++)
        json_array_append_new(pa, json_integer(processed[m])), json_array_append_new(fa, json_integer(failed[m]));
    free(v);
    return answer_json(con, MHD_HTTP_OK,
                       json_pack("{s:o,s:I,s:o,s:o}", "queue", q ? jr_json_bytes(q, strlen(q)) : json_null(),
                                 "start_minute", (json_int_t)start, "processed", pa, "failed", fa));
}

/* ---- GET /api/workers, /api/schedules -------------------------------------- */

static enum MHD_Result get_workers(struct MHD_Connection *con) {
    jr_client_t *c = client();
    if (!c) return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    jr_proc_t *v = NULL;
    size_t n = 0;
    if (jr_redis_proc_list(jr_client_redis(c), &v, &n)) return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
    json_t *list = json_array();
    int64_t now = jr_wall_ms();
    for (size_t i = 0; list && i < n; i++) {
        json_t *queues = json_array();
        for (const char *q = v[i].queues; queues && *q;) {
            size_t len = strcspn(q, ",");
            json_array_append_new(queues, jr_json_bytes(q, len));
            q += len + (q[len] == ',');
        }
        json_t *o = json_pack("{s:o,s:o,s:o,s:I,s:o,s:o,s:I,s:I,s:I,s:o,s:I}", "name", jr_json_bytes(v[i].name, strlen(v[i].name)),
                              "role", jr_json_bytes(v[i].role, strlen(v[i].role)), "host",
                              jr_json_bytes(v[i].host, strlen(v[i].host)), "pid", (json_int_t)v[i].pid, "queues", queues,
                              "version", jr_json_bytes(v[i].version, strlen(v[i].version)), "started_ms",
                              (json_int_t)v[i].started_ms, "uptime_ms", (json_int_t)(now - v[i].started_ms), "running",
                              (json_int_t)v[i].running, "capacity",
                              v[i].capacity > 0 ? json_integer(v[i].capacity) : json_null(), "last_seen_ms",
                              (json_int_t)v[i].seen_ago_ms);
        json_array_append_new(list, o);
    }
    jr_procs_free(v, n);
    return answer_json(con, MHD_HTTP_OK, json_pack("{s:o}", "workers", list));
}

static enum MHD_Result get_schedules(struct MHD_Connection *con) {
    jr_client_t *c = client();
    if (!c) return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    jr_redis_t *r = jr_client_redis(c);
    jr_cron_entry_t *v = NULL;
    size_t n = 0;
    char wake[JR_ID_MAX];
    double nowf = 0;
    int rc = jr_redis_cron_list(r, &v, &n, wake);
    if (!rc) rc = jr_redis_time_ms(r, &nowf);
    if (rc) {
        jr_cron_entries_free(v, n);
        return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        jr_cron_def_t d;
        char why[JR_ERRLEN], t[JR_TIME_LEN], lt[JR_TIME_LEN], loc[JR_CRON_LOCAL_LEN], dur[JR_DURATION_LEN];
        json_t *o = json_pack("{s:o}", "name", jr_json_bytes(v[i].name, strlen(v[i].name)));
        if (jr_cron_def_decode(v[i].name, v[i].def, &d, why, sizeof why)) {
            json_object_set_new(o, "error", jr_json_bytes(why, strlen(why)));
            json_array_append_new(arr, o);
            continue;
        }
        int64_t next = d.enabled ? jr_cron_def_next(&d, (int64_t)nowf) : -1;
        const char *job;
        int64_t last = jr_cron_last_parse(v[i].last, &job);
        json_object_set_new(o, "schedule", d.cron ? jr_json_bytes(d.cron, strlen(d.cron))
                                                  : json_sprintf("every %s", jr_duration_format(d.every_ms, dur, sizeof dur)));
        json_object_set_new(o, "timezone", jr_json_bytes(d.tz, strlen(d.tz)));
        json_object_set_new(o, "queue", jr_json_bytes(d.queue, strlen(d.queue)));
        json_object_set_new(o, "handler", jr_json_bytes(d.handler, strlen(d.handler)));
        json_object_set_new(o, "enabled", json_boolean(d.enabled));
        json_object_set_new(o, "next_utc", next < 0 ? json_null() : json_string(jr_time_format(next, t)));
        json_object_set_new(o, "next_local", next < 0 ? json_null() : jr_json_bytes(jr_cron_local_format(next, d.tz, loc),
                                                                                    strlen(loc)));
        json_object_set_new(o, "last_fired_utc", last < 0 ? json_null() : json_string(jr_time_format(last, lt)));
        json_object_set_new(o, "last_job_id", last < 0 ? json_null() : jr_json_bytes(job, strlen(job)));
        json_array_append_new(arr, o);
        jr_cron_def_free(&d);
    }
    jr_cron_entries_free(v, n);
    return answer_json(con, MHD_HTTP_OK, json_pack("{s:o,s:b}", "schedules", arr, "actions", !W.cfg->web_read_only));
}

/* ---- GET /api/jobs: one page of a queue ------------------------------------ */

#define MP_ITEMS 41 /* a delayed member's id and up to 20 field/value pairs */

/* One row of a page: its job id, where it is (entry id or due score) and
 * its fields (e: NULL when gone between two reads). */
static json_t *row_json(const char *id, size_t idlen, const char *entry, const char *due, const jr_entry_t *e,
                        const jr_pending_t *p) {
    json_t *o = json_pack("{s:o}", "job", jr_json_bytes(id, idlen));
    if (!o) return NULL;
    if (entry) {
        json_object_set_new(o, "entry", json_string(entry));
        json_object_set_new(o, "at_ms", json_integer(strtoll(entry, NULL, 10)));
    }
    if (due) json_object_set_new(o, "due_ms", json_real(strtod(due, NULL)));
    json_object_set_new(o, "handler", field_json(e, JR_F_HANDLER));
    json_object_set_new(o, "attempt", field_json(e, JR_F_ATTEMPT));
    size_t plen;
    const char *pl = field(e, JR_F_PAYLOAD, &plen);
    json_object_set_new(o, "payload", pl ? bytes_view(pl, plen) : json_null());
    json_object_set_new(o, "error", field_json(e, JR_F_ERROR));
    json_object_set_new(o, "why", field_json(e, JR_F_WHY));
    if (p) {
        json_object_set_new(o, "consumer", jr_json_bytes(p->consumer, strlen(p->consumer)));
        json_object_set_new(o, "idle_ms", json_integer(p->idle_ms));
        json_object_set_new(o, "deliveries", json_integer(p->deliveries));
    }
    return o;
}

/* A finished record (an entry of jr:{Q}:finished, redis_finished.h) as a
 * row: job, entry, at_ms (finished at), handler, attempt, outcome,
 * duration_ms, worker, error, result. */
static json_t *finished_json(const jr_entry_t *e) {
    size_t len, rl, el;
    const char *id = field(e, JR_FIN_ID, &len), *res = field(e, JR_FIN_RESULT, &rl), *err = field(e, JR_FIN_ERROR, &el);
    const char *at = field(e, JR_FIN_AT, NULL);
    json_t *o = json_pack("{s:o,s:s,s:o}", "job", id ? jr_json_bytes(id, len) : json_string(e->id), "entry", e->id,
                          "at_ms", at ? json_integer(strtoll(at, NULL, 10)) : json_null());
    if (!o) return NULL;
    json_object_set_new(o, "handler", field_json(e, JR_FIN_HANDLER));
    json_object_set_new(o, "attempt", field_json(e, JR_FIN_ATTEMPT));
    json_object_set_new(o, "outcome", field_json(e, JR_FIN_OUTCOME));
    json_object_set_new(o, "duration_ms", field_json(e, JR_FIN_DURATION));
    json_object_set_new(o, "worker", field_json(e, JR_FIN_WORKER));
    json_object_set_new(o, "error", err ? bytes_view(err, el) : json_null());
    json_object_set_new(o, "result", res ? bytes_view(res, rl) : json_null());
    return o;
}

/* A page of up to limit jobs of queue q in `state`, oldest first, after
 * the cursor `after` (as `jobrunner jobs` pages: the same library calls;
 * "retrying" is the delayed page's jobs past their first attempt, so a
 * page of it may hold fewer than limit; "finished", the records kept with
 * keep_finished, newest first). next = the cursor of the next
 * page or null. Of a partitioned queue, the page of partition `part`
 * (default 0; its generated ids as stored, without "~<part>"). */
static enum MHD_Result get_jobs(struct MHD_Connection *con) {
    const char *why, *q = queue_arg(arg(con, "queue"), &why), *state = arg(con, "state"), *after = arg(con, "after"),
                     *ls = arg(con, "limit");
    if (!q) return answer_error(con, MHD_HTTP_BAD_REQUEST, why);
    if (!state) state = "ready";
    int delayed = !strcmp(state, "delayed"), retrying = !strcmp(state, "retrying"), ready = !strcmp(state, "ready"),
        running = !strcmp(state, "running"), dead = !strcmp(state, "dead"), finished = !strcmp(state, "finished");
    if (!delayed && !retrying && !ready && !running && !dead && !finished)
        return answer_error(con, MHD_HTTP_BAD_REQUEST, "state must be ready, running, delayed, retrying, dead or finished");
    int64_t limit = WEB_PAGE_DEFAULT;
    if (ls && jr_cli_parse_count(ls, 1, WEB_PAGE_MAX, &limit))
        return answer_error(con, MHD_HTTP_BAD_REQUEST, "limit must be an integer from 1 to 500");
    if (after && !after[0]) after = NULL;
    char start[JR_ID_MAX + 2] = "-";
    if (after && !delayed && !retrying && !finished) {
        char *end;
        (void)strtoull(after, &end, 10);
        if (end == after || *end != '-' || strlen(after) >= JR_ID_MAX)
            return answer_error(con, MHD_HTTP_BAD_REQUEST, "after must be a stream entry id a page returned");
        snprintf(start, sizeof start, "(%s", after);
    } else if (after && strlen(after) >= 64) {
        return answer_error(con, MHD_HTTP_BAD_REQUEST, "after must be a cursor a page returned");
    }
    jr_client_t *c = client();
    if (!c) return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    jr_redis_t *r = jr_client_redis(c);
    /* a partitioned queue: one partition's page at a time (part=N, default 0) */
    jr_partmap_t parts = {0};
    jr_qpart_t *qp;
    if (jr_partmap_get(&parts, r, q, &qp)) {
        jr_partmap_free(&parts);
        return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
    }
    unsigned nparts = qp->n;
    int64_t part = 0;
    const char *ps = arg(con, "part");
    if (ps && (jr_cli_parse_count(ps, 0, (int64_t)nparts - 1, &part))) {
        jr_partmap_free(&parts);
        return answer_error(con, MHD_HTTP_BAD_REQUEST, "part must be a partition of the queue (0 to its count - 1)");
    }
    char iqbuf[JR_INTERNAL_QUEUE_MAX + 1];
    snprintf(iqbuf, sizeof iqbuf, "%s", jr_qpart_name(qp, (unsigned)part));
    jr_partmap_free(&parts);
    const char *iq = iqbuf;
    jr_qkeys_t k;
    jr_qkeys(&k, iq);
    jr_batch_t b = {0}, *each = NULL;
    jr_pending_t *pend = NULL;
    size_t npend = 0;
    char next[JR_ID_MAX + 64] = "";
    int rc = 0;
    if (delayed || retrying) {
        rc = jr_redis_delayed_page(r, iq, after, limit, &b, next, sizeof next);
    } else if (finished) { /* newest first; kept only with keep_finished */
        rc = jr_redis_finished_page(r, iq, after, limit, &b, next, sizeof next);
    } else if (ready) {
        char last[JR_ID_MAX];
        rc = jr_redis_group_last_id(r, iq, last);
        /* the ready ones follow the group's last delivered entry */
        if (!rc && strcmp(last, "0-0") && (!after || jr_stream_id_cmp(after, last) < 0)) snprintf(start, sizeof start, "(%s", last);
        if (!rc) rc = jr_redis_xrange_between(r, k.ready, start, "+", limit, &b);
    } else if (running) {
        rc = jr_redis_pending_page(r, iq, start, limit, &pend, &npend);
        if (!rc && npend && !(each = calloc(npend, sizeof *each))) rc = JR_ENOMEM;
        for (size_t i = 0; !rc && i < npend; i++)
            rc = jr_redis_xrange_between(r, k.ready, pend[i].entry, pend[i].entry, 1, &each[i]);
    } else {
        rc = jr_redis_xrange_between(r, k.dead, start, "+", limit, &b);
    }
    if (rc) {
        jr_batch_free(&b);
        for (size_t i = 0; each && i < npend; i++) jr_batch_free(&each[i]);
        free(each), free(pend);
        return answer_error(con, MHD_HTTP_BAD_GATEWAY, rc == JR_ENOMEM ? "out of memory" : why_failed());
    }
    json_t *rows = json_array();
    size_t total = running ? npend : b.n;
    const char *last_where = NULL;
    for (size_t i = 0; rows && i < total; i++) {
        json_t *o = NULL;
        if (delayed || retrying) {
            const jr_entry_t *e = &b.v[i];
            const char *iv[MP_ITEMS];
            size_t il[MP_ITEMS];
            int m = e->nfields ? jr_msgpack_strings(e->values[0], e->value_lens[0], iv, il, MP_ITEMS) : -1;
            if (m < 1 || m % 2 == 0) {
                o = row_json("(not an envelope)", 17, NULL, e->id, NULL, NULL);
            } else { /* id, name, value, ...: as the fields of a stream entry */
                size_t half = (size_t)(m - 1) / 2;
                const char *names[MP_ITEMS], *vals[MP_ITEMS];
                size_t nl[MP_ITEMS], vl[MP_ITEMS];
                for (size_t f = 0; f < half; f++)
                    names[f] = iv[1 + 2 * f], nl[f] = il[1 + 2 * f], vals[f] = iv[2 + 2 * f], vl[f] = il[2 + 2 * f];
                jr_entry_t fe = {.id = e->id, .nfields = half, .names = names, .values = vals, .name_lens = nl,
                                 .value_lens = vl};
                size_t alen;
                const char *a = field(&fe, JR_F_ATTEMPT, &alen);
                if (retrying && (!a || strtoll(a, NULL, 10) <= 1)) continue;
                o = row_json(iv[0], il[0], NULL, e->id, &fe, NULL);
            }
        } else if (finished) {
            o = finished_json(&b.v[i]);
        } else if (running) {
            const jr_entry_t *e = each[i].n ? &each[i].v[0] : NULL;
            size_t len;
            const char *id = field(e, JR_F_ID, &len);
            o = row_json(id ? id : pend[i].entry, id ? len : strlen(pend[i].entry), pend[i].entry, NULL, e, &pend[i]);
            last_where = pend[i].entry;
        } else {
            const jr_entry_t *e = &b.v[i];
            size_t len;
            const char *id = field(e, JR_F_ID, &len);
            o = row_json(id ? id : e->id, id ? len : strlen(e->id), e->id, NULL, e, NULL);
            last_where = e->id;
        }
        if (o && nparts > 1) { /* a generated id as users see it: "<id>~<part>" (partition.h) */
            const char *js = json_string_value(json_object_get(o, "job"));
            if (js && jr_contract_id_reserved(js, strlen(js)))
                json_object_set_new(o, "job", json_sprintf("%s~%d", js, (int)part));
        }
        if (o) json_array_append_new(rows, o);
    }
    if (!delayed && !retrying && !finished && (int64_t)total == limit && last_where) snprintf(next, sizeof next, "%.*s", (int)(sizeof next - 1), last_where);
    jr_batch_free(&b);
    for (size_t i = 0; each && i < npend; i++) jr_batch_free(&each[i]);
    free(each), free(pend);
    return answer_json(con, MHD_HTTP_OK,
                       json_pack("{s:o,s:s,s:o,s:o,s:I,s:I,s:I}", "queue", jr_json_bytes(q, strlen(q)), "state", state, "jobs",
                                 rows, "next", next[0] ? json_string(next) : json_null(), "limit", (json_int_t)limit,
                                 "partitions", (json_int_t)nparts, "part", (json_int_t)part));
}

/* ---- GET /api/job: one job by id --------------------------------------------- */

/* 1 if s is a stream entry id "<ms>-<seq>". */
static int is_entry_id(const char *s) {
    char *end;
    if (!s || strlen(s) >= JR_ID_MAX) return 0;
    (void)strtoull(s, &end, 10);
    if (end == s || *end != '-') return 0;
    const char *q = end + 1;
    (void)strtoull(q, &end, 10);
    return end != q && !*end;
}

/* The dead job `id` of queue q at dead entry `entry` (the dead tab links
 * carry it): one XRANGE of that entry instead of jr_locate, which looks
 * through the dead stream for a dead job. NULL when that entry is not
 * the job's (then the caller locates it). */
static json_t *dead_at_entry(jr_redis_t *r, const char *q, const char *id, const char *entry) {
    jr_qkeys_t k;
    jr_batch_t b = {0};
    json_t *o = NULL;
    size_t len, plen, elen;
    if (jr_qkeys(&k, q) || jr_redis_xrange_between(r, k.dead, entry, entry, 1, &b) || b.n != 1) goto out;
    const jr_entry_t *e = &b.v[0];
    const char *jid = field(e, JR_F_ID, &len), *pl = field(e, JR_F_PAYLOAD, &plen), *err = field(e, JR_F_ERROR, &elen);
    if (!jid || len != strlen(id) || memcmp(jid, id, len)) goto out;
    const char *a = field(e, JR_F_ATTEMPT, NULL), *m = field(e, JR_F_MAX, NULL), *t = field(e, JR_F_TIMEOUT, NULL),
               *en = field(e, JR_F_ENQUEUED, NULL);
    o = json_pack("{s:o,s:o,s:s,s:b,s:s,s:n,s:I}", "job", jr_json_bytes(id, strlen(id)), "queue", jr_json_bytes(q, strlen(q)),
                  "state", "dead", "found", 1, "entry", e->id, "due_ms", "dead_at_ms", (json_int_t)strtoll(e->id, NULL, 10));
    if (!o) goto out;
    json_object_set_new(o, "enqueued_ms", en ? json_integer(strtoll(en, NULL, 10)) : json_null());
    json_object_set_new(o, "attempt", json_integer(a ? strtoll(a, NULL, 10) : 1));
    json_object_set_new(o, "max_attempts", m ? json_integer(strtoll(m, NULL, 10)) : json_null());
    json_object_set_new(o, "timeout_ms", t ? json_integer(strtoll(t, NULL, 10)) : json_null());
    json_object_set_new(o, "handler", field_json(e, JR_F_HANDLER));
    json_object_set_new(o, "payload", bytes_view(pl ? pl : "", pl ? plen : 0));
    json_object_set_new(o, "error", err ? bytes_view(err, elen) : json_null());
    json_object_set_new(o, "why", field_json(e, JR_F_WHY));
    json_t *fields = json_array();
    for (size_t f = 0; fields && f < e->nfields; f++)
        json_array_append_new(fields, json_pack("[o,o]", jr_json_bytes(e->names[f], e->name_lens[f]),
                                                bytes_view(e->values[f], e->value_lens[f])));
    json_object_set_new(o, "fields", fields);
    json_object_set_new(o, "actions", W.cfg->web_read_only ? json_array() : json_pack("[s,s]", "retry", "delete"));
out:
    jr_batch_free(&b);
    return o;
}

static enum MHD_Result get_job(struct MHD_Connection *con) {
    const char *why, *q = queue_arg(arg(con, "queue"), &why), *id = arg(con, "id"), *entry = arg(con, "entry");
    if (!q) return answer_error(con, MHD_HTTP_BAD_REQUEST, why);
    if (!id || (why = jr_contract_stored_id(id, strlen(id))))
        return answer_error(con, MHD_HTTP_BAD_REQUEST, id ? why : "name the job (id=...)");
    jr_client_t *c = client();
    if (!c) return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    json_t *d = is_entry_id(entry) ? dead_at_entry(jr_client_redis(c), q, id, entry) : NULL;
    if (d) return answer_json(con, MHD_HTTP_OK, d);
    jr_client_job_info_t *in = NULL;
    if (jr_client_job_show(c, q, id, &in)) return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
    /* a finished job (client 1.3 reports its record as a state): shown from
     * its record below, with the record's own fields */
    int found = in->state != JR_CLIENT_STATE_NOT_FOUND && in->state != JR_CLIENT_STATE_FINISHED;
    json_t *o = json_pack("{s:o,s:o,s:s,s:b}", "job", jr_json_bytes(id, strlen(id)), "queue", jr_json_bytes(q, strlen(q)),
                          "state", in->state_name, "found", found);
    if (o && found) {
        json_t *fields = json_array();
        for (size_t f = 0; fields && f < in->nfields; f++)
            json_array_append_new(fields, json_pack("[o,o]", jr_json_bytes(in->fields[f].name, in->fields[f].name_len),
                                                    bytes_view(in->fields[f].value, in->fields[f].value_len)));
        json_object_set_new(o, "entry", in->entry[0] ? json_string(in->entry) : json_null());
        json_object_set_new(o, "due_ms", in->due_ms >= 0 ? json_real(in->due_ms) : json_null());
        json_object_set_new(o, "enqueued_ms", in->enqueued_ms > 0 ? json_integer(in->enqueued_ms) : json_null());
        json_object_set_new(o, "dead_at_ms", in->state == JR_CLIENT_STATE_DEAD ? json_integer(strtoll(in->entry, NULL, 10))
                                                                                : json_null());
        json_object_set_new(o, "attempt", json_integer(in->attempt));
        json_object_set_new(o, "max_attempts", in->max_attempts > 0 ? json_integer(in->max_attempts) : json_null());
        json_object_set_new(o, "timeout_ms", in->timeout_ms > 0 ? json_integer(in->timeout_ms) : json_null());
        json_object_set_new(o, "handler", in->handler ? jr_json_bytes(in->handler, in->handler_len) : json_null());
        json_object_set_new(o, "payload", bytes_view(in->payload, in->payload_len));
        json_object_set_new(o, "error", in->error ? bytes_view(in->error, in->error_len) : json_null());
        json_object_set_new(o, "why", in->why ? jr_json_bytes(in->why, in->why_len) : json_null());
        if (in->state == JR_CLIENT_STATE_RUNNING) {
            json_object_set_new(o, "consumer", jr_json_bytes(in->consumer, strlen(in->consumer)));
            json_object_set_new(o, "idle_ms", json_integer(in->idle_ms));
            json_object_set_new(o, "deliveries", json_integer(in->deliveries));
        }
        json_object_set_new(o, "fields", fields);
        /* what the state allows (the page shows these buttons) */
        json_t *acts = json_array();
        switch (in->state) {
        case JR_CLIENT_STATE_DELAYED:
        case JR_CLIENT_STATE_RETRYING: json_array_append_new(acts, json_string("run-now")); /* fall through */
        case JR_CLIENT_STATE_READY:
            json_array_append_new(acts, json_string("cancel"));
            json_array_append_new(acts, json_string("delete"));
            break;
        case JR_CLIENT_STATE_RUNNING: json_array_append_new(acts, json_string("cancel")); break;
        case JR_CLIENT_STATE_DEAD:
            json_array_append_new(acts, json_string("retry"));
            json_array_append_new(acts, json_string("delete"));
            break;
        default: break;
        }
        json_object_set_new(o, "actions", W.cfg->web_read_only ? json_array() : acts);
        if (W.cfg->web_read_only) json_decref(acts);
    } else if (o) { /* finished: its record, when keep_finished kept one (by id, no scan) */
        jr_batch_t b = {0};
        int got = jr_redis_finished_get(jr_client_redis(c), q, id, &b);
        if (got == 1 && b.n) {
            found = 1;
            json_object_set_new(o, "state", json_string("finished"));
            json_object_set_new(o, "found", json_true());
            json_object_set_new(o, "finished", finished_json(&b.v[0]));
            json_object_set_new(o, "actions", json_array());
        } else {
            json_object_set_new(o, "note", json_string(got < 0 ? "its finished record could not be read"
                                                                : "not waiting, running, dead, nor kept as finished"));
        }
        jr_batch_free(&b);
    }
    jr_client_job_info_free(in);
    return answer_json(con, found ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND, o);
}

/* ---- POST: the actions ------------------------------------------------------ */

/* A string member of the body, checked as a queue name or a stored job id. */
static const char *body_str(json_t *body, const char *name) {
    json_t *v = json_object_get(body, name);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* POST /api/pause, /api/resume {"queue"}: jr_client_set_paused, which also
 * wakes the blocked workers (as `jobrunner pause`). */
static enum MHD_Result post_pause(struct MHD_Connection *con, json_t *body, int on) {
    const char *why, *q = queue_arg(body_str(body, "queue"), &why);
    if (!q) return answer_error(con, MHD_HTTP_BAD_REQUEST, why);
    jr_client_t *c = client();
    if (!c) return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    int changed = 0, woken = 0;
    if (jr_client_set_paused(c, q, on, &changed, &woken)) return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
    jr_log_kv(JR_LOG_INFO, on ? "web: queue paused" : "web: queue resumed", "queue", q, NULL);
    return answer_json(con, MHD_HTTP_OK, json_pack("{s:o,s:b,s:b,s:i}", "queue", jr_json_bytes(q, strlen(q)), "paused", on,
                                                   "changed", changed, "workers_woken", woken));
}

/* POST /api/job/cancel|run-now|delete {"queue", "id"}: the calls of
 * `jobrunner cancel` (jr_client_cancel) and `job run-now|delete`
 * (jr_redis_job_change). */
static enum MHD_Result post_job(struct MHD_Connection *con, json_t *body, const char *act) {
    const char *why, *q = queue_arg(body_str(body, "queue"), &why), *id = body_str(body, "id");
    if (!q) return answer_error(con, MHD_HTTP_BAD_REQUEST, why);
    if (!id || (why = jr_contract_stored_id(id, strlen(id))))
        return answer_error(con, MHD_HTTP_BAD_REQUEST, id ? why : "name the job (\"id\")");
    jr_client_t *c = client();
    if (!c) return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    char state[32] = "", detail[JR_ID_MAX] = "";
    if (!strcmp(act, "cancel")) {
        jr_client_cancel_t o;
        if (jr_client_cancel(c, q, id, &o)) return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
        snprintf(state, sizeof state, "%s",
                 o == JR_CLIENT_CANCELLED ? "cancelled" : o == JR_CLIENT_CANCEL_RUNNING ? "running" : "not found");
    } else { /* a partitioned queue: the partition holding it, as `job run-now|delete` finds it */
        char iq[JR_INTERNAL_QUEUE_MAX + 1], iid[JR_ID_MAX];
        jr_partmap_t parts = {0};
        int rc = jr_partition_locate(&parts, jr_client_redis(c), q, id, NULL, iq, iid);
        if (!rc) rc = jr_redis_job_change(jr_client_redis(c), !strcmp(act, "run-now") ? "jr_run_now" : "jr_delete", iq, iid,
                                          state, sizeof state, detail, sizeof detail);
        jr_partmap_free(&parts);
        if (rc) return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
    }
    jr_log_kv(JR_LOG_INFO, "web: job action", "action", act, "queue", q, "job", id, "result", state, NULL);
    int missing = !strcmp(state, "not found");
    return answer_json(con, missing ? MHD_HTTP_NOT_FOUND : MHD_HTTP_OK,
                       json_pack("{s:s,s:o,s:o,s:o}", "action", act, "queue", jr_json_bytes(q, strlen(q)), "job",
                                 jr_json_bytes(id, strlen(id)), "result", jr_json_bytes(state, strlen(state))));
}

/* POST /api/bulk {"queue", "state": "dead" | "delayed" | "retrying",
 * "action": "retry" | "run-now" | "delete", and either "ids": [job ids; of
 * dead jobs also dead entry ids] or "all": true with an optional filter
 * "handler" (exact) and "match" (a substring of the stored payload)}: one
 * jr_bulk (bulk.h), the call of `jobrunner dead retry|purge` and `job
 * run-now|delete --state S` (cursor pages of 500, never the state loaded
 * whole). POST /api/dead/retry|delete {"queue", "entries": [...] | "all"}
 * is the same for dead jobs. */
static enum MHD_Result post_bulk(struct MHD_Connection *con, json_t *body, const char *state, const char *act) {
    const char *why, *q = queue_arg(body_str(body, "queue"), &why);
    if (!q) return answer_error(con, MHD_HTTP_BAD_REQUEST, why);
    if (!state) state = body_str(body, "state");
    if (!act) act = body_str(body, "action");
    int st = state ? jr_bulk_state_parse(state) : -1;
    if (st < 0) return answer_error(con, MHD_HTTP_BAD_REQUEST, "\"state\" must be dead, delayed or retrying");
    if (!act || (strcmp(act, "retry") && strcmp(act, "run-now") && strcmp(act, "delete")))
        return answer_error(con, MHD_HTTP_BAD_REQUEST, "\"action\" must be retry, run-now or delete");
    json_t *ids = json_object_get(body, "ids");
    if (!ids) ids = json_object_get(body, "entries");
    int all = json_is_true(json_object_get(body, "all"));
    if (all == (ids != NULL) || (ids && (!json_is_array(ids) || !json_array_size(ids))))
        return answer_error(con, MHD_HTTP_BAD_REQUEST, "give \"ids\": [...] (a selection) or \"all\": true, not both");
    if (ids && json_array_size(ids) > WEB_SELECT_MAX)
        return answer_error(con, MHD_HTTP_BAD_REQUEST, "at most 1000 ids per call (or \"all\": true with a filter)");
    size_t n = ids ? json_array_size(ids) : 0;
    const char **sel = calloc(n + 1, sizeof *sel);
    if (!sel) return answer_error(con, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!(sel[i] = json_string_value(json_array_get(ids, i))) || jr_contract_stored_id(sel[i], strlen(sel[i]))) {
            free(sel);
            return answer_error(con, MHD_HTTP_BAD_REQUEST, "an id of the selection is not a job id");
        }
    const char *h = body_str(body, "handler"), *m = body_str(body, "match");
    jr_filter_t f = {.handler = h, .match = m, .match_len = m ? strlen(m) : 0};
    jr_client_t *c = client();
    if (!c) {
        free(sel);
        return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    }
    jr_bulk_result_t res = {0};
    /* dead entries of a queue that is not partitioned (the dead tab and a
     * dead job's page send those): `jobrunner dead retry|purge` by entry,
     * one call for them all, no walk of the dead stream to find them */
    int entries = st == JR_BULK_DEAD && n > 0, rc;
    for (size_t i = 0; entries && i < n; i++) entries = is_entry_id(sel[i]);
    jr_partmap_t parts = {0};
    jr_qpart_t *qp;
    if (entries && !jr_partmap_get(&parts, jr_client_redis(c), q, &qp) && qp->n == 1) {
        long long moved = 0;
        rc = strcmp(act, "delete") ? jr_redis_dead_retry(jr_client_redis(c), q, sel, n, &moved)
                                   : jr_redis_dead_purge(jr_client_redis(c), q, sel, n, &moved);
        res.seen = res.matched = (long long)n, res.acted = moved;
        jr_partmap_free(&parts);
        free(sel);
        if (rc) return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
        goto done;
    }
    jr_partmap_free(&parts);
    rc = jr_bulk(jr_client_redis(c), q, (jr_bulk_state_t)st, strcmp(act, "delete") ? JR_BULK_RUN_NOW : JR_BULK_DELETE,
                     all ? &f : NULL, sel, n, NULL, &res);
    free(sel);
    if (rc) return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
done:;
    char a[24];
    snprintf(a, sizeof a, "%lld", res.acted);
    jr_log_kv(JR_LOG_INFO, "web: bulk action", "queue", q, "state", state, "action", act, "count", a, NULL);
    return answer_json(con, MHD_HTTP_OK,
                       json_pack("{s:o,s:s,s:s,s:I,s:I,s:I,s:I}", "queue", jr_json_bytes(q, strlen(q)), "state", state,
                                 "action", act, "seen", (json_int_t)res.seen, "matched", (json_int_t)res.matched,
                                 "acted", (json_int_t)res.acted, strcmp(act, "delete") ? "retried" : "deleted",
                                 (json_int_t)res.acted));
}

/* POST /api/cron/enable|disable|fire {"name"}: the calls of `jobrunner
 * cron enable|disable|fire`. */
static enum MHD_Result post_cron(struct MHD_Connection *con, json_t *body, const char *act) {
    const char *name = body_str(body, "name");
    if (!name || !jr_cron_name_valid(name)) return answer_error(con, MHD_HTTP_BAD_REQUEST, "name a schedule (\"name\")");
    jr_client_t *c = client();
    if (!c) return answer_error(con, MHD_HTTP_SERVICE_UNAVAILABLE, W.err);
    int found = 0, changed = 0, rc;
    char id[JR_ID_MAX] = "";
    if (!strcmp(act, "fire")) rc = jr_redis_cron_fire(jr_client_redis(c), name, id, &found);
    else rc = jr_redis_cron_enable(jr_client_redis(c), name, !strcmp(act, "enable"), &found, &changed);
    if (rc) return answer_error(con, MHD_HTTP_BAD_GATEWAY, why_failed());
    if (!found) return answer_error(con, MHD_HTTP_NOT_FOUND, "no such schedule");
    jr_log_kv(JR_LOG_INFO, "web: schedule action", "action", act, "schedule", name, NULL);
    json_t *o = json_pack("{s:s,s:o,s:b}", "action", act, "name", jr_json_bytes(name, strlen(name)), "changed", changed);
    if (o && id[0]) json_object_set_new(o, "job", jr_json_bytes(id, strlen(id)));
    return answer_json(con, MHD_HTTP_OK, o);
}

/* ---- the request ------------------------------------------------------------ */

typedef struct req {
    char *body;
    size_t len;
    int too_big;
} req_t;

/* 1 if the request carries the password (HTTP Basic, any user name). */
static int authorized(struct MHD_Connection *con) {
    const char *h = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Basic ", 6)) return 0;
    h += 6;
    while (*h == ' ') h++;
    /* sized by what arrived (libmicrohttpd bounds a request's headers), so
     * a password of any length can log in */
    size_t elen = strcspn(h, " ");
    unsigned char *dec = malloc(elen / 4 * 3 + 3);
    if (!dec) return 0;
    long n = jr_web_base64_decode(h, elen, dec, elen / 4 * 3 + 3);
    const unsigned char *colon = n > 0 ? memchr(dec, ':', (size_t)n) : NULL;
    int ok = colon && jr_web_secret_equal((const char *)colon + 1, (size_t)n - (size_t)(colon + 1 - dec),
                                          W.cfg->web_password, strlen(W.cfg->web_password));
    free(dec);
    return ok;
}

/* Without a password: the Host header must be a loopback name (a page of
 * another site that had its name resolve to 127.0.0.1 cannot read us). */
static int host_ok(struct MHD_Connection *con) {
    const char *h = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!h) return 0;
    char host[256];
    size_t n = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":");
    if (n >= sizeof host) return 0;
    snprintf(host, sizeof host, "%.*s", (int)n, h);
    return jr_web_host_is_loopback(host);
}

static enum MHD_Result get_asset(struct MHD_Connection *con, const char *url) {
    if (!strcmp(url, "/")) url = "/index.html";
    for (size_t i = 0; i < jr_web_nassets; i++)
        if (!strcmp(url + 1, jr_web_assets[i].path)) {
            char *copy = malloc(jr_web_assets[i].len + 1);
            if (!copy) return MHD_NO;
            memcpy(copy, jr_web_assets[i].data, jr_web_assets[i].len);
            return answer(con, MHD_HTTP_OK, copy, jr_web_assets[i].len, jr_web_assets[i].type);
        }
    return answer(con, MHD_HTTP_NOT_FOUND, strdup("not found\n"), 10, "text/plain; charset=utf-8");
}

static enum MHD_Result route_post(struct MHD_Connection *con, const char *url, req_t *rq) {
    if (W.cfg->web_read_only) return answer_error(con, MHD_HTTP_FORBIDDEN, "read-only dashboard (web.read_only): no actions");
    const char *tok = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "X-CSRF-Token");
    if (!tok || !jr_web_secret_equal(tok, strlen(tok), W.token, strlen(W.token)))
        return answer_error(con, MHD_HTTP_FORBIDDEN, "missing or wrong CSRF token (X-CSRF-Token, from GET /api/session)");
    if (rq->too_big) return answer_error(con, MHD_HTTP_CONTENT_TOO_LARGE, "the body is over 1 MiB");
    json_error_t je;
    json_t *body = json_loadb(rq->body ? rq->body : "", rq->len, 0, &je);
    if (!json_is_object(body)) {
        json_decref(body);
        return answer_error(con, MHD_HTTP_BAD_REQUEST, "the body must be a JSON object");
    }
    enum MHD_Result res;
    if (!strcmp(url, "/api/pause")) res = post_pause(con, body, 1);
    else if (!strcmp(url, "/api/resume")) res = post_pause(con, body, 0);
    else if (!strcmp(url, "/api/job/cancel")) res = post_job(con, body, "cancel");
    else if (!strcmp(url, "/api/job/run-now")) res = post_job(con, body, "run-now");
    else if (!strcmp(url, "/api/job/delete")) res = post_job(con, body, "delete");
    else if (!strcmp(url, "/api/dead/retry")) res = post_bulk(con, body, "dead", "retry");
    else if (!strcmp(url, "/api/dead/delete")) res = post_bulk(con, body, "dead", "delete");
    else if (!strcmp(url, "/api/bulk")) res = post_bulk(con, body, NULL, NULL);
    else if (!strcmp(url, "/api/cron/enable")) res = post_cron(con, body, "enable");
    else if (!strcmp(url, "/api/cron/disable")) res = post_cron(con, body, "disable");
    else if (!strcmp(url, "/api/cron/fire")) res = post_cron(con, body, "fire");
    else res = answer_error(con, MHD_HTTP_NOT_FOUND, "no such action");
    json_decref(body);
    return res;
}

/* MHD's request handler: called first with the headers (*ctx NULL), then
 * with each piece of a body, then once more with none. */
static enum MHD_Result serve(void *cls, struct MHD_Connection *con, const char *url, const char *method,
                             const char *version, const char *data, size_t *size, void **ctx) {
    (void)cls, (void)version;
    int post = !strcmp(method, MHD_HTTP_METHOD_POST);
    if (!*ctx) {
        req_t *rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        *ctx = rq;
        return MHD_YES;
    }
    req_t *rq = *ctx;
    if (*size) { /* a piece of the body */
        if (rq->too_big || rq->len + *size > WEB_BODY_MAX) {
            rq->too_big = 1;
        } else {
            char *b = realloc(rq->body, rq->len + *size + 1);
            if (!b) return MHD_NO;
            memcpy(b + rq->len, data, *size);
            rq->body = b, rq->len += *size, b[rq->len] = '\0';
        }
        *size = 0;
        return MHD_YES;
    }
    if (W.cfg->web_password && !authorized(con)) return answer_error(con, MHD_HTTP_UNAUTHORIZED, "password required");
    if (!W.cfg->web_password && !host_ok(con))
        return answer_error(con, MHD_HTTP_FORBIDDEN, "the Host header must be localhost or a loopback address");
    /* A request another site's page made (a browser says so): not served.
     * Its POSTs fail the CSRF token anyway, but a blind GET (an <img> of
     * /api/job) could still make Redis search, over and over. */
    const char *site = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Sec-Fetch-Site");
    if (site && !strcmp(site, "cross-site"))
        return answer_error(con, MHD_HTTP_FORBIDDEN, "requests from another site's page are refused");
    if (post) return route_post(con, url, rq);
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return answer_error(con, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and POST");
    if (!strcmp(url, "/api/session")) return get_session(con);
    if (!strcmp(url, "/api/overview")) return get_overview(con);
    if (!strcmp(url, "/api/jobs")) return get_jobs(con);
    if (!strcmp(url, "/api/job")) return get_job(con);
    if (!strcmp(url, "/api/workers")) return get_workers(con);
    if (!strcmp(url, "/api/history")) return get_history(con);
    if (!strcmp(url, "/api/schedules")) return get_schedules(con);
    if (!strncmp(url, "/api/", 5)) return answer_error(con, MHD_HTTP_NOT_FOUND, "no such endpoint");
    return get_asset(con, url);
}

static void done(void *cls, struct MHD_Connection *con, void **ctx, enum MHD_RequestTerminationCode code) {
    (void)cls, (void)con, (void)code;
    req_t *rq = *ctx;
    if (rq) free(rq->body), free(rq);
    *ctx = NULL;
}

/* ---- the server ------------------------------------------------------------- */

int jr_web_run(const jr_config_t *cfg) {
    char host[256], err[JR_ERRLEN];
    int port, v6 = 0;
    memset(&W, 0, sizeof W);
    W.cfg = cfg;
    const char *addr = cfg->web_listen;
    if (jr_metrics_parse_addr(addr, host, sizeof host, &port, err, sizeof err)) {
        fprintf(stderr, "jobrunner web: web.listen: %s\n", err);
        return 2;
    }
    if (cfg->web_password && !cfg->web_password[0]) {
        fprintf(stderr, "jobrunner web: web.password is empty\n");
        return 2;
    }
    W.loopback = jr_web_host_is_loopback(host);
    if (!W.loopback && !cfg->web_password) {
        fprintf(stderr, "jobrunner web: refusing to serve the dashboard on %s without a password: an address other "
                        "than 127.0.0.1, ::1 or localhost needs web.password (JOBRUNNER_WEB_PASSWORD), and TLS in "
                        "front of it (a reverse proxy; see docs/web-api.md)\n", addr);
        return 2;
    }
    unsigned char rnd[32];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        fprintf(stderr, "jobrunner web: cannot read random bytes for the CSRF token: %s\n", strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < sizeof rnd; i++) snprintf(W.token + 2 * i, 3, "%02x", rnd[i]);
    int fd = jr_http_listen("the dashboard", addr, host, port, &W.port, &v6, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "jobrunner web: %s\n", err);
        return 1;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_EPOLL | (v6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL, serve, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)WEB_IDLE_S, MHD_OPTION_CONNECTION_LIMIT, (unsigned)WEB_CONN_MAX,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)WEB_PER_IP, MHD_OPTION_NOTIFY_COMPLETED, done, NULL,
        MHD_OPTION_END);
    const union MHD_DaemonInfo *ep = d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (!ep) {
        fprintf(stderr, "jobrunner web: cannot serve the dashboard on %s: libmicrohttpd failed to start\n", addr);
        if (d) MHD_stop_daemon(d);
        else close(fd);
        return 1;
    }
    int sig = jr_signals_install();
    char ports[16];
    snprintf(ports, sizeof ports, "%d", W.port);
    jr_log_kv(JR_LOG_INFO, "serving the dashboard", "listen", addr, "port", ports, "read_only",
              cfg->web_read_only ? "true" : "false", "password", cfg->web_password ? "set" : "none", NULL);
    jr_log_flush(); /* the line tests and supervisors wait for */
    client(); /* connect now, so a Redis that cannot be reached is said at start */
    while (!jr_signals_count()) {
        MHD_UNSIGNED_LONG_LONG t;
        int wait_ms = 1000;
        if (MHD_get_timeout(d, &t) == MHD_YES && t < 1000) wait_ms = (int)t;
        struct pollfd p[2] = {{.fd = ep->epoll_fd, .events = POLLIN}, {.fd = sig, .events = POLLIN}};
        if (poll(p, sig >= 0 ? 2 : 1, wait_ms) < 0 && errno != EINTR) poll(NULL, 0, 10); /* never spin */
        if (jr_signals_count()) break;
        MHD_run(d);
    }
    jr_log_kv(JR_LOG_INFO, "dashboard stopped", NULL);
    MHD_stop_daemon(d);
    if (W.c) jr_client_free(W.c);
    W.c = NULL;
    return 0;
}

/* `jobrunner web [--listen ADDR]`. */
int jr_cli_web(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)argc, (void)argv;
    const char *addr = f->v[JR_O_LISTEN];
    if (addr) {
        char host[256], err[JR_ERRLEN];
        int port;
        if (jr_metrics_parse_addr(addr, host, sizeof host, &port, err, sizeof err))
            return jr_cli_die(cmd->name, "--listen: %s", err);
        free(cfg->web_listen);
        if (!(cfg->web_listen = strdup(addr))) {
            fprintf(stderr, "jobrunner web: out of memory\n");
            return 1;
        }
    }
    return jr_web_run(cfg);
}
