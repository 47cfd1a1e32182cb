/* The chaos test (issue 7): everything that can go wrong at once, then an
 * exact ledger.
 *
 * For JR_CHAOS_SECONDS (default 25) three workers and two schedulers serve two
 * queues of a real redis-server (AOF, appendfsync always) while this process
 * enqueues jobs of every kind of the hostile plugin chaos_job.c (quick, slow,
 * flaky, failing, crashing, aborting, hanging, forking), some now and some
 * delayed, some with explicit ids and some with generated ones, and meanwhile:
 * SIGKILLs a worker every 2-4 s (starting a replacement), SIGKILLs a
 * scheduler once, SIGKILLs and restarts Redis once, holds Redis out of memory
 * (maxmemory just above used memory, noeviction) for a few seconds, and
 * injects garbage into every key type of the queues (ready and dead streams,
 * delayed sets, wake streams, uniq keys, the registry). The fault schedule
 * comes from JR_CHAOS_SEED (printed; random when unset).
 *
 * Then it stops the faults, lets everything drain, stops every process with
 * SIGTERM and checks, from what it enqueued and from the plugin's run record:
 *   - every job is in exactly one final state: done (ran OK, gone from
 *     Redis) or dead with the expected why/err; none lost, none stuck;
 *   - a job that ran OK twice is allowed only when the earlier run's worker
 *     was SIGKILLed, or Redis restarted or was out of memory (up to a
 *     worker's 5 s reconnect backoff after), between the two runs; every
 *     duplicate is classified and any other one fails the test;
 *   - refused enqueues (OOM) wrote nothing: their ids enqueue as new later;
 *   - every garbage item that can carry a marker ends in the dead stream
 *     (found by its marker or entry id) or stays where it was with an error
 *     logged; none vanishes, none runs;
 *   - no run happened in a handler's forked child or in a process with no
 *     worker above it, no worker or scheduler died on its own, each stops
 *     on SIGTERM, and `stats` / `dead list` still work on these queues.
 * No check depends on how long anything took; the waits are generous bounds
 * (chaos, then at most 45 s of drain and 15 s of stopping).
 * JR_CHAOS_WITHOUT=kill,restart,oom,garbage,fork,crash leaves faults out
 * (for debugging). On failure the logs, the record and the config are copied
 * to /tmp/jr-chaos-<seed>. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define NQ 2
#define NW 3 /* workers */
#define NS 2 /* schedulers */
#define ID_MAX 160

static const char *const QUEUES[NQ] = {"qa", "qb"};
static const char *const AOF[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};

static jrt_redis_t R;
static char cfgpath[192], recpath[192];
static uint64_t rng_state;
static unsigned long long seed;
static char without[256];

static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }
static int enabled(const char *fault) { return strstr(without, fault) == NULL; }

/* ---- job kinds ------------------------------------------------------------ */

enum { K_OK, K_SLOW, K_FLAKY, K_FORK, K_FORKWAIT, K_CRASH, K_ABORT, K_HANG, K_FAIL, K_UNIQ, NKINDS };

typedef struct kind {
    const char *name, *handler;
    int weight;               /* share of enqueued jobs */
    int dead;                 /* 1: must end dead with why=failed and err containing `err` */
    const char *err;
    const char *max_attempts; /* envelope m, NULL = config's 3 */
    const char *timeout_ms;   /* envelope t, NULL = config's */
} kind_t;

static kind_t KINDS[NKINDS] = {
    [K_OK] = {"ok", "ok", 70, 0, NULL, NULL, NULL},
    [K_SLOW] = {"slow", "slow", 6, 0, NULL, NULL, NULL},
    [K_FLAKY] = {"flaky", "flaky", 5, 0, NULL, NULL, NULL},
    [K_FORK] = {"fork", "fork", 3, 0, NULL, NULL, NULL},
    [K_FORKWAIT] = {"forkwait", "forkwait", 2, 0, NULL, NULL, NULL},
    [K_CRASH] = {"crash", "crash", 3, 1, "SIGSEGV", "2", NULL},
    [K_ABORT] = {"abort", "abort", 2, 1, "SIGABRT", "2", NULL},
    [K_HANG] = {"hang", "hang", 2, 1, "time", "2", "400"},
    [K_FAIL] = {"fail", "fail", 3, 1, "refused by chaos test", NULL, NULL},
    [K_UNIQ] = {"uniq-garbage", "ok", 0, 0, NULL, NULL, NULL},
};

/* ---- processes and fault events ------------------------------------------ */

typedef struct event {
    pid_t pid;
    int64_t t0, t1; /* wall us: before the fault began, after it ended */
    int status;
} event_t;

typedef struct events {
    event_t *v;
    size_t n, cap;
} events_t;

static pid_t workers[NW], scheds[NS];
static pid_t *worker_pids; /* every worker ever started */
static size_t nworker_pids, worker_pids_cap;
static events_t kills, deaths, restarts, ooms;
static int sched_kills, sched_deaths, stop_failures;
static char stop_notes[2048];

static void add_event(events_t *e, pid_t pid, int64_t t0, int64_t t1, int status) {
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 64;
        e->v = realloc(e->v, e->cap * sizeof *e->v);
        cr_assert(e->v, "out of memory");
    }
    e->v[e->n++] = (event_t){pid, t0, t1, status};
}

static const char *logpath(const char *name) {
    static char path[4][192];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", R.dir, name);
    return path[k];
}

static pid_t start_worker(int slot) {
    char name[32];
    snprintf(name, sizeof name, "w%d.log", slot);
    const char *args[] = {"worker", "-c", cfgpath, "--plugin", JRT_CHAOS_PLUGIN, NULL};
    pid_t pid = jrt_spawn(logpath(name), args);
    if (nworker_pids == worker_pids_cap) {
        worker_pids_cap = worker_pids_cap ? worker_pids_cap * 2 : 64;
        worker_pids = realloc(worker_pids, worker_pids_cap * sizeof *worker_pids);
        cr_assert(worker_pids, "out of memory");
    }
    worker_pids[nworker_pids++] = pid;
    return workers[slot] = pid;
}

static pid_t start_sched(int slot) {
    char name[32];
    snprintf(name, sizeof name, "s%d.log", slot);
    const char *args[] = {"scheduler", "-c", cfgpath, NULL};
    return scheds[slot] = jrt_spawn(logpath(name), args);
}

static int is_worker(int pid) {
    for (size_t i = 0; i < nworker_pids; i++)
        if (worker_pids[i] == pid) return 1;
    return 0;
}

