/* Follow-up jobs: see followup.h.
 *
 * Encoding of one item (native byte order: it never leaves the machine):
 *   u32 queue_len, handler_len, id_len; u64 payload_len; i64 delay_ms, at_ms;
 *   then queue, handler, id and payload bytes. */
#include "followup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "jr.h"
#include "jr_limits.h"
#include "redis.h"

typedef struct fu_hdr {
    uint32_t queue_len, handler_len, id_len, pad;
    uint64_t payload_len;
    int64_t delay_ms, at_ms;
} fu_hdr_t;

/* A printable copy of s for a message: at most 64 bytes, '?' for others. */
static const char *shown(const char *s, char out[72]) {
    size_t i = 0;
    for (; s[i] && i < 64; i++) out[i] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' ? s[i] : '?';
    strcpy(out + i, s[i] ? "..." : "");
    return out;
}

int jr_fu_check(const jr_followup_t *f, const char *own_queue, int64_t max_payload, int64_t now_ms,
                char *why, size_t whylen) {
    char a[72];
    const char *q = f && f->queue && f->queue[0] ? f->queue : own_queue, *rule;
    if (!f)
        snprintf(why, whylen, "follow-up refused: no jr_followup_t given (NULL)");
    else if ((rule = jr_contract_queue_name(q, q ? strlen(q) : 0)))
        snprintf(why, whylen, "follow-up refused: queue name \"%s\" %s", shown(q ? q : "", a), rule);
    else if (!f->handler || !f->handler[0])
        snprintf(why, whylen, "follow-up refused: no handler name (jr_followup_t.handler is %s)",
                 f->handler ? "empty" : "NULL");
    else if ((rule = jr_contract_handler_name(f->handler, strlen(f->handler))))
        snprintf(why, whylen, "follow-up refused: handler name \"%s\" %s", shown(f->handler, a), rule);
    else if (!f->payload && f->payload_len > 0)
        snprintf(why, whylen, "follow-up refused: payload is NULL with a length of %zu", f->payload_len);
    else if (f->payload_len > (size_t)max_payload)
        snprintf(why, whylen, "follow-up refused: payload of %zu bytes is over the limit of %lld (jobs.max_payload)",
                 f->payload_len, (long long)max_payload);
    else if (f->delay_ms < 0 || f->delay_ms > JR_DELAY_MAX_MS)
        snprintf(why, whylen, "follow-up refused: delay_ms %lld is not in 0..%lld (10 years)",
                 (long long)f->delay_ms, (long long)JR_DELAY_MAX_MS);
    else if (f->at_ms < 0 || (f->at_ms > 0 && f->at_ms > now_ms + JR_DELAY_MAX_MS))
        snprintf(why, whylen, "follow-up refused: at_ms %lld is negative or more than %lld ms (10 years) after now",
                 (long long)f->at_ms, (long long)JR_DELAY_MAX_MS);
    else if (f->id && f->id[0] && (rule = jr_contract_job_id(f->id, strlen(f->id))))
        snprintf(why, whylen, "follow-up refused: job id \"%s\" %s", shown(f->id, a), rule);
    else
        return 0;
    return -1;
}

int jr_fu_append(jr_fu_list_t *l, const jr_followup_t *f, const char *own_queue, char *why, size_t whylen) {
    if (l->n >= JR_FOLLOWUP_MAX) {
        snprintf(why, whylen, "follow-up refused: a job may enqueue at most %d follow-ups", JR_FOLLOWUP_MAX);
        return -1;
    }
    const char *q = f->queue && f->queue[0] ? f->queue : own_queue;
    const char *id = f->id ? f->id : "";
    fu_hdr_t h = {.queue_len = (uint32_t)strlen(q), .handler_len = (uint32_t)strlen(f->handler),
                  .id_len = (uint32_t)strlen(id), .payload_len = f->payload_len,
                  .delay_ms = f->delay_ms, .at_ms = f->at_ms};
    size_t need = sizeof h + h.queue_len + h.handler_len + h.id_len + f->payload_len;
    if (need > SIZE_MAX - l->len) goto oom;
    if (l->len + need > l->cap) {
        size_t nc = l->cap ? l->cap : 256;
        while (nc < l->len + need) nc = nc > SIZE_MAX / 2 ? l->len + need : nc * 2;
        char *nb = realloc(l->buf, nc);
        if (!nb) goto oom;
        l->buf = nb, l->cap = nc;
    }
    char *p = l->buf + l->len;
    memcpy(p, &h, sizeof h), p += sizeof h;
    memcpy(p, q, h.queue_len), p += h.queue_len;
    memcpy(p, f->handler, h.handler_len), p += h.handler_len;
    memcpy(p, id, h.id_len), p += h.id_len;
    if (f->payload_len) memcpy(p, f->payload, f->payload_len);
    l->len += need;
    l->n++;
    return 0;
oom:
    snprintf(why, whylen, "follow-up refused: out of memory (payload of %zu bytes)", f->payload_len);
    return -1;
}

