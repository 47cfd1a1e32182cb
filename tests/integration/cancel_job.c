/* Test job plugin for cancellation and lookup (test_lookup). Each handler
 * appends "<job id> <attempt> <what>\n" to the file named by JRT_RECORD with
 * one O_APPEND write:
 *   quick   "ran", returns OK
 *   again   "ran", returns RETRY to be run again in an hour
 *   bad     "ran", returns FAIL (permanent) with error "refused by test"
 *   waitcancel  "started", then polls api->cancelled every 10 ms for up to 60 s:
 *           "saw-cancel" and returns RETRY when it turns true (a job that
 *           were not cancelled would be retried), "no-cancel" and OK if not
 *   sleepy  "started", sleeps 60 s ignoring everything, returns RETRY
 *   gated   "started", waits (ignoring api->cancelled) until the file
 *           "$JRT_RECORD.go" exists (at most 30 s), enqueues the follow-up
 *           "<job id>-child" (handler quick, queue "next"), "done", and
 *           returns OK: a handler that ends well after it was cancelled;
 *           with the payload "retry", "done" and RETRY at once instead */
#include <fcntl.h>
#include <stddef.h>
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

static jr_result_t gated(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    note(job, api, "started");
    char go[512], child[256];
    snprintf(go, sizeof go, "%s.go", getenv("JRT_RECORD") ? getenv("JRT_RECORD") : "/nonexistent");
    for (int i = 0; i < 3000 && access(go, F_OK) != 0; i++) nap_ms(10);
    size_t plen = 0;
    const char *p = api->job_payload(job, &plen);
    if (plen == 5 && !memcmp(p, "retry", 5)) { /* ask to run again at once */
        note(job, api, "done");
        api->set_error(job, "gated retry");
        api->retry_after(job, 0);
        return JR_RESULT_RETRY;
    }
    snprintf(child, sizeof child, "%s-child", api->job_id(job));
    jr_followup_t f = {.queue = "next", .handler = "quick", .payload = NULL, .payload_len = 0, .id = child};
    if (api->size < offsetof(jr_host_api_t, enqueue) + sizeof api->enqueue || api->enqueue(job, &f) != 0) {
        api->set_error(job, "could not enqueue the follow-up");
        return JR_RESULT_FAIL;
    }
    note(job, api, "done");
    return JR_RESULT_OK;
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "quick", quick, NULL) || api->register_handler(ctx, "again", again, NULL) ||
           api->register_handler(ctx, "bad", bad, NULL) ||
           api->register_handler(ctx, "waitcancel", waitcancel, NULL) ||
           api->register_handler(ctx, "sleepy", sleepy, NULL) || api->register_handler(ctx, "gated", gated, NULL);
}

static const jr_plugin_t desc = {JR_PLUGIN_HEADER, .name = "cancel", .version = "1", .init = init};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