/* Restart any worker or scheduler that died on its own (each is a failure). */
static void reap(void) {
    int st;
    for (int i = 0; i < NW; i++)
        if (waitpid(workers[i], &st, WNOHANG) == workers[i]) {
            int64_t t = jrt_wall_us();
            fprintf(stderr, "chaos: worker %d died on its own (%s %d)\n", (int)workers[i],
                    WIFSIGNALED(st) ? "signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            add_event(&deaths, workers[i], t, t, st);
            start_worker(i);
        }
    for (int i = 0; i < NS; i++)
        if (waitpid(scheds[i], &st, WNOHANG) == scheds[i]) {
            fprintf(stderr, "chaos: scheduler %d died on its own (%s %d)\n", (int)scheds[i],
                    WIFSIGNALED(st) ? "signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            sched_deaths++;
            start_sched(i);
        }
}

static void kill_worker(int slot) {
    int64_t t0 = jrt_wall_us();
    kill(workers[slot], SIGKILL);
    int st = 0;
    waitpid(workers[slot], &st, 0);
    add_event(&kills, workers[slot], t0, jrt_wall_us(), st);
    start_worker(slot);
}

/* ---- Redis helpers --------------------------------------------------------- */

/* A reply of the expected type, or NULL with the error text in err. */
static redisReply *cmd_argv(redisContext *c, int argc, const char **argv, const size_t *lens, char *err,
                            size_t errlen) {
    redisReply *rep = redisCommandArgv(c, argc, argv, lens);
    if (!rep) {
        snprintf(err, errlen, "transport: %s", c->errstr);
        return NULL;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s", rep->str);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

/* A command that must succeed (fails the test otherwise). */
static void must(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert(rep && rep->type != REDIS_REPLY_ERROR, "%s: %s", fmt, rep ? rep->str : c->errstr);
    freeReplyObject(rep);
}

static int64_t redis_now_ms(redisContext *c) {
    redisReply *rep = redisCommand(c, "TIME");
    cr_assert(rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2, "TIME failed");
    int64_t ms = atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    return ms;
}

/* ---- the ledger ------------------------------------------------------------ */

typedef struct job {
    char key[ID_MAX + 8]; /* "<queue>/<id>" */
    int kind, queue;
    int created;           /* 0: the enqueue answered "duplicate" */
    int refused_before;    /* the first tries were refused (OOM) without a transport error */
    int transport_before;  /* a try failed in transport: its outcome is unknown */
    int present;           /* in the ready stream or the delayed set at the last scan */
    int ndead;
    char why[32], err[256];
    int ok_runs, runs, stray_runs;
} job_t;

typedef struct ledger {
    job_t *v;
    size_t n, cap;
    int sorted;
} ledger_t;

static ledger_t L;

static job_t *ledger_add(const char *queue_id_key, int kind, int queue) {
    if (L.n == L.cap) {
        L.cap = L.cap ? L.cap * 2 : 1024;
        L.v = realloc(L.v, L.cap * sizeof *L.v);
        cr_assert(L.v, "out of memory");
    }
    job_t *j = &L.v[L.n++];
    memset(j, 0, sizeof *j);
    snprintf(j->key, sizeof j->key, "%s", queue_id_key);
    j->kind = kind, j->queue = queue, j->created = 1;
    L.sorted = 0;
    return j;
}

static int job_cmp(const void *a, const void *b) { return strcmp(((const job_t *)a)->key, ((const job_t *)b)->key); }

static job_t *ledger_find(int queue, const char *id, size_t idlen) {
    if (!L.sorted) qsort(L.v, L.n, sizeof *L.v, job_cmp), L.sorted = 1;
    job_t k;
    int n = snprintf(k.key, sizeof k.key, "%s/%.*s", QUEUES[queue], (int)(idlen > ID_MAX ? ID_MAX : idlen), id);
    if (n < 0 || idlen > ID_MAX) return NULL;
    return bsearch(&k, L.v, L.n, sizeof *L.v, job_cmp);
}

/* A job to enqueue (kept for retries while its enqueue is refused). */
typedef struct spec {
    int kind, queue;
    char id[ID_MAX]; /* "" = generated */
    int64_t delay_ms;
    char payload[16];
    int refused, transport;
} spec_t;

static spec_t *retry_list;
static size_t nretry, retry_cap;
static long long refused_calls, refused_generated, uncertain_generated, enqueued_explicit, enqueued_generated;
static int stale_uniq; /* a refused enqueue left its id's uniq key behind */
static char stale_notes[1024];
static unsigned long long id_counter;

static void retry_later(const spec_t *s) {
    if (nretry == retry_cap) {
        retry_cap = retry_cap ? retry_cap * 2 : 256;
        retry_list = realloc(retry_list, retry_cap * sizeof *retry_list);
        cr_assert(retry_list, "out of memory");
    }
    retry_list[nretry++] = *s;
}

/* Enqueue n jobs of one queue with one FCALL jr_enqueue_many (atomic: all
 * or nothing, so an OOM refusal writes none). Returns 0, or -1 when the
 * connection is broken (the caller reconnects). */
static int enqueue_specs(redisContext *c, spec_t *v, size_t n) {
    if (!n) return 0;
    int q = v[0].queue;
    size_t cap = 16 + n * 16, argc = 0, nuniq = 0;
    const char **argv = calloc(cap, sizeof *argv);
    size_t *lens = calloc(cap, sizeof *lens);
    char (*keys)[ID_MAX + 32] = calloc(n + 4, sizeof *keys);
    char (*whens)[32] = calloc(n, sizeof *whens);
    cr_assert(argv && lens && keys && whens, "out of memory");
    static const char *suffix[] = {"ready", "delayed", "wake", "seq"};
    for (int k = 0; k < 4; k++) snprintf(keys[k], sizeof keys[k], "jr:{%s}:%s", QUEUES[q], suffix[k]);
    for (size_t i = 0; i < n; i++)
        if (v[i].id[0]) snprintf(keys[4 + nuniq++], sizeof keys[0], "jr:{%s}:uniq:%s", QUEUES[q], v[i].id);
    char nkeys[16];
    snprintf(nkeys, sizeof nkeys, "%zu", 4 + nuniq);
    argv[argc++] = "FCALL", argv[argc++] = "jr_enqueue_many", argv[argc++] = nkeys;
    for (size_t k = 0; k < 4 + nuniq; k++) argv[argc++] = keys[k];
    argv[argc++] = "86400000";
    for (size_t i = 0; i < n; i++) {
        const kind_t *kd = &KINDS[v[i].kind];
        if (v[i].delay_ms > 0) snprintf(whens[i], sizeof whens[i], "+%lld", (long long)v[i].delay_ms);
        argv[argc++] = whens[i];
        argv[argc++] = v[i].id;
        argv[argc++] = kd->max_attempts && kd->timeout_ms ? "4" : kd->max_attempts || kd->timeout_ms ? "3" : "2";
        argv[argc++] = "h", argv[argc++] = kd->handler;
        argv[argc++] = "p", argv[argc++] = v[i].payload;
        if (kd->max_attempts) argv[argc++] = "m", argv[argc++] = kd->max_attempts;
        if (kd->timeout_ms) argv[argc++] = "t", argv[argc++] = kd->timeout_ms;
    }
    for (size_t i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    char err[512];
    redisReply *rep = cmd_argv(c, (int)argc, argv, lens, err, sizeof err);
    int broken = c->err != 0;
    if (rep) {
        cr_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 * n, "jr_enqueue_many: odd reply");
        for (size_t i = 0; i < n; i++) {
            char key[ID_MAX + 8];
            snprintf(key, sizeof key, "%s/%s", QUEUES[q], rep->element[2 * i]->str);
            job_t *j = ledger_add(key, v[i].kind, q);
            j->created = rep->element[2 * i + 1]->integer != 0;
            j->refused_before = v[i].refused, j->transport_before = v[i].transport;
            if (v[i].id[0]) enqueued_explicit++;
            else enqueued_generated++;
            if (!j->created && v[i].kind != K_UNIQ && !v[i].transport) {
                stale_uniq++;
                snprintf(stale_notes + strlen(stale_notes), sizeof stale_notes - strlen(stale_notes),
                         "  %s: \"duplicate\" after %d refused tries\n", key, v[i].refused);
            }
        }
        freeReplyObject(rep);
    } else {
        int oom = strstr(err, "OOM") != NULL;
        refused_calls += oom;
        for (size_t i = 0; i < n; i++) {
            if (v[i].id[0]) {
                v[i].refused += oom, v[i].transport += !oom;
                retry_later(&v[i]);
            } else if (oom) {
                refused_generated++;
            } else {
                uncertain_generated++;
            }
        }
        if (!oom) fprintf(stderr, "chaos: enqueue failed: %s\n", err);
    }
    free(argv), free(lens), free(keys), free(whens);
    return broken ? -1 : 0;
}

static int pick_kind(void) {
    int total = 0;
    for (int k = 0; k < NKINDS; k++) total += KINDS[k].weight;
    int x = (int)rnd_in(0, total - 1);
    for (int k = 0; k < NKINDS; k++) {
        if (x < KINDS[k].weight) return k;
        x -= KINDS[k].weight;
    }
    return K_OK;
}

/* One tick's worth of new jobs (3 to 10), each queue in its own call. */
static int enqueue_tick(redisContext *c) {
    spec_t v[NQ][10];
    size_t n[NQ] = {0};
    int count = (int)rnd_in(3, 10);
    for (int i = 0; i < count; i++) {
        int q = (int)rnd_in(0, NQ - 1);
        spec_t *s = &v[q][n[q]++];
        memset(s, 0, sizeof *s);
        s->kind = pick_kind(), s->queue = q;
        if (rnd() % 2) snprintf(s->id, sizeof s->id, "j%llx-%llu-%s", seed, ++id_counter, KINDS[s->kind].name);
        s->delay_ms = rnd() % 10 < 4 ? rnd_in(50, 2500) : 0;
        if (s->kind == K_SLOW) snprintf(s->payload, sizeof s->payload, "%d", (int)rnd_in(20, 300));
    }
    int rc = 0;
    for (int q = 0; q < NQ && !rc; q++) rc = enqueue_specs(c, v[q], n[q]);
    return rc;
}

/* Try the refused explicit-id jobs again (same ids: idempotent). */
static int enqueue_retries(redisContext *c) {
    size_t n = nretry;
    if (!n) return 0;
    spec_t *v = retry_list;
    retry_list = NULL, nretry = retry_cap = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (rc) retry_later(&v[i]); /* the connection broke: keep the rest for later */
        else rc = enqueue_specs(c, &v[i], 1);
    }
    free(v);
    return rc;
}

/* ---- garbage ---------------------------------------------------------------- */

enum { G_READY, G_DELAYED, G_DEAD };

typedef struct garbage {
    int where, queue;
    char marker[16];  /* "@G<round><r|d|x><nn>@": unique, never a prefix of another */
    char what[64];
    char entry[48];   /* stream entry id (ready, dead) */
    char *member;     /* delayed: the exact member bytes */
    size_t member_len;
    int ndead, present, ran;
    char why[32];
} garbage_t;

static garbage_t G[128];
static size_t ngarbage;

static garbage_t *garbage_new(int where, int queue, int round, const char *what) {
    cr_assert(ngarbage < sizeof G / sizeof *G, "too many garbage items");
    garbage_t *g = &G[ngarbage++];
    memset(g, 0, sizeof *g);
    g->where = where, g->queue = queue;
    snprintf(g->marker, sizeof g->marker, "@G%d%c%02zu@", round, "rdx"[where], ngarbage);
    snprintf(g->what, sizeof g->what, "%s", what);
    return g;
}

/* A tiny msgpack writer: enough to build delayed-set members by hand. */
typedef struct mp {
    unsigned char *b;
    size_t n, cap;
} mp_t;

static void mp_raw(mp_t *m, const void *p, size_t n) {
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2;
        m->b = realloc(m->b, m->cap);
        cr_assert(m->b, "out of memory");
    }
    memcpy(m->b + m->n, p, n);
    m->n += n;
}
static void mp_byte(mp_t *m, unsigned char c) { mp_raw(m, &c, 1); }
static void mp_str(mp_t *m, const char *s) {
    size_t n = strlen(s);
    if (n < 32) {
        mp_byte(m, (unsigned char)(0xa0 | n));
    } else if (n < 256) {
        mp_byte(m, 0xd9), mp_byte(m, (unsigned char)n);
    } else {
        cr_assert(n < 65536);
        mp_byte(m, 0xda), mp_byte(m, (unsigned char)(n >> 8)), mp_byte(m, (unsigned char)n);
    }
    mp_raw(m, s, n);
}

static void xadd_garbage(redisContext *c, garbage_t *g, const char *key, int argc, const char **argv,
                         const size_t *lens) {
    const char **a = calloc((size_t)argc + 3, sizeof *a);
    size_t *l = calloc((size_t)argc + 3, sizeof *l);
    cr_assert(a && l);
    a[0] = "XADD", a[1] = key, a[2] = "*";
    for (int i = 0; i < 3; i++) l[i] = strlen(a[i]);
    for (int i = 0; i < argc; i++) a[3 + i] = argv[i], l[3 + i] = lens ? lens[i] : strlen(argv[i]);
    char err[512];
    redisReply *rep = cmd_argv(c, argc + 3, a, l, err, sizeof err);
    cr_assert(rep && rep->type == REDIS_REPLY_STRING, "XADD garbage %s: %s", g->what, err);
    snprintf(g->entry, sizeof g->entry, "%s", rep->str);
    freeReplyObject(rep);
    free(a), free(l);
}

/* Garbage stream entries in jr:{Q}:ready: each a different way a worker
 * cannot run an entry. Each carries its marker (in its id field where it
 * has one). */
static void garbage_ready(redisContext *c, int q, int round) {
    char key[64];
    snprintf(key, sizeof key, "jr:{%s}:ready", QUEUES[q]);
    garbage_t *g;
    g = garbage_new(G_READY, q, round, "ready: no handler field");
    xadd_garbage(c, g, key, 4, (const char *[]){"id", g->marker, "p", "x"}, NULL);
    g = garbage_new(G_READY, q, round, "ready: unknown handler");
    xadd_garbage(c, g, key, 4, (const char *[]){"id", g->marker, "h", "no_such_handler_chaos"}, NULL);
    g = garbage_new(G_READY, q, round, "ready: unknown field");
    xadd_garbage(c, g, key, 6, (const char *[]){"id", g->marker, "h", "ok", "zz", "1"}, NULL);
    g = garbage_new(G_READY, q, round, "ready: non-numeric attempt");
    xadd_garbage(c, g, key, 6, (const char *[]){"id", g->marker, "h", "ok", "a", "two"}, NULL);
    g = garbage_new(G_READY, q, round, "ready: out-of-range max attempts");
    xadd_garbage(c, g, key, 6, (const char *[]){"id", g->marker, "h", "ok", "m", "99999999999999999999999"}, NULL);
    g = garbage_new(G_READY, q, round, "ready: empty handler");
    xadd_garbage(c, g, key, 4, (const char *[]){"id", g->marker, "h", ""}, NULL);
    g = garbage_new(G_READY, q, round, "ready: binary handler and payload");
    xadd_garbage(c, g, key, 6, (const char *[]){"id", g->marker, "h", "\xff\x00\x01junk", "p", "\x00\xfe\xff"},
                 (const size_t[]){2, strlen(g->marker), 1, 7, 1, 3});
    g = garbage_new(G_READY, q, round, "ready: binary field name");
    xadd_garbage(c, g, key, 6, (const char *[]){"id", g->marker, "\x00\xfe", "v", "h", "ok"},
                 (const size_t[]){2, strlen(g->marker), 2, 1, 1, 2});
    g = garbage_new(G_READY, q, round, "ready: no id field, unknown handler");
    xadd_garbage(c, g, key, 4, (const char *[]){"h", "no_such_handler_chaos", "p", g->marker}, NULL);
    {
        char longid[300];
        g = garbage_new(G_READY, q, round, "ready: id of 250+ bytes");
        snprintf(longid, sizeof longid, "%s%0250d", g->marker, 0);
        xadd_garbage(c, g, key, 4, (const char *[]){"id", longid, "h", "ok"}, NULL);
    }
    {
        static char big[70000];
        memset(big, 'x', sizeof big - 1);
        g = garbage_new(G_READY, q, round, "ready: payload over max_payload");
        xadd_garbage(c, g, key, 6, (const char *[]){"id", g->marker, "h", "ok", "p", big}, NULL);
    }
    const int huge[] = {3995, 5000, 20000};
    for (size_t k = 0; k < sizeof huge / sizeof *huge; k++) {
        char what[64];
        snprintf(what, sizeof what, "ready: %d extra fields", huge[k]);
        g = garbage_new(G_READY, q, round, what);
        int argc = 4 + 2 * huge[k];
        const char **argv = calloc((size_t)argc, sizeof *argv);
        char (*names)[16] = calloc((size_t)huge[k], sizeof *names);
        cr_assert(argv && names);
        argv[0] = "id", argv[1] = g->marker, argv[2] = "h", argv[3] = "ok";
        for (int i = 0; i < huge[k]; i++) {
            snprintf(names[i], sizeof names[i], "f%d", i);
            argv[4 + 2 * i] = names[i], argv[5 + 2 * i] = "v";
        }
        xadd_garbage(c, g, key, argc, argv, NULL);
        free(argv), free(names);
    }
}

/* Malformed members of jr:{Q}:delayed, due within a second or two: none is
 * an envelope the contract allows (a sequence of msgpack strings id, field,
 * value, ... with a handler). */
static void garbage_delayed(redisContext *c, int q, int round) {
    char key[64];
    snprintf(key, sizeof key, "jr:{%s}:delayed", QUEUES[q]);
    int64_t now = redis_now_ms(c);
    for (int item = 0; item < 12; item++) {
        garbage_t *g = garbage_new(G_DELAYED, q, round, "");
        mp_t m = {0};
        const char *what = "";
        switch (item) {
        case 0:
            what = "delayed: bytes that are not msgpack (0xc1)";
            mp_raw(&m, "\xc1junk ", 6), mp_raw(&m, g->marker, strlen(g->marker));
            break;
        case 1:
            what = "delayed: plain text";
            mp_raw(&m, g->marker, strlen(g->marker)), mp_raw(&m, " plain text, not an envelope", 28);
            break;
        case 2:
            what = "delayed: a msgpack array";
            mp_byte(&m, 0x93), mp_str(&m, g->marker), mp_str(&m, "h"), mp_str(&m, "ok");
            break;
        case 3:
            what = "delayed: odd number of items";
            mp_str(&m, g->marker), mp_str(&m, "h"), mp_str(&m, "ok"), mp_str(&m, "p");
            break;
        case 4:
            what = "delayed: boolean value";
            mp_str(&m, g->marker), mp_str(&m, "h"), mp_byte(&m, 0xc3);
            break;
        case 5:
            what = "delayed: nil value";
            mp_str(&m, g->marker), mp_str(&m, "h"), mp_str(&m, "ok"), mp_str(&m, "p"), mp_byte(&m, 0xc0);
            break;
        case 6:
            what = "delayed: no handler";
            mp_str(&m, g->marker), mp_str(&m, "p"), mp_str(&m, "x");
            break;
        case 7:
            what = "delayed: a msgpack map";
            mp_byte(&m, 0x81), mp_str(&m, g->marker), mp_str(&m, "x");
            break;
        case 8:
            what = "delayed: truncated string";
            mp_byte(&m, 0xda), mp_byte(&m, 0x03), mp_byte(&m, 0xe8), mp_raw(&m, g->marker, strlen(g->marker));
            break;
        case 9:
            what = "delayed: integer id";
            mp_byte(&m, 42), mp_str(&m, "h"), mp_str(&m, "ok"), mp_str(&m, "p"), mp_str(&m, g->marker);
            break;
        case 10:
            what = "delayed: unknown handler";
            mp_str(&m, g->marker), mp_str(&m, "h"), mp_str(&m, "no_such_handler_chaos");
            break;
        case 11:
            what = "delayed: 5000 extra fields";
            mp_str(&m, g->marker), mp_str(&m, "h"), mp_str(&m, "ok");
            for (int i = 0; i < 5000; i++) mp_str(&m, "f"), mp_str(&m, "v");
            break;
        }
        snprintf(g->what, sizeof g->what, "%s", what);
        g->member = (char *)m.b, g->member_len = m.n;
        char score[32];
        snprintf(score, sizeof score, "%lld", (long long)(now + 300 + 150 * item));
        const char *argv[] = {"ZADD", key, score, g->member};
        const size_t lens[] = {4, strlen(key), strlen(score), g->member_len};
        char err[256];
        redisReply *rep = cmd_argv(c, 4, argv, lens, err, sizeof err);
        cr_assert(rep, "ZADD garbage: %s", err);
        freeReplyObject(rep);
    }
}

/* Garbage already in the dead stream: must stay there, untouched. */
static void garbage_dead(redisContext *c, int q, int round) {
    char key[64];
    snprintf(key, sizeof key, "jr:{%s}:dead", QUEUES[q]);
    garbage_t *g;
    g = garbage_new(G_DEAD, q, round, "dead: no id, binary fields");
    xadd_garbage(c, g, key, 4, (const char *[]){"\xff\x00", "\x01\x02", "x", g->marker},
                 (const size_t[]){2, 2, 1, strlen(g->marker)});
    g = garbage_new(G_DEAD, q, round, "dead: id only");
    xadd_garbage(c, g, key, 2, (const char *[]){"id", g->marker}, NULL);
    g = garbage_new(G_DEAD, q, round, "dead: 3000 fields");
    int argc = 2 + 6000;
    const char **argv = calloc((size_t)argc, sizeof *argv);
    cr_assert(argv);
    argv[0] = "id", argv[1] = g->marker;
    for (int i = 2; i < argc; i++) argv[i] = i % 2 ? "v" : "f";
    xadd_garbage(c, g, key, argc, argv, NULL);
    free(argv);
}

/* Garbage in the keys that carry no jobs: wake streams, uniq keys, the
 * registry. They must disturb nothing; the uniq keys of ids enqueued next
 * must make those enqueues report "duplicate". */
static void garbage_other(redisContext *c, int q, int round) {
    char key[96];
    snprintf(key, sizeof key, "jr:{%s}:wake", QUEUES[q]);
    const char *a1[] = {"XADD", key, "*", "\xff\xfe", "\x00"};
    const size_t l1[] = {4, strlen(key), 1, 2, 1};
    freeReplyObject(redisCommandArgv(c, 5, a1, l1));
    must(c, "XADD %s * w 1 x 2 y 3", key);
    must(c, "XADD jr:{queues}:wake * junk %b", "\x00\xff", (size_t)2);
    must(c, "SADD jr:{queues} %b", "", (size_t)0);
    must(c, "SADD jr:{queues} %s", "has space");
    must(c, "SADD jr:{queues} %b", "\xff\xfe\x00", (size_t)3);
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    must(c, "SADD jr:{queues} %s", longname);
    spec_t v[2];
    for (int i = 0; i < 2; i++) {
        memset(&v[i], 0, sizeof v[i]);
        v[i].kind = K_UNIQ, v[i].queue = q;
        snprintf(v[i].id, sizeof v[i].id, "u%llx-%d-%d", seed, round, i);
    }
    must(c, "SET jr:{%s}:uniq:%s %b", QUEUES[q], v[0].id, "\x00\xffjunk", (size_t)6);
    must(c, "HSET jr:{%s}:uniq:%s f v", QUEUES[q], v[1].id);
    must(c, "SET jr:{%s}:uniq:never-enqueued-%d junk", QUEUES[q], round);
    enqueue_specs(c, v, 2);
}

static void inject_garbage(int q, int round) {
    redisContext *c = jrt_connect(&R);
    garbage_ready(c, q, round);
    garbage_delayed(c, q, round);
    garbage_dead(c, q, round);
    garbage_other(c, q, round);
    redisFree(c);
    fprintf(stderr, "chaos: garbage round %d injected into queue %s (%zu items so far)\n", round, QUEUES[q],
            ngarbage);
}

/* ---- out of memory ---------------------------------------------------------- */

static int64_t oom_t0;
static int oom_confirmed, oom_refills;

static long long used_memory(redisContext *c) {
    redisReply *rep = redisCommand(c, "INFO memory");
    cr_assert(rep && rep->type == REDIS_REPLY_STRING, "INFO memory failed");
    const char *u = strstr(rep->str, "used_memory:");
    cr_assert(u, "no used_memory in INFO");
    long long used = atoll(u + 12);
    freeReplyObject(rep);
    return used;
}

/* Set maxmemory just above what is used now (noeviction), then grow a
 * filler key by small appends until Redis refuses one for lack of memory (a
 * small query buffer never decides it). Used memory moves (client buffers
 * come and go), so this is repeated until a refusal. Returns 1 once refused. */
static int oom_fill(redisContext *c) {
    static char chunk[16 * 1024];
    memset(chunk, 'f', sizeof chunk);
    must(c, "CONFIG SET maxmemory-policy noeviction");
    for (int round = 0; round < 20; round++) {
        must(c, "CONFIG SET maxmemory %lld", used_memory(c) + 128 * 1024);
        for (int i = 0; i < 64; i++) {
            redisReply *rep = redisCommand(c, "APPEND chaos:filler %b", chunk, sizeof chunk);
            cr_assert(rep, "APPEND: %s", c->errstr);
            int oom = rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "OOM");
            cr_assert(oom || rep->type == REDIS_REPLY_INTEGER, "APPEND: %s", rep->str);
            freeReplyObject(rep);
            if (oom) return 1;
        }
    }
    return 0;
}

/* From here every write that may grow memory is refused. */
static void oom_begin(void) {
    redisContext *c = jrt_connect(&R);
    oom_t0 = jrt_wall_us();
    oom_confirmed = oom_fill(c);
    redisFree(c);
    fprintf(stderr, "chaos: out of memory from now (writes refused: %s)\n", oom_confirmed ? "yes" : "NO");
}

/* Keep Redis at its limit (memory freed meanwhile would end the window). */
static void oom_keep(void) {
    redisContext *c = jrt_connect(&R);
    redisReply *rep = redisCommand(c, "SET chaos:probe 1");
    int refused = rep && rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "OOM");
    if (rep) freeReplyObject(rep);
    if (!refused) oom_confirmed &= oom_fill(c), oom_refills++;
    redisFree(c);
}

