/* The executor: see exec.h. */
#include "exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jr.h"
#include "log.h"
#include "proc.h"
#include "util.h"

#define NONE UINT32_MAX
#define RESULT_INTERRUPTED 100 /* slot result: RETRY after the stop flag was set */
#define EXIT_WAIT_MS 2000      /* how long jr_exec_free waits for runner_exit */
/* Tasks waiting behind one that has run this long move to idle runners. A
 * job shorter than this never causes a move (a move costs a message, and
 * would break up batches of quick jobs for nothing). */
#define MOVE_AFTER_US 1000
#define NO_PIDFD_POLL_US 100000 /* how often a runner without a pidfd is looked at */
/* A runner that dies before running a job is replaced after a delay that
 * starts here and doubles with each such death in a row, up to the max. */
#define RESPAWN_MIN_US 100000
#define RESPAWN_MAX_US 30000000
#define WAKE_BYTE 'x'   /* runner -> worker: look at the shared memory */
#define FRAME_BYTE 'F'  /* runner -> worker: a frame of follow-ups follows */
#define FRAME_HDR (1 + 4 + 8)
#define READ_CHUNK 65536
/* Inline mode: jr_exec_collect starts no task once it has run tasks for
 * this long, so the worker's loop (heartbeats, pause, cancel, signals)
 * turns at least this often between jobs (and after each longer job). */
#define INLINE_SLICE_US 2000

/* One result, written by the runner. */
typedef struct slot {
    int32_t result;
    volatile int cancel; /* set by the worker (jr_exec_cancel): api->cancelled */
    int32_t followups; /* 1: a frame of follow-ups was sent for this task */
    int64_t retry_after_ms;
    int64_t duration_us;
    char error[256];
} slot_t;

/* Memory shared between the worker and one runner (the runner's handlers
 * can write it too, so the worker checks what it reads against what it
 * sent).
 *
 * claim packs (next << 32) | end: the tasks of the message are [0, end) and
 * the runner has claimed [0, next). The runner takes task next by a CAS to
 * next + 1 while next < end; the worker takes the unclaimed rest by a CAS of
 * end to next. So each task is run by the runner that claimed it, or moved,
 * never both. After claiming, the runner writes started_at then started, the
 * slot then done after the task, and finished when it leaves the batch;
 * each with release order, read with acquire order. */
typedef struct shm {
    uint64_t claim;
    uint32_t started;      /* index of the task running or last run, NONE before the first */
    uint32_t done;         /* tasks finished: [0, done) */
    uint32_t finished;     /* 1 once the runner left the batch (nothing left, or asked to stop) */
    volatile int stop;     /* set by the worker: stop after the current task */
    int64_t started_at_us; /* monotonic */
    uint32_t init_plugin;  /* 1 + index of the plugin whose runner_init runs, 0 = none */
    uint32_t ready;        /* 1 once the runner's runner_init calls returned */
    slot_t slots[];
} shm_t;

typedef struct runner {
    pid_t pid;          /* 0 = none */
    int fd;             /* our end of the socket to the runner, -1 = none */
    int pidfd;          /* -1 = none */
    shm_t *shm;
    int busy;
    uint32_t n;         /* tasks in the message sent */
    uint32_t end;       /* [0, end) are this runner's; [end, n) were moved away */
    uint32_t collected; /* tasks [0, collected) have outcomes */
    uint32_t *tags;
    int64_t *timeouts_ms;
    size_t *offs;       /* where task i starts in msg; offs[n] is the length */
    char *msg;          /* the tasks as sent (after the 8-byte header) */
    size_t msg_cap;
    uint32_t timed_out; /* task killed for its timeout, NONE */
    int abandon;        /* killed on purpose: report what is left as unstarted */
    int exited;         /* seen by collect: the pidfd says the process is gone */
    int sock_ready;     /* seen by collect: the socket has bytes or EOF */
    char *in;           /* bytes read from the socket not yet used: [in_off, in_len) */
    size_t in_off, in_len, in_cap;
    int ran;            /* this process has started a task */
    int fails;          /* processes in a row that died before starting one */
    int64_t respawn_at; /* monotonic us: start the next process then (pid is 0); 0 = not waiting */
    int64_t handed_us;  /* monotonic us: the batch was handed over before runner_init returned; 0 = it had */
    int init_hung;      /* killed: runner_init had not returned within the first task's timeout */
} runner_t;

struct jr_exec {
    const jr_registry_t *reg;
    int inline_mode, stopping;
    size_t nrunners, max_batch, shm_size;
    int64_t max_payload; /* a follow-up's payload, at most */
    runner_t *runners;
    int epfd;                /* the runners' sockets and pidfds */
    struct epoll_event *evs; /* 2 per runner */
    int *keep;               /* fds open at start, ascending: runners keep these */
    size_t nkeep;
    /* inline mode: the submission held, run by collect a slice at a time:
     * tasks [iq_head, iq_n) of iq are not started; their strings live in
     * iq_buf; icancel[i]: jr_exec_cancel flagged task i */
    jr_task_t *iq;
    unsigned char *icancel;
    size_t iq_head, iq_n;
    char *iq_buf;
    size_t iq_cap;
    volatile int inline_stop; /* int is sig_atomic_t here: on_stop_signal sets it */
    jr_cancel_probe_fn probe; /* inline mode: api->cancelled asks this */
    void *probe_ctx;
    char cause[200]; /* why a runner last died before running a job, as logged; "" = none since */
    int nomem;       /* jr_exec_collect ran out of memory (jr_exec_nomem) */
};

/* ---- the batch message --------------------------------------------------
 * u64 length of what follows, u32 n, then per task:
 * u32 attempt, i64 timeout_ms, u32 id/queue/handler/payload lengths, then
 * the four strings, each followed by a NUL. */

typedef struct task_hdr {
    uint32_t attempt;
    uint32_t lens[4];
    int64_t timeout_ms;
} task_hdr_t;

/* Make room for `need` bytes of message in r. */
static int msg_reserve(runner_t *r, size_t need) {
    if (need <= r->msg_cap) return 0;
    size_t nc = r->msg_cap ? r->msg_cap : 4096;
    while (nc < need) nc *= 2;
    char *nb = realloc(r->msg, nc);
    if (!nb) return JR_ENOMEM;
    r->msg = nb, r->msg_cap = nc;
    return 0;
}

static int put(runner_t *r, size_t *len, const void *p, size_t n) {
    if (msg_reserve(r, *len + n)) return JR_ENOMEM;
    memcpy(r->msg + *len, p, n);
    *len += n;
    return 0;
}

static jr_out_t kind_of(int32_t result) {
    switch (result) {
    case JR_RESULT_OK: return JR_OUT_OK;
    case JR_RESULT_RETRY: return JR_OUT_RETRY;
    case RESULT_INTERRUPTED: return JR_OUT_INTERRUPTED;
    default: return JR_OUT_FAIL;
    }
}

/* ---- the runner process -------------------------------------------------- */

/* 1 in a process forked (by fork(), daemon(), ...) from one that runs
 * handlers: set by a pthread_atfork child handler, so checking it after each
 * handler costs nothing (getpid() is a system call, microseconds in a VM). A
 * runner clears it right after its own fork. */
static volatile int forked_copy;
/* 1 once a handler in this runner forked: its children may need reaping. */
static volatile int forked_children;

static void on_fork_parent(void) { forked_children = 1; }
static void on_fork_child(void) { forked_copy = 1; }

/* Register the fork handlers once per process. */
static int watch_forks(void) {
    static int done;
    if (!done && pthread_atfork(NULL, on_fork_parent, on_fork_child) != 0) return -1;
    done = 1;
    return 0;
}

/* A process the handler forked that returned from it: not ours to report. */
static void exit_if_forked_copy(void) {
    if (forked_copy) _exit(0);
}

