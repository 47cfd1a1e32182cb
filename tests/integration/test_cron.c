/* Periodic jobs with real schedulers on a real redis-server: each tick's job
 * exactly once whatever runs or dies, never due before its tick, missed
 * ticks after an outage (skip | once), schedules added and removed at run
 * time, and `cron list` in text and JSON. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "jr.h"

static jrt_redis_t R;

static void setup(void) { jrt_redis_start(&R, NULL); }
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(cron, .init = setup, .fini = teardown, .timeout = 240);

/* Scheduler i, its output in R.dir/scheduler<i>.log. */
static pid_t start_scheduler(int i) {
    char name[32];
    snprintf(name, sizeof name, "scheduler%d.log", i);
    return jrt_scheduler(&R, NULL, jrt_path(&R, name));
}

static void cli(int want, const char *const *args) { jrt_run_expect(want, NULL, 0, args); }

static void add_every(const char *name, const char *queue, const char *missed) {
    const char *args[] = {"cron", "add", name, "--every", "1s", "-q", queue, "--missed", missed,
                          "--redis", R.url, "echo", "{}", NULL};
    cli(0, args);
}

/* A tick's job as found in the ready stream. */
typedef struct {
    int64_t tick;     /* from the id NAME@TICK */
    int64_t entry_ms; /* when it entered the ready stream (its entry id) */
} tick_t;

static int cmp_tick(const void *a, const void *b) {
    int64_t x = ((const tick_t *)a)->tick, y = ((const tick_t *)b)->tick;
    return x < y ? -1 : x > y;
}

/* The jobs of schedule `name` in queue's ready stream, sorted by tick. The
 * test fails if one tick has two jobs. */
static size_t ticks_of(const char *queue, const char *name, tick_t *out, size_t max) {
    redisContext *c = jrt_connect(&R);
    redisReply *r = redisCommand(c, "XRANGE jr:{%s}:ready - +", queue);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY);
    size_t n = 0, len = strlen(name);
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i], *f = e->element[1];
        for (size_t j = 0; j + 1 < f->elements; j += 2) {
            const char *v = f->element[j + 1]->str;
            if (strcmp(f->element[j]->str, "id") || strncmp(v, name, len) || v[len] != '@') continue;
            cr_assert_lt(n, max);
            out[n].tick = strtoll(v + len + 1, NULL, 10);
            out[n].entry_ms = strtoll(e->element[0]->str, NULL, 10);
            n++;
        }
    }
    freeReplyObject(r);
    redisFree(c);
    qsort(out, n, sizeof *out, cmp_tick);
    for (size_t i = 1; i < n; i++)
        cr_assert_neq(out[i].tick, out[i - 1].tick, "%s: tick %lld has two jobs", name, (long long)out[i].tick);
    return n;
}

/* Ticks first..last are all there, 1 s apart, and no job entered the ready
 * stream before its tick. */
static void expect_consecutive(const char *name, const tick_t *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        cr_expect_geq(t[i].entry_ms, t[i].tick, "%s: the job of tick %lld was ready at %lld, before its tick", name,
                      (long long)t[i].tick, (long long)t[i].entry_ms);
        if (i) cr_expect_eq(t[i].tick - t[i - 1].tick, 1000, "%s: ticks missing between %lld and %lld", name,
                            (long long)t[i - 1].tick, (long long)t[i].tick);
    }
}

/* Three schedulers, a 1 s `every` and a `* * * * * *` schedule for ~10 s;
 * one scheduler is SIGKILLed halfway: each tick's job exactly once, none
 * missing, none ready before its tick. */
