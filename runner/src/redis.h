/* The Redis layer: connections, the Function library, and what every call
 * shares. One typed call per operation jobrunner performs, split by
 * subsystem: redis_produce.h (enqueue, one job by id), redis_worker.h,
 * redis_sched.h, redis_admin.h. hiredis types never leave redis*.c
 * (redis_internal.h is for those files only).
 *
 * All I/O goes through poll() with our own deadlines, so a blocking command
 * (XREADGROUP BLOCK, XREAD BLOCK) can be waited on with a precise client-side timer
 * and interrupted by a signal pipe, and a slow reply never kills the context
 * the way a hiredis socket timeout does. Any transport error leaves the
 * connection broken (jr_redis_ok() == 0): the caller frees it and reconnects.
 * A rediss:// connection moves its bytes through tls.h (OpenSSL) on the same
 * socket, with the same timeouts and the same meaning of jr_redis_fd()
 * readable; nothing above this layer differs. */
#ifndef JR_REDIS_H
#define JR_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "contract.h"
#include "envelope.h"

typedef struct jr_redis jr_redis_t;

/* The key names, the envelope's field names, JR_QUEUE_MAX, JR_KEY_MAX and
 * JR_ID_MAX are in contract.h (included by envelope.h). */
#define JR_GROUP "jr"

/* Connect to `url` (see jr_redis_url_parse), authenticate (AUTH [user]
 * password; without a password, a PING checks that none is needed) and
 * select the db. `timeout_ms` bounds the connect and every non-blocking
 * command. Returns NULL with a message in err if that fails; the password is
 * never in it, Redis's own error text always is ("Redis at URL refused the
 * password for user "u" (WRONGPASS ...)", "... requires a password
 * (NOAUTH ...)"). */
jr_redis_t *jr_redis_connect(const char *url, int64_t timeout_ms, char *err, size_t errlen);

/* How to reach Redis: the URL and what a URL cannot say. Zero it and set
 * what you need: each field's zero is its default. The strings are read
 * during jr_redis_open only (not kept). */
typedef struct jr_redis_tls {
    const char *ca_file, *ca_dir;     /* the CAs that sign the server; NULL = the system's */
    const char *cert_file, *key_file; /* a client certificate (mutual TLS); NULL = none */
    const char *server_name;          /* the name checked in the server's certificate; NULL = the URL's host */
    int no_verify;                    /* 1 = do not verify the server (redis.tls.verify: false) */
} jr_redis_tls_t;
typedef struct jr_redis_opts {
    const char *url;               /* see jr_redis_url_parse; NULL = JR_DEFAULT_REDIS_URL */
    int64_t timeout_ms;            /* bounds the connect and every non-blocking command; 0 = 2000 */
    const char *role;              /* who connects ("worker", "scheduler", "cli", "producer"): named in
                                      refusals (ACL); NULL = none named */
    const char *password;          /* used when the URL has none; NULL = none */
    const char *password_file;     /* a file holding the password (redis.password_file), read at each
                                      open; its one trailing newline is not part of it; NULL = none */
    const char *sentinel_password; /* redis-sentinel:// only: the sentinels' own password; NULL = none */
    jr_redis_tls_t tls;            /* rediss:// only */
    int wait_replicas;             /* > 0: writes that must survive a failover wait for this many
                                      replicas (redis.wait_replicas); 0 = off */
    int64_t wait_timeout_ms;       /* redis.wait_timeout; 0 = 1000 */
} jr_redis_opts_t;

/* jr_redis_connect with everything a configuration can say (o->url and
 * o->timeout_ms as jr_redis_connect's url and timeout_ms). A password may
 * come from one place only: the URL, o->password or o->password_file (two
 * of them: refused, naming them). An unreadable or empty password file is
 * refused naming the file, never showing its content.
 *
 * A redis-sentinel:// URL: the sentinels are asked in turn for the primary
 * of its master (each within the timeout; o->sentinel_password their own),
 * the primary is connected to over plain TCP (TLS to a primary found
 * through the sentinels is not supported) with the URL's user and db and
 * the password from where it came, and ROLE must say master (else the
 * sentinels are asked again until the timeout: one may not have seen a
 * failover yet). The connection then follows a failover by breaking
 * (jr_redis_ok() == 0, so the caller reconnects, through the sentinels
 * again): on a READONLY or MASTERDOWN reply, and on a +switch-master of its
 * master heard from a sentinel while waiting in this layer (a reply,
 * jr_redis_wait, or a poll of jr_redis_fd). Errors name the URL (password
 * hidden), each sentinel tried and why it failed ("no sentinel knows master
 * NAME"). */
