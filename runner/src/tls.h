/* TLS for the Redis layer (rediss://), with OpenSSL: the transport of a
 * connection whose bytes are encrypted. Used by redis.c only.
 *
 * The design: hiredis keeps formatting commands (into its output buffer)
 * and parsing replies (its reader); jobrunner moves the bytes. hiredis 0.14
 * has no TLS, but all socket I/O of the Redis layer is in redis.c
 * (jr_redis_flush writes, jri_recv_reply reads, poll() waits), so for a TLS
 * connection those calls write the output buffer with SSL_write and feed
 * what SSL_read decrypts to the reader, on hiredis's own socket (connected
 * by hiredis, then the handshake here). No thread, no socketpair, no extra
 * copy: the plain path is unchanged but for one pointer test.
 *
 * The rule that keeps poll() on the socket true: OpenSSL's read-ahead stays
 * off (it reads one record at a time) and after each read the caller keeps
 * reading while jr_tls_pending() > 0, so no decrypted byte waits inside
 * OpenSSL while the socket is idle; a record not yet complete is still
 * partly in the socket, which stays readable until it is. The socket is
 * non-blocking; a read or write that needs the other direction (a TLS 1.3
 * key update) waits for it with poll(). OpenSSL writes with write(): a
 * peer gone raises SIGPIPE, which every jobrunner process ignores and the
 * client library blocks during each call (client.c).
 *
 * One SSL_CTX per connection (the CA, the client certificate): connections
 * are made at start and on reconnect only, so its cost is not per job. */
#ifndef JR_TLS_H
#define JR_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "redis.h"

typedef struct jr_tls jr_tls_t;

/* Make the TLS handshake on the connected socket fd (made non-blocking),
 * within timeout_us. The server's certificate is verified unless
 * o->no_verify: against o->ca_file / o->ca_dir, or the system's CAs when
 * neither is given, and for the name o->server_name, else `host` (an IP
 * literal is checked as an IP address, a name also sent as SNI). With
 * o->cert_file (and o->key_file, or the key in the same file) the client
 * presents its certificate. Returns NULL with the reason in err (a file
 * that cannot be read, with its key and path; an untrusted, expired,
 * not-yet-valid or misnamed certificate; a server that does not answer
 * TLS). fd stays the caller's (jr_tls_free does not close it). */
jr_tls_t *jr_tls_connect(int fd, const char *host, const jr_redis_tls_t *o, int64_t timeout_us, char *err,
                         size_t errlen);

/* Write from buf[0..len): the count written (> 0; fewer than len is
 * possible, write the rest next), waiting for the socket as long as it
 * takes (as a blocking write does). < 0 with the reason in err: the
 * connection is unusable. */
ssize_t jr_tls_write(jr_tls_t *t, const void *buf, size_t len, char *err, size_t errlen);

/* Read what is decrypted into buf: the count (> 0), 0 when nothing is
 * there yet (wait for the socket readable), or < 0 with the reason in err
 * (closed; an alert from the server, e.g. a client certificate it wants:
 * with TLS 1.3 that refusal arrives here, at the first read). Never waits
 * for data; see the rule above about jr_tls_pending. */
ssize_t jr_tls_read(jr_tls_t *t, void *buf, size_t cap, char *err, size_t errlen);

/* Decrypted bytes held inside OpenSSL: read them before polling. */
int jr_tls_pending(const jr_tls_t *t);

/* Free (no close_notify is sent: nothing waits on a peer that may be gone);
 * NULL is fine. */
void jr_tls_free(jr_tls_t *t);

#endif
