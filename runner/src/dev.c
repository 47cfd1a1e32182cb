/* The demo: see dev.h. Everything it starts, it stops by pid. */
#include "dev.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_produce.h"
#include "jr.h"
#include "log.h"
#include "proc.h"
#include "redis.h"
#include "util.h"

#define DEMO_QUEUE "shop"

/* Start argv[0] (searched in PATH) with stdout sent to stderr (to
 * /dev/null if quiet). Returns the pid, or -1. */
static pid_t spawn(char *const argv[], int quiet) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    dup2(2, 1);
    if (quiet) {
        FILE *null = freopen("/dev/null", "w", stdout);
        (void)null;
    }
    execvp(argv[0], argv);
    fprintf(stderr, "jobrunner dev: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* SIGTERM pid and wait for it (SIGKILL after 10 s). */
static void stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) return;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void say(const char *fmt, const char *a, const char *b) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a, b);
    jr_log_kv(JR_LOG_INFO, msg, NULL);
    jr_log_flush();
}

/* Count order files in dir whose name ends with suffix. */
static int count_state(const char *dir, int orders, const char *suffix) {
    int n = 0;
    char path[320];
    for (int i = 0; i < orders; i++) {
        snprintf(path, sizeof path, "%s/%d.%s", dir, 1001 + i, suffix);
        n += access(path, F_OK) == 0;
    }
    return n;
}

int jr_dev_run(const jr_config_t *cfg_in, const char *self, const char *plugins, int orders,
               const char *config_path) {
    jr_config_t cfg = *cfg_in; /* shallow: only redis_url is replaced below */
    char tmp[] = "/tmp/jobrunner-dev.XXXXXX", url[320], orders_dir[256], sock[256];
    pid_t redis = -1, sched = -1, workers[2] = {-1, -1};
    jr_redis_t *r = NULL;
    int status = 1;
    jr_signals_install();
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "jobrunner dev: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(orders_dir, sizeof orders_dir, "%s/orders", tmp);
    mkdir(orders_dir, 0700);

    if (!cfg.redis_url) {
        snprintf(sock, sizeof sock, "%s/redis.sock", tmp);
        char *argv[] = {"redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
                        "--appendonly", "no", "--dir", tmp, NULL};
        redis = spawn(argv, 1);
        snprintf(url, sizeof url, "unix://%s", sock);
        cfg.redis_url = url;
        say("started a private redis-server for the demo at %s%s", url, "");
    }
    /* Wait for Redis: 100 tries 50 ms apart (5 s for the private server). */
    for (int i = 0; i < 100 && !r; i++) {
        char err[JR_ERRLEN];
        if ((r = jr_redis_connect(cfg.redis_url, 1000, err, sizeof err)) == NULL) usleep(50000);
        if (r && jr_redis_load_library(r) != 0) {
            fprintf(stderr, "jobrunner dev: %s\n", jr_redis_errstr(r));
            goto out;
        }
    }
    if (!r) {
        char shown[512];
        jr_redis_url_redact(cfg.redis_url, shown, sizeof shown);
        fprintf(stderr, "jobrunner dev: Redis at %s did not come up\n", shown);
        goto out;
    }

    char *cfgv[3] = {config_path ? "-c" : NULL, (char *)config_path, NULL};
    char *sched_argv[] = {(char *)self, "scheduler", "--redis", cfg.redis_url, "-q", DEMO_QUEUE,
                          cfgv[0], cfgv[1], NULL};
    char *worker_argv[] = {(char *)self, "worker", "--redis", cfg.redis_url, "-q", DEMO_QUEUE,
                           "--plugin", (char *)plugins, cfgv[0], cfgv[1], NULL};
    sched = spawn(sched_argv, 0);
    workers[0] = spawn(worker_argv, 0);
    workers[1] = spawn(worker_argv, 0);
    usleep(300000);

    char norders[16];
    snprintf(norders, sizeof norders, "%d", orders);
    say("the shop opens: %s orders, each closed automatically if still unpaid when its job is due%s",
        norders, "");
    int paid = 0;
    for (int i = 0; i < orders && jr_signals_count() == 0; i++) {
        char id[16], path[320], prefix[300], due[32];
        snprintf(id, sizeof id, "%d", 1001 + i);
        snprintf(prefix, sizeof prefix, "%s/%s", orders_dir, id);
        snprintf(path, sizeof path, "%s.placed", prefix);
        FILE *f = fopen(path, "w");
        if (f) fclose(f);
        int64_t delay = 3000 + (int64_t)(i % 4) * 1000;
        jr_enqueue_t job = {.queue = DEMO_QUEUE, .delay_ms = delay,
                            .env = {.handler = "order_autoclose", .handler_len = 15,
                                    .payload = prefix, .payload_len = strlen(prefix), .attempt = 1}};
        char jid[1][JR_ID_MAX];
        if (jr_redis_enqueue(r, &job, 1, jid, NULL) != 0) {
            fprintf(stderr, "jobrunner dev: enqueue: %s\n", jr_redis_errstr(r));
            goto out;
        }
        snprintf(due, sizeof due, "%llds", (long long)(delay / 1000));
        jr_log_kv(JR_LOG_INFO, "order placed; close-if-unpaid job scheduled", "order", id, "job",
                  jid[0], "due_in", due, NULL);
        jr_log_flush();
        usleep(250000);
        /* Every third order is paid a moment later, before its job is due. */
        if (i % 3 == 1) {
            char paidp[320];
            snprintf(paidp, sizeof paidp, "%s.paid", prefix);
            if (rename(path, paidp) == 0) {
                paid++;
                jr_log_kv(JR_LOG_INFO, "order paid", "order", id, NULL);
            }
        }
    }
    /* Wait until every order is paid or closed (at most 30 s). */
    for (int i = 0; i < 300 && jr_signals_count() == 0; i++) {
        if (count_state(orders_dir, orders, "paid") + count_state(orders_dir, orders, "closed") == orders) break;
        usleep(100000);
    }
    usleep(200000);
    int closed = count_state(orders_dir, orders, "closed");
    char a[16], b[16], c[16];
    snprintf(a, sizeof a, "%d", orders), snprintf(b, sizeof b, "%d", paid), snprintf(c, sizeof c, "%d", closed);
    jr_log_kv(JR_LOG_INFO, "demo finished", "orders", a, "paid", b, "closed_unpaid", c, NULL);
    jr_log_flush();
    status = paid + closed == orders ? 0 : 1;
    if (status) fprintf(stderr, "jobrunner dev: %d order(s) neither paid nor closed\n", orders - paid - closed);
out:
    stop(workers[0]);
    stop(workers[1]);
    stop(sched);
    jr_redis_free(r);
    stop(redis);
    char *rm[] = {"rm", "-rf", tmp, NULL};
    pid_t p = spawn(rm, 1);
    if (p > 0) waitpid(p, NULL, 0);
    return status;
}
