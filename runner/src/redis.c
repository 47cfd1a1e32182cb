/* The Redis layer: see redis.h. */
#include "redis_internal.h"

#include <hiredis/sds.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "contract.h"
#include "jr.h"
#include "jr_limits.h"
#include "sentinel.h"
#include "tls.h"
#include "util.h"

extern const char jr_lua_library[];
extern const size_t jr_lua_library_len;

/* The commands called on line `line` (1 = the first) of the embedded
 * function library, as ACL names ('xadd', 'xgroup|create'), joined by
 * "', '" into out ("" if that line calls none by a literal name). */
static void library_line_commands(long line, char *out, size_t len) {
    out[0] = '\0';
    const char *p = jr_lua_library, *end = jr_lua_library + jr_lua_library_len;
    for (long n = 1; n < line && p < end; n++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    const char *eol = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
    if (!eol) eol = end;
    for (const char *q = p; q < eol && (q = memmem(q, (size_t)(eol - q), "call('", 6)); q += 6) {
        char name[64];
        size_t k = 0;
        const char *c = q + 6;
        while (c < eol && *c >= 'A' && *c <= 'Z' && k < 30) name[k++] = (char)(*c++ - 'A' + 'a');
        if (k == 0 || c >= eol || *c != '\'') continue;
        /* A container command's subcommand: XGROUP CREATE is 'xgroup|create'. */
        if (!strncmp(c, "', '", 4) && c[4] >= 'A' && c[4] <= 'Z') {
            const char *s = c + 4;
            size_t k0 = k;
            name[k++] = '|';
            while (s < eol && *s >= 'A' && *s <= 'Z' && k < 62) name[k++] = (char)(*s++ - 'A' + 'a');
            if (s >= eol || *s != '\'') k = k0;
        }
        name[k] = '\0';
        if (strstr(out, name)) continue;
        size_t used = strlen(out);
        snprintf(out + used, len - used, "%s%s", used ? "', '" : "", name);
    }
}

/* What loading the function library sends (docs/operations.md). */
#define LOAD_COMMANDS "+function|load +set +pttl +watch +unwatch +multi +exec +discard +eval +get +del"

/* Append to buf (a reply's text, or a message quoting one), once, when it
 * holds an ACL refusal: what was refused, to which role, and what to grant,
 * e.g. " (Redis refused the 'xack' command inside function jr_ack to the
 * worker role's user: the worker role needs +xack: see docs/operations.md,
 * ACL users per role)". Redis 7.0 names the command of a refusal of a
 * command sent ("NOPERM this user has no permissions to run the 'xadd'
 * command") but not of one a function calls ("ERR The user executing the
 * script can't run this command or subcommand script: jr_ack, on
 * @user_function:512."): that one is read from that line of the embedded
 * library when it is the library Redis runs (a newer revision kept: the
 * line is named instead). Nothing is appended to other text, nor when buf
 * is full. */
void jri_explain(const jr_redis_t *r, char *buf, size_t len) {
    const char *e = buf, *what = NULL, *fn = NULL;
    char cmd[160] = "", grant[400] = "", func[80] = "";
    const char *m;
    if (strstr(e, "ACL users per role)")) return; /* explained already (a message quoting one) */
    if ((m = strstr(e, "NOPERM this user has no permissions to run the '"))) {
        m += strlen("NOPERM this user has no permissions to run the '");
        const char *q = strchr(m, '\'');
        snprintf(cmd, sizeof cmd, "%.*s", q ? (int)(q - m) : 0, m);
        what = "command";
    } else if (strstr(e, "NOPERM this user has no permissions to access one of the keys") ||
               strstr(e, "can't access at least one of the keys")) {
        what = "keys";
    } else if (strstr(e, "NOPERM this user has no permissions to access one of the channels") ||
               strstr(e, "can't publish to the channel")) {
        what = "channels";
    } else if ((m = strstr(e, "The user executing the script can't run this command"))) {
        what = "command";
        /* A refusal the library caught and quoted names the command:
         * "jr_enqueue_many: XADD to "jr:{q}:ready" failed: "ERR The user ..."". */
        const char *to = strstr(e, " to \"");
        if (to && to < m) {
            const char *w = to;
            while (w > e && w[-1] >= 'A' && w[-1] <= 'Z') w--;
            if (to - w >= 2 && to - w < 30 && (w == e || w[-1] == ' ')) {
                size_t k = 0;
                for (; w < to; w++) cmd[k++] = (char)(*w - 'A' + 'a');
                cmd[k] = '\0';
            }
        }
    } else {
        return;
    }
    if ((m = strstr(e, "script: "))) { /* "script: jr_ack, on @user_function:512." */
        m += 8;
        size_t n = strcspn(m, ", ");
        snprintf(func, sizeof func, "%.*s", (int)(n < 64 ? n : 64), m);
        fn = func;
        const char *at = strstr(m, "@user_function:");
        if (!cmd[0] && at && !strcmp(what, "command")) {
            long line = strtol(at + 15, NULL, 10);
            if (!r->library_kept) library_line_commands(line, cmd, sizeof cmd);
            if (!cmd[0]) snprintf(cmd, sizeof cmd, "command on line %ld of the function library", line);
        }
    }
    char who[48], user[64];
    if (r->role[0]) {
        snprintf(who, sizeof who, "the %s role", r->role);
        snprintf(user, sizeof user, " to the %s role's user", r->role);
    } else {
        snprintf(who, sizeof who, "this user");
        user[0] = '\0';
    }
    char refused[300];
    int named = cmd[0] && strncmp(cmd, "command on line", 15), several = named && strchr(cmd, ',');
    if (!strcmp(what, "command"))
        snprintf(refused, sizeof refused, "Redis refused %s%s%s%s%s", named ? "the '" : "a ", cmd[0] ? cmd : "command",
                 named ? (several ? "' commands" : "' command") : "", fn ? " inside function " : "", fn ? fn : "");
    else
        snprintf(refused, sizeof refused, "Redis refused %s%s%s", !strcmp(what, "keys") ? "a key" : "a channel",
                 fn ? " inside function " : "", fn ? fn : "");
    if (!strcmp(what, "keys"))
        snprintf(grant, sizeof grant, "%s needs ~jr:*", who);
    else if (!strcmp(what, "channels"))
        snprintf(grant, sizeof grant, "%s needs no channel: its user was given one it may not use", who);
    else if (r->loading || (named && !strcmp(cmd, "function|load")))
        snprintf(grant, sizeof grant,
                 "%s may not load the function library (missing or older in Redis): load it with the admin user "
                 "(jobrunner functions load), or grant " LOAD_COMMANDS,
                 who);
    else if (several)
        snprintf(grant, sizeof grant, "%s needs each of '%s'", who, cmd);
    else if (named)
        snprintf(grant, sizeof grant, "%s needs +%s", who, cmd);
    else
        snprintf(grant, sizeof grant, "%s needs every command of its list", who);
    size_t used = strlen(buf);
    if (used + 1 < len)
        snprintf(buf + used, len - used, " (%s%s: %s: see docs/operations.md, ACL users per role)", refused, user,
                 grant);
}

int jri_fail(jr_redis_t *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int jri_fail(jr_redis_t *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    if (code == JR_EREDIS) jri_explain(r, r->err, sizeof r->err);
    if (code != JR_EREDIS) r->broken = 1; /* an error reply leaves the connection usable */
    return code;
}

int jri_invalid(jr_redis_t *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return JR_EINVAL;
}

static int transport_fail(jr_redis_t *r) {
    return jri_fail(r, JR_EIO, "Redis connection: %s", r->c->errstr[0] ? r->c->errstr : "closed");
}

const char *jr_redis_errstr(const jr_redis_t *r) { return r->err; }
int jr_redis_ok(const jr_redis_t *r) { return r && !r->broken && (r->cl || (r->c && !r->c->err)); }

/* Wait for fd readable (or extra_fd), up to timeout_us (-1 = forever). */
static int poll_fd(int fd, int extra_fd, int64_t timeout_us) {
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = extra_fd, .events = POLLIN}};
    struct timespec ts, *tsp = NULL;
    if (timeout_us >= 0) {
        ts.tv_sec = timeout_us / 1000000;
        ts.tv_nsec = (timeout_us % 1000000) * 1000;
        tsp = &ts;
    }
    for (;;) {
        int n = ppoll(p, extra_fd >= 0 ? 2 : 1, tsp, NULL);
        if (n < 0 && errno == EINTR) {
            if (extra_fd >= 0) return JR_WAIT_EXTRA; /* a signal: let the caller look */
            continue;
        }
        if (n < 0) return JR_EIO;
        if (n == 0) return JR_WAIT_TIMEOUT;
        if (extra_fd >= 0 && (p[1].revents & POLLIN)) return JR_WAIT_EXTRA;
        return JR_WAIT_READY;
    }
}

