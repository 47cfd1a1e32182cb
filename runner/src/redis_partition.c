/* Partitioned queues, the Redis side: see redis_partition.h. */
#include "redis_partition.h"
#include "redis_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "contract.h"
#include "jr.h"
#include "log.h"
#include "util.h"

void jr_partmap_free(jr_partmap_t *m) {
    for (size_t i = 0; i < m->n; i++) free(m->v[i].names);
    free(m->v);
    m->v = NULL, m->n = m->cap = 0;
}

/* Set p to n partitions of p->queue (computing the names). */
static int qpart_set(jr_qpart_t *p, unsigned n) {
    if (n == p->n && (n == 1 || p->names)) return 0;
    free(p->names);
    p->names = NULL;
    p->n = 1;
    if (n == 1) return 0;
    uint32_t *j = malloc(n * sizeof *j);
    p->names = malloc(n * sizeof *p->names);
    if (!j || !p->names || jr_partition_numbers(p->queue, n, j)) {
        int nomem = !j || !p->names;
        free(j), free(p->names);
        p->names = NULL;
        return nomem ? JR_ENOMEM : JR_EINVAL;
    }
    for (unsigned i = 0; i < n; i++) jr_partition_name(p->names[i], sizeof p->names[i], p->queue, j[i]);
    free(j);
    p->n = n;
    return 0;
}

/* A count as stored: decimal 1..1024, else 0. */
static unsigned parse_count(const char *s) {
    unsigned v = 0;
    if (!s || !*s || strlen(s) > 4) return 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (unsigned)(*p - '0');
    }
    return v >= 1 && v <= JR_PARTITIONS_MAX ? v : 0;
}

/* HGET the count of q: *n (1 when absent). */
static int read_count(jr_redis_t *r, const char *q, unsigned *n) {
    redisReply *rep;
    int rc = jri_exec(r, &rep, "HGET", JR_PARTITIONS_KEY, q, NULL);
    if (rc) return rc;
    if ((rc = jri_reply_error(r, rep))) return rc;
    *n = 1;
    if (rep->type == REDIS_REPLY_STRING && !(*n = parse_count(rep->str))) {
        rc = jri_fail(r, JR_EREDIS, "key \"%s\" field \"%s\" holds \"%.32s\", not a partition count 1..%d",
                      JR_PARTITIONS_KEY, q, rep->str, JR_PARTITIONS_MAX);
    }
    freeReplyObject(rep);
    return rc;
}

/* The entry of q in m, added (count 1, never read) if missing; NULL when
 * out of memory. */
static jr_qpart_t *entry_of(jr_partmap_t *m, const char *q) {
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->v[i].queue, q)) return &m->v[i];
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 8;
        jr_qpart_t *v = realloc(m->v, cap * sizeof *v);
        if (!v) return NULL;
        m->v = v, m->cap = cap;
    }
    jr_qpart_t *p = &m->v[m->n++];
    memset(p, 0, sizeof *p);
    p->n = 1;
    /* each process starts its round robin elsewhere: one-job producers (a
     * CLI enqueue each) spread too */
    p->next = (unsigned)(jr_mono_us() ^ ((uint64_t)getpid() << 16));
    snprintf(p->queue, sizeof p->queue, "%s", q);
    return p;
}

