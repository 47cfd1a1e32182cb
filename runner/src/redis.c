/* The Redis layer: see redis.h. */
#include "redis.h"
#include "followup.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jr.h"
#include "jr_limits.h"
#include "util.h"

extern const char jr_lua_library[];
extern const size_t jr_lua_library_len;

#define REGISTERED_MAX 64

struct jr_redis {
    redisContext *c;
    int64_t timeout_us;   /* bound on each non-blocking command */
    redisReply *stash;    /* a reply already parsed by jr_redis_wait */
    int broken;
    char err[JR_ERRLEN];
    char *registered[REGISTERED_MAX]; /* queues this connection registered */
    size_t nregistered;
    long library_kept;    /* a newer library revision found loaded and kept, 0 = none */
};

static int fail(jr_redis_t *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(jr_redis_t *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    if (code != JR_EREDIS) r->broken = 1; /* an error reply leaves the connection usable */
    return code;
}

static int transport_fail(jr_redis_t *r) {
    return fail(r, JR_EIO, "Redis connection: %s", r->c->errstr[0] ? r->c->errstr : "closed");
}

const char *jr_redis_errstr(const jr_redis_t *r) { return r->err; }
int jr_redis_ok(const jr_redis_t *r) { return r && !r->broken && r->c && !r->c->err; }

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

int jr_redis_wait(jr_redis_t *r, int64_t timeout_us, int extra_fd) {
    if (!jr_redis_ok(r)) return fail(r, JR_EIO, "Redis connection is broken");
    if (r->stash) return JR_WAIT_READY;
    void *rep = NULL;
    if (redisGetReplyFromReader(r->c, &rep) != REDIS_OK) return transport_fail(r);
    if (rep) {
        r->stash = rep;
        return JR_WAIT_READY;
    }
    int w = poll_fd(r->c->fd, extra_fd, timeout_us);
    if (w < 0) return fail(r, JR_EIO, "poll: %s", strerror(errno));
    return w;
}

int jr_redis_fd(const jr_redis_t *r) { return r && r->c ? r->c->fd : -1; }

int jr_redis_has_reply(jr_redis_t *r) {
    if (r->stash) return 1;
    if (!jr_redis_ok(r)) return 0;
    void *rep = NULL;
    if (redisGetReplyFromReader(r->c, &rep) != REDIS_OK) {
        transport_fail(r);
        return 1; /* let the caller read, and see the error */
    }
    r->stash = rep;
    return rep != NULL;
}

/* Read one reply, waiting at most timeout_us (-1 = forever). A timeout
 * breaks the connection: the reply may still arrive and would be misread. */
static int recv_reply(jr_redis_t *r, redisReply **out, int64_t timeout_us) {
    *out = NULL;
    if (r->stash) {
        *out = r->stash;
        r->stash = NULL;
        return 0;
    }
    if (!jr_redis_ok(r)) return fail(r, JR_EIO, "Redis connection is broken");
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
        int w = poll_fd(r->c->fd, -1, left);
        if (w == JR_WAIT_TIMEOUT) return fail(r, JR_ETIMEOUT, "Redis did not answer in time");
        if (w < 0) return fail(r, JR_EIO, "poll: %s", strerror(errno));
        if (redisBufferRead(r->c) != REDIS_OK) return transport_fail(r);
    }
}

int jr_redis_flush(jr_redis_t *r) {
    if (!jr_redis_ok(r)) return fail(r, JR_EIO, "Redis connection is broken");
    int done = 0;
    while (!done)
        if (redisBufferWrite(r->c, &done) != REDIS_OK) return transport_fail(r);
    return 0;
}

static int append_argv(jr_redis_t *r, int argc, const char **argv, const size_t *lens) {
    if (!jr_redis_ok(r)) return fail(r, JR_EIO, "Redis connection is broken");
    if (redisAppendCommandArgv(r->c, argc, argv, lens) != REDIS_OK)
        return fail(r, JR_ENOMEM, "cannot format command");
    return 0;
}

/* Check a reply for an error reply; frees it and returns JR_EREDIS if so. */
static int reply_error(jr_redis_t *r, redisReply *rep) {
    if (rep->type != REDIS_REPLY_ERROR) return 0;
    fail(r, JR_EREDIS, "%s", rep->str);
    freeReplyObject(rep);
    return JR_EREDIS;
}

/* Run one command and return its reply (caller frees), or an error (error
 * replies included: they are freed and reported as JR_EREDIS). */
static int exec_argv(jr_redis_t *r, redisReply **out, int argc, const char **argv,
                     const size_t *lens) {
    int rc;
    *out = NULL;
    if ((rc = append_argv(r, argc, argv, lens)) || (rc = jr_redis_flush(r)) ||
        (rc = recv_reply(r, out, r->timeout_us)))
        return rc;
    if ((rc = reply_error(r, *out))) *out = NULL;
    return rc;
}

/* exec_argv for NUL-terminated arguments given inline, ending with NULL. */
static int exec(jr_redis_t *r, redisReply **out, ...) {
    const char *argv[16];
    int argc = 0;
    va_list ap;
    va_start(ap, out);
    const char *a;
    while (argc < 16 && (a = va_arg(ap, const char *)) != NULL) argv[argc++] = a;
    va_end(ap);
    return exec_argv(r, out, argc, argv, NULL);
}

