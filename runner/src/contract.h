/* The contract of docs/redis-contract.md on the C side, in one place: the
 * names of the envelope's fields, the keys of a queue and the global keys
 * (X-macro lists, with the builders of the keys), and the rules for the
 * values a job carries (one function per value, used by every C layer that
 * checks one: the CLI's arguments, the config loader, the client library,
 * the plugin API's register_handler and enqueue, the follow-ups, the
 * worker's envelope decoder). The limits are in jr_limits.h.
 *
 * The Redis function library has the same lists and rules at the top of
 * runner/lua/00-common.lua: a `local F_<NAME> = '<field>'` line per
 * JR_ENVELOPE_FIELDS entry, a `local K_<NAME> = '<suffix>'` line per
 * JR_QUEUE_KEYS entry, and the block "The rules of the values" with the
 * same words. tests/integration/test_contract.c checks that the lists are
 * equal (no entry on one side only) and drives a table of inputs and random
 * ones through both sets of rules, expecting the same verdict.
 *
 * Pure: no I/O, no global state. A check returns NULL for a valid value,
 * else a phrase saying what is wrong, for the caller to put after the
 * value's name and the quoted value: `job id "x" <phrase>`. */
#ifndef JR_CONTRACT_H
#define JR_CONTRACT_H

#include <stddef.h>
#include <stdint.h>

#define JR_QUEUE_MAX 128 /* longest queue name, bytes */
/* Longest internal queue name: a partition "<queue>#<J>" (partition.h) adds
 * "#" and at most 7 digits to a queue name. */
#define JR_INTERNAL_QUEUE_MAX (JR_QUEUE_MAX + 8)
#define JR_ID_MAX 160    /* a buffer for a job id: JR_JOB_ID_MAX bytes, a NUL and one to spare */
/* A buffer for any key of JR_QUEUE_KEYS of a valid internal queue name
 * (checked in contract.c). */
#define JR_KEY_MAX (JR_INTERNAL_QUEUE_MAX + 32)

/* ---- the envelope: the fields of a job's stream entry ------------------- */

/* Every field name jobrunner writes into a job's stream entry (the ready
 * and the dead streams), X(NAME, "field"), in the canonical order in which
 * every producer writes them (Redis stores a stream node's field names once
 * when entries repeat them). Each has its JR_F_<NAME> below (a string
 * literal, for arrays and argv; tests/unit/test_contract.c checks they
 * match). Adding a field: an entry here, its JR_F_ line, and its
 * `local F_<NAME>` line in the Lua. */
#define JR_ENVELOPE_FIELDS(X)                                                          \
    X(ID, "id")         /* job id; absent = the stream entry id */                     \
    X(HANDLER, "h")     /* handler name (required) */                                  \
    X(PAYLOAD, "p")     /* payload bytes; absent = empty */                            \
    X(ATTEMPT, "a")     /* attempt number; absent = 1 */                               \
    X(MAX, "m")         /* max attempts; absent = handler/config default */            \
    X(TIMEOUT, "t")     /* timeout in ms; absent = handler/config default */           \
    X(BACKOFF, "b")     /* backoff base in ms; absent = handler/config default */      \
    X(ENQUEUED, "e")    /* enqueued at, Unix ms; absent = stream entry id time */      \
    X(DUE, "d")         /* due at, Unix ms; absent = enqueued at */                    \
    X(ERROR, "err")     /* last error (retried and dead jobs) */                       \
    X(WHY, "why")       /* dead jobs only: failed, invalid or poison */                \
    X(RAW, "raw")       /* dead garbage only: what could not be read, kept whole */

#define JR_F_ID "id"
#define JR_F_HANDLER "h"
#define JR_F_PAYLOAD "p"
#define JR_F_ATTEMPT "a"
#define JR_F_MAX "m"
#define JR_F_TIMEOUT "t"
#define JR_F_BACKOFF "b"
#define JR_F_ENQUEUED "e"
#define JR_F_DUE "d"
#define JR_F_ERROR "err"
#define JR_F_WHY "why"
#define JR_F_RAW "raw"

/* ---- keys ---------------------------------------------------------------- */

/* The keys of queue Q with a fixed suffix, jr:{Q}:<suffix> (all share the
 * hash tag {Q}), X(NAME, member, "suffix"): `member` names the key in
 * jr_qkeys_t. Adding a key: an entry here and its `local K_<NAME>` line in
 * the Lua. The keys with a variable part are built by jr_uniq_key
 * (jr:{Q}:uniq:<id>); jr:{Q}:wheel:<start> only by the Lua. */