static void oom_end(void) {
    redisContext *c = jrt_connect(&R);
    must(c, "CONFIG SET maxmemory 0");
    must(c, "DEL chaos:filler chaos:probe");
    redisFree(c);
    add_event(&ooms, 0, oom_t0, jrt_wall_us(), 0);
    fprintf(stderr, "chaos: memory back\n");
}

/* ---- reading Redis at the end ----------------------------------------------- */

static int contains(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    return k <= n && memmem(hay, n, needle, k) != NULL;
}

/* The marker or its hex form in any field name or value of an entry. */
static int entry_has_marker(const redisReply *fields, const char *marker) {
    char hex[64] = "";
    for (const char *p = marker; *p; p++) snprintf(hex + strlen(hex), sizeof hex - strlen(hex), "%02x", (unsigned char)*p);
    for (size_t i = 0; i < fields->elements; i++) {
        const redisReply *f = fields->element[i];
        if (f->type != REDIS_REPLY_STRING) continue;
        if (contains(f->str, f->len, marker) || contains(f->str, f->len, hex)) return 1;
    }
    return 0;
}

static const redisReply *field(const redisReply *fields, const char *name) {
    for (size_t i = 0; i + 1 < fields->elements; i += 2)
        if (fields->element[i]->len == strlen(name) && !memcmp(fields->element[i]->str, name, strlen(name)))
            return fields->element[i + 1];
    return NULL;
}