jr_redis_t *jr_redis_connect(const char *url, int64_t timeout_ms, char *err, size_t errlen) {
    jr_redis_url_t u;
    if (jr_redis_url_parse(url, &u, err, errlen) != 0) return NULL;
    char shown[512];
    jr_redis_url_redact(url, shown, sizeof shown);
    url = shown; /* only ever shown from here on */
    jr_redis_t *r = calloc(1, sizeof *r);
    if (!r) {
        jr_redis_url_free(&u);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->timeout_us = (timeout_ms > 0 ? timeout_ms : 2000) * 1000;
    struct timeval tv = {(time_t)(r->timeout_us / 1000000), (suseconds_t)(r->timeout_us % 1000000)};
    r->c = u.is_unix ? redisConnectUnixWithTimeout(u.path, tv)
                     : redisConnectWithTimeout(u.host, u.port, tv);
    if (!r->c || r->c->err) {
        snprintf(err, errlen, "cannot connect to Redis at %s: %s", url,
                 r->c ? r->c->errstr : "out of memory");
        goto fail;
    }
    /* All waiting is done with poll(): no socket timeouts (a timed-out
     * hiredis read would leave the context dead). */
    struct timeval none = {0, 0};
    redisSetTimeout(r->c, none);
    redisReply *rep = NULL;
    if (u.password) {
        int rc = u.user ? exec(r, &rep, "AUTH", u.user, u.password, NULL)
                        : exec(r, &rep, "AUTH", u.password, NULL);
        if (rc == JR_EREDIS && (!strncmp(r->err, "WRONGPASS", 9) || strstr(r->err, "invalid password"))) {
            snprintf(err, errlen, "Redis at %s refused the password for %s%s%s (%s)", url,
                     u.user ? "user \"" : "the default user", u.user ? u.user : "",
                     u.user ? "\"" : "", r->err);
            goto fail;
        }
        if (rc) {
            snprintf(err, errlen, "Redis at %s: AUTH failed: %s", url, r->err);
            goto fail;
        }
        freeReplyObject(rep);
    } else {
        /* Without this, a server that wants a password would be blamed
         * later for whatever command happens to come first. */
        int rc = exec(r, &rep, "PING", NULL);
        if (rc == JR_EREDIS && !strncmp(r->err, "NOAUTH", 6)) {
            snprintf(err, errlen,
                     "Redis at %s requires a password (%s); give it in the URL, e.g. %s", url,
                     r->err,
                     u.is_unix ? "unix://[user]:PASSWORD@/path/to/sock"
                               : "redis://[user]:PASSWORD@host:port");
            goto fail;
        }
        if (rc) {
            snprintf(err, errlen, "Redis at %s: PING failed: %s", url, r->err);
            goto fail;
        }
        freeReplyObject(rep);
    }
    if (u.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", u.db);
        if (exec(r, &rep, "SELECT", db, NULL)) {
            snprintf(err, errlen, "Redis at %s: SELECT %s: %s", url, db, r->err);
            goto fail;
        }
        freeReplyObject(rep);
    }
    jr_redis_url_free(&u);
    return r;
fail:
    jr_redis_url_free(&u);
    jr_redis_free(r);
    return NULL;
}

void jr_redis_free(jr_redis_t *r) {
    if (!r) return;
    if (r->stash) freeReplyObject(r->stash);
    if (r->c) redisFree(r->c);
    for (size_t i = 0; i < r->nregistered; i++) free(r->registered[i]);
    free(r);
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
    int rc = exec(r, &rep, "FUNCTION", "LIST", "LIBRARYNAME", "jobrunner", "WITHCODE", NULL);
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

#define LIB_LOCK "jr:{lib}:loading"
#define LIB_LOCK_MS 10000
#define LIB_LOCK_PX "10000"

/* Decide from what Redis holds: 0 nothing to do, 1 load ours (REPLACE),
 * or an error (a newer contract than ours). Records a kept newer revision. */
static int library_decide(jr_redis_t *r, long c, long rv) {
    long oc = 0, orv = 0;
    jr_lua_revision(jr_lua_library, jr_lua_library_len, &oc, &orv);
    if (c > oc)
        return fail(r, JR_EPROTO,
                    "Redis holds the jobrunner function library of contract %ld (revision %ld); this "
                    "jobrunner speaks contract %ld: upgrade this process",
                    c, rv, oc);
    if (c == oc && rv > orv) {
        r->library_kept = rv; /* newer, same contract: it serves us too */
        return 0;
    }
    return 1; /* missing, older, or the same revision with other code (a local build): ours */
}

int jr_redis_load_library(jr_redis_t *r) {
    long c = 0, rv = 0;
    int rc = library_state(r, &c, &rv);
    if (rc < 0) return rc;
    if (rc == 1) return 0; /* already there: no write (works in an out-of-memory Redis) */
    if (rc == 2 && (rc = library_decide(r, c, rv)) <= 0) return rc;
    /* Load under a lock, deciding again inside it, so that of two processes
     * of different revisions starting together the older cannot overwrite
     * what the newer just loaded. The lock expires if its holder dies. */
    char token[64];
    snprintf(token, sizeof token, "%ld-%lld", (long)getpid(), (long long)jr_mono_us());
    int64_t give_up = jr_mono_us() + (int64_t)(LIB_LOCK_MS + 2000) * 1000;
    for (;;) {
        redisReply *rep;
        if ((rc = exec(r, &rep, "SET", LIB_LOCK, token, "NX", "PX", LIB_LOCK_PX, NULL)))
            return rc;
        int got = rep->type == REDIS_REPLY_STATUS;
        freeReplyObject(rep);
        if (got) break;
        if (jr_mono_us() > give_up)
            return fail(r, JR_ETIMEOUT, "another process kept the lock " LIB_LOCK " while loading the library");
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    c = rv = 0;
    rc = library_state(r, &c, &rv);
    if (rc == 0 || (rc == 2 && (rc = library_decide(r, c, rv)) == 1)) {
        const char *argv[] = {"FUNCTION", "LOAD", "REPLACE", jr_lua_library};
        size_t lens[] = {8, 4, 7, jr_lua_library_len};
        redisReply *rep;
        if ((rc = exec_argv(r, &rep, 4, argv, lens)) == 0) freeReplyObject(rep);
    } else if (rc == 1) {
        rc = 0;
    }
    /* Release only our own lock (it may have expired and been taken). */
    static const char release[] =
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
    char err[JR_ERRLEN];
    memcpy(err, r->err, sizeof err);
    redisReply *rep;
    if (exec(r, &rep, "EVAL", release, "1", LIB_LOCK, token, NULL) == 0) freeReplyObject(rep);
    memcpy(r->err, err, sizeof err);
    return rc;
}

long jr_redis_library_kept(const jr_redis_t *r) { return r->library_kept; }

int jr_redis_client_id(jr_redis_t *r, long long *id) {
    redisReply *rep;
    int rc = exec(r, &rep, "CLIENT", "ID", NULL);
    if (rc) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? (*id = rep->integer, 0)
                                          : fail(r, JR_EPROTO, "CLIENT ID: not an integer");
    freeReplyObject(rep);
    return rc;
}

int jr_redis_unblock(jr_redis_t *r, long long client_id) {
    char id[32];
    snprintf(id, sizeof id, "%lld", client_id);
    redisReply *rep;
    int rc = exec(r, &rep, "CLIENT", "UNBLOCK", id, NULL);
    if (!rc) freeReplyObject(rep);
    return rc;
}

int jr_redis_maxmemory_policy(jr_redis_t *r, char *buf, size_t len) {
    buf[0] = '\0';
    redisReply *rep;
    int rc = exec(r, &rep, "CONFIG", "GET", "maxmemory-policy", NULL);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_STRING)
        snprintf(buf, len, "%s", rep->element[1]->str);
    freeReplyObject(rep);
    return 0;
}

int jr_queue_name_valid(const char *q) {
    size_t n = strlen(q);
    if (n == 0 || n > JR_QUEUE_MAX) return 0;
    for (const char *p = q; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == ':' || *p == '-'))
            return 0;
    return 1;
}

void jr_qkeys(jr_qkeys_t *k, const char *q) {
    snprintf(k->ready, sizeof k->ready, "jr:{%s}:ready", q);
    snprintf(k->delayed, sizeof k->delayed, "jr:{%s}:delayed", q);
    snprintf(k->wake, sizeof k->wake, "jr:{%s}:wake", q);
    snprintf(k->seq, sizeof k->seq, "jr:{%s}:seq", q);
    snprintf(k->dead, sizeof k->dead, "jr:{%s}:dead", q);
}

/* Append FCALL jr_register for `queue` unless this connection did already.
 * Returns 1 if appended, 0 if not needed, or an error. Only the first
 * REGISTERED_MAX queues are remembered: later ones are registered again on
 * every call (harmless, SADD of a member already there). */
static int append_register(jr_redis_t *r, const char *queue) {
    for (size_t i = 0; i < r->nregistered; i++)
        if (strcmp(r->registered[i], queue) == 0) return 0;
    const char *argv[] = {"FCALL", "jr_register", "2", JR_REGISTRY_KEY, JR_REGISTRY_WAKE_KEY, queue};
    int rc = append_argv(r, 6, argv, NULL);
    if (rc) return rc;
    if (r->nregistered < REGISTERED_MAX) {
        char *copy = strdup(queue);
        if (copy) r->registered[r->nregistered++] = copy;
    }
    return 1;
}

/* Per-job strings of an enqueue call, formatted before the argv points at
 * them. */
typedef struct enq_scratch {
    char when[48], npairs[8], uniq[JR_KEY_MAX + JR_ID_MAX], nums[64];
} enq_scratch_t;

/* Append FCALL jr_enqueue_many for jobs[0..n) (all of one queue). */
static int append_enqueue_many(jr_redis_t *r, const jr_enqueue_t *jobs, size_t n, int64_t window_ms) {
    jr_qkeys_t k;
    jr_qkeys(&k, jobs[0].queue);
    size_t max = 9 + n * (4 + 2 * JR_ENVELOPE_MAX_FIELDS);
    const char **argv = malloc(max * sizeof *argv);
    size_t *lens = malloc(max * sizeof *lens);
    enq_scratch_t *sc = malloc(n * sizeof *sc);
    int rc = 0;
    if (!argv || !lens || !sc) {
        rc = fail(r, JR_ENOMEM, "out of memory");
        goto out;
    }
    char nkeys[16], window[24];
    size_t a = 0, nuniq = 0;
    argv[a++] = "FCALL", argv[a++] = "jr_enqueue_many", argv[a++] = nkeys;
    argv[a++] = k.ready, argv[a++] = k.delayed, argv[a++] = k.wake;
    argv[a++] = k.seq;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].id && jobs[i].id[0]) {
            snprintf(sc[i].uniq, sizeof sc[i].uniq, "jr:{%s}:uniq:%s", jobs[i].queue, jobs[i].id);
            argv[a++] = sc[i].uniq;
            nuniq++;
        }
    snprintf(nkeys, sizeof nkeys, "%zu", 4 + nuniq);
    snprintf(window, sizeof window, "%lld", (long long)(window_ms > 0 ? window_ms : 86400000));
    argv[a++] = window;
    for (size_t i = 0; i < a; i++) lens[i] = strlen(argv[i]);
    for (size_t i = 0; i < n; i++) {
        const jr_enqueue_t *j = &jobs[i];
        if (j->at_us > 0)
            snprintf(sc[i].when, sizeof sc[i].when, "@%lld.%03lld", (long long)(j->at_us / 1000),
                     (long long)(j->at_us % 1000));
        else if (j->delay_ms > 0)
            snprintf(sc[i].when, sizeof sc[i].when, "+%lld", (long long)j->delay_ms);
        else
            sc[i].when[0] = '\0';
        const char *names[JR_ENVELOPE_MAX_FIELDS], *vals[JR_ENVELOPE_MAX_FIELDS];
        size_t vlens[JR_ENVELOPE_MAX_FIELDS];
        size_t nf = jr_envelope_encode(&j->env, names, vals, vlens, sc[i].nums, sizeof sc[i].nums);
        snprintf(sc[i].npairs, sizeof sc[i].npairs, "%zu", nf);
        const char *id = j->id && j->id[0] ? j->id : "";
        argv[a] = sc[i].when, lens[a] = strlen(sc[i].when), a++;
        argv[a] = id, lens[a] = strlen(id), a++;
        argv[a] = sc[i].npairs, lens[a] = strlen(sc[i].npairs), a++;
        for (size_t f = 0; f < nf; f++) {
            argv[a] = names[f], lens[a] = strlen(names[f]), a++;
            argv[a] = vals[f], lens[a] = vlens[f], a++;
        }
    }
    rc = append_argv(r, (int)a, argv, lens);
out:
    free(argv), free(lens), free(sc);
    return rc;
}

/* 1 if id has a form jobrunner generates: "d<digits>-<digits>",
 * "<digits>-<digits>", or the older "d<digits>". */
static int reserved_id(const char *id) {
    const char *p = id;
    if (*p == 'd') {
        while (*++p >= '0' && *p <= '9') {}
        if (p > id + 1 && !*p) return 1;
        if (p == id + 1) return 0;
        id = p = id + 1; /* "d<digits>-<digits>": check the rest as below */
    }
    while (*p >= '0' && *p <= '9') p++;
    if (p == id || *p != '-') return 0;
    const char *q = ++p;
    while (*p >= '0' && *p <= '9') p++;
    return p > q && !*p;
}

/* Check job i against the contract (the bounds of jr_limits.h), the way the
 * Lua side will, so that a call is refused whole before anything is sent.
 * "@" times are checked against our clock here and Redis's there. Returns 0,
 * or JR_EINVAL with the reason in r->err (the connection stays usable). */
static int check_job(jr_redis_t *r, size_t i, const jr_enqueue_t *j, int64_t now_ms) {
    char why[JR_ERRLEN - 64];
    const jr_envelope_t *e = &j->env;
    why[0] = '\0';
    if (!j->queue || !jr_queue_name_valid(j->queue))
        snprintf(why, sizeof why, "queue name \"%.*s\" is not valid (1-128 characters of A-Z a-z 0-9 _ . : -)",
                 64, j->queue ? j->queue : "");
    else if (j->id && j->id[0] && strlen(j->id) > JR_ID_MAX - 2)
        snprintf(why, sizeof why, "job id \"%.40s...\" is longer than %d bytes", j->id, JR_ID_MAX - 2);
    else if (j->id && j->id[0] && reserved_id(j->id))
        snprintf(why, sizeof why, "job id \"%s\" has a reserved form (d<n>-<n>, d<n> or <n>-<n>)", j->id);
    else if (!e->handler || e->handler_len == 0)
        snprintf(why, sizeof why, "empty handler name");
    else if (!e->payload && e->payload_len > 0)
        snprintf(why, sizeof why, "payload is NULL with a length");
    else if (j->delay_ms < 0 || j->delay_ms > JR_DELAY_MAX_MS)
        snprintf(why, sizeof why, "delay %lld ms is not in 0..%lld", (long long)j->delay_ms,
                 (long long)JR_DELAY_MAX_MS);
    else if (j->at_us < 0 || (j->at_us > 0 && j->at_us / 1000 > now_ms + JR_DELAY_MAX_MS))
        snprintf(why, sizeof why, "due time %lld us is more than %lld ms after now", (long long)j->at_us,
                 (long long)JR_DELAY_MAX_MS);
    else if (j->uniq_ms < 0 || j->uniq_ms > JR_UNIQ_MAX_MS)
        snprintf(why, sizeof why, "idempotency window %lld ms is not in 0..%lld", (long long)j->uniq_ms,
                 (long long)JR_UNIQ_MAX_MS);
    else if (e->attempt > JR_ATTEMPTS_MAX || e->max_attempts > JR_ATTEMPTS_MAX)
        snprintf(why, sizeof why, "attempt %u / max attempts %u: at most %d", e->attempt, e->max_attempts,
                 JR_ATTEMPTS_MAX);
    else if (e->timeout_ms < 0 || e->timeout_ms > JR_TIMEOUT_MAX_MS)
        snprintf(why, sizeof why, "timeout %lld ms is not in 1..%lld", (long long)e->timeout_ms,
                 (long long)JR_TIMEOUT_MAX_MS);
    else if (e->backoff_ms < 0 || e->backoff_ms > JR_BACKOFF_MAX_MS)
        snprintf(why, sizeof why, "backoff %lld ms is not in 1..%lld", (long long)e->backoff_ms,
                 (long long)JR_BACKOFF_MAX_MS);
    if (!why[0]) return 0;
    snprintf(r->err, sizeof r->err, "enqueue refused, nothing sent: job %zu: %s", i + 1, why);
    return JR_EINVAL;
}

