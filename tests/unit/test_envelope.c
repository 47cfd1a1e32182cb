/* Envelope encoding and decoding (pure). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "envelope.h"
#include "jr.h"
#include "jr_limits.h"

/* Decode name/value pairs given as a NULL-terminated list. */
static int decode(jr_envelope_t *env, const char *entry_id, const char *const *kv, char *err) {
    const char *names[16], *values[16];
    size_t nl[16], vl[16], n = 0;
    for (; kv[2 * n]; n++) {
        names[n] = kv[2 * n], values[n] = kv[2 * n + 1];
        nl[n] = strlen(names[n]), vl[n] = strlen(values[n]);
    }
    return jr_envelope_decode(env, entry_id, n, names, nl, values, vl, err, JR_ERRLEN);
}

Test(envelope, minimal_entry_takes_defaults_from_the_stream_id) {
    jr_envelope_t e;
    char err[JR_ERRLEN];
    const char *kv[] = {"h", "echo", "p", "hi", NULL};
    cr_assert_eq(decode(&e, "1764457664123-7", kv, err), 0, "%s", err);
    cr_expect_eq(e.id_len, strlen("1764457664123-7"));
    cr_expect(!strncmp(e.id, "1764457664123-7", e.id_len));
    cr_expect(!strncmp(e.handler, "echo", e.handler_len));
    cr_expect(e.payload_len == 2 && !memcmp(e.payload, "hi", 2));
    cr_expect_eq(e.attempt, 1);
    cr_expect_eq(e.max_attempts, 0);
    cr_expect_eq(e.timeout_ms, 0);
    cr_expect_eq(e.enqueued_ms, 1764457664123);
    cr_expect_eq(e.due_ms, 1764457664123);
    cr_expect_null(e.error);
}

Test(envelope, every_field_decodes) {
    jr_envelope_t e;
    char err[JR_ERRLEN];
    const char *kv[] = {"id", "order-9", "h", "close", "p", "", "a", "3", "m", "5", "t", "30000", "b", "250",
                        "e", "1700000000000", "d", "1700000005000", "err", "timeout", NULL};
    cr_assert_eq(decode(&e, "1764457664123-0", kv, err), 0, "%s", err);
    cr_expect(e.id_len == 7 && !memcmp(e.id, "order-9", 7));
    cr_expect_eq(e.payload_len, 0);
    cr_expect_eq(e.attempt, 3);
    cr_expect_eq(e.max_attempts, 5);
    cr_expect_eq(e.timeout_ms, 30000);
    cr_expect_eq(e.backoff_ms, 250);
    cr_expect_eq(e.enqueued_ms, 1700000000000);
    cr_expect_eq(e.due_ms, 1700000005000);
    cr_expect(e.error_len == 7 && !memcmp(e.error, "timeout", 7));
}

Test(envelope, payload_is_binary_safe) {
    jr_envelope_t e;
    char err[JR_ERRLEN];
    const char *names[] = {"h", "p"};
    const char *values[] = {"x", "a\0b\0"};
    size_t nl[] = {1, 1}, vl[] = {1, 4};
    cr_assert_eq(jr_envelope_decode(&e, "1-0", 2, names, nl, values, vl, err, sizeof err), 0, "%s", err);
    cr_expect(e.payload_len == 4 && !memcmp(e.payload, "a\0b\0", 4));
}

static void expect_refused(const char *entry_id, const char *const *kv, const char *why) {
    jr_envelope_t e;
    char err[JR_ERRLEN] = "";
    cr_expect_eq(decode(&e, entry_id, kv, err), JR_EINVAL, "accepted an entry with %s", why);
    cr_expect(strstr(err, why), "message \"%s\" does not say \"%s\"", err, why);
}

