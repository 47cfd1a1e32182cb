/* The executor: see exec.h. */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jr.h"
#include "log.h"
#include "util.h"

#define NONE UINT32_MAX

/* One result, written by the runner. */
typedef struct slot {
    int32_t result;
    int32_t pad;
    int64_t retry_after_ms;
    int64_t duration_us;
    char error[256];
} slot_t;

/* Memory shared between the worker and one runner. The runner writes
 * started_at then started before a task, the slot then done after it, and
 * finished when it leaves the batch; each with release order, read with
 * acquire order. */
typedef struct shm {
    uint32_t started;      /* index of the task running or last run, NONE before the first */
    uint32_t done;         /* tasks finished */
    uint32_t finished;     /* 1 once the runner left the batch (done, or asked to stop) */
    volatile int stop;     /* set by the worker: stop after the current task */
    int64_t started_at_us; /* monotonic */
    slot_t slots[];
} shm_t;

typedef struct runner {
    pid_t pid;
    int fd;          /* our end of the socket to the runner */
    shm_t *shm;
    int busy;
    uint32_t n;      /* tasks in the batch */
    uint32_t collected; /* tasks [0, collected) have outcomes */
    uint32_t base;   /* index in the batch of the first task last sent */
    uint32_t *tags;
    int64_t *timeouts_ms;
    char *msg;       /* the batch as sent: header then tasks */
    size_t msg_len;
    size_t *offs;    /* where task i starts in msg */
    uint32_t timed_out; /* task killed for its timeout, NONE */
    int abandon;     /* killed on purpose: report what is left as unstarted */
} runner_t;

struct jr_exec {
    const jr_registry_t *reg;
    int inline_mode, stopping;
    size_t nrunners, max_batch, shm_size;
    runner_t *runners;
    /* inline mode: outcomes waiting for collect */
    jr_outcome_t *pending;
    size_t npending;
    volatile int inline_stop;
};

/* ---- the batch message --------------------------------------------------
 * u32 length of what follows, u32 n, then per task:
 * u32 attempt, i64 timeout_ms, u32 id/queue/handler/payload lengths, then
 * the four strings, each followed by a NUL. */

typedef struct task_hdr {
    uint32_t attempt;
    uint32_t lens[4];
    int64_t timeout_ms;
} task_hdr_t;

static int put(char **buf, size_t *len, size_t *cap, const void *p, size_t n) {
    if (*len + n > *cap) {
        size_t nc = *cap ? *cap : 4096;
        while (nc < *len + n) nc *= 2;
        char *nb = realloc(*buf, nc);
        if (!nb) return JR_ENOMEM;
        *buf = nb, *cap = nc;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    return 0;
}

/* ---- the runner process -------------------------------------------------- */

static int read_full(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t got = read(fd, c, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        c += got, n -= (size_t)got;
    }
    return 0;
}

static void notify(int fd) {
    jr_log_flush(); /* the handler's log lines go out before the worker's */
    char b = 'x';
    while (write(fd, &b, 1) < 0 && errno == EINTR) {
    }
}

/* Run batches from fd until the worker closes it. Never returns. */
static void runner_main(int fd, shm_t *shm, const jr_registry_t *reg) {
    char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        uint32_t len;
        if (read_full(fd, &len, sizeof len) != 0) _exit(0);
        if (len > cap) {
            free(buf);
            if (!(buf = malloc(cap = len))) _exit(70);
        }
        if (read_full(fd, buf, len) != 0) _exit(0);
        uint32_t n;
        memcpy(&n, buf, sizeof n);
        size_t off = sizeof n;
        int64_t last_notify = jr_mono_us();
        for (uint32_t i = 0; i < n; i++) {
            if (__atomic_load_n(&shm->stop, __ATOMIC_ACQUIRE)) break;
            task_hdr_t h;
            memcpy(&h, buf + off, sizeof h);
            off += sizeof h;
            const char *s[4];
            for (int k = 0; k < 4; k++) {
                s[k] = buf + off;
                off += h.lens[k] + 1;
            }
            int64_t t0 = jr_mono_us();
            __atomic_store_n(&shm->started_at_us, t0, __ATOMIC_RELEASE);
            __atomic_store_n(&shm->started, i, __ATOMIC_RELEASE);
            jr_job_t job = {.id = s[0], .queue = s[1], .handler = s[2], .payload = s[3],
                            .payload_len = h.lens[3], .attempt = h.attempt,
                            .deadline_ms = jr_wall_ms() + h.timeout_ms, .stop_flag = &shm->stop};
            slot_t *sl = &shm->slots[i];
            const jr_handler_t *hd = jr_registry_find(reg, s[2]);
            if (hd) {
                sl->result = (int32_t)jr_handler_run(hd, &job);
                sl->retry_after_ms = job.retry_after_ms;
                snprintf(sl->error, sizeof sl->error, "%s", job.error);
            } else {
                sl->result = JR_RESULT_FAIL;
                sl->retry_after_ms = -1;
                snprintf(sl->error, sizeof sl->error, "no handler named \"%s\" is loaded", s[2]);
            }
            int64_t t1 = jr_mono_us();
            sl->duration_us = t1 - t0;
            __atomic_store_n(&shm->done, i + 1, __ATOMIC_RELEASE);
            /* Wake the worker after a slow job, so its acknowledgement is not
             * held back by the rest of the batch; fast jobs wait for the end. */
            if (t1 - last_notify > 1000 && i + 1 < n) {
                notify(fd);
                last_notify = jr_mono_us();
            }
        }
        __atomic_store_n(&shm->finished, 1, __ATOMIC_RELEASE);
        notify(fd);
    }
}

