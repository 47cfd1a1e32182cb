/* Plugin loader and handler registry: see plugin.h.
 *
 * Loading happens in one thread at start-up; afterwards the registry is only
 * read. Handlers are kept as a sorted array of pointers (lookups are a binary
 * search, once per job; a jr_handler_t never moves, so what jr_registry_find
 * returns stays valid until jr_registry_free). */
#include "plugin.h"

#include <dirent.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "contract.h"
#include "jr.h"
#include "jr_limits.h"
#include "log.h"
#include "util.h"

#define HANDLER_NAME_MAX JR_HANDLER_NAME_MAX

/* Smallest descriptor a plugin built for ABI <major>.<minor> may have: up to
 * the end of the last member that minor defines. A new minor appends its
 * entry here. */
static const size_t desc_min_size[] = {
    offsetof(jr_plugin_t, fini) + sizeof(void (*)(void)),               /* 1.0 */
    offsetof(jr_plugin_t, runner_exit) + sizeof(void (*)(void *)),      /* 1.1 */
    offsetof(jr_plugin_t, runner_exit) + sizeof(void (*)(void *)),      /* 1.2: host table only */
    offsetof(jr_plugin_t, runner_exit) + sizeof(void (*)(void *)),      /* 1.3: host table only */
};
_Static_assert(sizeof desc_min_size / sizeof desc_min_size[0] == JR_PLUGIN_ABI_MINOR + 1,
               "one minimum descriptor size per ABI minor");

typedef struct plugin {
    char *path; /* realpath() of the file; handlers point at it */
    void *dl;
    const jr_plugin_t *desc;
    /* In this process (the memory is copied by fork, so each runner has its
     * own): RUNNER_NONE = runner_init not called, RUNNER_READY = it returned
     * 0 (or there is none), RUNNER_FAILED = it returned non-zero. */
    enum { RUNNER_NONE, RUNNER_READY, RUNNER_FAILED } runner_state;
} plugin_t;

/* The plugin whose init is running: where register_handler records the
 * first failure, so the loader can refuse even if init ignores it. */
typedef struct load {
    plugin_t *p;
    int rc;              /* 0, or the error of the first failed registration */
    char why[JR_ERRLEN]; /* its reason */
} load_t;

struct jr_registry {
    jr_handler_t **handlers; /* sorted by name */
    size_t nhandlers, caphandlers;
    plugin_t *plugins; /* in load order */
    size_t nplugins, capplugins;
    load_t *loading; /* non-NULL only while a plugin's init runs */
    const plugin_t *hook; /* the plugin whose init or runner_init runs (api->setting) */
    const jr_strlist_t *settings; /* plugin_settings: triples plugin, key, value; may be NULL */
};

