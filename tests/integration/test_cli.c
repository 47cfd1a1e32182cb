/* The command line and the documented Redis-side interface, as a user meets
 * them: real processes against a real redis-server. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static jrt_redis_t R;
static char out[8192], err[8192];

static void setup(void) { jrt_redis_start(&R, NULL); }
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(cli, .init = setup, .fini = teardown, .timeout = 60);

/* Wait until `path` contains `needle` at least `times` times. */
static int wait_for(const char *path, const char *needle, int times, int timeout_ms) {
    int found = 0;
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        char *s = jrt_slurp(path);
        found = 0;
        for (char *p = s; (p = strstr(p, needle)) != NULL; p++) found++;
        free(s);
        if (found >= times) break;
        jrt_sleep_ms(20);
    }
    return found;
}

Test(cli, redis_cli_example_from_the_docs_works) {
    char wlog[192], slog[192];
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    snprintf(slog, sizeof slog, "%s/scheduler.log", R.dir);
    const char *wargs[] = {"worker", "--redis", R.url, "--plugin", JRT_PLUGIN_DIR "/echo.so", NULL};
    const char *sargs[] = {"scheduler", "--redis", R.url, NULL};
    pid_t w = jrt_spawn(wlog, wargs);
    /* The worker loads the function library: wait for it (a fixed sleep is
     * too short on a loaded machine). */
    redisContext *c = jrt_connect(&R);
    int loaded = 0;
    for (int waited = 0; !loaded && waited < 10000; waited += 20) {
        redisReply *rep = redisCommand(c, "FUNCTION LIST LIBRARYNAME jobrunner");
        loaded = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0;
        if (rep) freeReplyObject(rep);
        if (!loaded) jrt_sleep_ms(20);
    }
    redisFree(c);
    cr_assert(loaded, "the worker did not load the function library");

    /* The fenced block after the marker comment, run line by line. */
    char *doc = jrt_slurp(JRT_SOURCE_DIR "/docs/redis-contract.md");
    char *block = strstr(doc, "<!-- This block is run by tests/integration/test_cli.c");
    cr_assert(block, "the tested example is gone from docs/redis-contract.md");
    block = strstr(block, "```sh\n");
    cr_assert(block);
    block += 6;
    *strstr(block, "```") = '\0';
    int commands = 0;
    char last[4096] = "";
    for (char *line = strtok(block, "\n"); line; line = strtok(NULL, "\n")) {
        cr_assert(!strncmp(line, "redis-cli ", 10), "not a redis-cli line: %s", line);
        char cmd[4096], output[256] = "";
        snprintf(cmd, sizeof cmd, "%s -s %s %s", JRT_REDIS_CLI, R.sock, line + 10);
        FILE *p = popen(cmd, "r");
        cr_assert(p);
        size_t n = fread(output, 1, sizeof output - 1, p);
        output[n] = '\0';
        cr_assert_eq(pclose(p), 0, "failed: %s", cmd);
        cr_expect(!strstr(output, "ERR"), "%s\n-> %s", line, output);
        snprintf(last, sizeof last, "%s", cmd);
        commands++;
    }
    free(doc);
    cr_assert_eq(commands, 3);
    pid_t s = jrt_spawn(slog, sargs);
    cr_expect_eq(wait_for(wlog, "handler=echo attempt=1 outcome=ok", 2, 10000), 2,
                 "the worker did not run both documented jobs");
    /* The documented idempotency: the same id again is a duplicate (0). */
    FILE *p = popen(last, "r");
    char again[256] = "";
    size_t n = fread(again, 1, sizeof again - 1, p);
    again[n] = '\0';
    pclose(p);
    cr_expect(strstr(again, "report-2026-11-30\n0"), "re-enqueue said: %s", again);
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
}

Test(cli, every_command_has_help) {
    const char *cmds[] = {"worker", "scheduler", "enqueue", "stats", "dev"};
    for (size_t i = 0; i < 5; i++) {
        const char *args[] = {cmds[i], "--help", NULL};
        cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, args), 0, "%s --help failed", cmds[i]);
        cr_expect(strstr(out, "usage: jobrunner ") && strstr(out, cmds[i]), "%s --help: %s", cmds[i], out);
        cr_expect(strstr(out, "--redis"), "%s --help does not show --redis", cmds[i]);
    }
    const char *top[] = {"--help", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, top), 0);
    cr_expect(strstr(out, "worker") && strstr(out, "scheduler") && strstr(out, "enqueue"));
}

