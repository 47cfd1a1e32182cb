/* Cancelled means cancelled (issue 18 §2), against a real redis-server with
 * real scheduler and worker processes, stalled with SIGSTOP/SIGCONT at the
 * step where they would make the job again:
 *   - a periodic tick cancelled while a second scheduler is stopped across
 *     the tick: that scheduler, resumed, fires the tick again, and no job
 *     appears (the idempotency key stays as a tombstone);
 *   - `job delete` of a waiting or dead job with an id: enqueueing the id
 *     again within its window makes nothing;
 *   - a running job cancelled while its worker is stopped, whose handler
 *     then returns OK with a follow-up (or asks for a retry): it ends
 *     `outcome=cancelled`, its follow-up never appears, it is not retried
 *     (the flag is checked inside the ack and the fail call). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"

JRT_RECORDED_SUITE(cancel, .timeout = 120);

/* Run jobrunner with args ("--redis URL" added: jrt_cli); stdout into out. */
static int cli(char *out, size_t len, const char *const *args) { return jrt_cli(&R, out, len, args); }

/* The state `job show` prints first ("state: X"), into a static buffer. */
static const char *state_of(const char *queue, const char *id) {
    static char out[8192];
    const char *args[] = {"job", "show", "-q", queue, id, NULL};
    cli(out, sizeof out, args);
    const char *s = strstr(out, "state: ");
    static char state[32];
    snprintf(state, sizeof state, "%s", s ? s + 7 : "?");
    state[strcspn(state, "\n ")] = '\0';
    if (!strcmp(state, "not")) snprintf(state, sizeof state, "not found");
    return state;
}

/* 1 once job id of queue is in `state` (polled every 50 ms), 0 after timeout_ms. */
static int wait_state(const char *queue, const char *id, const char *state, int timeout_ms) {
    return jrt_wait_state(state_of, queue, id, state, timeout_ms);
}

static int wait_count(const char *path, const char *needle, int n, int timeout_ms) {
    return jrt_wait_count(path, needle, n, timeout_ms);
}

/* Redis's clock, Unix ms. */
static long long redis_ms(void) {
    redisContext *c = jrt_connect(&R);
    long long ms = jrt_redis_ms(c);
    redisFree(c);
    return ms;
}

/* How many entries of queue's ready stream have job id `id`. */
static int ready_with_id(const char *queue, const char *id) {
    redisContext *c = jrt_connect(&R);
    char key[160];
    snprintf(key, sizeof key, "jr:{%s}:ready", queue);
    redisReply *r = jrt_cmd(c, "XRANGE", key, "-", "+", NULL);
    int n = 0;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *f = r->element[i]->element[1];
        for (size_t j = 0; j + 1 < f->elements; j += 2)
            if (!strcmp(f->element[j]->str, "id") && !strcmp(f->element[j + 1]->str, id)) n++;
    }
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Scheduler i, its output in R.dir/scheduler<i>.log. */
static pid_t start_scheduler(int i) {
    char name[32];
    snprintf(name, sizeof name, "scheduler%d.log", i);
    return jrt_scheduler(&R, NULL, jrt_path(&R, name));
}

/* Scheduler B is stopped just before a tick T, scheduler A fires T, the
 * job NAME@T is cancelled, then B is resumed: B fires T (every tick at or
 * after its start fires, however late), and no job NAME@T may appear. The
 * step is repeated for three ticks, B stopped each time. */
