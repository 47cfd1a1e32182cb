/* Unit tests for config.c: defaults, the YAML loader and its error messages,
 * environment overrides. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "contract.h"
#include "harness.h"
#include "jobrunner/plugin.h"
#include "jr.h"
#include "jr_limits.h"

static jr_config_t cfg;
static char err[JR_ERRLEN];

static void setup(void) {
    cr_assert_eq(jr_config_init(&cfg), 0);
    err[0] = '\0';
}
static void teardown(void) { jr_config_free(&cfg); }

TestSuite(config, .init = setup, .fini = teardown);

static int load(const char *yaml) {
    return jr_config_load_string(&cfg, yaml, strlen(yaml), "t.yaml", err, sizeof err);
}

static void load_ok(const char *yaml) {
    int rc = load(yaml);
    cr_assert_eq(rc, 0, "load failed (%d): %s\n--- document:\n%s", rc, err, yaml);
}

/* Load a bad document; assert JR_EINVAL and that the message contains each
 * NULL-terminated fragment (the first is usually "t.yaml:LINE: KEY: "). */
static void load_bad(const char *yaml, ...) {
    int rc = load(yaml);
    cr_assert_eq(rc, JR_EINVAL, "expected JR_EINVAL, got %d (%s)\n--- document:\n%s", rc, err,
                 yaml);
    va_list ap;
    va_start(ap, yaml);
    for (const char *frag; (frag = va_arg(ap, const char *));)
        cr_expect(strstr(err, frag) != NULL, "message \"%s\" lacks \"%s\"\n--- document:\n%s",
                  err, frag, yaml);
    va_end(ap);
}

static void expect_list(const jr_strlist_t *l, size_t n, ...) {
    cr_assert_eq(l->n, n, "list has %zu items, expected %zu", l->n, n);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) cr_expect_str_eq(l->v[i], va_arg(ap, const char *));
    va_end(ap);
}

static void expect_defaults(const jr_config_t *c) {
    cr_expect_null(c->redis_url);
    cr_expect_eq(c->connect_timeout_ms, 2000);
    cr_expect_eq(c->log_format, JR_LOG_TEXT);
    cr_expect_eq(c->log_level, JR_LOG_INFO);
    cr_expect_eq(c->plugin_paths.n, 0);
    cr_expect_eq(c->worker_queues.n, 0);
    cr_expect_eq(c->worker_batch, 512);
    cr_expect_eq(c->worker_block_ms, 5000);
    cr_expect_eq(c->scheduler_queues.n, 0);
    cr_expect_eq(c->scheduler_batch, 1000);
    cr_expect_eq(c->scheduler_block_ms, 5000);
    cr_expect_str_eq(c->default_queue, "default");
    cr_expect_eq(c->worker_isolation, JR_ISOLATION_PROCESS);
    cr_expect_eq(c->worker_concurrency, 4);
    cr_expect_eq(c->worker_lease_ms, 30000);
    cr_expect_eq(c->worker_grace_ms, 8000);
    cr_expect_eq(c->jobs.timeout_ms, 300000);
    cr_expect_eq(c->jobs.max_attempts, 10);
    cr_expect_eq(c->jobs.backoff_ms, 1000);
    cr_expect_eq(c->jobs.backoff_max_ms, 3600000);
    cr_expect_eq(c->max_deliveries, 5);
    cr_expect_eq(c->max_payload, 1 << 20);
    cr_expect_eq(c->dead_max, 10000);
    cr_expect_eq(c->nhandlers, 0);
}

/* ---- defaults and good documents ---------------------------------------- */

Test(config, defaults) { expect_defaults(&cfg); }

Test(config, full_document_sets_every_field) {
    load_ok("redis:\n"
            "  url: unix:///run/redis.sock?db=2\n"
            "  connect_timeout: 750ms\n"
            "log:\n"
            "  format: json\n"
            "  level: warn\n"
            "plugins:\n"
            "  paths:\n"
            "    - /opt/jobs\n"
            "    - ./build/lib/email.so\n"
            "worker:\n"
            "  queues: [emails, \"reports:daily\"]\n"
            "  batch: 10000\n"
            "  block: 100ms\n"
            "scheduler:\n"
            "  queues: [emails]\n"
            "  batch: 1\n"
            "  block: 1m\n"
            "enqueue:\n"
            "  queue: emails\n");
    cr_expect_str_eq(cfg.redis_url, "unix:///run/redis.sock?db=2");
    cr_expect_eq(cfg.connect_timeout_ms, 750);
    cr_expect_eq(cfg.log_format, JR_LOG_JSON);
    cr_expect_eq(cfg.log_level, JR_LOG_WARN);
    expect_list(&cfg.plugin_paths, 2, "/opt/jobs", "./build/lib/email.so");
    expect_list(&cfg.worker_queues, 2, "emails", "reports:daily");
    cr_expect_eq(cfg.worker_batch, 10000);
    cr_expect_eq(cfg.worker_block_ms, 100);
    expect_list(&cfg.scheduler_queues, 1, "emails");
    cr_expect_eq(cfg.scheduler_batch, 1);
    cr_expect_eq(cfg.scheduler_block_ms, 60000);
    cr_expect_str_eq(cfg.default_queue, "emails");
}

Test(config, every_log_level) {
    static const char *names[] = {"debug", "info", "warn", "error"};
    static const int levels[] = {JR_LOG_DEBUG, JR_LOG_INFO, JR_LOG_WARN, JR_LOG_ERROR};
    char doc[64];
    for (int i = 0; i < 4; i++) {
        jr_config_free(&cfg);
        cr_assert_eq(jr_config_init(&cfg), 0);
        snprintf(doc, sizeof doc, "log:\n  level: %s\n", names[i]);
        load_ok(doc);
        cr_expect_eq(cfg.log_level, levels[i], "%s", names[i]);
    }
}

Test(config, partial_document_keeps_other_defaults) {
    load_ok("worker:\n  batch: 5\n");
    cr_expect_eq(cfg.worker_batch, 5);
    cr_expect_eq(cfg.worker_block_ms, 5000);
    cr_expect_eq(cfg.scheduler_batch, 1000);
    cr_expect_str_eq(cfg.default_queue, "default");
}

Test(config, empty_documents_are_fine) {
    load_ok("");
    load_ok("# only a comment\n\n");
    load_ok("---\n");
    load_ok("---\n...\n");
    expect_defaults(&cfg);
}

Test(config, section_with_every_key_commented_out) {
    load_ok("worker:\n  # batch: 5\nlog:\n");
    expect_defaults(&cfg);
}

Test(config, quoted_values_accepted) {
    load_ok("worker:\n  batch: \"42\"\n  block: '2s'\n");
    cr_expect_eq(cfg.worker_batch, 42);
    cr_expect_eq(cfg.worker_block_ms, 2000);
}

Test(config, empty_lists) {
    load_ok("worker:\n  queues: [a]\n");
    load_ok("worker:\n  queues: []\n");
    cr_expect_eq(cfg.worker_queues.n, 0);
}

Test(config, list_replaces_previous_list) {
    load_ok("worker:\n  queues: [a, b]\nplugins:\n  paths: [/x]\n");
    load_ok("worker:\n  queues:\n    - c\n");
    expect_list(&cfg.worker_queues, 1, "c");
    expect_list(&cfg.plugin_paths, 1, "/x"); /* not given the second time: kept */
}

Test(config, queue_name_edges) {
    char doc[300] = "enqueue:\n  queue: ";
    size_t n = strlen(doc);
    memset(doc + n, 'q', 128);
    strcpy(doc + n + 128, "\n");
    load_ok(doc);
    cr_expect_eq(strlen(cfg.default_queue), 128);
    load_ok("enqueue:\n  queue: A-z_0.9:x\n");
    cr_expect_str_eq(cfg.default_queue, "A-z_0.9:x");
}

Test(config, crlf_line_endings) {
    load_ok("worker:\r\n  batch: 7\r\n");
    cr_expect_eq(cfg.worker_batch, 7);
}

/* ---- errors: structure -------------------------------------------------- */

Test(config, unknown_section) {
    load_bad("log:\n  level: info\nworkers:\n  batch: 5\n", "t.yaml:3: workers: unknown section",
             "worker", NULL);
}

