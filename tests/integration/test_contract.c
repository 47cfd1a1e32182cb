/* The Redis-side contract (runner/lua/) under hostile input,
 * against a real redis-server: garbage in every key is dead-lettered, never
 * dropped or repeated; every function is all or nothing (a refused call
 * changes no key); the bounds of jr_limits.h hold in Lua and C alike; the
 * functions that finish work run on an out-of-memory Redis. Ends with a
 * seeded property test (JRT_SEED=n to replay) keeping an exact ledger. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jobrunner/client.h>

#include "contract.h"
#include "contract_cases.h"
#include "cron.h"
#include "harness.h"
#include "jr.h"
#include "jr_limits.h"
#include "redis.h"
#include "redis_produce.h"
#include "redis_sched.h"
#include "redis_worker.h"
#include "redis_admin.h"

/* The source of the function library, as Redis is given it: the file the
 * build joins from runner/lua/. */
#define JRT_LUA_SOURCE JRT_LUA_LIBRARY

static jrt_redis_t R;
static redisContext *C; /* raw hiredis connection */
static jr_redis_t *J;   /* jobrunner's own connection (C API) */

static void setup(void) {
    jrt_redis_start(&R, NULL);
    C = jrt_connect(&R);
    char err[JR_ERRLEN];
    J = jr_redis_connect(R.url, 5000, err, sizeof err);
    cr_assert(J, "%s", err);
    cr_assert_eq(jr_redis_load_library(J), 0, "%s", jr_redis_errstr(J));
}
static void teardown(void) {
    if (J) jr_redis_free(J);
    if (C) redisFree(C);
    J = NULL, C = NULL;
    jrt_redis_stop(&R);
}

TestSuite(contract, .init = setup, .fini = teardown, .timeout = 180);

/* ---- a growable byte buffer, and msgpack strings in it ---- */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf_t;

static void bput(buf_t *b, const void *d, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        cr_assert(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = '\0';
}
static void bbyte(buf_t *b, unsigned c) {
    unsigned char x = (unsigned char)c;
    bput(b, &x, 1);
}
static void mp_strn(buf_t *b, const char *s, size_t n) {
    if (n < 32) {
        bbyte(b, 0xa0 | (unsigned)n);
    } else if (n < 256) {
        bbyte(b, 0xd9), bbyte(b, (unsigned)n);
    } else {
        bbyte(b, 0xda), bbyte(b, (unsigned)(n >> 8)), bbyte(b, (unsigned)(n & 0xff));
    }
    bput(b, s, n);
}
static void mp_str(buf_t *b, const char *s) { mp_strn(b, s, strlen(s)); }
/* A msgpack sequence of strings, NULL-terminated. */
static buf_t mp_seq(const char *first, ...) {
    buf_t b = {0};
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *)) mp_str(&b, s);
    va_end(ap);
    if (!b.p) bput(&b, "", 0);
    return b;
}
/* The first item of a msgpack sequence if it is a string ("" otherwise). */
static void mp_first(const char *p, size_t n, char *out, size_t outlen) {
    const unsigned char *u = (const unsigned char *)p;
    size_t len = 0, h = 0;
    out[0] = '\0';
    if (n < 1) return;
    if ((u[0] & 0xe0) == 0xa0) len = u[0] & 0x1f, h = 1;
    else if (u[0] == 0xd9 && n >= 2) len = u[1], h = 2;
    else if (u[0] == 0xda && n >= 3) len = (size_t)u[1] << 8 | u[2], h = 3;
    else return;
    if (h + len > n || len >= outlen) return;
    memcpy(out, p + h, len);
    out[len] = '\0';
}

/* ---- raw commands ---- */

static redisReply *cmdv(int argc, const char **argv, const size_t *lens) {
    redisReply *rep = redisCommandArgv(C, argc, argv, lens);
    cr_assert(rep, "connection: %s", C->errstr);
    return rep;
}
/* A command of NUL-terminated words, NULL-terminated, on C. */
#define cmd(...) jrt_cmd(C, __VA_ARGS__)
static long long xlen(const char *key) { return jrt_int(C, "XLEN %s", key); }
static long long zcard(const char *key) { return jrt_int(C, "ZCARD %s", key); }
static long long npending(const char *key) {
    redisReply *rep = cmd("XPENDING", key, "jr", NULL);
    long long n = rep->type == REDIS_REPLY_ARRAY ? rep->element[0]->integer : 0;
    freeReplyObject(rep);
    return n;
}

/* The value of field `name` in a flat [f, v, ...] reply (NULL if none). */
static redisReply *field(redisReply *flat, const char *name) {
    for (size_t i = 0; i + 1 < flat->elements; i += 2)
        if (!strcmp(flat->element[i]->str, name)) return flat->element[i + 1];
    return NULL;
}

/* ---- snapshots: every jr:* key, sorted, with its DUMP ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static buf_t snapshot(void) {
    buf_t b = {0};
    redisReply *keys = cmd("KEYS", "jr:*", NULL);
    char **names = calloc(keys->elements + 1, sizeof *names);
    for (size_t i = 0; i < keys->elements; i++) names[i] = keys->element[i]->str;
    qsort(names, keys->elements, sizeof *names, cmp_str);
    for (size_t i = 0; i < keys->elements; i++) /* pipelined */
        cr_assert_eq(redisAppendCommand(C, "DUMP %s", names[i]), REDIS_OK);
    for (size_t i = 0; i < keys->elements; i++) {
        redisReply *d = NULL;
        cr_assert_eq(redisGetReply(C, (void **)&d), REDIS_OK, "%s", C->errstr);
        bput(&b, names[i], strlen(names[i]) + 1);
        if (d->type == REDIS_REPLY_STRING) bput(&b, d->str, d->len);
        bput(&b, "\n", 1);
        freeReplyObject(d);
    }
    free(names);
    freeReplyObject(keys);
    if (!b.p) bput(&b, "", 0);
    return b;
}
static int same(const buf_t *a, const buf_t *b) { return a->n == b->n && !memcmp(a->p, b->p, a->n); }

/* Run a call that must be refused (an error reply containing `expect`) and
 * change nothing. argv is NULL-terminated. */
static void refused(const char *what, const char *expect, const char *const *argv) {
    int n = 0;
    while (argv[n]) n++;
    buf_t before = snapshot();
    redisReply *rep = cmdv(n, (const char **)argv, NULL);
    buf_t after = snapshot();
    cr_expect_eq(rep->type, REDIS_REPLY_ERROR, "%s: not refused (reply type %d)", what, rep->type);
    if (rep->type == REDIS_REPLY_ERROR)
        cr_expect(strstr(rep->str, expect), "%s: error \"%s\" does not say \"%s\"", what, rep->str, expect);
    cr_expect(same(&before, &after), "%s: a refused call changed the keys", what);
    freeReplyObject(rep);
    free(before.p), free(after.p);
}

#define QK(q) "jr:{" q "}:ready", "jr:{" q "}:delayed", "jr:{" q "}:wake", "jr:{" q "}:seq"

/* Read up to count entries of queue key as consumer c1 (group made first). */
static redisReply *fetch(const char *ready, int count) {
    redisReply *g = cmd("XGROUP", "CREATE", ready, "jr", "0", "MKSTREAM", NULL);
    freeReplyObject(g);
    char n[16];
    snprintf(n, sizeof n, "%d", count);
    return cmd("XREADGROUP", "GROUP", "jr", "c1", "COUNT", n, "STREAMS", ready, ">", NULL);
}

/* ---- garbage in the delayed set ---- */

typedef struct garbage {
    const char *kind, *err; /* what it is; what the dead entry's err must say */
    buf_t member;
} garbage_t;

static size_t make_garbage(garbage_t *g) {
    size_t n = 0;
    buf_t b;
    b = (buf_t){0}, bput(&b, "\xc1garbage", 8);
    g[n++] = (garbage_t){"not msgpack", "not a msgpack sequence", b};
    b = (buf_t){0}, bbyte(&b, 0x93), mp_str(&b, "a1"), mp_str(&b, "h"), mp_str(&b, "echo");
    g[n++] = (garbage_t){"a msgpack array", "the id is a table", b};
    g[n++] = (garbage_t){"odd item count", "odd number", mp_seq("a2", "h", NULL)};
    b = mp_seq("a3", "h", "echo", "a", NULL), bbyte(&b, 0x05);
    g[n++] = (garbage_t){"an integer value", "item 5 is a number", b};
    b = mp_seq("a4", "h", NULL), bbyte(&b, 0xc3);
    g[n++] = (garbage_t){"a boolean value", "item 3 is a boolean", b};
    b = mp_seq("a5", "h", NULL), bbyte(&b, 0xc0);
    g[n++] = (garbage_t){"a nil value", "item 3 is a nil", b};
    g[n++] = (garbage_t){"no handler", "no handler", mp_seq("a6", "p", "x", NULL)};
    g[n++] = (garbage_t){"an empty handler", "empty handler", mp_seq("a7", "h", "", NULL)};
    b = (buf_t){0}, bput(&b, "", 0);
    g[n++] = (garbage_t){"an empty member", "empty", b};
    b = (buf_t){0}, bbyte(&b, 0x07), mp_str(&b, "h"), mp_str(&b, "echo");
    g[n++] = (garbage_t){"an id that is not text", "the id is a number", b};
    char longid[200];
    memset(longid, 'x', sizeof longid - 1), longid[sizeof longid - 1] = '\0';
    g[n++] = (garbage_t){"an id of 199 bytes", "the id is not", mp_seq(longid, "h", "echo", NULL)};
    b = (buf_t){0}, bput(&b, "\xaa" "abc", 4);
    g[n++] = (garbage_t){"truncated msgpack", "not a msgpack sequence", b};
    b = mp_seq("a8", "h", "echo", "t", NULL), bput(&b, "\xcb\x40\x09\x21\xfb\x54\x44\x2d\x18", 9);
    g[n++] = (garbage_t){"a float value", "item 5 is a number", b};
    b = (buf_t){0}, bput(&b, "\x81\xa1" "a\xa1" "b", 5);
    g[n++] = (garbage_t){"a msgpack map", "the id is a table", b};
    b = mp_seq("a9", "h", "echo", "p", NULL), bput(&b, "\xc4\x01x", 3);
    g[n++] = (garbage_t){"a bin item", "not a msgpack sequence", b};
    b = mp_seq("a10", "h", "echo", NULL);
    char f[16];
    for (int i = 0; i < 5000; i++) snprintf(f, sizeof f, "f%d", i), mp_str(&b, f), mp_str(&b, "v");
    g[n++] = (garbage_t){"5,000 fields", "more than 1000 fields", b};
    b = mp_seq("a11", "h", "echo", NULL);
    for (int i = 0; i < 4100; i++) mp_str(&b, "x");
    g[n++] = (garbage_t){"8,203 items (past Lua's stack)", "more than 1000 fields", b};
    return n;
}

/* ZADD member at score. */
static void zadd(const char *key, const char *score, const buf_t *m) {
    const char *argv[] = {"ZADD", key, score, m->p};
    size_t lens[] = {4, strlen(key), strlen(score), m->n};
    freeReplyObject(cmdv(4, argv, lens));
}

Test(contract, delayed_set_garbage_is_buried_once_and_good_jobs_promoted_once) {
    garbage_t g[32];
    size_t ng = make_garbage(g);
    /* Good jobs before, between and after the garbage (scores in order). */
    char score[32], id[32];
    int ngood = 0, s = 1;
    for (size_t i = 0; i <= ng; i++) {
        snprintf(id, sizeof id, "good%d", ngood++);
        buf_t m = mp_seq(id, "h", "echo", "p", "x", "e", "1", "d", "1", NULL);
        for (int x = 0; i == ng && x < 30; x++) mp_str(&m, "f"), mp_str(&m, "v"); /* 69 items: still a job */
        snprintf(score, sizeof score, "%d", s++);
        zadd("jr:{q}:delayed", score, &m);
        free(m.p);
        if (i < ng) snprintf(score, sizeof score, "%d", s++), zadd("jr:{q}:delayed", score, &g[i].member);
    }
    /* In small steps, as a scheduler does, then once more: nothing twice. */
    int64_t moved, buried, total = 0, total_buried = 0;
    double next, now;
    char wake[JR_ID_MAX];
    for (int k = 0; k < 100; k++) {
        cr_assert_eq(jr_redis_promote(J, "q", 3, 100, &moved, &buried, &next, &now, wake, NULL), 0, "%s",
                     jr_redis_errstr(J));
        total += moved, total_buried += buried;
        if (moved < 3) break;
    }
    cr_assert_eq(jr_redis_promote(J, "q", 1000, 100, &moved, &buried, &next, &now, wake, NULL), 0);
    cr_expect_eq(moved, 0);
    cr_expect_eq(total, (int64_t)(ng + ngood));
    cr_expect_eq(total_buried, (int64_t)ng);
    cr_expect_eq(zcard("jr:{q}:delayed"), 0);
    /* Each good job once in the stream. */
    redisReply *rs = cmd("XRANGE", "jr:{q}:ready", "-", "+", NULL);
    cr_expect_eq(rs->elements, (size_t)ngood, "%zu entries for %d good jobs", rs->elements, ngood);
    for (size_t i = 0; i < rs->elements; i++) {
        snprintf(id, sizeof id, "good%zu", i);
        redisReply *v = field(rs->element[i]->element[1], "id");
        cr_expect(v && !strcmp(v->str, id), "entry %zu is not %s", i, id);
    }
    freeReplyObject(rs);
    /* Each garbage member once in the dead stream, whole, saying why. */
    redisReply *ds = cmd("XRANGE", "jr:{q}:dead", "-", "+", NULL);
    cr_expect_eq(ds->elements, ng);
    for (size_t i = 0; i < ng; i++) {
        int found = 0;
        for (size_t j = 0; j < ds->elements; j++) {
            redisReply *f = ds->element[j]->element[1], *raw = field(f, "raw");
            if (!raw || raw->len != g[i].member.n || memcmp(raw->str, g[i].member.p, raw->len)) continue;
            found++;
            redisReply *why = field(f, "why"), *err = field(f, "err");
            cr_expect(why && !strcmp(why->str, "invalid"), "%s: why", g[i].kind);
            cr_expect(err && strstr(err->str, g[i].err), "%s: err \"%s\" does not say \"%s\"", g[i].kind,
                      err ? err->str : "", g[i].err);
        }
        cr_expect_eq(found, 1, "%s: %d dead entries hold it", g[i].kind, found);
        free(g[i].member.p);
    }
    freeReplyObject(ds);
}

/* XADD an entry of h echo and nf extra fields f<i> v; returns its id. */
static void xadd_big(const char *key, int nf, char *id_out) {
    size_t argc = 5 + 2 * (size_t)nf;
    const char **argv = calloc(argc, sizeof *argv);
    char(*names)[16] = calloc((size_t)nf, sizeof *names);
    size_t a = 0;
    argv[a++] = "XADD", argv[a++] = key, argv[a++] = "*", argv[a++] = "h", argv[a++] = "echo";
    for (int i = 0; i < nf; i++) {
        snprintf(names[i], sizeof names[i], "f%d", i);
        argv[a++] = names[i], argv[a++] = "v";
    }
    redisReply *rep = cmdv((int)a, argv, NULL);
    cr_assert_eq(rep->type, REDIS_REPLY_STRING, "XADD: %s", rep->str);
    snprintf(id_out, 64, "%s", rep->str);
    freeReplyObject(rep);
    free(argv), free(names);
}

/* The number of items in the msgpack array `raw` (array16/32 header). */
static long raw_items(const redisReply *raw) {
    const unsigned char *u = (const unsigned char *)raw->str;
    if (raw->len >= 5 && u[0] == 0xdd) return (long)u[1] << 24 | (long)u[2] << 16 | (long)u[3] << 8 | u[4];
    if (raw->len >= 3 && u[0] == 0xdc) return (long)u[1] << 8 | u[2];
    return -1;
}

