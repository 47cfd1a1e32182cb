/* The processes and the setup: worker, scheduler, dev, workers, functions,
 * version (rows of cli.c; see cli.h). */
#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev.h"
#include "jr.h"
#include "metrics.h"
#include "plugin.h"
#include "proc.h"
#include "redis_admin.h"
#include "scheduler.h"
#include "util.h"
#include "worker.h"

/* The directory of plugins shipped with this program: next to it in the
 * build tree and the install tree alike, else the configured prefix's. */
static void default_jobs_dir(char *buf, size_t len) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            int w = snprintf(buf, len, "%s/%s", exe, JR_JOBS_REL);
            if (w > 0 && (size_t)w < len && access(buf, R_OK | X_OK) == 0) return;
        }
    }
    snprintf(buf, len, "%s", JR_JOBS_DIR);
}

/* Load the plugins of plugins.paths (--plugin), or of the default jobs
 * directory when none is configured, into reg. 0, or 1 after saying why
 * (a plugin that cannot be loaded, or no handler at all). */
static int load_plugins(jr_registry_t *reg, const jr_config_t *cfg) {
    char dir[PATH_MAX], err[JR_ERRLEN];
    const jr_strlist_t *paths = &cfg->plugin_paths;
    if (!paths->n) {
        default_jobs_dir(dir, sizeof dir);
        if (jr_plugin_load_path(reg, dir, err, sizeof err) != 0) goto fail;
    }
    for (size_t i = 0; i < paths->n; i++)
        if (jr_plugin_load_path(reg, paths->v[i], err, sizeof err) != 0) goto fail;
    if (jr_registry_handlers(reg) == 0) {
        fprintf(stderr, "jobrunner worker: no job handlers loaded (looked in %s); use --plugin\n",
                paths->n ? "the configured plugin paths" : dir);
        return 1;
    }
    return 0;
fail:
    fprintf(stderr, "jobrunner worker: %s\n", err);
    return 1;
}

static int out_of_memory(const char *cmd) {
    fprintf(stderr, "jobrunner %s: %s\n", cmd, jr_strerror(JR_ENOMEM));
    return 1;
}

/* --metrics ADDR replaces metrics.listen. 0, or the exit status after
 * saying what was wrong. */
static int metrics_flag(const char *cmd, const jr_cli_flags_t *f, jr_config_t *cfg) {
    const char *addr = f->v[JR_O_METRICS];
    if (!addr) return 0;
    char host[256], err[JR_ERRLEN];
    int port;
    if (jr_metrics_parse_addr(addr, host, sizeof host, &port, err, sizeof err) != 0)
        return jr_cli_die(cmd, "--metrics: %s", err);
    free(cfg->metrics_listen);
    return (cfg->metrics_listen = strdup(addr)) ? 0 : out_of_memory(cmd);
}

/* The list l (when it has items) replaces *dst. 0, or 1 when out of memory. */
static int replace_list(jr_strlist_t *dst, const jr_strlist_t *l) {
    if (!l->n) return 0;
    jr_strlist_free(dst);
    for (size_t i = 0; i < l->n; i++)
        if (jr_strlist_push(dst, l->v[i])) return 1;
    return 0;
}

/* The worker's -q flags, QUEUE[:WEIGHT] each, replace worker.queues.
 * Returns 0, or the exit status after saying what was wrong. */
static int worker_queue_flags(const char *cmd, const jr_cli_flags_t *f, jr_config_t *cfg) {
    char (*names)[129] = calloc(f->queues.n, sizeof *names);
    const char **ptrs = calloc(f->queues.n, sizeof *ptrs);
    int64_t *weights = calloc(f->queues.n, sizeof *weights);
    int status = names && ptrs && weights ? 0 : 1;
    char why[JR_ERRLEN];
    for (size_t i = 0; !status && i < f->queues.n; i++) {
        if (jr_queue_weight_parse(f->queues.v[i], names[i], sizeof names[i], &weights[i], why, sizeof why))
            status = jr_cli_die2(cmd, "-q", f->queues.v[i], why);
        for (size_t j = 0; !status && j < i; j++)
            if (!strcmp(names[i], names[j]))
                status = jr_cli_die2(cmd, "-q", f->queues.v[i], "the queue is given twice");
        ptrs[i] = names[i];
    }
    if (!status && jr_config_set_worker_queues(cfg, ptrs, weights, f->queues.n)) status = 1;
    if (status == 1) out_of_memory(cmd);
    free(names), free(ptrs), free(weights);
    return status;
}