Test(config, unknown_key) {
    load_bad("worker:\n  batch: 5\n\n  blok: 5s\n", "t.yaml:4: worker.blok: unknown key",
             "block", NULL);
}

Test(config, scalar_where_mapping_expected) {
    load_bad("redis:\n  url: redis://h\nworker: 5\n", "t.yaml:3: worker: ", "mapping", NULL);
}

Test(config, sequence_where_mapping_expected) {
    load_bad("worker:\n  - batch\n", "t.yaml:2: worker: ", "mapping", "got a sequence", NULL);
}

Test(config, mapping_where_scalar_expected) {
    load_bad("worker:\n  batch:\n    value: 5\n", "t.yaml:3: worker.batch: ", "got a mapping",
             NULL);
}

Test(config, sequence_where_scalar_expected) {
    load_bad("enqueue:\n  queue: [a]\n", "t.yaml:2: enqueue.queue: ", "got a sequence", NULL);
}

Test(config, scalar_where_sequence_expected) {
    load_bad("worker:\n  queues: default\n", "t.yaml:2: worker.queues: ", "sequence",
             "got a scalar", NULL);
}

Test(config, mapping_where_sequence_expected) {
    load_bad("plugins:\n  paths: {a: b}\n", "t.yaml:2: plugins.paths: ", "sequence", NULL);
}

Test(config, sequence_item_not_a_string) {
    load_bad("worker:\n  queues:\n    - a\n    - [b]\n", "t.yaml:4: worker.queues[1]: ",
             "got a sequence", NULL);
}

Test(config, missing_value) {
    /* libyaml places an empty value on its key's line. */
    load_bad("worker:\n  block: 5s\n  batch:\n", "t.yaml:3: worker.batch: ", "empty value",
             NULL);
    load_bad("log:\n  level: ~\n", "t.yaml:2: log.level: ", "empty value", NULL);
}

Test(config, top_level_not_a_mapping) {
    load_bad("just a string\n", "t.yaml:1: ", "top level must be a mapping", NULL);
    load_bad("\n- redis\n- log\n", "t.yaml:2: ", "top level must be a mapping", "sequence",
             NULL);
}

Test(config, duplicate_key) {
    load_bad("worker:\n  batch: 5\n  block: 1s\n  batch: 6\n", "t.yaml:4: worker.batch: ",
             "duplicate key", "line 2", NULL);
}

Test(config, duplicate_section) {
    load_bad("worker:\n  batch: 5\nlog: {}\nworker:\n  block: 1s\n", "t.yaml:4: worker: ",
             "duplicate key", "line 1", NULL);
}

Test(config, syntax_error) {
    load_bad("worker:\n  batch: 5\n  queues: [a, b}\nlog:\n  level: info\n",
             "t.yaml:3: YAML syntax error: ", "flow sequence", NULL);
    load_bad("enqueue:\n  queue: \"abc\n\n", "t.yaml:4: YAML syntax error: ", "end of stream",
             NULL);
    load_bad("worker:\n  batch: 5\n block: 5s\n", "t.yaml:3: YAML syntax error", NULL);
    load_bad("worker:\n\tbatch: 5\n", "t.yaml:2: YAML syntax error", NULL);
}

Test(config, invalid_utf8_names_line) {
    load_bad("log:\n  level: info\nenqueue:\n  queue: caf\xff\n", "t.yaml:4: ", NULL);
}

Test(config, second_document_refused) {
    load_bad("worker:\n  batch: 5\n---\nworker:\n  batch: 6\n", "t.yaml:3: ",
             "one YAML document", NULL);
}

Test(config, alias_refused) {
    load_bad("worker:\n  batch: &b 5\nscheduler:\n  batch: *b\n", "t.yaml:4: scheduler.batch: ",
             "alias", NULL);
}

Test(config, complex_key_refused) {
    load_bad("worker:\n  ? [a]\n  : 5\n", "t.yaml:2: worker: ", "key", NULL);
}

/* ---- errors: values ----------------------------------------------------- */

Test(config, bad_integer) {
    load_bad("worker:\n  queues: [a]\n  batch: abc\n",
             "t.yaml:3: worker.batch: must be an integer from 1 to 10000, got \"abc\"", NULL);
    load_bad("worker:\n  batch: 12.5\n", "t.yaml:2: worker.batch: ", "\"12.5\"", NULL);
    load_bad("worker:\n  batch: 99999999999999999999999\n", "t.yaml:2: worker.batch: ", NULL);
    load_bad("worker:\n  batch: ' 5'\n", "t.yaml:2: worker.batch: ", NULL);
}

Test(config, integer_out_of_range) {
    load_bad("worker:\n  batch: 0\n", "t.yaml:2: worker.batch: ", "from 1 to 10000", "\"0\"",
             NULL);
    load_bad("worker:\n  batch: 10001\n", "t.yaml:2: worker.batch: ", "\"10001\"", NULL);
    load_bad("scheduler:\n  batch: 100001\n", "t.yaml:2: scheduler.batch: ", "1 to 100000", NULL);
    load_bad("scheduler:\n  batch: -1\n", "t.yaml:2: scheduler.batch: ", NULL);
}

Test(config, bad_duration) {
    load_bad("worker:\n  block: 5\n", "t.yaml:2: worker.block: ", "duration", "\"5\"", NULL);
    load_bad("redis:\n  connect_timeout: 2 s\n", "t.yaml:2: redis.connect_timeout: ",
             "\"2 s\"", NULL);
    load_bad("scheduler:\n  block: 5d\n", "t.yaml:2: scheduler.block: ", NULL);
}

Test(config, duration_out_of_range) {
    load_bad("worker:\n  block: 99ms\n", "t.yaml:2: worker.block: ",
             "from 100ms to 60s, got \"99ms\"", NULL);
    load_bad("worker:\n  block: 1m1ms\n", "t.yaml:2: worker.block: ", "\"1m1ms\"", NULL);
    load_bad("scheduler:\n  block: 0\n", "t.yaml:2: scheduler.block: ", NULL);
    load_bad("redis:\n  connect_timeout: 1h\n", "t.yaml:2: redis.connect_timeout: ", "5m",
             NULL);
}

Test(config, bad_enum) {
    load_bad("log:\n  format: xml\n", "t.yaml:2: log.format: ", "text or json", "\"xml\"", NULL);
    load_bad("log:\n  level: verbose\n", "t.yaml:2: log.level: ",
             "debug, info, warn or error", "\"verbose\"", NULL);
    load_bad("log:\n  level: INFO\n", "t.yaml:2: log.level: ", NULL);
}

Test(config, bad_redis_url) {
    load_bad("redis:\n  url: redis://h:99999\n", "t.yaml:2: redis.url: ", "bad port \"99999\"",
             NULL);
    load_bad("redis:\n  url: http://h\n", "t.yaml:2: redis.url: ", "unsupported scheme", NULL);
}

Test(config, bad_queue_names) {
    load_bad("worker:\n  queues: [ok, \"a b\"]\n", "t.yaml:2: worker.queues[1]: ",
             "bad queue name \"a b\"", NULL);
    load_bad("scheduler:\n  queues:\n    - ''\n", "t.yaml:3: scheduler.queues[0]: ",
             "bad queue name \"\"", NULL);
    load_bad("enqueue:\n  queue: a/b\n", "t.yaml:2: enqueue.queue: ", "bad queue name \"a/b\"",
             NULL);
    char doc[300] = "enqueue:\n  queue: ";
    size_t n = strlen(doc);
    memset(doc + n, 'q', 129);
    strcpy(doc + n + 129, "\n");
    load_bad(doc, "t.yaml:2: enqueue.queue: ", "bad queue name", NULL);
}

Test(config, duplicate_queue_in_list) {
    load_bad("worker:\n  queues:\n    - a\n    - b\n    - a\n", "t.yaml:5: worker.queues[2]: ",
             "\"a\"", "twice", NULL);
}

Test(config, empty_plugin_path) {
    load_bad("plugins:\n  paths: ['']\n", "t.yaml:2: plugins.paths[0]: ", "empty", NULL);
}

Test(config, error_keeps_what_came_before_and_no_later_keys) {
    load_bad("worker:\n  batch: 7\n  block: nope\n  queues: [x]\n", "t.yaml:3: ", NULL);
    cr_expect_eq(cfg.worker_batch, 7);
    cr_expect_eq(cfg.worker_block_ms, 5000);
    cr_expect_eq(cfg.worker_queues.n, 0);
}

