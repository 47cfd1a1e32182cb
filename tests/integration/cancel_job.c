/* Test job plugin for cancellation and lookup (test_lookup). Each handler
 * appends "<job id> <attempt> <what>\n" to the file named by JRT_RECORD with
 * one O_APPEND write:
 *   quick   "ran", returns OK
 *   again   "ran", returns RETRY to be run again in an hour
 *   bad     "ran", returns FAIL (permanent) with error "refused by test"
 *   waitcancel  "started", then polls api->cancelled every 10 ms for up to 60 s:
 *           "saw-cancel" and returns RETRY when it turns true (a job that
 *           were not cancelled would be retried), "no-cancel" and OK if not
 *   sleepy  "started", sleeps 60 s ignoring everything, returns RETRY */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jobrunner/plugin.h>

static void note(jr_job_t *job, const jr_host_api_t *api, const char *what) {
    const char *path = getenv("JRT_RECORD");
    char line[256];
    int n = snprintf(line, sizeof line, "%s %u %s\n", api->job_id(job), api->job_attempt(job), what);
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) != n) {
        }
        close(fd);
    }
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static jr_result_t quick(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    note(job, api, "ran");
    return JR_RESULT_OK;
}

static jr_result_t again(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    note(job, api, "ran");
    api->retry_after(job, 3600000);
    return JR_RESULT_RETRY;
}

static jr_result_t bad(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    note(job, api, "ran");
    api->set_error(job, "refused by test");
    return JR_RESULT_FAIL;
}

static jr_result_t waitcancel(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    note(job, api, "started");
    if (api->size < sizeof(jr_host_api_t)) return JR_RESULT_FAIL; /* a host without cancelled */
    for (int i = 0; i < 6000; i++) {
        if (api->cancelled(job)) {
            note(job, api, "saw-cancel");
            api->set_error(job, "stopped: cancelled");
            return JR_RESULT_RETRY;
        }
        nap_ms(10);
    }
    note(job, api, "no-cancel");
    return JR_RESULT_OK;
}

static jr_result_t sleepy(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    note(job, api, "started");
    nap_ms(60000);
    return JR_RESULT_RETRY;
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "quick", quick, NULL) || api->register_handler(ctx, "again", again, NULL) ||
           api->register_handler(ctx, "bad", bad, NULL) ||
           api->register_handler(ctx, "waitcancel", waitcancel, NULL) ||
           api->register_handler(ctx, "sleepy", sleepy, NULL);
}

static const jr_plugin_t desc = {JR_PLUGIN_HEADER, .name = "cancel", .version = "1", .init = init};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
