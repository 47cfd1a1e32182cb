/* `jobrunner web` as a user and a bystander reach it: a real redis-server,
 * a real dashboard process, its JSON API over HTTP (jrt_http_request). The
 * browser side is tests/browser/ (chromium). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "web.h"

JRT_RECORDED_SUITE(web, .timeout = 120);

static int port;

/* Start `jobrunner web -c cfgpath --listen 127.0.0.1:<free port>` (extra
 * YAML into the config first) and wait until it answers. */
static pid_t start_web(const char *extra) {
    jrt_config(&R, extra ? extra : "", cfgpath, sizeof cfgpath);
    port = jrt_free_port();
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *args[] = {"web", "-c", cfgpath, "--listen", listen, NULL};
    pid_t pid = jrt_spawn(jrt_path(&R, "web.log"), args);
    for (int t = 0; t < 10000; t += 50, jrt_sleep_ms(50)) {
        char *b;
        int st = jrt_http_get(port, "/api/session", &b);
        free(b);
        if (st > 0) return pid;
    }
    cr_assert_fail("jobrunner web never answered on %s", listen);
    return pid;
}

/* GET path: status, and the body parsed as JSON into *doc (NULL if none). */
static int get_json(const char *path, json_t **doc) {
    char *b;
    int st = jrt_http_get(port, path, &b);
    *doc = b ? json_loads(b, 0, NULL) : NULL;
    free(b);
    return st;
}

/* The CSRF token of GET /api/session. */
static void token(char *out, size_t len) {
    json_t *s;
    cr_assert_eq(get_json("/api/session", &s), 200);
    snprintf(out, len, "%s", json_string_value(json_object_get(s, "csrf")));
    json_decref(s);
}

/* POST body to path with the token (NULL: no X-CSRF-Token header): status. */
static int post(const char *path, const char *tok, const char *body, char **resp) {
    char h[160] = "Content-Type: application/json\r\n";
    if (tok) snprintf(h + strlen(h), sizeof h - strlen(h), "X-CSRF-Token: %s\r\n", tok);
    return jrt_http_request(port, "POST", path, h, body, resp);
}

static long long overview_count(json_t *ov, const char *queue, const char *col) {
    json_t *q;
    size_t i;
    json_array_foreach(json_object_get(ov, "queues"), i, q)
        if (!strcmp(json_string_value(json_object_get(q, "queue")), queue))
            return json_integer_value(json_object_get(q, col));
    cr_assert_fail("queue %s not in the overview", queue);
    return -1;
}

/* A dead job as the worker writes one (see docs/redis-contract.md). */
static void add_dead(redisContext *c, const char *queue, const char *id, const char *payload) {
    char key[160];
    snprintf(key, sizeof key, "jr:{%s}:dead", queue);
    freeReplyObject(jrt_cmd(c, "XADD", key, "*", "id", id, "h", "record", "p", payload, "a", "3", "why", "attempts",
                            "err", "boom", NULL));
}

Test(web, overview_counts_are_what_redis_holds) {
    jrt_enqueue(&R, jrt_job("mail", "record", "r"), 3, NULL);
    jr_enqueue_t d = jrt_job("mail", "record", "later");
    d.delay_ms = 3600 * 1000;
    jrt_enqueue(&R, d, 2, NULL);
    redisContext *c = jrt_connect(&R);
    add_dead(c, "mail", "dead-1", "x");
    pid_t w = start_web(NULL);
    json_t *ov;
    cr_assert_eq(get_json("/api/overview", &ov), 200);
    cr_assert_eq(overview_count(ov, "mail", "ready"), jrt_int(c, "XLEN jr:{mail}:ready"));
    cr_assert_eq(overview_count(ov, "mail", "ready"), 3);
    cr_assert_eq(overview_count(ov, "mail", "delayed"), jrt_delayed_count(c, "mail"));
    cr_assert_eq(overview_count(ov, "mail", "delayed"), 2);
    cr_assert_eq(overview_count(ov, "mail", "dead"), jrt_int(c, "XLEN jr:{mail}:dead"));
    cr_assert_eq(overview_count(ov, "mail", "dead"), 1);
    cr_assert(json_is_false(json_object_get(json_array_get(json_object_get(ov, "queues"), 0), "paused")));
    cr_assert(json_string_length(json_object_get(json_object_get(ov, "redis"), "version")) > 0);
    json_decref(ov);
    /* a page of each state lists those jobs, by cursor */
    json_t *pg;
    cr_assert_eq(get_json("/api/jobs?queue=mail&state=ready&limit=2", &pg), 200);
    cr_assert_eq(json_array_size(json_object_get(pg, "jobs")), 2);
    char next[160];
    snprintf(next, sizeof next, "/api/jobs?queue=mail&state=ready&limit=2&after=%s",
             json_string_value(json_object_get(pg, "next")));
    json_decref(pg);
    cr_assert_eq(get_json(next, &pg), 200);
    cr_assert_eq(json_array_size(json_object_get(pg, "jobs")), 1, "the second page holds the third job");
    json_decref(pg);
    cr_assert_eq(get_json("/api/jobs?queue=mail&state=delayed", &pg), 200);
    cr_assert_eq(json_array_size(json_object_get(pg, "jobs")), 2);
    json_decref(pg);
    cr_assert_eq(jrt_stop(w, SIGTERM, 5000), 0, "web exits 0 on SIGTERM");
    redisFree(c);
}

