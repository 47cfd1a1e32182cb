/* The Redis password stays secret: not in the argv (ps, /proc/PID/cmdline)
 * of a worker, its runner processes or a scheduler started with --redis
 * redis://user:SECRET@..., not in their logs, metrics or health answers,
 * not in the `workers` listing,
 * and not in the messages about a bad or unreachable URL holding it. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"

#define SECRET "Qz7XkW9jVq2ZmKx" /* no 4-byte piece of it in a path or message */

static jrt_redis_t R;
static char url[256], out[16384], err[16384];

/* GET path from 127.0.0.1:port: the whole response (malloc'd), or NULL. */
static char *http_get(int port, const char *path) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[128];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) || write(fd, req, (size_t)n) != n) {
        close(fd);
        return NULL;
    }
    size_t len = 0, cap = 1 << 20;
    char *buf = malloc(cap);
    cr_assert(buf);
    for (ssize_t k; len + 1 < cap && (k = read(fd, buf + len, cap - len - 1)) > 0;) len += (size_t)k;
    close(fd);
    buf[len] = '\0';
    return buf;
}

static void setup(void) {
    char port[16];
    snprintf(port, sizeof port, "%d", jrt_free_port());
    const char *extra[] = {"--port", port, "--bind", "127.0.0.1", NULL};
    jrt_redis_start(&R, extra);
    redisContext *c = jrt_connect(&R); /* the default user, on the socket */
    freeReplyObject(jrt_cmd(c, "ACL", "SETUSER", "jr", "on", ">" SECRET, "~*", "&*", "+@all", NULL));
    redisFree(c);
    snprintf(url, sizeof url, "redis://jr:%s@127.0.0.1:%s", SECRET, port);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(secrets, .init = setup, .fini = teardown, .timeout = 60);

/* 1 if the n bytes at s hold SECRET or any 4-byte piece of it. */
static int holds_piece(const char *s, size_t n) {
    const char *pw = SECRET;
    for (size_t i = 0; i + 4 <= strlen(pw); i++)
        if (memmem(s, n, pw + i, 4)) return 1;
    return 0;
}

/* /proc/PID/<what> of pid (NULs as spaces) into buf; its length, or 0 when
 * the process is gone or the file unreadable. */
static size_t proc_file(pid_t pid, const char *what, char *buf, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (!buf[i]) buf[i] = ' ';
    buf[n] = '\0';
    return n;
}

/* The argv of pid as /proc/PID/cmdline gives it. */
static size_t cmdline(pid_t pid, char *buf, size_t len) { return proc_file(pid, "cmdline", buf, len); }

/* The pids whose parent is ppid (from /proc/PID/stat), up to max. */
static size_t children(pid_t ppid, pid_t *kids, size_t max) {
    size_t n = 0;
    DIR *d = opendir("/proc");
    cr_assert(d);
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        int pid = atoi(e->d_name);
        if (pid <= 0) continue;
        char path[64], stat[512];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t got = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[got] = '\0';
        const char *rp = strrchr(stat, ')'); /* "pid (comm) S ppid ..." */
        int parent = 0;
        if (rp && sscanf(rp + 1, " %*c %d", &parent) == 1 && parent == ppid) kids[n++] = pid;
    }
    closedir(d);
    return n;
}

