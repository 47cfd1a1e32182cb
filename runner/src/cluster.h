/* Redis Cluster behind one jr_redis_t (redis-cluster://, rediss-cluster://):
 * for the files of the Redis layer only (redis*.c), like redis_internal.h.
 *
 * A cluster connection is a facade: r->cl set, r->c NULL. The transport
 * functions of redis.c (jri_append_argv, jri_append_formatted,
 * jr_redis_flush, jri_recv_reply, jr_redis_wait, jr_redis_fd,
 * jr_redis_has_reply, jr_redis_ok, jr_redis_load_library) hand a facade to
 * the jrc_ functions here, so every typed call of redis_*.c works unchanged
 * and nothing above this layer learns about shards. Each node is reached
 * by a plain jr_redis_t made by the same node connect (AUTH, TLS, timeouts)
 * as any other connection. See docs/operations.md, "Redis Cluster". */
#ifndef JR_CLUSTER_H
#define JR_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "redis_internal.h"
#include "util.h"

#define JR_CLUSTER_SLOTS 16384

struct jr_cluster;

/* (jr_crc16, the CRC16 of the Cluster spec, is in partition.h.) */
/* The slot of a key: the CRC16 of its hash tag (what lies between the
 * first '{' and the first '}' after it, when that is not empty) or of the
 * whole key, mod 16384. Pure. */
int jr_cluster_key_slot(const char *key, size_t len);

/* Discover the cluster of u (u->is_cluster) into r (r->cl set): ask the
 * seeds in turn, then the nodes this process learnt earlier, for CLUSTER
 * SLOTS; a node connection is made only when a command needs that node.
 * o, password and pw_from as node_connect takes them; they are copied (a
 * node may be connected to later). The whole of it (every node asked, and
 * the home node's connection) takes at most r->timeout_us, the connect
 * timeout: the nodes not asked by then are named "not tried". 0, or -1
 * with err naming the URL and each node tried and why. */
int jrc_open(jr_redis_t *r, const jr_redis_url_t *u, const char *url, const jr_redis_opts_t *o,
             const char *password, const char *pw_from, char *err, size_t errlen);
void jrc_free(struct jr_cluster *cl);

/* The transport of a facade (redis.c's functions of the same meaning). */
int jrc_append(jr_redis_t *r, const char *cmd, size_t len);
int jrc_flush(jr_redis_t *r);
int jrc_recv(jr_redis_t *r, redisReply **out, int64_t timeout_us);
int jrc_wait(jr_redis_t *r, int64_t timeout_us, int extra_fd);
int jrc_fd(const jr_redis_t *r);
int jrc_has_reply(jr_redis_t *r);

/* Run fn(node, arg) on a connection to every primary of the slot map,
 * each node's lock and fence keys of the function library set
 * (jr:{lib}:... on the node that serves that slot, jr:{lib.K}:... on the
 * others, K the first number whose slot the node serves). A primary that
 * cannot be reached is skipped (logged; it is down for the facade, see
 * docs/operations.md "Redis Cluster"). Stops at the first other error,
 * copied into r's error (naming the node). */
int jrc_each_primary(jr_redis_t *r, int (*fn)(jr_redis_t *node, void *arg), void *arg);

#endif
