/* The filter of bulk actions (bulk.h): pure, no Redis. */
#include <criterion/criterion.h>
#include <string.h>

#include "bulk.h"

static int m(const jr_filter_t *f, const char *h, const char *p) {
    return jr_filter_match(f, h, h ? strlen(h) : 0, p, p ? strlen(p) : 0);
}

Test(filter, handler_is_matched_exactly_and_payload_as_a_substring_of_its_bytes) {
    jr_filter_t f = {.handler = "mail"};
    cr_expect(m(&f, "mail", "x"));
    cr_expect(!m(&f, "mailer", "x"), "a handler is its whole name, not a prefix");
    cr_expect(!m(&f, "mai", "x"));
    cr_expect(!m(&f, NULL, "x"), "an entry without a handler");
    jr_filter_t g = {.handler = "mail", .match = "1042", .match_len = 4};
    cr_expect(m(&g, "mail", "{\"order\":1042}"));
    cr_expect(!m(&g, "mail", "{\"order\":104}"));
    cr_expect(!m(&g, "echo", "1042"), "both must hold");
    cr_expect(!m(&g, "mail", NULL), "no payload holds no text");
    jr_filter_t h = {.match = "b\0c", .match_len = 3};
    cr_expect(jr_filter_match(&h, "x", 1, "ab\0cd", 5), "bytes, a NUL included");
    cr_expect(!jr_filter_match(&h, "x", 1, "abc", 3));
    jr_filter_t any = {0};
    cr_expect(m(&any, NULL, NULL) && m(NULL, "x", NULL), "an empty filter, or none, passes every job");
}

Test(filter, state_names) {
    cr_expect_eq(jr_bulk_state_parse("delayed"), JR_BULK_DELAYED);
    cr_expect_eq(jr_bulk_state_parse("retrying"), JR_BULK_RETRYING);
    cr_expect_eq(jr_bulk_state_parse("dead"), JR_BULK_DEAD);
    cr_expect_eq(jr_bulk_state_parse("ready"), -1);
    cr_expect_str_eq(jr_bulk_state_name(JR_BULK_RETRYING), "retrying");
}