Test(web, actions_need_the_csrf_token_and_work_with_it) {
    redisContext *c = jrt_connect(&R);
    add_dead(c, "mail", "dead-1", "again");
    pid_t web = start_web(NULL);
    char tok[80], *b;
    token(tok, sizeof tok);
    cr_assert_eq(post("/api/pause", NULL, "{\"queue\":\"mail\"}", &b), 403, "no token: %s", b);
    free(b);
    cr_assert_eq(post("/api/pause", "0123456789abcdef", "{\"queue\":\"mail\"}", &b), 403, "a wrong token: %s", b);
    free(b);
    cr_assert_eq(jrt_int(c, "HEXISTS jr:{queues}:paused mail"), 0, "refused POSTs changed nothing");
    /* a GET of an action changes nothing either */
    cr_assert_geq(jrt_http_get(port, "/api/pause?queue=mail", &b), 400);
    free(b);
    cr_assert_eq(jrt_int(c, "HEXISTS jr:{queues}:paused mail"), 0);
    cr_assert_eq(post("/api/pause", tok, "{\"queue\":\"mail\"}", &b), 200, "%s", b);
    free(b);
    cr_assert_eq(jrt_int(c, "HEXISTS jr:{queues}:paused mail"), 1, "paused");
    cr_assert_eq(post("/api/resume", tok, "{\"queue\":\"mail\"}", &b), 200, "%s", b);
    free(b);
    cr_assert_eq(jrt_int(c, "HEXISTS jr:{queues}:paused mail"), 0, "resumed");
    /* retry the dead job: a worker runs it */
    json_t *pg;
    cr_assert_eq(get_json("/api/jobs?queue=mail&state=dead", &pg), 200);
    const char *entry = json_string_value(json_object_get(json_array_get(json_object_get(pg, "jobs"), 0), "entry"));
    char body[256];
    snprintf(body, sizeof body, "{\"queue\":\"mail\",\"entries\":[\"%s\"]}", entry);
    /* its page by the entry the dead tab links with: one read of that entry */
    char jp[256];
    snprintf(jp, sizeof jp, "/api/job?queue=mail&id=dead-1&entry=%s", entry);
    json_t *j;
    cr_assert_eq(get_json(jp, &j), 200);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "dead");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "payload"), "text")), "again");
    json_decref(j);
    cr_assert_eq(get_json("/api/job?queue=mail&id=dead-1&entry=1-1", &j), 200, "a wrong entry: located by id");
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "dead");
    json_decref(j);
    json_decref(pg);
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *const[]){"-q", "mail", NULL});
    cr_assert_eq(post("/api/dead/retry", tok, body, &b), 200, "%s", b);
    cr_assert(strstr(b, "\"retried\":1"), "%s", b);
    free(b);
    cr_assert_eq(jrt_wait_count(record, "again", 1, 15000), 1, "the retried job ran");
    /* a delayed job: run now, then delete of a gone job is 404 */
    jr_enqueue_t d = jrt_job("other", "record", "x");
    d.delay_ms = 3600 * 1000;
    d.id = "later-1";
    jrt_enqueue(&R, d, 1, NULL);
    cr_assert_eq(post("/api/job/delete", tok, "{\"queue\":\"other\",\"id\":\"later-1\"}", &b), 200, "%s", b);
    free(b);
    cr_assert_eq(jrt_delayed_count(c, "other"), 0, "deleted");
    cr_assert_eq(post("/api/job/delete", tok, "{\"queue\":\"other\",\"id\":\"later-1\"}", &b), 404, "%s", b);
    free(b);
    jrt_stop(w, SIGTERM, 10000);
    jrt_stop(web, SIGTERM, 5000);
    redisFree(c);
}