int jr_partmap_refresh(jr_partmap_t *m, jr_redis_t *r, const char *const *queues, size_t n) {
    if (!n) return 0;
    const char **argv = malloc((n + 2) * sizeof *argv);
    if (!argv) return jri_fail(r, JR_ENOMEM, "out of memory");
    argv[0] = "HMGET", argv[1] = JR_PARTITIONS_KEY;
    for (size_t i = 0; i < n; i++) argv[2 + i] = queues[i];
    redisReply *rep;
    int rc = jri_exec_argv(r, &rep, (int)(n + 2), argv, NULL);
    free(argv);
    if (rc || (rc = jri_reply_error(r, rep))) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n) {
        freeReplyObject(rep);
        return jri_fail(r, JR_EPROTO, "HMGET %s: unexpected reply", JR_PARTITIONS_KEY);
    }
    int64_t now = jr_mono_us();
    for (size_t i = 0; i < n && !rc; i++) {
        const redisReply *e = rep->element[i];
        unsigned c = e->type == REDIS_REPLY_STRING ? parse_count(e->str) : 1;
        if (!c) {
            rc = jri_fail(r, JR_EREDIS, "key \"%s\" field \"%s\" holds \"%.32s\", not a partition count 1..%d",
                          JR_PARTITIONS_KEY, queues[i], e->str, JR_PARTITIONS_MAX);
            break;
        }
        jr_qpart_t *p = entry_of(m, queues[i]);
        if (!p) rc = jri_fail(r, JR_ENOMEM, "out of memory");
        else if ((rc = qpart_set(p, c))) rc = jri_fail(r, rc, "cannot name the %u partitions of queue \"%s\"", c, queues[i]);
        else p->read_us = now;
    }
    freeReplyObject(rep);
    return rc;
}

int jr_partmap_get(jr_partmap_t *m, jr_redis_t *r, const char *q, jr_qpart_t **out) {
    jr_qpart_t *p = NULL;
    for (size_t i = 0; i < m->n && !p; i++)
        if (!strcmp(m->v[i].queue, q)) p = &m->v[i];
    int64_t now = jr_mono_us();
    if (p && (m->max_age_us <= 0 || now - p->read_us < m->max_age_us)) {
        *out = p;
        return 0;
    }
    if (strlen(q) > JR_QUEUE_MAX) return jri_fail(r, JR_EINVAL, "queue name \"%.64s...\" is too long", q);
    unsigned n;
    int rc = read_count(r, q, &n);
    if (rc) return rc;
    if (!p && !(p = entry_of(m, q))) return jri_fail(r, JR_ENOMEM, "out of memory");
    if ((rc = qpart_set(p, n))) return jri_fail(r, rc, "cannot name the %u partitions of queue \"%s\"", n, q);
    p->read_us = now;
    *out = p;
    return 0;
}

const char *jr_qpart_name(const jr_qpart_t *p, unsigned i) { return p->n > 1 ? p->names[i % p->n] : p->queue; }

int jr_qpart_index(const jr_qpart_t *p, const char *internal) {
    for (unsigned i = 0; i < p->n && p->names; i++)
        if (!strcmp(p->names[i], internal)) return (int)i;
    return -1;
}

/* a + b for counts where -1 is unknown */
static long long add_count(long long a, long long b) { return a < 0 || b < 0 ? -1 : a + b; }

int jr_redis_stats_parts(jr_redis_t *r, const jr_qpart_t *p, jr_qstats_t *s) {
    int rc = jr_redis_stats(r, jr_qpart_name(p, 0), s);
    /* the partitions, then (partitioned) Q itself: the jobs put there */
    for (unsigned i = 1; !rc && i < p->n + (p->n > 1); i++) {
        jr_qstats_t t;
        if ((rc = jr_redis_stats(r, i < p->n ? jr_qpart_name(p, i) : p->queue, &t))) break;
        s->ready = add_count(s->ready, t.ready), s->pending = add_count(s->pending, t.pending);
        s->delayed = add_count(s->delayed, t.delayed), s->dead = add_count(s->dead, t.dead);
        s->processed = add_count(s->processed, t.processed), s->failed = add_count(s->failed, t.failed);
        s->rate += t.rate;
        if (t.oldest_ready_ms > s->oldest_ready_ms) s->oldest_ready_ms = t.oldest_ready_ms;
        if (!s->problem[0] && t.problem[0]) memcpy(s->problem, t.problem, sizeof s->problem);
    }
    return rc;
}

