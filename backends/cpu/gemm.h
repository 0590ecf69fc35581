/* The CPU's f32 matrix product, usable by other kernels (conv2d). */
#ifndef LOCUS_CPU_GEMM_H
#define LOCUS_CPU_GEMM_H

#include <stddef.h>

#include <locus/locus.h>

#include "isa.h"

/* C = alpha op(A) op(B) + beta C, row-major, with the BLAS meaning of
 * every field (see locus_gemm_desc); leading dimensions are explicit.
 * beta == 0: C is not read. alpha == 0 or k == 0: A and B are not read.
 * isa: the kernels to use (the context's table, which honours
 * LOCUS_CPU_ISA); NULL takes the best this CPU supports.
 *
 * Indexed B: with b_rows and b_cols set (both or neither; trans_b must be
 * LOCUS_NO_TRANS, ldb is unused), op(B)[p][j] = b[b_rows[p] + b_cols[j]],
 * b_rows having k entries and b_cols n. B is then any set of elements
 * whose offsets are a row term plus a column term: MEC (mec.c) reads the
 * overlapping windows of its lowered matrix through it in the filter's
 * own order, and one product covers many output rows. Packing resolves
 * the tables (gemm_pack.c), so it costs nothing inside the kernels; only
 * locus__cpu_sgemm_tile is given such a B (the parallel driver builds its
 * locus__sgemm from a public descriptor, tables NULL). */
typedef struct locus__sgemm {
    locus_transpose trans_a, trans_b;
    size_t m, n, k;
    float alpha, beta;
    const float *a;
    size_t lda;
    const float *b;
    size_t ldb;
    const size_t *b_rows, *b_cols; /* NULL: B as stored, ldb apart */
    float *c;
    size_t ldc;
    const locus__cpu_isa *isa;
} locus__sgemm;

/* The cache blocks of locus__cpu_sgemm_tile (mc rows of A by kc depth
 * packed, kc by nc of B), fixed so that callers can size the scratch
 * before any ISA table is chosen. */
typedef struct locus__tile_blocks {
    size_t mc, kc, nc;
} locus__tile_blocks;

/* 144 x 256 x 2048: A's block in L2, B's micro-panel in L1 (im2col). */
extern const locus__tile_blocks locus__tile_fast;
/* 48 x 128 x 2048: a third of the fast blocks' scratch, for callers whose
 * point is memory (MEC), at the cost of storing C twice as often. */
extern const locus__tile_blocks locus__tile_compact;

/* Floats of scratch that a call of locus__cpu_sgemm_tile with `blocks`
 * needs for a tile of at most rows x cols of C with inner dimension k,
 * whatever the ISA. The scratch needs no particular alignment. */
size_t locus__cpu_sgemm_scratch_floats(const locus__tile_blocks *blocks,
                                       size_t rows, size_t cols, size_t k);

/* Computes the block rows [row_begin, row_end) x columns [col_begin,
 * col_end) of C on the calling thread, touching no other element of C.
 * scratch is the caller's own, of locus__cpu_sgemm_scratch_floats(blocks,
 * rows, cols, g->k) floats for some rows >= row_end - row_begin and
 * cols >= col_end - col_begin. */
void locus__cpu_sgemm_tile(const locus__sgemm *g,
                           const locus__tile_blocks *blocks, size_t row_begin,
                           size_t row_end, size_t col_begin, size_t col_end,
                           float *scratch);

#endif
