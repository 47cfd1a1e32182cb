/* Out of memory in the worker process is an abnormal end: the worker stops
 * with exit status 1 and says why (a supervisor with Restart=on-failure
 * starts it again), and the job it held stays pending for another worker.
 * The allocation that fails is picked by its size with an LD_PRELOAD shim
 * (failmalloc.c) that fails one malloc or realloc of that size. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "followup.h"
#include "harness.h"

static jrt_redis_t R;

static void setup(void) { jrt_redis_start(&R, NULL); }
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(oom, .init = setup, .fini = teardown, .timeout = 60);

enum { PAYLOAD = 100001 }; /* one argument: under 128 KiB */

/* Enqueue a job of `handler` with `payload` (id: generated when NULL). */
static void enqueue(const char *id, const char *handler, const char *payload) {
    char out[4096], err[4096];
    const char *with_id[] = {"enqueue", "--redis", R.url, "--id", id, handler, payload, NULL};
    const char *without[] = {"enqueue", "--redis", R.url, handler, payload, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, id ? with_id : without), 0, "%s", err);
}

/* Enqueue an echo job with a payload of PAYLOAD bytes (id: generated when
 * NULL). */
static void enqueue_big(const char *id) {
    char *payload = malloc(PAYLOAD + 1);
    cr_assert(payload);
    memset(payload, 'p', PAYLOAD);
    payload[PAYLOAD] = '\0';
    enqueue(id, "echo", payload);
    free(payload);
}

/* Run a worker with args under the shim (`kind` "MALLOC" or "REALLOC": the
 * nth allocation of `size` bytes fails) until it ends by itself (up to
 * 10 s; then SIGTERM). Checks that it ended with status 1, saying "out of
 * memory", and that the job is still there for another worker (ready,
 * pending, or back in the delayed set for a retry). */
static void expect_oom_exit(const char *const *args, const char *kind, long size, int nth) {
    char var[64], val[32], nthval[16], log[256];
    snprintf(log, sizeof log, "%s/worker.log", R.dir);
    snprintf(var, sizeof var, "JRT_FAIL_%s_SIZE", kind);
    snprintf(val, sizeof val, "%ld", size);
    snprintf(nthval, sizeof nthval, "%d", nth);
    setenv("LD_PRELOAD", JRT_FAILMALLOC, 1);
    setenv(var, val, 1);
    snprintf(var, sizeof var, "JRT_FAIL_%s_NTH", kind);
    setenv(var, nthval, 1);
    pid_t w = jrt_spawn(log, args);
    unsetenv("LD_PRELOAD");
    unsetenv(var);
    snprintf(var, sizeof var, "JRT_FAIL_%s_SIZE", kind);
    unsetenv(var);
    int st = -2;
    for (int i = 0; i < 1000; i++) { /* up to 10 s */
        int raw;
        if (waitpid(w, &raw, WNOHANG) == w) {
            st = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
            break;
        }
        jrt_sleep_ms(10);
    }
    if (st == -2) st = jrt_stop(w, SIGTERM, 10000);
    char *text = jrt_slurp(log);
    cr_expect_eq(st, 1, "the worker ended with status %d after running out of memory:\n%s", st, text);
    cr_expect(strstr(text, "out of memory"), "no message says why:\n%s", text);
    free(text);
    jr_qstats_t q = jrt_stats(&R, "default");
    cr_expect_eq(q.ready + q.pending + q.delayed, 1,
                 "the job was lost or ran (ready %lld, pending %lld, delayed %lld, dead %lld)", q.ready, q.pending,
                 q.delayed, q.dead);
}

/* The worker's own copy of the job's payload (the first malloc of that
 * size is hiredis's reply). */
Test(oom, out_of_memory_ends_the_worker_with_status_1_and_a_message) {
    enqueue_big(NULL);
    const char *wargs[] = {"worker", "--redis", R.url, "--plugin", JRT_PLUGIN_DIR, NULL};
    expect_oom_exit(wargs, "MALLOC", PAYLOAD + 1, 2);
}

/* The job handed to the executor (inline mode copies the task's strings:
 * id, queue, handler and payload, each with a NUL). Before, the failed
 * hand-over was taken for "no runner free" and tried again: the worker went
 * on and exited 0 at SIGTERM. */
Test(oom, out_of_memory_handing_a_job_to_the_executor_ends_the_worker_with_status_1) {
    static const char id[] = "oom-1", queue[] = "default", handler[] = "echo";
    enqueue_big(id);
    char cfg[512];
    jrt_config(&R, "worker:\n  isolation: inline\n", cfg, sizeof cfg);
    const char *wargs[] = {"worker", "-c", cfg, "--plugin", JRT_PLUGIN_DIR, NULL};
    expect_oom_exit(wargs, "REALLOC", (long)(strlen(id) + strlen(queue) + strlen(handler) + PAYLOAD + 4), 1);
}

/* The follow-ups a runner sends with a job's result, as the worker takes
 * them from the runner's socket (one malloc of the frame's size, the encoded
 * list's and 4,
 * unlike anything else the worker allocates: a payload of an odd size).
 * Before, the job was retried for the want of memory ("out of memory for
 * its follow-ups") and the worker went on (exit 0 at SIGTERM). */
Test(oom, out_of_memory_for_a_jobs_follow_ups_ends_the_worker_with_status_1) {
    enum { SIZE = 70001 };
    char spec[32];
    snprintf(spec, sizeof spec, "size=%d", SIZE);
    enqueue("oom-f", "follow", spec);
    /* The list the handler sends: one follow-up, as follow_job writes it. */
    char *big = malloc(SIZE), why[256];
    cr_assert(big);
    memset(big, 'z', SIZE);
    jr_fu_list_t l = {.max_payload = 1 << 20};
    jr_followup_t f = {.queue = "next", .handler = "record", .payload = big, .payload_len = SIZE};
    cr_assert_eq(jr_fu_append(&l, &f, "default", why, sizeof why), 0, "%s", why);
    long encoded = (long)l.len;
    jr_fu_reset(&l);
    free(big);
    const char *wargs[] = {"worker", "--redis", R.url, "--plugin", JRT_FOLLOW_PLUGIN, NULL};
    /* the frame: the result's length (4 bytes; no result), then the list (exec.h) */
    expect_oom_exit(wargs, "MALLOC", encoded + 4, 1);
    jr_qstats_t next = jrt_stats(&R, "next");
    cr_expect_eq(next.ready, 0, "the follow-up was written (%lld ready in queue next)", next.ready);
}