static int write_full(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w, n -= (size_t)w;
    }
    return 0;
}

/* Send the result and follow-ups (fu NULL: none) of task i to the worker
 * (before the task is marked done: see jr_exec_new). A runner that cannot
 * write to its worker ends. */
static void send_frame(int fd, uint32_t i, const char *result, uint32_t rlen, const jr_fu_list_t *fu) {
    char hdr[FRAME_HDR + 4];
    size_t flen = fu ? fu->len : 0;
    uint64_t len = 4 + (uint64_t)rlen + flen;
    hdr[0] = FRAME_BYTE;
    memcpy(hdr + 1, &i, 4);
    memcpy(hdr + 5, &len, 8);
    memcpy(hdr + FRAME_HDR, &rlen, 4);
    if (write_full(fd, hdr, sizeof hdr) != 0 || write_full(fd, result, rlen) != 0 ||
        (flen && write_full(fd, fu->buf, flen) != 0))
        _exit(70);
}

/* Split a frame (buf, len: malloc'ed, taken) into o's result and
 * follow-ups. Returns 0, or -1 with why (buf freed) when its result
 * length is past JR_RESULT_MAX or the frame. */
static int split_frame(char *buf, size_t len, jr_outcome_t *o, int *nomem, char *why, size_t wl) {
    uint32_t rlen;
    if (len < 4 || (memcpy(&rlen, buf, 4), rlen > JR_RESULT_MAX) || 4 + (size_t)rlen > len) {
        snprintf(why, wl, "its result came garbled from the handler process (%zu bytes of frame)", len);
        free(buf);
        return -1;
    }
    if (rlen) {
        if (!(o->result = malloc(rlen))) {
            *nomem = 1;
            snprintf(why, wl, "out of memory for its result");
            free(buf);
            return -1;
        }
        memcpy(o->result, buf + 4, rlen);
        o->result_len = rlen;
    }
    size_t flen = len - 4 - rlen;
    if (flen) {
        memmove(buf, buf + 4 + rlen, flen);
        o->followups = buf, o->followups_len = flen;
    } else {
        free(buf);
    }
    return 0;
}

static void notify(int fd) {
    jr_log_flush(); /* the handler's log lines go out before the worker's */
    char b = WAKE_BYTE;
    while (write(fd, &b, 1) < 0 && errno == EINTR) {
    }
}

/* Claim task i of the message. Returns 1 and the end of the message (tasks
 * after i that may still come to us: [i + 1, *end)), or 0 if the worker
 * took the rest. */
