/* Priorities: see prio.h. */
#include "prio.h"

#include <string.h>

static int64_t weight(const int64_t *weights, size_t q) { return weights ? weights[q] : 1; }

void jr_prio_split(const int64_t *weights, int64_t *credit, size_t n, const unsigned char *on, size_t budget,
                   int64_t *counts) {
    int64_t total = 0, given = 0;
    for (size_t q = 0; q < n; q++) total += on[q] ? weight(weights, q) : 0;
    for (size_t q = 0; q < n; q++) {
        counts[q] = 0;
        if (!on[q]) continue;
        credit[q] += (int64_t)budget * weight(weights, q);
        if (credit[q] > 0) counts[q] = credit[q] / total;
        credit[q] -= counts[q] * total;
        given += counts[q];
    }
    for (; total && given < (int64_t)budget; given++) {
        size_t best = n;
        for (size_t q = 0; q < n; q++)
            if (on[q] && (best == n || credit[q] > credit[best])) best = q;
        credit[best] -= total;
        counts[best]++;
    }
    for (; given > (int64_t)budget; given--) {
        size_t worst = n;
        for (size_t q = 0; q < n; q++)
            if (counts[q] > 0 && (worst == n || credit[q] < credit[worst])) worst = q;
        credit[worst] += total;
        counts[worst]--;
    }
}

void jr_prio_order(const int64_t *weights, size_t n, int strict, const uint32_t *queue, size_t m, size_t *perm,
                   int64_t *scratch) {
    int64_t *left = scratch, *next = scratch + n, *cur = scratch + 2 * n;
    for (size_t q = 0; q < n; q++) left[q] = 0, next[q] = -1, cur[q] = 0;
    for (size_t i = 0; i < m; i++) {
        if (next[queue[i]] < 0) next[queue[i]] = (int64_t)i;
        left[queue[i]]++;
    }
    for (size_t k = 0; k < m; k++) {
        size_t best = n;
        int64_t total = 0;
        for (size_t q = 0; q < n; q++) {
            if (!left[q] || (strict && best != n)) continue;
            total += weight(weights, q);
            cur[q] += weight(weights, q);
            if (best == n || cur[q] > cur[best]) best = q;
        }
        cur[best] -= total;
        perm[k] = (size_t)next[best]++;
        left[best]--;
    }
}
