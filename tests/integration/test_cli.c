/* The command line and the documented Redis-side interface, as a user meets
 * them: real processes against a real redis-server. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "harness.h"

static jrt_redis_t R;
static char out[8192], err[8192];

static void setup(void) { jrt_redis_start(&R, NULL); }
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(cli, .init = setup, .fini = teardown, .timeout = 60);

/* Wait until `path` contains `needle` at least `times` times. */
static int wait_for(const char *path, const char *needle, int times, int timeout_ms) {
    return jrt_wait_count(path, needle, times, timeout_ms);
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

/* 1 if text names option o ("--name", or "-l" for its letter) as a word. */
static int names_option(const char *text, const jr_cli_option_t *o) {
    char want[2][40];
    snprintf(want[0], sizeof want[0], "--%s", o->name);
    snprintf(want[1], sizeof want[1], "-%c", o->letter ? o->letter : '-');
    for (int k = 0; k < (o->letter ? 2 : 1); k++)
        for (const char *p = text; (p = strstr(p, want[k])) != NULL; p++) {
            char before = p == text ? ' ' : p[-1], after = p[strlen(want[k])];
            if (before != '-' && !(after >= 'a' && after <= 'z') && after != '-') return 1;
        }
    return 0;
}

/* The command table is what the CLI does: `jobrunner --help` lists its
 * rows in order; each row's --help prints its usage and the common options;
 * a row takes exactly the options its usage names; any other option is
 * refused with a message naming it and the command. */
/* Some 1,000 runs of the CLI (every command with every option it does not
 * take): its own timeout, for the sanitizer build on a loaded machine. */
Test(cli, the_command_table_is_the_cli, .timeout = 300) {
    const char *top[] = {"--help", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, top), 0);
    char *list = strstr(out, "commands:\n");
    cr_assert(list, "no commands in --help:\n%s", out);
    list += strlen("commands:\n");
    size_t rows = 0;
    for (const jr_cli_cmd_t *c = jr_cli_commands; c->name; c++, rows++) {
        char line[256];
        snprintf(line, sizeof line, "  %-10s %s\n", c->name, c->summary);
        cr_expect(!strncmp(list, line, strlen(line)), "--help does not list %s next:\n%s", c->name, list);
        char *nl = strchr(list, '\n');
        cr_assert(nl);
        list = nl + 1;
    }
    cr_expect(list[0] == '\n', "--help lists more than the %zu commands of the table:\n%s", rows, list);
    cr_expect_gt(rows, 10);

    static char out2[16384], err2[4096];
    for (const jr_cli_cmd_t *c = jr_cli_commands; c->name; c++) {
        if (c->mode & JR_CMD_BARE) {
            const char *args[] = {c->name, "--help", NULL};
            cr_expect_eq(jrt_run(out2, sizeof out2, err2, sizeof err2, args), 0, "%s --help", c->name);
            cr_expect(strstr(out2, "jobrunner "), "%s: %s", c->name, out2);
            continue;
        }
        const char *help[] = {c->name, "--help", NULL};
        cr_expect_eq(jrt_run(out2, sizeof out2, err2, sizeof err2, help), 0, "%s --help failed: %s", c->name, err2);
        char prefix[64];
        snprintf(prefix, sizeof prefix, "usage: jobrunner %s ", c->name);
        cr_expect(!strncmp(out2, prefix, strlen(prefix)), "%s --help:\n%s", c->name, out2);
        cr_expect(!strncmp(out2, c->usage, strlen(c->usage)) && strstr(out2, jr_cli_usage_common),
                  "%s --help is not its usage and the common options:\n%s", c->name, out2);
        for (int i = 0; i < JR_O_COUNT; i++) {
            const jr_cli_option_t *o = &jr_cli_options[i];
            int takes = ((c->options | JR_OPTS_COMMON) & JR_OPT(i)) != 0;
            cr_expect_eq(takes, names_option(c->usage, o) || names_option(jr_cli_usage_common, o),
                         "%s %s --%s, but its usage %s", c->name, takes ? "takes" : "does not take", o->name,
                         takes ? "does not name it" : "does");
            if (takes) continue;
            char flag[40];
            snprintf(flag, sizeof flag, "--%s", o->name);
            const char *args[] = {c->name, flag, o->has_value ? "x" : NULL, NULL};
            char says[160];
            snprintf(says, sizeof says,
                     "jobrunner %s: unknown or misplaced option \"%s\"\nRun 'jobrunner %s --help' for usage.\n", c->name,
                     flag, c->name);
            int st = jrt_run(out2, sizeof out2, err2, sizeof err2, args);
            cr_expect(st == 2 && !strcmp(err2, says), "%s %s: exit %d, stderr:\n%s", c->name, flag, st, err2);
        }
    }
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
    cr_expect(strstr(out, "{\"queue\":\"default\",\"ready\":2,\"pending\":0,\"delayed\":1,\"dead\":0,\"paused\":false,"
                          "\"processed\":0,\"failed\":0,\"jobs_per_second\":0.0,\"oldest_ready_ms\":"), "%s", out);
    const char *table[] = {"stats", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, table), 0, "%s", err);
    cr_expect(strstr(out, "QUEUE") && strstr(out, "default"), "%s", out);
    unsetenv("JOBRUNNER_REDIS_URL");
}

