/* The ACL line of each role in docs/operations.md ("ACL users per role")
 * grants every command that the library functions the role calls can run,
 * on every path (garbage repaired, records trimmed, moved runs forgotten):
 * Redis checks a user's ACL for the commands a function runs, so a command
 * missing from a role's line fails that role's calls the first time that
 * path is taken (revision 22's moved_trim ran XRANGE and HDEL for the
 * scheduler, whose line had neither; the worker's keep_finished trim ran
 * XLEN; the consumer pruning of workers and schedulers XGROUP DELCONSUMER).
 * tests/integration/test_acl.c runs each role with its user; this test
 * covers the paths a run does not reach, statically: it reads the embedded
 * library (jr_lua_library), finds each named function's body, the commands
 * it runs (redis.call / redis.pcall / l_call with a literal name, the
 * subcommand of a container command) and the named functions it refers to,
 * and checks the closure of each registered function against the role's
 * line. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

extern const char jr_lua_library[];
extern const size_t jr_lua_library_len;

enum { TOK_NAME, TOK_STRING, TOK_PUNCT };
typedef struct {
    int kind;
    char text[64]; /* a longer name or string is cut: no command or function name is that long */
} tok_t;

typedef struct {
    char name[64];
    char cmds[64][48];
    size_t ncmds;
    char refs[128][64];
    size_t nrefs;
} fn_t;

static tok_t *toks;
static size_t ntoks, captoks;
static fn_t *fns;
static size_t nfns;

static void push(int kind, const char *s, size_t n) {
    if (ntoks == captoks) {
        captoks = captoks ? 2 * captoks : 4096;
        toks = realloc(toks, captoks * sizeof *toks);
        cr_assert(toks);
    }
    toks[ntoks].kind = kind;
    snprintf(toks[ntoks].text, sizeof toks[ntoks].text, "%.*s", (int)(n < 63 ? n : 63), s);
    ntoks++;
}

/* Lua's long bracket at s ("[[", "[=[", ...): its level, or -1. */
static int long_bracket(const char *s, const char *end) {
    if (s >= end || *s != '[') return -1;
    int level = 0;
    const char *p = s + 1;
    while (p < end && *p == '=') level++, p++;
    return p < end && *p == '[' ? level : -1;
}

/* Past the long bracket's close "]=*]" of that level, from s. */
static const char *past_long(const char *s, const char *end, int level) {
    for (const char *p = s; p < end; p++) {
        if (*p != ']') continue;
        const char *q = p + 1;
        int l = 0;
        while (q < end && *q == '=') l++, q++;
        if (l == level && q < end && *q == ']') return q + 1;
    }
    return end;
}

/* Tokens of the Lua text: names, strings (their contents), one-character
 * punctuation; comments and numbers dropped. */
static void tokenize(const char *s, const char *end) {
    while (s < end) {
        if (s + 1 < end && s[0] == '-' && s[1] == '-') {
            int level = long_bracket(s + 2, end);
            if (level >= 0) {
                s = past_long(s + 2, end, level);
            } else {
                while (s < end && *s != '\n') s++;
            }
        } else if (*s == '\'' || *s == '"') {
            char q = *s++;
            const char *b = s;
            while (s < end && *s != q) s += (*s == '\\' && s + 1 < end) ? 2 : 1;
            push(TOK_STRING, b, (size_t)(s - b));
            s++;
        } else if (long_bracket(s, end) >= 0) {
            int level = long_bracket(s, end);
            const char *b = s + level + 2, *e = past_long(b, end, level);
            push(TOK_STRING, b, (size_t)(e - b));
            s = e;
        } else if (isalpha((unsigned char)*s) || *s == '_') {
            const char *b = s;
            while (s < end && (isalnum((unsigned char)*s) || *s == '_')) s++;
            push(TOK_NAME, b, (size_t)(s - b));
        } else if (isdigit((unsigned char)*s)) {
            while (s < end && (isalnum((unsigned char)*s) || *s == '.' || *s == '_')) s++;
        } else if (isspace((unsigned char)*s)) {
            s++;
        } else {
            push(TOK_PUNCT, s, 1);
            s++;
        }
    }
}

