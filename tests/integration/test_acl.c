/* ACL users per role (docs/operations.md, "ACL users per role"): each role
 * (producer through the client library, worker, scheduler, the admin CLI)
 * does its work with exactly the ACL the doc gives it, read from the doc
 * here so that the doc cannot drift; with one command less it fails saying
 * which command Redis refused and to which role, and loses nothing. The
 * default user is the test's own, for setting up and looking. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <jobrunner/client.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "redis_worker.h"

#define SECRET "Vb8RtqL3xPw6Nz" /* every role's password here */

static jrt_redis_t R;
static char record[192], block[192];

static void setup(void) {
    jrt_redis_start(&R, NULL);
    snprintf(record, sizeof record, "%s/record.txt", R.dir);
    snprintf(block, sizeof block, "%s/block", R.dir);
    setenv("JRT_RECORD", record, 1);
    setenv("JRT_BLOCK", block, 1);
    jr_redis_free(jrt_jr_connect(&R)); /* the library, loaded by the default user */
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(acl, .init = setup, .fini = teardown, .timeout = 180);

/* The line "ACL SETUSER <user> ..." of docs/operations.md (static; fails
 * the test if the doc has none). */
static const char *doc_acl(const char *user) {
    static char line[4][4096];
    static int k;
    char *doc = jrt_slurp(JRT_SOURCE_DIR "/docs/operations.md");
    size_t n;
    const char *p = jrt_doc_acl(doc, user, &n);
    cr_assert(n < sizeof line[0]);
    k = (k + 1) % 4;
    snprintf(line[k], sizeof line[k], "%.*s", (int)n, p);
    free(doc);
    return line[k];
}

/* The "+command" words of user's doc line, into words (at most max);
 * how many. */
static size_t acl_commands(const char *user, char words[][48], size_t max) {
    const char *line = doc_acl(user);
    size_t n = 0;
    for (const char *p = line; *p;) {
        size_t len = strcspn(p, " ");
        if (*p == '+' && n < max) snprintf(words[n++], 48, "%.*s", (int)len, p);
        p += len;
        while (*p == ' ') p++;
    }
    return n;
}

/* Create (or redo) user exactly as its doc line says, its password SECRET,
 * without the word `drop` ("+xack"; NULL = nothing dropped). */
static void set_user_keys(const char *user, const char *drop, const char *keys);
static void set_user(const char *user, const char *drop) { set_user_keys(user, drop, NULL); }

/* set_user, with `keys` ("~jr:{a}*") instead of the line's "~jr:*" (NULL:
 * as the line says). */
static void set_user_keys(const char *user, const char *drop, const char *keys) {
    const char *line = doc_acl(user);
    const char *argv[256];
    char *copy = strdup(line), *save = NULL;
    int argc = 0, dropped = 0;
    for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        cr_assert(argc < 255);
        if (drop && !strcmp(w, drop)) {
            dropped = 1;
            continue;
        }
        argv[argc++] = w[0] == '>' ? ">" SECRET : keys && !strcmp(w, "~jr:*") ? keys : w;
    }
    cr_assert(!drop || dropped, "%s's line has no %s", user, drop);
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommandArgv(c, argc, argv, NULL);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "%s: %s", line, rep ? rep->str : c->errstr);
    freeReplyObject(rep);
    redisFree(c);
    free(copy);
}

/* unix://USER:SECRET@/path/to/sock */
static const char *url_of(const char *user) {
    static char url[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(url[k], sizeof url[k], "unix://%s:%s@%s", user, SECRET, R.sock);
    return url[k];
}

/* What Redis refused to `user` since the last call, as "object (context)"
 * words (ACL LOG), leaving out CONFIG GET (refused on purpose: see the
 * doc); the log is reset. */
static void refusals(const char *user, char *out, size_t len) {
    out[0] = '\0';
    redisContext *c = jrt_connect(&R);
    redisReply *rep = jrt_cmd(c, "ACL", "LOG", "1000", NULL);
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        const char *name = "", *object = "", *context = "", *reason = "";
        for (size_t j = 0; j + 1 < e->elements; j += 2) {
            const char *k = e->element[j]->str, *v = e->element[j + 1]->str;
            if (!v) continue;
            if (!strcmp(k, "username")) name = v;
            if (!strcmp(k, "object")) object = v;
            if (!strcmp(k, "context")) context = v;
            if (!strcmp(k, "reason")) reason = v;
        }
        if (strcmp(name, user) || !strcmp(object, "config|get")) continue;
        snprintf(out + strlen(out), len - strlen(out), "%s %s (%s); ", reason, object, context);
    }
    freeReplyObject(rep);
    freeReplyObject(jrt_cmd(c, "ACL", "LOG", "RESET", NULL));
    redisFree(c);
}

/* ---- the producer: the client library ---------------------------------- */

/* The producer's work on queue q through jr_client_open with `url`: enqueue
 * now, soon, far ahead with an id (twice), three at once, cancel, show a
 * job, the counts. 0, or 1 with the first error in why. */
