/* `jobrunner web`: the dashboard. One process, one thread: libmicrohttpd
 * driven by our own poll loop (as metrics.c does) serves the page (HTML,
 * CSS and JavaScript from runner/web/, embedded at build time) and a JSON
 * API under /api/ (docs/web-api.md), over one Redis connection made and
 * remade with the CLI's jr_cli_client, through the same library calls as
 * the CLI (jr_client_*, jr_redis_*): no Redis logic of its own.
 *
 * Safety (see docs/web-api.md):
 * - it listens on 127.0.0.1:8080 by default; an address that is not a
 *   loopback one is refused unless web.password is set (HTTP Basic,
 *   compared in constant time; TLS is a proxy's job). Without a password
 *   the Host header must name a loopback address (no DNS rebinding);
 * - GETs change nothing; every action is a POST carrying the process's
 *   random CSRF token in X-CSRF-Token (403 without it or with another);
 *   web.read_only refuses every POST (403) and the page shows no action;
 * - every answer has a Content-Security-Policy without inline script,
 *   X-Content-Type-Options: nosniff and frame-ancestors 'none'; the JSON
 *   escapes < > & so no byte from Redis can read as markup, and the page
 *   builds its DOM with textContent only. */
#ifndef JR_WEB_H
#define JR_WEB_H

#include <stddef.h>

#include "config.h"

/* Serve the dashboard on cfg->web_listen until SIGTERM or SIGINT. Returns
 * the exit status: 0 after a stop signal, 1 when it cannot listen, 2 for
 * a configuration it refuses (a non-loopback address without a password),
 * after saying why on stderr. */
int jr_web_run(const jr_config_t *cfg);

/* ---- pure helpers (tested in test_web) ---------------------------------- */

/* 1 if a[0..al) equals b[0..bl), in a time that depends on bl only (b is
 * the secret). */
int jr_web_secret_equal(const char *a, size_t al, const char *b, size_t bl);
/* 1 if host (of HOST:PORT as jr_metrics_parse_addr splits it, or of a Host
 * header) is a numeric loopback address (127.0.0.0/8, ::1) or the name
 * "localhost"; "" (every interface) and every other name (one starting
 * with "127." included) are not. */
int jr_web_host_is_loopback(const char *host);
/* Decode RFC 4648 base64 s[0..n) into out (at most outlen bytes): the
 * length, or -1 if s is not padded base64 or does not fit. */
long jr_web_base64_decode(const char *s, size_t n, unsigned char *out, size_t outlen);
/* The value of `field` in INFO text ("field:value\r\n" lines) into buf
 * ("" when absent); returns buf. */
char *jr_web_info_field(const char *info, const char *field, char *buf, size_t len);

#endif