static int is(size_t i, int kind, const char *text) {
    return i < ntoks && toks[i].kind == kind && (!text || !strcmp(toks[i].text, text));
}

static fn_t *fn_named(const char *name) {
    for (size_t i = 0; i < nfns; i++)
        if (!strcmp(fns[i].name, name)) return &fns[i];
    return NULL;
}

static void add_unique(char (*v)[48], size_t *n, size_t max, const char *s) {
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(v[i], s)) return;
    cr_assert(*n < max, "more than %zu commands in one function: raise the test's table", max);
    snprintf(v[(*n)++], 48, "%s", s);
}

/* The named functions and what each body holds. A block opens at function,
 * if, do, repeat and closes at end, until; a function's body is its block.
 * A named function is "local function N", "function N" or "N = function"
 * ("local N = function"); an anonymous one belongs to the function around
 * it. Commands and references inside a named function nested in another
 * count for the inner one only (the outer refers to it by name). */
static void scan(void) {
    struct {
        size_t f; /* index in fns (which a realloc moves) */
        int depth;
    } stack[64];
    int sp = 0, depth = 0;
    for (size_t i = 0; i < ntoks; i++) {
        const tok_t *t = &toks[i];
        if (t->kind == TOK_NAME && !strcmp(t->text, "function")) {
            const char *name = NULL;
            if (is(i + 1, TOK_NAME, NULL) && !is(i + 2, TOK_PUNCT, ".")) name = toks[i + 1].text;
            else if (i >= 2 && is(i - 1, TOK_PUNCT, "=") && is(i - 2, TOK_NAME, NULL) && !(i >= 3 && is(i - 3, TOK_PUNCT, ".")))
                name = toks[i - 2].text;
            depth++;
            if (name) {
                fn_t *f = fn_named(name); /* a name defined twice (two do-blocks): one node, both bodies */
                if (!f) {
                    fns = realloc(fns, (nfns + 1) * sizeof *fns);
                    cr_assert(fns);
                    f = &fns[nfns++];
                    memset(f, 0, sizeof *f);
                    snprintf(f->name, sizeof f->name, "%s", name);
                }
                cr_assert(sp < 64);
                stack[sp].f = (size_t)(f - fns), stack[sp].depth = depth, sp++;
            }
            continue;
        }
        if (t->kind == TOK_NAME && (!strcmp(t->text, "if") || !strcmp(t->text, "do") || !strcmp(t->text, "repeat"))) {
            depth++;
            continue;
        }
        if (t->kind == TOK_NAME && (!strcmp(t->text, "end") || !strcmp(t->text, "until"))) {
            if (sp > 0 && stack[sp - 1].depth == depth) sp--;
            depth--;
            continue;
        }
        if (sp == 0) continue;
        fn_t *f = &fns[stack[sp - 1].f];
        /* redis.call, redis.pcall, and l_call (the library's local for redis.call) */
        int caller = t->kind == TOK_NAME && (((!strcmp(t->text, "call") || !strcmp(t->text, "pcall")) && i >= 2 &&
                                              is(i - 1, TOK_PUNCT, ".") && is(i - 2, TOK_NAME, "redis")) ||
                                             !strcmp(t->text, "l_call"));
        if (caller && is(i + 1, TOK_PUNCT, "(") && is(i + 2, TOK_STRING, NULL)) {
            char cmd[160];
            snprintf(cmd, sizeof cmd, "%s", toks[i + 2].text);
            static const char *containers[] = {"XINFO", "XGROUP", "CLIENT", "FUNCTION", "OBJECT", "MEMORY", "CONFIG"};
            for (size_t c = 0; c < sizeof containers / sizeof *containers; c++)
                if (!strcmp(cmd, containers[c]) && is(i + 3, TOK_PUNCT, ",") && is(i + 4, TOK_STRING, NULL))
                    snprintf(cmd, sizeof cmd, "%s|%s", containers[c], toks[i + 4].text);
            cr_assert(strlen(cmd) < 48, "command name %s longer than the test's table takes", cmd);
            for (char *c = cmd; *c; c++) *c = (char)tolower((unsigned char)*c);
            add_unique(f->cmds, &f->ncmds, 64, cmd);
        } else if (t->kind == TOK_NAME && !(i > 0 && is(i - 1, TOK_PUNCT, ".")) && strcmp(t->text, f->name)) {
            size_t k;
            for (k = 0; k < f->nrefs && strcmp(f->refs[k], t->text); k++) continue;
            if (k == f->nrefs && f->nrefs < 128) snprintf(f->refs[f->nrefs++], 64, "%s", t->text);
            cr_assert(f->nrefs < 128, "%s refers to more than 127 names: raise the test's table", f->name);
        }
    }
    cr_assert_eq(depth, 0, "the test's block count of the library ends at %d, not 0: a keyword it does not know", depth);
}

