/* The Redis layer, admin part: see redis_admin.h. */
#include "redis_admin.h"
#include "redis_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jr.h"
#include "jr_limits.h"
#include "redis_partition.h"
#include "redis_sched.h"
#include "util.h"

int jr_redis_dead_retry(jr_redis_t *r, const char *queue, const char *const *entries, size_t n,
                        long long *moved) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    const char **argv = malloc((n + 6) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "FCALL", argv[1] = "jr_dead_retry", argv[2] = "3", argv[3] = k.dead, argv[4] = k.ready, argv[5] = k.ids;
    memcpy(argv + 6, entries, n * sizeof *entries);
    redisReply *rep;
    int rc = jri_exec_argv(r, &rep, (int)(n + 6), argv, NULL);
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
        if ((rc = jri_exec(r, &rep, "XLEN", k.dead, NULL))) return rc;
        *removed = rep->integer;
        freeReplyObject(rep);
        if ((rc = jri_exec(r, &rep, "DEL", k.dead, NULL))) return rc;
        freeReplyObject(rep);
        return 0;
    }
    const char **argv = malloc((n + 2) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "XDEL", argv[1] = k.dead;
    memcpy(argv + 2, entries, n * sizeof *entries);
    rc = jri_exec_argv(r, &rep, (int)(n + 2), argv, NULL);
    free(argv);
    if (rc) return rc;
    *removed = rep->integer;
    freeReplyObject(rep);
    return 0;
}

int jr_redis_stats(jr_redis_t *r, const char *queue, jr_qstats_t *s) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    memset(s, 0, sizeof *s);
    s->oldest_ready_ms = -1;
    /* delayed = the sorted set (near tier) + the jobs in time-wheel buckets */
    const char *cmds[7][4] = {{"XLEN", k.ready}, {"ZCARD", k.delayed}, {"XPENDING", k.ready, JR_GROUP},
                              {"XLEN", k.dead},  {"HGETALL", k.stats},  {"TIME"}, {"GET", k.wheel_n}};
    int argcs[7] = {2, 2, 3, 2, 2, 1, 2};
    int rc;
    for (int i = 0; i < 7; i++)
        if ((rc = jri_append_argv(r, argcs[i], cmds[i], NULL))) return rc;
    if ((rc = jr_redis_flush(r))) return rc;
    long long len = 0, now_s = 0, now_ms = 0, in_window = 0;
    long long t[60] = {0}, c[60] = {0}; /* the ring of jr_ack: second, jobs in it */
    int first_err = 0, bad_ready = 0;
    for (int i = 0; i < 7; i++) {
        redisReply *rep;
        if ((rc = jri_recv_reply(r, &rep, r->timeout_us))) return rc;
        if (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "WRONGTYPE", 9)) {
            /* garbage in this key: its counts are unknown, the others stand */
            if (!s->problem[0])
                snprintf(s->problem, sizeof s->problem, "key \"%s\" holds another type", cmds[i][1]);
            if (i == 0 || i == 2) bad_ready = 1;
            else if (i == 1 || i == 6) s->delayed = -1;
            else if (i == 3) s->dead = -1;
            else if (i == 4) s->processed = s->failed = -1, s->rate = -1;
        } else if (i == 6) {
            if (s->delayed >= 0 && rep->type == REDIS_REPLY_STRING) {
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
            jri_fail(r, JR_EREDIS, "%s", rep->str);
            first_err = JR_EREDIS;
        }
        freeReplyObject(rep);
    }
    for (int j = 0; j < 60; j++)
        if (t[j] > now_s - 60 && t[j] <= now_s) in_window += c[j];
    if (s->rate >= 0) s->rate = (double)in_window / 60.0;
    /* Acknowledged entries are deleted, so the stream holds exactly the
     * ready and the pending ones. */
    s->ready = len - s->pending;
    if (s->ready < 0) s->ready = 0;
    if (bad_ready) s->ready = s->pending = -1;
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