/* Read what the sentinels sent on r's subscription: a +switch-master of
 * r's master breaks r (JR_EIO: the caller reconnects, through the
 * sentinels, to the new primary). Even one naming r's primary: the
 * sentinel that led a failover announces it last, maybe to a connection
 * made to the new primary already, and that message woke a caller polling
 * jr_redis_fd, who now reads a reply that is not there (reconnecting costs
 * less than waiting for it). A broken subscription is dropped (a failover
 * is then followed on a broken connection or a READONLY reply). Returns 0
 * or JR_EIO. */
static int sub_event(jr_redis_t *r) {
    char to[300];
    int s = jr_sentinel_sub_read(r->sub, r->master, to, sizeof to);
    if (s < 0) {
        jr_sentinel_sub_free(r->sub);
        r->sub = NULL;
    }
    if (s == 1 && strcmp(to, r->primary) != 0)
        return jri_fail(r, JR_EIO, "the sentinels moved master %s from %s to %s (+switch-master)", r->master,
                        r->primary, to);
    if (s == 1)
        return jri_fail(r, JR_EIO, "a sentinel announced master %s at %s again (+switch-master): reconnecting",
                        r->master, to);
    return 0;
}

/* poll_fd on r's socket that also hears r's sentinels (sub_event): a switch
 * of r's master returns JR_EIO with r broken; any other message waits on,
 * until the same deadline. */
static int wait_fd(jr_redis_t *r, int extra_fd, int64_t timeout_us) {
    if (!r->sub) return poll_fd(r->c->fd, extra_fd, timeout_us);
    int64_t deadline = timeout_us < 0 ? -1 : jr_mono_us() + timeout_us;
    for (;;) {
        int64_t left = deadline < 0 ? -1 : deadline - jr_mono_us();
        if (deadline >= 0 && left < 0) left = 0;
        struct pollfd p[3] = {{.fd = r->c->fd, .events = POLLIN},
                              {.fd = jr_sentinel_sub_fd(r->sub), .events = POLLIN},
                              {.fd = extra_fd, .events = POLLIN}};
        struct timespec ts = {(time_t)(left / 1000000), (long)(left % 1000000) * 1000};
        int n = ppoll(p, extra_fd >= 0 ? 3 : 2, left < 0 ? NULL : &ts, NULL);
        if (n < 0 && errno == EINTR) {
            if (extra_fd >= 0) return JR_WAIT_EXTRA;
            continue;
        }
        if (n < 0) return JR_EIO;
        if (n == 0) return JR_WAIT_TIMEOUT;
        if (p[1].revents && sub_event(r)) return JR_EIO;
        if (extra_fd >= 0 && (p[2].revents & POLLIN)) return JR_WAIT_EXTRA;
        if (p[0].revents) return JR_WAIT_READY;
        if (!r->sub) return poll_fd(r->c->fd, extra_fd, deadline < 0 ? -1 : deadline - jr_mono_us());
    }
}

/* TLS (tls.h): feed the reader what the socket holds, decrypted, while
 * OpenSSL holds more (so that poll() on the socket stays true). *fed: the
 * bytes fed (0: a record not complete yet, or one without data). */
static int tls_feed(jr_redis_t *r, size_t *fed) {
    char buf[16 * 1024], why[JR_ERRLEN]; /* a TLS record's most */
    *fed = 0;
    do {
        ssize_t n = jr_tls_read(r->tls, buf, sizeof buf, why, sizeof why);
        if (n < 0) return jri_fail(r, JR_EIO, "Redis connection: %s", why);
        if (n == 0) break;
        if (redisReaderFeed(r->c->reader, buf, (size_t)n) != REDIS_OK) return transport_fail(r);
        *fed += (size_t)n;
    } while (jr_tls_pending(r->tls) > 0);
    return 0;
}

/* jr_redis_wait for TLS: the socket readable with no data decrypted (a
 * record not complete, a TLS message of its own) is waited on further, so
 * JR_WAIT_READY means bytes of a reply came. The sentinels are heard
 * meanwhile (wait_fd). */
static int tls_wait(jr_redis_t *r, int64_t timeout_us, int extra_fd) {
    int64_t deadline = timeout_us < 0 ? -1 : jr_mono_us() + timeout_us;
    for (;;) {
        int64_t left = deadline < 0 ? -1 : deadline - jr_mono_us();
        if (deadline >= 0 && left < 0) left = 0;
        int w = wait_fd(r, extra_fd, left);
        if (w < 0) return r->broken ? w : jri_fail(r, JR_EIO, "poll: %s", strerror(errno));
        if (w != JR_WAIT_READY) return w;
        size_t fed;
        int rc = tls_feed(r, &fed);
        if (rc) return rc;
        if (fed) return JR_WAIT_READY;
        if (left == 0) return JR_WAIT_TIMEOUT;
    }
}

int jr_redis_wait(jr_redis_t *r, int64_t timeout_us, int extra_fd) {
    if (r->cl) return jrc_wait(r, timeout_us, extra_fd);
    if (!jr_redis_ok(r)) return jri_fail(r, JR_EIO, "Redis connection is broken");
    if (r->stash) return JR_WAIT_READY;
    void *rep = NULL;
    if (redisGetReplyFromReader(r->c, &rep) != REDIS_OK) return transport_fail(r);
    if (rep) {
        r->stash = rep;
        return JR_WAIT_READY;
    }
    if (r->tls) return tls_wait(r, timeout_us, extra_fd);
    int w = wait_fd(r, extra_fd, timeout_us);
    if (w < 0) return r->broken ? w : jri_fail(r, JR_EIO, "poll: %s", strerror(errno));
    return w;
}

/* With a subscription to the sentinels, an epoll set of both sockets: a
 * caller that polls it wakes for a reply or for a sentinel's message, and
 * its read (jri_recv_reply) hears the message. */
int jr_redis_fd(const jr_redis_t *r) {
    if (r && r->cl) return jrc_fd(r); /* an epoll set of the node connections */
    return r && r->has_epfd ? r->epfd : r && r->c ? r->c->fd : -1;
}

int jr_redis_has_reply(jr_redis_t *r) {
    if (r->cl) return jrc_has_reply(r);
    if (r->stash) return 1;
    if (!jr_redis_ok(r)) return 0;
    if (r->sub && sub_event(r)) return 1; /* let the caller read, and see the error */
    void *rep = NULL;
    if (redisGetReplyFromReader(r->c, &rep) != REDIS_OK) {
        transport_fail(r);
        return 1; /* let the caller read, and see the error */
    }
    r->stash = rep;
    return rep != NULL;
}

static int recv_reply(jr_redis_t *r, redisReply **out, int64_t timeout_us);

/* Read one reply, waiting at most timeout_us (-1 = forever). A timeout
 * breaks the connection: the reply may still arrive and would be misread. */
