/* Golden tests of every --json output and of JSON log lines: the real CLI
 * and worker against a real redis-server, the output parsed back with
 * jansson and compared with the expected structure. Text that is not UTF-8
 * comes back as {"base64": ...} (README, "JSON output"). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "redis_admin.h"
#include "util.h"

JRT_RECORDED_SUITE(json, .timeout = 90);
static char out[1 << 16], err[8192];

/* `s` as exactly one JSON document (trailing text is refused). */
static json_t *parse(const char *s) {
    json_error_t e;
    json_t *j = json_loads(s, JSON_ALLOW_NUL, &e);
    cr_assert(j, "not one JSON document (%s at %d): %s", e.text, e.position, s);
    return j;
}

/* got equals the JSON value want_text (any value, not only a document). */
static void expect_json(json_t *got, const char *want_text, const char *what) {
    json_error_t e;
    json_t *want = json_loads(want_text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    cr_assert(want, "bad expected JSON (%s): %s", e.text, want_text);
    char *g = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
    cr_expect(json_equal(got, want), "%s: got %s, want %s", what, g ? g : "(null)", want_text);
    free(g);
    json_decref(want);
}

/* Payloads of every kind, each with the JSON it must come back as. */
static const struct {
    const char *id, *bytes;
    size_t n;
    const char *json;
} payloads[] = {
    {"utf8", "caf\xc3\xa9 \xe2\x98\x95", 9, "\"caf\xc3\xa9 \xe2\x98\x95\""},
    {"escapes", "\"q\\ \n\t\x01</", 9, "\"\\\"q\\\\ \\n\\t\\u0001</\""},
    {"nul", "a\0b", 3, "\"a\\u0000b\""},
    {"fffe", "\xff\xfe", 2, "{\"base64\":\"//4=\"}"},
    {"lone-continuation", "\x80", 1, "{\"base64\":\"gA==\"}"},
    {"continuation-inside", "x\x80y", 3, "{\"base64\":\"eIB5\"}"},
    {"overlong", "\xc0\xaf", 2, "{\"base64\":\"wK8=\"}"},
    {"surrogate", "\xed\xa0\x80", 3, "{\"base64\":\"7aCA\"}"},
    {"above-max", "\xf4\x90\x80\x80", 4, "{\"base64\":\"9JCAgA==\"}"},
    {"empty", "", 0, "\"\""},
};
#define NPAYLOADS (sizeof payloads / sizeof *payloads)

static void write_config(char *cfg, size_t len, const char *format) {
    snprintf(cfg, len, "%s/jr.yaml", R.dir);
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fprintf(f, "redis:\n  url: %s\nlog:\n  format: %s\n", R.url, format);
    fclose(f);
}

/* Enqueue `handler` with id and payload bytes (through stdin: any byte). */
static void enqueue(const char *cfg, const char *handler, const char *id, const char *bytes, size_t n) {
    char pfile[192], cmd[1024];
    snprintf(pfile, sizeof pfile, "%s/payload", R.dir);
    FILE *f = fopen(pfile, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s enqueue -c %s --id '%s' %s - < %s > /dev/null", JRT_JOBRUNNER, cfg, id,
             handler, pfile);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static json_t *run_json(int status, const char *const *args) {
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, args), status, "%s %s: %s", args[0], args[1], err);
    return parse(out);
}

Test(json, stats_is_one_object_with_numbers) {
    char cfg[192];
    write_config(cfg, sizeof cfg, "text");
    const char *a[] = {"enqueue", "-c", cfg, "echo", "x", NULL};
    const char *b[] = {"enqueue", "-c", cfg, "-q", "other", "--in", "1h", "echo", "y", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, a), 0, "%s", err);
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, a), 0, "%s", err);
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, b), 0, "%s", err);
    const char *stats[] = {"stats", "-c", cfg, "-q", "default", "-q", "other", "--json", NULL};
    json_t *j = run_json(0, stats);
    /* The oldest ready job's age moves: a non-negative number, or null. */
    json_t *qs = json_object_get(j, "queues");
    json_t *age = json_object_get(json_array_get(qs, 0), "oldest_ready_ms");
    cr_expect(json_is_integer(age) && json_integer_value(age) >= 0, "oldest_ready_ms of a queue with ready jobs");
    cr_expect(json_is_null(json_object_get(json_array_get(qs, 1), "oldest_ready_ms")), "oldest_ready_ms of none");
    json_object_del(json_array_get(qs, 0), "oldest_ready_ms");
    json_object_del(json_array_get(qs, 1), "oldest_ready_ms");
    expect_json(j,
                "{\"queues\":[{\"queue\":\"default\",\"ready\":2,\"pending\":0,\"delayed\":0,\"dead\":0,\"paused\":false,"
                "\"processed\":0,\"failed\":0,\"jobs_per_second\":0.0},"
                "{\"queue\":\"other\",\"ready\":0,\"pending\":0,\"delayed\":1,\"dead\":0,\"paused\":false,"
                "\"processed\":0,\"failed\":0,\"jobs_per_second\":0.0}]}",
                "stats --json");
    json_decref(j);
    const char *none[] = {"stats", "-c", cfg, "-q", "empty", "--json", NULL};
    j = run_json(0, none);
    expect_json(j, "{\"queues\":[{\"queue\":\"empty\",\"ready\":0,\"pending\":0,\"delayed\":0,\"dead\":0,\"paused\":false,"
                   "\"processed\":0,\"failed\":0,\"jobs_per_second\":0.0,\"oldest_ready_ms\":null}]}",
                "stats --json of an empty queue");
    json_decref(j);
}

