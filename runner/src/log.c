/* Logging: see log.h. Single-threaded use per process. */
#include "log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void jr_log_setup(jr_log_format_t format, int min_level, const char *component) {
    log_format = format;
    log_min = min_level;
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

/* Write s as a JSON string body (without quotes); with quotes = 0 only
 * control characters are escaped (text-mode messages: one line each). */
static void escape(FILE *f, const char *s, int quotes) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (quotes && (c == '"' || c == '\\')) {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
}

/* Text values with spaces, quotes or control characters are quoted so a line
 * stays one line and splits unambiguously into key=value pairs. */
static void text_value(FILE *f, const char *s) {
    int plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == '"' || *p == '=') plain = 0;
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    escape(f, s, 1);
    fputc('"', f);
}

void jr_log_kvv(jr_log_level_t level, const char *msg, size_t n, const char *const *keys,
                const char *const *vals) {
    if (!jr_log_enabled(level)) return;
    char ts[JR_TIME_LEN];
    jr_time_format(jr_wall_ms(), ts);
    const char *lv = level_names[level <= JR_LOG_ERROR ? level : JR_LOG_ERROR];
    FILE *f = out();
    if (log_format == JR_LOG_JSON) {
        fprintf(f, "{\"time\":\"%s\",\"level\":\"%s\",\"component\":\"%s\",\"pid\":%d,\"msg\":\"",
                ts, lv, log_component, (int)getpid());
        escape(f, msg, 1);
        fputc('"', f);
        for (size_t i = 0; i < n; i++) {
            fputs(",\"", f);
            escape(f, keys[i], 1);
            fputs("\":\"", f);
            escape(f, vals[i] ? vals[i] : "", 1);
            fputc('"', f);
        }
        fputs("}\n", f);
    } else {
        fprintf(f, "%s %-5s %s[%d] ", ts, lv, log_component, (int)getpid());
        escape(f, msg, 0); /* a message never spans lines */
        for (size_t i = 0; i < n; i++) {
            fprintf(f, " %s=", keys[i]);
            text_value(f, vals[i] ? vals[i] : "");
        }
        fputc('\n', f);
    }
    if (level >= JR_LOG_WARN) fflush(f);
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
