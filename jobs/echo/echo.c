/* echo: logs its payload and succeeds.
 *
 * The payload may be binary: printable ASCII is shown as is, every other
 * byte (and '\') as \xNN, and only the first 200 bytes are shown. */
#include <jobrunner/plugin.h>
#include <stdio.h>

#define ECHO_MAX 200

static jr_result_t echo(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    size_t len;
    const unsigned char *p = api->job_payload(job, &len);
    char text[ECHO_MAX * 4 + 1];
    size_t n = 0;
    for (size_t i = 0; i < len && i < ECHO_MAX; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
            text[n++] = (char)p[i];
        else
            n += (size_t)snprintf(text + n, sizeof text - n, "\\x%02x", p[i]);
    }
    text[n] = '\0';
    if (len > ECHO_MAX)
        api->log(job, JR_LOG_INFO, "echo: %s... (%zu bytes)", text, len);
    else
        api->log(job, JR_LOG_INFO, "echo: %s", text);
    return JR_RESULT_OK;
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "echo", echo, NULL) != 0;
}

static const jr_plugin_t desc = {
    JR_PLUGIN_HEADER, .name = "echo", .version = "1.0", .init = init, .fini = NULL};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
