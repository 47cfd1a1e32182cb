/* Report once: see report.h. */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *key, *msg;
} seen_t;

static seen_t *seen;
static size_t nseen, capseen;

/* Entries are "<what>\n<field>=<name>": one per problem and thing. */
static seen_t *find(const char *what, const char *field, const char *name) {
    size_t wl = strlen(what), fl = strlen(field);
    for (size_t i = 0; i < nseen; i++) {
        const char *k = seen[i].key;
        if (!strncmp(k, what, wl) && k[wl] == '\n' && !strncmp(k + wl + 1, field, fl) && k[wl + 1 + fl] == '=' &&
            !strcmp(k + wl + 2 + fl, name))
            return &seen[i];
    }
    return NULL;
}

int jr_report_once(jr_log_level_t level, const char *what, const char *field, const char *name, const char *msg) {
    seen_t *s = find(what, field, name);
    if (s && !strcmp(s->msg, msg)) return 0;
    char *m = strdup(msg);
    if (s && m) {
        free(s->msg), s->msg = m;
    } else if (!s && m) {
        size_t kl = strlen(what) + strlen(field) + strlen(name) + 3;
        char *k = malloc(kl);
        if (k) snprintf(k, kl, "%s\n%s=%s", what, field, name);
        if (k && nseen == capseen) {
            size_t c = capseen ? capseen * 2 : 8;
            seen_t *v = realloc(seen, c * sizeof *v);
            if (v) seen = v, capseen = c;
        }
        if (k && nseen < capseen) seen[nseen++] = (seen_t){k, m};
        else free(k), free(m);
    } else {
        free(m);
    }
    jr_log_kv(level, what, field, name, "error", msg, NULL);
    return 1;
}

void jr_report_clear(const char *reported, const char *what, const char *field, const char *name) {
    seen_t *s = find(reported, field, name);
    if (!s) return;
    jr_log_kv(JR_LOG_INFO, what, field, name, NULL);
    free(s->key), free(s->msg);
    *s = seen[--nseen];
}