static int claim(shm_t *shm, uint32_t i, uint32_t *end) {
    uint64_t c = __atomic_load_n(&shm->claim, __ATOMIC_SEQ_CST);
    for (;;) {
        uint32_t next = (uint32_t)(c >> 32), e = (uint32_t)c;
        if (next != i || next >= e) return 0;
        if (__atomic_compare_exchange_n(&shm->claim, &c, c + (1ULL << 32), 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            *end = e;
            return 1;
        }
    }
}

/* Run one job, in a runner process or (inline mode) in the worker itself:
 * the handler named job->handler, with the job the caller set up (its stop
 * flag, cancel flag or probe, its follow-up list). Returns the result:
 * JR_RESULT_OK, _RETRY, _FAIL, or RESULT_INTERRUPTED for a RETRY returned
 * after *job->stop_flag was set; the handler's error text is in job->error
 * and its retry delay in job->retry_after_ms (-1 = not set), and the
 * follow-ups it enqueued in job->fu (the caller takes them from an OK job,
 * then resets the list). A handler that is not loaded is FAIL, one whose
 * plugin's runner_init failed RETRY, each saying so in job->error. Never
 * returns in a process a handler forked (exit_if_forked_copy). */
static int32_t run_job(const jr_registry_t *reg, jr_job_t *job) {
    const jr_handler_t *h = jr_registry_find(reg, job->handler);
    job->retry_after_ms = -1;
    if (!h) {
        snprintf(job->error, sizeof job->error, "no handler named \"%s\" is loaded", job->handler);
        return JR_RESULT_FAIL;
    }
    if (jr_handler_ready(reg, h, job->error, sizeof job->error) != 0) {
        exit_if_forked_copy();
        return JR_RESULT_RETRY;
    }
    int32_t res = (int32_t)jr_handler_run(h, job);
    exit_if_forked_copy(); /* a copy of the runner (or of the worker) must not go on */
    if (res == JR_RESULT_RETRY && __atomic_load_n(job->stop_flag, __ATOMIC_ACQUIRE)) res = RESULT_INTERRUPTED;
    return res;
}

/* Run task i of a runner's batch (run_job): its result into sl, its
 * follow-ups (if it succeeded) down fd first. Never returns in a process a
 * handler forked. */
static void run_task(const jr_registry_t *reg, shm_t *shm, const task_hdr_t *h, const char *const s[4],
                     slot_t *sl, int fd, uint32_t i, int64_t max_payload) {
    jr_fu_list_t fu = {.max_payload = max_payload};
    static char result[JR_RESULT_MAX];
    uint32_t rlen = 0;
    jr_job_t job = {.id = s[0], .queue = s[1], .handler = s[2], .payload = s[3],
                    .payload_len = h->lens[3], .attempt = h->attempt,
                    .deadline_ms = jr_wall_ms() + h->timeout_ms,
                    .deadline_mono_us = jr_mono_us() + h->timeout_ms * 1000, .stop_flag = &shm->stop,
                    .cancel_flag = &sl->cancel, .fu = &fu, .result = result, .result_len = &rlen};
    int32_t res = run_job(reg, &job);
    sl->followups = 0; /* 1: a frame was sent (follow-ups, a result) */
    if (res != JR_RESULT_OK && res != JR_RESULT_FAIL) rlen = 0;
    if ((res == JR_RESULT_OK && fu.n > 0) || rlen) {
        send_frame(fd, i, result, rlen, res == JR_RESULT_OK ? &fu : NULL);
        sl->followups = 1;
    }
    jr_fu_reset(&fu);
    sl->result = res;
    sl->retry_after_ms = job.retry_after_ms;
    snprintf(sl->error, sizeof sl->error, "%s", job.error);
}

/* The next batch message from fd into *buf (grown as needed; *have bytes
 * of it already read, kept across calls): the message body (after its
 * u64 length) is at *buf + 8, its length in *len. Reads as much as the
 * socket holds per call, so a message usually takes one read. Returns 0,
 * or -1 at EOF or on an error. */
static int read_message(int fd, char **buf, size_t *cap, size_t *have, uint64_t *len) {
    size_t need = sizeof(uint64_t);
    for (;;) {
        if (*have >= sizeof(uint64_t)) {
            memcpy(len, *buf, sizeof *len);
            if (*len < sizeof(uint32_t) || *len > SIZE_MAX / 2) return -1;
            need = sizeof(uint64_t) + (size_t)*len;
        }
        if (*have >= need && need > sizeof(uint64_t)) return 0;
        if (need + 4096 > *cap) { /* room for the message, and a read ahead */
            size_t nc = *cap ? *cap : 65536;
            while (nc < need + 4096) nc *= 2;
            char *nb = realloc(*buf, nc);
            if (!nb) _exit(70);
            *buf = nb, *cap = nc;
        }
        ssize_t got = read(fd, *buf + *have, *cap - *have);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        *have += (size_t)got;
    }
}

/* Run batches from fd until the worker closes it, then call the plugins'
 * runner_exit. Never returns. */
static void runner_main(int fd, shm_t *shm, const jr_registry_t *reg, int64_t max_payload) {
    char *in = NULL;
    size_t cap = 0, have = 0;
    for (;;) {
        uint64_t len;
        if (read_message(fd, &in, &cap, &have, &len) != 0) break;
        const char *buf = in + sizeof(uint64_t);
        uint32_t n;
        memcpy(&n, buf, sizeof n);
        size_t off = sizeof n;
        int64_t last_notify = jr_mono_us();
        for (uint32_t i = 0, end; i < n; i++) {
            if (__atomic_load_n(&shm->stop, __ATOMIC_ACQUIRE) || !claim(shm, i, &end)) break;
            task_hdr_t h;
            if (off + sizeof h > len) _exit(70);
            memcpy(&h, buf + off, sizeof h);
            off += sizeof h;
            const char *s[4];
            for (int k = 0; k < 4; k++) {
                if (off + h.lens[k] + 1 > len) _exit(70);
                s[k] = buf + off;
                off += h.lens[k] + 1;
            }
            int64_t t0 = jr_mono_us();
            __atomic_store_n(&shm->started_at_us, t0, __ATOMIC_RELEASE);
            __atomic_store_n(&shm->started, i, __ATOMIC_RELEASE);
            slot_t *sl = &shm->slots[i];
            run_task(reg, shm, &h, s, sl, fd, i, max_payload);
            int64_t t1 = jr_mono_us();
            sl->duration_us = t1 - t0;
            __atomic_store_n(&shm->done, i + 1, __ATOMIC_RELEASE);
            /* Wake the worker after a slow job, so its acknowledgement is not
             * held back by the rest of the batch; fast jobs wait for the end. */
            if (t1 - last_notify > 1000 && i + 1 < end) {
                notify(fd);
                last_notify = jr_mono_us();
            }
        }
        if (forked_children) { /* reap the children handlers left behind */
            pid_t p;
            while ((p = waitpid(-1, NULL, WNOHANG)) > 0) {
            }
            forked_children = p == 0; /* some still run: look again next time */
        }
        size_t used = sizeof(uint64_t) + (size_t)len; /* the message is done with: drop it */
        memmove(in, in + used, have - used);
        have -= used;
        __atomic_store_n(&shm->finished, 1, __ATOMIC_RELEASE);
        notify(fd);
    }
    free(in);
    jr_registry_runner_exit(reg);
    jr_log_flush();
    _exit(0);
}

/* In a new runner: close every descriptor except the `n` in keep
 * (ascending) and `own`. */
static void keep_only(const int *keep, size_t n, int own) {
    unsigned lo = 0; /* lowest fd not yet decided */
    size_t i = 0;
    int own_done = 0;
    for (;;) {
        int k;
        if (i < n && (own_done || keep[i] < own)) k = keep[i++];
        else if (!own_done) k = own, own_done = 1;
        else break;
        if ((unsigned)k > lo) close_range(lo, (unsigned)k - 1, 0);
        if ((unsigned)k + 1 > lo) lo = (unsigned)k + 1;
    }
    close_range(lo, ~0U, 0);
}

static void drain(jr_exec_t *x, runner_t *r);

static void epoll_del(jr_exec_t *x, int fd) {
    if (fd >= 0) epoll_ctl(x->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* Fork the runner process of r. Returns 0 or JR_EIO (errno says why). */
static int spawn(jr_exec_t *x, runner_t *r) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return JR_EIO;
    jr_log_flush(); /* or the child would write our buffered lines again */
    __atomic_store_n(&r->shm->init_plugin, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&r->shm->ready, 0, __ATOMIC_RELEASE);
    r->init_hung = 0, r->handed_us = 0;
    __atomic_store_n(&r->shm->started, NONE, __ATOMIC_RELEASE);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]), close(sv[1]);
        errno = e;
        return JR_EIO;
    }
    if (pid == 0) {
        forked_copy = forked_children = 0; /* we are a runner, not a handler's copy */
        setpgid(0, 0);   /* our own group: killed as a whole on a timeout or crash */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        jr_proc_title("jobrunner-run", "jobrunner: runner of worker %d", (int)parent);
        /* Shutdown is the worker's to run: it tells us through shm->stop. */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        /* A handler's crash must end the runner by its signal, so the worker
         * can name it (a sanitizer's handler would turn it into exit(1)). */
        int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGPIPE};
        for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) signal(fatal[i], SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        keep_only(x->keep, x->nkeep, sv[1]); /* Redis sockets, other runners' ends */
        /* Only our own shared memory: a handler writing wild (or on purpose)
         * must not forge the results of jobs other runners are running. */
        for (size_t i = 0; i < x->nrunners; i++)
            if (&x->runners[i] != r && x->runners[i].shm) munmap(x->runners[i].shm, x->shm_size);
        jr_registry_runner_init_at(x->reg, &r->shm->init_plugin);
        __atomic_store_n(&r->shm->ready, 1, __ATOMIC_RELEASE);
        runner_main(sv[1], r->shm, x->reg, x->max_payload);
    }
    setpgid(pid, pid); /* as the child does: whichever runs first */
    close(sv[1]);
    /* No pidfd (a kernel before 5.3, or valgrind): collect looks with
     * waitid every NO_PIDFD_POLL_US instead (see ended()). */
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int no_pidfd = pfd < 0 && errno == ENOSYS;
    size_t ix = (size_t)(r - x->runners);
    struct epoll_event es = {.events = EPOLLIN, .data.u64 = ix << 1};
    struct epoll_event ep = {.events = EPOLLIN, .data.u64 = ix << 1 | 1};
    if ((pfd < 0 && !no_pidfd) || epoll_ctl(x->epfd, EPOLL_CTL_ADD, sv[0], &es) != 0 ||
        (pfd >= 0 && epoll_ctl(x->epfd, EPOLL_CTL_ADD, pfd, &ep) != 0)) {
        int e = errno;
        epoll_del(x, sv[0]);
        kill(-pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        if (pfd >= 0) close(pfd);
        close(sv[0]);
        errno = e;
        return JR_EIO;
    }
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    r->pid = pid, r->fd = sv[0], r->pidfd = pfd;
    r->in_off = r->in_len = 0; /* a new runner, a new stream */
    r->exited = r->sock_ready = 0;
    r->ran = 0, r->respawn_at = 0;
    return 0;
}

/* Kill r's process group (the runner, if alive, and whatever its handlers
 * started in it), reap the runner and close its descriptors. Returns its
 * wait status. The runner is not reaped before the kill, so its pid (the
 * group's id) cannot have been reused. */
/* 1 once r's process has ended, without reaping it (reap() takes its
 * status): how a runner without a pidfd is watched. */
static int ended(const runner_t *r) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    return r->pid > 0 && waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == r->pid;
}