Test(web, read_only_refuses_every_post_and_offers_no_action) {
    jr_enqueue_t d = jrt_job("mail", "record", "x");
    d.delay_ms = 3600 * 1000;
    d.id = "later-1";
    jrt_enqueue(&R, d, 1, NULL);
    pid_t web = start_web("web:\n  read_only: true\n");
    char tok[80], *b;
    token(tok, sizeof tok);
    cr_assert_eq(post("/api/pause", tok, "{\"queue\":\"mail\"}", &b), 403, "%s", b);
    cr_assert(strstr(b, "read-only"), "%s", b);
    free(b);
    cr_assert_eq(post("/api/job/run-now", tok, "{\"queue\":\"mail\",\"id\":\"later-1\"}", &b), 403, "%s", b);
    free(b);
    json_t *j;
    cr_assert_eq(get_json("/api/job?queue=mail&id=later-1", &j), 200);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "delayed", "still delayed");
    cr_assert_eq(json_array_size(json_object_get(j, "actions")), 0, "no action offered");
    json_decref(j);
    cr_assert_eq(get_json("/api/session", &j), 200);
    cr_assert(json_is_true(json_object_get(j, "read_only")));
    json_decref(j);
    jrt_stop(web, SIGTERM, 5000);
}

Test(web, markup_from_redis_comes_back_escaped) {
    const char *payload = "<img src=x onerror=alert(1)>", *id = "\"><script>alert(2)</script>";
    jr_enqueue_t d = jrt_job("mail", "record", payload);
    d.delay_ms = 3600 * 1000;
    d.id = id;
    jrt_enqueue(&R, d, 1, NULL);
    pid_t web = start_web(NULL);
    char *b;
    cr_assert_eq(jrt_http_get(port, "/api/jobs?queue=mail&state=delayed", &b), 200);
    cr_assert_null(strchr(b, '<'), "a raw '<' in the JSON: %s", b);
    json_t *pg = json_loads(b, 0, NULL);
    free(b);
    json_t *row = json_array_get(json_object_get(pg, "jobs"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(row, "job")), id, "the id, exact, once decoded");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(row, "payload"), "text")), payload);
    json_decref(pg);
    /* the job page of that id too (its id in the query, percent-encoded) */
    cr_assert_eq(jrt_http_get(port, "/api/job?queue=mail&id=%22%3E%3Cscript%3Ealert(2)%3C%2Fscript%3E", &b), 200, "%s", b);
    cr_assert_null(strchr(b, '<'), "%s", b);
    cr_assert(strstr(b, "\\u003cimg src=x onerror=alert(1)\\u003e"), "%s", b);
    free(b);
    /* every answer forbids inline script and framing, and sniffing */
    int fd_status = jrt_http_request(port, "GET", "/", NULL, NULL, &b);
    cr_assert_eq(fd_status, 200);
    cr_assert(strstr(b, "<script src=\"/app.js\""), "the page loads its script from a file");
    free(b);
    jrt_stop(web, SIGTERM, 5000);
}

/* The whole answer to GET path with Host: host, headers included, into out. */
static void answer_of(const char *path, const char *host, char *out, size_t len) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof a));
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, host);
    cr_assert_eq(write(fd, req, (size_t)n), n);
    size_t got = 0;
    ssize_t k;
    while (got + 1 < len && (k = read(fd, out + got, len - 1 - got)) > 0) got += (size_t)k;
    out[got] = '\0';
    close(fd);
}

