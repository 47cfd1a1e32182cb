/* Logging: see log.h. A line is written under the stream's lock
 * (flockfile), so the metrics server's thread may log beside the loop;
 * setup is single-threaded (before any other thread starts). */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "util.h"

static jr_log_format_t log_format = JR_LOG_TEXT;
static int log_min = JR_LOG_INFO;
static char log_component[32] = "jobrunner";
static char log_buf[1 << 16];
/* Where lines go: a private duplicate of stderr taken by jr_log_setup, so a
 * handler that closes fd 2 (and whatever opens next, landing there) neither
 * loses our lines nor receives them. NULL before setup: stderr itself. */
static FILE *log_out;
#define LOG_FD_MIN 100 /* out of the way of descriptors code opens in order */

static FILE *out(void) { return log_out ? log_out : stderr; }

/* getpid() is a system call: cached, refreshed in a forked child (a handler
 * process logs with its own pid). */
static pid_t log_pid;
static void refresh_pid(void) { log_pid = getpid(); }

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void jr_log_setup(jr_log_format_t format, int min_level, const char *component) {
    log_format = format;
    log_min = min_level;
    static int atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, refresh_pid) == 0) atfork_done = 1;
    refresh_pid();
    if (component) snprintf(log_component, sizeof log_component, "%s", component);
    if (log_out) return;
    int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, LOG_FD_MIN);
    if (fd < 0) fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3); /* a low RLIMIT_NOFILE */
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) { /* stderr is closed or we are out of memory: log to stderr as is */
        if (fd >= 0) close(fd);
        setvbuf(stderr, log_buf, _IOFBF, sizeof log_buf);
        return;
    }
    setvbuf(f, log_buf, _IOFBF, sizeof log_buf);
    log_out = f;
}

int jr_log_enabled(jr_log_level_t level) { return (int)level >= log_min; }

void jr_log_flush(void) { fflush(out()); }

/* The length (1-4) of the valid UTF-8 sequence at s (NUL-terminated) and
 * its code point in *cp; 0 if s does not start one (a stray continuation
 * byte, an overlong form, a surrogate, past U+10FFFF, cut short). */
static size_t utf8_seq(const unsigned char *s, uint32_t *cp) {
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!n) return 0;
    uint32_t c = n == 1 ? s[0] : s[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0; /* also a NUL: cut short */
        c = c << 6 | (s[i] & 0x3f);
    }
    static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return n;
}

/* 1 for a code point written as is in a text line: not a control
 * character (C0, DEL, C1), nor one that moves lines or reorders text on a
 * terminal (U+2028/2029, the bidirectional marks and overrides). */
static int printable(uint32_t c) {
    return c >= 0x20 && c != 0x7f && !(c >= 0x80 && c < 0xa0) && c != 0x061c && !(c >= 0x200e && c <= 0x200f) &&
           !(c >= 0x2028 && c <= 0x202e) && !(c >= 0x2066 && c <= 0x2069);
}

enum { PLAIN_KEY, PLAIN_VALUE, PLAIN_MSG };

/* 1 if s may go into a text line as is, as a `kind`: a key is
 * [A-Za-z0-9_.-]+; a value is a non-empty run of printable characters
 * without space, '=' or '"'; a message likewise, with spaces inside (not
 * first or last) and '"' (not first). A value or message that is not is
 * quoted; a key that is not is written key_hex.HEX (jobrunner's own keys
 * all are). So a line reads back unambiguously: the message is quoted, or
 * ends at the last space before the line's first '='; then each key=value,
 * a space before each. */
static int plain(const char *s, int kind) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    if (!n) return 0;
    if (kind == PLAIN_MSG && (u[0] == ' ' || u[n - 1] == ' ' || u[0] == '"')) return 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t k = utf8_seq(u + i, &c);
        if (!k || !printable(c) || c == '=') return 0;
        if (kind == PLAIN_KEY && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                                   c == '_' || c == '.' || c == '-'))
            return 0;
        if (kind == PLAIN_VALUE && (c == ' ' || c == '"')) return 0;
        i += k;
    }
    return 1;
}