jr_redis_t *jr_redis_open(const jr_redis_opts_t *o, char *err, size_t errlen);

/* Process-wide: called once per failover this process follows (its first
 * connection to reach a primary of a master other than the one it was
 * connected to), with the master name and both primaries ("host:port").
 * The layer has no logger: the program and the client library set one
 * that logs "following the failover of master NAME: FROM -> TO". NULL =
 * none. Set it before connecting (it is not locked). */
void jr_redis_on_failover(void (*fn)(const char *master, const char *from, const char *to));
void jr_redis_free(jr_redis_t *r);

/* Bound every later non-blocking command by timeout_ms (> 0) instead of the
 * connect timeout. */
void jr_redis_set_timeout(jr_redis_t *r, int64_t timeout_ms);

/* The last error on this connection ("" if none). */
const char *jr_redis_errstr(const jr_redis_t *r);
/* 1 while the connection is usable; 0 after a transport error. */
int jr_redis_ok(const jr_redis_t *r);

/* Make sure Redis has the embedded function library. Writes nothing (works
 * in an out-of-memory Redis) when Redis holds our code already. Otherwise
 * line 2 of the code ("-- jobrunner: contract C, revision R.") decides:
 * missing, an older revision, or other code of our revision -> FUNCTION LOAD
 * REPLACE ours; a newer revision of our contract -> kept (it serves us: a
 * contract only grows), see jr_redis_library_kept; a newer contract ->
 * JR_EPROTO, this process is too old. The check and the load run under the
 * lock key jr:{lib}:loading (SET NX PX 10 s), so an older process starting
 * beside a newer one never replaces the newer library. Errors carry Redis's
 * text. */
int jr_redis_load_library(jr_redis_t *r);
/* The newer revision jr_redis_load_library found and kept, or 0. */
long jr_redis_library_kept(const jr_redis_t *r);
/* Parse line 2 of a library's code. 0, or -1 when it has no such line. */
int jr_lua_revision(const char *code, size_t len, long *contract, long *revision);

/* ---- durability (redis.wait_replicas, redis.wait_timeout) ----------------
 * Redis replicates asynchronously: a write the primary confirmed can vanish
 * with it in a failover. With wait_replicas N > 0 (jr_redis_opts_t), the
 * callers that must not lose a write (enqueue, the worker's results) append
 * WAIT N timeout right after it, in the same write, and read its reply
 * after theirs: one more reply, not one more round trip. WAIT counts the
 * replicas that acknowledged every write this connection made so far. */

/* The ranges of redis.wait_replicas and redis.wait_timeout (also the
 * client library's wait_replicas and wait_timeout_ms). */
#define JR_WAIT_REPLICAS_MAX 100
#define JR_WAIT_TIMEOUT_MAX_MS 60000

/* N of this connection (0 = off). */
int jr_redis_wait_replicas(const jr_redis_t *r);
/* Append (not send) WAIT N wait_timeout_ms when N > 0. Returns 1 if
 * appended, 0 when off, or an error. */
int jr_redis_append_wait(jr_redis_t *r);
/* Read the reply of jr_redis_append_wait, waiting for it up to the command
 * timeout plus wait_timeout_ms. *acked (may be NULL) = the replicas that
 * confirmed. Returns 0 when at least N did; JR_EREPLICAS when fewer did
 * (r's error then says "confirmed by only K of N replica(s) within T ms"; the
 * connection stays usable); JR_EREDIS when Redis refused WAIT (its text);
 * or a transport error. */