int jr_cli_worker_check(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, int argc, char **argv) {
    (void)argc, (void)argv;
    const char *order = f->v[JR_O_ORDER];
    if (order && strcmp(order, "weighted") && strcmp(order, "strict"))
        return jr_cli_die2(cmd->name, "--order", order, "must be weighted or strict");
    return 0;
}

int jr_cli_worker(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)argc, (void)argv;
    int status = metrics_flag(cmd->name, f, cfg);
    if (!status && f->queues.n) status = worker_queue_flags(cmd->name, f, cfg);
    if (status) return status;
    if (f->v[JR_O_ORDER]) cfg->worker_order = strcmp(f->v[JR_O_ORDER], "strict") ? JR_ORDER_WEIGHTED : JR_ORDER_STRICT;
    if (replace_list(&cfg->plugin_paths, &f->plugins)) return out_of_memory(cmd->name);
    jr_registry_t *reg = jr_registry_new();
    if (reg) jr_registry_set_settings(reg, &cfg->plugin_settings);
    status = reg && load_plugins(reg, cfg) == 0 ? jr_worker_run(cfg, reg) : 1;
    jr_registry_free(reg);
    return status;
}

int jr_cli_scheduler(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)argc, (void)argv;
    int status = metrics_flag(cmd->name, f, cfg);
    if (status) return status;
    if (replace_list(&cfg->scheduler_queues, &f->queues)) return out_of_memory(cmd->name);
    return jr_scheduler_run(cfg);
}

int jr_cli_dev(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)argc, (void)argv;
    char self[PATH_MAX], dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    default_jobs_dir(dir, sizeof dir);
    int64_t orders = 12;
    const char *v = f->v[JR_O_ORDERS];
    if (v && jr_cli_parse_count(v, 1, 10000, &orders))
        return jr_cli_die2(cmd->name, "--orders", v, "must be an integer from 1 to 10000");
    return jr_dev_run(cfg, self, f->plugins.n ? f->plugins.v[0] : dir, (int)orders, f->v[JR_O_CONFIG]);
}

int jr_cli_version(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)cmd, (void)f, (void)cfg, (void)argc, (void)argv;
    printf("jobrunner %s (plugin ABI %d.%d)\n", JR_VERSION, JR_PLUGIN_ABI_MAJOR, JR_PLUGIN_ABI_MINOR);
    return 0;
}

/* ---- workers: the live processes ------------------------------------------ */

/* The live processes as one JSON document: {"workers":[{...},...]}
 * (strings through jr_json_bytes, like every --json output). */
