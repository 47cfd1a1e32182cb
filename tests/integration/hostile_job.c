/* Test job plugin for test_hostile: handlers that do what a careless or
 * hostile handler would, with the runner's processes and descriptors. Files
 * live in $JRT_HOSTILE_DIR. Every handler first appends one line
 *   <handler> <job id> <attempt> <pid> <Unix us>\n
 * to record.txt (one O_APPEND write), then:
 *   record      returns OK
 *   fork_both   fork()s; both processes return OK
 *   daemon      double fork + setsid; the grandchild returns OK after 1.5 s
 *   bg_system   system("sleep 30 & echo $! >> bg.pid"), returns OK
 *   pipeline    system(<payload>), returns OK
 *   fork_crash  forks a child that writes its pid to fork_crash.pid and
 *               sleeps 30 s, then dies of SIGSEGV
 *   initfd      writes "<job id>\n" through the descriptor init opened on
 *               initfd.txt; FAIL if that write fails
 *   whoami      returns OK (the record line has the pid)
 *   close_std   closes fds 0-2, then opens trap.txt three times (which lands
 *               on 0, 1 and 2), returns OK
 *   logline     logs "logline marker <job id>" through the host, returns OK
 *   polite      returns OK if polite_ok exists; else waits for should_stop
 *               and returns RETRY
 *   sleepy      sleeps <payload> ms, appends "end <job id> <Unix us>\n",
 *               returns OK
 *   far_retry   asks for a retry in INT64_MAX ms (past the 10-year maximum)
 *   shm_maps    sleeps <payload> ms, appends "maps <pid> <n>\n" to
 *               shm.txt, n = its shared writable mappings; returns OK
 * runner_init and runner_exit append "runner_init <pid>\n" and
 * "runner_exit <pid>\n" to hooks.txt. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jobrunner/plugin.h>

static int init_fd = -1;

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void path_of(char *out, size_t len, const char *name) {
    const char *dir = getenv("JRT_HOSTILE_DIR");
    snprintf(out, len, "%s/%s", dir ? dir : "/nonexistent", name);
}

static void append(const char *name, const char *line) {
    char path[512];
    path_of(path, sizeof path, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (write(fd, line, strlen(line)) < 0) {
    }
    close(fd);
}

static void record(const char *what, jr_job_t *job, const jr_host_api_t *api) {
    char line[256];
    snprintf(line, sizeof line, "%s %s %u %d %lld\n", what, api->job_id(job), api->job_attempt(job),
             (int)getpid(), now_us());
    append("record.txt", line);
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static jr_result_t h_record(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("record", job, api);
    return JR_RESULT_OK;
}

static jr_result_t fork_both(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("fork_both", job, api);
    fork();
    return JR_RESULT_OK;
}

static jr_result_t daemon_h(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("daemon", job, api);
    pid_t p = fork();
    if (p == 0) {
        setsid();
        if (fork() != 0) _exit(0);
        nap_ms(1500);
        return JR_RESULT_OK; /* the grandchild "returns" too */
    }
    if (p > 0) waitpid(p, NULL, 0);
    return JR_RESULT_OK;
}

static jr_result_t bg_system(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("bg_system", job, api);
    char path[512], cmd[600];
    path_of(path, sizeof path, "bg.pid");
    snprintf(cmd, sizeof cmd, "sleep 30 & echo $! >> '%s'", path);
    return system(cmd) == 0 ? JR_RESULT_OK : JR_RESULT_FAIL;
}

static jr_result_t pipeline(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("pipeline", job, api);
    size_t len;
    const char *cmd = api->job_payload(job, &len);
    if (system(cmd) != 0) return JR_RESULT_FAIL;
    return JR_RESULT_OK;
}

static jr_result_t fork_crash(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("fork_crash", job, api);
    pid_t p = fork();
    if (p == 0) {
        char line[32];
        snprintf(line, sizeof line, "%d\n", (int)getpid());
        append("fork_crash.pid", line);
        nap_ms(30000);
        _exit(0);
    }
    nap_ms(200);
    raise(SIGSEGV);
    return JR_RESULT_OK;
}