/* Garbage in one queue's keys costs only the counts they hold: `stats`
 * lists every queue, shows those counts as ? (null in JSON), names the key
 * on stderr, and the other queues' rows are whole (issue 18, class 1). */
Test(cli, stats_with_garbage_in_one_queue_shows_the_rest) {
    setenv("JOBRUNNER_REDIS_URL", R.url, 1);
    const char *good[] = {"enqueue", "-q", "good", "echo", "a", NULL};
    const char *bad[] = {"enqueue", "-q", "bad", "echo", "b", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, good), 0, "%s", err);
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, bad), 0, "%s", err);
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "SET", "jr:{bad}:stats", "garbage", NULL));
    freeReplyObject(jrt_cmd(c, "SADD", "jr:{bad}:dead", "garbage", NULL));
    redisFree(c);
    const char *table[] = {"stats", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, table), 0, "%s\n%s", out, err);
    cr_expect(strstr(err, "jr:{bad}:stats") || strstr(err, "jr:{bad}:dead"), "no key named: %s", err);
    char *g = strstr(out, "good"), *b = strstr(out, "bad");
    cr_assert(g && b, "a queue is missing: %s", out);
    long long ready = -1;
    cr_expect(sscanf(g + 4, "%lld", &ready) == 1 && ready == 1, "good's row: %s", out);
    cr_expect(sscanf(b + 3, "%lld", &ready) == 1 && ready == 1, "bad's ready count: %s", out);
    char *nl = strchr(b, '\n');
    cr_expect(nl && memchr(b, '?', (size_t)(nl - b)), "bad's unreadable counts are not shown as ?: %s", out);
    const char *js[] = {"stats", "--json", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, js), 0, "%s", err);
    cr_expect(strstr(out, "\"queue\":\"bad\",\"ready\":1,\"pending\":0,\"delayed\":0,\"dead\":null,"
                          "\"paused\":false,\"processed\":null,\"failed\":null"), "%s", out);
    cr_expect(strstr(out, "\"queue\":\"good\",\"ready\":1,\"pending\":0,\"delayed\":0,\"dead\":0,"), "%s", out);
    /* the paused hash too: whether a queue is paused becomes unknown */
    c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "SET", "jr:{queues}:paused", "garbage", NULL));
    redisFree(c);
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, js), 0, "%s", err);
    cr_expect(strstr(out, "\"queue\":\"good\",\"ready\":1,\"pending\":0,\"delayed\":0,\"dead\":0,"
                          "\"paused\":null,\"processed\":0"), "%s", out);
    cr_expect(strstr(err, "jr:{queues}:paused"), "no key named: %s", err);
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

/* ---- conventions: settings from the environment, flags, exit codes ------ */

/* Start a worker with args, wait for its start line, stop it; returns the
 * log (malloc'd). */