Test(cli, bad_arguments_are_named) {
    struct {
        const char *args[8];
        const char *says;
    } cases[] = {
        {{"enqueue", "--in", "soon", "echo", NULL}, "invalid --in \"soon\""},
        {{"enqueue", "--at", "2026-02-30T00:00:00Z", "echo", NULL}, "invalid --at"},
        {{"enqueue", "--in", "1s", "--at", "1", "echo", NULL}, "exclude each other"},
        {{"dead", "frob", NULL}, "unknown subcommand"},
        {{"dead", "retry", NULL}, "--all"},
        {{"enqueue", "-q", "no spaces", "echo", NULL}, "invalid queue name"},
        {{"enqueue", NULL}, "expected HANDLER"},
        {{"worker", "--bogus", NULL}, "\"--bogus\""},
        {{"stats", "--in", "1s", NULL}, "\"--in\""},
        {{"stats", "--redis", "http://x", NULL}, "http"},
        {{"frobnicate", NULL}, "unknown command \"frobnicate\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = jrt_run(out, sizeof out, err, sizeof err, cases[i].args);
        cr_expect_eq(st, 2, "case %zu (%s): exit %d", i, cases[i].args[0], st);
        cr_expect(strstr(err, cases[i].says), "case %zu: stderr does not say %s:\n%s", i, cases[i].says, err);
    }
}

Test(cli, config_errors_name_file_line_and_key) {
    char path[192];
    snprintf(path, sizeof path, "%s/bad.yaml", R.dir);
    FILE *f = fopen(path, "w");
    fputs("# a comment\nworker:\n  batch: many\n", f);
    fclose(f);
    const char *args[] = {"stats", "-c", path, NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, args), 2);
    char want[256];
    snprintf(want, sizeof want, "%s:3: worker.batch", path);
    cr_expect(strstr(err, want), "stderr does not name %s:\n%s", want, err);
}

Test(cli, stats_counts_ready_and_delayed_and_env_gives_the_url) {
    setenv("JOBRUNNER_REDIS_URL", R.url, 1);
    const char *now[] = {"enqueue", "echo", "a", NULL};
    const char *later[] = {"enqueue", "--in", "1h", "echo", "b", NULL};
    const char *past[] = {"enqueue", "--at", "2020-01-01T00:00:00.250Z", "echo", "c", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, now), 0, "%s", err);
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, later), 0, "%s", err);
    cr_expect(out[0] == 'd', "a delayed job's id is d<n>: %s", out);
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, past), 0, "%s", err);
    const char *stats[] = {"stats", "--json", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, stats), 0, "%s", err);
    cr_expect(strstr(out, "{\"queue\":\"default\",\"ready\":2,\"pending\":0,\"delayed\":1,\"dead\":0,\"paused\":false}"), "%s", out);
    const char *table[] = {"stats", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, table), 0, "%s", err);
    cr_expect(strstr(out, "QUEUE") && strstr(out, "default"), "%s", out);
    unsetenv("JOBRUNNER_REDIS_URL");
}

Test(cli, payload_from_stdin_and_json_logs) {
    char cfg[192], wlog[192], rec[192];
    snprintf(cfg, sizeof cfg, "%s/json.yaml", R.dir);
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    snprintf(rec, sizeof rec, "%s/record.txt", R.dir);
    setenv("JRT_RECORD", rec, 1);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "redis:\n  url: %s\nlog:\n  format: json\n", R.url);
    fclose(f);
    const char *wargs[] = {"worker", "-c", cfg, "--plugin", JRT_RECORD_PLUGIN, NULL};
    pid_t w = jrt_spawn(wlog, wargs);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "printf 'line one\\nline two' | %s enqueue -c %s record - >/dev/null", JRT_JOBRUNNER, cfg);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(jrt_wait_lines(rec, 2, 10000), 2); /* the payload has a newline */
    char *got = jrt_slurp(rec);
    cr_expect(strstr(got, "line one\nline two"), "%s", got);
    free(got);
    cr_expect_eq(wait_for(wlog, "\"outcome\":\"ok\"", 1, 5000), 1);
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    char *log = jrt_slurp(wlog);
    cr_expect(strstr(log, "{\"time\":\"20") && strstr(log, "\"handler\":\"record\""), "%s", log);
    free(log);
}

