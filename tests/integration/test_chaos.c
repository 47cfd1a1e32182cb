/* The chaos test (issues 7 and 18): everything that can go wrong at once,
 * then an exact ledger.
 *
 * For JR_CHAOS_SECONDS (default 25) five workers and two schedulers serve
 * four queues of a real redis-server (AOF, appendfsync always). Workers 0-2
 * run handlers in processes and serve qa, qb and qv; workers 3 and 4 serve
 * qc alone with `isolation: inline` (their own config file: the plugin's
 * crashing, hanging and forking handlers would take an inline worker down,
 * and no config selects a subset of a plugin's handlers, so qc only carries
 * quick, slow, long, flaky and failing jobs). This process enqueues jobs of
 * every kind of the hostile plugin chaos_job.c (quick, slow, long, flaky,
 * failing, crashing, aborting, hanging, forking), some now and some delayed
 * (some far enough for the time wheel), some with explicit ids and some
 * with generated ones; two periodic schedules (`every: 1s`, tick-a on qa,
 * tick-c on qc with a slow handler) fire all along; and meanwhile:
 * SIGKILLs a worker every 2-4 s (starting a replacement), SIGKILLs a
 * scheduler once, SIGKILLs and restarts Redis once, holds Redis out of memory
 * (maxmemory just above used memory, noeviction) for a few seconds, injects
 * garbage into every key type of the queues (ready and dead streams,
 * delayed sets, wake streams, uniq keys, the registry) and into the keys of
 * issue 18 class 1 (bad members left in the periodic schedules, their last
 * ticks, the wheel index and a wheel bucket, the job index, the cancel
 * flags, the stats hash and the live-process list; a wrong-type paused set,
 * resumed key and process hash left in place; wrong-type stats, cancel
 * flags, wheel index and wheel counter of the victim queue qv for a while,
 * then removed; a string over jr:{cron} and jr:{cron}:wake for the rest of
 * the run), cancels jobs at random moments with `jobrunner cancel`
 * (delayed, ready and running ones, and periodic ticks: the one just due,
 * and every few seconds one held ready by pausing qc across its tick, then
 * resuming), SIGSTOPs a scheduler for 0.5-3 s every few seconds (and once a
 * worker for 2-5 s, past its 3 s lease), and runs worker 1 with its clock
 * 30 s ahead and scheduler 1 with its clock 30 s ahead or behind
 * (libfaketime, on CLOCK_REALTIME only; the run records are corrected by
 * the skew). The fault schedule comes from JR_CHAOS_SEED (printed; random
 * when unset).
 *
 * Then it stops the faults, lets everything drain, stops every process with
 * SIGTERM and checks, from what it enqueued and from the plugin's run record:
 *   - every job is in exactly one final state: done (ran OK, gone from
 *     Redis), dead with the expected why/err, or cancelled (a cancel
 *     answered `cancelled` or `running`: gone, not dead); none lost, none
 *     stuck;
 *   - a job whose cancel answered `cancelled` never runs after the answer;
 *     one that answered `running` runs at most once more after it (the run
 *     its worker had fetched; README: not retried, not run again if its
 *     worker dies; twice when a worker was SIGSTOPped past its lease around
 *     the cancel, see stalled_near()); no cancel flag outlives its entry; a cancel of an id
 *     that garbage in the job index names answers `not found`;
 *   - no job runs before it was due (its enqueue time plus delay, a tick at
 *     its tick), whatever the skewed clocks say, and no tick is fired well
 *     ahead of its time (found waiting after its schedule was removed);
 *   - a job that ran OK twice is allowed only when the earlier run's worker
 *     was SIGKILLed, or either run's worker was SIGSTOPped for more than two
 *     thirds of its lease (its last heartbeat may be a third of a lease
 *     older than the stop) around the first run (see explain()),
 *     or Redis restarted or was out of memory (up to a worker's 5 s
 *     reconnect backoff after), between the two runs; every duplicate is
 *     classified and any other one fails the test; a periodic tick is a job
 *     like the others (its runs, duplicates, cancels and final state);
 *   - refused enqueues (OOM) wrote nothing: their ids enqueue as new later;
 *   - every garbage item that can carry a marker ends in the dead stream
 *     (found by its marker or entry id) or stays where it was with an error
 *     logged; none vanishes, none runs; a wheel-bucket item never runs;
 *     garbage of one key is reported but not in a loop (at most
 *     GARBAGE_LOG_MAX lines of any one process's log name it);
 *   - no run happened in a handler's forked child or in a process with no
 *     worker above it, no worker or scheduler died on its own, each stops
 *     on SIGTERM, and `stats` / `dead list` still work on these queues.
 * No check depends on how long anything took; the waits are generous bounds
 * (chaos, then at most 45 s of drain and 15 s of stopping).
 * JR_CHAOS_WITHOUT=kill,restart,oom,garbage,fork,crash,inline,cancel,stall,skew
 * leaves faults out (for debugging; without inline, workers 3 and 4 run qc
 * with process isolation). On failure the logs, the record and the configs are
 * copied to /tmp/jr-chaos-<seed>. */
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

#define NQ 4
enum { QA, QB, QC, QV };   /* qc: the inline worker's; qv: the victim of wrong-type keys */
#define NW 5               /* workers */
#define WC 3               /* the first of the two workers of qc (inline): slots WC and WC + 1 */
#define NS 2               /* schedulers */
#define SKEWED 1           /* the slot of the worker and of the scheduler with a skewed clock */
#define LEASE_MS 3000      /* worker.lease of both configs */
#define ID_MAX 160
#define GARBAGE_LOG_MAX 200 /* lines of one log that may name one garbage key */

static const char *const QUEUES[NQ] = {"qa", "qb", "qc", "qv"};
static const char *const AOF[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};

static jrt_redis_t R;
static char cfgpath[192], cfgpath_c[192], recpath[192];
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

enum { K_OK, K_SLOW, K_FLAKY, K_FORK, K_FORKWAIT, K_CRASH, K_ABORT, K_HANG, K_FAIL, K_LONG, K_UNIQ, K_TICK_A, K_TICK_C,
       NKINDS };

typedef struct kind {
    const char *name, *handler;
    int weight;               /* share of enqueued jobs */
    int safe;                 /* 1: may run inline (qc) and be cancelled */
    int dead;                 /* 1: must end dead with why=failed and err containing `err` */
    const char *err;
    const char *max_attempts; /* envelope m, NULL = config's 3 */
    const char *timeout_ms;   /* envelope t, NULL = config's */
} kind_t;