static char *worker_start_line(const char *log, const char *const *args) {
    unlink(log);
    pid_t w = jrt_spawn(log, args);
    int started = wait_for(log, "worker starting", 1, 10000);
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    cr_assert_eq(started, 1, "the worker did not start:\n%s", jrt_slurp(log));
    return jrt_slurp(log);
}

/* defaults < file < environment < flags, seen in a real worker's start line. */
Test(cli, settings_precedence_file_env_flags) {
    char cfg[192], wlog[192];
    snprintf(cfg, sizeof cfg, "%s/prec.yaml", R.dir);
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    FILE *f = fopen(cfg, "w");
    fputs("worker:\n  concurrency: 2\n", f);
    fclose(f);
    const char *plain[] = {"worker", "--redis", R.url, "--plugin", JRT_PLUGIN_DIR "/echo.so", NULL};
    char *log = worker_start_line(wlog, plain);
    cr_expect(strstr(log, "concurrency=4"), "default:\n%s", log);
    free(log);

    const char *file[] = {"worker", "-c", cfg, "--redis", R.url, "--plugin", JRT_PLUGIN_DIR "/echo.so", NULL};
    log = worker_start_line(wlog, file);
    cr_expect(strstr(log, "concurrency=2"), "file over default:\n%s", log);
    free(log);

    /* JOBRUNNER_CONFIG stands for -c. */
    setenv("JOBRUNNER_CONFIG", cfg, 1);
    log = worker_start_line(wlog, plain);
    cr_expect(strstr(log, "concurrency=2"), "JOBRUNNER_CONFIG:\n%s", log);
    free(log);

    setenv("JOBRUNNER_WORKER_CONCURRENCY", "3", 1);
    setenv("JOBRUNNER_LOG_FORMAT", "json", 1);
    log = worker_start_line(wlog, plain);
    cr_expect(strstr(log, "\"concurrency\":3"), "environment over file:\n%s", log);
    free(log);

    const char *flags[] = {"worker", "--redis", R.url, "--plugin", JRT_PLUGIN_DIR "/echo.so",
                           "--concurrency", "5", "--log-format", "text", NULL};
    log = worker_start_line(wlog, flags);
    cr_expect(strstr(log, "concurrency=5"), "flags over environment:\n%s", log);
    free(log);
    unsetenv("JOBRUNNER_CONFIG");
    unsetenv("JOBRUNNER_WORKER_CONCURRENCY");
    unsetenv("JOBRUNNER_LOG_FORMAT");
}

