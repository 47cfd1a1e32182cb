/* Text log lines read back as exactly what jobrunner wrote: the message and
 * each key and value, whatever bytes a handler or Redis put in them (spaces,
 * '=', quotes, newlines, control bytes, not UTF-8). A reader written from
 * the documented format (docs/operations.md, "Log lines") parses every line
 * jr_log_kvv writes, for hostile and random payloads. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* ---- a reader of the documented format ------------------------------------ */

typedef struct bytes {
    char b[8192];
    size_t n;
} bytes_t;

typedef struct line {
    bytes_t msg;
    bytes_t k[16], v[16];
    int n;
} line_t;

static void put_utf8(bytes_t *o, uint32_t c) {
    if (c < 0x80) o->b[o->n++] = (char)c;
    else if (c < 0x800) o->b[o->n++] = (char)(0xc0 | c >> 6), o->b[o->n++] = (char)(0x80 | (c & 0x3f));
    else
        o->b[o->n++] = (char)(0xe0 | c >> 12), o->b[o->n++] = (char)(0x80 | (c >> 6 & 0x3f)),
        o->b[o->n++] = (char)(0x80 | (c & 0x3f));
}

static int hexval(const char *p, int n, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < n; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* A quoted string at *pp (on its '"'): decoded into o, *pp past the closing
 * quote. -1 on anything the format does not allow. */
static int unquote(const char **pp, bytes_t *o) {
    const char *p = *pp + 1;
    o->n = 0;
    for (;;) {
        if (!*p) return -1;
        if (*p == '"') break;
        if (*p != '\\') {
            o->b[o->n++] = *p++;
            continue;
        }
        uint32_t v;
        switch (p[1]) {
        case '"': case '\\': o->b[o->n++] = p[1], p += 2; break;
        case 'n': o->b[o->n++] = '\n', p += 2; break;
        case 'r': o->b[o->n++] = '\r', p += 2; break;
        case 't': o->b[o->n++] = '\t', p += 2; break;
        case 'x':
            if (hexval(p + 2, 2, &v)) return -1;
            o->b[o->n++] = (char)v, p += 4;
            break;
        case 'u':
            if (hexval(p + 2, 4, &v)) return -1;
            put_utf8(o, v), p += 6;
            break;
        default: return -1;
        }
    }
    *pp = p + 1;
    return 0;
}

/* Parse "TIME LEVEL COMPONENT[PID] MESSAGE k=v ..." (no newline). 0 or -1. */
static int parse(const char *l, line_t *L) {
    memset(L, 0, sizeof *L);
    const char *p = strchr(l, ' ');
    if (!p || p - l != 24 || l[23] != 'Z') return -1; /* 2026-12-01T09:30:00.250Z */
    p++;
    while (*p >= 'a' && *p <= 'z') p++;
    while (*p == ' ') p++;
    const char *b = strstr(p, "] ");
    if (!b || !strchr(p, '[') || strchr(p, '[') > b) {
        if (!(b = strchr(p, ']')) || b[1]) return -1;
        return 0; /* no message (never written: a message is quoted when empty) */
    }
    p = b + 2;
    if (*p == '"') {
        if (unquote(&p, &L->msg)) return -1;
    } else {
        const char *eq = strchr(p, '='), *end = p + strlen(p);
        if (eq) {
            end = eq;
            while (end > p && *end != ' ') end--;
            if (end == p) return -1; /* a key but no message */
        }
        memcpy(L->msg.b, p, (size_t)(end - p));
        L->msg.n = (size_t)(end - p);
        p = end;
    }
    while (*p) {
        if (*p++ != ' ' || L->n == 16) return -1;
        bytes_t *k = &L->k[L->n], *v = &L->v[L->n];
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
               *p == '.' || *p == '-')
            k->b[k->n++] = *p++;
        if (!k->n || *p++ != '=') return -1;
        if (*p == '"') {
            if (unquote(&p, v)) return -1;
        } else {
            while (*p && *p != ' ') {
                if (*p == '=' || *p == '"') return -1;
                v->b[v->n++] = *p++;
            }
            if (!v->n) return -1;
        }
        L->n++;
    }
    return 0;
}

/* ---- writing lines and reading them back ------------------------------------ */

static char path[] = "/tmp/jr-test-log.XXXXXX";

static void capture(void) {
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_geq(dup2(fd, 2), 0); /* jr_log_setup takes its copy of this stderr */
    close(fd);
    jr_log_setup(JR_LOG_TEXT, JR_LOG_DEBUG, "worker");
}

