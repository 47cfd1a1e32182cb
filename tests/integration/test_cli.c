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
    jrt_sleep_ms(300); /* the worker loads the function library */

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
    cr_expect(strstr(out, "{\"queue\":\"default\",\"ready\":2,\"pending\":0,\"delayed\":1,\"dead\":0}"), "%s", out);
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
