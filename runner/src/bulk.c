/* Bulk actions over one state of a queue: see bulk.h. */
#include "bulk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "jr.h"
#include "redis_admin.h"
#include "redis_partition.h"
#include "redis_produce.h"
#include "redis_sched.h"

/* ---- the filter (pure) ------------------------------------------------------- */

int jr_filter_match(const jr_filter_t *f, const char *handler, size_t hlen, const char *payload, size_t plen) {
    if (!f) return 1;
    if (f->handler && f->handler[0] &&
        (!handler || hlen != strlen(f->handler) || memcmp(handler, f->handler, hlen)))
        return 0;
    if (f->match && f->match_len && (!payload || !memmem(payload, plen, f->match, f->match_len))) return 0;
    return 1;
}

/* The value of field `name` of e, or NULL (its length in *len). */
static const char *entry_field(const jr_entry_t *e, const char *name, size_t *len) {
    size_t n = strlen(name);
    for (size_t i = 0; i < e->nfields; i++)
        if (e->name_lens[i] == n && !memcmp(e->names[i], name, n)) {
            *len = e->value_lens[i];
            return e->values[i];
        }
    *len = 0;
    return NULL;
}

int jr_filter_match_entry(const jr_filter_t *f, const jr_entry_t *e) {
    size_t hl, pl;
    const char *h = entry_field(e, JR_F_HANDLER, &hl), *p = entry_field(e, JR_F_PAYLOAD, &pl);
    return jr_filter_match(f, h, hl, p, pl);
}

const char *jr_bulk_state_name(jr_bulk_state_t s) {
    return s == JR_BULK_DELAYED ? "delayed" : s == JR_BULK_RETRYING ? "retrying" : "dead";
}

int jr_bulk_state_parse(const char *name) {
    if (!strcmp(name, "delayed")) return JR_BULK_DELAYED;
    if (!strcmp(name, "retrying")) return JR_BULK_RETRYING;
    if (!strcmp(name, "dead")) return JR_BULK_DEAD;
    return -1;
}

/* A delayed-set member's strings: see bulk.h. */
int jr_msgpack_strings(const char *p, size_t n, const char **v, size_t *lens, size_t max) {
    const unsigned char *u = (const unsigned char *)p;
    size_t i = 0, k = 0;
    while (i < n) {
        unsigned char t = u[i++];
        size_t len, hdr;
        if ((t & 0xe0) == 0xa0) len = t & 0x1f, hdr = 0;
        else if (t == 0xd9 || t == 0xc4) hdr = 1;
        else if (t == 0xda || t == 0xc5) hdr = 2;
        else if (t == 0xdb || t == 0xc6) hdr = 4;
        else return -1;
        if (hdr) {
            if (n - i < hdr) return -1;
            len = 0;
            for (size_t b = 0; b < hdr; b++) len = len << 8 | u[i + b];
            i += hdr;
        }
        if (n - i < len || k == max) return -1;
        v[k] = p + i, lens[k++] = len;
        i += len;
    }
    return (int)k;
}

/* ---- one internal queue ---------------------------------------------------------- */

typedef struct bulk {
    jr_redis_t *r;
    jr_bulk_state_t state;
    jr_bulk_action_t action;
    const jr_filter_t *f;
    const char *const *ids;
    size_t nids;
    unsigned char *found;
    jr_bulk_result_t *res;
    char dead_end[32]; /* the last dead entry id walked: Redis's ms when the call began */
} bulk_t;

int jr_bulk_dead_names(const jr_entry_t *e, const char *id, size_t len, int p, const char *want) {
    size_t wl = strlen(want), gen;
    unsigned i;
    if (p >= 0 && jr_partition_id_parse(want, wl, &gen, &i))
        return (int)i == p && id && gen == len && !memcmp(want, id, len);
    return (id && wl == len && !memcmp(want, id, len)) || !strcmp(want, e->id);
}

/* The dead stream of internal queue iq (partition p, -1: none), page by
 * page (XRANGE from after the last entry seen, up to b->dead_end): the
 * chosen entries of each page retried or purged in one call. */
