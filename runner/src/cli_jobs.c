/* The jobs: enqueue, job show|run-now|delete, cancel, jobs (rows of cli.c;
 * see cli.h). enqueue, job show and cancel go through the client library;
 * job run-now and delete, and jobs, through the Redis layer (the library
 * has no call for them). */
#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "contract.h"
#include "bulk.h"
#include "envelope.h"
#include "jr.h"
#include "proc.h"
#include "jr_limits.h"
#include "redis_admin.h"
#include "redis_finished.h"
#include "redis_produce.h"
#include "redis_partition.h"
#include "redis_sched.h"
#include "util.h"

/* ---- enqueue ---------------------------------------------------------------- */

/* Parse --at: a time jr_time_parse accepts, at most JR_DELAY_MAX_MS after
 * this host's clock, into the Unix ms of jr_client_job_t.at_ms: a fraction
 * of a millisecond rounds up (never before the time given), and a time at
 * or before the epoch becomes 1 ms (due now). 0, or -1 with why. */
static int check_at(const char *s, int64_t *ms, char *why, size_t len) {
    int64_t us;
    char max[JR_DURATION_LEN];
    if (jr_time_parse(s, &us) != 0) {
        snprintf(why, len,
                 "must be an RFC 3339 time like 2026-12-01T09:30:00Z or 2026-12-01T10:30:00+01:00 "
                 "(years 0000 to 9999, offsets up to 23:59), or Unix seconds");
        return -1;
    }
    if (us / 1000 - jr_wall_ms() > JR_DELAY_MAX_MS) {
        snprintf(why, len, "is more than %s from now (the maximum delay)",
                 jr_duration_format(JR_DELAY_MAX_MS, max, sizeof max));
        return -1;
    }
    *ms = us > 0 ? (us + 999) / 1000 : 1;
    return 0;
}

/* Read all of stdin into a malloc'd buffer (NUL-terminated, *len bytes).
 * Returns NULL if memory runs out or reading fails: never a cut payload. */
static char *read_stdin(size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, stdin);
        if (ferror(stdin)) break;
        if (n < cap) { /* end of input */
            buf[n] = '\0';
            *len = n;
            return buf;
        }
        char *b = cap <= SIZE_MAX / 2 - 1 ? realloc(buf, cap * 2 + 1) : NULL;
        if (!b) break;
        buf = b, cap *= 2;
    }
    free(buf);
    return NULL;
}

/* `jobrunner enqueue [options] HANDLER [PAYLOAD | -]`: the options become
 * one jr_client_job_t, each value checked once here, as a usage error
 * (exit status 2) naming the option: the queue was checked already (a -q
 * by main, enqueue.queue by the config loader); the id and the handler by
 * the rules of contract.h; the times and counts against jr_limits.h; the
 * payload against jobs.max_payload. The client library then writes it and
 * prints its id (a note on stderr when the id was enqueued before). */
int jr_cli_enqueue(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    const char *name = cmd->name, *in = f->v[JR_O_IN], *at = f->v[JR_O_AT], *id = f->v[JR_O_ID];
    const char *max = f->v[JR_O_MAX], *timeout = f->v[JR_O_TIMEOUT], *backoff = f->v[JR_O_BACKOFF], *rule;
    if (argc < 1 || argc > 2) return jr_cli_die(name, "%s", "expected HANDLER [PAYLOAD | -]");
    if (in && at) return jr_cli_die(name, "%s", "--in and --at exclude each other");
    if (f->queues.n > 1) return jr_cli_die(name, "%s", "enqueue takes one -q");
    jr_client_job_t j = {.queue = f->queues.n ? f->queues.v[0] : cfg->default_queue, .id = id, .handler = argv[0]};
    if (id && (rule = jr_contract_job_id(id, strlen(id)))) return jr_cli_die2(name, "--id", id, rule);
    if ((rule = jr_contract_handler_name(argv[0], strlen(argv[0]))))
        return jr_cli_die2(name, "handler name", argv[0], rule);
    char why[JR_ERRLEN];
    if (in && jr_duration_parse_range(in, 0, JR_DELAY_MAX_MS, &j.delay_ms, why, sizeof why))
        return jr_cli_die2(name, "--in", in, why);
    if (at && check_at(at, &j.at_ms, why, sizeof why)) return jr_cli_die2(name, "--at", at, why);
    if (max && jr_cli_parse_count(max, 1, JR_ATTEMPTS_MAX, &j.max_attempts)) {
        snprintf(why, sizeof why, "must be an integer from 1 to %d", JR_ATTEMPTS_MAX);
        return jr_cli_die2(name, "--max-attempts", max, why);
    }
    if (timeout && jr_duration_parse_range(timeout, 1, JR_TIMEOUT_MAX_MS, &j.timeout_ms, why, sizeof why))
        return jr_cli_die2(name, "--timeout", timeout, why);
    if (backoff && jr_duration_parse_range(backoff, 1, JR_BACKOFF_MAX_MS, &j.backoff_ms, why, sizeof why))
        return jr_cli_die2(name, "--backoff", backoff, why);
    char *buf = NULL;
    if (argc == 2 && strcmp(argv[1], "-") == 0) {
        if (!(buf = read_stdin(&j.payload_len))) {
            fprintf(stderr, "jobrunner enqueue: cannot read the payload from stdin: %s\n",
                    ferror(stdin) ? "read error" : "out of memory");
            return 1;
        }
        j.payload = buf;
    } else if (argc == 2) {
        j.payload = argv[1];
        j.payload_len = strlen(argv[1]);
    }
    if (j.payload_len > (size_t)cfg->max_payload) {
        fprintf(stderr, "jobrunner enqueue: the payload is %zu bytes, over the limit of %lld (jobs.max_payload)\n",
                j.payload_len, (long long)cfg->max_payload);
        free(buf);
        return 1;
    }
    jr_client_t *c = jr_cli_client(cfg, 1);
    if (!c) {
        free(buf);
        return 1;
    }
    jr_client_result_t res;
    const char *key = f->v[JR_O_KEY];
    int rc = jr_client_enqueue_many_keyed(c, &j, &key, 1, &res);
    if (rc && res.status == JR_CLIENT_JOB_UNKNOWN && res.id[0]) { /* written, not confirmed (redis.wait_replicas) */
        fprintf(stderr, "jobrunner: enqueue failed: job %s ", jr_cli_esc(res.id));
        fprintf(stderr, "%s\n", jr_cli_esc(res.error ? res.error : jr_client_errstr(c)));
    } else if (rc) {
        fprintf(stderr, "jobrunner: enqueue failed: %s\n", jr_cli_esc(res.error ? res.error : jr_client_errstr(c)));
    } else {
        printf("%s\n", jr_cli_esc(res.id));
        if (res.status == JR_CLIENT_JOB_EXISTED)
            fprintf(stderr, "jobrunner: job %s was already enqueued; not enqueued again\n", jr_cli_esc(res.id));
    }
    jr_client_free(c);
    free(buf);
    return jr_cli_done(stdout, rc ? 1 : 0);
}

