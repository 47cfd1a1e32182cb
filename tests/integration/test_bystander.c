/* What a bystander can reach (issue 18, class 7 and the CLI's ends of
 * class 9), against real worker processes and a real redis-server:
 * - the metrics server under slow and many clients (slowloris): /healthz and
 *   /metrics keep answering; a dribbling client is cut at the deadline;
 * - text log lines a handler's message cannot forge keys into;
 * - CLI output with control bytes written into Redis by someone else;
 * - stats --watch losing Redis or its reader: a non-zero status and a message. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static jrt_redis_t R;
static char wlog[192];

static void setup(void) {
    signal(SIGPIPE, SIG_IGN); /* the test's own writes to cut connections */
    jrt_redis_start(&R, NULL);
    snprintf(wlog, sizeof wlog, "%s/proc.log", R.dir);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(bystander, .init = setup, .fini = teardown, .timeout = 120);

/* ---- HTTP ----------------------------------------------------------------- */

/* A TCP connection to 127.0.0.1:port from the loopback address `from`
 * (e.g. "127.0.0.2": a client that is not 127.0.0.1, as one from the
 * network would be), non-blocking once connected. -1 if refused. */
static int connect_from(const char *from, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, from, &src.sin_addr);
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof src) ||
        connect(fd, (struct sockaddr *)&dst, sizeof dst)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* GET path from address `from` with a deadline of timeout_ms for the whole
 * exchange (what a healthcheck with a timeout does). Returns the status, or
 * -1 with no complete answer in time; the body (malloc'd) in *body. */
static int get_from(const char *from, int port, const char *path, int timeout_ms, char **body) {
    *body = NULL;
    int64_t end = jrt_wall_us() + timeout_ms * 1000LL;
    int fd = connect_from(from, port);
    if (fd < 0) return -1;
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return -1;
    }
    int status = jrt_http_read(fd, end, body);
    close(fd);
    return status;
}