/* Fork the runner process of r. Returns 0 or an error. */
static int spawn(jr_exec_t *x, runner_t *r) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return JR_EIO;
    jr_log_flush(); /* or the child would write our buffered lines again */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]), close(sv[1]);
        return JR_EIO;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        /* Shutdown is the worker's to run: it tells us through shm->stop. */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        /* A handler's crash must end the runner by its signal, so the worker
         * can name it (a sanitizer's handler would turn it into exit(1)). */
        int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGPIPE};
        for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) signal(fatal[i], SIG_DFL);
        int fd = dup2(sv[1], 3);
        if (fd < 0) _exit(71);
        close_range(4, ~0U, 0); /* Redis sockets and other runners' ends */
        runner_main(fd, r->shm, x->reg);
    }
    close(sv[1]);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    r->pid = pid;
    r->fd = sv[0];
    return 0;
}

/* Send tasks [from, n) of r's batch to its process, as a message of their
 * own: the runner numbers them from 0, we from `from` (r->base). */
static int send_batch(runner_t *r, uint32_t from) {
    shm_t *m = r->shm;
    m->started = NONE;
    m->finished = 0;
    __atomic_store_n(&m->done, 0, __ATOMIC_RELEASE);
    r->base = from;
    size_t body = r->msg_len - r->offs[from];
    uint32_t n = r->n - from, len = (uint32_t)(sizeof n + body);
    char head[8];
    memcpy(head, &len, 4);
    memcpy(head + 4, &n, 4);
    const char *parts[2] = {head, r->msg + r->offs[from]};
    size_t sizes[2] = {8, body};
    for (int p = 0; p < 2; p++) {
        size_t sent = 0;
        while (sent < sizes[p]) {
            ssize_t w = write(r->fd, parts[p] + sent, sizes[p] - sent);
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                struct pollfd pf = {.fd = r->fd, .events = POLLOUT};
                poll(&pf, 1, 100);
                continue;
            }
            if (w < 0) return JR_EIO;
            sent += (size_t)w;
        }
    }
    return 0;
}