/* ---- one job: job show / run-now / delete, cancel, jobs --state ---------- */

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
    const char *v = e ? jr_cli_field(e, name, &len) : NULL;
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

/* `jobrunner job show`: where job `id` of `queue` is (jr_client_job_show:
 * delayed, retrying, ready, running, dead or not found) with its fields, as
 * text or one JSON object; when not found, stderr names the queue it looked
 * in and --all-queues. A queue nothing ever used is said so, looked in no
 * further. Returns 0 when found, 1 when not (or on error). */
static int cmd_job_show(const jr_config_t *cfg, const char *queue, const char *id, const char *key, int json,
                        FILE *out) {
    jr_client_t *c = jr_cli_client(cfg, 1);
    if (!c) return 1;
    jr_client_job_info_t *in = NULL;
    int status = 0;
    if (jr_cli_unknown_queues(jr_client_redis(c), "job show", &queue, 1, 1)) {
        jr_client_free(c);
        return 1;
    }
    if (jr_client_job_show_keyed(c, queue, id, key, &in)) {
        fprintf(stderr, "jobrunner job show: %s\n", jr_cli_esc(jr_client_errstr(c)));
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
            json_object_set_new(doc, "payload", info_has(in, JR_F_PAYLOAD) ? bytes_json(in->payload, in->payload_len) : json_null());
            json_object_set_new(doc, "error", bytes_json(in->error, in->error_len));
            if (dead) json_object_set_new(doc, "why", bytes_json(in->why, in->why_len));
            if (in->state == JR_CLIENT_STATE_FINISHED) { /* its record's own fields (redis_finished.h) */
                static const char *const rec[] = {JR_FIN_OUTCOME, JR_FIN_DURATION, JR_FIN_WORKER, JR_FIN_AT,
                                                  JR_FIN_RESULT};
                for (size_t r = 0; r < sizeof rec / sizeof *rec; r++) {
                    json_t *v = json_null();
                    for (size_t f = 0; f < in->nfields; f++)
                        if (in->fields[f].name_len == strlen(rec[r]) && !memcmp(in->fields[f].name, rec[r], strlen(rec[r]))) {
                            json_decref(v);
                            v = jr_json_bytes(in->fields[f].value, in->fields[f].value_len);
                            break;
                        }
                    json_object_set_new(doc, rec[r], v);
                }
            }
            json_object_set_new(doc, "fields", info_fields_json(in));
        } else if (doc) {
            json_object_set_new(doc, "note", json_string("finished jobs are not kept but with keep_finished"));
        }
        if (jr_cli_json_out(out, doc)) status = 1;
    } else {
        fprintf(out, "job: ");
        jr_cli_print_bytes(out, id, strlen(id));
        fprintf(out, "\nqueue: %s\nstate: %s%s\n", jr_cli_esc(queue), jr_cli_esc(in->state_name),
                found ? "" : " (finished jobs are not kept but in a queue or handler with keep_finished; a job "
                             "that ran is gone)");
        if (in->state == JR_CLIENT_STATE_DELAYED || in->state == JR_CLIENT_STATE_RETRYING)
            fprintf(out, "due: %s (%s)\n", due, score);
        if (found) fprintf(out, "attempt: %lld\n", (long long)in->attempt);
        if (in->entry[0]) fprintf(out, "entry: %s\n", jr_cli_esc(in->entry));
        if (running)
            fprintf(out, "consumer: %s\nidle: %.1fs (since its start or last heartbeat)\ndeliveries: %lld\n",
                    jr_cli_esc(in->consumer), (double)in->idle_ms / 1000.0, (long long)in->deliveries);
        if (at[0]) fprintf(out, "dead_at: %s\n", at);
        for (size_t f = 0; f < in->nfields; f++) {
            fputs("  ", out);
            jr_cli_print_bytes(out, in->fields[f].name, in->fields[f].name_len);
            fputs(": ", out);
            jr_cli_print_bytes(out, in->fields[f].value, in->fields[f].value_len);
            fputs("\n", out);
        }
    }
    if (!found) {
        fprintf(stderr, "jobrunner job show: job %s is not in queue %s (neither delayed, retrying, ready, running "
                        "nor dead there); 'jobrunner job show --all-queues %s' looks in every queue\n",
                jr_cli_esc(id), jr_cli_esc(queue), jr_cli_esc(id));
        status = 1;
    }
    jr_client_job_info_free(in);
    jr_client_free(c);
    return jr_cli_done(out, status);
}

