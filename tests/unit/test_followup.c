/* followup.c: checking a follow-up as api->enqueue does, and the encoding
 * that carries a list from a runner to Redis (round trip; every truncation
 * and random corruption refused, never read past). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "followup.h"
#include "jr_limits.h"

#define NOW 1764581400000LL

static void refused(const jr_followup_t *f, const char *says) {
    char why[256] = "";
    cr_expect_eq(jr_fu_check(f, "own", 100, NOW, why, sizeof why), -1, "accepted; expected \"%s\"", says);
    cr_expect(strstr(why, says), "\"%s\" does not say \"%s\"", why, says);
    cr_expect(!strncmp(why, "follow-up refused: ", 19), "%s", why);
}

Test(followup, check_refuses_what_redis_would_and_names_it) {
    char why[256];
    jr_followup_t ok = {.handler = "h"};
    cr_expect_eq(jr_fu_check(&ok, "own", 100, NOW, why, sizeof why), 0, "%s", why);
    refused(NULL, "no jr_followup_t");
    refused(&(jr_followup_t){.queue = "a b", .handler = "h"}, "queue name \"a b\" is not valid");
    refused(&(jr_followup_t){.handler = NULL}, "no handler name (jr_followup_t.handler is NULL)");
    refused(&(jr_followup_t){.handler = ""}, "no handler name (jr_followup_t.handler is empty)");
    refused(&(jr_followup_t){.handler = "a/b"}, "handler name \"a/b\" is not valid");
    refused(&(jr_followup_t){.handler = "h", .payload_len = 3}, "payload is NULL with a length of 3");
    refused(&(jr_followup_t){.handler = "h", .payload = "x", .payload_len = 101},
            "payload of 101 bytes is over the limit of 100 (jobs.max_payload)");
    refused(&(jr_followup_t){.handler = "h", .delay_ms = -1}, "delay_ms -1 is not in");
    refused(&(jr_followup_t){.handler = "h", .delay_ms = JR_DELAY_MAX_MS + 1}, "delay_ms");
    refused(&(jr_followup_t){.handler = "h", .at_ms = NOW + JR_DELAY_MAX_MS + 1}, "at_ms");
    refused(&(jr_followup_t){.handler = "h", .id = "d12"}, "job id \"d12\" has a reserved form");
    refused(&(jr_followup_t){.handler = "h", .id = "12-3"}, "reserved form");
    char id[200];
    memset(id, 'i', 159), id[159] = '\0';
    refused(&(jr_followup_t){.handler = "h", .id = id}, "longer than 158 bytes");
    id[158] = '\0';
    cr_expect_eq(jr_fu_check(&(jr_followup_t){.handler = "h", .id = id}, "own", 100, NOW, why, sizeof why), 0);
    cr_expect_eq(jr_fu_check(&(jr_followup_t){.handler = "h", .at_ms = 1}, "own", 100, NOW, why, sizeof why), 0,
                 "a time in the past means now");
}

static void build(jr_fu_list_t *l) {
    char why[256];
    static const char bin[] = {'a', 0, 'b', (char)0xff};
    jr_followup_t f[3] = {{.handler = "h1", .payload = bin, .payload_len = 4},
                          {.queue = "q2", .handler = "h2", .delay_ms = 7, .id = "x"},
                          {.handler = "h3", .at_ms = NOW}};
    for (int i = 0; i < 3; i++) cr_assert_eq(jr_fu_append(l, &f[i], "own", why, sizeof why), 0, "%s", why);
}

Test(followup, round_trip) {
    jr_fu_list_t l = {.max_payload = 100};
    build(&l);
    cr_assert_eq(l.n, 3);
    cr_assert_eq(jr_fu_count(l.buf, l.len), 3);
    size_t off = 0;
    jr_fu_item_t it;
    cr_assert_eq(jr_fu_next(l.buf, l.len, &off, &it), 1);
    cr_expect(it.queue_len == 3 && !memcmp(it.queue, "own", 3));
    cr_expect(it.payload_len == 4 && !memcmp(it.payload, "a\0b\xff", 4));
    cr_assert_eq(jr_fu_next(l.buf, l.len, &off, &it), 1);
    cr_expect(it.queue_len == 2 && !memcmp(it.queue, "q2", 2) && it.delay_ms == 7 && it.id_len == 1);
    cr_assert_eq(jr_fu_next(l.buf, l.len, &off, &it), 1);
    cr_expect(it.handler_len == 2 && !memcmp(it.handler, "h3", 2) && it.at_ms == NOW && it.payload_len == 0);
    cr_expect_eq(jr_fu_next(l.buf, l.len, &off, &it), 0);
    jr_fu_reset(&l);
    cr_expect(l.buf == NULL && l.n == 0 && l.max_payload == 100);
}

Test(followup, truncated_or_corrupt_buffers_are_refused_never_overread) {
    jr_fu_list_t l = {.max_payload = 100};
    build(&l);
    size_t ends[3], off = 0;
    jr_fu_item_t it;
    for (int i = 0; i < 3; i++) jr_fu_next(l.buf, l.len, &off, &it), ends[i] = off;
    for (size_t n = 0; n < l.len; n++) { /* an exact copy of n bytes: ASan sees any overread */
        char *c = malloc(n ? n : 1);
        memcpy(c, l.buf, n);
        long k = jr_fu_count(c, n);
        long want = n == 0 ? 0 : n == ends[0] ? 1 : n == ends[1] ? 2 : -1;
        cr_expect_eq(k, want, "prefix of %zu bytes: %ld", n, k);
        free(c);
    }
    srand(42);
    for (int round = 0; round < 20000; round++) {
        char *c = malloc(l.len);
        memcpy(c, l.buf, l.len);
        for (int flips = 1 + rand() % 4; flips > 0; flips--) c[rand() % l.len] = (char)rand();
        long k = jr_fu_count(c, l.len);
        cr_assert(k >= -1 && k <= 3);
        free(c);
    }
    jr_fu_reset(&l);
}