/* 0 ok; 1 failure explained on stderr; 2 usage or configuration error. */
Test(cli, exit_codes_follow_the_convention) {
    char nowhere[192], cfg[192];
    snprintf(nowhere, sizeof nowhere, "unix://%s/no-such.sock", R.dir);
    snprintf(cfg, sizeof cfg, "%s/bad.yaml", R.dir);
    FILE *f = fopen(cfg, "w");
    fputs("worker:\n  batch: 0\n", f);
    fclose(f);
    setenv("JOBRUNNER_REDIS_URL", R.url, 1);
    struct {
        const char *args[8];
        int status;
        const char *says; /* on stderr; NULL for status 0 */
    } cases[] = {
        {{"version", NULL}, 0, NULL},
        {{"--help", NULL}, 0, NULL},
        {{"stats", NULL}, 0, NULL},
        {{"functions", "dump", NULL}, 0, NULL},
        {{"functions", "load", NULL}, 0, NULL},
        {{"stats", "--redis", nowhere, NULL}, 1, "cannot connect to Redis"},
        {{"enqueue", "--redis", nowhere, "echo", NULL}, 1, "cannot connect to Redis"},
        {{"functions", "load", "--redis", nowhere, NULL}, 1, "cannot connect to Redis"},
        {{"worker", "--plugin", "/nonexistent/x.so", NULL}, 1, "/nonexistent/x.so"},
        {{NULL}, 2, "usage: jobrunner"},
        {{"frobnicate", NULL}, 2, "unknown command"},
        {{"functions", "frob", NULL}, 2, "expected load or dump"},
        {{"worker", "--concurrency", "0", NULL}, 2, "invalid --concurrency \"0\": worker.concurrency"},
        {{"scheduler", "--log-level", "loud", NULL}, 2, "invalid --log-level \"loud\": log.level"},
        {{"stats", "--concurrency", "3", NULL}, 2, "\"--concurrency\""},
        {{"stats", "-c", cfg, NULL}, 2, "worker.batch"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        int st = jrt_run(out, sizeof out, err, sizeof err, cases[i].args);
        cr_expect_eq(st, cases[i].status, "case %zu (%s): exit %d, stderr: %s", i,
                     cases[i].args[0] ? cases[i].args[0] : "no arguments", st, err);
        if (cases[i].says)
            cr_expect(strstr(err, cases[i].says), "case %zu: stderr does not say %s:\n%s", i, cases[i].says, err);
    }
    /* A bad value in the environment: 2, naming the variable and the value. */
    setenv("JOBRUNNER_WORKER_BATCH", "many", 1);
    const char *stats[] = {"stats", NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, stats), 2);
    cr_expect(strstr(err, "JOBRUNNER_WORKER_BATCH=\"many\": worker.batch: must be an integer"), "%s", err);
    unsetenv("JOBRUNNER_WORKER_BATCH");
    /* An unknown JOBRUNNER_ variable: a warning, and the command runs. */
    setenv("JOBRUNNER_WORKER_CONCURENCY", "8", 1);
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, stats), 0);
    cr_expect(strstr(err, "warning: ignoring JOBRUNNER_WORKER_CONCURENCY"), "%s", err);
    unsetenv("JOBRUNNER_WORKER_CONCURENCY");
    unsetenv("JOBRUNNER_REDIS_URL");
}

/* The reply of FCALL jr_version 0 on a fresh connection: "1" or the error. */
static void fcall_version(char *buf, size_t len) {
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommand(c, "FCALL jr_version 0");
    cr_assert(rep);
    if (rep->type == REDIS_REPLY_INTEGER) snprintf(buf, len, "%lld", rep->integer);
    else snprintf(buf, len, "%s", rep->str ? rep->str : "?");
    freeReplyObject(rep);
    redisFree(c);
}

/* A producer in another language on a fresh Redis: "Function not found"
 * until the library is loaded, by `jobrunner functions load` or by
 * redis-cli with the library file, as docs/redis-contract.md says. */
Test(cli, functions_load_on_a_fresh_redis) {
    char v[256];
    fcall_version(v, sizeof v);
    cr_expect(strstr(v, "Function not found"), "a fresh Redis: %s", v);
    const char *load[] = {"functions", "load", "--redis", R.url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, load), 0, "%s", err);
    cr_expect(strstr(out, "is loaded"), "%s", out);
    fcall_version(v, sizeof v);
    cr_expect_str_eq(v, "1");
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, load), 0, "again: %s", err);

    /* dump prints exactly the library file. */
    const char *dump[] = {"functions", "dump", NULL};
    static char lib[1 << 20];
    cr_assert_eq(jrt_run(lib, sizeof lib, err, sizeof err, dump), 0, "%s", err);
    char *src = jrt_slurp(JRT_LUA_LIBRARY);
    cr_assert(strlen(src) < sizeof lib - 1, "the library outgrew the test's buffer");
    cr_expect_str_eq(lib, src);
    free(src);

    /* The documented redis-cli way, on a Redis without the library. */
    redisContext *c = jrt_connect(&R);
    freeReplyObject(redisCommand(c, "FUNCTION FLUSH"));
    redisFree(c);
    fcall_version(v, sizeof v);
    cr_expect(strstr(v, "Function not found"), "after FUNCTION FLUSH: %s", v);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -s %s -x FUNCTION LOAD REPLACE < %s >/dev/null", JRT_REDIS_CLI, R.sock,
             JRT_LUA_LIBRARY);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    fcall_version(v, sizeof v);
    cr_expect_str_eq(v, "1");
}