#define JR_QUEUE_KEYS(X)                                                              \
    X(READY, ready, "ready")             /* stream, group "jr": ready and running jobs */ \
    X(DELAYED, delayed, "delayed")       /* sorted set: near tier of delayed jobs */  \
    X(WAKE, wake, "wake")                /* stream, <= 1 entry: schedulers' wake-up */ \
    X(SEQ, seq, "seq")                   /* counter: generated ids, wheel numbers */   \
    X(DEAD, dead, "dead")                /* stream, capped: dead jobs */               \
    X(IDS, ids, "ids")                   /* hash: the job index */                     \
    X(CANCELLED, cancelled, "cancelled") /* hash: running entries asked to cancel */   \
    X(STATS, stats, "stats")             /* hash: counters of jobrunner stats */       \
    X(WHEEL, wheel, "wheel")             /* sorted set: the time-wheel buckets */      \
    X(WHEEL_N, wheel_n, "wheel:n")       /* counter: jobs in the buckets */ \
    X(FINISHED, finished, "finished")    /* stream, capped: finished jobs (keep_finished) */ \
    X(FINISHED_IDS, finished_ids, "finished:ids") /* hash: job id -> its finished entry */ \
    X(WAITERS, waiters, "waiters")       /* hash: job id -> deadline of its waiters (job wait) */ \
    X(DONE, done, "done")                /* stream, capped: outcomes of jobs waited for */ \
    X(HISTORY, history, "history")       /* hash, <= 1440 fields: per-minute counts */ \
    X(MOVED, moved, "moved")             /* sorted set: buckets moved by number (revision 22) */

/* JR_QK_READY, ...: the index of a key in JR_QUEUE_KEYS. */
enum jr_qkey {
#define JR_QK_ENUM_(NAME, member, suffix) JR_QK_##NAME,
    JR_QUEUE_KEYS(JR_QK_ENUM_)
#undef JR_QK_ENUM_
    JR_QK_COUNT
};

/* The keys of a queue, one member per JR_QUEUE_KEYS entry. */
typedef struct jr_qkeys {
#define JR_QK_MEMBER_(NAME, member, suffix) char member[JR_KEY_MAX];
    JR_QUEUE_KEYS(JR_QK_MEMBER_)
#undef JR_QK_MEMBER_
} jr_qkeys_t;

/* Fill *k with every key of queue q (a queue or internal partition name).
 * Returns 0, or JR_EINVAL when q is longer than JR_INTERNAL_QUEUE_MAX: then
 * every key is "", never cut short into the key of another queue. q is not
 * checked otherwise: callers check it with jr_contract_queue_name (or
 * jr_contract_key_queue for a partition) first. */
int jr_qkeys(jr_qkeys_t *k, const char *q);

/* Write key `which` of queue q into buf (JR_KEY_MAX bytes). Returns 0, or
 * JR_EINVAL (buf "") as jr_qkeys. */
int jr_queue_key(char *buf, const char *q, enum jr_qkey which);

/* 1 if key is key `which` of queue q (without formatting it), else 0. */
int jr_queue_key_is(const char *key, const char *q, enum jr_qkey which);

/* A buffer that holds the uniq key of any valid queue and job id. */
#define JR_UNIQ_KEY_MAX (JR_KEY_MAX + JR_ID_MAX)
/* Write jr:{q}:uniq:<id> (id: id_len bytes) into buf of len bytes. Returns
 * 0, or JR_EINVAL (buf "" if len > 0) when it would not fit: never cut
 * short. */
int jr_uniq_key(char *buf, size_t len, const char *q, const char *id, size_t id_len);

/* The keys outside any queue, X(NAME, "key"), each also as JR_<NAME>_KEY
 * (tests/unit/test_contract.c checks they match). The hash tags {queues},
 * {procs}, {cron} and {lib} each put their keys in one slot. A process's
 * hash is jr:{procs}:<name>. */
#define JR_GLOBAL_KEYS(X)                                                            \
    X(REGISTRY, "jr:{queues}")             /* set: every queue ever enqueued to */     \
    X(REGISTRY_WAKE, "jr:{queues}:wake")   /* stream, <= 1 entry: a queue registered */ \
    X(PAUSED, "jr:{queues}:paused")        /* hash: paused queue -> since (Unix ms) */ \
    X(PARTITIONS, "jr:{queues}:partitions") /* hash: queue -> partitions (absent = 1) */ \
    X(RESUMED, "jr:{queues}:resumed")      /* never written: blocked on (XREAD) */     \
    X(PROCS, "jr:{procs}")                 /* sorted set of process names, by start */ \
    X(CRON, "jr:{cron}")                   /* hash: schedule -> definition (JSON) */   \
    X(CRON_LAST, "jr:{cron}:last")         /* hash: schedule -> "<tick ms> <job id>" */ \
    X(CRON_WAKE, "jr:{cron}:wake")         /* stream poked on every schedule change */ \
    X(LIB_LOADING, "jr:{lib}:loading")     /* the library-load lock */                 \
    X(LIB_FENCE, "jr:{lib}:fence")         /* the library-load fence */

