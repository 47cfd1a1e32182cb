/* jobrunner: the command line. Finds the command's row in the command
 * table (cli.c), parses the options the row takes, assembles the
 * configuration (defaults < YAML file < environment < flags) and runs the
 * row's function. Nothing here names a command but "--version", the
 * alias of version. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "contract.h"
#include "jr.h"
#include "log.h"
#include "proc.h"
#include "redis.h"
#include "util.h"

/* Overwrite a --redis argument in place with the URL as logs show it
 * (jr_redis_url_redact: no password), cut to the argument's length and
 * padded with NULs. /proc/PID/cmdline, and so ps, reads these bytes: after
 * this the password is not in the argv of this process nor of the runner
 * processes it forks (a copy of this memory), though it was for the
 * moments before. */
static void scrub_url_arg(char *arg) {
    char shown[JR_ERRLEN];
    size_t n = strlen(arg);
    jr_redis_url_redact(arg, shown, sizeof shown);
    size_t m = strlen(shown) < n ? strlen(shown) : n;
    memcpy(arg, shown, m);
    memset(arg + m, 0, n - m);
}

/* An option's value for getopt_long: its letter, or OPT_BASE + its index. */
#define OPT_BASE 1000

/* jr_cli_options as getopt_long takes them: the long options into `opts`
 * (JR_O_COUNT + 1 of them) and the letters into `letters` (room for
 * 2 * JR_O_COUNT + 2 bytes), which start with '+' unless options may
 * follow operands. */
static void getopt_tables(struct option *opts, char *letters, int permute) {
    size_t k = 0;
    if (!permute) letters[k++] = '+';
    for (int i = 0; i < JR_O_COUNT; i++) {
        const jr_cli_option_t *o = &jr_cli_options[i];
        opts[i] = (struct option){o->name, o->has_value ? required_argument : no_argument, 0,
                                  o->letter ? o->letter : OPT_BASE + i};
        if (o->letter) {
            letters[k++] = o->letter;
            if (o->has_value) letters[k++] = ':';
        }
    }
    opts[JR_O_COUNT] = (struct option){0, 0, 0, 0};
    letters[k] = '\0';
}

