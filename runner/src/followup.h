/* Follow-up jobs: the jobs a handler enqueues with api->enqueue (plugin ABI
 * 1.2), kept with the attempt until the worker acknowledges the job and
 * written by Redis in the same call as the acknowledgement (jr_ack_follow).
 *
 * Pure: checking, encoding and decoding, no I/O. The encoded list is the
 * one form a list takes outside the handler's process: it travels from a
 * runner process to the worker over the runner's socket, sits in the
 * worker's outcome and operation queue, and is decoded by redis_worker.c into the
 * arguments of jr_ack_follow. Decoding checks every length against the
 * buffer, so a corrupt buffer is refused, never read past. */
#ifndef JR_FOLLOWUP_H
#define JR_FOLLOWUP_H

#include <stddef.h>
#include <stdint.h>

#include "jobrunner/plugin.h"

/* Most follow-ups one attempt may enqueue: they all go to Redis in the one
 * call that acknowledges the job, which must stay short. */
#define JR_FOLLOWUP_MAX 1000

/* The follow-ups of one attempt. */
typedef struct jr_fu_list {
    char *buf;       /* encoded items (see followup.c) */
    size_t len, cap;
    uint32_t n;      /* items in buf */
    int refused;     /* an enqueue call of this attempt was refused */
    char why[256];   /* the first refusal's message */
    int64_t max_payload; /* jobs.max_payload: a larger payload is refused */
} jr_fu_list_t;

/* One decoded item: pointers into the encoded buffer (not NUL-terminated
 * there; use the lengths). */
typedef struct jr_fu_item {
    const char *queue, *handler, *id, *payload; /* id_len 0 = generated id */
    size_t queue_len, handler_len, id_len, payload_len;
    int64_t delay_ms; /* > 0: due this long after the acknowledgement */
    int64_t at_ms;    /* > 0: due at this Unix time (ms); wins over delay_ms */
} jr_fu_item_t;

/* Check a follow-up as the host sees it from a handler: `own_queue` is
 * the queue of the job enqueuing it (used when f->queue is NULL or "").
 * Returns 0, or -1 with the reason in why ("follow-up refused: ..."):
 * f NULL, an invalid queue name, a NULL or empty handler, a handler name
 * that no handler could have (1..64 of [A-Za-z0-9_.:-]), a NULL payload
 * with a length, a payload over max_payload bytes, a negative delay or
 * time, a due time more than 10 years ahead (now_ms = Unix ms), an id
 * that jr_contract_job_id refuses (longer than 158 bytes or of a reserved
 * form: d<n>-<n>, d<n>, <n>-<n>). */
int jr_fu_check(const jr_followup_t *f, const char *own_queue, int64_t max_payload, int64_t now_ms,
                char *why, size_t whylen);

/* Append a checked follow-up to l. Returns 0, or -1 (out of memory, or
 * JR_FOLLOWUP_MAX reached) with the reason in why; l is then unchanged. */
int jr_fu_append(jr_fu_list_t *l, const jr_followup_t *f, const char *own_queue, char *why,
                 size_t whylen);

/* Empty l (keeping max_payload) and free its buffer. */
void jr_fu_reset(jr_fu_list_t *l);

/* Decode item `*off` of buf[0..len) into *it and advance *off. Returns 1
 * for an item, 0 at the end of the buffer, -1 if the buffer is corrupt. */
int jr_fu_next(const char *buf, size_t len, size_t *off, jr_fu_item_t *it);

/* Count the items of buf, checking all of them: returns the count, or -1
 * if the buffer is corrupt. */
long jr_fu_count(const char *buf, size_t len);

/* Re-encode buf[0..len) into *out (malloc'd, *outlen bytes) with every
 * follow-up whose queue is `from` sent to `to` instead (a follow-up of a
 * partitioned queue's job to its own queue stays in the job's partition,
 * partition.h). Nothing else changes. Returns 1 when one was renamed, 0
 * when none was (*out NULL), -1 for a corrupt buffer, or JR_ENOMEM. */
int jr_fu_rename(const char *buf, size_t len, const char *from, const char *to, char **out, size_t *outlen);

/* Check a buffer that came from a runner process (whose handlers could
 * write anything on its socket): at least one item, each as jr_fu_check
 * would accept it (queue and handler names, id, payload up to
 * max_payload, delay and time). Returns 0, or -1 with the reason in why. */
int jr_fu_validate(const char *buf, size_t len, int64_t max_payload, char *why, size_t whylen);

#endif