/* Every command function `start` can run (its closure over references),
 * added to cmds; the chain that reaches each is in via (one per command). */
static void closure(const fn_t *f, char (*cmds)[48], char (*via)[256], size_t *n, char seen[][64], size_t *nseen,
                    const char *path) {
    for (size_t i = 0; i < *nseen; i++)
        if (!strcmp(seen[i], f->name)) return;
    cr_assert(*nseen < 512);
    snprintf(seen[(*nseen)++], 64, "%s", f->name);
    char here[256];
    snprintf(here, sizeof here, "%s%s%s", path, path[0] ? " > " : "", f->name);
    for (size_t i = 0; i < f->ncmds; i++) {
        size_t k;
        for (k = 0; k < *n && strcmp(cmds[k], f->cmds[i]); k++) continue;
        if (k == *n) {
            cr_assert(*n < 256);
            snprintf(cmds[*n], 48, "%s", f->cmds[i]);
            snprintf(via[(*n)++], 256, "%s", here);
        }
    }
    for (size_t i = 0; i < f->nrefs; i++) {
        const fn_t *g = fn_named(f->refs[i]);
        if (g) closure(g, cmds, via, n, seen, nseen, here);
    }
}

/* The implementation of registered function `name` (the registration
 * list's {'name', impl, ...} row). */
static const fn_t *registered(const char *name) {
    for (size_t i = 0; i + 3 < ntoks; i++)
        if (is(i, TOK_PUNCT, "{") && is(i + 1, TOK_STRING, name) && is(i + 2, TOK_PUNCT, ",") &&
            is(i + 3, TOK_NAME, NULL)) {
            const fn_t *f = fn_named(toks[i + 3].text);
            cr_assert(f, "%s is registered as %s, which the test found no body of", name, toks[i + 3].text);
            return f;
        }
    cr_assert(0, "the library registers no function %s", name);
    return NULL;
}

static char *doc;

static void setup(void) {
    tokenize(jr_lua_library, jr_lua_library + jr_lua_library_len);
    scan();
    doc = jrt_slurp(JRT_SOURCE_DIR "/docs/operations.md");
}

static void teardown(void) {
    free(toks), free(fns), free(doc);
    toks = NULL, fns = NULL, ntoks = nfns = captoks = 0;
}

/* Whether the words hold +cmd, or +container for "container|sub". */
static int granted(const char *words, const char *cmd) {
    char w[64];
    snprintf(w, sizeof w, " +%s ", cmd);
    if (strstr(words, w)) return 1;
    const char *bar = strchr(cmd, '|');
    if (!bar) return 0;
    snprintf(w, sizeof w, " +%.*s ", (int)(bar - cmd), cmd);
    return strstr(words, w) != NULL;
}

/* " <words of the role's line> <extra> " */
static void role_words(const char *user, const char *extra, char *out, size_t len) {
    size_t n;
    const char *p = jrt_doc_acl(doc, user, &n);
    cr_assert(n + strlen(extra) + 4 < len);
    snprintf(out, len, " %.*s %s ", (int)n, p, extra);
    for (char *c = out; *c; c++)
        if (*c == '\n') *c = ' ';
}

/* Every command the functions (space-separated) can run is granted by the
 * role's line plus extra; the test names each one that is not, with the
 * chain of functions that runs it. */