int jr_redis_history(jr_redis_t *r, const char *queue, int64_t minutes, int64_t *start_minute,
                     long long *processed, long long *failed) {
    if (minutes < 1 || minutes > JR_HISTORY_MINUTES) { /* the caller's mistake: the connection stays usable */
        snprintf(r->err, sizeof r->err, "history: minutes must be 1..%d, got %lld", JR_HISTORY_MINUTES,
                 (long long)minutes);
        return JR_EINVAL;
    }
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    redisReply *rep;
    int rc = jri_exec(r, &rep, "TIME", NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "TIME: unexpected reply");
    }
    int64_t now = strtoll(rep->element[0]->str, NULL, 10) / 60, start = now - minutes + 1;
    freeReplyObject(rep);
    const char **argv = malloc((size_t)(minutes + 2) * sizeof *argv);
    char (*slot)[8] = malloc((size_t)minutes * sizeof *slot);
    if (!argv || !slot) {
        free(argv), free(slot);
        return jri_fail(r, JR_ENOMEM, "out of memory");
    }
    argv[0] = "HMGET", argv[1] = k.history;
    for (int64_t i = 0; i < minutes; i++) {
        snprintf(slot[i], sizeof slot[i], "%lld", (long long)((start + i) % JR_HISTORY_MINUTES));
        argv[i + 2] = slot[i];
    }
    rc = jri_exec_argv(r, &rep, (int)(minutes + 2), argv, NULL);
    free(argv), free(slot);
    if (rc == JR_EREDIS) { /* WRONGTYPE: name the key */
        char why[256];
        snprintf(why, sizeof why, "%s", jr_redis_errstr(r));
        return jri_fail(r, JR_EREDIS, "key \"%s\": %s", k.history, why);
    }
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != (size_t)minutes) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "HMGET %s: unexpected reply", k.history);
    }
    *start_minute = start;
    for (int64_t i = 0; i < minutes; i++) {
        const redisReply *v = rep->element[i];
        long long m = -1, p = 0, f = 0;
        int used = 0;
        processed[i] = failed[i] = 0;
        /* "<minute> <processed> <failed>" (count() in 00-common.lua) */
        if (v->type == REDIS_REPLY_STRING && sscanf(v->str, "%lld %lld %lld%n", &m, &p, &f, &used) == 3 &&
            (size_t)used == v->len && m == start + i && p >= 0 && f >= 0)
            processed[i] = p, failed[i] = f;
    }
    freeReplyObject(rep);
    return 0;
}

/* ---- the process registry ------------------------------------------------ */

/* The key of the process `name` into buf (JR_PROC_NAME_MAX + 16 bytes hold
 * any name shorter than JR_PROC_NAME_MAX). Returns 0, or JR_EINVAL when the
 * name is too long to be a process's (never cut short: a shortened key would
 * name another process). */
static int proc_key(char *buf, size_t len, const char *name) {
    int n = snprintf(buf, len, "%s:%s", JR_PROCS_KEY, name);
    return n < 0 || (size_t)n >= len || strlen(name) >= JR_PROC_NAME_MAX ? JR_EINVAL : 0;
}

/* 1 if a member of the index (a string reply) cannot be a process's name:
 * too long for its key or with a NUL byte. It has no entry: the listing
 * treats it as expired. */
static int proc_name_bad(const redisReply *e) { return e->len >= JR_PROC_NAME_MAX || memchr(e->str, '\0', e->len); }