static int producer_work_pw(const char *url, const char *password, const char *q, char *why, size_t len) {
    jr_client_options_t o = {.url = url, .password = password};
    jr_client_t *c = jr_client_open(&o);
    cr_assert(c);
    int rc = 1;
    jr_client_result_t r;
    char far[64], far2[64];
    snprintf(far, sizeof far, "far-%s", q);
    snprintf(far2, sizeof far2, "far2-%s", q);
    int64_t at = (int64_t)time(NULL) * 1000 + 3600000; /* two jobs in one time-wheel bucket */
    jr_client_job_t now = {.queue = q, .handler = "noop"}, soon = {.queue = q, .handler = "noop", .delay_ms = 300},
                    ahead = {.queue = q, .handler = "noop", .at_ms = at, .id = far},
                    ahead2 = {.queue = q, .handler = "noop", .at_ms = at, .id = far2};
    jr_client_job_t many[3] = {{.queue = q, .handler = "noop"},
                               {.queue = q, .handler = "noop", .delay_ms = 200},
                               {.queue = q, .handler = "noop", .delay_ms = 7200000}};
    jr_client_result_t mr[3];
    jr_client_cancel_t out;
    jr_client_job_info_t *info = NULL;
    jr_client_stats_t st;
    char soon_id[JR_CLIENT_ID_MAX];
#define STEP(what, call, ok)                                                                          \
    if ((call) != 0 || !(ok)) {                                                                       \
        snprintf(why, len, "%s: %s", what, jr_client_err(c) ? jr_client_errstr(c) : "unexpected outcome"); \
        goto done;                                                                                    \
    }
    STEP("connect", jr_client_err(c), 1);
    STEP("enqueue", jr_client_enqueue(c, &now, &r), r.status == JR_CLIENT_JOB_CREATED);
    STEP("enqueue delayed", jr_client_enqueue(c, &soon, &r), r.status == JR_CLIENT_JOB_CREATED);
    snprintf(soon_id, sizeof soon_id, "%s", r.id);
    STEP("enqueue with an id", jr_client_enqueue(c, &ahead, &r), r.status == JR_CLIENT_JOB_CREATED);
    STEP("enqueue the id again", jr_client_enqueue(c, &ahead, &r), r.status == JR_CLIENT_JOB_EXISTED);
    STEP("enqueue into the same bucket", jr_client_enqueue(c, &ahead2, &r), r.status == JR_CLIENT_JOB_CREATED);
    STEP("enqueue_many", jr_client_enqueue_many(c, many, 3, mr),
         mr[0].status == JR_CLIENT_JOB_CREATED && mr[1].status == JR_CLIENT_JOB_CREATED &&
             mr[2].status == JR_CLIENT_JOB_CREATED);
    STEP("job show", jr_client_job_show(c, q, soon_id, &info), info && info->state == JR_CLIENT_STATE_DELAYED);
    jr_client_job_info_free(info);
    info = NULL;
    STEP("job show of an unknown id", jr_client_job_show(c, q, "nosuchjob", &info),
         info && info->state == JR_CLIENT_STATE_NOT_FOUND);
    /* The last item of a bucket (RPOP of its tombstone), then the first (LPOP). */
    STEP("cancel a delayed job", jr_client_cancel(c, q, far2, &out), out == JR_CLIENT_CANCELLED);
    STEP("cancel a delayed job", jr_client_cancel(c, q, far, &out), out == JR_CLIENT_CANCELLED);
    STEP("cancel a ready job", jr_client_cancel(c, q, mr[0].id, &out), out == JR_CLIENT_CANCELLED);
    STEP("stats", jr_client_stats(c, q, &st), st.ready == 1 && st.delayed == 3);
#undef STEP
    rc = 0;
done:
    jr_client_job_info_free(info);
    jr_client_free(c);
    return rc;
}

static int producer_work(const char *url, const char *q, char *why, size_t len) {
    return producer_work_pw(url, NULL, q, why, len);
}

Test(acl, the_producer_enqueues_cancels_and_looks_with_its_acl) {
    set_user("jr-producer", NULL);
    char why[1024], denied[4096];
    int rc = producer_work(url_of("jr-producer"), "p", why, sizeof why);
    refusals("jr-producer", denied, sizeof denied);
    cr_assert_eq(rc, 0, "%s; Redis refused: %s", why, denied);
    cr_expect_str_empty(denied, "Redis refused: %s", denied);
    /* The password kept out of the URL (options.password), the user in it. */
    char userurl[256];
    snprintf(userurl, sizeof userurl, "unix://jr-producer:@%s", R.sock);
    rc = producer_work_pw(userurl, SECRET, "p2", why, sizeof why);
    cr_expect_eq(rc, 0, "with options.password: %s", why);
}

/* Every command of the producer's list in turn: without it the work fails,
 * the message names the command and the role, and the refused enqueue
 * wrote nothing. A command the work does without is one too many. */
