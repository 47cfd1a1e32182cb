/* bench/shape_floor.c — what Redis itself spends per job on the shape
 * jobrunner is fixed to, with no Lua and no jobrunner at all: the floor
 * below which no change to our functions can bring Redis's CPU per job.
 *
 *   shape_floor SOCKET [N [B [PAYLOAD_BYTES]]]     (N 200000, B 500, 46 bytes:
 * the payload of jr_peer bulk)
 *
 * On the redis-server at SOCKET (unix socket; FLUSHALL first: a scratch
 * Redis), in this order:
 *   ready:   N entries "h noop p <payload>" XADDed *, pipelined by 1,000;
 *            then one consumer of group jr reads them with XREADGROUP COUNT
 *            B and sends, per batch, XACK of its ids and XTRIM MINID of its
 *            last (one consumer in order: every entry below it is done, so
 *            the cheapest removal there is; an XDEL per entry costs more
 *            than the read) in the same write as the next read (as a
 *            worker's acknowledgement rides on its read);
 *   delayed: the same N jobs as sorted-set members (the envelope with an id
 *            and its e and d fields, 1 ms apart), ZADDed pipelined; then
 *            ZPOPMIN B at a time and one XADD per job from the client (a
 *            copy of the smallest cost: not atomic, so not a design, a
 *            floor), then the same read, XACK and XTRIM;
 *   inplace: the same N jobs XADDed into a stream per 1 s bucket of their
 *            due time (id, e and d fields, as a delayed job carries), one
 *            XGROUP CREATE per bucket once due, then each bucket read,
 *            acknowledged and trimmed as above and deleted: the floor of
 *            reading a due bucket where it lies instead of copying it;
 *   inplace_lean: the same with the fields h, d and p only.
 * Prints Redis's CPU (INFO cpu, user + system, all threads) per job for
 * each phase, and the time of each command per job (INFO commandstats),
 * as key=value words on one line per phase. Needs nothing but hiredis.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static redisContext *C;

static void die(const char *what) {
    fprintf(stderr, "shape_floor: %s: %s\n", what, C->err ? C->errstr : "unexpected reply");
    exit(1);
}

static redisReply *get(void) {
    void *r = NULL;
    if (redisGetReply(C, &r) != REDIS_OK || !r) die("reply");
    if (((redisReply *)r)->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "shape_floor: Redis: %s\n", ((redisReply *)r)->str);
        exit(1);
    }
    return r;
}

static void cmd(const char *fmt) {
    redisReply *r = redisCommand(C, fmt);
    if (!r || r->type == REDIS_REPLY_ERROR) die(fmt);
    freeReplyObject(r);
}

/* Redis's CPU so far, seconds (user + system of all its threads). */
static double cpu(void) {
    redisReply *r = redisCommand(C, "INFO cpu");
    if (!r || r->type != REDIS_REPLY_STRING) die("INFO cpu");
    double s = 0;
    const char *keys[] = {"used_cpu_user:", "used_cpu_sys:"};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(r->str, keys[i]);
        if (p) s += strtod(p + strlen(keys[i]), NULL);
    }
    freeReplyObject(r);
    return s;
}

/* " cmd=us/job" for each command of INFO commandstats above 0.005. */
static void profile(long n) {
    redisReply *r = redisCommand(C, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) die("INFO commandstats");
    for (const char *p = strstr(r->str, "cmdstat_"); p; p = strstr(p + 1, "cmdstat_")) {
        char name[64];
        long long calls = 0;
        long long usec = 0;
        if (sscanf(p, "cmdstat_%63[^:]:calls=%lld,usec=%lld", name, &calls, &usec) == 3 && strcmp(name, "info") &&
            (double)usec / (double)n >= 0.005)
            printf(" %s=%.3f", name, (double)usec / (double)n);
    }
    freeReplyObject(r);
}

/* Read the stream `key` with group jr until empty (n entries expected):
 * XREADGROUP COUNT b, then XACK of the batch and XTRIM MINID of its last
 * id, sent with the next read (XTRIM keeps that last entry: at most one
 * entry stays). */