static void check_role(const char *user, const char *functions, const char *extra) {
    char words[8192];
    role_words(user, extra, words, sizeof words);
    char missing[4096] = "";
    char list[512];
    snprintf(list, sizeof list, "%s", functions);
    for (char *save = NULL, *name = strtok_r(list, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
        static char cmds[256][48], via[256][256], seen[512][64];
        size_t n = 0, nseen = 0;
        closure(registered(name), cmds, via, &n, seen, &nseen, "");
        for (size_t i = 0; i < n; i++)
            if (!granted(words, cmds[i])) {
                size_t used = strlen(missing);
                snprintf(missing + used, sizeof missing - used, "\n  +%s, run by %s (%s)", cmds[i], name, via[i]);
            }
    }
    cr_expect_str_empty(missing, "docs/operations.md's line for %s lacks:%s", user, missing);
}

TestSuite(acl_lists, .init = setup, .fini = teardown);

/* The scan itself: it finds commands it must (a function that runs XACK
 * through a helper, a subcommand) and refuses a command not granted. */
Test(acl_lists, the_scan_finds_commands_run_through_helpers) {
    static char cmds[256][48], via[256][256], seen[512][64];
    size_t n = 0, nseen = 0;
    closure(registered("jr_handback"), cmds, via, &n, seen, &nseen, "");
    int xack = 0;
    for (size_t i = 0; i < n; i++) xack |= !strcmp(cmds[i], "xack");
    cr_expect(xack, "jr_handback's closure has no xack (it acknowledges through ack_delete)");
    n = 0, nseen = 0;
    closure(registered("jr_prune_consumers"), cmds, via, &n, seen, &nseen, "");
    int sub = 0;
    for (size_t i = 0; i < n; i++) sub |= !strcmp(cmds[i], "xinfo|consumers");
    cr_expect(sub, "jr_prune_consumers' closure has no xinfo|consumers");
    cr_expect(!granted(" +xadd +xinfo|stream ", "xinfo|consumers"));
    n = 0, nseen = 0;
    closure(registered("jr_promote"), cmds, via, &n, seen, &nseen, "");
    cr_expect_gt(n, 10, "jr_promote's closure has %zu commands: the scan is broken", n);
    cr_expect(granted(" +xadd +xinfo ", "xinfo|consumers"));
}

/* The functions each role calls (runner/src: redis_worker.c, presence.c;
 * redis_sched.c (a scheduler prunes no consumers: presence.c is called so
 * by the worker only); redis_produce.c, client.c; and the CLI's every
 * command). */
Test(acl_lists, the_worker_line_grants_what_its_functions_run) {
    check_role("jr-worker", "jr_ack jr_ack_follow jr_fail jr_handback jr_heartbeat jr_reclaim jr_register "
                            "jr_prune_consumers jr_procs_forget",
               "");
}

Test(acl_lists, the_scheduler_line_grants_what_its_functions_run) {
    check_role("jr-scheduler", "jr_promote jr_promote_due jr_cron_fired jr_queues jr_register jr_procs_forget", "");
}

Test(acl_lists, the_producer_line_grants_what_its_functions_run) {
    check_role("jr-producer", "jr_enqueue jr_enqueue_many jr_ready_prepare jr_cancel jr_locate jr_register", "");
}

Test(acl_lists, the_cli_line_grants_what_its_functions_run) {
    check_role("jr-cli",
               "jr_enqueue jr_enqueue_many jr_ready_prepare jr_register jr_queues jr_locate jr_cancel "
               "jr_run_now jr_delete jr_delayed_page jr_dead_retry jr_procs_forget "
               "jr_queue_remove jr_wait jr_partitions_set jr_cron_set jr_cron_del jr_cron_list",
               "");
}

/* A worker or scheduler with a queues section sets the partition counts
 * itself: its line plus the words the doc says to add. */
Test(acl_lists, a_process_setting_partitions_has_what_the_doc_says_to_add) {
    const char *p = strstr(doc, "sets the counts itself at start");
    cr_assert(p, "docs/operations.md no longer says what a process setting partition counts needs");
    const char *a = strstr(p, "add `"), *e = a ? strchr(a + 5, '`') : NULL;
    cr_assert(a && e, "docs/operations.md: no `+...` words after \"sets the counts itself at start\"");
    char extra[256];
    snprintf(extra, sizeof extra, "%.*s", (int)(e - a - 5), a + 5);
    check_role("jr-worker", "jr_partitions_set", extra);
    check_role("jr-scheduler", "jr_partitions_set", extra);
}