int jr_redis_recv_wait(jr_redis_t *r, long long *acked);

/* 1 if r is a connection to a Redis Cluster (redis-cluster://): a call
 * then reaches one slot, so a caller that writes to several queues splits
 * its work per queue (see outbox.c for follow-ups). */
int jr_redis_is_cluster(const jr_redis_t *r);

/* 1 if err (a reply's error text, or a message quoting one, as an
 * enqueue's reason "queue Q: Redis refused 1 job: ...") is how a cluster
 * connection answers a command for a primary it cannot reach ("CLUSTERDOWN
 * node HOST:PORT unreachable: why", cluster.c): that shard is down, the
 * others are not, and nothing was sent. Pure. */
int jr_redis_node_down(const char *err);

/* CLIENT ID of this connection / CLIENT UNBLOCK another one. */
int jr_redis_client_id(jr_redis_t *r, long long *id);
int jr_redis_unblock(jr_redis_t *r, long long client_id);

/* CONFIG GET maxmemory-policy into buf ("" if not readable). On a Redis
 * Cluster, of every primary: the first one that is not noeviction, with
 * its node ("allkeys-lru (node HOST:PORT)"), else "" (a primary that
 * cannot be reached, or refuses CONFIG GET, is not looked at). */
int jr_redis_maxmemory_policy(jr_redis_t *r, char *buf, size_t len);

/* The keys of a queue (jr_qkeys_t, jr_qkeys) and the registry's keys:
 * contract.h. */

/* Wait until a reply can be read, `timeout_us` passes (-1 = forever), or
 * `extra_fd` (-1 = none) becomes readable. Returns JR_WAIT_* or an error. */
enum { JR_WAIT_TIMEOUT = 0, JR_WAIT_READY = 1, JR_WAIT_EXTRA = 2 };
int jr_redis_wait(jr_redis_t *r, int64_t timeout_us, int extra_fd);

/* The connection's socket, to poll() next to other fds, and whether a
 * reply is already buffered (then poll would not report it). Through
 * Sentinel the fd is an epoll set of the socket and the subscription to
 * the sentinels: readable for a reply or for their message; the read that
 * follows hears the message (a failover: the connection breaks), and
 * jr_redis_has_reply says 1 for one already there. */
int jr_redis_fd(const jr_redis_t *r);
int jr_redis_has_reply(jr_redis_t *r);

/* A batch of stream entries read by XREADGROUP. Pointers stay valid until
 * the next jr_redis_recv_read or jr_batch_free on the batch. */
typedef struct jr_entry {
    uint32_t queue; /* index into the queues given to send_read */
    const char *id; /* stream entry id */
    size_t nfields;
    int odd; /* 1 if the entry had an odd number of field/value items */
    const char *const *names, *const *values;
    const size_t *name_lens, *value_lens;
} jr_entry_t;
typedef struct jr_batch {
    jr_entry_t *v;
    size_t n, cap;
    const char **strs; /* storage behind names/values */
    size_t *lens;
    size_t nstrs, strcap;
    void *reply; /* owned */
    void **more; /* further replies owned (jr_redis_read_each) */
    size_t nmore, morecap;
} jr_batch_t;
void jr_batch_free(jr_batch_t *b);
/* Send everything appended. */
int jr_redis_flush(jr_redis_t *r);
/* Read one reply expected to be an integer (or an error reply -> JR_EREDIS). */
int jr_redis_recv_int(jr_redis_t *r, long long *v);

/* Read the entries of a stream (oldest first, at most count; 0 = all) into
 * *b, as a batch of queue index 0. */
int jr_redis_xrange(jr_redis_t *r, const char *key, int64_t count, jr_batch_t *b);
#define JR_PROC_NAME_MAX 128

/* XRANGE key start end COUNT count (0 = all) into *b (queue index 0). */
int jr_redis_xrange_between(jr_redis_t *r, const char *key, const char *start, const char *end, int64_t count,
                            jr_batch_t *b);

/* Redis's clock (TIME) in Unix ms, with the microseconds. */
int jr_redis_time_ms(jr_redis_t *r, double *ms);

#endif