/* Every time and duration the CLI takes has a maximum: past it, the value
 * is refused (exit 2) with a message naming the option and the maximum,
 * and nothing is enqueued; at the maximum it is accepted. */
Test(cli, every_duration_and_time_is_bounded) {
    char far[32], too_far[32];
    int64_t now_s = jrt_wall_us() / 1000000;
    snprintf(far, sizeof far, "%lld", (long long)(now_s + 3650LL * 86400 - 60));
    snprintf(too_far, sizeof too_far, "%lld", (long long)(now_s + 3650LL * 86400 + 60));
    struct {
        const char *opt, *value, *says; /* says NULL = accepted */
    } cases[] = {
        {"--in", "3000000000h", "from 0 to 87600h (3650 days)"},
        {"--in", "99999999999999999999h", "from 0 to 87600h (3650 days)"},
        {"--in", "87600h1ms", "from 0 to 87600h (3650 days)"},
        {"--in", "87600h", NULL},
        {"--in", "1e400s", "must be a duration like"},
        {"--in", "-5s", "must be a duration like"},
        {"--in", "5", "must be a duration like"},
        {"--timeout", "3000000000h", "from 1ms to 168h (7 days)"},
        {"--timeout", "168h1ms", "from 1ms to 168h (7 days)"},
        {"--timeout", "0", "from 1ms to 168h (7 days)"},
        {"--timeout", "168h", NULL},
        {"--backoff", "721h", "from 1ms to 720h (30 days)"},
        {"--backoff", "2562047788016h", "from 1ms to 720h (30 days)"},
        {"--backoff", "720h", NULL},
        {"--max-attempts", "1001", "from 1 to 1000"},
        {"--max-attempts", "99999999999999999999", "from 1 to 1000"},
        {"--max-attempts", "0x10", "from 1 to 1000"},
        {"--max-attempts", "1000", NULL},
        {"--at", too_far, "more than 87600h (3650 days) from now"},
        {"--at", "99999999999", "more than 87600h (3650 days) from now"},
        {"--at", "9999-12-31T23:59:59Z", "more than 87600h (3650 days) from now"},
        {"--at", "253402300800", "years 0000 to 9999"},
        {"--at", "10000-01-01T00:00:00Z", "years 0000 to 9999"},
        {"--at", "9999-12-31T23:59:59-01:00", "years 0000 to 9999"},
        {"--at", "2026-12-01T09:30:00+24:00", "offsets up to 23:59"},
        {"--at", "2026-12-01T09:30:00+05", "RFC 3339"},
        {"--at", far, NULL},
        {"--at", "0000-01-01T00:00:00Z", NULL}, /* the past: due now */
    };
    int accepted = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"enqueue", "--redis", R.url, cases[i].opt, cases[i].value, "echo", NULL};
        int st = jrt_run(out, sizeof out, err, sizeof err, args);
        if (!cases[i].says) {
            cr_expect_eq(st, 0, "%s %s: exit %d: %s", cases[i].opt, cases[i].value, st, err);
            accepted += st == 0;
            continue;
        }
        char want[128];
        snprintf(want, sizeof want, "invalid %s \"%s\": ", cases[i].opt, cases[i].value);
        cr_expect_eq(st, 2, "%s %s: exit %d", cases[i].opt, cases[i].value, st);
        cr_expect(strstr(err, want) && strstr(err, cases[i].says), "%s %s: stderr does not say %s%s:\n%s",
                  cases[i].opt, cases[i].value, want, cases[i].says, err);
    }
    /* Only the accepted ones reached Redis. */
    const char *stats[] = {"stats", "--redis", R.url, "--json", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, stats), 0, "%s", err);
    char want[128];
    snprintf(want, sizeof want, "\"ready\":%d,", accepted - 2);
    cr_expect(strstr(out, want) && strstr(out, "\"delayed\":2,"), "%d accepted: %s", accepted, out);

    const char *orders[][3] = {{"dev", "--orders", "12abc"}, {"dev", "--orders", "99999999999999999999"},
                               {"dev", "--orders", "0"}};
    for (size_t i = 0; i < 3; i++) {
        const char *args[] = {orders[i][0], orders[i][1], orders[i][2], NULL};
        cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, args), 2, "--orders %s", orders[i][2]);
        cr_expect(strstr(err, "from 1 to 10000"), "%s", err);
    }
}