/* Append the 4 keys jr_partitions_set checks of internal queue x. */
static void push_check_keys(const char **argv, int *a, char (*keys)[JR_KEY_MAX], size_t *k, const char *x) {
    static const enum jr_qkey which[4] = {JR_QK_READY, JR_QK_DELAYED, JR_QK_WHEEL_N, JR_QK_DEAD};
    for (int i = 0; i < 4; i++) {
        jr_queue_key(keys[*k], x, which[i]);
        argv[(*a)++] = keys[(*k)++];
    }
}

/* A paused queue stays paused over a change of its partitions: the new
 * partitions get its time in JR_PAUSED_KEY (workers read the partitions'
 * names there), the old ones that go are removed. Returns 0 or an error. */
static int carry_pause(jr_redis_t *r, const char *q, const jr_qpart_t *was, const jr_qpart_t *now) {
    redisReply *rep;
    int rc = jri_exec(r, &rep, "HGET", JR_PAUSED_KEY, q, NULL);
    if (rc || (rc = jri_reply_error(r, rep))) return rc;
    char since[64] = "";
    if (rep->type == REDIS_REPLY_STRING) snprintf(since, sizeof since, "%s", rep->str);
    freeReplyObject(rep);
    for (unsigned i = 0; !rc && was->names && i < was->n; i++)
        if (jr_qpart_index(now, was->names[i]) < 0 &&
            !(rc = jri_exec(r, &rep, "HDEL", JR_PAUSED_KEY, was->names[i], NULL)) && !(rc = jri_reply_error(r, rep)))
            freeReplyObject(rep);
    for (unsigned i = 0; !rc && since[0] && now->names && i < now->n; i++)
        if (!(rc = jri_exec(r, &rep, "HSETNX", JR_PAUSED_KEY, now->names[i], since, NULL)) &&
            !(rc = jri_reply_error(r, rep)))
            freeReplyObject(rep);
    return rc;
}

static int partitions_set(jr_redis_t *r, const char *q, unsigned n, unsigned *before, int split);

int jr_redis_partitions_set(jr_redis_t *r, const char *q, unsigned n, unsigned *before) {
    /* On a cluster the check spans slots: split (not atomic, see docs); a
     * server that answers CROSSSLOT otherwise (a proxy) gets the same. */
    int split = jr_redis_is_cluster(r);
    int rc = partitions_set(r, q, n, before, split);
    if (!split && rc == JR_EREDIS && jr_redis_ok(r) && strstr(jr_redis_errstr(r), "CROSSSLOT"))
        rc = partitions_set(r, q, n, before, 1);
    return rc;
}

int jr_redis_partitions_set_split(jr_redis_t *r, const char *q, unsigned n, unsigned *before) {
    return partitions_set(r, q, n, before, 1);
}

/* What the queues checked hold (split: read with jr_redis_stats): 0, or
 * JR_EREDIS with jr_partitions_set's refusal when they hold a job. */
static int check_empty(jr_redis_t *r, const char *q, unsigned cur, unsigned n, const char *const *names, size_t nn) {
    long long ready = 0, delayed = 0, dead = 0;
    for (size_t i = 0; i < nn; i++) {
        jr_qstats_t s;
        int rc = jr_redis_stats(r, names[i], &s);
        if (rc) return rc;
        if (s.problem[0]) return jri_fail(r, JR_EREDIS, "queue \"%s\": %s", names[i], s.problem);
        ready += s.ready + s.pending, delayed += s.delayed, dead += s.dead;
    }
    if (ready + delayed + dead == 0) return 0;
    return jri_fail(r, JR_EREDIS,
                    "queue \"%s\" has %u partition(s) and holds jobs (%lld ready or "
                    "running, %lld delayed, retrying or in the time wheel, %lld dead): its partitions cannot change to "
                    "%u until it is empty (let the workers drain it; dead purge)",
                    q, cur, ready, delayed, dead, n);
}