int jri_recv_reply(jr_redis_t *r, redisReply **out, int64_t timeout_us) {
    if (r->cl) return jrc_recv(r, out, timeout_us);
    int rc = recv_reply(r, out, timeout_us);
    /* Through the sentinels, a primary that is one no more (READONLY: it
     * was made a replica; MASTERDOWN: a replica lost its primary) breaks
     * the connection, so that the caller reconnects to the new primary; the
     * reply is still the caller's, and so is Redis's text. */
    if (!rc && r->master[0] && (*out)->type == REDIS_REPLY_ERROR &&
        (!strncmp((*out)->str, "READONLY", 8) || !strncmp((*out)->str, "MASTERDOWN", 10)))
        jri_fail(r, JR_EIO, "%s (%s is no primary of master %s now)", (*out)->str, r->primary, r->master);
    return rc;
}

static int recv_reply(jr_redis_t *r, redisReply **out, int64_t timeout_us) {
    *out = NULL;
    if (r->stash) {
        *out = r->stash;
        r->stash = NULL;
        return 0;
    }
    if (!jr_redis_ok(r)) return jri_fail(r, JR_EIO, "Redis connection is broken");
    int64_t deadline = timeout_us < 0 ? -1 : jr_mono_us() + timeout_us;
    for (;;) {
        void *rep = NULL;
        if (redisGetReplyFromReader(r->c, &rep) != REDIS_OK) return transport_fail(r);
        if (rep) {
            *out = rep;
            return 0;
        }
        int64_t left = deadline < 0 ? -1 : deadline - jr_mono_us();
        if (deadline >= 0 && left < 0) left = 0;
        int w = wait_fd(r, -1, left);
        if (w == JR_WAIT_TIMEOUT) return jri_fail(r, JR_ETIMEOUT, "Redis did not answer in time");
        if (w < 0) return r->broken ? w : jri_fail(r, JR_EIO, "poll: %s", strerror(errno));
        if (r->tls) {
            size_t fed;
            int rc = tls_feed(r, &fed);
            if (rc) return rc;
        } else if (redisBufferRead(r->c) != REDIS_OK) {
            return transport_fail(r);
        }
    }
}

int jr_redis_flush(jr_redis_t *r) {
    if (r->cl) return jrc_flush(r);
    if (!jr_redis_ok(r)) return jri_fail(r, JR_EIO, "Redis connection is broken");
    if (r->tls) { /* hiredis formatted into c->obuf (an sds): send it, drop what went */
        while (sdslen(r->c->obuf) > 0) {
            char why[JR_ERRLEN];
            ssize_t n = jr_tls_write(r->tls, r->c->obuf, sdslen(r->c->obuf), why, sizeof why);
            if (n < 0) return jri_fail(r, JR_EIO, "Redis connection: %s", why);
            sdsrange(r->c->obuf, (int)n, -1);
        }
        /* A write that had to read (a renegotiation) may have left data
         * decrypted inside OpenSSL: into the reader, so poll() stays true. */
        size_t fed;
        return jr_tls_pending(r->tls) > 0 ? tls_feed(r, &fed) : 0;
    }
    int done = 0;
    while (!done)
        if (redisBufferWrite(r->c, &done) != REDIS_OK) return transport_fail(r);
    return 0;
}

int jri_append_argv(jr_redis_t *r, int argc, const char **argv, const size_t *lens) {
    if (!jr_redis_ok(r)) return jri_fail(r, JR_EIO, "Redis connection is broken");
    if (r->cl) { /* formatted, then routed by the facade */
        char *cmd;
        int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
        if (n < 0) return jri_fail(r, JR_ENOMEM, "cannot format command");
        int rc = jrc_append(r, cmd, (size_t)n);
        redisFreeCommand(cmd);
        return rc;
    }
    if (redisAppendCommandArgv(r->c, argc, argv, lens) != REDIS_OK)
        return jri_fail(r, JR_ENOMEM, "cannot format command");
    return 0;
}

int jri_append_formatted(jr_redis_t *r, const char *buf, size_t len) {
    if (!jr_redis_ok(r)) return jri_fail(r, JR_EIO, "Redis connection is broken");
    if (r->cl) return jrc_append(r, buf, len);
    if (redisAppendFormattedCommand(r->c, buf, len) != REDIS_OK)
        return jri_fail(r, JR_ENOMEM, "cannot append %zu bytes of commands", len);
    return 0;
}

/* Check a reply for an error reply; frees it and returns JR_EREDIS if so. */
int jri_reply_error(jr_redis_t *r, redisReply *rep) {
    if (rep->type != REDIS_REPLY_ERROR) return 0;
    jri_fail(r, JR_EREDIS, "%s", rep->str);
    freeReplyObject(rep);
    return JR_EREDIS;
}

/* Run one command and return its reply (caller frees), or an error (error
 * replies included: they are freed and reported as JR_EREDIS). */
int jri_exec_argv(jr_redis_t *r, redisReply **out, int argc, const char **argv,
                     const size_t *lens) {
    int rc;
    *out = NULL;
    if ((rc = jri_append_argv(r, argc, argv, lens)) || (rc = jr_redis_flush(r)) ||
        (rc = jri_recv_reply(r, out, r->timeout_us)))
        return rc;
    if ((rc = jri_reply_error(r, *out))) *out = NULL;
    return rc;
}

/* exec_argv for NUL-terminated arguments given inline, ending with NULL:
 * at most JRI_EXEC_MAX of them (a longer call is a programming error,
 * refused with JR_EINVAL rather than cut short). */
int jri_exec(jr_redis_t *r, redisReply **out, ...) {
    const char *argv[JRI_EXEC_MAX];
    int argc = 0;
    va_list ap;
    va_start(ap, out);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL) {
        if (argc == JRI_EXEC_MAX) {
            va_end(ap);
            *out = NULL;
            return jri_fail(r, JR_EINVAL, "internal: %s given more than %d arguments", argv[0], JRI_EXEC_MAX);
        }
        argv[argc++] = a;
    }
    va_end(ap);
    return jri_exec_argv(r, out, argc, argv, NULL);
}

jr_redis_t *jr_redis_connect(const char *url, int64_t timeout_ms, char *err, size_t errlen) {
    jr_redis_opts_t o = {.url = url, .timeout_ms = timeout_ms};
    return jr_redis_open(&o, err, errlen);
}

/* What to add when the first command over a plain TCP connection broke
 * it: a TLS server answers plain bytes with an alert and a close. Not for
 * a primary found through the sentinels (u->master set): no TLS there. */
static const char *plain_hint(int rc, const jr_redis_url_t *u) {
    return rc != JR_EREDIS && !u->is_tls && !u->is_unix && !u->master ? " (if that port takes TLS, use rediss://)"
                                                                      : "";
}

#define PASSWORD_FILE_MAX 4096

/* Read the password file at path into pw (NUL-terminated), without its one
 * trailing newline ("\n" or "\r\n"). Returns 0, or -1 with a message naming
 * the file (never a byte of its content) in err: unreadable, empty, longer
 * than PASSWORD_FILE_MAX bytes, or holding a NUL byte. */
static int read_password_file(const char *path, char *pw, size_t pwlen, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read the Redis password file %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = fread(pw, 1, pwlen - 1, f);
    int bad = ferror(f), more = !bad && fgetc(f) != EOF;
    int e = errno;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "cannot read the Redis password file %s: %s", path, strerror(e));
        return -1;
    }
    if (more) {
        snprintf(err, errlen, "the Redis password file %s is longer than %zu bytes", path, pwlen - 1);
        return -1;
    }
    pw[n] = '\0';
    if (n && pw[n - 1] == '\n') pw[--n] = '\0';
    if (n && pw[n - 1] == '\r') pw[--n] = '\0';
    if (strlen(pw) != n) {
        snprintf(err, errlen, "the Redis password file %s holds a NUL byte", path);
        return -1;
    }
    if (n == 0) {
        snprintf(err, errlen, "the Redis password file %s is empty", path);
        return -1;
    }
    return 0;
}

