/* Rolling upgrades, Redis side: which function library a jobrunner process
 * leaves in Redis when Redis already holds one. Line 2 of the library
 * ("-- jobrunner: contract C, revision R.") decides: an older or unversioned
 * library is replaced, a newer revision of the same contract is kept (an
 * older worker started beside newer ones must not take their functions
 * away), a newer contract makes the process refuse to start. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "redis.h"

extern const char jr_lua_library[];
extern const size_t jr_lua_library_len;

static jrt_redis_t R;
static char cfg[256], out[8192], err[8192];

static void setup(void) {
    jrt_redis_start(&R, NULL);
    snprintf(cfg, sizeof cfg, "%s/jr.yaml", R.dir);
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fprintf(f, "redis:\n  url: %s\n", R.url);
    fclose(f);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(upgrade, .init = setup, .fini = teardown, .timeout = 60);

/* Our library with line 2 replaced by `line2` (NULL: removed, as in builds
 * from before revisions) and one extra function jr_marker_test. */
static char *variant(const char *line2) {
    const char *nl1 = memchr(jr_lua_library, '\n', jr_lua_library_len);
    const char *nl2 = memchr(nl1 + 1, '\n', jr_lua_library_len - (size_t)(nl1 + 1 - jr_lua_library));
    cr_assert(nl1 && nl2);
    const char *marker = "\nredis.register_function('jr_marker_test', function() return 7 end)\n";
    size_t n = jr_lua_library_len + (line2 ? strlen(line2) : 0) + strlen(marker) + 2;
    char *s = malloc(n);
    cr_assert(s);
    size_t head = (size_t)(nl1 + 1 - jr_lua_library);
    memcpy(s, jr_lua_library, head);
    size_t o = head;
    if (line2) o += (size_t)sprintf(s + o, "%s\n", line2);
    size_t rest = jr_lua_library_len - (size_t)(nl2 + 1 - jr_lua_library);
    memcpy(s + o, nl2 + 1, rest);
    o += rest;
    strcpy(s + o, marker);
    return s;
}

static void load(const char *code) {
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommand(c, "FUNCTION LOAD REPLACE %s", code);
    cr_assert(rep && rep->type == REDIS_REPLY_STRING, "FUNCTION LOAD: %s", rep ? rep->str : c->errstr);
    freeReplyObject(rep);
    redisFree(c);
}

/* 1 when the marker function of a variant is still loaded. */
static int marker_loaded(void) {
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommand(c, "FCALL jr_marker_test 0");
    int yes = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 7;
    freeReplyObject(rep);
    redisFree(c);
    return yes;
}

static int run_cli(void) {
    const char *args[] = {"enqueue", "-c", cfg, "echo", "hi", NULL};
    return jrt_run(out, sizeof out, err, sizeof err, args);
}

static void our_revision(long *c, long *rv) {
    cr_assert_eq(jr_lua_revision(jr_lua_library, jr_lua_library_len, c, rv), 0,
                 "the library (runner/lua/00-common.lua) has no line 2 \"-- jobrunner: contract C, revision R.\"");
}

Test(upgrade, a_newer_revision_in_redis_is_kept_and_serves_the_older_process) {
    long c, rv;
    our_revision(&c, &rv);
    char line[128];
    snprintf(line, sizeof line, "-- jobrunner: contract %ld, revision %ld.", c, rv + 1);
    char *code = variant(line);
    load(code);
    free(code);
    cr_assert_eq(run_cli(), 0, "enqueue against a newer library: %s", err);
    cr_expect(marker_loaded(), "the older process replaced the newer library");
    cr_expect_eq(jrt_stats(&R, "default").ready, 1, "the job was not enqueued through the newer library");
}

Test(upgrade, an_older_or_unversioned_library_is_replaced) {
    long c, rv;
    our_revision(&c, &rv);
    char *code = variant(NULL); /* a build from before revisions */
    load(code);
    free(code);
    cr_assert_eq(run_cli(), 0, "%s", err);
    cr_expect(!marker_loaded(), "an unversioned library was kept");
    if (rv > 1) {
        char line[128];
        snprintf(line, sizeof line, "-- jobrunner: contract %ld, revision %ld.", c, rv - 1);
        code = variant(line);
        load(code);
        free(code);
        cr_assert_eq(run_cli(), 0, "%s", err);
        cr_expect(!marker_loaded(), "an older revision was kept");
    }
}

Test(upgrade, a_newer_contract_makes_the_process_refuse_with_a_message) {
    long c, rv;
    our_revision(&c, &rv);
    char line[128];
    snprintf(line, sizeof line, "-- jobrunner: contract %ld, revision 1.", c + 1);
    char *code = variant(line);
    load(code);
    free(code);
    int st = run_cli();
    cr_expect_neq(st, 0, "an older process ran against a newer contract");
    cr_expect(strstr(err, "contract") && strstr(err, "upgrade this process"), "no clear message: %s", err);
    cr_expect(marker_loaded(), "the newer library was replaced");
    redisContext *r = jrt_connect(&R);
    cr_expect_eq(jrt_int(r, "EXISTS jr:{default}:ready"), 0, "a job was written");
    redisFree(r);
}

