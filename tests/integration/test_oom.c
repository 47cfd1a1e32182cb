/* Out of memory in the worker process is an abnormal end: the worker stops
 * with exit status 1 and says why (a supervisor with Restart=on-failure
 * starts it again), and the job it held stays pending for another worker.
 * The allocation that fails is the worker's own copy of a job's payload
 * (an LD_PRELOAD shim fails one malloc of that size). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

static jrt_redis_t R;

static void setup(void) { jrt_redis_start(&R, NULL); }
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(oom, .init = setup, .fini = teardown, .timeout = 60);

Test(oom, out_of_memory_ends_the_worker_with_status_1_and_a_message) {
    enum { PAYLOAD = 100001 }; /* one argument: under 128 KiB */
    char *payload = malloc(PAYLOAD + 1), size[32], log[256], out[4096], err[4096];
    cr_assert(payload);
    memset(payload, 'p', PAYLOAD);
    payload[PAYLOAD] = '\0';
    const char *eargs[] = {"enqueue", "--redis", R.url, "echo", payload, NULL};
    cr_assert_eq(jrt_run(out, sizeof out, err, sizeof err, eargs), 0, "%s", err);
    free(payload);

    snprintf(size, sizeof size, "%d", PAYLOAD + 1);
    snprintf(log, sizeof log, "%s/worker.log", R.dir);
    setenv("LD_PRELOAD", JRT_FAILMALLOC, 1);
    setenv("JRT_FAIL_MALLOC_SIZE", size, 1);
    setenv("JRT_FAIL_MALLOC_NTH", "2", 1); /* the first is hiredis's reply */
    const char *wargs[] = {"worker", "--redis", R.url, "--plugin", JRT_PLUGIN_DIR, NULL};
    pid_t w = jrt_spawn(log, wargs);
    unsetenv("LD_PRELOAD");
    unsetenv("JRT_FAIL_MALLOC_SIZE");
    unsetenv("JRT_FAIL_MALLOC_NTH");
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
    cr_expect_eq(q.ready + q.pending, 1, "the job was lost (ready %lld, pending %lld, dead %lld)", q.ready, q.pending,
                 q.dead);
}
