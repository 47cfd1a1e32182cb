/* The executor: runs handlers for the worker, isolated in supervised child
 * processes ("process", the default) or in the worker itself ("inline").
 *
 * Process mode: `concurrency` runner processes, forked after the plugins are
 * loaded (each calls the plugins' runner_init). A submission goes to one
 * idle runner as one message; the runner claims its tasks one at a time
 * (an atomic counter in memory shared with the worker, no system call) and
 * writes each result there, waking the worker only when the batch ends or
 * after a job that took over a millisecond. Tasks waiting behind one that
 * has run for a millisecond move to idle runners, so a task never waits
 * behind a slow one while a runner is free (and batches of quick jobs stay
 * whole). From the shared
 * memory the worker always knows which task is running: a runner that dies
 * (SIGSEGV, abort, exit) costs exactly that task an attempt ("crashed:
 * SIGSEGV"), one that runs past a task's timeout is killed ("timeout"), the
 * tasks after it run in a fresh runner, and nothing else is lost or run
 * twice. A runner that dies before starting any task (a crash or exit() in
 * a plugin's runner_init, say) would die the same way again: each task it
 * was handed ends JR_OUT_CRASH with the cause (signal or exit status, and
 * the plugin whose runner_init ran), and it is restarted after a delay
 * doubling from 100 ms to 30 s (the cause is logged when it changes).
 *
 * What handlers do with processes cannot confuse this: each runner is its
 * own process group, killed as a whole on a timeout or crash (and when the
 * runner ends); a runner's death is seen through a pidfd at once, with its
 * wait status, even if a process it forked keeps its socket open; a process
 * forked by a handler that returns from it exits at once, before touching
 * the shared memory or the socket.
 *
 * Descriptors: those open when jr_exec_new is called (the plugins' from
 * init, the log's) are inherited by every runner unchanged; everything the
 * worker opens afterwards (Redis connections, other runners' sockets) is
 * closed in runners. Call jr_exec_new after loading the plugins and before
 * connecting to Redis.
 *
 * Inline mode runs handlers in the worker process: no fork, no isolation — a
 * crashing handler takes the worker down (its jobs are then reclaimed by
 * other workers) and timeouts are only advisory (should_stop). A submission
 * is held, not run: jr_exec_collect runs its tasks in order, a slice of
 * about 2 ms at a time (at least one task), so the worker's loop turns
 * between jobs — heartbeats, pause, cancel and signals are seen as with
 * runner processes, and jr_exec_shed, jr_exec_stop and jr_exec_cancel take
 * back the tasks not started. SIGTERM and SIGINT set should_stop at once (a
 * handler chained in front of the worker's). A process a handler forks that
 * returns from it still exits at once. */
#ifndef JR_EXEC_H
#define JR_EXEC_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin.h"

/* A task for the executor; strings are copied at submission. */
typedef struct jr_task {
    uint32_t tag;        /* the caller's name for it, echoed in the outcome */
    const char *id, *queue, *handler;
    const char *payload;
    size_t payload_len;
    uint32_t attempt;
    int64_t timeout_ms;  /* > 0 */
} jr_task_t;

typedef enum jr_out {
    JR_OUT_OK,        /* handler returned OK */
    JR_OUT_RETRY,     /* handler returned RETRY */
    JR_OUT_FAIL,      /* handler returned FAIL (permanent) */
    JR_OUT_CRASH,     /* the runner died while running it */
    JR_OUT_TIMEOUT,   /* it ran past its timeout and its runner was killed */
    JR_OUT_UNSTARTED, /* never started (the executor is stopping) */
    JR_OUT_INTERRUPTED /* returned RETRY after the executor was asked to stop
                          (jr_exec_stop): hand it back, no attempt used */
} jr_out_t;

typedef struct jr_outcome {
    uint32_t tag;
    jr_out_t kind;
    int64_t retry_after_ms; /* from the handler, -1 = not set */
    int64_t duration_us;
    char error[256];        /* "" = none */
    /* JR_OUT_OK only: the follow-ups the handler enqueued (followup.h
     * encoding), malloc'ed; NULL = none. The caller of jr_exec_collect
     * owns (frees) it. */
    char *followups;
    size_t followups_len;
    /* JR_OUT_OK and JR_OUT_FAIL only: the result the handler set
     * (api->set_result, at most JR_RESULT_MAX bytes), malloc'ed; NULL =
     * none. The caller of jr_exec_collect owns (frees) it. */
    char *result;
    size_t result_len;
} jr_outcome_t;

typedef struct jr_exec jr_exec_t;