/* Connect r to the node of u (tcp or unix, not sentinel), over TLS for a
 * rediss:// URL (o->tls), authenticate with password (NULL = none; pw_from:
 * the file it came from, for messages, or NULL) and select the db; `url` is
 * what messages show. 0, or -1 with err set (r->c and r->tls then as far as
 * they got: node_close drops them). */
int jri_node_connect(jr_redis_t *r, const jr_redis_url_t *u, const char *url, const jr_redis_opts_t *o,
                     const char *password, const char *pw_from, char *err, size_t errlen) {
    struct timeval tv = {(time_t)(r->timeout_us / 1000000), (suseconds_t)(r->timeout_us % 1000000)};
    r->c = u->is_unix ? redisConnectUnixWithTimeout(u->path, tv)
                      : redisConnectWithTimeout(u->host, u->port, tv);
    if (!r->c || r->c->err) {
        snprintf(err, errlen, "cannot connect to Redis at %s: %s", url,
                 r->c ? r->c->errstr : "out of memory");
        return -1;
    }
    /* All waiting is done with poll(): no socket timeouts (a timed-out
     * hiredis read would leave the context dead). */
    struct timeval none = {0, 0};
    redisSetTimeout(r->c, none);
    if (u->is_tls) {
        char why[JR_ERRLEN];
        if (!(r->tls = jr_tls_connect(r->c->fd, u->host, &o->tls, r->timeout_us, why, sizeof why))) {
            snprintf(err, errlen, "cannot connect to Redis at %s: TLS: %s", url, why);
            return -1;
        }
    }
    redisReply *rep = NULL;
    if (password) {
        int rc = u->user ? jri_exec(r, &rep, "AUTH", u->user, password, NULL)
                         : jri_exec(r, &rep, "AUTH", password, NULL);
        if (rc == JR_EREDIS && (!strncmp(r->err, "WRONGPASS", 9) || strstr(r->err, "invalid password"))) {
            snprintf(err, errlen, "Redis at %s refused the password%s%s for %s%s%s (%s)", url,
                     pw_from ? " of the file " : "", pw_from ? pw_from : "",
                     u->user ? "user \"" : "the default user", u->user ? u->user : "",
                     u->user ? "\"" : "", r->err);
            return -1;
        }
        if (rc) {
            snprintf(err, errlen, "Redis at %s: AUTH failed: %s%s", url, r->err, plain_hint(rc, u));
            return -1;
        }
        freeReplyObject(rep);
    } else {
        /* Without this, a server that wants a password would be blamed
         * later for whatever command happens to come first. */
        int rc = jri_exec(r, &rep, "PING", NULL);
        if (rc == JR_EREDIS && !strncmp(r->err, "NOAUTH", 6)) {
            snprintf(err, errlen,
                     "Redis at %s requires a password (%s); give it in the URL, e.g. %s, or in a file "
                     "named by redis.password_file",
                     url, r->err,
                     u->is_unix ? "unix://[user]:PASSWORD@/path/to/sock"
                                : "redis://[user]:PASSWORD@host:port");
            return -1;
        }
        if (rc) {
            snprintf(err, errlen, "Redis at %s: PING failed: %s%s", url, r->err, plain_hint(rc, u));
            return -1;
        }
        freeReplyObject(rep);
    }
    if (u->db) {
        char db[16];
        snprintf(db, sizeof db, "%d", u->db);
        if (jri_exec(r, &rep, "SELECT", db, NULL)) {
            snprintf(err, errlen, "Redis at %s: SELECT %s: %s", url, db, r->err);
            return -1;
        }
        freeReplyObject(rep);
    }
    return 0;
}

/* Drop r's node connection (its TLS session first), so that another can be
 * made into r. */
static void node_close(jr_redis_t *r) {
    jr_tls_free(r->tls); /* before its socket closes with the context */
    r->tls = NULL;
    if (r->c) redisFree(r->c);
    r->c = NULL, r->broken = 0;
}

static void (*failover_hook)(const char *master, const char *from, const char *to);
void jr_redis_on_failover(void (*fn)(const char *master, const char *from, const char *to)) { failover_hook = fn; }

/* "master", "slave" or "sentinel" from ROLE into role; "" when Redis
 * refused the command (an ACL without it: READONLY then tells). */
static int node_role(jr_redis_t *r, char *role, size_t len) {
    redisReply *rep;
    role[0] = '\0';
    int rc = jri_exec(r, &rep, "ROLE", NULL);
    if (rc == JR_EREDIS && jr_redis_ok(r)) return 0;
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0) jri_copy_str(role, len, rep->element[0]);
    freeReplyObject(rep);
    return 0;
}

/* Connect r to the primary of u's master, as its sentinels name it, and
 * check it is one (ROLE): a sentinel that has not seen a failover yet may
 * name the demoted one; then the sentinels are asked again (the next one
 * first, every 100 ms) until the connect timeout. A primary named that
 * cannot be reached: the next sentinels are asked (one cut off from the
 * others may name a dead primary), once each, while the connect timeout
 * since the first question has not passed. Subscribes to the
 * sentinels' +switch-master (see wait_fd) and reports a primary other than
 * the one this process connected to last (jr_redis_on_failover). 0, or -1
 * with err naming the URL and what each sentinel said. */
static int sentinel_connect(jr_redis_t *r, const jr_redis_url_t *u, const jr_redis_opts_t *o, const char *url,
                            const char *password, const char *pw_from, char *err, size_t errlen) {
    int64_t timeout_ms = r->timeout_us / 1000, give_up = jr_mono_us() + r->timeout_us;
    size_t first = 0, which = 0, unreachable = 0;
    char addr[300];
    for (;;) {
        char host[256], why[JR_ERRLEN], shown[JR_ERRLEN + 320], role[32];
        int port = 0;
        if (jr_sentinel_ask(u, o->sentinel_password, timeout_ms, first, host, sizeof host, &port, &which, why,
                            sizeof why)) {
            snprintf(err, errlen, "cannot find the primary of %s: %s", url, why);
            return -1;
        }
        jr_sentinel_addr_format(host, port, addr, sizeof addr);
        snprintf(shown, sizeof shown, "%s (primary %s)", url, addr);
        jr_redis_url_t node = *u;
        node.is_sentinel = 0, node.host = host, node.port = port;
        if (jri_node_connect(r, &node, shown, o, password, pw_from, err, errlen)) {
            if (++unreachable >= u->nsentinels || jr_mono_us() >= give_up) return -1;
            node_close(r);
            first = (which + 1) % u->nsentinels;
            continue;
        }
        int rc = node_role(r, role, sizeof role);
        if (rc) {
            snprintf(err, errlen, "Redis at %s: ROLE: %s", shown, r->err);
            return -1;
        }
        if (!role[0] || !strcmp(role, "master")) break;
        node_close(r);
        if (jr_mono_us() >= give_up) {
            snprintf(err, errlen, "Redis at %s: the sentinels name %s the primary of master %s, but it is a %s",
                     url, addr, u->master, role);
            return -1;
        }
        first = (which + 1) % u->nsentinels;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    snprintf(r->master, sizeof r->master, "%s", u->master);
    snprintf(r->primary, sizeof r->primary, "%s", addr);
    char from[300];
    if (jr_sentinel_note_primary(u->master, addr, from, sizeof from) && failover_hook)
        failover_hook(u->master, from, addr);
    if ((r->sub = jr_sentinel_subscribe(u, which, o->sentinel_password, timeout_ms))) {
        r->epfd = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev1 = {.events = EPOLLIN, .data.fd = r->c->fd};
        struct epoll_event ev2 = {.events = EPOLLIN, .data.fd = jr_sentinel_sub_fd(r->sub)};
        r->has_epfd = r->epfd >= 0 && epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->c->fd, &ev1) == 0 &&
                      epoll_ctl(r->epfd, EPOLL_CTL_ADD, ev2.data.fd, &ev2) == 0;
        if (!r->has_epfd && r->epfd >= 0) close(r->epfd);
    }
    return 0;
}