int jr_redis_proc_announce(jr_redis_t *r, const jr_proc_t *p) {
    char key[JR_PROC_NAME_MAX + 16], pid[24], started[24], running[24], lease[24], client[24], cap[24];
    if (proc_key(key, sizeof key, p->name)) return jri_fail(r, JR_EINVAL, "process name too long: %s", p->name);
    snprintf(pid, sizeof pid, "%lld", p->pid);
    snprintf(started, sizeof started, "%lld", p->started_ms);
    snprintf(running, sizeof running, "%lld", p->running);
    snprintf(lease, sizeof lease, "%lld", p->lease_ms);
    snprintf(client, sizeof client, "%lld", p->client_id);
    snprintf(cap, sizeof cap, "%lld", p->capacity);
    const char *hset[] = {"HSET", key, "role", p->role, "host", p->host, "pid", pid, "queues",
                          p->queues ? p->queues : "", "version", p->version, "started", started,
                          "running", running, "lease", lease, "capacity", cap, "client", client};
    const char *multi[] = {"MULTI"}, *exec_[] = {"EXEC"};
    const char *pexpire[] = {"PEXPIRE", key, lease};
    const char *zadd[] = {"ZADD", JR_PROCS_KEY, started, p->name};
    int rc;
    if ((rc = jri_append_argv(r, 1, multi, NULL)) || (rc = jri_append_argv(r, p->client_id > 0 ? 22 : 20, hset, NULL)) ||
        (rc = jri_append_argv(r, 3, pexpire, NULL)) || (rc = jri_append_argv(r, 4, zadd, NULL)) ||
        (rc = jri_append_argv(r, 1, exec_, NULL)) || (rc = jr_redis_flush(r)))
        return rc;
    redisReply *rep;
    if ((rc = jri_recv_n(r, 5, &rep))) return rc;
    /* EXEC answers with the commands' replies; one may be an error (OOM). */
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements && !rc; i++)
        if (rep->element[i]->type == REDIS_REPLY_ERROR) rc = jri_fail(r, JR_EREDIS, "%s", rep->element[i]->str);
    if (!rc && rep->type != REDIS_REPLY_ARRAY) rc = jri_fail(r, JR_EPROTO, "announce: unexpected EXEC reply");
    freeReplyObject(rep);
    return rc;
}

int jr_redis_proc_renew(jr_redis_t *r, const char *name, long long lease_ms, int *renewed) {
    char key[JR_PROC_NAME_MAX + 16], lease[24];
    if (proc_key(key, sizeof key, name)) return jri_fail(r, JR_EINVAL, "process name too long: %s", name);
    snprintf(lease, sizeof lease, "%lld", lease_ms);
    redisReply *rep;
    int rc = jri_exec(r, &rep, "PEXPIRE", key, lease, NULL);
    if (rc) return rc;
    *renewed = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    freeReplyObject(rep);
    return 0;
}

int jr_redis_proc_remove(jr_redis_t *r, const char *name) {
    char key[JR_PROC_NAME_MAX + 16];
    if (proc_key(key, sizeof key, name)) return jri_fail(r, JR_EINVAL, "process name too long: %s", name);
    const char *del[] = {"DEL", key}, *zrem[] = {"ZREM", JR_PROCS_KEY, name};
    int rc;
    if ((rc = jri_append_argv(r, 2, del, NULL)) || (rc = jri_append_argv(r, 3, zrem, NULL)) || (rc = jr_redis_flush(r)))
        return rc;
    return jri_recv_n(r, 2, NULL);
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
        else if (!strcmp(f, "capacity")) p->capacity = strtoll(v, NULL, 10);
    }
    return 1;
}

