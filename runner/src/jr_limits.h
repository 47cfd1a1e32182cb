/* Named jr_limits.h, not limits.h: runner/src is on the include path, and a
 * limits.h there would hide the C library's <limits.h>. */
/* The documented maxima of every time and count a job carries, shared by the
 * CLI, the config loader, the C API and (as literals, checked against these
 * by a test) the Redis function library. A value past its maximum is refused
 * with a message naming it, never clamped or wrapped. */
#ifndef JR_LIMITS_H
#define JR_LIMITS_H

/* Units of time in ms. The Lua library has JR_DAY_MS as DAY_MS (checked
 * by tests/integration/test_contract.c). */
#define JR_SECOND_MS 1000LL
#define JR_MINUTE_MS (60 * JR_SECOND_MS)
#define JR_HOUR_MS (60 * JR_MINUTE_MS)
#define JR_DAY_MS (24 * JR_HOUR_MS)

/* A delayed job is due at most this long after Redis's now (--in, --at,
 * "+MS"/"@MS" in the contract, a handler's retry delay): 10 years. */
#define JR_DELAY_MAX_MS (3650 * JR_DAY_MS)
/* A job's timeout (envelope field t, --timeout, jobs.timeout): 1 ms .. 7 days. */
#define JR_TIMEOUT_MAX_MS (7 * JR_DAY_MS)
/* Backoff base and cap (envelope field b, --backoff, jobs.backoff*): up to 30 days. */
#define JR_BACKOFF_MAX_MS (30 * JR_DAY_MS)
/* Attempts of one job (envelope fields a and m, jobs.max_attempts): 1 .. 1000. */
#define JR_ATTEMPTS_MAX 1000
/* Idempotency window of an explicit id after its due time: a day when none
 * is given (the CLI, the client library, follow-ups, a cron tick at least),
 * up to 10 years. */
#define JR_UNIQ_DEFAULT_MS JR_DAY_MS
#define JR_UNIQ_MAX_MS JR_DELAY_MAX_MS
/* Longest explicit job id, bytes (the rules of a value: contract.h). */
#define JR_JOB_ID_MAX 158
/* Longest handler name, bytes. (The longest queue name is JR_QUEUE_MAX.) */
#define JR_HANDLER_NAME_MAX 64

#endif