jr_redis_t *jr_redis_open(const jr_redis_opts_t *o, char *err, size_t errlen) {
    const char *url = o->url ? o->url : JR_DEFAULT_REDIS_URL;
    int64_t timeout_ms = o->timeout_ms;
    jr_redis_url_t u;
    if (jr_redis_url_parse(url, &u, err, errlen) != 0) return NULL;
    char shown[512];
    jr_redis_url_redact(url, shown, sizeof shown);
    url = shown; /* only ever shown from here on */
    /* The password: from one place only, so that a rotated file is never
     * silently overruled by a password left in the URL. */
    char file_pw[PASSWORD_FILE_MAX + 1];
    const char *pw_from = NULL; /* where a password apart from the URL came from, for messages */
    if (o->password_file && o->password) {
        snprintf(err, errlen, "a Redis password given twice: in a password file (%s) and apart from it; give one",
                 o->password_file);
        jr_redis_url_free(&u);
        return NULL;
    }
    if ((o->password_file || o->password) && u.password) {
        snprintf(err, errlen, "a Redis password given twice: in the URL %s and %s%s; give one", url,
                 o->password_file ? "in the password file " : "apart from it",
                 o->password_file ? o->password_file : "");
        jr_redis_url_free(&u);
        return NULL;
    }
    const char *password = u.password;
    if (o->password_file) {
        if (read_password_file(o->password_file, file_pw, sizeof file_pw, err, errlen)) {
            jr_redis_url_free(&u);
            return NULL;
        }
        password = file_pw, pw_from = o->password_file;
    } else if (o->password) {
        password = o->password;
    }
    if (u.user && !password) {
        snprintf(err, errlen,
                 "user \"%s\" without a password in redis URL %s (give it in the URL or in a file named by "
                 "redis.password_file)",
                 u.user, url);
        jr_redis_url_free(&u);
        return NULL;
    }
    jr_redis_t *r = calloc(1, sizeof *r);
    if (!r) {
        jr_redis_url_free(&u);
        explicit_bzero(file_pw, sizeof file_pw);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (o->role) snprintf(r->role, sizeof r->role, "%s", o->role);
    r->timeout_us = (timeout_ms > 0 ? timeout_ms : 2000) * 1000;
    r->wait_replicas = o->wait_replicas > 0 ? o->wait_replicas : 0;
    r->wait_timeout_ms = o->wait_timeout_ms > 0 ? o->wait_timeout_ms : 1000; /* WAIT N 0 would wait forever */
    int rc = u.is_sentinel  ? sentinel_connect(r, &u, o, url, password, pw_from, err, errlen)
             : u.is_cluster ? jrc_open(r, &u, url, o, password, pw_from, err, errlen)
                            : jri_node_connect(r, &u, url, o, password, pw_from, err, errlen);
    jr_redis_url_free(&u);
    explicit_bzero(file_pw, sizeof file_pw);
    if (rc) {
        jr_redis_free(r);
        return NULL;
    }
    return r;
}

void jr_redis_free(jr_redis_t *r) {
    if (!r) return;
    if (r->stash) freeReplyObject(r->stash);
    jr_tls_free(r->tls); /* before its socket closes with the context */
    if (r->c) redisFree(r->c);
    jr_sentinel_sub_free(r->sub);
    if (r->has_epfd) close(r->epfd);
    jrc_free(r->cl);
    for (size_t i = 0; i < r->nregistered; i++) free(r->registered[i]);
    free(r->scratch);
    free(r);
}

void *jri_scratch(jr_redis_t *r, size_t size) {
    if (size <= r->scratch_cap) return r->scratch;
    void *p = malloc(size);
    if (!p) {
        jri_fail(r, JR_ENOMEM, "out of memory (%zu bytes to format a command)", size);
        return NULL;
    }
    free(r->scratch);
    r->scratch = p, r->scratch_cap = size;
    return p;
}

/* 1 if the library Redis has loaded under our name has exactly the embedded
 * code, 0 if it is missing or different; an error if Redis refused to say
 * (before Redis 7.0 there is no FUNCTION command: said so). */
int jr_lua_revision(const char *code, size_t len, long *contract, long *revision) {
    /* Line 2: "-- jobrunner: contract C, revision R." */
    const char *nl = memchr(code, '\n', len);
    if (!nl) return -1;
    size_t off = (size_t)(nl - code) + 1, n = len - off;
    const char *end = memchr(code + off, '\n', n);
    if (end) n = (size_t)(end - (code + off));
    char line[128];
    if (n >= sizeof line) return -1;
    memcpy(line, code + off, n);
    line[n] = '\0';
    long c, rv;
    int used = 0;
    if (sscanf(line, "-- jobrunner: contract %ld, revision %ld.%n", &c, &rv, &used) != 2 || used == 0 ||
        c < 1 || rv < 1)
        return -1;
    *contract = c;
    *revision = rv;
    return 0;
}

/* What Redis holds under the library name jobrunner: 0 none, 1 exactly our
 * code, 2 other code (its contract and revision in *c, *rv; both 0 when its
 * code has no revision line: a build from before revisions). */
static int library_state(jr_redis_t *r, long *c, long *rv) {
    redisReply *rep;
    int rc = jri_exec(r, &rep, "FUNCTION", "LIST", "LIBRARYNAME", "jobrunner", "WITHCODE", NULL);
    if (rc == JR_EREDIS && strstr(r->err, "unknown command"))
        snprintf(r->err + strlen(r->err), sizeof r->err - strlen(r->err),
                 " (jobrunner needs Redis >= 7.0 with Functions)");
    if (rc) return rc;
    int state = 0;
    /* [[library_name, NAME, ..., library_code, CODE], ...]; LIBRARYNAME is a
     * pattern, so check the name too. */
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        const redisReply *lib = rep->element[i];
        const redisReply *name = NULL, *code = NULL;
        for (size_t j = 0; lib->type == REDIS_REPLY_ARRAY && j + 1 < lib->elements; j += 2) {
            const redisReply *k = lib->element[j];
            if (k->type != REDIS_REPLY_STRING && k->type != REDIS_REPLY_STATUS) continue;
            if (!strcmp(k->str, "library_name")) name = lib->element[j + 1];
            if (!strcmp(k->str, "library_code")) code = lib->element[j + 1];
        }
        if (!name || !code || name->type != REDIS_REPLY_STRING || strcmp(name->str, "jobrunner") ||
            code->type != REDIS_REPLY_STRING)
            continue;
        if (code->len == jr_lua_library_len && memcmp(code->str, jr_lua_library, jr_lua_library_len) == 0) {
            state = 1;
        } else {
            state = 2;
            if (jr_lua_revision(code->str, code->len, c, rv) != 0) *c = *rv = 0;
        }
    }
    freeReplyObject(rep);
    return state;
}

/* The lock and fence keys of r (a cluster's node may have its own: cluster.h). */
#define LIB_LOADING(r) ((r)->lib_loading[0] ? (r)->lib_loading : JR_LIB_LOADING_KEY)
#define LIB_FENCE(r) ((r)->lib_fence[0] ? (r)->lib_fence : JR_LIB_FENCE_KEY)
/* The lock JR_LIB_LOADING_KEY (contract.h) is held this long at most. */
#define LIB_LOCK_MS 10000
#define LIB_LOCK_PX "10000"
/* The fence JR_LIB_FENCE_KEY: every load writes it (SET, which no garbage in it can make
 * fail) in the transaction that loads, and a load is sent only in a
 * MULTI/EXEC WATCHing it from before the library was read. */