static int partitions_set(jr_redis_t *r, const char *q, unsigned n, unsigned *before, int split) {
    if (jr_contract_queue_name(q, strlen(q)))
        return jri_fail(r, JR_EINVAL, "queue name \"%.64s\" %s", q, jr_contract_queue_name(q, strlen(q)));
    if (n < 1 || n > JR_PARTITIONS_MAX) return jri_fail(r, JR_EINVAL, "partitions %u must be 1..%d", n, JR_PARTITIONS_MAX);
    unsigned cur;
    int rc = read_count(r, q, &cur);
    if (rc) return rc;
    *before = cur;
    jr_qpart_t a = {.n = 1}, b = {.n = 1};
    snprintf(a.queue, sizeof a.queue, "%s", q);
    snprintf(b.queue, sizeof b.queue, "%s", q);
    if ((rc = qpart_set(&a, cur)) || (rc = qpart_set(&b, n))) {
        free(a.names), free(b.names);
        return jri_fail(r, rc, "cannot name the partitions of queue \"%s\"", q);
    }
    /* q itself, then every name of either count, each once */
    size_t most = 1 + (size_t)cur + n;
    const char **argv = malloc((6 + 4 * most) * sizeof *argv);
    char(*keys)[JR_KEY_MAX] = malloc(4 * most * sizeof *keys);
    char nkeys[16], ns[16], curs[16];
    if (!argv || !keys) {
        free(argv), free(keys), free(a.names), free(b.names);
        return jri_fail(r, JR_ENOMEM, "out of memory");
    }
    int ac = 0;
    size_t k = 0;
    argv[ac++] = "FCALL", argv[ac++] = "jr_partitions_set", argv[ac++] = nkeys, argv[ac++] = JR_PARTITIONS_KEY;
    push_check_keys(argv, &ac, keys, &k, q);
    for (unsigned i = 0; i < a.n && a.names; i++) push_check_keys(argv, &ac, keys, &k, a.names[i]);
    for (unsigned i = 0; i < b.n && b.names; i++)
        if (jr_qpart_index(&a, b.names[i]) < 0) push_check_keys(argv, &ac, keys, &k, b.names[i]);
    if (split && cur != n) { /* the checks as calls of one slot each, then the hash key alone */
        const char **names = malloc((1 + (size_t)cur + n) * sizeof *names);
        size_t nn = 0;
        if (!names) rc = jri_fail(r, JR_ENOMEM, "out of memory");
        if (names) {
            names[nn++] = q;
            for (unsigned i = 0; a.names && i < a.n; i++) names[nn++] = a.names[i];
            for (unsigned i = 0; b.names && i < b.n; i++)
                if (jr_qpart_index(&a, b.names[i]) < 0) names[nn++] = b.names[i];
            rc = check_empty(r, q, cur, n, names, nn);
            free(names);
        }
        if (rc) {
            free(argv), free(keys), free(a.names), free(b.names);
            return rc;
        }
    }
    if (split) k = 0, ac = 4;
    snprintf(nkeys, sizeof nkeys, "%zu", 1 + k);
    snprintf(ns, sizeof ns, "%u", n);
    snprintf(curs, sizeof curs, "%u", cur);
    argv[ac++] = q, argv[ac++] = ns, argv[ac++] = curs;
    redisReply *rep;
    rc = jri_exec_argv(r, &rep, ac, argv, NULL);
    free(argv), free(keys);
    if (!rc && !(rc = jri_reply_error(r, rep))) {
        freeReplyObject(rep);
        rc = carry_pause(r, q, &a, &b);
    }
    free(a.names), free(b.names);
    return rc;
}

