/* Shared by the files of the Redis layer (redis*.c) only: the connection's
 * state and the helpers every call uses. Not installed, not for callers. */
#ifndef JR_REDIS_INTERNAL_H
#define JR_REDIS_INTERNAL_H

#include <hiredis/hiredis.h>

#include "jr.h"
#include "redis.h"
#include "util.h"

#define REGISTERED_MAX 64

struct jr_tls;

struct jr_redis {
    redisContext *c;
    struct jr_tls *tls;   /* rediss://: the bytes go through this (tls.h); NULL = plain */
    int64_t timeout_us;   /* bound on each non-blocking command */
    redisReply *stash;    /* a reply already parsed by jr_redis_wait */
    int broken;
    char err[JR_ERRLEN];
    char *registered[REGISTERED_MAX]; /* queues this connection registered */
    size_t nregistered;
    long library_kept;    /* a newer library revision found loaded and kept, 0 = none */
    char paused_err[JR_ERRLEN]; /* Redis's refusal of the last read of the paused set, "" = read */
    char resumed_err[JR_ERRLEN]; /* Redis's refusal of the last wait on JR_RESUMED_KEY, "" = waited */
    char registry_err[JR_ERRLEN]; /* the last registration skipped for garbage in the registry (logged) */
    char role[16];        /* jr_redis_opts_t.role ("worker", ...), named in ACL refusals; "" = none */
    int loading;          /* 1 while jr_redis_load_library loads: a refusal then is of the right to load */
    void *scratch;        /* jri_scratch's buffer, kept between calls */
    size_t scratch_cap;
    int wait_replicas;       /* redis.wait_replicas: WAIT for this many after writes; 0 = off */
    int64_t wait_timeout_ms; /* redis.wait_timeout: WAIT's own timeout (> 0) */
    /* redis-sentinel:// only (master[0] == '\0' otherwise): */
    char master[JR_MASTER_NAME_MAX + 1]; /* the master name */
    char primary[300];    /* the primary connected to, "host:port" */
    struct jr_sentinel_sub *sub; /* the sentinels' +switch-master, NULL = none (or broken) */
    int epfd, has_epfd;   /* an epoll set of c->fd and the subscription's: jr_redis_fd */
    /* redis-cluster:// only: the facade over the nodes (cluster.h); c is NULL then */
    struct jr_cluster *cl;
    /* the function library's lock and fence keys; "" = JR_LIB_LOADING_KEY, JR_LIB_FENCE_KEY
       (a cluster's node not serving their slot has its own: cluster.h) */
    char lib_loading[48], lib_fence[48];
};

/* Set the connection's error text and return code; any code but JR_EREDIS
 * (an error reply) also marks the connection broken. An ACL refusal in the
 * text (NOPERM, or a function's "can't run this command") gets what to
 * grant appended: the command, the role, docs/operations.md. */
int jri_fail(jr_redis_t *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* JR_EINVAL with the message in r's error, for a call refused before it
 * sent or appended anything: unlike jri_fail, the connection stays usable
 * (so the caller may append another call in its place). */
int jri_invalid(jr_redis_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append to buf (len bytes), when it quotes an ACL refusal, what was
 * refused and to which role, and what to grant (see redis.c). jri_fail does
 * it for the connection's error; texts kept elsewhere (a job's reason, a
 * refusal noted and carried on from) call it themselves. */
void jri_explain(const jr_redis_t *r, char *buf, size_t len);
/* Append one command (argv, lens NULL = NUL-terminated) without sending. */
int jri_append_argv(jr_redis_t *r, int argc, const char **argv, const size_t *lens);
/* Append commands already formatted (RESP, one or more whole commands in
 * buf[0..len)) without sending. */
int jri_append_formatted(jr_redis_t *r, const char *buf, size_t len);
/* Connect r (zeroed but for its role, timeouts and wait settings) to the
 * node of u (see redis.c); cluster.c's node connections are made by it. */
int jri_node_connect(jr_redis_t *r, const jr_redis_url_t *u, const char *url, const jr_redis_opts_t *o,
                     const char *password, const char *pw_from, char *err, size_t errlen);
/* Read one reply, waiting at most timeout_us (-1 = forever). */
int jri_recv_reply(jr_redis_t *r, redisReply **out, int64_t timeout_us);
/* An error reply: freed, its text kept, JR_EREDIS returned; else 0. */
int jri_reply_error(jr_redis_t *r, redisReply *rep);
/* Run one command and return its reply (caller frees), or an error. */
int jri_exec_argv(jr_redis_t *r, redisReply **out, int argc, const char **argv, const size_t *lens);
/* jri_exec_argv for at most JRI_EXEC_MAX NUL-terminated arguments, ending
 * with NULL (more: JR_EINVAL). */
#define JRI_EXEC_MAX 16
int jri_exec(jr_redis_t *r, redisReply **out, ...);
/* Read n pipelined replies (see redis.c). */
int jri_recv_n(jr_redis_t *r, size_t n, redisReply **last);
/* Stream replies (XRANGE / XREADGROUP / XAUTOCLAIM shapes) into batches. */
int jri_parse_streams(jr_redis_t *r, jr_batch_t *b, redisReply *rep, const char *const *queues, size_t n, uint32_t qi_default);
int jri_fill_streams(jr_redis_t *r, jr_batch_t *b, redisReply *rep, const char *const *queues, size_t n, uint32_t qi_default);
int jri_count_streams(jr_redis_t *r, const redisReply *rep, size_t *entries, size_t *strs);
int jri_batch_reserve(jr_batch_t *b, size_t entries, size_t strs);
void jri_batch_reset(jr_batch_t *b);
int jri_batch_of_entries(jr_redis_t *r, const char *key, redisReply *rep, jr_batch_t *b);
/* Copy a string reply (or "") into dst, truncated to len - 1 bytes. */
void jri_copy_str(char *dst, size_t len, const redisReply *e);
/* A buffer of at least `size` bytes (aligned for any type), owned by the
 * connection and reused by the next call: for the arguments of one command
 * being formatted (a bulk enqueue formats ~1 MB per 1,000 jobs; allocating
 * it per call costs page faults). NULL (and the error set) if out of memory. */
void *jri_scratch(jr_redis_t *r, size_t size);
/* HMGET of JR_PAUSED_KEY for queues, and its reply into paused[] (a
 * refusal: none paused, see jr_redis_paused_refused). */
int jri_append_paused(jr_redis_t *r, const char *const *queues, size_t n);
int jri_recv_paused(jr_redis_t *r, size_t n, unsigned char *paused);

#endif
