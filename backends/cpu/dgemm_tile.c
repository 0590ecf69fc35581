/* The f64 product of one block of C on the calling thread, for the f64
 * convolution (conv_gemm.c), as gemm_tile.c in f32: the same packing and
 * kernels as the parallel driver, with fixed blocks so that the caller
 * can size the scratch before any table is chosen. */
#include <assert.h>
#include <stdint.h>

#include "dgemm.h"
#include "gemm_block.h"

/* Doubles of slack to align the scratch to a cache line. */
#define ALIGN_DOUBLES 8

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static size_t a_doubles(const locus__tile_blocks *b, size_t rows, size_t k)
{
    return (min_size(b->mc, rows) + LOCUS__DGEMM_MAX_MR) * min_size(b->kc, k);
}

size_t locus__cpu_dgemm_scratch_doubles(const locus__tile_blocks *blocks,
                                        size_t rows, size_t cols, size_t k)
{
    return a_doubles(blocks, rows, k) +
           min_size(blocks->kc, k) *
               (min_size(blocks->nc, cols) + LOCUS__DGEMM_MAX_NR) +
           2 * ALIGN_DOUBLES;
}

static double *align_up(double *p)
{
    uintptr_t address = (uintptr_t)p;
    uintptr_t mask = ALIGN_DOUBLES * sizeof(double) - 1;
    return (double *)((address + mask) & ~mask);
}

void locus__cpu_dgemm_tile(const locus__dgemm *g,
                           const locus__tile_blocks *blocks, size_t row_begin,
                           size_t row_end, size_t col_begin, size_t col_end,
                           double *scratch)
{
    assert(row_end <= g->m && col_end <= g->n);
    if (row_begin >= row_end || col_begin >= col_end)
        return;
    if (g->alpha == 0.0 || g->k == 0) {
        locus__dgemm_scale(g, row_begin, row_end, col_begin, col_end);
        return;
    }
    const locus__dgemm_isa *isa = g->isa ? g->isa : locus__dgemm_isa_for(NULL);
    size_t mr = isa->mr, nr = isa->nr;
    size_t rows = row_end - row_begin, cols = col_end - col_begin;
    size_t mc = locus__gemm_even_block(rows, blocks->mc / mr * mr, mr);
    size_t kc = locus__gemm_even_block(g->k, blocks->kc, 8);
    size_t nc = locus__gemm_even_block(cols, blocks->nc / nr * nr, nr);

    double *ap = align_up(scratch);
    double *bp = align_up(ap + a_doubles(blocks, rows, g->k));
    for (size_t jc = col_begin; jc < col_end; jc += nc) {
        size_t n_block = min_size(nc, col_end - jc);
        for (size_t pc = 0; pc < g->k; pc += kc) {
            size_t k_block = min_size(kc, g->k - pc);
            double beta = pc == 0 ? g->beta : 1.0;
            locus__dgemm_pack_b(g, nr, pc, k_block, jc, n_block, bp);
            for (size_t ic = row_begin; ic < row_end; ic += mc) {
                size_t m_block = min_size(mc, row_end - ic);
                locus__dgemm_pack_a(g, mr, ic, m_block, pc, k_block, ap);
                /* One B micro-panel per sweep, as in f32 (gemm_tile.c). */
                locus__dgemm_macro(isa, m_block, n_block, k_block, ap, bp,
                                   g->c + ic * g->ldc + jc, g->ldc, g->alpha,
                                   beta, nr);
            }
        }
    }
}