Test(acl, the_producer_without_any_one_command_says_which) {
    char words[128][48], why[1024], q[32];
    size_t n = acl_commands("jr-producer", words, 128);
    cr_assert_gt(n, 5);
    for (size_t i = 0; i < n; i++) {
        set_user("jr-producer", words[i]);
        snprintf(q, sizeof q, "p%zu", i);
        int rc = producer_work(url_of("jr-producer"), q, why, sizeof why);
        if (rc != 1) {
            cr_expect_fail("the producer's ACL has %s, which its work did without", words[i]);
            continue;
        }
        /* A refusal the library takes for something else: its check for
         * the consumer group is a pcall of XPENDING, so a refused XPENDING
         * reads as no group, and the XGROUP CREATE after it is refused
         * BUSYGROUP. It fails, naming the function only. */
        if (!strcmp(words[i], "+xpending")) {
            cr_expect(strstr(why, "jr_enqueue"), "without %s: %s", words[i], why);
            continue;
        }
        char want[64];
        snprintf(want, sizeof want, "'%s'", words[i] + 1);
        cr_expect(strstr(why, want) && strstr(why, "the producer role") && strstr(why, "docs/operations.md"),
                  "without %s: %s", words[i], why);
    }
    /* Nothing half written: an enqueue refused its XADD wrote no job. */
    set_user("jr-producer", "+xadd");
    jr_client_options_t o = {.url = url_of("jr-producer")};
    jr_client_t *c = jr_client_open(&o);
    jr_client_job_t j = {.queue = "lost", .handler = "noop"};
    jr_client_result_t r;
    cr_expect_neq(jr_client_enqueue(c, &j, &r), 0);
    cr_expect(strstr(jr_client_errstr(c), "'xadd'"), "%s", jr_client_errstr(c));
    cr_expect_eq(r.status, JR_CLIENT_JOB_REFUSED, "status %d: %s", r.status, r.error);
    jr_client_free(c);
    jr_qstats_t st = jrt_stats(&R, "lost");
    cr_expect_eq(st.ready + st.delayed, 0, "the refused job was written");
}

/* Keys outside the user's patterns: the message says which it needs. */
Test(acl, a_producer_refused_a_key_is_told_to_have_jr_keys) {
    set_user_keys("jr-producer", NULL, "~jr:{a}*");
    jr_client_options_t o = {.url = url_of("jr-producer")};
    jr_client_t *c = jr_client_open(&o);
    jr_client_job_t j = {.queue = "b", .handler = "noop"};
    jr_client_result_t r;
    cr_expect_neq(jr_client_enqueue(c, &j, &r), 0);
    cr_expect(strstr(jr_client_errstr(c), "Redis refused a key") && strstr(jr_client_errstr(c), "the producer role needs ~jr:*"),
              "%s", jr_client_errstr(c));
    jr_client_free(c);
}

/* ---- the worker -------------------------------------------------------- */

static pid_t start_worker(const char *user, const char *log) {
    const char *args[] = {"worker", "--redis", user ? url_of(user) : R.url, "--plugin", JRT_FOLLOW_PLUGIN,
                          "--concurrency", "3", "-q", "default", NULL};
    return jrt_spawn(log, args);
}

Test(acl, the_worker_runs_retries_buries_follows_up_and_cancels_with_its_acl) {
    set_user("jr-worker", NULL);
    char id[64], blocked[64];
    const char *ok[] = {"follow", "n=1,q=", NULL}, *retry[] = {"--backoff", "3s", "follow", "result=retry1,n=0", NULL},
               *fail[] = {"--max-attempts", "1", "follow", "result=fail,n=0", NULL},
               *crash[] = {"--max-attempts", "1", "follow", "result=crash,n=0", NULL},
               *later[] = {"follow", "n=1,q=,delay=2500,id=fu-later", NULL},
               *blk[] = {"follow", "block=1,n=0", NULL};
    jrt_cli_enqueue(&R, NULL, ok, id, sizeof id);
    jrt_cli_enqueue(&R, NULL, retry, id, sizeof id);
    jrt_cli_enqueue(&R, NULL, fail, id, sizeof id);
    jrt_cli_enqueue(&R, NULL, crash, id, sizeof id);
    jrt_cli_enqueue(&R, NULL, later, id, sizeof id);
    FILE *f = fopen(block, "w");
    fclose(f);
    jrt_cli_enqueue(&R, NULL, blk, blocked, sizeof blocked);
    const char *wlog = jrt_path(&R, "worker.log"), *slog = jrt_path(&R, "sched.log");
    pid_t s = jrt_scheduler(&R, NULL, slog); /* the default user's: promotes the retries */
    pid_t w = start_worker("jr-worker", wlog);
    char running[96];
    snprintf(running, sizeof running, "%s 1\n", blocked);
    cr_expect(jrt_wait_count(record, running, 1, 20000), "the blocking job did not start:\n%s", jrt_slurp(wlog));
    const char *cargs[] = {"cancel", blocked, NULL};
    cr_expect_eq(jrt_cli(&R, NULL, 0, cargs), 0);
    unlink(block);
    jr_qstats_t st = jrt_wait_settled(&R, "default", 2, 30000);
    cr_expect_eq(st.ready + st.pending + st.delayed, 0, "left: %lld ready, %lld pending, %lld delayed\n%s", st.ready,
                 st.pending, st.delayed, jrt_slurp(wlog));
    cr_expect_eq(st.dead, 2, "dead: %lld", st.dead);
    cr_expect_geq(jrt_count(record, " record "), 2, "the follow-ups did not run:\n%s", jrt_slurp(record));
    cr_expect_eq(jrt_stop(w, SIGTERM, 15000), 0);
    jrt_stop(s, SIGTERM, 15000);
    char denied[4096];
    refusals("jr-worker", denied, sizeof denied);
    cr_expect_str_empty(denied, "Redis refused the worker: %s", denied);
    cr_expect_eq(jrt_count(wlog, "NOPERM"), 0, "%s", jrt_slurp(wlog));
}

