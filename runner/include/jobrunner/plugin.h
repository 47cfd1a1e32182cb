/* jobrunner plugin ABI: the only header a job plugin includes.
 *
 * A plugin is a shared object exporting one function, JR_PLUGIN_ENTRY, that
 * returns a pointer to a static jr_plugin_t descriptor. The host checks the
 * descriptor (magic, ABI major, minor, struct size), then calls init() with a
 * host function table through which the plugin registers its handlers by
 * name. Plugins link no host symbols: everything goes through the table.
 *
 * Compatibility rules:
 *   - ABI major changes break compatibility: a host refuses any other major.
 *   - ABI minor changes only append members at the end of jr_host_api_t or
 *     jr_plugin_t. A host runs plugins built for its minor or an older one,
 *     and refuses a plugin built for a newer minor than it knows.
 *   - api->size tells a plugin how much of the host table exists; check it
 *     before calling a member added after minor 0.
 *
 * Trust: loading a plugin runs its code. A shared object's constructors
 * (and those of the libraries it pulls in) run inside dlopen, before the
 * host can look at the descriptor; no check of the descriptor protects
 * against them. So the host checks the file before opening it: after
 * resolving symbolic links, the file and every directory above it up to /
 * must be owned by root or the worker's user and not writable by group or
 * others (a directory writable by all only with the sticky bit, as /tmp).
 *
 * A plugin that calls exit() in init (or in runner_init run in the worker
 * itself, isolation: inline) ends the worker with status 1 and a message
 * naming it, whatever status it passed. A runner process that dies before
 * running a job (a crash or exit() in runner_init, say) is reported with
 * its signal or exit status and the plugin whose runner_init was running;
 * the jobs it was handed each use an attempt (retried or dead as usual),
 * and it is replaced after a delay that doubles from 100 ms up to 30 s.
 * A runner_init that does not return is killed once the first job handed
 * to its process has waited that job's timeout, with the same outcome.
 *
 * Processes (worker.isolation: process, the default): the worker loads the
 * plugins and calls init once, then forks its runner processes; handlers run
 * in those. What init opens (files, sockets, descriptors, memory) is
 * inherited by every runner unchanged, and shared by all of them: fine for a
 * log file opened with O_APPEND or read-only data. What must not be shared
 * across fork (a database or TLS connection, threads, locks held, a random
 * generator's state) belongs in runner_init, which runs in each runner
 * process before its first job (and once in the worker with isolation:
 * inline); runner_exit undoes it when the runner ends normally (not after a
 * crash or a timeout kill). A runner is replaced after a crash or timeout,
 * and the new one calls runner_init again.
 *
 * A handler may start processes, but only the runner returns results: a
 * process forked from a handler (fork(), daemon(); not a raw clone system
 * call) that returns from it ends at once. Each
 * runner is its own process group; on a timeout or crash the whole group is
 * killed (a shell pipeline the handler started dies with it), and what is
 * left in the group when the runner ends is killed too. A process that must
 * outlive its job has to leave the group (setsid).
 */
#ifndef JOBRUNNER_PLUGIN_H
#define JOBRUNNER_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JR_PLUGIN_MAGIC 0x4C50524Au /* "JRPL" read as little-endian bytes */
#define JR_PLUGIN_ABI_MAJOR 1
#define JR_PLUGIN_ABI_MINOR 3 /* 1: runner_init, runner_exit; 2: cancelled, enqueue, setting; 3: set_result */

/* The largest result api->set_result takes, in bytes. */
#define JR_RESULT_MAX 4096

/* Name of the exported entry function, as a string for dlsym(). */
#define JR_PLUGIN_ENTRY_NAME "jr_plugin_entry"

/* What a handler returns. */
typedef enum jr_result {
    JR_RESULT_OK = 0,    /* done: the job is acknowledged and removed */
    JR_RESULT_RETRY = 1, /* try again later (see api->retry_after) */
    JR_RESULT_FAIL = 2   /* permanent failure: no further attempts */
} jr_result_t;

/* Log levels for api->log. */
typedef enum jr_log_level {
    JR_LOG_DEBUG = 0,
    JR_LOG_INFO = 1,
    JR_LOG_WARN = 2,
    JR_LOG_ERROR = 3
} jr_log_level_t;