/* Start the executor. max_batch bounds the tasks of one submission;
 * max_payload (jobs.max_payload) the payload of a follow-up a handler
 * enqueues. Returns NULL with a message in err on failure.
 *
 * Follow-ups (api->enqueue) of a task that returns OK, and the result
 * (api->set_result) of one that returns OK or FAIL, come back with its
 * outcome. From a runner process they travel over its socket as a frame
 * ('F', u32 task index, u64 length, then u32 result length, the result,
 * the encoded list of follow-ups) written before the task is marked done,
 * so the worker finds the whole frame once it sees the task done; a frame
 * that is missing or corrupt then turns an OK outcome into a RETRY saying
 * so (a FAIL stays a FAIL, without its result). Frames are sized by what
 * arrives, no cap (a result by JR_RESULT_MAX). */
jr_exec_t *jr_exec_new(const jr_registry_t *reg, int inline_mode, int concurrency,
                       size_t max_batch, int64_t max_payload, char *err, size_t errlen);

/* Stop the runners and free everything. Idle runners end normally (calling
 * runner_exit), waited for up to 2 s; busy ones, and any process left in a
 * runner's group, are SIGKILLed. NULL is fine. */
void jr_exec_free(jr_exec_t *x);

/* Runners able to take a submission now. */
size_t jr_exec_idle(const jr_exec_t *x);
/* Tasks submitted whose outcome has not been collected yet. */
size_t jr_exec_busy(const jr_exec_t *x);

/* Hand n (<= max_batch) tasks to one idle runner (they may move to other
 * runners that become idle first). Inline mode holds them for
 * jr_exec_collect to run (the one runner is busy until the last is
 * collected). Returns 0 (each task then gets exactly one outcome from
 * collect), or JR_EINVAL if no runner is idle, JR_ENOMEM. */
int jr_exec_submit(jr_exec_t *x, const jr_task_t *tasks, size_t n);

/* The fds to poll (up to max into fds; returns how many: 1 in process mode,
 * 0 inline) and the monotonic time (us) by which jr_exec_collect must run to
 * enforce a timeout or move waiting tasks to an idle runner (-1 = none;
 * inline mode: now while tasks are held). */
size_t jr_exec_pollfds(const jr_exec_t *x, struct pollfd *fds, size_t max);
int64_t jr_exec_deadline(const jr_exec_t *x);

/* Gather outcomes (after poll, or any time): results written so far, runners
 * that died (restarting them), runners past a deadline (killing them); then
 * move tasks not started yet to idle runners. Inline mode: run held tasks
 * for one slice (see above); a task cancelled before it started, or held
 * after a stop, is not started and comes back JR_OUT_UNSTARTED. Fills up
 * to max outcomes; returns how many. Call again while it returns max. */
size_t jr_exec_collect(jr_exec_t *x, jr_outcome_t *out, size_t max);

/* 1 once jr_exec_collect ran out of memory (for the follow-ups a runner
 * sent: that task came back JR_OUT_RETRY saying so); the caller stops then,
 * as for any out of memory. 0 otherwise. */
int jr_exec_nomem(const jr_exec_t *x);

/* 1 if every runner has been running its current task for at least
 * min_run_us (so a task waiting for one may wait that long again); 0
 * otherwise, after jr_exec_stop or jr_exec_kill, and in inline mode. */
int jr_exec_stalled(const jr_exec_t *x, int64_t min_run_us);

/* Take back every task waiting behind a running one (see jr_exec_stalled;
 * inline mode: every task held): they come back as JR_OUT_UNSTARTED in
 * out, at most max; call again while it returns max. */
size_t jr_exec_shed(jr_exec_t *x, jr_outcome_t *out, size_t max);

/* Ask runners to stop after their current task (should_stop becomes true):
 * the rest of their batches come back as JR_OUT_UNSTARTED, a running task
 * that then returns RETRY as JR_OUT_INTERRUPTED. */
void jr_exec_stop(jr_exec_t *x);

/* Cancellation of running jobs (api->cancelled). jr_exec_cancel sets the
 * flag a handler of task `tag` reads, in the runner's shared memory (process
 * mode; a task moved to another runner loses it: call again, e.g. at each
 * heartbeat). In inline mode a held task so flagged is not started (it
 * comes back JR_OUT_UNSTARTED); the worker cannot run while a handler does,
 * so api->cancelled asks `fn` (ctx, tag) instead, at most every 500 ms; fn
 * returns 1 when the job was cancelled. */
typedef int (*jr_cancel_probe_fn)(void *ctx, uint32_t tag);
void jr_exec_set_cancel_probe(jr_exec_t *x, jr_cancel_probe_fn fn, void *ctx);
void jr_exec_cancel(jr_exec_t *x, uint32_t tag);

/* Kill busy runners now: their running task and the rest of their batch
 * come back as JR_OUT_UNSTARTED (the caller hands them back). Inline mode:
 * nothing to kill (no handler runs while the worker calls this); the tasks
 * held come back JR_OUT_UNSTARTED, as after jr_exec_stop. */
void jr_exec_kill(jr_exec_t *x);

#endif
