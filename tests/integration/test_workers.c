/* The live list and consumer pruning (issue 9 §2), against a real Redis:
 * `jobrunner workers` before and after a SIGKILL and a SIGTERM, dead
 * consumers pruned only once their pending list is empty (also while
 * consumers take entries concurrently), and many worker restarts leaving
 * only the live consumers in the group. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"
#include "redis.h"
#include "redis_produce.h"
#include "redis_admin.h"

JRT_RECORDED_SUITE(workers, .timeout = 300);

/* A config file: the Redis URL plus `extra` YAML. */
static void config(const char *extra) {
    jrt_config(&R, extra, cfgpath, sizeof cfgpath);
}

static pid_t start_worker(const char *queue) {
    return jrt_worker(&R, cfgpath, NULL, jrt_path(&R, "worker.log"), (const char *[]){"-q", queue, NULL});
}

/* The consumer (and registry) name of a process: host-pid. */
static void name_of(pid_t pid, char *buf, size_t len) {
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf(buf, len, "%s-%d", host, (int)pid);
}

/* `jobrunner workers --json` (or the table); fails the test unless it exits 0. */
static void workers(char *out, size_t len, int json) {
    char err[4096];
    const char *a[] = {"workers", "-c", cfgpath, json ? "--json" : NULL, NULL};
    cr_assert_eq(jrt_run(out, len, err, sizeof err, a), 0, "workers failed: %s", err);
}

/* 1 if `jobrunner workers --json` lists a process with this pid. */
static int listed(pid_t pid) {
    static char out[1 << 16];
    char needle[48];
    workers(out, sizeof out, 1);
    snprintf(needle, sizeof needle, "\"pid\":%d,", (int)pid);
    return strstr(out, needle) != NULL;
}

/* Wait up to timeout_ms until listed(pid) == want; returns the ms waited, or -1. */
static int wait_listed(pid_t pid, int want, int timeout_ms) {
    int64_t t0 = jrt_wall_us();
    for (;;) {
        if (listed(pid) == want) return (int)((jrt_wall_us() - t0) / 1000);
        if (jrt_wall_us() - t0 > (int64_t)timeout_ms * 1000) return -1;
        jrt_sleep_ms(25);
    }
}

/* The pending count of consumer `name` in queue's group, -1 if absent;
 * *count = consumers in the group. */
static long long consumer_pending(redisContext *c, const char *queue, const char *name, size_t *count) {
    redisReply *rep = redisCommand(c, "XINFO CONSUMERS jr:{%s}:ready jr", queue);
    cr_assert(rep, "XINFO CONSUMERS: %s", c->errstr);
    if (rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "no such key")) { /* no stream yet */
        freeReplyObject(rep);
        if (count) *count = 0;
        return -1;
    }
    cr_assert(rep->type == REDIS_REPLY_ARRAY, "XINFO CONSUMERS: %s", rep->str);
    long long pending = -1;
    for (size_t i = 0; i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        const char *n = NULL;
        long long p = -1;
        for (size_t k = 0; k + 1 < e->elements; k += 2) {
            if (!strcmp(e->element[k]->str, "name")) n = e->element[k + 1]->str;
            if (!strcmp(e->element[k]->str, "pending")) p = e->element[k + 1]->integer;
        }
        if (n && name && !strcmp(n, name)) pending = p;
    }
    if (count) *count = rep->elements;
    freeReplyObject(rep);
    return pending;
}

static void enqueue(const char *queue, const char *handler, const char *payload) {
    jr_enqueue_t j = jrt_job(queue, handler, payload);
    j.env.max_attempts = 5, j.env.timeout_ms = 60000;
    jrt_enqueue(&R, j, 1, NULL);
}

/* Lines of the record file whose payload is `payload` (runs of that job). */
static int runs_with(const char *payload) {
    char *s = jrt_slurp(record);
    int n = 0;
    for (char *line = s; *line;) {
        char *nl = strchr(line, '\n');
        if (!nl) break;
        *nl = '\0';
        char *sp = strrchr(line, ' ');
        if (sp && !strcmp(sp + 1, payload)) n++;
        line = nl + 1;
    }
    free(s);
    return n;
}

