/* The work units of one phase of the parallel gemm (gemm.c). A group's
 * workers claim them from a counter, so a worker that started late or
 * runs slower (other work on its core, a VM's stolen time) takes fewer of
 * them instead of setting the phase's length, which a static split by
 * worker does (docs/PERFORMANCE.md has the spread seen on a 16-core VM).
 *
 * A compute unit is a block of the group's rows (whole micro-panels of mr
 * rows, one packed A block) by a range of the B block's column panels,
 * the whole block unless the group's rows are too few to give every
 * worker several units (a skinny product): then the columns are split
 * too, choose_grid's idea. A pack unit is a range of the B block's column
 * panels. Unit boundaries fall on micro-tile boundaries and the kernels'
 * arithmetic does not depend on where a tile's edges fall, so which
 * worker computes which unit never changes the result's bits. */
#ifndef LOCUS_CPU_GEMM_UNITS_H
#define LOCUS_CPU_GEMM_UNITS_H

#include <stddef.h>

/* The units a phase is cut into, aimed at; fewer when the shape has no
 * more of the minimum sizes below. */
#define LOCUS__GEMM_UNITS_PER_WORKER 6
/* A compute unit's rows: the packed B block streams from L3 once per
 * unit, so a unit of r rows reads elem / (2 r) bytes of it per flop; 64
 * rows keep that far below what L3 delivers. */
#define LOCUS__GEMM_UNIT_MIN_ROWS 64
/* A compute unit's columns when they are split: A's rows are packed once
 * per unit, which 256 columns of use amortise. */
#define LOCUS__GEMM_UNIT_MIN_COLS 256
/* A pack unit's columns: fewer would claim more often than they pack. */
#define LOCUS__GEMM_PACK_MIN_COLS 64

typedef struct locus__gemm_units {
    size_t row_step;  /* rows of a unit, of mr; the last unit may be less */
    size_t row_units; /* ceil(rows / row_step), 0 when rows == 0 */
    size_t col_step;  /* column panels of a unit; the last may be less */
    size_t col_units; /* ceil(panels / col_step) */
} locus__gemm_units;

/* The compute units of a group of `workers` over `rows` rows of C and a B
 * block of `panels` column panels of nr columns, with A blocks of at most
 * mc rows (a multiple of mr). Unit u covers row unit u / col_units and
 * column unit u % col_units. */
locus__gemm_units locus__gemm_units_plan(size_t rows, size_t panels, size_t mr,
                                         size_t nr, size_t mc, int workers);

/* Column panels per pack unit of a B block of `panels` panels of nr
 * columns, for `workers` packers. */
size_t locus__gemm_pack_step(size_t panels, size_t nr, int workers);

#endif