/* The value of the sample `series` in an exposition (-1 if absent). */
static double sample(const char *text, const char *series) {
    size_t n = strlen(series);
    for (const char *p = text; (p = strstr(p, series)); p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return strtod(p + n + 1, NULL);
    return -1;
}

/* Slow clients: `n` connections, connection i from from[i % nfrom], each
 * sending a request's first line and then one header byte per 200 ms,
 * never finishing; one that the server closes or refuses is opened again
 * at once (an attacker keeps trying). Runs in its own thread until stop. */
typedef struct slow {
    int port, n, nfrom;
    const char *const *from;
    atomic_int stop;
    atomic_long opened, closed;
    pthread_t t;
} slow_t;

static void *slow_run(void *arg) {
    slow_t *s = arg;
    int *fd = calloc((size_t)s->n, sizeof *fd);
    for (int i = 0; i < s->n; i++) fd[i] = -1;
    while (!atomic_load(&s->stop)) {
        for (int i = 0; i < s->n && !atomic_load(&s->stop); i++) {
            if (fd[i] >= 0) {
                char c;
                ssize_t k = recv(fd[i], &c, 1, MSG_DONTWAIT);
                if (k == 0 || (k < 0 && errno != EAGAIN) || send(fd[i], "a", 1, MSG_NOSIGNAL) != 1) {
                    close(fd[i]);
                    fd[i] = -1;
                    atomic_fetch_add(&s->closed, 1);
                }
            }
            if (fd[i] < 0 && (fd[i] = connect_from(s->from[i % s->nfrom], s->port)) >= 0) {
                atomic_fetch_add(&s->opened, 1);
                static const char start[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
                send(fd[i], start, sizeof start - 1, MSG_NOSIGNAL);
            }
        }
        jrt_sleep_ms(200);
    }
    for (int i = 0; i < s->n; i++)
        if (fd[i] >= 0) close(fd[i]);
    free(fd);
    return NULL;
}

static void slow_start(slow_t *s, int port, int n, const char *const *from, int nfrom) {
    memset(s, 0, sizeof *s);
    s->port = port, s->n = n, s->from = from, s->nfrom = nfrom;
    cr_assert_eq(pthread_create(&s->t, NULL, slow_run, s), 0);
}

static void slow_stop(slow_t *s) {
    atomic_store(&s->stop, 1);
    pthread_join(s->t, NULL);
}

/* A worker serving metrics on 127.0.0.1:port, healthy (200) before it returns. */
static pid_t start_worker(int port) {
    char addr[64], cfg[256];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    jrt_write(&R, "w.yaml", "worker:\n  block: 1s\n", cfg, sizeof cfg);
    pid_t pid = jrt_worker(&R, NULL, NULL, wlog, (const char *[]){"--metrics", addr, "-c", cfg, NULL});
    int st = -1;
    for (int t = 0; t < 15000 && st != 200; t += 100) {
        char *b;
        st = get_from("127.0.0.1", port, "/healthz", 3000, &b);
        free(b);
        if (st != 200) jrt_sleep_ms(100);
    }
    cr_assert_eq(st, 200, "the worker never became healthy");
    return pid;
}

/* For `ms`, every 300 ms: GET /healthz and /metrics from each address of
 * `askers`; every answer must be 200 within 3 s (the compose healthcheck's
 * timeout). Returns how many were asked. */
static int keep_asking(int port, const char *const *askers, int ms) {
    int asked = 0;
    for (int64_t end = jrt_wall_us() + ms * 1000LL; jrt_wall_us() < end; jrt_sleep_ms(300)) {
        for (const char *const *a = askers; *a; a++) {
            static const char *const paths[] = {"/healthz", "/metrics"};
            for (int p = 0; p < 2; p++) {
                char *b;
                int64_t t0 = jrt_wall_us();
                int st = get_from(*a, port, paths[p], 3000, &b);
                cr_assert_eq(st, 200, "%s from %s: status %d after %lld ms with slow clients connected", paths[p], *a,
                             st, (long long)((jrt_wall_us() - t0) / 1000));
                free(b);
                asked++;
            }
        }
    }
    return asked;
}

/* 70 slowloris connections from one address (the attack, beyond the
 * 64 connections the server used to take at all): health and metrics keep
 * answering, to 127.0.0.1 (the container healthcheck) and to another
 * address (a Prometheus on the network), also after the deadline has cut
 * the first slow connections and they came back. */
Test(bystander, slow_clients_from_one_address_leave_health_and_metrics_answering) {
    int port = jrt_free_port();
    pid_t w = start_worker(port);
    static const char *const attacker[] = {"127.0.0.2"};
    slow_t s;
    slow_start(&s, port, 70, attacker, 1);
    jrt_sleep_ms(1000); /* every slow connection made */
    static const char *const askers[] = {"127.0.0.1", "127.0.0.3", NULL};
    keep_asking(port, askers, 7000);
    slow_stop(&s);
    cr_expect_geq(atomic_load(&s.opened), 70, "the slow clients got in or were refused and came back");
    char *body;
    cr_assert_eq(get_from("127.0.0.1", port, "/metrics", 3000, &body), 200);
    cr_expect_gt(sample(body, "jobrunner_http_connections_dropped_total{reason=\"per_client\"}"), 0,
                 "the refusals are counted:\n%s", body);
    cr_expect_gt(sample(body, "jobrunner_http_connections_dropped_total{reason=\"slow\"}"), 0,
                 "the cut slow connections are counted:\n%s", body);
    free(body);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    char *log = jrt_slurp(wlog);
    const char *note = strstr(log, "metrics server: connections refused or cut");
    cr_expect(note, "the drops are logged:\n%s", log);
    cr_expect_leq(jrt_count(wlog, "metrics server: connections refused or cut"), 2,
                  "logged at most once a minute, not once per connection");
    free(log);
}

/* 100 slow clients from 100 addresses (no per-address cap applies) fill
 * every slot open to the network: 127.0.0.1 still has its reserve. */
Test(bystander, slow_clients_from_many_addresses_leave_the_local_healthcheck_answering) {
    int port = jrt_free_port();
    pid_t w = start_worker(port);
    static char names[100][20];
    static const char *from[100];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "127.0.1.%d", i + 1);
        from[i] = names[i];
    }
    slow_t s;
    slow_start(&s, port, 100, from, 100);
    jrt_sleep_ms(1000);
    static const char *const askers[] = {"127.0.0.1", NULL};
    keep_asking(port, askers, 4000);
    slow_stop(&s);
    char *body;
    cr_assert_eq(get_from("127.0.0.1", port, "/metrics", 3000, &body), 200);
    cr_expect_gt(sample(body, "jobrunner_http_connections_dropped_total{reason=\"full\"}"), 0,
                 "the slow clients beyond the network's slots were refused:\n%s", body);
    free(body);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* A client that dribbles a header byte every 200 ms (each one resets an
 * idle timeout) is cut at the request deadline, 5 s after it connected. */
Test(bystander, a_dribbling_client_is_cut_at_the_deadline) {
    int port = jrt_free_port();
    pid_t w = start_worker(port);
    int fd = connect_from("127.0.0.2", port);
    cr_assert_geq(fd, 0);
    int64_t t0 = jrt_wall_us();
    send(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ", 41, MSG_NOSIGNAL);
    int closed = 0;
    while (!closed && jrt_wall_us() - t0 < 15000000) {
        jrt_sleep_ms(200);
        char c;
        ssize_t k = recv(fd, &c, 1, MSG_DONTWAIT);
        closed = k == 0 || (k < 0 && errno != EAGAIN) || send(fd, "a", 1, MSG_NOSIGNAL) != 1;
    }
    double s = (double)(jrt_wall_us() - t0) / 1e6;
    close(fd);
    cr_assert(closed, "a client dribbling header bytes was still connected after %.1f s", s);
    cr_expect(s >= 4.5 && s < 12, "cut after %.1f s (deadline 5 s)", s);
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
}

/* ---- log lines -------------------------------------------------------------- */

/* The keys of a text log line outside its quoted strings (the message and
 * values that needed quotes), as " k1= k2= ..." into out. */
static void keys_of(const char *line, char *out, size_t len) {
    size_t o = 0;
    out[0] = '\0';
    const char *p = strstr(line, "] ");
    if (!p) return;
    for (p += 2; *p;) {
        if (*p == '"') { /* skip a quoted string */
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1]) p++;
            if (*p) p++;
            continue;
        }
        const char *eq = strchr(p, '='), *q = strchr(p, '"');
        if (!eq) break;
        if (q && q < eq) {
            p = q;
            continue;
        }
        const char *k = eq;
        while (k > p && k[-1] != ' ') k--;
        o += (size_t)snprintf(out + o, len - o, " %.*s=", (int)(eq - k), k);
        if (o >= len) break;
        p = eq + 1;
    }
}