/* `jobrunner job show --all-queues ID`: job id looked up by id (as `job
 * show` does: no scan of jobs) in every registered queue (a partitioned
 * one as one), then shown as `job show -q Q ID` shows it, for each queue
 * that has it (--json: the first; the others named on stderr). Returns 0
 * when found somewhere, 1 when not (saying how many queues it looked in). */
static int cmd_job_show_all(const jr_config_t *cfg, const char *id, int json, FILE *out) {
    jr_client_t *c = jr_cli_client(cfg, 1);
    if (!c) return 1;
    jr_redis_t *r = jr_client_redis(c);
    jr_strlist_t all = {0}, hits = {0};
    char wake[JR_ID_MAX];
    int rc = r ? jr_redis_queues(r, &all, wake) : JR_EIO;
    if (!rc) rc = jr_cli_queue_rows(&all);
    for (size_t i = 0; !rc && i < all.n; i++) {
        jr_client_job_info_t *in = NULL;
        if (jr_client_job_show_keyed(c, all.v[i], id, NULL, &in)) {
            fprintf(stderr, "jobrunner job show: %s: %s\n", jr_cli_esc(all.v[i]), jr_cli_esc(jr_client_errstr(c)));
            rc = JR_EREDIS;
        } else if (in->state != JR_CLIENT_STATE_NOT_FOUND && jr_strlist_push(&hits, all.v[i])) {
            rc = JR_ENOMEM;
        }
        jr_client_job_info_free(in);
    }
    if (rc && rc != JR_EREDIS)
        fprintf(stderr, "jobrunner job show: %s\n", rc == JR_ENOMEM ? "out of memory" : r ? jr_cli_esc(jr_redis_errstr(r)) : "not connected");
    jr_client_free(c);
    int status = rc ? 1 : 0;
    if (!rc && !hits.n) {
        fprintf(stderr, "jobrunner job show: job %s is in none of the %zu queues (neither delayed, retrying, ready, "
                        "running nor dead in any; a finished job only with keep_finished)\n", jr_cli_esc(id), all.n);
        status = 1;
    }
    for (size_t i = 0; !rc && i < hits.n && (!json || i == 0); i++) {
        if (i) fputs("\n", out);
        status |= cmd_job_show(cfg, hits.v[i], id, NULL, json, out);
    }
    for (size_t i = 1; json && i < hits.n; i++)
        fprintf(stderr, "jobrunner job show: job %s is also in queue %s\n", jr_cli_esc(id), jr_cli_esc(hits.v[i]));
    jr_strlist_free(&all);
    jr_strlist_free(&hits);
    return status;
}

/* `jobrunner job wait`: block until job `id` of `queue` has finished
 * (jr_client_wait, at most timeout_ms) and print how it ended, as text or
 * one JSON object. Returns 0 for ok, 1 for failed, cancelled, unknown (or
 * an error), JR_CLI_WAIT_TIMEOUT (3) when it had not finished in time. */