int jr_redis_enqueue(jr_redis_t *r, const jr_enqueue_t *jobs, size_t n, char (*ids)[JR_ID_MAX],
                     int *created) {
    int64_t now = jr_wall_ms();
    for (size_t i = 0; i < n; i++) {
        int rc = check_job(r, i, &jobs[i], now);
        if (rc) return rc;
    }
    /* Runs of consecutive jobs of one queue, up to `chunk` per call, all
     * sent in one pipeline per `window` jobs so replies never pile up. A
     * window holds at most one run per job (queues alternating). */
    const size_t chunk = 1000, window = 16 * 1000;
    size_t cap = (n < window ? n : window) + 1;
    size_t *starts = malloc(cap * sizeof *starts);
    unsigned char *regs = malloc(cap);
    int rc = 0;
    if (!starts || !regs) {
        rc = fail(r, JR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t base = 0; base < n; base += window) {
        size_t end = base + window < n ? base + window : n, ncalls = 0;
        for (size_t i = base; i < end;) {
            size_t j = i + 1;
            while (j < end && j - i < chunk && !strcmp(jobs[j].queue, jobs[i].queue) &&
                   jobs[j].uniq_ms == jobs[i].uniq_ms)
                j++;
            if ((rc = append_register(r, jobs[i].queue)) < 0) goto out;
            regs[ncalls] = (unsigned char)rc;
            if ((rc = append_enqueue_many(r, jobs + i, j - i, jobs[i].uniq_ms))) goto out;
            starts[ncalls++] = i;
            i = j;
        }
        starts[ncalls] = end;
        if ((rc = jr_redis_flush(r))) goto out;
        int first_err = 0;
        for (size_t c = 0; c < ncalls; c++) {
            for (int kk = regs[c]; kk >= 0; kk--) { /* register reply, then the enqueue's */
                redisReply *rep;
                if ((rc = recv_reply(r, &rep, r->timeout_us))) goto out;
                if (rep->type == REDIS_REPLY_ERROR) {
                    if (!first_err) first_err = fail(r, JR_EREDIS, "%s", rep->str);
                } else if (kk == 0) {
                    size_t cnt = starts[c + 1] - starts[c];
                    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 * cnt) {
                        freeReplyObject(rep);
                        rc = fail(r, JR_EPROTO, "jr_enqueue_many: unexpected reply");
                        goto out;
                    }
                    for (size_t x = 0; x < cnt; x++) {
                        if (ids) snprintf(ids[starts[c] + x], JR_ID_MAX, "%s", rep->element[2 * x]->str);
                        if (created) created[starts[c] + x] = rep->element[2 * x + 1]->integer != 0;
                    }
                }
                freeReplyObject(rep);
            }
        }
        if ((rc = first_err)) goto out;
    }
out:
    free(starts), free(regs);
    return rc;
}

/* Parse a "%.3f" ms string from the Lua side ("" -> -1). */
static double ms_value(const redisReply *e) {
    if (e->type == REDIS_REPLY_STRING && e->len > 0) return strtod(e->str, NULL);
    return -1;
}

int jr_redis_promote(jr_redis_t *r, const char *queue, int64_t limit, int64_t dead_max,
                     int64_t *moved, int64_t *buried, double *next_due_ms, double *now_ms,
                     char *wake_id) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char lim[24], dmax[24];
    snprintf(lim, sizeof lim, "%lld", (long long)limit);
    snprintf(dmax, sizeof dmax, "%lld", (long long)dead_max);
    redisReply *rep;
    int rc = exec(r, &rep, "FCALL", "jr_promote", "4", k.ready, k.delayed, k.wake, k.dead, lim, dmax,
                  NULL);
    if (rc) return rc;
    /* A library older than this binary answers without the 5th element. */
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 4 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[3]->type != REDIS_REPLY_STRING ||
        (rep->elements > 4 && rep->element[4]->type != REDIS_REPLY_INTEGER)) {
        freeReplyObject(rep);
        return fail(r, JR_EPROTO, "jr_promote: unexpected reply");
    }
    *moved = rep->element[0]->integer;
    *buried = rep->elements > 4 ? rep->element[4]->integer : 0;
    *next_due_ms = ms_value(rep->element[1]);
    *now_ms = ms_value(rep->element[2]);
    snprintf(wake_id, JR_ID_MAX, "%s", rep->element[3]->str);
    freeReplyObject(rep);
    return 0;
}

int jr_redis_queues(jr_redis_t *r, jr_strlist_t *out, char *wake_id) {
    redisReply *rep;
    int rc = exec(r, &rep, "FCALL", "jr_queues", "2", JR_REGISTRY_KEY, JR_REGISTRY_WAKE_KEY, NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        rep->element[0]->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        return fail(r, JR_EPROTO, "jr_queues: unexpected reply");
    }
    snprintf(wake_id, JR_ID_MAX, "%s", rep->element[0]->str);
    jr_strlist_free(out);
    for (size_t i = 1; i < rep->elements; i++)
        if (rep->element[i]->type == REDIS_REPLY_STRING && jr_queue_name_valid(rep->element[i]->str))
            if (jr_strlist_push(out, rep->element[i]->str)) {
                rc = fail(r, JR_ENOMEM, "out of memory");
                break;
            }
    freeReplyObject(rep);
    return rc;
}

int jr_redis_send_wake_read(jr_redis_t *r, const char *const *keys, char (*ids)[JR_ID_MAX],
                            size_t n, int64_t timeout_ms) {
    const char **argv = malloc((2 * n + 4) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    char t[24];
    snprintf(t, sizeof t, "%lld", (long long)timeout_ms);
    size_t a = 0;
    argv[a++] = "XREAD", argv[a++] = "BLOCK", argv[a++] = t, argv[a++] = "STREAMS";
    for (size_t i = 0; i < n; i++) argv[a++] = keys[i];
    for (size_t i = 0; i < n; i++) argv[a++] = ids[i];
    int rc = append_argv(r, (int)a, argv, NULL);
    free(argv);
    return rc ? rc : jr_redis_flush(r);
}

int jr_redis_recv_wake_read(jr_redis_t *r, const char *const *keys, char (*ids)[JR_ID_MAX],
                            unsigned char *fired, size_t n) {
    memset(fired, 0, n);
    redisReply *rep;
    int rc = recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "UNBLOCKED", 9) == 0) rc = 0;
    else if ((rc = reply_error(r, rep))) return rc;
    for (size_t s = 0; rep->type == REDIS_REPLY_ARRAY && s < rep->elements; s++) {
        redisReply *st = rep->element[s];
        if (st->type != REDIS_REPLY_ARRAY || st->elements != 2 ||
            st->element[1]->type != REDIS_REPLY_ARRAY || st->element[1]->elements == 0)
            continue;
        redisReply *last = st->element[1]->element[st->element[1]->elements - 1];
        if (last->type != REDIS_REPLY_ARRAY || last->elements < 1) continue;
        for (size_t i = 0; i < n; i++)
            if (strcmp(keys[i], st->element[0]->str) == 0) {
                snprintf(ids[i], JR_ID_MAX, "%s", last->element[0]->str);
                fired[i] = 1;
                rc++;
            }
    }
    freeReplyObject(rep);
    return rc;
}

/* Send `head... <ready key of queue i> tail...` for each queue in one
 * pipeline. An error reply containing `ignore` counts as success; the first
 * other one is returned as JR_EREDIS with its queue and Redis's text. With
 * `found` (XINFO GROUPS), found[i] = 1 if queue i has the group JR_GROUP.
 * nhead + 1 + ntail <= 8 (the callers below). */
static int pipeline_per_queue(jr_redis_t *r, const char *const *queues, size_t n, const char *const *head,
                              int nhead, const char *const *tail, int ntail, const char *ignore,
                              unsigned char *found) {
    const char *argv[8];
    jr_qkeys_t k;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        jr_qkeys(&k, queues[i]);
        int a = 0;
        for (int j = 0; j < nhead; j++) argv[a++] = head[j];
        argv[a++] = k.ready;
        for (int j = 0; j < ntail; j++) argv[a++] = tail[j];
        rc = append_argv(r, a, argv, NULL);
    }
    if (rc || (rc = jr_redis_flush(r))) return rc;
    int first_err = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *rep;
        if ((rc = recv_reply(r, &rep, r->timeout_us))) return rc; /* the connection is broken */
        if (rep->type == REDIS_REPLY_ERROR && !strstr(rep->str, ignore) && !first_err)
            first_err = fail(r, JR_EREDIS, "%s %s of queue %s: %s", head[0], head[1], queues[i], rep->str);
        /* XINFO GROUPS: [[name, <group>, ...], ...] */
        for (size_t g = 0; found && rep->type == REDIS_REPLY_ARRAY && g < rep->elements; g++) {
            const redisReply *e = rep->element[g];
            if (e->type == REDIS_REPLY_ARRAY && e->elements >= 2 &&
                e->element[1]->type == REDIS_REPLY_STRING && !strcmp(e->element[1]->str, JR_GROUP))
                found[i] = 1;
        }
        freeReplyObject(rep);
    }
    return first_err;
}

int jr_redis_ensure_groups(jr_redis_t *r, const char *const *queues, size_t n) {
    static const char *const info[] = {"XINFO", "GROUPS"};
    static const char *const create[] = {"XGROUP", "CREATE"};
    static const char *const create_tail[] = {JR_GROUP, "0", "MKSTREAM"};
    unsigned char *found = calloc(n ? n : 1, 1);
    const char **missing = malloc((n ? n : 1) * sizeof *missing);
    if (!found || !missing) {
        free(found), free(missing);
        return fail(r, JR_ENOMEM, "out of memory");
    }
    /* Look first (a read works in an out-of-memory Redis); create only what
     * is missing (BUSYGROUP: another process just did). */
    int rc = pipeline_per_queue(r, queues, n, info, 2, NULL, 0, "no such key", found);
    size_t m = 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (!found[i]) missing[m++] = queues[i];
    if (!rc && m) rc = pipeline_per_queue(r, missing, m, create, 2, create_tail, 3, "BUSYGROUP", NULL);
    free(found), free(missing);
    return rc;
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

int jr_redis_send_read(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                       int64_t count, int64_t block_ms) {
    char cnt[24], blk[24];
    char (*keys)[JR_KEY_MAX] = malloc((n ? n : 1) * sizeof *keys);
    const char **argv = malloc((9 + 2 * n) * sizeof *argv);
    if (!keys || !argv) {
        free(keys), free(argv);
        return fail(r, JR_ENOMEM, "out of memory");
    }
    size_t a = 0;
    snprintf(cnt, sizeof cnt, "%lld", (long long)count);
    snprintf(blk, sizeof blk, "%lld", (long long)block_ms);
    argv[a++] = "XREADGROUP", argv[a++] = "GROUP", argv[a++] = JR_GROUP, argv[a++] = consumer;
    argv[a++] = "COUNT", argv[a++] = cnt, argv[a++] = "BLOCK", argv[a++] = blk;
    argv[a++] = "STREAMS";
    for (size_t i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "jr:{%s}:ready", queues[i]);
        argv[a++] = keys[i];
    }
    for (size_t i = 0; i < n; i++) argv[a++] = ">";
    int rc = append_argv(r, (int)a, argv, NULL);
    free(keys), free(argv);
    return rc ? rc : jr_redis_flush(r);
}

