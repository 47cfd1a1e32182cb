/* The job envelope: the fields of a stream entry (see docs/redis-contract.md;
 * their names, JR_F_*, are in contract.h's JR_ENVELOPE_FIELDS). Pure
 * encoding and decoding; no I/O. */
#ifndef JR_ENVELOPE_H
#define JR_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "contract.h"

/* Most fields an entry a producer writes has: id to err (not why, raw). */
#define JR_ENVELOPE_MAX_FIELDS 10
/* Room for the numbers jr_envelope_encode formats: 4 int64 values, each up
 * to 20 characters and a NUL. */
#define JR_ENVELOPE_NUMBUF (4 * 21)

/* A decoded envelope. Strings point into the decoded buffers (not copied,
 * not NUL-terminated: use the lengths). */
typedef struct jr_envelope {
    const char *id;
    size_t id_len;
    const char *handler;
    size_t handler_len;
    const char *payload;
    size_t payload_len;
    uint32_t attempt;      /* >= 1 */
    uint32_t max_attempts; /* 0 = default */
    int64_t timeout_ms;    /* 0 = default */
    int64_t backoff_ms;    /* 0 = default */
    int64_t enqueued_ms;
    int64_t due_ms;
    const char *error;     /* NULL if none */
    size_t error_len;
} jr_envelope_t;

/* Decode a stream entry: `entry_id` is its stream id ("ms-seq"), then n
 * field names and values (binary-safe). Missing optional fields take their
 * defaults. Returns 0, or JR_EINVAL with a message in err saying what was
 * wrong (missing handler, odd field count, duplicate or unknown field,
 * non-numeric or out-of-range number, malformed entry id, a handler name or
 * job id outside the rules of contract.h: jr_contract_handler_name,
 * jr_contract_stored_id). */
int jr_envelope_decode(jr_envelope_t *env, const char *entry_id, size_t n,
                       const char *const *names, const size_t *name_lens,
                       const char *const *values, const size_t *value_lens,
                       char *err, size_t errlen);

/* Encode the fields a producer sends: handler, payload, and attempt, max,
 * timeout, backoff only when they differ from their defaults (id, e and d are added by
 * the enqueue function). Writes up to JR_ENVELOPE_MAX_FIELDS name/value pairs
 * into names/values/lens, numbers formatted into `numbuf` (JR_ENVELOPE_NUMBUF
 * bytes hold any values), and
 * returns the number of pairs. */
size_t jr_envelope_encode(const jr_envelope_t *env, const char **names, const char **values,
                          size_t *value_lens, char *numbuf, size_t numbuf_len);

#endif
