/* contract.c, the one rule per value, and every pure C layer that checks a
 * value: each gives the table's verdict (tests/contract_cases.h) for each
 * value — the follow-up check of api->enqueue, the envelope decoder, the
 * config loader (handlers section, queue keys, -q parsing, durations), the
 * schedule definition check. (Lua, the CLI and the client library get the
 * same table in tests/integration/test_contract.c.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "contract.h"
#include "contract_cases.h"
#include "cron.h"
#include "envelope.h"
#include "followup.h"
#include "jr.h"
#include "jr_limits.h"
#include "redis.h"

#define NOW 1764581400000LL

/* The verdict of contract.c: NULL or the phrase. */
static const char *rule_of(const rc_case_t *c, int stored) {
    size_t n = rc_len(c);
    switch (c->kind) {
    case RC_QUEUE: return jr_contract_queue_name(c->v, n);
    case RC_HANDLER: return jr_contract_handler_name(c->v, n);
    case RC_ID: return stored ? jr_contract_stored_id(c->v, n) : jr_contract_job_id(c->v, n);
    default: {
        static char err[JR_ERRLEN];
        int64_t ms;
        return jr_duration_parse_range(c->v, 0, INT64_MAX, &ms, err, sizeof err) ? err : NULL;
    }
    }
}

/* "verdict" of a layer: 1 = accepted. */
static void expect_verdict(const rc_case_t *c, const char *layer, int accepted, const char *msg) {
    int want = c->says == NULL;
    cr_expect_eq(accepted, want, "%s: \"%.40s\" (%zu bytes): %s, expected %s (%s)", layer, c->v, rc_len(c),
                 accepted ? "accepted" : "refused", want ? "accepted" : "refused", msg ? msg : "");
    if (!accepted && !want && msg)
        cr_expect(strstr(msg, c->says), "%s: \"%.40s\": \"%s\" does not say \"%s\"", layer, c->v, msg, c->says);
}

Test(contract, the_rule_functions_give_the_table_verdicts) {
    for (size_t i = 0; i < RC_NCASES; i++) {
        const rc_case_t *c = &RC_CASES[i];
        if (c->kind == RC_ATTEMPTS) continue; /* a number: the bounds of jr_limits.h */
        expect_verdict(c, "contract.c", rule_of(c, 0) == NULL, rule_of(c, 0));
        if (c->kind == RC_ID) {
            /* a job that exists may have a generated id */
            int ok = rule_of(c, 1) == NULL;
            cr_expect_eq(ok, c->says == NULL || c->generated, "stored id \"%.40s\": %s", c->v,
                         ok ? "accepted" : rule_of(c, 1));
            cr_expect_eq(jr_contract_id_reserved(c->v, rc_len(c)), c->generated, "reserved \"%.40s\"", c->v);
        }
    }
}

/* api->enqueue's check (the plugin API), for the values a C string holds. */
Test(contract, followups_give_the_table_verdicts) {
    for (size_t i = 0; i < RC_NCASES; i++) {
        const rc_case_t *c = &RC_CASES[i];
        if (rc_has_nul(c) || c->kind == RC_DURATION || c->kind == RC_ATTEMPTS) continue;
        jr_followup_t f = {.handler = "echo"};
        if (c->kind == RC_QUEUE) f.queue = c->v;
        if (c->kind == RC_HANDLER) f.handler = c->v;
        if (c->kind == RC_ID) f.id = c->v;
        char why[256] = "";
        int ok = jr_fu_check(&f, "own", 100, NOW, why, sizeof why) == 0;
        expect_verdict(c, "jr_fu_check", ok, why);
        /* and the worker's check of a runner's encoded list agrees */
        jr_fu_list_t l = {.max_payload = 100};
        char w2[256] = "";
        if (jr_fu_append(&l, &f, "own", w2, sizeof w2) == 0) {
            int v = jr_fu_validate(l.buf, l.len, 100, w2, sizeof w2) == 0;
            expect_verdict(c, "jr_fu_validate", v, NULL);
        }
        jr_fu_reset(&l);
    }
}

/* The worker's decoder: binary-safe, so NUL bytes reach it too; a job that
 * exists may have a generated id. */
Test(contract, the_envelope_decoder_gives_the_table_verdicts) {
    for (size_t i = 0; i < RC_NCASES; i++) {
        const rc_case_t *c = &RC_CASES[i];
        if (c->kind != RC_HANDLER && c->kind != RC_ID && c->kind != RC_ATTEMPTS) continue;
        const char *names[] = {"id", "h", "m"};
        const char *values[] = {"job-1", "echo", c->v};
        size_t nl[] = {2, 1, 1}, vl[] = {5, 4, rc_len(c)};
        int k = c->kind == RC_ID ? 0 : 1;
        if (c->kind != RC_ATTEMPTS) values[k] = c->v, vl[k] = rc_len(c);
        jr_envelope_t env;
        char err[JR_ERRLEN] = "";
        int ok = jr_envelope_decode(&env, "1-0", c->kind == RC_ATTEMPTS ? 3 : 2, names, nl, values, vl, err,
                                    sizeof err) == 0;
        if (c->kind == RC_ID && c->generated) {
            cr_expect(ok, "decoder: generated id \"%s\" refused: %s", c->v, err);
            continue;
        }
        expect_verdict(c, "jr_envelope_decode", ok, err);
    }
}

