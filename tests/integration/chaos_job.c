/* Hostile job plugin for the chaos test (test_chaos.c). Every run appends one
 * line to the file named by the environment variable JRT_CHAOS_RECORD, with a
 * single O_APPEND write so lines of concurrent processes never mix:
 *   <queue> TAB <job id> TAB <attempt> TAB <ancestry> TAB <Unix us> TAB <outcome> LF
 * The ancestry is "pid,parent,grandparent,..." (up to 4, from /proc): the
 * test finds the worker among them, and knows a run in a handler's forked
 * child by it. The outcome is what the handler is about to do (ok, retry,
 * fail, crash, abort, hang). A handler that forks also writes
 * "#child TAB <pid>" so the test can tell and stop strays by pid. Handlers:
 *   ok        returns OK
 *   slow      sleeps <payload> ms, then returns OK
 *   flaky     attempt 1 asks for a retry in 100 ms, later attempts return OK
 *   fail      returns FAIL (permanent) with error "refused by chaos test"
 *   crash     dies of SIGSEGV
 *   abort     calls abort()
 *   hang      sleeps forever, ignoring should_stop
 *   fork      forks, and both processes return OK
 *   forkwait  forks a child that sleeps 1 s then exits; the parent returns OK */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jobrunner/plugin.h>

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Append one line to the record file. Returns 0, or -1 if it cannot. */
static int append(const char *line, size_t n) {
    const char *path = getenv("JRT_CHAOS_RECORD");
    if (!path) return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0) return -1;
    int ok = write(fd, line, n) == (ssize_t)n;
    close(fd);
    return ok ? 0 : -1;
}

/* The parent of pid, from /proc/<pid>/stat (0 if unknown). */
static int parent_of(int pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold anything */
    int ppid = 0;
    return p && sscanf(p + 1, " %*c %d", &ppid) == 1 ? ppid : 0;
}

/* "pid,parent,grandparent,great-grandparent" (stops at init). */
static void ancestry(char *out, size_t len) {
    int pid = (int)getpid(), ppid = (int)getppid();
    int n = snprintf(out, len, "%d,%d", pid, ppid);
    for (int i = 0; i < 2 && ppid > 1 && n > 0 && (size_t)n < len; i++) {
        ppid = parent_of(ppid);
        n += snprintf(out + n, len - (size_t)n, ",%d", ppid);
    }
}

/* Record this run with the outcome the handler intends. Returns 0, or -1
 * (with the job's error set) if the record cannot be written. */
static int record(jr_job_t *job, const jr_host_api_t *api, const char *outcome) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long us = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    char line[512], chain[64];
    ancestry(chain, sizeof chain);
    int n = snprintf(line, sizeof line, "%s\t%s\t%u\t%s\t%lld\t%s\n", api->job_queue(job), api->job_id(job),
                     api->job_attempt(job), chain, us, outcome);
    if (n < 0 || (size_t)n >= sizeof line || append(line, (size_t)n) != 0) {
        api->set_error(job, "chaos_job: cannot write the record file (JRT_CHAOS_RECORD)");
        return -1;
    }
    return 0;
}

static void record_child(pid_t pid) {
    char line[64];
    int n = snprintf(line, sizeof line, "#child\t%d\n", (int)pid);
    if (append(line, (size_t)n) != 0) {
    }
}

static jr_result_t ok(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    return record(job, api, "ok") ? JR_RESULT_RETRY : JR_RESULT_OK;
}

static jr_result_t slow(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    size_t len;
    sleep_ms(atol((const char *)api->job_payload(job, &len)));
    return ok(job, api, udata);
}

static jr_result_t flaky(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    if (api->job_attempt(job) >= 2) return ok(job, api, udata);
    if (record(job, api, "retry")) return JR_RESULT_RETRY;
    api->set_error(job, "flaky: first attempt fails");
    api->retry_after(job, 100);
    return JR_RESULT_RETRY;
}

static jr_result_t fail(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    if (record(job, api, "fail")) return JR_RESULT_RETRY;
    api->set_error(job, "refused by chaos test");
    return JR_RESULT_FAIL;
}

static jr_result_t crash(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    if (record(job, api, "crash")) return JR_RESULT_RETRY;
    raise(SIGSEGV);
    return JR_RESULT_OK;
}

static jr_result_t abort_(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    if (record(job, api, "abort")) return JR_RESULT_RETRY;
    abort();
}

static jr_result_t hang(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    if (record(job, api, "hang")) return JR_RESULT_RETRY;
    for (;;) pause();
}

static jr_result_t fork_(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    if (record(job, api, "ok")) return JR_RESULT_RETRY;
    pid_t pid = fork();
    if (pid > 0) record_child(pid);
    return JR_RESULT_OK; /* in both processes */
}

static jr_result_t forkwait(jr_job_t *job, const jr_host_api_t *api, void *udata) {
    (void)udata;
    if (record(job, api, "ok")) return JR_RESULT_RETRY;
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(1000);
        _exit(0);
    }
    if (pid > 0) record_child(pid);
    return JR_RESULT_OK;
}

static int init(void *ctx, const jr_host_api_t *api) {
    return api->register_handler(ctx, "ok", ok, NULL) || api->register_handler(ctx, "slow", slow, NULL) ||
           api->register_handler(ctx, "flaky", flaky, NULL) || api->register_handler(ctx, "fail", fail, NULL) ||
           api->register_handler(ctx, "crash", crash, NULL) || api->register_handler(ctx, "abort", abort_, NULL) ||
           api->register_handler(ctx, "hang", hang, NULL) || api->register_handler(ctx, "fork", fork_, NULL) ||
           api->register_handler(ctx, "forkwait", forkwait, NULL);
}

static const jr_plugin_t desc = {JR_PLUGIN_HEADER, .name = "chaos", .version = "1", .init = init};

JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &desc; }
