/* jobrunner: the command line. Parses flags, loads the configuration
 * (defaults < YAML file < environment < flags) and runs one command. */
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "config.h"
#include "contract.h"
#include "dev.h"
#include "jr.h"
#include "jr_limits.h"
#include "log.h"
#include "metrics.h"
#include "plugin.h"
#include "proc.h"
#include "redis.h"
#include "scheduler.h"
#include "util.h"
#include "worker.h"

static const char usage_main[] =
    "usage: jobrunner COMMAND [OPTIONS]\n"
    "\n"
    "A reliable job runner on Redis Streams.\n"
    "\n"
    "commands:\n"
    "  worker     run jobs from queues through plugin handlers\n"
    "  scheduler  move delayed jobs into their queue when they fall due\n"
    "  enqueue    add a job (now, after a delay, or at a time)\n"
    "  stats      show ready, pending, delayed and dead counts per queue\n"
    "  dead       list, show, retry or purge dead jobs\n"
    "  workers    list the live workers and schedulers\n"
    "  functions  load the Redis function library (for producers), or print it\n"
    "  job        show, run-now or delete one job by its id\n"
    "  jobs       list a page of the jobs in one state\n"
    "  cancel     cancel jobs by id (waiting: removed; running: flagged)\n"
    "  pause      stop workers taking jobs from a queue\n"
    "  resume     let workers take jobs from a paused queue again\n"
    "  cron       add, remove or list periodic schedules (fired by the schedulers)\n"
    "  dev        run the demo: private Redis, scheduler, workers, example shop\n"
    "  version    print the version\n"
    "\n"
    "Run 'jobrunner COMMAND --help' for a command's options, 'man jobrunner' for all.\n"
    "\n"
    "Settings: defaults < config file (-c FILE, or JOBRUNNER_CONFIG) < environment\n"
    "(JOBRUNNER_<SECTION>_<KEY>, e.g. JOBRUNNER_WORKER_CONCURRENCY=8) < flags.\n"
    "\n"
    "Exit status: 0 ok; 1 failure, explained on stderr; 2 usage or configuration error.\n";

static const char usage_common[] =
    "  -c, --config FILE   YAML configuration (see config/jobrunner.yaml)\n"
    "      --redis URL     redis://[[user:]password@]host:port[/db] or unix:///path\n"
    "                      (overrides the file and JOBRUNNER_REDIS_URL)\n"
    "      --wait DURATION wait up to DURATION for Redis to answer (e.g. right after\n"
    "                      it starts) instead of failing at once (redis.wait, default 0;\n"
    "                      workers and schedulers always wait)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Every configuration key can also be set by JOBRUNNER_<SECTION>_<KEY> (see\n"
    "jobrunner(1)). Exit status: 0 ok; 1 failure, explained on stderr; 2 usage or\n"
    "configuration error.\n";

static const char usage_worker[] =
    "usage: jobrunner worker [-c FILE] [--redis URL] [-q QUEUE[:WEIGHT]]... [--order weighted|strict]\n"
    "                        [--plugin PATH]...\n"
    "\n"
    "Consume queues (default: 'default') and run each job's handler.\n"
    "\n"
    "  -q, --queue QUEUE[:WEIGHT]  a queue to consume (repeatable); WEIGHT 1-1000 (default 1)\n"
    "                      is its share of the fetches when every queue has jobs\n"
    "                      (a queue named like \"a:6\" is given as \"a:6:1\")\n"
    "      --order ORDER   weighted (default): queues share fetches by weight, an empty\n"
    "                      queue's share goes to the others; strict: a queue's jobs start\n"
    "                      only while every queue listed before it has none ready\n"
    "      --metrics ADDR  serve /metrics and /healthz on HOST:PORT (metrics.listen)\n"
    "      --plugin PATH   a plugin .so or a directory of them (repeatable;\n"
    "                      default: the installed jobs directory)\n"
    "      --concurrency N   jobs run at once, 1-256 (worker.concurrency)\n"
    "      --log-level LEVEL debug, info, warn or error (log.level)\n"
    "      --log-format FMT  text or json (log.format)\n";

static const char usage_scheduler[] =
    "usage: jobrunner scheduler [-c FILE] [--redis URL] [-q QUEUE]...\n"
    "\n"
    "Promote delayed jobs into their queue's stream when due. Without -q, serve\n"
    "every queue ever enqueued to. Any number of schedulers may run at once.\n"
    "\n"
    "  -q, --queue QUEUE   a queue to serve (repeatable)\n"
    "      --metrics ADDR  serve /metrics and /healthz on HOST:PORT (metrics.listen)\n"
    "      --log-level LEVEL debug, info, warn or error (log.level)\n"
    "      --log-format FMT  text or json (log.format)\n";

static const char usage_enqueue[] =
    "usage: jobrunner enqueue [-c FILE] [--redis URL] [-q QUEUE] [--in DURATION | --at TIME]\n"
    "                         [--id ID] HANDLER [PAYLOAD | -]\n"
    "\n"
    "Enqueue a job and print its id. PAYLOAD '-' reads it from standard input.\n"
    "\n"
    "  -q, --queue QUEUE   the queue (default: 'default')\n"
    "      --in DURATION   run after a delay: 250ms, 30s, 5m, 2h, 1h30m (at most 87600h = 10 years)\n"
    "      --at TIME       run at a time: RFC 3339 (2026-12-01T09:30:00.250Z) or Unix seconds\n"
    "                      (at most 10 years from now)\n"
    "      --id ID         the job's id; enqueueing the same id again does nothing\n"
    "      --max-attempts N  attempts before the job is dead, 1-1000 (default: the handler's)\n"
    "      --timeout DURATION  per-attempt time limit, at most 168h = 7 days (default: the handler's)\n"
    "      --backoff DURATION  first retry delay ceiling, doubling per attempt, at most 720h = 30 days\n"
    "                          (default: the handler's)\n";