#define JR_CLI_WAIT_TIMEOUT 3
static int cmd_job_wait(const jr_config_t *cfg, const char *queue, const char *id, const char *key,
                        int64_t timeout_ms, int json, FILE *out) {
    jr_client_t *c = jr_cli_client(cfg, 1);
    if (!c) return 1;
    jr_client_end_t e;
    if (jr_client_wait(c, queue, id, key, timeout_ms, &e)) {
        fprintf(stderr, "jobrunner job wait: %s\n", jr_cli_esc(jr_client_errstr(c)));
        jr_client_free(c);
        return 1;
    }
    jr_client_free(c);
    static const char unknown_note[] = "not waiting, running, dead or kept: never there, or it finished before the "
                                       "wait began in a queue without keep_finished (these cannot be told apart)";
    char at[JR_TIME_LEN] = "";
    if (e.finished_ms > 0) jr_time_format(e.finished_ms, at);
    int status = e.outcome == JR_CLIENT_END_OK ? 0 : e.outcome == JR_CLIENT_END_TIMEOUT ? JR_CLI_WAIT_TIMEOUT : 1;
    if (json) {
        json_t *doc = json_pack("{s:o,s:o,s:s}", "job", jr_json_bytes(id, strlen(id)), "queue",
                                jr_json_bytes(queue, strlen(queue)), "outcome", e.outcome_name);
        if (doc) {
            json_object_set_new(doc, "result", e.result ? jr_json_bytes(e.result, e.result_len) : json_null());
            json_object_set_new(doc, "error", e.error ? jr_json_bytes(e.error, e.error_len) : json_null());
            json_object_set_new(doc, "attempt", e.attempt ? json_integer(e.attempt) : json_null());
            json_object_set_new(doc, "duration_ms", e.duration_ms >= 0 ? json_real(e.duration_ms) : json_null());
            json_object_set_new(doc, "worker", e.worker[0] ? jr_json_bytes(e.worker, strlen(e.worker)) : json_null());
            json_object_set_new(doc, "finished_at", at[0] ? json_string(at) : json_null());
            if (e.outcome == JR_CLIENT_END_UNKNOWN) json_object_set_new(doc, "note", json_string(unknown_note));
        }
        if (jr_cli_json_out(out, doc)) status = 1;
    } else if (e.outcome == JR_CLIENT_END_TIMEOUT) {
        fprintf(stderr, "jobrunner job wait: timeout: job %s of queue %s had not finished within %lld ms\n",
                jr_cli_esc(id), jr_cli_esc(queue), (long long)timeout_ms);
    } else {
        fprintf(out, "job: ");
        jr_cli_print_bytes(out, id, strlen(id));
        fprintf(out, "\nqueue: %s\noutcome: %s%s%s%s\n", jr_cli_esc(queue), e.outcome_name,
                e.outcome == JR_CLIENT_END_UNKNOWN ? " (" : "", e.outcome == JR_CLIENT_END_UNKNOWN ? unknown_note : "",
                e.outcome == JR_CLIENT_END_UNKNOWN ? ")" : "");
        if (e.attempt) fprintf(out, "attempt: %lld\n", (long long)e.attempt);
        if (e.duration_ms >= 0) fprintf(out, "duration_ms: %.3f\n", e.duration_ms);
        if (e.worker[0]) fprintf(out, "worker: %s\n", jr_cli_esc(e.worker));
        if (at[0]) fprintf(out, "finished_at: %s\n", at);
        if (e.error) {
            fputs("error: ", out);
            jr_cli_print_bytes(out, e.error, e.error_len);
            fputs("\n", out);
        }
        if (e.result) {
            fputs("result: ", out);
            jr_cli_print_bytes(out, e.result, e.result_len);
            fputs("\n", out);
        }
    }
    jr_client_end_free(&e);
    return jr_cli_done(out, status);
}

/* `jobrunner job run-now|delete` (sub) for one job. Returns the exit
 * status: 1 when not found, and for delete of a running job. */
static int cmd_job_change(const jr_config_t *cfg, const char *queue, const char *sub, const char *id,
                          const char *key, FILE *out) {
    int run_now = !strcmp(sub, "run-now");
    jr_redis_t *r = jr_cli_connect(cfg, 1);
    if (!r) return 1;
    char state[32], detail[JR_ID_MAX], iq[JR_INTERNAL_QUEUE_MAX + 1], iid[JR_ID_MAX];
    int status = 0;
    jr_partmap_t parts = {0};
    if (jr_partition_locate(&parts, r, queue, id, key, iq, iid) ||
        jr_redis_job_change(r, run_now ? "jr_run_now" : "jr_delete", iq, iid, state, sizeof state, detail,
                            sizeof detail)) {
        fprintf(stderr, "jobrunner job %s: %s\n", sub, jr_cli_esc(jr_redis_errstr(r)));
        status = 1;
    } else if (!strcmp(state, "not found")) {
        fprintf(stderr, "jobrunner job %s: no job \"%s\" waiting or running in queue %s (finished jobs are not kept)\n",
                sub, jr_cli_esc(id), jr_cli_esc(queue));
        status = 1;
    } else if (run_now) {
        if (!strcmp(state, "delayed") || !strcmp(state, "retrying"))
            fprintf(out, "%s ready now (was %s; entry %s)\n", jr_cli_esc(id), jr_cli_esc(state), jr_cli_esc(detail));
        else
            fprintf(out, "%s is already %s (entry %s)\n", jr_cli_esc(id), jr_cli_esc(state), jr_cli_esc(detail));
    } else if (!strcmp(state, "running")) {
        fprintf(stderr, "jobrunner job delete: %s is running; use cancel\n", jr_cli_esc(id));
        status = 1;
    } else {
        fprintf(out, "%s deleted (was %s)\n", jr_cli_esc(id), jr_cli_esc(state));
    }
    jr_partmap_free(&parts);
    jr_redis_free(r);
    return jr_cli_done(out, status);
}

/* `jobrunner cancel`: one line "ID cancelled|running|not found" per id (an
 * id the library refuses is named on stderr, and the others still go; a
 * lost connection stops); of a queue nothing ever used, that alone, on
 * stderr. Returns 0 when every id was found, 1 otherwise. */