Test(cancel, stalled_scheduler_does_not_fire_a_cancelled_tick_again) {
    const char *add[] = {"cron", "add", "tk", "--every", "2s", "-q", "cq", "echo", "{}", NULL};
    cr_assert_eq(cli(NULL, 0, add), 0);
    pid_t a = start_scheduler(0), b = start_scheduler(1);
    char blog[256];
    snprintf(blog, sizeof blog, "%s/scheduler1.log", R.dir);
    jrt_sleep_ms(1000); /* both loaded the schedule */
    int refired = 0;
    for (int round = 0; round < 3; round++) {
        long long now = redis_ms(), tick = (now / 2000 + 1) * 2000;
        if (tick - now < 600) tick += 2000; /* room to stop B before it */
        jrt_sleep_ms((int)(tick - now - 400));
        cr_assert_eq(kill(b, SIGSTOP), 0);
        char id[64];
        snprintf(id, sizeof id, "tk@%lld", tick);
        cr_assert(wait_state("cq", id, "ready", 10000), "scheduler A did not fire %s", id);
        char out[512];
        const char *cancel[] = {"cancel", "-q", "cq", id, NULL};
        cr_assert_eq(cli(out, sizeof out, cancel), 0);
        cr_assert(strstr(out, "cancelled"), "cancel %s: %s", id, out);
        int before = jrt_count(blog, id);
        cr_assert_eq(kill(b, SIGCONT), 0);
        /* B fires T on its first turn: its log says so (at debug level it
         * would say "already fired"); give it time either way */
        wait_count(blog, id, before + 1, 3000);
        jrt_sleep_ms(300);
        refired += ready_with_id("cq", id);
        cr_expect_eq(ready_with_id("cq", id), 0, "the cancelled tick %s was made again by the stalled scheduler", id);
        cr_expect_str_eq(state_of("cq", id), "not found");
    }
    /* the ticks after the cancelled ones still fire */
    long long later = (redis_ms() / 2000 + 1) * 2000;
    char next[64];
    snprintf(next, sizeof next, "tk@%lld", later);
    cr_expect(wait_state("cq", next, "ready", 10000), "the schedule stopped firing after a cancel (%s)", next);
    cr_expect_eq(refired, 0);
    jrt_stop(a, SIGTERM, 10000);
    jrt_stop(b, SIGTERM, 10000);
}

/* A delayed job with an id that is cancelled, a ready one deleted and a
 * dead one deleted: the same enqueue (a producer retrying it after a
 * pause) makes nothing within the idempotency window. */
Test(cancel, removed_jobs_are_not_enqueued_again_within_their_window) {
    char out[1024];
    const char *e1[] = {"enqueue", "-q", "main", "--in", "1h", "--id", "later-1", "quick", NULL};
    const char *e2[] = {"enqueue", "-q", "main", "--id", "ready-1", "quick", NULL};
    cr_assert_eq(cli(out, sizeof out, e1), 0);
    cr_assert_eq(cli(out, sizeof out, e2), 0);
    const char *c1[] = {"cancel", "-q", "main", "later-1", NULL};
    const char *d2[] = {"job", "delete", "-q", "main", "ready-1", NULL};
    cr_assert_eq(cli(out, sizeof out, c1), 0);
    cr_assert_eq(cli(out, sizeof out, d2), 0);
    /* a dead job: run `bad` once */
    const char *e3[] = {"enqueue", "-q", "main", "--id", "dead-1", "bad", NULL};
    cr_assert_eq(cli(out, sizeof out, e3), 0);
    pid_t wp = jrt_worker(&R, NULL, JRT_CANCEL_PLUGIN, wlog, (const char *[]){"-q", "main", NULL});
    cr_assert(wait_state("main", "dead-1", "dead", 20000));
    jrt_stop(wp, SIGTERM, 10000);
    const char *d3[] = {"job", "delete", "-q", "main", "dead-1", NULL};
    cr_assert_eq(cli(out, sizeof out, d3), 0);
    const char *const *again[] = {e1, e2, e3};
    const char *ids[] = {"later-1", "ready-1", "dead-1"};
    for (int i = 0; i < 3; i++) {
        cli(out, sizeof out, again[i]);
        cr_expect_str_eq(state_of("main", ids[i]), "not found", "%s was made again after it was removed", ids[i]);
    }
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_int(c, "PTTL jr:{main}:uniq:later-1") > 3500000, 1, "the tombstone lost its window");
    redisReply *r = jrt_cmd(c, "GET", "jr:{main}:uniq:later-1", NULL);
    cr_expect(r->type == REDIS_REPLY_STRING && !strcmp(r->str, "cancelled"));
    freeReplyObject(r);
    redisFree(c);
}

