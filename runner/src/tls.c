/* TLS for the Redis layer: see tls.h. */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jr.h"
#include "util.h"

struct jr_tls {
    SSL_CTX *ctx;
    SSL *ssl;
    int fd;
    /* The first certificate verification refused, for the message. */
    int cert_asked; /* the server asked for a client certificate and we have none */
    int read_any;   /* a read gave data: the server took the connection */
    int bad_depth;
    char bad_subject[256], bad_not_before[64], bad_not_after[64];
};

/* OpenSSL's reasons queued in this thread, "a; b", emptied; "" if none. */
static void ssl_reasons(char *buf, size_t len) {
    size_t w = 0;
    buf[0] = '\0';
    unsigned long e;
    while ((e = ERR_get_error()) != 0) {
        const char *why = ERR_reason_error_string(e);
        char code[32];
        if (!why) snprintf(code, sizeof code, "error %lu", e), why = code;
        if (w < len) w += (size_t)snprintf(buf + w, len - w, "%s%s", w ? "; " : "", why);
    }
}

/* An ASN1 time as text ("Dec  2 03:00:00 2026 GMT"). */
static void asn1_time(const ASN1_TIME *t, char *buf, size_t len) {
    buf[0] = '\0';
    BIO *b = BIO_new(BIO_s_mem());
    if (!b) return;
    if (t && ASN1_TIME_print(b, t)) {
        int n = BIO_read(b, buf, (int)len - 1);
        buf[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
}

/* Keep what the first refused certificate was, for the message. */
static int verify_cb(int ok, X509_STORE_CTX *x) {
    if (ok) return ok;
    SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
    jr_tls_t *t = ssl ? SSL_get_app_data(ssl) : NULL;
    X509 *cert = X509_STORE_CTX_get_current_cert(x);
    if (t && t->bad_depth < 0 && cert) {
        t->bad_depth = X509_STORE_CTX_get_error_depth(x);
        X509_NAME_oneline(X509_get_subject_name(cert), t->bad_subject, sizeof t->bad_subject);
        asn1_time(X509_get0_notBefore(cert), t->bad_not_before, sizeof t->bad_not_before);
        asn1_time(X509_get0_notAfter(cert), t->bad_not_after, sizeof t->bad_not_after);
    }
    return ok;
}

/* The server asks for a client certificate and none is configured: note
 * it (a refusal that follows may come as a reset, its alert lost) and go
 * on without one (the server may take that: tls-auth-clients optional). */
static int client_cert_cb(SSL *ssl, X509 **x509, EVP_PKEY **pkey) {
    (void)x509, (void)pkey;
    jr_tls_t *t = SSL_get_app_data(ssl);
    if (t) t->cert_asked = 1;
    return 0;
}

/* Wait for fd to be ready for `events` until deadline_us (-1 = forever):
 * 1 ready, 0 timed out, -1 poll failed. */
static int wait_fd(int fd, short events, int64_t deadline_us) {
    for (;;) {
        int64_t left = deadline_us < 0 ? -1 : deadline_us - jr_mono_us();
        if (deadline_us >= 0 && left < 0) left = 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left < 0 ? -1 : (int)((left + 999) / 1000));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        return n > 0;
    }
}

/* Check that the file (for redis.tls.ca_dir: the directory) named by
 * setting `key` can be read: 0, or -1 with the reason in err. OpenSSL's own
 * message for a missing file says less. */
static int readable(const char *key, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        jr_errf(err, errlen, "cannot read %s \"%s\": %s", key, path, strerror(errno));
        return -1;
    }
    struct stat st;
    int is_dir = fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode), want_dir = !strcmp(key, "redis.tls.ca_dir");
    fclose(f);
    if (is_dir != want_dir) {
        jr_errf(err, errlen, "cannot read %s \"%s\": %s", key, path, is_dir ? "a directory, not a file" : "not a directory");
        return -1;
    }
    return 0;
}