Test(contract, stream_entries_too_large_to_copy_are_buried_whole_or_left_in_place) {
    const char *ready = "jr:{q}:ready", *dead = "jr:{q}:dead";
    char a[64], b[64], c[64], d[64];
    freeReplyObject(fetch(ready, 0)); /* the group */
    xadd_big(ready, 5000, a);
    xadd_big(ready, 5000, b);
    xadd_big(ready, 4000, c);
    xadd_big(ready, 999, d); /* small enough to copy field by field */
    freeReplyObject(fetch(ready, 10));
    const char *fk[] = {"FCALL", "jr_fail", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", dead};
    /* dead: buried whole */
    redisReply *rep = cmd(fk[0], fk[1], fk[2], fk[3], fk[4], fk[5], fk[6], a, "c1", "dead", "0", "boom",
                          "invalid", "100", NULL);
    cr_expect_eq(rep->integer, 1, "jr_fail dead: %s", rep->str ? rep->str : "");
    freeReplyObject(rep);
    /* retry: cannot be copied, so buried whole too */
    rep = cmd(fk[0], fk[1], fk[2], fk[3], fk[4], fk[5], fk[6], b, "c1", "retry", "0", "again", "failed", "100",
              NULL);
    cr_expect_eq(rep->integer, 1, "jr_fail retry: %s", rep->str ? rep->str : "");
    freeReplyObject(rep);
    /* handback: left pending as it is */
    rep = cmd("FCALL", "jr_handback", "1", ready, "c1", c, NULL);
    cr_expect_eq(rep->integer, 0);
    freeReplyObject(rep);
    cr_expect_eq(npending(ready), 2, "the big entry and the 999-field one stay pending");
    /* the 999-field entry: every field kept */
    rep = cmd(fk[0], fk[1], fk[2], fk[3], fk[4], fk[5], fk[6], d, "c1", "dead", "0", "e", "invalid", "100", NULL);
    cr_expect_eq(rep->integer, 1);
    freeReplyObject(rep);
    /* reclaim, poison: the left-over big entry goes to the dead stream whole */
    rep = cmd("FCALL", "jr_reclaim", "2", ready, dead, "c2", "0", "0-0", "100", "0", "100", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_ARRAY, "%s", rep->str ? rep->str : "");
    if (rep->type == REDIS_REPLY_ARRAY) cr_expect_eq(rep->element[2]->integer, 1, "poisoned");
    freeReplyObject(rep);
    cr_expect_eq(xlen(ready), 0);
    cr_expect_eq(npending(ready), 0);
    redisReply *ds = cmd("XRANGE", dead, "-", "+", NULL);
    cr_assert_eq(ds->elements, 4);
    const char *ids[] = {a, b, d, c}, *whys[] = {"invalid", "invalid", "invalid", "poison"};
    long items[] = {10002, 10002, -2, 8002};
    for (size_t i = 0; i < 4; i++) {
        redisReply *f = ds->element[i]->element[1];
        redisReply *id = field(f, "id"), *why = field(f, "why"), *raw = field(f, "raw");
        cr_expect(id && !strcmp(id->str, ids[i]), "dead entry %zu: id", i);
        cr_expect(why && !strcmp(why->str, whys[i]), "dead entry %zu: why %s", i, why ? why->str : "-");
        if (items[i] > 0) {
            cr_expect(raw && raw_items(raw) == items[i], "dead entry %zu: raw holds %ld items, not %ld", i,
                      raw ? raw_items(raw) : -1, items[i]);
        } else {
            cr_expect(!raw && f->elements == 2 * (2 + 999 + 3), "999 fields copied one by one: %zu items",
                      f->elements); /* id h, 999 extras, e err why */
        }
    }
    freeReplyObject(ds);
    /* dead retry cannot run what is kept whole: it stays dead */
    redisReply *all = cmd("XRANGE", dead, "-", "+", NULL);
    const char *argv[16] = {"FCALL", "jr_dead_retry", "2", dead, ready};
    for (size_t i = 0; i < 4; i++) argv[5 + i] = all->element[i]->element[0]->str;
    rep = cmdv(9, argv, NULL);
    cr_expect_eq(rep->integer, 1, "only the 999-field entry can be retried: %s", rep->str ? rep->str : "");
    freeReplyObject(rep);
    freeReplyObject(all);
    cr_expect_eq(xlen(dead), 3);
}

Test(contract, worker_buries_an_entry_too_large_for_lua, .timeout = 60) {
    char cfg[192], text[512], log[192], id[64];
    snprintf(text, sizeof text, "redis:\n  url: %s\n", R.url);
    jrt_write(&R, "c.yaml", text, cfg, sizeof cfg);
    snprintf(log, sizeof log, "%s/worker.log", R.dir);
    freeReplyObject(fetch("jr:{default}:ready", 0));
    xadd_big("jr:{default}:ready", 5000, id);
    const char *args[] = {"worker", "-c", cfg, "--plugin", JRT_RECORD_PLUGIN, NULL};
    pid_t w = jrt_spawn(log, args);
    for (int t = 0; t < 200 && xlen("jr:{default}:dead") == 0; t++) jrt_sleep_ms(50);
    jrt_stop(w, SIGTERM, 10000);
    cr_expect_eq(xlen("jr:{default}:dead"), 1, "the entry is not in the dead stream");
    cr_expect_eq(xlen("jr:{default}:ready"), 0);
    redisReply *ds = cmd("XRANGE", "jr:{default}:dead", "-", "+", NULL);
    if (ds->elements == 1) {
        redisReply *raw = field(ds->element[0]->element[1], "raw");
        cr_expect(raw && raw_items(raw) == 10002, "raw holds every field");
    }
    freeReplyObject(ds);
}

/* ---- every function is all or nothing ---- */

/* Jobs in every state of queue q: 3 ready (2 of them pending for c1, the
 * first one's entry id in e1), 1 delayed with id x1, 1 dead; q registered. */
static void seed(char *e1) {
    for (int i = 0; i < 3; i++)
        freeReplyObject(cmd("FCALL", "jr_enqueue", "4", QK("q"), "", "", "0", "h", "echo", "p", "a", NULL));
    freeReplyObject(cmd("FCALL", "jr_enqueue", "5", QK("q"), "jr:{q}:uniq:x1", "+3600000", "x1", "0", "h",
                        "echo", NULL));
    redisReply *r = fetch("jr:{q}:ready", 2);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    redisReply *en = r->element[0]->element[1];
    snprintf(e1, 64, "%s", en->element[0]->element[0]->str);
    freeReplyObject(cmd("FCALL", "jr_fail", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "jr:{q}:dead",
                        en->element[1]->element[0]->str, "c1", "dead", "0", "e", "failed", "100", NULL));
    freeReplyObject(r);
    freeReplyObject(cmd("FCALL", "jr_register", "2", "jr:{queues}", "jr:{queues}:wake", "q", NULL));
    cr_assert_eq(xlen("jr:{q}:dead"), 1);
    cr_assert_eq(npending("jr:{q}:ready"), 1);
}

#define FAILK "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "jr:{q}:dead"
#define REGK "jr:{queues}", "jr:{queues}:wake"
#define ENQ(when, id, uniq, ...) "FCALL", "jr_enqueue", "4", QK("q"), when, id, uniq, __VA_ARGS__, NULL
#define ENQ_T(when) ENQ(when, "", "0", "h", "echo")
#define ENQ_F(...) ENQ("", "", "0", "h", "echo", __VA_ARGS__)
#define LONG129 "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq"
#define ID159 "iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii"

Test(contract, refused_calls_change_nothing) {
    char e1[64];
    seed(e1);
    cr_assert_eq(strlen(LONG129), 129);
    cr_assert_eq(strlen(ID159), 159);
    /* Garbage of the wrong type in the keys of queue g. */
    freeReplyObject(cmd("SET", "jr:{g}:delayed", "str", NULL));
    freeReplyObject(cmd("RPUSH", "jr:{h}:ready", "x", NULL));
    freeReplyObject(cmd("HSET", "jr:{k}:dead", "a", "b", NULL));
    freeReplyObject(cmd("SET", "jr:{s}:seq", "abc", NULL));
    freeReplyObject(cmd("SET", "jr:{t}:seq", "9223372036854775807", NULL));
    freeReplyObject(cmd("SET", "jr:{u}:ids", "not a hash", NULL));
    freeReplyObject(cmd("FCALL", "jr_enqueue", "4", QK("u"), "", "", "0", "h", "echo", NULL)); /* refused: ids */
    struct {
        const char *what, *expect;
        const char *argv[40];
    } t[] = {
        /* keys: one valid queue, exact names */
        {"queue name with a space", "key 1 must be",
         {"FCALL", "jr_enqueue", "4", "jr:{a b}:ready", "jr:{a b}:delayed", "jr:{a b}:wake", "jr:{a b}:seq", "", "", "0", "h", "echo", NULL}},
        {"empty queue name", "key 1 must be",
         {"FCALL", "jr_enqueue", "4", "jr:{}:ready", "jr:{}:delayed", "jr:{}:wake", "jr:{}:seq", "", "", "0", "h", "echo", NULL}},
        {"129-character queue name", "key 1 must be",
         {"FCALL", "jr_enqueue", "4", QK(LONG129), "", "", "0", "h", "echo", NULL}},
        {"keys of two queues", "key 2 must be",
         {"FCALL", "jr_enqueue", "4", "jr:{q}:ready", "jr:{r}:delayed", "jr:{q}:wake", "jr:{q}:seq", "", "", "0", "h", "echo", NULL}},
        {"keys out of order", "key 2 must be",
         {"FCALL", "jr_enqueue", "4", "jr:{q}:ready", "jr:{q}:wake", "jr:{q}:delayed", "jr:{q}:seq", "", "", "0", "h", "echo", NULL}},
        {"3 keys", "takes the keys",
         {"FCALL", "jr_enqueue", "3", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "", "", "0", "h", "echo", NULL}},
        {"uniq key of another id", "key 5",
         {"FCALL", "jr_enqueue", "5", QK("q"), "jr:{q}:uniq:other", "", "mine", "0", "h", "echo", NULL}},
        {"explicit id without its uniq key", "explicit id needs",
         {"FCALL", "jr_enqueue", "4", QK("q"), "", "mine", "0", "h", "echo", NULL}},
        {"uniq key without an id", "takes 4 keys",
         {"FCALL", "jr_enqueue", "5", QK("q"), "jr:{q}:uniq:", "", "", "0", "h", "echo", NULL}},
        {"promote: bad queue", "key 1 must be",
         {"FCALL", "jr_promote", "3", "jr:{a b}:ready", "jr:{a b}:delayed", "jr:{a b}:wake", "10", NULL}},
        {"promote: dead key of another queue", "key 4",
         {"FCALL", "jr_promote", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "jr:{r}:dead", "10", NULL}},
        {"ack: wrong key", "key 1 must be", {"FCALL", "jr_ack", "1", "jr:{q}:delayed", e1, NULL}},
        {"fail: keys of two queues", "key 4 must be",
         {"FCALL", "jr_fail", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "jr:{r}:dead", e1, "c1", "dead", "0", "e", "failed", "100", NULL}},
        {"reclaim: dead of another queue", "key 2 must be",
         {"FCALL", "jr_reclaim", "2", "jr:{q}:ready", "jr:{r}:dead", "c1", "0", "0-0", "10", "5", "100", NULL}},
        {"heartbeat: bad queue", "key 1 must be", {"FCALL", "jr_heartbeat", "1", "jr:{x y}:ready", "c1", e1, NULL}},
        {"handback: key with a suffix", "key 1 must be", {"FCALL", "jr_handback", "1", "jr:{q}:ready:x", "c1", e1, NULL}},
        {"dead retry: keys swapped", "key 1 must be", {"FCALL", "jr_dead_retry", "2", "jr:{q}:ready", "jr:{q}:dead", e1, NULL}},
        {"register: an invalid name after a valid one", "is not valid",
         {"FCALL", "jr_register", "2", REGK, "fresh", "bad name", NULL}},
        {"register: a brace", "is not valid", {"FCALL", "jr_register", "2", REGK, "a}b", NULL}},
        {"register: 129 characters", "is not valid", {"FCALL", "jr_register", "2", REGK, LONG129, NULL}},
        {"register: no name", "at least one", {"FCALL", "jr_register", "2", REGK, NULL}},
        {"register: wrong keys", "takes the keys", {"FCALL", "jr_register", "2", "jr:{q}", "jr:{q}:wake", "x", NULL}},
        {"queues: wrong keys", "takes the keys", {"FCALL", "jr_queues", "1", "jr:{queues}", NULL}},
        /* due times: decimal digits with an optional fraction, within 10 years */
        {"job 2 of 2 +nan", "job 2: bad due time",
         {"FCALL", "jr_enqueue_many", "4", QK("q"), "0", "", "", "1", "h", "echo", "+nan", "", "1", "h", "echo", NULL}},
        {"+inf", "bad due time", {ENQ_T("+inf")}},
        {"-inf", "bad due time", {ENQ_T("-inf")}},
        {"nan", "bad due time", {ENQ_T("nan")}},
        {"+0x10", "bad due time", {ENQ_T("+0x10")}},
        {"+1e3", "bad due time", {ENQ_T("+1e3")}},
        {"@1e12", "bad due time", {ENQ_T("@1e12")}},
        {"+-5", "bad due time", {ENQ_T("+-5")}},
        {"-5", "bad due time", {ENQ_T("-5")}},
        {"+ alone", "bad due time", {ENQ_T("+")}},
        {"@ alone", "bad due time", {ENQ_T("@")}},
        {"leading space", "bad due time", {ENQ_T(" +5")}},
        {"trailing space", "bad due time", {ENQ_T("+5 ")}},
        {"+5.", "bad due time", {ENQ_T("+5.")}},
        {"+.5", "bad due time", {ENQ_T("+.5")}},
        {"no prefix", "bad due time", {ENQ_T("1000")}},
        {"+ past the maximum", "more than 315360000000", {ENQ_T("+315360000001")}},
        {"@ past the maximum", "more than 315360000000", {ENQ_T("@99999999999999")}},
        {"+ 400 digits", "more than", {ENQ_T("+1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000")}},
        /* fields */
        {"t 0", "field t", {ENQ_F("t", "0")}},
        {"t past the maximum", "field t", {ENQ_F("t", "604800001")}},
        {"t with a fraction", "field t", {ENQ_F("t", "1.5")}},
        {"t empty", "field t", {ENQ_F("t", "")}},
        {"b 0", "field b", {ENQ_F("b", "0")}},
        {"b past the maximum", "field b", {ENQ_F("b", "2592000001")}},
        {"m 0", "field m", {ENQ_F("m", "0")}},
        {"m 1001", "field m", {ENQ_F("m", "1001")}},
        {"a 1001", "field a", {ENQ_F("a", "1001")}},
        {"a -1", "field a", {ENQ_F("a", "-1")}},
        {"unknown field", "unknown field", {ENQ_F("x", "1")}},
        {"e from a producer", "unknown field", {ENQ_F("e", "1")}},
        {"id as a field", "unknown field", {ENQ_F("id", "1")}},
        {"p twice", "given twice", {ENQ_F("p", "1", "p", "2")}},
        {"h not first", "must start with h", {ENQ("", "", "0", "p", "x", "h", "echo")}},
        {"empty handler", "must start with h", {ENQ("", "", "0", "h", "")}},
        {"odd field count", "must start with h", {ENQ_F("p")}},
        {"no fields", "arguments", {"FCALL", "jr_enqueue", "4", QK("q"), "", "", "0", NULL}},
        {"uniq empty", "UNIQ_MS", {ENQ("", "", "", "h", "echo")}},
        {"uniq negative", "UNIQ_MS", {ENQ("", "", "-1", "h", "echo")}},
        {"uniq 1e3", "UNIQ_MS", {ENQ("", "", "1e3", "h", "echo")}},
        {"uniq past the maximum", "UNIQ_MS", {ENQ("", "", "315360000001", "h", "echo")}},
        {"id d5", "reserved form", {"FCALL", "jr_enqueue", "5", QK("q"), "jr:{q}:uniq:d5", "", "d5", "0", "h", "echo", NULL}},
        {"id 5-5", "reserved form", {"FCALL", "jr_enqueue", "5", QK("q"), "jr:{q}:uniq:5-5", "", "5-5", "0", "h", "echo", NULL}},
        {"id of 159 bytes", "longer than 158", {"FCALL", "jr_enqueue", "5", QK("q"), "jr:{q}:uniq:" ID159, "", ID159, "0", "h", "echo", NULL}},
        {"many: npairs not a number", "expected WHEN ID NPAIRS",
         {"FCALL", "jr_enqueue_many", "4", QK("q"), "0", "", "", "x", "h", "echo", NULL}},
        {"many: npairs past the end", "expected WHEN ID NPAIRS",
         {"FCALL", "jr_enqueue_many", "4", QK("q"), "0", "", "", "2", "h", "echo", NULL}},
        {"many: a uniq key too many", "got 5",
         {"FCALL", "jr_enqueue_many", "5", QK("q"), "jr:{q}:uniq:z", "0", "", "", "1", "h", "echo", NULL}},
        {"many: good job with id, then a bad one", "job 2",
         {"FCALL", "jr_enqueue_many", "5", QK("q"), "jr:{q}:uniq:z", "0", "", "z", "1", "h", "echo", "", "", "1", "h", "", NULL}},
        /* worker functions: entry ids and numbers checked before any write */
        {"ack: a bad id after a good one", "not a stream entry id", {"FCALL", "jr_ack", "1", "jr:{q}:ready", e1, "bad", NULL}},
        {"ack: 1-1-1", "not a stream entry id", {"FCALL", "jr_ack", "1", "jr:{q}:ready", e1, "1-1-1", NULL}},
        {"ack: past 2^64", "not a stream entry id", {"FCALL", "jr_ack", "1", "jr:{q}:ready", e1, "18446744073709551616-0", NULL}},
        {"fail: bad entry", "not a stream entry id", {"FCALL", "jr_fail", "4", FAILK, "x", "c1", "dead", "0", "e", "failed", "100", NULL}},
        {"fail: bad action", "action", {"FCALL", "jr_fail", "4", FAILK, e1, "c1", "retryy", "0", "e", "failed", "100", NULL}},
        {"fail: negative delay", "DELAY_MS", {"FCALL", "jr_fail", "4", FAILK, e1, "c1", "retry", "-1", "e", "failed", "100", NULL}},
        {"fail: delay 1e3", "DELAY_MS", {"FCALL", "jr_fail", "4", FAILK, e1, "c1", "retry", "1e3", "e", "failed", "100", NULL}},
        {"fail: delay past the maximum", "DELAY_MS", {"FCALL", "jr_fail", "4", FAILK, e1, "c1", "retry", "315360000001", "e", "failed", "100", NULL}},
        {"fail: empty dead max", "DEAD_MAX", {"FCALL", "jr_fail", "4", FAILK, e1, "c1", "dead", "0", "e", "failed", "", NULL}},
        {"fail: 6 arguments", "arguments", {"FCALL", "jr_fail", "4", FAILK, e1, "c1", "dead", "0", "e", "failed", NULL}},
        {"fail: empty consumer", "consumer", {"FCALL", "jr_fail", "4", FAILK, e1, "", "dead", "0", "e", "failed", "100", NULL}},
        {"heartbeat: a bad id after a good one", "not a stream entry id", {"FCALL", "jr_heartbeat", "1", "jr:{q}:ready", "c1", e1, "x", NULL}},
        {"handback: a bad id after a good one", "not a stream entry id", {"FCALL", "jr_handback", "1", "jr:{q}:ready", "c1", e1, "-", NULL}},
        {"reclaim: bad cursor", "arguments", {"FCALL", "jr_reclaim", "2", "jr:{q}:ready", "jr:{q}:dead", "c2", "0", "x", "10", "5", "100", NULL}},
        {"reclaim: count 0", "arguments", {"FCALL", "jr_reclaim", "2", "jr:{q}:ready", "jr:{q}:dead", "c2", "0", "0-0", "0", "5", "100", NULL}},
        {"reclaim: negative idle", "arguments", {"FCALL", "jr_reclaim", "2", "jr:{q}:ready", "jr:{q}:dead", "c2", "-1", "0-0", "10", "5", "100", NULL}},
        {"reclaim: max deliveries empty", "arguments", {"FCALL", "jr_reclaim", "2", "jr:{q}:ready", "jr:{q}:dead", "c2", "0", "0-0", "10", "", "100", NULL}},
        {"dead retry: a bad id", "not a stream entry id", {"FCALL", "jr_dead_retry", "2", "jr:{q}:dead", "jr:{q}:ready", "0-1", "x", NULL}},
        {"promote: limit 0", "LIMIT", {"FCALL", "jr_promote", "3", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "0", NULL}},
        {"promote: limit 1e3", "LIMIT", {"FCALL", "jr_promote", "3", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "1e3", NULL}},
        {"promote: no limit", "LIMIT", {"FCALL", "jr_promote", "3", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", NULL}},
        {"promote: bad dead max", "LIMIT", {"FCALL", "jr_promote", "3", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "10", "x", NULL}},
        /* keys holding garbage of another type */
        {"enqueue: delayed set is a string", "holds a string", {"FCALL", "jr_enqueue", "4", QK("g"), "+1000", "", "0", "h", "echo", NULL}},
        {"enqueue: ready stream is a list", "holds a list", {"FCALL", "jr_enqueue", "4", QK("h"), "", "", "0", "h", "echo", NULL}},
        {"promote: delayed set is a string", "holds a string", {"FCALL", "jr_promote", "3", "jr:{g}:ready", "jr:{g}:delayed", "jr:{g}:wake", "10", NULL}},
        {"ack: ready is a list", "holds a list", {"FCALL", "jr_ack", "1", "jr:{h}:ready", "1-1", NULL}},
        {"fail: dead is a hash", "holds a hash", {"FCALL", "jr_fail", "4", "jr:{k}:ready", "jr:{k}:delayed", "jr:{k}:wake", "jr:{k}:dead", "1-1", "c1", "dead", "0", "e", "failed", "100", NULL}},
        {"reclaim: dead is a hash", "holds a hash", {"FCALL", "jr_reclaim", "2", "jr:{k}:ready", "jr:{k}:dead", "c2", "0", "0-0", "10", "5", "100", NULL}},
        {"seq is not a number", "not a job counter", {"FCALL", "jr_enqueue", "4", QK("s"), "+1000", "", "0", "h", "echo", NULL}},
        {"seq at the largest integer", "not a job counter", {"FCALL", "jr_enqueue", "4", QK("t"), "+1000", "", "0", "h", "echo", NULL}},
        /* one job by id: jr_locate, jr_cancel, jr_run_now, jr_delete; jr_ack with ids; jr_heartbeat with cancelled */
        {"generated delayed id form", "reserved form",
         {"FCALL", "jr_enqueue", "5", QK("q"), "jr:{q}:uniq:d1764581400250-3", "+1000", "d1764581400250-3", "0", "h", "echo", NULL}},
        {"locate: no id", "argument: ID", {"FCALL", "jr_locate", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:dead", NULL}},
        {"locate: empty id", "argument: ID", {"FCALL", "jr_locate", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:dead", "", NULL}},
        {"locate: 159-byte id", "argument: ID", {"FCALL", "jr_locate", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:dead", ID159, NULL}},
        {"locate: two ids", "argument: ID", {"FCALL", "jr_locate", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:dead", "x1", "x1", NULL}},
        {"locate: keys of two queues", "key 3 must be", {"FCALL", "jr_locate", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{r}:ids", "jr:{q}:dead", "x1", NULL}},
        {"cancel: without the uniq key", "key 5 must be",
         {"FCALL", "jr_cancel", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:cancelled", "x1", NULL}},
        {"cancel: uniq key of another id", "key 5 must be",
         {"FCALL", "jr_cancel", "5", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:cancelled", "jr:{q}:uniq:x2", "x1", NULL}},
        {"cancel: 159-byte id", "argument: ID",
         {"FCALL", "jr_cancel", "5", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:cancelled", "jr:{q}:uniq:" ID159, ID159, NULL}},
        {"cancel: cancelled key swapped with ids", "key 3 must be",
         {"FCALL", "jr_cancel", "5", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:cancelled", "jr:{q}:ids", "jr:{q}:uniq:x1", "x1", NULL}},
        {"run now: 4 keys", "takes the keys",
         {"FCALL", "jr_run_now", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:dead", "x1", NULL}},
        {"run now: no id", "argument: ID", {"FCALL", "jr_run_now", "3", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", NULL}},
        {"run now: delayed set is a string", "holds a string", {"FCALL", "jr_run_now", "3", "jr:{g}:ready", "jr:{g}:delayed", "jr:{g}:ids", "x1", NULL}},
        {"delete: dead is a hash", "holds a hash",
         {"FCALL", "jr_delete", "5", "jr:{k}:ready", "jr:{k}:delayed", "jr:{k}:ids", "jr:{k}:dead", "jr:{k}:uniq:x1", "x1", NULL}},
        {"delete: bad queue", "key 1 must be",
         {"FCALL", "jr_delete", "5", "jr:{a b}:ready", "jr:{a b}:delayed", "jr:{a b}:ids", "jr:{a b}:dead", "jr:{a b}:uniq:x1", "x1", NULL}},
        {"ack: ids key of another queue", "key 2 must be", {"FCALL", "jr_ack", "2", "jr:{q}:ready", "jr:{r}:ids", e1, "x1", NULL}},
        {"ack: an entry without its job id", "in pairs", {"FCALL", "jr_ack", "2", "jr:{q}:ready", "jr:{q}:ids", e1, NULL}},
        {"ack: a bad entry in a pair", "not a stream entry id", {"FCALL", "jr_ack", "2", "jr:{q}:ready", "jr:{q}:ids", e1, "", "x", "y", NULL}},
        /* revision 15: a job index, cancel flags or stats key holding
         * another type no longer refuses jr_ack or jr_promote (it is left
         * alone: see test_garbage) */
        {"heartbeat: cancelled key of another queue", "key 2 must be",
         {"FCALL", "jr_heartbeat", "2", "jr:{q}:ready", "jr:{r}:cancelled", "c1", e1, NULL}},
        /* revision 18: the keys a call reaches beyond its older form, declared strictly */
        {"enqueue: the ids key of another queue", "key 5 must be",
         {"FCALL", "jr_enqueue", "7", QK("q"), "jr:{r}:ids", "jr:{q}:wheel", "jr:{q}:wheel:n", "", "", "0", "h", "echo", NULL}},
        {"enqueue: the wheel keys swapped", "key 6 must be",
         {"FCALL", "jr_enqueue", "7", QK("q"), "jr:{q}:ids", "jr:{q}:wheel:n", "jr:{q}:wheel", "", "", "0", "h", "echo", NULL}},
        {"enqueue: declared keys but no uniq key", "key 8 = ",
         {"FCALL", "jr_enqueue", "7", QK("q"), "jr:{q}:ids", "jr:{q}:wheel", "jr:{q}:wheel:n", "+1000", "x1", "0", "h", "echo", NULL}},
        {"enqueue many: the wheel key in place of ids", "key 5 must be",
         {"FCALL", "jr_enqueue_many", "6", QK("q"), "jr:{q}:wheel", "jr:{q}:wheel:n", "0", "", "", "1", "h", "echo", NULL}},
        {"fail: the stats of another queue", "key 7 must be",
         {"FCALL", "jr_fail", "10", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "jr:{q}:dead", "jr:{q}:ids",
          "jr:{q}:cancelled", "jr:{r}:stats", "jr:{q}:wheel", "jr:{q}:wheel:n", "jr:{q}:seq", e1, "c1", "retry", "0", "e", "w", "10", NULL}},
        {"fail: a key left out of the declared ones", "key 10 must be",
         {"FCALL", "jr_fail", "9", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "jr:{q}:dead", "jr:{q}:ids",
          "jr:{q}:cancelled", "jr:{q}:stats", "jr:{q}:wheel", "jr:{q}:wheel:n", e1, "c1", "retry", "0", "e", "w", "10", NULL}},
        {"promote: the ids key of another queue", "key 5 must be",
         {"FCALL", "jr_promote", "7", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:wake", "jr:{q}:dead", "jr:{r}:ids",
          "jr:{q}:wheel", "jr:{q}:wheel:n", "10", NULL}},
        {"ack: the stats before the cancel flags", "key 4 must be",
         {"FCALL", "jr_ack", "4", "jr:{q}:ready", "jr:{q}:ids", "jr:{q}:stats", "jr:{q}:cancelled", e1, "x1", NULL}},
        {"reclaim: the cancel flags of another queue", "key 4 must be",
         {"FCALL", "jr_reclaim", "4", "jr:{q}:ready", "jr:{q}:dead", "jr:{q}:ids", "jr:{r}:cancelled", "c1", "1000", "0-0", "10", "5", "10", NULL}},
        {"heartbeat: the stats of another queue", "key 4 must be",
         {"FCALL", "jr_heartbeat", "4", "jr:{q}:ready", "jr:{q}:cancelled", "jr:{q}:ids", "jr:{r}:stats", "c1", e1, NULL}},
        {"handback: the cancel flags left out", "key 3 must be",
         {"FCALL", "jr_handback", "2", "jr:{q}:ready", "jr:{q}:ids", "c1", e1, NULL}},
        {"dead retry: the ids of another queue", "key 3 must be",
         {"FCALL", "jr_dead_retry", "3", "jr:{q}:dead", "jr:{q}:ready", "jr:{r}:ids", e1, NULL}},
        {"cancel: the wheel of another queue", "key 5 must be",
         {"FCALL", "jr_cancel", "7", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:cancelled", "jr:{r}:wheel",
          "jr:{q}:wheel:n", "jr:{q}:uniq:x1", "x1", NULL}},
        {"locate: the wheel counter left out", "key 6 must be",
         {"FCALL", "jr_locate", "6", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:ids", "jr:{q}:dead", "jr:{q}:wheel", "jr:{q}:seq", "x1", NULL}},
        {"delayed page: the wheel of another queue", "key 2 must be",
         {"FCALL", "jr_delayed_page", "2", "jr:{q}:delayed", "jr:{r}:wheel", "", "10", NULL}},
        {"ack follow: the ids of another queue", "key 3 must be",
         {"FCALL", "jr_ack_follow", "11", "jr:{q}:ready", "jr:{q}:cancelled", "jr:{r}:ids", "jr:{q}:stats", QK("q"),
          "jr:{q}:ids", "jr:{q}:wheel", "jr:{q}:wheel:n", e1, "1", "0", "1", "", "", "1", "h", "echo", NULL}},
        {"procs forget: the entry of another name", "key 2 must be",
         {"FCALL", "jr_procs_forget", "2", "jr:{procs}", "jr:{procs}:b", "a", NULL}},
        /* jr_queue_remove (revision 20) */
        {"queue remove: the dead stream of another queue", "key 3 must be a key of queue",
         {"FCALL", "jr_queue_remove", "5", "jr:{q}:ready", "jr:{q}:delayed", "jr:{r}:dead", "jr:{q}:wheel",
          "jr:{q}:wheel:n", NULL}},
        {"queue remove: a key left out", "jr:{q}:wheel:n is missing",
         {"FCALL", "jr_queue_remove", "4", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:dead", "jr:{q}:wheel", NULL}},
        {"queue remove: an argument", "takes no arguments",
         {"FCALL", "jr_queue_remove", "5", "jr:{q}:ready", "jr:{q}:delayed", "jr:{q}:dead", "jr:{q}:wheel",
          "jr:{q}:wheel:n", "x", NULL}},
        {"queue remove: ready key holds a list", "holds a list",
         {"FCALL", "jr_queue_remove", "5", "jr:{h}:ready", "jr:{h}:delayed", "jr:{h}:dead", "jr:{h}:wheel",
          "jr:{h}:wheel:n", NULL}},
        /* jr_ready_prepare (bulk producers' plain XADD path) */
        {"ready prepare: the delayed key", "key 1 must be", {"FCALL", "jr_ready_prepare", "1", "jr:{q}:delayed", NULL}},
        {"ready prepare: bad queue", "key 1 must be", {"FCALL", "jr_ready_prepare", "1", "jr:{a b}:ready", NULL}},
        {"ready prepare: two keys", "takes the keys", {"FCALL", "jr_ready_prepare", "2", "jr:{q}:ready", "jr:{q}:delayed", NULL}},
        {"ready prepare: an argument", "takes no arguments", {"FCALL", "jr_ready_prepare", "1", "jr:{fresh}:ready", "x", NULL}},
        {"ready prepare: ready key holds a list", "holds a list", {"FCALL", "jr_ready_prepare", "1", "jr:{h}:ready", NULL}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) refused(t[i].what, t[i].expect, t[i].argv);
    cr_expect_eq(jrt_int(C, "SISMEMBER jr:{queues} fresh"), 0);
}

/* Whatever makes an enqueue with an id fail, the id's uniq key is not left
 * behind: the corrected enqueue creates the job. */
Test(contract, refused_enqueue_with_an_id_leaves_no_uniq_key) {
    const char *causes[] = {"+nan", "+-inf", "+0x10", "a list in the ready key", "job 2 of the call"};
    for (size_t i = 0; i < sizeof causes / sizeof causes[0]; i++) {
        jr_qkeys_t k;
        char q[8], uniq[48];
        snprintf(q, sizeof q, "q%zu", i);
        jr_qkeys(&k, q);
        snprintf(uniq, sizeof uniq, "jr:{%s}:uniq:job", q);
        const char *when = i < 3 ? causes[i] : "";
        if (i == 3) freeReplyObject(cmd("RPUSH", k.ready, "garbage", NULL));
        redisReply *rep =
            i == 4 ? cmd("FCALL", "jr_enqueue_many", "5", k.ready, k.delayed, k.wake, k.seq, uniq, "86400000", "",
                         "job", "1", "h", "echo", "+nan", "", "1", "h", "echo", NULL)
                   : cmd("FCALL", "jr_enqueue", "5", k.ready, k.delayed, k.wake, k.seq, uniq, when, "job",
                         "86400000", "h", "echo", NULL);
        cr_expect_eq(rep->type, REDIS_REPLY_ERROR, "%s: not refused", causes[i]);
        freeReplyObject(rep);
        cr_expect_eq(jrt_int(C, "EXISTS %s", uniq), 0, "%s: the refused call left the id's uniq key", causes[i]);
        if (i == 3) freeReplyObject(cmd("DEL", k.ready, NULL));
        rep = cmd("FCALL", "jr_enqueue", "5", k.ready, k.delayed, k.wake, k.seq, uniq, "", "job", "86400000", "h",
                  "echo", NULL);
        cr_assert_eq(rep->type, REDIS_REPLY_ARRAY, "%s", rep->str ? rep->str : "");
        cr_expect_eq(rep->element[1]->integer, 1, "%s: the corrected enqueue was taken for a duplicate", causes[i]);
        freeReplyObject(rep);
        cr_expect_eq(xlen(k.ready), 1, "%s", causes[i]);
    }
}

/* ---- bounds: one schema (jr_limits.h), in Lua and C alike ---- */

Test(contract, lua_limits_equal_limits_h) {
    char *src = jrt_slurp(JRT_LUA_SOURCE);
    struct {
        const char *name;
        long long c;
    } t[] = {{"DELAY_MAX_MS", JR_DELAY_MAX_MS}, {"TIMEOUT_MAX_MS", JR_TIMEOUT_MAX_MS},
             {"BACKOFF_MAX_MS", JR_BACKOFF_MAX_MS}, {"ATTEMPTS_MAX", JR_ATTEMPTS_MAX},
             {"UNIQ_MAX_MS", JR_UNIQ_MAX_MS}, {"QUEUE_MAX", JR_QUEUE_MAX}, {"ID_MAX", JR_ID_MAX - 2}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\nlocal %s = ", t[i].name);
        char *p = strstr(src, pat);
        cr_expect(p, "no literal %s in jobrunner.lua", t[i].name);
        if (p) cr_expect_eq(strtoll(p + strlen(pat), NULL, 10), t[i].c, "%s", t[i].name);
    }
    free(src);
    /* And the Lua side takes each maximum and refuses one more. */
    char max[5][32], over[5][32];
    long long v[] = {JR_TIMEOUT_MAX_MS, JR_BACKOFF_MAX_MS, JR_ATTEMPTS_MAX, JR_ATTEMPTS_MAX, JR_UNIQ_MAX_MS};
    const char *f[] = {"t", "b", "m", "a", NULL};
    for (int i = 0; i < 5; i++) {
        snprintf(max[i], sizeof max[i], "%lld", v[i]);
        snprintf(over[i], sizeof over[i], "%lld", v[i] + 1);
    }
    for (int i = 0; i < 4; i++) {
        redisReply *ok = cmd("FCALL", "jr_enqueue", "4", QK("q"), "", "", "0", "h", "echo", f[i], max[i], NULL);
        cr_expect_eq(ok->type, REDIS_REPLY_ARRAY, "%s %s refused: %s", f[i], max[i], ok->str ? ok->str : "");
        freeReplyObject(ok);
        const char *argv[] = {"FCALL", "jr_enqueue", "4", QK("q"), "", "", "0", "h", "echo", f[i], over[i], NULL};
        refused(f[i], "field", argv);
    }
    char d[32], dover[32], at[48];
    snprintf(d, sizeof d, "+%lld", (long long)JR_DELAY_MAX_MS);
    snprintf(dover, sizeof dover, "+%lld", (long long)JR_DELAY_MAX_MS + 1);
    snprintf(at, sizeof at, "@%lld", (long long)(jrt_wall_us() / 1000 + JR_DELAY_MAX_MS + 60000));
    redisReply *ok = cmd("FCALL", "jr_enqueue", "4", QK("q"), d, "", max[4], "h", "echo", NULL);
    cr_expect_eq(ok->type, REDIS_REPLY_ARRAY, "the longest delay and window are refused: %s", ok->str ? ok->str : "");
    freeReplyObject(ok);
    const char *a1[] = {"FCALL", "jr_enqueue", "4", QK("q"), dover, "", "0", "h", "echo", NULL};
    refused("delay", "more than", a1);
    const char *a2[] = {"FCALL", "jr_enqueue", "4", QK("q"), at, "", "0", "h", "echo", NULL};
    refused("at", "more than", a2);
    const char *a3[] = {"FCALL", "jr_enqueue", "4", QK("q"), "", "", over[4], "h", "echo", NULL};
    refused("uniq", "UNIQ_MS", a3);
}

/* Lines of src that start with `prefix` (at the start of a line). */
static int lines_starting(const char *src, const char *prefix) {
    int n = !strncmp(src, prefix, strlen(prefix));
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s", prefix);
    for (const char *p = src; (p = strstr(p, pat)); p++) n++;
    return n;
}

/* 1 if src has the line `local <prefix><name> = '<value>'` (then the end of
 * the line or a comment). */
static int has_lua_literal(const char *src, const char *prefix, const char *name, const char *value) {
    char pat[160];
    int n = snprintf(pat, sizeof pat, "\nlocal %s%s = '%s'", prefix, name, value);
    for (const char *p = src; (p = strstr(p, pat)); p++)
        if (p[n] == '\n' || p[n] == ' ') return 1;
    return 0;
}

/* The lists of contract.h are the Lua library's F_ and K_ lines, entry for
 * entry: adding a field or a key on one side only fails here. */
Test(contract_lists, lua_names_equal_contract_h) {
    char *src = jrt_slurp(JRT_LUA_SOURCE);
    cr_assert(src, "cannot read %s", JRT_LUA_SOURCE);
    int nf = 0, nk = 0;
#define FIELD_(NAME, field)                                                                                    \
    nf++;                                                                                                      \
    cr_expect(has_lua_literal(src, "F_", #NAME, field), "no line local F_" #NAME " = '" field "' in %s",        \
              JRT_LUA_SOURCE);
    JR_ENVELOPE_FIELDS(FIELD_)
#undef FIELD_
#define KEY_(NAME, member, suffix)                                                                             \
    nk++;                                                                                                      \
    cr_expect(has_lua_literal(src, "K_", #NAME, suffix), "no line local K_" #NAME " = '" suffix "' in %s",     \
              JRT_LUA_SOURCE);
    JR_QUEUE_KEYS(KEY_)
#undef KEY_
    cr_expect_eq(lines_starting(src, "local F_"), nf,
                 "%s has %d local F_ lines, JR_ENVELOPE_FIELDS %d entries: one is on one side only", JRT_LUA_SOURCE,
                 lines_starting(src, "local F_"), nf);
    cr_expect_eq(lines_starting(src, "local K_"), nk,
                 "%s has %d local K_ lines, JR_QUEUE_KEYS %d entries: one is on one side only", JRT_LUA_SOURCE,
                 lines_starting(src, "local K_"), nk);
    const char *day = strstr(src, "\nlocal DAY_MS = ");
    cr_expect(day, "no literal DAY_MS in %s", JRT_LUA_SOURCE);
    if (day) cr_expect_eq(strtoll(day + strlen("\nlocal DAY_MS = "), NULL, 10), JR_DAY_MS, "DAY_MS is not JR_DAY_MS");
    free(src);
}

static jr_enqueue_t job(const char *queue) {
    return (jr_enqueue_t){.queue = queue, .env = {.handler = "echo", .handler_len = 4, .attempt = 1}};
}

Test(contract, c_api_refuses_a_whole_batch_before_sending) {
    char long_name[JR_QUEUE_MAX + 2], long_id[JR_ID_MAX];
    memset(long_name, 'q', sizeof long_name - 1), long_name[sizeof long_name - 1] = '\0';
    memset(long_id, 'i', sizeof long_id - 1), long_id[sizeof long_id - 1] = '\0';
    int64_t far = (jrt_wall_us() / 1000 + JR_DELAY_MAX_MS + 3600000) * 1000;
    struct {
        const char *what;
        jr_enqueue_t j;
    } t[] = {
        {"negative delay", {.queue = "b", .delay_ms = -1}},
        {"delay past the maximum", {.queue = "b", .delay_ms = JR_DELAY_MAX_MS + 1}},
        {"due time past the maximum", {.queue = "b", .at_us = far}},
        {"negative window", {.queue = "b", .uniq_ms = -1}},
        {"window past the maximum", {.queue = "b", .uniq_ms = JR_UNIQ_MAX_MS + 1}},
        {"queue with a space", {.queue = "b c"}},
        {"empty queue", {.queue = ""}},
        {"queue of 129", {.queue = long_name}},
        {"id d12", {.queue = "b", .id = "d12"}},
        {"id 12-3", {.queue = "b", .id = "12-3"}},
        {"id of 159", {.queue = "b", .id = long_id}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0] + 7; i++) {
        jr_enqueue_t jobs[2] = {job("a"), job("b")};
        const char *what;
        if (i < sizeof t / sizeof t[0]) {
            jr_envelope_t env = jobs[1].env;
            jobs[1] = t[i].j, jobs[1].env = env, what = t[i].what;
        } else {
            jr_envelope_t *e = &jobs[1].env;
            switch (i - sizeof t / sizeof t[0]) {
            case 0: e->timeout_ms = JR_TIMEOUT_MAX_MS + 1, what = "timeout"; break;
            case 1: e->timeout_ms = -1, what = "negative timeout"; break;
            case 2: e->backoff_ms = JR_BACKOFF_MAX_MS + 1, what = "backoff"; break;
            case 3: e->attempt = JR_ATTEMPTS_MAX + 1, what = "attempt"; break;
            case 4: e->max_attempts = JR_ATTEMPTS_MAX + 1, what = "max attempts"; break;
            case 5: e->handler_len = 0, what = "empty handler"; break;
            default: e->handler = NULL, e->handler_len = 0, what = "no handler"; break;
            }
        }
        int rc = jr_redis_enqueue(J, jobs, 2, NULL, NULL);
        cr_expect_eq(rc, JR_EINVAL, "%s: rc %d", what, rc);
        cr_expect(strstr(jr_redis_errstr(J), "job 2"), "%s: %s", what, jr_redis_errstr(J));
        /* Any key but the library's own (its load fence) would be a job's. */
        redisReply *k = cmd("EVAL", "local n = 0 for _, k in ipairs(redis.call('KEYS', '*')) do "
                            "if k:sub(1, 9) ~= 'jr:{lib}:' then n = n + 1 end end return {n}", "0", NULL);
        cr_expect_eq(k->element[0]->integer, 0, "%s: job 1 was written", what);
        freeReplyObject(k);
        cr_assert(jr_redis_ok(J), "%s broke the connection", what);
    }
    /* Every maximum is taken, by C and Lua alike. */
    jr_enqueue_t m = job("a");
    m.delay_ms = JR_DELAY_MAX_MS, m.uniq_ms = JR_UNIQ_MAX_MS, m.id = "max";
    m.env.timeout_ms = JR_TIMEOUT_MAX_MS, m.env.backoff_ms = JR_BACKOFF_MAX_MS;
    m.env.attempt = JR_ATTEMPTS_MAX, m.env.max_attempts = JR_ATTEMPTS_MAX;
    cr_expect_eq(jr_redis_enqueue(J, &m, 1, NULL, NULL), 0, "%s", jr_redis_errstr(J));
}

Test(contract, c_api_batch_of_many_queue_runs_is_sent_whole) {
    enum { N = 101 };
    jr_enqueue_t jobs[N];
    char ids[N][JR_ID_MAX];
    int created[N];
    for (int i = 0; i < N; i++) jobs[i] = job(i % 2 ? "q1" : "q0");
    cr_assert_eq(jr_redis_enqueue(J, jobs, N, ids, created), 0, "%s", jr_redis_errstr(J));
    for (int i = 0; i < N; i++) cr_expect(ids[i][0] && created[i] == 1, "job %d: id \"%s\"", i, ids[i]);
    cr_expect_eq(xlen("jr:{q0}:ready"), 51);
    cr_expect_eq(xlen("jr:{q1}:ready"), 50);
}

/* ---- an out-of-memory Redis ---- */

static int run_jr(char *out, size_t outlen, char *err, size_t errlen, const char *a1, const char *a2,
                  const char *a3, const char *a4) {
    char cfg[192], text[256];
    snprintf(text, sizeof text, "redis:\n  url: %s\n", R.url);
    jrt_write(&R, "c.yaml", text, cfg, sizeof cfg);
    const char *args[] = {a1, "-c", cfg, a2, a3, a4, NULL};
    return jrt_run(out, outlen, err, errlen, args);
}

Test(contract, out_of_memory_finishing_work_runs_adding_work_is_refused) {
    for (int i = 0; i < 6; i++)
        freeReplyObject(cmd("FCALL", "jr_enqueue", "4", QK("default"), "", "", "0", "h", "echo", NULL));
    freeReplyObject(cmd("FCALL", "jr_register", "2", REGK, "default", NULL));
    redisReply *r = fetch("jr:{default}:ready", 5);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    char e[5][64];
    for (int i = 0; i < 5; i++) snprintf(e[i], 64, "%s", r->element[0]->element[1]->element[i]->element[0]->str);
    freeReplyObject(r);
    freeReplyObject(cmd("FCALL", "jr_fail", "4", "jr:{default}:ready", "jr:{default}:delayed", "jr:{default}:wake",
                        "jr:{default}:dead", e[4], "c1", "dead", "0", "e", "failed", "100", NULL));
    freeReplyObject(cmd("CONFIG", "SET", "maxmemory", "1", NULL));
    /* Adding work: refused with Redis's own error, nothing changed. */
    const char *enq[] = {"FCALL", "jr_enqueue", "4", QK("default"), "", "", "0", "h", "echo", NULL};
    refused("enqueue", "OOM", enq);
    const char *reg[] = {"FCALL", "jr_register", "2", REGK, "other", NULL};
    refused("register", "OOM", reg);
    /* Finishing work runs. */
    r = cmd("FCALL", "jr_heartbeat", "1", "jr:{default}:ready", "c1", e[0], e[1], NULL);
    cr_expect(r->type == REDIS_REPLY_ARRAY && r->elements == 0, "heartbeat: %s", r->str ? r->str : "");
    freeReplyObject(r);
    r = cmd("FCALL", "jr_ack", "1", "jr:{default}:ready", e[0], NULL);
    cr_expect(r->type == REDIS_REPLY_INTEGER && r->integer == 1, "ack: %s", r->str ? r->str : "");
    freeReplyObject(r);
    r = cmd("FCALL", "jr_fail", "4", "jr:{default}:ready", "jr:{default}:delayed", "jr:{default}:wake",
            "jr:{default}:dead", e[1], "c1", "retry", "5000", "e", "failed", "100", NULL);
    cr_expect(r->type == REDIS_REPLY_INTEGER && r->integer == 1, "fail: %s", r->str ? r->str : "");
    freeReplyObject(r);
    r = cmd("FCALL", "jr_handback", "1", "jr:{default}:ready", "c1", e[2], NULL);
    cr_expect(r->type == REDIS_REPLY_INTEGER && r->integer == 1, "handback: %s", r->str ? r->str : "");
    freeReplyObject(r);
    r = cmd("FCALL", "jr_reclaim", "2", "jr:{default}:ready", "jr:{default}:dead", "c2", "0", "0-0", "10", "5",
            "100", NULL);
    cr_expect(r->type == REDIS_REPLY_ARRAY && r->element[3]->element[0]->element[1]->elements == 1,
              "reclaim: %s", r->str ? r->str : "");
    freeReplyObject(r);
    /* jobrunner's own ack path (the C API) too. */
    const char *ids[] = {e[3]};
    long long n = -1;
    cr_expect(jr_redis_append_ack(J, "default", ids, 1) == 0 && jr_redis_flush(J) == 0 &&
                  jr_redis_recv_int(J, &n) == 0 && n == 1,
              "C ack: %s", jr_redis_errstr(J));
    /* The admin tools to look and to free memory work. */
    char out[4096], err[4096];
    cr_expect_eq(run_jr(out, sizeof out, err, sizeof err, "stats", NULL, NULL, NULL), 0, "stats: %s", err);
    cr_expect(strstr(out, "default"), "stats: %s", out);
    cr_expect_eq(run_jr(out, sizeof out, err, sizeof err, "dead", "list", NULL, NULL), 0, "dead list: %s", err);
    cr_expect(strstr(out, "failed"), "dead list: %s", out);
    cr_expect_eq(run_jr(out, sizeof out, err, sizeof err, "dead", "purge", "--all", NULL), 0, "purge: %s", err);
    cr_expect(strstr(out, "purged 1 dead job"), "purge: %s", out);
    cr_expect_eq(xlen("jr:{default}:dead"), 0);
    /* Enqueueing shows Redis's own error. */
    cr_expect_eq(run_jr(out, sizeof out, err, sizeof err, "enqueue", "echo", "x", NULL), 1);
    cr_expect(strstr(err, "OOM command not allowed"), "enqueue: %s", err);
    freeReplyObject(cmd("CONFIG", "SET", "maxmemory", "0", NULL));
}

/* ---- the scheduler: garbage logged by queue, a refused queue backs off alone ---- */

Test(contract, scheduler_names_the_queue_and_backs_off_it_alone, .timeout = 60) {
    char cfg[192], text[512], log[192];
    snprintf(text, sizeof text, "redis:\n  url: %s\nscheduler:\n  queues: [good, broken, junk]\n", R.url);
    jrt_write(&R, "c.yaml", text, cfg, sizeof cfg);
    snprintf(log, sizeof log, "%s/sched.log", R.dir);
    freeReplyObject(cmd("SET", "jr:{broken}:delayed", "not a sorted set", NULL));
    buf_t g = mp_seq("j1", "p", "no handler", NULL);
    zadd("jr:{junk}:delayed", "1", &g);
    free(g.p);
    const char *args[] = {"scheduler", "-c", cfg, NULL};
    pid_t s = jrt_spawn(log, args);
    jrt_sleep_ms(300);
    freeReplyObject(cmd("FCALL", "jr_enqueue", "4", QK("good"), "+500", "", "0", "h", "echo", NULL));
    jrt_sleep_ms(3500);
    jrt_stop(s, SIGTERM, 5000);
    cr_expect_eq(xlen("jr:{good}:ready"), 1, "the good queue was not served");
    cr_expect_eq(xlen("jr:{junk}:dead"), 1, "the garbage member is not in the dead stream");
    int refusals = jrt_count(log, "queue=broken");
    cr_expect(refusals >= 1 && refusals <= 4, "%d log lines for the broken queue in 3.8 s", refusals);
    cr_expect(jrt_count(log, "WRONGTYPE") + jrt_count(log, "holds a string") >= 1, "Redis's error not logged");
    cr_expect_eq(jrt_count(log, "queue=junk"), 1, "the dead-lettered member is not logged with its queue");
}

/* DEAD_MAX and MIN_IDLE_MS reach Redis as counts: one it cannot take (a Lua
 * number past 1e16 is sent as "1e+17") must be refused before the first
 * write, not after the good members of the delayed set went to the stream
 * (they would be promoted again at every call). */
Test(contract, counts_redis_cannot_take_are_refused_before_any_write) {
    buf_t m = mp_seq("good1", "h", "echo", "p", "x", NULL), junk = mp_seq("junk", NULL);
    zadd("jr:{p}:delayed", "1", &m);
    zadd("jr:{p}:delayed", "2", &junk);
    free(m.p), free(junk.p);
    const char *big[] = {"100000000000000000000", "1000000000000000000", "99999999999999999999999999"};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        const char *a[] = {"FCALL", "jr_promote", "4", "jr:{p}:ready", "jr:{p}:delayed", "jr:{p}:wake",
                           "jr:{p}:dead", "10", big[i], NULL};
        refused("promote: DEAD_MAX past 18 digits", "jobrunner: jr_promote", a);
    }
    cr_expect_eq(xlen("jr:{p}:ready"), 0);
    cr_expect_eq(zcard("jr:{p}:delayed"), 2);
    /* 18 digits (1e17) is a count Redis takes: both members move, once. */
    redisReply *rep = cmd("FCALL", "jr_promote", "4", "jr:{p}:ready", "jr:{p}:delayed", "jr:{p}:wake",
                          "jr:{p}:dead", "10", "100000000000000000", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_ARRAY, "%s", rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    freeReplyObject(rep);
    cr_expect_eq(xlen("jr:{p}:ready"), 1);
    cr_expect_eq(xlen("jr:{p}:dead"), 1);
    cr_expect_eq(zcard("jr:{p}:delayed"), 0);
    /* A pending entry: reclaim and fail with such counts change nothing. */
    redisReply *f = fetch("jr:{p}:ready", 1);
    freeReplyObject(f);
    const char *r1[] = {"FCALL", "jr_reclaim", "2", "jr:{p}:ready", "jr:{p}:dead", "c2", "0", "0-0", "10", "0",
                        "100000000000000000000", NULL};
    refused("reclaim: DEAD_MAX past 18 digits", "jobrunner: jr_reclaim", r1);
    const char *r2[] = {"FCALL", "jr_reclaim", "2", "jr:{p}:ready", "jr:{p}:dead", "c2", "100000000000000000000",
                        "0-0", "10", "0", "100", NULL};
    refused("reclaim: MIN_IDLE_MS past 18 digits", "jobrunner: jr_reclaim", r2);
}

/* A stream whose last entry id has the time 2^64-1 (an XADD or XSETID by
 * hand) makes XADD * raise: every call that would add to it must refuse
 * before its first write, not after it (jr_promote promoted its good jobs
 * again at every call; jr_fail left a retried job both delayed and pending;
 * jr_enqueue left the uniq key of a job that does not exist). */
Test(contract, calls_into_a_stream_with_no_entry_ids_left_are_refused_before_any_write) {
    static const char *const FULL = "18446744073709551615-18446744073709551615";
    const char *streams[] = {"jr:{p}:ready", "jr:{p}:wake", "jr:{p}:dead", "jr:{queues}:wake"};
    for (int k = 0; k < 4; k++) {
        freeReplyObject(cmd("FLUSHALL", NULL));
        buf_t m = mp_seq("good1", "h", "echo", NULL), junk = mp_seq("junk", NULL);
        zadd("jr:{p}:delayed", "1", &m);
        zadd("jr:{p}:delayed", "2", &junk);
        free(m.p), free(junk.p);
        redisReply *e = cmd("FCALL", "jr_enqueue", "4", QK("p"), "", "", "0", "h", "echo", NULL);
        cr_assert_eq(e->type, REDIS_REPLY_ARRAY);
        char entry[64];
        snprintf(entry, sizeof entry, "%s", e->element[0]->str);
        freeReplyObject(e);
        freeReplyObject(fetch("jr:{p}:ready", 1)); /* pending for c1 */
        redisReply *d = cmd("XADD", "jr:{p}:dead", "*", "id", "dj", "h", "echo", NULL);
        char dentry[64];
        snprintf(dentry, sizeof dentry, "%s", d->str);
        freeReplyObject(d);
        if (k == 0 || k == 2) { /* keep the stream, set its last id */
            freeReplyObject(cmd("XSETID", streams[k], FULL, NULL));
        } else {
            freeReplyObject(cmd("XADD", streams[k], FULL, "w", "1", NULL));
        }
        const char *promote[] = {"FCALL", "jr_promote", "4", "jr:{p}:ready", "jr:{p}:delayed", "jr:{p}:wake",
                                 "jr:{p}:dead", "10", "100", NULL};
        const char *now_id[] = {"FCALL", "jr_enqueue", "5", QK("p"), "jr:{p}:uniq:x", "", "x", "1000", "h", "echo", NULL};
        const char *later_id[] = {"FCALL", "jr_enqueue", "5", QK("p"), "jr:{p}:uniq:x", "+60000", "x", "1000", "h", "echo", NULL};
        const char *many[] = {"FCALL", "jr_enqueue_many", "4", QK("p"), "0", "+60000", "", "1", "h", "echo",
                              "", "", "1", "h", "echo", NULL};
        const char *retry0[] = {"FCALL", "jr_fail", "4", "jr:{p}:ready", "jr:{p}:delayed", "jr:{p}:wake", "jr:{p}:dead",
                                entry, "c1", "retry", "0", "e", "failed", "100", NULL};
        const char *retry1[] = {"FCALL", "jr_fail", "4", "jr:{p}:ready", "jr:{p}:delayed", "jr:{p}:wake", "jr:{p}:dead",
                                entry, "c1", "retry", "60000", "e", "failed", "100", NULL};
        const char *dead[] = {"FCALL", "jr_fail", "4", "jr:{p}:ready", "jr:{p}:delayed", "jr:{p}:wake", "jr:{p}:dead",
                              entry, "c1", "dead", "0", "e", "failed", "100", NULL};
        const char *reclaim[] = {"FCALL", "jr_reclaim", "2", "jr:{p}:ready", "jr:{p}:dead", "c2", "0", "0-0", "10", "0",
                                 "100", NULL};
        const char *handback[] = {"FCALL", "jr_handback", "1", "jr:{p}:ready", "c1", entry, NULL};
        const char *dretry[] = {"FCALL", "jr_dead_retry", "2", "jr:{p}:dead", "jr:{p}:ready", dentry, NULL};
        const char *reg[] = {"FCALL", "jr_register", "2", "jr:{queues}", "jr:{queues}:wake", "newq", NULL};
        const char *w = "last possible entry time";
        if (k == 0) {
            refused("ready: promote", w, promote), refused("ready: enqueue now", w, now_id);
            refused("ready: enqueue_many", w, many), refused("ready: fail retry 0", w, retry0);
            refused("ready: handback", w, handback), refused("ready: dead retry", w, dretry);
        } else if (k == 1) {
            refused("wake: enqueue later", w, later_id), refused("wake: enqueue_many", w, many);
            refused("wake: fail retry later", w, retry1);
        } else if (k == 2) {
            refused("dead: promote", w, promote), refused("dead: fail dead", w, dead);
            refused("dead: fail retry", w, retry0), refused("dead: reclaim", w, reclaim);
        } else {
            refused("registry wake: register", w, reg);
        }
    }
}

/* A job due now without an id writes only the ready stream: garbage in the
 * keys of delayed jobs and ids (delayed, wake, seq, ids) does not refuse it,
 * and is left as it was. The group is made for a stream the call creates and
 * for one made by hand; the ready stream's own refusals still hold. */
Test(contract, a_job_due_now_without_an_id_needs_only_the_ready_stream) {
    freeReplyObject(cmd("FLUSHALL", NULL));
    freeReplyObject(cmd("SET", "jr:{n}:delayed", "junk", NULL));
    freeReplyObject(cmd("RPUSH", "jr:{n}:wake", "junk", NULL));
    freeReplyObject(cmd("SET", "jr:{n}:seq", "not a number", NULL));
    freeReplyObject(cmd("SET", "jr:{n}:ids", "junk", NULL));
    buf_t before = snapshot();
    redisReply *one = cmd("FCALL", "jr_enqueue", "4", QK("n"), "", "", "0", "h", "echo", NULL);
    cr_assert_eq(one->type, REDIS_REPLY_ARRAY, "refused: %s", one->str ? one->str : "");
    cr_expect_eq(one->element[1]->integer, 1);
    freeReplyObject(one);
    redisReply *many = cmd("FCALL", "jr_enqueue_many", "4", QK("n"), "0", "", "", "1", "h", "echo", "0", "", "2", "h",
                           "echo", "p", "x", NULL);
    cr_assert_eq(many->type, REDIS_REPLY_ARRAY, "refused: %s", many->str ? many->str : "");
    cr_expect_eq(many->elements, 4);
    freeReplyObject(many);
    redisReply *got = cmd("XREADGROUP", "GROUP", "jr", "c1", "COUNT", "10", "STREAMS", "jr:{n}:ready", ">", NULL);
    cr_assert_eq(got->type, REDIS_REPLY_ARRAY, "no group on the stream the enqueue made: %s", got->str ? got->str : "");
    cr_expect_eq(got->element[0]->element[1]->elements, 3);
    freeReplyObject(got);
    freeReplyObject(cmd("DEL", "jr:{n}:ready", NULL));
    buf_t after = snapshot();
    cr_expect(same(&before, &after), "the keys of delayed jobs and ids changed");
    free(before.p), free(after.p);

    /* a stream made by a plain XADD has no group: the enqueue makes it at 0 */
    freeReplyObject(cmd("XADD", "jr:{m}:ready", "*", "h", "echo", NULL));
    freeReplyObject(cmd("FCALL", "jr_enqueue_many", "4", QK("m"), "0", "", "", "1", "h", "echo", NULL));
    got = cmd("XREADGROUP", "GROUP", "jr", "c1", "COUNT", "10", "STREAMS", "jr:{m}:ready", ">", NULL);
    cr_assert_eq(got->type, REDIS_REPLY_ARRAY, "no group made on a stream made by hand: %s", got->str ? got->str : "");
    cr_expect_eq(got->element[0]->element[1]->elements, 2);
    freeReplyObject(got);

    /* the ready stream's refusals, on this path too: nothing written */
    freeReplyObject(cmd("RPUSH", "jr:{l}:ready", "junk", NULL));
    const char *list1[] = {"FCALL", "jr_enqueue", "4", QK("l"), "", "", "0", "h", "echo", NULL};
    const char *list2[] = {"FCALL", "jr_enqueue_many", "4", QK("l"), "0", "", "", "1", "h", "echo", NULL};
    refused("enqueue now into a list", "holds a list", list1);
    refused("enqueue_many now into a list", "holds a list", list2);
    freeReplyObject(cmd("XADD", "jr:{f}:ready", "18446744073709551615-18446744073709551615", "h", "echo", NULL));
    const char *full1[] = {"FCALL", "jr_enqueue", "4", QK("f"), "", "", "0", "h", "echo", NULL};
    const char *full2[] = {"FCALL", "jr_enqueue_many", "4", QK("f"), "0", "", "", "1", "h", "echo", "", "", "1", "h",
                           "echo", NULL};
    refused("enqueue now into a full stream", "last possible entry time", full1);
    refused("enqueue_many now into a full stream", "last possible entry time", full2);
    /* at the time below the last, one more call takes several jobs */
    freeReplyObject(cmd("DEL", "jr:{f}:ready", NULL));
    freeReplyObject(cmd("XADD", "jr:{f}:ready", "18446744073709551614-18446744073709551615", "h", "echo", NULL));
    redisReply *last = cmd("FCALL", "jr_enqueue_many", "4", QK("f"), "0", "", "", "1", "h", "echo", "", "", "1", "h",
                           "echo", NULL);
    cr_expect_eq(last->type, REDIS_REPLY_ARRAY, "refused below the last time: %s", last->str ? last->str : "");
    freeReplyObject(last);
    cr_expect_eq(xlen("jr:{f}:ready"), 3);
    /* at the last time with one id left, one job would fit but two do not:
     * a call of two is refused whole, not cut after its first XADD */
    freeReplyObject(cmd("DEL", "jr:{f}:ready", NULL));
    freeReplyObject(cmd("XADD", "jr:{f}:ready", "18446744073709551615-18446744073709551614", "h", "echo", NULL));
    refused("enqueue_many of two, one id left", "last possible entry time", full2);
    cr_expect_eq(xlen("jr:{f}:ready"), 1, "a refused call wrote entries");
}

/* A delayed member scored past any due time a function writes (a ZADD by
 * hand) must not cost the scheduler its timer for the other queues. */
Test(contract, a_far_score_in_one_queue_keeps_the_timer_of_the_others, .timeout = 60) {
    char cfg[192], text[512], log[192];
    snprintf(text, sizeof text, "redis:\n  url: %s\nscheduler:\n  queues: [good, far]\n  block: 60s\n", R.url);
    jrt_write(&R, "c.yaml", text, cfg, sizeof cfg);
    snprintf(log, sizeof log, "%s/sched.log", R.dir);
    buf_t a = mp_seq("f1", "h", "echo", NULL), b = mp_seq("f2", "h", "echo", NULL);
    zadd("jr:{far}:delayed", "1e16", &a);
    zadd("jr:{far}:delayed", "+inf", &b);
    free(a.p), free(b.p);
    freeReplyObject(cmd("FCALL", "jr_enqueue", "4", QK("good"), "+1500", "", "0", "h", "echo", NULL));
    const char *args[] = {"scheduler", "-c", cfg, NULL};
    pid_t s = jrt_spawn(log, args);
    for (int t = 0; t < 40 && xlen("jr:{good}:ready") == 0; t++) jrt_sleep_ms(100);
    jrt_stop(s, SIGTERM, 5000);
    cr_expect_eq(xlen("jr:{good}:ready"), 1, "the job due in 1.5 s was not promoted within 4 s:\n%s", jrt_slurp(log));
    cr_expect_eq(zcard("jr:{far}:delayed"), 2);
}

/* ---- the property test: random calls, an exact ledger ---- */

enum { L_READY, L_PENDING, L_DELAYED, L_DEAD, L_DONE };
static const char *const LOC[] = {"ready", "pending", "delayed", "dead", "done"};
/* What a ledger entry is: a job, a stream entry without h, one too large to
 * copy, a delayed-set member that is not an envelope. */
enum { K_JOB, K_NOH, K_HUGE, K_MEMBER };

typedef struct pjob {
    char id[64]; /* job id (K_MEMBER: the marker inside the member) */
    int q, loc, kind, attempt, deliveries, soon;
    char entry[48]; /* stream entry id while pending */
} pjob_t;

#define NQ 2
static const char *const PQ[NQ] = {"pa", "pb"};
static struct {
    pjob_t *v;
    size_t n, cap;
    int *slot; /* open addressing: index + 1, by queue and id */
    size_t nslot;
    unsigned char used[NQ][40]; /* explicit ids k0..k39 enqueued once */
    uint64_t rng;
    long refused, accepted;
} P;

static uint64_t rnd(void) {
    P.rng ^= P.rng << 13, P.rng ^= P.rng >> 7, P.rng ^= P.rng << 17;
    return P.rng;
}
static int pick(int n) { return (int)(rnd() % (uint64_t)n); }

static size_t slot_of(int q, const char *id) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)q;
    for (const char *p = id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    size_t i = (size_t)(h & (P.nslot - 1));
    while (P.slot[i] && (P.v[P.slot[i] - 1].q != q || strcmp(P.v[P.slot[i] - 1].id, id))) i = (i + 1) & (P.nslot - 1);
    return i;
}
static pjob_t *find(int q, const char *id) {
    size_t i = slot_of(q, id);
    return P.slot[i] ? &P.v[P.slot[i] - 1] : NULL;
}
static pjob_t *add(int q, const char *id, int loc, int kind) {
    cr_assert(!find(q, id), "job %s:%s enqueued twice", PQ[q], id);
    cr_assert(P.n + 1 < P.nslot / 2, "ledger full");
    if (P.n == P.cap) P.v = realloc(P.v, (P.cap = P.cap ? 2 * P.cap : 1024) * sizeof *P.v);
    pjob_t *j = &P.v[P.n++];
    memset(j, 0, sizeof *j);
    snprintf(j->id, sizeof j->id, "%s", id);
    j->q = q, j->loc = loc, j->kind = kind, j->attempt = 1;
    P.slot[slot_of(q, id)] = (int)P.n;
    return j;
}

/* The ledger id of a delayed-set member: its first item, or the marker of
 * our not-msgpack garbage. */
static void member_id(const char *p, size_t n, char *out) {
    mp_first(p, n, out, 64);
    if (!out[0] && n > 1 && (unsigned char)p[0] == 0xc1) snprintf(out, 64, "%.*s", (int)(n - 1), p + 1);
}

/* Every job is in exactly the place the model says, once; done ones nowhere. */
static void check_ledger(long step) {
    int *seen = calloc(P.n + 1, sizeof *seen);
    char id[64];
    for (int q = 0; q < NQ; q++) {
        jr_qkeys_t k;
        jr_qkeys(&k, PQ[q]);
        redisReply *pend = cmd("XPENDING", k.ready, "jr", "-", "+", "100000", NULL);
        redisReply *rs = cmd("XRANGE", k.ready, "-", "+", NULL);
        for (size_t i = 0; rs->type == REDIS_REPLY_ARRAY && i < rs->elements; i++) {
            const char *entry = rs->element[i]->element[0]->str;
            redisReply *f = rs->element[i]->element[1], *fid = field(f, "id"), *fa = field(f, "a");
            pjob_t *j = find(q, fid ? fid->str : entry);
            cr_assert(j, "step %ld: unknown entry %s in %s", step, entry, k.ready);
            int pending = 0;
            for (size_t p = 0; pend->type == REDIS_REPLY_ARRAY && p < pend->elements; p++)
                pending |= !strcmp(pend->element[p]->element[0]->str, entry);
            int loc = pending ? L_PENDING : L_READY;
            cr_assert_eq(j->loc, loc, "step %ld: job %s:%s is %s, the model says %s", step, PQ[q], j->id, LOC[loc],
                         LOC[j->loc]);
            if (pending) cr_assert_str_eq(j->entry, entry, "step %ld: job %s", step, j->id);
            if (j->kind == K_JOB)
                cr_assert_eq(fa ? atoi(fa->str) : 1, j->attempt, "step %ld: job %s attempt", step, j->id);
            seen[j - P.v]++;
        }
        freeReplyObject(rs), freeReplyObject(pend);
        redisReply *zs = cmd("ZRANGE", k.delayed, "0", "-1", NULL);
        for (size_t i = 0; i < zs->elements; i++) {
            member_id(zs->element[i]->str, zs->element[i]->len, id);
            pjob_t *j = find(q, id);
            cr_assert(j, "step %ld: unknown delayed member (id \"%s\") in %s", step, id, k.delayed);
            cr_assert_eq(j->loc, L_DELAYED, "step %ld: job %s is delayed, the model says %s", step, j->id, LOC[j->loc]);
            seen[j - P.v]++;
        }
        freeReplyObject(zs);
        zs = jrt_delayed_all(C, PQ[q]); /* the time wheel's buckets */
        for (size_t i = 0; i + 2 < zs->elements; i += 3) {
            if (strcmp(zs->element[i + 2]->str, "w")) continue;
            pjob_t *j = find(q, zs->element[i]->str);
            cr_assert(j, "step %ld: unknown job in the time wheel (id \"%s\")", step, zs->element[i]->str);
            cr_assert_eq(j->loc, L_DELAYED, "step %ld: job %s is delayed, the model says %s", step, j->id, LOC[j->loc]);
            seen[j - P.v]++;
        }
        freeReplyObject(zs);
        redisReply *ds = cmd("XRANGE", k.dead, "-", "+", NULL);
        for (size_t i = 0; i < ds->elements; i++) {
            redisReply *f = ds->element[i]->element[1], *fid = field(f, "id"), *raw = field(f, "raw");
            if (fid) snprintf(id, sizeof id, "%s", fid->str);
            else if (raw) member_id(raw->str, raw->len, id);
            else id[0] = '\0';
            pjob_t *j = find(q, id);
            cr_assert(j, "step %ld: unknown dead entry (id \"%s\") in %s", step, id, k.dead);
            cr_assert_eq(j->loc, L_DEAD, "step %ld: job %s is dead, the model says %s", step, j->id, LOC[j->loc]);
            seen[j - P.v]++;
        }
        freeReplyObject(ds);
    }
    for (size_t i = 0; i < P.n; i++)
        cr_assert_eq(seen[i], P.v[i].loc == L_DONE ? 0 : 1, "step %ld: job %s:%s (%s) found %d times", step,
                     PQ[P.v[i].q], P.v[i].id, LOC[P.v[i].loc], seen[i]);
    free(seen);
}

/* A pending job of queue q (or of any queue if q < 0), or NULL. */
static pjob_t *some(int loc, int q) {
    size_t n = 0;
    for (size_t i = 0; i < P.n; i++) n += P.v[i].loc == loc && (q < 0 || P.v[i].q == q);
    if (!n) return NULL;
    size_t k = (size_t)pick((int)n);
    for (size_t i = 0; i < P.n; i++)
        if (P.v[i].loc == loc && (q < 0 || P.v[i].q == q) && k-- == 0) return &P.v[i];
    return NULL;
}

/* Expect the call to be refused and to change nothing. */
static void p_refused(const char *what, int argc, const char **argv) {
    buf_t before = snapshot();
    redisReply *rep = cmdv(argc, argv, NULL);
    buf_t after = snapshot();
    cr_assert_eq(rep->type, REDIS_REPLY_ERROR, "%s: not refused", what);
    cr_assert(same(&before, &after), "%s (%s): a refused call changed the keys", what, rep->str);
    freeReplyObject(rep), free(before.p), free(after.p);
    P.refused++;
}

static const char *const BAD_WHEN[] = {"+nan", "+inf", "-inf", "-1", "+1e3", "+0x10", "@nan", "+", " +1", "+1 ",
                                       "+315360000001", "@99999999999999", "+-1", "1"};

static void p_enqueue_c(int valid) {
    int n = 1 + pick(4);
    jr_enqueue_t jobs[4];
    char ids[4][JR_ID_MAX], pay[4][24], kid[4][16];
    int created[4], soon[4], now_due[4];
    for (int i = 0; i < n; i++) {
        int q = pick(NQ), w = pick(10);
        jobs[i] = job(PQ[q]);
        for (int b = 0, len = pick(20); b < len; b++) pay[i][b] = (char)rnd();
        jobs[i].env.payload = pay[i], jobs[i].env.payload_len = (size_t)pick(20);
        if (pick(4) == 0) jobs[i].env.timeout_ms = 1 + pick(100000), jobs[i].env.max_attempts = 1 + (uint32_t)pick(1000);
        if (pick(2)) snprintf(kid[i], sizeof kid[i], "k%d", pick(40)), jobs[i].id = kid[i];
        now_due[i] = w < 4, soon[i] = w >= 4 && w < 6;
        if (w >= 4 && w < 6) jobs[i].delay_ms = 1;
        else if (w >= 6 && w < 8) jobs[i].delay_ms = 3600000;
        else if (w == 8) jobs[i].at_us = 1000000, now_due[i] = 1;
        else if (w == 9) jobs[i].at_us = jrt_wall_us() + 3600000000LL;
    }
    if (!valid) {
        jr_enqueue_t *b = &jobs[pick(n)];
        switch (pick(8)) {
        case 0: b->delay_ms = -1, b->at_us = 0; break;
        case 1: b->delay_ms = JR_DELAY_MAX_MS + 1, b->at_us = 0; break;
        case 2: b->env.timeout_ms = JR_TIMEOUT_MAX_MS + 1; break;
        case 3: b->env.attempt = JR_ATTEMPTS_MAX + 1; break;
        case 4: b->queue = "x y"; break;
        case 5: b->env.handler_len = 0; break;
        case 6: b->id = "d9"; break;
        default: b->uniq_ms = -5; break;
        }
        buf_t before = snapshot();
        cr_assert_eq(jr_redis_enqueue(J, jobs, (size_t)n, ids, created), JR_EINVAL, "a bad C batch was taken");
        buf_t after = snapshot();
        cr_assert(same(&before, &after), "a refused C batch changed the keys: %s", jr_redis_errstr(J));
        free(before.p), free(after.p);
        P.refused++;
        return;
    }
    cr_assert_eq(jr_redis_enqueue(J, jobs, (size_t)n, ids, created), 0, "%s", jr_redis_errstr(J));
    for (int i = 0; i < n; i++) {
        int q = jobs[i].queue == PQ[0] ? 0 : 1, dup = 0;
        if (jobs[i].id) {
            int k = atoi(jobs[i].id + 1);
            dup = P.used[q][k];
            P.used[q][k] = 1;
        }
        cr_assert_eq(created[i], !dup, "job %s: created %d, the model says %d", ids[i], created[i], !dup);
        if (dup) continue;
        pjob_t *j = add(q, ids[i], now_due[i] ? L_READY : L_DELAYED, K_JOB);
        j->soon = soon[i];
    }
    P.accepted++;
}

static void p_enqueue_raw(int valid) {
    int q = pick(NQ), many = pick(2), bad = valid ? -1 : pick(2);
    jr_qkeys_t k;
    jr_qkeys(&k, PQ[q]);
    const char *argv[64];
    int a = 0, nkeys = 4;
    char kid[2][16], uniq[2][64], far[32];
    snprintf(far, sizeof far, "@%lld", (long long)(jrt_wall_us() / 1000 + 3600000));
    const char *whens[] = {"", "0", "+1", "+0.5", "+3600000", "@1", far};
    int w[2], has_id[2], nj = many ? 2 : 1;
    argv[a++] = "FCALL", argv[a++] = many ? "jr_enqueue_many" : "jr_enqueue", argv[a++] = NULL;
    argv[a++] = k.ready, argv[a++] = k.delayed, argv[a++] = k.wake, argv[a++] = k.seq;
    for (int i = 0; i < nj; i++) {
        w[i] = pick(7), has_id[i] = pick(2);
        snprintf(kid[i], sizeof kid[i], "k%d", pick(40));
        snprintf(uniq[i], sizeof uniq[i], "jr:{%s}:uniq:%s", PQ[q], kid[i]);
        if (many && i == 1 && has_id[0] && has_id[1] && !strcmp(kid[0], kid[1])) has_id[1] = 0;
        if (has_id[i]) argv[a++] = uniq[i], nkeys++;
    }
    char nk[16];
    snprintf(nk, sizeof nk, "%d", nkeys);
    argv[2] = nk;
    if (many) argv[a++] = "86400000";
    for (int i = 0; i < nj; i++) {
        /* the bad job: a bad time, bad fields or (jr_enqueue) a bad window */
        int corrupt = i == bad || (!many && bad >= 0) ? pick(many ? 2 : 3) : -1;
        argv[a++] = corrupt == 0 ? BAD_WHEN[pick((int)(sizeof BAD_WHEN / sizeof *BAD_WHEN))] : whens[w[i]];
        argv[a++] = has_id[i] ? kid[i] : "";
        if (!many) argv[a++] = corrupt == 2 ? "-1" : "86400000";
        static const char *const fields[][4] = {{"h", "echo", NULL}, {"h", "echo", "p", "x"}, {"h", "echo", "t", "500"}};
        static const char *const badf[][4] = {{"h", "", NULL}, {"h", "echo", "t", "0"}, {"h", "echo", "m", "1001"},
                                              {"h", "echo", "zz", "1"}};
        const char *const *f = corrupt == 1 ? badf[pick(4)] : fields[pick(3)];
        int nf = f[2] ? 4 : 2;
        if (many) argv[a++] = nf == 4 ? "2" : "1";
        for (int x = 0; x < nf; x++) argv[a++] = f[x];
    }
    if (bad >= 0) {
        p_refused("raw enqueue", a, argv);
        return;
    }
    redisReply *rep = cmdv(a, argv, NULL);
    cr_assert_eq(rep->type, REDIS_REPLY_ARRAY, "raw enqueue refused: %s", rep->str);
    for (int i = 0; i < nj; i++) {
        int dup = 0;
        if (has_id[i]) {
            int kk = atoi(kid[i] + 1);
            dup = P.used[q][kk];
            P.used[q][kk] = 1;
        }
        cr_assert_eq(rep->element[2 * i + 1]->integer, !dup, "raw job %s", rep->element[2 * i]->str);
        if (dup) continue;
        int now_due = w[i] == 0 || w[i] == 1 || w[i] == 5;
        pjob_t *j = add(q, rep->element[2 * i]->str, now_due ? L_READY : L_DELAYED, K_JOB);
        j->soon = w[i] == 2 || w[i] == 3;
    }
    freeReplyObject(rep);
    P.accepted++;
}

static long garbage_n;

static void p_garbage_member(void) {
    int q = pick(NQ), soon = pick(4) != 0;
    char id[32], score[32];
    snprintf(id, sizeof id, "gm%ld", garbage_n++);
    buf_t m = {0};
    switch (pick(4)) {
    case 0: bbyte(&m, 0xc1), bput(&m, id, strlen(id)); break; /* not msgpack */
    case 1: m = mp_seq(id, "p", "no handler", NULL); break;
    case 2: m = mp_seq(id, "h", NULL); break; /* odd */
    default: m = mp_seq(id, "h", "echo", "a", NULL), bbyte(&m, 0x05); break; /* a number */
    }
    snprintf(score, sizeof score, "%lld", soon ? 1LL : (long long)(jrt_wall_us() / 1000 + 3600000));
    jr_qkeys_t k;
    jr_qkeys(&k, PQ[q]);
    zadd(k.delayed, score, &m);
    free(m.p);
    add(q, id, L_DELAYED, K_MEMBER)->soon = soon;
}

static void p_garbage_entry(void) {
    int q = pick(NQ);
    jr_qkeys_t k;
    jr_qkeys(&k, PQ[q]);
    char entry[64];
    int kind = pick(100) == 0 ? K_HUGE : K_NOH;
    if (kind == K_HUGE) {
        xadd_big(k.ready, 5000, entry);
    } else {
        static const char *const f[][2] = {{"x", "y"}, {"h", ""}, {"p", "z"}};
        int c = pick(3);
        redisReply *rep = cmd("XADD", k.ready, "*", f[c][0], f[c][1], NULL);
        snprintf(entry, sizeof entry, "%s", rep->str);
        freeReplyObject(rep);
    }
    add(q, entry, L_READY, kind);
}

/* Promote every due member of a queue, as a scheduler does, by the C API or
 * a raw FCALL with 3 keys; the model moves every soon one. */
static void p_promote(void) {
    int q = pick(NQ), limit = 1 + pick(5), c_api = pick(2);
    int64_t moved = 0, buried = 0, total_buried = 0;
    jrt_sleep_ms(3); /* everything "soon" is due */
    do {
        if (c_api) {
            double next, now;
            char wake[JR_ID_MAX];
            cr_assert_eq(jr_redis_promote(J, PQ[q], limit, 1000, &moved, &buried, &next, &now, wake, NULL), 0, "%s",
                         jr_redis_errstr(J));
        } else {
            jr_qkeys_t k;
            jr_qkeys(&k, PQ[q]);
            char lim[16];
            snprintf(lim, sizeof lim, "%d", limit);
            redisReply *rep = cmd("FCALL", "jr_promote", "3", k.ready, k.delayed, k.wake, lim, NULL);
            cr_assert_eq(rep->type, REDIS_REPLY_ARRAY, "promote: %s", rep->str);
            moved = rep->element[0]->integer, buried = rep->element[4]->integer;
            freeReplyObject(rep);
        }
        total_buried += buried;
    } while (moved == limit);
    int64_t want = 0;
    for (size_t i = 0; i < P.n; i++) {
        pjob_t *j = &P.v[i];
        if (j->q != q || j->loc != L_DELAYED || !j->soon) continue;
        int garbage = j->kind != K_JOB; /* a member without h is garbage */
        j->loc = garbage ? L_DEAD : L_READY;
        want += garbage;
    }
    cr_assert_eq(total_buried, want, "promote buried %lld members, the model says %lld", (long long)total_buried,
                 (long long)want);
}

static void p_fetch(void) {
    int q = pick(NQ);
    jr_qkeys_t k;
    jr_qkeys(&k, PQ[q]);
    redisReply *rep = fetch(k.ready, 1 + pick(4));
    for (size_t s = 0; rep->type == REDIS_REPLY_ARRAY && s < rep->elements; s++) {
        redisReply *en = rep->element[s]->element[1];
        for (size_t i = 0; i < en->elements; i++) {
            const char *entry = en->element[i]->element[0]->str;
            redisReply *fid = field(en->element[i]->element[1], "id");
            pjob_t *j = find(q, fid ? fid->str : entry);
            cr_assert(j, "fetched an unknown entry %s", entry);
            cr_assert_eq(j->loc, L_READY, "fetched job %s, which the model has %s", j->id, LOC[j->loc]);
            j->loc = L_PENDING, j->deliveries = 1;
            snprintf(j->entry, sizeof j->entry, "%s", entry);
        }
    }
    freeReplyObject(rep);
}

/* A fake worker finishes one pending job: ack, retry (now, soon, later),
 * bury, or hand back; by the C API or a raw FCALL. */
static void p_finish(void) {
    pjob_t *j = some(L_PENDING, -1);
    if (!j) return;
    jr_qkeys_t k;
    jr_qkeys(&k, PQ[j->q]);
    int action = pick(6), c_api = pick(2);
    long long r = -1;
    const char *ids[] = {j->entry};
    static const char *const delays[] = {"0", "1", "3600000"};
    if (action == 0) {
        if (c_api) {
            cr_assert(jr_redis_append_ack(J, PQ[j->q], ids, 1) == 0 && jr_redis_flush(J) == 0 &&
                      jr_redis_recv_int(J, &r) == 0, "%s", jr_redis_errstr(J));
        } else {
            r = jrt_int(C, "FCALL jr_ack 1 %s %s", k.ready, j->entry);
        }
        cr_assert_eq(r, 1, "ack of %s", j->id);
        j->loc = L_DONE;
    } else if (action <= 4) {
        const char *act = action == 4 ? "dead" : "retry", *delay = action == 4 ? "0" : delays[action - 1];
        if (c_api) {
            cr_assert(jr_redis_append_fail(J, PQ[j->q], j->entry, "c1", act, atoll(delay), "boom", "failed", 1000) == 0 &&
                      jr_redis_flush(J) == 0 && jr_redis_recv_int(J, &r) == 0, "%s", jr_redis_errstr(J));
        } else {
            r = jrt_int(C, "FCALL jr_fail 4 %s %s %s %s %s c1 %s %s boom failed 1000", k.ready, k.delayed, k.wake,
                        k.dead, j->entry, act, delay);
        }
        cr_assert_eq(r, 1, "fail of %s", j->id);
        if (action == 4 || j->kind == K_HUGE) {
            j->loc = L_DEAD;
        } else {
            j->attempt++;
            j->loc = action == 1 ? L_READY : L_DELAYED;
            j->soon = action == 2;
        }
    } else {
        if (c_api) {
            cr_assert(jr_redis_append_handback(J, PQ[j->q], "c1", ids, 1) == 0 && jr_redis_flush(J) == 0 &&
                      jr_redis_recv_int(J, &r) == 0, "%s", jr_redis_errstr(J));
        } else {
            r = jrt_int(C, "FCALL jr_handback 1 %s c1 %s", k.ready, j->entry);
        }
        cr_assert_eq(r, j->kind == K_HUGE ? 0 : 1, "handback of %s", j->id);
        if (j->kind != K_HUGE) j->loc = L_READY;
    }
}

static void p_heartbeat(void) {
    pjob_t *j = some(L_PENDING, -1);
    if (!j) return;
    unsigned char lost[1];
    const char *ids[] = {j->entry};
    cr_assert_eq(jr_redis_heartbeat(J, PQ[j->q], "c1", ids, 1, lost, NULL), 0, "%s", jr_redis_errstr(J));
}

/* One full reclaim pass by the same consumer: every pending entry is
 * delivered once more; those past max_deliveries are buried (poison). */
static void p_reclaim(void) {
    int q = pick(NQ);
    long long maxd = 2 + pick(3), deleted, poisoned, total = 0, want = 0;
    char cursor[JR_ID_MAX] = "0-0";
    jr_batch_t b = {0};
    do {
        cr_assert_eq(jr_redis_reclaim(J, PQ[q], 0, "c1", 0, cursor, 100, maxd, 1000, &b, &deleted, &poisoned), 0,
                     "%s", jr_redis_errstr(J));
        total += poisoned;
    } while (strcmp(cursor, "0-0"));
    jr_batch_free(&b);
    for (size_t i = 0; i < P.n; i++) {
        pjob_t *j = &P.v[i];
        if (j->q != q || j->loc != L_PENDING) continue;
        if (++j->deliveries > maxd) j->loc = L_DEAD, want++;
    }
    cr_assert_eq(total, want, "reclaim buried %lld, the model says %lld", total, want);
}

static void p_dead_retry(void) {
    int q = pick(NQ);
    jr_qkeys_t k;
    jr_qkeys(&k, PQ[q]);
    redisReply *ds = cmd("XRANGE", k.dead, "-", "+", NULL);
    if (ds->elements == 0) {
        freeReplyObject(ds);
        return;
    }
    const char *sel[3];
    size_t n = 0;
    long long want = 0, moved = -1;
    for (size_t t = 0, m = 1 + (size_t)pick(3); t < m; t++) {
        redisReply *e = ds->element[pick((int)ds->elements)];
        int dup = 0;
        for (size_t x = 0; x < n; x++) dup |= !strcmp(sel[x], e->element[0]->str);
        if (dup) continue;
        sel[n++] = e->element[0]->str;
        redisReply *fid = field(e->element[1], "id"), *raw = field(e->element[1], "raw");
        char id[64];
        if (fid) snprintf(id, sizeof id, "%s", fid->str);
        else member_id(raw->str, raw->len, id);
        pjob_t *j = find(q, id);
        cr_assert(j && j->loc == L_DEAD);
        if (j->kind == K_JOB) j->loc = L_READY, j->attempt = 1, want++; /* the rest cannot run: they stay */
    }
    cr_assert_eq(jr_redis_dead_retry(J, PQ[q], sel, n, &moved), 0, "%s", jr_redis_errstr(J));
    cr_assert_eq(moved, want, "dead retry moved %lld, the model says %lld", moved, want);
    freeReplyObject(ds);
}

/* A worker or scheduler call with one bad argument (after good ones). */
static void p_bad_worker_call(void) {
    pjob_t *j = some(L_PENDING, -1);
    int q = j ? j->q : pick(NQ);
    jr_qkeys_t k;
    jr_qkeys(&k, PQ[q]);
    const char *e = j ? j->entry : "1-1";
    const char *v[16];
    int n = 0;
    switch (pick(9)) {
    case 0: n = 6, memcpy(v, (const char *[]){"FCALL", "jr_ack", "1", k.ready, e, "bad"}, 6 * sizeof *v); break;
    case 1:
        n = 14, memcpy(v, (const char *[]){"FCALL", "jr_fail", "4", k.ready, k.delayed, k.wake, k.dead, e, "c1",
                                           pick(2) ? "retri" : "retry", "-1", "x", "failed", "1000"}, 14 * sizeof *v);
        break;
    case 2:
        n = 14, memcpy(v, (const char *[]){"FCALL", "jr_fail", "4", k.ready, k.delayed, k.wake, k.dead, e, "c1",
                                           "dead", "0", "x", "failed", "+inf"}, 14 * sizeof *v);
        break;
    case 3: n = 7, memcpy(v, (const char *[]){"FCALL", "jr_heartbeat", "1", k.ready, "c1", e, "0-x"}, 7 * sizeof *v); break;
    case 4: n = 7, memcpy(v, (const char *[]){"FCALL", "jr_handback", "1", k.ready, "c1", e, "a-b"}, 7 * sizeof *v); break;
    case 5:
        memcpy(v, (const char *[]){"FCALL", "jr_reclaim", "2", k.ready, k.dead, "c1", "0", "0-0", "0", "3",
                                           "1000"}, 11 * sizeof *v);
        n = 11;
        break;
    case 6: n = 7, memcpy(v, (const char *[]){"FCALL", "jr_dead_retry", "2", k.dead, k.ready, "0-1", "zz"}, 7 * sizeof *v); break;
    case 7: n = 7, memcpy(v, (const char *[]){"FCALL", "jr_promote", "3", k.ready, k.delayed, k.wake, "0"}, 7 * sizeof *v); break;
    default: n = 6, memcpy(v, (const char *[]){"FCALL", "jr_register", "2", REGK, "bad name"}, 6 * sizeof *v); break;
    }
    p_refused(v[1], n, v);
}

Test(contract, property_random_calls_keep_an_exact_ledger, .timeout = 300) {
    const char *seed_env = getenv("JRT_SEED"), *steps_env = getenv("JRT_STEPS");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)jrt_wall_us();
    long steps = steps_env ? atol(steps_env) : 3000;
    fprintf(stderr, "property test: JRT_SEED=%llu JRT_STEPS=%ld\n", (unsigned long long)seed, steps);
    cr_log_info("property test: JRT_SEED=%llu", (unsigned long long)seed);
    memset(&P, 0, sizeof P);
    P.rng = seed * 2654435761ULL + 1;
    P.nslot = 1 << 16;
    P.slot = calloc(P.nslot, sizeof *P.slot);
    int64_t t0 = jrt_wall_us();
    for (long step = 0; step < steps; step++) {
        int w = pick(100);
        if (w < 10) p_enqueue_c(1);
        else if (w < 14) p_enqueue_c(0);
        else if (w < 22) p_enqueue_raw(1);
        else if (w < 28) p_enqueue_raw(0);
        else if (w < 31) p_garbage_member();
        else if (w < 33) p_garbage_entry();
        else if (w < 41) p_promote();
        else if (w < 53) p_fetch();
        else if (w < 75) p_finish();
        else if (w < 78) p_heartbeat();
        else if (w < 81) p_reclaim();
        else if (w < 85) p_dead_retry();
        else p_bad_worker_call();
        check_ledger(step);
    }
    long n[5] = {0};
    for (size_t i = 0; i < P.n; i++) n[P.v[i].loc]++;
    fprintf(stderr,
            "property test: seed %llu, %ld steps in %.1f s: %zu jobs (ready %ld, pending %ld, delayed %ld, dead %ld, "
            "done %ld), %ld accepted enqueue calls, %ld refused calls changed nothing\n",
            (unsigned long long)seed, steps, (double)(jrt_wall_us() - t0) / 1e6, P.n, n[0], n[1], n[2], n[3], n[4],
            P.accepted, P.refused);
    free(P.v), free(P.slot);
}

/* ---- findings of a review of the library (each once a real bug) ---- */

/* A stats counter someone overwrote must not make jr_ack raise after it
 * acknowledged and deleted the entry. */
Test(contract, a_garbage_stats_counter_never_makes_ack_or_fail_raise) {
    freeReplyObject(cmd("XGROUP", "CREATE", "jr:{s1}:ready", "jr", "$", "MKSTREAM", NULL));
    freeReplyObject(cmd("XADD", "jr:{s1}:ready", "*", "h", "x", NULL));
    freeReplyObject(cmd("XADD", "jr:{s1}:ready", "*", "h", "x", NULL));
    redisReply *rd = cmd("XREADGROUP", "GROUP", "jr", "w1", "COUNT", "2", "STREAMS", "jr:{s1}:ready", ">", NULL);
    cr_assert(rd->type == REDIS_REPLY_ARRAY && rd->elements == 1 && rd->element[0]->element[1]->elements == 2);
    char e1[64], e2[64];
    snprintf(e1, sizeof e1, "%s", rd->element[0]->element[1]->element[0]->element[0]->str);
    snprintf(e2, sizeof e2, "%s", rd->element[0]->element[1]->element[1]->element[0]->str);
    freeReplyObject(rd);
    freeReplyObject(cmd("HSET", "jr:{s1}:stats", "processed", "abc", "failed", "99999999999999999999", NULL));
    redisReply *r = cmd("FCALL", "jr_ack", "1", "jr:{s1}:ready", e1, NULL);
    cr_expect_eq(r->type, REDIS_REPLY_INTEGER, "jr_ack raised: %s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    r = cmd("FCALL", "jr_fail", "4", "jr:{s1}:ready", "jr:{s1}:delayed", "jr:{s1}:wake", "jr:{s1}:dead", e2, "w1",
            "dead", "0", "boom", "failed", "100", NULL);
    cr_expect_eq(r->type, REDIS_REPLY_INTEGER, "jr_fail raised: %s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    r = cmd("HMGET", "jr:{s1}:stats", "processed", "failed", NULL);
    cr_expect_str_eq(r->element[0]->str, "1", "processed starts again at the count");
    cr_expect_str_eq(r->element[1]->str, "1", "failed starts again at the count");
    freeReplyObject(r);
}

/* A due time with more than 3 decimals: the generated id names the
 * millisecond the job is stored in, so lookup and cancel find it. */
Test(contract, a_delayed_job_due_at_a_fraction_is_found_by_its_id) {
    redisReply *t = cmd("TIME", NULL);
    long long now = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    char when[64];
    snprintf(when, sizeof when, "@%lld.9996", now + 3600000);
    redisReply *r = cmd("FCALL", "jr_enqueue", "4", "jr:{f1}:ready", "jr:{f1}:delayed", "jr:{f1}:wake", "jr:{f1}:seq",
                        when, "", "0", "h", "x", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    char id[64];
    snprintf(id, sizeof id, "%s", r->element[0]->str);
    freeReplyObject(r);
    char uniq[128];
    snprintf(uniq, sizeof uniq, "jr:{f1}:uniq:%s", id);
    r = cmd("FCALL", "jr_cancel", "5", "jr:{f1}:ready", "jr:{f1}:delayed", "jr:{f1}:ids", "jr:{f1}:cancelled", uniq,
            id, NULL);
    int ok = r->type == REDIS_REPLY_STRING && !strcmp(r->str, "cancelled");
    if (r->type == REDIS_REPLY_ERROR) cr_log_error("jr_cancel: %s", r->str);
    freeReplyObject(r);
    cr_expect(ok, "job %s not cancelled", id);
    cr_expect_eq(zcard("jr:{f1}:delayed"), 0, "the job is still waiting");
}

/* An entry id given as "<ms>" is "<ms>-0" for every part of a call: jr_fail
 * of "<ms>" never acts on "<ms>-1" while acknowledging "<ms>-0". */
Test(contract, an_entry_id_without_sequence_means_sequence_0_throughout) {
    freeReplyObject(cmd("XGROUP", "CREATE", "jr:{m1}:ready", "jr", "$", "MKSTREAM", NULL));
    freeReplyObject(cmd("XADD", "jr:{m1}:ready", "5000-0", "h", "x", "p", "first", NULL));
    freeReplyObject(cmd("XADD", "jr:{m1}:ready", "5000-1", "h", "x", "p", "second", NULL));
    freeReplyObject(cmd("XREADGROUP", "GROUP", "jr", "w1", "STREAMS", "jr:{m1}:ready", ">", NULL));
    freeReplyObject(cmd("FCALL", "jr_ack", "1", "jr:{m1}:ready", "5000-0", NULL));
    redisReply *r = cmd("FCALL", "jr_fail", "4", "jr:{m1}:ready", "jr:{m1}:delayed", "jr:{m1}:wake", "jr:{m1}:dead",
                        "5000", "w1", "retry", "0", "boom", "failed", "100", NULL);
    cr_expect(r->type == REDIS_REPLY_INTEGER && r->integer == 0, "jr_fail of a gone entry did something");
    freeReplyObject(r);
    cr_expect_eq(npending("jr:{m1}:ready"), 1, "5000-1 is no longer pending");
    cr_expect_eq(xlen("jr:{m1}:ready"), 1, "a retry copy was added: the job would run twice");
}

/* A job whose id is its ready entry id is not some other job's dead entry
 * that happens to have the same entry id in the dead stream. */
Test(contract, lookup_never_takes_another_jobs_dead_entry_for_a_job) {
    freeReplyObject(cmd("XADD", "jr:{d1}:dead", "7000-0", "id", "other-job", "h", "x", "err", "e", "why", "failed", NULL));
    redisReply *r = cmd("FCALL", "jr_locate", "4", "jr:{d1}:ready", "jr:{d1}:delayed", "jr:{d1}:ids", "jr:{d1}:dead",
                        "7000-0", NULL);
    int dead = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->type == REDIS_REPLY_STRING &&
               !strcmp(r->element[0]->str, "dead");
    if (r->type == REDIS_REPLY_ERROR) cr_log_error("jr_locate: %s", r->str);
    freeReplyObject(r);
    cr_expect(!dead, "job 7000-0 reported dead with another job's entry");
    r = cmd("FCALL", "jr_delete", "5", "jr:{d1}:ready", "jr:{d1}:delayed", "jr:{d1}:ids", "jr:{d1}:dead",
            "jr:{d1}:uniq:7000-0", "7000-0", NULL);
    freeReplyObject(r);
    cr_expect_eq(xlen("jr:{d1}:dead"), 1, "jr_delete removed another job's dead entry");
}

/* jr_ack_follow keeps the job index and the stats like jr_ack, and indexes
 * its follow-ups like jr_enqueue. */
Test(contract, ack_with_follow_ups_keeps_the_index_and_the_counters) {
    redisReply *r = cmd("FCALL", "jr_enqueue", "5", "jr:{af}:ready", "jr:{af}:delayed", "jr:{af}:wake", "jr:{af}:seq",
                        "jr:{af}:uniq:parent-1", "", "parent-1", "86400000", "h", "x", NULL);
    freeReplyObject(r);
    freeReplyObject(cmd("XGROUP", "CREATE", "jr:{af}:ready", "jr", "0", "MKSTREAM", NULL));
    redisReply *rd = cmd("XREADGROUP", "GROUP", "jr", "w1", "STREAMS", "jr:{af}:ready", ">", NULL);
    cr_assert(rd->type == REDIS_REPLY_ARRAY);
    char entry[64];
    snprintf(entry, sizeof entry, "%s", rd->element[0]->element[1]->element[0]->element[0]->str);
    freeReplyObject(rd);
    r = cmd("HGET", "jr:{af}:ids", "parent-1", NULL);
    cr_expect_eq(r->type, REDIS_REPLY_STRING, "an explicit-id job is not in the index");
    freeReplyObject(r);
    r = cmd("FCALL", "jr_ack_follow", "6", "jr:{af}:ready", "jr:{ft}:ready", "jr:{ft}:delayed", "jr:{ft}:wake",
            "jr:{ft}:seq", "jr:{ft}:uniq:child-1", entry, "1", "86400000", "1", "+60000", "child-1", "1", "h", "y", NULL);
    cr_expect(r->type == REDIS_REPLY_INTEGER && r->integer == 1, "jr_ack_follow: %s",
              r->type == REDIS_REPLY_ERROR ? r->str : "not 1");
    freeReplyObject(r);
    r = cmd("HEXISTS", "jr:{af}:ids", "parent-1", NULL);
    cr_expect_eq(r->integer, 0, "the acknowledged job stays in the index");
    freeReplyObject(r);
    r = cmd("HGET", "jr:{af}:stats", "processed", NULL);
    cr_expect(r->type == REDIS_REPLY_STRING && !strcmp(r->str, "1"), "processed not counted");
    freeReplyObject(r);
    r = cmd("HGET", "jr:{ft}:ids", "child-1", NULL);
    cr_expect(r->type == REDIS_REPLY_STRING && (r->str[0] == '@' || r->str[0] == '~'),
              "the delayed follow-up is not in its queue's index");
    freeReplyObject(r);
}

/* ---- jr_ack: what it deletes (the trim of issue 10) ---- */

/* Calls of `name` in INFO commandstats (0 if none yet). */
static long long calls_of(const char *name) {
    redisReply *rep = cmd("INFO", "commandstats", NULL);
    char want[64];
    snprintf(want, sizeof want, "cmdstat_%s:calls=", name);
    const char *p = rep->type == REDIS_REPLY_STRING ? strstr(rep->str, want) : NULL;
    long long n = p ? atoll(p + strlen(want)) : 0;
    freeReplyObject(rep);
    return n;
}

/* 1 if the stream holds entry id. */
static int has_entry(const char *key, const char *id) {
    redisReply *rep = cmd("XRANGE", key, id, id, NULL);
    int n = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1;
    freeReplyObject(rep);
    return n;
}

static long long ack(const char *const *ids, size_t n) {
    const char *argv[16] = {"FCALL", "jr_ack", "1", "jr:{t}:ready"};
    for (size_t i = 0; i < n; i++) argv[4 + i] = ids[i];
    redisReply *rep = cmdv((int)(4 + n), argv, NULL);
    cr_assert_eq(rep->type, REDIS_REPLY_INTEGER, "%s", rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

/* An acknowledgement deletes exactly the entries it acknowledges, in any
 * order: never an older entry still running, nor one not yet delivered.
 * And when no older entry is still pending (jobs finish in about the order
 * they came), it trims the finished head of the stream in one XTRIM instead
 * of one XDEL lookup per entry. */
Test(contract, ack_deletes_exactly_its_entries_and_trims_a_finished_head) {
    char id[10][64];
    for (int i = 0; i < 10; i++) {
        redisReply *rep = cmd("XADD", "jr:{t}:ready", "*", "h", "x", NULL);
        snprintf(id[i], sizeof id[i], "%s", rep->str);
        freeReplyObject(rep);
    }
    freeReplyObject(fetch("jr:{t}:ready", 8)); /* 0..7 delivered (pending), 8, 9 not */
    freeReplyObject(cmd("CONFIG", "RESETSTAT", NULL));
    const char *later[] = {id[2], id[3]}; /* 0, 1 still running */
    cr_assert_eq(ack(later, 2), 2);
    cr_assert_eq(xlen("jr:{t}:ready"), 8);
    for (int i = 0; i < 10; i++) cr_assert_eq(has_entry("jr:{t}:ready", id[i]), i != 2 && i != 3, "entry %d", i);
    cr_assert_eq(npending("jr:{t}:ready"), 6);
    const char *head[] = {id[1], id[0]}; /* the oldest, out of order within the call */
    cr_assert_eq(ack(head, 2), 2);
    cr_assert_eq(xlen("jr:{t}:ready"), 6);
    for (int i = 0; i < 10; i++) cr_assert_eq(has_entry("jr:{t}:ready", id[i]), i >= 4, "entry %d", i);
    const char *rest[] = {id[4], id[5], id[6], id[7]}; /* 8, 9 were never delivered: they stay */
    cr_assert_eq(ack(rest, 4), 4);
    cr_assert_eq(xlen("jr:{t}:ready"), 2);
    cr_assert(has_entry("jr:{t}:ready", id[8]) && has_entry("jr:{t}:ready", id[9]));
    cr_assert_eq(npending("jr:{t}:ready"), 0);
    /* the two calls with nothing older pending trimmed; the first deleted */
    cr_assert_eq(calls_of("xtrim"), 2);
    cr_assert_eq(calls_of("xdel"), 1);
    redisReply *rep = fetch("jr:{t}:ready", 10); /* the undelivered ones are still delivered */
    cr_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 && rep->element[0]->element[1]->elements == 2);
    freeReplyObject(rep);
}

/* With an older entry still running, an acknowledgement still trims the
 * entries of the call below it (one XTRIM up to the oldest pending entry)
 * and deletes only the others one by one: two workers' batches interleave
 * in the stream, so this is the drain's usual case. */
Test(contract, ack_trims_below_the_oldest_running_entry_and_deletes_the_rest) {
    char id[10][64];
    for (int i = 0; i < 10; i++) {
        redisReply *rep = cmd("XADD", "jr:{t}:ready", "*", "h", "x", NULL);
        snprintf(id[i], sizeof id[i], "%s", rep->str);
        freeReplyObject(rep);
    }
    freeReplyObject(fetch("jr:{t}:ready", 8)); /* 0..7 delivered (pending), 8, 9 not */
    freeReplyObject(cmd("CONFIG", "RESETSTAT", NULL));
    const char *mixed[] = {id[6], id[0], id[1], id[4]}; /* 2, 3, 5, 7 still running */
    cr_assert_eq(ack(mixed, 4), 4);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(has_entry("jr:{t}:ready", id[i]), i != 0 && i != 1 && i != 4 && i != 6, "entry %d", i);
    cr_assert_eq(xlen("jr:{t}:ready"), 6);
    cr_assert_eq(npending("jr:{t}:ready"), 4);
    cr_assert_eq(calls_of("xtrim"), 1); /* 0 and 1 */
    cr_assert_eq(calls_of("xdel"), 1);  /* 4 and 6 */
    const char *none_below[] = {id[5]}; /* 2 still runs: nothing of this call below it */
    cr_assert_eq(ack(none_below, 1), 1);
    cr_assert_eq(calls_of("xtrim"), 1);
    cr_assert_eq(xlen("jr:{t}:ready"), 5);
    const char *rest[] = {id[7], id[3], id[2]};
    cr_assert_eq(ack(rest, 3), 3);
    cr_assert_eq(xlen("jr:{t}:ready"), 2);
    cr_assert(has_entry("jr:{t}:ready", id[8]) && has_entry("jr:{t}:ready", id[9]));
    cr_assert_eq(npending("jr:{t}:ready"), 0);
}

/* Ids of different shapes (explicit ones: "9-10" sorts after "10-2" as a
 * string) are compared as numbers: the trim takes exactly the call's entries. */
Test(contract, ack_compares_ids_of_different_lengths_as_numbers) {
    const char *ids[] = {"9-1", "9-10", "10-2", "10-3", "11-0"};
    for (int i = 0; i < 5; i++) freeReplyObject(cmd("XADD", "jr:{t}:ready", ids[i], "h", "x", NULL));
    freeReplyObject(fetch("jr:{t}:ready", 4)); /* 11-0 not delivered */
    freeReplyObject(cmd("CONFIG", "RESETSTAT", NULL));
    const char *done[] = {"9-10", "10-2", "9-1"}; /* 10-3 still running */
    cr_assert_eq(ack(done, 3), 3);
    cr_assert_eq(xlen("jr:{t}:ready"), 2);
    cr_assert(has_entry("jr:{t}:ready", "10-3") && has_entry("jr:{t}:ready", "11-0"));
    cr_assert_eq(calls_of("xtrim"), 1);
    cr_assert_eq(calls_of("xdel"), 0);
}

/* ---- one rule per value: every layer gives the same verdict ---- */

/* FCALL jr_enqueue with the value in its place (queue: the keys; handler:
 * h; id: ID and the uniq key). Returns 1 if accepted, else 0 with the error
 * in msg. */
static int lua_verdict(rc_kind_t kind, const char *v, size_t n, char *msg, size_t msglen) {
    const char *q = kind == RC_QUEUE ? v : "q";
    size_t qn = kind == RC_QUEUE ? n : 1;
    char keys[5][512];
    size_t kl[5];
    const char *suffix[] = {"ready", "delayed", "wake", "seq", "uniq:"};
    for (int i = 0; i < 5; i++) {
        int w = snprintf(keys[i], sizeof keys[i], "jr:{");
        memcpy(keys[i] + w, q, qn);
        kl[i] = (size_t)w + qn;
        kl[i] += (size_t)sprintf(keys[i] + kl[i], "}:%s", suffix[i]);
    }
    int uniq = kind == RC_ID;
    if (uniq) memcpy(keys[4] + kl[4], v, n), kl[4] += n;
    const char *argv[16];
    size_t lens[16];
    int a = 0;
#define ARG(p, l) (argv[a] = (p), lens[a++] = (l))
    ARG("FCALL", 5), ARG("jr_enqueue", 10), ARG(uniq ? "5" : "4", 1);
    for (int i = 0; i < 4 + uniq; i++) ARG(keys[i], kl[i]);
    ARG("", 0);
    if (uniq) ARG(v, n);
    else ARG("", 0);
    ARG("0", 1), ARG("h", 1);
    if (kind == RC_HANDLER) ARG(v, n);
    else ARG("echo", 4);
    if (kind == RC_ATTEMPTS) ARG("m", 1), ARG(v, n);
#undef ARG
    redisReply *rep = cmdv(a, argv, lens);
    int ok = rep->type == REDIS_REPLY_ARRAY;
    snprintf(msg, msglen, "%s", rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    freeReplyObject(rep);
    return ok;
}

/* What a refusal of this kind must say: the C phrase (a queue refused by
 * its key says the rule). */
static const char *words(rc_kind_t kind, const char *phrase) {
    return kind == RC_QUEUE ? JR_QUEUE_RULE : phrase;
}

/* The CLI: jobrunner enqueue with the value. Returns 1 if it exited 0, 0
 * if 2 (a usage error, with the reason in msg). */
static int cli_verdict(const rc_case_t *c, char *msg, size_t msglen) {
    char cfg[192], text[256], out[512];
    snprintf(text, sizeof text, "redis:\n  url: %s\n", R.url);
    jrt_write(&R, "c.yaml", text, cfg, sizeof cfg);
    const char *args[12] = {"enqueue", "-c", cfg};
    int n = 3;
    if (c->kind == RC_QUEUE) args[n++] = "-q", args[n++] = c->v;
    if (c->kind == RC_ID) args[n++] = "--id", args[n++] = c->v;
    if (c->kind == RC_DURATION) args[n++] = "--in", args[n++] = c->v;
    if (c->kind == RC_ATTEMPTS) args[n++] = "--max-attempts", args[n++] = c->v;
    args[n++] = c->kind == RC_HANDLER ? c->v : "echo";
    args[n] = NULL;
    int st = jrt_run(out, sizeof out, msg, msglen, args);
    cr_expect(st == 0 || st == 2, "jobrunner enqueue \"%s\": exit %d: %s", c->v, st, msg);
    return st == 0;
}

/* The client library. Returns 1 if created or existed, else 0 with the
 * job's error in msg. */
static int client_verdict(jr_client_t *cl, const rc_case_t *c, char *msg, size_t msglen) {
    jr_client_job_t j = {.handler = "echo"};
    if (c->kind == RC_QUEUE) j.queue = c->v;
    if (c->kind == RC_HANDLER) j.handler = c->v;
    if (c->kind == RC_ID) j.id = c->v;
    jr_client_result_t r;
    int rc = jr_client_enqueue(cl, &j, &r);
    snprintf(msg, msglen, "%s", r.error ? r.error : jr_client_errstr(cl));
    cr_expect(rc == 0 || r.status == JR_CLIENT_JOB_REFUSED, "client \"%s\": rc %d, status %d: %s", c->v, rc,
              (int)r.status, msg);
    return r.status == JR_CLIENT_JOB_CREATED || r.status == JR_CLIENT_JOB_EXISTED;
}

static void same_verdict(const rc_case_t *c, const char *layer, int ok, const char *msg) {
    int want = c->says == NULL;
    cr_expect_eq(ok, want, "%s: \"%.40s\" (%zu bytes) %s, expected %s: %s", layer, c->v, rc_len(c),
                 ok ? "accepted" : "refused", want ? "accepted" : "refused", msg);
    if (!ok && !want)
        cr_expect(strstr(msg, words(c->kind, c->says)), "%s: \"%.40s\": \"%s\" does not say \"%s\"", layer, c->v,
                  msg, words(c->kind, c->says));
}

/* The table of tests/contract_cases.h through every layer a producer can
 * use: the Redis functions (any bytes, so NUL too), the CLI and the client
 * library (C strings), each with the verdict and the words of contract.c.
 * (The pure C layers — api->enqueue, the decoder, the config loader —
 * have the same table in tests/unit/test_contract.c.) */
Test(contract, every_layer_gives_each_value_the_same_verdict, .timeout = 120) {
    jr_client_t *cl = jr_client_connect(R.url, 5000, 5000);
    cr_assert(cl && !jr_client_err(cl), "%s", cl ? jr_client_errstr(cl) : "out of memory");
    for (size_t i = 0; i < RC_NCASES; i++) {
        const rc_case_t *c = &RC_CASES[i];
        char msg[JR_ERRLEN] = "";
        if (c->kind != RC_DURATION)
            same_verdict(c, "Lua", lua_verdict(c->kind, c->v, rc_len(c), msg, sizeof msg), msg);
        if (rc_has_nul(c)) continue; /* argv and the C API take C strings */
        msg[0] = '\0';
        same_verdict(c, "CLI", cli_verdict(c, msg, sizeof msg), msg);
        if (c->kind == RC_DURATION || c->kind == RC_ATTEMPTS) continue; /* numbers in the C API */
        same_verdict(c, "client", client_verdict(cl, c, msg, sizeof msg), msg);
    }
    jr_client_free(cl);
}

static uint64_t rnd64(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* Random values, mostly near the rules' edges (the generated id forms,
 * lengths around each maximum, a NUL, a byte outside the name set): the C
 * rule function and the Lua library give the same verdict and, for a
 * refusal, the same words. */
Test(contract, c_and_lua_rules_agree_on_random_values, .timeout = 120) {
    static const char *const atoms[] = {"d", "0", "7", "12", "-", "x", "A", "_", ".", ":", " ", "{", "}",
                                        "/", "\xff", "\xc3\xa9", "\0", "\n", "@"};
    static const size_t atom_len[] = {1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1};
    static const size_t edges[] = {63, 64, 65, 127, 128, 129, 157, 158, 159};
    uint64_t x = 0x2545F4914F6CDD1DULL;
    int seen[3][2] = {{0}};
    for (int i = 0; i < 6000; i++) {
        rc_kind_t kind = (rc_kind_t)(i % 3);
        char v[256];
        size_t n = 0;
        if (rnd64(&x) % 4 == 0) { /* a long run of a valid byte, near a maximum */
            size_t len = edges[rnd64(&x) % 9];
            memset(v, rnd64(&x) % 2 ? 'd' : '5', len);
            n = len;
            if (rnd64(&x) % 2) v[rnd64(&x) % len] = (char)(rnd64(&x) % 2 ? '-' : '\0');
        } else {
            for (int k = (int)(rnd64(&x) % 8); k >= 0; k--) {
                size_t a = rnd64(&x) % 19;
                if (rnd64(&x) % 3) a = rnd64(&x) % 6; /* mostly d, digits and '-' */
                memcpy(v + n, atoms[a], atom_len[a]);
                n += atom_len[a];
            }
        }
        if (kind == RC_ID && n == 0) continue; /* "" = a generated id, not a value */
        const char *rule = kind == RC_QUEUE ? jr_contract_queue_name(v, n)
                           : kind == RC_HANDLER ? jr_contract_handler_name(v, n)
                                                : jr_contract_job_id(v, n);
        char msg[JR_ERRLEN];
        int lua = lua_verdict(kind, v, n, msg, sizeof msg);
        char shown[80];
        size_t k = 0;
        for (size_t j = 0; j < n && k < 60; j++) {
            unsigned char b = (unsigned char)v[j];
            k += (size_t)sprintf(shown + k, b >= 0x20 && b < 0x7f ? "%c" : "\\x%02x", b);
        }
        shown[k] = '\0';
        cr_assert_eq(lua, rule == NULL, "kind %d \"%s\" (%zu bytes): C %s, Lua %s", (int)kind, shown, n,
                     rule ? rule : "accepts", lua ? "accepts" : msg);
        if (rule && !(kind == RC_HANDLER && n == 0))
            cr_assert(strstr(msg, words(kind, rule)), "kind %d \"%s\": Lua says \"%s\", C \"%s\"", (int)kind, shown,
                      msg, rule);
        seen[kind][lua]++;
    }
    for (int k = 0; k < 3; k++) {
        cr_log_info("kind %d: accepted %d, refused %d", k, seen[k][1], seen[k][0]);
        cr_expect_gt(seen[k][1], 200, "kind %d: only %d accepted", k, seen[k][1]);
        cr_expect_gt(seen[k][0], 200, "kind %d: only %d refused", k, seen[k][0]);
    }
}

/* The literal maxima of the Lua rules block are those of jr_limits.h and
 * cron.h (the test above checks the behaviour; this one the source). */
Test(contract, lua_rule_maxima_equal_the_c_constants) {
    char *src = jrt_slurp(JRT_LUA_SOURCE);
    struct {
        const char *name;
        long long c;
    } t[] = {{"ID_MAX", JR_JOB_ID_MAX}, {"HANDLER_MAX", JR_HANDLER_NAME_MAX}, {"CRON_NAME_MAX", JR_CRON_NAME_MAX},
             {"QUEUE_MAX", JR_QUEUE_MAX}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\nlocal %s = ", t[i].name);
        char *p = strstr(src, pat);
        cr_expect(p, "no literal %s in jobrunner.lua", t[i].name);
        if (p) cr_expect_eq(strtoll(p + strlen(pat), NULL, 10), t[i].c, "%s", t[i].name);
    }
    cr_expect(strstr(src, "local QUEUE_RULE = '" JR_QUEUE_RULE "'"), "QUEUE_RULE differs from contract.h");
    cr_expect(strstr(src, "local HANDLER_RULE = '" JR_HANDLER_RULE "'"), "HANDLER_RULE differs from contract.h");
    cr_expect(strstr(src, "local CRON_NAME_RULE = '" JR_SCHEDULE_RULE "'"), "CRON_NAME_RULE differs from contract.h");
    free(src);
}

/* Entries whose id or handler name breaks its rule (written by hand, or by
 * a revision before 15: a NUL in the id, a handler name no handler can
 * have) are not run: each is dead-lettered as invalid with the rule's words,
 * and a good entry beside them runs. */
Test(contract, worker_dead_letters_values_outside_the_rules_with_the_rule, .timeout = 60) {
    char cfg[192], text[512], log[192];
    snprintf(text, sizeof text, "redis:\n  url: %s\nworker:\n  handler_wait: 0s\n", R.url);
    jrt_write(&R, "c.yaml", text, cfg, sizeof cfg);
    snprintf(log, sizeof log, "%s/worker.log", R.dir);
    freeReplyObject(fetch("jr:{default}:ready", 0));
    struct {
        const char *id, *h, *says;
        size_t id_len, h_len;
    } bad[] = {{"a\0b", "record", "job id \"a?b\" contains a NUL byte", 3, 6},
               {"bad-h", "send mail", "handler name \"send mail\" is not valid (1-64 characters", 5, 9},
               {"bad-h2", "h\0x", "handler name \"h?x\" is not valid", 6, 3}};
    for (size_t i = 0; i < 3; i++) {
        const char *argv[] = {"XADD", "jr:{default}:ready", "*", "id", bad[i].id, "h", bad[i].h};
        size_t lens[] = {4, 18, 1, 2, bad[i].id_len, 1, bad[i].h_len};
        freeReplyObject(cmdv(7, argv, lens));
    }
    freeReplyObject(cmd("XADD", "jr:{default}:ready", "*", "id", "good", "h", "record", NULL));
    char rec[256];
    snprintf(rec, sizeof rec, "%s/record", R.dir);
    setenv("JRT_RECORD", rec, 1);
    const char *args[] = {"worker", "-c", cfg, "--plugin", JRT_RECORD_PLUGIN, NULL};
    pid_t w = jrt_spawn(log, args);
    for (int t = 0; t < 200 && (xlen("jr:{default}:dead") < 3 || jrt_count(rec, "good ") < 1); t++) jrt_sleep_ms(50);
    jrt_stop(w, SIGTERM, 10000);
    unsetenv("JRT_RECORD");
    cr_expect_eq(jrt_count(rec, "good "), 1, "the good entry did not run once");
    redisReply *ds = cmd("XRANGE", "jr:{default}:dead", "-", "+", NULL);
    cr_expect_eq(ds->elements, 3, "dead entries: %zu", ds->elements);
    for (size_t i = 0; i < ds->elements && i < 3; i++) {
        redisReply *why = field(ds->element[i]->element[1], "why"), *err = field(ds->element[i]->element[1], "err");
        cr_expect(why && !strcmp(why->str, "invalid"), "entry %zu: why %s", i, why ? why->str : "(none)");
        cr_expect(err && strstr(err->str, bad[i].says), "entry %zu: err \"%s\" does not say \"%s\"", i,
                  err ? err->str : "(none)", bad[i].says);
    }
    freeReplyObject(ds);
}

/* Property (revision 22: jr_ack compares ids by their shape, without a
 * number parsed per entry): over random entry ids of every shape -- ms
 * parts of 1 to 13 digits, sequences of 1 to 7, several entries per
 * millisecond -- and random acknowledgements of any subset, in any order,
 * written with leading zeros or not, an acknowledgement removes exactly
 * the entries it acknowledges: every other one (still running, never
 * acknowledged, not yet delivered) stays. A batch mixing one bad id is
 * refused, naming it, and acknowledges nothing. */
Test(contract, property_ack_removes_exactly_its_entries_whatever_their_shape) {
    unsigned seed = (unsigned)(getenv("JRT_SEED") ? atol(getenv("JRT_SEED")) : jrt_wall_us());
    srand(seed);
    cr_log_info("property test: JRT_SEED=%u", seed);
    enum { E = 120 };
    for (int round = 0; round < 40; round++) {
        freeReplyObject(cmd("DEL", "jr:{t}:ready", NULL));
        static char ids[E][48];
        long long ms = rand() % 3 ? rand() % 50 : 1700000000000LL + rand() % 1000;
        long long sq = 0;
        for (int i = 0; i < E; i++) { /* increasing: sometimes the same ms, sometimes a longer one */
            int r = rand() % 6;
            if (r == 0) ms += 1 + rand() % 5, sq = rand() % 3;
            else if (r == 1 && ms < 1000000000000LL) ms = ms * 10 + rand() % 10, sq = rand() % 20;
            else if (r == 2) sq = sq * 10 + rand() % 10 + 1;
            else sq += 1 + rand() % 9;
            if (sq > 9999999) ms++, sq = 0;
            snprintf(ids[i], sizeof ids[i], "%lld-%lld", ms, sq);
            redisReply *x = cmd("XADD", "jr:{t}:ready", ids[i], "h", "x", NULL);
            cr_assert(x->type == REDIS_REPLY_STRING, "XADD %s: %s", ids[i], x->type == REDIS_REPLY_ERROR ? x->str : "?");
            freeReplyObject(x);
        }
        int delivered = E - rand() % 10; /* the last few never read */
        freeReplyObject(cmd("XGROUP", "CREATE", "jr:{t}:ready", "jr", "0", NULL));
        char count[16];
        snprintf(count, sizeof count, "%d", delivered);
        freeReplyObject(cmd("XREADGROUP", "GROUP", "jr", "c", "COUNT", count, "STREAMS", "jr:{t}:ready", ">", NULL));
        int gone[E] = {0};
        for (int call = 0; call < 4; call++) {
            static char args[E][64];
            const char *argv[4 + E] = {"FCALL", "jr_ack", "1", "jr:{t}:ready"};
            int n = 0;
            for (int i = 0; i < delivered; i++) {
                if (gone[i] || rand() % 3) continue;
                long long m, s;
                sscanf(ids[i], "%lld-%lld", &m, &s);
                if (rand() % 8 == 0) snprintf(args[n], sizeof args[n], "00%lld-0%lld", m, s);
                else snprintf(args[n], sizeof args[n], "%.47s", ids[i]);
                gone[i] = 1;
                n++;
            }
            for (int i = n - 1; i > 0; i--) { /* any order */
                int j = rand() % (i + 1);
                char t[64];
                memcpy(t, args[i], sizeof t), memcpy(args[i], args[j], sizeof t), memcpy(args[j], t, sizeof t);
            }
            for (int i = 0; i < n; i++) argv[4 + i] = args[i];
            if (!n) continue;
            redisReply *rep = cmdv(4 + n, argv, NULL);
            cr_assert(rep->type == REDIS_REPLY_INTEGER && rep->integer == n, "round %d: jr_ack of %d: %s", round, n,
                      rep->type == REDIS_REPLY_ERROR ? rep->str : "wrong count");
            freeReplyObject(rep);
            for (int i = 0; i < E; i++)
                cr_assert_eq(has_entry("jr:{t}:ready", ids[i]), !gone[i], "round %d call %d: entry %s %s", round, call,
                             ids[i], gone[i] ? "acknowledged but still there" : "not acknowledged but gone");
        }
        /* one bad id among good ones: refused by name, nothing acknowledged */
        int good = -1;
        for (int i = 0; i < delivered && good < 0; i++)
            if (!gone[i]) good = i;
        if (good < 0) continue;
        long long before = npending("jr:{t}:ready");
        const char *bad[] = {"FCALL", "jr_ack", "1", "jr:{t}:ready", ids[good], "5-x"};
        redisReply *rep = cmdv(6, bad, NULL);
        cr_assert(rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "argument 2") && strstr(rep->str, "5-x"),
                  "a bad id: %s", rep->type == REDIS_REPLY_ERROR ? rep->str : "accepted");
        freeReplyObject(rep);
        cr_assert_eq(npending("jr:{t}:ready"), before, "a refused acknowledgement acknowledged entries");
    }
}