Test(cron, three_schedulers_one_killed_each_tick_once) {
    add_every("e1", "cq", "skip");
    const char *args[] = {"cron", "add", "c1", "--cron", "* * * * * *", "--tz", "Europe/Berlin", "-q", "cq",
                          "--redis", R.url, "echo", NULL};
    cli(0, args);
    pid_t s[3];
    for (int i = 0; i < 3; i++) s[i] = start_scheduler(i);
    jrt_sleep_ms(5000);
    jrt_stop(s[1], SIGKILL, 5000);
    jrt_sleep_ms(5000);
    jrt_stop(s[0], SIGTERM, 10000);
    jrt_sleep_ms(1500); /* the last scheduler promotes anything still delayed */
    jrt_stop(s[2], SIGTERM, 10000);
    tick_t t[64];
    const char *names[] = {"e1", "c1"};
    for (int k = 0; k < 2; k++) {
        size_t n = ticks_of("cq", names[k], t, 64);
        cr_expect_geq(n, 8, "%s: only %zu ticks fired in ~10 s", names[k], n);
        expect_consecutive(names[k], t, n);
    }
    cr_expect_eq(jrt_stats(&R, "cq").delayed, 0);
}

/* A scheduler stopped (SIGSTOP: a paused VM, a partition) for longer than
 * the ticks' idempotency window, while another fires: when it runs again
 * it fires none of those ticks a second time. The window (a day) is
 * played by deleting the ticks' idempotency keys while it is stopped. */
Test(cron, a_scheduler_away_past_the_window_fires_no_tick_again) {
    add_every("aw", "cq", "skip");
    pid_t a = start_scheduler(0), b = start_scheduler(1);
    jrt_sleep_ms(1500);
    cr_assert_eq(kill(b, SIGSTOP), 0);
    jrt_sleep_ms(4000);
    redisContext *c = jrt_connect(&R);
    redisReply *keys = jrt_cmd(c, "KEYS", "jr:{cq}:uniq:aw@*", NULL);
    cr_assert(keys->type == REDIS_REPLY_ARRAY && keys->elements >= 3, "the ticks' idempotency keys");
    for (size_t i = 0; i < keys->elements; i++) freeReplyObject(jrt_cmd(c, "DEL", keys->element[i]->str, NULL));
    freeReplyObject(keys);
    redisFree(c);
    cr_assert_eq(kill(b, SIGCONT), 0);
    jrt_sleep_ms(2500);
    jrt_stop(a, SIGTERM, 10000);
    jrt_stop(b, SIGTERM, 10000);
    tick_t t[64];
    size_t n = ticks_of("cq", "aw", t, 64); /* fails on a tick with two jobs */
    cr_expect_geq(n, 6, "only %zu ticks fired in ~8 s", n);
    expect_consecutive("aw", t, n);
}

/* The same skip never trusts a recorded tick later than now (garbage
 * written by hand): one scheduler stopped for 2.5 s with such a record
 * goes on firing when it runs again, its backlog included. */
Test(cron, a_future_last_fired_record_does_not_silence_a_schedule) {
    add_every("fu", "cq", "skip");
    pid_t a = start_scheduler(0);
    jrt_sleep_ms(1500);
    cr_assert_eq(kill(a, SIGSTOP), 0);
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{cron}:last", "fu", "99999999999999 fu@99999999999999", NULL));
    redisFree(c);
    jrt_sleep_ms(2500);
    cr_assert_eq(kill(a, SIGCONT), 0);
    jrt_sleep_ms(2500);
    jrt_stop(a, SIGTERM, 10000);
    tick_t t[64];
    size_t n = ticks_of("cq", "fu", t, 64);
    cr_expect_geq(n, 5, "only %zu ticks fired in ~6.5 s", n);
    expect_consecutive("fu", t, n);
}

/* All schedulers down for ~5 s: `skip` fires nothing for the missed ticks,
 * `once` one job for the latest of them; then both tick on. */