Test(secrets, the_password_is_in_no_argv_log_or_listing) {
    char wlog[256], slog[256], buf[8192];
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    snprintf(slog, sizeof slog, "%s/sched.log", R.dir);
    char wm[32], sm[32];
    int wport = jrt_free_port(), sport = jrt_free_port();
    snprintf(wm, sizeof wm, "127.0.0.1:%d", wport);
    snprintf(sm, sizeof sm, "127.0.0.1:%d", sport);
    const char *wargs[] = {"worker", "--redis", url, "--plugin", JRT_PLUGIN_DIR, "--concurrency", "3",
                           "--metrics", wm, NULL};
    const char *sargs[] = {"scheduler", "--redis", url, "--metrics", sm, NULL};
    pid_t w = jrt_spawn(wlog, wargs), s = jrt_spawn(slog, sargs);
    for (int i = 0; i < 200 && (!jrt_count(wlog, "worker starting") || !jrt_count(slog, "scheduler starting")); i++)
        jrt_sleep_ms(50);
    cr_assert(jrt_count(wlog, "worker starting"), "the worker did not start:\n%s", jrt_slurp(wlog));

    /* A job runs: the password reached Redis. */
    const char *eargs[] = {"enqueue", "--redis", url, "--in", "1s", "echo", "hi", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, eargs), 0, "%s", err);
    jr_qstats_t st = jrt_wait_settled(&R, "default", 0, 20000);
    cr_expect_eq(st.delayed + st.ready + st.pending, 0, "the job did not run through the authenticated processes");

    pid_t kids[16];
    size_t nk = 0;
    for (int i = 0; i < 100 && (nk = children(w, kids, 16)) < 3; i++) jrt_sleep_ms(50);
    cr_expect_geq(nk, 3, "the worker has %zu runner processes, expected 3", nk);
    size_t n = cmdline(w, buf, sizeof buf);
    /* the process title (jr_proc_title) replaced the argv, URL and all */
    cr_expect(n > 0 && strstr(buf, "jobrunner: worker default (") && !strstr(buf, "127.0.0.1"), "worker argv: %s", buf);
    cr_expect(!holds_piece(buf, n), "the worker's argv shows the password: %s", buf);
    for (size_t i = 0; i < nk; i++) {
        n = cmdline(kids[i], buf, sizeof buf);
        cr_expect(!holds_piece(buf, n), "runner %d's argv shows the password: %s", (int)kids[i], buf);
    }
    n = cmdline(s, buf, sizeof buf);
    cr_expect(n > 0 && strstr(buf, "scheduler"), "scheduler argv: %s", buf);
    cr_expect(!holds_piece(buf, n), "the scheduler's argv shows the password: %s", buf);

    int ports[2] = {wport, sport};
    for (int i = 0; i < 2; i++) {
        const char *paths[] = {"/metrics", "/healthz"};
        for (int k = 0; k < 2; k++) {
            char *body = http_get(ports[i], paths[k]);
            cr_expect(body && strstr(body, "HTTP/1."), "no answer from %s on port %d", paths[k], ports[i]);
            if (k == 0) cr_expect(body && strstr(body, "jobrunner_"), "no metrics on port %d", ports[i]);
            cr_expect(!body || !holds_piece(body, strlen(body)), "%s shows the password: %s", paths[k], body);
            free(body);
        }
    }

    const char *largs[] = {"workers", "--redis", url, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, largs), 0, "%s", err);
    cr_expect(strstr(out, "worker"), "no worker listed: %s", out);
    cr_expect(!holds_piece(out, strlen(out)) && !holds_piece(err, strlen(err)), "workers shows the password: %s%s",
              out, err);
    const char *jargs[] = {"workers", "--redis", url, "--json", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, jargs), 0, "%s", err);
    cr_expect(!holds_piece(out, strlen(out)), "workers --json shows the password: %s", out);

    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 10000), 0);
    char *wl = jrt_slurp(wlog), *sl = jrt_slurp(slog);
    cr_expect(strstr(wl, "jr:***@127.0.0.1"), "the worker's log does not show the redacted URL:\n%s", wl);
    cr_expect(!holds_piece(wl, strlen(wl)), "the worker's log shows the password:\n%s", wl);
    cr_expect(!holds_piece(sl, strlen(sl)), "the scheduler's log shows the password:\n%s", sl);
    free(wl), free(sl);
}

/* What a user gets wrong: every message about it leaves the password out. */
Test(secrets, no_message_about_a_url_shows_the_password) {
    const char *port = strrchr(url, ':') + 1;
    char bad[12][256];
    snprintf(bad[0], 256, "redis://%s@127.0.0.1:x", SECRET);             /* no user, bad port */
    snprintf(bad[1], 256, "redis://jr:ab/%s@127.0.0.1:%s", SECRET, port); /* '/' in it: wrong password */
    snprintf(bad[2], 256, "redis://jr:%s", SECRET);                      /* host left out */
    snprintf(bad[3], 256, "redis://jr:%s@127.0.0.1:1", SECRET);          /* nothing listens */
    snprintf(bad[4], 256, "redis://jr:%s?x@127.0.0.1:%s", SECRET, port);  /* '?' in it */
    snprintf(bad[5], 256, "unix:///nonexistent/s?password=%s&db=x", SECRET);
    snprintf(bad[6], 256, "unix:///nonexistent/s?pasword=%s", SECRET);  /* a typo */
    snprintf(bad[7], 256, "unix://jr:%s@relative/s", SECRET);
    snprintf(bad[8], 256, "redis//jr:%s@127.0.0.1", SECRET);             /* scheme mistyped */
    snprintf(bad[9], 256, "redis://jr:%s@127.0.0.1:%s/x", SECRET, port);
    snprintf(bad[10], 256, "redis://jr:%sX@127.0.0.1:%s", SECRET, port); /* wrong password */
    snprintf(bad[11], 256, "redis://%s@127.0.0.1:%s", SECRET, port);     /* no user: the default user */
    for (int i = 0; i < 12; i++) {
        const char *args[] = {"stats", "--redis", bad[i], NULL};
        int rc = jrt_run(out, sizeof out, err, sizeof err, args);
        if (i != 11) cr_expect_neq(rc, 0, "%s: accepted", bad[i]); /* the default user takes any */
        cr_expect(!holds_piece(err, strlen(err)) && !holds_piece(out, strlen(out)), "%s: %s%s", bad[i], out, err);
        /* The same URL from the environment and as a stray argument. */
        setenv("JOBRUNNER_REDIS_URL", bad[i], 1);
        const char *eargs[] = {"stats", NULL};
        rc = jrt_run(out, sizeof out, err, sizeof err, eargs);
        unsetenv("JOBRUNNER_REDIS_URL");
        if (i != 11) cr_expect_neq(rc, 0, "%s (environment): accepted", bad[i]);
        cr_expect(!holds_piece(err, strlen(err)), "%s (environment): %s", bad[i], err);
        const char *sargs[] = {"worker", bad[i], NULL};
        rc = jrt_run(out, sizeof out, err, sizeof err, sargs);
        cr_expect_eq(rc, 2, "%s (stray argument): status %d", bad[i], rc);
        cr_expect(!holds_piece(err, strlen(err)), "%s (stray argument): %s", bad[i], err);
    }
}