Test(config, failed_list_leaves_old_list) {
    load_ok("worker:\n  queues: [a]\n");
    load_bad("worker:\n  queues: [b, \"c d\"]\n", "t.yaml:2: ", NULL);
    expect_list(&cfg.worker_queues, 1, "a");
}

/* ---- files -------------------------------------------------------------- */

Test(config, missing_file_is_io_error) {
    int rc = jr_config_load_file(&cfg, "/nonexistent/jr.yaml", err, sizeof err);
    cr_expect_eq(rc, JR_EIO);
    cr_expect(strstr(err, "/nonexistent/jr.yaml") != NULL, "%s", err);
}

Test(config, file_errors_name_the_file) {
    char path[] = "/tmp/jr_config_test_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char doc[] = "# comment\nworker:\n  batch: 5\n  batch: 6\n";
    cr_assert_eq(write(fd, doc, sizeof doc - 1), (ssize_t)(sizeof doc - 1));
    close(fd);
    int rc = jr_config_load_file(&cfg, path, err, sizeof err);
    unlink(path);
    cr_expect_eq(rc, JR_EINVAL);
    char want[128];
    snprintf(want, sizeof want, "%s:4: worker.batch: duplicate key", path);
    cr_expect(strstr(err, want) != NULL, "\"%s\" lacks \"%s\"", err, want);
}

Test(config, directory_is_io_error) {
    cr_expect_eq(jr_config_load_file(&cfg, "/tmp", err, sizeof err), JR_EIO);
    cr_expect(strstr(err, "/tmp") != NULL, "%s", err);
}

/* ---- environment, lists, freeing ---------------------------------------- */

/* Apply an environment given as "NAME=value" strings; warnings go to warn_out. */
static char warn_out[2048];
static int apply_env(const char *const *vars) {
    char *envp[16] = {0};
    size_t n = 0;
    for (; vars[n]; n++) envp[n] = (char *)vars[n];
    envp[n] = NULL;
    FILE *w = fmemopen(warn_out, sizeof warn_out, "w");
    cr_assert(w);
    setvbuf(w, NULL, _IONBF, 0);
    int rc = jr_config_apply_env(&cfg, envp, w, err, sizeof err);
    fclose(w);
    return rc;
}

/* redis.sentinel_password: from the file, overridden by its variable; unset
 * by default. */
Test(config, sentinel_password) {
    cr_expect_null(cfg.redis_sentinel_password);
    load_ok("redis:\n  url: redis-sentinel://s1,s2/m\n  sentinel_password: \"fr om#file\"\n");
    cr_expect_str_eq(cfg.redis_sentinel_password, "fr om#file");
    const char *env[] = {"JOBRUNNER_REDIS_SENTINEL_PASSWORD=s3cret", NULL};
    cr_expect_eq(apply_env(env), 0, "%s", err);
    cr_expect_str_eq(cfg.redis_sentinel_password, "s3cret");
}

Test(config, env_overrides_redis_url) {
    load_ok("redis:\n  url: redis://fromfile\n");
    const char *env[] = {"JOBRUNNER_REDIS_URL=redis://fromenv:7000", NULL};
    cr_expect_eq(apply_env(env), 0, "%s", err);
    cr_expect_str_eq(cfg.redis_url, "redis://fromenv:7000");
}

Test(config, empty_or_unset_env_changes_nothing) {
    load_ok("redis:\n  url: redis://fromfile\nworker:\n  concurrency: 7\n");
    const char *empty[] = {"JOBRUNNER_REDIS_URL=", "JOBRUNNER_WORKER_CONCURRENCY=", NULL};
    cr_expect_eq(apply_env(empty), 0);
    cr_expect_str_eq(cfg.redis_url, "redis://fromfile");
    cr_expect_eq(cfg.worker_concurrency, 7);
    const char *none[] = {NULL};
    cr_expect_eq(apply_env(none), 0);
    cr_expect_str_eq(cfg.redis_url, "redis://fromfile");
    cr_expect_eq(cfg.worker_concurrency, 7);
}

Test(config, env_sets_url_when_file_has_none) {
    const char *env[] = {"JOBRUNNER_REDIS_URL=unix:///tmp/r.sock", NULL};
    cr_expect_eq(apply_env(env), 0);
    cr_expect_str_eq(cfg.redis_url, "unix:///tmp/r.sock");
}

Test(config, env_sets_every_kind_of_key) {
    const char *env[] = {
        "JOBRUNNER_WORKER_CONCURRENCY=8",              /* integer */
        "JOBRUNNER_WORKER_BLOCK=250ms",                /* duration */
        "JOBRUNNER_LOG_LEVEL=debug",                   /* enum */
        "JOBRUNNER_LOG_FORMAT=json",
        "JOBRUNNER_ENQUEUE_QUEUE=mail",                /* one queue */
        "JOBRUNNER_WORKER_QUEUES=critical, default,low", /* list, comma form */
        "JOBRUNNER_SCHEDULER_QUEUES=[a, b]",           /* list, YAML flow form */
        "JOBRUNNER_PLUGINS_PATHS=/opt/my plugins/x#1.so", /* taken literally */
        "JOBRUNNER_METRICS_LISTEN=[::1]:9464",         /* address: a leading [ is literal */
        "JOBRUNNER_JOBS_MAX_ATTEMPTS=3",               /* '_' in the key */
        "JOBRUNNER_HANDLERS={send_mail: {timeout: 30s, max_attempts: 5}}", /* a section */
        NULL};
    cr_assert_eq(apply_env(env), 0, "%s", err);
    cr_expect_eq(cfg.worker_concurrency, 8);
    cr_expect_eq(cfg.worker_block_ms, 250);
    cr_expect_eq(cfg.log_level, JR_LOG_DEBUG);
    cr_expect_eq(cfg.log_format, JR_LOG_JSON);
    cr_expect_str_eq(cfg.default_queue, "mail");
    cr_assert_eq(cfg.worker_queues.n, 3);
    cr_expect_str_eq(cfg.worker_queues.v[0], "critical");
    cr_expect_str_eq(cfg.worker_queues.v[1], "default");
    cr_expect_str_eq(cfg.worker_queues.v[2], "low");
    cr_assert_eq(cfg.scheduler_queues.n, 2);
    cr_expect_str_eq(cfg.scheduler_queues.v[1], "b");
    cr_assert_eq(cfg.plugin_paths.n, 1);
    cr_expect_str_eq(cfg.plugin_paths.v[0], "/opt/my plugins/x#1.so");
    cr_expect_str_eq(cfg.metrics_listen, "[::1]:9464");
    cr_expect_eq(cfg.jobs.max_attempts, 3);
    jr_policy_t p = jr_config_policy(&cfg, "send_mail");
    cr_expect_eq(p.timeout_ms, 30000);
    cr_expect_eq(p.max_attempts, 5);
    cr_expect_str_eq(warn_out, "", "no warning expected: %s", warn_out);
}

Test(config, precedence_defaults_file_env_flags) {
    cr_expect_eq(cfg.worker_concurrency, 4); /* default */
    load_ok("worker:\n  concurrency: 2\n  batch: 64\n");
    cr_expect_eq(cfg.worker_concurrency, 2); /* file over default */
    const char *env[] = {"JOBRUNNER_WORKER_CONCURRENCY=3", NULL};
    cr_assert_eq(apply_env(env), 0, "%s", err);
    cr_expect_eq(cfg.worker_concurrency, 3); /* environment over file */
    cr_expect_eq(cfg.worker_batch, 64);      /* what the environment does not set stays */
    cr_assert_eq(jr_config_set(&cfg, "worker.concurrency", "5", err, sizeof err), 0, "%s", err);
    cr_expect_eq(cfg.worker_concurrency, 5); /* flag over environment */
}

