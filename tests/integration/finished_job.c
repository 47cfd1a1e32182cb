/* Test job plugin for finished jobs, results and waits (test_finished).
 *   answer  sets the payload as its result (api->set_result) and returns OK;
 *           the payload "big" first asks for a result of JR_RESULT_MAX + 1
 *           bytes and then sets "refused=<what that call returned>"
 *   bin     sets the two bytes ff fe as its result, returns OK
 *   boom    sets the result "partial" and the error "boom", returns FAIL
 *   gate    waits (at most 30 s) until the file "$JRT_RECORD.go" exists or
 *           the job is cancelled, sets the result "gated", returns OK */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jobrunner/plugin.h>

static jr_result_t answer(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    size_t len;
    const char *p = api->job_payload(job, &len);
    if (len == 3 && !memcmp(p, "big", 3)) {
        static char big[JR_RESULT_MAX + 1];
        memset(big, 'x', sizeof big);
        char said[32];
        int n = snprintf(said, sizeof said, "refused=%d", api->set_result(job, big, sizeof big));
        api->set_result(job, said, (size_t)n);
        return JR_RESULT_OK;
    }
    return api->set_result(job, p, len) == 0 ? JR_RESULT_OK : JR_RESULT_FAIL;
}

static jr_result_t bin(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    api->set_result(job, "\xff\xfe", 2);
    return JR_RESULT_OK;
}

static jr_result_t boom(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    api->set_result(job, "partial", 7);
    api->set_error(job, "boom");
    return JR_RESULT_FAIL;
}

static jr_result_t gate(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    const char *rec = getenv("JRT_RECORD");
    char go[512];
    snprintf(go, sizeof go, "%s.go", rec ? rec : "/nonexistent");
    for (int i = 0; i < 3000 && access(go, F_OK) != 0 && !api->cancelled(job); i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    api->set_result(job, "gated", 5);
    return JR_RESULT_OK;
}

static int init(void *ctx, const jr_host_api_t *api) {
    if (api->size < offsetof(jr_host_api_t, set_result) + sizeof api->set_result) return 1;
    return api->register_handler(ctx, "answer", answer, NULL) || api->register_handler(ctx, "bin", bin, NULL) ||
           api->register_handler(ctx, "boom", boom, NULL) || api->register_handler(ctx, "gate", gate, NULL);
}

static const jr_plugin_t desc = {JR_PLUGIN_HEADER, .name = "finished", .version = "1", .init = init};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