/* The environment of pid (/proc/PID/environ). */
static size_t environ_of(pid_t pid, char *buf, size_t len) { return proc_file(pid, "environ", buf, len); }

#define SECRET2 "Hw4PcY8rTf3Lsd9" /* the rotated password: no 4-byte piece shared with SECRET */

static int holds_piece_of(const char *s, size_t n, const char *pw) {
    for (size_t i = 0; i + 4 <= strlen(pw); i++)
        if (memmem(s, n, pw + i, 4)) return 1;
    return 0;
}

/* redis.password_file: a worker and a scheduler that got their password
 * from a file (the URL names the user only) run jobs; neither argv, the
 * environment, the logs, /metrics, /healthz nor `workers` holds it; a
 * rotated file is read at the next reconnect. */
Test(secrets, the_password_file_is_read_at_each_connect_and_shown_nowhere) {
    char pwfile[256], userurl[256], wlog[256], slog[256], buf[16384];
    snprintf(pwfile, sizeof pwfile, "%s/redis-password", R.dir);
    FILE *f = fopen(pwfile, "w");
    fputs(SECRET "\n", f);
    fclose(f);
    const char *port = strrchr(url, ':') + 1;
    snprintf(userurl, sizeof userurl, "redis://jr:@127.0.0.1:%s", port);
    snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);
    snprintf(slog, sizeof slog, "%s/sched.log", R.dir);
    setenv("JOBRUNNER_REDIS_PASSWORD_FILE", pwfile, 1);
    char wm[32], sm[32];
    int wport = jrt_free_port(), sport = jrt_free_port();
    snprintf(wm, sizeof wm, "127.0.0.1:%d", wport);
    snprintf(sm, sizeof sm, "127.0.0.1:%d", sport);
    const char *wargs[] = {"worker", "--redis", userurl, "--plugin", JRT_PLUGIN_DIR, "--metrics", wm, NULL};
    const char *sargs[] = {"scheduler", "--redis", userurl, "--metrics", sm, NULL};
    pid_t w = jrt_spawn(wlog, wargs), s = jrt_spawn(slog, sargs);
    const char *eargs[] = {"enqueue", "--redis", userurl, "--in", "300ms", "echo", "hi", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, eargs), 0, "%s", err);
    jr_qstats_t st = jrt_wait_settled(&R, "default", 0, 20000);
    cr_expect_eq(st.delayed + st.ready + st.pending, 0, "the job did not run with the file's password:\n%s",
                 jrt_slurp(wlog));
    pid_t procs[2] = {w, s};
    for (int i = 0; i < 2; i++) {
        size_t n = cmdline(procs[i], buf, sizeof buf);
        cr_expect(n > 0 && !holds_piece(buf, n), "argv: %s", buf);
        n = environ_of(procs[i], buf, sizeof buf);
        cr_expect(n > 0 && strstr(buf, pwfile), "the environment does not name the file: %s", buf);
        cr_expect(!holds_piece(buf, n), "the environment shows the password: %s", buf);
    }
    int ports[2] = {wport, sport};
    for (int i = 0; i < 2; i++) {
        const char *paths[] = {"/metrics", "/healthz"};
        for (int k = 0; k < 2; k++) {
            char *body = http_get(ports[i], paths[k]);
            cr_expect(body && strstr(body, "HTTP/1."), "no answer from %s on port %d", paths[k], ports[i]);
            cr_expect(!body || !holds_piece(body, strlen(body)), "%s shows the password: %s", paths[k], body);
            free(body);
        }
    }
    const char *largs[] = {"workers", "--redis", userurl, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, largs), 0, "%s", err);
    cr_expect(strstr(out, "worker") && !holds_piece(out, strlen(out)), "workers: %s", out);

    /* Rotation: Redis takes the new password only, the file holds it, the
     * connections are cut: both reconnect with the file as it is now. */
    redisContext *c = jrt_connect(&R);
    freeReplyObject(jrt_cmd(c, "ACL", "SETUSER", "jr", "resetpass", ">" SECRET2, NULL));
    f = fopen(pwfile, "w");
    fputs(SECRET2 "\n", f);
    fclose(f);
    freeReplyObject(jrt_cmd(c, "CLIENT", "KILL", "USER", "jr", NULL));
    redisFree(c);
    const char *e2[] = {"enqueue", "--redis", userurl, "--in", "300ms", "echo", "again", NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, e2), 0, "%s", err);
    for (int i = 0; i < 300; i++) {
        st = jrt_stats(&R, "default");
        if (st.delayed + st.ready + st.pending == 0 && st.processed >= 2) break;
        jrt_sleep_ms(50);
    }
    cr_expect(st.delayed + st.ready + st.pending == 0 && st.processed >= 2,
              "after the rotation the job did not run: %lld delayed, %lld ready\n%s", st.delayed, st.ready,
              jrt_slurp(wlog));
    unsetenv("JOBRUNNER_REDIS_PASSWORD_FILE");
    cr_expect_eq(jrt_stop(w, SIGTERM, 10000), 0);
    cr_expect_eq(jrt_stop(s, SIGTERM, 10000), 0);
    char *wl = jrt_slurp(wlog), *sl = jrt_slurp(slog);
    cr_expect(!holds_piece(wl, strlen(wl)) && !holds_piece_of(wl, strlen(wl), SECRET2), "worker log:\n%s", wl);
    cr_expect(!holds_piece(sl, strlen(sl)) && !holds_piece_of(sl, strlen(sl), SECRET2), "scheduler log:\n%s", sl);
    free(wl), free(sl);
}

