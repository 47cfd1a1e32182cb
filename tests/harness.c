/* Test support: see harness.h. */
#include "harness.h"
#include "redis_produce.h"
#include "redis_admin.h"

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jr.h"

int64_t jrt_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void jrt_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* fork + exec with the child tied to our life; out/err fds (or -1 = null). */
static pid_t start(const char *path, const char *const *argv, int out, int err) {
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(out >= 0 ? out : null, 1);
        dup2(err >= 0 ? err : null, 2);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* 1 once a redis-server answers PING on unix socket sock (NULL: on
 * 127.0.0.1:port), trying every 10 ms for 5 s; else 0. */
static int wait_ping(const char *sock, int port) {
    for (int t = 0; t < 500; t++) {
        redisContext *x = sock ? redisConnectUnix(sock) : redisConnect("127.0.0.1", port);
        if (x && !x->err) {
            redisReply *rep = redisCommand(x, "PING");
            int ok = rep && rep->type == REDIS_REPLY_STATUS;
            if (rep) freeReplyObject(rep);
            redisFree(x);
            if (ok) return 1;
        } else if (x) {
            redisFree(x);
        }
        jrt_sleep_ms(10);
    }
    return 0;
}

/* Start redis-server in r->dir (already made) and wait for PING. */
static void redis_launch(jrt_redis_t *r, const char *const *extra) {
    const char *argv[64] = {JRT_REDIS_SERVER, "--port", "0", "--unixsocket", r->sock,
                            "--save", "", "--appendonly", "no", "--dir", r->dir};
    size_t n = 11;
    for (size_t i = 0; extra && extra[i] && n < 62; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    char log[128];
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    r->pid = start(JRT_REDIS_SERVER, argv, fd, fd);
    close(fd);
    if (wait_ping(r->sock, 0)) return;
    cr_assert_fail("redis-server did not start (see %s)", log);
}

void jrt_redis_start(jrt_redis_t *r, const char *const *extra) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/jrt.XXXXXX");
    cr_assert(mkdtemp(r->dir), "mkdtemp: %s", strerror(errno));
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    snprintf(r->url, sizeof r->url, "unix://%s", r->sock);
    redis_launch(r, extra);
}

void jrt_redis_restart(jrt_redis_t *r, const char *const *extra) {
    jrt_stop(r->pid, SIGKILL, 5000);
    unlink(r->sock);
    redis_launch(r, extra);
}

void jrt_write(const jrt_redis_t *r, const char *name, const char *text, char *out, size_t outlen) {
    snprintf(out, outlen, "%s/%s", r->dir, name);
    FILE *f = fopen(out, "w");
    cr_assert(f, "cannot write %s", out);
    fputs(text, f);
    fclose(f);
}

int jrt_count(const char *path, const char *needle) {
    char *s = jrt_slurp(path);
    int n = 0;
    for (char *p = s; (p = strstr(p, needle)) != NULL; p++) n++;
    free(s);
    return n;
}

void jrt_redis_stop(jrt_redis_t *r) {
    if (r->pid > 0) jrt_stop(r->pid, SIGTERM, 5000);
    r->pid = 0;
    if (r->dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
        if (system(cmd) != 0) {
        }
        r->dir[0] = '\0';
    }
}

redisContext *jrt_connect(const jrt_redis_t *r) {
    redisContext *c = redisConnectUnix(r->sock);
    cr_assert(c && !c->err, "connect to test redis: %s", c ? c->errstr : "oom");
    return c;
}

long long jrt_int(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert(rep, "redis: %s", c->errstr);
    cr_assert(rep->type == REDIS_REPLY_INTEGER, "expected an integer reply to %s, got type %d %s",
              fmt, rep->type, rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

redisReply *jrt_cmd(redisContext *c, const char *first, ...) {
    va_list ap, cp;
    va_start(ap, first);
    va_copy(cp, ap);
    int n = 0;
    for (const char *s = first; s; s = va_arg(cp, const char *)) n++;
    va_end(cp);
    const char **argv = malloc((size_t)(n ? n : 1) * sizeof *argv);
    cr_assert(argv, "out of memory");
    n = 0;
    for (const char *s = first; s; s = va_arg(ap, const char *)) argv[n++] = s;
    va_end(ap);
    redisReply *rep = redisCommandArgv(c, n, argv, NULL);
    free(argv);
    cr_assert(rep, "connection: %s", c->errstr);
    return rep;
}

long long jrt_info_int(redisContext *c, const char *section, const char *field) {
    redisReply *rep = jrt_cmd(c, "INFO", section, NULL);
    cr_assert(rep->type == REDIS_REPLY_STRING, "INFO %s: not a string", section);
    char key[96];
    snprintf(key, sizeof key, "\n%s:", field);
    const char *p = strstr(rep->str, key);
    cr_assert(p, "no %s in INFO %s", field, section);
    long long v = atoll(p + strlen(key));
    freeReplyObject(rep);
    return v;
}

void jrt_start_recorded(jrt_redis_t *r, char *record, size_t len) {
    jrt_redis_start(r, NULL);
    snprintf(record, len, "%s/record.txt", r->dir);
    setenv("JRT_RECORD", record, 1);
}

const char *jrt_config(const jrt_redis_t *r, const char *extra, char *path, size_t len) {
    size_t n = strlen(r->url) + strlen(extra) + 32;
    char *text = malloc(n);
    cr_assert(text, "out of memory");
    snprintf(text, n, "redis:\n  url: %s\n%s", r->url, extra);
    jrt_write(r, "jobrunner.yaml", text, path, len);
    free(text);
    return path;
}

jr_qstats_t jrt_wait_settled(const jrt_redis_t *r, const char *queue, long long dead, int timeout_ms) {
    jr_qstats_t s = {0};
    for (int t = 0; t <= timeout_ms; t += 50) {
        s = jrt_stats(r, queue);
        if (s.ready == 0 && s.pending == 0 && s.delayed == 0 && s.dead >= dead) break;
        jrt_sleep_ms(50);
    }
    return s;
}

long long jrt_calls(const jrt_redis_t *r, const char *cmd) {
    redisContext *c = jrt_connect(r);
    redisReply *rep = redisCommand(c, "INFO commandstats");
    cr_assert(rep && rep->type == REDIS_REPLY_STRING, "INFO commandstats failed");
    char needle[64];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(rep->str, needle);
    long long n = p ? atoll(p + strlen(needle)) : 0;
    freeReplyObject(rep);
    redisFree(c);
    return n;
}

static const char **with_program(const char *const *args, const char **argv, size_t cap) {
    size_t n = 0;
    argv[n++] = JRT_JOBRUNNER;
    for (size_t i = 0; args[i] && n < cap - 1; i++) argv[n++] = args[i];
    argv[n] = NULL;
    return argv;
}

pid_t jrt_spawn(const char *log, const char *const *args) {
    const char *argv[64];
    int fd = log ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
    pid_t pid = start(JRT_JOBRUNNER, with_program(args, argv, 64), fd, fd);
    if (fd >= 0) close(fd);
    return pid;
}

/* Read all of fd into buf (truncating), NUL-terminated. */
static void drain(int fd, char *buf, size_t len) {
    size_t n = 0;
    char scratch[4096];
    for (;;) {
        ssize_t got = buf && n + 1 < len ? read(fd, buf + n, len - 1 - n) : read(fd, scratch, sizeof scratch);
        if (got <= 0) break;
        if (buf && n + 1 < len) n += (size_t)got;
    }
    if (buf && len) buf[n] = '\0';
}

int jrt_run(char *out, size_t outlen, char *err, size_t errlen, const char *const *args) {
    const char *argv[64];
    char outp[] = "/tmp/jrt-out.XXXXXX", errp[] = "/tmp/jrt-err.XXXXXX";
    int ofd = mkstemp(outp), efd = mkstemp(errp);
    cr_assert(ofd >= 0 && efd >= 0);
    pid_t pid = start(JRT_JOBRUNNER, with_program(args, argv, 64), ofd, efd);
    int st = 0;
    waitpid(pid, &st, 0);
    lseek(ofd, 0, SEEK_SET), lseek(efd, 0, SEEK_SET);
    drain(ofd, out, outlen);
    drain(efd, err, errlen);
    close(ofd), close(efd);
    unlink(outp), unlink(errp);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int jrt_stop(pid_t pid, int sig, int timeout_ms) {
    int st = 0;
    kill(pid, sig);
    for (int waited = 0; waited < timeout_ms; waited += 5) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (w < 0) return -1;
        jrt_sleep_ms(5);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

char *jrt_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    cr_assert(buf);
    while (f) {
        if (n + 4096 > cap) {
            buf = realloc(buf, cap *= 2);
            cr_assert(buf);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        if (got == 0) break;
        n += got;
    }
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
}

const char *jrt_doc_acl(const char *doc, const char *user, size_t *len) {
    char want[64];
    snprintf(want, sizeof want, "\nACL SETUSER %s ", user);
    const char *p = strstr(doc, want);
    cr_assert(p, "docs/operations.md has no line \"ACL SETUSER %s ...\"", user);
    *len = strcspn(p + 1, "\n");
    return p + 1;
}

size_t jrt_lines(const char *path) {
    char *s = jrt_slurp(path);
    size_t n = 0;
    for (char *p = s; *p; p++) n += *p == '\n';
    free(s);
    return n;
}

size_t jrt_wait_lines(const char *path, size_t n, int timeout_ms) {
    size_t got = 0;
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        if ((got = jrt_lines(path)) >= n) return got;
        jrt_sleep_ms(20);
    }
    return got;
}

jr_redis_t *jrt_jr_connect(const jrt_redis_t *r) {
    char err[JR_ERRLEN];
    jr_redis_t *c = jr_redis_connect(r->url, 2000, err, sizeof err);
    cr_assert(c, "%s", err);
    cr_assert_eq(jr_redis_load_library(c), 0, "%s", jr_redis_errstr(c));
    return c;
}

jr_qstats_t jrt_stats(const jrt_redis_t *r, const char *queue) {
    jr_redis_t *c = jrt_jr_connect(r);
    jr_qstats_t s;
    cr_assert_eq(jr_redis_stats(c, queue, &s), 0, "%s", jr_redis_errstr(c));
    jr_redis_free(c);
    return s;
}

void jrt_dead_entry(const jrt_redis_t *r, const char *queue, const char *id, char *out, size_t len) {
    redisContext *c = jrt_connect(r);
    redisReply *rep = redisCommand(c, "XRANGE jr:{%s}:dead - +", queue);
    out[0] = '\0';
    for (size_t i = 0; rep && i < rep->elements; i++) {
        redisReply *f = rep->element[i]->element[1];
        int match = 0;
        for (size_t j = 0; j + 1 < f->elements; j += 2)
            match |= !strcmp(f->element[j]->str, "id") && !strcmp(f->element[j + 1]->str, id);
        for (size_t j = 0; match && j + 1 < f->elements; j += 2)
            snprintf(out + strlen(out), len - strlen(out), "%s=%s;", f->element[j]->str, f->element[j + 1]->str);
    }
    if (rep) freeReplyObject(rep);
    redisFree(c);
}

/* Lists both tiers: zset members (msgpack id first) and bucket items
 * (n, due offset us, id or "" = d<due ms>-<n>, ...; a lone n = cancelled). */
static const char DELAYED_ALL_LUA[] =
    "local q, out = ARGV[1], {}\n"
    "local z = redis.call('ZRANGE', 'jr:{' .. q .. '}:delayed', 0, -1, 'WITHSCORES')\n"
    "for i = 1, #z, 2 do\n"
    "  local ok, id = pcall(cmsgpack.unpack, z[i])\n"
    "  out[#out + 1] = ok and type(id) == 'string' and id or '?'\n"
    "  out[#out + 1] = string.format('%.3f', tonumber(z[i + 1]))\n"
    "  out[#out + 1] = 'z'\n"
    "end\n"
    "for _, b in ipairs(redis.call('ZRANGE', 'jr:{' .. q .. '}:wheel', 0, -1)) do\n"
    "  for _, it in ipairs(redis.call('LRANGE', 'jr:{' .. q .. '}:wheel:' .. b, 0, -1)) do\n"
    "    local t = {cmsgpack.unpack(it)}\n"
    "    if #t > 1 then\n"
    "      local us = tonumber(b) * 1000 + t[2]\n"
    "      local id = t[3]\n"
    "      if id == '' then id = 'd' .. string.format('%d', math.floor(us / 1000)) .. '-' .. string.format('%d', t[1]) end\n"
    "      out[#out + 1] = id\n"
    "      out[#out + 1] = string.format('%.3f', us / 1000)\n"
    "      out[#out + 1] = 'w'\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return out\n";

redisReply *jrt_delayed_all(redisContext *c, const char *q) {
    redisReply *rep = redisCommand(c, "EVAL %s 0 %s", DELAYED_ALL_LUA, q);
    cr_assert(rep, "redis: %s", c->errstr);
    cr_assert(rep->type == REDIS_REPLY_ARRAY, "jrt_delayed_all: %s", rep->type == REDIS_REPLY_ERROR ? rep->str : "not an array");
    return rep;
}

long long jrt_delayed_count(redisContext *c, const char *q) {
    long long n = jrt_int(c, "ZCARD jr:{%s}:delayed", q);
    redisReply *rep = redisCommand(c, "GET jr:{%s}:wheel:n", q);
    cr_assert(rep, "redis: %s", c->errstr);
    if (rep->type == REDIS_REPLY_STRING) n += strtoll(rep->str, NULL, 10);
    freeReplyObject(rep);
    return n;
}

/* ---- shared helpers of the test files ---------------------------------- */

const char *jrt_path(const jrt_redis_t *r, const char *name) {
    static char path[8][192];
    static int k;
    k = (k + 1) % 8;
    snprintf(path[k], sizeof path[k], "%s/%s", r->dir, name);
    return path[k];
}

/* argv of `jobrunner <role>` for r: the config or URL, then extra. */
static size_t role_args(const char **argv, const char *role, const jrt_redis_t *r, const char *cfg) {
    argv[0] = role;
    argv[1] = cfg ? "-c" : "--redis";
    argv[2] = cfg ? cfg : r->url;
    return 3;
}

pid_t jrt_worker(const jrt_redis_t *r, const char *cfg, const char *plugin, const char *log,
                 const char *const *extra) {
    const char *argv[48];
    size_t n = role_args(argv, "worker", r, cfg);
    argv[n++] = "--plugin";
    argv[n++] = plugin ? plugin : JRT_RECORD_PLUGIN;
    for (size_t i = 0; extra && extra[i]; i++) {
        cr_assert_lt(n, 47, "jrt_worker: too many args");
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    return jrt_spawn(log, argv);
}

pid_t jrt_scheduler(const jrt_redis_t *r, const char *cfg, const char *log) {
    const char *argv[8];
    argv[role_args(argv, "scheduler", r, cfg)] = NULL;
    return jrt_spawn(log, argv);
}

jr_enqueue_t jrt_job(const char *queue, const char *handler, const char *payload) {
    return (jr_enqueue_t){.queue = queue,
                          .env = {.handler = handler, .handler_len = strlen(handler), .payload = payload,
                                  .payload_len = payload ? strlen(payload) : 0, .attempt = 1}};
}

void jrt_enqueue_jobs(const jrt_redis_t *r, const jr_enqueue_t *jobs, size_t n, char (*ids)[JR_ID_MAX]) {
    jr_redis_t *c = jrt_jr_connect(r);
    cr_assert_eq(jr_redis_enqueue(c, jobs, n, ids, NULL), 0, "enqueue to %s: %s", n ? jobs[0].queue : "-",
                 jr_redis_errstr(c));
    jr_redis_free(c);
}

void jrt_enqueue(const jrt_redis_t *r, jr_enqueue_t job, size_t n, char (*ids)[JR_ID_MAX]) {
    jr_enqueue_t *jobs = calloc(n ? n : 1, sizeof *jobs);
    cr_assert(jobs, "out of memory");
    for (size_t i = 0; i < n; i++) jobs[i] = job;
    jrt_enqueue_jobs(r, jobs, n, ids);
    free(jobs);
}

void jrt_cli_enqueue(const jrt_redis_t *r, const char *cfg, const char *const *args, char *id, size_t len) {
    const char *argv[40];
    size_t n = role_args(argv, "enqueue", r, cfg);
    for (size_t i = 0; args[i]; i++) {
        cr_assert_lt(n, 39, "jrt_cli_enqueue: too many args");
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    char out[512], err[2048];
    int st = jrt_run(out, sizeof out, err, sizeof err, argv);
    cr_assert_eq(st, 0, "enqueue failed (exit %d): %s", st, err);
    out[strcspn(out, "\n")] = '\0';
    if (id) snprintf(id, len, "%s", out);
}

int jrt_cli(const jrt_redis_t *r, char *out, size_t len, const char *const *args) {
    const char *argv[32];
    size_t n = 0;
    /* "--redis URL" after the command's words, before its options */
    size_t words = args[1] && (!strcmp(args[0], "job") || !strcmp(args[0], "cron")) ? 2 : 1, k = 0;
    while (k < words) argv[n++] = args[k++];
    argv[n++] = "--redis", argv[n++] = r->url;
    for (; args[k]; k++) {
        cr_assert_lt(n, 31, "jrt_cli: more than 29 args");
        argv[n++] = args[k];
    }
    argv[n] = NULL;
    char err[2048];
    static char scratch[1 << 16];
    int st = jrt_run(out ? out : scratch, out ? len : sizeof scratch, err, sizeof err, argv);
    if (st != 0 && st != 1) cr_log_warn("jobrunner %s: exit %d: %s", args[0], st, err);
    return st;
}

void jrt_run_expect(int want, char *out, size_t len, const char *const *args) {
    static char scratch[1 << 16];
    char err[4096];
    if (!out) out = scratch, len = sizeof scratch;
    int st = jrt_run(out, len, err, sizeof err, args);
    cr_assert_eq(st, want, "jobrunner %s %s: exit %d, want %d; stdout: %s stderr: %s", args[0],
                 args[1] ? args[1] : "", st, want, out, err);
}

long long jrt_redis_ms(redisContext *c) {
    redisReply *t = redisCommand(c, "TIME");
    cr_assert(t && t->type == REDIS_REPLY_ARRAY && t->elements == 2, "TIME: %s", t ? "not an array" : c->errstr);
    long long ms = strtoll(t->element[0]->str, NULL, 10) * 1000 + strtoll(t->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(t);
    return ms;
}

/* 1 if a TCP port of 127.0.0.1 can be bound now. */
static int port_free(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

/* A random port of base..base + span - 1 (rand(), the pid and the clock
 * mixed, so tests starting at once pick apart). */
static int random_port(int base, unsigned span) {
    return base + (int)(((unsigned)rand() ^ (unsigned)getpid() * 2654435761u ^ (unsigned)jrt_wall_us()) % span);
}

/* A random port of 10000..19999 that can be bound now. Not one the kernel
 * would hand out itself (ip_local_port_range, 32768..60999 here): a port
 * bound and closed to ask the kernel for a free one could be taken as the
 * local end of any outgoing connection before our server binds it, which,
 * with tests running at once (tests/run.sh), is a real chance. */
int jrt_free_port(void) {
    for (int tries = 0; tries < 2000; tries++) {
        int p = random_port(10000, 10000u);
        if (port_free(p)) return p;
    }
    cr_assert_fail("no free port in 10000..19999");
    return -1;
}

int jrt_http_get(int port, const char *path, char **body) {
    *body = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    int status = n > 0 && (size_t)n < sizeof req && write(fd, req, (size_t)n) == n ? jrt_http_read(fd, 0, body) : -1;
    close(fd);
    return status;
}

int jrt_http_request(int port, const char *method, const char *path, const char *headers, const char *body,
                     char **resp) {
    *resp = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    size_t blen = body ? strlen(body) : 0, cap = strlen(path) + (headers ? strlen(headers) : 0) + blen + 256;
    char *req = malloc(cap);
    cr_assert(req, "out of memory");
    int n = snprintf(req, cap, "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%sContent-Length: %zu\r\n\r\n%s", method, path,
                     headers ? headers : "", blen, body ? body : "");
    int status = n > 0 && (size_t)n < cap && write(fd, req, (size_t)n) == n ? jrt_http_read(fd, 0, resp) : -1;
    free(req);
    close(fd);
    return status;
}

int jrt_http_status(const char *text, char **body) {
    int status = -1;
    const char *sep = strstr(text, "\r\n\r\n");
    if (sscanf(text, "HTTP/1.%*d %d", &status) != 1 || !sep) return -1;
    *body = strdup(sep + 4);
    cr_assert(*body, "out of memory");
    return status;
}

int jrt_http_read(int fd, int64_t deadline_us, char **body) {
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    cr_assert(buf, "out of memory");
    for (;;) {
        if (deadline_us) {
            int left = (int)((deadline_us - jrt_wall_us()) / 1000);
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (left <= 0 || poll(&p, 1, left) <= 0) break;
        }
        ssize_t k = read(fd, buf + len, cap - len - 1);
        if (k <= 0) break;
        len += (size_t)k;
        if (len + 1 == cap) cr_assert(buf = realloc(buf, cap *= 2), "out of memory");
    }
    buf[len] = '\0';
    int status = jrt_http_status(buf, body);
    free(buf);
    return status;
}

int jrt_runs_in(const char *text, const char *id, const char *payload) {
    int n = 0;
    size_t len = strlen(id);
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) : strlen(line);
        if (ll > len && !strncmp(line, id, len) && line[len] == ' ') {
            const char *p = line + len + 1; /* past "<id> ": skip attempt and start */
            for (int f = 0; f < 2 && p; f++) {
                p = memchr(p, ' ', ll - (size_t)(p - line));
                if (p) p++;
            }
            n += !payload || (p && ll - (size_t)(p - line) == strlen(payload) && !strncmp(p, payload, strlen(payload)));
        }
        if (!nl) break;
        line = nl + 1;
    }
    return n;
}

int jrt_runs_of(const char *path, const char *id, const char *payload) {
    char *s = jrt_slurp(path);
    int n = jrt_runs_in(s, id, payload);
    free(s);
    return n;
}

int jrt_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char **jrt_record_ids(const char *path, size_t max, char **text, size_t *n, size_t *distinct) {
    *text = jrt_slurp(path);
    char **ids = malloc((max + 1) * sizeof *ids);
    cr_assert(ids, "out of memory");
    *n = 0;
    for (char *p = strtok(*text, "\n"); p && *n < max; p = strtok(NULL, "\n")) {
        p[strcspn(p, " ")] = '\0';
        ids[(*n)++] = p;
    }
    qsort(ids, *n, sizeof *ids, jrt_cmp_str);
    *distinct = 0;
    for (size_t i = 0; i < *n; i++) *distinct += i == 0 || strcmp(ids[i], ids[i - 1]) != 0;
    return ids;
}

int jrt_wait_for(int timeout_ms, int step_ms, int (*done)(const void *arg), const void *arg) {
    for (int waited = 0;; waited += step_ms) {
        if (done(arg)) return 1;
        if (waited >= timeout_ms) return 0;
        jrt_sleep_ms(step_ms);
    }
}

typedef struct {
    const char *(*state_of)(const char *queue, const char *id);
    const char *queue, *id, *state;
} want_state_t;

static int in_state(const void *arg) {
    const want_state_t *w = arg;
    return !strcmp(w->state_of(w->queue, w->id), w->state);
}

int jrt_wait_state(const char *(*state_of)(const char *queue, const char *id), const char *queue, const char *id,
                   const char *state, int timeout_ms) {
    return jrt_wait_for(timeout_ms, 50, in_state, &(want_state_t){state_of, queue, id, state});
}

int jrt_wait_count(const char *path, const char *needle, int n, int timeout_ms) {
    for (int waited = 0;; waited += 20) {
        int got = jrt_count(path, needle);
        if (got >= n || waited >= timeout_ms) return got;
        jrt_sleep_ms(20);
    }
}

/* ---- environment of the processes started next ------------------------- */

void jrt_asan_option(const char *option) {
    const char *old = getenv("ASAN_OPTIONS");
    size_t n = (old ? strlen(old) : 0) + strlen(option) + 2;
    char *v = malloc(n);
    cr_assert(v, "out of memory");
    snprintf(v, n, "%s%s%s", old ? old : "", old && *old ? ":" : "", option);
    setenv("ASAN_OPTIONS", v, 1);
    free(v);
}

/* libfaketime's preload library (Debian package libfaketime, with faketime). */
static const char *libfaketime(void) {
    static char path[512];
    glob_t g;
    const char *pats[] = {"/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
                          "/usr/local/lib/faketime/libfaketime.so.1"};
    for (size_t i = 0; i < sizeof pats / sizeof *pats; i++) {
        if (glob(pats[i], 0, NULL, &g) == 0 && g.gl_pathc > 0) {
            snprintf(path, sizeof path, "%s", g.gl_pathv[0]);
            globfree(&g);
            return path;
        }
        globfree(&g);
    }
    cr_assert_fail("libfaketime.so.1 not found: install the Debian package faketime (.ci/deps.sh)");
    return NULL;
}

void jrt_skew_env(const char *skew) {
    static char *saved;
    static int skewed, was_set;
    if (skew) {
        if (!skewed) {
            const char *old = getenv("ASAN_OPTIONS");
            was_set = old != NULL, saved = old ? strdup(old) : NULL;
            jrt_asan_option("verify_asan_link_order=0");
        }
        skewed = 1;
        setenv("LD_PRELOAD", libfaketime(), 1);
        setenv("FAKETIME", skew, 1);
        setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
        setenv("FAKETIME_NO_CACHE", "1", 1);
        return;
    }
    unsetenv("LD_PRELOAD"), unsetenv("FAKETIME"), unsetenv("FAKETIME_DONT_FAKE_MONOTONIC");
    unsetenv("FAKETIME_NO_CACHE");
    if (skewed) {
        if (was_set && saved) setenv("ASAN_OPTIONS", saved, 1);
        else unsetenv("ASAN_OPTIONS");
    }
    free(saved);
    saved = NULL, skewed = 0;
}

pid_t jrt_spawn_skewed(const char *skew, const char *log, const char *const *args) {
    if (!skew) return jrt_spawn(log, args);
    jrt_skew_env(skew);
    pid_t pid = jrt_spawn(log, args);
    jrt_skew_env(NULL);
    return pid;
}

/* ---- TLS (test_tls) ----------------------------------------------------- */

/* The test CA and certificates of jrt_redis_start_tls, made in dir. */
static void make_certs(const char *dir) {
    char cmd[4096];
    /* x509 -req signs with the CA; faketime moves the signing clock, so the
     * validity window (-days 2) lies in the past or in the future. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && exec >openssl.log 2>&1 && set -e && "
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj '/CN=jrt test CA' && "
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' >san.ext && "
             "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=jrt server' && "
             "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 "
             "-extfile san.ext && "
             "faketime -f -10d openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-out expired.crt -days 2 -extfile san.ext && "
             "faketime -f +10d openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-out future.crt -days 2 -extfile san.ext && "
             "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj '/CN=jrt client' && "
             "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2 && "
             "openssl genrsa -out other.key 2048",
             dir);
    /* Once in a CI run the openssl commands failed and the log went with
     * the directory: a failure is tried once more, and its log shown. */
    char log[256];
    snprintf(log, sizeof log, "%s/openssl.log", dir);
    int rc = system(cmd);
    if (rc != 0) {
        char *first = jrt_slurp(log);
        fprintf(stderr, "making the test certificates failed (status %d), trying again:\n%s\n", rc,
                first ? first : "(no log)");
        free(first);
        rc = system(cmd);
    }
    cr_assert_eq(rc, 0, "making the test certificates failed twice (status %d):\n%s", rc, jrt_slurp(log));
}

void jrt_redis_start_tls(jrt_redis_t *r, const char *auth_clients, char *plain_url, char *tls_url) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/jrt.XXXXXX");
    cr_assert(mkdtemp(r->dir), "mkdtemp: %s", strerror(errno));
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    snprintf(r->url, sizeof r->url, "unix://%s", r->sock);
    make_certs(r->dir);
    char pp[16], tp[16], cert[160], key[160], ca[160];
    snprintf(pp, sizeof pp, "%d", jrt_free_port());
    snprintf(tp, sizeof tp, "%d", jrt_free_port());
    snprintf(cert, sizeof cert, "%s/server.crt", r->dir);
    snprintf(key, sizeof key, "%s/server.key", r->dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", r->dir);
    const char *extra[] = {"--port", pp, "--bind", "127.0.0.1", "--tls-port", tp, "--tls-cert-file", cert,
                           "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", auth_clients,
                           NULL};
    redis_launch(r, extra);
    snprintf(plain_url, 64, "redis://127.0.0.1:%s", pp);
    snprintf(tls_url, 64, "rediss://127.0.0.1:%s", tp);
}

/* ---- Redis Cluster ------------------------------------------------------ */

/* A free port p in 20000..22767 that is not one of the first upto nodes'
 * of c, and with bus, p + 10000 (its cluster bus) free too: both below the
 * kernel's own ports (see jrt_free_port). */
static int cluster_port(const jrt_cluster_t *c, int upto, int bus) {
    for (int tries = 0; tries < 2000; tries++) {
        int p = random_port(20000, 2768u);
        int taken = 0;
        for (int i = 0; i < upto; i++) taken |= c->port[i] == p || c->tls_port[i] == p;
        if (!taken && port_free(p) && (!bus || port_free(p + 10000))) return p;
    }
    cr_assert_fail("no free port%s for a cluster node", bus ? " pair" : "");
    return -1;
}

static void cluster_launch(jrt_cluster_t *c, int i) {
    char port[16], dir[96], log[128], nodes[32];
    snprintf(port, sizeof port, "%d", c->port[i]);
    snprintf(dir, sizeof dir, "%s/n%d", c->dir, i);
    mkdir(dir, 0700);
    snprintf(log, sizeof log, "%s/redis.log", dir);
    snprintf(nodes, sizeof nodes, "nodes-%d.conf", c->port[i]);
    const char *argv[64] = {JRT_REDIS_SERVER, "--port", port, "--bind", "127.0.0.1", "--dir", dir,
                            "--cluster-enabled", "yes", "--cluster-config-file", nodes,
                            "--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no"};
    size_t n = 17;
    char tport[16], cert[160], key[160];
    if (c->tls) {
        snprintf(tport, sizeof tport, "%d", c->tls_port[i]);
        snprintf(cert, sizeof cert, "%s/server.crt", c->dir);
        snprintf(key, sizeof key, "%s/server.key", c->dir);
        const char *t[] = {"--tls-port", tport, "--tls-cluster", "yes", "--tls-replication", "yes",
                           "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", c->ca,
                           "--tls-auth-clients", "no"};
        for (size_t k = 0; k < sizeof t / sizeof *t; k++) argv[n++] = t[k];
    }
    for (size_t k = 0; c->extra && c->extra[k] && n < 62; k++) argv[n++] = c->extra[k];
    argv[n] = NULL;
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    c->pid[i] = start(JRT_REDIS_SERVER, argv, fd, fd);
    close(fd);
    if (wait_ping(NULL, c->port[i])) return;
    cr_assert_fail("cluster node %d did not start (see %s)", i, log);
}

static void cluster_start(jrt_cluster_t *c, int primaries, int replicas_each, const char *const *extra, int tls) {
    memset(c, 0, sizeof *c);
    c->primaries = primaries, c->n = primaries * (1 + replicas_each), c->extra = extra, c->tls = tls;
    cr_assert(primaries >= 1 && c->n <= JRT_CLUSTER_MAX, "a cluster of %d nodes", c->n);
    snprintf(c->dir, sizeof c->dir, "/tmp/jrc.XXXXXX");
    cr_assert(mkdtemp(c->dir), "mkdtemp: %s", strerror(errno));
    if (tls) {
        make_certs(c->dir);
        snprintf(c->ca, sizeof c->ca, "%s/ca.crt", c->dir);
    }
    char cmd[2048];
    /* Over TLS the nodes meet on their TLS ports (the bus is TLS port + 10000). */
    size_t off = (size_t)snprintf(cmd, sizeof cmd, "%s%s%s --cluster create", JRT_REDIS_CLI,
                                  tls ? " --tls --cacert " : "", tls ? c->ca : "");
    size_t u = (size_t)snprintf(c->url, sizeof c->url, "redis-cluster://");
    size_t tu = (size_t)snprintf(c->tls_url, sizeof c->tls_url, "rediss-cluster://");
    for (int i = 0; i < c->n; i++) {
        if (tls) { /* its TLS port with the bus beside it; the plain port needs no bus */
            c->tls_port[i] = cluster_port(c, i, 1);
            c->port[i] = cluster_port(c, i + 1, 0);
        } else {
            c->port[i] = cluster_port(c, i, 1);
        }
        cluster_launch(c, i);
        off += (size_t)snprintf(cmd + off, sizeof cmd - off, " 127.0.0.1:%d", tls ? c->tls_port[i] : c->port[i]);
        u += (size_t)snprintf(c->url + u, sizeof c->url - u, "%s127.0.0.1:%d", i ? "," : "", c->port[i]);
        if (tls)
            tu += (size_t)snprintf(c->tls_url + tu, sizeof c->tls_url - tu, "%s127.0.0.1:%d", i ? "," : "",
                                   c->tls_port[i]);
    }
    snprintf(cmd + off, sizeof cmd - off, " --cluster-replicas %d --cluster-yes >'%s/create.log' 2>&1", replicas_each,
             c->dir);
    if (system(cmd) != 0) {
        char log[128];
        snprintf(log, sizeof log, "%s/create.log", c->dir);
        char *text = jrt_slurp(log);
        cr_assert_fail("redis-cli --cluster create failed:\n%s", text ? text : "(no log)");
    }
    cr_assert(jrt_cluster_wait_ok(c, 30000), "the cluster did not settle (logs in %s)", c->dir);
}

void jrt_cluster_start(jrt_cluster_t *c, int primaries, int replicas_each, const char *const *extra) {
    cluster_start(c, primaries, replicas_each, extra, 0);
}

void jrt_cluster_view(const jrt_cluster_t *c, jrt_redis_t *v) {
    memset(v, 0, sizeof *v);
    snprintf(v->dir, sizeof v->dir, "%s", c->dir);
    snprintf(v->url, sizeof v->url, "%s", c->tls ? c->tls_url : c->url);
}

void jrt_cluster_start_tls(jrt_cluster_t *c, int primaries, int replicas_each, const char *const *extra) {
    cluster_start(c, primaries, replicas_each, extra, 1);
}

void jrt_cluster_stop(jrt_cluster_t *c) {
    for (int i = 0; i < c->n; i++) {
        if (c->pid[i] > 0) jrt_stop(c->pid[i], SIGTERM, 5000);
        c->pid[i] = 0;
    }
    if (c->dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
        if (system(cmd) != 0) {
        }
        c->dir[0] = '\0';
    }
}

void jrt_cluster_kill(jrt_cluster_t *c, int i) {
    if (c->pid[i] > 0) jrt_stop(c->pid[i], SIGKILL, 5000);
    c->pid[i] = 0;
}

void jrt_cluster_restart(jrt_cluster_t *c, int i) {
    jrt_cluster_kill(c, i);
    cluster_launch(c, i);
}

redisContext *jrt_cluster_connect(const jrt_cluster_t *c, int i) {
    struct timeval tv = {5, 0};
    redisContext *x = redisConnectWithTimeout("127.0.0.1", c->port[i], tv);
    cr_assert(x && !x->err, "connect to cluster node %d (port %d): %s", i, c->port[i], x ? x->errstr : "out of memory");
    redisSetTimeout(x, tv);
    return x;
}

static int node_index(const jrt_cluster_t *c, long long port) {
    for (int i = 0; i < c->n; i++)
        if (c->port[i] == port) return i;
    return -1;
}

int jrt_cluster_primary_of(const jrt_cluster_t *c, int ask, const char *key) {
    redisContext *x = jrt_cluster_connect(c, ask);
    redisReply *s = redisCommand(x, "CLUSTER KEYSLOT %s", key);
    long long slot = s && s->type == REDIS_REPLY_INTEGER ? s->integer : -1;
    if (s) freeReplyObject(s);
    int found = -1;
    redisReply *m = slot >= 0 ? redisCommand(x, "CLUSTER SLOTS") : NULL;
    for (size_t r = 0; m && m->type == REDIS_REPLY_ARRAY && r < m->elements && found < 0; r++) {
        redisReply *e = m->element[r];
        if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 && e->element[0]->integer <= slot &&
            slot <= e->element[1]->integer && e->element[2]->elements >= 2)
            found = node_index(c, e->element[2]->element[1]->integer);
    }
    if (m) freeReplyObject(m);
    redisFree(x);
    return found;
}

/* The slot map as node i sees it ("start-end:port ..." sorted by start),
 * and whether it is in a settled state (cluster_state:ok, and a replica's
 * link to its primary up). "" if unreachable or unsettled. */
static void node_view(const jrt_cluster_t *c, int i, char *out, size_t len) {
    out[0] = '\0';
    struct timeval tv = {1, 0};
    redisContext *x = redisConnectWithTimeout("127.0.0.1", c->port[i], tv);
    if (!x || x->err) {
        if (x) redisFree(x);
        return;
    }
    redisSetTimeout(x, tv);
    redisReply *info = redisCommand(x, "CLUSTER INFO");
    int ok = info && info->type == REDIS_REPLY_STRING && strstr(info->str, "cluster_state:ok");
    if (info) freeReplyObject(info);
    redisReply *repl = ok ? redisCommand(x, "INFO replication") : NULL;
    if (repl && repl->type == REDIS_REPLY_STRING && strstr(repl->str, "role:slave") &&
        (!strstr(repl->str, "master_link_status:up") || !strstr(repl->str, "master_sync_in_progress:0")))
        ok = 0;
    if (repl) freeReplyObject(repl);
    redisReply *m = ok ? redisCommand(x, "CLUSTER SLOTS") : NULL;
    if (m && m->type == REDIS_REPLY_ARRAY) {
        long long starts[64], ports[64], ends[64];
        size_t k = 0;
        for (size_t r = 0; r < m->elements && k < 64; r++) {
            redisReply *e = m->element[r];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
            starts[k] = e->element[0]->integer, ends[k] = e->element[1]->integer;
            ports[k++] = e->element[2]->elements >= 2 ? e->element[2]->element[1]->integer : -1;
        }
        for (size_t a = 0; a < k; a++) /* sort by start (few rows) */
            for (size_t b = a + 1; b < k; b++)
                if (starts[b] < starts[a]) {
                    long long t = starts[a]; starts[a] = starts[b]; starts[b] = t;
                    t = ends[a]; ends[a] = ends[b]; ends[b] = t;
                    t = ports[a]; ports[a] = ports[b]; ports[b] = t;
                }
        size_t off = 0;
        long long covered = 0;
        for (size_t a = 0; a < k && off < len; a++) {
            off += (size_t)snprintf(out + off, len - off, "%lld-%lld:%lld ", starts[a], ends[a], ports[a]);
            covered += ends[a] - starts[a] + 1;
        }
        if (covered != 16384) out[0] = '\0';
    }
    if (m) freeReplyObject(m);
    redisFree(x);
}

int jrt_cluster_wait_ok(const jrt_cluster_t *c, int timeout_ms) {
    for (int waited = 0; waited <= timeout_ms; waited += 100) {
        char first[4096] = "", view[4096];
        int agree = 1, live = 0;
        for (int i = 0; i < c->n && agree; i++) {
            if (c->pid[i] <= 0) continue;
            node_view(c, i, view, sizeof view);
            if (!view[0] || (live && strcmp(view, first) != 0)) agree = 0;
            if (!live++) snprintf(first, sizeof first, "%s", view);
        }
        if (agree && live) return 1;
        jrt_sleep_ms(100);
    }
    return 0;
}