#define JR_REGISTRY_KEY "jr:{queues}"
#define JR_REGISTRY_WAKE_KEY "jr:{queues}:wake"
#define JR_PAUSED_KEY "jr:{queues}:paused"
#define JR_PARTITIONS_KEY "jr:{queues}:partitions"
#define JR_RESUMED_KEY "jr:{queues}:resumed"
#define JR_PROCS_KEY "jr:{procs}"
#define JR_CRON_KEY "jr:{cron}"
#define JR_CRON_LAST_KEY "jr:{cron}:last"
#define JR_CRON_WAKE_KEY "jr:{cron}:wake"
#define JR_LIB_LOADING_KEY "jr:{lib}:loading"
#define JR_LIB_FENCE_KEY "jr:{lib}:fence"

/* ---- the rules of the values -------------------------------------------- */

/* The rule texts, as quoted in messages, README and the Lua. */
#define JR_QUEUE_RULE "1-128 characters of A-Z a-z 0-9 _ . : -"
#define JR_HANDLER_RULE "1-64 characters of A-Z a-z 0-9 _ . : -"
#define JR_SCHEDULE_RULE "1-100 characters of A-Z a-z 0-9 _ . : -"

/* A queue name: 1..JR_QUEUE_MAX (128) bytes of [A-Za-z0-9_.:-]. */
const char *jr_contract_queue_name(const char *q, size_t n);
/* 1 if the C string q is a valid queue name (jr_contract_queue_name). */
int jr_queue_name_valid(const char *q);

/* The queue part of a key, jr:{<this>}:...: a queue name, or the internal
 * name of a partition of one, "<queue name>#<1-7 digits>" (partition.h).
 * Users never name a partition: their names go through
 * jr_contract_queue_name, which refuses '#'. */
const char *jr_contract_key_queue(const char *q, size_t n);

/* A periodic schedule's name (cron.h): 1..JR_CRON_NAME_MAX (100) bytes of
 * [A-Za-z0-9_.:-]. */
const char *jr_contract_schedule_name(const char *s, size_t n);

/* A handler name (register_handler, the handlers config section, the
 * envelope's h): 1..JR_HANDLER_NAME_MAX (64) bytes of [A-Za-z0-9_.:-]. */
const char *jr_contract_handler_name(const char *h, size_t n);

/* An explicit job id, as a producer gives it (--id, jr_client_job_t.id,
 * jr_followup_t.id, jr_enqueue's ID): 1..JR_JOB_ID_MAX (158) bytes, no NUL
 * byte (an id is a C string to handlers, logs and the CLI), and not of a
 * form jobrunner generates (see jr_contract_id_reserved). */
const char *jr_contract_job_id(const char *id, size_t n);

/* The id of a job that exists (a lookup: job show, cancel; the envelope's
 * id field): as jr_contract_job_id, but the generated forms are allowed. */
const char *jr_contract_stored_id(const char *id, size_t n);

/* 1 if id has a form jobrunner generates: "<digits>-<digits>" (a stream
 * entry id), "d<digits>-<digits>" (a delayed job) or the older "d<digits>",
 * each alone or followed by "~<digits>" (the partition of a job of a
 * partitioned queue, partition.h). */
int jr_contract_id_reserved(const char *id, size_t n);

/* -1, 0, 1 as stream entry id a is before, equal to, after b ("<ms>-<seq>"
 * or "<ms>", as Redis orders them). */
int jr_stream_id_cmp(const char *a, const char *b);

/* Parse a duration: "0", or one to four <digits><unit> groups with the
 * units h, m, s, ms in that order, each at most once ("250ms", "30s",
 * "5m", "2h", "1h30m", "1m30s", "90m"). Only ASCII digits; no fraction,
 * sign, space, exponent, other unit, repeated unit or units out of order
 * ("1.5s", "1s1s", "5m1h" are refused). Stores milliseconds in *ms.
 * Returns 0, or JR_EINVAL for anything else or a value over INT64_MAX ms
 * (never wrapped), leaving *ms unchanged. */
int jr_duration_parse(const char *s, int64_t *ms);

/* jr_duration_parse, and the value must lie in min_ms..max_ms. On error
 * returns JR_EINVAL with a message in err for the caller to prefix with the
 * option or key: "must be a duration like 500ms, ..." or "must be a
 * duration from 1ms to 168h (7 days)" (also for values too long for int64),
 * leaving *ms unchanged. */
int jr_duration_parse_range(const char *s, int64_t min_ms, int64_t max_ms, int64_t *ms,
                            char *err, size_t errlen);

#endif