Test(envelope, garbage_is_refused_with_the_reason) {
    expect_refused("1-0", (const char *[]){"p", "x", NULL}, "missing field \"h\"");
    expect_refused("1-0", (const char *[]){"h", "", NULL}, "missing field \"h\"");
    expect_refused("1-0", (const char *[]){"h", "x", "a", "two", NULL}, "non-numeric or out-of-range field \"a\"");
    expect_refused("1-0", (const char *[]){"h", "x", "a", "0", NULL}, "field \"a\"");
    expect_refused("1-0", (const char *[]){"h", "x", "a", "-1", NULL}, "field \"a\"");
    expect_refused("1-0", (const char *[]){"h", "x", "t", "99999999999999999999", NULL}, "field \"t\"");
    expect_refused("1-0", (const char *[]){"h", "x", "zz", "1", NULL}, "unknown field \"zz\"");
    expect_refused("1-0", (const char *[]){"h", "x", "h", "y", NULL}, "duplicate field \"h\"");
    expect_refused("1-0", (const char *[]){"h", "x", "id", "", NULL}, "empty field \"id\"");
    expect_refused("garbage", (const char *[]){"h", "x", NULL}, "malformed stream entry id");
}

Test(envelope, encode_leaves_defaults_out_and_round_trips) {
    jr_envelope_t in = {.handler = "send_mail", .handler_len = 9, .payload = "{\"to\":1}", .payload_len = 8,
                        .attempt = 1};
    const char *names[JR_ENVELOPE_MAX_FIELDS], *values[JR_ENVELOPE_MAX_FIELDS];
    size_t lens[JR_ENVELOPE_MAX_FIELDS];
    char nums[64];
    size_t n = jr_envelope_encode(&in, names, values, lens, nums, sizeof nums);
    cr_assert_eq(n, 2, "defaults must not be written: got %zu fields", n);
    cr_expect_str_eq(names[0], "h");
    cr_expect_str_eq(names[1], "p");

    in.attempt = 4, in.max_attempts = 7, in.timeout_ms = 1500, in.backoff_ms = 40;
    n = jr_envelope_encode(&in, names, values, lens, nums, sizeof nums);
    cr_assert_eq(n, 6);
    size_t nl[JR_ENVELOPE_MAX_FIELDS];
    for (size_t i = 0; i < n; i++) nl[i] = strlen(names[i]);
    jr_envelope_t out;
    char err[JR_ERRLEN];
    cr_assert_eq(jr_envelope_decode(&out, "5-1", n, names, nl, values, lens, err, sizeof err), 0, "%s", err);
    cr_expect(out.handler_len == 9 && !memcmp(out.handler, "send_mail", 9));
    cr_expect(out.payload_len == 8 && !memcmp(out.payload, "{\"to\":1}", 8));
    cr_expect_eq(out.attempt, 4);
    cr_expect_eq(out.max_attempts, 7);
    cr_expect_eq(out.timeout_ms, 1500);
    cr_expect_eq(out.backoff_ms, 40);
}

/* Every numeric field is accepted up to its maximum in jr_limits.h and
 * refused one past it and at 0 (a stream entry written by hand must not smuggle in
 * a timeout or attempt count the contract refuses). */
Test(envelope, numeric_fields_are_bounded_by_the_limits) {
    static const struct {
        const char *name;
        long long max;
    } rows[] = {{"a", JR_ATTEMPTS_MAX}, {"m", JR_ATTEMPTS_MAX}, {"t", JR_TIMEOUT_MAX_MS}, {"b", JR_BACKOFF_MAX_MS}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        for (long long delta = -1; delta <= 1; delta++) {
            char v[32]; /* delta -1: 0, below the range; 0: the maximum; 1: past it */
            snprintf(v, sizeof v, "%lld", delta < 0 ? 0 : rows[i].max + delta);
            const char *kv[] = {"h", "x", rows[i].name, v, NULL};
            jr_envelope_t e;
            char err[JR_ERRLEN] = "";
            int rc = decode(&e, "1-0", kv, err);
            if (delta == 0)
                cr_expect_eq(rc, 0, "%s=%s refused: %s", rows[i].name, v, err);
            else
                cr_expect(rc != 0 && strstr(err, "out-of-range"), "%s=%s accepted (%s)", rows[i].name, v, err);
        }
    }
}