Test(config, bad_env_value_names_variable_and_value) {
    load_ok("worker:\n  concurrency: 2\n");
    const char *env[] = {"JOBRUNNER_WORKER_CONCURRENCY=lots", NULL};
    cr_expect_eq(apply_env(env), JR_EINVAL);
    cr_expect(strstr(err, "JOBRUNNER_WORKER_CONCURRENCY=\"lots\": worker.concurrency: must be an integer from 1 to 256"),
              "%s", err);
    cr_expect_eq(cfg.worker_concurrency, 2, "a refused value changes nothing");
    const char *big[] = {"JOBRUNNER_WORKER_CONCURRENCY=0", NULL};
    cr_expect_eq(apply_env(big), JR_EINVAL);
    cr_expect(strstr(err, "JOBRUNNER_WORKER_CONCURRENCY=\"0\""), "%s", err);
    const char *lvl[] = {"JOBRUNNER_LOG_LEVEL=loud", NULL};
    cr_expect_eq(apply_env(lvl), JR_EINVAL);
    cr_expect(strstr(err, "JOBRUNNER_LOG_LEVEL=\"loud\": log.level: must be debug, info, warn or error"), "%s", err);
    const char *q[] = {"JOBRUNNER_WORKER_QUEUES=a,b c", NULL};
    cr_expect_eq(apply_env(q), JR_EINVAL);
    cr_expect(strstr(err, "JOBRUNNER_WORKER_QUEUES=\"a,b c\": worker.queues[1]: bad queue name \"b c\""), "%s", err);
    cr_expect_eq(cfg.worker_queues.n, 0);
    const char *dup[] = {"JOBRUNNER_WORKER_QUEUES=a,a", NULL};
    cr_expect_eq(apply_env(dup), JR_EINVAL);
    cr_expect(strstr(err, "listed twice"), "%s", err);
    /* YAML syntax in a value is not interpreted: the value is one string. */
    const char *yaml[] = {"JOBRUNNER_ENQUEUE_QUEUE={a: b}", NULL};
    cr_expect_eq(apply_env(yaml), JR_EINVAL);
    cr_expect(strstr(err, "bad queue name \"{a: b}\""), "%s", err);
    const char *two[] = {"JOBRUNNER_WORKER_QUEUES=[a,\n  b]", NULL};
    cr_expect_eq(apply_env(two), JR_EINVAL);
    cr_expect(strstr(err, "one line"), "%s", err);
}

Test(config, bad_env_url_does_not_repeat_the_password) {
    const char *env[] = {"JOBRUNNER_REDIS_URL=redis://:s3cret@host:port", NULL};
    cr_expect_eq(apply_env(env), JR_EINVAL);
    cr_expect(strstr(err, "JOBRUNNER_REDIS_URL: redis.url: "), "%s", err);
    cr_expect(!strstr(err, "s3cret"), "the password is in the message: %s", err);
}

Test(config, unknown_env_variables_warn_and_are_ignored) {
    const char *env[] = {"JOBRUNNER_WORKER_CONCURENCY=8", "JOBRUNNER_CONFIG=/etc/x.yaml",
                         "JOBRUNNER_SERVICE_PORT=443", "PATH=/bin", "JOBRUNNERX=1", NULL};
    cr_expect_eq(apply_env(env), 0, "%s", err);
    cr_expect_eq(cfg.worker_concurrency, 4);
    cr_expect(strstr(warn_out, "ignoring JOBRUNNER_WORKER_CONCURENCY: no such setting"), "%s", warn_out);
    cr_expect(strstr(warn_out, "ignoring JOBRUNNER_SERVICE_PORT"), "%s", warn_out);
    cr_expect(!strstr(warn_out, "JOBRUNNER_CONFIG"), "JOBRUNNER_CONFIG is known: %s", warn_out);
    cr_expect(!strstr(warn_out, "PATH") && !strstr(warn_out, "JOBRUNNERX"), "%s", warn_out);
}

Test(config, set_one_key_checks_like_the_file) {
    cr_expect_eq(jr_config_set(&cfg, "log.format", "xml", err, sizeof err), JR_EINVAL);
    cr_expect(strstr(err, "log.format: must be text or json, got \"xml\""), "%s", err);
    cr_expect_eq(cfg.log_format, JR_LOG_TEXT);
    cr_expect_eq(jr_config_set(&cfg, "worker.nonsense", "1", err, sizeof err), JR_EINVAL);
    cr_expect(strstr(err, "worker.nonsense: unknown key"), "%s", err);
    cr_expect_eq(jr_config_set(&cfg, "log.level", "warn", err, sizeof err), 0);
    cr_expect_eq(cfg.log_level, JR_LOG_WARN);
}

/* redis.tls is a mapping inside redis: from the file, the environment
 * (JOBRUNNER_REDIS_TLS_<KEY>) and jr_config_set; its unknown keys are
 * named with their path; verify is true by default. */