/* The payload through a real handler's log call: the message is
 * quoted, and the line has only the keys the worker wrote. */
Test(bystander, a_handler_message_cannot_forge_log_keys) {
    pid_t w = jrt_worker(&R, NULL, JRT_PLUGIN_DIR "/echo.so", wlog, NULL);
    char out[256];
    const char *e1[] = {"enqueue", "--redis", R.url, "echo", "x job=forged-1 outcome=ok", NULL};
    const char *e2[] = {"enqueue", "--redis", R.url, "echo", "\" job=forged-2 \"error=none", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, NULL, 0, e1), 0);
    cr_assert_eq(jrt_run(out, sizeof out, NULL, 0, e2), 0);
    for (int t = 0; t < 15000 && jrt_count(wlog, "job finished") < 2; t += 50) jrt_sleep_ms(50);
    cr_assert_eq(jrt_stop(w, SIGTERM, 10000), 0);
    char *log = jrt_slurp(wlog);
    cr_assert_eq(jrt_count(wlog, "job finished"), 2, "%s", log);
    cr_expect(strstr(log, "] \"echo: x job=forged-1 outcome=ok\" job="), "the message is quoted:\n%s", log);
    int echoes = 0;
    for (char *l = log, *nl; (nl = strchr(l, '\n')); l = nl + 1) {
        *nl = '\0';
        char keys[512];
        keys_of(l, keys, sizeof keys);
        if (strstr(l, "echo: ")) {
            echoes++;
            cr_expect_str_eq(keys, " job= queue= handler=", "the handler's line has the worker's keys only: %s", l);
        }
        cr_expect(!strstr(keys, "forged"), "a forged key: %s", l);
    }
    cr_expect_eq(echoes, 2, "%s", log);
    free(log);
}

