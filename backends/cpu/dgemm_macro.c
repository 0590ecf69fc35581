/* The f64 macro-kernel: the register kernel swept over packed blocks of A
 * and B, a sweep of B's columns at a time, as gemm_macro.c in f32
 * (gemm_block.h says which caches hold what). */
#include "dgemm.h"

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* A tile cut by the edge of C: the whole mr x nr tile is computed into a
 * local buffer and only the part inside C is copied in and out, so a
 * result does not depend on where the edges fall. */
static void edge_tile(const locus__dgemm_isa *isa, size_t rows, size_t cols,
                      size_t kc, const double *ap, const double *bp, double *c,
                      size_t ldc, double alpha, double beta)
{
    double tile[LOCUS__DGEMM_MAX_MR * LOCUS__DGEMM_MAX_NR] = {0.0};
    size_t nr = isa->nr;
    if (beta != 0.0)
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j++)
                tile[i * nr + j] = c[i * ldc + j];
    isa->kernel(kc, ap, bp, tile, nr, alpha, beta);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++)
            c[i * ldc + j] = tile[i * nr + j];
}

void locus__dgemm_macro(const locus__dgemm_isa *isa, size_t mc, size_t nc,
                        size_t kc, const double *ap, const double *bp,
                        double *c, size_t ldc, double alpha, double beta,
                        size_t sweep_cols)
{
    size_t mr = isa->mr, nr = isa->nr;
    for (size_t jc = 0; jc < nc; jc += sweep_cols) {
        size_t sweep_end = min_size(nc, jc + sweep_cols);
        for (size_t ir = 0; ir < mc; ir += mr) {
            size_t rows = min_size(mr, mc - ir);
            const double *a = ap + ir * kc;
            for (size_t jr = jc; jr < sweep_end; jr += nr) {
                size_t cols = min_size(nr, nc - jr);
                const double *b = bp + jr * kc;
                double *ct = c + ir * ldc + jr;
                if (rows == mr && cols == nr)
                    isa->kernel(kc, a, b, ct, ldc, alpha, beta);
                else
                    edge_tile(isa, rows, cols, kc, a, b, ct, ldc, alpha, beta);
            }
        }
    }
}

void locus__dgemm_scale(const locus__dgemm *g, size_t i0, size_t i1, size_t j0,
                        size_t j1)
{
    if (g->beta == 1.0)
        return;
    for (size_t i = i0; i < i1; i++) {
        double *c = g->c + i * g->ldc;
        if (g->beta == 0.0) {
            /* Stored, not multiplied: NaN or Inf in C must not survive. */
            for (size_t j = j0; j < j1; j++)
                c[j] = 0.0;
        } else {
            for (size_t j = j0; j < j1; j++)
                c[j] *= g->beta;
        }
    }
}
