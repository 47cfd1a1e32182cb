/* Metrics and health over HTTP (metrics.listen / --metrics ADDR).
 *
 * Two layers:
 * - a registry of metric families and their labelled series, encoded in the
 *   Prometheus text exposition format (version 0.0.4): pure functions,
 *   unit-tested;
 * - the process's metrics: one registry, a libmicrohttpd server on its own
 *   thread serving GET /metrics and GET /healthz, and the hooks the worker
 *   and scheduler loops call. Every hook is a no-op while no server runs.
 *   The HTTP thread only reads memory (under a mutex, or atomics for the
 *   health stamps) and counts (and at most once a minute logs) the
 *   connections it refuses or cuts; it never talks to Redis, and the loops
 *   never wait for it except for that mutex, held while a scrape is encoded.
 *   Slow or many clients cannot keep it from answering: a deadline per
 *   connection, a cap per client address, slots kept for 127.0.0.1 and ::1
 *   (see "the HTTP server" in metrics.c). */
#ifndef JR_METRICS_H
#define JR_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* ---- address ------------------------------------------------------------ */

/* Parse "HOST:PORT", "[IPV6]:PORT" or ":PORT" (every interface) into host
 * (hostlen bytes; "" for every interface) and port (0..65535; 0 = any free
 * port). Returns 0, or JR_EINVAL with a message in err. */
int jr_metrics_parse_addr(const char *addr, char *host, size_t hostlen, int *port, char *err,
                          size_t errlen);

/* Bind and listen (backlog 64, SO_REUSEADDR, close-on-exec) on host:p
 * (host "" = every address), the socket we hand libmicrohttpd, so that a
 * failure says why: "cannot serve WHAT on ADDR: reason" in err. Returns the
 * socket with *port_out = the port bound (p, or the one the system chose
 * for 0) and *v6 = 1 for an IPv6 socket; or -1. Shared with web.c. */
int jr_http_listen(const char *what, const char *addr, const char *host, int p, int *port_out, int *v6, char *err,
                   size_t errlen);

/* addr (as jr_metrics_parse_addr takes it) with offset added to its port,
 * into out: "127.0.0.1:9464" + 2 -> "127.0.0.1:9466" (metrics.port_offset;
 * systemd's jobrunner-worker@N gives N). Port 0 (any free port) stays 0.
 * Returns 0, or JR_EINVAL with a message naming both in err when addr is
 * not an address or the sum is past 65535. Pure. */
int jr_metrics_addr_offset(const char *addr, int64_t offset, char *out, size_t outlen, char *err,
                           size_t errlen);

/* ---- registry (pure) ---------------------------------------------------- */

typedef enum { JR_MT_COUNTER, JR_MT_GAUGE, JR_MT_HISTOGRAM } jr_mtype_t;

#define JR_MLABELS_MAX 3

typedef struct jr_mfamily {
    const char *name, *help;
    jr_mtype_t type;
    size_t nlabels;
    const char *labels[JR_MLABELS_MAX];
    const double *bounds; /* histograms: upper bounds, ascending (+Inf is implied) */
    size_t nbounds;
} jr_mfamily_t;

typedef struct jr_mreg jr_mreg_t;

/* A registry of the n families fams (which must outlive it). NULL if out
 * of memory. */
jr_mreg_t *jr_mreg_new(const jr_mfamily_t *fams, size_t n);
void jr_mreg_free(jr_mreg_t *m);

/* Update the series of family `fam` with these label values (one per
 * label of the family; copied), creating it at 0 first: counters add v
 * (v >= 0), gauges are set to v, histograms observe v. Cost: a scan of the
 * family's series (few: queues x handlers x outcomes). Returns 0 or
 * JR_ENOMEM, or JR_EINVAL for a negative (or NaN) counter increment or a
 * family number out of range. */
int jr_mreg_update(jr_mreg_t *m, size_t fam, const char *const *labels, double v);

/* The text exposition of every family: HELP and TYPE lines (also for a
 * family without series yet), then its series in creation order; label
 * values escaped (\\, \", \n). malloc'd, NUL-terminated, length in *len;
 * NULL if out of memory. */
char *jr_mreg_encode(const jr_mreg_t *m, size_t *len);

/* ---- the process's metrics ---------------------------------------------- */

typedef enum { JR_METRICS_WORKER, JR_METRICS_SCHEDULER } jr_metrics_role_t;

/* Start serving on addr (jr_metrics_parse_addr) with port_offset added to
 * its port (jr_metrics_addr_offset), with the families of the role (and
 * jobrunner_up, build_info at 1). /healthz answers 503 until Redis first
 * answers, and once the loop has not turned, or Redis has not answered,
 * for longer than stale_ms. Returns 0, or JR_EIO with a message naming the
 * address in err (bad address, port in use, a port past 65535 with the
 * offset, ...), or JR_ENOMEM. */
int jr_metrics_start(const char *addr, int64_t port_offset, jr_metrics_role_t role, int64_t stale_ms, char *err,
                     size_t errlen);
/* Stop the server and free everything. Safe if never started. */
void jr_metrics_stop(void);
/* 1 while serving. */
int jr_metrics_on(void);
/* The port bound (useful with port 0), 0 if not serving. */
int jr_metrics_port(void);

/* Health stamps (monotonic time, atomics): the loop turned; Redis answered. */
void jr_metrics_turned(void);
void jr_metrics_redis_ok(void);
/* Microseconds since Redis last answered (INT64_MAX if never). */
int64_t jr_metrics_redis_age_us(void);

/* Worker hooks. outcome: ok | retry | dead | cancelled | interrupted |
 * unrecorded, as logged; exported as outcome="retried" for retry (it
 * counts attempts, not jobs). */
void jr_metrics_job_done(const char *queue, const char *handler, const char *outcome, double seconds);
/* The worker's capacity: how many jobs it runs at once (its runners). */
void jr_metrics_capacity(size_t n);
/* A job was deferred: no handler of that name here (jobs.c, no_handler). */
void jr_metrics_deferred(const char *queue, const char *handler);
void jr_metrics_running(size_t n);
void jr_metrics_fetched(size_t n);
/* Both roles: a Redis connection was lost (or refused) and is re-made. */
void jr_metrics_reconnect(void);

/* Scheduler hooks. lateness_s < 0: not measured in this call. */
void jr_metrics_promoted(const char *queue, int64_t n, double lateness_s);
/* The gauges of one queue (its partitions added up), as Redis holds them:
 * every scheduler exports the same values for the queues it serves, so
 * duplicates across schedulers are harmless: aggregate with max by
 * (queue), never sum (docs/operations.md, Metrics for alerting). A count
 * < 0 is unknown (a key holds garbage) and leaves its gauge as it was;
 * paused is 0/1, oldest_ready_s 0 when nothing is ready. */
typedef struct jr_qgauges {
    long long ready, pending, delayed, dead;
    int paused;
    double oldest_ready_s;
} jr_qgauges_t;
void jr_metrics_queue(const char *queue, const jr_qgauges_t *g);
/* A schedule's tick whose job this scheduler enqueued: the tick's time
 * (Unix ms) and how late it was enqueued (s, by Redis's clock). */
void jr_metrics_cron_fired(const char *schedule, int64_t tick_ms, double lateness_s);

#endif