/* Grow the batch's arrays to hold `entries` entries and `strs` strings. */
static int batch_reserve(jr_batch_t *b, size_t entries, size_t strs) {
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

/* 1 if key is "jr:{<queue>}:ready" (jr_qkeys' ready key), without formatting it. */
static int is_ready_key(const char *key, const char *queue) {
    size_t n = strlen(queue);
    return !strncmp(key, "jr:{", 4) && !strncmp(key + 4, queue, n) && !strcmp(key + 4 + n, "}:ready");
}

/* Fill *b from an XREADGROUP-shaped reply [[key, [[id, fields], ...]], ...]
 * that b now owns. With queues (n > 0) each stream's entries get the index
 * of their queue (a stream of no queue is a protocol error); without, every
 * entry gets qi_default. */
/* Count the entries and field strings of an XREADGROUP-shaped reply into
 * *entries and *strs (added); JR_EPROTO if it has another shape. */
static int count_streams(jr_redis_t *r, const redisReply *rep, size_t *entries, size_t *strs) {
    if (rep->type == REDIS_REPLY_NIL) return 0;
    if (rep->type != REDIS_REPLY_ARRAY) return fail(r, JR_EPROTO, "stream read: unexpected reply");
    for (size_t s = 0; s < rep->elements; s++) {
        redisReply *st = rep->element[s];
        if (st->type != REDIS_REPLY_ARRAY || st->elements != 2 ||
            st->element[0]->type != REDIS_REPLY_STRING || st->element[1]->type != REDIS_REPLY_ARRAY)
            return fail(r, JR_EPROTO, "stream read: unexpected stream reply");
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

static int fill_streams(jr_redis_t *r, jr_batch_t *b, redisReply *rep, const char *const *queues,
                        size_t n, uint32_t qi_default);

static int parse_streams(jr_redis_t *r, jr_batch_t *b, redisReply *rep, const char *const *queues,
                         size_t n, uint32_t qi_default) {
    b->reply = rep;
    /* Count first, so pointers into the arrays never move while filling. */
    size_t entries = 0, strs = 0;
    int rc = count_streams(r, rep, &entries, &strs);
    if (rc) return rc;
    if (batch_reserve(b, entries, strs)) return fail(r, JR_ENOMEM, "out of memory");
    return fill_streams(r, b, rep, queues, n, qi_default);
}

/* Append the entries of rep (counted and reserved already) to *b. */
static int fill_streams(jr_redis_t *r, jr_batch_t *b, redisReply *rep, const char *const *queues,
                        size_t n, uint32_t qi_default) {
    if (rep->type == REDIS_REPLY_NIL) return 0;
    for (size_t s = 0; s < rep->elements; s++) {
        redisReply *st = rep->element[s];
        uint32_t qi = qi_default;
        if (n) {
            size_t i = 0;
            while (i < n && !is_ready_key(st->element[0]->str, queues[i])) i++;
            if (i == n) return fail(r, JR_EPROTO, "stream read: a stream we did not ask for: %s", st->element[0]->str);
            qi = (uint32_t)i;
        }
        for (size_t e = 0; e < st->element[1]->elements; e++) {
            redisReply *en = st->element[1]->element[e];
            /* Before Redis 7, XAUTOCLAIM gave nil for deleted entries. */
            if (en->type == REDIS_REPLY_NIL) continue;
            if (en->type != REDIS_REPLY_ARRAY || en->elements != 2 ||
                en->element[0]->type != REDIS_REPLY_STRING)
                return fail(r, JR_EPROTO, "stream read: unexpected entry");
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
static void batch_reset(jr_batch_t *b) {
    if (b->reply) freeReplyObject(b->reply);
    for (size_t i = 0; i < b->nmore; i++) freeReplyObject(b->more[i]);
    b->reply = NULL, b->n = 0, b->nstrs = 0, b->nmore = 0;
}

int jr_redis_recv_read(jr_redis_t *r, jr_batch_t *b, const char *const *queues, size_t n) {
    batch_reset(b);
    redisReply *rep;
    int rc = recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "UNBLOCKED", 9) == 0) {
        freeReplyObject(rep);
        return 0;
    }
    if ((rc = reply_error(r, rep))) return rc;
    return parse_streams(r, b, rep, queues, n, 0);
}

int jr_redis_append_fail(jr_redis_t *r, const char *queue, const char *entry, const char *consumer,
                         const char *action, int64_t delay_ms, const char *error, const char *why,
                         int64_t dead_max) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char delay[24], max[24];
    snprintf(delay, sizeof delay, "%lld", (long long)delay_ms);
    snprintf(max, sizeof max, "%lld", (long long)dead_max);
    const char *argv[] = {"FCALL", "jr_fail", "4", k.ready, k.delayed, k.wake, k.dead,
                          entry, consumer, action, delay, error, why, max};
    return append_argv(r, 14, argv, NULL);
}

/* Append FCALL fn 1 <ready> consumer ids... */
static int append_ids_call(jr_redis_t *r, const char *fn, const char *queue, const char *consumer,
                           const char *const *ids, size_t n) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    const char **argv = malloc((n + 5) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    size_t a = 0;
    argv[a++] = "FCALL", argv[a++] = fn, argv[a++] = "1", argv[a++] = k.ready;
    if (consumer) argv[a++] = consumer;
    memcpy(argv + a, ids, n * sizeof *ids);
    int rc = append_argv(r, (int)(a + n), argv, NULL);
    free(argv);
    return rc;
}

int jr_redis_append_handback(jr_redis_t *r, const char *queue, const char *consumer,
                             const char *const *ids, size_t n) {
    return append_ids_call(r, "jr_handback", queue, consumer, ids, n);
}

/* Mark in flags[] each of ids[] named in the array reply `list`; returns
 * how many were. */
static int mark_named(const redisReply *list, const char *const *ids, size_t n, unsigned char *flags) {
    int marked = 0;
    for (size_t i = 0; list->type == REDIS_REPLY_ARRAY && i < list->elements; i++)
        for (size_t j = 0; j < n; j++)
            if (list->element[i]->type == REDIS_REPLY_STRING && !strcmp(list->element[i]->str, ids[j])) {
                flags[j] = 1;
                marked++;
            }
    return marked;
}

int jr_redis_heartbeat(jr_redis_t *r, const char *queue, const char *consumer,
                       const char *const *ids, size_t n, unsigned char *lost, unsigned char *cancelled) {
    memset(lost, 0, n);
    if (cancelled) memset(cancelled, 0, n);
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char ckey[JR_KEY_MAX];
    snprintf(ckey, sizeof ckey, "jr:{%s}:cancelled", queue);
    const char **argv = malloc((n + 6) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    size_t a = 0;
    argv[a++] = "FCALL", argv[a++] = "jr_heartbeat", argv[a++] = cancelled ? "2" : "1", argv[a++] = k.ready;
    if (cancelled) argv[a++] = ckey;
    argv[a++] = consumer;
    memcpy(argv + a, ids, n * sizeof *ids);
    int rc = append_argv(r, (int)(a + n), argv, NULL);
    free(argv);
    redisReply *rep;
    if (rc || (rc = jr_redis_flush(r)) || (rc = recv_reply(r, &rep, r->timeout_us))) return rc;
    if ((rc = reply_error(r, rep))) return rc;
    int nlost;
    if (cancelled) {
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
            freeReplyObject(rep);
            return fail(r, JR_EPROTO, "jr_heartbeat: unexpected reply");
        }
        nlost = mark_named(rep->element[0], ids, n, lost);
        mark_named(rep->element[1], ids, n, cancelled);
    } else {
        nlost = mark_named(rep, ids, n, lost);
    }
    freeReplyObject(rep);
    return nlost;
}

int jr_redis_reclaim(jr_redis_t *r, const char *queue, uint32_t qi, const char *consumer,
                     int64_t min_idle_ms, char *cursor, int64_t count, int64_t max_deliveries,
                     int64_t dead_max, jr_batch_t *b, long long *deleted, long long *poisoned) {
    batch_reset(b);
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char idle[24], cnt[24], maxd[24], dmax[24];
    snprintf(idle, sizeof idle, "%lld", (long long)min_idle_ms);
    snprintf(cnt, sizeof cnt, "%lld", (long long)count);
    snprintf(maxd, sizeof maxd, "%lld", (long long)max_deliveries);
    snprintf(dmax, sizeof dmax, "%lld", (long long)dead_max);
    redisReply *rep;
    int rc = exec(r, &rep, "FCALL", "jr_reclaim", "2", k.ready, k.dead, consumer, idle, cursor, cnt,
                  maxd, dmax, NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 4 ||
        rep->element[0]->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        return fail(r, JR_EPROTO, "jr_reclaim: unexpected reply");
    }
    snprintf(cursor, JR_ID_MAX, "%s", rep->element[0]->str);
    *deleted = rep->element[1]->integer;
    *poisoned = rep->element[2]->integer;
    /* Keep the whole reply alive: the batch points into its 4th element. */
    redisReply *streams = rep->element[3];
    rc = parse_streams(r, b, streams, NULL, 0, qi);
    b->reply = rep;
    return rc;
}

int jr_redis_xrange(jr_redis_t *r, const char *key, int64_t count, jr_batch_t *b) {
    return jr_redis_xrange_between(r, key, "-", "+", count, b);
}

/* Make the array of [id, fields] entries `rep` (owned from here on) the
 * contents of *b, as a batch of queue index 0. */
static int batch_of_entries(jr_redis_t *r, const char *key, redisReply *rep, jr_batch_t *b) {
    /* Wrap it as [[key, entries]] so one parser serves every stream read. */
    redisReply *outer = calloc(1, sizeof *outer), *pair = calloc(1, sizeof *pair);
    redisReply *name = calloc(1, sizeof *name);
    redisReply **po = malloc(sizeof *po), **pp = malloc(2 * sizeof *pp);
    char *kcopy = strdup(key);
    if (!outer || !pair || !name || !po || !pp || !kcopy) {
        free(outer), free(pair), free(name), free(po), free(pp), free(kcopy);
        freeReplyObject(rep);
        return fail(r, JR_ENOMEM, "out of memory");
    }
    name->type = REDIS_REPLY_STRING, name->str = kcopy, name->len = strlen(kcopy);
    pair->type = REDIS_REPLY_ARRAY, pair->elements = 2, pair->element = pp;
    pp[0] = name, pp[1] = rep;
    outer->type = REDIS_REPLY_ARRAY, outer->elements = 1, outer->element = po;
    po[0] = pair;
    return parse_streams(r, b, outer, NULL, 0, 0);
}

int jr_redis_dead_retry(jr_redis_t *r, const char *queue, const char *const *entries, size_t n,
                        long long *moved) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    const char **argv = malloc((n + 5) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "FCALL", argv[1] = "jr_dead_retry", argv[2] = "2", argv[3] = k.dead, argv[4] = k.ready;
    memcpy(argv + 5, entries, n * sizeof *entries);
    redisReply *rep;
    int rc = exec_argv(r, &rep, (int)(n + 5), argv, NULL);
    free(argv);
    if (rc) return rc;
    *moved = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    return 0;
}

int jr_redis_dead_purge(jr_redis_t *r, const char *queue, const char *const *entries, size_t n,
                        long long *removed) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    redisReply *rep;
    int rc;
    if (n == 0) {
        if ((rc = exec(r, &rep, "XLEN", k.dead, NULL))) return rc;
        *removed = rep->integer;
        freeReplyObject(rep);
        if ((rc = exec(r, &rep, "DEL", k.dead, NULL))) return rc;
        freeReplyObject(rep);
        return 0;
    }
    const char **argv = malloc((n + 2) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "XDEL", argv[1] = k.dead;
    memcpy(argv + 2, entries, n * sizeof *entries);
    rc = exec_argv(r, &rep, (int)(n + 2), argv, NULL);
    free(argv);
    if (rc) return rc;
    *removed = rep->integer;
    freeReplyObject(rep);
    return 0;
}

int jr_redis_append_ack(jr_redis_t *r, const char *queue, const char *const *ids, size_t n) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    const char **argv = malloc((n + 4) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "FCALL", argv[1] = "jr_ack", argv[2] = "1", argv[3] = k.ready;
    memcpy(argv + 4, ids, n * sizeof *ids);
    int rc = append_argv(r, (int)(n + 4), argv, NULL);
    free(argv);
    return rc;
}

/* Format a follow-up's WHEN argument ("" now, "+MS", "@MS"). */
static void fu_when(const jr_fu_item_t *it, char *out, size_t len) {
    if (it->at_ms > 0) snprintf(out, len, "@%lld", (long long)it->at_ms);
    else if (it->delay_ms > 0) snprintf(out, len, "+%lld", (long long)it->delay_ms);
    else out[0] = '\0';
}

int jr_redis_append_ack_follow(jr_redis_t *r, const char *queue, const char *entry, const char *fu,
                               size_t fu_len, int register_targets) {
    long n = jr_fu_count(fu, fu_len);
    if (n <= 0) return fail(r, JR_EINVAL, "follow-ups of entry %s are corrupt or empty", entry);
    size_t nq = 0, nuniq = 0, off = 0;
    jr_fu_item_t *items = calloc((size_t)n, sizeof *items);
    uint32_t *qi = calloc((size_t)n, sizeof *qi);
    char (*qnames)[JR_QUEUE_MAX + 1] = calloc((size_t)n, sizeof *qnames);
    jr_qkeys_t *qk = calloc((size_t)n, sizeof *qk);
    char (*uniq)[JR_KEY_MAX + JR_ID_MAX] = calloc((size_t)n, sizeof *uniq);
    char (*when)[32] = calloc((size_t)n, sizeof *when);
    char (*qix)[12] = calloc((size_t)n, sizeof *qix);
    size_t max = 8 + (size_t)n * (4 + 4 + 1 + 7);
    const char **argv = malloc(max * sizeof *argv);
    size_t *lens = malloc(max * sizeof *lens);
    int rc = 0;
    if (!items || !qi || !qnames || !qk || !uniq || !when || !qix || !argv || !lens) {
        rc = fail(r, JR_ENOMEM, "out of memory");
        goto out;
    }
    for (long i = 0; i < n; i++) {
        jr_fu_next(fu, fu_len, &off, &items[i]);
        jr_fu_item_t *it = &items[i];
        if (it->queue_len > JR_QUEUE_MAX || it->id_len > JR_ID_MAX - 2) {
            rc = fail(r, JR_EINVAL, "follow-up %ld of entry %s: queue name or id too long", i + 1, entry);
            goto out;
        }
        size_t q = 0;
        while (q < nq && !(strlen(qnames[q]) == it->queue_len && !memcmp(qnames[q], it->queue, it->queue_len))) q++;
        if (q == nq) {
            memcpy(qnames[q], it->queue, it->queue_len);
            qnames[q][it->queue_len] = '\0';
            jr_qkeys(&qk[q], qnames[q]);
            nq++;
        }
        qi[i] = (uint32_t)q;
        if (it->id_len) snprintf(uniq[nuniq++], sizeof uniq[0], "jr:{%s}:uniq:%.*s", qnames[q], (int)it->id_len, it->id);
    }
    /* Register the target queues first (for schedulers serving every
     * queue); harmless if the acknowledgement then finds the job gone. */
    size_t a = 0;
    argv[a++] = "FCALL", argv[a++] = "jr_register", argv[a++] = "2";
    argv[a++] = JR_REGISTRY_KEY, argv[a++] = JR_REGISTRY_WAKE_KEY;
    for (size_t q = 0; q < nq; q++) argv[a++] = qnames[q];
    if (register_targets && (rc = append_argv(r, (int)a, argv, NULL))) goto out;

    jr_qkeys_t own;
    jr_qkeys(&own, queue);
    char nkeys[24], nqs[24];
    snprintf(nkeys, sizeof nkeys, "%zu", 1 + 4 * nq + nuniq);
    snprintf(nqs, sizeof nqs, "%zu", nq);
    a = 0;
    argv[a++] = "FCALL", argv[a++] = "jr_ack_follow", argv[a++] = nkeys, argv[a++] = own.ready;
    for (size_t q = 0; q < nq; q++)
        argv[a++] = qk[q].ready, argv[a++] = qk[q].delayed, argv[a++] = qk[q].wake, argv[a++] = qk[q].seq;
    for (size_t u = 0; u < nuniq; u++) argv[a++] = uniq[u];
    argv[a++] = entry, argv[a++] = nqs, argv[a++] = "86400000";
    for (size_t i = 0; i < a; i++) lens[i] = strlen(argv[i]);
    for (long i = 0; i < n; i++) {
        const jr_fu_item_t *it = &items[i];
        snprintf(qix[i], sizeof qix[i], "%u", qi[i] + 1);
        fu_when(it, when[i], sizeof when[i]);
        argv[a] = qix[i], lens[a++] = strlen(qix[i]);
        argv[a] = when[i], lens[a++] = strlen(when[i]);
        argv[a] = it->id_len ? it->id : "", lens[a++] = it->id_len;
        argv[a] = "2", lens[a++] = 1; /* pairs: h and p */
        argv[a] = JR_F_HANDLER, lens[a++] = 1;
        argv[a] = it->handler, lens[a++] = it->handler_len;
        argv[a] = JR_F_PAYLOAD, lens[a++] = 1;
        argv[a] = it->payload_len ? it->payload : "", lens[a++] = it->payload_len;
    }
    rc = append_argv(r, (int)a, argv, lens);
out:
    free(items), free(qi), free(qnames), free(qk), free(uniq), free(when), free(qix), free(argv), free(lens);
    return rc;
}

int jr_redis_recv_int(jr_redis_t *r, long long *v) {
    redisReply *rep;
    int rc = recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    if ((rc = reply_error(r, rep))) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? (*v = rep->integer, 0)
                                          : fail(r, JR_EPROTO, "expected an integer reply");
    freeReplyObject(rep);
    return rc;
}

int jr_redis_stats(jr_redis_t *r, const char *queue, jr_qstats_t *s) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    memset(s, 0, sizeof *s);
    s->oldest_ready_ms = -1;
    char stats[JR_KEY_MAX];
    snprintf(stats, sizeof stats, "jr:{%s}:stats", queue);
    /* delayed = the sorted set (near tier) + the jobs in time-wheel buckets */
    char wheel_n[JR_KEY_MAX];
    snprintf(wheel_n, sizeof wheel_n, "jr:{%s}:wheel:n", queue);
    const char *cmds[7][4] = {{"XLEN", k.ready}, {"ZCARD", k.delayed}, {"XPENDING", k.ready, JR_GROUP},
                              {"XLEN", k.dead},  {"HGETALL", stats},    {"TIME"}, {"GET", wheel_n}};
    int argcs[7] = {2, 2, 3, 2, 2, 1, 2};
    int rc;
    for (int i = 0; i < 7; i++)
        if ((rc = append_argv(r, argcs[i], cmds[i], NULL))) return rc;
    if ((rc = jr_redis_flush(r))) return rc;
    long long len = 0, now_s = 0, now_ms = 0, in_window = 0;
    long long t[60] = {0}, c[60] = {0}; /* the ring of jr_ack: second, jobs in it */
    int first_err = 0;
    for (int i = 0; i < 7; i++) {
        redisReply *rep;
        if ((rc = recv_reply(r, &rep, r->timeout_us))) return rc;
        if (i == 6) {
            if (rep->type == REDIS_REPLY_STRING) {
                long long n = strtoll(rep->str, NULL, 10);
                if (n > 0) s->delayed += n;
            }
        } else if (rep->type == REDIS_REPLY_INTEGER) {
            if (i == 0) len = rep->integer;
            else if (i == 1) s->delayed = rep->integer;
            else s->dead = rep->integer;
        } else if (i == 2 && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
                   rep->element[0]->type == REDIS_REPLY_INTEGER) {
            s->pending = rep->element[0]->integer;
        } else if (i == 4 && rep->type == REDIS_REPLY_ARRAY) {
            /* processed, failed, and the ring t<k>/c<k> (see jr_ack) */
            for (size_t j = 0; j + 1 < rep->elements; j += 2) {
                const redisReply *f = rep->element[j], *v = rep->element[j + 1];
                if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
                long long n = strtoll(v->str, NULL, 10);
                if (!strcmp(f->str, "processed")) s->processed = n;
                else if (!strcmp(f->str, "failed")) s->failed = n;
                else if ((f->str[0] == 't' || f->str[0] == 'c') && f->len <= 3) {
                    int slot = atoi(f->str + 1);
                    if (slot >= 0 && slot < 60) (f->str[0] == 't' ? t : c)[slot] = n;
                }
            }
        } else if (i == 5 && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
            now_s = strtoll(rep->element[0]->str, NULL, 10);
            now_ms = now_s * 1000 + strtoll(rep->element[1]->str, NULL, 10) / 1000;
        } else if (rep->type == REDIS_REPLY_ERROR && !strstr(rep->str, "NOGROUP") && !first_err) {
            fail(r, JR_EREDIS, "%s", rep->str);
            first_err = JR_EREDIS;
        }
        freeReplyObject(rep);
    }
    for (int j = 0; j < 60; j++)
        if (t[j] > now_s - 60 && t[j] <= now_s) in_window += c[j];
    s->rate = (double)in_window / 60.0;
    /* Acknowledged entries are deleted, so the stream holds exactly the
     * ready and the pending ones. */
    s->ready = len - s->pending;
    if (s->ready < 0) s->ready = 0;
    if (!first_err && s->ready > 0) { /* the oldest ready: the first entry after the group's last delivery */
        char last[JR_ID_MAX], start[JR_ID_MAX + 1];
        jr_batch_t b = {0};
        if ((rc = jr_redis_group_last_id(r, queue, last))) return rc;
        snprintf(start, sizeof start, "(%s", last);
        if (!strcmp(last, "0-0")) snprintf(start, sizeof start, "-");
        if ((rc = jr_redis_xrange_between(r, k.ready, start, "+", 1, &b))) return rc;
        if (b.n) s->oldest_ready_ms = now_ms - strtoll(b.v[0].id, NULL, 10);
        if (s->oldest_ready_ms < 0 && b.n) s->oldest_ready_ms = 0;
        jr_batch_free(&b);
    }
    return first_err;
}

/* ---- the process registry ------------------------------------------------ */

static void proc_key(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s:%s", JR_PROCS_KEY, name); }

/* Read n pipelined replies; keep the last (caller frees) unless it is NULL.
 * An error reply in any of them is returned as JR_EREDIS (the first one's
 * text), after all n were read. */
static int recv_n(jr_redis_t *r, size_t n, redisReply **last) {
    int err = 0;
    if (last) *last = NULL;
    for (size_t i = 0; i < n; i++) {
        redisReply *rep;
        int rc = recv_reply(r, &rep, r->timeout_us);
        if (rc) return rc;
        if (rep->type == REDIS_REPLY_ERROR) {
            if (!err) fail(r, JR_EREDIS, "%s", rep->str);
            err = JR_EREDIS;
        }
        if (i + 1 == n && last && !err) *last = rep;
        else freeReplyObject(rep);
    }
    return err;
}

int jr_redis_proc_announce(jr_redis_t *r, const jr_proc_t *p) {
    char key[JR_PROC_NAME_MAX + 16], pid[24], started[24], running[24], lease[24], client[24];
    proc_key(key, sizeof key, p->name);
    snprintf(pid, sizeof pid, "%lld", p->pid);
    snprintf(started, sizeof started, "%lld", p->started_ms);
    snprintf(running, sizeof running, "%lld", p->running);
    snprintf(lease, sizeof lease, "%lld", p->lease_ms);
    snprintf(client, sizeof client, "%lld", p->client_id);
    const char *hset[] = {"HSET", key, "role", p->role, "host", p->host, "pid", pid, "queues",
                          p->queues ? p->queues : "", "version", p->version, "started", started,
                          "running", running, "lease", lease, "client", client};
    const char *multi[] = {"MULTI"}, *exec_[] = {"EXEC"};
    const char *pexpire[] = {"PEXPIRE", key, lease};
    const char *zadd[] = {"ZADD", JR_PROCS_KEY, started, p->name};
    int rc;
    if ((rc = append_argv(r, 1, multi, NULL)) || (rc = append_argv(r, p->client_id > 0 ? 20 : 18, hset, NULL)) ||
        (rc = append_argv(r, 3, pexpire, NULL)) || (rc = append_argv(r, 4, zadd, NULL)) ||
        (rc = append_argv(r, 1, exec_, NULL)) || (rc = jr_redis_flush(r)))
        return rc;
    redisReply *rep;
    if ((rc = recv_n(r, 5, &rep))) return rc;
    /* EXEC answers with the commands' replies; one may be an error (OOM). */
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements && !rc; i++)
        if (rep->element[i]->type == REDIS_REPLY_ERROR) rc = fail(r, JR_EREDIS, "%s", rep->element[i]->str);
    if (!rc && rep->type != REDIS_REPLY_ARRAY) rc = fail(r, JR_EPROTO, "announce: unexpected EXEC reply");
    freeReplyObject(rep);
    return rc;
}

int jr_redis_proc_remove(jr_redis_t *r, const char *name) {
    char key[JR_PROC_NAME_MAX + 16];
    proc_key(key, sizeof key, name);
    const char *del[] = {"DEL", key}, *zrem[] = {"ZREM", JR_PROCS_KEY, name};
    int rc;
    if ((rc = append_argv(r, 2, del, NULL)) || (rc = append_argv(r, 3, zrem, NULL)) || (rc = jr_redis_flush(r)))
        return rc;
    return recv_n(r, 2, NULL);
}

void jr_procs_free(jr_proc_t *v, size_t n) {
    for (size_t i = 0; v && i < n; i++) free(v[i].queues);
    free(v);
}

/* Fill p from an HGETALL reply; 0 if the hash is gone (empty). */
static int proc_from_hash(jr_proc_t *p, const redisReply *h) {
    if (h->type != REDIS_REPLY_ARRAY || h->elements == 0) return 0;
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const char *f = h->element[i]->str, *v = h->element[i + 1]->str;
        if (!f || !v) continue;
        if (!strcmp(f, "role")) snprintf(p->role, sizeof p->role, "%s", v);
        else if (!strcmp(f, "host")) snprintf(p->host, sizeof p->host, "%s", v);
        else if (!strcmp(f, "pid")) p->pid = strtoll(v, NULL, 10);
        else if (!strcmp(f, "queues")) free(p->queues), p->queues = strdup(v);
        else if (!strcmp(f, "version")) snprintf(p->version, sizeof p->version, "%s", v);
        else if (!strcmp(f, "started")) p->started_ms = strtoll(v, NULL, 10);
        else if (!strcmp(f, "running")) p->running = strtoll(v, NULL, 10);
        else if (!strcmp(f, "lease")) p->lease_ms = strtoll(v, NULL, 10);
        else if (!strcmp(f, "client")) p->client_id = strtoll(v, NULL, 10);
    }
    return 1;
}

int jr_redis_proc_list(jr_redis_t *r, jr_proc_t **out, size_t *n) {
    *out = NULL, *n = 0;
    redisReply *names;
    int rc = exec(r, &names, "ZRANGE", JR_PROCS_KEY, "0", "-1", NULL);
    if (rc) return rc;
    size_t m = names->type == REDIS_REPLY_ARRAY ? names->elements : 0;
    jr_proc_t *v = calloc(m ? m : 1, sizeof *v);
    if (!v) {
        freeReplyObject(names);
        return fail(r, JR_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < m && !rc; i++) {
        char key[JR_PROC_NAME_MAX + 16];
        const char *name = names->element[i]->str ? names->element[i]->str : "";
        proc_key(key, sizeof key, name);
        const char *hg[] = {"HGETALL", key}, *pt[] = {"PTTL", key};
        if (!(rc = append_argv(r, 2, hg, NULL))) rc = append_argv(r, 2, pt, NULL);
    }
    if (!rc && m) rc = jr_redis_flush(r);
    size_t kept = 0, gone = 0;
    const char **stale = calloc(m + 2, sizeof *stale);
    if (!stale && !rc) rc = fail(r, JR_ENOMEM, "out of memory");
    for (size_t i = 0; i < m && !rc; i++) {
        redisReply *h = NULL, *t = NULL;
        if ((rc = recv_reply(r, &h, r->timeout_us))) break;
        if ((rc = recv_reply(r, &t, r->timeout_us))) {
            freeReplyObject(h);
            break;
        }
        if (h->type == REDIS_REPLY_ERROR) rc = fail(r, JR_EREDIS, "%s", h->str);
        jr_proc_t *p = &v[kept];
        memset(p, 0, sizeof *p);
        if (!rc && proc_from_hash(p, h) && t->type == REDIS_REPLY_INTEGER && t->integer != -2) {
            snprintf(p->name, sizeof p->name, "%s", names->element[i]->str);
            if (!p->queues && !(p->queues = strdup(""))) rc = fail(r, JR_ENOMEM, "out of memory");
            long long ttl = t->integer >= 0 ? t->integer : p->lease_ms;
            p->seen_ago_ms = p->lease_ms > ttl ? p->lease_ms - ttl : 0;
            kept++;
        } else if (!rc) {
            free(p->queues), p->queues = NULL;
            stale[2 + gone++] = names->element[i]->str;
        }
        freeReplyObject(h), freeReplyObject(t);
    }
    if (!rc && gone) { /* best effort: the index forgets expired processes */
        stale[0] = "ZREM", stale[1] = JR_PROCS_KEY;
        redisReply *rep = NULL;
        if (exec_argv(r, &rep, (int)gone + 2, stale, NULL) == 0) freeReplyObject(rep);
        if (!jr_redis_ok(r)) rc = JR_EIO;
        else r->err[0] = '\0';
    }
    free(stale);
    freeReplyObject(names);
    if (rc) {
        jr_procs_free(v, kept);
        return rc;
    }
    *out = v, *n = kept;
    return 0;
}

int jr_redis_prune_consumers(jr_redis_t *r, const char *queue, const char *const *live, size_t nlive,
                             int64_t min_idle_ms, long long *removed) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char idle[24];
    snprintf(idle, sizeof idle, "%lld", (long long)min_idle_ms);
    const char **argv = malloc((nlive + 5) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "FCALL", argv[1] = "jr_prune_consumers", argv[2] = "1", argv[3] = k.ready, argv[4] = idle;
    for (size_t i = 0; i < nlive; i++) argv[5 + i] = live[i];
    redisReply *rep;
    int rc = exec_argv(r, &rep, (int)(nlive + 5), argv, NULL);
    free(argv);
    if (rc) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? (*removed = rep->integer, 0)
                                          : fail(r, JR_EPROTO, "jr_prune_consumers: unexpected reply");
    freeReplyObject(rep);
    return rc;
}

/* ---- one job by id, and pages of a queue (see docs/redis-contract.md) ---- */

int jr_redis_xrange_between(jr_redis_t *r, const char *key, const char *start, const char *end, int64_t count,
                            jr_batch_t *b) {
    batch_reset(b);
    char cnt[24];
    snprintf(cnt, sizeof cnt, "%lld", (long long)(count > 0 ? count : INT64_MAX / 2));
    redisReply *rep;
    int rc = exec(r, &rep, "XRANGE", key, start, end, "COUNT", cnt, NULL);
    if (rc) return rc;
    return batch_of_entries(r, key, rep, b);
}

int jr_redis_append_ack_ids(jr_redis_t *r, const char *queue, const char *const *entries,
                            const char *const *jobids, size_t n) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char ids[JR_KEY_MAX];
    snprintf(ids, sizeof ids, "jr:{%s}:ids", queue);
    const char **argv = malloc((2 * n + 5) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "FCALL", argv[1] = "jr_ack", argv[2] = "2", argv[3] = k.ready, argv[4] = ids;
    for (size_t i = 0; i < n; i++) argv[5 + 2 * i] = entries[i], argv[6 + 2 * i] = jobids[i] ? jobids[i] : "";
    int rc = append_argv(r, (int)(2 * n + 5), argv, NULL);
    free(argv);
    return rc;
}

/* The keys of a job call: jr:{Q}:<name> for each name, then the uniq key of
 * id if `uniq`, into keys[] (storage in buf, JR_KEY_MAX + JR_ID_MAX each). */
static size_t job_keys(const char *queue, const char *id, const char *const *names, size_t n, int uniq,
                       char (*buf)[JR_KEY_MAX + JR_ID_MAX], const char **keys) {
    for (size_t i = 0; i < n; i++) {
        snprintf(buf[i], sizeof buf[i], "jr:{%s}:%s", queue, names[i]);
        keys[i] = buf[i];
    }
    if (uniq) {
        snprintf(buf[n], sizeof buf[n], "jr:{%s}:uniq:%s", queue, id);
        keys[n] = buf[n];
        n++;
    }
    return n;
}

/* FCALL fn with the keys of job_keys and the one argument id. */
static int job_fcall(jr_redis_t *r, const char *fn, const char *queue, const char *id,
                     const char *const *names, size_t n, int uniq, redisReply **out) {
    char buf[8][JR_KEY_MAX + JR_ID_MAX], nkeys[8];
    const char *argv[16];
    argv[0] = "FCALL", argv[1] = fn, argv[2] = nkeys;
    size_t nk = job_keys(queue, id, names, n, uniq, buf, argv + 3);
    snprintf(nkeys, sizeof nkeys, "%zu", nk);
    argv[3 + nk] = id;
    return exec_argv(r, out, (int)(4 + nk), argv, NULL);
}

static void copy_str(char *dst, size_t len, const redisReply *e) {
    snprintf(dst, len, "%.*s", e->type == REDIS_REPLY_STRING ? (int)e->len : 0,
             e->type == REDIS_REPLY_STRING ? e->str : "");
}

int jr_redis_job_locate(jr_redis_t *r, const char *queue, const char *id, jr_jobinfo_t *info) {
    static const char *const names[] = {"ready", "delayed", "ids", "dead"};
    batch_reset(&info->fields);
    redisReply *rep;
    int rc = job_fcall(r, "jr_locate", queue, id, names, 4, 0, &rep);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 8 || rep->element[7]->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        return fail(r, JR_EPROTO, "jr_locate: unexpected reply");
    }
    copy_str(info->state, sizeof info->state, rep->element[0]);
    copy_str(info->entry, sizeof info->entry, rep->element[2]);
    copy_str(info->due, sizeof info->due, rep->element[3]);
    copy_str(info->consumer, sizeof info->consumer, rep->element[4]);
    info->idle_ms = rep->element[5]->type == REDIS_REPLY_INTEGER ? rep->element[5]->integer : 0;
    info->deliveries = rep->element[6]->type == REDIS_REPLY_INTEGER ? rep->element[6]->integer : 0;
    /* The fields become one entry [entry or id, fields] of info->fields. */
    redisReply *entries = calloc(1, sizeof *entries), *en = calloc(1, sizeof *en), *name = calloc(1, sizeof *name);
    redisReply **pe = malloc(sizeof *pe), **pn = malloc(2 * sizeof *pn);
    char *idcopy = strdup(info->entry[0] ? info->entry : id);
    if (!entries || !en || !name || !pe || !pn || !idcopy) {
        free(entries), free(en), free(name), free(pe), free(pn), free(idcopy);
        freeReplyObject(rep);
        return fail(r, JR_ENOMEM, "out of memory");
    }
    name->type = REDIS_REPLY_STRING, name->str = idcopy, name->len = strlen(idcopy);
    en->type = REDIS_REPLY_ARRAY, en->elements = 2, en->element = pn;
    pn[0] = name, pn[1] = rep->element[7];
    rep->element[7] = NULL; /* moved: freeReplyObject skips NULL elements */
    entries->type = REDIS_REPLY_ARRAY, entries->elements = 1, entries->element = pe;
    pe[0] = en;
    freeReplyObject(rep);
    return batch_of_entries(r, "job", entries, &info->fields);
}

int jr_redis_job_change(jr_redis_t *r, const char *fn, const char *queue, const char *id, char *state,
                        size_t statelen, char *detail, size_t detaillen) {
    static const char *const cancel[] = {"ready", "delayed", "ids", "cancelled"};
    static const char *const run_now[] = {"ready", "delayed", "ids"};
    static const char *const del[] = {"ready", "delayed", "ids", "dead"};
    redisReply *rep;
    int rc;
    if (!strcmp(fn, "jr_cancel")) rc = job_fcall(r, fn, queue, id, cancel, 4, 1, &rep);
    else if (!strcmp(fn, "jr_run_now")) rc = job_fcall(r, fn, queue, id, run_now, 3, 0, &rep);
    else if (!strcmp(fn, "jr_delete")) rc = job_fcall(r, fn, queue, id, del, 4, 1, &rep);
    else return fail(r, JR_EINVAL, "no job function %s", fn);
    if (rc) return rc;
    if (detail && detaillen) detail[0] = '\0';
    if (rep->type == REDIS_REPLY_STRING) {
        copy_str(state, statelen, rep);
    } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[0]->type == REDIS_REPLY_STRING) {
        copy_str(state, statelen, rep->element[0]);
        if (detail && rep->element[1]->type == REDIS_REPLY_STRING) copy_str(detail, detaillen, rep->element[1]);
        else if (detail) snprintf(detail, detaillen, "%lld", rep->element[1]->integer);
    } else {
        rc = fail(r, JR_EPROTO, "%s: unexpected reply", fn);
    }
    freeReplyObject(rep);
    return rc;
}