#define LIB_FENCE_TRIES 100

/* A test hook: with JOBRUNNER_TEST_LIBLOAD_STOP set to a step's name
 * ("locked", "watched", "decided", "queued"), the process stops itself
 * (SIGSTOP) there, so a test can load a newer library meanwhile. */
static void test_stop_at(const char *step) {
    const char *at = getenv("JOBRUNNER_TEST_LIBLOAD_STOP");
    if (at && strcmp(at, step) == 0) raise(SIGSTOP);
}

/* Decide from what Redis holds: 0 nothing to do, 1 load ours (REPLACE),
 * or an error (a newer contract than ours). Records a kept newer revision. */
static int library_decide(jr_redis_t *r, long c, long rv) {
    long oc = 0, orv = 0;
    jr_lua_revision(jr_lua_library, jr_lua_library_len, &oc, &orv);
    if (c > oc)
        return jri_fail(r, JR_EPROTO,
                    "Redis holds the jobrunner function library of contract %ld (revision %ld); this "
                    "jobrunner speaks contract %ld: upgrade this process",
                    c, rv, oc);
    if (c == oc && rv > orv) {
        r->library_kept = rv; /* newer, same contract: it serves us too */
        return 0;
    }
    return 1; /* missing, older, or the same revision with other code (a local build): ours */
}

/* One command whose reply is only checked for an error (freed). */
static int exec_quiet(jr_redis_t *r, int argc, const char **argv, const size_t *lens) {
    redisReply *rep;
    int rc = jri_exec_argv(r, &rep, argc, argv, lens);
    if (rc == 0) freeReplyObject(rep);
    return rc;
}

/* Read what Redis holds, decide, and load ours if it should be: the read
 * and the load in WATCH jr:{lib}:fence ... MULTI FUNCTION LOAD REPLACE, SET
 * jr:{lib}:fence token, EXEC, so a load that another process made after our read
 * (a newer revision, while we stalled with our lock expired) makes our EXEC
 * fail; then we read and decide again. No interleaving of processes that
 * load this way lets an older revision replace a newer one (the lock only
 * spares Redis concurrent loads). Returns 0 or an error. */
static int load_fenced(jr_redis_t *r, const char *token) {
    const char *load[] = {"FUNCTION", "LOAD", "REPLACE", jr_lua_library};
    size_t load_lens[] = {8, 4, 7, jr_lua_library_len};
    const char *watch[] = {"WATCH", LIB_FENCE(r)}, *unwatch[] = {"UNWATCH"}, *multi[] = {"MULTI"},
               *fence[] = {"SET", LIB_FENCE(r), token}, *exec[] = {"EXEC"};
    for (int tries = 0; tries < LIB_FENCE_TRIES; tries++) {
        int rc;
        if ((rc = exec_quiet(r, 2, watch, NULL))) return rc;
        test_stop_at("watched");
        long c = 0, rv = 0;
        rc = library_state(r, &c, &rv);
        int want = rc == 0 ? 1 : rc == 1 ? 0 : rc == 2 ? library_decide(r, c, rv) : rc;
        if (want != 1) { /* there already, a newer one kept, or an error */
            char err[JR_ERRLEN];
            memcpy(err, r->err, sizeof err);
            if (jr_redis_ok(r)) exec_quiet(r, 1, unwatch, NULL);
            memcpy(r->err, err, sizeof err);
            return want < 0 ? want : 0;
        }
        test_stop_at("decided");
        if ((rc = exec_quiet(r, 1, multi, NULL))) return rc;
        if ((rc = exec_quiet(r, 4, load, load_lens)) || (rc = exec_quiet(r, 3, fence, NULL))) {
            /* Refused while queued (e.g. OOM): leave the MULTI behind. */
            const char *discard[] = {"DISCARD"};
            char err[JR_ERRLEN];
            memcpy(err, r->err, sizeof err);
            if (jr_redis_ok(r)) exec_quiet(r, 1, discard, NULL);
            memcpy(r->err, err, sizeof err);
            return rc;
        }
        test_stop_at("queued");
        redisReply *rep;
        if ((rc = jri_exec_argv(r, &rep, 1, exec, NULL))) return rc;
        int aborted = rep->type == REDIS_REPLY_NIL;
        if (!aborted && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
            rep->element[0]->type == REDIS_REPLY_ERROR) {
            rc = jri_fail(r, JR_EREDIS, "FUNCTION LOAD: %s", rep->element[0]->str);
        }
        freeReplyObject(rep);
        if (!aborted) return rc;
    }
    return jri_fail(r, JR_ETIMEOUT,
                    "other processes loaded the function library %d times while this one tried to",
                    LIB_FENCE_TRIES);
}

static int load_library(jr_redis_t *r);
static int load_library_node(jr_redis_t *node, void *arg) {
    (void)arg;
    return load_library(node);
}

/* A cluster: on every primary of its map, each with its own lock and fence
 * keys (cluster.h, jrc_each_primary). */
int jr_redis_load_library(jr_redis_t *r) {
    return r->cl ? jrc_each_primary(r, load_library_node, NULL) : load_library(r);
}

static int load_library(jr_redis_t *r) {
    long c = 0, rv = 0;
    int rc = library_state(r, &c, &rv);
    if (rc < 0) return rc;
    if (rc == 1) return 0; /* already there: no write (works in an out-of-memory Redis) */
    if (rc == 2 && (rc = library_decide(r, c, rv)) <= 0) return rc;
    /* Load under a lock, deciding again inside it (load_fenced: the fence
     * is what keeps an older revision from replacing a newer one, even
     * after our lock expired while we stalled; the lock only spares Redis
     * concurrent loads). The lock expires if its holder dies. */
    char token[64];
    snprintf(token, sizeof token, "%ld-%lld", (long)getpid(), (long long)jr_mono_us());
    r->loading = 1;
    int64_t give_up = jr_mono_us() + (int64_t)(LIB_LOCK_MS + 2000) * 1000;
    for (;;) {
        redisReply *rep;
        if ((rc = jri_exec(r, &rep, "SET", LIB_LOADING(r), token, "NX", "PX", LIB_LOCK_PX, NULL)))
            return r->loading = 0, rc;
        int got = rep->type == REDIS_REPLY_STATUS;
        freeReplyObject(rep);
        if (got) break;
        /* Held. A key without a TTL is no lock of ours (garbage, of any
         * type), and a lock held past its time is a stalled holder: load
         * without it then; the fence keeps that safe. */
        if ((rc = jri_exec(r, &rep, "PTTL", LIB_LOADING(r), NULL))) return r->loading = 0, rc;
        int no_ttl = rep->type == REDIS_REPLY_INTEGER && rep->integer == -1;
        freeReplyObject(rep);
        if (no_ttl || jr_mono_us() > give_up) break;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    test_stop_at("locked");
    rc = load_fenced(r, token);
    r->loading = 0;
    /* Release only our own lock (it may have expired and been taken). */
    static const char release[] =
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
    char err[JR_ERRLEN];
    memcpy(err, r->err, sizeof err);
    redisReply *rep;
    int rrc = jri_exec(r, &rep, "EVAL", release, "1", LIB_LOADING(r), token, NULL);
    if (rrc == 0) freeReplyObject(rep);
    else if (rrc == JR_EREDIS && jri_exec(r, &rep, "GET", LIB_LOADING(r), NULL) == 0) {
        /* A user without EVAL (one that may not load, see docs/operations.md)
         * still leaves no lock behind to hold up the admin's load: GET and
         * DEL are not atomic, but the lock only spares Redis concurrent
         * loads (the fence keeps loads safe). */
        int ours = rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, token);
        freeReplyObject(rep);
        if (ours && jri_exec(r, &rep, "DEL", LIB_LOADING(r), NULL) == 0) freeReplyObject(rep);
    }
    memcpy(r->err, err, sizeof err);
    return rc;
}