static json_t *workers_json(const jr_proc_t *v, size_t n) {
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        char t[JR_TIME_LEN];
        jr_time_format(v[i].started_ms, t);
        json_t *queues = json_array();
        for (const char *q = v[i].queues; queues && *q;) { /* the comma-separated list */
            size_t len = strcspn(q, ",");
            json_array_append_new(queues, jr_json_bytes(q, len));
            q += len + (q[len] == ',');
        }
        json_t *o = json_pack("{s:o, s:o, s:o, s:I, s:o, s:o, s:s, s:I, s:I, s:I, s:o}", "name",
                              jr_json_bytes(v[i].name, strlen(v[i].name)), "role",
                              jr_json_bytes(v[i].role, strlen(v[i].role)), "host",
                              jr_json_bytes(v[i].host, strlen(v[i].host)), "pid", (json_int_t)v[i].pid, "queues",
                              queues, "version", jr_json_bytes(v[i].version, strlen(v[i].version)), "started", t,
                              "running", (json_int_t)v[i].running, "last_seen_ms", (json_int_t)v[i].seen_ago_ms,
                              "lease_ms", (json_int_t)v[i].lease_ms, "capacity",
                              v[i].capacity > 0 ? json_integer(v[i].capacity) : json_null());
        if (!o || json_array_append_new(list, o) != 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list ? json_pack("{s:o}", "workers", list) : NULL;
}

int jr_cli_workers(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)cmd, (void)argc, (void)argv;
    jr_redis_t *r = jr_cli_connect(cfg, 0);
    if (!r) return 1;
    jr_proc_t *v = NULL;
    size_t n = 0;
    int rc = jr_redis_proc_list(r, &v, &n);
    if (rc) {
        fprintf(stderr, "jobrunner workers: %s\n",
                jr_redis_errstr(r)[0] ? jr_cli_esc(jr_redis_errstr(r)) : jr_strerror(rc));
    } else if (jr_flag(f, JR_O_JSON)) {
        if (jr_json_print(stdout, workers_json(v, n)) != 0) rc = JR_ENOMEM;
    } else {
        static const char *const heads[] = {"NAME", "ROLE", "HOST", "PID", "QUEUES", "VERSION", "STARTED", "RUNNING",
                                            "LAST SEEN"};
        jr_table_t tab;
        jr_table_init(&tab, heads, "lllrllLrr");
        for (size_t i = 0; i < n && !rc; i++) {
            char t[JR_TIME_LEN], seen[32], pid[24], running[48];
            jr_time_format(v[i].started_ms, t);
            snprintf(seen, sizeof seen, "%.1fs ago", (double)v[i].seen_ago_ms / 1000.0);
            snprintf(pid, sizeof pid, "%lld", v[i].pid);
            if (v[i].capacity > 0) snprintf(running, sizeof running, "%lld/%lld", v[i].running, v[i].capacity);
            else snprintf(running, sizeof running, "%lld", v[i].running);
            const char *row[] = {v[i].name, v[i].role, v[i].host, pid, v[i].queues[0] ? v[i].queues : "*",
                                 v[i].version, t, running, seen};
            rc = jr_table_add(&tab, row);
        }
        if (!rc) jr_table_print(&tab, stdout, jr_table_limit(stdout, jr_flag(f, JR_O_WIDE)));
        else fprintf(stderr, "jobrunner workers: out of memory\n");
        jr_table_free(&tab);
    }
    jr_procs_free(v, n);
    jr_redis_free(r);
    return jr_cli_done(stdout, rc ? 1 : 0);
}

/* ---- functions: the Redis function library for producers --------------- */

extern const char jr_lua_library[];
extern const size_t jr_lua_library_len;

/* load: make sure Redis has the function library (FUNCTION LOAD REPLACE
 * only if it is missing or differs), so producers in any language can
 * FCALL at once; dump: print the library (joined from the parts in runner/lua/). */
int jr_cli_functions(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv) {
    (void)f;
    if (argc != 1 || (strcmp(argv[0], "load") && strcmp(argv[0], "dump")))
        return jr_cli_die(cmd->name, "%s", "expected load or dump");
    if (!strcmp(argv[0], "dump")) {
        jr_cli_ignore_sigpipe();
        /* Only the library: a pipe into `redis-cli -x FUNCTION LOAD` gets exactly it. */
        if (fwrite(jr_lua_library, 1, jr_lua_library_len, stdout) != jr_lua_library_len || fflush(stdout)) {
            fprintf(stderr, "jobrunner functions: cannot write the library\n");
            return 1;
        }
        return 0;
    }
    char shown[512];
    jr_redis_t *r = jr_cli_connect(cfg, 1); /* waits up to redis.wait, loads the library, says why not */
    if (!r) return 1;
    printf("function library \"jobrunner\" is loaded in Redis at %s\n",
           jr_config_redis_url_shown(cfg, shown, sizeof shown));
    jr_redis_free(r);
    return jr_cli_done(stdout, 0);
}