/* s in double quotes: '"' and '\' after a backslash, \n \r \t, other
 * characters that are not printable as \uXXXX, a byte that is not part of
 * valid UTF-8 as \xHH. The result is printable valid UTF-8 on one line, and
 * decodes back to exactly the bytes of s. */
static void quoted(FILE *f, const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; u[i];) {
        uint32_t c;
        size_t k = utf8_seq(u + i, &c);
        if (!k) fprintf(f, "\\x%02x", u[i]), k = 1;
        else if (c == '"' || c == '\\') fputc('\\', f), fputc((int)c, f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\t') fputs("\\t", f);
        else if (!printable(c)) fprintf(f, "\\u%04x", (unsigned)c);
        else fwrite(u + i, 1, k, f);
        i += k;
    }
    fputc('"', f);
}

static void text_item(FILE *f, const char *s, int kind) {
    if (plain(s, kind)) {
        fputs(s, f);
    } else if (kind == PLAIN_KEY) {
        fputs("key_hex.", f);
        for (const unsigned char *u = (const unsigned char *)s; *u; u++) fprintf(f, "%02x", *u);
    } else {
        quoted(f, s);
    }
}

/* In JSON lines these keys (and any ending in _ms, _us or _seconds) carry
 * numbers: a value that is a JSON number literal is written as a number;
 * any other value (e.g. "100ms") stays a string. */
static int numeric_key(const char *k) {
    static const char *const names[] = {"attempt", "jobs", "count", "members", "deleted", "poison",
                                        "handlers", "concurrency", "orders", "paid", "closed_unpaid",
                                        "full", "per_client", "slow"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(k, names[i])) return 1;
    size_t n = strlen(k);
    return (n > 3 && (!strcmp(k + n - 3, "_ms") || !strcmp(k + n - 3, "_us"))) ||
           (n > 8 && !strcmp(k + n - 8, "_seconds"));
}

/* v as a JSON number when it is a JSON number literal that fits (integer in
 * a json_int_t, or a finite double), else NULL. */