static int bulk_dead(bulk_t *b, const char *iq, int p) {
    jr_qkeys_t k;
    jr_qkeys(&k, iq);
    char start[JR_ID_MAX + 2] = "-";
    const char *sel[JR_BULK_PAGE];
    int rc = 0;
    for (;;) {
        jr_batch_t page = {0};
        if ((rc = jr_redis_xrange_between(b->r, k.dead, start, b->dead_end, JR_BULK_PAGE, &page))) break;
        size_t nsel = 0;
        for (size_t i = 0; i < page.n && i < JR_BULK_PAGE; i++) {
            const jr_entry_t *e = &page.v[i];
            int want = 0;
            if (b->nids) {
                size_t len;
                const char *id = entry_field(e, JR_F_ID, &len);
                for (size_t j = 0; j < b->nids; j++)
                    if (jr_bulk_dead_names(e, id, len, p, b->ids[j])) {
                        want = 1;
                        if (b->found) b->found[j] = 1;
                    }
            } else {
                b->res->seen++;
                want = jr_filter_match_entry(b->f, e);
            }
            if (want) sel[nsel++] = e->id;
        }
        b->res->matched += (long long)nsel;
        if (nsel) {
            long long n = 0;
            rc = b->action == JR_BULK_RUN_NOW ? jr_redis_dead_retry(b->r, iq, sel, nsel, &n)
                                              : jr_redis_dead_purge(b->r, iq, sel, nsel, &n);
            b->res->acted += n;
        }
        int last = page.n < JR_BULK_PAGE;
        if (page.n) snprintf(start, sizeof start, "(%s", page.v[page.n - 1].id);
        jr_batch_free(&page);
        if (rc || last) break;
    }
    return rc;
}

/* The bucket start (Unix ms, the wheel's buckets are 1 s) of a due score. */
static long long bucket_of(const char *score) {
    long long ms = strtoll(score, NULL, 10);
    return ms - ms % 1000;
}

#define BULK_ITEMS 65 /* id and 32 field/value pairs: the most a member holds (jr_limits) */

/* The delayed set and time wheel of internal queue iq, page by page
 * (jr_redis_delayed_page), each chosen job of the state changed by id
 * (jr_run_now or jr_delete). A change removes the member the cursor of the
 * next page counts past, so the cursor is mended: "<score>/<skip>" (the
 * sorted set) skips the members of its score the page removed no more;
 * "w<bucket>/<position>" (a wheel bucket) keeps its positions (a removed
 * item becomes a tombstone), except when the bucket's first item was
 * removed: the tombstones at its head are popped, so the walk goes on at
 * the bucket's start, passing over the items of it this page kept. */
static int bulk_delayed(bulk_t *b, const char *iq) {
    const char *fn = b->action == JR_BULK_RUN_NOW ? "jr_run_now" : "jr_delete";
    const char *want = jr_bulk_state_name(b->state);
    char cursor[128] = "", next[128];
    size_t reseen = 0; /* items at the head of the next page already looked at */
    int rc = 0;
    unsigned char removed[JR_BULK_PAGE];
    for (;;) {
        jr_batch_t page = {0};
        if ((rc = jr_redis_delayed_page(b->r, iq, cursor, JR_BULK_PAGE, &page, next, sizeof next))) break;
        size_t n = page.n < JR_BULK_PAGE ? page.n : JR_BULK_PAGE;
        for (size_t i = 0; i < n && !rc; i++) {
            const jr_entry_t *e = &page.v[i];
            removed[i] = 0;
            if (i < reseen) continue;
            const char *v[BULK_ITEMS], *names[BULK_ITEMS], *values[BULK_ITEMS];
            size_t l[BULK_ITEMS], nl[BULK_ITEMS], vl[BULK_ITEMS];
            int m = e->nfields ? jr_msgpack_strings(e->values[0], e->value_lens[0], v, l, BULK_ITEMS) : -1;
            if (m < 1 || m % 2 == 0 || l[0] >= JR_ID_MAX) continue; /* not a job: left alone */
            size_t half = (size_t)(m - 1) / 2;
            for (size_t j = 0; j < half; j++)
                names[j] = v[1 + 2 * j], nl[j] = l[1 + 2 * j], values[j] = v[2 + 2 * j], vl[j] = l[2 + 2 * j];
            jr_entry_t job = {.id = e->id, .nfields = half, .names = names, .values = values, .name_lens = nl,
                              .value_lens = vl};
            size_t al;
            const char *a = entry_field(&job, JR_F_ATTEMPT, &al);
            int retrying = a && al < 20 && strtoll(a, NULL, 10) > 1;
            if (retrying != (b->state == JR_BULK_RETRYING)) continue;
            b->res->seen++;
            if (!jr_filter_match_entry(b->f, &job)) continue;
            b->res->matched++;
            char id[JR_ID_MAX], before[32], detail[JR_ID_MAX];
            memcpy(id, v[0], l[0]);
            id[l[0]] = '\0';
            if ((rc = jr_redis_job_change(b->r, fn, iq, id, before, sizeof before, detail, sizeof detail))) break;
            if (!strcmp(before, want)) b->res->acted++, removed[i] = 1;
        }
        reseen = 0;
        if (!rc && next[0] == 'w') { /* a wheel bucket: mend a cursor its head pop moved */
            long long bk = strtoll(next + 1, NULL, 10);
            size_t first = n;
            while (first > 0 && bucket_of(page.v[first - 1].id) == bk) first--;
            int at_head = cursor[0] != 'w' || strtoll(cursor + 1, NULL, 10) != bk ||
                          !strcmp(strchr(cursor, '/') ? strchr(cursor, '/') : "", "/0");
            if (first < n && at_head && removed[first]) {
                for (size_t i = first; i < n; i++) reseen += !removed[i];
                snprintf(next, sizeof next, "w%lld/0", bk);
            }
        } else if (!rc && next[0]) { /* the sorted set: "<score>/<skip>" */
            char *slash = strrchr(next, '/');
            if (slash) {
                long long skip = strtoll(slash + 1, NULL, 10);
                for (size_t i = 0; i < n; i++)
                    if (removed[i] && (size_t)(slash - next) == strlen(page.v[i].id) &&
                        !memcmp(page.v[i].id, next, (size_t)(slash - next)))
                        skip--;
                snprintf(slash + 1, sizeof next - (size_t)(slash + 1 - next), "%lld", skip > 0 ? skip : 0);
            }
        }
        jr_batch_free(&page);
        if (rc || !next[0]) break;
        snprintf(cursor, sizeof cursor, "%s", next);
    }
    return rc;
}