void jr_fu_reset(jr_fu_list_t *l) {
    int64_t max = l->max_payload;
    free(l->buf);
    memset(l, 0, sizeof *l);
    l->max_payload = max;
}

int jr_fu_next(const char *buf, size_t len, size_t *off, jr_fu_item_t *it) {
    if (*off == len) return 0;
    fu_hdr_t h;
    if (*off > len || len - *off < sizeof h) return -1;
    memcpy(&h, buf + *off, sizeof h);
    size_t left = len - *off - sizeof h;
    if (h.queue_len > left || h.handler_len > left - h.queue_len ||
        h.id_len > left - h.queue_len - h.handler_len ||
        h.payload_len > left - h.queue_len - h.handler_len - h.id_len || h.queue_len == 0 ||
        h.handler_len == 0)
        return -1;
    const char *p = buf + *off + sizeof h;
    it->queue = p, it->queue_len = h.queue_len, p += h.queue_len;
    it->handler = p, it->handler_len = h.handler_len, p += h.handler_len;
    it->id = p, it->id_len = h.id_len, p += h.id_len;
    it->payload = p, it->payload_len = (size_t)h.payload_len, p += h.payload_len;
    it->delay_ms = h.delay_ms, it->at_ms = h.at_ms;
    *off = (size_t)(p - buf);
    return 1;
}

int jr_fu_rename(const char *buf, size_t len, const char *from, const char *to, char **out, size_t *outlen) {
    size_t off = 0, flen = strlen(from), tlen = strlen(to), n = 0, need = 0;
    jr_fu_item_t it;
    int r;
    *out = NULL, *outlen = 0;
    while ((r = jr_fu_next(buf, len, &off, &it)) == 1)
        if (it.queue_len == flen && !memcmp(it.queue, from, flen)) n++;
    if (r < 0) return -1;
    if (!n) return 0;
    if (tlen > flen && n > (SIZE_MAX - len) / (tlen - flen)) return JR_ENOMEM;
    need = len + n * (tlen > flen ? tlen - flen : 0);
    char *p = malloc(need ? need : 1);
    if (!p) return JR_ENOMEM;
    size_t w = 0;
    off = 0;
    while (jr_fu_next(buf, len, &off, &it) == 1) {
        int ren = it.queue_len == flen && !memcmp(it.queue, from, flen);
        fu_hdr_t h;
        memcpy(&h, it.queue - sizeof h, sizeof h);
        if (ren) h.queue_len = (uint32_t)tlen;
        memcpy(p + w, &h, sizeof h), w += sizeof h;
        memcpy(p + w, ren ? to : it.queue, ren ? tlen : it.queue_len), w += ren ? tlen : it.queue_len;
        size_t rest = it.handler_len + it.id_len + it.payload_len; /* contiguous after the queue */
        memcpy(p + w, it.handler, rest), w += rest;
    }
    *out = p, *outlen = w;
    return 1;
}

long jr_fu_count(const char *buf, size_t len) {
    size_t off = 0;
    long n = 0;
    jr_fu_item_t it;
    int r;
    while ((r = jr_fu_next(buf, len, &off, &it)) == 1) n++;
    return r < 0 ? -1 : n;
}

int jr_fu_validate(const char *buf, size_t len, int64_t max_payload, char *why, size_t whylen) {
    size_t off = 0;
    long n = 0;
    jr_fu_item_t it;
    int r;
    while ((r = jr_fu_next(buf, len, &off, &it)) == 1) {
        n++;
        if (jr_contract_queue_name(it.queue, it.queue_len) || jr_contract_handler_name(it.handler, it.handler_len) ||
            (it.id_len && jr_contract_job_id(it.id, it.id_len)) || it.payload_len > (uint64_t)max_payload ||
            it.delay_ms < 0 || it.delay_ms > JR_DELAY_MAX_MS || it.at_ms < 0 || n > JR_FOLLOWUP_MAX) {
            snprintf(why, whylen, "follow-up %ld is not one api->enqueue accepts", n);
            return -1;
        }
    }
    if (r < 0 || n == 0) {
        snprintf(why, whylen, r < 0 ? "the follow-ups are corrupt" : "no follow-up");
        return -1;
    }
    return 0;
}