Test(workers, listed_while_alive_and_gone_within_a_lease_after_sigkill) {
    config("worker:\n  lease: 1s\n  concurrency: 2\n");
    pid_t w = start_worker("mail");
    pid_t s = jrt_scheduler(&R, cfgpath, NULL);
    cr_assert_geq(wait_listed(w, 1, 10000), 0, "the worker was never listed");
    cr_assert_geq(wait_listed(s, 1, 10000), 0, "the scheduler was never listed");

    /* Every documented column, in the table and in JSON. */
    char out[1 << 14], name[128], line[512];
    name_of(w, name, sizeof name);
    workers(out, sizeof out, 0);
    cr_assert(strstr(out, "NAME") && strstr(out, "ROLE") && strstr(out, "QUEUES") && strstr(out, "RUNNING") &&
                  strstr(out, "LAST SEEN"),
              "table header missing:\n%s", out);
    cr_assert(strstr(out, name), "the worker's consumer name %s is not in the table:\n%s", name, out);
    enqueue("mail", "nap", "2500");
    int seen_running = 0; /* the running count follows the job within a refresh (lease/3) */
    for (int t = 0; t < 4000 && !seen_running; t += 50, jrt_sleep_ms(50)) {
        workers(out, sizeof out, 1);
        snprintf(line, sizeof line, "{\"name\":\"%s\",\"role\":\"worker\"", name);
        char *me = strstr(out, line);
        seen_running = me && strstr(me, "\"queues\":[\"mail\"],\"version\":\"" JR_VERSION "\"") &&
                       strstr(me, "\"running\":1,");
    }
    cr_assert(seen_running, "never listed as running 1 job on queue mail:\n%s", out);
    /* its capacity (worker.concurrency) beside it: "1 of 2 busy" */
    cr_assert(strstr(strstr(out, line), "\"capacity\":2}"), "no capacity 2 in the worker's JSON:\n%s", out);
    cr_assert(strstr(out, "\"role\":\"scheduler\""), "%s", out);
    workers(out, sizeof out, 0);
    cr_assert(strstr(out, " 1/2 "), "the table does not say 1/2 running:\n%s", out);

    int64_t t0 = jrt_wall_us();
    kill(w, SIGKILL);
    waitpid(w, NULL, 0);
    int gone = wait_listed(w, 0, 10000);
    int64_t ms = (jrt_wall_us() - t0) / 1000;
    cr_assert_geq(gone, 0, "a SIGKILLed worker is still listed after 10 s");
    cr_log_info("SIGKILLed worker gone from `workers` after %lld ms (lease 1000 ms)\n", (long long)ms);
    cr_expect_leq(ms, 1000 + 1500, "gone only after %lld ms; the lease is 1000 ms", (long long)ms);
    cr_assert(listed(s), "the scheduler must still be listed");
    jrt_stop(s, SIGTERM, 10000);
}

Test(workers, sigterm_removes_the_entry_at_once) {
    config("worker:\n  lease: 60s\n"); /* an expiry could not explain its going */
    pid_t w = start_worker("default");
    pid_t s = jrt_scheduler(&R, cfgpath, NULL);
    cr_assert_geq(wait_listed(w, 1, 10000), 0);
    cr_assert_geq(wait_listed(s, 1, 10000), 0);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_assert_not(listed(w), "a worker stopped by SIGTERM is still listed");
    cr_assert_eq(jrt_stop(s, SIGTERM, 10000), 0);
    cr_assert_not(listed(s), "a scheduler stopped by SIGTERM is still listed");
    char out[4096];
    workers(out, sizeof out, 1);
    cr_assert_str_eq(out, "{\"workers\":[]}\n");
}

/* An idle worker and scheduler renew their entries with one PEXPIRE each
 * per refresh (lease/3), not the whole MULTI/HSET/PEXPIRE/ZADD/EXEC; an
 * entry that is gone anyway (expired while the process was frozen; here
 * deleted by hand) is announced again in full at the next refresh. */
