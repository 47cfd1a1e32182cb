/* The command table and the option table: every command with its help
 * line, usage text, options and run function. main() is driven by these
 * (see cli.h); the run functions live in the files of their group. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "jr_limits.h"

const jr_cli_option_t jr_cli_options[JR_O_COUNT] = {
    [JR_O_CONFIG] = {"config", 'c', 1, NULL},
    [JR_O_REDIS] = {"redis", 0, 1, NULL},
    [JR_O_QUEUE] = {"queue", 'q', 1, NULL},
    [JR_O_PLUGIN] = {"plugin", 0, 1, NULL},
    [JR_O_IN] = {"in", 0, 1, NULL},
    [JR_O_AT] = {"at", 0, 1, NULL},
    [JR_O_ID] = {"id", 0, 1, NULL},
    [JR_O_JSON] = {"json", 0, 0, NULL},
    [JR_O_MAX] = {"max-attempts", 0, 1, NULL},
    [JR_O_TIMEOUT] = {"timeout", 0, 1, NULL},
    [JR_O_ORDERS] = {"orders", 0, 1, NULL},
    [JR_O_ALL] = {"all", 0, 0, NULL},
    [JR_O_BACKOFF] = {"backoff", 0, 1, NULL},
    [JR_O_METRICS] = {"metrics", 0, 1, NULL},
    [JR_O_CONCURRENCY] = {"concurrency", 0, 1, "worker.concurrency"},
    [JR_O_LOG_LEVEL] = {"log-level", 0, 1, "log.level"},
    [JR_O_LOG_FORMAT] = {"log-format", 0, 1, "log.format"},
    [JR_O_WAIT] = {"wait", 0, 1, "redis.wait"},
    [JR_O_STATE] = {"state", 0, 1, NULL},
    [JR_O_LIMIT] = {"limit", 0, 1, NULL},
    [JR_O_AFTER] = {"after", 0, 1, NULL},
    [JR_O_ORDER] = {"order", 0, 1, NULL},
    [JR_O_CRON] = {"cron", 0, 1, NULL},
    [JR_O_EVERY] = {"every", 0, 1, NULL},
    [JR_O_TZ] = {"tz", 0, 1, NULL},
    [JR_O_MISSED] = {"missed", 0, 1, NULL},
    [JR_O_DISABLED] = {"disabled", 0, 0, NULL},
    [JR_O_WATCH] = {"watch", 0, 0, NULL},
    [JR_O_KEY] = {"key", 0, 1, NULL},
    [JR_O_PARTITIONS] = {"partitions", 0, 0, NULL},
    [JR_O_HANDLER] = {"handler", 0, 1, NULL},
    [JR_O_MATCH] = {"match", 0, 1, NULL},
    [JR_O_YES] = {"yes", 0, 0, NULL},
    [JR_O_WIDE] = {"wide", 0, 0, NULL},
    [JR_O_ALL_QUEUES] = {"all-queues", 0, 0, NULL},
    [JR_O_LISTEN] = {"listen", 0, 1, NULL},
    [JR_O_HELP] = {"help", 'h', 0, NULL},
};

const char jr_cli_usage_head[] =
    "usage: jobrunner COMMAND [OPTIONS]\n"
    "\n"
    "A reliable job runner on Redis Streams.\n"
    "\n"
    "commands:\n";

const char jr_cli_usage_tail[] =
    "\n"
    "Run 'jobrunner COMMAND --help' for a command's options, 'man jobrunner' for all.\n"
    "\n"
    "Settings: defaults < config file (-c FILE, or JOBRUNNER_CONFIG) < environment\n"
    "(JOBRUNNER_<SECTION>_<KEY>, e.g. JOBRUNNER_WORKER_CONCURRENCY=8) < flags.\n"
    "\n"
    "Exit status: 0 ok; 1 failure, explained on stderr; 2 usage or configuration error.\n";

const char jr_cli_usage_common[] =
    "  -c, --config FILE   YAML configuration (see config/jobrunner.yaml)\n"
    "      --redis URL     redis://[[user:]password@]host:port[/db] or unix:///path\n"
    "                      or redis-sentinel://host:port[,host:port...]/MASTER\n"
    "                      or redis-cluster://host:port[,host:port...]\n"
    "                      (rediss://... over TLS: see redis.tls in the file)\n"
    "                      (overrides the file and JOBRUNNER_REDIS_URL)\n"
    "      --wait DURATION wait up to DURATION for Redis to answer (e.g. right after\n"
    "                      it starts) instead of failing at once (redis.wait, default 0;\n"
    "                      workers and schedulers always wait)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Every configuration key can also be set by JOBRUNNER_<SECTION>_<KEY> (see\n"
    "jobrunner(1)). Exit status: 0 ok; 1 failure, explained on stderr; 2 usage or\n"
    "configuration error.\n";

_Static_assert(JR_DELAY_MAX_MS == 87600 * 3600 * 1000LL && JR_TIMEOUT_MAX_MS == 168 * 3600 * 1000LL &&
                   JR_BACKOFF_MAX_MS == 720 * 3600 * 1000LL && JR_ATTEMPTS_MAX == 1000,
               "the maxima in the usage of enqueue");

const jr_cli_cmd_t jr_cli_commands[] = {
    {.name = "worker",
     .role = "worker",
     .summary = "run jobs from queues through plugin handlers",
     .usage =
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
         "      --log-format FMT  text or json (log.format)\n",
     .options = JR_OPT(JR_O_QUEUE) | JR_OPT(JR_O_ORDER) | JR_OPT(JR_O_METRICS) | JR_OPT(JR_O_PLUGIN) |
                JR_OPT(JR_O_CONCURRENCY) | JR_OPT(JR_O_LOG_LEVEL) | JR_OPT(JR_O_LOG_FORMAT),
     .mode = JR_CMD_SIGNALS,
     .check = jr_cli_worker_check,
     .run = jr_cli_worker},
    {.name = "scheduler",
     .role = "scheduler",
     .summary = "move delayed jobs into their queue when they fall due",
     .usage =
         "usage: jobrunner scheduler [-c FILE] [--redis URL] [-q QUEUE]...\n"
         "\n"
         "Promote delayed jobs into their queue's stream when due. Without -q, serve\n"
         "every queue ever enqueued to. Any number of schedulers may run at once.\n"
         "\n"
         "  -q, --queue QUEUE   a queue to serve (repeatable)\n"
         "      --metrics ADDR  serve /metrics and /healthz on HOST:PORT (metrics.listen)\n"
         "      --log-level LEVEL debug, info, warn or error (log.level)\n"
         "      --log-format FMT  text or json (log.format)\n",
     .options = JR_OPT(JR_O_QUEUE) | JR_OPT(JR_O_METRICS) | JR_OPT(JR_O_LOG_LEVEL) | JR_OPT(JR_O_LOG_FORMAT),
     .mode = JR_CMD_SIGNALS,
     .run = jr_cli_scheduler},
    {.name = "enqueue",
     .summary = "add a job (now, after a delay, or at a time)",
     .usage =
         "usage: jobrunner enqueue [-c FILE] [--redis URL] [-q QUEUE] [--in DURATION | --at TIME]\n"
         "                         [--id ID] [--key KEY] HANDLER [PAYLOAD | -]\n"
         "\n"
         "Enqueue a job and print its id. PAYLOAD '-' reads it from standard input.\n"
         "\n"
         "  -q, --queue QUEUE   the queue (default: 'default')\n"
         "      --in DURATION   run after a delay: 250ms, 30s, 5m, 2h, 1h30m (at most 87600h = 10 years)\n"
         "      --at TIME       run at a time: RFC 3339 (2026-12-01T09:30:00.250Z) or Unix seconds\n"
         "                      (at most 10 years from now)\n"
         "      --id ID         the job's id; enqueueing the same id again does nothing\n"
         "      --key KEY       a partitioned queue: the partition follows from KEY (one key's jobs\n"
         "                      stay in one partition, in order); not stored\n"
         "      --max-attempts N  attempts before the job is dead, 1-1000 (default: the handler's)\n"
         "      --timeout DURATION  per-attempt time limit, at most 168h = 7 days (default: the handler's)\n"
         "      --backoff DURATION  first retry delay ceiling, doubling per attempt, at most 720h = 30 days\n"
         "                          (default: the handler's)\n",
     .options = JR_OPT(JR_O_QUEUE) | JR_OPT(JR_O_IN) | JR_OPT(JR_O_AT) | JR_OPT(JR_O_ID) | JR_OPT(JR_O_MAX) |
                JR_OPT(JR_O_TIMEOUT) | JR_OPT(JR_O_BACKOFF) | JR_OPT(JR_O_KEY),
     .mode = JR_CMD_OPERANDS,
     .run = jr_cli_enqueue},
    {.name = "stats",
     .summary = "show ready, pending, delayed and dead counts per queue",
     .usage =
         "usage: jobrunner stats [-c FILE] [--redis URL] [-q QUEUE]... [--json] [--watch] [--partitions] [--wide]\n"
         "\n"
         "Per queue: ready (waiting for a worker), pending (running or unacknowledged),\n"
         "delayed (waiting for their due time), dead; processed (succeeded) and failed\n"
         "(failed attempts) totals, jobs per second over the last minute, how long the\n"
         "oldest ready job has waited, and whether it is paused. Without -q, every\n"
         "registered queue.\n"
         "\n"
         "  -q, --queue QUEUE   a queue to show (repeatable)\n"
         "      --json          print one JSON object: {\"queues\": [{\"queue\", \"ready\", ...}]}\n"
         "      --watch         redraw every second until Ctrl-C\n"
         "      --partitions    a partitioned queue's row (the sums) is followed by one per partition\n"
         "                      (JSON: its \"partitions\" array)\n"
         "      --wide          every cell whole (on a terminal a table fits 80 columns or\n"
         "                      $COLUMNS, long names and texts cut, ending in an ellipsis)\n",
     .options = JR_OPT(JR_O_QUEUE) | JR_OPT(JR_O_JSON) | JR_OPT(JR_O_WATCH) | JR_OPT(JR_O_PARTITIONS) | JR_OPT(JR_O_WIDE),
     .mode = 0,
     .run = jr_cli_stats},
    {.name = "dead",
     .summary = "list, show, retry or purge dead jobs",
     .usage =
         "usage: jobrunner dead list|show|retry|purge [-c FILE] [--redis URL] [-q QUEUE] [ID... | --all]\n"
         "       jobrunner dead retry|purge [-q QUEUE] --handler H [--match TEXT] [--yes]\n"
         "\n"
         "Jobs that failed permanently, ran out of attempts, crashed their worker too often\n"
         "(poison) or could not be read are kept in the queue's dead-letter stream.\n"
         "\n"
         "  list [ID...]        one line per dead job (--json: all fields)\n"
         "  show ID...          every field of the named jobs\n"
         "  retry ID...|--all   enqueue them again, attempts reset\n"
         "  purge ID...|--all   delete them (delete: the same)\n"
         "  -q, --queue QUEUE   the queue (default: 'default')\n"
         "      --all           every dead job of the queue\n"
         "      --handler H     retry, purge: every dead job of handler H ...\n"
         "      --match TEXT    ... (or of any handler) whose payload bytes contain TEXT\n"
         "      --yes           do it without asking (needed when stdin is not a terminal)\n"
         "      --json          list, show: print one JSON array, an object per dead job\n"
         "                      (text that is not UTF-8 as {\"base64\": ...})\n"
         "      --wide          every cell whole (on a terminal a table fits 80 columns or\n"
         "                      $COLUMNS, long names and texts cut, ending in an ellipsis)\n",
     .options = JR_OPT(JR_O_QUEUE) | JR_OPT(JR_O_ALL) | JR_OPT(JR_O_JSON) | JR_OPT(JR_O_HANDLER) | JR_OPT(JR_O_MATCH) |
                JR_OPT(JR_O_YES) | JR_OPT(JR_O_WIDE),
     .mode = JR_CMD_PERMUTE | JR_CMD_OPERANDS,
     .run = jr_cli_dead},
    {.name = "workers",
     .summary = "list the live workers and schedulers",
     .usage =
         "usage: jobrunner workers [-c FILE] [--redis URL] [--json] [--wide]\n"
         "\n"
         "The live workers and schedulers: name (a worker's consumer name), role, host,\n"
         "pid, queues ('*' = every registered queue), version, start time, jobs running\n"
         "(of a worker: running/capacity, capacity = worker.concurrency) and how long ago\n"
         "it last refreshed its entry. A process is listed within a\n"
         "moment of starting, until it exits, or for at most worker.lease after it dies.\n"
         "\n"
         "      --json          print JSON\n"
         "      --wide          every cell whole (on a terminal a table fits 80 columns or\n"
         "                      $COLUMNS, long names and texts cut, ending in an ellipsis)\n",
     .options = JR_OPT(JR_O_JSON) | JR_OPT(JR_O_WIDE),
     .mode = 0,
     .run = jr_cli_workers},
    {.name = "web",
     .summary = "serve the dashboard: queues, jobs, workers, schedules (HTTP)",
     .usage =
         "usage: jobrunner web [-c FILE] [--redis URL] [--listen ADDR]\n"
         "\n"
         "Serve the dashboard and its JSON API (docs/web-api.md) until SIGTERM or SIGINT.\n"
         "An address other than 127.0.0.1, ::1 or localhost is refused unless web.password\n"
         "is set (HTTP Basic; put a TLS proxy in front). web.read_only: true hides every\n"
         "action.\n"
         "\n"
         "      --listen ADDR   HOST:PORT, [IPV6]:PORT or :PORT (web.listen, default 127.0.0.1:8080)\n",
     .options = JR_OPT(JR_O_LISTEN),
     .mode = JR_CMD_SIGNALS,
     .role = "cli",
     .run = jr_cli_web},
    {.name = "functions",
     .summary = "load the Redis function library (for producers), or print it",
     .usage =
         "usage: jobrunner functions load|dump [-c FILE] [--redis URL]\n"
         "\n"
         "Producers in other languages call the library's functions (FCALL jr_enqueue ...),\n"
         "which Redis only has once a jobrunner process has loaded them.\n"
         "\n"
         "  load                load the library into Redis now (only if missing or different)\n"
         "  dump                print the library, e.g. for redis-cli -x FUNCTION LOAD REPLACE\n",
     .options = 0,
     .mode = JR_CMD_PERMUTE | JR_CMD_OPERANDS,
     .run = jr_cli_functions},
    {.name = "job",
     .summary = "show, run-now, delete or wait for one job by its id, or run-now/delete every job a filter passes",
     .usage =
         "usage: jobrunner job show|run-now|delete [-c FILE] [--redis URL] [-q QUEUE] ID [--key KEY] [--json]\n"
         "       jobrunner job wait [-c FILE] [--redis URL] [-q QUEUE] ID [--timeout DURATION] [--json]\n"
         "       jobrunner job show --all-queues ID [--json]\n"
         "       jobrunner job run-now|delete [-q QUEUE] --state delayed|retrying|dead --handler H\n"
         "                 [--match TEXT] [--yes]\n"
         "\n"
         "  show ID      where the job is: delayed (due at), retrying (attempt, due at), ready,\n"
         "               running (consumer, idle, deliveries), dead (why, error), finished (its\n"
         "               record: outcome, result, ..., with keep_finished) or not found, with its\n"
         "               fields; exit 0 found, 1 not\n"
         "  run-now ID   a delayed or retrying job becomes ready now\n"
         "  delete ID    remove a waiting or dead job (a running one: use cancel)\n"
         "  wait ID      block until the job has finished, then print its outcome (ok, failed,\n"
         "               cancelled), result and error; exit 0 ok, 1 failed, cancelled or unknown\n"
         "               (never there, or finished before the wait without keep_finished),\n"
         "               3 timeout\n"
         "  -q, --queue QUEUE   the queue (default: 'default')\n"
         "      --key KEY       the key a partitioned queue's job with an explicit id was enqueued with\n"
         "      --json          show, wait: print one JSON object\n"
         "      --timeout DURATION  wait: give up after this long (default: no limit)\n"
         "      --all-queues    show: look for the id in every registered queue (by id, no scan)\n"
         "      --state STATE   a bulk: every job in STATE (delayed, retrying or dead; run-now of a\n"
         "                      dead job retries it) ...\n"
         "      --handler H     ... of handler H ...\n"
         "      --match TEXT    ... (or of any handler) whose payload bytes contain TEXT\n"
         "      --yes           do the bulk without asking (needed when stdin is not a terminal)\n",
     .options = JR_OPT(JR_O_QUEUE) | JR_OPT(JR_O_JSON) | JR_OPT(JR_O_KEY) | JR_OPT(JR_O_STATE) | JR_OPT(JR_O_HANDLER) |
                JR_OPT(JR_O_MATCH) | JR_OPT(JR_O_YES) | JR_OPT(JR_O_ALL_QUEUES) | JR_OPT(JR_O_TIMEOUT),
     .mode = JR_CMD_PERMUTE | JR_CMD_OPERANDS,
     .run = jr_cli_job},
    {.name = "jobs",
     .summary = "list a page of the jobs in one state",
     .usage =
         "usage: jobrunner jobs [-c FILE] [--redis URL] [-q QUEUE] --state delayed|ready|running|dead|finished\n"
         "                      [--limit N] [--after CURSOR] [--handler H] [--match TEXT] [--json] [--wide]\n"
         "\n"
         "A page of the queue's jobs in one state, oldest first (delayed: by due time,\n"
         "jobs due 2 s or more after they were written by the second of their due time;\n"
         "finished: the records keep_finished keeps, newest first), and the cursor of the\n"
         "next page.\n"
         "\n"
         "  -q, --queue QUEUE   the queue (default: 'default')\n"
         "      --limit N       jobs per page, 1-10000 (default 100)\n"
         "      --after CURSOR  the cursor a previous page printed\n"
         "      --handler H     show the page's jobs of handler H only ...\n"
         "      --match TEXT    ... (or of any handler) whose payload bytes contain TEXT\n"
         "                      (the page is read as without them: its cursor goes on from it)\n"
         "      --json          print one JSON object {\"queue\", \"state\", \"jobs\": [...], \"next\"}\n"
         "      --wide          every cell whole (on a terminal a table fits 80 columns or\n"
         "                      $COLUMNS, long names and texts cut, ending in an ellipsis)\n",
     .options = JR_OPT(JR_O_QUEUE) | JR_OPT(JR_O_STATE) | JR_OPT(JR_O_LIMIT) | JR_OPT(JR_O_AFTER) | JR_OPT(JR_O_JSON) |
                JR_OPT(JR_O_HANDLER) | JR_OPT(JR_O_MATCH) | JR_OPT(JR_O_WIDE),
     .mode = JR_CMD_PERMUTE,
     .run = jr_cli_jobs},
    {.name = "cancel",
     .summary = "cancel jobs by id (waiting: removed; running: flagged)",
     .usage =
         "usage: jobrunner cancel [-c FILE] [--redis URL] [-q QUEUE] [--key KEY] ID...\n"
         "\n"
         "Cancel jobs. A delayed, retrying or ready job is removed (its id stays taken\n"
         "until its idempotency window ends): 'ID cancelled'. A running job is flagged:\n"
         "its handler sees api->cancelled within about a second, and when it ends it is\n"
         "not retried: 'ID running'. Otherwise 'ID not found'. Exit 0 when every id was\n"
         "found.\n"
         "\n"
         "  -q, --queue QUEUE   the queue (default: 'default')\n"
         "      --key KEY       the key a partitioned queue's jobs with explicit ids were enqueued with\n",
     .options = JR_OPT(JR_O_QUEUE) | JR_OPT(JR_O_KEY),
     .mode = JR_CMD_PERMUTE | JR_CMD_OPERANDS,
     .run = jr_cli_cancel},
    {.name = "pause",
     .summary = "stop workers taking jobs from a queue",
     .usage =
         "usage: jobrunner pause [-c FILE] [--redis URL] [-q] QUEUE\n"
         "\n"
         "Stop every worker taking new jobs from QUEUE (within 100 ms; running jobs\n"
         "finish, fetched jobs not yet started go back to the queue). Jobs can still be\n"
         "enqueued, and delayed jobs still fall due into it. The state is kept in Redis\n"
         "until 'jobrunner resume'.\n",
     .options = JR_OPT(JR_O_QUEUE),
     .mode = JR_CMD_OPERANDS,
     .check = jr_cli_pause_check,
     .run = jr_cli_pause},
    {.name = "resume",
     .summary = "let workers take jobs from a paused queue again",
     .usage =
         "usage: jobrunner resume [-c FILE] [--redis URL] [-q] QUEUE\n"
         "\n"
         "Let workers take jobs from a paused QUEUE again.\n",
     .options = JR_OPT(JR_O_QUEUE),
     .mode = JR_CMD_OPERANDS,
     .check = jr_cli_pause_check,
     .run = jr_cli_pause},
    {.name = "queue",
     .summary = "show or set the number of partitions of a queue, or remove an empty queue",
     .usage =
         "usage: jobrunner queue partitions [-c FILE] [--redis URL] QUEUE [N]\n"
         "       jobrunner queue remove [-c FILE] [--redis URL] QUEUE\n"
         "\n"
         "remove: delete the keys and the registration of QUEUE, refused (naming what it\n"
         "holds) unless it holds no job and no live worker or scheduler names it.\n"
         "\n"
         "A queue of N partitions keeps its jobs in N internal queues, each in its own\n"
         "slot of a Redis Cluster, placed evenly over the slots (docs/operations.md,\n"
         "\"Partitioned queues\"). Without N, print QUEUE's count. N is 1 (not partitioned)\n"
         "to 1024; it can change only while the queue holds no job (ready, running,\n"
         "delayed, retrying or dead). Workers and schedulers follow within 10 s.\n",
     .options = 0,
     .mode = JR_CMD_PERMUTE | JR_CMD_OPERANDS,
     .run = jr_cli_queue},
    {.name = "cron",
     .summary = "add, remove, enable, disable, fire or list periodic schedules",
     .usage =
         "usage: jobrunner cron add NAME (--cron EXPR | --every DURATION) [--tz ZONE] [-q QUEUE]\n"
         "                          [--missed skip|once] [--disabled] HANDLER [PAYLOAD]\n"
         "       jobrunner cron remove|enable|disable NAME...\n"
         "       jobrunner cron fire NAME\n"
         "       jobrunner cron list [--json] [--wide]\n"
         "\n"
         "Periodic schedules live in Redis; every running scheduler fires them, each tick\n"
         "exactly once, as a job with id NAME@TICK (the tick in Unix ms).\n"
         "\n"
         "  enable, disable     let the schedulers fire it, or not (a schedule of a scheduler's\n"
         "                      configuration is written again as configured when it starts)\n"
         "  fire NAME           one job of it now, id NAME@fire-<Unix us> (never a tick's id)\n"
         "  --cron EXPR         5 fields (min hour day-of-month month day-of-week) or 6 (seconds\n"
         "                      first); *, N, N-M, lists, /STEP, JAN..DEC, SUN..SAT, @daily, @hourly...\n"
         "  --every DURATION    a fixed interval from 1s (ticks at multiples of it since the epoch)\n"
         "  --tz ZONE           an IANA zone for --cron (default UTC), e.g. Europe/Berlin\n"
         "  -q, --queue QUEUE   the queue of the jobs (default: 'default')\n"
         "  --missed skip|once  after all schedulers were down: fire nothing (skip, default)\n"
         "                      or one job for the latest missed tick (once)\n"
         "  --disabled          store it without firing it\n"
         "  --json              list: print {\"schedules\": [...]}\n"
         "  --wide              list: one whole row per schedule (on a terminal the table fits 80\n"
         "                      columns or $COLUMNS: the zone's times and the last job go under it)\n",
     .options = JR_OPT(JR_O_QUEUE) | JR_OPT(JR_O_CRON) | JR_OPT(JR_O_EVERY) | JR_OPT(JR_O_TZ) | JR_OPT(JR_O_MISSED) |
                JR_OPT(JR_O_DISABLED) | JR_OPT(JR_O_JSON) | JR_OPT(JR_O_WIDE),
     .mode = JR_CMD_PERMUTE | JR_CMD_OPERANDS,
     .run = jr_cli_cron},
    {.name = "dev",
     .summary = "run the demo: private Redis, scheduler, workers, example shop",
     .usage =
         "usage: jobrunner dev [-c FILE] [--redis URL] [--orders N] [--plugin DIR]\n"
         "\n"
         "The demo. Without a configured Redis, starts a private redis-server on a unix\n"
         "socket; starts a scheduler and two workers; places N orders (default 12), each\n"
         "with an order_autoclose job due 3-6 s later, pays some of them, and shows the\n"
         "unpaid ones being closed. Stops everything it started and exits.\n",
     .options = JR_OPT(JR_O_ORDERS) | JR_OPT(JR_O_PLUGIN),
     .mode = JR_CMD_SIGNALS,
     .run = jr_cli_dev},
    {.name = "version", .summary = "print the version", .mode = JR_CMD_BARE, .run = jr_cli_version},
    {0}};


const jr_cli_cmd_t *jr_cli_find(const char *name) {
    for (const jr_cli_cmd_t *c = jr_cli_commands; c->name; c++)
        if (!strcmp(c->name, name)) return c;
    return NULL;
}

void jr_cli_usage(FILE *out) {
    fputs(jr_cli_usage_head, out);
    for (const jr_cli_cmd_t *c = jr_cli_commands; c->name; c++) fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fputs(jr_cli_usage_tail, out);
}