static void drain(const char *key, long n, long b) {
    long done = 0;
    char **ids = calloc((size_t)b, sizeof *ids);
    size_t *lens = calloc((size_t)b, sizeof *lens);
    const char **argv = calloc((size_t)b + 3, sizeof *argv);
    size_t *argl = calloc((size_t)b + 3, sizeof *argl);
    if (!ids || !lens || !argv || !argl) die("out of memory");
    long have = 0;
    char count[24];
    snprintf(count, sizeof count, "%ld", b);
    while (done < n) {
        int pend = 0;
        if (have) {
            argv[0] = "XACK", argl[0] = 4, argv[1] = key, argl[1] = strlen(key), argv[2] = "jr", argl[2] = 2;
            for (long i = 0; i < have; i++) argv[3 + i] = ids[i], argl[3 + i] = lens[i];
            redisAppendCommandArgv(C, (int)have + 3, argv, argl);
            redisAppendCommand(C, "XTRIM %s MINID %s", key, ids[have - 1]);
            pend = 2;
        }
        redisAppendCommand(C, "XREADGROUP GROUP jr c COUNT %s STREAMS %s >", count, key);
        for (int i = 0; i < pend; i++) freeReplyObject(get());
        for (long i = 0; i < have; i++) free(ids[i]);
        have = 0;
        redisReply *r = get();
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
            redisReply *es = r->element[0]->element[1];
            for (size_t i = 0; i < es->elements && have < b; i++) {
                redisReply *id = es->element[i]->element[0];
                ids[have] = strdup(id->str), lens[have] = id->len;
                if (!ids[have]) die("out of memory");
                have++;
            }
        }
        freeReplyObject(r);
        if (!have) break;
        done += have;
    }
    if (have) { /* the last batch's acknowledgement */
        argv[0] = "XACK", argl[0] = 4, argv[1] = key, argl[1] = strlen(key), argv[2] = "jr", argl[2] = 2;
        for (long i = 0; i < have; i++) argv[3 + i] = ids[i], argl[3 + i] = lens[i];
        redisAppendCommandArgv(C, (int)have + 3, argv, argl);
        redisAppendCommand(C, "XTRIM %s MINID %s", key, ids[have - 1]);
        freeReplyObject(get());
        freeReplyObject(get());
        for (long i = 0; i < have; i++) free(ids[i]);
    }
    if (done < n) fprintf(stderr, "shape_floor: read %ld of %ld entries\n", done, n);
    free(ids), free(lens), free(argv), free(argl);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: shape_floor SOCKET [N [B [PAYLOAD_BYTES]]]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 200000, b = argc > 3 ? atol(argv[3]) : 500;
    long pb = argc > 4 ? atol(argv[4]) : 46;
    if (n < 1 || b < 1 || b > 100000 || pb < 1 || pb > 65536) {
        fprintf(stderr, "shape_floor: N >= 1, B 1..100000, PAYLOAD_BYTES 1..65536\n");
        return 2;
    }
    C = redisConnectUnix(argv[1]);
    if (!C || C->err) die("connect");
    char *pay = malloc((size_t)pb + 1);
    if (!pay) die("out of memory");
    memset(pay, 'x', (size_t)pb);
    pay[pb] = 0;
    cmd("FLUSHALL");
    /* ready */
    cmd("CONFIG RESETSTAT");
    double c0 = cpu();
    for (long i = 0; i < n; i += 1000) {
        long k = n - i < 1000 ? n - i : 1000;
        for (long j = 0; j < k; j++) redisAppendCommand(C, "XADD s * h noop p %b", pay, (size_t)pb);
        for (long j = 0; j < k; j++) freeReplyObject(get());
    }
    double c1 = cpu();
    cmd("XGROUP CREATE s jr 0");
    drain("s", n, b);
    double c2 = cpu();
    printf("floor phase=ready jobs=%ld batch=%ld payload=%ld redis_us_enqueue=%.2f redis_us_drain=%.2f redis_us_total=%.2f",
           n, b, pb, (c1 - c0) * 1e6 / (double)n, (c2 - c1) * 1e6 / (double)n, (c2 - c0) * 1e6 / (double)n);
    profile(n);
    printf("\n");
    /* delayed: sorted set, copied by the client */
    cmd("FLUSHALL");
    cmd("CONFIG RESETSTAT");
    c0 = cpu();
    long long t0 = 1800000000000LL;
    for (long i = 0; i < n; i += 1000) {
        long k = n - i < 1000 ? n - i : 1000;
        for (long j = 0; j < k; j++) {
            char m[128];
            int ml = snprintf(m, sizeof m, "id d%lld-%ld h noop e %lld d %lld p ", t0 + i + j, i + j, t0, t0 + i + j);
            redisAppendCommand(C, "ZADD z %lld %b%b", t0 + i + j, m, (size_t)ml, pay, (size_t)pb);
        }
        for (long j = 0; j < k; j++) freeReplyObject(get());
    }
    c1 = cpu();
    long moved = 0;
    while (moved < n) {
        redisReply *r = redisCommand(C, "ZPOPMIN z %ld", b);
        if (!r || r->type != REDIS_REPLY_ARRAY) die("ZPOPMIN");
        if (!r->elements) {
            freeReplyObject(r);
            break;
        }
        for (size_t i = 0; i < r->elements; i += 2) { /* member, score: XADD the member's fields */
            const char *m = r->element[i]->str;
            char id[48], e[24], d[24];
            if (sscanf(m, "id %47s h noop e %23s d %23s p ", id, e, d) != 3) die("member");
            redisAppendCommand(C, "XADD s * id %s h noop e %s d %s p %b", id, e, d, pay, (size_t)pb);
        }
        for (size_t i = 0; i < r->elements; i += 2) freeReplyObject(get());
        moved += (long)r->elements / 2;
        freeReplyObject(r);
    }
    double c1b = cpu();
    cmd("XGROUP CREATE s jr 0");
    drain("s", n, b);
    c2 = cpu();
    printf("floor phase=delayed jobs=%ld batch=%ld payload=%ld redis_us_enqueue=%.2f redis_us_copy=%.2f "
           "redis_us_drain=%.2f redis_us_total=%.2f",
           n, b, pb, (c1 - c0) * 1e6 / (double)n, (c1b - c1) * 1e6 / (double)n, (c2 - c1b) * 1e6 / (double)n,
           (c2 - c0) * 1e6 / (double)n);
    profile(n);
    printf("\n");
    /* in place: each 1 s bucket is a stream of its own from the enqueue on;
     * once wholly due it is made readable where it lies (one XGROUP CREATE
     * per bucket) and read, acknowledged and deleted as the ready stream
     * is: no copy per job. The floor of reading a due bucket in place, with
     * the fields of a delayed job today (id h e d p), and lean (h d p: the
     * job id told by the bucket and the entry id, no enqueue time). */
    for (int lean = 0; lean < 2; lean++) {
        cmd("FLUSHALL");
        cmd("CONFIG RESETSTAT");
        c0 = cpu();
        for (long i = 0; i < n; i += 1000) {
            long k = n - i < 1000 ? n - i : 1000;
            for (long j = 0; j < k; j++) {
                long long due = t0 + i + j;
                if (lean)
                    redisAppendCommand(C, "XADD b:%lld * h noop d %lld p %b", due / 1000 * 1000, due, pay, (size_t)pb);
                else
                    redisAppendCommand(C, "XADD b:%lld * id d%lld-%ld h noop e %lld d %lld p %b", due / 1000 * 1000, due,
                                       i + j, t0, due, pay, (size_t)pb);
            }
            for (long j = 0; j < k; j++) freeReplyObject(get());
        }
        c1 = cpu();
        long long first = t0 / 1000 * 1000, last = (t0 + n - 1) / 1000 * 1000;
        for (long long bk = first; bk <= last; bk += 1000) {
            redisReply *r = redisCommand(C, "XGROUP CREATE b:%lld jr 0", bk);
            if (!r || r->type == REDIS_REPLY_ERROR) die("XGROUP CREATE");
            freeReplyObject(r);
        }
        c1b = cpu();
        for (long long bk = first; bk <= last; bk += 1000) {
            char key[40];
            snprintf(key, sizeof key, "b:%lld", bk);
            long in = (long)((bk + 1000 < t0 + n ? bk + 1000 : t0 + n) - (bk > t0 ? bk : t0));
            drain(key, in, b);
            redisReply *r = redisCommand(C, "DEL %s", key);
            if (!r || r->type == REDIS_REPLY_ERROR) die("DEL");
            freeReplyObject(r);
        }
        c2 = cpu();
        printf("floor phase=%s jobs=%ld batch=%ld payload=%ld redis_us_enqueue=%.2f redis_us_promote=%.2f "
               "redis_us_drain=%.2f redis_us_total=%.2f",
               lean ? "inplace_lean" : "inplace", n, b, pb, (c1 - c0) * 1e6 / (double)n, (c1b - c1) * 1e6 / (double)n,
               (c2 - c1b) * 1e6 / (double)n, (c2 - c0) * 1e6 / (double)n);
        profile(n);
        printf("\n");
    }
    free(pay);
    redisFree(C);
    return 0;
}