Test(workers, an_idle_process_renews_its_entry_with_one_command_and_a_lost_one_comes_back) {
    config("worker:\n  lease: 1s\n");
    pid_t w = start_worker("mail");
    pid_t s = jrt_scheduler(&R, cfgpath, NULL);
    cr_assert_geq(wait_listed(w, 1, 10000), 0);
    cr_assert_geq(wait_listed(s, 1, 10000), 0);
    jrt_sleep_ms(500);
    long long multi = jrt_calls(&R, "multi"), pexpire = jrt_calls(&R, "pexpire");
    jrt_sleep_ms(2000); /* 6 refreshes each */
    multi = jrt_calls(&R, "multi") - multi, pexpire = jrt_calls(&R, "pexpire") - pexpire;
    cr_expect_eq(multi, 0, "idle processes announced themselves in full %lld times in 2 s", multi);
    cr_expect_geq(pexpire, 4, "idle processes renewed their entries only %lld times in 2 s (lease 1 s)", pexpire);
    char name[128];
    name_of(w, name, sizeof name);
    redisContext *c = jrt_connect(&R);
    jrt_int(c, "DEL jr:{procs}:%s", name);
    jrt_int(c, "ZREM jr:{procs} %s", name);
    cr_assert_geq(wait_listed(w, 1, 5000), 0, "a worker whose entry was lost was not listed again");
    cr_assert_geq(jrt_int(c, "ZRANK jr:{procs} %s", name), 0, "listed again but not in the index");
    redisFree(c);
    jrt_stop(w, SIGTERM, 10000);
    jrt_stop(s, SIGTERM, 10000);
}

/* jr_procs_forget drops from the index only the names whose entry is gone:
 * a process that announced itself again after a reader saw it gone stays. */
Test(workers, procs_forget_keeps_a_name_whose_entry_is_back) {
    jr_redis_t *r = jrt_jr_connect(&R); /* loads the library */
    redisContext *c = jrt_connect(&R);
    jrt_int(c, "ZADD jr:{procs} 1 back 2 gone");
    jrt_int(c, "HSET jr:{procs}:back role worker");
    cr_assert_eq(jrt_int(c, "FCALL jr_procs_forget 1 jr:{procs} back gone"), 1);
    cr_assert_eq(jrt_int(c, "ZCARD jr:{procs}"), 1);
    cr_assert_eq(jrt_int(c, "ZRANK jr:{procs} back"), 0);
    redisFree(c);
    jr_redis_free(r);
}

/* A name in the index too long to be a process's is never read through a
 * shortened key: before, a 200-byte member was looked up under its first
 * 132 bytes and listed as the process found there. Now it is treated as
 * expired (forgotten), and the real processes are listed. */
Test(workers, an_overlong_name_in_the_index_is_not_read_through_a_cut_key) {
    config("");
    char longname[201];
    memset(longname, 'n', 200), longname[200] = '\0';
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "ZADD", "jr:{procs}", "1", longname, NULL));
    char cut[160];
    snprintf(cut, sizeof cut, "jr:{procs}:%.*s", JR_PROC_NAME_MAX + 16 - 12, longname);
    freeReplyObject(jrt_cmd(c, "HSET", cut, "role", "worker", "pid", "4242", "lease", "60000", NULL));
    freeReplyObject(jrt_cmd(c, "PEXPIRE", cut, "60000", NULL));
    char out[1 << 14];
    workers(out, sizeof out, 1);
    cr_expect(strstr(out, "\"pid\":4242") == NULL, "an overlong member was listed as the process under a cut key:\n%s",
              out);
    cr_expect_eq(jrt_int(c, "ZCARD jr:{procs}"), 0, "the overlong member was not forgotten");
    redisFree(c);
}

/* The pruning function alone: of dead consumers, only those without pending
 * entries go; a live one stays; one that gets its entry taken over goes. */
