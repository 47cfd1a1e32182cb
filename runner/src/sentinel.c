/* Redis Sentinel: see sentinel.h. */
#include "sentinel.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "jr.h"

void jr_sentinel_addr_format(const char *host, int port, char *out, size_t outlen) {
    snprintf(out, outlen, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* Append "; " (unless first) and the formatted text to buf. */
static void say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *buf, size_t len, const char *fmt, ...) {
    size_t used = strlen(buf);
    if (used + 1 >= len) return;
    if (used) snprintf(buf + used, len - used, "; "), used = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

/* A connection to sentinel number i of u, authenticated, with every read
 * and write bounded by timeout_ms; NULL with the reason in why. */
static redisContext *sentinel_connect(const jr_redis_url_t *u, size_t i, const char *password, int64_t timeout_ms,
                                      char *why, size_t whylen) {
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(u->sentinels[i].host, u->sentinels[i].port, tv);
    if (!c || c->err) {
        snprintf(why, whylen, "%s", c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (password) {
        redisReply *rep = redisCommand(c, "AUTH %s", password);
        if (!rep || rep->type == REDIS_REPLY_ERROR) {
            snprintf(why, whylen, "AUTH with redis.sentinel_password: %s", rep ? rep->str : c->errstr);
            if (rep) freeReplyObject(rep);
            redisFree(c);
            return NULL;
        }
        freeReplyObject(rep);
    }
    return c;
}

int jr_sentinel_ask(const jr_redis_url_t *u, const char *password, int64_t timeout_ms, size_t first, char *host,
                    size_t hostlen, int *port, size_t *which, char *why, size_t whylen) {
    why[0] = '\0';
    size_t unknown = 0;
    for (size_t k = 0; k < u->nsentinels; k++) {
        size_t i = (first + k) % u->nsentinels;
        char addr[300], e[256];
        jr_sentinel_addr_format(u->sentinels[i].host, u->sentinels[i].port, addr, sizeof addr);
        redisContext *c = sentinel_connect(u, i, password, timeout_ms, e, sizeof e);
        if (!c) {
            say(why, whylen, "sentinel %s: %s", addr, e);
            continue;
        }
        redisReply *rep = redisCommand(c, "SENTINEL get-master-addr-by-name %s", u->master);
        if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[0]->type == REDIS_REPLY_STRING &&
            rep->element[1]->type == REDIS_REPLY_STRING && atoi(rep->element[1]->str) > 0) {
            snprintf(host, hostlen, "%s", rep->element[0]->str);
            *port = atoi(rep->element[1]->str);
            *which = i;
            freeReplyObject(rep);
            redisFree(c);
            return 0;
        }
        if (rep && rep->type == REDIS_REPLY_NIL) {
            unknown++;
            say(why, whylen, "sentinel %s: does not know master %s", addr, u->master);
        } else {
            const char *said = !rep ? c->errstr : rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply";
            say(why, whylen, "sentinel %s: SENTINEL get-master-addr-by-name: %s%s", addr, said,
                !strncmp(said, "NOAUTH", 6) ? " (the sentinels want a password: set redis.sentinel_password)" : "");
        }
        if (rep) freeReplyObject(rep);
        redisFree(c);
    }
    if (unknown == u->nsentinels) say(why, whylen, "no sentinel knows master %s", u->master);
    return JR_EIO;
}

struct jr_sentinel_sub {
    redisContext *c;
};

jr_sentinel_sub_t *jr_sentinel_subscribe(const jr_redis_url_t *u, size_t which, const char *password,
                                         int64_t timeout_ms) {
    for (size_t k = 0; k < u->nsentinels; k++) {
        char e[256];
        redisContext *c = sentinel_connect(u, (which + k) % u->nsentinels, password, timeout_ms, e, sizeof e);
        if (!c) continue;
        redisReply *rep = redisCommand(c, "SUBSCRIBE +switch-master");
        int ok = rep && rep->type == REDIS_REPLY_ARRAY;
        if (rep) freeReplyObject(rep);
        jr_sentinel_sub_t *s = ok ? malloc(sizeof *s) : NULL;
        if (!s) {
            redisFree(c);
            continue;
        }
        s->c = c;
        return s;
    }
    return NULL;
}

int jr_sentinel_sub_fd(const jr_sentinel_sub_t *s) { return s->c->fd; }

/* "+switch-master" messages: ["message", "+switch-master",
 * "MASTER OLD_IP OLD_PORT NEW_IP NEW_PORT"]. */
int jr_sentinel_sub_read(jr_sentinel_sub_t *s, const char *master, char *to, size_t tolen) {
    struct pollfd p = {.fd = s->c->fd, .events = POLLIN};
    int switched = 0;
    while (poll(&p, 1, 0) == 1) {
        if (redisBufferRead(s->c) != REDIS_OK) return -1; /* closed or failed */
        void *rep = NULL;
        for (;;) {
            if (redisGetReplyFromReader(s->c, &rep) != REDIS_OK) return -1;
            if (!rep) break;
            redisReply *m = rep;
            if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 && m->element[2]->type == REDIS_REPLY_STRING) {
                char name[256], oh[256], nh[256];
                int op, np;
                if (sscanf(m->element[2]->str, "%255s %255s %d %255s %d", name, oh, &op, nh, &np) == 5 &&
                    !strcmp(name, master)) {
                    jr_sentinel_addr_format(nh, np, to, tolen);
                    switched = 1;
                }
            }
            freeReplyObject(m);
        }
    }
    return switched;
}

void jr_sentinel_sub_free(jr_sentinel_sub_t *s) {
    if (!s) return;
    redisFree(s->c);
    free(s);
}

/* The primaries this process connected to, by master name (a process
 * follows one or a few masters: a short list). */
static pthread_mutex_t known_mu = PTHREAD_MUTEX_INITIALIZER;
static struct known {
    char master[JR_MASTER_NAME_MAX + 1], addr[300];
} known[8];
static size_t nknown;

int jr_sentinel_note_primary(const char *master, const char *addr, char *from, size_t fromlen) {
    int moved = 0;
    pthread_mutex_lock(&known_mu);
    size_t i = 0;
    while (i < nknown && strcmp(known[i].master, master)) i++;
    if (i == nknown && nknown < sizeof known / sizeof known[0]) {
        nknown++;
        snprintf(known[i].master, sizeof known[i].master, "%s", master);
        snprintf(known[i].addr, sizeof known[i].addr, "%s", addr);
    } else if (i < nknown && strcmp(known[i].addr, addr)) {
        snprintf(from, fromlen, "%s", known[i].addr);
        snprintf(known[i].addr, sizeof known[i].addr, "%s", addr);
        moved = 1;
    }
    pthread_mutex_unlock(&known_mu);
    return moved;
}