Test(config, redis_tls_mapping) {
    cr_expect_eq(cfg.tls_verify, 1);
    cr_expect_null(cfg.tls_ca_file);
    load_ok("redis:\n  url: rediss://h:6380\n  tls:\n    ca_file: /ca.crt\n    cert_file: /c.crt\n"
            "    key_file: /c.key\n    server_name: db.internal\n    verify: false\n  wait: 1s\n");
    cr_expect_str_eq(cfg.tls_ca_file, "/ca.crt");
    cr_expect_str_eq(cfg.tls_cert_file, "/c.crt");
    cr_expect_str_eq(cfg.tls_key_file, "/c.key");
    cr_expect_str_eq(cfg.tls_server_name, "db.internal");
    cr_expect_eq(cfg.tls_verify, 0);
    cr_expect_eq(cfg.redis_wait_ms, 1000);
    char *env[] = {"JOBRUNNER_REDIS_TLS_CA_DIR=/etc/ssl/certs", "JOBRUNNER_REDIS_TLS_VERIFY=true", NULL};
    cr_assert_eq(jr_config_apply_env(&cfg, env, NULL, err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(cfg.tls_ca_dir, "/etc/ssl/certs");
    cr_expect_eq(cfg.tls_verify, 1);
    cr_expect_eq(jr_config_set(&cfg, "redis.tls.ca_file", "/other.crt", err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(cfg.tls_ca_file, "/other.crt");
    load_bad("redis:\n  tls:\n    cafile: x\n", "t.yaml:3: redis.tls.cafile: unknown key", "ca_file", NULL);
    load_bad("redis:\n  tls:\n    verify: yes\n", "redis.tls.verify", "false or true", NULL);
    load_bad("redis:\n  tls:\n    ca_file: \"\"\n", "redis.tls.ca_file", "must not be empty", NULL);
    load_bad("redis:\n  tls: x\n", "redis.tls", "expected a mapping", NULL);
    load_bad("redis.tls:\n  ca_file: x\n", "unknown section", NULL);
    load_bad("redis:\n  nope: 1\n", "unknown key", "tls", NULL);
}

/* Every key has its own variable, and the man page lists each one. */
Test(config, every_key_has_a_distinct_documented_variable) {
    char *man = jrt_slurp(JRT_SOURCE_DIR "/docs/jobrunner.1");
    cr_assert(man, "docs/jobrunner.1 is missing");
    /* roff writes '_' as is; strip nothing else: names have no '-'. */
    char names[64][128];
    size_t n = 0;
    jr_config_key_t k;
    for (size_t i = 0; jr_config_key(i, &k) == 0; i++) {
        cr_assert(n < 64);
        for (size_t j = 0; j < n; j++) cr_expect_str_neq(names[j], k.env, "%s twice", k.env);
        snprintf(names[n++], sizeof names[0], "%s", k.env);
        cr_expect(strstr(man, k.env), "the man page does not list %s", k.env);
    }
    cr_expect_gt(n, 20);
    free(man);
}

Test(config, free_twice) {
    load_ok("redis:\n  url: redis://h\nworker:\n  queues: [a, b]\n");
    jr_config_free(&cfg);
    jr_config_free(&cfg);
    cr_expect_null(cfg.redis_url);
    cr_expect_null(cfg.default_queue);
    cr_expect_eq(cfg.worker_queues.n, 0);
}

Test(config, strlist_push_copies) {
    jr_strlist_t l = {0};
    char s[] = "abc";
    cr_assert_eq(jr_strlist_push(&l, s), 0);
    cr_assert_eq(jr_strlist_push(&l, "def"), 0);
    s[0] = 'X';
    expect_list(&l, 2, "abc", "def");
    jr_strlist_free(&l);
    cr_expect_eq(l.n, 0);
    cr_expect_null(l.v);
    jr_strlist_free(&l);
}

/* ---- reliability settings and handler overrides ----------------------- */

Test(config, handler_overrides_inherit_what_they_leave_out) {
    load_ok("jobs:\n  timeout: 1m\n  max_attempts: 4\n"
            "handlers:\n  send_mail:\n    timeout: 30s\n  resize: {max_attempts: 2, backoff: 10ms}\n"
            "worker:\n  isolation: inline\n  concurrency: 4\n  lease: 2s\n  grace: 0s\n"
            "dead:\n  max: 50\n");
    cr_expect_eq(cfg.worker_isolation, JR_ISOLATION_INLINE);
    cr_expect_eq(cfg.worker_concurrency, 4);
    cr_expect_eq(cfg.worker_lease_ms, 2000);
    cr_expect_eq(cfg.worker_grace_ms, 0);
    cr_expect_eq(cfg.dead_max, 50);
    jr_policy_t m = jr_config_policy(&cfg, "send_mail");
    cr_expect(m.timeout_ms == 30000 && m.max_attempts == 4 && m.backoff_ms == 1000);
    jr_policy_t r = jr_config_policy(&cfg, "resize");
    cr_expect(r.timeout_ms == 60000 && r.max_attempts == 2 && r.backoff_ms == 10 && r.backoff_max_ms == 3600000);
    jr_policy_t other = jr_config_policy(&cfg, "unlisted");
    cr_expect(other.timeout_ms == 60000 && other.max_attempts == 4);
}

Test(config, bad_handler_overrides_are_named) {
    load_bad("handlers:\n  send_mail:\n    retries: 3\n", "t.yaml:3: handlers.send_mail.retries: unknown key", NULL);
    load_bad("handlers:\n  a:\n    max_deliveries: 3\n", "handlers.a.max_deliveries: unknown key", NULL);
    load_bad("handlers:\n  a: {timeout: soon}\n", "handlers.a.timeout: must be a duration", NULL);
    load_bad("handlers:\n  a: {}\n  a: {}\n", "t.yaml:3: handlers.a: duplicate key", NULL);
    /* a key given twice within one handler or queue: the second no longer wins silently */
    load_bad("handlers:\n  a:\n    keep_finished: {count: 1}\n    keep_finished: {count: 2}\n",
             "t.yaml:4: handlers.a.keep_finished: duplicate key (first given on line 3)", NULL);
    load_bad("queues:\n  q:\n    partitions: 4\n    partitions: 8\n",
             "t.yaml:4: queues.q.partitions: duplicate key (first given on line 3)", NULL);
    load_bad("queues:\n  q:\n    keep_finished: {count: 1}\n    partitions: 2\n    keep_finished: {count: 3}\n",
             "t.yaml:5: queues.q.keep_finished: duplicate key (first given on line 3)", NULL);
    load_bad("handlers:\n  \"bad name\": {}\n", "bad handler name", NULL);
    load_bad("handlers: [a]\n", "handlers: expected a mapping", NULL);
    load_bad("worker:\n  isolation: thread\n", "t.yaml:2: worker.isolation: must be process or inline", NULL);
    load_bad("jobs:\n  max_attempts: 0\n", "jobs.max_attempts: must be an integer from 1 to 1000", NULL);
}

/* ---- bounds ------------------------------------------------------------- */

/* Every duration key, its documented range and the range as the message
 * gives it. */
static const struct {
    const char *section, *key;
    int64_t min, max;
    const char *range;
} duration_keys[] = {
    {"redis", "connect_timeout", 10, 300000, "from 10ms to 5m"},
    {"worker", "block", 100, 60000, "from 100ms to 60s"},
    {"worker", "lease", 100, 3600000, "from 100ms to 60m"},
    {"worker", "grace", 0, 3600000, "from 0 to 60m"},
    {"jobs", "timeout", 1, JR_TIMEOUT_MAX_MS, "from 1ms to 168h (7 days)"},
    {"jobs", "backoff", 0, JR_BACKOFF_MAX_MS, "from 0 to 720h (30 days)"},
    {"jobs", "backoff_max", 0, JR_BACKOFF_MAX_MS, "from 0 to 720h (30 days)"},
    {"scheduler", "block", 100, 60000, "from 100ms to 60s"},
};

/* Each duration key takes its maximum, refuses one millisecond more and any
 * value too long for 64 bits with a message naming the key and the range;
 * a handler override has the bounds of its "jobs" key. Integer keys too. */
Test(config, every_duration_and_integer_key_has_its_maximum) {
    char doc[512], want[128];
    for (size_t i = 0; i < sizeof duration_keys / sizeof duration_keys[0]; i++) {
        const char *sec = duration_keys[i].section, *key = duration_keys[i].key;
        const char *over[] = {"99999999999999999999h", "3000000000h", "9223372036854775807ms",
                              "2562047788015h13m"}; /* over INT64_MAX ms only summed */
        snprintf(doc, sizeof doc, "%s:\n  %s: %lldms\n", sec, key, (long long)duration_keys[i].max);
        load_ok(doc);
        snprintf(doc, sizeof doc, "%s:\n  %s: %lldms\n", sec, key, (long long)duration_keys[i].max + 1);
        snprintf(want, sizeof want, "t.yaml:2: %s.%s: must be a duration %s, got", sec, key,
                 duration_keys[i].range);
        load_bad(doc, want, NULL);
        for (size_t k = 0; k < 4; k++) {
            snprintf(doc, sizeof doc, "%s:\n  %s: %s\n", sec, key, over[k]);
            load_bad(doc, want, over[k], NULL);
        }
        if (strcmp(sec, "jobs") != 0) continue;
        snprintf(doc, sizeof doc, "handlers:\n  h:\n    %s: %s\n", key, over[0]);
        snprintf(want, sizeof want, "t.yaml:3: handlers.h.%s: must be a duration %s", key,
                 duration_keys[i].range);
        load_bad(doc, want, NULL);
    }
    load_ok("jobs:\n  max_attempts: 1000\n");
    load_bad("handlers:\n  h: {max_attempts: 1001}\n", "handlers.h.max_attempts: must be an integer from 1 to 1000", NULL);

    /* Integer keys: one past the maximum, values too long for 64 bits and
     * anything but plain ASCII decimal are refused, the range named. */
    const struct {
        const char *section, *key, *range, *max;
    } ints[] = {
        {"worker", "batch", "from 1 to 10000", "10000"},
        {"worker", "concurrency", "from 1 to 256", "256"},
        {"jobs", "max_attempts", "from 1 to 1000", "1000"},
        {"jobs", "max_deliveries", "from 1 to 1000", "1000"},
        {"jobs", "max_payload", "from 1 to 536870912", "536870912"},
        {"dead", "max", "from 1 to 10000000", "10000000"},
        {"scheduler", "batch", "from 1 to 100000", "100000"},
    };
    const char *bad[] = {"99999999999999999999", "9223372036854775808", "-9223372036854775809",
                         "0x10", "1e3", "+5", "\"\\uFF15\"", "' 5'", "'5 '", "5.0", ".inf", ".nan",
                         "1_000", "0", "-0", "0b11"};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        snprintf(doc, sizeof doc, "%s:\n  %s: %s\n", ints[i].section, ints[i].key, ints[i].max);
        load_ok(doc);
        snprintf(want, sizeof want, "t.yaml:2: %s.%s: must be an integer %s, got", ints[i].section,
                 ints[i].key, ints[i].range);
        snprintf(doc, sizeof doc, "%s:\n  %s: %s1\n", ints[i].section, ints[i].key, ints[i].max);
        load_bad(doc, want, NULL);
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            snprintf(doc, sizeof doc, "%s:\n  %s: %s\n", ints[i].section, ints[i].key, bad[k]);
            load_bad(doc, want, NULL);
        }
    }
}

/* Inputs that are no duration at all are refused by every duration key,
 * with the key named; none is read as a number. */
Test(config, hostile_durations_refused_by_every_key) {
    const char *bad[] = {"1e400s", "-5s", "5", "'5 s'", "1h-30m", "nan", ".nan", ".inf", "0x10s",
                         "\"\\uFF15s\"", "'1h 30m'", "1_000ms", "5d", "5S"};
    char doc[256], want[128];
    for (size_t i = 0; i < sizeof duration_keys / sizeof duration_keys[0]; i++) {
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            snprintf(doc, sizeof doc, "%s:\n  %s: %s\n", duration_keys[i].section,
                     duration_keys[i].key, bad[k]);
            snprintf(want, sizeof want, "t.yaml:2: %s.%s: must be a duration like",
                     duration_keys[i].section, duration_keys[i].key);
            load_bad(doc, want, NULL);
        }
    }
    /* A very long value is refused too, and the message stays bounded. */
    size_t n = 1 << 20;
    char *doc2 = malloc(n + 64);
    strcpy(doc2, "jobs:\n  timeout: ");
    memset(doc2 + strlen(doc2), '9', n);
    strcpy(doc2 + 17 + n, "h\n");
    cr_assert_eq(load(doc2), JR_EINVAL);
    cr_expect(strstr(err, "t.yaml:2: jobs.timeout: must be a duration from 1ms to 168h (7 days)"), "%s", err);
    free(doc2);
}

/* Write a document of n handler overrides (names sharing a long prefix,
 * as a generated config would) and n queues. */
static char *big_config(size_t n, const char *timeout, size_t *len) {
    size_t cap = n * 120 + 64, w = 0;
    char *doc = malloc(cap);
    cr_assert(doc);
    w += (size_t)snprintf(doc + w, cap - w, "handlers:\n");
    for (size_t i = 0; i < n; i++)
        w += (size_t)snprintf(doc + w, cap - w, "  generated.handler.with.a.long.prefix.%07zu: {timeout: %s}\n", i, timeout);
    w += (size_t)snprintf(doc + w, cap - w, "worker:\n  queues:\n");
    for (size_t i = 0; i < n; i++)
        w += (size_t)snprintf(doc + w, cap - w, "    - generated.queue.with.a.long.prefix.%07zu\n", i);
    *len = w;
    return doc;
}

/* 200,000 handler overrides and 200,000 queues load, load again over the
 * first file, and answer 200,000 policy lookups, all within the test's
 * timeout: each step is linear or n log n. Measured: 4 s here (25 s under
 * ASan on a loaded machine); the quadratic loader took 26 s for 100,000
 * overrides, so minutes for this test. Duplicates are still found. */
Test(config, two_hundred_thousand_entries_load_in_linear_time, .timeout = 120) {
    enum { N = 200000 };
    size_t len;
    char *doc = big_config(N, "1s", &len);
    cr_assert_eq(jr_config_load_string(&cfg, doc, len, "big.yaml", err, sizeof err), 0, "%s", err);
    free(doc);
    doc = big_config(N, "2s", &len); /* a second file replaces every override */
    cr_assert_eq(jr_config_load_string(&cfg, doc, len, "big2.yaml", err, sizeof err), 0, "%s", err);
    free(doc);
    cr_assert_eq(cfg.nhandlers, N);
    cr_assert_eq(cfg.worker_queues.n, N);
    char name[96];
    for (size_t i = 0; i < N; i++) {
        snprintf(name, sizeof name, "generated.handler.with.a.long.prefix.%07zu", i);
        cr_assert_eq(jr_config_policy(&cfg, name).timeout_ms, 2000, "%s", name);
    }
    cr_expect_eq(jr_config_policy(&cfg, "generated.handler.with.a.long.prefix.x").timeout_ms, 300000);
    cr_expect_str_eq(cfg.worker_queues.v[N - 1], "generated.queue.with.a.long.prefix.0199999");

    /* The last entry repeats the first: found, with both lines. */
    doc = big_config(N, "1s", &len);
    char *q = strstr(doc, "    - generated.queue.with.a.long.prefix.0199999");
    memcpy(q + strlen("    - generated.queue.with.a.long.prefix."), "0000000", 7);
    cr_assert_eq(jr_config_load_string(&cfg, doc, len, "dup.yaml", err, sizeof err), JR_EINVAL);
    cr_expect(strstr(err, "dup.yaml:400003: worker.queues[199999]: queue \"generated.queue.with.a.long.prefix.0000000\" is listed twice (first given on line 200004)"), "%s", err);
    free(doc);
}

/* Overrides from two files merge: the later file's entry replaces the
 * earlier one's whole, the others stay; duplicates within a file are refused. */
Test(config, handler_overrides_of_two_files_merge) {
    load_ok("handlers:\n  a: {timeout: 1s}\n  b: {timeout: 2s}\n  c: {timeout: 3s}\n");
    load_ok("handlers:\n  b: {max_attempts: 7}\n  d: {timeout: 4s}\n");
    cr_expect_eq(cfg.nhandlers, 4);
    cr_expect_eq(jr_config_policy(&cfg, "a").timeout_ms, 1000);
    cr_expect_eq(jr_config_policy(&cfg, "b").timeout_ms, 300000, "replaced whole");
    cr_expect_eq(jr_config_policy(&cfg, "b").max_attempts, 7);
    cr_expect_eq(jr_config_policy(&cfg, "c").timeout_ms, 3000);
    cr_expect_eq(jr_config_policy(&cfg, "d").timeout_ms, 4000);
    load_bad("handlers:\n  c: {}\n  e: {}\n  c: {}\n", "t.yaml:4: handlers.c: duplicate key (first given on line 2)", NULL);
}

Test(config, plugin_settings_are_kept_per_plugin_and_a_later_file_overrides_one) {
    load_ok("plugin_settings:\n  greet:\n    greeting: Hello\n    punct: '!'\n  db:\n    url: postgres://x/y\n  empty:\n");
    expect_list(&cfg.plugin_settings, 9, "greet", "greeting", "Hello", "greet", "punct", "!", "db", "url",
                "postgres://x/y");
    load_ok("plugin_settings:\n  greet:\n    greeting: Bonjour\n");
    expect_list(&cfg.plugin_settings, 9, "greet", "greeting", "Bonjour", "greet", "punct", "!", "db", "url",
                "postgres://x/y");
    load_bad("plugin_settings: [a]\n", "t.yaml:1: plugin_settings: expected a mapping of plugin names", NULL);
    load_bad("plugin_settings:\n  greet: hello\n", "plugin_settings.greet: expected a mapping", NULL);
    load_bad("plugin_settings:\n  greet:\n    greeting: [a, b]\n", "plugin_settings.greet.greeting: expected a single value",
             NULL);
}

/* ---- what users read: the example file and the man page ---------------- */

/* One entry of config/jobrunner.yaml, the commented example that README
 * and the man page point to for every key, its default and its range. */
typedef struct {
    char name[64];     /* "worker.batch"; a section: "handlers" */
    char value[160];   /* as written after "KEY: " ("" if none) */
    int commented;     /* shown only in a comment ("# metrics:" / "#   listen: ...") */
    char about[2048];  /* the comment lines since the previous entry */
} shown_t;

enum { SHOWN_MAX = 96 };

/* Is name a section that the table sets whole (handlers, periodic, ...)? */
static int whole_section(const char *name) {
    jr_config_key_t k;
    for (size_t i = 0; jr_config_key(i, &k) == 0; i++)
        if (!strcmp(k.name, name)) return 1;
    return 0;
}

/* Is SECTION.KEY (key: name .. end) a key of the table? */
static int table_key(const char *section, const char *name, const char *end) {
    char full[160];
    snprintf(full, sizeof full, "%s.%.*s", section, (int)(end - name), name);
    jr_config_key_t k;
    for (size_t i = 0; jr_config_key(i, &k) == 0; i++)
        if (!strcmp(k.name, full)) return 1;
    return 0;
}

/* Read the example: a line "SECTION:" (or "# SECTION:" for a section shown
 * commented out) opens a section, "  KEY: VALUE" (or "#   KEY: VALUE") is a
 * key of it (also "#   KEY: VALUE" in a section shown uncommented, when
 * KEY is a key of the table: a key off unless given, e.g.
 * redis.password_file, redis.sentinel_password); "  KEY:" with nothing
 * after it opens a mapping of the section whose "    KEY: VALUE" (or
 * "#     KEY: VALUE") lines are keys SECTION.MAPPING.KEY (redis.tls); keys
 * inside a section set whole are its own business; every other comment
 * line is description. Returns the number of entries. */
static size_t read_example(shown_t *out, size_t max) {
    char *text = jrt_slurp(JRT_SOURCE_DIR "/config/jobrunner.yaml");
    cr_assert(text, "config/jobrunner.yaml is missing");
    size_t n = 0;
    char section[64] = "", sub[64] = "", about[2048] = "";
    int sec_commented = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        const char *p = line, *name;
        int commented = 0, indented;
        if (p[0] == '#' && p[1] == ' ') p += 2, commented = 1;
        indented = !strncmp(p, "  ", 2);
        if (indented) p += 2;
        /* A key of a mapping inside a section ("  tls:" then "    ca_file:",
         * or "#     ca_file:" for one shown commented out). */
        int deep = indented && !strncmp(p, "  ", 2);
        if (deep) p += 2;
        name = p;
        while ((*p >= 'a' && *p <= 'z') || *p == '_') p++;
        int entry = p > name && *p == ':' && (p[1] == '\0' || p[1] == ' ');
        if (entry && !indented && commented && p[1] != '\0') entry = 0; /* "# redis: ..." prose */
        if (entry && deep && !*sub) entry = 0;
        /* "#   key: value" in a section shown uncommented: a key of the table
         * that is off unless given (redis.password_file), shown commented out. */
        int off_key = entry && indented && !deep && commented && !sec_commented && p[1] != '\0' && *section &&
                      table_key(section, name, p);
        if (entry && indented && !deep &&
            (!*section || (commented != sec_commented && !off_key) || whole_section(section)))
            entry = 0; /* a key of a whole section, or an example in a comment */
        if (entry && indented && !deep && p[1] == '\0') { /* "  tls:" opens a mapping of the section */
            snprintf(sub, sizeof sub, "%.*s", (int)(p - name), name);
            continue;
        }
        if (entry && !deep) sub[0] = '\0';
        if (!entry) {
            const char *c = strchr(line, '#');
            if (c) snprintf(about + strlen(about), sizeof about - strlen(about), "%s\n", c + 1);
            continue;
        }
        cr_assert(n < max);
        shown_t *e = &out[n++];
        if (deep)
            cr_assert_lt(snprintf(e->name, sizeof e->name, "%s.%s.%.*s", section, sub, (int)(p - name), name),
                         (int)sizeof e->name, "a key name too long for shown_t");
        else if (indented)
            cr_assert_lt(snprintf(e->name, sizeof e->name, "%s.%.*s", section, (int)(p - name), name),
                         (int)sizeof e->name, "a key name too long for shown_t");
        else {
            snprintf(section, sizeof section, "%.*s", (int)(p - name), name);
            snprintf(e->name, sizeof e->name, "%s", section);
            sec_commented = commented;
        }
        snprintf(e->value, sizeof e->value, "%s", p[1] ? p + 2 : "");
        e->commented = commented;
        snprintf(e->about, sizeof e->about, "%s", about);
        about[0] = '\0';
    }
    free(text);
    return n;
}