/* What goes wrong with a password file: each message names the file (or
 * the two places) and never shows the content. */
Test(secrets, a_bad_password_file_is_named_never_shown) {
    char pwfile[256], userurl[256], dir[256], empty[256], big[256];
    snprintf(pwfile, sizeof pwfile, "%s/wrong-password", R.dir);
    FILE *f = fopen(pwfile, "w");
    fputs(SECRET "X\n", f); /* a wrong password, holding the right one */
    fclose(f);
    snprintf(empty, sizeof empty, "%s/empty-password", R.dir);
    fclose(fopen(empty, "w"));
    snprintf(big, sizeof big, "%s/big-password", R.dir);
    f = fopen(big, "w");
    for (int i = 0; i < 400; i++) fputs(SECRET, f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s", R.dir); /* a directory: unreadable as a file */
    const char *port = strrchr(url, ':') + 1;
    snprintf(userurl, sizeof userurl, "redis://jr:@127.0.0.1:%s", port);
    struct {
        const char *file, *url, *want;
    } cases[] = {
        {pwfile, userurl, "refused the password of the file"},
        {"/nonexistent/pw", userurl, "cannot read the Redis password file /nonexistent/pw"},
        {dir, userurl, "cannot read the Redis password file"},
        {empty, userurl, "is empty"},
        {big, userurl, "is longer than 4096 bytes"},
        {pwfile, url, "a Redis password given twice"},
        {NULL, userurl, "user \"jr\" without a password"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].file) setenv("JOBRUNNER_REDIS_PASSWORD_FILE", cases[i].file, 1);
        else unsetenv("JOBRUNNER_REDIS_PASSWORD_FILE");
        const char *args[] = {"stats", "--redis", cases[i].url, NULL};
        int rc = jrt_run(out, sizeof out, err, sizeof err, args);
        cr_expect_eq(rc, 1, "case %zu: status %d: %s", i, rc, err);
        cr_expect(strstr(err, cases[i].want), "case %zu: want \"%s\": %s", i, cases[i].want, err);
        if (cases[i].file && i < 5)
            cr_expect(strstr(err, cases[i].file), "case %zu: the file is not named: %s", i, err);
        cr_expect(!holds_piece(err, strlen(err)) && !holds_piece(out, strlen(out)), "case %zu: %s%s", i, out, err);
    }
    unsetenv("JOBRUNNER_REDIS_PASSWORD_FILE");
}
