/* Packing op(A) and op(B) into the micro-panel layouts the register
 * kernels read with unit stride. Every transpose is resolved here: the
 * kernels only ever see one layout. Reads walk the stored matrix along its
 * rows (unit stride) whichever way it is transposed; the scattered side is
 * the write into the small packed panel, which sits in L1. */
#include <string.h>

#include "gemm_block.h"

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* A whole micro-panel of A as stored (not transposed), mr a constant:
 * the panel is written in order, one column of mr floats per step, and
 * the mr source rows are read side by side, each with unit stride. */
#define PACK_A_ROWS(MR)                                                        \
    do {                                                                       \
        for (size_t p = 0; p < kc; p++)                                        \
            for (size_t i = 0; i < (MR); i++)                                  \
                dst[p * (MR) + i] = src[i * ld + p];                           \
    } while (0)

static void pack_a_rows(const float *src, size_t ld, size_t mr, size_t kc,
                        float *dst)
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

void locus__sgemm_pack_a(const locus__sgemm *g, size_t mr, size_t i0, size_t mc,
                         size_t p0, size_t kc, float *ap)
{
    for (size_t ir = 0; ir < mc; ir += mr) {
        size_t rows = min_size(mr, mc - ir);
        float *dst = ap + ir * kc;
        if (g->trans_a == LOCUS_NO_TRANS && rows == mr) {
            pack_a_rows(g->a + (i0 + ir) * g->lda + p0, g->lda, mr, kc, dst);
            continue;
        }
        if (g->trans_a == LOCUS_NO_TRANS) {
            const float *src = g->a + (i0 + ir) * g->lda + p0;
            for (size_t i = 0; i < rows; i++) {
                const float *row = src + i * g->lda;
                for (size_t p = 0; p < kc; p++)
                    dst[p * mr + i] = row[p];
            }
        } else {
            /* op(A)[i][p] = A[p][i]: each stored row gives one column. */
            const float *src = g->a + p0 * g->lda + i0 + ir;
            for (size_t p = 0; p < kc; p++)
                memcpy(dst + p * mr, src + p * g->lda, rows * sizeof(float));
        }
        /* The kernel always computes mr rows: pad with zeros, never with
         * whatever lies past the matrix. */
        if (rows < mr)
            for (size_t p = 0; p < kc; p++)
                for (size_t i = rows; i < mr; i++)
                    dst[p * mr + i] = 0.0f;
    }
}

/* A whole panel row of constant width: the copy becomes a few vector
 * moves instead of a call. */
static void copy_rows(float *dst, size_t nr, const float *src, size_t ld,
                      size_t kc)
{
    switch (nr) {
    case 16:
        for (size_t p = 0; p < kc; p++)
            memcpy(dst + p * 16, src + p * ld, 16 * sizeof(float));
        break;
    case 32:
        for (size_t p = 0; p < kc; p++)
            memcpy(dst + p * 32, src + p * ld, 32 * sizeof(float));
        break;
    default:
        for (size_t p = 0; p < kc; p++)
            memcpy(dst + p * nr, src + p * ld, nr * sizeof(float));
        break;
    }
}

void locus__sgemm_pack_b(const locus__sgemm *g, size_t nr, size_t p0, size_t kc,
                         size_t j0, size_t nc, float *bp)
{
    for (size_t jr = 0; jr < nc; jr += nr) {
        size_t cols = min_size(nr, nc - jr);
        float *dst = bp + jr * kc;
        if (g->trans_b == LOCUS_NO_TRANS) {
            const float *src = g->b + p0 * g->ldb + j0 + jr;
            if (cols == nr) {
                copy_rows(dst, nr, src, g->ldb, kc);
                continue;
            }
            for (size_t p = 0; p < kc; p++)
                memcpy(dst + p * nr, src + p * g->ldb, cols * sizeof(float));
        } else {
            /* op(B)[p][j] = B[j][p]: each stored row gives one column. */
            const float *src = g->b + (j0 + jr) * g->ldb + p0;
            for (size_t j = 0; j < cols; j++) {
                const float *row = src + j * g->ldb;
                for (size_t p = 0; p < kc; p++)
                    dst[p * nr + j] = row[p];
            }
        }
        if (cols < nr)
            for (size_t p = 0; p < kc; p++)
                for (size_t j = cols; j < nr; j++)
                    dst[p * nr + j] = 0.0f;
    }
}