static const char usage_stats[] =
    "usage: jobrunner stats [-c FILE] [--redis URL] [-q QUEUE]... [--json] [--watch]\n"
    "\n"
    "Per queue: ready (waiting for a worker), pending (running or unacknowledged),\n"
    "delayed (waiting for their due time), dead; processed (succeeded) and failed\n"
    "(failed attempts) totals, jobs per second over the last minute, how long the\n"
    "oldest ready job has waited, and whether it is paused. Without -q, every\n"
    "registered queue.\n"
    "\n"
    "  -q, --queue QUEUE   a queue to show (repeatable)\n"
    "      --json          print one JSON object: {\"queues\": [{\"queue\", \"ready\", ...}]}\n"
    "      --watch         redraw every second until Ctrl-C\n";

static const char usage_workers[] =
    "usage: jobrunner workers [-c FILE] [--redis URL] [--json]\n"
    "\n"
    "The live workers and schedulers: name (a worker's consumer name), role, host,\n"
    "pid, queues ('*' = every registered queue), version, start time, jobs running\n"
    "and how long ago it last refreshed its entry. A process is listed within a\n"
    "moment of starting, until it exits, or for at most worker.lease after it dies.\n"
    "\n"
    "      --json          print JSON\n";

static const char usage_dead[] =
    "usage: jobrunner dead list|show|retry|purge [-c FILE] [--redis URL] [-q QUEUE] [ID... | --all]\n"
    "\n"
    "Jobs that failed permanently, ran out of attempts, crashed their worker too often\n"
    "(poison) or could not be read are kept in the queue's dead-letter stream.\n"
    "\n"
    "  list [ID...]        one line per dead job (--json: all fields)\n"
    "  show ID...          every field of the named jobs\n"
    "  retry ID...|--all   enqueue them again, attempts reset\n"
    "  purge ID...|--all   delete them\n"
    "  -q, --queue QUEUE   the queue (default: 'default')\n"
    "      --all           every dead job of the queue\n"
    "      --json          list, show: print one JSON array, an object per dead job\n"
    "                      (text that is not UTF-8 as {\"base64\": ...})\n";

static const char usage_job[] =
    "usage: jobrunner job show|run-now|delete [-c FILE] [--redis URL] [-q QUEUE] ID [--json]\n"
    "\n"
    "  show ID      where the job is: delayed (due at), retrying (attempt, due at), ready,\n"
    "               running (consumer, idle, deliveries), dead (why, error) or not found\n"
    "               (finished jobs are not kept), with its fields; exit 0 found, 1 not\n"
    "  run-now ID   a delayed or retrying job becomes ready now\n"
    "  delete ID    remove a waiting or dead job (a running one: use cancel)\n"
    "  -q, --queue QUEUE   the queue (default: 'default')\n"
    "      --json          show: print one JSON object\n";

static const char usage_jobs[] =
    "usage: jobrunner jobs [-c FILE] [--redis URL] [-q QUEUE] --state delayed|ready|running|dead\n"
    "                      [--limit N] [--after CURSOR] [--json]\n"
    "\n"
    "A page of the queue's jobs in one state, oldest first (delayed: by due time,\n"
    "jobs due 2 s or more after they were written by the second of their due time),\n"
    "and the cursor of the next page.\n"
    "\n"
    "  -q, --queue QUEUE   the queue (default: 'default')\n"
    "      --limit N       jobs per page, 1-10000 (default 100)\n"
    "      --after CURSOR  the cursor a previous page printed\n"
    "      --json          print one JSON object {\"queue\", \"state\", \"jobs\": [...], \"next\"}\n";

static const char usage_cancel[] =
    "usage: jobrunner cancel [-c FILE] [--redis URL] [-q QUEUE] ID...\n"
    "\n"
    "Cancel jobs. A delayed, retrying or ready job is removed (and its id may be\n"
    "enqueued again): 'ID cancelled'. A running job is flagged: its handler sees\n"
    "api->cancelled within about a second, and when it ends it is not retried:\n"
    "'ID running'. Otherwise 'ID not found'. Exit 0 when every id was found.\n"
    "\n"
    "  -q, --queue QUEUE   the queue (default: 'default')\n";

static const char usage_dev[] =
    "usage: jobrunner dev [-c FILE] [--redis URL] [--orders N] [--plugin DIR]\n"
    "\n"
    "The demo. Without a configured Redis, starts a private redis-server on a unix\n"
    "socket; starts a scheduler and two workers; places N orders (default 12), each\n"
    "with an order_autoclose job due 3-6 s later, pays some of them, and shows the\n"
    "unpaid ones being closed. Stops everything it started and exits.\n";

static const char usage_functions[] =
    "usage: jobrunner functions load|dump [-c FILE] [--redis URL]\n"
    "\n"
    "Producers in other languages call the library's functions (FCALL jr_enqueue ...),\n"
    "which Redis only has once a jobrunner process has loaded them.\n"
    "\n"
    "  load                load the library into Redis now (only if missing or different)\n"
    "  dump                print the library, e.g. for redis-cli -x FUNCTION LOAD REPLACE\n";