Test(upgrade, a_held_load_lock_delays_the_load_but_never_skips_it) {
    char *code = variant(NULL);
    load(code);
    free(code);
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommand(c, "SET jr:{lib}:loading someone-else PX 700");
    freeReplyObject(rep);
    int64_t t0 = jrt_wall_us();
    cr_assert_eq(run_cli(), 0, "%s", err);
    int64_t waited_ms = (jrt_wall_us() - t0) / 1000;
    cr_expect(!marker_loaded(), "the library was not loaded after the lock expired");
    cr_expect_geq(waited_ms, 500, "the load did not wait for the lock (%lld ms)", (long long)waited_ms);
    rep = redisCommand(c, "EXISTS jr:{lib}:loading");
    cr_expect_eq(rep->integer, 0, "the lock was left behind");
    freeReplyObject(rep);
    redisFree(c);
}

/* Garbage in the lock key (any type, no TTL: no lock a loader wrote)
 * neither blocks the load nor makes it fail; it is left as it is. */
Test(upgrade, garbage_in_the_load_lock_does_not_block_the_load) {
    const char *kinds[][4] = {{"SET", "jr:{lib}:loading", "junk", NULL},
                              {"HSET", "jr:{lib}:loading", "f", "v"},
                              {"RPUSH", "jr:{lib}:loading", "x", NULL}};
    for (int i = 0; i < 3; i++) {
        char *code = variant(NULL);
        load(code);
        free(code);
        redisContext *c = jrt_connect(&R);
        freeReplyObject(jrt_cmd(c, "DEL", "jr:{lib}:loading", NULL));
        freeReplyObject(jrt_cmd(c, kinds[i][0], kinds[i][1], kinds[i][2], kinds[i][3], NULL));
        int64_t t0 = jrt_wall_us();
        cr_assert_eq(run_cli(), 0, "%s: %s", kinds[i][0], err);
        int64_t took_ms = (jrt_wall_us() - t0) / 1000;
        cr_expect(!marker_loaded(), "%s: the library was not loaded", kinds[i][0]);
        cr_expect_lt(took_ms, 5000, "%s: the load waited %lld ms for a garbage lock", kinds[i][0], (long long)took_ms);
        cr_expect_eq(jrt_int(c, "EXISTS jr:{lib}:loading"), 1, "the garbage was removed");
        redisFree(c);
    }
}

