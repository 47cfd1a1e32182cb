/* The admin commands: see admin.h. */
#include "admin.h"

#include <string.h>

#include "jr.h"
#include "proc.h"

jr_redis_t *jr_admin_connect(const jr_config_t *cfg) {
    char err[JR_ERRLEN];
    jr_redis_t *r = jr_redis_connect(jr_config_redis_url(cfg), cfg->connect_timeout_ms, err, sizeof err);
    if (!r) {
        fprintf(stderr, "jobrunner: %s\n", err);
        return NULL;
    }
    if (jr_redis_load_library(r) != 0) {
        fprintf(stderr, "jobrunner: loading the function library: %s\n", jr_redis_errstr(r));
        jr_redis_free(r);
        return NULL;
    }
    return r;
}

int jr_cmd_enqueue(const jr_config_t *cfg, const jr_enqueue_t *job, FILE *out) {
    jr_redis_t *r = jr_admin_connect(cfg);
    if (!r) return 1;
    char id[1][JR_ID_MAX];
    int created = 0;
    int rc = jr_redis_enqueue(r, job, 1, id, &created);
    if (rc) {
        fprintf(stderr, "jobrunner: enqueue failed: %s\n", jr_redis_errstr(r));
    } else {
        fprintf(out, "%s\n", id[0]);
        if (!created)
            fprintf(stderr, "jobrunner: job %s was already enqueued; not enqueued again\n", id[0]);
    }
    jr_redis_free(r);
    return rc ? 1 : 0;
}

int jr_cmd_stats(const jr_config_t *cfg, const jr_strlist_t *queues, int json, FILE *out) {
    jr_redis_t *r = jr_admin_connect(cfg);
    if (!r) return 1;
    jr_strlist_t all = {0};
    char wake[JR_ID_MAX];
    int rc = 0;
    if (!queues->n) {
        rc = jr_redis_queues(r, &all, wake);
        queues = &all;
    }
    if (!rc && json) fputs("{\"queues\":[", out);
    else if (!rc) fprintf(out, "%-24s %12s %12s %12s\n", "QUEUE", "READY", "PENDING", "DELAYED");
    for (size_t i = 0; !rc && i < queues->n; i++) {
        jr_qstats_t s;
        if ((rc = jr_redis_stats(r, queues->v[i], &s))) break;
        if (json)
            fprintf(out, "%s{\"queue\":\"%s\",\"ready\":%lld,\"pending\":%lld,\"delayed\":%lld}",
                    i ? "," : "", queues->v[i], s.ready, s.pending, s.delayed);
        else
            fprintf(out, "%-24s %12lld %12lld %12lld\n", queues->v[i], s.ready, s.pending, s.delayed);
    }
    if (!rc && json) fputs("]}\n", out);
    if (rc) fprintf(stderr, "jobrunner: stats: %s\n", jr_redis_errstr(r));
    jr_strlist_free(&all);
    jr_redis_free(r);
    return rc ? 1 : 0;
}