/* A job being run. Opaque: read it through the host table. Valid only for
 * the duration of the handler call. */
typedef struct jr_job jr_job_t;

struct jr_host_api;

/* A follow-up job for api->enqueue (ABI minor 2). Zero-initialise it and
 * set what you need: `jr_followup_t f = {.handler = "mail", .payload = p,
 * .payload_len = n};`. The host copies everything during the call. This
 * struct never grows (a later minor would add a new function instead), so
 * a plugin's copy is always the size the host reads. */
typedef struct jr_followup {
    const char *queue;   /* NULL or "" = the queue of the job enqueuing it;
                            else 1..128 characters of [A-Za-z0-9_.:-] */
    const char *handler; /* required: 1..64 characters of [A-Za-z0-9_.:-] */
    const void *payload; /* payload_len bytes, binary-safe; NULL if 0 */
    size_t payload_len;  /* at most jobs.max_payload (default 1 MiB) */
    int64_t delay_ms;    /* > 0: due this long after the job's acknowledgement */
    int64_t at_ms;       /* > 0: due at this Unix time in ms (wins over
                            delay_ms; a time in the past means at once) */
    const char *id;      /* NULL or "" = generated; else the job id (1..158
                            bytes, not d<n>-<n>, d<n> or <n>-<n>): idempotent like
                            `jobrunner enqueue --id`, for a day after its
                            due time */
} jr_followup_t;

/* A job handler. Runs one job; `udata` is what was given at registration. */
typedef jr_result_t (*jr_handler_fn)(jr_job_t *job, const struct jr_host_api *api,
                                     void *udata);