/* Write "PATH: reason" into err (if any) and return rc. */
__attribute__((format(printf, 5, 6))) static int refuse(char *err, size_t errlen, const char *path,
                                                        int rc, const char *fmt, ...) {
    if (!err || errlen == 0) return rc;
    int n = snprintf(err, errlen, "%s: ", path);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ---- the handler table ---- */

/* Index of the first handler whose name is >= name. */
static size_t handler_lower_bound(const jr_registry_t *r, const char *name) {
    size_t lo = 0, hi = r->nhandlers;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(r->handlers[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const jr_handler_t *jr_registry_find(const jr_registry_t *r, const char *name) {
    if (!r || !name) return NULL;
    size_t i = handler_lower_bound(r, name);
    return i < r->nhandlers && strcmp(r->handlers[i]->name, name) == 0 ? r->handlers[i] : NULL;
}

size_t jr_registry_handlers(const jr_registry_t *r) { return r ? r->nhandlers : 0; }
size_t jr_registry_plugins(const jr_registry_t *r) { return r ? r->nplugins : 0; }

static void handler_free(jr_handler_t *h) {
    free(h->name);
    free(h);
}

/* Remove (and free) every handler registered by the plugin whose path is
 * `owner`, keeping the others in order. */
static void handlers_remove_owner(jr_registry_t *r, const char *owner) {
    size_t j = 0;
    for (size_t i = 0; i < r->nhandlers; i++) {
        if (r->handlers[i]->plugin == owner)
            handler_free(r->handlers[i]);
        else
            r->handlers[j++] = r->handlers[i];
    }
    r->nhandlers = j;
}

/* The handler-name rule of contract.h. */
static int valid_name(const char *name) { return name && !jr_contract_handler_name(name, strlen(name)); }

/* A printable copy of a (possibly invalid) name for messages: at most 64
 * bytes, non-printable bytes as '?', "..." if cut. */
static void printable_name(char out[HANDLER_NAME_MAX + 4], const char *name) {
    if (!name) {
        strcpy(out, "(null)");
        return;
    }
    size_t i = 0;
    for (; name[i] && i < HANDLER_NAME_MAX; i++)
        out[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
    strcpy(out + i, name[i] ? "..." : "");
}

/* Record the first registration failure of the plugin being loaded. */
__attribute__((format(printf, 3, 4))) static int load_fail(load_t *l, int rc, const char *fmt,
                                                           ...) {
    if (l->rc == 0) {
        l->rc = rc;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->why, sizeof l->why, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* api->register_handler. ctx is the registry; only accepted while one of
 * its plugins' init runs. Returns 0 or -1 (the reason goes to the load). */
static int api_register(void *ctx, const char *name, jr_handler_fn fn, void *udata) {
    jr_registry_t *r = ctx;
    if (!r || !r->loading) {
        jr_log(JR_LOG_WARN, "a plugin called register_handler outside its init; ignored");
        return -1;
    }
    load_t *l = r->loading;
    char shown[HANDLER_NAME_MAX + 4];
    printable_name(shown, name);
    if (!valid_name(name))
        return load_fail(l, JR_EPLUGIN,
                         "invalid handler name \"%s\" (1..%d characters of [A-Za-z0-9_.:-])", shown,
                         HANDLER_NAME_MAX);
    if (!fn) return load_fail(l, JR_EPLUGIN, "handler \"%s\" has no function", shown);
    size_t at = handler_lower_bound(r, name);
    if (at < r->nhandlers && strcmp(r->handlers[at]->name, name) == 0) {
        const char *owner = r->handlers[at]->plugin;
        if (owner == l->p->path)
            return load_fail(l, JR_EPLUGIN, "handler \"%s\" registered twice", shown);
        return load_fail(l, JR_EPLUGIN, "handler \"%s\" already registered by %s", shown, owner);
    }
    if (r->nhandlers == r->caphandlers) {
        size_t cap = r->caphandlers ? 2 * r->caphandlers : 16;
        jr_handler_t **v = realloc(r->handlers, cap * sizeof *v);
        if (!v) return load_fail(l, JR_ENOMEM, "out of memory");
        r->handlers = v;
        r->caphandlers = cap;
    }
    jr_handler_t *h = calloc(1, sizeof *h);
    if (!h || !(h->name = strdup(name))) {
        free(h);
        return load_fail(l, JR_ENOMEM, "out of memory");
    }
    h->fn = fn;
    h->udata = udata;
    h->plugin = l->p->path;
    h->plugin_ix = r->nplugins; /* where the plugin goes if its load succeeds */
    memmove(&r->handlers[at + 1], &r->handlers[at], (r->nhandlers - at) * sizeof *r->handlers);
    r->handlers[at] = h;
    r->nhandlers++;
    return 0;
}

/* ---- exit() from a plugin's init ----
 * A plugin that calls exit() in its init (or in runner_init run in the
 * worker itself, inline mode) would end the worker with the plugin's status,
 * 0 included, which a supervisor restarting on failure takes for a clean
 * stop. An atexit hook, armed only while such a hook runs in the process
 * that loads the plugins, turns it into exit status 1 with a message. In a
 * runner process the hook does nothing: the worker sees the runner's own
 * status and reports it. _exit() and quick_exit() bypass atexit and are not
 * caught. */
static const char *guard_what; /* "init" or "runner_init" while one runs, else NULL */
static const char *guard_plugin;
static pid_t guard_pid;

static void exit_guard(void) {
    if (!guard_what || getpid() != guard_pid) return;
    jr_log_kv(JR_LOG_ERROR, "a plugin called exit() in its hook; the worker exits with status 1", "plugin",
              guard_plugin, "hook", guard_what, NULL);
    jr_log_flush();
    fprintf(stderr, "jobrunner: plugin %s called exit() in its %s; exiting with status 1\n", guard_plugin,
            guard_what);
    _exit(1);
}

/* Arm the guard for hook `what` of plugin `name` (NULL what disarms). */
static void guard_arm(const char *what, const char *name) {
    static int registered;
    if (what && !registered) registered = atexit(exit_guard) == 0;
    if (what && !guard_pid) guard_pid = getpid();
    guard_what = what;
    guard_plugin = name;
}

/* ---- the host table ---- */

static const char *api_job_id(const jr_job_t *job) { return job->id ? job->id : ""; }
static const char *api_job_queue(const jr_job_t *job) { return job->queue ? job->queue : ""; }

static const void *api_job_payload(const jr_job_t *job, size_t *len) {
    if (len) *len = job->payload ? job->payload_len : 0;
    return job->payload ? job->payload : "";
}

static uint32_t api_job_attempt(const jr_job_t *job) { return job->attempt; }
static int64_t api_job_deadline_ms(const jr_job_t *job) { return job->deadline_ms; }

/* Stop when the worker says so or once the deadline has passed. */
static int api_should_stop(const jr_job_t *job) {
    if (job->stop_flag && *job->stop_flag) return 1;
    return job->deadline_mono_us > 0 && jr_mono_us() >= job->deadline_mono_us;
}

/* One log line with keys job, queue, handler (none if job is NULL, e.g.
 * from init). An unknown level counts as error. */
__attribute__((format(printf, 3, 4))) static void api_log(const jr_job_t *job,
                                                          jr_log_level_t level, const char *fmt,
                                                          ...) {
    if ((unsigned)level > JR_LOG_ERROR) level = JR_LOG_ERROR;
    if (!jr_log_enabled(level)) return;
    char small[2048] = "", *msg = small; /* a longer line on the heap, whole */
    if (fmt) {
        va_list ap, again;
        va_start(ap, fmt);
        va_copy(again, ap);
        int n = vsnprintf(small, sizeof small, fmt, ap);
        va_end(ap);
        if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)))
            vsnprintf(msg, (size_t)n + 1, fmt, again);
        else if (n >= (int)sizeof small)
            msg = small; /* out of memory: the first part, as before */
        va_end(again);
    }
    static const char *const keys[] = {"job", "queue", "handler"};
    const char *vals[] = {job ? job->id : NULL, job ? job->queue : NULL,
                          job ? job->handler : NULL};
    jr_log_kvv(level, msg, job ? 3 : 0, keys, vals);
    if (msg != small) free(msg);
}

/* The worker's flag, or (inline mode) the probe, asked at most every 500 ms. */
static int api_cancelled(const jr_job_t *job) {
    jr_job_t *j = (jr_job_t *)job; /* the probe's memo is the host's own state */
    if (j->cancel_flag && *j->cancel_flag) return 1;
    if (!j->probe || j->probed) return j->probed;
    int64_t now = jr_mono_us() / 1000;
    if (now >= j->next_probe_ms) {
        j->next_probe_ms = now + 500;
        j->probed = j->probe(j->probe_ctx, j->tag) == 1;
    }
    return j->probed;
}

static void api_retry_after(jr_job_t *job, int64_t ms) { job->retry_after_ms = ms < 0 ? 0 : ms; }

static void api_set_error(jr_job_t *job, const char *message) {
    snprintf(job->error, sizeof job->error, "%s", message ? message : "");
}

/* api->setting: see plugin.h. The environment wins over the file. */
static const char *api_setting(void *ctx, const char *key) {
    const jr_registry_t *r = ctx;
    if (!r || !r->hook || !key || !*key) return NULL;
    const char *name = r->hook->desc->name ? r->hook->desc->name : "";
    size_t n = strlen(JR_PLUGIN_ENV_PREFIX) + strlen(name) + 1 + strlen(key) + 1;
    char *var = malloc(n);
    if (var) {
        snprintf(var, n, "%s%s_%s", JR_PLUGIN_ENV_PREFIX, name, key);
        for (char *c = var + strlen(JR_PLUGIN_ENV_PREFIX); *c; c++)
            *c = isalnum((unsigned char)*c) ? (char)toupper((unsigned char)*c) : '_';
        const char *v = getenv(var);
        free(var);
        if (v) return v;
    }
    for (size_t i = 0; r->settings && i + 2 < r->settings->n; i += 3)
        if (!strcmp(r->settings->v[i], name) && !strcmp(r->settings->v[i + 1], key)) return r->settings->v[i + 2];
    return NULL;
}

/* api->enqueue: check f and keep a copy with the attempt (see followup.h);
 * a refusal is logged, becomes the job's error, and fails the attempt. */
static int api_enqueue(jr_job_t *job, const jr_followup_t *f) {
    char why[256];
    if (!job) {
        jr_log(JR_LOG_WARN, "a plugin called enqueue without a job (only a handler can enqueue follow-ups); ignored");
        return -1;
    }
    if (!job->fu) {
        snprintf(why, sizeof why, "follow-up refused: not available here");
    } else if (jr_fu_check(f, job->queue, job->fu->max_payload, jr_wall_ms(), why, sizeof why) == 0 &&
               jr_fu_append(job->fu, f, job->queue, why, sizeof why) == 0) {
        return 0;
    }
    api_log(job, JR_LOG_ERROR, "%s", why);
    if (job->fu && !job->fu->refused) {
        job->fu->refused = 1;
        snprintf(job->fu->why, sizeof job->fu->why, "%s", why);
    }
    snprintf(job->error, sizeof job->error, "%s", why);
    return -1;
}

/* api->set_result: see plugin.h. Refused (-1, logged) above JR_RESULT_MAX
 * or without a place for it; never cut. */
static int api_set_result(jr_job_t *job, const void *data, size_t len) {
    if (!job) {
        jr_log(JR_LOG_WARN, "a plugin called set_result without a job (only a handler can set a result); ignored");
        return -1;
    }
    if (!job->result || !job->result_len) {
        api_log(job, JR_LOG_ERROR, "set_result refused: not available here");
        return -1;
    }
    if (len > JR_RESULT_MAX || (len && !data)) {
        api_log(job, JR_LOG_ERROR, "set_result refused: %zu bytes%s, the most is %d (JR_RESULT_MAX); the result is "
                "unchanged", len, len && !data ? " from a NULL pointer" : "", JR_RESULT_MAX);
        return -1;
    }
    if (len) memcpy(job->result, data, len);
    *job->result_len = (uint32_t)len;
    return 0;
}

static const jr_host_api_t host_api = {
    .size = sizeof(jr_host_api_t),
    .register_handler = api_register,
    .job_id = api_job_id,
    .job_queue = api_job_queue,
    .job_payload = api_job_payload,
    .job_attempt = api_job_attempt,
    .job_deadline_ms = api_job_deadline_ms,
    .should_stop = api_should_stop,
    .log = api_log,
    .retry_after = api_retry_after,
    .set_error = api_set_error,
    .cancelled = api_cancelled,
    .setting = api_setting,
    .enqueue = api_enqueue,
    .set_result = api_set_result,
};

jr_result_t jr_handler_run(const jr_handler_t *h, jr_job_t *job) {
    job->retry_after_ms = -1;
    job->error[0] = '\0';
    if (job->result_len) *job->result_len = 0;
    int res = (int)h->fn(job, &host_api, h->udata);
    if (res == JR_RESULT_OK && job->fu && job->fu->refused) {
        snprintf(job->error, sizeof job->error, "%s", job->fu->why);
        return JR_RESULT_FAIL;
    }
    if (res == JR_RESULT_OK || res == JR_RESULT_RETRY || res == JR_RESULT_FAIL)
        return (jr_result_t)res;
    snprintf(job->error, sizeof job->error, "handler %s returned %d, which is not a jr_result_t",
             h->name, res);
    return JR_RESULT_FAIL;
}

/* ---- per-process hooks ---- */

static jr_plugin_hook_init_fn runner_init_of(const plugin_t *p) {
    return p->desc->abi_minor >= 1 ? p->desc->runner_init : NULL;
}

/* Run p's runner_init (if any) in this process and record the result. */
static int plugin_runner_init(const jr_registry_t *r, plugin_t *p) {
    jr_plugin_hook_init_fn fn = runner_init_of(p);
    ((jr_registry_t *)r)->hook = p; /* for api->setting; the registry is this process's copy */
    guard_arm("runner_init", p->desc->name ? p->desc->name : p->path);
    int rc = fn ? fn((void *)r, &host_api) : 0;
    guard_arm(NULL, NULL);
    ((jr_registry_t *)r)->hook = NULL;
    p->runner_state = rc == 0 ? RUNNER_READY : RUNNER_FAILED;
    if (rc != 0) {
        char n[16];
        snprintf(n, sizeof n, "%d", rc);
        jr_log_kv(JR_LOG_ERROR, "runner_init of a plugin failed; its jobs are retried", "plugin",
                  p->desc->name ? p->desc->name : p->path, "returned", n, NULL);
    }
    return rc;
}

void jr_registry_runner_init(const jr_registry_t *r) { jr_registry_runner_init_at(r, NULL); }

void jr_registry_runner_init_at(const jr_registry_t *r, volatile uint32_t *at) {
    for (size_t i = 0; r && i < r->nplugins; i++) {
        if (at) __atomic_store_n(at, (uint32_t)i + 1, __ATOMIC_RELEASE);
        plugin_runner_init(r, &r->plugins[i]);
    }
    if (at) __atomic_store_n(at, 0, __ATOMIC_RELEASE);
}

const char *jr_registry_plugin_name(const jr_registry_t *r, size_t ix) {
    if (!r || ix >= r->nplugins) return NULL;
    return r->plugins[ix].desc->name ? r->plugins[ix].desc->name : r->plugins[ix].path;
}

void jr_registry_runner_exit(const jr_registry_t *r) {
    for (size_t i = r ? r->nplugins : 0; i-- > 0;) {
        plugin_t *p = &r->plugins[i];
        if (p->runner_state == RUNNER_READY && p->desc->abi_minor >= 1 && p->desc->runner_exit)
            p->desc->runner_exit((void *)r);
        p->runner_state = RUNNER_NONE;
    }
}

int jr_handler_ready(const jr_registry_t *r, const jr_handler_t *h, char *err, size_t errlen) {
    if (!r || h->plugin_ix >= r->nplugins) return 0;
    plugin_t *p = &r->plugins[h->plugin_ix];
    if (p->runner_state == RUNNER_READY) return 0;
    int rc = plugin_runner_init(r, p);
    if (rc != 0)
        snprintf(err, errlen, "runner_init of plugin %s failed (returned %d)",
                 p->desc->name ? p->desc->name : p->path, rc);
    return rc;
}

/* ---- loading ---- */

jr_registry_t *jr_registry_new(void) { return calloc(1, sizeof(jr_registry_t)); }

void jr_registry_set_settings(jr_registry_t *r, const jr_strlist_t *settings) { r->settings = settings; }

void jr_registry_free(jr_registry_t *r) {
    if (!r) return;
    for (size_t i = 0; i < r->nhandlers; i++) handler_free(r->handlers[i]);
    free(r->handlers);
    for (size_t i = r->nplugins; i-- > 0;) {
        plugin_t *p = &r->plugins[i];
        if (p->desc->fini) p->desc->fini();
        dlclose(p->dl);
        free(p->path);
    }
    free(r->plugins);
    free(r);
}

/* See plugin.h. Walks from `real` up to "/" with lstat: realpath left no
 * symbolic link in it, so one found now was put there since (refused). */
int jr_plugin_check_owner(const char *real, uid_t uid, char *why, size_t whylen) {
    char p[PATH_MAX];
    if (!real || real[0] != '/' || snprintf(p, sizeof p, "%s", real) >= (int)sizeof p) {
        snprintf(why, whylen, "%s is not an absolute path", real ? real : "(null)");
        return -1;
    }
    for (int file = 1;; file = 0) {
        struct stat st;
        const char *what = file ? "" : "directory ";
        if (lstat(p, &st) != 0) {
            snprintf(why, whylen, "%s%s: %s", what, p, strerror(errno));
            return -1;
        }
        if (S_ISLNK(st.st_mode)) {
            snprintf(why, whylen, "%s%s became a symbolic link while it was checked", what, p);
            return -1;
        }
        if (file ? !S_ISREG(st.st_mode) : !S_ISDIR(st.st_mode)) {
            snprintf(why, whylen, file ? "%s is not a regular file" : "%s is not a directory", p);
            return -1;
        }
        if (st.st_uid != 0 && st.st_uid != uid) {
            snprintf(why, whylen,
                     "%s%s is owned by uid %u, not by root or uid %u (this process), who could replace the code",
                     what, p, (unsigned)st.st_uid, (unsigned)uid);
            return -1;
        }
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && (file || !(st.st_mode & S_ISVTX))) {
            snprintf(why, whylen, "%s%s is writable by group or others (mode %04o%s)", what, p,
                     (unsigned)(st.st_mode & 07777), file ? "" : ", no sticky bit");
            return -1;
        }
        if (!strcmp(p, "/")) return 0;
        char *slash = strrchr(p, '/');
        slash[slash == p] = '\0'; /* keep "/" itself */
    }
}

/* Check the descriptor header against our ABI. Only reads members the
 * descriptor's own minor guarantees. Returns 0 or a refusal. */
static int check_desc(const jr_plugin_t *d, const char *path, char *err, size_t errlen) {
    if (!d) return refuse(err, errlen, path, JR_EPLUGIN, "%s() returned NULL", JR_PLUGIN_ENTRY_NAME);
    if (d->magic != JR_PLUGIN_MAGIC)
        return refuse(err, errlen, path, JR_EPLUGIN, "wrong magic 0x%08x (not a jobrunner plugin)",
                      (unsigned)d->magic);
    if (d->abi_major != JR_PLUGIN_ABI_MAJOR)
        return refuse(err, errlen, path, JR_EPLUGIN,
                      "built for plugin ABI %u.x, this jobrunner supports %d.x",
                      (unsigned)d->abi_major, JR_PLUGIN_ABI_MAJOR);
    if (d->abi_minor > JR_PLUGIN_ABI_MINOR)
        return refuse(err, errlen, path, JR_EPLUGIN,
                      "built for plugin ABI %u.%u, newer than this jobrunner's %d.%d "
                      "(upgrade jobrunner)",
                      (unsigned)d->abi_major, (unsigned)d->abi_minor, JR_PLUGIN_ABI_MAJOR,
                      JR_PLUGIN_ABI_MINOR);
    if (d->size < desc_min_size[d->abi_minor])
        return refuse(err, errlen, path, JR_EPLUGIN,
                      "descriptor is %u bytes, ABI %u.%u needs at least %zu", (unsigned)d->size,
                      (unsigned)d->abi_major, (unsigned)d->abi_minor,
                      desc_min_size[d->abi_minor]);
    if (!d->init) return refuse(err, errlen, path, JR_EPLUGIN, "descriptor has no init function");
    return 0;
}

/* dlerror() text without the leading "PATH: " glibc puts there. */
static const char *dl_reason(const char *real) {
    const char *e = dlerror();
    if (!e) return "dlopen failed";
    size_t n = strlen(real);
    if (strncmp(e, real, n) == 0 && e[n] == ':' && e[n + 1] == ' ') e += n + 2;
    return e;
}

int jr_plugin_load(jr_registry_t *r, const char *path, char *err, size_t errlen) {
    char real[PATH_MAX];
    if (!realpath(path, real)) return refuse(err, errlen, path, JR_EPLUGIN, "%s", strerror(errno));
    /* Before dlopen: a shared object's constructors run as it is mapped.
     * With every directory up to / trusted, nobody else can swap the file
     * between this check and dlopen. */
    char why[JR_ERRLEN];
    if (jr_plugin_check_owner(real, geteuid(), why, sizeof why) != 0)
        return refuse(err, errlen, path, JR_EPLUGIN, "%s; refusing to load", why);
    int rc;

    /* Make room first so nothing can fail once init has succeeded. */
    if (r->nplugins == r->capplugins) {
        size_t cap = r->capplugins ? 2 * r->capplugins : 8;
        plugin_t *v = realloc(r->plugins, cap * sizeof *v);
        if (!v) return refuse(err, errlen, path, JR_ENOMEM, "out of memory");
        r->plugins = v;
        r->capplugins = cap;
    }
    plugin_t *p = &r->plugins[r->nplugins];
    *p = (plugin_t){0};
    if (!(p->path = strdup(real))) return refuse(err, errlen, path, JR_ENOMEM, "out of memory");

    dlerror();
    p->dl = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) {
        rc = refuse(err, errlen, path, JR_EPLUGIN, "%s", dl_reason(real));
        goto fail;
    }
    for (size_t i = 0; i < r->nplugins; i++)
        if (r->plugins[i].dl == p->dl) {
            rc = refuse(err, errlen, path, JR_EPLUGIN, "already loaded as %s", r->plugins[i].path);
            goto fail;
        }
    void *sym = dlsym(p->dl, JR_PLUGIN_ENTRY_NAME);
    if (!sym) {
        rc = refuse(err, errlen, path, JR_EPLUGIN, "no %s symbol (not a jobrunner plugin)",
                    JR_PLUGIN_ENTRY_NAME);
        goto fail;
    }
    p->desc = ((jr_plugin_entry_fn)sym)();
    if ((rc = check_desc(p->desc, path, err, errlen))) goto fail;

    load_t l = {.p = p};
    r->loading = &l;
    r->hook = p;
    guard_arm("init", p->path);
    int init_rc = p->desc->init(r, &host_api);
    guard_arm(NULL, NULL);
    r->loading = NULL;
    r->hook = NULL;
    if (l.rc) {
        /* Refused even if init ignored the failure; then init succeeded
         * and its fini must undo it. */
        rc = refuse(err, errlen, path, l.rc, "%s", l.why);
        if (init_rc == 0 && p->desc->fini) p->desc->fini();
    } else if (init_rc != 0) {
        rc = refuse(err, errlen, path, JR_EPLUGIN, "init failed (returned %d)", init_rc);
    }
    if (rc) {
        handlers_remove_owner(r, p->path);
        goto fail;
    }
    r->nplugins++;

    char nh[24];
    size_t count = 0;
    for (size_t i = 0; i < r->nhandlers; i++) count += r->handlers[i]->plugin == p->path;
    snprintf(nh, sizeof nh, "%zu", count);
    jr_log_kv(JR_LOG_DEBUG, "plugin loaded", "path", p->path, "name", p->desc->name, "version",
              p->desc->version, "handlers", nh, NULL);
    return 0;

fail:
    if (p->dl) dlclose(p->dl);
    free(p->path);
    return rc;
}

/* scandir filter: "*.so", skipping hidden files as a shell glob would. */
static int is_plugin_name(const struct dirent *d) {
    size_t n = strlen(d->d_name);
    return d->d_name[0] != '.' && n > 3 && strcmp(d->d_name + n - 3, ".so") == 0;
}

int jr_plugin_load_path(jr_registry_t *r, const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return jr_plugin_load(r, path, err, errlen);
    struct dirent **ents;
    int n = scandir(path, &ents, is_plugin_name, alphasort);
    if (n < 0)
        return refuse(err, errlen, path, errno == ENOMEM ? JR_ENOMEM : JR_EIO,
                      "cannot read directory: %s", strerror(errno));
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (rc == 0) {
            char file[PATH_MAX];
            if (snprintf(file, sizeof file, "%.*s/%s", (int)len, path, ents[i]->d_name) >=
                (int)sizeof file)
                rc = refuse(err, errlen, path, JR_EPLUGIN, "%s: path too long", ents[i]->d_name);
            else
                rc = jr_plugin_load(r, file, err, errlen);
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}