/* State letter of pid from /proc/PID/stat ('T' = stopped), or 0 if gone. */
static char proc_state(pid_t pid) {
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *rp = strrchr(stat, ')');
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

/* A process of our (older) revision stalls at each step of its load (it
 * stops itself there: JOBRUNNER_TEST_LIBLOAD_STOP); meanwhile its lock
 * expires and a newer process loads a newer revision as every jobrunner
 * does (MULTI FUNCTION LOAD REPLACE, SET jr:{lib}:fence, EXEC). When the
 * stalled one goes on, the newer revision stays. */
Test(upgrade, a_stalled_older_loader_never_replaces_a_newer_revision) {
    long c, rv;
    our_revision(&c, &rv);
    char line[128];
    snprintf(line, sizeof line, "-- jobrunner: contract %ld, revision %ld.", c, rv + 1);
    char *newer = variant(line), *older = variant(NULL);
    const char *steps[] = {"locked", "watched", "decided", "queued"};
    for (int i = 0; i < 4; i++) {
        load(older); /* so that ours is to be loaded */
        char log[256];
        snprintf(log, sizeof log, "%s/load-%s.log", R.dir, steps[i]);
        setenv("JOBRUNNER_TEST_LIBLOAD_STOP", steps[i], 1);
        const char *args[] = {"functions", "load", "-c", cfg, NULL};
        pid_t p = jrt_spawn(log, args);
        unsetenv("JOBRUNNER_TEST_LIBLOAD_STOP");
        for (int k = 0; k < 500 && proc_state(p) != 'T'; k++) jrt_sleep_ms(20);
        cr_assert_eq(proc_state(p), 'T', "step %s: the loader did not stop there:\n%s", steps[i], jrt_slurp(log));

        redisContext *r = jrt_connect(&R);
        freeReplyObject(jrt_cmd(r, "DEL", "jr:{lib}:loading", NULL)); /* its lock expired */
        freeReplyObject(jrt_cmd(r, "MULTI", NULL));
        freeReplyObject(jrt_cmd(r, "FUNCTION", "LOAD", "REPLACE", newer, NULL));
        freeReplyObject(jrt_cmd(r, "SET", "jr:{lib}:fence", "newer-1", NULL));
        redisReply *rep = jrt_cmd(r, "EXEC", NULL);
        cr_assert(rep->type == REDIS_REPLY_ARRAY && rep->element[0]->type == REDIS_REPLY_STRING,
                  "the newer load failed");
        freeReplyObject(rep);
        redisFree(r);
        cr_assert(marker_loaded());

        kill(p, SIGCONT);
        int st = jrt_stop(p, 0, 10000);
        cr_expect_eq(st, 0, "step %s: the loader failed (%d):\n%s", steps[i], st, jrt_slurp(log));
        cr_expect(marker_loaded(), "step %s: the stalled older process replaced the newer revision", steps[i]);
    }
    free(newer), free(older);
}

/* Rolling upgrades, worker side: a job whose handler a worker lacks (a new
 * handler, only on the new workers) is deferred, not buried, until a worker
 * that has it takes it; only after worker.handler_wait is it dead. */

static pid_t start_worker(const char *log, const char *plugin, const char *wait, int record) {
    char path[256], rec[256];
    snprintf(path, sizeof path, "%s/%s", R.dir, log);
    setenv("JOBRUNNER_WORKER_HANDLER_WAIT", wait, 1); /* the spawned worker's setting */
    snprintf(rec, sizeof rec, "%s/record.txt", R.dir);
    if (record) setenv("JRT_RECORD", rec, 1);
    pid_t pid = jrt_worker(&R, cfg, plugin, path, NULL);
    unsetenv("JOBRUNNER_WORKER_HANDLER_WAIT");
    return pid;
}

static pid_t start_scheduler(void) { return jrt_scheduler(&R, cfg, jrt_path(&R, "sched.log")); }

Test(upgrade, a_worker_without_the_handler_leaves_the_job_for_one_that_has_it) {
    char old_plugins[256], log[256], rec[256];
    snprintf(old_plugins, sizeof old_plugins, "%s", JRT_PLUGIN_DIR); /* echo, sleep, ...: no "record" */
    pid_t s = start_scheduler();
    pid_t old = start_worker("old.log", old_plugins, "60s", 0);
    const char *args[] = {"enqueue", "-c", cfg, "--id", "new-1", "record", "made by a new producer", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, args), 0, "%s", err);
    snprintf(log, sizeof log, "%s/old.log", R.dir);
    cr_assert(jrt_wait_lines(log, 2, 10000) >= 2);
    for (int i = 0; i < 100 && jrt_count(log, "deferred for a worker that has it") == 0; i++) jrt_sleep_ms(100);
    cr_expect_geq(jrt_count(log, "deferred for a worker that has it"), 1, "the old worker did not defer:\n%s",
                  jrt_slurp(log));
    cr_expect_eq(jrt_stats(&R, "default").dead, 0, "the old worker buried a job it cannot run");

    pid_t neu = start_worker("new.log", JRT_RECORD_PLUGIN, "60s", 1); /* the new version has "record" */
    snprintf(rec, sizeof rec, "%s/record.txt", R.dir);
    cr_expect_geq(jrt_wait_lines(rec, 1, 20000), 1, "the job never ran on the worker that has its handler");
    jrt_sleep_ms(300);
    cr_expect_eq(jrt_lines(rec), 1, "the job ran more than once");
    jr_qstats_t st = jrt_stats(&R, "default");
    cr_expect_eq(st.dead + st.ready + st.pending + st.delayed, 0, "left: dead %lld ready %lld pending %lld delayed %lld",
                 st.dead, st.ready, st.pending, st.delayed);
    cr_expect_eq(jrt_stop(old, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(neu, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
}

Test(upgrade, a_job_no_worker_can_run_is_dead_after_handler_wait_with_its_attempt_unspent) {
    pid_t s = start_scheduler();
    pid_t w = start_worker("w.log", JRT_PLUGIN_DIR, "2s", 0);
    const char *args[] = {"enqueue", "-c", cfg, "--id", "typo-1", "sendmial", "x", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, args), 0, "%s", err);
    int64_t t0 = jrt_wall_us();
    jr_qstats_t st = {0};
    for (int i = 0; i < 150 && (st = jrt_stats(&R, "default")).dead == 0; i++) jrt_sleep_ms(100);
    cr_assert_eq(st.dead, 1, "the job is not dead after 15 s");
    cr_expect_geq(jrt_wall_us() - t0, 1800000, "dead before worker.handler_wait (2 s)");
    char dead[4096];
    jrt_dead_entry(&R, "default", "typo-1", dead, sizeof dead);
    cr_expect(strstr(dead, "no handler named \"sendmial\"") && strstr(dead, "worker.handler_wait"),
              "the error does not say why: %s", dead);
    cr_expect(!strstr(dead, "a=2"), "deferring spent an attempt: %s", dead);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
}