/* A selection of delayed or retrying jobs: each id located (its partition
 * from the id, as `job show` does), and changed when it is in the state. */
static int bulk_select_waiting(bulk_t *b, const char *queue) {
    const char *fn = b->action == JR_BULK_RUN_NOW ? "jr_run_now" : "jr_delete";
    const char *want = jr_bulk_state_name(b->state);
    jr_partmap_t parts = {0};
    int rc = 0;
    for (size_t i = 0; i < b->nids && !rc; i++) {
        char iq[JR_INTERNAL_QUEUE_MAX + 1], iid[JR_ID_MAX], before[32], detail[JR_ID_MAX];
        jr_jobinfo_t info = {0};
        b->res->seen++;
        if ((rc = jr_partition_locate(&parts, b->r, queue, b->ids[i], NULL, iq, iid))) break;
        rc = jr_redis_job_locate(b->r, iq, iid, &info);
        int in_state = !rc && !strcmp(info.state, want);
        jr_jobinfo_free(&info);
        if (rc) break;
        if (!in_state) continue;
        if (b->found) b->found[i] = 1;
        b->res->matched++;
        if ((rc = jr_redis_job_change(b->r, fn, iq, iid, before, sizeof before, detail, sizeof detail))) break;
        if (!strcmp(before, want)) b->res->acted++;
    }
    jr_partmap_free(&parts);
    return rc;
}

int jr_bulk(jr_redis_t *r, const char *queue, jr_bulk_state_t state, jr_bulk_action_t action, const jr_filter_t *f,
            const char *const *ids, size_t nids, unsigned char *found, jr_bulk_result_t *res) {
    bulk_t b = {.r = r, .state = state, .action = action, .f = f, .ids = ids, .nids = nids, .found = found, .res = res};
    memset(res, 0, sizeof *res);
    if (found && nids) memset(found, 0, nids);
    if (state != JR_BULK_DEAD && nids) {
        res->seen = 0;
        return bulk_select_waiting(&b, queue);
    }
    int rc = 0;
    if (state == JR_BULK_DEAD) {
        double now;
        if ((rc = jr_redis_time_ms(r, &now))) return rc;
        snprintf(b.dead_end, sizeof b.dead_end, "%lld", (long long)now);
    }
    jr_partmap_t parts = {0};
    jr_qpart_t *qp;
    if ((rc = jr_partmap_get(&parts, r, queue, &qp))) {
        jr_partmap_free(&parts);
        return rc;
    }
    for (unsigned p = 0; !rc && p < qp->n + (qp->n > 1); p++) {
        const char *iq = p < qp->n ? jr_qpart_name(qp, p) : queue;
        rc = state == JR_BULK_DEAD ? bulk_dead(&b, iq, qp->n > 1 && p < qp->n ? (int)p : -1) : bulk_delayed(&b, iq);
    }
    if (nids) res->seen = (long long)nids;
    jr_partmap_free(&parts);
    return rc;
}