/* The first msgpack string of a delayed member (the job id), or NULL. */
static const char *mp_first_str(const char *b, size_t n, size_t *len) {
    if (n < 1) return NULL;
    unsigned char t = (unsigned char)b[0];
    size_t off, l;
    if ((t & 0xe0) == 0xa0) off = 1, l = t & 0x1f;
    else if (t == 0xd9 && n >= 2) off = 2, l = (unsigned char)b[1];
    else if (t == 0xda && n >= 3) off = 3, l = (size_t)(unsigned char)b[1] << 8 | (unsigned char)b[2];
    else return NULL;
    if (off + l > n) return NULL;
    *len = l;
    return b + off;
}

/* Mark what is still in the ready streams and delayed sets. Returns how
 * many ledger jobs are there. */
static size_t scan_present(redisContext *c) {
    for (size_t i = 0; i < L.n; i++) L.v[i].present = 0;
    for (size_t i = 0; i < ngarbage; i++) G[i].present = 0;
    size_t n = 0;
    for (int q = 0; q < NQ; q++) {
        redisReply *rep = redisCommand(c, "XRANGE jr:{%s}:ready - +", QUEUES[q]);
        cr_assert(rep && rep->type == REDIS_REPLY_ARRAY, "XRANGE ready: %s", rep ? rep->str : c->errstr);
        for (size_t i = 0; i < rep->elements; i++) {
            const redisReply *e = rep->element[i];
            const redisReply *id = field(e->element[1], "id");
            job_t *j = id ? ledger_find(q, id->str, id->len) : ledger_find(q, e->element[0]->str, e->element[0]->len);
            if (j) n += !j->present, j->present = 1;
            for (size_t g = 0; g < ngarbage; g++)
                if (G[g].where == G_READY && G[g].queue == q && !strcmp(G[g].entry, e->element[0]->str))
                    G[g].present = 1;
        }
        freeReplyObject(rep);
        rep = redisCommand(c, "ZRANGE jr:{%s}:delayed 0 -1", QUEUES[q]);
        cr_assert(rep && rep->type == REDIS_REPLY_ARRAY, "ZRANGE delayed: %s", rep ? rep->str : c->errstr);
        for (size_t i = 0; i < rep->elements; i++) {
            const redisReply *m = rep->element[i];
            size_t len;
            const char *id = mp_first_str(m->str, m->len, &len);
            job_t *j = id ? ledger_find(q, id, len) : NULL;
            if (j) n += !j->present, j->present = 1;
            for (size_t g = 0; g < ngarbage; g++)
                if (G[g].where == G_DELAYED && G[g].queue == q && G[g].member_len == m->len &&
                    !memcmp(G[g].member, m->str, m->len))
                    G[g].present = 1;
        }
        freeReplyObject(rep);
        rep = jrt_delayed_all(c, QUEUES[q]); /* and the time wheel's buckets */
        for (size_t i = 0; i + 2 < rep->elements; i += 3) {
            if (strcmp(rep->element[i + 2]->str, "w")) continue;
            job_t *j = ledger_find(q, rep->element[i]->str, rep->element[i]->len);
            if (j) n += !j->present, j->present = 1;
        }
        freeReplyObject(rep);
    }
    return n;
}

