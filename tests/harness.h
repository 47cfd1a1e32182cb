/* Test support: a real redis-server per test on a unix socket in a fresh
 * temp dir, and jobrunner processes run as they would be by a user. Every
 * process started here is stopped by pid; each also gets PR_SET_PDEATHSIG so
 * nothing outlives a test process that crashed. */
#ifndef JRT_HARNESS_H
#define JRT_HARNESS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "redis.h"
#include "redis_admin.h"
#include "redis_produce.h"

typedef struct jrt_redis {
    pid_t pid;
    char dir[64];   /* temp dir holding the socket, logs and files of the test */
    char sock[128];
    char url[192];  /* unix://... (or a cluster URL, see jrt_cluster_t) */
} jrt_redis_t;

/* Start redis-server (extra args, NULL-terminated, may be NULL) and wait
 * until it answers PING. Fails the test if it cannot. */
void jrt_redis_start(jrt_redis_t *r, const char *const *extra);
/* Kill it (SIGKILL, like a crash or power loss) and start it again on the
 * same socket and dir, with the same extra args. */
void jrt_redis_restart(jrt_redis_t *r, const char *const *extra);
/* Stop it by pid and remove the temp dir. Safe if never started. */
void jrt_redis_stop(jrt_redis_t *r);
/* A hiredis connection to it (fails the test if impossible). */
redisContext *jrt_connect(const jrt_redis_t *r);
/* Run a command, expect an integer reply, return it. */
long long jrt_int(redisContext *c, const char *fmt, ...);
/* Run a command of NUL-terminated words (a NULL ends the list; any number
 * of them) on c; fails the test if the connection breaks. The caller frees
 * the reply. */
redisReply *jrt_cmd(redisContext *c, const char *first, ...);
/* The integer field `field` of INFO `section`, read over c (no new
 * connection); fails the test if Redis does not answer or has no such field. */
long long jrt_info_int(redisContext *c, const char *section, const char *field);
/* jrt_redis_start(r, NULL), then point the record plugin at <dir>/record.txt
 * (its path into record; JRT_RECORD set to it). */
void jrt_start_recorded(jrt_redis_t *r, char *record, size_t len);
/* Write <dir>/jobrunner.yaml: the Redis URL, then the `extra` YAML; its path
 * into path. Returns path. */
const char *jrt_config(const jrt_redis_t *r, const char *extra, char *path, size_t len);
/* Calls of Redis command `cmd` (lower case) so far, INFO commandstats (0 if none). */
long long jrt_calls(const jrt_redis_t *r, const char *cmd);

/* Start the jobrunner program with args (NULL-terminated), stdout and stderr
 * appended to `log` (a path, or NULL for /dev/null). Returns the pid. */
pid_t jrt_spawn(const char *log, const char *const *args);
/* Run the jobrunner program to completion with args, capturing stdout into
 * out (NUL-terminated, truncated to outlen) and stderr into err (may be
 * NULL). Returns its exit status (or -1 if it was killed). */
int jrt_run(char *out, size_t outlen, char *err, size_t errlen, const char *const *args);
/* Send sig to pid and wait up to timeout_ms for it to exit; SIGKILL after.
 * Returns the exit status, 128+signal if killed by one, -1 if it had to be
 * SIGKILLed. */
int jrt_stop(pid_t pid, int sig, int timeout_ms);

/* Write `text` to DIR/name (DIR = the test's temp dir); path into out. */
void jrt_write(const jrt_redis_t *r, const char *name, const char *text, char *out, size_t outlen);
/* Count occurrences of needle in a file. */
int jrt_count(const char *path, const char *needle);

/* Read a whole file (malloc'd, NUL-terminated; "" if missing). */
char *jrt_slurp(const char *path);
/* The line "ACL SETUSER <user> ..." of docs/operations.md's text `doc`
 * (ACL users per role): a pointer into doc, its length into *len; fails
 * the test if there is none. */
const char *jrt_doc_acl(const char *doc, const char *user, size_t *len);
/* Number of lines in a file (0 if missing). */
size_t jrt_lines(const char *path);
/* Wait until path has at least n lines, up to timeout_ms. Returns the count. */
size_t jrt_wait_lines(const char *path, size_t n, int timeout_ms);

/* A jobrunner connection to r with the function library loaded (fails the
 * test if impossible). */
jr_redis_t *jrt_jr_connect(const jrt_redis_t *r);
/* The counts of one queue (fails the test on an error). */
jr_qstats_t jrt_stats(const jrt_redis_t *r, const char *queue);
/* Wait up to timeout_ms until queue has nothing ready, pending or delayed
 * and at least `dead` dead; returns its counts as last read. */