static const char usage_cron[] =
    "usage: jobrunner cron add NAME (--cron EXPR | --every DURATION) [--tz ZONE] [-q QUEUE]\n"
    "                          [--missed skip|once] [--disabled] HANDLER [PAYLOAD]\n"
    "       jobrunner cron remove NAME...\n"
    "       jobrunner cron list [--json]\n"
    "\n"
    "Periodic schedules live in Redis; every running scheduler fires them, each tick\n"
    "exactly once, as a job with id NAME@TICK (the tick in Unix ms).\n"
    "\n"
    "  --cron EXPR         5 fields (min hour day-of-month month day-of-week) or 6 (seconds\n"
    "                      first); *, N, N-M, lists, /STEP, JAN..DEC, SUN..SAT, @daily, @hourly...\n"
    "  --every DURATION    a fixed interval from 1s (ticks at multiples of it since the epoch)\n"
    "  --tz ZONE           an IANA zone for --cron (default UTC), e.g. Europe/Berlin\n"
    "  -q, --queue QUEUE   the queue of the jobs (default: 'default')\n"
    "  --missed skip|once  after all schedulers were down: fire nothing (skip, default)\n"
    "                      or one job for the latest missed tick (once)\n"
    "  --disabled          store it without firing it\n"
    "  --json              list: print {\"schedules\": [...]}\n";

_Static_assert(JR_DELAY_MAX_MS == 87600 * 3600 * 1000LL && JR_TIMEOUT_MAX_MS == 168 * 3600 * 1000LL &&
                   JR_BACKOFF_MAX_MS == 720 * 3600 * 1000LL && JR_ATTEMPTS_MAX == 1000,
               "the maxima in usage_enqueue");

enum { OPT_REDIS = 1000, OPT_PLUGIN, OPT_IN, OPT_AT, OPT_ID, OPT_JSON, OPT_MAX, OPT_TIMEOUT, OPT_ORDERS, OPT_ALL, OPT_BACKOFF, OPT_METRICS,
       OPT_STATE, OPT_LIMIT, OPT_AFTER, OPT_ORDER, OPT_CRON, OPT_EVERY, OPT_TZ, OPT_MISSED, OPT_DISABLED, OPT_WATCH };
/* Flags that set one configuration key (see key_flags). */
enum { OPT_CONCURRENCY = 1100, OPT_LOG_LEVEL, OPT_LOG_FORMAT, OPT_WAIT };

