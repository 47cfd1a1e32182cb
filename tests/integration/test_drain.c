/* The drain path of issue 10: a worker sends the results of finished jobs
 * and its next read in one write on its read connection. Here that
 * connection (and the other) is killed again and again while jobs flow,
 * so some kills fall between the results and the read: no job may be lost
 * (acknowledged without having run to its end) and every job must end
 * acknowledged. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "jr.h"
#include "redis.h"
#include "redis_produce.h"
#include "redis_admin.h"

JRT_RECORDED_SUITE(drain, .timeout = 240);

Test(drain, connections_killed_between_results_and_read_lose_no_job) {
    /* nap 1 ms: the jobs end in their runners while the kills land */
    jrt_config(&R, "worker:\n  lease: 1s\n  concurrency: 2\njobs:\n  max_deliveries: 100\n", cfgpath, sizeof cfgpath);
    enum { N = 3000, W = 2 };
    static char ids[N][JR_ID_MAX];
    jrt_enqueue(&R, jrt_job("default", "nap", "1"), N, ids);
    pid_t w[W];
    for (int i = 0; i < W; i++) w[i] = jrt_worker(&R, cfgpath, NULL, jrt_path(&R, i ? "w1.log" : "w0.log"), NULL);
    redisContext *c = jrt_connect(&R);
    int kills = 0;
    for (int round = 0; round < 200; round++) {
        jrt_sleep_ms(20 + rand() % 40);
        jr_qstats_t s = jrt_stats(&R, "default");
        if (s.ready == 0 && s.pending == 0) break;
        freeReplyObject(redisCommand(c, "CLIENT KILL TYPE normal SKIPME yes"));
        kills++;
    }
    redisFree(c);
    jr_qstats_t s = jrt_wait_settled(&R, "default", 0, 90000); /* entries lost in flight wait a lease (1 s) */
    cr_expect(s.ready == 0 && s.pending == 0 && s.delayed == 0 && s.dead == 0,
              "left: ready=%lld pending=%lld delayed=%lld dead=%lld", s.ready, s.pending, s.delayed, s.dead);
    /* Every job ran (a job acknowledged before it ran would be missing). */
    char *all;
    size_t n, distinct;
    char **lines = jrt_record_ids(record, N * 4, &all, &n, &distinct);
    fprintf(stderr, "drain kill test: jobs=%d kills=%d runs=%zu distinct=%zu\n", N, kills, n, distinct);
    cr_expect_eq(distinct, N, "%zu of %d jobs ran", distinct, N);
    for (int i = 0; i < N; i++) {
        char *key = ids[i];
        cr_expect(bsearch(&key, lines, n, sizeof *lines, jrt_cmp_str), "job %s never ran", ids[i]);
    }
    cr_expect_gt(kills, 5, "only %d kills", kills);
    free(lines);
    free(all);
    for (int i = 0; i < W; i++) cr_expect_eq(jrt_stop(w[i], SIGTERM, 15000), 0);
}
