/* rediss://: a real redis-server on a TLS port of 127.0.0.1 with a test CA
 * and certificates made by the openssl CLI (jrt_redis_start_tls). Each
 * refusal a user can meet, with the URL (password hidden) and the reason in
 * the message; then the job path end to end over TLS: a worker, a
 * scheduler and the CLI with a config over rediss://, and the client
 * library through jr_client_open. */
#include <criterion/criterion.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "jobrunner/client.h"
#include "jr.h"
#include "redis.h"

static jrt_redis_t R;
static char plain_url[64], tls_url[64], record[192], wlog[192], slog[192];

static void setup(void) {
    signal(SIGPIPE, SIG_IGN); /* as every jobrunner process does (tls.h) */
    jrt_redis_start_tls(&R, "no", plain_url, tls_url);
    snprintf(record, sizeof record, "%s/record.txt", R.dir);
    setenv("JRT_RECORD", record, 1);
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    snprintf(slog, sizeof slog, "%s/scheduler.log", R.dir);
}
static void teardown(void) { jrt_redis_stop(&R); }
TestSuite(tls, .init = setup, .fini = teardown, .timeout = 120);

/* The CA and the client certificate made for the test. */
static jr_redis_tls_t trusted(void) { return (jr_redis_tls_t){.ca_file = jrt_path(&R, "ca.crt")}; }

/* jr_redis_open(url, tls): the connection, or NULL with the message in err. */
static jr_redis_t *open_tls(const char *url, jr_redis_tls_t tls, int64_t timeout_ms, char *err, size_t len) {
    jr_redis_opts_t o = {.url = url, .timeout_ms = timeout_ms, .tls = tls};
    err[0] = '\0';
    return jr_redis_open(&o, err, len);
}

/* A connect that must fail: its message holds every one of the NULL-ended
 * needles. */
static void refused(const char *url, jr_redis_tls_t tls, ...) {
    char err[JR_ERRLEN];
    jr_redis_t *r = open_tls(url, tls, 3000, err, sizeof err);
    cr_assert_null(r, "connected to %s", url);
    va_list ap;
    va_start(ap, tls);
    for (const char *n; (n = va_arg(ap, const char *)) != NULL;) cr_expect(strstr(err, n), "no \"%s\" in: %s", n, err);
    va_end(ap);
}

/* Give the server certificate `file` of the test dir (the key stays). */
static void server_cert(const char *file) {
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "CONFIG", "SET", "tls-cert-file", jrt_path(&R, file), NULL));
    redisFree(c);
}

Test(tls, verified_connection_carries_commands) {
    char err[JR_ERRLEN];
    jr_redis_t *r = open_tls(tls_url, trusted(), 3000, err, sizeof err);
    cr_assert(r, "%s", err);
    double ms = 0;
    cr_expect_eq(jr_redis_time_ms(r, &ms), 0, "%s", jr_redis_errstr(r));
    cr_expect_gt(ms, 0);
    /* Load the function library, then check it: FUNCTION LIST WITHCODE
     * answers with its code, a reply of many TLS records (16 KiB each). */
    cr_assert_eq(jr_redis_load_library(r), 0, "%s", jr_redis_errstr(r));
    cr_assert_eq(jr_redis_load_library(r), 0, "%s", jr_redis_errstr(r));
    jr_batch_t b = {0};
    cr_expect_eq(jr_redis_xrange(r, "jr:{default}:ready", 0, &b), 0, "%s", jr_redis_errstr(r));
    jr_batch_free(&b);
    /* Nothing left over for a poller of jr_redis_fd() (worker, scheduler):
     * the socket is idle (session tickets and all read) and no reply is
     * buffered, so "readable" will mean a reply, as over plain TCP. */
    struct pollfd p = {.fd = jr_redis_fd(r), .events = POLLIN};
    cr_expect_eq(poll(&p, 1, 300), 0, "the socket of an idle TLS connection polls readable");
    cr_expect_eq(jr_redis_has_reply(r), 0);
    cr_expect_eq(jr_redis_wait(r, 200 * 1000, -1), JR_WAIT_TIMEOUT);
    jr_redis_free(r);
    /* The certificate names localhost too; and verify: false takes any. */
    char url[64];
    snprintf(url, sizeof url, "rediss://localhost:%s", strrchr(tls_url, ':') + 1);
    r = open_tls(url, trusted(), 3000, err, sizeof err);
    cr_expect(r, "%s", err);
    jr_redis_free(r);
    r = open_tls(tls_url, (jr_redis_tls_t){.no_verify = 1}, 3000, err, sizeof err);
    cr_expect(r, "%s", err);
    jr_redis_free(r);
}

