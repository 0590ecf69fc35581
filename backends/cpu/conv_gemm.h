/* The one place the convolutions call the CPU's matrix product. gemm.h is
 * the GEMM's internal interface and changes with it; im2col and MEC reach
 * it only through these functions, so such a change touches one file
 * (conv_gemm.c). */
#ifndef LOCUS_CPU_CONV_GEMM_H
#define LOCUS_CPU_CONV_GEMM_H

#include <stddef.h>

#include "dgemm.h"
#include "isa.h"

/* The product's cache blocks: fast (im2col) or compact (MEC, whose point
 * is memory: a third of the scratch; gemm.h). Results depend on them (the
 * depth is summed in blocks), never on anything else. */
typedef enum locus__conv_gemm_blocks {
    LOCUS__CONV_GEMM_FAST,
    LOCUS__CONV_GEMM_COMPACT,
} locus__conv_gemm_blocks;

/* Floats of per-thread scratch that locus__cpu_conv_gemm with `blocks`
 * needs for any product of at most m x n outputs with inner dimension
 * k. */
size_t locus__cpu_conv_gemm_scratch_floats(locus__conv_gemm_blocks blocks,
                                           size_t m, size_t n, size_t k);

/* C = A B on the calling thread, row-major, no transposes: A is m x k
 * (leading dimension lda), B is k x n (ldb), C is m x n (ldc) and only
 * written, never read. scratch holds
 * locus__cpu_conv_gemm_scratch_floats(blocks, m', n', k) floats for some
 * m' >= m, n' >= n. isa: the backend's kernels (state->isa, which honours
 * LOCUS_CPU_ISA). */
void locus__cpu_conv_gemm(const locus__cpu_isa *isa,
                          locus__conv_gemm_blocks blocks, size_t m, size_t n,
                          size_t k, const float *a, size_t lda, const float *b,
                          size_t ldb, float *c, size_t ldc, float *scratch);

/* locus__cpu_conv_gemm with B given by offset tables instead of a leading
 * dimension: B[p][j] = b[b_rows[p] + b_cols[j]], b_rows of k entries and
 * b_cols of n. Same scratch. MEC reads the overlapping windows of its
 * lowered input this way, in the filter's KCRS order (mec.c). */
void locus__cpu_conv_gemm_indexed(const locus__cpu_isa *isa,
                                  locus__conv_gemm_blocks blocks, size_t m,
                                  size_t n, size_t k, const float *a,
                                  size_t lda, const float *b,
                                  const size_t *b_rows, const size_t *b_cols,
                                  float *c, size_t ldc, float *scratch);

/* The same product in f64: scratch of
 * locus__cpu_conv_dgemm_scratch_doubles(blocks, m', n', k) doubles. */
size_t locus__cpu_conv_dgemm_scratch_doubles(locus__conv_gemm_blocks blocks,
                                             size_t m, size_t n, size_t k);
void locus__cpu_conv_dgemm(const locus__cpu_isa *isa,
                           locus__conv_gemm_blocks blocks, size_t m, size_t n,
                           size_t k, const double *a, size_t lda,
                           const double *b, size_t ldb, double *c, size_t ldc,
                           double *scratch);

#endif