/* processed and failed totals and the rate move as a worker runs jobs. */
Test(json, stats_counts_processed_and_failed_jobs_and_the_rate) {
    char cfg[192];
    write_config(cfg, sizeof cfg, "text");
    for (int i = 0; i < 6; i++) {
        char id[8];
        snprintf(id, sizeof id, "r%d", i);
        enqueue(cfg, "record", id, "x", 1);
    }
    const char *f[] = {"enqueue", "-c", cfg, "fail", "y", NULL}; /* JR_RESULT_FAIL: dead at once */
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, f), 0, "%s", err);
    pid_t s = jrt_scheduler(&R, cfg, NULL);
    pid_t w = jrt_worker(&R, cfg, NULL, wlog, NULL);
    jr_qstats_t st = {0};
    for (int waited = 0; waited < 20000 && ((st = jrt_stats(&R, "default")).dead < 1 || st.processed < 6); waited += 50)
        jrt_sleep_ms(50);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 10000), 0);
    const char *stats[] = {"stats", "-c", cfg, "-q", "default", "--json", NULL};
    json_t *j = run_json(0, stats), *q = json_array_get(json_object_get(j, "queues"), 0);
    cr_expect_eq(json_integer_value(json_object_get(q, "processed")), 6, "processed");
    cr_expect_eq(json_integer_value(json_object_get(q, "failed")), 1, "failed: the permanent failure");
    double rate = json_real_value(json_object_get(q, "jobs_per_second"));
    cr_expect(rate > 0.09 && rate < 0.11, "jobs_per_second over the last minute: 6/60, got %f", rate);
    json_decref(j);
}

/* The element of a dead list with field id = `id`, or NULL. */
static json_t *by_id(json_t *arr, const char *id) {
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        json_t *v = json_object_get(e, "id");
        if (json_is_string(v) && !strcmp(json_string_value(v), id)) return e;
    }
    return NULL;
}

Test(json, dead_list_and_show_print_one_array_and_payloads_come_back_exactly) {
    char cfg[192];
    write_config(cfg, sizeof cfg, "text");
    for (size_t i = 0; i < NPAYLOADS; i++) enqueue(cfg, "fail", payloads[i].id, payloads[i].bytes, payloads[i].n);
    pid_t w = jrt_worker(&R, cfg, NULL, wlog, NULL);
    long long dead = 0;
    for (int waited = 0; waited < 20000 && dead < (long long)NPAYLOADS; waited += 50) {
        dead = jrt_stats(&R, "default").dead;
        if (dead < (long long)NPAYLOADS) jrt_sleep_ms(50);
    }
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_eq(dead, (long long)NPAYLOADS, "jobs did not all die");

    const char *list[] = {"dead", "list", "-c", cfg, "--json", NULL};
    json_t *all = run_json(0, list);
    cr_assert(json_is_array(all));
    cr_assert_eq(json_array_size(all), NPAYLOADS);
    for (size_t i = 0; i < NPAYLOADS; i++) {
        json_t *e = by_id(all, payloads[i].id);
        cr_assert(e, "no dead job %s in %s", payloads[i].id, out);
        expect_json(json_object_get(e, "p"), payloads[i].json, payloads[i].id);
        expect_json(json_object_get(e, "h"), "\"fail\"", "handler");
        expect_json(json_object_get(e, "err"), "\"refused by test (permanent failure)\"", "err");
        expect_json(json_object_get(e, "why"), "\"failed\"", "why");
        const char *entry = json_string_value(json_object_get(e, "entry"));
        cr_assert(entry);
        char t[JR_TIME_LEN];
        jr_time_format(strtoll(entry, NULL, 10), t);
        cr_expect_str_eq(json_string_value(json_object_get(e, "dead_at")), t);
        cr_expect(!json_object_get(e, "other_fields"));
    }

    /* show: an array even for one id; several ids, one document */
    const char *one[] = {"dead", "show", "-c", cfg, "--json", "utf8", NULL};
    json_t *j = run_json(0, one);
    cr_assert(json_is_array(j) && json_array_size(j) == 1, "%s", out);
    cr_expect(json_equal(json_array_get(j, 0), by_id(all, "utf8")), "%s", out);
    cr_expect(strstr(out, "caf\xc3\xa9 \xe2\x98\x95"), "UTF-8 is printed as is: %s", out);
    json_decref(j);
    const char *two[] = {"dead", "show", "-c", cfg, "--json", "utf8", "fffe", "nul", NULL};
    j = run_json(0, two);
    cr_assert(json_is_array(j) && json_array_size(j) == 3, "%s", out);
    const char *ids[] = {"utf8", "fffe", "nul"};
    for (size_t k = 0; k < 3; k++) cr_expect(json_equal(by_id(j, ids[k]), by_id(all, ids[k])), "%s", ids[k]);
    json_decref(j);
    /* a missing id: an error on stderr, exit 1, still one document */
    const char *missing[] = {"dead", "show", "-c", cfg, "--json", "utf8", "nosuch", NULL};
    j = run_json(1, missing);
    cr_expect(json_is_array(j) && json_array_size(j) == 1, "%s", out);
    cr_expect(strstr(err, "nosuch"), "%s", err);
    json_decref(j);
    /* --json is for list and show only */
    const char *purge[] = {"dead", "purge", "-c", cfg, "--json", "--all", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, purge), 2, "%s", err);
    json_decref(all);
}