static int reap(jr_exec_t *x, runner_t *r) {
    int st = 0;
    if (r->pid > 0) {
        kill(-r->pid, SIGKILL);
        kill(r->pid, SIGKILL); /* in case a handler moved the runner to another group */
        while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    /* What it wrote before it ended (frames of tasks it finished) stays
     * in r->in for emit_done; spawn starts the next stream empty. */
    if (r->fd >= 0) drain(x, r);
    epoll_del(x, r->fd);
    epoll_del(x, r->pidfd);
    if (r->fd >= 0) close(r->fd);
    if (r->pidfd >= 0) close(r->pidfd);
    r->pid = 0, r->fd = r->pidfd = -1;
    r->exited = r->sock_ready = 0;
    return st;
}

/* The runners the worker may hand work to now (not counting `stopping`). */
static size_t count_idle(const jr_exec_t *x) {
    size_t n = 0;
    for (size_t i = 0; i < x->nrunners; i++) {
        const runner_t *r = &x->runners[i];
        n += !r->busy && r->pid > 0 && !r->exited;
    }
    return n;
}

/* Send r's message (tasks [0, n)) to its process, after resetting the shared
 * memory for it. If the send fails, the runner is killed: collect then sees
 * it die and sends the tasks to its successor. */
static void start_batch(runner_t *r) {
    shm_t *m = r->shm;
    r->in_off = r->in_len = 0; /* what is left of the last batch's stream is of no task now */
    r->end = r->n, r->collected = 0, r->busy = 1;
    r->timed_out = NONE, r->abandon = 0;
    /* a task's timeout counts from now while runner_init has not returned
     * (collect_runner): a hung runner_init must not hold the tasks for ever */
    r->handed_us = __atomic_load_n(&m->ready, __ATOMIC_ACQUIRE) ? 0 : jr_mono_us();
    m->started = NONE;
    m->finished = 0;
    m->stop = 0;
    for (uint32_t j = 0; j < r->n; j++) m->slots[j].cancel = 0;
    __atomic_store_n(&m->done, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&m->claim, (uint64_t)r->n, __ATOMIC_SEQ_CST);
    size_t body = r->offs[r->n];
    /* 64 bits: a batch of large payloads (jobs.max_payload is up to 512 MiB,
     * a batch up to worker.batch jobs) can pass 4 GiB */
    uint64_t len = sizeof(uint32_t) + (uint64_t)body;
    uint32_t n = r->n;
    char head[12];
    memcpy(head, &len, 8);
    memcpy(head + 8, &n, 4);
    /* Header and body in one writev: one system call, and one wake-up of
     * the runner with the whole message there (see read_message). */
    struct iovec iov[2] = {{.iov_base = head, .iov_len = sizeof head}, {.iov_base = r->msg, .iov_len = body}};
    struct iovec *v = iov;
    int nv = 2;
    while (nv > 0) {
        ssize_t w = writev(r->fd, v, nv);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd pf = {.fd = r->fd, .events = POLLOUT};
            poll(&pf, 1, 100);
            continue;
        }
        if (w < 0) {
            kill(-r->pid, SIGKILL);
            return;
        }
        size_t done = (size_t)w;
        while (nv > 0 && done >= v->iov_len) done -= v->iov_len, v++, nv--;
        if (nv > 0) v->iov_base = (char *)v->iov_base + done, v->iov_len -= done;
    }
}

/* Keep only tasks [from, end) of r's message, renumbered from 0. */
static void rebase(runner_t *r, uint32_t from) {
    size_t base = r->offs[from];
    uint32_t m = r->end - from;
    memmove(r->msg, r->msg + base, r->offs[r->end] - base);
    for (uint32_t j = 0; j < m; j++) {
        r->tags[j] = r->tags[from + j];
        r->timeouts_ms[j] = r->timeouts_ms[from + j];
        r->offs[j] = r->offs[from + j] - base;
    }
    r->offs[m] = r->offs[from + m] - base;
    r->n = r->end = m;
    r->collected = 0;
}

/* Make tasks [a, b) of src the message of dst, whose msg has room. */
static void copy_tasks(runner_t *dst, const runner_t *src, uint32_t a, uint32_t b) {
    size_t base = src->offs[a], bytes = src->offs[b] - base;
    memcpy(dst->msg, src->msg + base, bytes);
    for (uint32_t j = 0; j < b - a; j++) {
        dst->tags[j] = src->tags[a + j];
        dst->timeouts_ms[j] = src->timeouts_ms[a + j];
        dst->offs[j] = src->offs[a + j] - base;
    }
    dst->offs[b - a] = bytes;
    dst->n = b - a;
}

/* Inline mode: a handler runs inside the worker's loop, so the worker sees a
 * SIGTERM or SIGINT only after it returns. This handler, installed in front
 * of the worker's own (and calling it), sets the stop flag at once, so
 * should_stop is true for the handler running; the rest of its batch comes
 * back unstarted. Only installed over a handler function (never over the
 * default action or SIG_IGN). */
static volatile int *stop_on_signal;
static struct sigaction prev_term, prev_int;

static void on_stop_signal(int sig) {
    if (stop_on_signal) *stop_on_signal = 1;
    const struct sigaction *p = sig == SIGTERM ? &prev_term : &prev_int;
    if (p->sa_flags & SA_SIGINFO) return; /* not ours to call without its siginfo */
    if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) p->sa_handler(sig);
}

static void chain_stop_signals(jr_exec_t *x) {
    int sigs[2] = {SIGTERM, SIGINT};
    struct sigaction *prev[2] = {&prev_term, &prev_int};
    stop_on_signal = &x->inline_stop;
    for (int i = 0; i < 2; i++) {
        struct sigaction cur;
        if (sigaction(sigs[i], NULL, &cur) != 0 || cur.sa_flags & SA_SIGINFO || cur.sa_handler == SIG_DFL ||
            cur.sa_handler == SIG_IGN || cur.sa_handler == on_stop_signal)
            continue;
        *prev[i] = cur;
        struct sigaction sa = cur;
        sa.sa_handler = on_stop_signal;
        sigaction(sigs[i], &sa, NULL);
    }
}

/* Undo chain_stop_signals. */
static void unchain_stop_signals(void) {
    int sigs[2] = {SIGTERM, SIGINT};
    struct sigaction *prev[2] = {&prev_term, &prev_int};
    for (int i = 0; i < 2; i++) {
        struct sigaction cur;
        if (sigaction(sigs[i], NULL, &cur) == 0 && cur.sa_handler == on_stop_signal && !(cur.sa_flags & SA_SIGINFO))
            sigaction(sigs[i], prev[i], NULL);
    }
    stop_on_signal = NULL;
}

/* The descriptors open now, ascending, into x->keep. */
static int snapshot_fds(jr_exec_t *x, char *err, size_t errlen) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) {
        snprintf(err, errlen, "cannot list open descriptors (/proc/self/fd): %s", strerror(errno));
        return JR_EIO;
    }
    size_t cap = 0;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        int fd = atoi(e->d_name);
        if (fd == dirfd(d)) continue;
        if (x->nkeep == cap) {
            cap = cap ? 2 * cap : 16;
            int *v = realloc(x->keep, cap * sizeof *v);
            if (!v) {
                rc = JR_ENOMEM;
                snprintf(err, errlen, "out of memory");
                break;
            }
            x->keep = v;
        }
        x->keep[x->nkeep++] = fd;
    }
    closedir(d);
    for (size_t i = 1; i < x->nkeep; i++) /* insertion sort: a handful, nearly sorted */
        for (size_t j = i; j > 0 && x->keep[j - 1] > x->keep[j]; j--) {
            int t = x->keep[j];
            x->keep[j] = x->keep[j - 1], x->keep[j - 1] = t;
        }
    return rc;
}

