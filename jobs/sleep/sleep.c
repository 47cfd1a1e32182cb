/* sleep: waits for the number of milliseconds in its payload (empty = 0),
 * then succeeds. It wakes at least every 50 ms to check whether the worker
 * wants it to stop, and if so returns RETRY ("interrupted"). A payload that
 * is not a number (digits, optionally surrounded by white space, at most
 * 10^12) is a permanent failure. */
#define _POSIX_C_SOURCE 200809L
#include <jobrunner/plugin.h>
#include <stdint.h>
#include <time.h>

#define SLICE_MS 50
#define MAX_MS 1000000000000LL

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Parse the payload into *ms. Returns 0, or -1 if it is not a number. */
static int parse_ms(const char *p, size_t len, int64_t *ms) {
    size_t i = 0, end = len;
    while (i < end && is_space(p[i])) i++;
    while (end > i && is_space(p[end - 1])) end--;
    int64_t v = 0;
    for (size_t k = i; k < end; k++) {
        if (p[k] < '0' || p[k] > '9') return -1;
        v = v * 10 + (p[k] - '0');
        if (v > MAX_MS) return -1;
    }
    *ms = v;
    return 0;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static jr_result_t sleep_handler(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    size_t len;
    const char *p = api->job_payload(job, &len);
    int64_t ms;
    if (parse_ms(p, len, &ms) != 0) {
        api->set_error(job, "payload must be a number of milliseconds");
        return JR_RESULT_FAIL;
    }
    int64_t end = mono_ms() + ms;
    for (;;) {
        int64_t left = end - mono_ms();
        if (left <= 0) return JR_RESULT_OK;
        if (api->should_stop(job)) {
            api->set_error(job, "interrupted");
            return JR_RESULT_RETRY;
        }
        if (left > SLICE_MS) left = SLICE_MS;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)left * 1000000L};
        nanosleep(&ts, NULL); /* woken early by a signal: the loop re-checks */
    }
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "sleep", sleep_handler, NULL) != 0;
}

static const jr_plugin_t desc = {
    JR_PLUGIN_HEADER, .name = "sleep", .version = "1.0", .init = init, .fini = NULL};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