Test(workers, prune_never_removes_a_consumer_with_pending_entries) {
    redisContext *c = jrt_connect(&R);
    freeReplyObject(redisCommand(c, "XGROUP CREATE jr:{p}:ready jr $ MKSTREAM"));
    for (int i = 0; i < 3; i++) freeReplyObject(redisCommand(c, "XADD jr:{p}:ready * h record p x"));
    freeReplyObject(redisCommand(c, "XREADGROUP GROUP jr dead-busy COUNT 2 STREAMS jr:{p}:ready >"));
    freeReplyObject(redisCommand(c, "XGROUP CREATECONSUMER jr:{p}:ready jr dead-idle"));
    freeReplyObject(redisCommand(c, "XGROUP CREATECONSUMER jr:{p}:ready jr live-idle"));
    jr_redis_t *r = jrt_jr_connect(&R);
    const char *live[] = {"live-idle"};
    long long removed = -1;
    cr_assert_eq(jr_redis_prune_consumers(r, "p", live, 1, 0, &removed), 0, "%s", jr_redis_errstr(r));
    cr_assert_eq(removed, 1);
    size_t n;
    cr_assert_eq(consumer_pending(c, "p", "dead-busy", &n), 2, "a consumer holding 2 entries was removed");
    cr_assert_eq(consumer_pending(c, "p", "live-idle", NULL), 0, "a live consumer was removed");
    cr_assert_eq(consumer_pending(c, "p", "dead-idle", NULL), -1, "a dead idle consumer stayed");
    cr_assert_eq(n, 2);
    /* Not idle long enough: stays whatever else holds. */
    cr_assert_eq(jr_redis_prune_consumers(r, "p", NULL, 0, 3600000, &removed), 0);
    cr_assert_eq(removed, 0);
    /* Its entries taken over (as XAUTOCLAIM does): now it goes. */
    freeReplyObject(redisCommand(c, "XAUTOCLAIM jr:{p}:ready jr live-idle 0 0-0 COUNT 10"));
    cr_assert_eq(jr_redis_prune_consumers(r, "p", live, 1, 0, &removed), 0);
    cr_assert_eq(removed, 1);
    cr_assert_eq(consumer_pending(c, "p", "dead-busy", &n), -1);
    cr_assert_eq(n, 1);
    /* A queue without stream or group: nothing to prune, no error. */
    cr_assert_eq(jr_redis_prune_consumers(r, "nothing-here", NULL, 0, 0, &removed), 0, "%s", jr_redis_errstr(r));
    cr_assert_eq(removed, 0);
    jr_redis_free(r);
    redisFree(c);
}

/* The race: consumers take entries while another connection prunes every
 * consumer it may (none live, no idle minimum). No pending entry may be
 * lost: the group's pending count equals the entries delivered and not
 * acknowledged. */
Test(workers, prune_racing_reads_loses_no_pending_entry) {
    redisContext *c = jrt_connect(&R);
    freeReplyObject(redisCommand(c, "XGROUP CREATE jr:{race}:ready jr $ MKSTREAM"));
    for (int i = 0; i < 4000; i++) redisAppendCommand(c, "XADD jr:{race}:ready * h record p x");
    for (int i = 0; i < 4000; i++) {
        redisReply *rep;
        redisGetReply(c, (void **)&rep);
        freeReplyObject(rep);
    }
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) { /* reader: 20 consumers take 1 entry at a time; the even ones acknowledge it */
        redisContext *cc = jrt_connect(&R);
        long long got = 0;
        for (int i = 0; i < 3000; i++) {
            redisReply *rep = redisCommand(cc, "XREADGROUP GROUP jr c%d COUNT 1 STREAMS jr:{race}:ready >", i % 20);
            int ok = rep && rep->type == REDIS_REPLY_ARRAY;
            got += ok;
            if (ok && i % 2 == 0)
                freeReplyObject(redisCommand(cc, "XACK jr:{race}:ready jr %s",
                                             rep->element[0]->element[1]->element[0]->element[0]->str));
            freeReplyObject(rep);
        }
        _exit(got == 3000 ? 0 : 1);
    }
    jr_redis_t *r = jrt_jr_connect(&R);
    long long removed = 0, total = 0;
    int status = 0;
    while (waitpid(child, &status, WNOHANG) == 0) {
        cr_assert_eq(jr_redis_prune_consumers(r, "race", NULL, 0, 0, &removed), 0, "%s", jr_redis_errstr(r));
        total += removed;
    }
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the reader failed");
    redisReply *rep = redisCommand(c, "XPENDING jr:{race}:ready jr");
    cr_assert_eq(rep->element[0]->integer, 1500, "pending entries lost: %lld of 1500 left",
                 rep->element[0]->integer);
    freeReplyObject(rep);
    cr_log_info("prune calls removed %lld consumers while 3000 entries were read\n", total);
    cr_assert_gt(total, 0, "the race was not exercised: nothing was ever prunable");
    jr_redis_free(r);
    redisFree(c);
}

