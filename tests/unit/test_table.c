/* The CLI's table widths and shortening (cli.h): pure, no Redis. */
#include <criterion/criterion.h>
#include <string.h>

#include "cli.h"

Test(table, columns_fit_the_limit_by_shrinking_the_widest_text_column_first) {
    size_t nat[] = {40, 5, 20}, min[] = {5, 5, 4}, w[3];
    cr_expect_eq(jr_table_fit(nat, min, 3, 0, w), 2, "no limit: two spaces");
    cr_expect(w[0] == 40 && w[1] == 5 && w[2] == 20, "no limit: natural widths");
    cr_expect_eq(jr_table_fit(nat, min, 3, 80, w), 2, "fits whole: %zu %zu %zu", w[0], w[1], w[2]);
    cr_expect(w[0] == 40 && w[2] == 20);
    size_t sep = jr_table_fit(nat, min, 3, 40, w);
    cr_expect_eq(sep, 1, "one space between columns before any cell is cut");
    cr_expect_eq(w[0] + w[1] + w[2] + 2 * sep, 40, "%zu %zu %zu", w[0], w[1], w[2]);
    cr_expect_eq(w[1], 5, "a column that may not shrink keeps its width");
    cr_expect(w[0] + 1 >= w[2] && w[2] + 1 >= w[0], "the widest shrinks first, then both: %zu %zu", w[0], w[2]);
    jr_table_fit(nat, min, 3, 10, w);
    cr_expect(w[0] == 5 && w[1] == 5 && w[2] == 4, "not below the minima: %zu %zu %zu", w[0], w[1], w[2]);
}

Test(table, a_cut_cell_ends_in_the_ellipsis_and_keeps_its_width) {
    char buf[64];
    cr_expect_str_eq(jr_table_cut("orders", 6, buf), "orders", "fits: as it is");
    cr_expect_str_eq(jr_table_cut("orders-eu-west", 6, buf), "order" JR_TABLE_ELLIPSIS);
    cr_expect_str_eq(jr_table_cut("abcdef", 1, buf), JR_TABLE_ELLIPSIS);
}
