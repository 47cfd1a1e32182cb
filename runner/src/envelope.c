/* Envelope encoding and decoding: see envelope.h. */
#include "envelope.h"

#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "jr.h"
#include "jr_limits.h"

/* Parse exactly `len` bytes as a decimal integer in [min, max]. */
static int parse_int(const char *s, size_t len, int64_t min, int64_t max, int64_t *out) {
    if (len == 0 || len > 19) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < min || v > max) return -1;
    *out = v;
    return 0;
}

static int name_is(const char *name, size_t len, const char *lit) {
    return strlen(lit) == len && memcmp(name, lit, len) == 0;
}

/* Print at most 40 bytes of a possibly binary field name into err. */
static void bad_field(char *err, size_t errlen, const char *what, const char *name, size_t len) {
    char shown[41];
    size_t n = len < 40 ? len : 40;
    for (size_t i = 0; i < n; i++)
        shown[i] = (name[i] >= 0x20 && name[i] < 0x7f) ? name[i] : '?';
    shown[n] = '\0';
    snprintf(err, errlen, "%s field \"%s\"", what, shown);
}

/* "<what> "<at most 40 bytes of v, '?' for the unprintable>" <rule>". */
static void bad_value(char *err, size_t errlen, const char *what, const char *v, size_t len,
                      const char *rule) {
    char shown[41];
    size_t n = len < 40 ? len : 40;
    for (size_t i = 0; i < n; i++) shown[i] = (v[i] >= 0x20 && v[i] < 0x7f && v[i] != '"') ? v[i] : '?';
    shown[n] = '\0';
    snprintf(err, errlen, "%s \"%s%s\" %s", what, shown, len > 40 ? "..." : "", rule);
}

int jr_envelope_decode(jr_envelope_t *env, const char *entry_id, size_t n,
                       const char *const *names, const size_t *name_lens,
                       const char *const *values, const size_t *value_lens,
                       char *err, size_t errlen) {
    memset(env, 0, sizeof *env);
    env->attempt = 1;
    env->payload = "";

    /* The stream entry id "ms-seq" gives the default id and enqueue time. */
    const char *dash = entry_id ? strchr(entry_id, '-') : NULL;
    int64_t id_ms;
    if (!dash || parse_int(entry_id, (size_t)(dash - entry_id), 0, INT64_MAX / 2, &id_ms) != 0) {
        snprintf(err, errlen, "malformed stream entry id \"%.40s\"", entry_id ? entry_id : "");
        return JR_EINVAL;
    }
    env->id = entry_id;
    env->id_len = strlen(entry_id);
    env->enqueued_ms = id_ms;

    unsigned seen = 0;
    int have_due = 0;
    for (size_t i = 0; i < n; i++) {
        const char *nm = names[i], *v = values[i];
        size_t nl = name_lens[i], vl = value_lens[i];
        unsigned bit;
        int64_t num;
        if (name_is(nm, nl, JR_F_ID)) {
            bit = 1u << 0;
            if (vl == 0) {
                snprintf(err, errlen, "empty field \"" JR_F_ID "\"");
                return JR_EINVAL;
            }
            env->id = v, env->id_len = vl;
        } else if (name_is(nm, nl, JR_F_HANDLER)) {
            bit = 1u << 1;
            env->handler = v, env->handler_len = vl;
        } else if (name_is(nm, nl, JR_F_PAYLOAD)) {
            bit = 1u << 2;
            env->payload = v, env->payload_len = vl;
        } else if (name_is(nm, nl, JR_F_ERROR)) {
            bit = 1u << 3;
            env->error = v, env->error_len = vl;
        } else {
            int64_t lo = 0, hi = INT64_MAX / 2;
            /* The ranges of the contract (1 .. the maxima of jr_limits.h;
             * a default is left out, never written as 0): a value outside
             * never got in through it, so it is refused here too. */
            if (name_is(nm, nl, JR_F_ATTEMPT)) bit = 1u << 4, lo = 1, hi = JR_ATTEMPTS_MAX;
            else if (name_is(nm, nl, JR_F_MAX)) bit = 1u << 5, lo = 1, hi = JR_ATTEMPTS_MAX;
            else if (name_is(nm, nl, JR_F_TIMEOUT)) bit = 1u << 6, lo = 1, hi = JR_TIMEOUT_MAX_MS;
            else if (name_is(nm, nl, JR_F_BACKOFF)) bit = 1u << 9, lo = 1, hi = JR_BACKOFF_MAX_MS;
            else if (name_is(nm, nl, JR_F_ENQUEUED)) bit = 1u << 7;
            else if (name_is(nm, nl, JR_F_DUE)) bit = 1u << 8;
            else {
                bad_field(err, errlen, "unknown", nm, nl);
                return JR_EINVAL;
            }
            if (parse_int(v, vl, lo, hi, &num) != 0) {
                bad_field(err, errlen, "non-numeric or out-of-range", nm, nl);
                return JR_EINVAL;
            }
            switch (bit) {
            case 1u << 4: env->attempt = (uint32_t)num; break;
            case 1u << 5: env->max_attempts = (uint32_t)num; break;
            case 1u << 6: env->timeout_ms = num; break;
            case 1u << 9: env->backoff_ms = num; break;
            case 1u << 7: env->enqueued_ms = num; break;
            default: env->due_ms = num, have_due = 1; break;
            }
        }
        if (seen & bit) {
            bad_field(err, errlen, "duplicate", nm, nl);
            return JR_EINVAL;
        }
        seen |= bit;
    }
    if (!env->handler || env->handler_len == 0) {
        snprintf(err, errlen, "missing field \"" JR_F_HANDLER "\" (handler)");
        return JR_EINVAL;
    }
    /* The rules of contract.h: a value outside them never got in through
     * the contract (revision 15 on), and no handler could take it. */
    const char *rule;
    if ((rule = jr_contract_handler_name(env->handler, env->handler_len))) {
        bad_value(err, errlen, "handler name", env->handler, env->handler_len, rule);
        return JR_EINVAL;
    }
    if ((rule = jr_contract_stored_id(env->id, env->id_len))) {
        bad_value(err, errlen, "job id", env->id, env->id_len, rule);
        return JR_EINVAL;
    }
    if (!have_due) env->due_ms = env->enqueued_ms;
    return 0;
}

size_t jr_envelope_encode(const jr_envelope_t *env, const char **names, const char **values,
                          size_t *value_lens, char *numbuf, size_t numbuf_len) {
    size_t k = 0, used = 0;
    names[k] = JR_F_HANDLER, values[k] = env->handler, value_lens[k++] = env->handler_len;
    names[k] = JR_F_PAYLOAD, values[k] = env->payload ? env->payload : "";
    value_lens[k++] = env->payload ? env->payload_len : 0;
    struct {
        const char *name;
        int64_t v, dflt;
    } nums[] = {{JR_F_ATTEMPT, env->attempt, 1},
                {JR_F_MAX, env->max_attempts, 0},
                {JR_F_TIMEOUT, env->timeout_ms, 0},
                {JR_F_BACKOFF, env->backoff_ms, 0}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (nums[i].v == nums[i].dflt || (i == 0 && nums[i].v == 0)) continue;
        int w = snprintf(numbuf + used, numbuf_len - used, "%lld", (long long)nums[i].v);
        if (w < 0 || (size_t)w >= numbuf_len - used) break;
        names[k] = nums[i].name, values[k] = numbuf + used, value_lens[k++] = (size_t)w;
        used += (size_t)w + 1;
    }
    return k;
}
