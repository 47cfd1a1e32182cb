/* The command line's commands: the table main() is driven by (cli.c), the
 * run function of each command (grouped as the table groups them:
 * cli_procs.c, cli_jobs.c, cli_queues.c, cli_cron.c) and what those files
 * share (cli_out.c). Adding a command is adding a row to jr_cli_commands
 * and its run function. */
#ifndef JR_CLI_H
#define JR_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jobrunner/client.h>

#include "bulk.h"
#include "config.h"
#include "json.h"
#include "redis.h"

/* ---- the options ---------------------------------------------------------- */

/* Every option of every command, an index into jr_cli_options. */
typedef enum jr_cli_opt {
    JR_O_CONFIG, JR_O_REDIS, JR_O_QUEUE, JR_O_PLUGIN, JR_O_IN, JR_O_AT, JR_O_ID, JR_O_JSON, JR_O_MAX,
    JR_O_TIMEOUT, JR_O_ORDERS, JR_O_ALL, JR_O_BACKOFF, JR_O_METRICS, JR_O_CONCURRENCY, JR_O_LOG_LEVEL,
    JR_O_LOG_FORMAT, JR_O_WAIT, JR_O_STATE, JR_O_LIMIT, JR_O_AFTER, JR_O_ORDER, JR_O_CRON, JR_O_EVERY,
    JR_O_TZ, JR_O_MISSED, JR_O_DISABLED, JR_O_WATCH, JR_O_KEY, JR_O_PARTITIONS,
    JR_O_HANDLER, JR_O_MATCH, JR_O_YES, JR_O_WIDE, JR_O_ALL_QUEUES, /* wt-cli */
    JR_O_LISTEN,
    JR_O_HELP,
    JR_O_COUNT
} jr_cli_opt_t;

/* The bit of option o in a command's `options`. */
#define JR_OPT(o) (UINT64_C(1) << (o))
/* The options every command takes. */
#define JR_OPTS_COMMON (JR_OPT(JR_O_CONFIG) | JR_OPT(JR_O_REDIS) | JR_OPT(JR_O_WAIT) | JR_OPT(JR_O_HELP))

/* One option: its long name, its one-letter name (0: none), whether it
 * takes a value, and the configuration key it sets (NULL: none; the value
 * is then checked as the same value in the file would be, after the
 * environment). */
typedef struct jr_cli_option {
    const char *name;
    char letter;
    int has_value;
    const char *key;
} jr_cli_option_t;

extern const jr_cli_option_t jr_cli_options[JR_O_COUNT];

/* What the options said, before the configuration is assembled. */
typedef struct jr_cli_flags {
    char *redis;                  /* --redis, a copy: the argument itself is scrubbed (main.c) */
    const char *v[JR_O_COUNT];    /* the last value of each option given, "" for one without a
                                     value; NULL if not given, and for --redis (see redis) */
    jr_strlist_t queues, plugins; /* every -q and --plugin, in order */
} jr_cli_flags_t;

/* 1 if option o was given. */
static inline int jr_flag(const jr_cli_flags_t *f, jr_cli_opt_t o) { return f->v[o] != NULL; }

/* ---- the commands ----------------------------------------------------------- */

/* How main() treats a command (its `mode` bits). */
enum {
    JR_CMD_PERMUTE = 1,  /* options may follow operands (a subcommand comes first); without
                            it, options stop at the first operand (a payload may start with '-') */
    JR_CMD_OPERANDS = 2, /* takes operands; without it one is "unexpected argument" */
    JR_CMD_SIGNALS = 4,  /* a long-running process: SIGTERM/SIGINT mean "stop cleanly" from its
                            first moment, before its options and config are read */
    JR_CMD_BARE = 8      /* no options, no configuration: run at once (version) */
};

typedef struct jr_cli_cmd jr_cli_cmd_t;
/* Checks of a command's operands made before the configuration is read:
 * 0, or the exit status after saying what was wrong. */
typedef int jr_cli_check_t(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, int argc, char **argv);
/* Run a command: argv holds its argc operands, cfg the assembled
 * configuration (the command may still apply its own options to it; NULL,
 * as f, for a JR_CMD_BARE one). Returns the exit status: 0 ok, 1 failure
 * (said on stderr), 2 usage error. */
typedef int jr_cli_run_t(const jr_cli_cmd_t *cmd, const jr_cli_flags_t *f, jr_config_t *cfg, int argc, char **argv);