/* The handler `gated` runs; its worker is stopped; the job is cancelled
 * ("running"); the handler ends OK with a follow-up while the worker is
 * stopped; the worker resumes and acknowledges it before any heartbeat or
 * cancel check could tell it: the ack itself says cancelled. */
Test(cancel, job_cancelled_before_its_ack_is_acked_as_cancelled_without_followups) {
    char go[256];
    snprintf(go, sizeof go, "%s.go", record);
    jrt_config(&R, "worker:\n  lease: 30s\n", cfgpath, sizeof cfgpath);
    pid_t wp = jrt_worker(&R, cfgpath, JRT_CANCEL_PLUGIN, wlog, (const char *[]){"-q", "main", NULL});
    for (int k = 0; k < 3; k++) { /* k = 2: the handler asks for a retry instead */
        char id[32], child[48], needle[64];
        snprintf(id, sizeof id, "gated-%d", k);
        snprintf(child, sizeof child, "%s-child", id);
        unlink(go);
        char out[1024];
        const char *e[] = {"enqueue", "-q", "main", "--id", id, "gated", k == 2 ? "retry" : "x", NULL};
        cr_assert_eq(cli(out, sizeof out, e), 0);
        snprintf(needle, sizeof needle, "%s 1 started", id);
        cr_assert_eq(wait_count(record, needle, 1, 20000), 1, "%s never started", id);
        cr_assert_eq(kill(wp, SIGSTOP), 0);
        const char *c[] = {"cancel", "-q", "main", id, NULL};
        cli(out, sizeof out, c);
        cr_expect(strstr(out, "running"), "cancel %s: %s", id, out);
        FILE *f = fopen(go, "w");
        cr_assert(f);
        fclose(f);
        snprintf(needle, sizeof needle, "%s 1 done", id);
        cr_assert_eq(wait_count(record, needle, 1, 20000), 1, "%s never returned", id);
        jrt_sleep_ms(200); /* its runner has reported the outcome */
        cr_assert_eq(kill(wp, SIGCONT), 0);
        cr_expect(wait_state("main", id, "not found", 10000), "%s was not removed", id);
        jrt_sleep_ms(500);
        cr_expect_str_eq(state_of("next", child), "not found", "the follow-up of the cancelled %s was written", id);
        char line[128];
        snprintf(line, sizeof line, "job=%s queue=main handler=gated attempt=1 outcome=cancelled", id);
        cr_expect_eq(wait_count(wlog, line, 1, 5000), 1, "%s did not end outcome=cancelled", id);
        snprintf(line, sizeof line, "job=%s queue=main handler=gated attempt=1 outcome=%s", id, k == 2 ? "retry" : "ok");
        cr_expect_eq(jrt_count(wlog, line), 0, "%s ended %s although it was cancelled", id, strstr(line, "outcome="));
        snprintf(needle, sizeof needle, "%s 1 started", id);
        cr_expect_eq(jrt_count(record, needle), 1, "the cancelled %s ran again", id);
        snprintf(needle, sizeof needle, "%s 2 ", id);
        cr_expect_eq(jrt_count(record, needle), 0, "the cancelled %s was retried", id);
    }
    /* a job that is not cancelled still writes its follow-up and ends ok */
    char out[1024];
    FILE *f = fopen(go, "w");
    cr_assert(f);
    fclose(f);
    const char *e[] = {"enqueue", "-q", "main", "--id", "gated-ok", "gated", NULL};
    cr_assert_eq(cli(out, sizeof out, e), 0);
    cr_expect(wait_state("next", "gated-ok-child", "ready", 20000), "a follow-up of a job not cancelled is missing");
    cr_expect_eq(wait_count(wlog, "job=gated-ok queue=main handler=gated attempt=1 outcome=ok", 1, 5000), 1);
    redisContext *c = jrt_connect(&R);
    cr_expect_eq(jrt_int(c, "EXISTS jr:{main}:cancelled"), 0, "a cancel flag was left behind");
    redisFree(c);
    jrt_stop(wp, SIGTERM, 10000);
}
