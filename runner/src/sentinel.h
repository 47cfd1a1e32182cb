/* Redis Sentinel, for the connection layer (redis.c) only: asking the
 * sentinels of a redis-sentinel:// URL where the primary of a master is,
 * and a subscription to their +switch-master channel, so that a connection
 * hears of a failover while it waits (see jr_redis_open and
 * docs/operations.md, "Sentinel"). hiredis types stay inside sentinel.c. */
#ifndef JR_SENTINEL_H
#define JR_SENTINEL_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Ask the sentinels of u (u->is_sentinel) in turn, starting with number
 * `first` (0-based, wrapping), for the primary of master u->master
 * (SENTINEL get-master-addr-by-name); each sentinel is given timeout_ms to
 * connect, authenticate (AUTH password when password is not NULL) and
 * answer. Returns 0 with the primary in host (at most hostlen - 1 bytes)
 * and *port, the sentinel that answered in *which; or JR_EIO with `why`
 * naming every sentinel tried and why it gave no address ("127.0.0.1:26379:
 * Connection refused; 127.0.0.1:26380: does not know master m") and, when
 * every sentinel reached said it does not know the master, ending with
 * "no sentinel knows master NAME". */
int jr_sentinel_ask(const jr_redis_url_t *u, const char *password, int64_t timeout_ms, size_t first, char *host,
                    size_t hostlen, int *port, size_t *which, char *why, size_t whylen);

/* A subscription to one sentinel's +switch-master channel. */
typedef struct jr_sentinel_sub jr_sentinel_sub_t;

/* Subscribe on sentinel number `which` of u, or on the next ones when it
 * cannot be reached (each within timeout_ms). NULL when none could be
 * subscribed to (then a failover is still followed on a broken connection
 * or a READONLY reply). */
jr_sentinel_sub_t *jr_sentinel_subscribe(const jr_redis_url_t *u, size_t which, const char *password,
                                         int64_t timeout_ms);
/* Its socket, to poll() for readable. */
int jr_sentinel_sub_fd(const jr_sentinel_sub_t *s);
/* Read, without waiting, what the sentinel sent. Returns 1 when one of the
 * messages was a +switch-master of `master`, with its new primary
 * ("host:port") in `to`; 0 when none was; -1 when the subscription broke
 * (free it: a failover is still followed the other ways). */
int jr_sentinel_sub_read(jr_sentinel_sub_t *s, const char *master, char *to, size_t tolen);
void jr_sentinel_sub_free(jr_sentinel_sub_t *s);

/* Remember, for this process, that master's primary is now `addr`. Returns
 * 1 with the primary remembered before in `from` when it was another one
 * (a failover this process follows: reported once, by the first of its
 * connections to reach the new primary), else 0. Thread-safe. */
int jr_sentinel_note_primary(const char *master, const char *addr, char *from, size_t fromlen);

/* "host:port", an IPv6 host in brackets. */
void jr_sentinel_addr_format(const char *host, int port, char *out, size_t outlen);

#endif