Test(web, headers_forbid_inline_script_framing_and_sniffing) {
    pid_t web = start_web(NULL);
    char h[1 << 16];
    answer_of("/api/session", "localhost", h, sizeof h);
    cr_assert(strstr(h, "Content-Security-Policy: default-src 'none'; script-src 'self';"), "%s", h);
    cr_assert(strstr(h, "frame-ancestors 'none'"), "%s", h);
    cr_assert(strstr(h, "X-Content-Type-Options: nosniff"), "%s", h);
    jrt_stop(web, SIGTERM, 5000);
}

/* Without a password the dashboard answers only requests whose Host is a
 * loopback address or localhost: a page of another site whose name its DNS
 * points at 127.0.0.1 (DNS rebinding) gets 403, also when that name starts
 * with "127." (once taken for an address). */
Test(web, a_foreign_host_name_is_refused_even_one_starting_with_127) {
    pid_t web = start_web(NULL);
    char h[1 << 16], ok[64];
    snprintf(ok, sizeof ok, "127.0.0.1:%d", port);
    answer_of("/api/session", ok, h, sizeof h);
    cr_assert(strstr(h, "HTTP/1.0 200") || strstr(h, "HTTP/1.1 200"), "%s", h);
    const char *bad[] = {"attacker.example", "127.0.0.1.attacker.example:8080", "127.x.attacker.example",
                         "localhost.attacker.example"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        answer_of("/api/session", bad[i], h, sizeof h);
        cr_assert(strstr(h, " 403 ") && !strstr(h, "\"csrf"), "Host %s: %s", bad[i], h);
    }
    /* a request a browser says another site's page made (an <img> of an
     * API URL) is refused too; the page's own (same-origin) are served */
    char *b = NULL;
    cr_assert_eq(jrt_http_request(port, "GET", "/api/job?queue=default&id=nope", "Sec-Fetch-Site: cross-site\r\n",
                                  NULL, &b), 403, "%s", b);
    free(b);
    cr_assert_eq(jrt_http_request(port, "GET", "/api/session", "Sec-Fetch-Site: same-origin\r\n", NULL, &b), 200,
                 "%s", b);
    free(b);
    jrt_stop(web, SIGTERM, 5000);
}

Test(web, another_address_needs_a_password_and_every_request_carries_it) {
    jrt_config(&R, "", cfgpath, sizeof cfgpath);
    char out[4096], err[4096], listen[64];
    port = jrt_free_port();
    snprintf(listen, sizeof listen, "0.0.0.0:%d", port);
    /* it must refuse at once: waited for 10 s at most (a server that started would run on) */
    const char *refusal = jrt_path(&R, "refusal.log");
    pid_t pid = jrt_spawn(refusal, (const char *const[]){"web", "-c", cfgpath, "--listen", listen, NULL});
    int ws = 0, waited = 0;
    while (waitpid(pid, &ws, WNOHANG) == 0 && waited < 10000) jrt_sleep_ms(50), waited += 50;
    if (waited >= 10000) {
        jrt_stop(pid, SIGKILL, 1000);
        cr_assert_fail("jobrunner web --listen %s without a password did not refuse to start", listen);
    }
    char *msg = jrt_slurp(refusal);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 2, "exit status %d: %s", ws, msg);
    cr_assert(strstr(msg, "without a password") && strstr(msg, "web.password"), "%s", msg);
    free(msg);
    (void)out, (void)err;

    jrt_config(&R, "web:\n  password: s3cret-pass\n", cfgpath, sizeof cfgpath);
    pid_t web = jrt_spawn(jrt_path(&R, "web.log"), (const char *const[]){"web", "-c", cfgpath, "--listen", listen, NULL});
    char *b = NULL;
    int got = -1;
    for (int t = 0; t < 10000 && got < 0; t += 50, jrt_sleep_ms(50)) {
        free(b);
        got = jrt_http_get(port, "/", &b);
    }
    cr_assert_eq(got, 401, "no password: %d %s", got, b);
    free(b);
    cr_assert_eq(jrt_http_get(port, "/api/overview", &b), 401);
    free(b);
    /* user "x", password "wrong" / "s3cret-pass" */
    cr_assert_eq(jrt_http_request(port, "GET", "/api/overview", "Authorization: Basic eDp3cm9uZw==\r\n", NULL, &b), 401);
    free(b);
    cr_assert_eq(jrt_http_request(port, "GET", "/api/overview", "Authorization: Basic eDpzM2NyZXQtcGFzcw==\r\n", NULL, &b),
                 200, "%s", b);
    free(b);
    jrt_stop(web, SIGTERM, 5000);
}