/* Without one command: the log names it and the role; the job stays where
 * it was (ready, or pending with its result kept), and runs once the
 * command is granted. */
static void worker_without(const char *drop, const char *state) {
    set_user("jr-worker", drop);
    char id[64];
    const char *job[] = {"follow", "n=0", NULL};
    jrt_cli_enqueue(&R, NULL, job, id, sizeof id);
    const char *wlog = jrt_path(&R, "worker.log");
    pid_t w = start_worker("jr-worker", wlog);
    char want[64];
    snprintf(want, sizeof want, "'%s'", drop + 1);
    cr_expect(jrt_wait_count(wlog, want, 1, 20000), "without %s, the log does not name it:\n%s", drop,
              jrt_slurp(wlog));
    cr_expect(jrt_count(wlog, "the worker role needs ") > 0 && jrt_count(wlog, "docs/operations.md") > 0,
              "without %s:\n%s", drop, jrt_slurp(wlog));
    jr_qstats_t st = jrt_stats(&R, "default");
    cr_expect_eq(!strcmp(state, "ready") ? st.ready : st.pending, 1, "without %s: %lld ready, %lld pending", drop,
                 st.ready, st.pending);
    set_user("jr-worker", NULL);
    st = jrt_wait_settled(&R, "default", 0, 30000);
    cr_expect_eq(st.ready + st.pending, 0, "with %s granted the job did not finish:\n%s", drop, jrt_slurp(wlog));
    cr_expect_eq(jrt_stop(w, SIGTERM, 15000), 0);
    char ran[96];
    snprintf(ran, sizeof ran, "%s 1\n", id);
    cr_expect_eq(jrt_count(record, ran), 1, "the job ran %d times", jrt_count(record, ran));
}

Test(acl, the_worker_without_xreadgroup_says_so_and_the_job_stays_ready) { worker_without("+xreadgroup", "ready"); }
Test(acl, the_worker_without_xack_in_jr_ack_says_so_and_keeps_the_result) { worker_without("+xack", "pending"); }

/* A worker may not load the library: it says so, pointing at the admin,
 * and carries on once the admin loaded it. */
Test(acl, a_worker_finding_no_library_points_at_the_admin) {
    set_user("jr-worker", NULL);
    set_user("jr-cli", NULL);
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "FUNCTION", "DELETE", "jobrunner", NULL));
    redisFree(c);
    const char *wlog = jrt_path(&R, "worker.log");
    pid_t w = start_worker("jr-worker", wlog);
    cr_expect(jrt_wait_count(wlog, "the worker role may not load the function library", 1, 20000), "%s", jrt_slurp(wlog));
    cr_expect(jrt_count(wlog, "jobrunner functions load") > 0, "%s", jrt_slurp(wlog));
    char out[4096], err[4096];
    const char *largs[] = {"functions", "load", "--redis", url_of("jr-cli"), NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, largs), 0, "%s", err);
    char id[64];
    const char *job[] = {"follow", "n=0", NULL};
    jrt_cli_enqueue(&R, NULL, job, id, sizeof id);
    jr_qstats_t st = jrt_wait_settled(&R, "default", 0, 30000);
    cr_expect_eq(st.ready + st.pending, 0, "%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_stop(w, SIGTERM, 15000), 0);
}

/* ---- the scheduler ----------------------------------------------------- */

Test(acl, the_scheduler_promotes_and_fires_cron_with_its_acl) {
    set_user("jr-scheduler", NULL);
    char id[64];
    const char *soon[] = {"--in", "300ms", "noop", NULL}, *far[] = {"--in", "2500ms", "--id", "w1", "noop", NULL};
    jrt_cli_enqueue(&R, NULL, soon, id, sizeof id);
    jrt_cli_enqueue(&R, NULL, far, id, sizeof id);
    const char *cron[] = {"cron", "add", "tick", "--every", "1s", "noop", NULL};
    cr_assert_eq(jrt_cli(&R, NULL, 0, cron), 0);
    const char *slog = jrt_path(&R, "sched.log");
    const char *args[] = {"scheduler", "--redis", url_of("jr-scheduler"), NULL};
    pid_t s = jrt_spawn(slog, args);
    jr_qstats_t st = {0};
    for (int i = 0; i < 300; i++) {
        st = jrt_stats(&R, "default");
        if (st.delayed == 0 && st.ready >= 3) break;
        jrt_sleep_ms(50);
    }
    cr_expect(st.delayed == 0 && st.ready >= 3, "%lld delayed, %lld ready (2 promoted + cron):\n%s", st.delayed,
              st.ready, jrt_slurp(slog));
    cr_expect_eq(jrt_stop(s, SIGTERM, 15000), 0);
    char denied[4096];
    refusals("jr-scheduler", denied, sizeof denied);
    cr_expect_str_empty(denied, "Redis refused the scheduler: %s", denied);
}