Test(cron, missed_ticks_skip_and_once) {
    add_every("sk", "mq", "skip");
    add_every("on", "mq", "once");
    pid_t s = start_scheduler(0);
    jrt_sleep_ms(3000);
    jrt_stop(s, SIGTERM, 10000);
    tick_t a[64], b[64];
    size_t na = ticks_of("mq", "sk", a, 64), nb = ticks_of("mq", "on", b, 64);
    cr_assert(na >= 1 && nb >= 1, "no tick before the outage");
    int64_t last_sk = a[na - 1].tick, last_on = b[nb - 1].tick;
    jrt_sleep_ms(5000);
    s = start_scheduler(1);
    jrt_sleep_ms(3000);
    jrt_stop(s, SIGTERM, 10000);
    size_t ma = ticks_of("mq", "sk", a, 64), mb = ticks_of("mq", "on", b, 64);
    cr_assert(ma > na && mb > nb, "nothing fired after the outage");
    /* skip: a gap of at least the outage, then consecutive ticks. */
    cr_expect_geq(a[na].tick - last_sk, 5000, "skip fired a missed tick: %lld after %lld", (long long)a[na].tick,
                  (long long)last_sk);
    expect_consecutive("sk", a + na, ma - na);
    /* once: one catch-up job, the tick just before skip's first regular one. */
    cr_expect_gt(b[nb].tick - last_on, 3000, "once: more than one missed tick fired");
    cr_expect_eq(b[nb].tick, a[na].tick - 1000, "once: the catch-up is not the latest missed tick");
    cr_expect_eq(b[nb + 1].tick, a[na].tick, "once: the regular ticks do not go on");
    expect_consecutive("on", b + nb, mb - nb);
    char log[256];
    snprintf(log, sizeof log, "%s/scheduler1.log", R.dir);
    cr_expect_eq(jrt_count(log, "for a missed tick"), 1);
}

/* A running scheduler picks up a schedule added, and stops firing one
 * removed, at once (jr:{cron}:wake). */
Test(cron, add_and_remove_reach_a_running_scheduler) {
    pid_t s = start_scheduler(0);
    jrt_sleep_ms(1000);
    add_every("rt", "rq", "skip");
    tick_t t[64];
    size_t n = 0;
    for (int i = 0; i < 100 && n < 2; i++, jrt_sleep_ms(100)) n = ticks_of("rq", "rt", t, 64);
    cr_assert_geq(n, 2, "the running scheduler did not fire the added schedule");
    const char *rm[] = {"cron", "remove", "rt", "--redis", R.url, NULL};
    cli(0, rm);
    jrt_sleep_ms(1500);
    n = ticks_of("rq", "rt", t, 64);
    jrt_sleep_ms(3000);
    cr_expect_eq(ticks_of("rq", "rt", t, 64), n, "the removed schedule still fires");
    jrt_stop(s, SIGTERM, 10000);
}

/* `cron list`: text and JSON, with next firing (UTC, local), last fired. */
Test(cron, list_text_and_json) {
    add_every("ev", "lq", "once");
    const char *a2[] = {"cron", "add", "nightly", "--cron", "0 2 * * *", "--tz", "Europe/Berlin", "--disabled",
                        "--redis", R.url, "report", NULL};
    cli(0, a2);
    /* a line longer than 127 bytes is listed whole (it once was cut there) */
    const char *busy_cron = "0,3,6,9,12,15,18,21,24,27,30,33,36,39,42,45,48,51,54,57 "
                            "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23 * 1,2,3,4,5,6,7,8,9,10,11,12 *";
    const char *a3[] = {"cron", "add", "busy", "--cron", busy_cron, "--disabled", "--redis", R.url, "report", NULL};
    cli(0, a3);
    pid_t s = start_scheduler(0);
    tick_t t[64];
    for (int i = 0; i < 100 && ticks_of("lq", "ev", t, 64) < 1; i++) jrt_sleep_ms(100);
    jrt_stop(s, SIGTERM, 10000);
    char out[8192], err[1024];
    const char *ls[] = {"cron", "list", "--redis", R.url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, ls), 0, "%s", err);
    cr_expect(strstr(out, "NAME") && strstr(out, "every 1s") && strstr(out, "0 2 * * *") &&
                  strstr(out, "Europe/Berlin") && strstr(out, "ev@") && strstr(out, busy_cron),
              "%s", out);
    const char *lj[] = {"cron", "list", "--json", "--redis", R.url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, lj), 0, "%s", err);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    cr_assert_not_null(doc, "%s: %s", out, je.text);
    json_t *arr = json_object_get(doc, "schedules");
    cr_assert_eq(json_array_size(arr), 3, "%s", out);
    json_t *bu = json_array_get(arr, 0), *ev = json_array_get(arr, 1), *ni = json_array_get(arr, 2);
    cr_expect_str_eq(json_string_value(json_object_get(bu, "cron")), busy_cron);
    cr_expect_str_eq(json_string_value(json_object_get(ev, "name")), "ev");
    cr_expect_eq(json_integer_value(json_object_get(ev, "every_ms")), 1000);
    cr_expect_str_eq(json_string_value(json_object_get(ev, "missed")), "once");
    cr_expect_str_eq(json_string_value(json_object_get(ev, "queue")), "lq");
    cr_expect_str_eq(json_string_value(json_object_get(ev, "handler")), "echo");
    cr_expect(json_is_true(json_object_get(ev, "enabled")));
    const char *job = json_string_value(json_object_get(ev, "last_job_id"));
    cr_expect(job && strncmp(job, "ev@", 3) == 0, "last_job_id %s", job ? job : "(null)");
    json_int_t last = json_integer_value(json_object_get(ev, "last_fired_ms"));
    cr_expect(job && strtoll(job + 3, NULL, 10) == last);
    cr_expect(json_is_string(json_object_get(ev, "next_utc")));
    cr_expect_str_eq(json_string_value(json_object_get(ni, "name")), "nightly");
    cr_expect_str_eq(json_string_value(json_object_get(ni, "cron")), "0 2 * * *");
    cr_expect_str_eq(json_string_value(json_object_get(ni, "timezone")), "Europe/Berlin");
    cr_expect(json_is_false(json_object_get(ni, "enabled")));
    cr_expect(json_is_null(json_object_get(ni, "last_fired_ms")));
    json_decref(doc);
    /* A disabled schedule fired nothing. */
    cr_expect_eq(jrt_stats(&R, "default").ready, 0);
}