static const struct option long_opts[] = {
    {"config", required_argument, 0, 'c'},  {"redis", required_argument, 0, OPT_REDIS},
    {"queue", required_argument, 0, 'q'},   {"plugin", required_argument, 0, OPT_PLUGIN},
    {"in", required_argument, 0, OPT_IN},   {"at", required_argument, 0, OPT_AT},
    {"id", required_argument, 0, OPT_ID},   {"json", no_argument, 0, OPT_JSON},
    {"max-attempts", required_argument, 0, OPT_MAX},
    {"timeout", required_argument, 0, OPT_TIMEOUT},
    {"orders", required_argument, 0, OPT_ORDERS},
    {"all", no_argument, 0, OPT_ALL},
    {"backoff", required_argument, 0, OPT_BACKOFF},
    {"metrics", required_argument, 0, OPT_METRICS},
    {"concurrency", required_argument, 0, OPT_CONCURRENCY},
    {"log-level", required_argument, 0, OPT_LOG_LEVEL},
    {"log-format", required_argument, 0, OPT_LOG_FORMAT},
    {"wait", required_argument, 0, OPT_WAIT},
    {"state", required_argument, 0, OPT_STATE},
    {"limit", required_argument, 0, OPT_LIMIT},
    {"after", required_argument, 0, OPT_AFTER},
    {"order", required_argument, 0, OPT_ORDER},
    {"cron", required_argument, 0, OPT_CRON},
    {"every", required_argument, 0, OPT_EVERY},
    {"tz", required_argument, 0, OPT_TZ},
    {"missed", required_argument, 0, OPT_MISSED},
    {"disabled", no_argument, 0, OPT_DISABLED},
    {"watch", no_argument, 0, OPT_WATCH},
    {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};

/* What the flags said, before the configuration is assembled. */
typedef struct flags {
    char *redis; /* a copy: the argument itself is scrubbed (see scrub_url_arg) */
    const char *config, *in, *at, *id, *max, *timeout, *orders, *backoff, *metrics, *order;
    const char *state, *limit, *after; /* jobs */
    const char *cron, *every, *tz, *missed; /* cron add */
    jr_strlist_t queues, plugins;
    int json, all, disabled, watch;
    const char *key_value[4]; /* the value of each flag of key_flags, or NULL */
} flags_t;

/* Overwrite a --redis argument in place with the URL as logs show it
 * (jr_redis_url_redact: no password), cut to the argument's length and
 * padded with NULs. /proc/PID/cmdline, and so ps, reads these bytes: after
 * this the password is not in the argv of this process nor of the runner
 * processes it forks (a copy of this memory), though it was for the
 * moments before. */
static void scrub_url_arg(char *arg) {
    char shown[JR_ERRLEN];
    size_t n = strlen(arg);
    jr_redis_url_redact(arg, shown, sizeof shown);
    size_t m = strlen(shown) < n ? strlen(shown) : n;
    memcpy(arg, shown, m);
    memset(arg + m, 0, n - m);
}

/* Flags that set a configuration key, applied after the environment; each
 * value is checked as the same value in the file would be. */
static const struct {
    int opt;
    const char *key;
} key_flags[] = {
    {OPT_CONCURRENCY, "worker.concurrency"},
    {OPT_LOG_LEVEL, "log.level"},
    {OPT_LOG_FORMAT, "log.format"},
    {OPT_WAIT, "redis.wait"},
};
_Static_assert(sizeof key_flags / sizeof key_flags[0] == sizeof ((flags_t *)0)->key_value / sizeof(char *),
               "one value per key flag");

/* Which flags each command takes (as option values of long_opts). */
static int flag_allowed(const char *cmd, int opt) {
    switch (opt) {
    case 'c': case OPT_REDIS: case 'h': return 1;
    case OPT_WAIT: return 1;
    case 'q': return strcmp(cmd, "dev") != 0 && strcmp(cmd, "workers") != 0 && strcmp(cmd, "functions") != 0;
    case OPT_PLUGIN: return !strcmp(cmd, "worker") || !strcmp(cmd, "dev");
    case OPT_IN: case OPT_AT: case OPT_ID: case OPT_MAX: case OPT_TIMEOUT: case OPT_BACKOFF:
        return !strcmp(cmd, "enqueue");
    case OPT_JSON: return !strcmp(cmd, "stats") || !strcmp(cmd, "dead") || !strcmp(cmd, "workers") ||
                          !strcmp(cmd, "job") || !strcmp(cmd, "jobs") || !strcmp(cmd, "cron");
    case OPT_STATE: case OPT_LIMIT: case OPT_AFTER: return !strcmp(cmd, "jobs");
    case OPT_WATCH: return !strcmp(cmd, "stats");
    case OPT_CRON: case OPT_EVERY: case OPT_TZ: case OPT_MISSED: case OPT_DISABLED: return !strcmp(cmd, "cron");
    case OPT_ALL: return !strcmp(cmd, "dead");
    case OPT_ORDERS: return !strcmp(cmd, "dev");
    case OPT_METRICS: return !strcmp(cmd, "worker") || !strcmp(cmd, "scheduler");
    case OPT_CONCURRENCY: return !strcmp(cmd, "worker");
    case OPT_LOG_LEVEL: case OPT_LOG_FORMAT: return !strcmp(cmd, "worker") || !strcmp(cmd, "scheduler");
    case OPT_ORDER: return !strcmp(cmd, "worker");
    }
    return 0;
}

static const char usage_pause[] =
    "usage: jobrunner pause [-c FILE] [--redis URL] [-q] QUEUE\n"
    "\n"
    "Stop every worker taking new jobs from QUEUE (within 100 ms; running jobs\n"
    "finish, fetched jobs not yet started go back to the queue). Jobs can still be\n"
    "enqueued, and delayed jobs still fall due into it. The state is kept in Redis\n"
    "until 'jobrunner resume'.\n";

static const char usage_resume[] =
    "usage: jobrunner resume [-c FILE] [--redis URL] [-q] QUEUE\n"
    "\n"
    "Let workers take jobs from a paused QUEUE again.\n";

static const char *usage_of(const char *cmd) {
    if (!strcmp(cmd, "worker")) return usage_worker;
    if (!strcmp(cmd, "scheduler")) return usage_scheduler;
    if (!strcmp(cmd, "enqueue")) return usage_enqueue;
    if (!strcmp(cmd, "stats")) return usage_stats;
    if (!strcmp(cmd, "dev")) return usage_dev;
    if (!strcmp(cmd, "dead")) return usage_dead;
    if (!strcmp(cmd, "workers")) return usage_workers;
    if (!strcmp(cmd, "functions")) return usage_functions;
    if (!strcmp(cmd, "job")) return usage_job;
    if (!strcmp(cmd, "jobs")) return usage_jobs;
    if (!strcmp(cmd, "cancel")) return usage_cancel;
    if (!strcmp(cmd, "pause")) return usage_pause;
    if (!strcmp(cmd, "resume")) return usage_resume;
    if (!strcmp(cmd, "cron")) return usage_cron;
    return NULL;
}

/* An argument as messages may show it: what could be a Redis URL (it holds
 * "://" or '@', e.g. a URL given without --redis) redacted into buf. */
static const char *shown_arg(const char *arg, char *buf, size_t len) {
    if (!strstr(arg, "://") && !strchr(arg, '@')) return arg;
    jr_redis_url_redact(arg, buf, len);
    return buf;
}

static int die(const char *cmd, const char *fmt, const char *arg) {
    fprintf(stderr, "jobrunner %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nRun 'jobrunner %s --help' for usage.\n", cmd);
    return 2;
}

/* "invalid OPTION "VALUE": why" (the value is cut, not the message, if it
 * is very long); returns the usage-error status 2. */
static int die2(const char *cmd, const char *opt, const char *value, const char *why) {
    fprintf(stderr, "jobrunner %s: invalid %s \"%.200s%s\": %s\n", cmd, opt, value,
            strlen(value) > 200 ? "..." : "", why);
    fprintf(stderr, "Run 'jobrunner %s --help' for usage.\n", cmd);
    return 2;
}

/* A decimal integer of ASCII digits only, from min to max; 0 or -1. */
static int parse_count(const char *s, int64_t min, int64_t max, int64_t *out) {
    int64_t v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (*s - '0');
        if (v > max) return -1;
    }
    if (v < min) return -1;
    *out = v;
    return 0;
}

/* Parse --at: a time jr_time_parse accepts, at most JR_DELAY_MAX_MS after
 * this host's clock. */