static int cmd_cancel(const jr_config_t *cfg, const char *queue, char **ids, size_t n, const char *key, FILE *out) {
    jr_client_t *c = jr_cli_client(cfg, 1);
    if (!c) return 1;
    int status = 0;
    if (jr_cli_unknown_queues(jr_client_redis(c), "cancel", &queue, 1, 1)) n = 0, status = 1;
    for (size_t i = 0; i < n; i++) {
        jr_client_cancel_t o;
        int rc = jr_client_cancel_keyed(c, queue, ids[i], key, &o);
        if (rc) {
            fprintf(stderr, "jobrunner cancel: %s: %s\n", jr_cli_esc(ids[i]), jr_cli_esc(jr_client_errstr(c)));
            status = 1;
            if (rc == JR_CLIENT_ECONNECT || rc == JR_CLIENT_ETIMEOUT || rc == JR_CLIENT_ENOMEM) break;
            continue;
        }
        fprintf(out, "%s %s\n", jr_cli_esc(ids[i]),
                o == JR_CLIENT_CANCELLED ? "cancelled" : o == JR_CLIENT_CANCEL_RUNNING ? "running" : "not found");
        if (o == JR_CLIENT_CANCEL_NOT_FOUND) status = 1;
    }
    fflush(out);
    jr_client_free(c);
    return jr_cli_done(out, status);
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
                      const char *next, int json, size_t limit) {
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
            const listed_t *l = &v[i];
            char t[JR_TIME_LEN];
            if (!strcmp(state, "delayed")) score_time(l->where, t);
            else jr_time_format(strtoll(l->where, NULL, 10), t);
            json_t *o = json_pack("{s:o,s:s,s:s,s:o,s:o,s:o}", "job", jr_json_bytes(l->id, l->id_len),
                                  !strcmp(state, "delayed") ? "due_ms" : "entry", l->where,
                                  !strcmp(state, "delayed") ? "due" : !strcmp(state, "dead") ? "dead_at"
                                                                      : !strcmp(state, "finished") ? "finished_at"
                                                                                                   : "enqueued",
                                  t, "handler", field_json(l->e, JR_F_HANDLER), "attempt", field_json(l->e, JR_F_ATTEMPT),
                                  "fields", fields_json(l->e));
            if (o && l->p) {
                json_object_set_new(o, "consumer", jr_json_bytes(l->p->consumer, strlen(l->p->consumer)));
                json_object_set_new(o, "idle_ms", json_integer(l->p->idle_ms));
                json_object_set_new(o, "deliveries", json_integer(l->p->deliveries));
            }
            if (o && !strcmp(state, "dead")) {
                json_object_set_new(o, "why", field_json(l->e, JR_F_WHY));
                json_object_set_new(o, "error", field_json(l->e, JR_F_ERROR));
            }
            if (o && !strcmp(state, "finished")) { /* the record (redis_finished.h) */
                json_object_set_new(o, "outcome", field_json(l->e, JR_FIN_OUTCOME));
                json_object_set_new(o, "error", field_json(l->e, JR_FIN_ERROR));
                json_object_set_new(o, "result", field_json(l->e, JR_FIN_RESULT));
            }
            if (!o || json_array_append_new(arr, o)) {
                json_decref(arr);
                arr = NULL;
            }
        }
        json_t *doc = arr ? json_pack("{s:s,s:s,s:o,s:s?}", "queue", queue, "state", state, "jobs", arr, "next", next)
                          : NULL;
        return jr_cli_json_out(out, doc);
    }
    const jr_entry_t none = {0}; /* an entry gone between two reads */
    int running = !strcmp(state, "running"), dead = !strcmp(state, "dead"), fin = !strcmp(state, "finished");
    const char *heads[] = {"JOB", !strcmp(state, "delayed") ? "DUE" : dead ? "DEAD AT" : fin ? "FINISHED AT" : "ENQUEUED",
                           "HANDLER", "ATTEMPT", running ? "CONSUMER" : fin ? "OUTCOME" : "WHY"};
    jr_table_t tab;
    jr_table_init(&tab, heads, running || dead || fin ? "lLlrl" : "lLlr");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const listed_t *l = &v[i];
        const jr_entry_t *e = l->e ? l->e : &none;
        char t[JR_TIME_LEN], consumer[JR_PROC_NAME_MAX + 64];
        if (!strcmp(state, "delayed")) score_time(l->where, t);
        else jr_time_format(strtoll(l->where, NULL, 10), t);
        const char *row[5] = {l->id, t};
        size_t lens[5] = {l->id_len, strlen(t)};
        row[2] = jr_cli_field(e, JR_F_HANDLER, &lens[2]);
        row[3] = jr_cli_field(e, JR_F_ATTEMPT, &lens[3]);
        if (!row[2]) row[2] = "?", lens[2] = 1;
        if (!row[3]) row[3] = "1", lens[3] = 1;
        if (l->p) {
            snprintf(consumer, sizeof consumer, "%s (idle %.1fs, delivered %lld)", l->p->consumer,
                     (double)l->p->idle_ms / 1000.0, l->p->deliveries);
            row[4] = consumer, lens[4] = strlen(consumer);
        } else if (dead || fin) {
            row[4] = jr_cli_field(e, fin ? JR_FIN_OUTCOME : JR_F_WHY, &lens[4]);
            if (!row[4]) row[4] = "?", lens[4] = 1;
        } else {
            row[4] = "", lens[4] = 0;
        }
        rc = jr_table_add_n(&tab, row, lens);
    }
    if (!rc) jr_table_print(&tab, out, limit);
    jr_table_free(&tab);
    if (rc) {
        fprintf(stderr, "jobrunner jobs: out of memory\n");
        return 1;
    }
    if (next) fprintf(out, "next page: --after %s\n", jr_cli_esc(next));
    else fprintf(out, "(end)\n");
    return 0;
}

