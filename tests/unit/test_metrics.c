/* The metric registry, its Prometheus text encoding, and listen addresses. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jr.h"
#include "metrics.h"

static const double bounds[] = {0.1, 1};
static const jr_mfamily_t fams[] = {
    {"t_jobs_total", "Jobs.\nSecond line with a \\ backslash.", JR_MT_COUNTER, 2, {"queue", "outcome"}, NULL, 0},
    {"t_running", "Running.", JR_MT_GAUGE, 0, {0}, NULL, 0},
    {"t_seconds", "Durations.", JR_MT_HISTOGRAM, 1, {"queue"}, bounds, 2},
    {"t_empty_total", "Never updated.", JR_MT_COUNTER, 1, {"queue"}, NULL, 0},
};

Test(metrics, encodes_every_type_with_help_type_and_cumulative_buckets) {
    jr_mreg_t *m = jr_mreg_new(fams, 4);
    const char *a[] = {"q1", "ok"}, *b[] = {"q1", "dead"}, *q1[] = {"q1"}, *q2[] = {"q2"};
    cr_assert_eq(jr_mreg_update(m, 0, a, 1), 0);
    cr_assert_eq(jr_mreg_update(m, 0, a, 2), 0);
    cr_assert_eq(jr_mreg_update(m, 0, b, 1), 0);
    cr_assert_eq(jr_mreg_update(m, 1, NULL, 7), 0);
    cr_assert_eq(jr_mreg_update(m, 1, NULL, 3), 0); /* a gauge is set, not added */
    cr_assert_eq(jr_mreg_update(m, 2, q1, 0.05), 0);
    cr_assert_eq(jr_mreg_update(m, 2, q1, 0.1), 0);  /* le is inclusive */
    cr_assert_eq(jr_mreg_update(m, 2, q1, 0.5), 0);
    cr_assert_eq(jr_mreg_update(m, 2, q1, 20), 0);
    cr_assert_eq(jr_mreg_update(m, 2, q2, 1), 0);
    cr_assert_eq(jr_mreg_update(m, 0, a, -1), JR_EINVAL, "a counter never goes down");
    cr_assert_eq(jr_mreg_update(m, 9, a, 1), JR_EINVAL);
    size_t len;
    char *text = jr_mreg_encode(m, &len);
    const char *want =
        "# HELP t_jobs_total Jobs.\\nSecond line with a \\\\ backslash.\n"
        "# TYPE t_jobs_total counter\n"
        "t_jobs_total{queue=\"q1\",outcome=\"ok\"} 3\n"
        "t_jobs_total{queue=\"q1\",outcome=\"dead\"} 1\n"
        "# HELP t_running Running.\n"
        "# TYPE t_running gauge\n"
        "t_running 3\n"
        "# HELP t_seconds Durations.\n"
        "# TYPE t_seconds histogram\n"
        "t_seconds_bucket{queue=\"q1\",le=\"0.1\"} 2\n"
        "t_seconds_bucket{queue=\"q1\",le=\"1\"} 3\n"
        "t_seconds_bucket{queue=\"q1\",le=\"+Inf\"} 4\n"
        "t_seconds_sum{queue=\"q1\"} 20.65\n"
        "t_seconds_count{queue=\"q1\"} 4\n"
        "t_seconds_bucket{queue=\"q2\",le=\"0.1\"} 0\n"
        "t_seconds_bucket{queue=\"q2\",le=\"1\"} 1\n"
        "t_seconds_bucket{queue=\"q2\",le=\"+Inf\"} 1\n"
        "t_seconds_sum{queue=\"q2\"} 1\n"
        "t_seconds_count{queue=\"q2\"} 1\n"
        "# HELP t_empty_total Never updated.\n"
        "# TYPE t_empty_total counter\n";
    cr_expect_str_eq(text, want);
    cr_expect_eq(len, strlen(want));
    free(text);
    jr_mreg_free(m);
}

/* Label values: backslash, double quote and newline escaped; everything
 * else (UTF-8 included) as is. */
Test(metrics, escapes_label_values) {
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"a\"b", "a\\\"b"},
        {"a\\b", "a\\\\b"},
        {"a\nb", "a\\nb"},
        {"\\\"\n", "\\\\\\\"\\n"},
        {"caf\xc3\xa9 \xe2\x98\x95", "caf\xc3\xa9 \xe2\x98\x95"},
        {"", ""},
        {"{x=\"1\"} 2", "{x=\\\"1\\\"} 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jr_mreg_t *m = jr_mreg_new(fams + 1, 3); /* t_running, t_seconds, t_empty_total */
        const char *l[] = {cases[i].in};
        cr_assert_eq(jr_mreg_update(m, 2, l, 1), 0);
        size_t len;
        char *text = jr_mreg_encode(m, &len);
        char want[256];
        snprintf(want, sizeof want, "t_empty_total{queue=\"%s\"} 1\n", cases[i].out);
        cr_expect(strstr(text, want), "case %zu: want %s in:\n%s", i, want, text);
        free(text);
        jr_mreg_free(m);
    }
}