/* Bad input: a clear message, exit 2, nothing stored. */
Test(cron, add_refuses_bad_input) {
    char out[4096], err[4096];
    const char *a1[] = {"cron", "add", "x", "--cron", "0 0 32 * *", "--redis", R.url, "h", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, a1), 2);
    cr_expect(strstr(err, "field 3 (day of month): 32 is out of 1-31"), "%s", err);
    const char *a2[] = {"cron", "add", "x", "--every", "1s", "--tz", "Mars/Base", "--redis", R.url, "h", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, a2), 2);
    cr_expect(strstr(err, "unknown zone \"Mars/Base\""), "%s", err);
    const char *a3[] = {"cron", "add", "x", "--every", "1s", "--cron", "* * * * *", "--redis", R.url, "h", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, a3), 2);
    cr_expect(strstr(err, "exactly one of --cron and --every"), "%s", err);
    const char *rm[] = {"cron", "remove", "nope", "--redis", R.url, NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, rm), 1);
    cr_expect(strstr(out, "nope not found"), "%s", out);
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_int(c, "EXISTS jr:{cron}"), 0);
    redisFree(c);
}

/* A scheduler upserts the schedules of its config's periodic: section. */
Test(cron, config_schedules_are_upserted) {
    char cfg[256];
    jrt_write(&R, "jr.yaml",
              "periodic:\n"
              "  - name: cfgtick\n"
              "    handler: echo\n"
              "    queue: pq\n"
              "    every: 1s\n"
              "  - name: report\n"
              "    handler: report\n"
              "    cron: \"30 2 * * *\"\n"
              "    timezone: America/New_York\n"
              "    missed: once\n",
              cfg, sizeof cfg);
    char log[256];
    snprintf(log, sizeof log, "%s/s.log", R.dir);
    const char *args[] = {"scheduler", "-c", cfg, "--redis", R.url, NULL};
    pid_t s = jrt_spawn(log, args);
    tick_t t[64];
    size_t n = 0;
    for (int i = 0; i < 100 && n < 2; i++, jrt_sleep_ms(100)) n = ticks_of("pq", "cfgtick", t, 64);
    jrt_stop(s, SIGTERM, 10000);
    cr_expect_geq(n, 2, "the configured schedule did not fire");
    char out[8192], err[1024];
    const char *ls[] = {"cron", "list", "--redis", R.url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, ls), 0, "%s", err);
    cr_expect(strstr(out, "cfgtick") && strstr(out, "America/New_York") && strstr(out, "30 2 * * *"), "%s", out);
}