jr_qstats_t jrt_wait_settled(const jrt_redis_t *r, const char *queue, long long dead, int timeout_ms);

/* The dead entry of job `id` in `queue`, as "field=value;..." into out
 * (empty if none; truncated to len). */
void jrt_dead_entry(const jrt_redis_t *r, const char *queue, const char *id, char *out, size_t len);

int64_t jrt_wall_us(void);
void jrt_sleep_ms(int ms);

/* Every delayed job of queue q, both tiers: the sorted set jr:{q}:delayed
 * and the time-wheel buckets jr:{q}:wheel:<start> (decoded by a Lua EVAL).
 * An array reply [id, due ms (3 decimals), "z"|"w", ...]: the sorted set by
 * due time, then the buckets in order. Free it with freeReplyObject. */
redisReply *jrt_delayed_all(redisContext *c, const char *q);
/* How many delayed jobs queue q has: ZCARD jr:{q}:delayed + jr:{q}:wheel:n. */
long long jrt_delayed_count(redisContext *c, const char *q);

/* The frame most integration test files share, as statics of the file: a
 * fresh Redis per test (jrt_redis_t R), the record plugin's file (char
 * record[]: R.dir/record.txt, JRT_RECORD set to it), a path for the config
 * file (char cfgpath[], for jrt_config) and the worker's log (char wlog[]:
 * R.dir/worker.log); then TestSuite(suite, ...) with the setup that makes
 * them and the teardown that stops Redis and removes R.dir. */
#define JRT_RECORDED_SUITE(suite, ...)                                       \
    static jrt_redis_t R;                                                    \
    static char record[192], cfgpath[192] __attribute__((unused)),           \
        wlog[192] __attribute__((unused));                                   \
    static void setup(void) {                                                \
        jrt_start_recorded(&R, record, sizeof record);                       \
        snprintf(wlog, sizeof wlog, "%s/worker.log", R.dir);                 \
    }                                                                        \
    static void teardown(void) { jrt_redis_stop(&R); }                       \
    TestSuite(suite, .init = setup, .fini = teardown, __VA_ARGS__)

/* ---- shared helpers of the test files ---------------------------------- */

/* DIR/name (DIR = r's temp dir), in one of 8 static buffers used in turn:
 * valid until 8 more calls. */
const char *jrt_path(const jrt_redis_t *r, const char *name);

/* Start `jobrunner worker` for r: `-c cfg` (cfg NULL: `--redis <r's URL>`),
 * `--plugin plugin` (NULL: JRT_RECORD_PLUGIN), then the args of `extra`
 * (NULL-terminated; NULL for none), output appended to log (NULL:
 * /dev/null). Returns the pid, as jrt_spawn. */
pid_t jrt_worker(const jrt_redis_t *r, const char *cfg, const char *plugin, const char *log,
                 const char *const *extra);
/* Start `jobrunner scheduler` for r with `-c cfg` (cfg NULL: `--redis
 * <r's URL>`), output appended to log (NULL: /dev/null). */
pid_t jrt_scheduler(const jrt_redis_t *r, const char *cfg, const char *log);

/* A job of `handler` with `payload` (may be NULL: none) on `queue`,
 * attempt 1, every other field zero (the defaults); the strings are not
 * copied. */
jr_enqueue_t jrt_job(const char *queue, const char *handler, const char *payload);
/* Enqueue jobs[0..n) through jobrunner's C API: one jr_redis_enqueue on a
 * new connection to r; their ids into ids (may be NULL). Fails the test if
 * any is refused or Redis fails. */
void jrt_enqueue_jobs(const jrt_redis_t *r, const jr_enqueue_t *jobs, size_t n, char (*ids)[JR_ID_MAX]);
/* Enqueue n copies of `job` (as jrt_enqueue_jobs). */
void jrt_enqueue(const jrt_redis_t *r, jr_enqueue_t job, size_t n, char (*ids)[JR_ID_MAX]);
/* Enqueue with the CLI: `jobrunner enqueue`, `-c cfg` (cfg NULL: `--redis
 * <r's URL>`), then args (NULL-terminated). Fails the test (with its
 * stderr) unless it exits 0; the id it prints, its first line, into id
 * (may be NULL; truncated to len). */
void jrt_cli_enqueue(const jrt_redis_t *r, const char *cfg, const char *const *args, char *id, size_t len);
/* Run the jobrunner CLI with args (NULL-terminated, up to 29), `--redis
 * <r's URL>` put after the command's words (two for `job` and `cron`, else
 * one), stdout into out (NULL: discarded). Logs a warning with its stderr
 * when it exits other than 0 or 1. Returns its exit status, as jrt_run. */