/* ---- CLI output of what others wrote into Redis ------------------------------ */

/* Valid UTF-8 that a terminal would act on: clear the screen, retitle the
 * window, ring, return and start a forged row, DEL, a C1 CSI (U+009B). */
#define HOSTILE "\x1b[2J\x1b]0;owned\x07\r\nFAKE ROW \x7f\xc2\x9b" "31m"

/* Nothing in out that a terminal acts on: no control byte but the newlines
 * ending lines, no DEL, no C1 (raw or as UTF-8); text tables (json = 0)
 * have only ASCII; no line is the forged row. */
static void check_inert(const char *what, const char *out, int json) {
    const unsigned char *u = (const unsigned char *)out;
    for (size_t i = 0; u[i]; i++) {
        cr_expect(u[i] >= 0x20 || u[i] == '\n', "%s: control byte 0x%02x at %zu:\n%s", what, u[i], i, out);
        cr_expect(u[i] != 0x7f, "%s: DEL at %zu:\n%s", what, i, out);
        if (!json) cr_expect(u[i] < 0x80, "%s: byte 0x%02x at %zu in a text table:\n%s", what, u[i], i, out);
        else cr_expect(!(u[i] == 0xc2 && u[i + 1] >= 0x80 && u[i + 1] < 0xa0), "%s: a C1 control at %zu:\n%s", what, i, out);
    }
    cr_expect(strncmp(out, "FAKE", 4) && !strstr(out, "\nFAKE"), "%s: a forged line:\n%s", what, out);
}

static void run_inert(const char *const *args, int json, int want_status, int shows) {
    static char out[1 << 16], err[1 << 14];
    int st = jrt_run(out, sizeof out, err, sizeof err, args);
    char what[128];
    snprintf(what, sizeof what, "jobrunner %s %s %s", args[0], args[1] ? args[1] : "", args[1] && args[2] ? args[2] : "");
    cr_expect_eq(st, want_status, "%s: exit %d\n%s\n%s", what, st, out, err);
    check_inert(what, out, json);
    check_inert(what, err, 0);
    cr_expect(!shows || strstr(out, "\\x1b[2J") || strcasestr(out, "\\u001b[2J") || strstr(out, "base64") || strstr(err, "\\x1b[2J"),
              "%s shows the hostile text, escaped:\n%s\n%s", what, out, err);
}

/* Everything listed from Redis -- a live process, schedules, a running
 * job's consumer, dead entries, registered queue names -- printed by every
 * command that shows it, text and JSON: no byte a terminal acts on. */