/* YAML double-quoted scalar of the bytes of s (every byte as \xNN). */
static void yaml_quoted(char *out, const char *s) {
    *out++ = '"';
    for (; *s; s++) out += sprintf(out, "\\x%02x", (unsigned char)*s);
    strcpy(out, "\"");
}

Test(contract, the_config_loader_gives_the_table_verdicts) {
    for (size_t i = 0; i < RC_NCASES; i++) {
        const rc_case_t *c = &RC_CASES[i];
        if (rc_has_nul(c) || c->kind == RC_ID) continue;
        jr_config_t cfg;
        cr_assert_eq(jr_config_init(&cfg), 0);
        char err[JR_ERRLEN] = "", doc[2048], q[1024];
        if (c->kind == RC_HANDLER) {
            yaml_quoted(q, c->v);
            snprintf(doc, sizeof doc, "handlers:\n  %s: {timeout: 1s}\n", q);
            int ok = jr_config_load_string(&cfg, doc, strlen(doc), "t.yaml", err, sizeof err) == 0;
            expect_verdict(c, "config handlers", ok, NULL);
        } else if (c->kind == RC_QUEUE) {
            int ok = jr_config_set(&cfg, "enqueue.queue", c->v, err, sizeof err) == 0;
            expect_verdict(c, "config enqueue.queue", ok, NULL);
            char arg[256], name[JR_QUEUE_MAX + 1];
            int64_t w;
            snprintf(arg, sizeof arg, "%s:1", c->v);
            ok = jr_queue_weight_parse(arg, name, sizeof name, &w, err, sizeof err) == 0;
            expect_verdict(c, "worker -q", ok, NULL);
            cr_expect_eq(jr_queue_name_valid(c->v), c->says == NULL, "jr_queue_name_valid \"%s\"", c->v);
        } else if (c->kind == RC_ATTEMPTS) {
            int ok = jr_config_set(&cfg, "jobs.max_attempts", c->v, err, sizeof err) == 0;
            expect_verdict(c, "config jobs.max_attempts", ok, err);
        } else {
            int ok = jr_config_set(&cfg, "jobs.backoff", c->v, err, sizeof err) == 0;
            expect_verdict(c, "config jobs.backoff", ok, err);
        }
        jr_config_free(&cfg);
    }
}

/* A schedule's queue and handler are the job's: the same rules. */
Test(contract, schedule_definitions_give_the_table_verdicts) {
    for (size_t i = 0; i < RC_NCASES; i++) {
        const rc_case_t *c = &RC_CASES[i];
        if (rc_has_nul(c) || (c->kind != RC_QUEUE && c->kind != RC_HANDLER)) continue;
        jr_cron_def_t d = {.name = "s", .handler = "echo", .queue = "default", .every_ms = 60000, .tz = "UTC",
                           .enabled = 1};
        if (c->kind == RC_QUEUE) d.queue = (char *)c->v;
        else d.handler = (char *)c->v;
        char err[JR_ERRLEN] = "";
        int ok = jr_cron_def_check(&d, err, sizeof err) == 0;
        expect_verdict(c, "jr_cron_def_check", ok, NULL);
    }
}

/* ---- the lists and the key builders ---- */

/* Each JR_F_<NAME> and JR_<NAME>_KEY is its list's entry (a name missing
 * from the macros does not compile), and no two entries are equal. */
Test(contract, the_named_macros_are_the_list_entries) {
    const char *fields[] = {
#define FIELD_(NAME, field) field,
        JR_ENVELOPE_FIELDS(FIELD_)
#undef FIELD_
    };
    size_t nf = sizeof fields / sizeof fields[0];
#define FIELD_(NAME, field) cr_expect_str_eq(JR_F_##NAME, field, "JR_F_" #NAME);
    JR_ENVELOPE_FIELDS(FIELD_)
#undef FIELD_
#define KEY_(NAME, key) cr_expect_str_eq(JR_##NAME##_KEY, key, "JR_" #NAME "_KEY");
    JR_GLOBAL_KEYS(KEY_)
#undef KEY_
    const char *suffixes[] = {
#define KEY_(NAME, member, suffix) suffix,
        JR_QUEUE_KEYS(KEY_)
#undef KEY_
    };
    size_t nk = sizeof suffixes / sizeof suffixes[0];
    cr_expect_eq(nk, JR_QK_COUNT);
    for (size_t i = 0; i < nf; i++)
        for (size_t j = i + 1; j < nf; j++) cr_expect_str_neq(fields[i], fields[j], "field %zu and %zu", i, j);
    for (size_t i = 0; i < nk; i++)
        for (size_t j = i + 1; j < nk; j++) cr_expect_str_neq(suffixes[i], suffixes[j], "key %zu and %zu", i, j);
    /* a producer's entry is id..err: the dead-only fields come after */
    cr_expect_eq(JR_ENVELOPE_MAX_FIELDS, nf - 2);
}