int jr_redis_proc_list(jr_redis_t *r, jr_proc_t **out, size_t *n) {
    *out = NULL, *n = 0;
    redisReply *names;
    int rc = jri_exec(r, &names, "ZRANGE", JR_PROCS_KEY, "0", "-1", NULL);
    if (rc) return rc;
    size_t m = names->type == REDIS_REPLY_ARRAY ? names->elements : 0;
    jr_proc_t *v = calloc(m ? m : 1, sizeof *v);
    if (!v) {
        freeReplyObject(names);
        return jri_fail(r, JR_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < m && !rc; i++) {
        char key[JR_PROC_NAME_MAX + 16];
        if (names->element[i]->type != REDIS_REPLY_STRING) {
            freeReplyObject(names);
            free(v);
            return jri_fail(r, JR_EPROTO, "ZRANGE %s: unexpected reply", JR_PROCS_KEY);
        }
        if (proc_name_bad(names->element[i])) continue; /* not asked: forgotten below */
        proc_key(key, sizeof key, names->element[i]->str);
        const char *hg[] = {"HGETALL", key}, *pt[] = {"PTTL", key};
        if (!(rc = jri_append_argv(r, 2, hg, NULL))) rc = jri_append_argv(r, 2, pt, NULL);
    }
    if (!rc && m) rc = jr_redis_flush(r);
    size_t kept = 0, gone = 0;
    char garbage[JR_ERRLEN] = "";
    const char **stale = calloc(m + 4, sizeof *stale);
    if (!stale && !rc) rc = jri_fail(r, JR_ENOMEM, "out of memory");
    for (size_t i = 0; i < m && !rc; i++) {
        redisReply *h = NULL, *t = NULL;
        if (proc_name_bad(names->element[i])) { /* no entry can be under it: as expired */
            stale[4 + gone++] = names->element[i]->str;
            continue;
        }
        if ((rc = jri_recv_reply(r, &h, r->timeout_us))) break;
        if ((rc = jri_recv_reply(r, &t, r->timeout_us))) {
            freeReplyObject(h);
            break;
        }
        jr_proc_t *p = &v[kept];
        memset(p, 0, sizeof *p);
        if (h->type == REDIS_REPLY_ERROR) { /* garbage under a listed name: not a live process */
            char key[JR_PROC_NAME_MAX + 16];
            proc_key(key, sizeof key, names->element[i]->str);
            if (!garbage[0]) snprintf(garbage, sizeof garbage, "%s: %s (left out)", key, h->str);
        } else if (proc_from_hash(p, h) && t->type == REDIS_REPLY_INTEGER && t->integer != -2) {
            snprintf(p->name, sizeof p->name, "%s", names->element[i]->str);
            if (!p->queues && !(p->queues = strdup(""))) rc = jri_fail(r, JR_ENOMEM, "out of memory");
            long long ttl = t->integer >= 0 ? t->integer : p->lease_ms;
            p->seen_ago_ms = p->lease_ms > ttl ? p->lease_ms - ttl : 0;
            kept++;
        } else {
            free(p->queues), p->queues = NULL;
            stale[4 + gone++] = names->element[i]->str;
        }
        freeReplyObject(h), freeReplyObject(t);
    }
    if (!rc && gone) { /* best effort: the index forgets expired processes (atomically: jr_procs_forget) */
        /* FCALL jr_procs_forget 1+gone jr:{procs} jr:{procs}:<name>... <name>...: every key it reaches */
        const char **argv = calloc(4 + 2 * gone, sizeof *argv);
        char **keys = calloc(gone, sizeof *keys);
        char nkeys[24];
        size_t made = 0;
        for (; argv && keys && made < gone; made++) {
            size_t len = strlen(JR_PROCS_KEY) + 1 + strlen(stale[4 + made]) + 1;
            if (!(keys[made] = malloc(len))) break;
            snprintf(keys[made], len, "%s:%s", JR_PROCS_KEY, stale[4 + made]);
            argv[4 + made] = keys[made], argv[4 + gone + made] = stale[4 + made];
        }
        if (made < gone) {
            rc = jri_fail(r, JR_ENOMEM, "out of memory");
        } else {
            snprintf(nkeys, sizeof nkeys, "%zu", 1 + gone);
            argv[0] = "FCALL", argv[1] = "jr_procs_forget", argv[2] = nkeys, argv[3] = JR_PROCS_KEY;
            redisReply *rep = NULL;
            if (jri_exec_argv(r, &rep, (int)(4 + 2 * gone), argv, NULL) == 0) freeReplyObject(rep);
            if (!jr_redis_ok(r)) rc = JR_EIO;
            else r->err[0] = '\0';
        }
        for (size_t i = 0; keys && i < made; i++) free(keys[i]);
        free(keys), free(argv);
    }
    if (!rc) snprintf(r->err, sizeof r->err, "%s", garbage);
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
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "FCALL", argv[1] = "jr_prune_consumers", argv[2] = "1", argv[3] = k.ready, argv[4] = idle;
    for (size_t i = 0; i < nlive; i++) argv[5 + i] = live[i];
    redisReply *rep;
    int rc = jri_exec_argv(r, &rep, (int)(nlive + 5), argv, NULL);
    free(argv);
    if (rc) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? (*removed = rep->integer, 0)
                                          : jri_fail(r, JR_EPROTO, "jr_prune_consumers: unexpected reply");
    freeReplyObject(rep);
    return rc;
}

int jr_redis_group_last_id(jr_redis_t *r, const char *queue, char *last) {
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    snprintf(last, JR_ID_MAX, "0-0");
    redisReply *rep;
    int rc = jri_exec(r, &rep, "EXISTS", k.ready, NULL);
    if (rc) return rc;
    long long exists = rep->integer;
    freeReplyObject(rep);
    if (!exists) return 0;
    if ((rc = jri_exec(r, &rep, "XINFO", "GROUPS", k.ready, NULL))) return rc;
    for (size_t g = 0; rep->type == REDIS_REPLY_ARRAY && g < rep->elements; g++) {
        const redisReply *gr = rep->element[g];
        int ours = 0;
        for (size_t i = 0; gr->type == REDIS_REPLY_ARRAY && i + 1 < gr->elements; i += 2)
            if (gr->element[i]->type == REDIS_REPLY_STRING && !strcmp(gr->element[i]->str, "name"))
                ours = gr->element[i + 1]->type == REDIS_REPLY_STRING && !strcmp(gr->element[i + 1]->str, JR_GROUP);
        for (size_t i = 0; ours && i + 1 < gr->elements; i += 2)
            if (!strcmp(gr->element[i]->str, "last-delivered-id")) jri_copy_str(last, JR_ID_MAX, gr->element[i + 1]);
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
    int rc = jri_exec(r, &rep, "XPENDING", k.ready, JR_GROUP, start, "+", cnt, NULL);
    if (rc == JR_EREDIS && (strstr(r->err, "NOGROUP") || strstr(r->err, "no such key"))) return 0;
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements) {
        *out = calloc(rep->elements, sizeof **out);
        if (!*out) {
            freeReplyObject(rep);
            return jri_fail(r, JR_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < rep->elements; i++) {
            const redisReply *e = rep->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements != 4) continue;
            jr_pending_t *p = &(*out)[(*n)++];
            jri_copy_str(p->entry, sizeof p->entry, e->element[0]);
            jri_copy_str(p->consumer, sizeof p->consumer, e->element[1]);
            p->idle_ms = e->element[2]->integer;
            p->deliveries = e->element[3]->integer;
        }
    }
    freeReplyObject(rep);
    return 0;
}

/* rep = [member, score, ...] (taken, freed) -> *b: entries [score,
 * ["m", member]], one each. */
static int members_to_batch(jr_redis_t *r, const char *key, redisReply *rep, jr_batch_t *b) {
    size_t m = rep->type == REDIS_REPLY_ARRAY ? rep->elements / 2 : 0;
    redisReply *entries = calloc(1, sizeof *entries);
    redisReply **pe = calloc(m ? m : 1, sizeof *pe);
    if (!entries || !pe) {
        free(entries), free(pe);
        freeReplyObject(rep);
        return jri_fail(r, JR_ENOMEM, "out of memory");
    }
    entries->type = REDIS_REPLY_ARRAY, entries->element = pe;
    for (size_t i = 0; i < m; i++) {
        redisReply *en = calloc(1, sizeof *en), *fields = calloc(1, sizeof *fields);
        redisReply **pn = malloc(2 * sizeof *pn), **pf = malloc(2 * sizeof *pf);
        if (!en || !fields || !pn || !pf) {
            free(en), free(fields), free(pn), free(pf);
            freeReplyObject(entries);
            freeReplyObject(rep);
            return jri_fail(r, JR_ENOMEM, "out of memory");
        }
        /* name "m" = the member, so the batch's entry id is the score */
        redisReply *name = calloc(1, sizeof *name);
        char *mname = strdup("m");
        if (!name || !mname) {
            free(name), free(mname), free(en), free(fields), free(pn), free(pf);
            freeReplyObject(entries);
            freeReplyObject(rep);
            return jri_fail(r, JR_ENOMEM, "out of memory");
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
    return jri_batch_of_entries(r, key, entries, b);
}

int jr_redis_zrange_page(jr_redis_t *r, const char *key, const char *min, int64_t skip, int64_t count,
                         jr_batch_t *b) {
    jri_batch_reset(b);
    char off[24], cnt[24];
    snprintf(off, sizeof off, "%lld", (long long)skip);
    snprintf(cnt, sizeof cnt, "%lld", (long long)count);
    redisReply *rep;
    int rc = jri_exec(r, &rep, "ZRANGE", key, min, "+inf", "BYSCORE", "LIMIT", off, cnt, "WITHSCORES", NULL);
    if (rc) return rc;
    return members_to_batch(r, key, rep, b);
}

int jr_redis_delayed_page(jr_redis_t *r, const char *queue, const char *after, int64_t count, jr_batch_t *b,
                          char *next, size_t nextlen) {
    jri_batch_reset(b);
    next[0] = '\0';
    jr_qkeys_t k;
    jr_qkeys(&k, queue);
    char cnt[24];
    snprintf(cnt, sizeof cnt, "%lld", (long long)count);
    redisReply *rep;
    int rc = jri_exec(r, &rep, "FCALL", "jr_delayed_page", "2", k.delayed, k.wheel, after ? after : "", cnt, NULL);
    if (rc) return rc;
    if ((rc = jri_reply_error(r, rep))) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 || rep->element[0]->type != REDIS_REPLY_STRING ||
        rep->element[0]->len >= nextlen || rep->elements % 2 != 1) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "jr_delayed_page: unexpected reply");
    }
    memcpy(next, rep->element[0]->str, rep->element[0]->len + 1);
    /* drop the cursor: [member, score, ...] remains */
    freeReplyObject(rep->element[0]);
    memmove(rep->element, rep->element + 1, (rep->elements - 1) * sizeof *rep->element);
    rep->elements--;
    return members_to_batch(r, k.delayed, rep, b);
}