/* The paths a short run does not take, each with the role's user (the
 * class: tests/unit/test_acl_lists.c checks every path statically). */

/* An integer reply of one command on an admin connection. */
static long long admin_int(const char *first, ...) {
    const char *argv[8];
    size_t n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 8; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommandArgv(c, (int)n, argv, NULL);
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER, "%s: %s", first, rep && rep->str ? rep->str : "no integer");
    long long v = rep->integer;
    freeReplyObject(rep);
    redisFree(c);
    return v;
}

/* The role's user was refused nothing (ACL LOG), said by role. */
static void expect_not_refused(const char *user, const char *role) {
    char denied[4096];
    refusals(user, denied, sizeof denied);
    cr_expect_str_empty(denied, "Redis refused the %s: %s", role, denied);
}

/* A worker of queue default with its role's user and configuration conf. */
static pid_t start_worker_conf(const char *conf, const char *log) {
    const char *args[] = {"worker", "-c", conf, "--redis", url_of("jr-worker"), "--plugin", JRT_FOLLOW_PLUGIN,
                          "-q", "default", NULL};
    return jrt_spawn(log, args);
}

/* A bucket of the time wheel found wholly due (the scheduler was not
 * running) is moved by number (revision 22): its runs are recorded in
 * jr:{Q}:ids and jr:{Q}:moved, and forgotten by a later call once the
 * stream holds no entry that old (XRANGE, HDEL). */
Test(acl, the_scheduler_moves_a_wholly_due_bucket_and_forgets_its_runs_with_its_acl) {
    set_user("jr-scheduler", NULL);
    char id[64];
    const char *far[] = {"--in", "3500ms", "noop", NULL}; /* a bucket starting 2.5 s or more away: the wheel */
    for (int i = 0; i < 3; i++) jrt_cli_enqueue(&R, NULL, far, id, sizeof id);
    jrt_sleep_ms(4700); /* the bucket ends by 4.5 s from now: wholly due */
    const char *slog = jrt_path(&R, "sched.log");
    const char *args[] = {"scheduler", "--redis", url_of("jr-scheduler"), NULL};
    pid_t s = jrt_spawn(slog, args);
    jr_qstats_t st = {0};
    for (int i = 0; i < 200 && ((st = jrt_stats(&R, "default")).ready < 3 || st.delayed); i++) jrt_sleep_ms(50);
    cr_expect(st.ready == 3 && st.delayed == 0, "%lld ready, %lld delayed:\n%s", st.ready, st.delayed,
              jrt_slurp(slog));
    cr_expect_eq(admin_int("EXISTS", "jr:{default}:moved", NULL), 1, "the bucket was not moved by number");
    admin_int("XTRIM", "jr:{default}:ready", "MAXLEN", "0", NULL); /* the jobs are gone: their runs may go */
    const char *soon[] = {"--in", "200ms", "noop", NULL};
    jrt_cli_enqueue(&R, NULL, soon, id, sizeof id); /* another call of the scheduler */
    long long left = 1;
    for (int i = 0; i < 200 && (left = admin_int("EXISTS", "jr:{default}:moved", NULL)); i++) jrt_sleep_ms(50);
    cr_expect_eq(left, 0, "the runs were not forgotten:\n%s", jrt_slurp(slog));
    cr_expect_eq(jrt_stop(s, SIGTERM, 15000), 0);
    expect_not_refused("jr-scheduler", "scheduler");
}

/* 40 jobs of queue default due at one millisecond 1.5 s from now (bulk,
 * through the client library, default user), promoted by a scheduler of
 * the role's user made without `drop` (NULL: exactly its line), all at
 * once from the sorted set; returns whether runs were recorded (moved by
 * number). */
static int sorted_set_burst(const char *drop) {
    set_user("jr-scheduler", drop);
    redisContext *c = jrt_connect(&R);
    long long at = jrt_redis_ms(c) + 1500;
    redisFree(c);
    jr_client_options_t o = {.url = R.url};
    jr_client_t *cl = jr_client_open(&o);
    cr_assert(cl && !jr_client_err(cl), "jr_client_open");
    jr_client_job_t jobs[40];
    jr_client_result_t res[40];
    for (int i = 0; i < 40; i++) jobs[i] = (jr_client_job_t){.queue = "default", .handler = "noop", .at_ms = at};
    cr_assert_eq(jr_client_enqueue_many(cl, jobs, 40, res), 0, "%s", jr_client_errstr(cl));
    jr_client_free(cl);
    cr_assert_eq(admin_int("ZCARD", "jr:{default}:delayed", NULL), 40, "the jobs are not in the sorted set");
    const char *slog = jrt_path(&R, "sched.log");
    const char *args[] = {"scheduler", "--redis", url_of("jr-scheduler"), NULL};
    pid_t s = jrt_spawn(slog, args);
    jr_qstats_t st = {0};
    for (int i = 0; i < 200 && ((st = jrt_stats(&R, "default")).ready < 40 || st.delayed); i++) jrt_sleep_ms(50);
    cr_expect(st.ready == 40 && st.delayed == 0, "%lld ready, %lld delayed:\n%s", st.ready, st.delayed,
              jrt_slurp(slog));
    cr_expect_eq(jrt_stop(s, SIGTERM, 15000), 0);
    return admin_int("EXISTS", "jr:{default}:moved", NULL) == 1;
}