/* Count dead entries per ledger job and garbage item. */
static void scan_dead(redisContext *c) {
    for (int q = 0; q < NQ; q++) {
        redisReply *rep = redisCommand(c, "XRANGE jr:{%s}:dead - +", QUEUES[q]);
        cr_assert(rep && rep->type == REDIS_REPLY_ARRAY, "XRANGE dead: %s", rep ? rep->str : c->errstr);
        for (size_t i = 0; i < rep->elements; i++) {
            const redisReply *e = rep->element[i], *f = e->element[1];
            const redisReply *id = field(f, "id"), *why = field(f, "why"), *err = field(f, "err");
            job_t *j = id ? ledger_find(q, id->str, id->len) : NULL;
            if (j) {
                j->ndead++;
                snprintf(j->why, sizeof j->why, "%.*s", why ? (int)why->len : 0, why ? why->str : "");
                snprintf(j->err, sizeof j->err, "%.*s", err ? (int)err->len : 0, err ? err->str : "");
            }
            for (size_t g = 0; g < ngarbage; g++) {
                garbage_t *gb = &G[g];
                if (gb->queue != q) continue;
                if (gb->where == G_DEAD) {
                    if (!strcmp(gb->entry, e->element[0]->str)) gb->present = 1;
                } else if (entry_has_marker(f, gb->marker) ||
                           (gb->where == G_READY && id && !strcmp(id->str, gb->entry))) {
                    gb->ndead++;
                    snprintf(gb->why, sizeof gb->why, "%.*s", why ? (int)why->len : 0, why ? why->str : "");
                }
            }
        }
        freeReplyObject(rep);
    }
}

/* ---- the run record ----------------------------------------------------------- */

typedef struct rec {
    char key[ID_MAX + 8];
    int attempt;
    int chain[4], nchain; /* the recording process, its parent, ... */
    int wpid;             /* the nearest worker among them, 0 if none */
    int stray;            /* run in a handler's forked child, or with no worker above it */
    int64_t t;
    char outcome[8];
} rec_t;

static rec_t *recs;
static size_t nrecs;
static int *children; /* pids of processes the handlers forked */
static size_t nchildren, children_cap;

static int rec_cmp(const void *a, const void *b) {
    const rec_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->t > y->t) - (x->t < y->t);
}

static void read_record(void) {
    char *text = jrt_slurp(recpath);
    size_t lines = 1;
    for (char *p = text; *p; p++) lines += *p == '\n';
    recs = calloc(lines, sizeof *recs);
    cr_assert(recs);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "#child\t", 7)) {
            if (nchildren == children_cap) {
                children_cap = children_cap ? children_cap * 2 : 256;
                children = realloc(children, children_cap * sizeof *children);
                cr_assert(children, "out of memory");
            }
            children[nchildren++] = atoi(line + 7);
            continue;
        }
        char *f[6];
        int k = 0;
        for (char *p = line; k < 6; k++) {
            f[k] = p;
            char *tab = strchr(p, '\t');
            if (!tab) break;
            *tab = '\0', p = tab + 1;
        }
        cr_assert(k == 5, "malformed record line (%d fields): %s", k + 1, line);
        rec_t *r = &recs[nrecs++];
        snprintf(r->key, sizeof r->key, "%s/%s", f[0], f[1]);
        r->attempt = atoi(f[2]);
        for (char *p = f[3]; *p && r->nchain < 4; p += strcspn(p, ","), p += *p == ',')
            r->chain[r->nchain++] = atoi(p);
        r->t = atoll(f[4]);
        snprintf(r->outcome, sizeof r->outcome, "%s", f[5]);
    }
    for (size_t i = 0; i < nrecs; i++) { /* children are known only now */
        rec_t *r = &recs[i];
        for (int k = 0; k < r->nchain && !r->wpid; k++) {
            for (size_t c = 0; c < nchildren; c++) r->stray |= r->chain[k] == children[c];
            if (is_worker(r->chain[k])) r->wpid = r->chain[k];
        }
        r->stray |= !r->wpid;
    }
    free(text);
    qsort(recs, nrecs, sizeof *recs, rec_cmp);
}

/* A worker that lost Redis retries its connection with a backoff capped at
 * 5 s (worker.c), so its acknowledgements may wait that long after Redis is
 * back: a Redis fault explains runs up to then. */
#define RECONNECT_SLACK_US 5000000

/* Why a job that ran OK at `a` ran OK again at `b`; NULL if nothing explains
 * it. A fault explains it when it lies between the two runs: the worker of
 * `a` was SIGKILLed after `a` (before its acknowledgement reached Redis), or
 * Redis was down or out of memory after `a` began and before `b`. */
