/* The Goto/BLIS building blocks shared by the parallel driver (gemm.c) and
 * the single-thread tile (gemm_tile.c): cache blocking, packing, and the
 * macro-kernel that sweeps the register micro-kernel over packed blocks.
 *
 * Loop nest of the parallel driver, outermost first: columns of C in NC
 * blocks, k in KC blocks (the packed KC x NC block of B, shared by a
 * node's workers, in L3), rows in MC blocks (each worker's packed MC x KC
 * block of A, also in L3), then the macro-kernel: columns in sweeps of
 * l2_cols (a KC x l2_cols part of B, in L2), MR rows (an MR x KC
 * micro-panel of A, in L1), NR columns: one micro-kernel call. Its
 * innermost loop walks along C's rows, so the tiles of C it loads and
 * stores follow each other in memory, where walking down C's columns
 * meets a new page every row (the BLIS order for Skylake-X, whose
 * kernel is the same tile transposed).
 *
 * The single-thread tile (gemm_tile.c) has small A blocks of a few
 * panels; it sweeps one B micro-panel at a time (l2_cols = NR), keeping
 * that KC x NR micro-panel in L1 while the A block streams from L2. */
#ifndef LOCUS_CPU_GEMM_BLOCK_H
#define LOCUS_CPU_GEMM_BLOCK_H

#include <stddef.h>

#include "gemm.h"
#include "isa.h"

typedef struct locus__sgemm_blocking {
    size_t mc;      /* rows of a packed A block, a multiple of mr */
    size_t kc;      /* depth of packed blocks */
    size_t nc;      /* columns of a packed B block, a multiple of nr */
    size_t l2_cols; /* columns of B swept per A micro-panel, of nr */
} locus__sgemm_blocking;

/* Block sizes for the kernel's tile from the cache sizes in bytes (0:
 * unknown, a typical size is assumed) and how many workers share each. */
locus__sgemm_blocking locus__sgemm_blocking_for(const locus__cpu_isa *isa,
                                                size_t l1, size_t l2,
                                                int l2_sharing, size_t l3,
                                                int l3_sharing);

/* Splits `total` into blocks of at most `block`, all of the same size
 * rounded up to `unit` but the last: fewer ragged edges than cutting
 * whole blocks and a remainder. Returns the block size to step by. */
size_t locus__sgemm_even_block(size_t total, size_t block, size_t unit);

/* Packs rows [i0, i0 + mc) x depth [p0, p0 + kc) of alpha-free op(A) into
 * micro-panels of mr rows: ap[(i / mr) * mr * kc + p * mr + i % mr], the
 * rows past mc of the last panel zero. */
void locus__sgemm_pack_a(const locus__sgemm *g, size_t mr, size_t i0, size_t mc,
                         size_t p0, size_t kc, float *ap);

/* Packs depth [p0, p0 + kc) x columns [j0, j0 + nc) of op(B) into
 * micro-panels of nr columns: bp[(j / nr) * nr * kc + p * nr + j % nr],
 * the columns past nc of the last panel zero. op(B) may be indexed
 * (g->b_rows, g->b_cols; gemm.h). */
void locus__sgemm_pack_b(const locus__sgemm *g, size_t nr, size_t p0, size_t kc,
                         size_t j0, size_t nc, float *bp);

/* C[0..mc)[0..nc) (rows ldc apart) = alpha * ap bp + beta * C over packed
 * blocks of depth kc; beta == 0 never reads C. The columns are taken in
 * sweeps of sweep_cols (a multiple of nr), each sweep over every A
 * micro-panel in turn. Tiles cut by the edges of C are computed in a
 * local buffer, so no element outside the block is read or written. */
void locus__sgemm_macro(const locus__cpu_isa *isa, size_t mc, size_t nc,
                        size_t kc, const float *ap, const float *bp, float *c,
                        size_t ldc, float alpha, float beta, size_t sweep_cols);

/* C[rows][cols] = beta * C, or 0 when beta == 0 (NaN in C cleared): the
 * whole product when alpha == 0 or k == 0. */
void locus__sgemm_scale(const locus__sgemm *g, size_t i0, size_t i1, size_t j0,
                        size_t j1);

#endif
