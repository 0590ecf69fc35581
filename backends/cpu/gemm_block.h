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

#include <locus/backend.h>

#include "gemm.h"
#include "isa.h"

typedef struct locus__gemm_blocking {
    size_t mc;      /* rows of a packed A block, a multiple of mr */
    size_t kc;      /* depth of packed blocks */
    size_t nc;      /* columns of a packed B block, a multiple of nr */
    size_t l2_cols; /* columns of B swept per A micro-panel, of nr */
} locus__gemm_blocking;

/* Block sizes for an mr x nr register tile of elements of elem_size bytes
 * from the cache sizes in bytes (0: unknown, a typical size is assumed)
 * and how many workers share each. */
locus__gemm_blocking locus__gemm_blocking_for(size_t mr, size_t nr,
                                              size_t elem_size, size_t l1,
                                              size_t l2, int l2_sharing,
                                              size_t l3, int l3_sharing);

/* Splits `total` into blocks of at most `block`, all of the same size
 * rounded up to `unit` but the last: fewer ragged edges than cutting
 * whole blocks and a remainder. Returns the block size to step by. */
size_t locus__gemm_even_block(size_t total, size_t block, size_t unit);

/* What the parallel driver (gemm.c) needs to know of one element type:
 * its loops, worker split, phases and accounting are the same for f32
 * (gemm_pack.c, gemm_macro.c) and f64 (dgemm_pack.c, dgemm_macro.c); the
 * packing and the macro-kernel are the type's. `typed` is the type's own
 * descriptor (locus__sgemm, locus__dgemm), which the functions read. Called
 * once per block, so the indirection costs nothing measurable. */
typedef struct locus__gemm_kind {
    size_t elem_size;
    size_t mr, nr;
    const char *kernel_name; /* the record's algorithm, e.g. "avx2-6x16" */
    /* As locus__sgemm_pack_a and _pack_b below. */
    void (*pack_a)(const void *typed, size_t mr, size_t i0, size_t mc,
                   size_t p0, size_t kc, void *ap);
    void (*pack_b)(const void *typed, size_t nr, size_t p0, size_t kc,
                   size_t j0, size_t nc, void *bp);
    /* locus__sgemm_macro on the block of C at row i0, column j0, with the
     * descriptor's beta where first_depth (depth block 0), else 1. */
    void (*macro)(const void *typed, size_t mc, size_t nc, size_t kc,
                  const void *ap, const void *bp, size_t i0, size_t j0,
                  int first_depth, size_t sweep_cols);
    /* As locus__sgemm_scale. */
    void (*scale)(const void *typed, size_t i0, size_t i1, size_t j0,
                  size_t j1);
} locus__gemm_kind;

/* The type-free part of a product that the driver reads: the shape, where
 * the matrices are, whether the product reads C (beta != 0) and whether
 * it reads A and B at all (alpha != 0 and k != 0, in the type's own
 * precision: an alpha that rounds to 0 in f32 is 0). */
typedef struct locus__gemm_view {
    locus_transpose trans_a, trans_b;
    size_t m, n, k;
    const void *a, *b;
    void *c;
    size_t lda, ldb, ldc;
    int reads_c, reads_ab;
    /* Bytes of an element of A and B as stored, where they are not the
     * kind's elem_size (C's and the packed blocks'): 2 for bf16 and f16
     * inputs, packed as f32 (gemm_half.c). 0: elem_size. */
    size_t ab_size;
    const void *typed;
} locus__gemm_view;

/* Runs the product on the worker pool (gemm.c); the op's entry checked
 * the descriptor and the dtype. */
struct locus__cpu_state;
locus_status locus__gemm_run(const struct locus__cpu_state *s, size_t device,
                             const locus__gemm_kind *kind,
                             const locus__gemm_view *view,
                             locus_op_context *op);

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

/* A tile cut by the edge of C, its first `rows` x `cols` (rows ldc
 * apart) = alpha * a b + beta * C from the packed A micro-panel and B's
 * rows ldb apart (nr where packed): the ISA's kernel for that many
 * columns (thin, narrow, or the whole tile) computes it into a local
 * buffer and only that part is copied in and out. Each element is the
 * same arithmetic as in a whole tile, so a result does not depend on
 * where the edges fall. */
void locus__sgemm_edge_tile(const locus__cpu_isa *isa, size_t kc,
                            const float *a, const float *b, size_t ldb,
                            float *c, size_t ldc, size_t rows, size_t cols,
                            float alpha, float beta);

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