static const char *explain(const rec_t *a, const rec_t *b) {
    for (size_t i = 0; i < kills.n; i++)
        if (kills.v[i].pid == a->wpid && kills.v[i].t1 > a->t && kills.v[i].t0 < b->t) return "worker SIGKILLed";
    for (size_t i = 0; i < restarts.n; i++)
        if (restarts.v[i].t1 + RECONNECT_SLACK_US > a->t && restarts.v[i].t0 < b->t) return "Redis restarted";
    for (size_t i = 0; i < ooms.n; i++)
        if (ooms.v[i].t1 + RECONNECT_SLACK_US > a->t && ooms.v[i].t0 < b->t) return "Redis out of memory";
    for (size_t i = 0; i < deaths.n; i++)
        if (deaths.v[i].pid == a->wpid && deaths.v[i].t1 > a->t && deaths.v[i].t0 < b->t)
            return "worker died on its own";
    return NULL;
}

/* ---- the report ------------------------------------------------------------------ */

#define NOTE_MAX 8
typedef struct tally {
    long long n;
    char notes[NOTE_MAX * 320];
    int shown;
} tally_t;

static void note(tally_t *t, const char *fmt, ...) {
    t->n++;
    if (t->shown++ >= NOTE_MAX) return;
    size_t len = strlen(t->notes);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->notes + len, sizeof t->notes - len, fmt, ap);
    va_end(ap);
}

static void copy_dir_on_failure(void) {
    char dest[64], cmd[512];
    snprintf(dest, sizeof dest, "/tmp/jr-chaos-%llu", seed);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s' && cp '%s'/*.log '%s'/*.txt '%s'/*.yaml '%s'", dest, dest,
             R.dir, R.dir, R.dir, dest);
    if (system(cmd) == 0) fprintf(stderr, "chaos: logs and record kept in %s\n", dest);
}

/* Stop strays a forking handler left (by pid, only if still a jobrunner). */
static void stop_children(void) {
    for (size_t i = 0; i < nchildren; i++) {
        char path[64], exe[512] = "";
        snprintf(path, sizeof path, "/proc/%d/exe", children[i]);
        ssize_t n = readlink(path, exe, sizeof exe - 1);
        if (n > 0) exe[n] = '\0';
        if (n > 0 && strstr(exe, "jobrunner")) kill(children[i], SIGKILL);
    }
}

/* SIGTERM every worker and scheduler at once and wait for all of them up to
 * timeout_ms in total; SIGKILL what is left. Anything but a clean exit 0 is
 * a stop failure. */
