/* Presence: see presence.h. */
#include "presence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jr.h"
#include "log.h"
#include "report.h"
#include "util.h"

/* What jr_report_once says of each problem (jr_report_clear names it too). */
static const char SAY_PROCS_GARBAGE[] = "an entry of the live-process list holds garbage; left out";

int jr_presence_init(jr_presence_t *p, const char *role, const char *name, const char *const *queues,
                     size_t nq, int64_t lease_ms) {
    memset(p, 0, sizeof *p);
    jr_proc_t *s = &p->self;
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->role, sizeof s->role, "%s", role);
    if (gethostname(s->host, sizeof s->host) != 0) snprintf(s->host, sizeof s->host, "?");
    s->host[sizeof s->host - 1] = '\0';
    s->pid = (long long)getpid();
    snprintf(s->version, sizeof s->version, "%s", JR_VERSION);
    s->started_ms = jr_wall_ms(); /* until Redis's clock is read: see jr_presence_tick */
    p->init_us = jr_mono_us();
    s->lease_ms = lease_ms;
    size_t len = 1;
    for (size_t i = 0; i < nq; i++) len += strlen(queues[i]) + 1;
    if (!(s->queues = malloc(len))) return JR_ENOMEM;
    s->queues[0] = '\0';
    for (size_t i = 0; i < nq; i++) {
        if (i) strcat(s->queues, ",");
        strcat(s->queues, queues[i]);
    }
    return 0;
}

void jr_presence_free(jr_presence_t *p) {
    free(p->self.queues);
    p->self.queues = NULL;
}

void jr_presence_reset(jr_presence_t *p) { p->next_announce_us = 0, p->announced = 0; }

int64_t jr_presence_deadline(const jr_presence_t *p) { return p->next_announce_us; }

int jr_presence_tick(jr_presence_t *p, jr_redis_t *r, long long running) {
    int64_t now = jr_mono_us();
    if (now < p->next_announce_us) return 0;
    p->next_announce_us = now + p->self.lease_ms * 1000 / 3;
    int rc = 0, renewed = 0;
    /* Nothing changed since the last announce (an idle process): one
     * PEXPIRE; the whole entry again only if it is gone. */
    if (p->announced && running == p->self.running && (rc = jr_redis_proc_renew(r, p->self.name, p->self.lease_ms, &renewed)) &&
        !jr_redis_ok(r))
        return rc;
    if (!renewed) {
        double t;
        /* The start time on Redis's clock, like every time in Redis (a host
         * clock off by seconds would list a start in the future). */
        if (!p->started_redis && !(rc = jr_redis_time_ms(r, &t)))
            p->self.started_ms = (int64_t)t - (now - p->init_us) / 1000, p->started_redis = 1;
        else if (rc && !jr_redis_ok(r))
            return rc;
        p->self.running = running;
        rc = jr_redis_proc_announce(r, &p->self);
        if (rc && !jr_redis_ok(r)) return rc;
        p->announced = rc == 0;
    }
    if (rc && !p->refused)
        jr_log_kv(JR_LOG_WARN, "Redis refused to list this process as live; trying again at the next refresh",
                  "error", jr_redis_errstr(r), NULL);
    else if (!rc && p->refused)
        jr_log_kv(JR_LOG_INFO, "this process is listed as live again", NULL);
    p->refused = rc != 0;
    return 0;
}

int jr_presence_prune(jr_presence_t *p, jr_redis_t *r, const char *const *queues, size_t nq) {
    int64_t now = jr_mono_us();
    if (now < p->next_prune_us) return 0;
    p->next_prune_us = now + p->self.lease_ms * 1000 * JR_PRUNE_LEASES;
    jr_proc_t *procs = NULL;
    size_t n = 0;
    int rc = jr_redis_proc_list(r, &procs, &n);
    if (!rc && jr_redis_errstr(r)[0])
        jr_report_once(JR_LOG_WARN, SAY_PROCS_GARBAGE, "key", JR_PROCS_KEY,
                       jr_redis_errstr(r));
    else if (!rc)
        jr_report_clear(SAY_PROCS_GARBAGE, "the live-process list holds no garbage any more", "key", JR_PROCS_KEY);
    const char **live = rc ? NULL : malloc((n + 1) * sizeof *live);
    if (!rc && !live) rc = JR_ENOMEM;
    for (size_t i = 0; !rc && i < n; i++) live[i] = procs[i].name;
    for (size_t q = 0; !rc && q < nq; q++) {
        long long removed = 0;
        rc = jr_redis_prune_consumers(r, queues[q], live, n, p->self.lease_ms, &removed);
        if (!rc && removed > 0) {
            char k[24];
            snprintf(k, sizeof k, "%lld", removed);
            jr_log_kv(JR_LOG_INFO, "removed the consumers of stopped workers (none held a job)", "queue",
                      queues[q], "consumers", k, NULL);
        }
    }
    if (rc == JR_EREDIS) /* refused (or no such function yet): try again at the next pass */
        jr_log_kv(JR_LOG_WARN, "pruning the consumers of stopped workers failed; trying again later", "error",
                  jr_redis_errstr(r), NULL);
    free(live);
    jr_procs_free(procs, n);
    return rc == JR_EREDIS && jr_redis_ok(r) ? 0 : rc;
}

void jr_presence_leave(jr_presence_t *p, jr_redis_t *r) {
    if (r && jr_redis_ok(r) && jr_redis_proc_remove(r, p->self.name) != 0)
        jr_log_kv(JR_LOG_WARN, "could not remove this process from the live list; it expires within a lease",
                  "error", jr_redis_errstr(r), NULL);
}
