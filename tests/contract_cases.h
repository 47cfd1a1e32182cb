/* The table of the rules of the values (runner/src/contract.h): each value
 * with the verdict every layer must give it. Shared by the pure test
 * (tests/unit/test_contract.c: contract.c and the C layers that use it) and
 * the integration test (tests/integration/test_contract.c: the same table
 * through Lua, the CLI and the client library, plus random inputs). */
#ifndef JRT_CONTRACT_CASES_H
#define JRT_CONTRACT_CASES_H

#include <stddef.h>

typedef enum { RC_QUEUE, RC_HANDLER, RC_ID, RC_DURATION, RC_ATTEMPTS } rc_kind_t;

typedef struct rc_case {
    rc_kind_t kind;
    const char *v;
    size_t len;       /* 0 = strlen(v); else the bytes (may hold a NUL) */
    const char *says; /* NULL = valid; else what a refusal says (the rule's phrase) */
    int generated;    /* RC_ID: a form jobrunner generates (a stored id is valid) */
} rc_case_t;

/* 158 bytes; X158 + 30 is its last 128, X158 + 29 its last 129. */
#define X158 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
#define N64 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn" /* 64 bytes */

static const rc_case_t RC_CASES[] = {
    /* queue names: 1-128 of A-Z a-z 0-9 _ . : - ("" is "default" to producers) */
    {RC_QUEUE, "default", 0, NULL, 0},
    {RC_QUEUE, "A-Z_a.z:0-9", 0, NULL, 0},
    {RC_QUEUE, X158 + 30, 0, NULL, 0},
    {RC_QUEUE, X158 + 29, 0, "is not valid (1-128 characters", 0},
    {RC_QUEUE, "a b", 0, "is not valid (1-128 characters", 0},
    {RC_QUEUE, "a/b", 0, "is not valid (1-128 characters", 0},
    {RC_QUEUE, "a}b", 0, "is not valid (1-128 characters", 0},
    {RC_QUEUE, "a,b", 0, "is not valid (1-128 characters", 0},
    {RC_QUEUE, "caf\xc3\xa9", 0, "is not valid (1-128 characters", 0},
    {RC_QUEUE, "a\0b", 3, "is not valid (1-128 characters", 0},
    /* handler names: 1-64 of A-Z a-z 0-9 _ . : - */
    {RC_HANDLER, "echo", 0, NULL, 0},
    {RC_HANDLER, "mail.send:v2-x_y", 0, NULL, 0},
    {RC_HANDLER, N64, 0, NULL, 0},
    {RC_HANDLER, N64 "n", 0, "is not valid (1-64 characters", 0},
    {RC_HANDLER, "send mail", 0, "is not valid (1-64 characters", 0},
    {RC_HANDLER, "a/b", 0, "is not valid (1-64 characters", 0},
    {RC_HANDLER, "x\n", 0, "is not valid (1-64 characters", 0},
    {RC_HANDLER, "\xff\x01junk", 0, "is not valid (1-64 characters", 0},
    {RC_HANDLER, "h\0x", 3, "is not valid (1-64 characters", 0},
    /* explicit job ids: 1-158 bytes, no NUL, not d<n>-<n>, d<n>, <n>-<n> (alone or with ~<n>) */
    {RC_ID, "order-1042", 0, NULL, 0},
    {RC_ID, "report-2026-12-01", 0, NULL, 0},
    {RC_ID, "nightly@1764581400000", 0, NULL, 0},
    {RC_ID, X158, 0, NULL, 0},
    {RC_ID, X158 "x", 0, "is longer than 158 bytes", 0},
    {RC_ID, "d1764581403250-1", 0, "has a reserved form", 1},
    {RC_ID, "d5", 0, "has a reserved form", 1},
    {RC_ID, "d05-00", 0, "has a reserved form", 1},
    {RC_ID, "1764581403250-0", 0, "has a reserved form", 1},
    {RC_ID, "5-5", 0, "has a reserved form", 1},
    /* a generated id of a partition (revision 19) */
    {RC_ID, "1764581403250-0~7", 0, "has a reserved form", 1},
    {RC_ID, "d1764581403250-1~1023", 0, "has a reserved form", 1},
    {RC_ID, "d5~0", 0, "has a reserved form", 1},
    {RC_ID, "order~5", 0, NULL, 0},
    {RC_ID, "5-5~", 0, NULL, 0},
    {RC_ID, "5-5~x", 0, NULL, 0},
    {RC_ID, "~5", 0, NULL, 0},
    {RC_ID, "5-5~1~2", 0, NULL, 0},
    {RC_ID, "d", 0, NULL, 0},
    {RC_ID, "d-1", 0, NULL, 0},
    {RC_ID, "dd5", 0, NULL, 0},
    {RC_ID, "d5-", 0, NULL, 0},
    {RC_ID, "d5-5x", 0, NULL, 0},
    {RC_ID, "5-5-5", 0, NULL, 0},
    {RC_ID, "-5", 0, NULL, 0},
    {RC_ID, "5", 0, NULL, 0},
    {RC_ID, "D5", 0, NULL, 0},
    {RC_ID, " d5", 0, NULL, 0},
    {RC_ID, "x5-5", 0, NULL, 0},
    {RC_ID, "caf\xc3\xa9 \xff", 0, NULL, 0},
    {RC_ID, "a\0b", 3, "contains a NUL byte", 0},
    {RC_ID, "\0", 1, "contains a NUL byte", 0},
    {RC_ID, "d5\0", 3, "contains a NUL byte", 0},
    /* durations (C only: --in, --timeout, config) */
    {RC_DURATION, "0", 0, NULL, 0},
    {RC_DURATION, "250ms", 0, NULL, 0},
    {RC_DURATION, "30s", 0, NULL, 0},
    {RC_DURATION, "90m", 0, NULL, 0},
    {RC_DURATION, "1h30m", 0, NULL, 0},
    {RC_DURATION, "1h1m1s1ms", 0, NULL, 0},
    {RC_DURATION, "1.5s", 0, "must be a duration like", 0},
    {RC_DURATION, "1s1s", 0, "must be a duration like", 0},
    {RC_DURATION, "5m1h", 0, "must be a duration like", 0},
    {RC_DURATION, "1ms1s", 0, "must be a duration like", 0},
    {RC_DURATION, "5", 0, "must be a duration like", 0},
    {RC_DURATION, "5d", 0, "must be a duration like", 0},
    {RC_DURATION, "-1s", 0, "must be a duration like", 0},
    /* max attempts (--max-attempts, jobs.max_attempts, the envelope's m):
     * ASCII digits, 1..1000; each layer words it its own way ("" = any) */
    {RC_ATTEMPTS, "1", 0, NULL, 0},
    {RC_ATTEMPTS, "1000", 0, NULL, 0},
    {RC_ATTEMPTS, "05", 0, NULL, 0},
    {RC_ATTEMPTS, "0", 0, "", 0},
    {RC_ATTEMPTS, "1001", 0, "", 0},
    {RC_ATTEMPTS, "-1", 0, "", 0},
    {RC_ATTEMPTS, "+5", 0, "", 0},
    {RC_ATTEMPTS, " 5", 0, "", 0},
    {RC_ATTEMPTS, "5 ", 0, "", 0},
    {RC_ATTEMPTS, "1e3", 0, "", 0},
    {RC_ATTEMPTS, "0x10", 0, "", 0},
    {RC_ATTEMPTS, "99999999999999999999", 0, "", 0},
};
#define RC_NCASES (sizeof RC_CASES / sizeof RC_CASES[0])

static inline size_t rc_len(const rc_case_t *c) { return c->len ? c->len : __builtin_strlen(c->v); }
/* 1 if the value holds a NUL byte: layers that take C strings cannot be
 * given it (their verdict is that of the bytes before it, not tested). */
static inline int rc_has_nul(const rc_case_t *c) { return __builtin_strlen(c->v) != rc_len(c); }

#endif