void jr_jobinfo_free(jr_jobinfo_t *info) { jr_batch_free(&info->fields); }

int jr_redis_group_last_id(jr_redis_t *r, const char *queue, char *last) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    snprintf(last, JR_ID_MAX, "0-0");
    redisReply *rep;
    int rc = exec(r, &rep, "EXISTS", k.ready, NULL);
    if (rc) return rc;
    long long exists = rep->integer;
    freeReplyObject(rep);
    if (!exists) return 0;
    if ((rc = exec(r, &rep, "XINFO", "GROUPS", k.ready, NULL))) return rc;
    for (size_t g = 0; rep->type == REDIS_REPLY_ARRAY && g < rep->elements; g++) {
        const redisReply *gr = rep->element[g];
        int ours = 0;
        for (size_t i = 0; gr->type == REDIS_REPLY_ARRAY && i + 1 < gr->elements; i += 2)
            if (gr->element[i]->type == REDIS_REPLY_STRING && !strcmp(gr->element[i]->str, "name"))
                ours = gr->element[i + 1]->type == REDIS_REPLY_STRING && !strcmp(gr->element[i + 1]->str, JR_GROUP);
        for (size_t i = 0; ours && i + 1 < gr->elements; i += 2)
            if (!strcmp(gr->element[i]->str, "last-delivered-id")) copy_str(last, JR_ID_MAX, gr->element[i + 1]);
    }
    freeReplyObject(rep);
    return 0;
}

