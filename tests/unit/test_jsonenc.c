/* The JSON encoding helpers (json.c): base64 and the lossless form of bytes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

Test(jsonenc, base64_rfc4648_vectors) {
    static const char *const vec[][2] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}, {"\xff\xfe\xfd", "//79"}};
    for (size_t i = 0; i < sizeof vec / sizeof *vec; i++) {
        char *b = jr_base64(vec[i][0], strlen(vec[i][0]));
        cr_assert(b);
        cr_expect_str_eq(b, vec[i][1], "base64 of \"%s\"", vec[i][0]);
        free(b);
    }
}

/* Valid UTF-8 (NUL included) is a string, anything else {"base64": ...}. */
Test(jsonenc, bytes_are_a_string_or_base64) {
    static const struct {
        const char *s;
        size_t n;
        const char *json;
    } cases[] = {
        {"caf\xc3\xa9 \xe2\x98\x95", 9, "\"caf\xc3\xa9 \xe2\x98\x95\""},
        {"\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\""},
        {"a\0b", 3, "\"a\\u0000b\""},
        {"\"\\\x1f", 3, "\"\\\"\\\\\\u001F\""},
        {"\xff\xfe", 2, "{\"base64\":\"//4=\"}"},
        {"\x80", 1, "{\"base64\":\"gA==\"}"},
        {"\xc3", 1, "{\"base64\":\"ww==\"}"},          /* truncated sequence */
        {"\xc0\x80", 2, "{\"base64\":\"wIA=\"}"},      /* overlong NUL */
        {"\xed\xbf\xbf", 3, "{\"base64\":\"7b+/\"}"},  /* surrogate */
        {"\xf5\x80\x80\x80", 4, "{\"base64\":\"9YCAgA==\"}"},
        {"", 0, "\"\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *j = jr_json_bytes(cases[i].s, cases[i].n);
        cr_assert(j);
        char *got = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
        cr_expect_str_eq(got, cases[i].json, "case %zu", i);
        free(got);
        json_decref(j);
    }
}
