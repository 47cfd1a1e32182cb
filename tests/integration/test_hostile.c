/* Handlers that misbehave with processes and descriptors (hostile_job.c)
 * must not corrupt their worker: every job runs exactly once and ends in
 * exactly the right state in Redis, crashes are seen at once with their
 * signal, timeouts kill what the handler started, a plugin's descriptors
 * and the worker's log survive, shutdown hands back interrupted jobs
 * without using an attempt, and quick jobs never wait behind a slow one
 * while a runner is idle. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"
#include "redis.h"
#include "redis_produce.h"
#include "redis_admin.h"

static jrt_redis_t R;
static char cfgpath[192];

static void setup(void) {
    jrt_redis_start(&R, NULL);
    setenv("JRT_HOSTILE_DIR", R.dir, 1);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(hostile, .init = setup, .fini = teardown, .timeout = 120);

/* R.dir/name (jrt_path). */
static const char *file(const char *name) { return jrt_path(&R, name); }

/* A config file: the Redis URL plus `extra` YAML. */
static void config(const char *extra) {
    jrt_config(&R, extra, cfgpath, sizeof cfgpath);
}

static pid_t start_worker(const char *log) { return jrt_worker(&R, cfgpath, JRT_HOSTILE_PLUGIN, file(log), NULL); }

/* Enqueue one job of handler h with payload p; its id into id. */
static void enqueue(const char *h, const char *p, uint32_t max_attempts, int64_t timeout_ms, char id[JR_ID_MAX]) {
    jr_enqueue_t job = jrt_job("default", h, p);
    job.env.max_attempts = max_attempts, job.env.timeout_ms = timeout_ms;
    jrt_enqueue(&R, job, 1, (char(*)[JR_ID_MAX])id);
}

static jr_qstats_t stats(void) { return jrt_stats(&R, "default"); }

static jr_qstats_t wait_settled(long long dead, int timeout_ms) {
    return jrt_wait_settled(&R, "default", dead, timeout_ms);
}

/* Assert the queue holds nothing but `dead` dead jobs. */
static void expect_final(long long dead) {
    jr_qstats_t s = stats();
    cr_expect(s.ready == 0 && s.pending == 0 && s.delayed == 0 && s.dead == dead,
              "ready=%lld pending=%lld delayed=%lld dead=%lld (want dead=%lld)", s.ready, s.pending, s.delayed,
              s.dead, dead);
}

/* How many record lines say handler `what` ran job id. */
static int runs(const char *what, const char *id) {
    char *s = jrt_slurp(file("record.txt"));
    char want[JR_ID_MAX + 64];
    snprintf(want, sizeof want, "%.32s %s ", what, id);
    int n = 0;
    for (char *line = s; *line;) {
        n += strncmp(line, want, strlen(want)) == 0;
        char *nl = strchr(line, '\n');
        if (!nl) break;
        line = nl + 1;
    }
    free(s);
    return n;
}

static void dead_entry(const char *id, char *out, size_t len) { jrt_dead_entry(&R, "default", id, out, len); }

/* The worker log must say "outcome=ok" exactly n times and nothing worse. */
static void expect_oks(const char *log, int n) {
    cr_expect_eq(jrt_count(file(log), "outcome=ok"), n, "%d ok lines, want %d", jrt_count(file(log), "outcome=ok"), n);
    cr_expect_eq(jrt_count(file(log), "outcome=retry") + jrt_count(file(log), "outcome=dead"), 0,
                 "a job failed:\n%s", jrt_slurp(file(log)));
}

/* Enqueue n jobs of h (payload p) and n record jobs, interleaved; each must
 * run once, end ok, and leave the queue empty, also `linger_ms` later (when
 * the processes the handlers left behind have done their worst). */
