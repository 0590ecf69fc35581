/* The work units of the parallel gemm's phases (gemm_units.h). */
#include "gemm_units.h"

#include "gemm_block.h"

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

static size_t round_up(size_t v, size_t unit)
{
    return ceil_div(v, unit) * unit;
}

locus__gemm_units locus__gemm_units_plan(size_t rows, size_t panels, size_t mr,
                                         size_t nr, size_t mc, int workers)
{
    locus__gemm_units u = {0, 0, 1, panels > 0 ? 1 : 0};
    if (rows == 0 || panels == 0)
        return u;
    size_t want =
        (size_t)(workers > 0 ? workers : 1) * LOCUS__GEMM_UNITS_PER_WORKER;
    size_t most = mc / mr * mr;
    if (most < mr)
        most = mr;
    size_t step = round_up(ceil_div(rows, want), mr);
    size_t least = round_up(LOCUS__GEMM_UNIT_MIN_ROWS, mr);
    if (step < least)
        step = least;
    if (step > most)
        step = most;
    u.row_step = locus__gemm_even_block(rows, step, mr);
    u.row_units = ceil_div(rows, u.row_step);

    /* Too few row units for the group: split the columns as well, in
     * parts of at least LOCUS__GEMM_UNIT_MIN_COLS columns. */
    if (u.row_units < want) {
        size_t min_panels = ceil_div(LOCUS__GEMM_UNIT_MIN_COLS, nr);
        size_t parts = ceil_div(want, u.row_units);
        size_t most_parts = panels / min_panels;
        if (parts > most_parts)
            parts = most_parts;
        if (parts > 1) {
            u.col_step = ceil_div(panels, parts);
            u.col_units = ceil_div(panels, u.col_step);
            return u;
        }
    }
    u.col_step = panels;
    u.col_units = 1;
    return u;
}

size_t locus__gemm_pack_step(size_t panels, size_t nr, int workers)
{
    if (panels == 0)
        return 1;
    size_t want =
        (size_t)(workers > 0 ? workers : 1) * LOCUS__GEMM_UNITS_PER_WORKER;
    size_t step = ceil_div(panels, want);
    size_t least = ceil_div(LOCUS__GEMM_PACK_MIN_COLS, nr);
    if (step < least)
        step = least;
    return step < panels ? step : panels;
}