Test(tls, unknown_ca_refused_with_the_url_and_no_password) {
    char url[96];
    snprintf(url, sizeof url, "rediss://:sekret@%s", tls_url + strlen("rediss://"));
    char err[JR_ERRLEN];
    cr_assert_null(open_tls(url, (jr_redis_tls_t){0}, 3000, err, sizeof err)); /* the system's CAs */
    cr_expect(strstr(err, "rediss://:***@127.0.0.1:"), "%s", err);
    cr_expect(strstr(err, "not signed by a trusted CA"), "%s", err);
    cr_expect(strstr(err, "redis.tls.ca_file"), "%s", err);
    cr_expect_null(strstr(err, "sekret"), "%s", err);
}

Test(tls, expired_certificate_refused) {
    server_cert("expired.crt");
    refused(tls_url, trusted(), "cannot connect to Redis at rediss://127.0.0.1:", "has expired", "valid until", NULL);
}

Test(tls, not_yet_valid_certificate_refused) {
    server_cert("future.crt");
    refused(tls_url, trusted(), "is not yet valid", "valid from", NULL);
}

Test(tls, name_mismatch_refused) {
    jr_redis_tls_t t = trusted();
    t.server_name = "db.example.com";
    refused(tls_url, t, "is not for \"db.example.com\"", "redis.tls.server_name", NULL);
    /* The server's certificate holds IP 127.0.0.1, not 127.0.0.2. */
    t.server_name = "127.0.0.2";
    refused(tls_url, t, "is not for \"127.0.0.2\"", NULL);
}

Test(tls, client_certificate_required_then_given) {
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "CONFIG", "SET", "tls-auth-clients", "yes", NULL));
    redisFree(c);
    /* TLS 1.3: the handshake ends on the client first; the refusal comes
     * at the first read (an alert, or a reset that lost it). */
    refused(tls_url, trusted(), "rediss://127.0.0.1:", "requires a client certificate",
            "redis.tls.cert_file", NULL);
    jr_redis_tls_t t = trusted();
    t.cert_file = jrt_path(&R, "client.crt");
    t.key_file = jrt_path(&R, "client.key");
    char err[JR_ERRLEN];
    jr_redis_t *r = open_tls(tls_url, t, 3000, err, sizeof err);
    cr_assert(r, "mutual TLS: %s", err);
    double ms;
    cr_expect_eq(jr_redis_time_ms(r, &ms), 0, "%s", jr_redis_errstr(r));
    jr_redis_free(r);
}

Test(tls, plain_client_on_tls_port) {
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%s", strrchr(tls_url, ':') + 1);
    refused(url, (jr_redis_tls_t){0}, url, "use rediss://", NULL);
}

Test(tls, tls_client_on_plain_port) {
    char url[64];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%s", strrchr(plain_url, ':') + 1);
    char err[JR_ERRLEN];
    int64_t t0 = jrt_wall_us();
    cr_assert_null(open_tls(url, trusted(), 500, err, sizeof err));
    int64_t took_ms = (jrt_wall_us() - t0) / 1000;
    cr_expect(strstr(err, url) && strstr(err, "no TLS handshake") && strstr(err, "use redis://"), "%s", err);
    cr_expect_lt(took_ms, 5000, "the handshake was not bounded by the connect timeout: %lld ms", (long long)took_ms);
}