/* `jobrunner jobs --state`: a page of up to `limit` jobs in that state,
 * oldest first, after the cursor `after` (NULL: from the start), with the
 * cursor of the next page, as a table (within limit_cols columns, 0: none)
 * or one JSON object; with flt, only the page's jobs it passes (the cursor
 * as without it). Returns the exit
 * status (2: a bad cursor). Of a partitioned queue (nparts > 1),
 * the page is of partition `part` (internal queue iq): its generated ids
 * shown with "~<part>", its cursor "p<part>:<cursor in it>", or, at the
 * end of the partition, "p<part+1>:" (the next one; none after the last).
 * An empty page of a partition that is not the last prints nothing and
 * returns -1: the caller asks the next partition. */
static int cmd_jobs(const jr_config_t *cfg, const char *queue, const char *iq, int part, unsigned nparts,
                    const char *state, int64_t limit, const char *after, const jr_filter_t *flt, int json,
                    size_t limit_cols, FILE *out) {
    /* state is one of the five (jr_cli_jobs checked it before connecting) */
    int delayed = !strcmp(state, "delayed"), ready = !strcmp(state, "ready"), running = !strcmp(state, "running"),
        finished = !strcmp(state, "finished"); /* else dead */
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
    jr_redis_t *r = jr_cli_connect(cfg, 0);
    if (!r) return 1;
    jr_qkeys_t k;
    jr_qkeys(&k, iq);
    jr_batch_t b = {0};
    jr_batch_t *each = NULL;
    char (*shown)[JR_ID_MAX + 8] = NULL; /* the ids as users see them (a partition's generated ids) */
    jr_pending_t *pend = NULL;
    size_t npend = 0, n = 0;
    listed_t *v = NULL;
    char next[128], *nextp = NULL;
    int rc = 0, status = 0;
    const char **mv = NULL;
    size_t *ml = NULL;
    char dnext[128] = "";
    if (delayed) {
        rc = jr_redis_delayed_page(r, iq, after, limit, &b, dnext, sizeof dnext);
    } else if (ready) {
        char last[JR_ID_MAX];
        rc = jr_redis_group_last_id(r, iq, last);
        if (!rc && (!after || jr_stream_id_cmp(after, last) < 0) && strcmp(last, "0-0")) snprintf(start, sizeof start, "(%s", last);
        if (!rc) rc = jr_redis_xrange_between(r, k.ready, start, "+", limit, &b);
    } else if (running) {
        rc = jr_redis_pending_page(r, iq, start, limit, &pend, &npend);
        if (!rc && npend && !(each = calloc(npend, sizeof *each))) rc = JR_ENOMEM;
        for (size_t i = 0; !rc && i < npend; i++)
            rc = jr_redis_xrange_between(r, k.ready, pend[i].entry, pend[i].entry, 1, &each[i]);
    } else if (finished) { /* newest first; the cursor is the last record shown */
        rc = jr_redis_finished_page(r, iq, after, limit, &b, dnext, sizeof dnext);
    } else {
        rc = jr_redis_xrange_between(r, k.dead, start, "+", limit, &b);
    }
    if (rc) {
        fprintf(stderr, "jobrunner jobs: %s\n", rc == JR_ENOMEM ? "out of memory" : jr_cli_esc(jr_redis_errstr(r)));
        status = 1;
        goto out;
    }
    size_t total = running ? npend : b.n;
    v = calloc(total ? total : 1, sizeof *v);
    mv = calloc(total ? total * MP_ITEMS : 1, sizeof *mv);
    ml = calloc(total ? total * MP_ITEMS : 1, sizeof *ml);
    shown = nparts > 1 ? calloc(total ? total : 1, sizeof *shown) : NULL;
    if (!v || !mv || !ml || (nparts > 1 && !shown)) {
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
            const char *id = l->e ? jr_cli_field(l->e, JR_F_ID, &len) : NULL;
            l->id = id ? id : l->where, l->id_len = id ? len : strlen(l->where);
        }
        if (shown && l->id_len < JR_ID_MAX && jr_contract_id_reserved(l->id, l->id_len)) {
            snprintf(shown[n], sizeof shown[n], "%.*s~%d", (int)l->id_len, l->id, part);
            l->id = shown[n], l->id_len = strlen(shown[n]);
        }
        n++;
    }
    if (delayed || finished) { /* the cursor jr_delayed_page or jr_redis_finished_page returned */
        if (dnext[0]) snprintf(next, sizeof next, "%s", dnext), nextp = next;
    } else if ((int64_t)n == limit && n > 0) {
        snprintf(next, sizeof next, "%s", v[n - 1].where);
        nextp = next;
    }
    if (nparts > 1) { /* the cursor over the partitions */
        char inner[128];
        snprintf(inner, sizeof inner, "%s", nextp ? nextp : "");
        if (nextp) snprintf(next, sizeof next, "p%d:%.100s", part, inner), nextp = next;
        else if ((unsigned)part + 1 < nparts) snprintf(next, sizeof next, "p%d:", part + 1), nextp = next;
        if (n == 0 && (unsigned)part + 1 < nparts && !inner[0]) {
            status = -1; /* nothing here: the next partition */
            free(fake);
            goto out;
        }
    }
    if (flt) { /* --handler, --match: the page's jobs the filter passes */
        const jr_entry_t none = {0};
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            if (jr_filter_match_entry(flt, v[i].e ? v[i].e : &none)) v[kept++] = v[i];
        if (!json) {
            char ft[JR_ERRLEN];
            fprintf(out, "%zu of the page's %zu jobs%s\n", kept, n, jr_cli_filter_text(flt, ft, sizeof ft));
        }
        n = kept;
    }
    status = print_page(out, state, queue, v, n, nextp, json, limit_cols) ? 1 : 0;
    free(fake);