/* The context: what to trust and what to present. NULL with err set. */
static SSL_CTX *make_ctx(const jr_redis_tls_t *o, char *err, size_t errlen) {
    char why[JR_ERRLEN];
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        ssl_reasons(why, sizeof why);
        jr_errf(err, errlen, "cannot set up TLS: %s", why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* See tls.h: a record at a time, so poll() on the socket stays true. */
    SSL_CTX_set_read_ahead(ctx, 0);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_client_cert_cb(ctx, client_cert_cb);
    SSL_CTX_set_verify(ctx, o->no_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, o->no_verify ? NULL : verify_cb);
    if (o->ca_file && readable("redis.tls.ca_file", o->ca_file, err, errlen)) goto fail;
    if (o->ca_dir && readable("redis.tls.ca_dir", o->ca_dir, err, errlen)) goto fail;
    if (o->ca_file || o->ca_dir) {
        if (SSL_CTX_load_verify_locations(ctx, o->ca_file, o->ca_dir) != 1) {
            ssl_reasons(why, sizeof why);
            jr_errf(err, errlen, "cannot load the CA from %s \"%s\": %s", o->ca_file ? "redis.tls.ca_file" : "redis.tls.ca_dir",
                    o->ca_file ? o->ca_file : o->ca_dir, why);
            goto fail;
        }
    } else if (!o->no_verify && SSL_CTX_set_default_verify_paths(ctx) != 1) {
        ssl_reasons(why, sizeof why);
        jr_errf(err, errlen, "cannot load the system's CAs: %s", why);
        goto fail;
    }
    if (o->key_file && !o->cert_file) {
        jr_errf(err, errlen, "redis.tls.key_file \"%s\" is given without redis.tls.cert_file", o->key_file);
        goto fail;
    }
    if (o->cert_file) {
        const char *key = o->key_file ? o->key_file : o->cert_file;
        if (readable("redis.tls.cert_file", o->cert_file, err, errlen) ||
            (o->key_file && readable("redis.tls.key_file", o->key_file, err, errlen)))
            goto fail;
        if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1) {
            ssl_reasons(why, sizeof why);
            jr_errf(err, errlen, "cannot load the client certificate from redis.tls.cert_file \"%s\": %s", o->cert_file,
                    why);
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
            ssl_reasons(why, sizeof why);
            if (!o->key_file)
                jr_errf(err, errlen, "no private key in redis.tls.cert_file \"%s\" (%s): give redis.tls.key_file",
                        key, why);
            else if (strstr(why, "key values mismatch"))
                jr_errf(err, errlen, "the key in redis.tls.key_file \"%s\" does not match the certificate in "
                        "redis.tls.cert_file \"%s\"", key, o->cert_file);
            else
                jr_errf(err, errlen, "cannot load the client key from %s \"%s\": %s",
                        o->key_file ? "redis.tls.key_file" : "redis.tls.cert_file", key, why);
            goto fail;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            ERR_clear_error();
            jr_errf(err, errlen, "the key in redis.tls.key_file \"%s\" does not match the certificate in "
                    "redis.tls.cert_file \"%s\"", key, o->cert_file);
            goto fail;
        }
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

/* Why the handshake failed, for a person: the certificate's fault when
 * verification refused it, else what OpenSSL says (`why`). */
static void handshake_reason(const jr_tls_t *t, const char *name, const char *why, char *err, size_t errlen) {
    long v = SSL_get_verify_result(t->ssl);
    const char *whose = t->bad_depth > 0 ? "a CA certificate in the server's chain" : "the server's certificate";
    switch (v) {
    case X509_V_OK: break;
    case X509_V_ERR_CERT_HAS_EXPIRED:
        jr_errf(err, errlen, "%s has expired (%s, valid until %s)", whose, t->bad_subject, t->bad_not_after);
        return;
    case X509_V_ERR_CERT_NOT_YET_VALID:
        jr_errf(err, errlen, "%s is not yet valid (%s, valid from %s; is this machine's clock right?)", whose,
                t->bad_subject, t->bad_not_before);
        return;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        jr_errf(err, errlen,
                "the server's certificate is not for \"%s\" (%s; set redis.tls.server_name to the name it has)", name,
                t->bad_subject);
        return;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        jr_errf(err, errlen,
                "the server's certificate is not signed by a trusted CA (%s: %s; give its CA in redis.tls.ca_file)",
                t->bad_subject, X509_verify_cert_error_string(v));
        return;
    default:
        jr_errf(err, errlen, "the server's certificate was refused: %s (%s)", X509_verify_cert_error_string(v),
                t->bad_subject);
        return;
    }
    if (strstr(why, "wrong version number") || strstr(why, "packet length too long") ||
        strstr(why, "record layer failure") || strstr(why, "unexpected eof") || !*why)
        jr_errf(err, errlen, "the server does not speak TLS (%s; a plain port? then use redis://)",
                *why ? why : "it closed the connection");
    else
        jr_errf(err, errlen, "%s", why);
}

/* An SSL_read / SSL_write / SSL_connect result that is a failure, as text. */
static void io_reason(int ret, int sslerr, char *why, size_t len) {
    char q[JR_ERRLEN];
    int e = errno;
    ssl_reasons(q, sizeof q);
    if (sslerr == SSL_ERROR_ZERO_RETURN) jr_errf(why, len, "Server closed the connection");
    else if (q[0]) jr_errf(why, len, "%s", q);
    else if (sslerr == SSL_ERROR_SYSCALL && ret == 0) jr_errf(why, len, "Server closed the connection");
    else if (sslerr == SSL_ERROR_SYSCALL) jr_errf(why, len, "%s", strerror(e));
    else jr_errf(why, len, "TLS error %d", sslerr);
}

jr_tls_t *jr_tls_connect(int fd, const char *host, const jr_redis_tls_t *o, int64_t timeout_us, char *err,
                         size_t errlen) {
    jr_tls_t *t = calloc(1, sizeof *t);
    if (!t) {
        jr_errf(err, errlen, "out of memory");
        return NULL;
    }
    t->fd = fd;
    t->bad_depth = -1;
    const char *name = o->server_name && *o->server_name ? o->server_name : host;
    int64_t deadline = jr_mono_us() + timeout_us;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        jr_errf(err, errlen, "fcntl: %s", strerror(errno));
        goto fail;
    }
    if (!(t->ctx = make_ctx(o, err, errlen))) goto fail;
    if (!(t->ssl = SSL_new(t->ctx)) || SSL_set_fd(t->ssl, fd) != 1) {
        char why[JR_ERRLEN];
        ssl_reasons(why, sizeof why);
        jr_errf(err, errlen, "cannot set up TLS: %s", why);
        goto fail;
    }
    SSL_set_app_data(t->ssl, t);
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    if (!is_ip) SSL_set_tlsext_host_name(t->ssl, name); /* SNI takes no IP address */
    if (!o->no_verify) {
        int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), name) : SSL_set1_host(t->ssl, name);
        if (ok != 1) {
            ERR_clear_error();
            jr_errf(err, errlen, "cannot check the server's name \"%s\"", name);
            goto fail;
        }
    }
    for (;;) {
        ERR_clear_error();
        int ret = SSL_connect(t->ssl);
        if (ret == 1) break;
        int e = SSL_get_error(t->ssl, ret);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            int w = wait_fd(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
            if (w == 0) {
                jr_errf(err, errlen,
                        "no TLS handshake within %lld ms (a plain port? then use redis://)",
                        (long long)(timeout_us / 1000));
                goto fail;
            }
            if (w < 0) {
                jr_errf(err, errlen, "poll: %s", strerror(errno));
                goto fail;
            }
            continue;
        }
        char why[JR_ERRLEN];
        io_reason(ret, e, why, sizeof why);
        handshake_reason(t, name, why, err, errlen);
        goto fail;
    }
    return t;