int jrt_cli(const jrt_redis_t *r, char *out, size_t len, const char *const *args);
/* Run jobrunner with args; fails the test (naming args[0] and args[1] and
 * printing stdout and stderr) unless it exits `want`. Its stdout into out
 * (NULL: discarded). */
void jrt_run_expect(int want, char *out, size_t len, const char *const *args);

/* Redis's clock (TIME), Unix ms. Fails the test if it cannot be read. */
long long jrt_redis_ms(redisContext *c);
/* A TCP port of 127.0.0.1 that was free a moment ago (bound with port 0,
 * read, closed). */
int jrt_free_port(void);

/* GET path from 127.0.0.1:port (HTTP/1.0, a 10 s receive timeout): the
 * status (-1 if no connection or no complete answer) and the body
 * (malloc'd, or NULL) into *body. */
int jrt_http_get(int port, const char *path, char **body);
/* `method` path to 127.0.0.1:port with the extra header lines `headers`
 * (each ending in \r\n; may be NULL) and the body `body` (NULL: none;
 * sent with its Content-Length), HTTP/1.0, a 10 s receive timeout: the
 * status and body as jrt_http_get. */
int jrt_http_request(int port, const char *method, const char *path, const char *headers, const char *body,
                     char **resp);
/* The status of the HTTP/1.x response in text, -1 if it is none or has no
 * end of headers; its body (malloc'd) into *body unless -1. */
int jrt_http_status(const char *text, char **body);
/* Read an HTTP response from fd to its end (EOF or a read error), or until
 * deadline_us (Unix us; 0: none, the reads block) passes, then its status
 * and body as jrt_http_status. Does not close fd. */
int jrt_http_read(int fd, int64_t deadline_us, char **body);

/* Runs in a record file's text (lines "<id> <attempt> <start us>
 * <payload>", record_job.c): the lines whose first word is id and, if
 * payload is not NULL, whose payload is `payload` (entry ids repeat across
 * queues; the payload tells them apart). jrt_runs_of reads the file. */
int jrt_runs_in(const char *text, const char *id, const char *payload);
int jrt_runs_of(const char *path, const char *id, const char *payload);

/* The job ids of the runs in a record file (the first word of each line;
 * at most max lines), sorted (jrt_cmp_str): pointers into *text, the file
 * read (malloc'd: the caller frees the array and *text). *n = how many;
 * *distinct = how many different. */
char **jrt_record_ids(const char *path, size_t max, char **text, size_t *n, size_t *distinct);
/* strcmp for qsort and bsearch over an array of char *. */
int jrt_cmp_str(const void *a, const void *b);

/* Call done(arg) until it returns non-zero, sleeping step_ms between
 * calls, for as long as the sleeps add up to timeout_ms (the calls' own time
 * not counted, so a loaded machine waits longer, never shorter). Returns 1
 * if done said so, 0 on timeout. */
int jrt_wait_for(int timeout_ms, int step_ms, int (*done)(const void *arg), const void *arg);
/* Wait (jrt_wait_for, every 50 ms) until state_of(queue, id), a test's
 * reading of a job's state, is `state`. 1 if it became so, 0 on timeout. */
int jrt_wait_state(const char *(*state_of)(const char *queue, const char *id), const char *queue, const char *id,
                   const char *state, int timeout_ms);
/* Wait (sleeps of 20 ms adding up to timeout_ms) until the file at path
 * holds needle at least n times. Returns the count last seen. */
int jrt_wait_count(const char *path, const char *needle, int n, int timeout_ms);

/* ---- environment of the processes started next ------------------------- */

/* Append `option` ("name=value") to ASAN_OPTIONS (of this process, so of the
 * processes it starts next). */
void jrt_asan_option(const char *option);
/* Skew the wall clock (CLOCK_REALTIME) of the processes started next by
 * `skew` (libfaketime's syntax: "+30s", "-90s"); CLOCK_MONOTONIC stays
 * true. libfaketime is preloaded straight into them (the faketime(1)
 * wrapper would fork: the test must signal the jobrunner process itself),
 * and ASan told not to mind that it is not first. skew NULL undoes it all,
 * ASAN_OPTIONS back to what it was. Fails the test if libfaketime is not
 * installed. */
void jrt_skew_env(const char *skew);
/* jrt_spawn with the wall clock skewed by `skew` (NULL: not skewed). */
pid_t jrt_spawn_skewed(const char *skew, const char *log, const char *const *args);


