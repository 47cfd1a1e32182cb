/* jr_log_bench [text|json] [N]: time N "job finished" log lines (the
 * worker's per-job line) written to stderr; run with 2>/dev/null. Prints
 * CPU nanoseconds (user + system, so other load on the machine does not
 * count) per line on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "util.h"

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    int json = argc > 1 && !strcmp(argv[1], "json");
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    jr_log_setup(json ? JR_LOG_JSON : JR_LOG_TEXT, JR_LOG_INFO, "worker");
    double t0 = cpu_ns();
    for (long i = 0; i < n; i++) {
        char attempt[16];
        snprintf(attempt, sizeof attempt, "%ld", i % 5 + 1);
        jr_log_kv(JR_LOG_INFO, "job finished", "job", "01HZX3K8Q9-order-close-12345", "queue", "default",
                  "handler", "orders.close_unpaid", "attempt", attempt, "outcome", "ok", "duration_ms",
                  "0.153", NULL);
    }
    jr_log_flush();
    double t1 = cpu_ns();
    printf("%s: %ld lines, %.0f ns/line\n", json ? "json" : "text", n, (t1 - t0) / (double)n);
    return 0;
}