/* The Redis functions refuse bad input whole, naming it, and change
 * nothing; jr_cron_fired only moves forward. */
Test(cron, functions_refuse_and_change_nothing) {
    redisContext *c = jrt_connect(&R);
    jr_redis_t *j = jrt_jr_connect(&R); /* loads the library */
    const char *good = "{\"handler\":\"h\",\"queue\":\"q\",\"timezone\":\"UTC\",\"every_ms\":1000}";
    static const char *const bad[][2] = {
        {"a b", "{\"handler\":\"h\",\"queue\":\"q\",\"timezone\":\"UTC\",\"every_ms\":1000}"},
        {"n", "not json"},
        {"n", "{\"handler\":\"\",\"queue\":\"q\",\"timezone\":\"UTC\",\"every_ms\":1000}"},
        {"n", "{\"handler\":\"h\",\"queue\":\"a b\",\"timezone\":\"UTC\",\"every_ms\":1000}"},
        {"n", "{\"handler\":\"h\",\"queue\":\"q\",\"timezone\":\"UTC\"}"},
        {"n", "{\"handler\":\"h\",\"queue\":\"q\",\"timezone\":\"UTC\",\"every_ms\":1000,\"cron\":\"* * * * *\"}"},
        {"n", "{\"handler\":\"h\",\"queue\":\"q\",\"timezone\":\"UTC\",\"every_ms\":10}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        redisReply *r = redisCommand(c, "FCALL jr_cron_set 2 jr:{cron} jr:{cron}:wake %s %s", bad[i][0], bad[i][1]);
        cr_expect(r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "jr_cron_set"), "case %zu accepted", i);
        freeReplyObject(r);
    }
    cr_expect_eq(jrt_int(c, "EXISTS jr:{cron} jr:{cron}:wake"), 0);
    redisReply *r = redisCommand(c, "FCALL jr_cron_set 2 jr:{cron} jr:{cron}:other n %s", good);
    cr_expect(r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "takes the keys"), "wrong key accepted");
    freeReplyObject(r);
    /* A wake key of the wrong type: refused before the HSET. */
    freeReplyObject(redisCommand(c, "SET jr:{cron}:wake x"));
    r = redisCommand(c, "FCALL jr_cron_set 2 jr:{cron} jr:{cron}:wake n %s", good);
    cr_expect(r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "holds a string"), "%s", r ? r->str : "");
    freeReplyObject(r);
    cr_expect_eq(jrt_int(c, "EXISTS jr:{cron}"), 0);
    freeReplyObject(redisCommand(c, "DEL jr:{cron}:wake"));
    cr_expect_eq(jrt_int(c, "FCALL jr_cron_set 2 jr:{cron} jr:{cron}:wake n %s", good), 1);
    cr_expect_eq(jrt_int(c, "FCALL jr_cron_set 2 jr:{cron} jr:{cron}:wake n %s", good), 0);
    cr_expect_eq(jrt_int(c, "XLEN jr:{cron}:wake"), 1);
    /* fired: only for a schedule that exists, only forward. */
    cr_expect_eq(jrt_int(c, "FCALL jr_cron_fired 2 jr:{cron} jr:{cron}:last nope 1000 nope@1000"), 0);
    cr_expect_eq(jrt_int(c, "FCALL jr_cron_fired 2 jr:{cron} jr:{cron}:last n 2000 n@2000"), 1);
    cr_expect_eq(jrt_int(c, "FCALL jr_cron_fired 2 jr:{cron} jr:{cron}:last n 1000 n@1000"), 0);
    r = redisCommand(c, "HGET jr:{cron}:last n");
    cr_expect_str_eq(r->str, "2000 n@2000");
    freeReplyObject(r);
    cr_expect_eq(jrt_int(c, "HEXISTS jr:{cron}:last nope"), 0);
    r = redisCommand(c, "FCALL jr_cron_fired 2 jr:{cron} jr:{cron}:last n x n@x");
    cr_expect(r && r->type == REDIS_REPLY_ERROR);
    freeReplyObject(r);
    cr_expect_eq(jrt_int(c, "FCALL jr_cron_del 3 jr:{cron} jr:{cron}:last jr:{cron}:wake n"), 1);
    cr_expect_eq(jrt_int(c, "FCALL jr_cron_del 3 jr:{cron} jr:{cron}:last jr:{cron}:wake n"), 0);
    cr_expect_eq(jrt_int(c, "EXISTS jr:{cron} jr:{cron}:last"), 0);
    jr_redis_free(j);
    redisFree(c);
}