struct jr_cli_cmd {
    const char *name;
    const char *summary;   /* its line under "commands:" in `jobrunner --help` */
    const char *usage;     /* `jobrunner NAME --help`, followed by the common options (NULL: BARE) */
    uint64_t options;      /* the options it takes besides JR_OPTS_COMMON (JR_OPT bits) */
    unsigned mode;         /* JR_CMD_* */
    jr_cli_check_t *check; /* NULL: none */
    jr_cli_run_t *run;
    const char *role;      /* the role it reaches Redis as (jr_proc_set_role); NULL = "cli" */
};

/* Every command, in the order `jobrunner --help` lists them; the last row
 * has name NULL. */
extern const jr_cli_cmd_t jr_cli_commands[];
/* The text of `jobrunner --help` around the list of commands, and the
 * common options `jobrunner NAME --help` ends with. */
extern const char jr_cli_usage_head[], jr_cli_usage_tail[], jr_cli_usage_common[];

/* The row of command `name`, or NULL. */
const jr_cli_cmd_t *jr_cli_find(const char *name);
/* Print `jobrunner --help` on out. */
void jr_cli_usage(FILE *out);

/* The run and check functions of the rows, by the file that has them. */
/* cli_procs.c */
jr_cli_run_t jr_cli_worker, jr_cli_scheduler, jr_cli_dev, jr_cli_workers, jr_cli_functions, jr_cli_version;
jr_cli_check_t jr_cli_worker_check;
/* cli_jobs.c */
jr_cli_run_t jr_cli_enqueue, jr_cli_job, jr_cli_jobs, jr_cli_cancel;
/* cli_queues.c (jr_cli_pause runs pause and resume) */
jr_cli_run_t jr_cli_stats, jr_cli_dead, jr_cli_pause, jr_cli_queue;
jr_cli_check_t jr_cli_pause_check;
/* cli_cron.c */
jr_cli_run_t jr_cli_cron;
/* web.c */
jr_cli_run_t jr_cli_web;

/* ---- what the command files share (cli_out.c) ------------------------------- */

/* A usage error of command `cmd`: "jobrunner CMD: " fmt (with one string
 * argument), then the pointer to --help, on stderr. Returns 2. */
int jr_cli_die(const char *cmd, const char *fmt, const char *arg);
/* "jobrunner CMD: invalid WHAT "VALUE": why" (the value cut past 200
 * bytes, not the message), then the pointer to --help. Returns 2. */
int jr_cli_die2(const char *cmd, const char *what, const char *value, const char *why);
/* An argument as messages may show it: what could be a Redis URL (it holds
 * "://" or '@') redacted into buf; otherwise arg itself. */
const char *jr_cli_shown_arg(const char *arg, char *buf, size_t len);
/* A decimal integer of ASCII digits only, from min to max: 0 and *out, or -1. */
int jr_cli_parse_count(const char *s, int64_t min, int64_t max, int64_t *out);

/* Text read from Redis on a terminal: anyone who can reach Redis can have
 * written it, so the text outputs show printable ASCII as is and every
 * other byte and '\' as \xNN (no byte can move the cursor, end a table row
 * or hide what follows; the JSON outputs escape with jansson instead). */
/* Print n bytes of s so escaped. */
void jr_cli_print_bytes(FILE *out, const char *s, size_t n);

/* ---- tables ----------------------------------------------------------------
 * A table is padded to its widest cell or header in each column, columns
 * two spaces apart (one when two would not fit), and fits `limit` display
 * columns: the columns that may
 * shrink (text: names, handlers, errors) are shortened, widest first, down
 * to their header's width (at least 4), each shortened cell ending in the
 * ellipsis mark "…"; counts and times never shrink (a table of them alone
 * may stay wider). The limit: $COLUMNS when set to a number, else 80 on a
 * terminal, else none (output piped to a program is never cut); --wide
 * (limit 0) shows every cell whole. */
#define JR_TABLE_ELLIPSIS "\xe2\x80\xa6" /* U+2026, one display column */
typedef struct jr_table {
    size_t ncols, nrows, cap;
    const char *const *heads; /* ncols headers */
    const char *kinds;        /* per column: 'l' text that may shrink, 'L' text that may not (times),
                                 'r' right-aligned, never shrinks (counts) */
    char **cells;             /* nrows * ncols, escaped as jr_cli_print_bytes escapes */
    char **notes;             /* per row: a line printed under it, indented (NULL: none) */
} jr_table_t;
/* An empty table of strlen(kinds) columns (heads and kinds are kept, not copied). */
void jr_table_init(jr_table_t *t, const char *const *heads, const char *kinds);
/* Add a row of ncols cells (NULL: ""), each escaped; lens (NULL: strlen
 * of each) the length of each, as a value read from Redis may hold a NUL.
 * 0, or JR_ENOMEM. */