int jr_redis_pending_page(jr_redis_t *r, const char *queue, const char *start, int64_t count,
                          jr_pending_t **out, size_t *n) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    *out = NULL, *n = 0;
    char cnt[24];
    snprintf(cnt, sizeof cnt, "%lld", (long long)count);
    redisReply *rep;
    int rc = exec(r, &rep, "XPENDING", k.ready, JR_GROUP, start, "+", cnt, NULL);
    if (rc == JR_EREDIS && (strstr(r->err, "NOGROUP") || strstr(r->err, "no such key"))) return 0;
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements) {
        *out = calloc(rep->elements, sizeof **out);
        if (!*out) {
            freeReplyObject(rep);
            return fail(r, JR_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < rep->elements; i++) {
            const redisReply *e = rep->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements != 4) continue;
            jr_pending_t *p = &(*out)[(*n)++];
            copy_str(p->entry, sizeof p->entry, e->element[0]);
            copy_str(p->consumer, sizeof p->consumer, e->element[1]);
            p->idle_ms = e->element[2]->integer;
            p->deliveries = e->element[3]->integer;
        }
    }
    freeReplyObject(rep);
    return 0;
}

int jr_redis_zrange_page(jr_redis_t *r, const char *key, const char *min, int64_t skip, int64_t count,
                         jr_batch_t *b) {
    batch_reset(b);
    char off[24], cnt[24];
    snprintf(off, sizeof off, "%lld", (long long)skip);
    snprintf(cnt, sizeof cnt, "%lld", (long long)count);
    redisReply *rep;
    int rc = exec(r, &rep, "ZRANGE", key, min, "+inf", "BYSCORE", "LIMIT", off, cnt, "WITHSCORES", NULL);
    if (rc) return rc;
    /* [member, score, ...] -> entries [score, [member]]: one entry each. */
    size_t m = rep->type == REDIS_REPLY_ARRAY ? rep->elements / 2 : 0;
    redisReply *entries = calloc(1, sizeof *entries);
    redisReply **pe = calloc(m ? m : 1, sizeof *pe);
    if (!entries || !pe) {
        free(entries), free(pe);
        freeReplyObject(rep);
        return fail(r, JR_ENOMEM, "out of memory");
    }
    entries->type = REDIS_REPLY_ARRAY, entries->element = pe;
    for (size_t i = 0; i < m; i++) {
        redisReply *en = calloc(1, sizeof *en), *fields = calloc(1, sizeof *fields);
        redisReply **pn = malloc(2 * sizeof *pn), **pf = malloc(2 * sizeof *pf);
        if (!en || !fields || !pn || !pf) {
            free(en), free(fields), free(pn), free(pf);
            freeReplyObject(entries);
            freeReplyObject(rep);
            return fail(r, JR_ENOMEM, "out of memory");
        }
        /* name "m" = the member, so the batch's entry id is the score */
        redisReply *name = calloc(1, sizeof *name);
        char *mname = strdup("m");
        if (!name || !mname) {
            free(name), free(mname), free(en), free(fields), free(pn), free(pf);
            freeReplyObject(entries);
            freeReplyObject(rep);
            return fail(r, JR_ENOMEM, "out of memory");
        }
        name->type = REDIS_REPLY_STRING, name->str = mname, name->len = 1;
        fields->type = REDIS_REPLY_ARRAY, fields->elements = 2, fields->element = pf;
        pf[0] = name, pf[1] = rep->element[2 * i];
        en->type = REDIS_REPLY_ARRAY, en->elements = 2, en->element = pn;
        pn[0] = rep->element[2 * i + 1], pn[1] = fields;
        rep->element[2 * i] = rep->element[2 * i + 1] = NULL;
        pe[entries->elements++] = en;
    }
    freeReplyObject(rep);
    return batch_of_entries(r, key, entries, b);
}