/* End to end: a SIGKILLed worker's consumer holds its job's entry; a live
 * worker busy with another job (so it does not take the entry over yet)
 * prunes every lease and must leave it; once the entry is taken over and
 * the job done, the dead consumer goes. */
Test(workers, dead_consumer_with_a_pending_job_stays_until_taken_over) {
    /* Process isolation: an inline job blocks the worker's loop, and with
     * it every refresh, for as long as it runs. */
    config("worker:\n  lease: 2s\n  concurrency: 1\n");
    redisContext *c = jrt_connect(&R);
    enqueue("q", "nap", "1500");
    pid_t a = start_worker("q");
    char na[128], nb[128];
    name_of(a, na, sizeof na);
    for (int t = 0; t < 10000 && consumer_pending(c, "q", na, NULL) != 1; t += 20) jrt_sleep_ms(20);
    cr_assert_eq(consumer_pending(c, "q", na, NULL), 1, "worker A never took the job");
    /* The entry is A's as soon as A read it; wait until the job has started
     * (its record line), so that "runs again" below means a second run. */
    for (int t = 0; t < 10000 && runs_with("1500") < 1; t += 20) jrt_sleep_ms(20);
    cr_assert_eq(runs_with("1500"), 1, "worker A never started the job");
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    enqueue("q", "nap", "7000"); /* keeps B's one runner busy: no room, no takeover */
    /* The entry's idle time starts now (still A's), so B, however slow to
     * start, reads the new job before it could take this one over. */
    redisReply *rep = redisCommand(c, "XPENDING jr:{q}:ready jr - + 1");
    cr_assert(rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1);
    freeReplyObject(redisCommand(c, "XCLAIM jr:{q}:ready jr %s 0 %s JUSTID", na, rep->element[0]->element[0]->str));
    freeReplyObject(rep);
    pid_t b = start_worker("q");
    name_of(b, nb, sizeof nb);
    cr_assert_geq(wait_listed(b, 1, 10000), 0);
    /* For 5 s (B prunes at start and every lease), A is dead, from 2 s on
     * idle past the lease, and not live: only its pending entry keeps it. */
    for (int t = 0; t < 5000; t += 100, jrt_sleep_ms(100))
        cr_assert_eq(consumer_pending(c, "q", na, NULL), 1,
                     "the dead consumer holding a pending job was removed (or lost it) after %d ms (pending %lld)", t, consumer_pending(c, "q", na, NULL));
    /* Then B takes the job over, runs it, and prunes A. */
    size_t n = 0;
    long long pa = 0;
    for (int t = 0; t < 30000; t += 100, jrt_sleep_ms(100))
        if ((pa = consumer_pending(c, "q", na, &n)) == -1) break;
    cr_assert_eq(pa, -1, "the dead consumer was never pruned after its job was taken over");
    /* Only B's consumer may be left (B's own, with nothing pending, may be
     * gone too if its presence refresh came late: it rejoins with a job). */
    long long pb = consumer_pending(c, "q", nb, &n);
    cr_assert_eq(n, pb >= 0 ? 1u : 0u, "the group holds %zu consumers: only B's may be left", n);
    for (int t = 0; t < 30000 && runs_with("1500") < 2; t += 100) jrt_sleep_ms(100);
    cr_assert_eq(runs_with("1500"), 2, "the killed job must run again exactly once (runs: %d)", runs_with("1500"));
    jr_qstats_t s = jrt_stats(&R, "q");
    for (int t = 0; t < 10000 && (s.pending || s.ready); t += 100, jrt_sleep_ms(100)) s = jrt_stats(&R, "q");
    cr_assert_eq(s.pending + s.ready + s.dead, 0);
    jrt_stop(b, SIGTERM, 10000);
    redisFree(c);
}