/* ---- TLS (test_tls) ----------------------------------------------------- */

/* Make a test CA and certificates with the openssl CLI in r->dir (made
 * here, as jrt_redis_start does): ca.crt/ca.key; server.crt/server.key for
 * IP 127.0.0.1 and DNS localhost; client.crt/client.key signed by the CA;
 * expired.crt and future.crt (the server's key, validity in the past / in
 * the future, made under faketime); other.key (a key of no certificate).
 * Then start redis-server with its unix socket (r->url, for the harness's
 * own looks) plus a plain TCP port and a TLS port on 127.0.0.1, and
 * `--tls-auth-clients auth_clients` ("no", "yes", "optional"). Their URLs
 * into plain_url ("redis://127.0.0.1:P") and tls_url
 * ("rediss://127.0.0.1:P"), each of 64 bytes. */
void jrt_redis_start_tls(jrt_redis_t *r, const char *auth_clients, char *plain_url, char *tls_url);

/* ---- Redis Cluster (test_cluster and the cluster scenarios) ------------- */

#define JRT_CLUSTER_MAX 9
/* A cluster of real redis-server processes on 127.0.0.1 ports (cluster bus
 * on port + 10000), each with its dir, log and nodes file under dir. Nodes
 * 0..primaries-1 start as the primaries (slots split evenly by redis-cli
 * --cluster create), the rest as their replicas. */
typedef struct jrt_cluster {
    int n, primaries;
    pid_t pid[JRT_CLUSTER_MAX];
    int port[JRT_CLUSTER_MAX];
    char dir[64];
    char url[192];                      /* redis-cluster://127.0.0.1:p0,127.0.0.1:p1,... (every node) */
    const char *const *extra;            /* the extra redis-server args given to start (kept for restart) */
    /* jrt_cluster_start_tls only (tls 0 otherwise): every node also listens
     * on tls_port[i] (the cluster bus and replication over TLS too, bus on
     * tls_port + 10000); port[i] stays plain, for the harness's looks. */
    int tls;
    int tls_port[JRT_CLUSTER_MAX];
    char tls_url[192]; /* rediss-cluster://127.0.0.1:t0,... (every node's TLS port) */
    char ca[128];      /* the CA file that signs the nodes' certificate (IP 127.0.0.1) */
} jrt_cluster_t;
/* Start primaries (1..) with replicas_each replicas each (n = primaries x
 * (1 + replicas_each) <= JRT_CLUSTER_MAX), extra redis-server args
 * (NULL-terminated, may be NULL; e.g. "--cluster-node-timeout", "1000";
 * the default node timeout here is 2000 ms), create the cluster and wait
 * until every node says cluster_state:ok and each replica is in sync.
 * Fails the test if it cannot. */
void jrt_cluster_start(jrt_cluster_t *c, int primaries, int replicas_each, const char *const *extra);
/* jrt_cluster_start with TLS on every node (the test CA of
 * jrt_redis_start_tls in dir, no client certificate asked): clients over
 * TLS learn the TLS ports from CLUSTER SLOTS. */
void jrt_cluster_start_tls(jrt_cluster_t *c, int primaries, int replicas_each, const char *const *extra);
/* The cluster as the helpers taking a jrt_redis_t see a Redis (jrt_cli,
 * jrt_worker, jrt_config, ...): dir, and url = c's URL (the TLS one if the
 * cluster has TLS); no socket, no pid. */
void jrt_cluster_view(const jrt_cluster_t *c, jrt_redis_t *v);
/* Stop every node by pid and remove dir. Safe if never started. */
void jrt_cluster_stop(jrt_cluster_t *c);
/* SIGKILL node i (a crash); jrt_cluster_restart starts it again with its
 * nodes file (it rejoins, as a replica if it was failed over). */
void jrt_cluster_kill(jrt_cluster_t *c, int i);
void jrt_cluster_restart(jrt_cluster_t *c, int i);
/* A hiredis connection to node i (fails the test if impossible). */
redisContext *jrt_cluster_connect(const jrt_cluster_t *c, int i);
/* The node (index) that is the primary of key's slot now, as node `ask`
 * (any live node) sees it; -1 if none. */
int jrt_cluster_primary_of(const jrt_cluster_t *c, int ask, const char *key);
/* 1 once every live node says cluster_state:ok and agrees on which node
 * serves each slot, within timeout_ms; else 0. */
int jrt_cluster_wait_ok(const jrt_cluster_t *c, int timeout_ms);

#endif