/* --wait (redis.wait): a command started before Redis waits for it instead
 * of failing; without it, it fails at once, naming the reason. */
Test(cli, wait_lets_a_command_wait_for_redis_to_come_up) {
    jrt_stop(R.pid, SIGKILL, 5000);
    unlink(R.sock);
    const char *now[] = {"stats", "--redis", R.url, NULL};
    int64_t t0 = jrt_wall_us();
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, now), 1, "stats without Redis: %s", err);
    cr_expect(strstr(err, "cannot connect"), "no reason given: %s", err);
    cr_expect_lt(jrt_wall_us() - t0, 2000000, "without --wait it did not fail at once");

    char log[256];
    snprintf(log, sizeof log, "%s/wait.log", R.dir);
    const char *waiting[] = {"enqueue", "--wait", "20s", "--redis", R.url, "echo", "hi", NULL};
    pid_t pid = jrt_spawn(log, waiting);
    char flog[256]; /* every command that talks to Redis waits, `functions load` too */
    snprintf(flog, sizeof flog, "%s/wait-functions.log", R.dir);
    const char *fwaiting[] = {"functions", "load", "--wait", "20s", "--redis", R.url, NULL};
    pid_t fpid = jrt_spawn(flog, fwaiting);
    jrt_sleep_ms(800);
    jrt_redis_restart(&R, NULL);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "enqueue --wait failed after Redis came up: %s",
              jrt_slurp(log));
    cr_assert_eq(waitpid(fpid, &st, 0), fpid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "functions load --wait failed after Redis came up: %s",
              jrt_slurp(flog));
    cr_expect_eq(jrt_stats(&R, "default").ready, 1, "the job was not enqueued");

    const char *bad[] = {"stats", "--wait", "2h", "--redis", R.url, NULL};
    cr_expect_eq(jrt_run(out, sizeof out, err, sizeof err, bad), 2, "--wait 2h accepted");
    cr_expect(strstr(err, "redis.wait"), "the refusal does not name the key: %s", err);
}

/* A queue name nothing ever used is probably a typo: pause, resume and
 * stats -q say so on stderr (and still do what was asked: a pause ahead of
 * time is meant to work); a queue with jobs, one of a partitioned queue's
 * name, or one already paused gets no warning. */
Test(cli, a_queue_never_used_is_named_as_such) {
    setenv("JOBRUNNER_REDIS_URL", R.url, 1);
    const char *enq[] = {"enqueue", "-q", "orders", "echo", "a", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, enq), 0, "%s", err);
    const char *typo[] = {"pause", "ordres", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, typo), 0, "%s", err);
    cr_expect(strstr(err, "warning: queue \"ordres\" is not known"), "pause of a never-used queue: %s", err);
    cr_expect(strstr(out, "ordres paused"), "%s", out);
    const char *again[] = {"pause", "ordres", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, again), 0, "%s", err);
    cr_expect(!strstr(err, "warning"), "a paused queue is known: %s", err);
    const char *good[] = {"pause", "orders", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, good), 0, "%s", err);
    cr_expect(!strstr(err, "warning"), "a queue with a job is known: %s", err);
    const char *res[] = {"resume", "nosuch", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, res), 0, "%s", err);
    cr_expect(strstr(err, "warning: queue \"nosuch\" is not known"), "resume: %s", err);
    const char *st[] = {"stats", "-q", "orders", "-q", "typo", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, st), 0, "%s", err);
    cr_expect(strstr(err, "warning: queue \"typo\" is not known") && !strstr(err, "\"orders\""), "stats -q: %s", err);
    const char *parts[] = {"queue", "partitions", "split", "3", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, parts), 0, "%s", err);
    const char *enq2[] = {"enqueue", "-q", "split", "echo", "b", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, enq2), 0, "%s", err);
    const char *st2[] = {"stats", "-q", "split", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, st2), 0, "%s", err);
    cr_expect(!strstr(err, "warning"), "a partitioned queue is known by its name: %s", err);
    unsetenv("JOBRUNNER_REDIS_URL");
}
