/* The macro-kernel: the register micro-kernel swept over a packed block
 * of A (mc x kc) and one of B (kc x nc), a sweep of B's columns at a time
 * (gemm_block.h says which caches hold what; gemm_blocking.c sizes them). */
#include "gemm_block.h"

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

void locus__sgemm_edge_tile(const locus__cpu_isa *isa, size_t kc,
                            const float *a, const float *b, size_t ldb,
                            float *c, size_t ldc, size_t rows, size_t cols,
                            float alpha, float beta)
{
    float tile[LOCUS__MAX_MR * LOCUS__MAX_NR] = {0.0f};
    size_t nr = isa->nr;
    if (beta != 0.0f)
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j++)
                tile[i * nr + j] = c[i * ldc + j];
    if (locus__cpu_isa_thin_takes(isa, cols))
        isa->sgemm_thin(kc, a, b, ldb, tile, nr, alpha, beta, cols);
    else if (isa->sgemm_narrow && cols <= isa->narrow_nr)
        isa->sgemm_narrow(kc, a, b, ldb, tile, nr, alpha, beta);
    else
        isa->sgemm_strided(kc, a, b, ldb, tile, nr, alpha, beta);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            c[i * ldc + j] = tile[i * nr + j];
}

void locus__sgemm_macro(const locus__cpu_isa *isa, size_t mc, size_t nc,
                        size_t kc, const float *ap, const float *bp, float *c,
                        size_t ldc, float alpha, float beta, size_t sweep_cols)
{
    size_t mr = isa->mr, nr = isa->nr;
    for (size_t jc = 0; jc < nc; jc += sweep_cols) {
        size_t sweep_end = min_size(nc, jc + sweep_cols);
        for (size_t ir = 0; ir < mc; ir += mr) {
            size_t rows = min_size(mr, mc - ir);
            const float *a = ap + ir * kc;
            for (size_t jr = jc; jr < sweep_end; jr += nr) {
                size_t cols = min_size(nr, nc - jr);
                const float *b = bp + jr * kc;
                float *ct = c + ir * ldc + jr;
                if (rows == mr && cols == nr)
                    isa->sgemm(kc, a, b, ct, ldc, alpha, beta);
                else
                    locus__sgemm_edge_tile(isa, kc, a, b, nr, ct, ldc, rows,
                                           cols, alpha, beta);
            }
        }
    }
}

void locus__sgemm_scale(const locus__sgemm *g, size_t i0, size_t i1, size_t j0,
                        size_t j1)
{
    if (g->beta == 1.0f)
        return;
    for (size_t i = i0; i < i1; i++) {
        float *c = g->c + i * g->ldc;
        if (g->beta == 0.0f) {
            /* Stored, not multiplied: NaN or Inf in C must not survive. */
            for (size_t j = j0; j < j1; j++)
                c[j] = 0.0f;
        } else {
            for (size_t j = j0; j < j1; j++)
                c[j] *= g->beta;
        }
    }
}
