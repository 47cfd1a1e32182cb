/* Enqueue rate of libjobrunner (jr_client_enqueue_many): N jobs spread
 * over Q queues in random order, in batches of B, against the Redis at URL.
 *   client_enqueue URL [N [Q [B [W]]]]  (defaults 100000 40 1000 0)
 * W > 0: the client's wait_replicas (each call waits for W replicas). 
 * Prints jobs per second. Writes into queues bq00..bq<Q-1>: use a scratch
 * Redis. See bench/README.md. */
#include <jobrunner/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: client_enqueue URL [N [Q [B]]]\n"), 2;
    long n = argc > 2 ? atol(argv[2]) : 100000, q = argc > 3 ? atol(argv[3]) : 40, b = argc > 4 ? atol(argv[4]) : 1000;
    int w = argc > 5 ? atoi(argv[5]) : 0;
    if (n < 1 || q < 1 || q > 1000 || b < 1 || w < 0) return fprintf(stderr, "bad N, Q, B or W\n"), 2;
    jr_client_options_t o = {.url = argv[1], .connect_timeout_ms = 5000, .command_timeout_ms = 30000,
                             .wait_replicas = w, .wait_timeout_ms = 5000};
    jr_client_t *c = jr_client_open(&o);
    if (!c || jr_client_err(c)) return fprintf(stderr, "%s\n", c ? jr_client_errstr(c) : "out of memory"), 1;
    char (*names)[8] = malloc((size_t)q * sizeof *names);
    jr_client_job_t *jobs = calloc((size_t)n, sizeof *jobs);
    jr_client_result_t *res = malloc((size_t)b * sizeof *res);
    if (!names || !jobs || !res) return fprintf(stderr, "out of memory\n"), 1;
    for (long i = 0; i < q; i++) snprintf(names[i], sizeof names[i], "bq%02ld", i);
    srand(1);
    for (long i = 0; i < n; i++)
        jobs[i] = (jr_client_job_t){.queue = names[rand() % q], .handler = "echo", .payload = "0123456789abcdef",
                                    .payload_len = 16};
    double t0 = now_s();
    for (long at = 0; at < n; at += b) {
        size_t k = (size_t)(n - at < b ? n - at : b);
        if (jr_client_enqueue_many(c, jobs + at, k, res)) return fprintf(stderr, "%s\n", jr_client_errstr(c)), 1;
    }
    double dt = now_s() - t0;
    printf("%ld jobs over %ld queues in batches of %ld: %.3f s, %.0f jobs/s\n", n, q, b, dt, (double)n / dt);
    jr_client_free(c);
    free(names), free(jobs), free(res);
    return 0;
}