Test(followup, at_most_JR_FOLLOWUP_MAX_per_attempt) {
    jr_fu_list_t l = {.max_payload = 100};
    char why[256];
    jr_followup_t f = {.handler = "h"};
    for (int i = 0; i < JR_FOLLOWUP_MAX; i++) cr_assert_eq(jr_fu_append(&l, &f, "own", why, sizeof why), 0);
    cr_expect_eq(jr_fu_append(&l, &f, "own", why, sizeof why), -1);
    cr_expect(strstr(why, "at most 1000 follow-ups"), "%s", why);
    cr_expect_eq(l.n, JR_FOLLOWUP_MAX);
    jr_fu_reset(&l);
}

Test(followup, validate_refuses_what_api_enqueue_would) {
    char why[256];
    jr_fu_list_t l = {.max_payload = 100};
    build(&l);
    cr_expect_eq(jr_fu_validate(l.buf, l.len, 100, why, sizeof why), 0, "%s", why);
    cr_expect_eq(jr_fu_validate(l.buf, l.len, 3, why, sizeof why), -1, "a payload of 4 bytes over 3");
    cr_expect_eq(jr_fu_validate(l.buf, 0, 100, why, sizeof why), -1, "no follow-up");
    char *c = malloc(l.len);
    memcpy(c, l.buf, l.len);
    size_t off = 0;
    jr_fu_item_t it;
    jr_fu_next(c, l.len, &off, &it);
    ((char *)it.queue)[0] = ' '; /* a queue name api->enqueue refuses */
    cr_expect_eq(jr_fu_validate(c, l.len, 100, why, sizeof why), -1);
    cr_expect(strstr(why, "follow-up 1"), "%s", why);
    free(c);
    jr_fu_reset(&l);
}

/* jr_fu_rename: the follow-ups to one queue go to another, byte for byte
 * otherwise (a partitioned queue's job keeps them in its partition). */
Test(followup, rename_sends_one_queues_follow_ups_elsewhere) {
    jr_fu_list_t l = {.max_payload = 1 << 20};
    char why[256];
    cr_assert_eq(jr_fu_append(&l, &(jr_followup_t){.handler = "h", .payload = "p1", .payload_len = 2}, "orders", why,
                              sizeof why), 0);
    cr_assert_eq(jr_fu_append(&l, &(jr_followup_t){.queue = "mail", .handler = "m", .id = "x"}, "orders", why, sizeof why),
                 0);
    char *out;
    size_t len;
    cr_assert_eq(jr_fu_rename(l.buf, l.len, "nope", "orders#7", &out, &len), 0);
    cr_assert_null(out);
    cr_assert_eq(jr_fu_rename(l.buf, l.len, "orders", "orders#17", &out, &len), 1);
    size_t off = 0;
    jr_fu_item_t it;
    cr_assert_eq(jr_fu_next(out, len, &off, &it), 1);
    cr_assert(it.queue_len == 9 && !memcmp(it.queue, "orders#17", 9));
    cr_assert(it.handler_len == 1 && it.payload_len == 2 && !memcmp(it.payload, "p1", 2));
    cr_assert_eq(jr_fu_next(out, len, &off, &it), 1);
    cr_assert(it.queue_len == 4 && !memcmp(it.queue, "mail", 4) && it.id_len == 1 && it.id[0] == 'x');
    cr_assert_eq(jr_fu_next(out, len, &off, &it), 0);
    free(out);
    cr_assert_eq(jr_fu_rename(l.buf, l.len - 1, "orders", "o#1", &out, &len), -1, "corrupt");
    jr_fu_reset(&l);
}