int jr_redis_pause(jr_redis_t *r, const char *queue, int on, int64_t now_ms, int *changed) {
    char ms[24];
    snprintf(ms, sizeof ms, "%lld", (long long)now_ms);
    redisReply *rep;
    int rc = on ? jri_exec(r, &rep, "HSETNX", JR_PAUSED_KEY, queue, ms, NULL)
                : jri_exec(r, &rep, "HDEL", JR_PAUSED_KEY, queue, NULL);
    if (rc) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? (*changed = rep->integer != 0, 0)
                                          : jri_fail(r, JR_EPROTO, "pause: unexpected reply");
    freeReplyObject(rep);
    return rc;
}

int jr_redis_queues_known(jr_redis_t *r, const char *const *queues, size_t n, unsigned char *known) {
    jr_strlist_t all = {0};
    char wake[JR_ID_MAX];
    size_t left = 0;
    int rc = jr_redis_queues(r, &all, wake);
    for (size_t i = 0; !rc && i < n; i++) {
        size_t len = strlen(queues[i]);
        known[i] = 0;
        for (size_t j = 0; j < all.n && !known[i]; j++)
            known[i] = !strcmp(all.v[j], queues[i]) || (!strncmp(all.v[j], queues[i], len) && all.v[j][len] == '#');
        left += !known[i];
    }
    jr_strlist_free(&all);
    unsigned char *paused = left ? calloc(n, 1) : NULL;
    if (!rc && left && !paused) rc = jri_fail(r, JR_ENOMEM, "out of memory");
    if (!rc && left) rc = jr_redis_paused(r, queues, n, paused);
    for (size_t i = 0; !rc && i < n; i++) {
        if (known[i] || (known[i] = paused[i])) continue;
        jr_qkeys_t k;
        redisReply *rep;
        jr_qkeys(&k, queues[i]);
        if ((rc = jri_exec(r, &rep, "EXISTS", k.ready, k.delayed, k.dead, k.wheel, k.stats, NULL))) break;
        known[i] = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
        freeReplyObject(rep);
    }
    free(paused);
    return rc;
}

