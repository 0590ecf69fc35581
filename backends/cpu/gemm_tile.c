/* The product of one block of C on the calling thread, for kernels that
 * already split their work among workers (conv2d's im2col, and MEC with
 * an indexed B, gemm.h). The same packing and micro-kernels as the
 * parallel driver, with fixed blocks: the caller sized the scratch before
 * any table was chosen, so the blocks must not depend on the cache sizes
 * or the ISA beyond the bounds below. */
#include <assert.h>
#include <stdint.h>

#include "gemm_block.h"

const locus__tile_blocks locus__tile_fast = {144, 256, 2048};
const locus__tile_blocks locus__tile_compact = {48, 128, 2048};
/* Floats of slack to align the scratch to a cache line. */
#define ALIGN_FLOATS 16

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Rounding a block up to whole panels of mr (nr) adds less than
 * LOCUS__MAX_MR (NR) rows (columns), whichever kernel runs. */
static size_t a_floats(const locus__tile_blocks *b, size_t rows, size_t k)
{
    return (min_size(b->mc, rows) + LOCUS__MAX_MR) * min_size(b->kc, k);
}

size_t locus__cpu_sgemm_scratch_floats(const locus__tile_blocks *blocks,
                                       size_t rows, size_t cols, size_t k)
{
    return a_floats(blocks, rows, k) +
           min_size(blocks->kc, k) *
               (min_size(blocks->nc, cols) + LOCUS__MAX_NR) +
           2 * ALIGN_FLOATS;
}

static float *align_up(float *p)
{
    uintptr_t address = (uintptr_t)p;
    uintptr_t mask = ALIGN_FLOATS * sizeof(float) - 1;
    return (float *)((address + mask) & ~mask);
}

void locus__cpu_sgemm_tile(const locus__sgemm *g,
                           const locus__tile_blocks *blocks, size_t row_begin,
                           size_t row_end, size_t col_begin, size_t col_end,
                           float *scratch)
{
    assert(row_end <= g->m && col_end <= g->n);
    assert(!g->b_rows == !g->b_cols);
    assert(!g->b_rows || g->trans_b == LOCUS_NO_TRANS);
    if (row_begin >= row_end || col_begin >= col_end)
        return;
    if (g->alpha == 0.0f || g->k == 0) {
        locus__sgemm_scale(g, row_begin, row_end, col_begin, col_end);
        return;
    }
    const locus__cpu_isa *isa = g->isa ? g->isa : locus__cpu_isa_best();
    size_t mr = isa->mr, nr = isa->nr;
    size_t rows = row_end - row_begin, cols = col_end - col_begin;
    size_t mc = locus__gemm_even_block(rows, blocks->mc / mr * mr, mr);
    size_t kc = locus__gemm_even_block(g->k, blocks->kc, 8);
    size_t nc = locus__gemm_even_block(cols, blocks->nc / nr * nr, nr);

    float *ap = align_up(scratch);
    float *bp = align_up(ap + a_floats(blocks, rows, g->k));
    for (size_t jc = col_begin; jc < col_end; jc += nc) {
        size_t n_block = min_size(nc, col_end - jc);
        for (size_t pc = 0; pc < g->k; pc += kc) {
            size_t k_block = min_size(kc, g->k - pc);
            float beta = pc == 0 ? g->beta : 1.0f;
            locus__sgemm_pack_b(g, nr, pc, k_block, jc, n_block, bp);
            for (size_t ic = row_begin; ic < row_end; ic += mc) {
                size_t m_block = min_size(mc, row_end - ic);
                locus__sgemm_pack_a(g, mr, ic, m_block, pc, k_block, ap);
                /* One B micro-panel per sweep (gemm_block.h): with A
                 * blocks this small, L2 sweeps make im2col and MEC slower
                 * (docs/PERFORMANCE.md). */
                locus__sgemm_macro(isa, m_block, n_block, k_block, ap, bp,
                                   g->c + ic * g->ldc + jc, g->ldc, g->alpha,
                                   beta, nr);
            }
        }
    }
}