static void exactly_once(const char *h, const char *p, int n, int linger_ms) {
    enum { MAX = 32 };
    char hid[MAX][JR_ID_MAX], rid[MAX][JR_ID_MAX];
    for (int i = 0; i < n; i++) {
        enqueue(h, p, 0, 0, hid[i]);
        enqueue("record", "", 0, 0, rid[i]);
    }
    pid_t w = start_worker("worker.log");
    wait_settled(0, 20000);
    jrt_sleep_ms(linger_ms);
    expect_final(0);
    for (int i = 0; i < n; i++) {
        cr_expect_eq(runs(h, hid[i]), 1, "%s job %s ran %d times", h, hid[i], runs(h, hid[i]));
        cr_expect_eq(runs("record", rid[i]), 1, "record job %s ran %d times", rid[i], runs("record", rid[i]));
    }
    expect_oks("worker.log", 2 * n);
    int64_t t0 = jrt_wall_us();
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0, "the worker did not stop cleanly on SIGTERM");
    cr_expect_lt(jrt_wall_us() - t0, 5000000, "SIGTERM took %lld us", (long long)(jrt_wall_us() - t0));
}

Test(hostile, a_handler_that_forks_and_returns_in_both_processes) {
    config("worker:\n  concurrency: 2\n");
    exactly_once("fork_both", "", 12, 500);
}

Test(hostile, a_handler_that_leaves_a_daemon_which_returns_later) {
    config("worker:\n  concurrency: 2\n");
    exactly_once("daemon", "", 6, 2500); /* the daemons return 1.5 s after their job */
}

/* 1 if pid is gone (or a zombie nobody reaps). */
static int gone(pid_t pid) {
    char path[64], stat[256] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    stat[n] = '\0';
    fclose(f);
    char *p = strrchr(stat, ')');
    return p && p[1] == ' ' && p[2] == 'Z';
}

Test(hostile, a_handler_that_leaves_a_background_shell_job) {
    config("worker:\n  concurrency: 2\n");
    exactly_once("bg_system", "", 4, 200);
    /* The worker has stopped: what the handlers left in their runners'
     * process groups went with them. */
    char *text = jrt_slurp(file("bg.pid"));
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), n++) {
        pid_t pid = (pid_t)atoi(line);
        int g = 0;
        for (int i = 0; i < 40 && !(g = gone(pid)); i++) jrt_sleep_ms(50);
        cr_expect(g, "background process %d outlived its worker", (int)pid);
    }
    cr_expect_eq(n, 4, "%d background pids recorded", n);
    free(text);
}

Test(hostile, a_handler_that_forks_and_returns_in_both_processes_inline) {
    config("worker:\n  isolation: inline\n");
    exactly_once("fork_both", "", 8, 500);
}