Test(bystander, cli_output_escapes_control_bytes_from_redis) {
    char out[4096], err[4096];
    const char *load[] = {"functions", "load", "--redis", R.url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, load), 0, "%s", err);
    redisContext *c = jrt_connect(&R);
    char now[32];
    snprintf(now, sizeof now, "%lld", (long long)(jrt_wall_us() / 1000));
    /* a live process */
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{procs}:evil" HOSTILE, "role", "worker" HOSTILE, "host", HOSTILE, "pid", "1",
                            "queues", "default," HOSTILE, "version", HOSTILE, "started", now, "running", "0", "lease",
                            "60000", NULL));
    freeReplyObject(jrt_cmd(c, "PEXPIRE", "jr:{procs}:evil" HOSTILE, "60000", NULL));
    freeReplyObject(jrt_cmd(c, "ZADD", "jr:{procs}", now, "evil" HOSTILE, NULL));
    /* schedules: a good definition under a hostile name, with a hostile last
     * job; definitions with hostile fields */
    const char *add[] = {"cron", "add", "--redis", R.url, "good", "--every", "1h", "echo", "x", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, add), 0, "%s", err);
    redisReply *def = jrt_cmd(c, "HGET", "jr:{cron}", "good", NULL);
    cr_assert_eq(def->type, REDIS_REPLY_STRING);
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{cron}", "n" HOSTILE, def->str, NULL));
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{cron}:last", "n" HOSTILE, "1796000000000 job" HOSTILE, NULL));
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{cron}:last", "good", "1796000000000 job" HOSTILE, NULL));
    char bad[1024];
    const char *h = strstr(def->str, "\"echo\"");
    cr_assert(h, "%s", def->str);
    snprintf(bad, sizeof bad, "%.*s\"echo\\u001b[2J\\u0007\\r\\nFAKE ROW \\u009b\"%s", (int)(h - def->str), def->str, h + 6);
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{cron}", "bad-handler", bad, NULL));
    freeReplyObject(jrt_cmd(c, "HSET", "jr:{cron}", "garbage", HOSTILE, NULL));
    freeReplyObject(def);
    /* a running job whose consumer has a hostile name */
    const char *enq[] = {"enqueue", "--redis", R.url, "--id", "run1", "echo", HOSTILE, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, enq), 0, "%s", err);
    freeReplyObject(jrt_cmd(c, "XREADGROUP", "GROUP", "jr", "c" HOSTILE, "COUNT", "1", "STREAMS", "jr:{default}:ready",
                            ">", NULL));
    /* dead entries: hostile fields, one not UTF-8 */
    freeReplyObject(jrt_cmd(c, "XADD", "jr:{default}:dead", "*", "id", "dead1", "h", "h" HOSTILE, "a", "1", "why",
                            HOSTILE, "err", HOSTILE, "x" HOSTILE, "\x9b\xff" HOSTILE, NULL));
    freeReplyObject(jrt_cmd(c, "XADD", "jr:{default}:dead", "*", "id", "d" HOSTILE, "h", "echo", "why", "invalid", NULL));
    /* a registered queue with a hostile name */
    freeReplyObject(jrt_cmd(c, "SADD", "jr:{queues}", "q" HOSTILE, NULL));
    redisFree(c);

#define CMD(...) ((const char *const[]){__VA_ARGS__, "--redis", R.url, NULL})
    run_inert(CMD("workers"), 0, 0, 1);
    run_inert(CMD("workers", "--json"), 1, 0, 1);
    run_inert(CMD("cron", "list"), 0, 0, 1);
    run_inert(CMD("cron", "list", "--json"), 1, 0, 1);
    run_inert(CMD("jobs", "--state", "running"), 0, 0, 1);
    run_inert(CMD("jobs", "--state", "running", "--json"), 1, 0, 1);
    run_inert(CMD("job", "show", "run1"), 0, 0, 1);
    run_inert(CMD("job", "show", "--json", "run1"), 1, 0, 1);
    run_inert(CMD("dead", "list"), 0, 0, 1);
    run_inert(CMD("dead", "list", "--json"), 1, 0, 1);
    run_inert(CMD("dead", "show", "dead1"), 0, 0, 1);
    run_inert(CMD("jobs", "--state", "dead"), 0, 0, 1);
    run_inert(CMD("jobs", "--state", "dead", "--json"), 1, 0, 1);
    run_inert(CMD("job", "show", "dead1"), 0, 0, 1);
    run_inert(CMD("stats"), 0, 0, 0);