static int check_at(const char *s, int64_t *us, char *why, size_t len) {
    int64_t v;
    char max[JR_DURATION_LEN];
    if (jr_time_parse(s, &v) != 0) {
        snprintf(why, len,
                 "must be an RFC 3339 time like 2026-12-01T09:30:00Z or 2026-12-01T10:30:00+01:00 "
                 "(years 0000 to 9999, offsets up to 23:59), or Unix seconds");
        return -1;
    }
    if (v / 1000 - jr_wall_ms() > JR_DELAY_MAX_MS) {
        snprintf(why, len, "is more than %s from now (the maximum delay)",
                 jr_duration_format(JR_DELAY_MAX_MS, max, sizeof max));
        return -1;
    }
    *us = v;
    return 0;
}

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

/* Read all of stdin into a malloc'd buffer (NUL-terminated, *len bytes).
 * Returns NULL if memory runs out or reading fails: never a cut payload. */
static char *read_stdin(size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, stdin);
        if (ferror(stdin)) break;
        if (n < cap) { /* end of input */
            buf[n] = '\0';
            *len = n;
            return buf;
        }
        char *b = cap <= SIZE_MAX / 2 - 1 ? realloc(buf, cap * 2 + 1) : NULL;
        if (!b) break;
        buf = b, cap *= 2;
    }
    free(buf);
    return NULL;
}

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

static int run_enqueue(const char *cmd, const flags_t *f, const jr_config_t *cfg, int argc, char **argv) {
    if (argc < 1 || argc > 2) return die(cmd, "%s", "expected HANDLER [PAYLOAD | -]");
    if (f->in && f->at) return die(cmd, "%s", "--in and --at exclude each other");
    jr_enqueue_t job = {.queue = f->queues.n ? f->queues.v[0] : cfg->default_queue, .id = f->id};
    if (f->queues.n > 1) return die(cmd, "%s", "enqueue takes one -q");
    const char *rule;
    if ((rule = jr_contract_queue_name(job.queue, strlen(job.queue))))
        return die2(cmd, "queue name", job.queue, rule);
    if (f->id && (rule = jr_contract_job_id(f->id, strlen(f->id)))) return die2(cmd, "--id", f->id, rule);
    if ((rule = jr_contract_handler_name(argv[0], strlen(argv[0]))))
        return die2(cmd, "handler name", argv[0], rule);
    char why[JR_ERRLEN];
    if (f->in && jr_duration_parse_range(f->in, 0, JR_DELAY_MAX_MS, &job.delay_ms, why, sizeof why))
        return die2(cmd, "--in", f->in, why);
    if (f->at && check_at(f->at, &job.at_us, why, sizeof why)) return die2(cmd, "--at", f->at, why);
    if (f->at && job.at_us <= 0) job.at_us = 1; /* "at the epoch" = now */
    if (f->max) {
        int64_t v;
        if (parse_count(f->max, 1, JR_ATTEMPTS_MAX, &v)) {
            snprintf(why, sizeof why, "must be an integer from 1 to %d", JR_ATTEMPTS_MAX);
            return die2(cmd, "--max-attempts", f->max, why);
        }
        job.env.max_attempts = (uint32_t)v;
    }
    if (f->timeout &&
        jr_duration_parse_range(f->timeout, 1, JR_TIMEOUT_MAX_MS, &job.env.timeout_ms, why, sizeof why))
        return die2(cmd, "--timeout", f->timeout, why);
    if (f->backoff &&
        jr_duration_parse_range(f->backoff, 1, JR_BACKOFF_MAX_MS, &job.env.backoff_ms, why, sizeof why))
        return die2(cmd, "--backoff", f->backoff, why);
    job.env.handler = argv[0];
    job.env.handler_len = strlen(argv[0]);
    job.env.attempt = 1;
    char *buf = NULL;
    if (argc == 2 && strcmp(argv[1], "-") == 0) {
        buf = read_stdin(&job.env.payload_len);
        if (!buf) {
            fprintf(stderr, "jobrunner enqueue: cannot read the payload from stdin: %s\n",
                    ferror(stdin) ? "read error" : "out of memory");
            return 1;
        }
        job.env.payload = buf;
    } else if (argc == 2) {
        job.env.payload = argv[1];
        job.env.payload_len = strlen(argv[1]);
    }
    if (job.env.payload_len > (size_t)cfg->max_payload) {
        fprintf(stderr, "jobrunner enqueue: the payload is %zu bytes, over the limit of %lld (jobs.max_payload)\n",
                job.env.payload_len, (long long)cfg->max_payload);
        free(buf);
        return 1;
    }
    int rc = jr_cmd_enqueue(cfg, &job, stdout);
    free(buf);
    return rc;
}

/* job show|run-now|delete, jobs, cancel. */
static int run_job_command(const char *cmd, const flags_t *f, const jr_config_t *cfg, int argc, char **argv) {
    if (f->queues.n > 1) return die(cmd, "%s", "takes one -q");
    const char *queue = f->queues.n ? f->queues.v[0] : cfg->default_queue;
    if (!strcmp(cmd, "cancel")) {
        if (argc < 1) return die(cmd, "%s", "name one or more job ids");
        return jr_cmd_cancel(cfg, queue, argv, (size_t)argc, stdout);
    }
    if (!strcmp(cmd, "jobs")) {
        int64_t limit = 100;
        if (!f->state) return die(cmd, "%s", "--state delayed|ready|running|dead is required");
        if (f->limit && parse_count(f->limit, 1, 10000, &limit))
            return die2(cmd, "--limit", f->limit, "must be an integer from 1 to 10000");
        return jr_cmd_jobs(cfg, queue, f->state, limit, f->after, f->json, stdout);
    }
    if (argc != 2) return die(cmd, "%s", "expected show|run-now|delete ID");
    const char *sub = argv[0], *id = argv[1];
    const char *rule = jr_contract_stored_id(id, strlen(id));
    if (rule) return die2(cmd, "job id", id, rule);
    if (!strcmp(sub, "show")) return jr_cmd_job_show(cfg, queue, id, f->json, stdout);
    if (f->json) return die(cmd, "%s", "--json applies to job show");
    if (!strcmp(sub, "run-now") || !strcmp(sub, "delete")) return jr_cmd_job_change(cfg, queue, sub, id, stdout);
    return die(cmd, "unknown subcommand \"%s\" (show, run-now or delete)", sub);
}

