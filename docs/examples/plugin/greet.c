/* An example job plugin built outside the jobrunner tree and deployed in a
 * container image (see Dockerfile here and README, "Deployment"). Its
 * handler "greet" logs "<greeting>, <payload>!" and succeeds. */
#include <jobrunner/plugin.h>

static jr_result_t greet(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    const char *greeting = udata;
    size_t n;
    const char *who = api->job_payload(job, &n);
    api->log(job, JR_LOG_INFO, "%s, %.*s!", greeting, (int)n, who);
    return JR_RESULT_OK;
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "greet", greet, "Hello");
}

static const jr_plugin_t plugin = {JR_PLUGIN_HEADER, .name = "greet", .version = "1.0", .init = init};
JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &plugin; }
