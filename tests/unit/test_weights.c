/* Unit tests for the priority settings (issue 8 §3): `-q NAME:WEIGHT`
 * (jr_queue_weight_parse), worker.queues in the mapping form, worker.order,
 * and their error messages. */
#include <criterion/criterion.h>
#include <string.h>

#include "config.h"
#include "jr.h"

static jr_config_t cfg;
static char err[JR_ERRLEN];

static void setup(void) {
    cr_assert_eq(jr_config_init(&cfg), 0);
    err[0] = '\0';
}
static void teardown(void) { jr_config_free(&cfg); }

TestSuite(weights, .init = setup, .fini = teardown);

static int load(const char *yaml) { return jr_config_load_string(&cfg, yaml, strlen(yaml), "t.yaml", err, sizeof err); }

Test(weights, queue_flag_takes_an_optional_weight_after_the_last_colon) {
    char name[129], why[256];
    int64_t w;
    static const struct {
        const char *in, *name;
        int64_t weight;
    } good[] = {
        {"critical:6", "critical", 6},  {"plain", "plain", 1}, {"reports:daily", "reports:daily", 1},
        {"a:6:1", "a:6", 1},            {"x:1000", "x", 1000},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        cr_assert_eq(jr_queue_weight_parse(good[i].in, name, sizeof name, &w, why, sizeof why), 0, "%s: %s",
                     good[i].in, why);
        cr_expect_str_eq(name, good[i].name, "%s", good[i].in);
        cr_expect_eq(w, good[i].weight, "%s", good[i].in);
    }
    const char *bad[] = {"x:0", "x:1001", "x:99999999999999999999", ":5", "bad name:2", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = '\0';
        cr_expect_eq(jr_queue_weight_parse(bad[i], name, sizeof name, &w, why, sizeof why), JR_EINVAL, "%s", bad[i]);
        cr_expect(why[0], "no reason given for \"%s\"", bad[i]);
    }
    cr_expect(strstr((jr_queue_weight_parse("x:0", name, sizeof name, &w, why, sizeof why), why), "1 to 1000"), "%s", why);
}

Test(weights, yaml_mapping_items_carry_weights_and_plain_names_weigh_one) {
    cr_assert_eq(load("worker:\n  order: strict\n  queues:\n    - {name: critical, weight: 6}\n"
                      "    - default\n    - name: low\n      weight: 2\n"),
                 0, "%s", err);
    cr_assert_eq(cfg.worker_queues.n, 3);
    cr_expect_str_eq(cfg.worker_queues.v[0], "critical");
    cr_expect_str_eq(cfg.worker_queues.v[1], "default");
    cr_expect_str_eq(cfg.worker_queues.v[2], "low");
    cr_assert_not_null(cfg.worker_weights);
    cr_expect_eq(cfg.worker_weights[0], 6);
    cr_expect_eq(cfg.worker_weights[1], 1);
    cr_expect_eq(cfg.worker_weights[2], 2);
    cr_expect_eq(cfg.worker_order, JR_ORDER_STRICT);
    /* A later list without weights drops them. */
    cr_assert_eq(load("worker:\n  queues: [a, b]\n"), 0, "%s", err);
    cr_expect_null(cfg.worker_weights);
}

static void bad(const char *yaml, const char *frag) {
    cr_expect_eq(load(yaml), JR_EINVAL, "accepted:\n%s", yaml);
    cr_expect(strstr(err, frag), "message \"%s\" lacks \"%s\"", err, frag);
}

Test(weights, bad_items_are_named_with_line_and_key) {
    bad("worker:\n  queues:\n    - {name: a, weight: 0}\n", "t.yaml:3: worker.queues[0].weight: must be an integer from 1 to 1000");
    bad("worker:\n  queues:\n    - {name: a, weight: 1001}\n", "worker.queues[0].weight: must be an integer from 1 to 1000");
    bad("worker:\n  queues:\n    - {weight: 2}\n", "worker.queues[0]: a queue given as a mapping needs a name");
    bad("worker:\n  queues:\n    - {name: a, prio: 2}\n", "worker.queues[0].prio: unknown key");
    bad("worker:\n  queues:\n    - {name: a, name: b}\n", "worker.queues[0].name: duplicate key");
    bad("worker:\n  queues:\n    - {name: 'a b'}\n", "bad queue name \"a b\"");
    bad("worker:\n  queues:\n    - a\n    - {name: a, weight: 2}\n", "worker.queues[1]: queue \"a\" is listed twice");
    bad("worker:\n  queues:\n    - [a]\n", "worker.queues[0]: expected a queue name or {name: Q, weight: N}");
    bad("worker:\n  order: fifo\n", "worker.order: must be weighted or strict");
    bad("scheduler:\n  queues:\n    - {name: a}\n", "scheduler.queues[0]: expected a string");
}
