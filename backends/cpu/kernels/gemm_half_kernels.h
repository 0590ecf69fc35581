/* The kernels of the bf16 and f16 matrix product (gemm_half.c), each file
 * compiled with its own -m flags (backends/cpu/meson.build) and called
 * only after gemm_half.c checked that the CPU has them. */
#ifndef LOCUS_CPU_GEMM_HALF_KERNELS_H
#define LOCUS_CPU_GEMM_HALF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* AVX512-BF16 (with AVX512-BW): the 12 x 32 tile of vdpbf16ps.
 * C[0..MR)[0..NR) (rows ldc floats apart) = alpha * sum over kq pair
 * steps + beta * C, beta == 0 never reading C; a and b packed in pairs
 * (gemm_bf16_avx512.c has the layouts and what the instruction rounds). */
#define LOCUS__BF16_AVX512_MR 12
#define LOCUS__BF16_AVX512_NR 32
void locus__gemm_bf16_avx512(size_t kq, const uint16_t *a, const uint16_t *b,
                             float *c, size_t ldc, float alpha, float beta);
/* Nonzero when some x[0..n) is a bf16 subnormal, which vdpbf16ps would
 * count as zero. */
int locus__bf16_has_subnormal_avx512(const uint16_t *x, size_t n);

/* AVX2 and F16C: dst[0..n) = the f32 values of src[0..n), exactly
 * (NaN stays NaN). */
void locus__bf16_to_f32_avx2(const uint16_t *src, float *dst, size_t n);
void locus__f16_to_f32_f16c(const uint16_t *src, float *dst, size_t n);

#endif