Test(hostile, a_timed_out_shell_pipeline_dies_with_its_job) {
    config("");
    char cmd[256], id[JR_ID_MAX];
    snprintf(cmd, sizeof cmd, "sleep 2; echo done > %s", file("late.txt"));
    enqueue("pipeline", cmd, 1, 500, id);
    pid_t w = start_worker("worker.log");
    wait_settled(1, 10000);
    char dead[2048];
    dead_entry(id, dead, sizeof dead);
    cr_expect(strstr(dead, "timeout") && strstr(dead, "why=failed"), "%s", dead);
    jrt_sleep_ms(3000); /* the pipeline would have written by now */
    struct stat st;
    cr_expect_neq(stat(file("late.txt"), &st), 0, "the timed-out pipeline finished its work later");
    cr_expect_eq(runs("pipeline", id), 1);
    expect_final(1);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

Test(hostile, a_crash_is_seen_at_once_with_its_signal_though_a_child_holds_the_socket) {
    config("");
    pid_t w = start_worker("worker.log");
    jrt_sleep_ms(300);
    char id[JR_ID_MAX];
    int64_t t0 = jrt_wall_us();
    enqueue("fork_crash", "", 1, 30000, id);
    jr_qstats_t s = wait_settled(1, 15000);
    int64_t took = jrt_wall_us() - t0;
    cr_expect_eq(s.dead, 1);
    cr_expect_lt(took, 3000000, "the crash was seen after %lld ms", (long long)(took / 1000));
    char dead[2048];
    dead_entry(id, dead, sizeof dead);
    cr_expect(strstr(dead, "crashed: SIGSEGV") && strstr(dead, "why=failed"), "%s", dead);
    char *pidtext = jrt_slurp(file("fork_crash.pid"));
    pid_t child = (pid_t)atoi(pidtext);
    free(pidtext);
    cr_assert_gt(child, 0, "the handler's child never wrote its pid");
    int dead_child = 0;
    for (int i = 0; i < 40 && !(dead_child = gone(child)); i++) jrt_sleep_ms(50);
    cr_expect(dead_child, "the crashed runner's child %d still runs", (int)child);
    cr_expect_eq(runs("fork_crash", id), 1);
    expect_final(1);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* With 3 runners, n jobs of handler h (one attempt each; ids into ids) run
 * and leave the queue empty. Returns the worker. */
static pid_t run_on_three_runners(const char *h, int n, char (*ids)[JR_ID_MAX]) {
    config("worker:\n  concurrency: 3\n");
    for (int i = 0; i < n; i++) enqueue(h, "", 1, 0, ids[i]);
    pid_t w = start_worker("worker.log");
    wait_settled(0, 15000);
    expect_final(0);
    return w;
}

Test(hostile, a_descriptor_the_plugin_opened_in_init_survives_into_runners) {
    enum { N = 20 };
    char ids[N][JR_ID_MAX];
    pid_t w = run_on_three_runners("initfd", N, ids);
    expect_oks("worker.log", N);
    char *text = jrt_slurp(file("initfd.txt"));
    for (int i = 0; i < N; i++) {
        char want[JR_ID_MAX + 2];
        snprintf(want, sizeof want, "%.*s\n", JR_ID_MAX - 1, ids[i]);
        char *at = strstr(text, want);
        cr_expect(at && !strstr(at + 1, want), "job %s is not in initfd.txt exactly once:\n%s", ids[i], text);
    }
    cr_expect_eq(jrt_lines(file("initfd.txt")), N);
    free(text);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* The pids after "<word> " in hooks.txt, into pids; returns how many. */
static int hook_pids(const char *word, int *pids, int max) {
    char *s = jrt_slurp(file("hooks.txt"));
    int n = 0;
    size_t len = strlen(word);
    for (char *line = s; *line && n < max;) {
        if (!strncmp(line, word, len) && line[len] == ' ') pids[n++] = atoi(line + len + 1);
        char *nl = strchr(line, '\n');
        if (!nl) break;
        line = nl + 1;
    }
    free(s);
    return n;
}

static int contains(const int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

Test(hostile, runner_init_runs_once_in_each_runner_and_runner_exit_when_it_ends) {
    enum { N = 30 };
    char ids[N][JR_ID_MAX];
    pid_t w = run_on_three_runners("whoami", N, ids);
    int init[16], exits[16];
    int ni = hook_pids("runner_init", init, 16);
    cr_expect_eq(ni, 3, "runner_init ran %d times for 3 runners", ni);
    for (int i = 0; i < ni; i++) {
        cr_expect_neq(init[i], (int)w, "runner_init ran in the worker");
        for (int j = 0; j < i; j++) cr_expect_neq(init[i], init[j], "runner_init ran twice in %d", init[i]);
    }
    char *rec = jrt_slurp(file("record.txt"));
    for (char *line = strtok(rec, "\n"); line; line = strtok(NULL, "\n")) {
        int pid = 0;
        cr_expect_eq(sscanf(line, "whoami %*s %*u %d", &pid), 1, "%s", line);
        cr_expect(contains(init, ni, pid), "a job ran in %d, where runner_init never ran", pid);
    }
    free(rec);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    int ne = hook_pids("runner_exit", exits, 16);
    cr_expect_eq(ne, 3, "runner_exit ran %d times for 3 runners", ne);
    for (int i = 0; i < ne; i++) cr_expect(contains(init, ni, exits[i]), "runner_exit in %d", exits[i]);
}

Test(hostile, runner_init_runs_once_in_an_inline_worker) {
    config("worker:\n  isolation: inline\n");
    enqueue("whoami", "", 1, 0, NULL);
    pid_t w = start_worker("worker.log");
    wait_settled(0, 15000);
    expect_final(0);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    int init[4], exits[4];
    cr_expect_eq(hook_pids("runner_init", init, 4), 1);
    cr_expect_eq(init[0], (int)w);
    cr_expect_eq(hook_pids("runner_exit", exits, 4), 1);
    cr_expect_eq(exits[0], (int)w);
}

/* close_std then three logline jobs, in one batch (one runner): the lines
 * logged after fds 0-2 were closed must be in the worker's log, not in the
 * file that took their place. */
static void closing_std_fds(const char *extra) {
    config(extra);
    char ids[4][JR_ID_MAX];
    enqueue("close_std", "", 1, 0, ids[0]);
    for (int i = 1; i < 4; i++) enqueue("logline", "", 1, 0, ids[i]);
    pid_t w = start_worker("worker.log");
    wait_settled(0, 15000);
    expect_final(0);
    jrt_sleep_ms(200);
    for (int i = 1; i < 4; i++) {
        char want[JR_ID_MAX + 32];
        snprintf(want, sizeof want, "logline marker %s", ids[i]);
        cr_expect_eq(jrt_count(file("worker.log"), want), 1, "\"%s\" is not in the worker log once", want);
        cr_expect_eq(runs("logline", ids[i]), 1);
    }
    expect_oks("worker.log", 4);
    cr_expect_eq(jrt_count(file("trap.txt"), "job"), 0, "log lines went into the handler's file:\n%s",
                 jrt_slurp(file("trap.txt")));
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_count(file("worker.log"), "worker stopped"), 1, "the last log line is lost");
}

Test(hostile, a_handler_closing_fds_0_to_2_does_not_lose_later_log_lines) {
    closing_std_fds("worker:\n  concurrency: 1\n");
}

Test(hostile, a_handler_closing_fds_0_to_2_does_not_lose_later_log_lines_inline) {
    closing_std_fds("worker:\n  isolation: inline\n");
}

/* A polite job runs; SIGTERM; it must come back ready (not dead with
 * max_attempts 1), logged "interrupted", and run again as attempt 1. */
static void polite_job(const char *extra) {
    char yaml[256];
    snprintf(yaml, sizeof yaml, "worker:\n  grace: 5s\n%sjobs:\n  max_attempts: 1\n", extra);
    config(yaml);
    char id[JR_ID_MAX];
    enqueue("polite", "", 0, 0, id);
    pid_t w = start_worker("w1.log");
    cr_assert_eq(jrt_wait_lines(file("record.txt"), 1, 10000), 1, "the job never started");
    int64_t t0 = jrt_wall_us();
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_lt(jrt_wall_us() - t0, 3000000, "stopping took %lld us", (long long)(jrt_wall_us() - t0));
    jr_qstats_t s = stats();
    cr_expect(s.ready == 1 && s.pending == 0 && s.dead == 0 && s.delayed == 0,
              "after SIGTERM: ready=%lld pending=%lld dead=%lld delayed=%lld (want the job ready again)", s.ready,
              s.pending, s.dead, s.delayed);
    cr_expect_eq(jrt_count(file("w1.log"), "outcome=interrupted"), 1, "%s", jrt_slurp(file("w1.log")));
    char okpath[192];
    jrt_write(&R, "polite_ok", "", okpath, sizeof okpath);
    w = start_worker("w2.log");
    wait_settled(0, 15000);
    expect_final(0);
    cr_expect_eq(runs("polite", id), 2);
    char want[JR_ID_MAX + 16];
    snprintf(want, sizeof want, "polite %s 1 ", id);
    cr_expect_eq(jrt_count(file("record.txt"), want), 2, "the second run is not attempt 1 again:\n%s",
                 jrt_slurp(file("record.txt")));
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

Test(hostile, a_job_that_stops_when_asked_goes_back_without_using_an_attempt) { polite_job(""); }

Test(hostile, a_job_that_stops_when_asked_goes_back_without_using_an_attempt_inline) {
    polite_job("  isolation: inline\n");
}

/* "end <id> <us>" of a sleepy job, 0 if none. */
static long long end_of(const char *id) {
    char *s = jrt_slurp(file("record.txt"));
    char want[JR_ID_MAX + 16];
    snprintf(want, sizeof want, "end %s ", id);
    char *at = strstr(s, want);
    long long us = at ? atoll(at + strlen(want)) : 0;
    free(s);
    return us;
}

Test(hostile, quick_jobs_do_not_wait_behind_a_slow_one_while_runners_are_idle) {
    config("worker:\n  concurrency: 4\n");
    char slow[JR_ID_MAX], quick[5][JR_ID_MAX];
    enqueue("sleepy", "3000", 1, 0, slow); /* all six come in one read */
    for (int i = 0; i < 5; i++) enqueue("sleepy", "50", 1, 0, quick[i]);
    pid_t w = start_worker("worker.log");
    wait_settled(0, 20000);
    expect_final(0);
    long long s_end = end_of(slow);
    cr_assert_gt(s_end, 0, "the slow job did not end");
    for (int i = 0; i < 5; i++) {
        long long q = end_of(quick[i]);
        cr_expect(q > 0 && q < s_end - 2000000, "quick job %d ended %lld ms before the slow one, not >= 2000", i,
                  (s_end - q) / 1000);
        cr_expect_eq(runs("sleepy", quick[i]), 1);
    }
    cr_expect_eq(runs("sleepy", slow), 1);
    expect_oks("worker.log", 6);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* A retry asked for past the 10-year maximum would be refused by jr_fail
 * forever; the worker, keeping the refused result, would never fetch again
 * while heartbeating the job. It fails the job instead and goes on. */
Test(hostile, a_retry_asked_for_past_the_maximum_fails_the_job_and_the_worker_goes_on) {
    config("");
    char far[JR_ID_MAX], rec[JR_ID_MAX], dead[2048];
    enqueue("far_retry", "", 5, 0, far);
    pid_t w = start_worker("worker.log");
    jrt_sleep_ms(500);
    enqueue("record", "", 0, 0, rec);
    wait_settled(1, 20000);
    expect_final(1);
    cr_expect_eq(runs("far_retry", far), 1);
    cr_expect_eq(runs("record", rec), 1, "the worker took no job after the far retry:\n%s",
                 jrt_slurp(file("worker.log")));
    dead_entry(far, dead, sizeof dead);
    cr_expect(strstr(dead, "why=failed;") && strstr(dead, "maximum"), "dead entry: %s", dead);
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0, "the worker did not stop on SIGTERM");
}

/* A runner sees only its own shared memory: a handler writing wild must not
 * be able to forge the results of jobs running in another runner. */
Test(hostile, a_runner_maps_only_its_own_shared_memory) {
    config("worker:\n  concurrency: 3\n");
    for (int i = 0; i < 6; i++) enqueue("shm_maps", "300", 0, 0, NULL);
    pid_t w = start_worker("worker.log");
    wait_settled(0, 20000);
    expect_final(0);
    char *s = jrt_slurp(file("shm.txt"));
    int lines = 0, pids[8] = {0}, npids = 0;
    for (char *l = s; *l;) {
        int pid = 0, n = -1;
        cr_expect_eq(sscanf(l, "maps %d %d", &pid, &n), 2, "bad line in shm.txt: %s", l);
        cr_expect_eq(n, 1, "runner %d maps %d shared writable regions, not just its own", pid, n);
        int seen = 0;
        for (int k = 0; k < npids; k++) seen |= pids[k] == pid;
        if (!seen && npids < 8) pids[npids++] = pid;
        lines++;
        char *nl = strchr(l, '\n');
        if (!nl) break;
        l = nl + 1;
    }
    free(s);
    cr_expect_eq(lines, 6);
    cr_expect_geq(npids, 2, "the jobs did not spread over runners");
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* CPU time (user + system, clock ticks) of a process so far. */
static long long cpu_ticks(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    cr_assert(p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2);
    return (long long)(ut + st);
}

/* A stopping worker whose result Redis refuses because a key of the queue
 * holds garbage neither waits for it nor spins: it lets the result go (the
 * entry stays pending, nothing is lost) and exits at once; once the key is
 * repaired, a worker takes the entry over after its lease and it ends dead. */
Test(hostile, a_stopping_worker_whose_result_redis_refuses_for_garbage_lets_it_go) {
    config("worker:\n  grace: 100ms\n  lease: 1s\n");
    redisContext *c = jrt_connect(&R);
    freeReplyObject(redisCommand(c, "SET jr:{default}:dead not-a-stream"));
    char id[JR_ID_MAX];
    enqueue("pipeline", "exit 1", 1, 0, id); /* fails: jr_fail refused (the dead key) */
    pid_t w = start_worker("worker.log");
    const char *said = "Redis refuses the results of this queue's jobs";
    for (int t = 0; t < 100 && jrt_count(file("worker.log"), said) == 0; t++) jrt_sleep_ms(50);
    cr_assert_geq(jrt_count(file("worker.log"), said), 1, "%s", jrt_slurp(file("worker.log")));
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0, "the stopping worker did not exit on its own");
    cr_expect_eq(jrt_count(file("worker.log"), "outcome=unrecorded"), 1, "the run is not logged as unrecorded: %s",
                 jrt_slurp(file("worker.log")));
    freeReplyObject(redisCommand(c, "DEL jr:{default}:dead"));
    redisFree(c);
    cr_expect_eq(stats().pending, 1, "the refused job's entry did not stay pending");
    w = start_worker("worker2.log");
    wait_settled(1, 20000);
    expect_final(1);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* ---- plugins that end their process in a hook (fixtures/die.c) ---- */

#define DIE_PLUGIN JRT_FIXTURE_DIR "/die.so"

static void die_in(const char *hook, const char *how) {
    setenv("JRT_DIE_IN", hook, 1);
    setenv("JRT_DIE_HOW", how, 1);
    setenv("JRT_DIE_MARKER", file("spawns.txt"), 1);
}

/* A worker (and a scheduler, for the retries) with die.so whose
 * runner_init dies `how`: over 5 s it starts few runner processes (it
 * waits longer after each death), the job it fetched uses its attempts and
 * ends dead with an error naming the plugin and `cause`, and the log says
 * why once (the cause does not change). */
static void runner_init_dies(const char *how, const char *cause) {
    die_in("runner_init", how);
    config("worker:\n  concurrency: 1\njobs:\n  backoff: 10ms\n  backoff_max: 10ms\n");
    char id[JR_ID_MAX];
    enqueue("fx_die", "", 3, 0, id);
    pid_t s = jrt_scheduler(&R, cfgpath, file("scheduler.log"));
    pid_t w = jrt_worker(&R, cfgpath, DIE_PLUGIN, file("worker.log"), NULL);
    jrt_sleep_ms(5000);
    long long ticks = cpu_ticks(w);
    cr_expect_lt(ticks, 100, "the worker used %lld ticks of CPU in 5 s", ticks);
    size_t spawns = jrt_lines(file("spawns.txt"));
    cr_expect_gt(spawns, 0, "runner_init never ran");
    cr_expect_lt(spawns, 20, "%zu runner processes started in 5 s", spawns);
    wait_settled(1, 40000);
    expect_final(1);
    char entry[4096];
    dead_entry(id, entry, sizeof entry);
    char want[128];
    snprintf(want, sizeof want, "died in runner_init of plugin die: %s", cause);
    cr_expect(strstr(entry, want), "want \"%s\" in the dead entry: %s", want, entry);
    cr_expect(strstr(entry, ";a=3;"), "not dead after its 3 attempts: %s", entry);
    cr_expect_eq(jrt_count(file("worker.log"), "died before running a job"), 1, "%s", jrt_slurp(file("worker.log")));
    cr_expect_geq(jrt_count(file("worker.log"), want), 1, "%s", jrt_slurp(file("worker.log")));
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0, "the worker did not stop cleanly on SIGTERM");
    cr_expect_eq(jrt_stop(s, SIGTERM, 10000), 0);
}

Test(hostile, a_runner_init_that_segfaults_does_not_spin) { runner_init_dies("segv", "SIGSEGV"); }
Test(hostile, a_runner_init_that_exits_0_does_not_spin) { runner_init_dies("exit0", "exit status 0"); }
Test(hostile, a_runner_init_that_exits_3_does_not_spin) { runner_init_dies("exit3", "exit status 3"); }

/* A runner_init that never returns does not hold the jobs handed to its
 * process: each job's timeout counts from the hand-over, then the process is
 * killed, the job costs an attempt with the cause, and the next process
 * starts after the backoff (not at once, not never). */
Test(hostile, a_runner_init_that_hangs_does_not_hold_its_jobs) {
    die_in("runner_init", "hang");
    config("worker:\n  concurrency: 1\njobs:\n  backoff: 10ms\n  backoff_max: 10ms\n");
    char id[JR_ID_MAX];
    enqueue("fx_die", "", 3, 300, id);
    pid_t s = jrt_scheduler(&R, cfgpath, file("scheduler.log"));
    pid_t w = jrt_worker(&R, cfgpath, DIE_PLUGIN, file("worker.log"), NULL);
    wait_settled(1, 30000);
    expect_final(1);
    char entry[4096];
    dead_entry(id, entry, sizeof entry);
    const char *want = "runner_init of plugin die did not return within the job's timeout (300ms); killed";
    cr_expect(strstr(entry, want), "want \"%s\" in the dead entry: %s", want, entry);
    cr_expect(strstr(entry, ";a=3;"), "not dead after its 3 attempts: %s", entry);
    size_t spawns = jrt_lines(file("spawns.txt"));
    cr_expect(spawns >= 3 && spawns < 20, "%zu runner processes started", spawns);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0, "the worker did not stop cleanly on SIGTERM");
    cr_expect_eq(jrt_stop(s, SIGTERM, 10000), 0);
}

/* exit() in a plugin's init (or in runner_init run in the worker, inline)
 * ends the worker with status 1 and a message, whatever status it passed:
 * exit(0) would look like a clean stop to a supervisor. */
Test(hostile, exit_in_a_plugin_hook_in_the_worker_ends_it_with_status_1) {
    static const struct {
        const char *hook, *how, *config, *says;
    } cases[] = {
        {"init", "exit0", "", "die.so called exit() in its init; exiting with status 1"},
        {"init", "exit5", "", "die.so called exit() in its init; exiting with status 1"},
        {"runner_init", "exit0", "worker:\n  isolation: inline\n", "plugin die called exit() in its runner_init"},
        {"runner_init", "exit5", "worker:\n  isolation: inline\n", "plugin die called exit() in its runner_init"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        die_in(cases[i].hook, cases[i].how);
        config(cases[i].config);
        const char *wa[] = {"worker", "-c", cfgpath, "--plugin", DIE_PLUGIN, NULL};
        char out[4096], errb[8192];
        int rc = jrt_run(out, sizeof out, errb, sizeof errb, wa);
        cr_expect_eq(rc, 1, "%s %s: exit status %d; stderr: %s", cases[i].hook, cases[i].how, rc, errb);
        cr_expect(strstr(errb, cases[i].says), "%s %s: want \"%s\" in: %s", cases[i].hook, cases[i].how,
                  cases[i].says, errb);
    }
}

/* ---- the executor alone: all tasks handed to one runner ---- */

#include <poll.h>

#include "exec.h"
#include "plugin.h"

Test(hostile, tasks_handed_to_one_busy_runner_move_to_idle_ones) {
    jr_registry_t *reg = jr_registry_new();
    char err[JR_ERRLEN];
    cr_assert_eq(jr_plugin_load(reg, JRT_HOSTILE_PLUGIN, err, sizeof err), 0, "%s", err);
    jr_exec_t *x = jr_exec_new(reg, 0, 4, 16, 1 << 20, err, sizeof err);
    cr_assert(x, "%s", err);
    enum { N = 6 };
    jr_task_t t[N];
    for (int i = 0; i < N; i++)
        t[i] = (jr_task_t){.tag = (uint32_t)i, .id = "x", .queue = "q", .handler = "sleepy",
                           .payload = i == 0 ? "2000" : "50", .payload_len = i == 0 ? 4 : 2,
                           .attempt = 1, .timeout_ms = 10000};
    int64_t t0 = jrt_wall_us(), ended[N] = {0};
    cr_assert_eq(jr_exec_submit(x, t, N), 0); /* all six to one runner, three idle */
    int got = 0;
    while (got < N && jrt_wall_us() - t0 < 10000000) {
        struct pollfd fds[4];
        size_t nf = jr_exec_pollfds(x, fds, 4);
        poll(fds, nf, 100);
        jr_outcome_t out[N];
        size_t n = jr_exec_collect(x, out, N);
        for (size_t i = 0; i < n; i++) {
            cr_expect_eq(out[i].kind, JR_OUT_OK, "task %u: %d %s", out[i].tag, out[i].kind, out[i].error);
            cr_expect_eq(ended[out[i].tag], 0, "task %u reported twice", out[i].tag);
            ended[out[i].tag] = jrt_wall_us() - t0;
            got++;
        }
    }
    cr_expect_eq(got, N);
    cr_expect_geq(ended[0], 2000000);
    for (int i = 1; i < N; i++)
        cr_expect_lt(ended[i], 1000000, "quick task %d waited %lld ms", i, (long long)(ended[i] / 1000));
    cr_expect_eq(jr_exec_busy(x), 0);
    cr_expect_eq(jr_exec_idle(x), 4);
    jr_exec_free(x);
    jr_registry_free(reg);
}