out:
    free(v), free(mv), free(ml), free(shown);
    for (size_t i = 0; each && i < npend; i++) jr_batch_free(&each[i]);
    free(each), free(pend);
    jr_batch_free(&b);
    jr_redis_free(r);
    return jr_cli_done(out, status);
}

/* The queue of a job command: its one -q, else enqueue.queue. NULL after
 * the usage error of more than one -q. */
static const char *one_queue(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, const jr_config_t *cfg) {
    if (f->queues.n > 1) {
        jr_cli_die(cmd->name, "%s", "takes one -q");
        return NULL;
    }
    return f->queues.n ? f->queues.v[0] : cfg->default_queue;
}

/* `jobrunner job run-now|delete --state S --handler H [--match TEXT]`:
 * every job in state S (delayed, retrying or dead) of the queue the filter
 * passes, after jr_cli_confirm, through jr_bulk (page by page). Prints how
 * many it changed of how many matched. Returns the exit status. */
static int cmd_job_bulk(const jr_config_t *cfg, const char *queue, const char *sub, const char *state_name,
                        const jr_filter_t *flt, int yes, FILE *out) {
    int state = jr_bulk_state_parse(state_name), run_now = !strcmp(sub, "run-now"), status;
    if (state < 0) return jr_cli_die2("job", "--state", state_name, "must be delayed, retrying or dead");
    char what[2 * JR_ERRLEN], ft[JR_ERRLEN], cmd[32];
    jr_cli_filter_text(flt, ft, sizeof ft);
    snprintf(what, sizeof what, "%s every %s job of queue %s%s", run_now ? "run now" : "delete", state_name,
             jr_cli_esc(queue), ft);
    snprintf(cmd, sizeof cmd, "job %s", sub);
    if ((status = jr_cli_confirm(cmd, yes, what))) return status;
    jr_redis_t *r = jr_cli_connect(cfg, 1);
    if (!r) return 1;
    jr_bulk_result_t res;
    int rc = jr_bulk(r, queue, (jr_bulk_state_t)state, run_now ? JR_BULK_RUN_NOW : JR_BULK_DELETE, flt, NULL, 0, NULL,
                     &res);
    if (rc) {
        fprintf(stderr, "jobrunner job %s: %s (after %lld of %lld changed)\n", sub, jr_cli_esc(jr_redis_errstr(r)),
                res.acted, res.matched);
    } else {
        const char *done = !run_now ? "deleted" : state == JR_BULK_DEAD ? "re-enqueued" : "made ready";
        fprintf(out, "%s %lld %s job%s%s (%lld matched of %lld looked at)\n", done, res.acted, state_name,
                res.acted == 1 ? "" : "s", ft, res.matched, res.seen);
    }
    jr_redis_free(r);
    return jr_cli_done(out, rc ? 1 : 0);
}