Test(json, dead_fields_that_are_not_plain_names_are_kept_in_other_fields) {
    char cfg[192];
    write_config(cfg, sizeof cfg, "text");
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommand(c, "XADD jr:{default}:dead 5-1 id g1 h x %b v h again entry e why invalid",
                                   "n\xff" "ame", (size_t)5);
    cr_assert(rep && rep->type == REDIS_REPLY_STRING);
    freeReplyObject(rep);
    redisFree(c);
    const char *list[] = {"dead", "list", "-c", cfg, "--json", NULL};
    json_t *j = run_json(0, list);
    char t[JR_TIME_LEN];
    jr_time_format(5, t);
    char want[512];
    snprintf(want, sizeof want,
             "[{\"entry\":\"5-1\",\"dead_at\":\"%s\",\"id\":\"g1\",\"h\":\"x\",\"why\":\"invalid\","
             "\"other_fields\":[[{\"base64\":\"bv9hbWU=\"},\"v\"],[\"h\",\"again\"],[\"entry\",\"e\"]]}]",
             t);
    expect_json(j, want, "dead list --json");
    json_decref(j);
    const char *show[] = {"dead", "show", "-c", cfg, "--json", "5-1", NULL};
    j = run_json(0, show);
    expect_json(j, want, "dead show --json by entry id");
    json_decref(j);
}

/* Every line of a JSON-format worker log is one JSON object, also for a job
 * whose id and payload are hostile; numeric keys are numbers. */
Test(json, every_json_log_line_parses) {
    char cfg[192];
    write_config(cfg, sizeof cfg, "json");
    enqueue(cfg, "record", "\xff\"q\\\n", "\xff\xfe\x80", 3);
    enqueue(cfg, "fail", "caf\xc3\xa9 \xe2\x98\x95", "a\0b", 3);
    enqueue(cfg, "nosuch", "x\x80y", "p", 1);
    pid_t w = jrt_worker(&R, cfg, NULL, wlog, NULL);
    int finished = 0;
    for (int waited = 0; waited < 20000 && finished < 2; waited += 50) {
        finished = jrt_count(wlog, "\"msg\":\"job finished\"");
        if (finished < 2) jrt_sleep_ms(50);
    }
    jrt_sleep_ms(300); /* let the unknown handler's line be written too */
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_eq(finished, 2, "%s", jrt_slurp(wlog));

    char *log = jrt_slurp(wlog);
    int lines = 0, hostile = 0, cafe = 0;
    for (char *line = log, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        cr_assert(nl, "the last line is not terminated: %s", line);
        *nl = '\0';
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        cr_assert(json_is_object(j), "not a JSON object (%s): %s", e.text, line);
        cr_expect(json_is_string(json_object_get(j, "time")) && json_is_string(json_object_get(j, "level")) &&
                      json_is_integer(json_object_get(j, "pid")) && json_object_get(j, "msg"),
                  "%s", line);
        json_t *job = json_object_get(j, "job");
        if (job && json_object_get(j, "attempt")) {
            cr_expect(json_is_integer(json_object_get(j, "attempt")), "attempt is a number: %s", line);
            cr_expect(json_is_number(json_object_get(j, "duration_ms")), "duration_ms is a number: %s", line);
            /* written as the worker wrote it (3 decimals), not 5.8499999999999996 */
            const char *d = strstr(line, "\"duration_ms\":");
            size_t digits = d ? strcspn(d + 14, ",}") : 0;
            cr_expect(d && digits > 0 && digits <= 14, "duration_ms printed exactly: %s", line);
        }
        json_t *want = parse("{\"base64\":\"/yJxXAo=\"}");
        hostile += job && json_equal(job, want);
        json_decref(want);
        cafe += json_is_string(job) && !strcmp(json_string_value(job), "caf\xc3\xa9 \xe2\x98\x95");
        json_decref(j);
        lines++;
    }
    cr_expect_gt(lines, 3);
    cr_expect_geq(hostile, 1, "the non-UTF-8 job id as base64: %s", log);
    cr_expect_geq(cafe, 1, "the UTF-8 job id as is");
    free(log);
}