long jr_redis_library_kept(const jr_redis_t *r) { return r->library_kept; }

int jr_redis_client_id(jr_redis_t *r, long long *id) {
    redisReply *rep;
    int rc = jri_exec(r, &rep, "CLIENT", "ID", NULL);
    if (rc) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? (*id = rep->integer, 0)
                                          : jri_fail(r, JR_EPROTO, "CLIENT ID: not an integer");
    freeReplyObject(rep);
    return rc;
}

int jr_redis_unblock(jr_redis_t *r, long long client_id) {
    char id[32];
    snprintf(id, sizeof id, "%lld", client_id);
    redisReply *rep;
    int rc = jri_exec(r, &rep, "CLIENT", "UNBLOCK", id, NULL);
    if (!rc) freeReplyObject(rep);
    return rc;
}

static int maxmemory_policy(jr_redis_t *r, char *buf, size_t len) {
    buf[0] = '\0';
    redisReply *rep;
    int rc = jri_exec(r, &rep, "CONFIG", "GET", "maxmemory-policy", NULL);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_STRING)
        snprintf(buf, len, "%s", rep->element[1]->str);
    freeReplyObject(rep);
    return 0;
}

typedef struct {
    char *buf;
    size_t len;
} policy_arg_t;

/* jrc_each_primary's step: the first primary whose policy evicts, named
 * ("allkeys-lru (node HOST:PORT)"), into a->buf; a refused CONFIG GET is
 * skipped (that node is not known to evict). */
static int policy_of_node(jr_redis_t *node, void *arg) {
    policy_arg_t *a = arg;
    if (a->buf[0]) return 0;
    char p[64];
    int rc = maxmemory_policy(node, p, sizeof p);
    if (rc) return rc == JR_EREDIS && jr_redis_ok(node) ? 0 : rc;
    if (p[0] && strcmp(p, "noeviction")) snprintf(a->buf, a->len, "%s (node %s)", p, node->primary);
    return 0;
}

int jr_redis_maxmemory_policy(jr_redis_t *r, char *buf, size_t len) {
    if (!r->cl) return maxmemory_policy(r, buf, len);
    buf[0] = '\0';
    policy_arg_t a = {buf, len};
    return jrc_each_primary(r, policy_of_node, &a);
}

void jr_batch_free(jr_batch_t *b) {
    if (b->reply) freeReplyObject(b->reply);
    for (size_t i = 0; i < b->nmore; i++) freeReplyObject(b->more[i]);
    free(b->more);
    free(b->v);
    free(b->strs);
    free(b->lens);
    memset(b, 0, sizeof *b);
}

/* Grow the batch's arrays to hold `entries` entries and `strs` strings. */
int jri_batch_reserve(jr_batch_t *b, size_t entries, size_t strs) {
    if (entries > b->cap) {
        jr_entry_t *v = realloc(b->v, entries * sizeof *v);
        if (!v) return JR_ENOMEM;
        b->v = v, b->cap = entries;
    }
    if (strs > b->strcap) {
        const char **s = realloc(b->strs, strs * sizeof *s);
        if (!s) return JR_ENOMEM;
        b->strs = s;
        size_t *l = realloc(b->lens, strs * sizeof *l);
        if (!l) return JR_ENOMEM;
        b->lens = l, b->strcap = strs;
    }
    return 0;
}

/* Fill *b from an XREADGROUP-shaped reply [[key, [[id, fields], ...]], ...]
 * that b now owns. With queues (n > 0) each stream's entries get the index
 * of their queue (a stream of no queue is a protocol error); without, every
 * entry gets qi_default. */
/* Count the entries and field strings of an XREADGROUP-shaped reply into
 * *entries and *strs (added); JR_EPROTO if it has another shape. */
int jri_count_streams(jr_redis_t *r, const redisReply *rep, size_t *entries, size_t *strs) {
    if (rep->type == REDIS_REPLY_NIL) return 0;
    if (rep->type != REDIS_REPLY_ARRAY) return jri_fail(r, JR_EPROTO, "stream read: unexpected reply");
    for (size_t s = 0; s < rep->elements; s++) {
        redisReply *st = rep->element[s];
        if (st->type != REDIS_REPLY_ARRAY || st->elements != 2 ||
            st->element[0]->type != REDIS_REPLY_STRING || st->element[1]->type != REDIS_REPLY_ARRAY)
            return jri_fail(r, JR_EPROTO, "stream read: unexpected stream reply");
        for (size_t e = 0; e < st->element[1]->elements; e++) {
            redisReply *en = st->element[1]->element[e];
            (*entries)++;
            if (en->type == REDIS_REPLY_ARRAY && en->elements == 2 &&
                en->element[1]->type == REDIS_REPLY_ARRAY)
                *strs += en->element[1]->elements;
        }
    }
    return 0;
}

int jri_fill_streams(jr_redis_t *r, jr_batch_t *b, redisReply *rep, const char *const *queues,
                        size_t n, uint32_t qi_default);

int jri_parse_streams(jr_redis_t *r, jr_batch_t *b, redisReply *rep, const char *const *queues,
                         size_t n, uint32_t qi_default) {
    b->reply = rep;
    /* Count first, so pointers into the arrays never move while filling. */
    size_t entries = 0, strs = 0;
    int rc = jri_count_streams(r, rep, &entries, &strs);
    if (rc) return rc;
    if (jri_batch_reserve(b, entries, strs)) return jri_fail(r, JR_ENOMEM, "out of memory");
    return jri_fill_streams(r, b, rep, queues, n, qi_default);
}

/* Append the entries of rep (counted and reserved already) to *b. */
int jri_fill_streams(jr_redis_t *r, jr_batch_t *b, redisReply *rep, const char *const *queues,
                        size_t n, uint32_t qi_default) {
    if (rep->type == REDIS_REPLY_NIL) return 0;
    for (size_t s = 0; s < rep->elements; s++) {
        redisReply *st = rep->element[s];
        uint32_t qi = qi_default;
        if (n) {
            size_t i = 0;
            while (i < n && !jr_queue_key_is(st->element[0]->str, queues[i], JR_QK_READY)) i++;
            if (i == n) return jri_fail(r, JR_EPROTO, "stream read: a stream we did not ask for: %s", st->element[0]->str);
            qi = (uint32_t)i;
        }
        for (size_t e = 0; e < st->element[1]->elements; e++) {
            redisReply *en = st->element[1]->element[e];
            /* Before Redis 7, XAUTOCLAIM gave nil for deleted entries. */
            if (en->type == REDIS_REPLY_NIL) continue;
            if (en->type != REDIS_REPLY_ARRAY || en->elements != 2 ||
                en->element[0]->type != REDIS_REPLY_STRING)
                return jri_fail(r, JR_EPROTO, "stream read: unexpected entry");
            jr_entry_t *x = &b->v[b->n++];
            x->queue = qi;
            x->id = en->element[0]->str;
            redisReply *f = en->element[1];
            size_t nf = f->type == REDIS_REPLY_ARRAY ? f->elements : 0;
            const char **s0 = b->strs + b->nstrs;
            size_t *l0 = b->lens + b->nstrs;
            /* names at even slots, values at odd: split into two runs */
            size_t half = nf / 2;
            for (size_t i = 0; i < half * 2; i++) {
                redisReply *fe = f->element[i];
                int str = fe->type == REDIS_REPLY_STRING;
                size_t slot = (i % 2 == 0) ? i / 2 : half + i / 2;
                s0[slot] = str ? fe->str : "";
                l0[slot] = str ? fe->len : 0;
            }
            b->nstrs += half * 2;
            x->nfields = half;
            x->odd = (int)(nf % 2);
            x->names = s0, x->name_lens = l0;
            x->values = s0 + half, x->value_lens = l0 + half;
        }
    }
    return 0;
}

