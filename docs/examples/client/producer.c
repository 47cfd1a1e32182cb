/* A complete producer with libjobrunner (see docs/client.md).
 *
 *   cc -o producer producer.c $(pkg-config --cflags --libs jobrunner-client)
 *   ./producer redis://127.0.0.1:6379
 *
 * Enqueues one job, a batch over several queues (printing each job's
 * outcome), a delayed job that it then shows and cancels, and prints the
 * queues' counts. Exits 0 when everything was written. */
#include <jobrunner/client.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";

    /* Connect: 2 s to connect (and load the function library), 5 s per command. */
    jr_client_t *c = jr_client_connect(url, 2000, 5000);
    if (!c) return fprintf(stderr, "out of memory\n"), 1;
    if (jr_client_err(c)) {
        fprintf(stderr, "connect: %s\n", jr_client_errstr(c));
        jr_client_free(c);
        return 1;
    }
    int status = 0;

    /* One job, run now, on the queue "default". */
    jr_client_job_t hello = {.handler = "echo", .payload = "hello", .payload_len = 5};
    jr_client_result_t r;
    if (jr_client_enqueue(c, &hello, &r)) {
        fprintf(stderr, "enqueue: %s\n", jr_client_errstr(c));
        status = 1;
    } else {
        printf("enqueued %s\n", r.id);
    }

    /* A batch over several queues, in any order; one result per job. The
     * id makes "invoice-7" idempotent: enqueued twice, written once. */
    jr_client_job_t batch[] = {
        {.queue = "mail", .handler = "send_mail", .payload = "{\"to\":\"a@b.c\"}", .payload_len = 14},
        {.queue = "reports", .handler = "echo", .payload = "daily", .payload_len = 5},
        {.queue = "mail", .handler = "send_mail", .payload = "{\"to\":\"d@e.f\"}", .payload_len = 14,
         .max_attempts = 5, .timeout_ms = 30000},
        {.queue = "billing", .handler = "echo", .id = "invoice-7", .payload = "7", .payload_len = 1},
        {.queue = "billing", .handler = "echo", .id = "invoice-7", .payload = "7", .payload_len = 1},
    };
    size_t n = sizeof batch / sizeof batch[0];
    jr_client_result_t res[sizeof batch / sizeof batch[0]];
    static const char *const what[] = {"not sent", "created", "already there", "refused", "unknown"};
    int rc = jr_client_enqueue_many(c, batch, n, res);
    for (size_t i = 0; i < n; i++)
        printf("job %zu (%s): %s %s%s%s\n", i + 1, batch[i].queue, what[res[i].status], res[i].id,
               res[i].error ? ": " : "", res[i].error ? res[i].error : "");
    if (rc) {
        /* Some jobs were not written; the results above say exactly which. */
        fprintf(stderr, "enqueue_many: %s\n", jr_client_errstr(c));
        status = 1;
    }

    /* A delayed job: due in 30 minutes, then looked up and cancelled. */
    jr_client_job_t later = {.queue = "shop", .handler = "order_autoclose", .id = "close-1042",
                             .payload = "/srv/orders/1042", .payload_len = 16, .delay_ms = 30 * 60 * 1000};
    if (jr_client_enqueue(c, &later, &r)) {
        fprintf(stderr, "enqueue: %s\n", jr_client_errstr(c));
        status = 1;
    }
    jr_client_job_info_t *info;
    if (jr_client_job_show(c, "shop", "close-1042", &info) == 0) {
        printf("close-1042: %s, due in %.0f s, handler %.*s, payload %.*s\n", info->state_name,
               info->due_ms > 0 ? (info->due_ms - (double)info->enqueued_ms) / 1000 : 0.0,
               (int)info->handler_len, info->handler ? info->handler : "", (int)info->payload_len, info->payload);
        jr_client_job_info_free(info);
    } else {
        fprintf(stderr, "job show: %s\n", jr_client_errstr(c));
        status = 1;
    }
    jr_client_cancel_t outcome;
    if (jr_client_cancel(c, "shop", "close-1042", &outcome) == 0)
        printf("close-1042: %s\n", outcome == JR_CLIENT_CANCELLED      ? "cancelled"
                                   : outcome == JR_CLIENT_CANCEL_RUNNING ? "running (flagged)"
                                                                          : "not found");
    else
        fprintf(stderr, "cancel: %s\n", jr_client_errstr(c)), status = 1;

    /* Counts per queue; pause and resume one. */
    const char *queues[] = {"default", "mail", "reports", "billing", "shop"};
    for (size_t i = 0; i < sizeof queues / sizeof queues[0]; i++) {
        jr_client_stats_t s;
        if (jr_client_stats(c, queues[i], &s)) {
            fprintf(stderr, "stats: %s\n", jr_client_errstr(c));
            status = 1;
            break;
        }
        printf("%-8s ready %lld delayed %lld dead %lld%s\n", queues[i], (long long)s.ready, (long long)s.delayed,
               (long long)s.dead, s.paused ? " (paused)" : "");
    }
    int changed;
    if (jr_client_pause(c, "reports", &changed) || jr_client_resume(c, "reports", &changed))
        fprintf(stderr, "pause/resume: %s\n", jr_client_errstr(c)), status = 1;

    jr_client_free(c);
    return status;
}