#undef CMD
    /* the table keeps one row per process and per schedule */
    const char *wk[] = {"workers", "--redis", R.url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, wk), 0);
    size_t lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    cr_expect_eq(lines, 2, "a header and one row:\n%s", out);
}

/* ---- how a command ends: Redis gone, reader gone ------------------------------ */

/* Start jobrunner with args, stdout on out_fd and stderr on err_fd, with
 * SIGPIPE at its default action (as from a shell; this test process
 * ignores it). */
static pid_t spawn_plain(const char *const *args, int out_fd, int err_fd) {
    const char *argv[32] = {JRT_JOBRUNNER};
    size_t n = 1;
    while (args[n - 1] && n < 31) argv[n] = args[n - 1], n++;
    argv[n] = NULL;
    pid_t parent = getpid(), pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        signal(SIGPIPE, SIG_DFL);
        dup2(out_fd, 1), dup2(err_fd, 2);
        execv(JRT_JOBRUNNER, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Wait up to timeout_ms for pid; its wait status, or -1 (then killed). */
static int wait_end(pid_t pid, int timeout_ms) {
    int st;
    for (int t = 0; t < timeout_ms; t += 20) {
        if (waitpid(pid, &st, WNOHANG) == pid) return st;
        jrt_sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static const char *how(int st, char *buf, size_t len) {
    if (st == -1) snprintf(buf, len, "still running");
    else if (WIFSIGNALED(st)) snprintf(buf, len, "killed by signal %d", WTERMSIG(st));
    else snprintf(buf, len, "exit %d", WEXITSTATUS(st));
    return buf;
}

/* `stats --watch` started, its stdout and stderr in R.dir/watch.out and
 * R.dir/watch.err (their paths into outp and errp, len bytes each). */
static pid_t start_watch(char *outp, char *errp, size_t len) {
    snprintf(outp, len, "%s/watch.out", R.dir);
    snprintf(errp, len, "%s/watch.err", R.dir);
    int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const char *args[] = {"stats", "--watch", "--redis", R.url, NULL};
    pid_t pid = spawn_plain(args, o, e);
    close(o), close(e);
    return pid;
}

/* Redis dies while stats --watch redraws, and comes back: the screen says
 * "Redis unreachable: why, retrying" meanwhile, and the table is drawn
 * again once it answers; no death by SIGPIPE or by the broken connection.
 * Ctrl-C (SIGINT) then ends it. */
Test(bystander, stats_watch_survives_redis_going_away_and_coming_back) {
    char out[256], outp[256], errp[256], b[64];
    const char *enq[] = {"enqueue", "--redis", R.url, "echo", "x", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, NULL, 0, enq), 0);
    pid_t pid = start_watch(outp, errp, sizeof outp);
    for (int t = 0; t < 10000 && jrt_count(outp, "every 1 s") < 2; t += 50) jrt_sleep_ms(50);
    cr_assert_geq(jrt_count(outp, "every 1 s"), 2, "stats --watch drew twice");
    kill(R.pid, SIGKILL);
    for (int t = 0; t < 10000 && jrt_count(outp, "Redis unreachable: ") < 2; t += 50) jrt_sleep_ms(50);
    cr_expect_geq(jrt_count(outp, "Redis unreachable: "), 2, "the outage shown, retried");
    cr_expect(waitpid(pid, NULL, WNOHANG) == 0, "stats --watch ended with Redis gone");
    int tables = jrt_count(outp, "QUEUE ");
    jrt_redis_restart(&R, NULL);
    for (int t = 0; t < 10000 && jrt_count(outp, "QUEUE ") <= tables; t += 50) jrt_sleep_ms(50);
    cr_expect_gt(jrt_count(outp, "QUEUE "), tables, "no table drawn after Redis came back");
    cr_expect(waitpid(pid, NULL, WNOHANG) == 0, "stats --watch ended");
    kill(pid, SIGINT);
    int st = wait_end(pid, 10000);
    cr_expect(st != -1, "stats --watch after Ctrl-C: %s", how(st, b, sizeof b));
}

/* Redis frozen (SIGSTOP) under stats --watch: after its command timeout
 * the screen names the problem and it keeps trying; thawed, the table is
 * back. */
Test(bystander, stats_watch_survives_a_frozen_redis) {
    char outp[256], errp[256], b[64];
    pid_t pid = start_watch(outp, errp, sizeof outp);
    for (int t = 0; t < 10000 && jrt_count(outp, "every 1 s") < 1; t += 50) jrt_sleep_ms(50);
    kill(R.pid, SIGSTOP);
    for (int t = 0; t < 20000 && jrt_count(outp, "Redis unreachable: ") < 1; t += 50) jrt_sleep_ms(50);
    int tables = jrt_count(outp, "QUEUE ");
    kill(R.pid, SIGCONT);
    cr_expect_geq(jrt_count(outp, "Redis unreachable: "), 1, "the frozen Redis shown");
    for (int t = 0; t < 15000 && jrt_count(outp, "QUEUE ") <= tables; t += 50) jrt_sleep_ms(50);
    cr_expect_gt(jrt_count(outp, "QUEUE "), tables, "no table drawn after Redis thawed");
    cr_expect(waitpid(pid, NULL, WNOHANG) == 0, "stats --watch ended");
    kill(pid, SIGINT);
    int st = wait_end(pid, 10000);
    cr_expect(st != -1, "stats --watch after Ctrl-C: %s", how(st, b, sizeof b));
}

/* Output to a pipe whose reader is gone: stats --watch and one-shot
 * commands say so and exit 1, not die by SIGPIPE. */
Test(bystander, output_to_a_closed_pipe_ends_with_a_message_and_status_1) {
    char out[256], errp[256], b[64];
    const char *enq[] = {"enqueue", "--redis", R.url, "echo", "x", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, NULL, 0, enq), 0);
    snprintf(errp, sizeof errp, "%s/pipe.err", R.dir);
    /* the watch: read a frame, then go away */
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const char *watch[] = {"stats", "--watch", "--redis", R.url, NULL};
    pid_t pid = spawn_plain(watch, p[1], e);
    close(p[1]), close(e);
    char frame[512];
    cr_assert_gt(read(p[0], frame, sizeof frame), 0, "a first frame");
    close(p[0]);
    int st = wait_end(pid, 10000);
    char *err = jrt_slurp(errp);
    cr_expect(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "stats --watch into a closed pipe: %s (want exit 1)",
              how(st, b, sizeof b));
    cr_expect(strstr(err, "cannot write the output"), "a message: %s", err);
    free(err);
    /* one-shot commands whose reader never read */
    const char *const *cmds[] = {(const char *const[]){"stats", "--redis", R.url, NULL},
                                 (const char *const[]){"workers", "--redis", R.url, NULL},
                                 (const char *const[]){"jobs", "--state", "ready", "--redis", R.url, NULL},
                                 (const char *const[]){"functions", "dump", NULL}};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        close(p[0]);
        e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        pid = spawn_plain(cmds[i], p[1], e);
        close(p[1]), close(e);
        st = wait_end(pid, 10000);
        err = jrt_slurp(errp);
        cr_expect(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "jobrunner %s into a closed pipe: %s (want exit 1)",
                  cmds[i][0], how(st, b, sizeof b));
        cr_expect(strstr(err, "cannot write"), "jobrunner %s: a message: %s", cmds[i][0], err);
        free(err);
    }
}