static json_t *number(const char *v) {
    const char *p = v + (*v == '-');
    if (!(*p >= '0' && *p <= '9') || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return NULL;
    while (*p >= '0' && *p <= '9') p++;
    int integer = 1;
    if (*p == '.') {
        integer = 0;
        if (!(*++p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        integer = 0;
        p += p[1] == '+' || p[1] == '-';
        if (!(*++p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p) return NULL;
    errno = 0;
    char *end;
    if (integer) {
        long long i = strtoll(v, &end, 10);
        return errno ? NULL : json_integer((json_int_t)i);
    }
    double d = strtod(v, &end);
    return errno || !isfinite(d) ? NULL : json_real(d);
}

/* 15 significant digits: a decimal of up to 15 digits read into a double
 * prints back as written ("5.85", not "5.8499999999999996"). */
#define LINE_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/* One JSON log line, built with jansson as one object: fixed keys first,
 * then the pairs; values as jr_json_bytes (non-UTF-8 as {"base64": ...}),
 * numeric keys as numbers. A key that is not valid UTF-8, or repeats one
 * already on the line, is written as "key_base64:" + base64 of the key, so
 * nothing is lost. */
static void json_line(FILE *f, const char *ts, const char *lv, const char *msg, size_t n,
                      const char *const *keys, const char *const *vals) {
    json_t *o = json_object();
    int bad = !o || json_object_set_new_nocheck(o, "time", json_string_nocheck(ts)) ||
              json_object_set_new_nocheck(o, "level", json_string_nocheck(lv)) ||
              json_object_set_new_nocheck(o, "component", jr_json_bytes(log_component, strlen(log_component))) ||
              json_object_set_new_nocheck(o, "pid", json_integer(log_pid ? log_pid : getpid())) ||
              json_object_set_new_nocheck(o, "msg", jr_json_bytes(msg, strlen(msg)));
    for (size_t i = 0; i < n && !bad; i++) {
        const char *v = vals[i] ? vals[i] : "";
        json_t *jv = numeric_key(keys[i]) ? number(v) : NULL;
        if (!jv) jv = jr_json_bytes(v, strlen(v));
        /* json_object_set fails on a non-UTF-8 key and keeps jv */
        if (!json_object_get(o, keys[i]) && json_object_set(o, keys[i], jv) == 0) {
            json_decref(jv);
            continue;
        }
        char *b = jr_base64(keys[i], strlen(keys[i]));
        char *k = b ? malloc(strlen(b) + sizeof "key_base64:") : NULL;
        if (k) sprintf(k, "key_base64:%s", b);
        bad = !k || json_object_set(o, k, jv);
        json_decref(jv);
        free(b), free(k);
    }
    static char buf[4096]; /* most lines fit; a longer one is dumped to the heap */
    size_t len = bad ? 0 : json_dumpb(o, buf, sizeof buf, LINE_FLAGS);
    char *heap = len > sizeof buf ? json_dumps(o, LINE_FLAGS) : NULL;
    if (len && len <= sizeof buf) jr_json_write(f, buf, len);
    else if (heap) jr_json_write(f, heap, strlen(heap));
    else
        fprintf(f, "{\"time\":\"%s\",\"level\":\"error\",\"pid\":%d,\"msg\":\"out of memory writing a log line\"}",
                ts, (int)(log_pid ? log_pid : getpid()));
    fputc('\n', f);
    free(heap);
    json_decref(o);
}

void jr_log_kvv(jr_log_level_t level, const char *msg, size_t n, const char *const *keys,
                const char *const *vals) {
    if (!jr_log_enabled(level)) return;
    char ts[JR_TIME_LEN];
    jr_time_format(jr_wall_ms(), ts);
    const char *lv = level_names[level <= JR_LOG_ERROR ? level : JR_LOG_ERROR];
    FILE *f = out();
    flockfile(f); /* one whole line at a time, and json_line's buffer is ours */
    if (log_format == JR_LOG_JSON) {
        json_line(f, ts, lv, msg, n, keys, vals);
    } else {
        fprintf(f, "%s %-5s %s[%d] ", ts, lv, log_component, (int)(log_pid ? log_pid : getpid()));
        text_item(f, msg, PLAIN_MSG);
        for (size_t i = 0; i < n; i++) {
            fputc(' ', f);
            text_item(f, keys[i], PLAIN_KEY);
            fputc('=', f);
            text_item(f, vals[i] ? vals[i] : "", PLAIN_VALUE);
        }
        fputc('\n', f);
    }
    if (level >= JR_LOG_WARN) fflush(f);
    funlockfile(f);
}

void jr_log_kv(jr_log_level_t level, const char *msg, ...) {
    if (!jr_log_enabled(level)) return;
    const char *keys[32], *vals[32];
    size_t n = 0;
    va_list ap;
    va_start(ap, msg);
    const char *k;
    while (n < 32 && (k = va_arg(ap, const char *)) != NULL) {
        keys[n] = k;
        vals[n] = va_arg(ap, const char *);
        if (vals[n]) n++; /* a NULL value leaves the pair out */
    }
    va_end(ap);
    jr_log_kvv(level, msg, n, keys, vals);
}

void jr_log(jr_log_level_t level, const char *fmt, ...) {
    if (!jr_log_enabled(level)) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jr_log_kvv(level, msg, 0, NULL, NULL);
}

void jr_log_failover(const char *master, const char *from, const char *to) {
    char msg[1024];
    snprintf(msg, sizeof msg, "following the failover of master %s: %s -> %s", master, from, to);
    jr_log_kv(JR_LOG_INFO, msg, "master", master, "from", from, "to", to, NULL);
    jr_log_flush();
}