static jr_result_t initfd(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("initfd", job, api);
    char line[128];
    snprintf(line, sizeof line, "%s\n", api->job_id(job));
    if (write(init_fd, line, strlen(line)) != (ssize_t)strlen(line)) {
        api->set_error(job, "cannot write through the descriptor init opened");
        return JR_RESULT_FAIL;
    }
    return JR_RESULT_OK;
}

static jr_result_t whoami(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("whoami", job, api);
    return JR_RESULT_OK;
}

static jr_result_t close_std(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("close_std", job, api);
    close(0), close(1), close(2);
    char path[512];
    path_of(path, sizeof path, "trap.txt");
    for (int i = 0; i < 3; i++) open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    return JR_RESULT_OK;
}

static jr_result_t logline(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("logline", job, api);
    api->log(job, JR_LOG_INFO, "logline marker %s", api->job_id(job));
    return JR_RESULT_OK;
}

static jr_result_t polite(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("polite", job, api);
    char path[512];
    path_of(path, sizeof path, "polite_ok");
    if (access(path, F_OK) == 0) return JR_RESULT_OK;
    while (!api->should_stop(job)) nap_ms(10);
    api->set_error(job, "stopping: asked to");
    return JR_RESULT_RETRY;
}

static jr_result_t sleepy(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("sleepy", job, api);
    size_t len;
    nap_ms(atol((const char *)api->job_payload(job, &len)));
    char line[128];
    snprintf(line, sizeof line, "end %s %lld\n", api->job_id(job), now_us());
    append("record.txt", line);
    return JR_RESULT_OK;
}

static jr_result_t far_retry(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("far_retry", job, api);
    api->retry_after(job, INT64_MAX);
    return JR_RESULT_RETRY;
}

static jr_result_t shm_maps(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    record("shm_maps", job, api);
    size_t len;
    nap_ms(atol((const char *)api->job_payload(job, &len)));
    FILE *f = fopen("/proc/self/maps", "r");
    char l[512], perm[8];
    int n = 0;
    while (f && fgets(l, sizeof l, f))
        n += sscanf(l, "%*s %7s", perm) == 1 && perm[1] == 'w' && perm[3] == 's';
    if (f) fclose(f);
    char line[64];
    snprintf(line, sizeof line, "maps %d %d\n", (int)getpid(), n);
    append("shm.txt", line);
    return JR_RESULT_OK;
}

#if JR_PLUGIN_ABI_MINOR >= 1
static int runner_init(void *ctx, const jr_host_api_t *api) {
    (void)ctx, (void)api;
    char line[64];
    snprintf(line, sizeof line, "runner_init %d\n", (int)getpid());
    append("hooks.txt", line);
    return 0;
}

static void runner_exit(void *ctx) {
    (void)ctx;
    char line[64];
    snprintf(line, sizeof line, "runner_exit %d\n", (int)getpid());
    append("hooks.txt", line);
}
#endif

static int init(void *ctx, const jr_host_api_t *api) {
    char path[512];
    path_of(path, sizeof path, "initfd.txt");
    init_fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600); /* no O_CLOEXEC: as many do */
    if (init_fd < 0) return 1;
    static const struct {
        const char *name;
        jr_handler_fn fn;
    } hs[] = {{"record", h_record},   {"fork_both", fork_both}, {"daemon", daemon_h},
              {"bg_system", bg_system}, {"pipeline", pipeline}, {"fork_crash", fork_crash},
              {"initfd", initfd},     {"whoami", whoami},       {"close_std", close_std},
              {"logline", logline},   {"polite", polite},       {"sleepy", sleepy},
              {"far_retry", far_retry}, {"shm_maps", shm_maps}};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        if (api->register_handler(ctx, hs[i].name, hs[i].fn, NULL) != 0) return 1;
    return 0;
}

static void fini(void) {
    if (init_fd >= 0) close(init_fd);
}

static const jr_plugin_t desc = {JR_PLUGIN_HEADER, .name = "hostile", .version = "1", .init = init,
                                 .fini = fini,
#if JR_PLUGIN_ABI_MINOR >= 1 /* so the test also builds against ABI 1.0, to see it fail there */
                                 .runner_init = runner_init, .runner_exit = runner_exit
#endif
};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