jr_exec_t *jr_exec_new(const jr_registry_t *reg, int inline_mode, int concurrency,
                       size_t max_batch, char *err, size_t errlen) {
    jr_exec_t *x = calloc(1, sizeof *x);
    if (!x) goto oom;
    x->reg = reg;
    x->inline_mode = inline_mode;
    x->max_batch = max_batch;
    x->nrunners = inline_mode ? 1 : (size_t)(concurrency > 0 ? concurrency : 1);
    if (inline_mode) {
        if (!(x->pending = calloc(max_batch, sizeof *x->pending))) goto oom;
        return x;
    }
    if (!(x->runners = calloc(x->nrunners, sizeof *x->runners))) goto oom;
    x->shm_size = sizeof(shm_t) + max_batch * sizeof(slot_t);
    for (size_t i = 0; i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        r->fd = -1;
        r->shm = mmap(NULL, x->shm_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (r->shm == MAP_FAILED) {
            r->shm = NULL;
            snprintf(err, errlen, "mmap: %s", strerror(errno));
            goto fail;
        }
        r->tags = calloc(max_batch, sizeof *r->tags);
        r->timeouts_ms = calloc(max_batch, sizeof *r->timeouts_ms);
        r->offs = calloc(max_batch + 1, sizeof *r->offs);
        if (!r->tags || !r->timeouts_ms || !r->offs) goto oom;
        if (spawn(x, r) != 0) {
            snprintf(err, errlen, "cannot start a handler process: %s", strerror(errno));
            goto fail;
        }
    }
    return x;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    jr_exec_free(x);
    return NULL;
}

/* SIGKILL r's process and reap it. Returns its wait status. */
static int reap(runner_t *r, int sig) {
    int st = 0;
    if (r->pid > 0) {
        if (sig) kill(r->pid, sig);
        while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    if (r->fd >= 0) close(r->fd);
    r->pid = 0, r->fd = -1;
    return st;
}

void jr_exec_free(jr_exec_t *x) {
    if (!x) return;
    for (size_t i = 0; x->runners && i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        reap(r, SIGKILL);
        if (r->shm) munmap(r->shm, x->shm_size);
        free(r->tags), free(r->timeouts_ms), free(r->offs), free(r->msg);
    }
    free(x->runners);
    free(x->pending);
    free(x);
}

size_t jr_exec_idle(const jr_exec_t *x) {
    if (x->inline_mode) return x->stopping ? 0 : 1;
    size_t n = 0;
    for (size_t i = 0; i < x->nrunners; i++) n += !x->runners[i].busy && x->runners[i].pid > 0;
    return x->stopping ? 0 : n;
}

size_t jr_exec_busy(const jr_exec_t *x) {
    if (x->inline_mode) return x->npending;
    size_t n = 0;
    for (size_t i = 0; i < x->nrunners; i++)
        if (x->runners[i].busy) n += x->runners[i].n - x->runners[i].collected;
    return n;
}

static jr_out_t kind_of(int32_t result) {
    switch (result) {
    case JR_RESULT_OK: return JR_OUT_OK;
    case JR_RESULT_RETRY: return JR_OUT_RETRY;
    default: return JR_OUT_FAIL;
    }
}

/* Run tasks in this process (inline mode). */
static void run_inline(jr_exec_t *x, const jr_task_t *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        jr_job_t job = {.id = t[i].id, .queue = t[i].queue, .handler = t[i].handler,
                        .payload = t[i].payload, .payload_len = t[i].payload_len,
                        .attempt = t[i].attempt, .deadline_ms = jr_wall_ms() + t[i].timeout_ms,
                        .stop_flag = &x->inline_stop};
        jr_outcome_t *o = &x->pending[x->npending++];
        memset(o, 0, sizeof *o);
        o->tag = t[i].tag;
        const jr_handler_t *h = jr_registry_find(x->reg, t[i].handler);
        int64_t t0 = jr_mono_us();
        if (h) {
            o->kind = kind_of(jr_handler_run(h, &job));
            o->retry_after_ms = job.retry_after_ms;
            snprintf(o->error, sizeof o->error, "%s", job.error);
        } else {
            o->kind = JR_OUT_FAIL;
            o->retry_after_ms = -1;
            snprintf(o->error, sizeof o->error, "no handler named \"%s\" is loaded", t[i].handler);
        }
        o->duration_us = jr_mono_us() - t0;
    }
}

int jr_exec_submit(jr_exec_t *x, const jr_task_t *t, size_t n) {
    if (n == 0) return 0;
    if (n > x->max_batch) return JR_EINVAL;
    if (x->inline_mode) {
        if (x->npending + n > x->max_batch) return JR_EINVAL;
        run_inline(x, t, n);
        return 0;
    }
    runner_t *r = NULL;
    for (size_t i = 0; i < x->nrunners && !r; i++)
        if (!x->runners[i].busy && x->runners[i].pid > 0) r = &x->runners[i];
    if (!r || x->stopping) return JR_EINVAL;
    size_t len = 0, cap = 0;
    char *msg = r->msg;
    r->msg = NULL;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        task_hdr_t h;
        memset(&h, 0, sizeof h); /* padding too: it goes down the socket */
        h.attempt = t[i].attempt, h.timeout_ms = t[i].timeout_ms;
        h.lens[0] = (uint32_t)strlen(t[i].id), h.lens[1] = (uint32_t)strlen(t[i].queue);
        h.lens[2] = (uint32_t)strlen(t[i].handler), h.lens[3] = (uint32_t)t[i].payload_len;
        r->offs[i] = len;
        r->tags[i] = t[i].tag;
        r->timeouts_ms[i] = t[i].timeout_ms;
        const char *s[4] = {t[i].id, t[i].queue, t[i].handler, t[i].payload ? t[i].payload : ""};
        rc = put(&msg, &len, &cap, &h, sizeof h);
        for (int k = 0; k < 4 && !rc; k++) {
            rc = put(&msg, &len, &cap, s[k], h.lens[k]);
            if (!rc) rc = put(&msg, &len, &cap, "", 1);
        }
    }
    r->offs[n] = len;
    r->msg = msg, r->msg_len = len;
    if (rc) return rc;
    r->n = (uint32_t)n, r->collected = 0, r->busy = 1;
    r->timed_out = NONE, r->abandon = 0;
    r->shm->stop = 0;
    return send_batch(r, 0) == 0 ? 0 : JR_EIO;
}

