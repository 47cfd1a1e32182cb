/* No silent typos: a queue nothing ever used is named as such, a job looked
 * for in the wrong queue says where it was not, --all-queues finds it by
 * id, and `queue remove` deletes an empty queue only. Real processes
 * against a real redis-server. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static jrt_redis_t R;
static char out[16384], err[16384];

static void setup(void) {
    jrt_redis_start(&R, NULL);
    setenv("JOBRUNNER_REDIS_URL", R.url, 1);
}
static void teardown(void) { jrt_redis_stop(&R); }

TestSuite(typos, .init = setup, .fini = teardown, .timeout = 60);

#define RUN(...) jrt_run(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

Test(typos, job_show_cancel_and_jobs_name_a_queue_never_used_and_exit_1) {
    cr_assert_eq(RUN("enqueue", "-q", "orders", "--in", "1h", "--id", "close-1042", "echo", "x"), 0, "%s", err);
    cr_assert_eq(RUN("enqueue", "-q", "mail", "echo", "y"), 0, "%s", err);

    cr_expect_eq(RUN("job", "show", "-q", "ordres", "close-1042"), 1);
    cr_expect(strstr(err, "queue \"ordres\" is not known"), "job show: %s", err);
    cr_expect_eq(RUN("cancel", "-q", "ordres", "close-1042"), 1);
    cr_expect(strstr(err, "queue \"ordres\" is not known"), "cancel: %s", err);
    cr_expect_eq(RUN("jobs", "-q", "ordres", "--state", "delayed"), 1);
    cr_expect(strstr(err, "queue \"ordres\" is not known"), "jobs: %s", err);
    cr_expect_eq(RUN("jobs", "-q", "orders", "--state", "delayed"), 0, "%s", err);
    cr_expect(strstr(out, "close-1042"), "%s", out);

    /* the wrong queue, one that is used: where it looked, and how to look everywhere */
    cr_expect_eq(RUN("job", "show", "-q", "mail", "close-1042"), 1);
    cr_expect(strstr(err, "job close-1042 is not in queue mail") && strstr(err, "--all-queues"), "%s", err);
    cr_expect_eq(RUN("job", "show", "--all-queues", "close-1042"), 0, "%s", err);
    cr_expect(strstr(out, "queue: orders") && strstr(out, "state: delayed"), "%s", out);
    cr_expect_eq(RUN("job", "show", "--all-queues", "no-such-job"), 1);
    cr_expect(strstr(err, "job no-such-job is in none of the 2 queues"), "%s", err);
    /* and the job is still there: nothing was cancelled in the typo */
    cr_expect_eq(RUN("job", "show", "-q", "orders", "close-1042"), 0, "%s", err);
}
