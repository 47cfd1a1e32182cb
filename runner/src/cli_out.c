/* What the command files share: usage errors, text from Redis on a
 * terminal, how a command ends, and its connection. See cli.h. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "jr.h"
#include "proc.h"
#include "util.h"

/* ---- usage errors -------------------------------------------------------- */

int jr_cli_die(const char *cmd, const char *fmt, const char *arg) {
    fprintf(stderr, "jobrunner %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nRun 'jobrunner %s --help' for usage.\n", cmd);
    return 2;
}

int jr_cli_die2(const char *cmd, const char *what, const char *value, const char *why) {
    fprintf(stderr, "jobrunner %s: invalid %s \"%.200s%s\": %s\n", cmd, what, value,
            strlen(value) > 200 ? "..." : "", why);
    fprintf(stderr, "Run 'jobrunner %s --help' for usage.\n", cmd);
    return 2;
}

const char *jr_cli_shown_arg(const char *arg, char *buf, size_t len) {
    if (!strstr(arg, "://") && !strchr(arg, '@')) return arg;
    jr_redis_url_redact(arg, buf, len);
    return buf;
}

int jr_cli_parse_count(const char *s, int64_t min, int64_t max, int64_t *out) {
    int64_t v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (*s - '0');
        if (v > max) return -1;
    }
    if (v < min) return -1;
    *out = v;
    return 0;
}

/* ---- text from Redis on a terminal ------------------------------------------ */

static int plain(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '\\'; }

void jr_cli_print_bytes(FILE *out, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (plain(c)) fputc(c, out);
        else fprintf(out, "\\x%02x", c);
    }
}

#define ESC_BUFS 4
#define ESC_LEN (4 * JR_ERRLEN + 8)
const char *jr_cli_esc(const char *s) {
    static char bufs[ESC_BUFS][ESC_LEN];
    static unsigned next;
    char *b = bufs[next++ % ESC_BUFS];
    size_t o = 0;
    for (const unsigned char *u = (const unsigned char *)(s ? s : ""); *u; u++) {
        if (o + 8 >= ESC_LEN) {
            memcpy(b + o, "...", 4);
            return b;
        }
        if (plain(*u)) b[o++] = (char)*u;
        else o += (size_t)snprintf(b + o, ESC_LEN - o, "\\x%02x", *u);
    }
    b[o] = '\0';
    return b;
}

/* ---- tables ----------------------------------------------------------------- */

void jr_table_init(jr_table_t *t, const char *const *heads, const char *kinds) {
    *t = (jr_table_t){.ncols = strlen(kinds), .heads = heads, .kinds = kinds};
}

/* s (n bytes) escaped as jr_cli_print_bytes prints it, malloc'd. */
static char *escaped(const char *s, size_t n) {
    char *b = malloc(4 * n + 1), *o = b;
    for (size_t i = 0; b && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (plain(c)) *o++ = (char)c;
        else o += sprintf(o, "\\x%02x", c);
    }
    if (b) *o = '\0';
    return b;
}

int jr_table_add(jr_table_t *t, const char *const *cells) { return jr_table_add_n(t, cells, NULL); }

int jr_table_add_n(jr_table_t *t, const char *const *cells, const size_t *lens) {
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        char **c = realloc(t->cells, cap * t->ncols * sizeof *c), **nt;
        if (c) t->cells = c;
        if (!c || !(nt = realloc(t->notes, cap * sizeof *nt))) return JR_ENOMEM;
        t->notes = nt, t->cap = cap;
    }
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t i = 0; i < t->ncols; i++) {
        const char *v = cells[i] ? cells[i] : "";
        if (!(row[i] = escaped(v, cells[i] && lens ? lens[i] : strlen(v)))) {
            while (i--) free(row[i]);
            return JR_ENOMEM;
        }
    }
    t->notes[t->nrows++] = NULL;
    return 0;
}

int jr_table_note(jr_table_t *t, const char *text) {
    if (!t->nrows) return JR_EINVAL;
    free(t->notes[t->nrows - 1]);
    return (t->notes[t->nrows - 1] = escaped(text, strlen(text))) ? 0 : JR_ENOMEM;
}

