/* Test job plugin. Handler "record" appends one line per run to the file
 * named by the environment variable JRT_RECORD:
 *   <job id> <attempt> <start Unix us> <payload>\n
 * with a single O_APPEND write, so lines from concurrent workers never mix. */
#include <fcntl.h>
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

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "record", record, NULL);
}

static const jr_plugin_t desc = {JR_PLUGIN_HEADER, .name = "record", .version = "1", .init = init};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