/* The worker's -q flags, QUEUE[:WEIGHT] each, replace worker.queues.
 * Returns 0, or the usage-error status after saying what was wrong. */
static int worker_queue_flags(const char *cmd, const flags_t *f, jr_config_t *cfg) {
    char (*names)[129] = calloc(f->queues.n, sizeof *names);
    const char **ptrs = calloc(f->queues.n, sizeof *ptrs);
    int64_t *weights = calloc(f->queues.n, sizeof *weights);
    int status = names && ptrs && weights ? 0 : 1;
    char why[JR_ERRLEN];
    for (size_t i = 0; !status && i < f->queues.n; i++) {
        if (jr_queue_weight_parse(f->queues.v[i], names[i], sizeof names[i], &weights[i], why, sizeof why))
            status = die2(cmd, "-q", f->queues.v[i], why);
        for (size_t j = 0; !status && j < i; j++)
            if (!strcmp(names[i], names[j])) status = die2(cmd, "-q", f->queues.v[i], "the queue is given twice");
        ptrs[i] = names[i];
    }
    if (!status && jr_config_set_worker_queues(cfg, ptrs, weights, f->queues.n)) status = 1;
    if (status == 1) fprintf(stderr, "jobrunner %s: %s\n", cmd, jr_strerror(JR_ENOMEM));
    free(names), free(ptrs), free(weights);
    return status;
}