/* Jobs falling due together in the sorted set move by number (revision 23:
 * the index is read first, HMGET). */
Test(acl, the_scheduler_moves_sorted_set_jobs_by_number_with_its_acl) {
    cr_expect(sorted_set_burst(NULL), "the jobs were not moved by number");
    expect_not_refused("jr-scheduler", "scheduler");
}

/* A scheduler whose user has the line before revision 23 (no +hmget), as
 * in a rolling upgrade that loaded revision 23 before the ACL changed,
 * still promotes them (with their index entries, as before), not stalls. */
Test(acl, a_scheduler_without_hmget_still_promotes_sorted_set_jobs) {
    cr_expect(!sorted_set_burst("+hmget"), "moved by number without +hmget");
    cr_expect_eq(admin_int("HLEN", "jr:{default}:ids", NULL), 40, "the promoted jobs have no index entries");
}

/* keep_finished: each acknowledgement writes the job's record and trims the
 * records to the count (XLEN, XRANGE, XTRIM). */
Test(acl, the_worker_keeps_and_trims_finished_records_with_its_acl) {
    set_user("jr-worker", NULL);
    char conf[512], id[64];
    jrt_write(&R, "keep.yaml", "queues:\n  default: {keep_finished: {count: 2}}\n", conf, sizeof conf);
    const char *job[] = {"follow", "n=0", NULL};
    for (int i = 0; i < 4; i++) jrt_cli_enqueue(&R, NULL, job, id, sizeof id);
    const char *wlog = jrt_path(&R, "worker.log");
    pid_t w = start_worker_conf(conf, wlog);
    jr_qstats_t st = jrt_wait_settled(&R, "default", 0, 30000);
    cr_expect_eq(st.ready + st.pending, 0, "%lld ready, %lld pending:\n%s", st.ready, st.pending, jrt_slurp(wlog));
    cr_expect_eq(admin_int("XLEN", "jr:{default}:finished", NULL), 2, "records kept:\n%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_stop(w, SIGTERM, 15000), 0);
    expect_not_refused("jr-worker", "worker");
}

/* A worker removes the consumer of a stopped worker that holds no job
 * (XINFO CONSUMERS, XGROUP DELCONSUMER), at its start. */
Test(acl, a_worker_removes_a_stopped_workers_consumer_with_its_acl) {
    set_user("jr-worker", NULL);
    char conf[512], id[64];
    jrt_write(&R, "lease.yaml", "worker:\n  lease: 300ms\n", conf, sizeof conf);
    const char *job[] = {"follow", "n=0", NULL};
    jrt_cli_enqueue(&R, NULL, job, id, sizeof id);
    const char *wlog = jrt_path(&R, "worker.log");
    pid_t a = start_worker_conf(conf, wlog);
    jr_qstats_t st = jrt_wait_settled(&R, "default", 0, 30000);
    cr_expect_eq(st.ready + st.pending, 0, "%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_stop(a, SIGTERM, 15000), 0);
    redisContext *c = jrt_connect(&R);
    redisReply *rep = jrt_cmd(c, "XINFO", "CONSUMERS", "jr:{default}:ready", "jr", NULL);
    cr_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 && rep->element[0]->elements >= 2,
              "the first worker left %zu consumers", rep->elements);
    char gone[128];
    snprintf(gone, sizeof gone, "%s", rep->element[0]->element[1]->str); /* "name", <name>, ... */
    freeReplyObject(rep);
    jrt_sleep_ms(600); /* idle longer than the lease */
    pid_t b = start_worker_conf(conf, wlog);
    int there = 1;
    for (int i = 0; i < 200 && there; i++) {
        rep = jrt_cmd(c, "XINFO", "CONSUMERS", "jr:{default}:ready", "jr", NULL);
        there = rep->type != REDIS_REPLY_ARRAY;
        for (size_t k = 0; !there && k < rep->elements; k++)
            there = rep->element[k]->elements >= 2 && !strcmp(rep->element[k]->element[1]->str, gone);
        freeReplyObject(rep);
        if (there) jrt_sleep_ms(50);
    }
    redisFree(c);
    cr_expect(!there, "the stopped worker's consumer %s is still there:\n%s", gone, jrt_slurp(wlog));
    cr_expect_eq(jrt_stop(b, SIGTERM, 15000), 0);
    expect_not_refused("jr-worker", "worker");
}

Test(acl, the_scheduler_without_xadd_says_so_and_the_job_stays_delayed) {
    set_user("jr-scheduler", "+xadd");
    char id[64];
    const char *soon[] = {"--in", "200ms", "noop", NULL};
    jrt_cli_enqueue(&R, NULL, soon, id, sizeof id);
    const char *slog = jrt_path(&R, "sched.log");
    const char *args[] = {"scheduler", "--redis", url_of("jr-scheduler"), NULL};
    pid_t s = jrt_spawn(slog, args);
    cr_expect(jrt_wait_count(slog, "'xadd'", 1, 20000), "%s", jrt_slurp(slog));
    cr_expect(jrt_count(slog, "the scheduler role needs +xadd") > 0, "%s", jrt_slurp(slog));
    jr_qstats_t st = jrt_stats(&R, "default");
    cr_expect(st.delayed == 1 && st.ready == 0, "%lld delayed, %lld ready", st.delayed, st.ready);
    set_user("jr-scheduler", NULL);
    for (int i = 0; i < 300 && (st = jrt_stats(&R, "default")).ready == 0; i++) jrt_sleep_ms(50);
    cr_expect(st.delayed == 0 && st.ready == 1, "once granted: %lld delayed, %lld ready", st.delayed, st.ready);
    cr_expect_eq(jrt_stop(s, SIGTERM, 15000), 0);
}

/* ---- the admin CLI ----------------------------------------------------- */

/* A dead job of queue q (id into id): enqueued, read and buried through the
 * C API as the default user. */
static void make_dead(const char *q, char *id, size_t len) {
    jr_redis_t *r = jrt_jr_connect(&R);
    cr_assert_eq(jr_redis_ensure_groups(r, &q, 1, NULL), 0, "%s", jr_redis_errstr(r));
    char ids[1][JR_ID_MAX];
    jrt_enqueue(&R, jrt_job(q, "noop", NULL), 1, ids);
    snprintf(id, len, "%.63s", ids[0]);
    jr_batch_t b = {0};
    cr_assert_eq(jr_redis_send_read(r, "t", &q, 1, 1, 1000), 0, "%s", jr_redis_errstr(r));
    cr_assert_eq(jr_redis_recv_read(r, &b, &q, 1), 0, "%s", jr_redis_errstr(r));
    cr_assert_eq(b.n, 1);
    cr_assert_eq(jr_redis_append_fail(r, q, b.v[0].id, "t", "dead", 0, "boom", "failed", 1000), 0);
    long long v = 0;
    cr_assert_eq(jr_redis_flush(r), 0);
    cr_assert_eq(jr_redis_recv_int(r, &v), 0, "%s", jr_redis_errstr(r));
    cr_assert_eq(v, 1);
    jr_batch_free(&b);
    jr_redis_free(r);
}

/* Run `jobrunner WORDS... --redis URL ARGS...` (words: 1, or 2 for job,
 * dead, cron, functions); 0 if it exits 0, else 1 with its stderr in why. */
static int cli_step(const char *url, const char *const *args, char *out, size_t outlen, char *why, size_t len) {
    const char *argv[32];
    size_t words = !strcmp(args[0], "job") || !strcmp(args[0], "dead") || !strcmp(args[0], "cron") ||
                           !strcmp(args[0], "functions")
                       ? 2
                       : 1,
           k = 0, i = 0;
    for (; i < words; i++) argv[k++] = args[i];
    argv[k++] = "--redis", argv[k++] = url;
    for (; args[i]; i++) argv[k++] = args[i];
    argv[k] = NULL;
    char err[4096];
    int st = jrt_run(out, outlen, err, sizeof err, argv);
    if (st == 0) return 0;
    snprintf(why, len, "jobrunner %s %s: exit %d: %.3500s", args[0], args[1] ? args[1] : "", st, err);
    return 1;
}

/* Every CLI command on queue q, with the library first missing (the admin
 * loads it). 0, or 1 with the failing command's stderr in why. */
static int cli_work(const char *url, const char *q, char *why, size_t len) {
    char dead1[64], dead2[64], out[16384], id1[64] = "", soon[64] = "", far[64];
    make_dead(q, dead1, sizeof dead1);
    make_dead(q, dead2, sizeof dead2);
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "FUNCTION", "DELETE", "jobrunner", NULL));
    redisFree(c);
    snprintf(far, sizeof far, "far-%s", q);
    char name[64];
    snprintf(name, sizeof name, "t-%s", q);