size_t jr_table_fit(const size_t *nat, const size_t *min, size_t n, size_t limit, size_t *w) {
    size_t total = 0, sep = 2;
    for (size_t i = 0; i < n; i++) w[i] = nat[i], total += nat[i];
    if (limit && n && total + 2 * (n - 1) > limit) sep = 1; /* one space rather than cut cells */
    total += n ? sep * (n - 1) : 0;
    while (limit && total > limit) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (w[i] > min[i] && (best == n || w[i] > w[best])) best = i;
        if (best == n) break; /* nothing left to shrink */
        w[best]--, total--;
    }
    return sep;
}

const char *jr_table_cut(const char *s, size_t width, char *buf) {
    size_t n = strlen(s);
    if (n <= width) return s;
    size_t keep = width ? width - 1 : 0;
    memcpy(buf, s, keep);
    memcpy(buf + keep, JR_TABLE_ELLIPSIS, sizeof JR_TABLE_ELLIPSIS);
    return buf;
}

size_t jr_table_limit(FILE *out, int wide) {
    if (wide) return 0;
    const char *cols = getenv("COLUMNS");
    int64_t n;
    if (cols && !jr_cli_parse_count(cols, 1, 100000, &n)) return (size_t)n;
    return isatty(fileno(out)) ? 80 : 0;
}

void jr_table_print(const jr_table_t *t, FILE *out, size_t limit) {
    size_t n = t->ncols, *nat = calloc(n + 1, sizeof *nat), *min = calloc(n + 1, sizeof *min),
           *w = calloc(n + 1, sizeof *w);
    char *buf = NULL;
    size_t widest = 0;
    if (!nat || !min || !w) goto out;
    for (size_t i = 0; i < n; i++) {
        nat[i] = strlen(t->heads[i]);
        for (size_t r = 0; r < t->nrows; r++) {
            size_t l = strlen(t->cells[r * n + i]);
            if (l > nat[i]) nat[i] = l;
        }
        for (size_t r = 0; i == 0 && r < t->nrows; r++)
            if (t->notes[r] && strlen(t->notes[r]) + 4 > widest) widest = strlen(t->notes[r]) + 4;
        min[i] = t->kinds[i] == 'l' ? (strlen(t->heads[i]) > 4 ? strlen(t->heads[i]) : 4) : nat[i];
        if (min[i] > nat[i]) min[i] = nat[i];
        if (nat[i] > widest) widest = nat[i];
    }
    size_t sep = jr_table_fit(nat, min, n, limit, w);
    if (!(buf = malloc(widest + 4))) goto out;
    for (size_t r = 0; r <= t->nrows; r++) {
        for (size_t i = 0; i < n; i++) {
            const char *v = r ? jr_table_cut(t->cells[(r - 1) * n + i], w[i], buf) : t->heads[i];
            size_t len = strlen(v), cols = v == buf ? w[i] : len;
            int last = i + 1 == n;
            if (t->kinds[i] == 'r') fprintf(out, "%*s%s", (int)(w[i] - cols), "", v);
            else fprintf(out, "%s%*s", v, last ? 0 : (int)(w[i] - cols), "");
            if (!last) fputs(sep == 1 ? " " : "  ", out);
        }
        fputc('\n', out);
        if (r && t->notes[r - 1])
            fprintf(out, "    %s\n", limit > 4 ? jr_table_cut(t->notes[r - 1], limit - 4, buf) : t->notes[r - 1]);
    }
out:
    free(nat), free(min), free(w), free(buf);
}

void jr_table_free(jr_table_t *t) {
    for (size_t i = 0; t->cells && i < t->nrows * t->ncols; i++) free(t->cells[i]);
    for (size_t i = 0; t->notes && i < t->nrows; i++) free(t->notes[i]);
    free(t->cells), free(t->notes);
    t->cells = t->notes = NULL, t->nrows = t->cap = 0;
}

/* ---- bulk actions over a filter --------------------------------------------- */

int jr_cli_confirm(const char *cmd, int yes, const char *what) {
    if (yes) return 0;
    if (!isatty(STDIN_FILENO)) {
        fprintf(stderr, "jobrunner %s: this would %s; stdin is not a terminal to confirm it on: "
                        "give --yes to do it\n", cmd, what);
        return 2;
    }
    fprintf(stderr, "%s? [y/N] ", what);
    fflush(stderr);
    char line[64];
    if (fgets(line, sizeof line, stdin) && (line[0] == 'y' || line[0] == 'Y')) return 0;
    fprintf(stderr, "jobrunner %s: nothing changed\n", cmd);
    return 1;
}

