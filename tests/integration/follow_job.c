/* Test job plugin for follow-up jobs (api->enqueue, ABI 1.2).
 *
 * Handler `follow`: its payload is a list of settings "k=v,k=v,...":
 *   n=K      enqueue K follow-ups (default 1)
 *   q=NAME   their queue (default "next"; "q=" = the job's own queue)
 *   h=NAME   their handler (default "record"; "h=" = an empty name)
 *   delay=MS, at=MS, id=ID (with n > 1: ID-1, ID-2, ...)
 *   size=N   each follow-up's payload is N bytes ('z'); otherwise
 *            "<job id>#<i>"
 *   result=ok | retry1 (RETRY on attempt 1, OK after) | fail (FAIL) |
 *            crash (SIGSEGV)
 *   block=1  after enqueueing, wait while the file $JRT_BLOCK exists
 * Every run first appends "<job id> <attempt>\n" to $JRT_RECORD, and after
 * the enqueue calls "<job id> <attempt> enqueued <0 or the first non-zero
 * return>\n".
 * Handler `record`: appends "<job id> record <payload>\n" (runs follow-ups
 * sent to the job's own queue). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jobrunner/plugin.h>

static void append(const char *line) {
    const char *path = getenv("JRT_RECORD");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0) return;
    if (write(fd, line, strlen(line)) < 0) {
    }
    close(fd);
}

/* The value of setting k in spec ("" if given empty), or NULL if absent;
 * copied into out. */
static const char *setting(const char *spec, const char *k, char *out, size_t len) {
    size_t kl = strlen(k);
    for (const char *p = spec; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > kl && !strncmp(p, k, kl) && p[kl] == '=') {
            size_t vl = n - kl - 1 < len - 1 ? n - kl - 1 : len - 1;
            memcpy(out, p + kl + 1, vl);
            out[vl] = '\0';
            return out;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

static jr_result_t follow(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    char line[512], v[200], queue[200], handler[200], idbase[200], result[32];
    size_t plen;
    const char *spec = api->job_payload(job, &plen);
    snprintf(line, sizeof line, "%s %u\n", api->job_id(job), api->job_attempt(job));
    append(line);
    if (api->size < offsetof(jr_host_api_t, enqueue) + sizeof api->enqueue) {
        api->set_error(job, "host too old: no api->enqueue");
        return JR_RESULT_FAIL;
    }
    int n = setting(spec, "n", v, sizeof v) ? atoi(v) : 1;
    const char *q = setting(spec, "q", queue, sizeof queue);
    const char *h = setting(spec, "h", handler, sizeof handler);
    const char *id = setting(spec, "id", idbase, sizeof idbase);
    long long delay = setting(spec, "delay", v, sizeof v) ? atoll(v) : 0;
    long long at = setting(spec, "at", v, sizeof v) ? atoll(v) : 0;
    long size = setting(spec, "size", v, sizeof v) ? atol(v) : -1;
    char *big = size >= 0 ? malloc((size_t)size + 1) : NULL;
    if (big) memset(big, 'z', (size_t)size);
    int first_rc = 0;
    for (int i = 1; i <= n; i++) {
        char payload[256], fid[256];
        snprintf(payload, sizeof payload, "%s#%d", api->job_id(job), i);
        if (id) snprintf(fid, sizeof fid, n > 1 ? "%s-%d" : "%s", id, i);
        jr_followup_t f = {.queue = q ? q : "next", .handler = h ? h : "record",
                           .payload = big ? big : payload, .payload_len = big ? (size_t)size : strlen(payload),
                           .delay_ms = delay, .at_ms = at, .id = id ? fid : NULL};
        int rc = api->enqueue(job, &f);
        if (rc && !first_rc) first_rc = rc;
    }
    free(big);
    snprintf(line, sizeof line, "%s %u enqueued %d\n", api->job_id(job), api->job_attempt(job), first_rc);
    append(line);
    const char *block = getenv("JRT_BLOCK");
    if (setting(spec, "block", v, sizeof v) && block)
        while (access(block, F_OK) == 0) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
    if (!setting(spec, "result", result, sizeof result) || !strcmp(result, "ok")) return JR_RESULT_OK;
    if (!strcmp(result, "retry1") && api->job_attempt(job) == 1) {
        api->retry_after(job, 0);
        api->set_error(job, "retry asked by test");
        return JR_RESULT_RETRY;
    }
    if (!strcmp(result, "crash")) raise(SIGSEGV);
    if (!strcmp(result, "fail")) {
        api->set_error(job, "failed by test");
        return JR_RESULT_FAIL;
    }
    return JR_RESULT_OK;
}

static jr_result_t record(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    size_t len;
    const char *p = api->job_payload(job, &len);
    char line[512];
    snprintf(line, sizeof line, "%s record %.*s\n", api->job_id(job), (int)(len > 200 ? 200 : len), p);
    append(line);
    return JR_RESULT_OK;
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "follow", follow, NULL) || api->register_handler(ctx, "record", record, NULL);
}

static const jr_plugin_t plugin = {JR_PLUGIN_HEADER, .name = "follow", .version = "1.0", .init = init};
JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &plugin; }