jr_exec_t *jr_exec_new(const jr_registry_t *reg, int inline_mode, int concurrency,
                       size_t max_batch, int64_t max_payload, char *err, size_t errlen) {
    jr_exec_t *x = calloc(1, sizeof *x);
    if (!x) goto oom;
    x->reg = reg;
    x->inline_mode = inline_mode;
    x->max_batch = max_batch;
    x->max_payload = max_payload;
    x->epfd = -1;
    x->nrunners = inline_mode ? 1 : (size_t)(concurrency > 0 ? concurrency : 1);
    if (watch_forks() != 0) {
        snprintf(err, errlen, "pthread_atfork failed");
        goto fail;
    }
    if (inline_mode) {
        if (!(x->iq = calloc(max_batch, sizeof *x->iq)) || !(x->icancel = calloc(max_batch, 1))) goto oom;
        chain_stop_signals(x);
        jr_registry_runner_init(reg);
        return x;
    }
    if (snapshot_fds(x, err, errlen)) goto fail;
    if ((x->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        snprintf(err, errlen, "epoll_create1: %s", strerror(errno));
        goto fail;
    }
    if (!(x->evs = calloc(2 * x->nrunners, sizeof *x->evs))) goto oom;
    if (!(x->runners = calloc(x->nrunners, sizeof *x->runners))) goto oom;
    for (size_t i = 0; i < x->nrunners; i++) x->runners[i].fd = x->runners[i].pidfd = -1;
    x->shm_size = sizeof(shm_t) + max_batch * sizeof(slot_t);
    for (size_t i = 0; i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
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

void jr_exec_free(jr_exec_t *x) {
    if (!x) return;
    if (x->inline_mode) {
        unchain_stop_signals();
        jr_registry_runner_exit(x->reg);
    }
    /* Busy runners are killed; idle ones see their socket close and end
     * normally (runner_exit), then their group goes too. */
    for (size_t i = 0; x->runners && i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        if (r->busy && r->pid > 0) kill(-r->pid, SIGKILL);
        epoll_del(x, r->fd);
        if (r->fd >= 0) close(r->fd);
        r->fd = -1;
    }
    int64_t until = jr_mono_us() + EXIT_WAIT_MS * 1000;
    for (size_t i = 0; x->runners && i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        int64_t left;
        while (r->pidfd >= 0 && (left = until - jr_mono_us()) > 0) {
            struct pollfd pf = {.fd = r->pidfd, .events = POLLIN};
            if (poll(&pf, 1, (int)((left + 999) / 1000)) != -1 || errno != EINTR) break;
        }
        while (r->pidfd < 0 && r->pid > 0 && !ended(r) && until > jr_mono_us()) usleep(10000);
        reap(x, r);
        if (r->shm) munmap(r->shm, x->shm_size);
        free(r->tags), free(r->timeouts_ms), free(r->offs), free(r->msg), free(r->in);
    }
    if (x->epfd >= 0) close(x->epfd);
    free(x->runners);
    free(x->evs);
    free(x->keep);
    free(x->iq), free(x->icancel), free(x->iq_buf);
    free(x);
}

size_t jr_exec_idle(const jr_exec_t *x) {
    if (x->inline_mode) return x->stopping || x->iq_head < x->iq_n ? 0 : 1;
    return x->stopping ? 0 : count_idle(x);
}

size_t jr_exec_busy(const jr_exec_t *x) {
    if (x->inline_mode) return x->iq_n - x->iq_head;
    size_t n = 0;
    for (size_t i = 0; i < x->nrunners; i++)
        if (x->runners[i].busy) n += x->runners[i].end - x->runners[i].collected;
    return n;
}

/* Inline mode: a fresh outcome of kind `kind` for task `tag`, at out[*k]. */
static jr_outcome_t *emit_inline(jr_outcome_t *out, size_t *k, uint32_t tag, jr_out_t kind) {
    jr_outcome_t *o = &out[(*k)++];
    memset(o, 0, sizeof *o);
    o->tag = tag;
    o->kind = kind;
    o->retry_after_ms = -1;
    return o;
}

/* Run task t in this process (inline mode: run_job), its outcome into o;
 * o takes the follow-ups of an OK task. */
static void run_inline(jr_exec_t *x, const jr_task_t *t, jr_outcome_t *o) {
    jr_fu_list_t fu = {.max_payload = x->max_payload};
    char result[JR_RESULT_MAX];
    uint32_t rlen = 0;
    jr_job_t job = {.id = t->id, .queue = t->queue, .handler = t->handler,
                    .payload = t->payload, .payload_len = t->payload_len,
                    .attempt = t->attempt, .deadline_ms = jr_wall_ms() + t->timeout_ms,
                    .deadline_mono_us = jr_mono_us() + t->timeout_ms * 1000,
                    .stop_flag = &x->inline_stop, .probe = x->probe, .probe_ctx = x->probe_ctx,
                    .tag = t->tag, .fu = &fu, .result = result, .result_len = &rlen};
    int64_t t0 = jr_mono_us();
    o->kind = kind_of(run_job(x->reg, &job));
    if (rlen && (o->kind == JR_OUT_OK || o->kind == JR_OUT_FAIL)) {
        if ((o->result = malloc(rlen))) memcpy(o->result, result, rlen), o->result_len = rlen;
        else x->nomem = 1;
    }
    o->retry_after_ms = job.retry_after_ms;
    snprintf(o->error, sizeof o->error, "%s", job.error);
    if (o->kind == JR_OUT_OK && fu.n > 0) { /* the outcome takes the buffer */
        o->followups = fu.buf, o->followups_len = fu.len;
        fu.buf = NULL;
    }
    jr_fu_reset(&fu);
    o->duration_us = jr_mono_us() - t0;
}

/* Inline mode's jr_exec_collect: the tasks held run in order until
 * INLINE_SLICE_US is used (at least one runs); a task flagged by
 * jr_exec_cancel is not started, and after a stop (jr_exec_stop, or a
 * SIGTERM/SIGINT while a handler ran) none is: those come back
 * JR_OUT_UNSTARTED. */
static size_t collect_inline(jr_exec_t *x, jr_outcome_t *out, size_t max) {
    size_t k = 0;
    int64_t t0 = jr_mono_us();
    while (x->iq_head < x->iq_n && k < max) {
        size_t i = x->iq_head++;
        if (x->inline_stop || x->stopping || x->icancel[i]) {
            emit_inline(out, &k, x->iq[i].tag, JR_OUT_UNSTARTED);
            continue;
        }
        if (k > 0 && jr_mono_us() - t0 >= INLINE_SLICE_US) { /* the worker's turn */
            x->iq_head--;
            break;
        }
        run_inline(x, &x->iq[i], emit_inline(out, &k, x->iq[i].tag, JR_OUT_OK));
    }
    if (x->iq_head == x->iq_n) x->iq_head = x->iq_n = 0;
    return k;
}

/* Inline mode's jr_exec_submit: copy the tasks (collect runs them). */
static int submit_inline(jr_exec_t *x, const jr_task_t *t, size_t n) {
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += strlen(t[i].id) + strlen(t[i].queue) + strlen(t[i].handler) + t[i].payload_len + 4;
    if (need > x->iq_cap) {
        char *b = realloc(x->iq_buf, need);
        if (!b) return JR_ENOMEM;
        x->iq_buf = b, x->iq_cap = need;
    }
    char *p = x->iq_buf;
    for (size_t i = 0; i < n; i++) {
        jr_task_t *c = &x->iq[i];
        *c = t[i];
        const char *src[4] = {t[i].id, t[i].queue, t[i].handler, t[i].payload ? t[i].payload : ""};
        size_t len[4] = {strlen(t[i].id), strlen(t[i].queue), strlen(t[i].handler), t[i].payload_len};
        const char **dst[4] = {&c->id, &c->queue, &c->handler, &c->payload};
        for (int f = 0; f < 4; f++) {
            memcpy(p, src[f], len[f]);
            p[len[f]] = '\0';
            *dst[f] = p;
            p += len[f] + 1;
        }
    }
    memset(x->icancel, 0, n);
    x->iq_head = 0, x->iq_n = n;
    return 0;
}

void jr_exec_set_cancel_probe(jr_exec_t *x, jr_cancel_probe_fn fn, void *ctx) {
    x->probe = fn;
    x->probe_ctx = ctx;
}

void jr_exec_cancel(jr_exec_t *x, uint32_t tag) {
    if (x->inline_mode) { /* not started yet: it will not be; running: the probe asks */
        for (size_t i = x->iq_head; i < x->iq_n; i++)
            if (x->iq[i].tag == tag) x->icancel[i] = 1;
        return;
    }
    for (size_t i = 0; i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        if (!r->busy || !r->shm) continue;
        for (uint32_t j = r->collected; j < r->end; j++)
            if (r->tags[j] == tag) __atomic_store_n(&r->shm->slots[j].cancel, 1, __ATOMIC_RELEASE);
    }
}

int jr_exec_submit(jr_exec_t *x, const jr_task_t *t, size_t n) {
    if (n == 0) return 0;
    if (n > x->max_batch) return JR_EINVAL;
    if (x->inline_mode) return x->stopping || x->iq_head < x->iq_n ? JR_EINVAL : submit_inline(x, t, n);
    runner_t *r = NULL;
    for (size_t i = 0; i < x->nrunners && !r; i++)
        if (!x->runners[i].busy && x->runners[i].pid > 0 && !x->runners[i].exited) r = &x->runners[i];
    if (!r || x->stopping) return JR_EINVAL;
    size_t len = 0;
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
        rc = put(r, &len, &h, sizeof h);
        for (int k = 0; k < 4 && !rc; k++) {
            rc = put(r, &len, s[k], h.lens[k]);
            if (!rc) rc = put(r, &len, "", 1);
        }
    }
    if (rc) return rc;
    r->offs[n] = len;
    r->n = (uint32_t)n;
    start_batch(r);
    return 0;
}

size_t jr_exec_pollfds(const jr_exec_t *x, struct pollfd *fds, size_t max) {
    if (x->inline_mode || max == 0) return 0;
    fds[0] = (struct pollfd){.fd = x->epfd, .events = POLLIN};
    return 1;
}

/* Index of the task now running (NONE if none), and since when (monotonic
 * us). Checked against what r was sent: the shared memory is writable by
 * handlers. */
static uint32_t running(const runner_t *r, int64_t *since) {
    uint32_t st = __atomic_load_n(&r->shm->started, __ATOMIC_ACQUIRE);
    uint32_t d = __atomic_load_n(&r->shm->done, __ATOMIC_ACQUIRE);
    *since = __atomic_load_n(&r->shm->started_at_us, __ATOMIC_ACQUIRE);
    return st != NONE && st >= d && st >= r->collected && st < r->end ? st : NONE;
}

/* When the tasks r has not claimed may move to an idle runner (monotonic
 * us, -1 = none wait): MOVE_AFTER_US after the task r runs started; if r is
 * between tasks, it starts one at once: look again in MOVE_AFTER_US. */
static int64_t move_at(const runner_t *r, int64_t now) {
    if (!r->busy || r->exited || r->abandon) return -1;
    uint64_t c = __atomic_load_n(&r->shm->claim, __ATOMIC_SEQ_CST);
    uint32_t next = (uint32_t)(c >> 32), end = (uint32_t)c;
    if (end != r->end || next >= end || next < r->collected) return -1;
    int64_t since;
    return running(r, &since) == NONE ? now + MOVE_AFTER_US : since + MOVE_AFTER_US;
}

/* When r's tasks stop waiting for a runner_init that has not returned
 * (monotonic us; -1: not waiting): the first task's timeout after the
 * hand-over. */
static int64_t init_deadline(const runner_t *r) {
    if (!r->busy || !r->handed_us || r->exited || r->collected >= r->end ||
        __atomic_load_n(&r->shm->ready, __ATOMIC_ACQUIRE))
        return -1;
    return r->handed_us + r->timeouts_ms[r->collected] * 1000;
}

static int init_overdue(const runner_t *r, int64_t now) {
    int64_t at = init_deadline(r);
    return at >= 0 && now >= at;
}

int64_t jr_exec_deadline(const jr_exec_t *x) {
    int64_t best = -1, now = jr_mono_us();
    if (x->inline_mode) return x->iq_head < x->iq_n ? now : -1; /* tasks to run: collect now */
    int moves = !x->inline_mode && !x->stopping && count_idle(x) > 0;
    for (size_t i = 0; !x->inline_mode && i < x->nrunners; i++) {
        const runner_t *r = &x->runners[i];
        int64_t since, at;
        uint32_t t;
        if (!r->busy || (t = running(r, &since)) == NONE) continue;
        at = since + r->timeouts_ms[t] * 1000;
        if (best < 0 || at < best) best = at;
    }
    for (size_t i = 0; !x->inline_mode && i < x->nrunners; i++) { /* runner_init that do not return */
        int64_t at = init_deadline(&x->runners[i]);
        if (at >= 0 && (best < 0 || at < best)) best = at;
    }
    for (size_t i = 0; moves && !x->inline_mode && i < x->nrunners; i++) {
        int64_t at = move_at(&x->runners[i], now);
        if (at >= 0 && (best < 0 || at < best)) best = at;
    }
    for (size_t i = 0; !x->inline_mode && !x->stopping && i < x->nrunners; i++) /* restarts */
        if (x->runners[i].pid == 0 && x->runners[i].respawn_at && (best < 0 || x->runners[i].respawn_at < best))
            best = x->runners[i].respawn_at;
    for (size_t i = 0; !x->inline_mode && i < x->nrunners; i++) /* watched by waitid */
        if (x->runners[i].busy && x->runners[i].pid > 0 && x->runners[i].pidfd < 0 &&
            (best < 0 || now + NO_PIDFD_POLL_US < best))
            best = now + NO_PIDFD_POLL_US;
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

/* Read what r's socket holds into r->in (wake-up bytes at the front are
 * dropped as they come, so the usual stream costs no memory). At EOF or on
 * an error the socket leaves the epoll set: the pidfd tells when the
 * runner ends. */
static void drain(jr_exec_t *x, runner_t *r) {
    if (r->in_off == r->in_len && r->in_cap > 4 * READ_CHUNK) { /* after a big frame */
        free(r->in);
        r->in = NULL, r->in_cap = 0;
    }
    while (r->fd >= 0) {
        if (r->in_off == r->in_len) r->in_off = r->in_len = 0;
        if (r->in_cap - r->in_len < READ_CHUNK) {
            if (r->in_off > 0) { /* compact first */
                memmove(r->in, r->in + r->in_off, r->in_len - r->in_off);
                r->in_len -= r->in_off, r->in_off = 0;
            }
            if (r->in_cap - r->in_len < READ_CHUNK) {
                size_t nc = r->in_cap ? 2 * r->in_cap : READ_CHUNK;
                while (nc - r->in_len < READ_CHUNK) nc *= 2;
                char *nb = realloc(r->in, nc);
                if (!nb) { /* what is missing makes its task a RETRY */
                    x->nomem = 1;
                    return;
                }
                r->in = nb, r->in_cap = nc;
            }
        }
        ssize_t got = read(r->fd, r->in + r->in_len, r->in_cap - r->in_len);
        if (got > 0) {
            r->in_len += (size_t)got;
            while (r->in_off < r->in_len && r->in[r->in_off] == WAKE_BYTE) r->in_off++;
            /* Neither a wake-up nor a frame (something a handler wrote on
             * the runner's socket): dropped, so it cannot pile up. */
            if (r->in_off < r->in_len && r->in[r->in_off] != FRAME_BYTE) r->in_off = r->in_len;
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got == 0 || errno != EAGAIN) epoll_del(x, r->fd);
        return;
    }
}

/* The follow-ups frame of task t from r's stream, into *buf (malloc'ed) and
 * *len: reads the socket first (the runner wrote the whole frame before it
 * marked t done). Frames of earlier tasks (whose slot a handler overwrote)
 * are dropped. Returns 0, or -1 with a reason in why: missing, or a stream
 * that is not frames and wake-up bytes (then dropped whole). */
static int take_frame(jr_exec_t *x, runner_t *r, uint32_t t, char **buf, size_t *len, char *why, size_t wl) {
    drain(x, r);
    for (;;) {
        while (r->in_off < r->in_len && r->in[r->in_off] == WAKE_BYTE) r->in_off++;
        size_t avail = r->in_len - r->in_off;
        const char *p = r->in + r->in_off;
        if (avail < FRAME_HDR) {
            snprintf(why, wl, "its follow-ups did not reach the worker from the handler process (%zu bytes of a frame)",
                     avail);
            return -1;
        }
        uint32_t idx;
        uint64_t n;
        memcpy(&idx, p + 1, 4);
        memcpy(&n, p + 5, 8);
        if (p[0] != FRAME_BYTE || idx > t) {
            snprintf(why, wl, "its follow-ups came garbled from the handler process (byte 0x%02x, task %u)",
                     (unsigned char)p[0], (unsigned)idx);
            r->in_off = r->in_len;
            return -1;
        }
        if (n > avail - FRAME_HDR) {
            snprintf(why, wl, "its follow-ups did not all reach the worker from the handler process (%zu of %llu bytes)",
                     avail - FRAME_HDR, (unsigned long long)n);
            return -1;
        }
        r->in_off += FRAME_HDR + (size_t)n;
        if (idx < t) continue;
        if (n == 0 || !(*buf = malloc((size_t)n))) {
            x->nomem |= n > 0;
            snprintf(why, wl, n ? "out of memory for its follow-ups" : "its follow-ups came empty");
            return -1;
        }
        memcpy(*buf, p + FRAME_HDR, (size_t)n);
        *len = (size_t)n;
        return 0;
    }
}

static void runner_ran(jr_exec_t *x, runner_t *r);

/* Outcomes of tasks the runner finished since the last look. */
static void emit_done(jr_exec_t *x, runner_t *r, jr_outcome_t *out, size_t *k) {
    uint32_t d = __atomic_load_n(&r->shm->done, __ATOMIC_ACQUIRE);
    if (d > r->end) d = r->end;
    if (d > r->collected && !r->ran) runner_ran(x, r);
    for (; r->collected < d; r->collected++) {
        const slot_t *sl = &r->shm->slots[r->collected];
        jr_outcome_t *o = emit(out, k, r, r->collected, kind_of(sl->result));
        o->retry_after_ms = sl->retry_after_ms;
        o->duration_us = sl->duration_us;
        memcpy(o->error, sl->error, sizeof o->error);
        o->error[sizeof o->error - 1] = '\0';
        if (sl->followups && (o->kind == JR_OUT_OK || o->kind == JR_OUT_FAIL)) {
            char why[200], *frame = NULL;
            size_t flen = 0;
            if (take_frame(x, r, r->collected, &frame, &flen, why, sizeof why) != 0 ||
                split_frame(frame, flen, o, &x->nomem, why, sizeof why) != 0 ||
                (o->followups && jr_fu_validate(o->followups, o->followups_len, x->max_payload, why, sizeof why) != 0)) {
                free(o->followups), free(o->result);
                o->followups = NULL, o->followups_len = 0;
                o->result = NULL, o->result_len = 0;
                if (o->kind == JR_OUT_OK) { /* no ack without them: run it again */
                    o->kind = JR_OUT_RETRY;
                    snprintf(o->error, sizeof o->error, "handler succeeded, but %s; retried", why);
                }
            }
        }
    }
}

/* Everything not yet collected comes back unstarted; the runner is free. */
static void emit_rest_unstarted(runner_t *r, jr_outcome_t *out, size_t *k) {
    for (; r->collected < r->end; r->collected++) emit(out, k, r, r->collected, JR_OUT_UNSTARTED);
    r->busy = 0;
}

/* Take the tasks r has not claimed, [*from, old end), if it has claimed at
 * least min_next of its message (balance leaves alone a runner that has not
 * begun its message: it is about to). Returns how many were taken. */
static uint32_t take_rest(runner_t *r, uint32_t min_next, uint32_t *from) {
    uint64_t c = __atomic_load_n(&r->shm->claim, __ATOMIC_SEQ_CST);
    for (;;) {
        uint32_t next = (uint32_t)(c >> 32), end = (uint32_t)c;
        if (end != r->end || next < r->collected || next < min_next || next >= end) return 0;
        uint64_t want = (uint64_t)next << 32 | next;
        if (__atomic_compare_exchange_n(&r->shm->claim, &c, want, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            *from = next;
            r->end = next;
            return end - next;
        }
    }
}

/* Why r's process, reaped with wait status st, ended before starting a
 * task: its signal or exit status, and the plugin whose runner_init was
 * running (read from the shared memory, checked against the registry). */
static void early_cause(const jr_exec_t *x, const runner_t *r, int st, char *buf, size_t len) {
    char how[96];
    if (WIFSIGNALED(st))
        snprintf(how, sizeof how, "SIG%s (%s)", sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?",
                 strsignal(WTERMSIG(st)));
    else
        snprintf(how, sizeof how, "exit status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    uint32_t at = __atomic_load_n(&r->shm->init_plugin, __ATOMIC_ACQUIRE);
    const char *name = at ? jr_registry_plugin_name(x->reg, at - 1) : NULL;
    if (r->init_hung)
        snprintf(buf, len, "runner_init of plugin %s did not return within the job's timeout (%lldms); killed",
                 name ? name : "?", (long long)r->timeouts_ms[r->collected]);
    else if (name && !__atomic_load_n(&r->shm->ready, __ATOMIC_ACQUIRE))
        snprintf(buf, len, "the handler process died in runner_init of plugin %s: %s", name, how);
    else
        snprintf(buf, len, "the handler process died before running a job: %s", how);
}

/* r has no process (it died before starting a task, or could not be
 * started): start the next one after a delay doubling with each such
 * failure in a row (RESPAWN_MIN_US up to RESPAWN_MAX_US; collect starts it,
 * jr_exec_deadline says when). The cause is logged when it differs from
 * the one logged last, not at each restart. */
static void respawn_later(jr_exec_t *x, runner_t *r, const char *cause) {
    int64_t delay = RESPAWN_MIN_US;
    for (int i = 0; i < r->fails && delay < RESPAWN_MAX_US; i++) delay *= 2;
    if (delay > RESPAWN_MAX_US) delay = RESPAWN_MAX_US;
    if (r->fails < 64) r->fails++;
    r->busy = 0;
    r->respawn_at = jr_mono_us() + delay;
    if (strcmp(cause, x->cause) != 0) {
        snprintf(x->cause, sizeof x->cause, "%s", cause);
        char ms[24];
        snprintf(ms, sizeof ms, "%lld", (long long)(delay / 1000));
        jr_log_kv(JR_LOG_ERROR,
                  "a handler process died before running a job; its jobs use an attempt, and it is restarted after "
                  "a delay doubling up to 30s",
                  "cause", cause, "delay_ms", ms, NULL);
    }
}

/* Start the processes of runners whose restart delay is over. */
static void respawn_due(jr_exec_t *x, int64_t now) {
    for (size_t i = 0; !x->stopping && i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        if (r->pid != 0 || !r->respawn_at || now < r->respawn_at) continue;
        if (spawn(x, r) != 0) {
            char cause[200];
            snprintf(cause, sizeof cause, "cannot start a handler process: %s", strerror(errno));
            respawn_later(x, r, cause);
        }
    }
}

/* r's process started a task: what it died of before is over. */
static void runner_ran(jr_exec_t *x, runner_t *r) {
    r->ran = 1, r->fails = 0;
    if (x->cause[0]) {
        jr_log_kv(JR_LOG_INFO, "handler processes run jobs again", "after", x->cause, NULL);
        x->cause[0] = '\0';
    }
}

/* The runner's process is gone (or was killed): account for the task it
 * was running, start a new process, and give it the rest of the batch.
 * A process that died before starting any task (in runner_init, say)
 * costs every task it was handed an attempt (JR_OUT_CRASH with the cause)
 * and is replaced after a delay (respawn_later): it would die the same way
 * again at once, and the tasks never run. */
static void runner_died(jr_exec_t *x, runner_t *r, jr_outcome_t *out, size_t *k) {
    int64_t since;
    uint32_t t = running(r, &since);
    int started = __atomic_load_n(&r->shm->started, __ATOMIC_ACQUIRE) != NONE;
    int st = reap(x, r);
    emit_done(x, r, out, k); /* it may have finished some before dying */
    if (started && !r->ran) runner_ran(x, r);
    if (!r->ran && !r->abandon && !x->stopping) {
        char cause[200];
        early_cause(x, r, st, cause, sizeof cause);
        for (; r->collected < r->end; r->collected++) {
            jr_outcome_t *o = emit(out, k, r, r->collected, JR_OUT_CRASH);
            snprintf(o->error, sizeof o->error, "crashed before it started: %s", cause);
        }
        respawn_later(x, r, cause);
        return;
    }
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
        char cause[200];
        snprintf(cause, sizeof cause, "cannot start a handler process: %s", strerror(errno));
        emit_rest_unstarted(r, out, k);
        respawn_later(x, r, cause);
        return;
    }
    if (r->collected < r->end) {
        rebase(r, r->collected);
        start_batch(r);
    } else {
        r->busy = 0;
    }
}

/* Collect what runner r has to report (see jr_exec_collect). */
static void collect_runner(jr_exec_t *x, runner_t *r, jr_outcome_t *out, size_t *k) {
    if (r->sock_ready) { /* wake-ups and frames: read even when idle, or poll would spin */
        /* EOF with the process alive (a handler closed the runner's end)
         * takes the socket out of the epoll set: the pidfd tells when it
         * ends. */
        drain(x, r);
        r->sock_ready = 0;
    }
    if (!r->busy) {
        if (r->exited) { /* died idle: replace it (later if it never ran a task) */
            int st = reap(x, r);
            char cause[200];
            if (x->stopping) return;
            if (!r->ran) {
                early_cause(x, r, st, cause, sizeof cause);
                respawn_later(x, r, cause);
            } else if (spawn(x, r) != 0) {
                snprintf(cause, sizeof cause, "cannot start a handler process: %s", strerror(errno));
                respawn_later(x, r, cause);
            }
        }
        return;
    }
    uint32_t from, old_end = r->end, took;
    if (x->stopping && (took = take_rest(r, 0, &from)) > 0) /* hand back what has not started */
        for (uint32_t t = from; t < old_end; t++) emit(out, k, r, t, JR_OUT_UNSTARTED);
    emit_done(x, r, out, k);
    if (!r->exited && __atomic_load_n(&r->shm->finished, __ATOMIC_ACQUIRE)) {
        emit_done(x, r, out, k);
        emit_rest_unstarted(r, out, k); /* asked to stop: the rest never ran */
        return;
    }
    int dead = r->exited;
    if (!dead) {
        int64_t since;
        uint32_t t = running(r, &since);
        if (t != NONE && jr_mono_us() >= since + r->timeouts_ms[t] * 1000) {
            r->timed_out = t;
            dead = 1; /* runner_died kills the group */
        } else if (init_overdue(r, jr_mono_us())) {
            r->init_hung = 1;
            dead = 1; /* runner_died: its tasks crash with the cause, the next process comes later */
        }
    }
    if (dead) runner_died(x, r, out, k);
}

/* Move the tasks waiting behind a running one (see move_at) to idle
 * runners, split evenly: from the runner with the most waiting, until no
 * runner is idle or no task may move. */
static void balance(jr_exec_t *x, int64_t now) {
    size_t idle;
    while (!x->stopping && (idle = count_idle(x)) > 0) {
        runner_t *v = NULL;
        uint32_t best = 0, seen = 0;
        for (size_t i = 0; i < x->nrunners; i++) {
            runner_t *r = &x->runners[i];
            int64_t at = move_at(r, now);
            if (at < 0 || at > now) continue;
            uint64_t c = __atomic_load_n(&r->shm->claim, __ATOMIC_SEQ_CST);
            uint32_t next = (uint32_t)(c >> 32), end = (uint32_t)c;
            if (end - next > best) v = r, best = end - next, seen = next;
        }
        if (!v) return;
        /* Room first, so that nothing can fail once the tasks are taken:
         * whatever each idle runner gets is part of [seen, end). */
        size_t bytes = v->offs[v->end] - v->offs[seen], m = idle < best ? idle : best;
        for (size_t i = 0, j = 0; j < m; i++) {
            runner_t *r = &x->runners[i];
            if (r->busy || r->pid <= 0 || r->exited) continue;
            if (msg_reserve(r, bytes)) return;
            j++;
        }
        uint32_t from, took = take_rest(v, 1, &from);
        if (took == 0) return;
        m = idle < took ? idle : took;
        for (size_t i = 0, j = 0; j < m; i++) {
            runner_t *r = &x->runners[i];
            if (r->busy || r->pid <= 0 || r->exited) continue;
            uint32_t a = from + (uint32_t)((uint64_t)took * j / m);
            uint32_t b = from + (uint32_t)((uint64_t)took * (j + 1) / m);
            copy_tasks(r, v, a, b);
            start_batch(r);
            j++;
        }
    }
}

size_t jr_exec_collect(jr_exec_t *x, jr_outcome_t *out, size_t max) {
    size_t k = 0;
    if (x->inline_mode) return collect_inline(x, out, max);
    int ne = epoll_wait(x->epfd, x->evs, (int)(2 * x->nrunners), 0);
    for (int i = 0; i < ne; i++) {
        runner_t *r = &x->runners[x->evs[i].data.u64 >> 1];
        if (x->evs[i].data.u64 & 1) r->exited = 1;
        else r->sock_ready = 1;
    }
    for (size_t i = 0; i < x->nrunners; i++)
        if (x->runners[i].pidfd < 0 && !x->runners[i].exited && ended(&x->runners[i])) x->runners[i].exited = 1;
    respawn_due(x, jr_mono_us());
    for (size_t i = 0; i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        if (r->busy && k + (r->end - r->collected) > max) break; /* the caller comes back */
        collect_runner(x, r, out, &k);
    }
    balance(x, jr_mono_us());
    return k;
}

int jr_exec_nomem(const jr_exec_t *x) { return x->nomem; }

int jr_exec_stalled(const jr_exec_t *x, int64_t min_run_us) {
    if (x->inline_mode || x->stopping) return 0;
    int64_t now = jr_mono_us();
    for (size_t i = 0; i < x->nrunners; i++) {
        const runner_t *r = &x->runners[i];
        int64_t since;
        if (!r->busy || r->exited || r->abandon || running(r, &since) == NONE || now - since < min_run_us)
            return 0;
    }
    return 1;
}

size_t jr_exec_shed(jr_exec_t *x, jr_outcome_t *out, size_t max) {
    size_t k = 0;
    for (; x->inline_mode && x->iq_head < x->iq_n && k < max; x->iq_head++)
        emit_inline(out, &k, x->iq[x->iq_head].tag, JR_OUT_UNSTARTED);
    if (x->inline_mode && x->iq_head == x->iq_n) x->iq_head = x->iq_n = 0;
    for (size_t i = 0; !x->inline_mode && i < x->nrunners; i++) {
        runner_t *r = &x->runners[i];
        if (!r->busy || r->exited || r->abandon) continue;
        uint64_t c = __atomic_load_n(&r->shm->claim, __ATOMIC_SEQ_CST);
        uint32_t next = (uint32_t)(c >> 32), end = (uint32_t)c;
        if (end > next && k + (end - next) > max) break; /* the caller comes back */
        uint32_t from, old_end = r->end;
        if (take_rest(r, 1, &from) > 0)
            for (uint32_t t = from; t < old_end; t++) emit(out, &k, r, t, JR_OUT_UNSTARTED);
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
            kill(-r->pid, SIGKILL);
        }
    }
}