int jr_redis_entry_cancelled(jr_redis_t *r, const char *queue, const char *entry) {
    char key[JR_KEY_MAX];
    snprintf(key, sizeof key, "jr:{%s}:cancelled", queue);
    redisReply *rep;
    int rc = exec(r, &rep, "HEXISTS", key, entry, NULL);
    if (rc) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    freeReplyObject(rep);
    return rc;
}

int jr_redis_cancelled_entries(jr_redis_t *r, const char *queue, const char *const *ids, size_t n,
                               unsigned char *cancelled) {
    memset(cancelled, 0, n);
    char key[JR_KEY_MAX];
    snprintf(key, sizeof key, "jr:{%s}:cancelled", queue);
    const char **argv = malloc((n + 2) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "HMGET", argv[1] = key;
    memcpy(argv + 2, ids, n * sizeof *ids);
    redisReply *rep;
    int rc = exec_argv(r, &rep, (int)(n + 2), argv, NULL);
    free(argv);
    if (rc) return rc;
    int got = 0;
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements && i < n; i++)
        if (rep->element[i]->type == REDIS_REPLY_STRING) cancelled[i] = 1, got++;
    freeReplyObject(rep);
    return got;
}

/* ---- priorities and pause (see docs/redis-contract.md) -------------------- */