static void stop_all(int timeout_ms) {
    pid_t pids[NW + NS];
    int done[NW + NS] = {0};
    for (int i = 0; i < NW + NS; i++) {
        pids[i] = i < NW ? workers[i] : scheds[i - NW];
        kill(pids[i], SIGTERM);
    }
    int left = NW + NS, st;
    for (int waited = 0; left > 0 && waited < timeout_ms; waited += 10) {
        for (int i = 0; i < NW + NS; i++) {
            if (done[i] || waitpid(pids[i], &st, WNOHANG) != pids[i]) continue;
            done[i] = 1, left--;
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
            stop_failures++;
            snprintf(stop_notes + strlen(stop_notes), sizeof stop_notes - strlen(stop_notes),
                     "  %s %d: %s %d after SIGTERM\n", i < NW ? "worker" : "scheduler", (int)pids[i],
                     WIFSIGNALED(st) ? "killed by signal" : "exit status",
                     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        }
        if (left) jrt_sleep_ms(10);
    }
    for (int i = 0; i < NW + NS; i++) {
        if (done[i]) continue;
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
        stop_failures++;
        snprintf(stop_notes + strlen(stop_notes), sizeof stop_notes - strlen(stop_notes),
                 "  %s %d: still running %d ms after SIGTERM (SIGKILLed)\n", i < NW ? "worker" : "scheduler",
                 (int)pids[i], timeout_ms);
    }
}

static void setup(void) {
    jrt_redis_start(&R, AOF);
    snprintf(recpath, sizeof recpath, "%s/record.txt", R.dir);
    setenv("JRT_CHAOS_RECORD", recpath, 1);
    /* Under AddressSanitizer, let the intended crashes be plain signals. */
    char asan[1024];
    const char *old = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%shandle_segv=0:handle_abort=0", old ? old : "", old ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(chaos, .init = setup, .fini = teardown, .timeout = 240);

Test(chaos, kills_restarts_oom_garbage_and_hostile_handlers_lose_and_repeat_nothing) {
    const char *s = getenv("JR_CHAOS_SEED");
    seed = s && *s ? strtoull(s, NULL, 0) : (unsigned long long)jrt_wall_us() ^ ((unsigned long long)getpid() << 20);
    rng_state = seed ? seed : 1;
    s = getenv("JR_CHAOS_SECONDS");
    int seconds = s && *s ? atoi(s) : 25;
    cr_assert(seconds >= 5 && seconds <= 600, "JR_CHAOS_SECONDS=%s: use 5 to 600", s);
    s = getenv("JR_CHAOS_WITHOUT");
    snprintf(without, sizeof without, "%s", s ? s : "");
    if (!enabled("fork")) KINDS[K_FORK].weight = KINDS[K_FORKWAIT].weight = 0;
    if (!enabled("crash")) KINDS[K_CRASH].weight = KINDS[K_ABORT].weight = KINDS[K_HANG].weight = 0;
    fprintf(stderr, "chaos: seed=%llu seconds=%d without=[%s] (rerun: JR_CHAOS_SEED=%llu JR_CHAOS_SECONDS=%d)\n",
            seed, seconds, without, seed, seconds);

    char text[1024];
    snprintf(text, sizeof text,
             "redis:\n  url: %s\n"
             "worker:\n  queues: [qa, qb]\n  concurrency: 2\n  batch: 4\n  lease: 3s\n  grace: 5s\n  block: 1s\n  handler_wait: 0s\n"
             "scheduler:\n  block: 1s\n"
             "jobs:\n  max_attempts: 3\n  backoff: 50ms\n  backoff_max: 300ms\n  max_deliveries: 10\n"
             "  max_payload: 65536\n  timeout: 30s\n"
             "dead:\n  max: 100000\n",
             R.url);
    jrt_write(&R, "chaos.yaml", text, cfgpath, sizeof cfgpath);

    redisContext *c = jrt_connect(&R);
    char *lua = jrt_slurp(JRT_SOURCE_DIR "/runner/lua/jobrunner.lua");
    must(c, "FUNCTION LOAD REPLACE %s", lua);
    free(lua);
    for (int q = 0; q < NQ; q++) must(c, "FCALL jr_register 2 jr:{queues} jr:{queues}:wake %s", QUEUES[q]);
    redisFree(c);
    for (int i = 0; i < NS; i++) start_sched(i);
    for (int i = 0; i < NW; i++) start_worker(i);

    /* ---- chaos ---- */
    int64_t t_start = jrt_wall_us(), T = (int64_t)seconds * 1000000;
    int64_t next_kill = t_start + rnd_in(2000, 4000) * 1000;
    int64_t oom_len = T / 8 > 3000000 ? T / 8 : 3000000;
    int garbage1 = !enabled("garbage"), garbage2 = garbage1, restarted = !enabled("restart"),
        sched_killed = !enabled("kill"), oom_state = enabled("oom") ? 0 : 2;
    c = jrt_connect(&R);
    long long ticks = 0;
    for (int64_t now = t_start; now - t_start < T; now = jrt_wall_us(), ticks++) {
        int64_t e = now - t_start;
        reap();
        if (!garbage1 && e >= T / 5) garbage1 = 1, inject_garbage(0, 1);
        if (!restarted && e >= T * 35 / 100) {
            int64_t t0 = jrt_wall_us();
            jrt_redis_restart(&R, AOF);
            add_event(&restarts, 0, t0, jrt_wall_us(), 0);
            restarted = 1;
            redisFree(c);
            c = jrt_connect(&R);
            fprintf(stderr, "chaos: Redis SIGKILLed and restarted\n");
        }
        if (!garbage2 && e >= T * 45 / 100) garbage2 = 1, inject_garbage(1, 2);
        if (!sched_killed && e >= T / 2) {
            sched_killed = 1, sched_kills++;
            kill(scheds[0], SIGKILL);
            waitpid(scheds[0], NULL, 0);
            start_sched(0);
        }
        if (oom_state == 0 && e >= T * 6 / 10) oom_state = 1, oom_begin();
        if (oom_state == 1 && e >= T * 6 / 10 + oom_len) oom_state = 2, oom_end();
        if (oom_state == 1) oom_keep();
        if (enabled("kill") && now >= next_kill) {
            kill_worker((int)rnd_in(0, NW - 1));
            next_kill = now + rnd_in(2000, 4000) * 1000;
        }
        if (enqueue_retries(c) || enqueue_tick(c)) {
            redisFree(c);
            c = jrt_connect(&R);
        }
        jrt_sleep_ms(100);
    }
    if (oom_state == 1) oom_end();
    int64_t t_chaos_end = jrt_wall_us();

    /* ---- drain ---- */
    for (int i = 0; i < 100 && nretry; i++) {
        if (enqueue_retries(c)) {
            redisFree(c);
            c = jrt_connect(&R);
        }
        if (nretry) jrt_sleep_ms(100);
    }
    cr_expect_eq(nretry, 0, "%zu enqueues still refused after the faults ended", nretry);
    /* Until no job is left in a ready stream or delayed set (a bound, not a
     * check: what is still there after it is reported as stuck). */
    /* The scan reads the ready stream, then the delayed set: a job moved
     * between the two (promoted, or retried) is seen in neither, so the
     * drain ends only after two empty scans in a row. */
    size_t left = 0;
    int empty = 0;
    for (int64_t until = jrt_wall_us() + 45000000; jrt_wall_us() < until;) {
        reap();
        if ((left = scan_present(c)) == 0 && ++empty == 2) break;
        if (left) empty = 0;
        jrt_sleep_ms(250);
    }
    int64_t t_drained = jrt_wall_us();
    if (left) fprintf(stderr, "chaos: drain gave up after 45 s with %zu jobs still in Redis\n", left);
    redisFree(c);

    /* ---- stop everything, by pid: SIGTERM to all, then wait for all ---- */
    stop_all(15000);
    int64_t t_stopped = jrt_wall_us();

    /* ---- the ledger ---- */
    c = jrt_connect(&R);
    scan_present(c);
    scan_dead(c);
    redisFree(c);
    read_record();
    stop_children();

    tally_t lost = {0}, stuck = {0}, wrong = {0}, dead_twice = {0}, done_and_dead = {0}, stray = {0},
            unknown = {0}, unexplained = {0}, uniq_ran = {0}, g_vanished = {0}, g_repeated = {0}, g_ran = {0},
            g_dead_gone = {0}, g_why = {0};
    long long done = 0, dead = 0, dead_by[NKINDS] = {0}, poison = 0, dup_total = 0, dup_kill = 0, dup_restart = 0,
              dup_oom = 0, dup_death = 0, uniq_refused = 0;
    for (size_t i = 0; i < nrecs;) { /* runs per job */
        size_t k = i;
        while (k < nrecs && !strcmp(recs[k].key, recs[i].key)) k++;
        const char *slash = strchr(recs[i].key, '/');
        int q = slash && !strncmp(recs[i].key, "qb/", 3);
        job_t *j = slash ? ledger_find(q, slash + 1, strlen(slash + 1)) : NULL;
        garbage_t *g = NULL;
        for (size_t x = 0; x < ngarbage && !j; x++)
            if (strstr(recs[i].key, G[x].marker)) g = &G[x];
        const rec_t *prev_ok = NULL;
        for (size_t r = i; r < k; r++) {
            int legit = !recs[r].stray;
            if (!legit)
                note(&stray, "  %s attempt %d ran in pid %d (parent %d): %s\n", recs[r].key, recs[r].attempt,
                     recs[r].chain[0], recs[r].nchain > 1 ? recs[r].chain[1] : 0,
                     recs[r].wpid ? "a forked child of a handler" : "no worker above it (an orphan)");
            if (g) g->ran++;
            if (!j) continue;
            j->runs++, j->stray_runs += !legit;
            if (strcmp(recs[r].outcome, "ok")) continue;
            j->ok_runs++;
            if (prev_ok) {
                const char *why = explain(prev_ok, &recs[r]);
                dup_total++;
                if (!why) {
                    note(&unexplained, "  %s ran OK at %lld (worker %d) and again at %lld (worker %d)\n", j->key,
                         (long long)prev_ok->t, prev_ok->wpid, (long long)recs[r].t, recs[r].wpid);
                } else {
                    dup_kill += !strcmp(why, "worker SIGKILLed"), dup_restart += !strcmp(why, "Redis restarted");
                    dup_oom += !strcmp(why, "Redis out of memory"), dup_death += !strcmp(why, "worker died on its own");
                }
            }
            prev_ok = &recs[r];
        }
        if (!j && g) note(&g_ran, "  garbage ran: %s (%s)\n", g->what, recs[i].key);
        if (!j && !g && !(uncertain_generated && (strchr(recs[i].key, '-') || strstr(recs[i].key, "/d"))))
            note(&unknown, "  %s ran %zu times but was never enqueued\n", recs[i].key, k - i);
        i = k;
    }
    for (size_t i = 0; i < L.n; i++) {
        job_t *j = &L.v[i];
        const kind_t *kd = &KINDS[j->kind];
        if (!j->created && j->kind == K_UNIQ) {
            uniq_refused++;
            if (j->runs || j->ndead || j->present)
                note(&uniq_ran, "  %s: enqueue said duplicate (garbage uniq key) yet it exists or ran\n", j->key);
            continue;
        }
        if (!j->created && !j->transport_before) continue; /* counted in stale_uniq */
        if (j->present) {
            note(&stuck, "  %s (%s) still in Redis after the drain\n", j->key, kd->name);
        } else if (j->ndead > 1) {
            note(&dead_twice, "  %s (%s) is dead %d times\n", j->key, kd->name, j->ndead);
        } else if (j->ndead == 1 && j->ok_runs) {
            note(&done_and_dead, "  %s (%s) ran OK and is dead (why=%s err=%s)\n", j->key, kd->name, j->why, j->err);
        } else if (j->ndead == 1) {
            dead++;
            if (!strcmp(j->why, "poison")) {
                poison++;
            } else if (kd->dead && !strcmp(j->why, "failed") && strstr(j->err, kd->err)) {
                dead_by[j->kind]++;
            } else {
                note(&wrong, "  %s (%s) dead with why=%s err=%s\n", j->key, kd->name, j->why, j->err);
            }
        } else if (j->ok_runs) {
            done++;
            if (kd->dead) note(&wrong, "  %s (%s) ran OK but should have ended dead\n", j->key, kd->name);
        } else {
            note(&lost, "  %s (%s): not in Redis, never ran OK, not dead (%d runs)\n", j->key, kd->name, j->runs);
        }
    }
    long long g_dead = 0, g_place = 0, g_kept = 0;
    for (size_t i = 0; i < ngarbage; i++) {
        garbage_t *g = &G[i];
        if (g->where == G_DEAD) {
            if (g->present) g_kept++;
            else note(&g_dead_gone, "  %s %s: deleted from the dead stream\n", g->marker, g->what);
            continue;
        }
        if (g->ndead > 1) {
            note(&g_repeated, "  %s %s: dead %d times\n", g->marker, g->what, g->ndead);
        } else if (g->ndead == 1) {
            g_dead++;
            if (strcmp(g->why, "invalid")) note(&g_why, "  %s %s: dead with why=%s\n", g->marker, g->what, g->why);
            if (g->present) note(&g_repeated, "  %s %s: dead and still in place\n", g->marker, g->what);
        } else if (g->present) {
            g_place++;
        } else {
            note(&g_vanished, "  %s %s: neither dead nor in place\n", g->marker, g->what);
        }
    }
    /* What was left in place must have been logged as an error. */
    long long g_place_unlogged = 0;
    for (size_t i = 0; i < ngarbage; i++) {
        garbage_t *g = &G[i];
        if (g->where == G_DEAD || g->ndead || !g->present) continue;
        int logged = 0;
        for (int w = 0; w < NW && !logged; w++) {
            char name[16];
            snprintf(name, sizeof name, "w%d.log", w);
            logged = g->where == G_READY ? jrt_count(logpath(name), g->entry) > 0 : 0;
        }
        for (int s2 = 0; s2 < NS && !logged && g->where == G_DELAYED; s2++) {
            char name[16], needle[32];
            snprintf(name, sizeof name, "s%d.log", s2);
            snprintf(needle, sizeof needle, "queue=%s", QUEUES[g->queue]);
            char *log = jrt_slurp(logpath(name));
            for (char *line = log; line && *line && !logged;) {
                char *nl = strchr(line, '\n');
                if (nl) *nl = '\0';
                logged = strstr(line, " error ") && strstr(line, needle);
                line = nl ? nl + 1 : NULL;
            }
            free(log);
        }
        if (!logged) g_place_unlogged++, note(&g_vanished, "  %s %s: left in place without an error logged\n", g->marker, g->what);
    }

    /* The admin tools still work on the queues with garbage in every key. */
    char out[4096], err[4096];
    const char *stats_args[] = {"stats", "-c", cfgpath, "-q", "qa", "-q", "qb", NULL};
    int stats_rc = jrt_run(out, sizeof out, err, sizeof err, stats_args);
    const char *dead_args[] = {"dead", "list", "-c", cfgpath, "-q", "qa", NULL};
    char *dead_out = malloc(1 << 22);
    cr_assert(dead_out);
    int dead_rc = jrt_run(dead_out, 1 << 22, err, sizeof err, dead_args);
    free(dead_out);

    long long enqueued = 0;
    for (size_t i = 0; i < L.n; i++) enqueued += L.v[i].created || L.v[i].transport_before;
    fprintf(stderr,
            "==== chaos ledger: seed=%llu seconds=%d without=[%s] ====\n"
            "time:        chaos %.1f s, drain %.1f s, stop %.1f s\n"
            "faults:      worker SIGKILLs %zu, scheduler SIGKILLs %d, Redis restarts %zu, OOM windows %zu"
            " (writes refused: %s, refilled %d times), garbage items %zu\n"
            "enqueued:    %lld jobs (explicit ids %lld, generated %lld); calls refused under OOM %lld"
            " (their generated-id jobs not retried: %lld); outcome unknown %lld\n"
            "             uniq-key garbage: %lld enqueues answered duplicate (and must never run)\n"
            "done:        %lld\n"
            "dead:        %lld  crash %lld, abort %lld, hang %lld, fail %lld, poison %lld\n"
            "lost:        %lld\n"
            "stuck:       %lld (still in ready/delayed after the drain)\n"
            "wrong state: %lld (dead with the wrong why/err, or OK but expected dead)\n"
            "both:        %lld done and dead, %lld dead twice\n"
            "duplicates:  %lld runs OK more than once: worker SIGKILL %lld, Redis restart %lld, Redis OOM %lld,"
            " worker died on its own %lld; UNEXPLAINED %lld\n"
            "stray runs:  %lld (in a handler's forked child, or in a process no worker is above)\n"
            "unknown:     %lld ids ran that were never enqueued\n"
            "stale uniq:  %lld refused enqueues left their id behind\n"
            "garbage:     %zu items: dead-lettered %lld (why other than invalid: %lld), left in place %lld"
            " (unlogged %lld), VANISHED %lld, repeated %lld, ran %lld, dead-stream items kept %lld lost %lld\n"
            "processes:   workers died on their own %zu, schedulers %d, not stopped by SIGTERM %d;"
            " stats exit %d, dead list exit %d\n"
            "==== end of chaos ledger ====\n",
            seed, seconds, without, (t_chaos_end - t_start) / 1e6, (t_drained - t_chaos_end) / 1e6,
            (t_stopped - t_drained) / 1e6, kills.n, sched_kills, restarts.n, ooms.n,
            ooms.n ? (oom_confirmed ? "yes" : "NO") : "-", oom_refills, ngarbage, enqueued, enqueued_explicit,
            enqueued_generated, refused_calls, refused_generated, uncertain_generated, uniq_refused, done, dead,
            dead_by[K_CRASH], dead_by[K_ABORT], dead_by[K_HANG], dead_by[K_FAIL], poison, lost.n, stuck.n, wrong.n,
            done_and_dead.n, dead_twice.n, dup_total, dup_kill, dup_restart, dup_oom, dup_death, unexplained.n,
            stray.n, unknown.n, (long long)stale_uniq, ngarbage, g_dead, g_why.n, g_place, g_place_unlogged,
            g_vanished.n - g_place_unlogged, g_repeated.n, g_ran.n, g_kept, g_dead_gone.n, deaths.n, sched_deaths,
            stop_failures, stats_rc, dead_rc);
    const struct {
        const char *name;
        tally_t *t;
    } lists[] = {{"lost", &lost},
                 {"stuck", &stuck},
                 {"wrong final state", &wrong},
                 {"dead twice", &dead_twice},
                 {"done and dead", &done_and_dead},
                 {"unexplained duplicates", &unexplained},
                 {"stray runs", &stray},
                 {"unknown ids", &unknown},
                 {"uniq garbage ignored", &uniq_ran},
                 {"garbage vanished", &g_vanished},
                 {"garbage repeated", &g_repeated},
                 {"garbage ran", &g_ran},
                 {"garbage dead why", &g_why},
                 {"dead-stream garbage deleted", &g_dead_gone}};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
        if (lists[i].t->n)
            fprintf(stderr, "%s (%lld, first %d):\n%s", lists[i].name, lists[i].t->n,
                    lists[i].t->shown < NOTE_MAX ? lists[i].t->shown : NOTE_MAX, lists[i].t->notes);
    if (g_vanished.n + g_repeated.n + g_ran.n + g_why.n + g_dead_gone.n) {
        fprintf(stderr, "garbage, item by item:\n");
        for (size_t i = 0; i < ngarbage; i++) {
            const garbage_t *g = &G[i];
            fprintf(stderr, "  %s %-40s %s%s%s%s\n", g->marker, g->what,
                    g->where == G_DEAD ? (g->present ? "kept" : "DELETED")
                    : g->ndead         ? "dead why="
                    : g->present       ? "in place"
                                       : "VANISHED",
                    g->where != G_DEAD && g->ndead ? g->why : "", g->ndead > 1 ? " (REPEATED)" : "",
                    g->ran ? " (RAN)" : "");
        }
    }
    if (stale_uniq) fprintf(stderr, "stale uniq keys:\n%s", stale_notes);
    if (stop_failures) fprintf(stderr, "not stopped by SIGTERM:\n%s", stop_notes);
    if (stats_rc || dead_rc) fprintf(stderr, "admin commands failed: stats %d, dead list %d: %s\n", stats_rc, dead_rc, err);

    long long failures = lost.n + stuck.n + wrong.n + dead_twice.n + done_and_dead.n + unexplained.n + stray.n +
                         unknown.n + uniq_ran.n + g_vanished.n + g_repeated.n + g_ran.n + g_why.n + g_dead_gone.n +
                         stale_uniq + (long long)deaths.n + sched_deaths + stop_failures + (stats_rc != 0) +
                         (dead_rc != 0) + (ooms.n && !oom_confirmed);
    if (failures) copy_dir_on_failure();
    cr_expect_eq(lost.n, 0, "%lld jobs lost", lost.n);
    cr_expect_eq(stuck.n, 0, "%lld jobs stuck in Redis", stuck.n);
    cr_expect_eq(wrong.n + dead_twice.n + done_and_dead.n, 0, "%lld jobs in a wrong final state",
                 wrong.n + dead_twice.n + done_and_dead.n);
    cr_expect_eq(unexplained.n, 0, "%lld unexplained duplicate runs", unexplained.n);
    cr_expect_eq(stray.n, 0, "%lld runs outside a worker's runner process", stray.n);
    cr_expect_eq(unknown.n + uniq_ran.n, 0, "%lld runs of jobs never enqueued", unknown.n + uniq_ran.n);
    cr_expect_eq(g_vanished.n + g_repeated.n + g_ran.n + g_why.n + g_dead_gone.n, 0, "garbage mishandled");
    cr_expect_eq(stale_uniq, 0, "refused enqueues left ids behind");
    cr_expect_eq(deaths.n + sched_deaths, 0, "processes died on their own");
    cr_expect_eq(stop_failures, 0, "processes did not stop on SIGTERM");
    cr_expect_eq(stats_rc, 0, "jobrunner stats failed: %s", err);
    cr_expect_eq(dead_rc, 0, "jobrunner dead list failed");
    cr_expect(!ooms.n || oom_confirmed, "the OOM window did not make Redis refuse writes");
    cr_expect_gt(done, 0, "no job ran");
    free(recs), free(children), free(worker_pids);
    free(kills.v), free(deaths.v), free(restarts.v), free(ooms.v);
    free(L.v);
    free(retry_list);
    for (size_t i = 0; i < ngarbage; i++) free(G[i].member);
    (void)ticks;
}