/* The host function table. Members are only ever appended. */
typedef struct jr_host_api {
    uint32_t size; /* sizeof(jr_host_api_t) as the host compiled it */

    /* Register a handler under `name` (1..64 chars of [A-Za-z0-9_.:-]).
     * Only valid during init(). Returns 0, or -1 if the name is invalid or
     * already taken (the plugin's init should then return non-zero). */
    int (*register_handler)(void *ctx, const char *name, jr_handler_fn fn, void *udata);

    /* The job's id: stable across attempts; use it as an idempotency key. */
    const char *(*job_id)(const jr_job_t *job);
    /* The queue the job came from. */
    const char *(*job_queue)(const jr_job_t *job);
    /* The payload bytes (binary-safe; also NUL-terminated for convenience). */
    const void *(*job_payload)(const jr_job_t *job, size_t *len);
    /* 1 for the first attempt, 2 for the first retry, ... */
    uint32_t (*job_attempt)(const jr_job_t *job);
    /* When the handler must be finished: Unix time in ms, 0 = no deadline. */
    int64_t (*job_deadline_ms)(const jr_job_t *job);
    /* Non-zero once the worker wants the handler to return (shutdown or
     * timeout); long handlers should check it and return RETRY. */
    int (*should_stop)(const jr_job_t *job);

    /* Log one line tagged with the job's id, queue and handler. */
    void (*log)(const jr_job_t *job, jr_log_level_t level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /* With JR_RESULT_RETRY: run the next attempt no earlier than `ms` from
     * now instead of the default backoff. At most 315360000000 (10 years):
     * a retry asked for later than that fails the job (dead, with why). */
    void (*retry_after)(jr_job_t *job, int64_t ms);
    /* Record why the attempt failed (kept with a retried or dead job). The
     * first 255 bytes are kept: a longer message is cut there (pre-existing
     * limit, not yet marked in the stored error). */
    void (*set_error)(jr_job_t *job, const char *message);

    /* Members below: ABI minor 2 (check api->size before calling them). */

    /* Non-zero once the job was cancelled (`jobrunner cancel`, jr_cancel)
     * while it ran: stop early and return (any result: the job is not
     * retried, its outcome is "cancelled"). Cheap: reads a flag the worker
     * sets within about a second of the cancel. */
    int (*cancelled)(const jr_job_t *job);

    /* Enqueue a follow-up job, written by Redis in the same atomic call that
     * acknowledges this job: if the handler returns JR_RESULT_OK and the
     * acknowledgement commits, every follow-up of the attempt exists; if
     * the worker dies first, none does (the job runs again and enqueues
     * them then); if the handler returns RETRY or FAIL (or crashes, or
     * times out), none is written. A follow-up is never written twice for
     * one successful run, even when two workers both ran the job after a
     * lost lease: only the one whose acknowledgement lands writes them.
     * (On a Redis Cluster, a follow-up to another queue is written just
     * before the acknowledgement under its id or one derived from the job,
     * so at most once too: README, "Follow-up jobs".)
     * At most 1000 per attempt. Returns 0, or -1 if `f` is refused (see
     * jr_followup_t: bad queue name, empty handler, payload too large, due
     * more than 10 years ahead, bad id, too many): the reason is logged
     * and kept as the job's error, nothing of the call is kept, and the
     * attempt cannot succeed any more: returning JR_RESULT_OK after a
     * refusal counts as JR_RESULT_FAIL (dead, with the reason), so a
     * follow-up is never lost silently. Only valid inside a handler, for
     * the job it was given. Check api->size before calling (see above). */
    int (*enqueue)(jr_job_t *job, const jr_followup_t *f);

    /* One setting of this plugin, for a deployment to configure one .so (a
     * database URL, an API endpoint): the environment variable
     * JOBRUNNER_PLUGIN_<NAME>_<KEY> (NAME = the descriptor's name, KEY =
     * key, upper-case, other characters than letters and digits as '_') if
     * set, else plugin_settings.<name>.<key> of the configuration, else
     * NULL. Call it from init or runner_init with their ctx; the string
     * stays valid as long as the process. */
    const char *(*setting)(void *ctx, const char *key);

    /* Members below: ABI minor 3 (check api->size >= offsetof(jr_host_api_t,
     * set_result) + sizeof api->set_result before calling it). */

    /* Set the job's result: len bytes (binary-safe; at most JR_RESULT_MAX,
     * 4096), shown by `jobrunner job show` and `job wait` and kept in the
     * finished record of a queue or handler with keep_finished. A later
     * call replaces it; len 0 clears it. Returns 0, or -1 (the reason
     * logged, the result as it was) for more than JR_RESULT_MAX bytes or
     * data NULL with len > 0: a result is never cut short. Kept for an
     * attempt that succeeds or fails for good (dead); a retried attempt's
     * result is dropped. Only valid inside a handler, for the job it was
     * given. */
    int (*set_result)(jr_job_t *job, const void *data, size_t len);
} jr_host_api_t;

/* The plugin descriptor returned by the entry function. */
typedef struct jr_plugin {
    uint32_t magic;     /* JR_PLUGIN_MAGIC */
    uint16_t abi_major; /* JR_PLUGIN_ABI_MAJOR the plugin was built with */
    uint16_t abi_minor; /* JR_PLUGIN_ABI_MINOR the plugin was built with */
    uint32_t size;      /* sizeof(jr_plugin_t) as the plugin compiled it */
    const char *name;   /* plugin name, for logs */
    const char *version;
    /* Register handlers. Return 0 on success; non-zero refuses the plugin. */
    int (*init)(void *ctx, const jr_host_api_t *api);
    /* Release what init acquired. May be NULL. */
    void (*fini)(void);

    /* Members below: ABI minor 1. */

    /* Called in each process that runs handlers, before its first job: every
     * runner process after fork, or the worker once with isolation: inline.
     * ctx is the host context init got (register_handler does not work here).
     * Return 0; non-zero makes this plugin's jobs in that process come back
     * as RETRY (error "runner_init of plugin NAME failed (returned N)"), and
     * runner_init is called again before the next one. May be NULL. */
    int (*runner_init)(void *ctx, const jr_host_api_t *api);
    /* Called when such a process ends normally, if its runner_init returned
     * 0 (or there is none). Not called after a crash or a kill. May be NULL. */
    void (*runner_exit)(void *ctx);
} jr_plugin_t;

/* Fill a descriptor's header fields with this header's values. */
#define JR_PLUGIN_HEADER                                                      \
    .magic = JR_PLUGIN_MAGIC, .abi_major = JR_PLUGIN_ABI_MAJOR,               \
    .abi_minor = JR_PLUGIN_ABI_MINOR, .size = sizeof(jr_plugin_t)

/* Declare the entry function a plugin must define:
 *   JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; } */
#define JR_PLUGIN_EXPORT __attribute__((visibility("default")))
typedef const jr_plugin_t *(*jr_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