/* Redis with a password, reached over its unix socket: the password in the
 * URL (userinfo or parameter, percent-encoded) works for enqueue, stats
 * and a worker; a wrong or missing one is an error that says so in Redis's
 * words, exits 1, and never shows the password. */
Test(cli, password_protected_redis_over_unix_socket) {
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommand(c, "ACL SETUSER alice on >alice-pw ~* &* +@all");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    rep = redisCommand(c, "CONFIG SET requirepass %s", "p@ss:w/rd%&? x");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    redisFree(c);

    char url[512], url2[512], bad[512], none[512];
    snprintf(url, sizeof url, "unix://:p%%40ss%%3Aw%%2Frd%%25%%26%%3F%%20x@%s", R.sock);
    snprintf(url2, sizeof url2, "unix://%s?user=alice&password=alice-pw&db=0", R.sock);
    snprintf(bad, sizeof bad, "unix://alice:wrong-secret@%s", R.sock);
    snprintf(none, sizeof none, "unix://%s", R.sock);

    const char *enq[] = {"enqueue", "--redis", url, "echo", "a", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, enq), 0, "%s", err);
    const char *enq2[] = {"enqueue", "--redis", url2, "echo", "b", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, enq2), 0, "%s", err);
    const char *stats[] = {"stats", "--redis", url, "--json", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, stats), 0, "%s", err);
    cr_expect(strstr(out, "\"ready\":2,"), "%s", out);

    const char *wrong[] = {"stats", "--redis", bad, NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, wrong), 1);
    cr_expect(strstr(err, "refused the password for user \"alice\"") && strstr(err, "WRONGPASS"), "%s", err);
    cr_expect(strstr(err, "unix://alice:***@"), "%s", err);
    cr_expect_null(strstr(err, "wrong-secret"), "%s", err);
    const char *enq_wrong[] = {"enqueue", "--redis", bad, "echo", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, enq_wrong), 1);
    cr_expect(strstr(err, "WRONGPASS"), "%s", err);
    const char *missing[] = {"enqueue", "--redis", none, "echo", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, missing), 1);
    cr_expect(strstr(err, "requires a password") && strstr(err, "NOAUTH"), "%s", err);

    /* A worker with the right password runs the jobs; one with a wrong
     * password keeps saying why, with a growing pause, and never the password. */
    char wlog[192], blog[192];
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    snprintf(blog, sizeof blog, "%s/bad-worker.log", R.dir);
    const char *wargs[] = {"worker", "--redis", url, "--plugin", JRT_PLUGIN_DIR "/echo.so", NULL};
    const char *bargs[] = {"worker", "--redis", bad, "--plugin", JRT_PLUGIN_DIR "/echo.so", NULL};
    char slog[192];
    snprintf(slog, sizeof slog, "%s/bad-scheduler.log", R.dir);
    const char *sargs[] = {"scheduler", "--redis", bad, NULL};
    pid_t w = jrt_spawn(wlog, wargs), b = jrt_spawn(blog, bargs), sch = jrt_spawn(slog, sargs);
    cr_expect_eq(wait_for(wlog, "outcome=ok", 2, 10000), 2, "the worker did not run both jobs");
    cr_expect_geq(wait_for(blog, "WRONGPASS", 3, 10000), 3, "the worker did not keep reporting");
    cr_expect_geq(wait_for(slog, "refused the password for user", 3, 10000), 3,
                  "the scheduler did not keep reporting");
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    jrt_stop(b, SIGTERM, 5000);
    jrt_stop(sch, SIGTERM, 5000);
    char *log = jrt_slurp(blog);
    cr_expect(strstr(log, "refused the password for user"), "%s", log);
    cr_expect(strstr(log, "retry_in=200ms") && strstr(log, "retry_in=400ms"), "no backoff:\n%s", log);
    cr_expect_null(strstr(log, "wrong-secret"), "%s", log);
    free(log);
    log = jrt_slurp(wlog);
    cr_expect_null(strstr(log, "p@ss"), "%s", log);
    free(log);
}