/* Standard base64 of n bytes of s into out (room for 4 * ceil(n / 3) + 1). */
static void b64(const char *s, size_t n, char *out) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)s[i] << 16 | (i + 1 < n ? (unsigned char)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? (unsigned char)s[i + 2] : 0);
        out[o++] = A[v >> 18], out[o++] = A[v >> 12 & 63];
        out[o++] = i + 1 < n ? A[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? A[v & 63] : '=';
    }
    out[o] = '\0';
}

/* A password longer than any fixed buffer (the HTTP Basic credentials were
 * decoded into 1 KiB: a password of 760 bytes or more could never log in). */
Test(web, a_long_password_logs_in) {
    char pw[3001], cfg[3200], cred[3100], enc[4200], hdr[4300], *b;
    for (int i = 0; i < 3000; i++) pw[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i * 7) % 36];
    pw[3000] = '\0';
    snprintf(cfg, sizeof cfg, "web:\n  password: %s\n", pw);
    pid_t web = start_web(cfg);
    cr_assert_eq(jrt_http_get(port, "/api/overview", &b), 401, "no password: %s", b);
    free(b);
    int n = snprintf(cred, sizeof cred, "x:%s", pw);
    b64(cred, (size_t)n, enc);
    snprintf(hdr, sizeof hdr, "Authorization: Basic %s\r\n", enc);
    cr_assert_eq(jrt_http_request(port, "GET", "/api/overview", hdr, NULL, &b), 200, "the right password: %s", b);
    free(b);
    cred[n - 1] ^= 1; /* the last byte wrong */
    b64(cred, (size_t)n, enc);
    snprintf(hdr, sizeof hdr, "Authorization: Basic %s\r\n", enc);
    cr_assert_eq(jrt_http_request(port, "GET", "/api/overview", hdr, NULL, &b), 401, "a wrong one: %s", b);
    free(b);
    jrt_stop(web, SIGTERM, 5000);
}

