/* Convolution's GEMM calls, mapped onto gemm.h (see conv_gemm.h). */
#include "conv_gemm.h"

#include "gemm.h"

static const locus__tile_blocks *tile_blocks(locus__conv_gemm_blocks blocks)
{
    return blocks == LOCUS__CONV_GEMM_COMPACT ? &locus__tile_compact
                                              : &locus__tile_fast;
}

size_t locus__cpu_conv_gemm_scratch_floats(locus__conv_gemm_blocks blocks,
                                           size_t m, size_t n, size_t k)
{
    return locus__cpu_sgemm_scratch_floats(tile_blocks(blocks), m, n, k);
}

/* C = A B on the calling thread; B ordinary (b_rows NULL) or indexed. */
static void product(const locus__cpu_isa *isa, locus__conv_gemm_blocks blocks,
                    size_t m, size_t n, size_t k, const float *a, size_t lda,
                    const float *b, size_t ldb, const size_t *b_rows,
                    const size_t *b_cols, float *c, size_t ldc, float *scratch)
{
    locus__sgemm g = {
        .trans_a = LOCUS_NO_TRANS,
        .trans_b = LOCUS_NO_TRANS,
        .m = m,
        .n = n,
        .k = k,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = a,
        .lda = lda,
        .b = b,
        .ldb = ldb,
        .b_rows = b_rows,
        .b_cols = b_cols,
        .c = c,
        .ldc = ldc,
        .isa = isa,
    };
    locus__cpu_sgemm_tile(&g, tile_blocks(blocks), 0, m, 0, n, scratch);
}

void locus__cpu_conv_gemm(const locus__cpu_isa *isa,
                          locus__conv_gemm_blocks blocks, size_t m, size_t n,
                          size_t k, const float *a, size_t lda, const float *b,
                          size_t ldb, float *c, size_t ldc, float *scratch)
{
    product(isa, blocks, m, n, k, a, lda, b, ldb, NULL, NULL, c, ldc, scratch);
}

void locus__cpu_conv_gemm_indexed(const locus__cpu_isa *isa,
                                  locus__conv_gemm_blocks blocks, size_t m,
                                  size_t n, size_t k, const float *a,
                                  size_t lda, const float *b,
                                  const size_t *b_rows, const size_t *b_cols,
                                  float *c, size_t ldc, float *scratch)
{
    product(isa, blocks, m, n, k, a, lda, b, 0, b_rows, b_cols, c, ldc,
            scratch);
}

size_t locus__cpu_conv_dgemm_scratch_doubles(locus__conv_gemm_blocks blocks,
                                             size_t m, size_t n, size_t k)
{
    return locus__cpu_dgemm_scratch_doubles(tile_blocks(blocks), m, n, k);
}

void locus__cpu_conv_dgemm(const locus__cpu_isa *isa,
                           locus__conv_gemm_blocks blocks, size_t m, size_t n,
                           size_t k, const double *a, size_t lda,
                           const double *b, size_t ldb, double *c, size_t ldc,
                           double *scratch)
{
    locus__dgemm g = {
        .trans_a = LOCUS_NO_TRANS,
        .trans_b = LOCUS_NO_TRANS,
        .m = m,
        .n = n,
        .k = k,
        .alpha = 1.0,
        .beta = 0.0,
        .a = a,
        .lda = lda,
        .b = b,
        .ldb = ldb,
        .c = c,
        .ldc = ldc,
        .isa = locus__dgemm_isa_for(isa),
    };
    locus__cpu_dgemm_tile(&g, tile_blocks(blocks), 0, m, 0, n, scratch);
}