#define RUN(...)                                                                     \
    do {                                                                             \
        const char *a_[] = {__VA_ARGS__, NULL};                                      \
        if (cli_step(url, a_, out, sizeof out, why, len)) return 1;                  \
    } while (0)
    RUN("functions", "load");
    RUN("enqueue", "-q", q, "noop");
    snprintf(id1, sizeof id1, "%.*s", (int)strcspn(out, "\n"), out);
    RUN("enqueue", "-q", q, "--in", "1500ms", "noop");
    snprintf(soon, sizeof soon, "%.*s", (int)strcspn(out, "\n"), out);
    char fresh[48], at[32], farb[64];
    snprintf(at, sizeof at, "%lld", (long long)time(NULL) + 7200); /* two jobs in one time-wheel bucket */
    RUN("enqueue", "-q", q, "--at", at, "--id", far, "noop");
    snprintf(fresh, sizeof fresh, "%s-new", q); /* a queue never seen: its group is made */
    RUN("enqueue", "-q", fresh, "noop");
    snprintf(farb, sizeof farb, "farb-%s", q);
    RUN("enqueue", "-q", q, "--at", at, "--id", farb, "noop");
    RUN("cancel", "-q", q, farb); /* the bucket's last item (RPOP of its tombstone) */
    RUN("stats");
    RUN("stats", "--json");
    RUN("jobs", "-q", q, "--state", "delayed");
    RUN("jobs", "-q", q, "--state", "ready");
    RUN("jobs", "-q", q, "--state", "running");
    RUN("jobs", "-q", q, "--state", "dead");
    RUN("job", "show", "-q", q, far);
    RUN("job", "show", "-q", q, id1);
    RUN("job", "run-now", "-q", q, soon);
    RUN("job", "delete", "-q", q, id1);
    RUN("cancel", "-q", q, far);
    RUN("dead", "list", "-q", q);
    RUN("dead", "show", "-q", q, dead1);
    RUN("dead", "retry", "-q", q, dead1);
    RUN("dead", "purge", "-q", q, dead2);
    RUN("pause", q);
    RUN("resume", q);
    RUN("workers");
    RUN("cron", "add", name, "--every", "1m", "-q", q, "noop");
    RUN("cron", "list");
    RUN("cron", "disable", name);
    RUN("cron", "enable", name);
    RUN("cron", "fire", name);
    RUN("cron", "remove", name);
    /* bulk over a filter, a job looked for everywhere, a queue removed */
    RUN("dead", "retry", "-q", q, "--handler", "noop", "--yes");
    RUN("job", "delete", "-q", q, "--state", "delayed", "--handler", "nosuch", "--yes");
    RUN("job", "show", "--all-queues", soon);
    char gone[48], gid[64];
    snprintf(gone, sizeof gone, "%s-gone", q);
    snprintf(gid, sizeof gid, "gone-%s", q);
    RUN("enqueue", "-q", gone, "--in", "1h", "--id", gid, "noop");
    RUN("cancel", "-q", gone, gid);
    RUN("queue", "remove", gone);