int jr_cli_filter(const jr_cli_flags_t *f, jr_filter_t *out) {
    *out = (jr_filter_t){.handler = f->v[JR_O_HANDLER], .match = f->v[JR_O_MATCH],
                         .match_len = f->v[JR_O_MATCH] ? strlen(f->v[JR_O_MATCH]) : 0};
    return jr_flag(f, JR_O_HANDLER) || jr_flag(f, JR_O_MATCH);
}

const char *jr_cli_filter_text(const jr_filter_t *flt, char *buf, size_t len) {
    int n = 0;
    buf[0] = '\0';
    if (flt->handler && flt->handler[0]) n = snprintf(buf, len, " with handler %s", jr_cli_esc(flt->handler));
    if (n >= 0 && (size_t)n < len && flt->match && flt->match_len)
        snprintf(buf + n, len - (size_t)n, "%s whose payload contains \"%s\"", n ? " and" : "", jr_cli_esc(flt->match));
    return buf;
}

const char *jr_cli_field(const jr_entry_t *e, const char *name, size_t *len) {
    for (size_t i = 0; i < e->nfields; i++)
        if (e->name_lens[i] == strlen(name) && !memcmp(e->names[i], name, e->name_lens[i])) {
            if (len) *len = e->value_lens[i];
            return e->values[i];
        }
    return NULL;
}

/* ---- how a command ends -------------------------------------------------------- */

void jr_cli_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

int jr_cli_done(FILE *out, int status) {
    errno = 0;
    if (fflush(out) == 0 && !ferror(out)) return status;
    fprintf(stderr, "jobrunner: cannot write the output: %s\n", errno ? strerror(errno) : "an earlier write failed");
    return status ? status : 1;
}

int jr_cli_json_oom(json_t **doc) {
    json_decref(*doc);
    *doc = NULL;
    fprintf(stderr, "jobrunner: out of memory building the JSON output\n");
    return 1;
}

int jr_cli_json_out(FILE *out, json_t *doc) {
    if (jr_json_print(out, doc) == 0 && fflush(out) == 0) return 0;
    fprintf(stderr, "jobrunner: cannot write the JSON output\n");
    return 1;
}

/* ---- the connection ----------------------------------------------------------- */

jr_redis_t *jr_cli_connect(const jr_config_t *cfg, int required) {
    jr_cli_ignore_sigpipe();
    char err[JR_ERRLEN];
    /* redis.wait (--wait): retry a Redis that cannot be reached yet (not
     * started, its name not resolvable yet) until that much time has passed,
     * every 100 ms doubling to 1 s. */
    int64_t until = jr_mono_us() + cfg->redis_wait_ms * 1000, pause_ms = 100;
    jr_redis_t *r;
    jr_redis_opts_t o;
    jr_config_redis_opts(cfg, &o);
    while (!(r = jr_redis_open(&o, err, sizeof err))) {
        int64_t left_ms = (until - jr_mono_us()) / 1000;
        if (left_ms <= 0) {
            fprintf(stderr, "jobrunner: %s%s\n", jr_cli_esc(err),
                    cfg->redis_wait_ms ? " (gave up after redis.wait)" : "");
            return NULL;
        }
        if (jr_sleep_interruptible(pause_ms < left_ms ? pause_ms : left_ms)) return NULL;
        pause_ms = pause_ms * 2 > 1000 ? 1000 : pause_ms * 2;
    }
    if (jr_redis_load_library(r) != 0) {
        fprintf(stderr, "jobrunner: %sloading the function library: %s\n", required ? "" : "note: ",
                jr_cli_esc(jr_redis_errstr(r)));
        if (required || !jr_redis_ok(r)) {
            jr_redis_free(r);
            return NULL;
        }
    }
    return r;
}

jr_client_t *jr_cli_client(const jr_config_t *cfg, int required) {
    jr_redis_t *r = jr_cli_connect(cfg, required);
    if (!r) return NULL;
    jr_client_t *c = jr_client_adopt(r);
    if (!c) {
        fprintf(stderr, "jobrunner: out of memory\n");
        jr_redis_free(r);
    }
    return c;
}
