/* Process plumbing: see proc.h. */
#include "proc.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "jr.h"
#include "log.h"
#include "util.h"

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t sig_count;

static void on_signal(int sig) {
    int saved = errno;
    sig_count++;
    char c = (char)sig;
    if (write(sig_pipe[1], &c, 1) < 0) { /* pipe full: a wake-up is pending anyway */
    }
    errno = saved;
}

int jr_signals_install(void) {
    if (sig_pipe[0] < 0) {
        if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return sig_pipe[0];
}

int jr_signals_count(void) { return (int)sig_count; }

void jr_signals_drain(void) {
    char buf[64];
    while (sig_pipe[0] >= 0 && read(sig_pipe[0], buf, sizeof buf) > 0) {
    }
}

int jr_sleep_interruptible(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    int before = jr_signals_count();
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        if (jr_signals_count() != before) return 1;
    return jr_signals_count() != before;
}

const char *jr_config_redis_url(const jr_config_t *cfg) {
    return cfg->redis_url ? cfg->redis_url : JR_DEFAULT_REDIS_URL;
}

const char *jr_config_redis_url_shown(const jr_config_t *cfg, char *buf, size_t len) {
    jr_redis_url_redact(jr_config_redis_url(cfg), buf, len);
    return buf;
}

static const char *proc_role; /* jr_proc_set_role's; NULL = none named */

void jr_proc_set_role(const char *role) { proc_role = role; }

void jr_config_redis_opts(const jr_config_t *cfg, jr_redis_opts_t *o) {
    *o = (jr_redis_opts_t){.url = jr_config_redis_url(cfg), .timeout_ms = cfg->connect_timeout_ms, .role = proc_role};
    /* Durability: enqueues and the worker's results wait for replicas; the
     * scheduler's writes need not (a promotion lost in a failover is made
     * again from the delayed set the replica holds; a cron tick lost with
     * its record fires again under its same id). */
    if (!proc_role || strcmp(proc_role, "scheduler")) {
        o->wait_replicas = (int)cfg->redis_wait_replicas;
        o->wait_timeout_ms = cfg->redis_wait_timeout_ms;
    }
    o->tls = (jr_redis_tls_t){.ca_file = cfg->tls_ca_file, .ca_dir = cfg->tls_ca_dir, .cert_file = cfg->tls_cert_file,
                              .key_file = cfg->tls_key_file, .server_name = cfg->tls_server_name,
                              .no_verify = !cfg->tls_verify};
    o->password_file = cfg->redis_password_file;
    o->sentinel_password = cfg->redis_sentinel_password;
}

jr_redis_t *jr_connect_once(const jr_config_t *cfg, char *err, size_t errlen) {
    jr_redis_opts_t o;
    jr_config_redis_opts(cfg, &o);
    jr_redis_t *r = jr_redis_open(&o, err, errlen);
    if (!r) return NULL;
    if (jr_redis_load_library(r) != 0) {
        snprintf(err, errlen, "loading the jobrunner function library: %s", jr_redis_errstr(r));
        jr_redis_free(r);
        return NULL;
    }
    if (jr_redis_library_kept(r)) {
        char kept[32];
        snprintf(kept, sizeof kept, "%ld", jr_redis_library_kept(r));
        jr_log_kv(JR_LOG_INFO, "Redis holds a newer revision of the jobrunner function library: using it",
                  "revision", kept, NULL);
    }
    char policy[64];
    if (jr_redis_maxmemory_policy(r, policy, sizeof policy) == 0 && policy[0] &&
        strcmp(policy, "noeviction") != 0)
        jr_log_kv(JR_LOG_WARN,
                  "Redis may evict keys when full: jobs would silently vanish; set maxmemory-policy noeviction",
                  "maxmemory_policy", policy, NULL);
    return r;
}

jr_redis_t *jr_connect_retry(const jr_config_t *cfg) {
    int64_t backoff = 100;
    int seen = jr_signals_count(); /* a signal during an attempt counts too */
    for (int attempt = 1;; attempt++) {
        char err[JR_ERRLEN];
        jr_redis_t *r = jr_connect_once(cfg, err, sizeof err);
        if (r) {
            char shown[512];
            if (attempt > 1)
                jr_log_kv(JR_LOG_INFO, "connected to Redis", "url",
                          jr_config_redis_url_shown(cfg, shown, sizeof shown), NULL);
            return r;
        }
        char next[32], n[16];
        snprintf(next, sizeof next, "%lldms", (long long)backoff);
        snprintf(n, sizeof n, "%d", attempt);
        jr_log_kv(JR_LOG_ERROR, "Redis unavailable, retrying", "error", err, "attempt", n, "retry_in",
                  next, NULL);
        if (jr_signals_count() != seen || jr_sleep_interruptible(backoff)) return NULL;
        backoff = backoff * 2 > jr_reconnect_cap_ms(cfg) ? jr_reconnect_cap_ms(cfg) : backoff * 2;
    }
}

int64_t jr_reconnect_cap_ms(const jr_config_t *cfg) {
    return jr_redis_url_is_sentinel(jr_config_redis_url(cfg)) ? 1000 : 5000;
}

void jr_consumer_name(char *buf, size_t len) {
    char host[HOST_NAME_MAX + 1]; /* a Linux host name is at most 64 bytes: whole, so two hosts never share a name */
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    snprintf(buf, len, "%s-%d", host, (int)getpid());
}

/* ---- process titles ------------------------------------------------------ */

extern char **environ;
static char *title_area; /* argv[0] .. the end of the last environment string */
static size_t title_len, title_used; /* the whole; the most written (at first: argv's part) */
static char **volatile title_environ; /* the copy, still reachable (volatile: kept) should environ change */
static char *volatile title_env_strings; /* its strings, one block: still reachable when setenv replaces one */

void jr_proc_title_init(int argc, char **argv) {
    if (argc < 1 || !argv[0]) return;
    char *start = argv[0], *end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc; i++) /* only strings that follow one another */
        if (argv[i] == end) end += strlen(argv[i]) + 1;
    size_t argv_len = (size_t)(end - start), n = 0, bytes = 0;
    while (environ && environ[n]) bytes += strlen(environ[n++]) + 1;
    char **copy = calloc(n + 1, sizeof *copy), *block = malloc(bytes ? bytes : 1);
    if (!copy || !block) {
        free(copy), free(block);
        return;
    }
    char *w = block;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(environ[i]) + 1;
        if (environ[i] == end) end += len;
        copy[i] = memcpy(w, environ[i], len);
        w += len;
    }
    /* never freed: the environment of the process */
    environ = title_environ = copy;
    title_env_strings = block;
    title_area = start, title_len = (size_t)(end - start), title_used = argv_len;
}

void jr_proc_title(const char *comm, const char *fmt, ...) {
    if (comm) prctl(PR_SET_NAME, comm, 0, 0, 0);
    if (!title_area || title_len < 2) return;
    va_list ap;
    va_start(ap, fmt);
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* argv's memory, and the environment's after it only for a title too
     * long for argv (then /proc/PID/environ shows the title's end) */
    size_t n = strlen(buf);
    if (n > title_len - 1) n = title_len - 1;
    if (n + 1 > title_used) title_used = n + 1;
    memcpy(title_area, buf, n);
    memset(title_area + n, 0, title_used - n);
}