fail:
    ERR_clear_error();
    jr_tls_free(t);
    return NULL;
}

/* A failure of the first read after a handshake the server then refused:
 * with TLS 1.3 the client finishes first, and the server's alert comes
 * with the first reply. Said for a person. */
static void read_reason(const jr_tls_t *t, const char *why, char *err, size_t errlen) {
    if ((t->cert_asked && !t->read_any) || strstr(why, "certificate required") || strstr(why, "alert handshake failure") ||
        strstr(why, "alert bad certificate"))
        jr_errf(err, errlen,
                "TLS: the server requires a client certificate it trusts, and closed the connection (%s; "
                "set redis.tls.cert_file and redis.tls.key_file)",
                why);
    else
        jr_errf(err, errlen, "TLS: %s", why);
}

/* What OpenSSL wants before an I/O call can go on: wait (no deadline, as a
 * plain blocking write) until t's socket is ready for `events`. 0, or -1
 * with the reason in err. */
static int wait_want(jr_tls_t *t, short events, char *err, size_t errlen) {
    if (wait_fd(t->fd, events, -1) >= 0) return 0;
    jr_errf(err, errlen, "poll: %s", strerror(errno));
    return -1;
}

/* A failed SSL_read or SSL_write (its return ret, SSL_get_error e): the
 * reason in err; returns -1. */
static int io_fail(jr_tls_t *t, int ret, int e, char *err, size_t errlen) {
    char why[JR_ERRLEN];
    io_reason(ret, e, why, sizeof why);
    read_reason(t, why, err, errlen);
    return -1;
}

ssize_t jr_tls_write(jr_tls_t *t, const void *buf, size_t len, char *err, size_t errlen) {
    int n = len > INT32_MAX ? INT32_MAX : (int)len;
    for (;;) {
        ERR_clear_error();
        int ret = SSL_write(t->ssl, buf, n);
        if (ret > 0) return ret;
        int e = SSL_get_error(t->ssl, ret);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            if (wait_want(t, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, err, errlen)) return -1;
            continue;
        }
        return io_fail(t, ret, e, err, errlen);
    }
}

ssize_t jr_tls_read(jr_tls_t *t, void *buf, size_t cap, char *err, size_t errlen) {
    int n = cap > INT32_MAX ? INT32_MAX : (int)cap;
    for (;;) {
        ERR_clear_error();
        int ret = SSL_read(t->ssl, buf, n);
        if (ret > 0) {
            t->read_any = 1;
            return ret;
        }
        int e = SSL_get_error(t->ssl, ret);
        if (e == SSL_ERROR_WANT_READ) return 0;
        if (e == SSL_ERROR_WANT_WRITE) { /* e.g. answering a key update */
            if (wait_want(t, POLLOUT, err, errlen)) return -1;
            continue;
        }
        return io_fail(t, ret, e, err, errlen);
    }
}

int jr_tls_pending(const jr_tls_t *t) { return SSL_pending(t->ssl); }

void jr_tls_free(jr_tls_t *t) {
    if (!t) return;
    SSL_free(t->ssl); /* no close_notify: Redis takes the socket's close as the end */
    SSL_CTX_free(t->ctx);
    ERR_clear_error();
    free(t);
}