Test(contract, the_key_builders_build_every_key_or_refuse) {
    jr_qkeys_t k;
    cr_assert_eq(jr_qkeys(&k, "mail"), 0);
    cr_expect_str_eq(k.ready, "jr:{mail}:ready");
    cr_expect_str_eq(k.delayed, "jr:{mail}:delayed");
    cr_expect_str_eq(k.wake, "jr:{mail}:wake");
    cr_expect_str_eq(k.seq, "jr:{mail}:seq");
    cr_expect_str_eq(k.dead, "jr:{mail}:dead");
    cr_expect_str_eq(k.ids, "jr:{mail}:ids");
    cr_expect_str_eq(k.cancelled, "jr:{mail}:cancelled");
    cr_expect_str_eq(k.stats, "jr:{mail}:stats");
    cr_expect_str_eq(k.wheel, "jr:{mail}:wheel");
    cr_expect_str_eq(k.wheel_n, "jr:{mail}:wheel:n");
    char one[JR_KEY_MAX];
    cr_expect_eq(jr_queue_key(one, "mail", JR_QK_WHEEL_N), 0);
    cr_expect_str_eq(one, "jr:{mail}:wheel:n");
    cr_expect(jr_queue_key_is("jr:{mail}:ready", "mail", JR_QK_READY));
    cr_expect(!jr_queue_key_is("jr:{mail}:ready", "mai", JR_QK_READY));
    cr_expect(!jr_queue_key_is("jr:{mail}:readyx", "mail", JR_QK_READY));
    cr_expect(!jr_queue_key_is("jr:{mail}:dead", "mail", JR_QK_READY));

    /* the longest queue name fits every key, and so does the longest internal
     * (partition) name; one byte more is refused, never cut */
    char q[JR_INTERNAL_QUEUE_MAX + 2];
    memset(q, 'q', JR_INTERNAL_QUEUE_MAX + 1), q[JR_QUEUE_MAX] = '\0';
    cr_assert_eq(jr_qkeys(&k, q), 0);
    cr_expect_eq(strlen(k.cancelled), 4 + JR_QUEUE_MAX + 2 + strlen("cancelled"));
    q[JR_QUEUE_MAX] = 'q', q[JR_INTERNAL_QUEUE_MAX] = '\0';
    cr_assert_eq(jr_qkeys(&k, q), 0);
    q[JR_INTERNAL_QUEUE_MAX] = 'q', q[JR_INTERNAL_QUEUE_MAX + 1] = '\0';
    cr_expect_eq(jr_qkeys(&k, q), JR_EINVAL);
    cr_expect_str_eq(k.ready, "");
    cr_expect_str_eq(k.wheel_n, "");
    cr_expect_eq(jr_queue_key(one, q, JR_QK_READY), JR_EINVAL);
    cr_expect_str_eq(one, "");

    char u[JR_UNIQ_KEY_MAX], id[JR_JOB_ID_MAX];
    cr_assert_eq(jr_uniq_key(u, sizeof u, "mail", "order-7", 7), 0);
    cr_expect_str_eq(u, "jr:{mail}:uniq:order-7");
    cr_expect_eq(jr_uniq_key(u, sizeof u, "mail", "order-7", 5), 0, "id_len counts, not the NUL");
    cr_expect_str_eq(u, "jr:{mail}:uniq:order");
    q[JR_QUEUE_MAX] = '\0';
    memset(id, 'i', sizeof id);
    cr_expect_eq(jr_uniq_key(u, sizeof u, q, id, sizeof id), 0, "the longest queue and id fit JR_UNIQ_KEY_MAX");
    cr_expect_eq(strlen(u), 4 + JR_QUEUE_MAX + 7 + JR_JOB_ID_MAX);
    /* too small a buffer, by one byte or by all of it: refused, never cut short */
    size_t need = strlen("jr:{mail}:uniq:order-7") + 1;
    cr_expect_eq(jr_uniq_key(u, need - 1, "mail", "order-7", 7), JR_EINVAL);
    cr_expect_str_eq(u, "");
    cr_expect_eq(jr_uniq_key(u, need, "mail", "order-7", 7), 0);
    cr_expect_eq(jr_uniq_key(u, 3, "mail", "order-7", 7), JR_EINVAL);
    cr_expect_eq(jr_uniq_key(u, 0, "mail", "order-7", 7), JR_EINVAL);
    cr_expect_eq(jr_uniq_key(u, sizeof u, "mail", "a\0b", 3), JR_EINVAL, "an id with a NUL makes no key");
    q[JR_QUEUE_MAX] = 'q';
    cr_expect_eq(jr_uniq_key(u, sizeof u, q, "x", 1), JR_EINVAL, "a queue name past JR_QUEUE_MAX");
}