/* `jobrunner cron add|remove|list`: check the arguments, then run it. */
static int run_cron(const char *cmd, const flags_t *f, const jr_config_t *cfg, int argc, char **argv) {
    const char *sub = argc > 0 ? argv[0] : "";
    int add = !strcmp(sub, "add");
    if (!add && (f->cron || f->every || f->tz || f->missed || f->disabled || f->queues.n))
        return die(cmd, "%s", "--cron, --every, --tz, -q, --missed and --disabled go with cron add");
    if (!strcmp(sub, "list")) {
        if (argc > 1) return die(cmd, "unexpected argument \"%s\"", argv[1]);
        return jr_cmd_cron_list(cfg, f->json, stdout);
    }
    if (f->json) return die(cmd, "%s", "--json goes with cron list");
    if (!strcmp(sub, "remove")) {
        if (argc < 2) return die(cmd, "%s", "expected cron remove NAME...");
        return jr_cmd_cron_remove(cfg, argv + 1, (size_t)(argc - 1), stdout);
    }
    if (!add) return die(cmd, "%s", "expected add, remove or list");
    if (argc < 3 || argc > 4) return die(cmd, "%s", "expected cron add NAME (--cron EXPR | --every DURATION) HANDLER [PAYLOAD]");
    if (!f->cron == !f->every) return die(cmd, "%s", "give exactly one of --cron and --every");
    if (f->queues.n > 1) return die(cmd, "%s", "cron add takes one -q");
    jr_cron_def_t d = {.name = argv[1], .handler = argv[2], .payload = argc == 4 ? argv[3] : NULL,
                       .queue = f->queues.n ? f->queues.v[0] : cfg->default_queue, .cron = (char *)f->cron,
                       .tz = (char *)(f->tz ? f->tz : "UTC"), .enabled = !f->disabled};
    char why[JR_ERRLEN];
    if (f->every && jr_duration_parse_range(f->every, JR_CRON_EVERY_MIN_MS, JR_CRON_EVERY_MAX_MS, &d.every_ms, why,
                                            sizeof why))
        return die2(cmd, "--every", f->every, why);
    if (f->missed && strcmp(f->missed, "skip") && strcmp(f->missed, "once"))
        return die2(cmd, "--missed", f->missed, "must be skip or once");
    d.missed = f->missed && !strcmp(f->missed, "once") ? JR_MISSED_ONCE : JR_MISSED_SKIP;
    return jr_cmd_cron_add(cfg, &d, stdout);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        fputs(usage_main, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("jobrunner %s (plugin ABI %d.%d)\n", JR_VERSION, JR_PLUGIN_ABI_MAJOR, JR_PLUGIN_ABI_MINOR);
        return 0;
    }
    /* A long-running process takes SIGTERM/SIGINT as "stop cleanly" from its
     * first moment (a stop sent while it reads its config or plugins is seen
     * by its loop, which then exits 0), not only once its loop starts. */
    if (!strcmp(cmd, "worker") || !strcmp(cmd, "scheduler") || !strcmp(cmd, "dev")) jr_signals_install();
    const char *usage = usage_of(cmd);
    if (!usage) {
        fprintf(stderr, "jobrunner: unknown command \"%s\"\n\n%s", cmd, usage_main);
        return 2;
    }

    flags_t f = {0};
    int opt, status = 2;
    optind = 2;
    opterr = 0;
    /* Options stop at the first operand (a payload may start with '-'),
     * except for dead, functions, job, jobs, cancel and cron, whose subcommand comes first. */
    int permute = !strcmp(cmd, "dead") || !strcmp(cmd, "functions") || !strcmp(cmd, "job") ||
                  !strcmp(cmd, "jobs") || !strcmp(cmd, "cancel") || !strcmp(cmd, "cron");
    const char *optstring = permute ? "c:q:h" : "+c:q:h";
    while ((opt = getopt_long(argc, argv, optstring, long_opts, NULL)) != -1) {
        if (opt == '?' || !flag_allowed(cmd, opt)) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
            for (const struct option *o = long_opts; o->name; o++)
                if (opt != '?' && o->val == opt) snprintf(name, sizeof name, "--%s", o->name);
            status = die(cmd, "unknown or misplaced option \"%s\"", name);
            goto out;
        }
        switch (opt) {
        case 'h': printf("%s\noptions common to every command:\n%s", usage, usage_common); status = 0; goto out;
        case 'c': f.config = optarg; break;
        case OPT_REDIS:
            free(f.redis);
            if (!(f.redis = strdup(optarg))) {
                fprintf(stderr, "jobrunner %s: %s\n", cmd, jr_strerror(JR_ENOMEM));
                status = 1;
                goto out;
            }
            scrub_url_arg(optarg);
            break;
        case 'q':
        case OPT_PLUGIN:
            if (jr_strlist_push(opt == 'q' ? &f.queues : &f.plugins, optarg)) {
                fprintf(stderr, "jobrunner %s: %s\n", cmd, jr_strerror(JR_ENOMEM));
                status = 1;
                goto out;
            }
            break;
        case OPT_IN: f.in = optarg; break;
        case OPT_AT: f.at = optarg; break;
        case OPT_ID: f.id = optarg; break;
        case OPT_MAX: f.max = optarg; break;
        case OPT_TIMEOUT: f.timeout = optarg; break;
        case OPT_JSON: f.json = 1; break;
        case OPT_ORDERS: f.orders = optarg; break;
        case OPT_ALL: f.all = 1; break;
        case OPT_BACKOFF: f.backoff = optarg; break;
        case OPT_METRICS: f.metrics = optarg; break;
        case OPT_CRON: f.cron = optarg; break;
        case OPT_EVERY: f.every = optarg; break;
        case OPT_TZ: f.tz = optarg; break;
        case OPT_MISSED: f.missed = optarg; break;
        case OPT_DISABLED: f.disabled = 1; break;
        case OPT_WATCH: f.watch = 1; break;
        case OPT_ORDER: f.order = optarg; break;
        case OPT_STATE: f.state = optarg; break;
        case OPT_LIMIT: f.limit = optarg; break;
        case OPT_AFTER: f.after = optarg; break;
        default:
            for (size_t i = 0; i < sizeof key_flags / sizeof key_flags[0]; i++)
                if (key_flags[i].opt == opt) f.key_value[i] = optarg;
        }
    }
    for (size_t i = 0; i < f.queues.n; i++)
        if (!jr_queue_name_valid(f.queues.v[i])) {
            status = die2(cmd, "queue name", f.queues.v[i],
                          jr_contract_queue_name(f.queues.v[i], strlen(f.queues.v[i])));
            goto out;
        }
    int pausing = !strcmp(cmd, "pause") || !strcmp(cmd, "resume");
    if (pausing && f.queues.n + (size_t)(argc - optind) != 1) {
        status = die(cmd, "%s", "expected one QUEUE (as -q QUEUE or QUEUE)");
        goto out;
    }
    if (pausing && optind < argc && !jr_queue_name_valid(argv[optind])) {
        status = die2(cmd, "queue name", argv[optind], jr_contract_queue_name(argv[optind], strlen(argv[optind])));
        goto out;
    }
    if (f.order && strcmp(f.order, "weighted") && strcmp(f.order, "strict")) {
        status = die2(cmd, "--order", f.order, "must be weighted or strict");
        goto out;
    }
    if (!pausing && strcmp(cmd, "enqueue") != 0 && strcmp(cmd, "dead") != 0 && strcmp(cmd, "functions") != 0 &&
        strcmp(cmd, "job") != 0 && strcmp(cmd, "cancel") != 0 && strcmp(cmd, "cron") != 0 && optind < argc) {
        char shown[JR_ERRLEN];
        status = die(cmd, "unexpected argument \"%s\"", shown_arg(argv[optind], shown, sizeof shown));
        goto out;
    }

    jr_config_t cfg;
    char err[JR_ERRLEN];
    if (jr_config_init(&cfg) != 0) goto out_of_memory;
    if (!f.config && getenv(JR_CONFIG_ENV_FILE) && *getenv(JR_CONFIG_ENV_FILE))
        f.config = getenv(JR_CONFIG_ENV_FILE);
    if (f.config && jr_config_load_file(&cfg, f.config, err, sizeof err) != 0) {
        fprintf(stderr, "jobrunner: %s\n", err);
        status = 2;
        goto out_cfg;
    }
    if ((status = jr_config_apply_env(&cfg, environ, stderr, err, sizeof err)) != 0) {
        fprintf(stderr, "jobrunner: %s\n", err);
        status = status == JR_ENOMEM ? 1 : 2;
        goto out_cfg;
    }
    status = 2;
    for (size_t i = 0; i < sizeof key_flags / sizeof key_flags[0]; i++) {
        const char *v = f.key_value[i], *name = NULL;
        for (const struct option *o = long_opts; o->name; o++)
            if (o->val == key_flags[i].opt) name = o->name;
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", name);
        int rc = v ? jr_config_set(&cfg, key_flags[i].key, v, err, sizeof err) : 0;
        if (rc == JR_ENOMEM) goto out_of_memory;
        if (rc) {
            status = die2(cmd, flag, v, err);
            goto out_cfg;
        }
    }
    if (f.redis) {
        jr_redis_url_t u;
        if (jr_redis_url_parse(f.redis, &u, err, sizeof err) != 0) {
            status = die(cmd, "--redis: %s", err);
            goto out_cfg;
        }
        jr_redis_url_free(&u);
        free(cfg.redis_url);
        cfg.redis_url = strdup(f.redis);
        if (!cfg.redis_url) goto out_of_memory; /* never fall back to the default URL */
    }
    if (f.metrics) {
        char host[256];
        int port;
        if (jr_metrics_parse_addr(f.metrics, host, sizeof host, &port, err, sizeof err) != 0) {
            status = die(cmd, "--metrics: %s", err);
            goto out_cfg;
        }
        free(cfg.metrics_listen);
        if (!(cfg.metrics_listen = strdup(f.metrics))) goto out_of_memory;
    }
    if (!strcmp(cmd, "worker") && f.queues.n && (status = worker_queue_flags(cmd, &f, &cfg)) != 0) goto out_cfg;
    if (f.order) cfg.worker_order = strcmp(f.order, "strict") ? JR_ORDER_WEIGHTED : JR_ORDER_STRICT;
    jr_strlist_t *qdst = !strcmp(cmd, "scheduler") ? &cfg.scheduler_queues : NULL;
    if (qdst && f.queues.n) {
        jr_strlist_free(qdst);
        for (size_t i = 0; i < f.queues.n; i++)
            if (jr_strlist_push(qdst, f.queues.v[i])) goto out_of_memory;
    }
    if (f.plugins.n) {
        jr_strlist_free(&cfg.plugin_paths);
        for (size_t i = 0; i < f.plugins.n; i++)
            if (jr_strlist_push(&cfg.plugin_paths, f.plugins.v[i])) goto out_of_memory;
    }
    jr_log_setup(cfg.log_format, cfg.log_level, cmd);

    if (!strcmp(cmd, "worker")) {
        jr_registry_t *reg = jr_registry_new();
        if (reg) jr_registry_set_settings(reg, &cfg.plugin_settings);
        status = reg && load_plugins(reg, &cfg) == 0 ? jr_worker_run(&cfg, reg) : 1;
        jr_registry_free(reg);
    } else if (!strcmp(cmd, "scheduler")) {
        status = jr_scheduler_run(&cfg);
    } else if (!strcmp(cmd, "enqueue")) {
        status = run_enqueue(cmd, &f, &cfg, argc - optind, argv + optind);
    } else if (!strcmp(cmd, "stats")) {
        status = jr_cmd_stats(&cfg, &f.queues, f.json, f.watch, stdout);
    } else if (!strcmp(cmd, "workers")) {
        char shown[JR_ERRLEN];
        status = optind < argc ? die(cmd, "unexpected argument \"%s\"", shown_arg(argv[optind], shown, sizeof shown))
                               : jr_cmd_workers(&cfg, f.json, stdout);
    } else if (!strcmp(cmd, "functions")) {
        if (argc - optind != 1 || (strcmp(argv[optind], "load") && strcmp(argv[optind], "dump")))
            status = die(cmd, "%s", "expected load or dump");
        else
            status = jr_cmd_functions(&cfg, argv[optind], stdout);
    } else if (pausing) {
        status = jr_cmd_pause(&cfg, f.queues.n ? f.queues.v[0] : argv[optind], !strcmp(cmd, "pause"), stdout);
    } else if (!strcmp(cmd, "cron")) {
        status = run_cron(cmd, &f, &cfg, argc - optind, argv + optind);
    } else if (!strcmp(cmd, "dead")) {
        if (optind >= argc) {
            status = die(cmd, "%s", "expected list, show, retry or purge");
        } else if (f.queues.n > 1) {
            status = die(cmd, "%s", "dead takes one -q");
        } else if (f.all && optind + 1 < argc) {
            status = die(cmd, "%s", "give job ids or --all, not both");
        } else {
            status = jr_cmd_dead(&cfg, f.queues.n ? f.queues.v[0] : cfg.default_queue, argv[optind],
                                 argv + optind + 1, (size_t)(argc - optind - 1), f.all, f.json, stdout);
        }
    } else if (!strcmp(cmd, "job") || !strcmp(cmd, "jobs") || !strcmp(cmd, "cancel")) {
        status = run_job_command(cmd, &f, &cfg, argc - optind, argv + optind);
    } else { /* dev */
        char self[PATH_MAX], dir[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
        default_jobs_dir(dir, sizeof dir);
        int64_t orders = 12;
        if (f.orders && parse_count(f.orders, 1, 10000, &orders)) {
            status = die2(cmd, "--orders", f.orders, "must be an integer from 1 to 10000");
        } else {
            status = jr_dev_run(&cfg, self, f.plugins.n ? f.plugins.v[0] : dir, (int)orders, f.config);
        }
    }
    goto out_cfg;
out_of_memory:
    fprintf(stderr, "jobrunner %s: %s\n", cmd, jr_strerror(JR_ENOMEM));
    status = 1;
out_cfg:
    jr_config_free(&cfg);
out:
    free(f.redis);
    jr_strlist_free(&f.queues);
    jr_strlist_free(&f.plugins);
    return status;
}