/* The index in jr_cli_options of what getopt_long returned, or -1. */
static int opt_index(int val) {
    if (val >= OPT_BASE && val < OPT_BASE + JR_O_COUNT) return val - OPT_BASE;
    for (int i = 0; i < JR_O_COUNT; i++)
        if (jr_cli_options[i].letter && jr_cli_options[i].letter == val) return i;
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        jr_cli_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const jr_cli_cmd_t *cmd = jr_cli_find(!strcmp(argv[1], "--version") ? "version" : argv[1]);
    if (!cmd) {
        fprintf(stderr, "jobrunner: unknown command \"%s\"\n\n", argv[1]);
        jr_cli_usage(stderr);
        return 2;
    }
    if (cmd->mode & JR_CMD_BARE) return cmd->run(cmd, NULL, NULL, argc - 2, argv + 2);
    /* A long-running process takes SIGTERM/SIGINT as "stop cleanly" from its
     * first moment (a stop sent while it reads its config or plugins is seen
     * by its loop, which then exits 0), not only once its loop starts. */
    if (cmd->mode & JR_CMD_SIGNALS) jr_signals_install();
    /* its title in ps (worker, runner, scheduler): the environment moves to
     * the heap now, before anything keeps a pointer into it */
    if (cmd->mode & JR_CMD_SIGNALS) jr_proc_title_init(argc, argv);
    const char *name = cmd->name;

    jr_cli_flags_t f = {0};
    struct option opts[JR_O_COUNT + 1];
    char letters[2 * JR_O_COUNT + 2];
    getopt_tables(opts, letters, cmd->mode & JR_CMD_PERMUTE);
    int opt, status = 2;
    optind = 2;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, letters, opts, NULL)) != -1) {
        int i = opt == '?' ? -1 : opt_index(opt);
        if (i < 0 || !((cmd->options | JR_OPTS_COMMON) & JR_OPT(i))) {
            char shown[64];
            snprintf(shown, sizeof shown, "%.*s", (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
            if (i >= 0) snprintf(shown, sizeof shown, "--%s", jr_cli_options[i].name);
            status = jr_cli_die(name, "unknown or misplaced option \"%s\"", shown);
            goto out;
        }
        if (i == JR_O_HELP) {
            printf("%s\noptions common to every command:\n%s", cmd->usage, jr_cli_usage_common);
            status = 0;
            goto out;
        }
        /* One value each (but the lists -q and --plugin): a second would
         * silently win over the first, and for --match or --handler widen a
         * bulk action. An empty filter or key would mean "any": refused. */
        if (jr_cli_options[i].has_value && i != JR_O_QUEUE && i != JR_O_PLUGIN &&
            (i == JR_O_REDIS ? f.redis != NULL : f.v[i] != NULL)) {
            status = jr_cli_die(name, "option --%s given twice (it takes one value)", jr_cli_options[i].name);
            goto out;
        }
        if ((i == JR_O_HANDLER || i == JR_O_MATCH || i == JR_O_KEY) && (!optarg || !optarg[0])) {
            status = jr_cli_die(name, "option --%s needs a value that is not empty", jr_cli_options[i].name);
            goto out;
        }
        if (i != JR_O_REDIS) f.v[i] = optarg ? optarg : "";
        if (i == JR_O_REDIS) { /* kept as a copy: the argument itself is scrubbed */
            free(f.redis);
            if (!(f.redis = strdup(optarg))) goto out_of_memory_early;
            scrub_url_arg(optarg);
        } else if ((i == JR_O_QUEUE || i == JR_O_PLUGIN) &&
                   jr_strlist_push(i == JR_O_QUEUE ? &f.queues : &f.plugins, optarg)) {
            goto out_of_memory_early;
        }
    }
    for (size_t i = 0; i < f.queues.n; i++) {
        const char *q = f.queues.v[i], *rule = jr_contract_queue_name(q, strlen(q));
        if (rule) {
            status = jr_cli_die2(name, "queue name", q, rule);
            goto out;
        }
    }
    if (cmd->check && (status = cmd->check(cmd, &f, argc - optind, argv + optind)) != 0) goto out;
    if (!(cmd->mode & JR_CMD_OPERANDS) && optind < argc) {
        char shown[JR_ERRLEN];
        status = jr_cli_die(name, "unexpected argument \"%s\"", jr_cli_shown_arg(argv[optind], shown, sizeof shown));
        goto out;
    }

    jr_config_t cfg;
    char err[JR_ERRLEN];
    if (jr_config_init(&cfg) != 0) goto out_of_memory;
    if (!f.v[JR_O_CONFIG] && getenv(JR_CONFIG_ENV_FILE) && *getenv(JR_CONFIG_ENV_FILE))
        f.v[JR_O_CONFIG] = getenv(JR_CONFIG_ENV_FILE);
    if (f.v[JR_O_CONFIG] && jr_config_load_file(&cfg, f.v[JR_O_CONFIG], err, sizeof err) != 0) {
        fprintf(stderr, "jobrunner: %s\n", err);
        status = 2;
        goto out_cfg;
    }
    if ((status = jr_config_apply_env(&cfg, environ, stderr, err, sizeof err)) != 0) {
        fprintf(stderr, "jobrunner: %s\n", err);
        status = status == JR_ENOMEM ? 1 : 2;
        goto out_cfg;
    }
    /* The options that set a configuration key, each value checked as the
     * same value in the file would be. */
    for (int i = 0; i < JR_O_COUNT; i++) {
        const char *v = f.v[i], *key = jr_cli_options[i].key;
        if (!v || !key) continue;
        int rc = jr_config_set(&cfg, key, v, err, sizeof err);
        if (rc == JR_ENOMEM) goto out_of_memory;
        if (rc) {
            char flag[64];
            snprintf(flag, sizeof flag, "--%s", jr_cli_options[i].name);
            status = jr_cli_die2(name, flag, v, err);
            goto out_cfg;
        }
    }
    if (f.redis) {
        jr_redis_url_t u;
        if (jr_redis_url_parse(f.redis, &u, err, sizeof err) != 0) {
            status = jr_cli_die(name, "--redis: %s", err);
            goto out_cfg;
        }
        jr_redis_url_free(&u);
        free(cfg.redis_url);
        cfg.redis_url = strdup(f.redis);
        if (!cfg.redis_url) goto out_of_memory; /* never fall back to the default URL */
    }
    jr_log_setup(cfg.log_format, cfg.log_level, name);
    jr_proc_set_role(cmd->role ? cmd->role : "cli");
    jr_redis_on_failover(jr_log_failover);
    status = cmd->run(cmd, &f, &cfg, argc - optind, argv + optind);
    goto out_cfg;
out_of_memory:
    fprintf(stderr, "jobrunner %s: %s\n", name, jr_strerror(JR_ENOMEM));
    status = 1;
out_cfg:
    jr_config_free(&cfg);
    goto out;
out_of_memory_early:
    fprintf(stderr, "jobrunner %s: %s\n", name, jr_strerror(JR_ENOMEM));
    status = 1;
out:
    free(f.redis);
    jr_strlist_free(&f.queues);
    jr_strlist_free(&f.plugins);
    return status;
}