Test(metrics, non_integer_values_keep_full_precision) {
    jr_mreg_t *m = jr_mreg_new(fams + 1, 1);
    double x = 0.1 + 0.2; /* not 0.3: needs 17 digits */
    cr_assert_eq(jr_mreg_update(m, 0, NULL, x), 0);
    size_t len;
    char *text = jr_mreg_encode(m, &len);
    char *v = strstr(text, "\nt_running ");
    cr_assert(v, "%s", text);
    cr_expect_eq(strtod(v + 11, NULL), x, "%s", text);
    free(text);
    jr_mreg_free(m);
}

Test(metrics, parses_listen_addresses) {
    static const struct {
        const char *in, *host;
        int port;
    } good[] = {
        {"127.0.0.1:9464", "127.0.0.1", 9464},
        {":9464", "", 9464},
        {"[::1]:80", "::1", 80},
        {"localhost:0", "localhost", 0},
        {"0.0.0.0:65535", "0.0.0.0", 65535},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char host[256], err[256];
        int port = -1;
        cr_expect_eq(jr_metrics_parse_addr(good[i].in, host, sizeof host, &port, err, sizeof err), 0, "%s: %s",
                     good[i].in, err);
        cr_expect_str_eq(host, good[i].host, "%s", good[i].in);
        cr_expect_eq(port, good[i].port, "%s", good[i].in);
    }
    static const struct {
        const char *in, *says;
    } bad[] = {
        {"", "HOST:PORT"},
        {"127.0.0.1", "HOST:PORT"},
        {"127.0.0.1:", "0 to 65535"},
        {"127.0.0.1:65536", "0 to 65535"},
        {"127.0.0.1:-1", "0 to 65535"},
        {"127.0.0.1:+1", "0 to 65535"},
        {"127.0.0.1:80x", "0 to 65535"},
        {"::1:80", "brackets"},
        {"[::1:80", "brackets"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char host[256], err[256] = "";
        int port;
        cr_expect_eq(jr_metrics_parse_addr(bad[i].in, host, sizeof host, &port, err, sizeof err), JR_EINVAL,
                     "\"%s\" accepted", bad[i].in);
        cr_expect(strstr(err, bad[i].says) && strstr(err, bad[i].in), "\"%s\": %s", bad[i].in, err);
    }
    char longname[400], host[256], err[256];
    int port;
    memset(longname, 'a', 300);
    snprintf(longname + 300, 100, ":80");
    cr_expect_eq(jr_metrics_parse_addr(longname, host, sizeof host, &port, err, sizeof err), JR_EINVAL);
}

/* metrics.port_offset: the port of metrics.listen plus the offset (the
 * systemd instance number), checked against 65535; port 0 stays any port. */
Test(metrics_addr, port_offset_is_added_to_the_port) {
    static const struct {
        const char *in;
        long long off;
        const char *out;
    } good[] = {
        {"127.0.0.1:9500", 0, "127.0.0.1:9500"}, {"127.0.0.1:9500", 3, "127.0.0.1:9503"},
        {":9464", 1, ":9465"},                   {"[::1]:9464", 2, "[::1]:9466"},
        {"127.0.0.1:0", 7, "127.0.0.1:0"},       {"localhost:65534", 1, "localhost:65535"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char out[300], err[256] = "";
        cr_expect_eq(jr_metrics_addr_offset(good[i].in, good[i].off, out, sizeof out, err, sizeof err), 0, "%s: %s",
                     good[i].in, err);
        cr_expect_str_eq(out, good[i].out, "%s + %lld", good[i].in, good[i].off);
    }
    char out[300], err[256];
    cr_expect_eq(jr_metrics_addr_offset("127.0.0.1:65535", 1, out, sizeof out, err, sizeof err), JR_EINVAL);
    cr_expect(strstr(err, "metrics.port_offset 1") && strstr(err, "65536"), "%s", err);
    cr_expect_eq(jr_metrics_addr_offset("nonsense", 1, out, sizeof out, err, sizeof err), JR_EINVAL);
}
