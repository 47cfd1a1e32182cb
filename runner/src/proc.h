/* Process plumbing shared by the long-running commands: stop signals and
 * connecting to Redis with retries. */
#ifndef JR_PROC_H
#define JR_PROC_H

#include "config.h"
#include "redis.h"

/* Route SIGTERM and SIGINT to a self-pipe (and ignore SIGPIPE). Returns the
 * pipe's read end, to poll next to Redis sockets, or -1. */
int jr_signals_install(void);
/* How many stop signals have arrived (the second one means "now"). */
int jr_signals_count(void);
/* Empty the self-pipe after it polled readable. */
void jr_signals_drain(void);

/* Sleep up to ms, returning early (1) if a stop signal arrives. */
int jr_sleep_interruptible(int64_t ms);

/* The Redis URL to use: the configured one or the default. */
const char *jr_config_redis_url(const jr_config_t *cfg);
/* The same with any password masked, for logs; returns buf. */
const char *jr_config_redis_url_shown(const jr_config_t *cfg, char *buf, size_t len);

/* The role this process connects as ("worker", "scheduler", "cli"; named in
 * Redis's refusals, see jr_redis_opts_t.role). Set once by main, before any
 * connect; a static string. */
void jr_proc_set_role(const char *role);

/* How this process reaches Redis, from the configuration (the strings point
 * into cfg, the role is jr_proc_set_role's). redis.wait_replicas and
 * redis.wait_timeout are filled in for every role but "scheduler". */
void jr_config_redis_opts(const jr_config_t *cfg, jr_redis_opts_t *o);

/* Connect once, load the Function library (logging at INFO when Redis
 * already holds a newer revision, which is then used) and warn if the
 * server may evict keys. NULL with a message in err on failure. */
jr_redis_t *jr_connect_once(const jr_config_t *cfg, char *err, size_t errlen);

/* Connect to Redis, load the Function library and warn if the server may
 * evict keys. Retries with capped exponential backoff (100 ms doubling to
 * 5 s; 1 s through Sentinel: jr_reconnect_cap_ms), logging each failure, until it succeeds or a stop signal arrives
 * (then returns NULL; one that arrived during an attempt is seen when it
 * fails: a cluster attempt takes at most about the connect timeout). */
jr_redis_t *jr_connect_retry(const jr_config_t *cfg);

/* The longest wait between two tries to connect (a backoff's cap): 1 s
 * through Sentinel (a process reaches the new primary within the failover
 * time + 1 s), 5 s otherwise. */
int64_t jr_reconnect_cap_ms(const jr_config_t *cfg);

/* ---- process titles (what ps shows) ---------------------------------------
 * jr_proc_title_init, once, first thing in main: takes over the memory of
 * argv and the environment strings after it (the environment is copied to
 * the heap first, so getenv and environ keep working). Then jr_proc_title
 * (once argv[1..] is no longer read: it overwrites them) sets the command
 * line that /proc/PID/cmdline and `ps -o args` show: in argv's memory,
 * and only for a title longer than that in the environment's after it too
 * (then /proc/PID/environ no longer shows the environment the process
 * started with); cut to that memory, NUL-padded. And the
 * 15-byte name of `ps -o comm`, `top` and /proc/PID/comm
 * (prctl PR_SET_NAME): "jobrunner-work", "jobrunner-run", "jobrunner-sched",
 * all starting with "jobrunner" so `pgrep jobrunner` still finds them
 * (comm NULL: left as it is). When the init failed (out of memory) the
 * command line stays as it was. */
void jr_proc_title_init(int argc, char **argv);
void jr_proc_title(const char *comm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Consumer name for this process: "<hostname>-<pid>". */
void jr_consumer_name(char *buf, size_t len);

#endif