Test(web, bulk_over_a_filter_schedules_and_finished_records) {
    redisContext *c = jrt_connect(&R);
    const char *pay[] = {"{\"order\": 1}", "{\"order\": 2}", "{\"refund\": 3}"};
    for (int i = 0; i < 3; i++) {
        jr_enqueue_t d = jrt_job("mail", i == 2 ? "other" : "record", pay[i]);
        d.delay_ms = 3600 * 1000;
        jrt_enqueue(&R, d, 1, NULL);
    }
    add_dead(c, "mail", "dead-1", "x");
    add_dead(c, "mail", "dead-2", "y");
    pid_t web = start_web(NULL);
    char tok[80], *b;
    token(tok, sizeof tok);
    /* every delayed job of handler "record" whose payload holds "order": ready now (2 of 3) */
    cr_assert_eq(post("/api/bulk", tok,
                      "{\"queue\":\"mail\",\"state\":\"delayed\",\"action\":\"run-now\",\"all\":true,"
                      "\"handler\":\"record\",\"match\":\"order\"}", &b), 200, "%s", b);
    cr_assert(strstr(b, "\"matched\":2") && strstr(b, "\"acted\":2"), "%s", b);
    free(b);
    cr_assert_eq(jrt_int(c, "XLEN jr:{mail}:ready"), 2, "the two matching jobs are ready");
    cr_assert_eq(jrt_delayed_count(c, "mail"), 1, "the other one still waits");
    /* a selection of dead jobs by job id: delete one */
    cr_assert_eq(post("/api/bulk", tok, "{\"queue\":\"mail\",\"state\":\"dead\",\"action\":\"delete\",\"ids\":[\"dead-2\"]}", &b),
                 200, "%s", b);
    free(b);
    cr_assert_eq(jrt_int(c, "XLEN jr:{mail}:dead"), 1);
    /* schedules: disable, enable, fire now */
    jrt_run_expect(0, NULL, 0, (const char *const[]){"cron", "add", "--redis", R.url, "tick", "--every", "1h", "-q", "mail",
                                                      "record", "t", NULL});
    cr_assert_eq(post("/api/cron/disable", tok, "{\"name\":\"tick\"}", &b), 200, "%s", b);
    free(b);
    json_t *sc;
    cr_assert_eq(get_json("/api/schedules", &sc), 200);
    cr_assert(json_is_false(json_object_get(json_array_get(json_object_get(sc, "schedules"), 0), "enabled")));
    json_decref(sc);
    cr_assert_eq(post("/api/cron/enable", tok, "{\"name\":\"tick\"}", &b), 200, "%s", b);
    free(b);
    cr_assert_eq(post("/api/cron/fire", tok, "{\"name\":\"tick\"}", &b), 200, "%s", b);
    cr_assert(strstr(b, "\"job\":\"tick@fire-"), "%s", b);
    free(b);
    cr_assert_eq(jrt_int(c, "XLEN jr:{mail}:ready"), 3, "the fired job is ready");
    cr_assert_eq(post("/api/cron/fire", tok, "{\"name\":\"nosuch\"}", &b), 404, "%s", b);
    free(b);
    /* a finished record (as the worker's acknowledgement writes one) on the finished tab and its job page */
    redisReply *e = jrt_cmd(c, "XADD", "jr:{mail}:finished", "*", "id", "done-1", "h", "record", "outcome", "ok", "a", "1",
                            "duration_ms", "1.500", "worker", "w-1", "finished_at", "1796226672911", "result",
                            "<b>42</b>", NULL);
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{mail}:finished:ids", "done-1", e->str, NULL));
    freeReplyObject(e);
    json_t *pg;
    cr_assert_eq(get_json("/api/jobs?queue=mail&state=finished", &pg), 200);
    json_t *row = json_array_get(json_object_get(pg, "jobs"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(row, "job")), "done-1");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(row, "result"), "text")), "<b>42</b>");
    json_decref(pg);
    cr_assert_eq(get_json("/api/job?queue=mail&id=done-1", &pg), 200);
    cr_assert_str_eq(json_string_value(json_object_get(pg, "state")), "finished");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(pg, "finished"), "outcome")), "ok");
    json_decref(pg);
    jrt_stop(web, SIGTERM, 5000);
    redisFree(c);
}

Test(web, a_partitioned_queue_pages_each_partition_and_acts_on_its_jobs) {
    jrt_run_expect(0, NULL, 0, (const char *const[]){"queue", "partitions", "pq", "2", "--redis", R.url, NULL});
    char id[4][128];
    for (int i = 0; i < 4; i++)
        jrt_cli_enqueue(&R, NULL, (const char *const[]){"-q", "pq", "--in", "1h", "record", "p", NULL}, id[i], sizeof id[i]);
    int part = strchr(id[0], '~')[1] - '0', in_part = 0;
    for (int i = 0; i < 4; i++) in_part += strchr(id[i], '~')[1] - '0' == part;
    pid_t web = start_web(NULL);
    json_t *pg;
    char path[256], body[256], tok[80], *b;
    snprintf(path, sizeof path, "/api/jobs?queue=pq&state=delayed&part=%d", part);
    cr_assert_eq(get_json(path, &pg), 200);
    cr_assert_eq(json_integer_value(json_object_get(pg, "partitions")), 2);
    json_t *rows = json_object_get(pg, "jobs");
    cr_assert_eq((int)json_array_size(rows), in_part, "the jobs of partition %d", part);
    char one[160];
    snprintf(one, sizeof one, "%s", json_string_value(json_object_get(json_array_get(rows, 0), "job")));
    json_decref(pg);
    cr_assert_str_eq(one, id[0], "a generated id as users see it (\"~<partition>\")");
    snprintf(path, sizeof path, "/api/job?queue=pq&id=%s", one);
    cr_assert_eq(get_json(path, &pg), 200, "the job page of %s", one);
    cr_assert_str_eq(json_string_value(json_object_get(pg, "state")), "delayed");
    json_decref(pg);
    token(tok, sizeof tok);
    snprintf(body, sizeof body, "{\"queue\":\"pq\",\"id\":\"%s\"}", one);
    cr_assert_eq(post("/api/job/run-now", tok, body, &b), 200, "%s", b);
    cr_assert(strstr(b, "\"result\":\"delayed\""), "%s", b);
    free(b);
    snprintf(path, sizeof path, "/api/jobs?queue=pq&state=ready&part=%d", part);
    cr_assert_eq(get_json(path, &pg), 200);
    rows = json_object_get(pg, "jobs");
    cr_assert_eq(json_array_size(rows), 1, "ready now in its partition");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(rows, 0), "job")), one);
    json_decref(pg);
    jrt_stop(web, SIGTERM, 5000);
}