#undef RUN
    return 0;
}

Test(acl, every_cli_command_runs_with_the_admin_acl) {
    set_user("jr-cli", NULL);
    /* A worker, so that pause and resume have one to wake (CLIENT UNBLOCK). */
    pid_t w = start_worker(NULL, jrt_path(&R, "worker.log"));
    for (int i = 0; i < 200 && !jrt_count(jrt_path(&R, "worker.log"), "worker starting"); i++) jrt_sleep_ms(50);
    char why[4096], denied[4096];
    int rc = cli_work(url_of("jr-cli"), "c", why, sizeof why);
    jrt_stop(w, SIGTERM, 15000);
    refusals("jr-cli", denied, sizeof denied);
    cr_assert_eq(rc, 0, "%s; Redis refused: %s", why, denied);
    cr_expect_str_empty(denied, "Redis refused the CLI: %s", denied);
}

/* Every command of the CLI's list in turn (a run of all its commands takes
 * a fraction of a second): without it the work fails naming the command
 * and the role. Left out: CLIENT UNBLOCK, whose refusal pause and resume
 * only note (the change is made; blocked workers notice within
 * worker.block; every_cli_command_runs_with_the_admin_acl checks it is
 * granted), and the commands of rare paths of the library's load. */
Test(acl, the_cli_without_any_one_command_names_it_and_the_role) {
    char words[128][48], why[4096], q[32];
    size_t n = acl_commands("jr-cli", words, 128);
    cr_assert_gt(n, 5);
    /* Commands of rare paths of loading the library: PTTL (another holds
     * the lock), UNWATCH (the library was there once the fence was
     * watched), DISCARD (Redis refused the queued load); EVAL or DEL
     * releases the lock (either does). */
    const char *rare = " +client|unblock +pttl +unwatch +discard +eval +del ";
    for (size_t i = 0; i < n; i++) {
        char w[64];
        snprintf(w, sizeof w, " %.48s ", words[i]);
        if (strstr(rare, w)) continue;
        set_user("jr-cli", words[i]);
        snprintf(q, sizeof q, "c%zu", i);
        int rc = cli_work(url_of("jr-cli"), q, why, sizeof why);
        redisContext *c = jrt_connect(&R); /* the next run starts from the library missing again */
        freeReplyObject(jrt_cmd(c, "FUNCTION", "DELETE", "jobrunner", NULL));
        redisFree(c);
        if (rc != 1) {
            cr_expect_fail("the CLI's ACL has %s, which its work did without", words[i]);
            continue;
        }
        if (!strcmp(words[i], "+xpending")) { /* see the_producer_without_any_one_command_says_which */
            cr_expect(strstr(why, "jr_enqueue"), "without %s: %s", words[i], why);
            continue;
        }
        char want[64];
        snprintf(want, sizeof want, "'%s'", words[i] + 1);
        int loading = strstr(why, "may not load the function library") != NULL;
        cr_expect((strstr(why, want) || loading) && strstr(why, "the cli role") && strstr(why, "docs/operations.md"),
                  "without %s: %s", words[i], why);
    }
}