static const shown_t *shown_find(const shown_t *v, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].name, name)) return &v[i];
    return NULL;
}

/* The range "(A to B" (or "(each A to B") in a description: 1, or 0 if
 * there is none. */
static int range_in(const char *about, char *lo, char *hi, size_t len) {
    for (const char *p = strchr(about, '('); p; p = strchr(p + 1, '(')) {
        const char *a = p + 1;
        if (!strncmp(a, "each ", 5)) a += 5;
        size_t na = strcspn(a, " ),;");
        if (!na || strncmp(a + na, " to ", 4)) continue;
        const char *b = a + na + 4;
        size_t nb = strcspn(b, " ),;\n");
        snprintf(lo, len, "%.*s", (int)na, a);
        snprintf(hi, len, "%.*s", (int)nb, b);
        return 1;
    }
    return 0;
}

static int all_digits(const char *s) { return *s && strspn(s, "0123456789") == strlen(s); }

/* Does setting key to value succeed, on a fresh configuration? */
static int accepts(const char *key, const char *value) {
    jr_config_t c;
    char why[JR_ERRLEN];
    cr_assert_eq(jr_config_init(&c), 0);
    int rc = jr_config_set(&c, key, value, why, sizeof why);
    jr_config_free(&c);
    return rc == 0;
}