/* 1 if the comma-separated queue list of a process names q (as "q" or
 * with its weight, "q:N"). */
static int serves(const char *list, const char *q) {
    size_t n = strlen(q);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ","), i = n;
        if (len >= n && !memcmp(p, q, n) && (len == n || p[n] == ':')) {
            for (i = n + 1; i < len && p[i] >= '0' && p[i] <= '9'; i++) {}
            if (len == n || (i == len && len > n + 1)) return 1;
        }
        p += len + (p[len] == ',');
    }
    return 0;
}

int jr_redis_queue_remove(jr_redis_t *r, const char *q, long long *deleted) {
    *deleted = 0;
    jr_partmap_t m = {0};
    jr_qpart_t *p;
    int rc = jr_partmap_get(&m, r, q, &p);
    if (!rc && p->n > 1)
        rc = jri_fail(r, JR_EREDIS, "queue %s has %u partitions: make it one first ('jobrunner queue partitions %s 1', "
                                    "which it allows only while empty)", q, p->n, q);
    jr_partmap_free(&m);
    jr_proc_t *procs = NULL;
    size_t np = 0;
    if (!rc && !(rc = jr_redis_proc_list(r, &procs, &np)))
        for (size_t i = 0; i < np && !rc; i++)
            if (serves(procs[i].queues, q))
                rc = jri_fail(r, JR_EREDIS, "queue %s is served by the live %s %s: stop it (or take the queue out "
                                            "of its queues) first", q, procs[i].role, procs[i].name);
    jr_procs_free(procs, np);
    if (rc) return rc;
    /* every key of the queue (JR_QUEUE_KEYS), ready first */
    jr_qkeys_t k;
    jr_qkeys(&k, q);
    char nkeys[8];
    const char *argv[3 + JR_QK_COUNT] = {"FCALL", "jr_queue_remove", nkeys};
    int argc = 3;
#define JR_QK_ARG_(NAME, member, suffix) argv[argc++] = k.member;
    JR_QUEUE_KEYS(JR_QK_ARG_)
#undef JR_QK_ARG_
    snprintf(nkeys, sizeof nkeys, "%d", argc - 3);
    redisReply *rep;
    if ((rc = jri_exec_argv(r, &rep, argc, argv, NULL))) return rc;
    *deleted = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    const char *cmds[3][3] = {{"SREM", JR_REGISTRY_KEY, q}, {"HDEL", JR_PAUSED_KEY, q}, {"HDEL", JR_PARTITIONS_KEY, q}};
    for (int i = 0; i < 3 && !rc; i++)
        if (!(rc = jri_exec(r, &rep, cmds[i][0], cmds[i][1], cmds[i][2], NULL))) freeReplyObject(rep);
    return rc;
}

int jr_redis_paused_since(jr_redis_t *r, const char *const *queues, size_t n, long long *since_ms) {
    int rc = jri_append_paused(r, queues, n);
    if (rc || (rc = jr_redis_flush(r))) return rc;
    redisReply *rep;
    if ((rc = jri_recv_reply(r, &rep, r->timeout_us)) || (rc = jri_reply_error(r, rep))) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "HMGET %s: unexpected reply", JR_PAUSED_KEY);
    }
    for (size_t i = 0; i < n; i++)
        since_ms[i] = rep->element[i]->type == REDIS_REPLY_STRING ? strtoll(rep->element[i]->str, NULL, 10)
                      : -1;
    freeReplyObject(rep);
    return 0;
}

int jr_redis_server_info(jr_redis_t *r, const char *section, char **text) {
    redisReply *rep;
    *text = NULL;
    int rc = jri_exec(r, &rep, "INFO", section, NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_STRING) rc = jri_fail(r, JR_EPROTO, "INFO: unexpected reply");
    else if (!(*text = strndup(rep->str, rep->len))) rc = JR_ENOMEM;
    freeReplyObject(rep);
    return rc;
}