static long long sum_of(json_t *a) {
    long long n = 0;
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) n += json_integer_value(v);
    return n;
}

Test(web, history_counts_the_jobs_the_workers_ran) {
    jrt_enqueue(&R, jrt_job("mail", "record", "h"), 3, NULL);
    pid_t w = jrt_worker(&R, NULL, NULL, wlog, (const char *const[]){"-q", "mail", NULL});
    cr_assert_eq(jrt_wait_count(record, " h", 3, 15000), 3, "the worker ran the 3 jobs");
    pid_t web = start_web(NULL);
    json_t *h = NULL;
    long long got = 0;
    for (int t = 0; t < 5000 && got < 3; t += 100, jrt_sleep_ms(100)) { /* the acknowledgements are flushed in batches */
        json_decref(h);
        cr_assert_eq(get_json("/api/history?queue=mail&minutes=5", &h), 200);
        got = sum_of(json_object_get(h, "processed"));
    }
    cr_assert_eq(got, 3, "processed in the last 5 minutes");
    cr_assert_eq(json_array_size(json_object_get(h, "processed")), 5);
    cr_assert_eq(sum_of(json_object_get(h, "failed")), 0);
    json_decref(h);
    cr_assert_eq(get_json("/api/history", &h), 200, "every queue, 24 h");
    cr_assert_eq(json_array_size(json_object_get(h, "processed")), 1440);
    cr_assert_eq(sum_of(json_object_get(h, "processed")), 3);
    json_decref(h);
    jrt_stop(w, SIGTERM, 10000);
    jrt_stop(web, SIGTERM, 5000);
}

/* ---- the pure helpers --------------------------------------------------------- */

Test(web_unit, secret_compare_base64_and_loopback) {
    cr_assert(jr_web_secret_equal("abc", 3, "abc", 3));
    cr_assert(!jr_web_secret_equal("abd", 3, "abc", 3));
    cr_assert(!jr_web_secret_equal("ab", 2, "abc", 3));
    cr_assert(!jr_web_secret_equal("abcd", 4, "abc", 3));
    cr_assert(!jr_web_secret_equal("", 0, "abc", 3));
    unsigned char out[64];
    cr_assert_eq(jr_web_base64_decode("eDpzM2NyZXQtcGFzcw==", 20, out, sizeof out), 13);
    cr_assert(!memcmp(out, "x:s3cret-pass", 13));
    cr_assert_eq(jr_web_base64_decode("eDp", 3, out, sizeof out), -1);
    cr_assert_eq(jr_web_base64_decode("e=p=", 4, out, sizeof out), -1);
    cr_assert(jr_web_host_is_loopback("127.0.0.1") && jr_web_host_is_loopback("localhost") &&
              jr_web_host_is_loopback("::1"));
    cr_assert(!jr_web_host_is_loopback("") && !jr_web_host_is_loopback("0.0.0.0") &&
              !jr_web_host_is_loopback("10.0.0.5"));
    /* DNS rebinding: a name is not an address, whatever it starts with */
    cr_assert(jr_web_host_is_loopback("127.1.2.3"));
    cr_assert(!jr_web_host_is_loopback("127.0.0.1.attacker.example") && !jr_web_host_is_loopback("127.x.example") &&
              !jr_web_host_is_loopback("127.") && !jr_web_host_is_loopback("localhost.attacker.example") &&
              !jr_web_host_is_loopback("128.0.0.1"));
    char buf[32];
    cr_assert_str_eq(jr_web_info_field("# Server\r\nredis_version:7.0.15\r\nx:1\r\n", "redis_version", buf, sizeof buf),
                     "7.0.15");
    cr_assert_str_eq(jr_web_info_field("a:1\r\n", "b", buf, sizeof buf), "");
}