/* Append HMGET JR_PAUSED_KEY <queues...>. */
static int append_paused(jr_redis_t *r, const char *const *queues, size_t n) {
    const char **argv = malloc((n + 2) * sizeof *argv);
    if (!argv) return fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "HMGET", argv[1] = JR_PAUSED_KEY;
    for (size_t i = 0; i < n; i++) argv[2 + i] = queues[i];
    int rc = append_argv(r, (int)(n + 2), argv, NULL);
    free(argv);
    return rc;
}

/* Read the HMGET reply of append_paused: paused[i] = 1 where queue i has a
 * value. An error reply is JR_EREDIS (paused unchanged). */
static int recv_paused(jr_redis_t *r, size_t n, unsigned char *paused) {
    redisReply *rep;
    int rc = recv_reply(r, &rep, r->timeout_us);
    if (rc || (rc = reply_error(r, rep))) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n) {
        freeReplyObject(rep);
        return fail(r, JR_EPROTO, "HMGET %s: unexpected reply", JR_PAUSED_KEY);
    }
    for (size_t i = 0; i < n; i++) paused[i] = rep->element[i]->type != REDIS_REPLY_NIL;
    freeReplyObject(rep);
    return 0;
}

int jr_redis_paused(jr_redis_t *r, const char *const *queues, size_t n, unsigned char *paused) {
    int rc = append_paused(r, queues, n);
    if (rc || (rc = jr_redis_flush(r))) return rc;
    return recv_paused(r, n, paused);
}

int jr_redis_read_each(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                       const int64_t *counts, jr_batch_t *b, unsigned char *paused) {
    batch_reset(b);
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (counts[i] <= 0) continue;
        char cnt[24];
        jr_qkeys_t q;
        jr_qkeys(&q, queues[i]);
        snprintf(cnt, sizeof cnt, "%lld", (long long)counts[i]);
        const char *argv[] = {"XREADGROUP", "GROUP", JR_GROUP, consumer, "COUNT", cnt, "STREAMS", q.ready, ">"};
        rc = append_argv(r, 9, argv, NULL);
        k++;
    }
    if (rc || (rc = append_paused(r, queues, n)) || (rc = jr_redis_flush(r))) return rc;
    if (k > b->morecap + 1) {
        void **m = realloc(b->more, (k - 1) * sizeof *m);
        if (!m) return fail(r, JR_ENOMEM, "out of memory"); /* the connection is then dropped */
        b->more = m, b->morecap = k - 1;
    }
    /* Read every reply (the batch owns them), then count, reserve and fill. */
    int first_err = 0;
    size_t entries = 0, strs = 0;
    for (size_t i = 0; i < k; i++) {
        redisReply *rep;
        if ((rc = recv_reply(r, &rep, r->timeout_us))) return rc;
        if (i == 0) b->reply = rep;
        else b->more[b->nmore++] = rep;
        if (rep->type == REDIS_REPLY_ERROR) {
            if (!first_err) first_err = fail(r, JR_EREDIS, "%s", rep->str);
        } else if (!first_err && (rc = count_streams(r, rep, &entries, &strs))) {
            first_err = rc;
        }
    }
    if ((rc = recv_paused(r, n, paused)) || first_err) return first_err ? first_err : rc;
    if (batch_reserve(b, entries, strs)) return fail(r, JR_ENOMEM, "out of memory");
    for (size_t i = 0; i < k && !rc; i++) rc = fill_streams(r, b, i ? b->more[i - 1] : b->reply, queues, n, 0);
    return rc;
}

int jr_redis_send_read_paused(jr_redis_t *r, const char *consumer, const char *const *queues, size_t n,
                              const unsigned char *on, int64_t count, int64_t block_ms) {
    const char **sel = malloc((n ? n : 1) * sizeof *sel);
    if (!sel) return fail(r, JR_ENOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (on[i]) sel[m++] = queues[i];
    int rc;
    if (m) {
        rc = jr_redis_send_read(r, consumer, sel, m, count, block_ms); /* flushes; the HMGET follows at once */
    } else { /* nothing to read: wait on a key nobody writes until the period ends or CLIENT UNBLOCK */
        char blk[24];
        snprintf(blk, sizeof blk, "%lld", (long long)block_ms);
        const char *argv[] = {"XREAD", "BLOCK", blk, "STREAMS", JR_RESUMED_KEY, "$"};
        rc = append_argv(r, 6, argv, NULL);
    }
    free(sel);
    if (!rc) rc = append_paused(r, queues, n);
    return rc ? rc : jr_redis_flush(r);
}

int jr_redis_recv_read_paused(jr_redis_t *r, jr_batch_t *b, const char *const *queues, size_t n, int any_on,
                              unsigned char *paused) {
    batch_reset(b);
    redisReply *rep;
    int rc = recv_reply(r, &rep, r->timeout_us);
    if (rc) return rc;
    int prc = recv_paused(r, n, paused); /* always read: the connection stays in step */
    if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "UNBLOCKED", 9) == 0) {
        freeReplyObject(rep);
        return prc;
    }
    if ((rc = reply_error(r, rep))) return rc;
    if (!any_on) { /* the wait on JR_RESUMED_KEY: nothing to take */
        freeReplyObject(rep);
        return prc;
    }
    if ((rc = parse_streams(r, b, rep, queues, n, 0))) return rc;
    return prc;
}

int jr_redis_pause(jr_redis_t *r, const char *queue, int on, int64_t now_ms, int *changed) {
    char ms[24];
    snprintf(ms, sizeof ms, "%lld", (long long)now_ms);
    redisReply *rep;
    int rc = on ? exec(r, &rep, "HSETNX", JR_PAUSED_KEY, queue, ms, NULL)
                : exec(r, &rep, "HDEL", JR_PAUSED_KEY, queue, NULL);
    if (rc) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? (*changed = rep->integer != 0, 0)
                                          : fail(r, JR_EPROTO, "pause: unexpected reply");
    freeReplyObject(rep);
    return rc;
}

int jr_redis_paused_since(jr_redis_t *r, const char *const *queues, size_t n, long long *since_ms) {
    int rc = append_paused(r, queues, n);
    if (rc || (rc = jr_redis_flush(r))) return rc;
    redisReply *rep;
    if ((rc = recv_reply(r, &rep, r->timeout_us)) || (rc = reply_error(r, rep))) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n) {
        freeReplyObject(rep);
        return fail(r, JR_EPROTO, "HMGET %s: unexpected reply", JR_PAUSED_KEY);
    }
    for (size_t i = 0; i < n; i++)
        since_ms[i] = rep->element[i]->type == REDIS_REPLY_STRING ? strtoll(rep->element[i]->str, NULL, 10)
                      : -1;
    freeReplyObject(rep);
    return 0;
}

/* ---- periodic schedules --------------------------------------------------- */

static int int_reply(jr_redis_t *r, redisReply *rep, const char *fn, long long *v) {
    if (rep->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(rep);
        return fail(r, JR_EPROTO, "%s: unexpected reply", fn);
    }
    *v = rep->integer;
    freeReplyObject(rep);
    return 0;
}

int jr_redis_cron_set(jr_redis_t *r, const char *name, const char *def, int *changed) {
    redisReply *rep;
    long long v = 0;
    int rc = exec(r, &rep, "FCALL", "jr_cron_set", "2", JR_CRON_KEY, JR_CRON_WAKE_KEY, name, def, NULL);
    if (!rc) rc = int_reply(r, rep, "jr_cron_set", &v);
    if (changed) *changed = v == 1;
    return rc;
}

int jr_redis_cron_del(jr_redis_t *r, const char *name, int *removed) {
    redisReply *rep;
    long long v = 0;
    int rc = exec(r, &rep, "FCALL", "jr_cron_del", "3", JR_CRON_KEY, JR_CRON_LAST_KEY, JR_CRON_WAKE_KEY, name,
                  NULL);
    if (!rc) rc = int_reply(r, rep, "jr_cron_del", &v);
    if (removed) *removed = v == 1;
    return rc;
}

int jr_redis_cron_fired(jr_redis_t *r, const char *name, int64_t tick_ms, const char *job_id) {
    redisReply *rep;
    long long v;
    char t[24];
    snprintf(t, sizeof t, "%lld", (long long)tick_ms);
    int rc = exec(r, &rep, "FCALL", "jr_cron_fired", "2", JR_CRON_KEY, JR_CRON_LAST_KEY, name, t, job_id, NULL);
    return rc ? rc : int_reply(r, rep, "jr_cron_fired", &v);
}

void jr_cron_entries_free(jr_cron_entry_t *v, size_t n) {
    for (size_t i = 0; v && i < n; i++) free(v[i].name), free(v[i].def), free(v[i].last);
    free(v);
}

int jr_redis_cron_list(jr_redis_t *r, jr_cron_entry_t **out, size_t *n, char *wake_id) {
    redisReply *rep;
    *out = NULL, *n = 0;
    int rc = exec(r, &rep, "FCALL", "jr_cron_list", "3", JR_CRON_KEY, JR_CRON_LAST_KEY, JR_CRON_WAKE_KEY, NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 || (rep->elements - 1) % 3 != 0) {
        freeReplyObject(rep);
        return fail(r, JR_EPROTO, "jr_cron_list: unexpected reply");
    }
    for (size_t i = 0; i < rep->elements; i++)
        if (rep->element[i]->type != REDIS_REPLY_STRING) {
            freeReplyObject(rep);
            return fail(r, JR_EPROTO, "jr_cron_list: unexpected reply");
        }
    snprintf(wake_id, JR_ID_MAX, "%s", rep->element[0]->str);
    size_t k = (rep->elements - 1) / 3;
    jr_cron_entry_t *v = calloc(k ? k : 1, sizeof *v);
    if (!v) rc = fail(r, JR_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < k; i++) {
        v[i].name = strdup(rep->element[1 + 3 * i]->str);
        v[i].def = strdup(rep->element[2 + 3 * i]->str);
        v[i].last = strdup(rep->element[3 + 3 * i]->str);
        if (!v[i].name || !v[i].def || !v[i].last) rc = fail(r, JR_ENOMEM, "out of memory");
    }
    freeReplyObject(rep);
    if (rc) {
        jr_cron_entries_free(v, k);
        return rc;
    }
    *out = v, *n = k;
    return 0;
}

int64_t jr_cron_last_parse(const char *last, const char **job) {
    char *end;
    *job = "";
    if (!last || !*last) return -1;
    long long t = strtoll(last, &end, 10);
    if (end == last || *end != ' ' || t < 0) return -1;
    *job = end + 1;
    return t;
}

int jr_redis_time_ms(jr_redis_t *r, double *ms) {
    redisReply *rep;
    int rc = exec(r, &rep, "TIME", NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
        rep->element[1]->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        return fail(r, JR_EPROTO, "TIME: unexpected reply");
    }
    *ms = strtod(rep->element[0]->str, NULL) * 1000.0 + strtod(rep->element[1]->str, NULL) / 1000.0;
    freeReplyObject(rep);
    return 0;
}
