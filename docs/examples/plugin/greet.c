/* An example job plugin built outside the jobrunner tree and deployed in a
 * container image (see Dockerfile here and README, "Deployment"). Its
 * handler "greet" logs "<greeting>, <payload>!" and succeeds; the greeting
 * is its setting "greeting" (plugin_settings.greet.greeting in the YAML, or
 * JOBRUNNER_PLUGIN_GREET_GREETING), "Hello" without one. Version 2
 * (built with -DGREET_V2, as the deployment smoke test does to upgrade the
 * workers while jobs flow) adds the handler "farewell". */
#include <jobrunner/plugin.h>
#include <stddef.h>

static jr_result_t greet(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    const char *greeting = udata;
    size_t n;
    const char *who = api->job_payload(job, &n);
    api->log(job, JR_LOG_INFO, "%s, %.*s!", greeting, (int)n, who);
    return JR_RESULT_OK;
}

static int init(void *ctx, const jr_host_api_t *api) {
    const char *greeting = NULL;
    if (api->size >= offsetof(jr_host_api_t, setting) + sizeof api->setting) /* a host of ABI 1.2 or later */
        greeting = api->setting(ctx, "greeting");
    int rc = api->register_handler(ctx, "greet", greet, (void *)(greeting ? greeting : "Hello"));
#ifdef GREET_V2
    if (rc == 0) rc = api->register_handler(ctx, "farewell", greet, "Goodbye");
#endif
    return rc;
}

#ifdef GREET_V2
#define GREET_VERSION "2.0"
#else
#define GREET_VERSION "1.0"
#endif
static const jr_plugin_t plugin = {JR_PLUGIN_HEADER, .name = "greet", .version = GREET_VERSION, .init = init};
JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &plugin; }