Test(tls, missing_files_named) {
    jr_redis_tls_t t = {.ca_file = jrt_path(&R, "nope.crt")};
    refused(tls_url, t, "cannot read redis.tls.ca_file", "nope.crt", "No such file", NULL);
    t = trusted();
    t.cert_file = jrt_path(&R, "nope-client.crt");
    t.key_file = jrt_path(&R, "client.key");
    refused(tls_url, t, "cannot read redis.tls.cert_file", "nope-client.crt", NULL);
    t.cert_file = jrt_path(&R, "client.crt");
    t.key_file = jrt_path(&R, "nope.key");
    refused(tls_url, t, "cannot read redis.tls.key_file", "nope.key", NULL);
    /* Not readable: a directory given as a file, a file as ca_dir, and
     * (not as root, who reads anything) a file of mode 000. */
    t = (jr_redis_tls_t){.ca_file = R.dir};
    refused(tls_url, t, "cannot read redis.tls.ca_file", "a directory, not a file", NULL);
    t = (jr_redis_tls_t){.ca_dir = jrt_path(&R, "ca.crt")};
    refused(tls_url, t, "cannot read redis.tls.ca_dir", "not a directory", NULL);
    if (geteuid() != 0) {
        char locked[256];
        jrt_write(&R, "locked.key", "x", locked, sizeof locked);
        chmod(locked, 0);
        t = trusted();
        t.cert_file = jrt_path(&R, "client.crt");
        t.key_file = locked;
        refused(tls_url, t, "cannot read redis.tls.key_file", "Permission denied", NULL);
    }
    t = trusted();
    /* A file that holds no certificate. */
    t.cert_file = jrt_path(&R, "san.ext");
    t.key_file = jrt_path(&R, "client.key");
    refused(tls_url, t, "cannot load the client certificate from redis.tls.cert_file", NULL);
}

Test(tls, key_not_matching_certificate) {
    jr_redis_tls_t t = trusted();
    t.cert_file = jrt_path(&R, "client.crt");
    t.key_file = jrt_path(&R, "other.key");
    refused(tls_url, t, "other.key", "does not match the certificate", "client.crt", NULL);
}

/* The configuration the processes get: rediss:// and the test CA. */
static const char *tls_config(char *path, size_t len) {
    char text[1024];
    snprintf(text, sizeof text,
             "redis:\n  url: %s\n  tls:\n    ca_file: %s\n    verify: true\n"
             "jobs:\n  backoff: 50ms\n  backoff_max: 100ms\n"
             /* Short blocking reads: many end empty during the test. */
             "worker:\n  block: 200ms\nscheduler:\n  block: 200ms\n",
             tls_url, jrt_path(&R, "ca.crt"));
    jrt_write(&R, "jobrunner.yaml", text, path, len);
    return path;
}

/* `jobrunner ARGS...` with JOBRUNNER_CONFIG=cfg (args NULL-terminated):
 * its exit status, the first line of its stdout into out. */
static int cli(const char *cfg, char *out, size_t len, const char *const *args) {
    setenv("JOBRUNNER_CONFIG", cfg, 1);
    char err[2048] = "";
    int st = jrt_run(out, len, err, sizeof err, args);
    if (st) cr_log_warn("jobrunner %s: exit %d: %s", args[0], st, err);
    char *nl = strchr(out, '\n');
    if (nl) *nl = '\0';
    return st;
}
#define CLI(out, ...) cli(cfg, out, sizeof out, (const char *const[]){__VA_ARGS__, NULL})