/* `cron disable` stops a running scheduler firing a schedule and `cron
 * enable` starts it again; `cron fire` makes one job now, its id
 * NAME@fire-<us> (not a tick's NAME@TICK), every time anew. */
Test(cron, disable_enable_and_fire_now) {
    pid_t s = start_scheduler(0);
    add_every("de", "dq", "skip");
    tick_t t[64];
    size_t n = 0;
    for (int i = 0; i < 100 && n < 1; i++, jrt_sleep_ms(100)) n = ticks_of("dq", "de", t, 64);
    cr_assert_geq(n, 1, "the schedule did not fire");
    char out[4096];
    const char *off[] = {"cron", "disable", "de", "--redis", R.url, NULL};
    jrt_run_expect(0, out, sizeof out, off);
    cr_expect(strstr(out, "de disabled"), "%s", out);
    jrt_run_expect(0, out, sizeof out, off);
    cr_expect(strstr(out, "de was already disabled"), "%s", out);
    jrt_sleep_ms(1500); /* a tick in flight may still land */
    n = ticks_of("dq", "de", t, 64);
    jrt_sleep_ms(2500);
    cr_expect_eq(ticks_of("dq", "de", t, 64), n, "a disabled schedule still fires");
    const char *on[] = {"cron", "enable", "de", "--redis", R.url, NULL};
    jrt_run_expect(0, out, sizeof out, on);
    cr_expect(strstr(out, "de enabled"), "%s", out);
    size_t m = n;
    for (int i = 0; i < 100 && m <= n; i++, jrt_sleep_ms(100)) m = ticks_of("dq", "de", t, 64);
    cr_expect_gt(m, n, "an enabled schedule does not fire again");
    const char *nope[] = {"cron", "disable", "nosuch", "--redis", R.url, NULL};
    jrt_run_expect(1, out, sizeof out, nope);
    cr_expect(strstr(out, "nosuch not found"), "%s", out);
    jrt_stop(s, SIGTERM, 10000);

    /* fire now: no scheduler needed; a disabled schedule fires too */
    const char *add[] = {"cron", "add", "fn", "--cron", "0 0 1 1 *", "-q", "fq", "--disabled", "--redis", R.url,
                         "echo", "{\"x\":1}", NULL};
    cli(0, add);
    const char *fire[] = {"cron", "fire", "fn", "--redis", R.url, NULL};
    char first[4096];
    jrt_run_expect(0, first, sizeof first, fire);
    cr_assert(strstr(first, "fn fired: job fn@fire-"), "%s", first);
    jrt_run_expect(0, out, sizeof out, fire);
    cr_expect(strcmp(out, first), "two fires, one id: %s", out);
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_int(c, "XLEN jr:{fq}:ready"), 2, "two jobs ready now");
    redisFree(c);
    char id[JR_ID_MAX];
    snprintf(id, sizeof id, "%s", strstr(first, "job ") + 4);
    id[strcspn(id, "\n")] = '\0';
    const char *show[] = {"job", "show", "-q", "fq", id, "--redis", R.url, NULL};
    jrt_run_expect(0, out, sizeof out, show);
    cr_expect(strstr(out, "state: ready") && strstr(out, "{\"x\":1}"), "%s", out);
    const char *none[] = {"cron", "fire", "nosuch", "--redis", R.url, NULL};
    cli(1, none);
}
