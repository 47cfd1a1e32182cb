/* The rules of docs/redis-contract.md for the values a job carries: one
 * function per value, used by every C layer that checks one (the CLI's
 * arguments, the config loader, the client library, the plugin API's
 * register_handler and enqueue, the worker's envelope decoder). The Redis
 * function library applies the same rules (the block "The rules of the
 * values" at the top of runner/lua/jobrunner.lua), with the same words; a
 * test (tests/integration/test_contract.c) drives a table of inputs and
 * random ones through both and expects the same verdict.
 *
 * Pure: no I/O, no global state. A check returns NULL for a valid value,
 * else a phrase saying what is wrong, for the caller to put after the
 * value's name and the quoted value: `job id "x" <phrase>`. */
#ifndef JR_CONTRACT_H
#define JR_CONTRACT_H

#include <stddef.h>
#include <stdint.h>

/* The rule texts, as quoted in messages, README and the Lua. */
#define JR_QUEUE_RULE "1-128 characters of A-Z a-z 0-9 _ . : -"
#define JR_HANDLER_RULE "1-64 characters of A-Z a-z 0-9 _ . : -"
#define JR_SCHEDULE_RULE "1-100 characters of A-Z a-z 0-9 _ . : -"

/* A queue name: 1..JR_QUEUE_MAX (128) bytes of [A-Za-z0-9_.:-]. */
const char *jr_contract_queue_name(const char *q, size_t n);

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
 * entry id), "d<digits>-<digits>" (a delayed job) or the older "d<digits>". */
int jr_contract_id_reserved(const char *id, size_t n);

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