size_t jr_exec_pollfds(const jr_exec_t *x, struct pollfd *fds, size_t max) {
    size_t k = 0;
    for (size_t i = 0; !x->inline_mode && i < x->nrunners && k < max; i++)
        if (x->runners[i].busy && x->runners[i].fd >= 0)
            fds[k++] = (struct pollfd){.fd = x->runners[i].fd, .events = POLLIN};
    return k;
}

/* Index in the batch of the task now running (NONE if none), and since
 * when (monotonic us). */
static uint32_t running(const runner_t *r, int64_t *since) {
    uint32_t st = __atomic_load_n(&r->shm->started, __ATOMIC_ACQUIRE);
    uint32_t d = __atomic_load_n(&r->shm->done, __ATOMIC_ACQUIRE);
    *since = __atomic_load_n(&r->shm->started_at_us, __ATOMIC_ACQUIRE);
    return st != NONE && st >= d ? r->base + st : NONE;
}

int64_t jr_exec_deadline(const jr_exec_t *x) {
    int64_t best = -1;
    for (size_t i = 0; !x->inline_mode && i < x->nrunners; i++) {
        const runner_t *r = &x->runners[i];
        int64_t since;
        uint32_t t;
        if (!r->busy || (t = running(r, &since)) == NONE) continue;
        int64_t at = since + r->timeouts_ms[t] * 1000;
        if (best < 0 || at < best) best = at;
    }
    return best;
}

static jr_outcome_t *emit(jr_outcome_t *out, size_t *k, const runner_t *r, uint32_t t, jr_out_t kind) {
    jr_outcome_t *o = &out[(*k)++];
    memset(o, 0, sizeof *o);
    o->tag = r->tags[t];
    o->kind = kind;
    o->retry_after_ms = -1;
    return o;
}

/* Outcomes of tasks the runner finished since the last look. */
static void emit_done(runner_t *r, jr_outcome_t *out, size_t *k) {
    uint32_t d = __atomic_load_n(&r->shm->done, __ATOMIC_ACQUIRE);
    for (; r->collected < r->base + d; r->collected++) {
        const slot_t *sl = &r->shm->slots[r->collected - r->base];
        jr_outcome_t *o = emit(out, k, r, r->collected, kind_of(sl->result));
        o->retry_after_ms = sl->retry_after_ms;
        o->duration_us = sl->duration_us;
        snprintf(o->error, sizeof o->error, "%s", sl->error);
    }
}