/* The example file shows every key of the table with the default in its
 * row, states the range of every number and duration (the loader takes
 * both ends and refuses one step beyond each), shows no key that is not in
 * the table, and loads. A key added to the table without its line there,
 * or a default changed in one place only, fails here. */
Test(config, example_file_shows_every_key_with_its_default_and_range) {
    static shown_t shown[SHOWN_MAX];
    size_t n = read_example(shown, SHOWN_MAX);
    cr_assert_gt(n, 20, "read only %zu entries of config/jobrunner.yaml", n);
    jr_config_key_t k;
    size_t nkeys = 0;
    for (size_t i = 0; jr_config_key(i, &k) == 0; i++, nkeys++) {
        const shown_t *e = shown_find(shown, n, k.name);
        if (!e) {
            cr_expect_fail("config/jobrunner.yaml does not show %s", k.name);
            continue;
        }
        if (k.def) {
            cr_expect(!e->commented && !strcmp(e->value, k.def),
                      "config/jobrunner.yaml shows %s: %s%s, its default is %s", k.name, e->value,
                      e->commented ? " (commented out)" : "", k.def);
        } else {
            /* No default: an empty list or section, or a setting that is
             * off unless given; an unconfigured Redis URL means the
             * default URL, which the example spells out. */
            int ok = e->commented || !strcmp(e->value, "[]") || !strcmp(e->value, "{}") ||
                     (!strcmp(k.name, "redis.url") && !strcmp(e->value, JR_DEFAULT_REDIS_URL));
            cr_expect(ok, "config/jobrunner.yaml shows %s: %s, but it has no default", k.name,
                      e->value);
        }
        int64_t ms;
        int is_int = k.def && all_digits(k.def);
        if (!k.def || (!is_int && jr_duration_parse(k.def, &ms))) continue;
        /* A number or a duration: its range, stated, is the one enforced.
         * (backoff_max shares the description of backoff.) */
        char lo[64], hi[64], v[80];
        const char *about = e->about[0] || e == shown ? e->about : e[-1].about;
        if (!range_in(about, lo, hi, sizeof lo)) {
            cr_expect_fail("config/jobrunner.yaml states no range \"(A to B)\" for %s", k.name);
            continue;
        }
        cr_expect(accepts(k.name, lo), "%s refuses %s, its documented minimum", k.name, lo);
        cr_expect(accepts(k.name, hi), "%s refuses %s, its documented maximum", k.name, hi);
        int64_t a, b;
        if (is_int) {
            cr_assert(all_digits(lo) && all_digits(hi), "%s: range %s to %s", k.name, lo, hi);
            a = strtoll(lo, NULL, 10), b = strtoll(hi, NULL, 10);
            snprintf(v, sizeof v, "%lld", (long long)a - 1);
            cr_expect(!accepts(k.name, v), "%s takes %s, below its documented range", k.name, v);
            snprintf(v, sizeof v, "%lld", (long long)b + 1);
            cr_expect(!accepts(k.name, v), "%s takes %s, above its documented range", k.name, v);
        } else {
            cr_assert(!jr_duration_parse(lo, &a) && !jr_duration_parse(hi, &b), "%s: range %s to %s",
                      k.name, lo, hi);
            snprintf(v, sizeof v, "%lldms", (long long)a - 1);
            if (a > 0) cr_expect(!accepts(k.name, v), "%s takes %s, below its documented range", k.name, v);
            snprintf(v, sizeof v, "%lldms", (long long)b + 1);
            cr_expect(!accepts(k.name, v), "%s takes %s, above its documented range", k.name, v);
        }
    }
    /* Nothing shown that is not a key or a section of the table. */
    for (size_t i = 0; i < n; i++) {
        int known = 0;
        for (size_t j = 0; !known && jr_config_key(j, &k) == 0; j++) {
            size_t len = strlen(shown[i].name);
            known = !strcmp(k.name, shown[i].name) ||
                    (!strchr(shown[i].name, '.') && !strncmp(k.name, shown[i].name, len) && k.name[len] == '.');
        }
        cr_expect(known, "config/jobrunner.yaml shows %s, which is no key", shown[i].name);
    }
    cr_expect_gt(nkeys, 20);
    /* It loads as it is (users start from a copy). */
    int rc = jr_config_load_file(&cfg, JRT_SOURCE_DIR "/config/jobrunner.yaml", err, sizeof err);
    cr_expect_eq(rc, 0, "%s", err);
}