int jr_cli_job(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    const char *queue = one_queue(cmd, f, cfg), *name = cmd->name;
    if (!queue) return 2;
    jr_filter_t flt;
    int filtered = jr_cli_filter(f, &flt);
    if (filtered || jr_flag(f, JR_O_STATE) || jr_flag(f, JR_O_YES)) {
        if (argc != 1 || (strcmp(argv[0], "run-now") && strcmp(argv[0], "delete")))
            return jr_cli_die(name, "%s", "expected run-now|delete --state STATE --handler H [--match TEXT] (no ID)");
        if (!filtered || !jr_flag(f, JR_O_STATE))
            return jr_cli_die(name, "%s", "a bulk takes --state delayed|retrying|dead and --handler H and/or --match TEXT");
        if (jr_flag(f, JR_O_JSON) || jr_flag(f, JR_O_KEY)) return jr_cli_die(name, "%s", "--json and --key go with one ID");
        return cmd_job_bulk(cfg, queue, argv[0], f->v[JR_O_STATE], &flt, jr_flag(f, JR_O_YES), stdout);
    }
    if (argc != 2) return jr_cli_die(name, "%s", "expected show|run-now|delete|wait ID");
    const char *sub = argv[0], *id = argv[1];
    const char *rule = jr_contract_stored_id(id, strlen(id));
    if (rule) return jr_cli_die2(name, "job id", id, rule);
    if (jr_flag(f, JR_O_ALL_QUEUES)) {
        if (strcmp(sub, "show") || f->queues.n || jr_flag(f, JR_O_KEY))
            return jr_cli_die(name, "%s", "--all-queues goes with job show ID (without -q and --key)");
        return cmd_job_show_all(cfg, id, jr_flag(f, JR_O_JSON), stdout);
    }
    if (f->v[JR_O_TIMEOUT] && strcmp(sub, "wait")) return jr_cli_die(name, "%s", "--timeout applies to job wait");
    if (!strcmp(sub, "show")) return cmd_job_show(cfg, queue, id, f->v[JR_O_KEY], jr_flag(f, JR_O_JSON), stdout);
    if (!strcmp(sub, "wait")) {
        int64_t timeout_ms = JR_DELAY_MAX_MS; /* no --timeout: as long as it takes (10 years at most) */
        char why[JR_ERRLEN];
        if (f->v[JR_O_TIMEOUT] &&
            jr_duration_parse_range(f->v[JR_O_TIMEOUT], 1, JR_DELAY_MAX_MS, &timeout_ms, why, sizeof why))
            return jr_cli_die2(name, "--timeout", f->v[JR_O_TIMEOUT], why);
        return cmd_job_wait(cfg, queue, id, f->v[JR_O_KEY], timeout_ms, jr_flag(f, JR_O_JSON), stdout);
    }
    if (jr_flag(f, JR_O_JSON)) return jr_cli_die(name, "%s", "--json applies to job show and job wait");
    if (!strcmp(sub, "run-now") || !strcmp(sub, "delete"))
        return cmd_job_change(cfg, queue, sub, id, f->v[JR_O_KEY], stdout);
    return jr_cli_die(name, "unknown subcommand \"%s\" (show, run-now, delete or wait)", sub);
}

int jr_cli_jobs(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)argc, (void)argv;
    const char *queue = one_queue(cmd, f, cfg), *limit_s = f->v[JR_O_LIMIT];
    if (!queue) return 2;
    int64_t limit = 100;
    if (!f->v[JR_O_STATE]) return jr_cli_die(cmd->name, "%s", "--state delayed|ready|running|dead|finished is required");
    static const char *const states[] = {"delayed", "ready", "running", "dead", "finished", NULL};
    size_t si = 0;
    while (states[si] && strcmp(states[si], f->v[JR_O_STATE])) si++;
    if (!states[si]) /* a usage error before any connection (exit 2, whether Redis answers or not) */
        return jr_cli_die2(cmd->name, "--state", f->v[JR_O_STATE], "must be delayed, ready, running, dead or finished");
    if (limit_s && jr_cli_parse_count(limit_s, 1, 10000, &limit))
        return jr_cli_die2(cmd->name, "--limit", limit_s, "must be an integer from 1 to 10000");
    /* A partitioned queue: pages over its partitions in turn, the cursor
     * "p<partition>:<cursor in it>" */
    jr_redis_t *r = jr_cli_connect(cfg, 0);
    if (!r) return 1;
    jr_partmap_t parts = {0};
    jr_qpart_t *qp;
    if (jr_cli_unknown_queues(r, "jobs", &queue, 1, 1)) {
        jr_redis_free(r);
        return 1;
    }
    if (jr_partmap_get(&parts, r, queue, &qp)) {
        fprintf(stderr, "jobrunner jobs: %s\n", jr_cli_esc(jr_redis_errstr(r)));
        jr_partmap_free(&parts);
        jr_redis_free(r);
        return 1;
    }
    jr_redis_free(r);
    const char *after = f->v[JR_O_AFTER];
    unsigned part = 0;
    if (qp->n > 1 && after) {
        char *end = NULL;
        unsigned long p = after[0] == 'p' ? strtoul(after + 1, &end, 10) : ULONG_MAX;
        if (p == ULONG_MAX || end == after + 1 || *end != ':' || p >= qp->n) {
            jr_partmap_free(&parts);
            return jr_cli_die2(cmd->name, "--after", after, "is not a cursor of this queue's pages (p<partition>:...)");
        }
        part = (unsigned)p;
        after = end[1] ? end + 1 : NULL;
    }
    jr_filter_t flt;
    int filtered = jr_cli_filter(f, &flt);
    int st;
    do
        st = cmd_jobs(cfg, queue, jr_qpart_name(qp, part), (int)part, qp->n, f->v[JR_O_STATE], limit, after,
                      filtered ? &flt : NULL, jr_flag(f, JR_O_JSON), jr_table_limit(stdout, jr_flag(f, JR_O_WIDE)),
                      stdout);
    while (st == -1 && (after = NULL, ++part < qp->n));
    jr_partmap_free(&parts);
    return st;
}

int jr_cli_cancel(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    const char *queue = one_queue(cmd, f, cfg);
    if (!queue) return 2;
    if (argc < 1) return jr_cli_die(cmd->name, "%s", "name one or more job ids");
    return cmd_cancel(cfg, queue, argv, (size_t)argc, f->v[JR_O_KEY], stdout);
}