/* Every line written so far (the file is read whole; malloc'd). */
static char *written(void) {
    jr_log_flush();
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    static char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

/* Each byte of a line: printable UTF-8 and nothing a terminal acts on. */
static void check_printable(const char *l) {
    const unsigned char *u = (const unsigned char *)l;
    for (size_t i = 0; u[i]; i++) {
        cr_assert(u[i] >= 0x20 && u[i] != 0x7f, "control byte 0x%02x at %zu in: %s", u[i], i, l);
        if (u[i] == 0xc2) cr_assert(u[i + 1] >= 0xa0, "a C1 control in: %s", l);
        if (u[i] == 0xe2 && u[i + 1] == 0x80) cr_assert(u[i + 2] < 0xa8 || u[i + 2] > 0xae, "U+2028-202E in: %s", l);
    }
}

static void expect_same(const bytes_t *got, const char *want, const char *what, const char *line) {
    cr_assert(got->n == strlen(want) && !memcmp(got->b, want, got->n), "%s read back as %.*s, not %s, from: %s", what,
              (int)got->n, got->b, want, line);
}

/* Log msg with n pairs and read the line back: exactly msg and those pairs. */
static void roundtrip(const char *msg, size_t n, const char *const *keys, const char *const *vals) {
    char *before = written();
    size_t skip = strlen(before);
    free(before);
    jr_log_kvv(JR_LOG_INFO, msg, n, keys, vals);
    char *all = written(), *l = all + skip;
    char *nl = strchr(l, '\n');
    cr_assert(nl && !nl[1], "one line, ending in a newline: %s", l);
    *nl = '\0';
    check_printable(l);
    line_t L;
    cr_assert_eq(parse(l, &L), 0, "the line does not parse: %s", l);
    expect_same(&L.msg, msg, "the message", l);
    cr_assert_eq(L.n, (int)n, "%d keys read back, %zu written: %s", L.n, n, l);
    for (size_t i = 0; i < n; i++) {
        expect_same(&L.k[i], keys[i], "a key", l);
        expect_same(&L.v[i], vals[i], "a value", l);
    }
    free(all);
}

Test(log, a_message_cannot_add_keys_to_its_line) {
    capture();
    static const char *const keys[] = {"job", "queue", "handler"};
    static const char *const vals[] = {"real-1", "default", "echo"};
    roundtrip("x job=forged-1 outcome=ok", 3, keys, vals);
    roundtrip("echo: x\n2026-12-01T09:30:00.250Z info  worker[1] job finished job=forged-2 outcome=ok", 3, keys, vals);
    roundtrip("\"quoted\" job=forged-3", 3, keys, vals);
    roundtrip("ends in a backslash\\", 3, keys, vals);
    roundtrip("job finished", 3, keys, vals); /* an ordinary line stays as it was */
    char *all = written();
    cr_expect(strstr(all, "] job finished job=real-1 queue=default handler=echo\n"), "%s", all);
    cr_expect(strstr(all, "] \"x job=forged-1 outcome=ok\" job=real-1 "), "%s", all);
    free(all);
}

Test(log, a_value_cannot_add_keys_either) {
    capture();
    static const char *const keys[] = {"job", "error", "outcome"};
    const char *vals[] = {"a b=c", "x\" outcome=ok \"", "dead"};
    roundtrip("job finished", 3, keys, vals);
    vals[0] = "", vals[1] = "line 1\nline 2\r\n\x1b[31mred\x1b[0m\a", vals[2] = "\xff\xfe \xc3\xa9 \xc2\x85 \xe2\x80\xae";
    roundtrip("job finished", 3, keys, vals);
    vals[0] = "=", vals[1] = "\"", vals[2] = "\\";
    roundtrip("", 3, keys, vals);
}

/* Random messages and values from an alphabet of everything that could
 * break a line: each reads back exactly, with exactly the keys written. */
Test(log, random_hostile_payloads_read_back_exactly) {
    capture();
    static const char *const atoms[] = {" ", "=", "\"", "\\", "\n", "\r", "\t", "\x01", "\x1b", "\x7f", "\x80",
                                        "\xff", "\xc3\xa9", "\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xae", "\xed\xa0\x80",
                                        "\xf4\x90\x80\x80", "\xe2\x82", "job=forged", " outcome=ok", "a", "Z", "9",
                                        "\\x41", "\\u0041", "key_hex.6a6f62=1", "\xf0\x9f\x99\x82"};
    static const char *const names[] = {"job", "queue", "handler", "attempt", "outcome", "error", "retry_in"};
    srand(18);
    for (int round = 0; round < 2000; round++) {
        static char msg[512], val[7][512];
        const char *keys[7], *vals[7];
        char *bufs[8] = {msg, val[0], val[1], val[2], val[3], val[4], val[5], val[6]};
        for (int b = 0; b < 8; b++) {
            bufs[b][0] = '\0';
            for (int a = rand() % 12; a > 0; a--) strcat(bufs[b], atoms[rand() % (int)(sizeof atoms / sizeof *atoms)]);
        }
        size_t n = (size_t)(rand() % 8);
        for (size_t i = 0; i < n; i++) keys[i] = names[i], vals[i] = val[i];
        roundtrip(msg, n, keys, vals);
    }
}

/* jobrunner's keys are plain; one that is not (never written by jobrunner)
 * cannot break the line either. */
Test(log, an_odd_key_is_written_as_hex) {
    capture();
    const char *keys[] = {"a b=c"}, *vals[] = {"v"};
    char *before = written();
    size_t skip = strlen(before);
    free(before);
    jr_log_kvv(JR_LOG_WARN, "m", 1, keys, vals);
    char *all = written();
    cr_expect(strstr(all + skip, "] m key_hex.6120623d63=v\n"), "%s", all + skip);
    free(all);
}
