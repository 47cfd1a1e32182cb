/* order_autoclose: the demo's "close this order if it is still unpaid at its
 * deadline" job.
 *
 * An order's state is the suffix of a single file: <ORDERDIR>/<ORDERID>.placed,
 * .paid or .closed. Paying renames .placed to .paid; this job renames .placed
 * to .closed. rename() is atomic and the source can be renamed only once, so
 * whichever of the two comes first wins and the other gets ENOENT: an order
 * can never end up both paid and closed, with no lock. Running the job twice
 * (after a crash) is harmless: the second run finds .closed.
 *
 * Payload: the path prefix <ORDERDIR>/<ORDERID>. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <jobrunner/plugin.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Room for the prefix plus the longest suffix and its NUL. */
#define PREFIX_MAX (PATH_MAX - (int)sizeof ".closed")

static jr_result_t autoclose(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    size_t len;
    const char *prefix = api->job_payload(job, &len);
    if (len == 0 || strlen(prefix) != len) {
        api->set_error(job, "payload must be an order path prefix <ORDERDIR>/<ORDERID>");
        return JR_RESULT_FAIL;
    }
    if (len > PREFIX_MAX) {
        api->set_error(job, "payload too long for an order path prefix");
        return JR_RESULT_FAIL;
    }
    const char *slash = strrchr(prefix, '/');
    const char *id = slash ? slash + 1 : prefix;

    char placed[PATH_MAX], paid[PATH_MAX], closed[PATH_MAX];
    snprintf(placed, sizeof placed, "%s.placed", prefix);
    snprintf(paid, sizeof paid, "%s.paid", prefix);
    snprintf(closed, sizeof closed, "%s.closed", prefix);

    if (rename(placed, closed) == 0) {
        api->log(job, JR_LOG_INFO, "order %s unpaid after its deadline: closed", id);
        return JR_RESULT_OK;
    }
    int e = errno;
    if (e == ENOENT && access(paid, F_OK) == 0) {
        api->log(job, JR_LOG_INFO, "order %s was paid: nothing to do", id);
        return JR_RESULT_OK;
    }
    if (e == ENOENT && access(closed, F_OK) == 0) {
        api->log(job, JR_LOG_INFO, "order %s already closed: nothing to do", id);
        return JR_RESULT_OK;
    }
    char msg[PATH_MAX + 128];
    snprintf(msg, sizeof msg, "cannot close order %s: %s", prefix, strerror(e));
    api->set_error(job, msg);
    return JR_RESULT_RETRY;
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "order_autoclose", autoclose, NULL) != 0;
}

static const jr_plugin_t desc = {JR_PLUGIN_HEADER, .name = "order_autoclose", .version = "1.0",
                                 .init = init, .fini = NULL};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