/* 100 worker restarts (half SIGKILL, half SIGTERM, in batches of 10) with
 * two workers living throughout, and jobs for each batch (a worker joins
 * the group when it first gets an entry): after the killed workers' jobs
 * are taken over, the group holds only the two live consumers. */
Test(workers, hundred_restarts_leave_only_live_consumers) {
    config("worker:\n  lease: 1s\n  concurrency: 1\n  isolation: inline\n");
    redisContext *c = jrt_connect(&R);
    pid_t keep[2] = {start_worker("r"), start_worker("r")};
    int64_t t0 = jrt_wall_us();
    int joined = 0;
    size_t n = 0, most = 0;
    for (int batch = 0; batch < 10; batch++) {
        pid_t p[10];
        char names[10][128];
        for (int i = 0; i < 10; i++) p[i] = start_worker("r"), name_of(p[i], names[i], sizeof names[i]);
        for (int i = 0; i < 10; i++) /* each has announced itself */
            for (int t = 0; t < 15000 && !jrt_int(c, "EXISTS jr:{procs}:%s", names[i]); t += 20) jrt_sleep_ms(20);
        for (int i = 0; i < 20; i++) enqueue("r", "nap", "150");
        int in = 0; /* wait until most of the batch got a job */
        for (int t = 0; t < 5000 && in < 8; t += 20, jrt_sleep_ms(20)) {
            in = 0;
            for (int i = 0; i < 10; i++) in += consumer_pending(c, "r", names[i], &n) >= 0;
        }
        joined += in;
        if (n > most) most = n;
        for (int i = 0; i < 10; i++) kill(p[i], batch % 2 ? SIGTERM : SIGKILL);
        for (int i = 0; i < 10; i++) waitpid(p[i], NULL, 0);
    }
    int64_t restarted = jrt_wall_us();
    jr_qstats_t st = {0};
    char k0[128], k1[128];
    name_of(keep[0], k0, sizeof k0);
    name_of(keep[1], k1, sizeof k1);
    /* Done when every consumer left is a live worker's. (A live worker's
     * consumer with nothing pending may itself be pruned when its presence
     * refresh comes late, e.g. under a sanitizer at lease 1 s: harmless, it
     * rejoins with its next job; so the live ones are not required.) */
    int live_in = 0;
    for (int t = 0; t < 30000; t += 100, jrt_sleep_ms(100)) {
        consumer_pending(c, "r", NULL, &n);
        live_in = (consumer_pending(c, "r", k0, NULL) >= 0) + (consumer_pending(c, "r", k1, NULL) >= 0);
        st = jrt_stats(&R, "r");
        if ((int)n == live_in && st.pending == 0 && st.ready == 0) break;
    }
    int64_t t1 = jrt_wall_us();
    cr_log_info("100 restarts (%d of them joined the group, at most %zu consumers at once) took %lld ms; "
                "the group held only live consumers (%d) %lld ms later\n",
                joined, most, (long long)((restarted - t0) / 1000), live_in, (long long)((t1 - restarted) / 1000));
    cr_assert_geq(joined, 50, "too few restarted workers got a job (%d) to test pruning", joined);
    cr_assert_eq(st.pending + st.ready + st.dead, 0, "every job must finish");
    cr_assert_eq((int)n, live_in, "the group holds %zu consumers, %d of them live workers'", n, live_in);
    for (int i = 0; i < 2; i++) jrt_stop(keep[i], SIGTERM, 10000);
    redisFree(c);
}
