/* Plugin loading and the handler registry (internal side of the ABI in
 * include/jobrunner/plugin.h). */
#ifndef JR_PLUGIN_INTERNAL_H
#define JR_PLUGIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "jobrunner/plugin.h"
#include "followup.h"

/* The job a handler sees (opaque to plugins). Strings are NUL-terminated and
 * owned by the caller of jr_handler_run. */
struct jr_job {
    const char *id;
    const char *queue;
    const char *handler;
    const char *payload; /* payload_len bytes plus a NUL */
    size_t payload_len;
    uint32_t attempt;
    int64_t deadline_ms;           /* Unix ms, 0 = none: what api->job_deadline_ms tells */
    int64_t deadline_mono_us;      /* the same on the monotonic clock (jr_mono_us), 0 = none: what
                                      api->should_stop keeps (a step of the host's clock moves neither way) */
    const volatile int *stop_flag; /* may be NULL */
    /* Cancellation (api->cancelled): *cancel_flag set by the worker (may be
     * NULL); probe, if set, is asked instead at most every 500 ms (inline
     * mode, where the worker cannot set a flag while the handler runs). */
    const volatile int *cancel_flag;
    int (*probe)(void *ctx, uint32_t tag);
    void *probe_ctx;
    uint32_t tag;
    int probed;              /* what the probe said last (1 sticks) */
    int64_t next_probe_ms;   /* monotonic ms */
    /* Filled by the handler through the host table: */
    int64_t retry_after_ms;        /* -1 = not set */
    char error[256];               /* "" = not set */
    /* api->enqueue appends here; NULL = follow-ups not available (the
     * call is refused). Owned by the caller of jr_handler_run. */
    jr_fu_list_t *fu;
    /* api->set_result writes here (ABI minor 3); NULL = not available (the
     * call is refused); room for JR_RESULT_MAX bytes. */
    char *result;
    uint32_t *result_len;
};

/* One registered handler. */
typedef struct jr_handler {
    char *name;
    jr_handler_fn fn;
    void *udata;
    const char *plugin; /* resolved path (realpath) of the plugin that registered it */
    size_t plugin_ix;   /* that plugin's place in the registry's load order */
} jr_handler_t;

typedef int (*jr_plugin_hook_init_fn)(void *ctx, const jr_host_api_t *api);

typedef struct jr_registry jr_registry_t;

/* An empty registry, or NULL on out-of-memory. */
jr_registry_t *jr_registry_new(void);
/* The plugin settings (jr_config_t.plugin_settings) api->setting reads
 * besides the environment; kept by reference: must outlive the registry. */
struct jr_strlist;
void jr_registry_set_settings(jr_registry_t *r, const struct jr_strlist *settings);

/* Call every loaded plugin's fini (in reverse load order), dlclose them and
 * free the registry. NULL is fine. */
void jr_registry_free(jr_registry_t *r);

/* The ownership rule a plugin file must pass before it is opened (that of
 * OpenSSH's StrictModes): `real` (absolute, symbolic links resolved, as
 * realpath gives) is a regular file, and it and every directory above it up
 * to "/" are owned by root or by `uid` and not writable by group or others;
 * a directory writable by group or others passes only with the sticky bit (as /tmp,
 * where others cannot rename or remove what is not theirs). Anyone else
 * who could write one of them could replace the code the worker runs.
 * Returns 0, or -1 with the path that fails and why in `why`. Only reads
 * the file system (lstat). */
int jr_plugin_check_owner(const char *real, uid_t uid, char *why, size_t whylen);

/* Load one plugin file. Refuses, with JR_EPLUGIN and a message "PATH: reason"
 * in err: a missing file, one (after resolving symbolic links) that fails
 * jr_plugin_check_owner for the effective uid — checked before dlopen,
 * since a shared object's constructors run inside dlopen, before any check
 * of its descriptor —, a file dlopen cannot load, a file
 * already loaded (the same object under any name), a missing entry function,
 * a NULL descriptor, a wrong magic, an ABI major other than ours, a minor
 * newer than ours, a descriptor smaller than its minor requires, a missing
 * init, init returning non-zero, a handler name that is invalid or already
 * registered (by this or another plugin) even if init ignores that and
 * returns 0 (fini is then called). A plugin calling exit() in init (or in
 * runner_init run in this process) ends it with status 1 and a message
 * naming the plugin, whatever status it passed. A refused plugin leaves the registry as it
 * was. Out of memory gives JR_ENOMEM. Load from one thread only. */
int jr_plugin_load(jr_registry_t *r, const char *path, char *err, size_t errlen);

/* Load a plugin file, or every "*.so" in a directory (in name order,
 * hidden files skipped). Stops at the first refusal, with its message;
 * plugins loaded before it stay loaded. A directory with no plugin in it is
 * not an error; one that cannot be read gives JR_EIO. */
int jr_plugin_load_path(jr_registry_t *r, const char *path, char *err, size_t errlen);

/* The handler registered under `name`, or NULL. The pointer stays valid
 * until jr_registry_free, whatever is loaded afterwards. */
const jr_handler_t *jr_registry_find(const jr_registry_t *r, const char *name);

/* Number of registered handlers / loaded plugins. */
size_t jr_registry_handlers(const jr_registry_t *r);
size_t jr_registry_plugins(const jr_registry_t *r);

/* Call every plugin's runner_init (ABI minor >= 1), in load order, in this
 * process: once in each process that runs handlers, before its first job.
 * A failure is logged and remembered for jr_handler_ready. */
void jr_registry_runner_init(const jr_registry_t *r);
/* The same, storing 1 + the index (load order) of the plugin whose
 * runner_init runs into *at before calling it, and 0 once all returned: a
 * process that dies in a runner_init leaves the culprit there (the worker
 * reads it from memory shared with its runner). */
void jr_registry_runner_init_at(const jr_registry_t *r, volatile uint32_t *at);

/* The name (from its descriptor, else its path) of the plugin loaded
 * ix-th, or NULL if there is none. */
const char *jr_registry_plugin_name(const jr_registry_t *r, size_t ix);

/* Call runner_exit, in reverse load order, of every plugin whose runner_init
 * succeeded (or that has none) in this process. */
void jr_registry_runner_exit(const jr_registry_t *r);

/* 0 if the plugin of h is ready to run jobs in this process. If its
 * runner_init failed (or was never called), call it again; if it still
 * fails, return its non-zero result with "runner_init of plugin NAME failed
 * (returned N)" in err. */
int jr_handler_ready(const jr_registry_t *r, const jr_handler_t *h, char *err, size_t errlen);

/* Run a handler on a job, in the calling process and thread. Initialises
 * job->retry_after_ms and job->error first. Returns what the handler
 * returned; a value outside jr_result_t counts as JR_RESULT_FAIL with an
 * error saying so, and so does JR_RESULT_OK after a refused api->enqueue
 * (the refusal is the error). job->fu, if set, must be empty. */
jr_result_t jr_handler_run(const jr_handler_t *h, jr_job_t *job);

#endif