Test(tls, job_path_end_to_end) {
    char cfg[192], now[128], later[128], crash[128], fail[128], keep[128], out[256];
    tls_config(cfg, sizeof cfg);
    pid_t w = jrt_worker(&R, cfg, NULL, wlog, NULL);
    pid_t s = jrt_scheduler(&R, cfg, slog);
    cr_assert_eq(CLI(now, "enqueue", "record", "now"), 0);
    cr_assert_eq(CLI(later, "enqueue", "--in", "400ms", "record", "later"), 0);
    /* Retried (a crash is temporary), then dead after its 2 attempts. */
    cr_assert_eq(CLI(crash, "enqueue", "--max-attempts", "2", "crash", "c"), 0);
    cr_assert_eq(CLI(fail, "enqueue", "fail", "f"), 0); /* dead at once */
    cr_assert_eq(CLI(keep, "enqueue", "--in", "1h", "record", "cancelled"), 0);
    cr_assert_eq(CLI(out, "cancel", keep), 0);
    cr_expect(strstr(out, "cancelled"), "cancel said: %s", out);
    cr_assert_eq(CLI(out, "cron", "add", "tick", "--every", "1s", "record", "ticked"), 0);
    /* now, later, crash twice, fail once, and the cron's first tick. */
    cr_expect_geq(jrt_wait_lines(record, 6, 20000), 6, "jobs did not run over TLS:\n%s", jrt_slurp(wlog));
    cr_expect_eq(jrt_runs_of(record, now, NULL), 1);
    cr_expect_eq(jrt_runs_of(record, later, NULL), 1);
    cr_expect_eq(jrt_runs_of(record, crash, NULL), 2);
    cr_expect_eq(jrt_runs_of(record, fail, NULL), 1);
    cr_expect_eq(jrt_runs_of(record, keep, NULL), 0);
    cr_expect_geq(jrt_count(record, " ticked"), 1, "the cron did not fire over TLS");
    jr_qstats_t st = jrt_wait_settled(&R, "default", 2, 10000);
    cr_expect_eq(st.dead, 2, "dead: %lld", st.dead);
    cr_assert_eq(CLI(out, "cron", "remove", "tick"), 0);
    jrt_sleep_ms(1000); /* idle: blocking reads over TLS that end with no entries */
    cr_expect_eq(jrt_stop(s, SIGTERM, 5000), 0);
    cr_expect_eq(jrt_stop(w, SIGTERM, 5000), 0);
    const char *logs[] = {wlog, slog};
    for (int i = 0; i < 2; i++) {
        char *log = jrt_slurp(logs[i]);
        cr_expect_null(strstr(log, "Redis unavailable"), "lost Redis over TLS:\n%s", log);
        cr_expect_null(strstr(log, "Redis error"), "a Redis error over TLS:\n%s", log);
        free(log);
    }
}

Test(tls, client_library_over_tls) {
    jr_client_options_t o = {.url = tls_url, .connect_timeout_ms = 3000};
    jr_client_t *c = jr_client_open(&o);
    cr_assert(c);
    cr_expect_neq(jr_client_err(c), 0, "connected without the test CA");
    cr_expect(strstr(jr_client_errstr(c), "not signed by a trusted CA"), "%s", jr_client_errstr(c));
    jr_client_free(c);
    o.tls.ca_file = jrt_path(&R, "ca.crt");
    c = jr_client_open(&o);
    cr_assert(c);
    cr_assert_eq(jr_client_err(c), 0, "%s", jr_client_errstr(c));
    jr_client_job_t job = {.handler = "record", .payload = "lib", .payload_len = 3};
    jr_client_result_t res;
    cr_assert_eq(jr_client_enqueue(c, &job, &res), 0, "%s", jr_client_errstr(c));
    cr_expect_eq(res.status, JR_CLIENT_JOB_CREATED);
    jr_client_stats_t st;
    cr_assert_eq(jr_client_stats(c, "default", &st), 0, "%s", jr_client_errstr(c));
    cr_expect_eq(st.ready, 1);
    jr_client_free(c);
}