int jr_partitions_apply(jr_redis_t *r, const jr_strlist_t *pairs) {
    for (size_t i = 0; i + 1 < pairs->n; i += 2) {
        unsigned before = 0, n = (unsigned)strtoul(pairs->v[i + 1], NULL, 10);
        int rc = jr_redis_partitions_set(r, pairs->v[i], n, &before);
        if (rc && (rc != JR_EREDIS || !jr_redis_ok(r))) return rc;
        if (rc) {
            jr_log_kv(JR_LOG_ERROR, "cannot set the partitions of a queue from the configuration; its count in Redis stays",
                      "queue", pairs->v[i], "partitions", pairs->v[i + 1], "error", jr_redis_errstr(r), NULL);
        } else if (before != n) {
            char b[16];
            snprintf(b, sizeof b, "%u", before);
            jr_log_kv(JR_LOG_INFO, "set the partitions of a queue from the configuration", "queue", pairs->v[i],
                      "partitions", pairs->v[i + 1], "was", b, NULL);
        }
    }
    return 0;
}

int jr_partition_locate(jr_partmap_t *m, jr_redis_t *r, const char *q, const char *id, const char *key,
                        char iq[JR_INTERNAL_QUEUE_MAX + 1], char iid[JR_ID_MAX]) {
    jr_qpart_t *p;
    int rc = jr_partmap_get(m, r, q, &p);
    if (rc) return rc;
    size_t idlen = strlen(id), gen;
    unsigned i = 0;
    snprintf(iid, JR_ID_MAX, "%s", id);
    if (p->n > 1) {
        if (jr_partition_id_parse(id, idlen, &gen, &i)) {
            if (i >= p->n)
                return jri_fail(r, JR_EINVAL, "job id \"%s\" names partition %u, but queue \"%s\" has %u partitions", id, i,
                                q, p->n);
            snprintf(iid, JR_ID_MAX, "%.*s", (int)gen, id);
        } else if (key && key[0]) {
            i = jr_partition_of(key, strlen(key), p->n);
        } else {
            i = jr_partition_of(id, idlen, p->n);
        }
    }
    snprintf(iq, JR_INTERNAL_QUEUE_MAX + 1, "%s", jr_qpart_name(p, i));
    return 0;
}

int jr_redis_enqueue_parts(jr_redis_t *r, jr_partmap_t *m, const jr_enqueue_t *jobs, const char *const *keys,
                           size_t n, char (*ids)[JR_ID_MAX], jr_enq_outcome_t *out, jr_strlist_t *reasons) {
    jr_enqueue_t *v = calloc(n ? n : 1, sizeof *v);
    int *part = calloc(n ? n : 1, sizeof *part);
    int rc = v && part ? 0 : jri_fail(r, JR_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        jr_qpart_t *p;
        v[i] = jobs[i];
        v[i].partition = 0;
        part[i] = -1;
        /* a bad name goes as it is: jr_redis_enqueue_each refuses the call */
        if (!jr_queue_name_valid(jobs[i].queue)) continue;
        if ((rc = jr_partmap_get(m, r, jobs[i].queue, &p))) break;
        if (p->n == 1) continue;
        const char *key = keys && keys[i] && keys[i][0] ? keys[i] : NULL;
        const char *id = jobs[i].id && jobs[i].id[0] ? jobs[i].id : NULL;
        unsigned k = key ? jr_partition_of(key, strlen(key), p->n)
                     : id ? jr_partition_of(id, strlen(id), p->n)
                          : p->next++ % p->n;
        part[i] = (int)k;
        v[i].queue = p->names[k]; /* its own allocation: stays valid when m grows */
        v[i].partition = 1;
    }
    if (rc) {
        for (size_t k = 0; k < n; k++) out[k].status = JR_ENQ_NOT_SENT, out[k].why = UINT32_MAX;
        if (ids)
            for (size_t k = 0; k < n; k++) ids[k][0] = '\0';
        free(v), free(part);
        return rc;
    }
    rc = jr_redis_enqueue_each(r, v, n, ids, out, reasons);
    for (size_t i = 0; ids && i < n; i++) {
        if (part[i] < 0 || (jobs[i].id && jobs[i].id[0]) || !ids[i][0]) continue;
        char shown[JR_ID_MAX];
        if (!jr_partition_id(shown, sizeof shown, ids[i], (unsigned)part[i])) memcpy(ids[i], shown, sizeof shown);
    }
    free(v), free(part);
    return rc;
}