int jr_table_add(jr_table_t *t, const char *const *cells);
int jr_table_add_n(jr_table_t *t, const char *const *cells, const size_t *lens);
/* Give the last row a line under it: "    " and text, escaped, cut to the
 * limit like a cell. 0, or JR_ENOMEM. */
int jr_table_note(jr_table_t *t, const char *text);
/* Print the header and the rows within limit columns (0: no limit). */
void jr_table_print(const jr_table_t *t, FILE *out, size_t limit);
void jr_table_free(jr_table_t *t);
/* The width limit of a table on out, as said above (wide: 0). */
size_t jr_table_limit(FILE *out, int wide);
/* The widths of n columns of natural widths nat[], the minimum widths
 * min[] (min[i] == nat[i]: never shrinks), so that they fit limit (0: no
 * limit) as far as the minima allow: two columns between them, or one if
 * two would not fit whole; then the widest shrinkable column loses a
 * column at a time. Into w[]; returns the columns between them. Pure. */
size_t jr_table_fit(const size_t *nat, const size_t *min, size_t n, size_t limit, size_t *w);
/* s (ASCII, len bytes) cut to width columns: s itself when it fits, else
 * its first width - 1 bytes and the ellipsis mark, into buf (width + 3
 * bytes). Returns buf or s. Pure. */
const char *jr_table_cut(const char *s, size_t width, char *buf);

/* s escaped for a printf argument: one of 4 static buffers in turn, so up
 * to 4 can appear in one call; cut with "..." past about 2 KiB (4 *
 * JR_ERRLEN). */
const char *jr_cli_esc(const char *s);

/* Name on stderr each of the n queues nothing ever used (cli_queues.c):
 * an error, or with fatal = 0 a warning. Returns how many (0 when Redis
 * cannot tell). */
int jr_cli_unknown_queues(jr_redis_t *r, const char *cmd, const char *const *queues, size_t n, int fatal);

/* A list of registered queues (jr_redis_queues) with each partitioned
 * queue once, as Q, for its partitions Q#J (cli_queues.c). 0 or JR_ENOMEM. */
int jr_cli_queue_rows(jr_strlist_t *l);

/* A bulk over a filter (bulk.h) asks first. `what` says what it will do
 * ("retry every dead job of queue Q with handler H"). With yes (--yes),
 * 0 at once; on a terminal (stdin), the question on stderr and 0 for an
 * answer starting with y or Y, else 1 after "nothing changed"; when stdin
 * is not a terminal, 2 after saying that --yes is needed. */
int jr_cli_confirm(const char *cmd, int yes, const char *what);
/* The filter of --handler and --match (f's values, kept). 1 if either was
 * given, else 0 (*out then passes every job). */
int jr_cli_filter(const jr_cli_flags_t *f, jr_filter_t *out);
/* What a filter chose, for messages: " with handler H" and/or " whose
 * payload contains "T"", escaped, into buf (len bytes); "" for none. */
const char *jr_cli_filter_text(const jr_filter_t *flt, char *buf, size_t len);

/* The value of field `name` of a stream entry, or NULL (its length in *len
 * when len is not NULL). */
const char *jr_cli_field(const jr_entry_t *e, const char *name, size_t *len);

/* How a command ends. Its output may go to a pipe whose reader is gone and
 * its connection to a Redis that went away: either ends the command with a
 * message and exit status 1, never a silent death by SIGPIPE. So a command
 * ignores SIGPIPE from its first connection on (the CLI is one thread and
 * starts no program: jr_cli_ignore_sigpipe), and ends with jr_cli_done:
 * status, or 1 (status if non-zero) with a message when out could not be
 * written. */
void jr_cli_ignore_sigpipe(void);
int jr_cli_done(FILE *out, int status);
/* Print a finished JSON document on out and release it: 0, or 1 with the
 * message "cannot write the JSON output" (also for NULL, a document that
 * could not be built). */
int jr_cli_json_out(FILE *out, json_t *doc);
/* Out of memory while building the JSON document *doc: drop it, say so,
 * return 1. */
int jr_cli_json_oom(json_t **doc);

/* Connect for a one-shot command, waiting up to redis.wait for a Redis that
 * cannot be reached yet, and load the function library. When the load
 * fails (e.g. on an out-of-memory Redis, which may hold the library
 * already), a command that only reads or deletes (`required` = 0) goes on
 * after a note, unless the connection itself broke; a later failure then
 * shows Redis's own error. NULL after printing why on stderr. */
jr_redis_t *jr_cli_connect(const jr_config_t *cfg, int required);
/* jr_cli_connect wrapped in a client of the client library, for the
 * commands the library has a call for (enqueue, cancel, job show, stats,
 * pause, resume). NULL after printing why on stderr. */
jr_client_t *jr_cli_client(const jr_config_t *cfg, int required);

#endif