static kind_t KINDS[NKINDS] = {
    [K_OK] = {"ok", "ok", 70, 1, 0, NULL, NULL, NULL},
    [K_SLOW] = {"slow", "slow", 6, 1, 0, NULL, NULL, NULL},
    [K_FLAKY] = {"flaky", "flaky", 5, 1, 0, NULL, NULL, NULL},
    [K_FORK] = {"fork", "fork", 3, 0, 0, NULL, NULL, NULL},
    [K_FORKWAIT] = {"forkwait", "forkwait", 2, 0, 0, NULL, NULL, NULL},
    [K_CRASH] = {"crash", "crash", 3, 0, 1, "SIGSEGV", "2", NULL},
    [K_ABORT] = {"abort", "abort", 2, 0, 1, "SIGABRT", "2", NULL},
    [K_HANG] = {"hang", "hang", 2, 0, 1, "time", "2", "400"},
    [K_FAIL] = {"fail", "fail", 3, 1, 1, "refused by chaos test", NULL, NULL},
    [K_LONG] = {"long", "slow", 0, 1, 0, NULL, NULL, NULL}, /* 600-1500 ms: running when cancelled */
    [K_UNIQ] = {"uniq-garbage", "ok", 0, 0, 0, NULL, NULL, NULL},
    [K_TICK_A] = {"tick-a", "ok", 0, 0, 0, NULL, NULL, NULL},   /* periodic, qa */
    [K_TICK_C] = {"tick-c", "slow", 0, 0, 0, NULL, NULL, NULL}, /* periodic, qc, payload 300 */
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
static int *worker_skews;  /* its clock's skew, seconds */
static size_t nworker_pids, worker_pids_cap;
static events_t kills, deaths, restarts, ooms, stalls;
static int skew_w, skew_s; /* the skews of worker and scheduler SKEWED (0: none) */
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

static const char *logpath(const char *name) { return jrt_path(&R, name); }

/* The environment that makes a child's CLOCK_REALTIME run `skew` seconds
 * off (jrt_skew_env: libfaketime preloaded straight into the spawned
 * jobrunner, which the test must signal and recognise); skew 0 restores it. */
static void skew_env(int skew) {
    char off[16];
    snprintf(off, sizeof off, "%+ds", skew);
    jrt_skew_env(skew ? off : NULL);
}

static pid_t spawn_skewed(const char *log, const char *const *args, int skew) {
    char off[16];
    snprintf(off, sizeof off, "%+ds", skew);
    return jrt_spawn_skewed(skew ? off : NULL, log, args);
}

/* Fails the test unless a child's clock really runs `skew` s off (so that a
 * missing libfaketime is not a silently unskewed run). */
static void check_skew(int skew) {
    skew_env(skew);
    FILE *p = popen("date +%s", "r");
    skew_env(0);
    cr_assert(p, "popen date: %s", strerror(errno));
    long long t = 0;
    int got = fscanf(p, "%lld", &t);
    pclose(p);
    long long d = t - jrt_wall_us() / 1000000;
    cr_assert(got == 1 && d > skew - 5 && d < skew + 5,
              "faketime does not skew a child's clock by %d s (it is off by %lld s): install faketime (.ci/deps.sh)",
              skew, d);
}

static pid_t start_worker(int slot) {
    char name[32];
    snprintf(name, sizeof name, "w%d.log", slot);
    const char *args[] = {"worker", "-c", slot >= WC ? cfgpath_c : cfgpath, "--plugin", JRT_CHAOS_PLUGIN, NULL};
    int skew = slot == SKEWED ? skew_w : 0;
    pid_t pid = spawn_skewed(logpath(name), args, skew);
    if (nworker_pids == worker_pids_cap) {
        worker_pids_cap = worker_pids_cap ? worker_pids_cap * 2 : 64;
        worker_pids = realloc(worker_pids, worker_pids_cap * sizeof *worker_pids);
        worker_skews = realloc(worker_skews, worker_pids_cap * sizeof *worker_skews);
        cr_assert(worker_pids && worker_skews, "out of memory");
    }
    worker_skews[nworker_pids] = skew;
    worker_pids[nworker_pids++] = pid;
    return workers[slot] = pid;
}

static pid_t start_sched(int slot) {
    char name[32];
    snprintf(name, sizeof name, "s%d.log", slot);
    const char *args[] = {"scheduler", "-c", cfgpath, NULL};
    return scheds[slot] = spawn_skewed(logpath(name), args, slot == SKEWED ? skew_s : 0);
}

/* The clock skew of a worker, seconds (0 if not one). */
static int skew_of(int pid) {
    for (size_t i = 0; i < nworker_pids; i++)
        if (worker_pids[i] == pid) return worker_skews[i];
    return 0;
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

/* ---- stalls: SIGSTOP, then SIGCONT ------------------------------------------ */

static struct {
    pid_t pid;   /* 0: none under way */
    int worker;  /* 1: a worker (slot), 0: a scheduler */
    int slot;
    int64_t t0, until;
} stall;
static int worker_stalls, sched_stalls;

static void stall_begin(int worker, int slot, int ms) {
    stall.pid = worker ? workers[slot] : scheds[slot];
    stall.worker = worker, stall.slot = slot;
    stall.t0 = jrt_wall_us(), stall.until = stall.t0 + (int64_t)ms * 1000;
    kill(stall.pid, SIGSTOP);
    worker_stalls += worker, sched_stalls += !worker;
    fprintf(stderr, "chaos: %s %d SIGSTOPped for %d ms\n", worker ? "worker" : "scheduler", (int)stall.pid, ms);
}

/* SIGCONT the stalled process (if it is still the one in its slot: a
 * SIGKILLed one was reaped and its pid may be anyone's now). */
static void stall_end(void) {
    if (!stall.pid) return;
    pid_t cur = stall.worker ? workers[stall.slot] : scheds[stall.slot];
    if (cur == stall.pid) kill(stall.pid, SIGCONT);
    if (stall.worker) add_event(&stalls, stall.pid, stall.t0, jrt_wall_us(), 0);
    stall.pid = 0;
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

static int64_t redis_now_ms(redisContext *c) { return jrt_redis_ms(c); }

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
    int64_t due_us;        /* it may not run before (wall us; 0 = unknown) */
    int cancel;            /* C_* : what `jobrunner cancel` answered (0: never cancelled) */
    int64_t cancel_t1;     /* when that answer had come (wall us) */
    int runs_after_cancel;
} job_t;

enum { C_NONE, C_CANCELLED, C_RUNNING, C_NOT_FOUND, C_UNKNOWN };
static const char *const CANCEL_REPLY[] = {"-", "cancelled", "running", "not found", "unknown"};

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

/* The jobs enqueued last that may be cancelled ("<queue>/<id>"), a ring. */
#define CAND_MAX 32
static char cands[CAND_MAX][ID_MAX + 8];
static unsigned long long cand_head;

static void cand_add(const char *key) { snprintf(cands[cand_head++ % CAND_MAX], sizeof cands[0], "%s", key); }

/* One of the last `within` candidates (NULL if none). */
static char *cand_recent(int within) {
    unsigned long long n = cand_head < CAND_MAX ? cand_head : CAND_MAX;
    if (!n) return NULL;
    if ((unsigned long long)within < n) n = (unsigned long long)within;
    return cands[(cand_head - 1 - rnd() % n) % CAND_MAX];
}

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
    int64_t t_sent = jrt_wall_us();
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
            /* Redis takes "+ms" from its clock when it runs the call, after t_sent. */
            if (!v[i].transport) j->due_us = t_sent + v[i].delay_ms * 1000;
            if (j->created && KINDS[v[i].kind].safe && (v[i].kind == K_LONG || rnd() % 3 == 0)) cand_add(key);
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

/* A kind by weight; `safe_only`: only the kinds an inline worker survives. */
static int pick_kind(int safe_only) {
    int total = 0;
    for (int k = 0; k < NKINDS; k++) total += !safe_only || KINDS[k].safe ? KINDS[k].weight : 0;
    int x = (int)rnd_in(0, total - 1);
    for (int k = 0; k < NKINDS; k++) {
        if (safe_only && !KINDS[k].safe) continue;
        if (x < KINDS[k].weight) return k;
        x -= KINDS[k].weight;
    }
    return K_OK;
}

/* One tick's worth of new jobs (3 to 10) on qa, qb and qc, and one in four
 * ticks a job on qv (quick, explicit id, never in the time wheel: its
 * wheel keys get overwritten), each queue in its own call. */
static int enqueue_tick(redisContext *c) {
    spec_t v[NQ][11];
    size_t n[NQ] = {0};
    int count = (int)rnd_in(3, 10);
    for (int i = 0; i < count; i++) {
        int q = (int)rnd_in(QA, QC);
        spec_t *s = &v[q][n[q]++];
        memset(s, 0, sizeof *s);
        s->kind = pick_kind(q == QC), s->queue = q;
        if (rnd() % 2) snprintf(s->id, sizeof s->id, "j%llx-%llu-%s", seed, ++id_counter, KINDS[s->kind].name);
        int d = (int)(rnd() % 20);
        s->delay_ms = d < 6 ? rnd_in(50, 2500) : d < 8 ? rnd_in(2500, 5000) : 0;
        if (s->kind == K_SLOW) snprintf(s->payload, sizeof s->payload, "%d", (int)rnd_in(20, 300));
        if (s->kind == K_LONG) snprintf(s->payload, sizeof s->payload, "%d", (int)rnd_in(600, 1500));
    }
    if (rnd() % 4 == 0) {
        spec_t *s = &v[QV][n[QV]++];
        memset(s, 0, sizeof *s);
        s->kind = K_OK, s->queue = QV;
        snprintf(s->id, sizeof s->id, "v%llx-%llu", seed, ++id_counter);
        s->delay_ms = rnd() % 3 ? 0 : rnd_in(50, 1500);
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

/* ---- cancels ----------------------------------------------------------------- */

typedef struct cancel_rec {
    char key[ID_MAX + 8]; /* "<queue>/<id>" */
    int reply;            /* C_* */
    int64_t t0, t1;       /* wall us: before `jobrunner cancel` started, after it ended */
} cancel_rec_t;

static cancel_rec_t *cancels;
static size_t ncancels, cancels_cap;
static int cancel_errors;
static char cancel_notes[1024];

/* `jobrunner cancel -q QUEUE ID...` now; one cancel_rec per id. Each line
 * of its output is "ID cancelled", "ID running" or "ID not found"; an id
 * with no such line (Redis gone, a refusal) is recorded as unknown. */
static void cancel_ids(int q, char ids[][ID_MAX], int n) {
    const char *args[16] = {"cancel", "-c", q == QC ? cfgpath_c : cfgpath, "-q", QUEUES[q]};
    int argc = 5;
    for (int i = 0; i < n && argc < 15; i++) args[argc++] = ids[i];
    args[argc] = NULL;
    char out[4096], err[1024];
    int64_t t0 = jrt_wall_us();
    int rc = jrt_run(out, sizeof out, err, sizeof err, args);
    int64_t t1 = jrt_wall_us();
    for (int i = 0; i < n; i++) {
        if (ncancels == cancels_cap) {
            cancels_cap = cancels_cap ? cancels_cap * 2 : 128;
            cancels = realloc(cancels, cancels_cap * sizeof *cancels);
            cr_assert(cancels, "out of memory");
        }
        cancel_rec_t *r = &cancels[ncancels++];
        snprintf(r->key, sizeof r->key, "%s/%.159s", QUEUES[q], ids[i]);
        r->reply = C_UNKNOWN, r->t0 = t0, r->t1 = t1;
        size_t len = strlen(ids[i]);
        for (char *line = out; *line;) {
            char *nl = strchr(line, '\n');
            size_t ll = nl ? (size_t)(nl - line) : strlen(line);
            if (ll > len && !strncmp(line, ids[i], len) && line[len] == ' ') {
                const char *a = line + len + 1;
                size_t al = ll - len - 1;
                if (al == 9 && !strncmp(a, "cancelled", 9)) r->reply = C_CANCELLED;
                else if (al == 7 && !strncmp(a, "running", 7)) r->reply = C_RUNNING;
                else if (al == 9 && !strncmp(a, "not found", 9)) r->reply = C_NOT_FOUND;
            }
            line = nl ? nl + 1 : line + ll;
        }
    }
    if (rc != 0 && rc != 1) {
        cancel_errors++;
        size_t l = strlen(cancel_notes);
        snprintf(cancel_notes + l, sizeof cancel_notes - l, "  cancel -q %s: exit %d: %.120s\n", QUEUES[q], rc, err);
    }
}

/* Redis's clock, Unix ms (-1 if it cannot be read). */
static long long redis_ms(redisContext *c) {
    redisReply *rep = redisCommand(c, "TIME");
    long long ms = -1;
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)
        ms = atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000;
    if (rep) freeReplyObject(rep);
    return ms;
}

static int cancelled_before(const char *key) {
    for (size_t i = 0; i < ncancels; i++)
        if (!strcmp(cancels[i].key, key)) return 1;
    return 0;
}

/* Every few seconds, pause qc just before a tick, cancel that tick once it
 * has fired (it waits, ready, in the paused queue: "cancelled"), and resume
 * qc: a scheduler stalled across the tick then fires it again late, and
 * must not re-create it. Call once per loop. */
static void cancel_paused_tick(redisContext *c) {
    static int state; /* 0: idle, 1: qc paused before tick `target` */
    static long long target, next_ms;
    long long ms = redis_ms(c);
    if (ms < 0) return;
    char out[256], err[512];
    if (state == 0 && ms >= next_ms && ms % 1000 >= 500 && ms % 1000 < 850) {
        const char *a[] = {"pause", "-c", cfgpath, "qc", NULL};
        if (jrt_run(out, sizeof out, err, sizeof err, a) != 0) { /* a wrong-type paused set: no pause */
            next_ms = ms + 4000;
            return;
        }
        target = ms / 1000 * 1000 + 1000, state = 1;
    } else if (state == 1 && ms >= target + 400) {
        char ids[1][ID_MAX];
        snprintf(ids[0], ID_MAX, "tick-c@%lld", target);
        cancel_ids(QC, ids, 1);
        const char *a[] = {"resume", "-c", cfgpath, "qc", NULL};
        jrt_run(out, sizeof out, err, sizeof err, a);
        state = 0, next_ms = ms + (long long)rnd_in(2500, 5000);
    }
}

/* Cancel a few of the jobs enqueued lately (delayed, ready or running: the
 * answer says which) or, once in a new second of Redis's clock, the tick
 * just due (fired, ready behind the slow jobs of qc, or running); each id
 * once. */
static void cancel_some(redisContext *c) {
    static long long last_second;
    char ids[4][ID_MAX];
    int n = 0, q;
    long long ms = redis_ms(c);
    if (ms >= 0 && ms / 1000 != last_second) {
        last_second = ms / 1000;
        if (rnd() % 3 == 0) return; /* and some ticks are left alone */
        q = rnd() % 4 ? QC : QA;
        snprintf(ids[n++], ID_MAX, "%s@%lld", q == QA ? "tick-a" : "tick-c", ms / 1000 * 1000);
    } else if (rnd() % 3) {
        return;
    } else {
        /* mostly the newest (delayed or ready), sometimes older ones (running long jobs) */
        int within = rnd() % 3 ? 6 : CAND_MAX;
        const char *first = cand_recent(within);
        if (!first || !first[0]) return;
        q = !strncmp(first, "qa/", 3) ? QA : !strncmp(first, "qb/", 3) ? QB : QC;
        for (int k = 0; k < 6 && n < 3; k++) {
            char *x = cand_recent(within);
            if (strncmp(x, QUEUES[q], 2) || x[2] != '/') continue;
            snprintf(ids[n++], ID_MAX, "%s", x + 3);
            x[0] = '\0', x[1] = '\0'; /* used: matches no queue any more */
        }
    }
    int m = 0; /* drop ids cancelled before */
    for (int i = 0; i < n; i++) {
        char key[ID_MAX + 8];
        snprintf(key, sizeof key, "%s/%.159s", QUEUES[q], ids[i]);
        int dup = cancelled_before(key);
        for (int k = 0; k < m && !dup; k++) dup = !strcmp(ids[k], ids[i]);
        if (!dup) memmove(ids[m++], ids[i], ID_MAX);
    }
    if (m) cancel_ids(q, ids, m);
}

/* ---- garbage ---------------------------------------------------------------- */

enum { G_READY, G_DELAYED, G_DEAD, G_WHEEL };

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
    snprintf(g->marker, sizeof g->marker, "@G%d%c%02zu@", round, "rdxw"[where], ngarbage);
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

/* ---- garbage in the keys of issue 18 class 1 ----------------------------------- */

/* Names that only the class-1 garbage uses, and Redis's wrong-type error
 * (only garbage causes it): no log may name one of them more than
 * GARBAGE_LOG_MAX times (reported, not in a loop). */
static const char *const GARBAGE_NAMES[] = {"chaos-bad-json", "chaos-bad-def", "chaos-ghost", "jr:{queues}:paused",
                                            "jr:{queues}:resumed", "jr:{qv}:stats", "jr:{qv}:cancelled",
                                            "jr:{qv}:wheel", "jr:{cron}", "WRONGTYPE"};
static char victim_keys[4][64]; /* wrong-type keys of qv written (to remove later) */
static int nvictim_keys;
static int ghost_failures;
static char ghost_notes[1024];

/* A command whose refusal is no failure of the test (logged). */
static void try_cmd(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!rep || rep->type == REDIS_REPLY_ERROR) fprintf(stderr, "chaos: %s: %s\n", fmt, rep ? rep->str : c->errstr);
    if (rep) freeReplyObject(rep);
}

/* Bad members left in keys of healthy queues and schedules for the rest of
 * the run: each costs at most its own entry. Then the ids the job index
 * names wrongly must cancel as "not found". */
static void garbage_members(redisContext *c, int round) {
    int64_t now = redis_now_ms(c);
    /* periodic schedules and their last ticks */
    must(c, "HSET jr:{cron} chaos-bad-json %s", "{\"handler\": \"ok\", ");
    must(c, "HSET jr:{cron} chaos-bad-def %s", "{\"handler\":\"ok\",\"queue\":\"qa\",\"timezone\":\"UTC\"}");
    must(c, "HSET jr:{cron} chaos-bad-def2 %s",
         "{\"handler\":\"ok\",\"queue\":\"no such queue!\",\"every_ms\":-5,\"timezone\":7,\"missed\":\"x\"}");
    must(c, "HSET jr:{cron} %b %b", "chaos-bad-json\xff", (size_t)15, "\xc1\x00", (size_t)2);
    must(c, "HSET jr:{cron}:last chaos-bad-json %s chaos-no-such %s", "not a tick", "99999999999999999999 x");
    must(c, "XADD jr:{cron}:wake * %b %b", "\xff", (size_t)1, "\x00", (size_t)1);
    /* the wheel index of qa: a member that is no bucket start, one whose
     * bucket does not exist, one past any time; and items no compact
     * wheel item looks like in a bucket a few seconds ahead */
    must(c, "ZADD jr:{qa}:wheel %lld chaos-not-a-bucket", (long long)now + 2500);
    must(c, "ZADD jr:{qa}:wheel %lld %lld", (long long)now - 5000, (long long)(now / 1000 - 9) * 1000 + 7);
    must(c, "ZADD jr:{qa}:wheel %lld 99999999999999999999999", (long long)now + 3000);
    long long start = (now / 1000 + 4) * 1000;
    for (int i = 0; i < 4; i++) {
        garbage_t *g = garbage_new(G_WHEEL, QA, round, "");
        const char *what[] = {"wheel: plain text item", "wheel: msgpack-like item", "wheel: empty item",
                              "wheel: huge item"};
        snprintf(g->what, sizeof g->what, "%s", what[i]);
        char item[4096];
        size_t len = 0;
        if (i == 0) len = (size_t)snprintf(item, sizeof item, "%s not an item", g->marker);
        if (i == 1) item[0] = (char)(0xa0 | strlen(g->marker)), memcpy(item + 1, g->marker, strlen(g->marker)),
                    len = 1 + strlen(g->marker), item[len++] = (char)0xc3;
        if (i == 3) memset(item, 'w', sizeof item), memcpy(item, g->marker, strlen(g->marker)), len = sizeof item;
        must(c, "RPUSH jr:{qa}:wheel:%lld %b", start, item, len);
    }
    must(c, "ZADD jr:{qa}:wheel %lld %lld", start, start);
    /* the job index, the cancel flags and the stats of qa */
    must(c, "HSET jr:{qa}:ids chaos-ghost-1 @abc chaos-ghost-2 ~x@y chaos-ghost-3 1-1 chaos-ghost-4 %b", "\xff\x00",
         (size_t)2);
    must(c, "HSET jr:{qa}:cancelled not-an-entry x 0-1 abc 99999999999999-0 1");
    must(c, "HSET jr:{qa}:stats zz-garbage %b", "\xff", (size_t)1);
    /* the live-process list: a name whose hash is of the wrong type, one
     * whose hash holds nonsense, a binary name */
    must(c, "ZADD jr:{procs} %lld chaos-ghost-wt %lld chaos-ghost-bad", (long long)now, (long long)now);
    must(c, "SET jr:{procs}:chaos-ghost-wt x");
    must(c, "HSET jr:{procs}:chaos-ghost-bad role worker pid abc client 999999999 lease -5 queues %b", "\xff,,",
         (size_t)3);
    must(c, "PEXPIRE jr:{procs}:chaos-ghost-bad 600000");
    must(c, "ZADD jr:{procs} %lld %b", (long long)now, "\xff\x00ghost", (size_t)7);
    /* global keys of the wrong type, left in place: they cost pausing, not the queues */
    try_cmd(c, "SET jr:{queues}:resumed x");
    redisReply *rep = redisCommand(c, "EXISTS jr:{queues}:paused");
    int paused_exists = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer;
    if (rep) freeReplyObject(rep);
    if (!paused_exists) try_cmd(c, "SET jr:{queues}:paused x");
    /* a cancel of the ids the index names wrongly finds nothing */
    const char *args[] = {"cancel", "-c", cfgpath, "-q", "qa", "chaos-ghost-1", "chaos-ghost-2", "chaos-ghost-3", NULL};
    char out[1024], err[1024];
    int rc = jrt_run(out, sizeof out, err, sizeof err, args);
    int nf = 0;
    for (const char *p = out; (p = strstr(p, " not found")); p++) nf++;
    if (rc != 1 || nf != 3) {
        ghost_failures++;
        snprintf(ghost_notes, sizeof ghost_notes, "  cancel of ids with garbage index entries: exit %d, %d of 3 not found: %.200s %.200s\n",
                 rc, nf, out, err);
    }
}

/* Wrong-type keys of the victim queue qv (stats, cancel flags, wheel index
 * and counter), written only where nothing of value is lost: removed again
 * by garbage_victim_off, after which qv drains like any queue. */
static void garbage_victim_on(redisContext *c) {
    static const char *const keys[][2] = {{"jr:{qv}:stats", "string"},
                                          {"jr:{qv}:cancelled", "list"},
                                          {"jr:{qv}:wheel", "string"},
                                          {"jr:{qv}:wheel:n", "hash"}};
    for (int i = 0; i < 4; i++) {
        int keep = i >= 2; /* the wheel keys: only if absent (qv has no wheel jobs, but be sure) */
        redisReply *rep = redisCommand(c, "EXISTS %s", keys[i][0]);
        int exists = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer;
        if (rep) freeReplyObject(rep);
        if (keep && exists) continue;
        try_cmd(c, "DEL %s", keys[i][0]);
        if (!strcmp(keys[i][1], "string")) try_cmd(c, "SET %s garbage", keys[i][0]);
        else if (!strcmp(keys[i][1], "list")) try_cmd(c, "RPUSH %s garbage", keys[i][0]);
        else try_cmd(c, "HSET %s garbage 1", keys[i][0]);
        snprintf(victim_keys[nvictim_keys++], sizeof victim_keys[0], "%s", keys[i][0]);
    }
    fprintf(stderr, "chaos: %d wrong-type keys of qv written\n", nvictim_keys);
}

static void garbage_victim_off(redisContext *c) {
    for (int i = 0; i < nvictim_keys; i++) try_cmd(c, "DEL %s", victim_keys[i]);
    fprintf(stderr, "chaos: wrong-type keys of qv removed\n");
}

/* A string over the schedules and their wake stream, left to the end: it
 * costs the schedules, not the promotion of any queue's delayed jobs. */
static void garbage_cron_string(redisContext *c) {
    try_cmd(c, "SET jr:{cron} garbage");
    try_cmd(c, "SET jr:{cron}:wake garbage");
    fprintf(stderr, "chaos: strings written over jr:{cron} and jr:{cron}:wake\n");
}

/* ---- out of memory ---------------------------------------------------------- */

static int64_t oom_t0;
static int oom_confirmed, oom_refills;

static long long used_memory(redisContext *c) { return jrt_info_int(c, "memory", "used_memory"); }

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

/* The items of queue q's time-wheel buckets: [kind, value, ...], kind "w"
 * with the job id for an item that decodes as one, "r" with the raw item
 * for any other (garbage: jrt_delayed_all would refuse the whole wheel). */
static const char WHEEL_ITEMS_LUA[] =
    "local q, out = ARGV[1], {}\n"
    "local ok, bs = pcall(redis.call, 'ZRANGE', 'jr:{' .. q .. '}:wheel', 0, -1)\n"
    "if not ok then return out end\n"
    "for _, b in ipairs(bs) do\n"
    "  local okl, items = pcall(redis.call, 'LRANGE', 'jr:{' .. q .. '}:wheel:' .. b, 0, -1)\n"
    "  if okl then for _, it in ipairs(items) do\n"
    "    local oku, t = pcall(function() return {cmsgpack.unpack(it)} end)\n"
    "    local bn = tonumber(b)\n"
    "    if oku and #t > 2 and bn and type(t[1]) == 'number' and type(t[2]) == 'number' and type(t[3]) == 'string' then\n"
    "      local id = t[3]\n"
    "      if id == '' then id = 'd' .. string.format('%d', math.floor((bn * 1000 + t[2]) / 1000)) .. '-' .. string.format('%d', t[1]) end\n"
    "      out[#out + 1] = 'w'; out[#out + 1] = id\n"
    "    elseif not (oku and #t == 1 and type(t[1]) == 'number') then\n" /* a lone n: a cancelled item */
    "      out[#out + 1] = 'r'; out[#out + 1] = it\n"
    "    end\n"
    "  end end\n"
    "end\n"
    "return out\n";

static redisReply *wheel_items(redisContext *c, int q) {
    redisReply *rep = redisCommand(c, "EVAL %s 0 %s", WHEEL_ITEMS_LUA, QUEUES[q]);
    cr_assert(rep && rep->type == REDIS_REPLY_ARRAY, "wheel items of %s: %s", QUEUES[q],
              rep ? rep->str : c->errstr);
    return rep;
}

/* A periodic tick's id ("tick-a@<ms>", "tick-c@<ms>") whose tick has come
 * (a tick fired ahead of its time waits for it, and the drain need not). */
static int is_tick(const char *id, size_t len) {
    if (len <= 7 || len > 40 || (memcmp(id, "tick-a@", 7) && memcmp(id, "tick-c@", 7))) return 0;
    char t[48];
    snprintf(t, sizeof t, "%.*s", (int)len - 7, id + 7);
    return atoll(t) * 1000 <= jrt_wall_us();
}

/* Mark what is still in the ready streams and delayed sets. Returns how
 * many ledger jobs are there, and periodic ticks not in the ledger. */
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
            else n += id && is_tick(id->str, id->len);
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
            else n += id && is_tick(id, len);
            for (size_t g = 0; g < ngarbage; g++)
                if (G[g].where == G_DELAYED && G[g].queue == q && G[g].member_len == m->len &&
                    !memcmp(G[g].member, m->str, m->len))
                    G[g].present = 1;
        }
        freeReplyObject(rep);
        rep = wheel_items(c, q); /* and the time wheel's buckets */
        for (size_t i = 0; i + 1 < rep->elements; i += 2) {
            const redisReply *v = rep->element[i + 1];
            if (!strcmp(rep->element[i]->str, "r")) {
                for (size_t g = 0; g < ngarbage; g++)
                    if (G[g].where == G_WHEEL && G[g].queue == q && contains(v->str, v->len, G[g].marker))
                        G[g].present = 1;
                continue;
            }
            job_t *j = ledger_find(q, v->str, v->len);
            if (j) n += !j->present, j->present = 1;
            else n += is_tick(v->str, v->len);
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
        r->t -= (int64_t)skew_of(r->wpid) * 1000000; /* the skewed worker's runners wrote its clock */
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
    /* Stopped past its lease (its last heartbeat may be up to lease/3 older
     * than the stop): the worker of `a` stopped after `a` before its
     * acknowledgement, or the worker of `b` had fetched the job, stopped,
     * lost it to the worker of `a` and, woken, ran it (stopped until at most
     * a lease before `a`). */
    for (size_t i = 0; i < stalls.n; i++) {
        const event_t *s = &stalls.v[i];
        if (s->t1 - s->t0 <= LEASE_MS * 1000LL * 2 / 3) continue;
        if (s->pid == a->wpid && s->t1 > a->t && s->t0 < b->t) return "worker SIGSTOPped";
        if (s->pid == b->wpid && s->t0 < a->t && s->t1 > a->t - LEASE_MS * 1000LL) return "worker SIGSTOPped";
    }
    for (size_t i = 0; i < restarts.n; i++)
        if (restarts.v[i].t1 + RECONNECT_SLACK_US > a->t && restarts.v[i].t0 < b->t) return "Redis restarted";
    for (size_t i = 0; i < ooms.n; i++)
        if (ooms.v[i].t1 + RECONNECT_SLACK_US > a->t && ooms.v[i].t0 < b->t) return "Redis out of memory";
    for (size_t i = 0; i < deaths.n; i++)
        if (deaths.v[i].pid == a->wpid && deaths.v[i].t1 > a->t && deaths.v[i].t0 < b->t)
            return "worker died on its own";
    return NULL;
}

/* ---- ticks and cancels into the ledger ---------------------------------------- */

static int queue_of(const char *key) {
    for (int q = 0; q < NQ; q++)
        if (!strncmp(key, QUEUES[q], 2) && key[2] == '/') return q;
    return -1;
}

/* Put periodic tick `id` of queue q into the ledger (once). */
static void add_tick(int q, const char *id, size_t len) {
    if (len <= 7 || len >= ID_MAX || (memcmp(id, "tick-a@", 7) && memcmp(id, "tick-c@", 7))) return;
    if (ledger_find(q, id, len)) return;
    char key[ID_MAX + 8], t[ID_MAX];
    snprintf(key, sizeof key, "%s/%.*s", QUEUES[q], (int)len, id);
    snprintf(t, sizeof t, "%.*s", (int)len - 7, id + 7);
    job_t *j = ledger_add(key, id[5] == 'a' ? K_TICK_A : K_TICK_C, q);
    j->due_us = atoll(t) * 1000; /* due at its tick */
}

/* Every tick that ran, is still in Redis, died, or was cancelled. */
static void collect_ticks(redisContext *c) {
    for (size_t i = 0; i < nrecs; i++) {
        int q = queue_of(recs[i].key);
        if (q >= 0) add_tick(q, recs[i].key + 3, strlen(recs[i].key + 3));
    }
    for (size_t i = 0; i < ncancels; i++) {
        int q = queue_of(cancels[i].key);
        if (q >= 0 && (cancels[i].reply == C_CANCELLED || cancels[i].reply == C_RUNNING))
            add_tick(q, cancels[i].key + 3, strlen(cancels[i].key + 3));
    }
    const int qs[] = {QA, QC};
    for (int k = 0; k < 2; k++) {
        int q = qs[k];
        const char *streams[] = {"ready", "dead"};
        for (int s2 = 0; s2 < 2; s2++) {
            redisReply *rep = redisCommand(c, "XRANGE jr:{%s}:%s - +", QUEUES[q], streams[s2]);
            cr_assert(rep && rep->type == REDIS_REPLY_ARRAY, "XRANGE: %s", rep ? rep->str : c->errstr);
            for (size_t i = 0; i < rep->elements; i++) {
                const redisReply *id = field(rep->element[i]->element[1], "id");
                if (id) add_tick(q, id->str, id->len);
            }
            freeReplyObject(rep);
        }
        redisReply *rep = redisCommand(c, "ZRANGE jr:{%s}:delayed 0 -1", QUEUES[q]);
        cr_assert(rep && rep->type == REDIS_REPLY_ARRAY, "ZRANGE: %s", rep ? rep->str : c->errstr);
        for (size_t i = 0; i < rep->elements; i++) {
            size_t len;
            const char *id = mp_first_str(rep->element[i]->str, rep->element[i]->len, &len);
            if (id) add_tick(q, id, len);
        }
        freeReplyObject(rep);
        rep = wheel_items(c, q);
        for (size_t i = 0; i + 1 < rep->elements; i += 2)
            if (!strcmp(rep->element[i]->str, "w")) add_tick(q, rep->element[i + 1]->str, rep->element[i + 1]->len);
        freeReplyObject(rep);
    }
}

/* Each cancel's answer onto its job (an id is cancelled once). */
static void apply_cancels(void) {
    for (size_t i = 0; i < ncancels; i++) {
        int q = queue_of(cancels[i].key);
        job_t *j = q >= 0 ? ledger_find(q, cancels[i].key + 3, strlen(cancels[i].key + 3)) : NULL;
        if (!j || j->cancel) continue;
        j->cancel = cancels[i].reply, j->cancel_t1 = cancels[i].t1;
    }
}

/* 1 if a worker was SIGSTOPped past its lease around time t: a job it had
 * fetched may have been taken over and run by another worker, and run by it
 * too once woken, both after a cancel at t answered "running". */
static int stalled_near(int64_t t) {
    for (size_t i = 0; i < stalls.n; i++)
        if (stalls.v[i].t1 - stalls.v[i].t0 > LEASE_MS * 1000LL * 2 / 3 && stalls.v[i].t1 > t - 2 * LEASE_MS * 1000LL &&
            stalls.v[i].t0 < t + 2 * LEASE_MS * 1000LL)
            return 1;
    return 0;
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
    jrt_asan_option("handle_segv=0:handle_abort=0");
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
    /* Long jobs: running when cancelled; four of them outlast an inline worker's lease. */
    if (enabled("cancel") || enabled("inline")) KINDS[K_LONG].weight = 3;
    if (enabled("skew")) {
        skew_w = 30, skew_s = rnd() % 2 ? 30 : -30; /* a worker ahead (issue 18 class 4); the scheduler either way */
        check_skew(skew_w), check_skew(skew_s);
    }
    fprintf(stderr, "chaos: seed=%llu seconds=%d without=[%s] (rerun: JR_CHAOS_SEED=%llu JR_CHAOS_SECONDS=%d)\n",
            seed, seconds, without, seed, seconds);

    /* The config of workers 3 and 4 differs only in its queue and isolation. */
    for (int k = 0; k < 2; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "redis:\n  url: %s\n"
                 "worker:\n  queues: [%s]\n  isolation: %s\n  concurrency: 2\n  batch: 4\n  lease: %dms\n  grace: 5s\n"
                 "  block: 1s\n  handler_wait: 0s\n"
                 "scheduler:\n  block: 1s\n"
                 "jobs:\n  max_attempts: 3\n  backoff: 50ms\n  backoff_max: 300ms\n  max_deliveries: 10\n"
                 "  max_payload: 65536\n  timeout: 30s\n"
                 "dead:\n  max: 100000\n",
                 R.url, k ? "qc" : "qa, qb, qv", k && enabled("inline") ? "inline" : "process", LEASE_MS);
        jrt_write(&R, k ? "chaos-qc.yaml" : "chaos.yaml", text, k ? cfgpath_c : cfgpath, sizeof cfgpath);
    }

    redisContext *c = jrt_connect(&R);
    char *lua = jrt_slurp(JRT_LUA_LIBRARY);
    must(c, "FUNCTION LOAD REPLACE %s", lua);
    free(lua);
    for (int q = 0; q < NQ; q++) must(c, "FCALL jr_register 2 jr:{queues} jr:{queues}:wake %s", QUEUES[q]);
    redisFree(c);
    for (int i = 0; i < NS; i++) start_sched(i);
    for (int i = 0; i < NW; i++) start_worker(i);
    {   /* the periodic schedules (in Redis only: a restarted scheduler must not re-create them) */
        char out[1024], err[1024];
        const char *a[] = {"cron", "add", "tick-a", "-c", cfgpath, "--every", "1s", "-q", "qa", "ok", NULL};
        cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, a), 0, "cron add tick-a: %s", err);
        const char *b[] = {"cron", "add", "tick-c", "-c", cfgpath, "--every", "1s", "-q", "qc", "slow", "300", NULL};
        cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, b), 0, "cron add tick-c: %s", err);
    }

    /* ---- chaos ---- */
    int64_t t_start = jrt_wall_us(), T = (int64_t)seconds * 1000000;
    int64_t next_kill = t_start + rnd_in(2000, 4000) * 1000;
    int64_t oom_len = T / 8 > 3000000 ? T / 8 : 3000000;
    int garbage1 = !enabled("garbage"), garbage2 = garbage1, restarted = !enabled("restart"),
        sched_killed = !enabled("kill"), oom_state = enabled("oom") ? 0 : 2;
    int class1 = garbage1 ? 3 : 0, worker_stalled = !enabled("stall");
    int64_t next_stall = enabled("stall") ? t_start + rnd_in(1500, 3000) * 1000 : INT64_MAX;
    c = jrt_connect(&R);
    long long ticks = 0;
    for (int64_t now = t_start; now - t_start < T; now = jrt_wall_us(), ticks++) {
        int64_t e = now - t_start;
        reap();
        if (!garbage1 && e >= T / 5) garbage1 = 1, inject_garbage(0, 1);
        if (class1 == 0 && e >= T / 4) {
            redisContext *g = jrt_connect(&R);
            garbage_members(g, 3);
            garbage_victim_on(g);
            redisFree(g);
            class1 = 1;
            fprintf(stderr, "chaos: class-1 garbage injected (%zu items so far)\n", ngarbage);
        }
        if (class1 == 1 && e >= T * 55 / 100) {
            redisContext *g = jrt_connect(&R);
            garbage_victim_off(g);
            redisFree(g);
            class1 = 2;
        }
        if (class1 == 2 && e >= T * 8 / 10 && oom_state != 1) { /* after the OOM window: a refused SET would be no garbage */
            redisContext *g = jrt_connect(&R);
            garbage_cron_string(g);
            redisFree(g);
            class1 = 3;
        }
        if (stall.pid && now >= stall.until) stall_end();
        if (!stall.pid && now >= next_stall) {
            if (!worker_stalled && e >= T * 4 / 10) {
                worker_stalled = 1;
                stall_begin(1, (int)rnd_in(0, NW - 1), (int)rnd_in(2000, 5000));
            } else {
                stall_begin(0, (int)rnd_in(0, NS - 1), (int)rnd_in(500, 3000));
            }
            next_stall = now + rnd_in(2500, 5000) * 1000;
        }
        if (enabled("cancel")) cancel_some(c), cancel_paused_tick(c);
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
    stall_end();
    if (enabled("cancel")) { /* qc may be paused for a tick cancel */
        char out[256], err[512];
        const char *a[] = {"resume", "-c", cfgpath, "qc", NULL};
        jrt_run(out, sizeof out, err, sizeof err, a);
    }
    if (class1 == 1) { /* a run too short to have reached the removal */
        redisContext *g = jrt_connect(&R);
        garbage_victim_off(g);
        redisFree(g);
    }
    int64_t t_chaos_end = jrt_wall_us();
    int cron_removed = 0;
    { /* no tick after this one is expected to run (a string over jr:{cron} may make this fail: fine) */
        char out[1024], err[1024];
        const char *a[] = {"cron", "remove", "-c", cfgpath, "tick-a", "tick-c", NULL};
        cron_removed = jrt_run(out, sizeof out, err, sizeof err, a) == 0;
    }
    int64_t t_cron_end = jrt_wall_us();

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
    read_record();
    stop_children();
    c = jrt_connect(&R);
    collect_ticks(c);
    apply_cancels();
    scan_present(c);
    scan_dead(c);
    redisFree(c);

    tally_t lost = {0}, stuck = {0}, wrong = {0}, dead_twice = {0}, done_and_dead = {0}, stray = {0},
            unknown = {0}, unexplained = {0}, uniq_ran = {0}, g_vanished = {0}, g_repeated = {0}, g_ran = {0},
            g_dead_gone = {0}, g_why = {0}, early = {0}, cancel_bad = {0}, g_spin = {0}, ticks_ahead = {0};
    long long done = 0, dead = 0, dead_by[NKINDS] = {0}, poison = 0, dup_total = 0, dup_kill = 0, dup_restart = 0,
              dup_oom = 0, dup_death = 0, dup_stall = 0, uniq_refused = 0, n_cancelled = 0, n_cancel_unknown = 0,
              ticks_run = 0, ticks_late_left = 0, by_reply[5] = {0};
    for (size_t i = 0; i < nrecs;) { /* runs per job */
        size_t k = i;
        while (k < nrecs && !strcmp(recs[k].key, recs[i].key)) k++;
        const char *slash = strchr(recs[i].key, '/');
        int q = queue_of(recs[i].key);
        job_t *j = slash && q >= 0 ? ledger_find(q, slash + 1, strlen(slash + 1)) : NULL;
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
            if (j->due_us && recs[r].t < j->due_us - 2000)
                note(&early, "  %s (%s) attempt %d ran at %lld, %.3f s before it was due (worker %d, clock %+d s)\n",
                     j->key, KINDS[j->kind].name, recs[r].attempt, (long long)recs[r].t,
                     (j->due_us - recs[r].t) / 1e6, recs[r].wpid, skew_of(recs[r].wpid));
            if ((j->cancel == C_CANCELLED || j->cancel == C_RUNNING) && recs[r].t > j->cancel_t1) j->runs_after_cancel++;
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
                    dup_stall += !strcmp(why, "worker SIGSTOPped");
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
        by_reply[j->cancel]++;
        ticks_run += (j->kind == K_TICK_A || j->kind == K_TICK_C) && j->ok_runs;
        if (j->present && (j->kind == K_TICK_A || j->kind == K_TICK_C) && j->due_us > t_cron_end) {
            ticks_late_left++; /* fired for a tick after the schedules were removed */
            /* A scheduler that loaded the schedules just before the removal may fire one more
             * tick; one due well after it was fired ahead of its time. */
            if (cron_removed && j->due_us > t_cron_end + 1500000)
                note(&ticks_ahead, "  %s: fired for a tick %.1f s after its schedule was removed\n", j->key,
                     (j->due_us - t_cron_end) / 1e6);
        } else if (j->present) {
            note(&stuck, "  %s (%s) still in Redis after the drain%s%s\n", j->key, kd->name,
                 j->cancel ? ", cancel said " : "", j->cancel ? CANCEL_REPLY[j->cancel] : "");
        } else if (j->cancel == C_CANCELLED || j->cancel == C_RUNNING) {
            if (j->ndead)
                note(&cancel_bad, "  %s (%s): cancel said %s, yet it is dead (why=%s err=%s)\n", j->key, kd->name,
                     CANCEL_REPLY[j->cancel], j->why, j->err);
            else if (j->runs_after_cancel > (j->cancel == C_RUNNING ? 1 + stalled_near(j->cancel_t1) : 0))
                note(&cancel_bad, "  %s (%s): cancel said %s at %lld, yet it ran %d times after (%d runs, %d OK)\n",
                     j->key, kd->name, CANCEL_REPLY[j->cancel], (long long)j->cancel_t1, j->runs_after_cancel, j->runs,
                     j->ok_runs);
            else
                n_cancelled++;
        } else if (j->cancel == C_UNKNOWN && !j->ndead && !j->ok_runs) {
            n_cancel_unknown++; /* the cancel's answer was lost: cancelled or not, it is gone */
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
    long long g_dead = 0, g_place = 0, g_kept = 0, g_wheel = 0;
    for (size_t i = 0; i < ngarbage; i++) {
        garbage_t *g = &G[i];
        if (g->where == G_WHEEL) { /* dead, dropped or in place: it must only never run, nor die twice */
            g_wheel++;
            if (g->ndead > 1) note(&g_repeated, "  %s %s: dead %d times\n", g->marker, g->what, g->ndead);
            continue;
        }
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
        if (g->where == G_DEAD || g->where == G_WHEEL || g->ndead || !g->present) continue;
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

    /* Every cancel flag went with its entry (but the garbage members). */
    tally_t flags_left = {0};
    c = jrt_connect(&R);
    for (int q = 0; q < NQ; q++) {
        redisReply *rep = redisCommand(c, "HKEYS jr:{%s}:cancelled", QUEUES[q]);
        for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
            const char *f = rep->element[i]->str;
            if (q == QA && (!strcmp(f, "not-an-entry") || !strcmp(f, "0-1") || !strcmp(f, "99999999999999-0")))
                continue;
            note(&flags_left, "  jr:{%s}:cancelled %s: a cancel flag outlived its entry\n", QUEUES[q], f);
        }
        if (rep) freeReplyObject(rep);
    }
    redisFree(c);

    /* Garbage is reported, not in a loop. */
    for (int p2 = 0; p2 < NW + NS; p2++) {
        char name[16];
        snprintf(name, sizeof name, p2 < NW ? "w%d.log" : "s%d.log", p2 < NW ? p2 : p2 - NW);
        for (size_t k = 0; k < sizeof GARBAGE_NAMES / sizeof *GARBAGE_NAMES; k++) {
            int n = jrt_count(logpath(name), GARBAGE_NAMES[k]);
            if (n > GARBAGE_LOG_MAX) note(&g_spin, "  %s names %s %d times\n", name, GARBAGE_NAMES[k], n);
        }
    }

    /* The admin tools still work on the queues with garbage in every key. */
    char out[4096], err[4096], stats_err[4096];
    const char *stats_args[] = {"stats", "-c", cfgpath, "-q", "qa", "-q", "qb", "-q", "qc", "-q", "qv", NULL};
    int stats_rc = jrt_run(out, sizeof out, stats_err, sizeof stats_err, stats_args);
    const char *dead_args[] = {"dead", "list", "-c", cfgpath, "-q", "qa", NULL};
    char *dead_out = malloc(1 << 22);
    cr_assert(dead_out);
    int dead_rc = jrt_run(dead_out, 1 << 22, err, sizeof err, dead_args);
    free(dead_out);

    long long enqueued = 0, ticks_known = 0;
    for (size_t i = 0; i < L.n; i++) {
        int tick = L.v[i].kind == K_TICK_A || L.v[i].kind == K_TICK_C;
        ticks_known += tick;
        enqueued += !tick && (L.v[i].created || L.v[i].transport_before);
    }
    long long cancel_calls[5] = {0}, tick_cancels[5] = {0};
    for (size_t i = 0; i < ncancels; i++) {
        cancel_calls[cancels[i].reply]++;
        tick_cancels[cancels[i].reply] += strstr(cancels[i].key, "/tick-") != NULL;
    }
    fprintf(stderr,
            "==== chaos ledger: seed=%llu seconds=%d without=[%s] ====\n"
            "time:        chaos %.1f s, drain %.1f s, stop %.1f s\n"
            "faults:      worker SIGKILLs %zu, scheduler SIGKILLs %d, Redis restarts %zu, OOM windows %zu"
            " (writes refused: %s, refilled %d times), garbage items %zu\n"
            "             SIGSTOPs: schedulers %d, workers %d; clocks: worker %d %+d s, scheduler %d %+d s;"
            " qc isolation %s\n"
            "enqueued:    %lld jobs (explicit ids %lld, generated %lld); calls refused under OOM %lld"
            " (their generated-id jobs not retried: %lld); outcome unknown %lld\n"
            "             uniq-key garbage: %lld enqueues answered duplicate (and must never run)\n"
            "periodic:    %lld ticks seen, %lld ran OK, %lld fired for ticks after the schedules were removed;"
            " cancels answered cancelled %lld, running %lld\n"
            "cancels:     %zu ids: cancelled %lld, running %lld, not found %lld, no answer %lld (cancel errors %d);"
            " ended cancelled %lld, answer lost and gone %lld; WRONG %lld; flags left %lld\n"
            "done:        %lld\n"
            "dead:        %lld  crash %lld, abort %lld, hang %lld, fail %lld, poison %lld\n"
            "lost:        %lld\n"
            "stuck:       %lld (still in ready/delayed after the drain)\n"
            "wrong state: %lld (dead with the wrong why/err, or OK but expected dead)\n"
            "both:        %lld done and dead, %lld dead twice\n"
            "early:       %lld runs before the job was due; %lld ticks fired well ahead of time\n"
            "duplicates:  %lld runs OK more than once: worker SIGKILL %lld, worker SIGSTOP %lld, Redis restart %lld,"
            " Redis OOM %lld, worker died on its own %lld; UNEXPLAINED %lld\n"
            "stray runs:  %lld (in a handler's forked child, or in a process no worker is above)\n"
            "unknown:     %lld ids ran that were never enqueued\n"
            "stale uniq:  %lld refused enqueues left their id behind\n"
            "garbage:     %zu items: dead-lettered %lld (why other than invalid: %lld), left in place %lld"
            " (unlogged %lld), VANISHED %lld, repeated %lld, ran %lld, dead-stream items kept %lld lost %lld,"
            " wheel items %lld; logged in a loop %lld; garbage index ids not cancelled as not found %d\n"
            "processes:   workers died on their own %zu, schedulers %d, not stopped by SIGTERM %d;"
            " stats exit %d, dead list exit %d\n"
            "==== end of chaos ledger ====\n",
            seed, seconds, without, (t_chaos_end - t_start) / 1e6, (t_drained - t_chaos_end) / 1e6,
            (t_stopped - t_drained) / 1e6, kills.n, sched_kills, restarts.n, ooms.n,
            ooms.n ? (oom_confirmed ? "yes" : "NO") : "-", oom_refills, ngarbage, sched_stalls, worker_stalls, SKEWED,
            skew_w, SKEWED, skew_s, enabled("inline") ? "inline" : "process", enqueued, enqueued_explicit,
            enqueued_generated, refused_calls, refused_generated, uncertain_generated, uniq_refused, ticks_known,
            ticks_run, ticks_late_left, tick_cancels[C_CANCELLED], tick_cancels[C_RUNNING], ncancels, cancel_calls[C_CANCELLED], cancel_calls[C_RUNNING],
            cancel_calls[C_NOT_FOUND], cancel_calls[C_UNKNOWN], cancel_errors, n_cancelled, n_cancel_unknown,
            cancel_bad.n, flags_left.n, done, dead, dead_by[K_CRASH], dead_by[K_ABORT], dead_by[K_HANG], dead_by[K_FAIL], poison,
            lost.n, stuck.n, wrong.n, done_and_dead.n, dead_twice.n, early.n, ticks_ahead.n, dup_total, dup_kill, dup_stall,
            dup_restart, dup_oom, dup_death, unexplained.n, stray.n, unknown.n, (long long)stale_uniq, ngarbage,
            g_dead, g_why.n, g_place, g_place_unlogged, g_vanished.n - g_place_unlogged, g_repeated.n, g_ran.n,
            g_kept, g_dead_gone.n, g_wheel, g_spin.n, ghost_failures, deaths.n, sched_deaths, stop_failures, stats_rc,
            dead_rc);
    (void)by_reply;
    const struct {
        const char *name;
        tally_t *t;
    } lists[] = {{"lost", &lost},
                 {"stuck", &stuck},
                 {"wrong final state", &wrong},
                 {"dead twice", &dead_twice},
                 {"done and dead", &done_and_dead},
                 {"ran before due", &early},
                 {"cancel not kept", &cancel_bad},
                 {"ticks fired ahead", &ticks_ahead},
                 {"cancel flags left", &flags_left},
                 {"unexplained duplicates", &unexplained},
                 {"stray runs", &stray},
                 {"unknown ids", &unknown},
                 {"uniq garbage ignored", &uniq_ran},
                 {"garbage vanished", &g_vanished},
                 {"garbage repeated", &g_repeated},
                 {"garbage ran", &g_ran},
                 {"garbage dead why", &g_why},
                 {"garbage logged in a loop", &g_spin},
                 {"dead-stream garbage deleted", &g_dead_gone}};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
        if (lists[i].t->n)
            fprintf(stderr, "%s (%lld, first %d):\n%s", lists[i].name, lists[i].t->n,
                    lists[i].t->shown < NOTE_MAX ? lists[i].t->shown : NOTE_MAX, lists[i].t->notes);
    if (ghost_failures) fprintf(stderr, "lookups around garbage:\n%s", ghost_notes);
    if (cancel_errors) fprintf(stderr, "cancel calls that failed (answers unknown, not a failure):\n%s", cancel_notes);
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
    if (stats_rc || dead_rc)
        fprintf(stderr, "admin commands failed: stats %d: %s; dead list %d: %s\n", stats_rc, stats_err, dead_rc, err);

    long long failures = lost.n + stuck.n + wrong.n + dead_twice.n + done_and_dead.n + unexplained.n + stray.n +
                         unknown.n + uniq_ran.n + g_vanished.n + g_repeated.n + g_ran.n + g_why.n + g_dead_gone.n +
                         stale_uniq + (long long)deaths.n + sched_deaths + stop_failures + (stats_rc != 0) +
                         (dead_rc != 0) + (ooms.n && !oom_confirmed) + early.n + ticks_ahead.n + cancel_bad.n + flags_left.n + g_spin.n +
                         ghost_failures;
    if (failures) copy_dir_on_failure();
    cr_expect_eq(lost.n, 0, "%lld jobs lost", lost.n);
    cr_expect_eq(stuck.n, 0, "%lld jobs stuck in Redis", stuck.n);
    cr_expect_eq(wrong.n + dead_twice.n + done_and_dead.n, 0, "%lld jobs in a wrong final state",
                 wrong.n + dead_twice.n + done_and_dead.n);
    cr_expect_eq(unexplained.n, 0, "%lld unexplained duplicate runs", unexplained.n);
    cr_expect_eq(early.n, 0, "%lld runs before their job was due", early.n);
    cr_expect_eq(ticks_ahead.n, 0, "%lld periodic jobs fired ahead of their tick", ticks_ahead.n);
    cr_expect_eq(cancel_bad.n, 0, "%lld cancelled jobs ran after the cancel or ended dead", cancel_bad.n);
    cr_expect_eq(g_spin.n, 0, "garbage reported in a loop");
    cr_expect_eq(flags_left.n, 0, "%lld cancel flags outlived their entries", flags_left.n);
    cr_expect_eq(ghost_failures, 0, "a cancel around garbage in the job index did not answer not found");
    cr_expect_eq(stray.n, 0, "%lld runs outside a worker's runner process", stray.n);
    cr_expect_eq(unknown.n + uniq_ran.n, 0, "%lld runs of jobs never enqueued", unknown.n + uniq_ran.n);
    cr_expect_eq(g_vanished.n + g_repeated.n + g_ran.n + g_why.n + g_dead_gone.n, 0, "garbage mishandled");
    cr_expect_eq(stale_uniq, 0, "refused enqueues left ids behind");
    cr_expect_eq(deaths.n + sched_deaths, 0, "processes died on their own");
    cr_expect_eq(stop_failures, 0, "processes did not stop on SIGTERM");
    cr_expect_eq(stats_rc, 0, "jobrunner stats failed: %s", stats_err);
    cr_expect_eq(dead_rc, 0, "jobrunner dead list failed");
    cr_expect(!ooms.n || oom_confirmed, "the OOM window did not make Redis refuse writes");
    cr_expect_gt(done, 0, "no job ran");
    free(recs), free(children), free(worker_pids), free(worker_skews), free(cancels);
    free(kills.v), free(deaths.v), free(restarts.v), free(ooms.v), free(stalls.v);
    free(L.v);
    free(retry_list);
    for (size_t i = 0; i < ngarbage; i++) free(G[i].member);
    (void)ticks;
}
