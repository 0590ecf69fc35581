/* Packing op(A) and op(B) into the micro-panel layouts the register
 * kernels read with unit stride. Every transpose, and B's offset tables
 * (gemm.h), are resolved here: the kernels only ever see one layout.
 * Reads walk the stored matrix along its rows (unit stride) whichever way
 * it is transposed; the scattered side is the write into the small packed
 * panel, which sits in L1. */
#include <assert.h>
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
    /* The ISA's in-register transpose where it has one (AVX2: eight depth
     * steps of six rows at a time). The scalar interleave below moves one
     * float per load and store, a large part of the product's time when
     * the product is narrow (MEC and im2col on 3x3 256 -> 256 at 14x14
     * pack the 2.25 MiB filter for every 98 columns), a small one with
     * the transpose (docs/PERFORMANCE.md). The same layout, so the same
     * bits. */
    const locus__cpu_isa *isa = g->isa ? g->isa : locus__cpu_isa_best();
    if (g->trans_a == LOCUS_NO_TRANS && isa->pack_a_panel &&
        mr <= LOCUS__MAX_MR) {
        for (size_t ir = 0; ir < mc; ir += mr) {
            size_t rows = min_size(mr, mc - ir);
            const float *src[LOCUS__MAX_MR];
            for (size_t i = 0; i < rows; i++)
                src[i] = g->a + (i0 + ir + i) * g->lda + p0;
            isa->pack_a_panel(ap + ir * kc, src, kc, rows, mr);
        }
        return;
    }
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

/* One panel row of an indexed B gathered one element at a time, nr a
 * constant: the offsets stay in registers or L1 and the loop unrolls. */
#define GATHER_ROWS(NR)                                                        \
    do {                                                                       \
        for (size_t p = 0; p < kc; p++) {                                      \
            const float *row = b + rows[p];                                    \
            for (size_t j = 0; j < (NR); j++)                                  \
                dst[p * (NR) + j] = row[cols[j]];                              \
        }                                                                      \
    } while (0)

/* A micro-panel of an indexed B (gemm.h): `count` columns at offsets
 * cols[0..count), rows at b + rows[0..kc). Where the column offsets are
 * consecutive (MEC: the columns of one output row) the panel is kc runs
 * of stored floats, copied as for a stored B; elsewhere (a panel that
 * straddles two output rows, or a strided table) each element is
 * gathered. Every offset is compared, not only the first and last, so a
 * table need not be increasing. */
static void pack_b_indexed(const float *b, const size_t *rows,
                           const size_t *cols, size_t count, size_t nr,
                           size_t kc, float *dst)
{
    int run = 1;
    for (size_t j = 1; j < count && run; j++)
        run = cols[j] - cols[0] == j;
    if (run && count == nr) {
        switch (nr) {
        case 16:
            for (size_t p = 0; p < kc; p++)
                memcpy(dst + p * 16, b + rows[p] + cols[0], 16 * sizeof(float));
            break;
        case 32:
            for (size_t p = 0; p < kc; p++)
                memcpy(dst + p * 32, b + rows[p] + cols[0], 32 * sizeof(float));
            break;
        default:
            for (size_t p = 0; p < kc; p++)
                memcpy(dst + p * nr, b + rows[p] + cols[0], nr * sizeof(float));
            break;
        }
        return;
    }
    if (run) {
        for (size_t p = 0; p < kc; p++)
            memcpy(dst + p * nr, b + rows[p] + cols[0], count * sizeof(float));
        return;
    }
    if (count == nr && nr == 16) {
        GATHER_ROWS(16);
        return;
    }
    if (count == nr && nr == 32) {
        GATHER_ROWS(32);
        return;
    }
    for (size_t p = 0; p < kc; p++) {
        const float *row = b + rows[p];
        for (size_t j = 0; j < count; j++)
            dst[p * nr + j] = row[cols[j]];
    }
}

void locus__sgemm_pack_b(const locus__sgemm *g, size_t nr, size_t p0, size_t kc,
                         size_t j0, size_t nc, float *bp)
{
    assert(!g->b_rows == !g->b_cols);
    assert(!g->b_rows || g->trans_b == LOCUS_NO_TRANS);
    for (size_t jr = 0; jr < nc; jr += nr) {
        size_t cols = min_size(nr, nc - jr);
        float *dst = bp + jr * kc;
        if (g->b_rows) {
            pack_b_indexed(g->b, g->b_rows + p0, g->b_cols + j0 + jr, cols, nr,
                           kc, dst);
        } else if (g->trans_b == LOCUS_NO_TRANS) {
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