/* Drop what the batch holds from its last fill. */
void jri_batch_reset(jr_batch_t *b) {
    if (b->reply) freeReplyObject(b->reply);
    for (size_t i = 0; i < b->nmore; i++) freeReplyObject(b->more[i]);
    b->reply = NULL, b->n = 0, b->nstrs = 0, b->nmore = 0;
}

int jr_redis_xrange(jr_redis_t *r, const char *key, int64_t count, jr_batch_t *b) {
    return jr_redis_xrange_between(r, key, "-", "+", count, b);
}

/* Make the array of [id, fields] entries `rep` (owned from here on) the
 * contents of *b, as a batch of queue index 0. */
int jri_batch_of_entries(jr_redis_t *r, const char *key, redisReply *rep, jr_batch_t *b) {
    /* Wrap it as [[key, entries]] so one parser serves every stream read. */
    redisReply *outer = calloc(1, sizeof *outer), *pair = calloc(1, sizeof *pair);
    redisReply *name = calloc(1, sizeof *name);
    redisReply **po = malloc(sizeof *po), **pp = malloc(2 * sizeof *pp);
    char *kcopy = strdup(key);
    if (!outer || !pair || !name || !po || !pp || !kcopy) {
        free(outer), free(pair), free(name), free(po), free(pp), free(kcopy);
        freeReplyObject(rep);
        return jri_fail(r, JR_ENOMEM, "out of memory");
    }
    name->type = REDIS_REPLY_STRING, name->str = kcopy, name->len = strlen(kcopy);
    pair->type = REDIS_REPLY_ARRAY, pair->elements = 2, pair->element = pp;
    pp[0] = name, pp[1] = rep;
    outer->type = REDIS_REPLY_ARRAY, outer->elements = 1, outer->element = po;
    po[0] = pair;
    return jri_parse_streams(r, b, outer, NULL, 0, 0);
}

int jr_redis_recv_int(jr_redis_t *r, long long *v) {
    redisReply *rep;
    int rc = jri_recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    if ((rc = jri_reply_error(r, rep))) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? (*v = rep->integer, 0)
                                          : jri_fail(r, JR_EPROTO, "expected an integer reply");
    freeReplyObject(rep);
    return rc;
}

/* Read n pipelined replies; keep the last (caller frees) unless it is NULL.
 * An error reply in any of them is returned as JR_EREDIS (the first one's
 * text), after all n were read. */
int jri_recv_n(jr_redis_t *r, size_t n, redisReply **last) {
    int err = 0;
    if (last) *last = NULL;
    for (size_t i = 0; i < n; i++) {
        redisReply *rep;
        int rc = jri_recv_reply(r, &rep, r->timeout_us);
        if (rc) return rc;
        if (rep->type == REDIS_REPLY_ERROR) {
            if (!err) jri_fail(r, JR_EREDIS, "%s", rep->str);
            err = JR_EREDIS;
        }
        if (i + 1 == n && last && !err) *last = rep;
        else freeReplyObject(rep);
    }
    return err;
}

/* ---- one job by id, and pages of a queue (see docs/redis-contract.md) ---- */

int jr_redis_xrange_between(jr_redis_t *r, const char *key, const char *start, const char *end, int64_t count,
                            jr_batch_t *b) {
    jri_batch_reset(b);
    char cnt[24];
    snprintf(cnt, sizeof cnt, "%lld", (long long)(count > 0 ? count : INT64_MAX / 2));
    redisReply *rep;
    int rc = jri_exec(r, &rep, "XRANGE", key, start, end, "COUNT", cnt, NULL);
    if (rc) return rc;
    return jri_batch_of_entries(r, key, rep, b);
}

void jri_copy_str(char *dst, size_t len, const redisReply *e) {
    snprintf(dst, len, "%.*s", e->type == REDIS_REPLY_STRING ? (int)e->len : 0,
             e->type == REDIS_REPLY_STRING ? e->str : "");
}

/* ---- priorities and pause (see docs/redis-contract.md) -------------------- */

/* Append HMGET JR_PAUSED_KEY <queues...>. */
int jri_append_paused(jr_redis_t *r, const char *const *queues, size_t n) {
    const char **argv = malloc((n + 2) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "HMGET", argv[1] = JR_PAUSED_KEY;
    for (size_t i = 0; i < n; i++) argv[2 + i] = queues[i];
    int rc = jri_append_argv(r, (int)(n + 2), argv, NULL);
    free(argv);
    return rc;
}

/* Read the HMGET reply of append_paused: paused[i] = 1 where queue i has a
 * value. An error reply (the paused set holds another type) is no queue
 * paused: garbage there costs pausing, not the reads of every queue; its
 * text is kept for jr_redis_paused_refused. */
int jri_recv_paused(jr_redis_t *r, size_t n, unsigned char *paused) {
    redisReply *rep;
    int rc = jri_recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR) {
        snprintf(r->paused_err, sizeof r->paused_err, "%s", rep->str);
        jri_explain(r, r->paused_err, sizeof r->paused_err);
        freeReplyObject(rep);
        memset(paused, 0, n);
        return 0;
    }
    r->paused_err[0] = '\0';
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "HMGET %s: unexpected reply", JR_PAUSED_KEY);
    }
    for (size_t i = 0; i < n; i++) paused[i] = rep->element[i]->type != REDIS_REPLY_NIL;
    freeReplyObject(rep);
    return 0;
}

int jr_redis_time_ms(jr_redis_t *r, double *ms) {
    redisReply *rep;
    int rc = jri_exec(r, &rep, "TIME", NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
        rep->element[1]->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "TIME: unexpected reply");
    }
    *ms = strtod(rep->element[0]->str, NULL) * 1000.0 + strtod(rep->element[1]->str, NULL) / 1000.0;
    freeReplyObject(rep);
    return 0;
}

void jr_redis_set_timeout(jr_redis_t *r, int64_t timeout_ms) {
    if (timeout_ms > 0) r->timeout_us = timeout_ms * 1000;
}

int jr_redis_wait_replicas(const jr_redis_t *r) { return r->wait_replicas; }

int jr_redis_is_cluster(const jr_redis_t *r) { return r != NULL && r->cl != NULL; }

int jr_redis_append_wait(jr_redis_t *r) {
    if (r->wait_replicas <= 0) return 0;
    char n[16], ms[24];
    snprintf(n, sizeof n, "%d", r->wait_replicas);
    snprintf(ms, sizeof ms, "%lld", (long long)r->wait_timeout_ms);
    const char *argv[] = {"WAIT", n, ms};
    int rc = jri_append_argv(r, 3, argv, NULL);
    return rc ? rc : 1;
}

int jr_redis_recv_wait(jr_redis_t *r, long long *acked) {
    redisReply *rep;
    int rc = jri_recv_reply(r, &rep, r->timeout_us + r->wait_timeout_ms * 1000);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR) {
        jri_fail(r, JR_EREDIS, "WAIT refused: %s", rep->str);
        freeReplyObject(rep);
        return JR_EREDIS;
    }
    if (rep->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "WAIT: unexpected reply");
    }
    long long k = rep->integer;
    freeReplyObject(rep);
    if (acked) *acked = k;
    if (k >= r->wait_replicas) return 0;
    snprintf(r->err, sizeof r->err, "confirmed by only %lld of %d replica%s within %lld ms", k, r->wait_replicas,
             r->wait_replicas == 1 ? "" : "s", (long long)r->wait_timeout_ms);
    return JR_EREPLICAS;
}
