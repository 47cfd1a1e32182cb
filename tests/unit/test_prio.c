/* Unit tests for prio.c: how a fetch is split over weighted queues, and
 * the order the fetched jobs start in. */
#include <criterion/criterion.h>
#include <string.h>

#include "prio.h"

Test(prio, split_gives_exact_shares_over_many_fetches_even_of_one_entry) {
    const int64_t w[] = {6, 3, 1};
    const unsigned char on[] = {1, 1, 1};
    int64_t credit[3] = {0}, counts[3], total[3] = {0};
    for (int i = 0; i < 10; i++) {
        jr_prio_split(w, credit, 3, on, 1, counts);
        cr_assert_eq(counts[0] + counts[1] + counts[2], 1);
        for (int q = 0; q < 3; q++) total[q] += counts[q];
    }
    cr_expect_eq(total[0], 6);
    cr_expect_eq(total[1], 3);
    cr_expect_eq(total[2], 1);
    memset(total, 0, sizeof total);
    for (int i = 0; i < 100; i++) { /* 128 x 6/10 = 76.8: the fractions add up */
        jr_prio_split(w, credit, 3, on, 128, counts);
        cr_assert_eq(counts[0] + counts[1] + counts[2], 128);
        for (int q = 0; q < 3; q++) total[q] += counts[q];
    }
    cr_expect(total[0] >= 7679 && total[0] <= 7681, "%lld", (long long)total[0]);
    cr_expect(total[1] >= 3839 && total[1] <= 3841, "%lld", (long long)total[1]);
    cr_expect(total[2] >= 1279 && total[2] <= 1281, "%lld", (long long)total[2]);
}

Test(prio, split_leaves_out_queues_that_are_off_and_never_exceeds_the_budget) {
    const int64_t w[] = {5, 2, 7};
    unsigned char on[] = {1, 1, 1};
    int64_t credit[3] = {0}, counts[3];
    for (int i = 0; i < 200; i++) {
        on[i % 3] = (unsigned char)(i % 2); /* the set in play changes */
        size_t budget = (size_t)(i % 17);
        jr_prio_split(w, credit, 3, on, budget, counts);
        int64_t sum = 0;
        for (int q = 0; q < 3; q++) {
            cr_assert_geq(counts[q], 0);
            if (!on[q]) cr_assert_eq(counts[q], 0);
            sum += counts[q];
        }
        cr_assert_eq(sum, on[0] || on[1] || on[2] ? (int64_t)budget : 0, "fetch %d: %lld of %zu", i, (long long)sum,
                     budget);
    }
    /* NULL weights: all 1 */
    const unsigned char all[] = {1, 1, 1};
    int64_t c2[3] = {0};
    jr_prio_split(NULL, c2, 3, all, 9, counts);
    cr_expect(counts[0] == 3 && counts[1] == 3 && counts[2] == 3);
}

Test(prio, order_interleaves_by_weight_and_strict_goes_queue_by_queue) {
    const int64_t w[] = {6, 3, 1};
    uint32_t queue[20];
    size_t m = 0, perm[20];
    for (int i = 0; i < 12; i++) queue[m++] = 0;
    for (int i = 0; i < 6; i++) queue[m++] = 1;
    for (int i = 0; i < 2; i++) queue[m++] = 2;
    int64_t scratch[9];
    jr_prio_order(w, 3, 0, queue, m, perm, scratch);
    int seen[3] = {0};
    size_t last[3] = {0};
    int first = 1;
    for (size_t k = 0; k < m; k++) {
        uint32_t q = queue[perm[k]];
        if (seen[q]) cr_expect_gt(perm[k], last[q], "a queue's entries keep their order");
        seen[q]++, last[q] = perm[k];
        if (k == 9) { /* the first ten: 6, 3, 1 */
            cr_expect_eq(seen[0], 6);
            cr_expect_eq(seen[1], 3);
            cr_expect_eq(seen[2], 1);
            first = 0;
        }
    }
    cr_expect(!first);
    cr_expect(seen[0] == 12 && seen[1] == 6 && seen[2] == 2);
    jr_prio_order(w, 3, 1, queue, m, perm, scratch);
    for (size_t k = 0; k < m; k++) cr_expect_eq(perm[k], k, "strict: in queue order");
}
