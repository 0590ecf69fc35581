/* Packing op(A) and op(B) in f64 into the micro-panel layouts of the
 * register kernels, as gemm_pack.c does in f32 (every transpose resolved
 * here; reads along the stored rows, the scattered side the write into
 * the small packed panel, which sits in L1). */
#include <string.h>

#include "dgemm.h"

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* A whole micro-panel of A as stored, mr a constant: the panel is written
 * in order, the mr source rows read side by side, each with unit stride. */
#define PACK_A_ROWS(MR)                                                        \
    do {                                                                       \
        for (size_t p = 0; p < kc; p++)                                        \
            for (size_t i = 0; i < (MR); i++)                                  \
                dst[p * (MR) + i] = src[i * ld + p];                           \
    } while (0)

static void pack_a_rows(const double *src, size_t ld, size_t mr, size_t kc,
                        double *dst)
{
    switch (mr) {
    case 4:
        PACK_A_ROWS(4);
        break;
    case 6:
        PACK_A_ROWS(6);
        break;
    case 12:
        PACK_A_ROWS(12);
        break;
    default:
        PACK_A_ROWS(mr);
        break;
    }
}

void locus__dgemm_pack_a(const locus__dgemm *g, size_t mr, size_t i0, size_t mc,
                         size_t p0, size_t kc, double *ap)
{
    for (size_t ir = 0; ir < mc; ir += mr) {
        size_t rows = min_size(mr, mc - ir);
        double *dst = ap + ir * kc;
        if (g->trans_a == LOCUS_NO_TRANS && rows == mr) {
            pack_a_rows(g->a + (i0 + ir) * g->lda + p0, g->lda, mr, kc, dst);
            continue;
        }
        if (g->trans_a == LOCUS_NO_TRANS) {
            const double *src = g->a + (i0 + ir) * g->lda + p0;
            for (size_t i = 0; i < rows; i++) {
                const double *row = src + i * g->lda;
                for (size_t p = 0; p < kc; p++)
                    dst[p * mr + i] = row[p];
            }
        } else {
            /* op(A)[i][p] = A[p][i]: each stored row gives one column. */
            const double *src = g->a + p0 * g->lda + i0 + ir;
            for (size_t p = 0; p < kc; p++)
                memcpy(dst + p * mr, src + p * g->lda, rows * sizeof(double));
        }
        /* The kernel always computes mr rows: pad with zeros, never with
         * whatever lies past the matrix. */
        if (rows < mr)
            for (size_t p = 0; p < kc; p++)
                for (size_t i = rows; i < mr; i++)
                    dst[p * mr + i] = 0.0;
    }
}

/* A whole panel row of constant width: a few vector moves, not a call. */
static void copy_rows(double *dst, size_t nr, const double *src, size_t ld,
                      size_t kc)
{
    switch (nr) {
    case 8:
        for (size_t p = 0; p < kc; p++)
            memcpy(dst + p * 8, src + p * ld, 8 * sizeof(double));
        break;
    case 16:
        for (size_t p = 0; p < kc; p++)
            memcpy(dst + p * 16, src + p * ld, 16 * sizeof(double));
        break;
    default:
        for (size_t p = 0; p < kc; p++)
            memcpy(dst + p * nr, src + p * ld, nr * sizeof(double));
        break;
    }
}

void locus__dgemm_pack_b(const locus__dgemm *g, size_t nr, size_t p0, size_t kc,
                         size_t j0, size_t nc, double *bp)
{
    for (size_t jr = 0; jr < nc; jr += nr) {
        size_t cols = min_size(nr, nc - jr);
        double *dst = bp + jr * kc;
        if (g->trans_b == LOCUS_NO_TRANS) {
            const double *src = g->b + p0 * g->ldb + j0 + jr;
            if (cols == nr) {
                copy_rows(dst, nr, src, g->ldb, kc);
                continue;
            }
            for (size_t p = 0; p < kc; p++)
                memcpy(dst + p * nr, src + p * g->ldb, cols * sizeof(double));
        } else {
            /* op(B)[p][j] = B[j][p]: each stored row gives one column. */
            const double *src = g->b + (j0 + jr) * g->ldb + p0;
            for (size_t j = 0; j < cols; j++) {
                const double *row = src + j * g->ldb;
                for (size_t p = 0; p < kc; p++)
                    dst[p * nr + j] = row[p];
            }
        }
        if (cols < nr)
            for (size_t p = 0; p < kc; p++)
                for (size_t j = cols; j < nr; j++)
                    dst[p * nr + j] = 0.0;
    }
}
