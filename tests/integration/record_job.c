/* Test job plugin. Every handler first appends one line per run to the file
 * named by the environment variable JRT_RECORD:
 *   <job id> <attempt> <start Unix us> <payload>\n
 * with a single O_APPEND write, so lines from concurrent workers never mix.
 * Then:
 *   record  returns OK
 *   nap     sleeps <payload> ms, returns OK
 *   crash   dies of SIGSEGV
 *   hang    sleeps forever, ignoring should_stop
 *   fail    returns FAIL (permanent) with error "refused by test"
 * except noop, which records nothing and returns OK at once (a job shorter
 * than any fetch round trip). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jobrunner/plugin.h>

static jr_result_t record(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long us = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    const char *path = getenv("JRT_RECORD");
    if (!path) {
        api->set_error(job, "JRT_RECORD is not set");
        return JR_RESULT_FAIL;
    }
    size_t len;
    const char *payload = api->job_payload(job, &len);
    char line[512];
    int n = snprintf(line, sizeof line, "%s %u %lld %.*s\n", api->job_id(job), api->job_attempt(job), us,
                     (int)(len > 200 ? 200 : len), payload);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0 || write(fd, line, (size_t)n) != n) {
        if (fd >= 0) close(fd);
        api->set_error(job, "cannot write the record file");
        return JR_RESULT_RETRY;
    }
    close(fd);
    return JR_RESULT_OK;
}

static jr_result_t nap(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    jr_result_t r = record(job, api, udata);
    size_t len;
    long ms = atol((const char *)api->job_payload(job, &len));
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
    return r;
}

static jr_result_t crash(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    record(job, api, udata);
    raise(SIGSEGV);
    return JR_RESULT_OK;
}

static jr_result_t hang(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    record(job, api, udata);
    for (;;) pause();
    return JR_RESULT_OK;
}

static jr_result_t fail(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    record(job, api, udata);
    api->set_error(job, "refused by test");
    return JR_RESULT_FAIL;
}

static jr_result_t noop(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)job, (void)api, (void)udata;
    return JR_RESULT_OK;
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "record", record, NULL) ||
           api->register_handler(ctx, "nap", nap, NULL) ||
           api->register_handler(ctx, "crash", crash, NULL) ||
           api->register_handler(ctx, "hang", hang, NULL) ||
           api->register_handler(ctx, "fail", fail, NULL) ||
           api->register_handler(ctx, "noop", noop, NULL);
}

static const jr_plugin_t desc = {JR_PLUGIN_HEADER, .name = "record", .version = "1", .init = init};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