/* The man page's CONFIGURATION lists every section, with each of its keys
 * in parentheses: `.BR worker " (queues, order, ...), "`. */
Test(config, man_page_lists_every_key_of_each_section) {
    char *man = jrt_slurp(JRT_SOURCE_DIR "/docs/jobrunner.1");
    cr_assert(man, "docs/jobrunner.1 is missing");
    jr_config_key_t k;
    for (size_t i = 0; jr_config_key(i, &k) == 0; i++) {
        char section[64], want[80];
        const char *dot = strchr(k.name, '.');
        snprintf(section, sizeof section, "%.*s", dot ? (int)(dot - k.name) : (int)strlen(k.name), k.name);
        snprintf(want, sizeof want, " %s \" (", section);
        const char *group = strstr(man, want);
        if (!group) {
            cr_expect_fail("the man page's CONFIGURATION does not list the section %s", section);
            continue;
        }
        if (!dot) continue;
        group += strlen(want);
        const char *end = strchr(group, ')'), *key = dot + 1;
        size_t len = strlen(key);
        int found = 0;
        for (const char *p = group; !found && (p = strstr(p, key)) && p < end; p += len)
            found = (p == group || p[-1] == ' ') && (p[len] == ',' || p[len] == ')');
        cr_expect(found, "the man page lists %s without its key %s", section, k.name);
    }
    free(man);
}

/* The queues section: partition counts per queue, from the file and from
 * JOBRUNNER_QUEUES / JOBRUNNER_QUEUES_PARTITIONS; bad ones named. */
Test(config, queues_section_sets_partition_counts) {
    cr_assert_eq(load("queues:\n  orders:\n    partitions: 8\n  mail: {partitions: 1024}\n"), 0, "%s", err);
    cr_assert_eq(cfg.queue_partitions.n, 4);
    cr_expect_str_eq(cfg.queue_partitions.v[0], "orders");
    cr_expect_str_eq(cfg.queue_partitions.v[1], "8");
    cr_expect_str_eq(cfg.queue_partitions.v[3], "1024");
    /* a later file replaces one queue's count */
    cr_assert_eq(load("queues: {orders: {partitions: 3}}\n"), 0, "%s", err);
    cr_expect_str_eq(cfg.queue_partitions.v[1], "3");
    cr_expect_eq(cfg.queue_partitions.n, 4);
    cr_expect_eq(load("queues:\n  orders:\n    partitions: 1025\n"), JR_EINVAL);
    cr_expect(strstr(err, "t.yaml:3: queues.orders.partitions: must be an integer from 1 to 1024"), "%s", err);
    cr_expect_eq(load("queues:\n  orders:\n    partitons: 2\n"), JR_EINVAL);
    cr_expect(strstr(err, "queues.orders.partitons: unknown key"), "%s", err);
    cr_expect_eq(load("queues:\n  \"orders#1\":\n    partitions: 2\n"), JR_EINVAL);
    cr_expect(strstr(err, "queue name is not valid"), "%s", err);
    char *env[] = {"JOBRUNNER_QUEUES_PARTITIONS=emails:4, a:b:2", NULL};
    cr_assert_eq(jr_config_apply_env(&cfg, env, NULL, err, sizeof err), 0, "%s", err);
    int seen = 0;
    for (size_t i = 0; i + 1 < cfg.queue_partitions.n; i += 2) {
        if (!strcmp(cfg.queue_partitions.v[i], "emails")) seen += !strcmp(cfg.queue_partitions.v[i + 1], "4");
        if (!strcmp(cfg.queue_partitions.v[i], "a:b")) seen += !strcmp(cfg.queue_partitions.v[i + 1], "2");
    }
    cr_expect_eq(seen, 2, "the variable's queues (the last ':' splits)");
    char *bad[] = {"JOBRUNNER_QUEUES_PARTITIONS=emails", NULL};
    cr_expect_eq(jr_config_apply_env(&cfg, bad, NULL, err, sizeof err), JR_EINVAL);
    cr_expect(strstr(err, "JOBRUNNER_QUEUES_PARTITIONS=\"emails\": item \"emails\" is not QUEUE:PARTITIONS"), "%s", err);
    char *zero[] = {"JOBRUNNER_QUEUES_PARTITIONS=emails:0", NULL};
    cr_expect_eq(jr_config_apply_env(&cfg, zero, NULL, err, sizeof err), JR_EINVAL);
    cr_expect(strstr(err, "must be an integer from 1 to 1024"), "%s", err);
    /* one queue twice in one section (the file, or the variable): which
     * count was meant is not known, so neither is taken */
    cr_expect_eq(load("queues:\n  orders: {partitions: 4}\n  orders: {partitions: 8}\n"), JR_EINVAL);
    cr_expect(strstr(err, "t.yaml:3: queues.orders: queue \"orders\" is given twice"), "%s", err);
    char *twice[] = {"JOBRUNNER_QUEUES_PARTITIONS=orders:5,orders:6", NULL};
    cr_expect_eq(jr_config_apply_env(&cfg, twice, NULL, err, sizeof err), JR_EINVAL);
    cr_expect(strstr(err, "queue \"orders\" is given twice"), "%s", err);
}

/* keep_finished (issue 22): per queue and per handler, count required and
 * capped, age optional; a partition has its queue's; a handler's wins;
 * bad ones named. */
Test(config, keep_finished_per_queue_and_handler) {
    jr_keep_t k = jr_config_keep(&cfg, "orders", "send");
    cr_expect_eq(k.count, 0, "off by default");
    cr_assert_eq(load("queues:\n  orders: {partitions: 4, keep_finished: {count: 1000, age: 168h}}\n"
                      "handlers:\n  send: {timeout: 5s, keep_finished: {count: 20}}\n  quiet: {keep_finished: {count: 0}}\n"),
                 0, "%s", err);
    k = jr_config_keep(&cfg, "orders", "close");
    cr_expect(k.count == 1000 && k.age_ms == 7LL * 24 * 3600 * 1000, "%lld %lld", (long long)k.count, (long long)k.age_ms);
    k = jr_config_keep(&cfg, "orders#3", "close");
    cr_expect_eq(k.count, 1000, "a partition has its queue's setting");
    k = jr_config_keep(&cfg, "mail", "send");
    cr_expect(k.count == 20 && k.age_ms == 0, "the handler's, in any queue");
    cr_expect_eq(jr_config_keep(&cfg, "orders", "quiet").count, 0, "count 0: this handler is not kept");
    cr_expect_eq(jr_config_keep(&cfg, "mail", "close").count, 0);
    cr_expect_eq(jr_config_policy(&cfg, "send").timeout_ms, 5000, "the handler's other keys still apply");
    cr_expect_eq(load("queues:\n  orders:\n    keep_finished: {age: 1h}\n"), JR_EINVAL);
    cr_expect(strstr(err, "t.yaml:3: queues.orders.keep_finished: count is required"), "%s", err);
    cr_expect_eq(load("queues:\n  orders:\n    keep_finished: {count: 1000001}\n"), JR_EINVAL);
    cr_expect(strstr(err, "queues.orders.keep_finished.count: must be an integer from 0 (off) to 1000000"), "%s", err);
    cr_expect_eq(load("handlers:\n  send: {keep_finished: {count: 5, ages: 1h}}\n"), JR_EINVAL);
    cr_expect(strstr(err, "handlers.send.keep_finished.ages: unknown key (keep_finished has count and age)"), "%s", err);
    cr_expect_eq(load("queues:\n  orders:\n    keep_finished: {count: 5, age: 1.5s}\n"), JR_EINVAL);
    cr_expect(strstr(err, "queues.orders.keep_finished.age: must be a duration"), "%s", err);
    cr_expect_eq(load("queues:\n  orders:\n    keep_finished: 5\n"), JR_EINVAL);
    cr_expect(strstr(err, "queues.orders.keep_finished: expected a mapping {count: N, age: D}"), "%s", err);
    char *env[] = {"JOBRUNNER_QUEUES={mail: {keep_finished: {count: 7}}}", NULL};
    cr_assert_eq(jr_config_apply_env(&cfg, env, NULL, err, sizeof err), 0, "%s", err);
    cr_expect_eq(jr_config_keep(&cfg, "mail", "close").count, 7, "JOBRUNNER_QUEUES sets it too");
}