/* Everything not yet collected comes back unstarted; the runner is free. */
static void emit_rest_unstarted(runner_t *r, jr_outcome_t *out, size_t *k) {
    for (; r->collected < r->n; r->collected++) emit(out, k, r, r->collected, JR_OUT_UNSTARTED);
    r->busy = 0;
}

/* The runner's process is gone (or was killed): account for the task it
 * was running, start a new process, and give it the rest of the batch. */
static void runner_died(jr_exec_t *x, runner_t *r, jr_outcome_t *out, size_t *k) {
    int64_t since;
    uint32_t t = running(r, &since);
    int st = reap(r, 0);
    emit_done(r, out, k); /* it may have finished some before dying */
    if (t != NONE && t == r->collected) {
        jr_out_t kind = r->abandon ? JR_OUT_UNSTARTED : r->timed_out == t ? JR_OUT_TIMEOUT : JR_OUT_CRASH;
        jr_outcome_t *o = emit(out, k, r, t, kind);
        o->duration_us = jr_mono_us() - since;
        if (kind == JR_OUT_TIMEOUT)
            snprintf(o->error, sizeof o->error, "timeout: still running after %lldms; killed",
                     (long long)r->timeouts_ms[t]);
        else if (WIFSIGNALED(st))
            snprintf(o->error, sizeof o->error, "crashed: SIG%s (%s)",
                     sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?", strsignal(WTERMSIG(st)));
        else
            snprintf(o->error, sizeof o->error, "crashed: the handler process exited with status %d",
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        r->collected++;
    }
    if (x->stopping || r->abandon) {
        emit_rest_unstarted(r, out, k);
        return;
    }
    if (spawn(x, r) != 0) {
        jr_log_kv(JR_LOG_ERROR, "cannot restart a handler process", "error", strerror(errno), NULL);
        emit_rest_unstarted(r, out, k);
        return;
    }
    r->timed_out = NONE;
    if (r->collected < r->n && send_batch(r, r->collected) == 0) return;
    emit_rest_unstarted(r, out, k);
}

size_t jr_exec_collect(jr_exec_t *x, jr_outcome_t *out, size_t max) {
    size_t k = 0;
    if (x->inline_mode) {
        k = x->npending < max ? x->npending : max;
        memcpy(out, x->pending, k * sizeof *out);
        memmove(x->pending, x->pending + k, (x->npending - k) * sizeof *out);
        x->npending -= k;
        return k;
    }
    for (size_t i = 0; i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        if (!r->busy) continue;
        if (k + (r->n - r->collected) > max) break; /* the caller comes back */
        char buf[256];
        ssize_t got;
        int dead = 0;
        while ((got = read(r->fd, buf, sizeof buf)) > 0) {
        }
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) dead = 1;
        emit_done(r, out, &k);
        if (!dead && __atomic_load_n(&r->shm->finished, __ATOMIC_ACQUIRE)) {
            emit_done(r, out, &k);
            emit_rest_unstarted(r, out, &k); /* asked to stop: the rest never ran */
            continue;
        }
        if (!dead && waitpid(r->pid, NULL, WNOHANG) == r->pid) r->pid = -r->pid, dead = 1;
        if (!dead) {
            int64_t since;
            uint32_t t = running(r, &since);
            if (t != NONE && jr_mono_us() >= since + r->timeouts_ms[t] * 1000) {
                r->timed_out = t;
                kill(r->pid, SIGKILL);
                dead = 1;
            }
        }
        if (dead) {
            if (r->pid < 0) r->pid = 0; /* already reaped above */
            runner_died(x, r, out, &k);
        }
    }
    return k;
}

void jr_exec_stop(jr_exec_t *x) {
    x->stopping = 1;
    x->inline_stop = 1;
    for (size_t i = 0; !x->inline_mode && i < x->nrunners; i++)
        __atomic_store_n(&x->runners[i].shm->stop, 1, __ATOMIC_RELEASE);
}

void jr_exec_kill(jr_exec_t *x) {
    x->stopping = 1;
    for (size_t i = 0; !x->inline_mode && i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        if (r->busy && r->pid > 0) {
            r->abandon = 1;
            kill(r->pid, SIGKILL);
        }
    }
}
