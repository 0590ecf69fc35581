/* The AVX512-BF16 micro-kernel: a 12 x 32 tile of C in 24 zmm f32
 * accumulators, as the AVX-512 SGEMM kernel, with vdpbf16ps in place of
 * the FMA: each instruction takes two depth steps at once (a pair of bf16
 * per 32-bit lane), twice the products per instruction of the f32 FMA.
 * Compiled with -mavx512bf16 (and BW for the subnormal scan) and called
 * only where the CPU has both (gemm_half.c).
 *
 * What vdpbf16ps computes, per lane, from the Intel SDM's definition:
 *   acc += a[2i+1] * b[2i+1];  acc += a[2i] * b[2i]
 * two f32 FMAs, the odd element of the pair first; a product of two bf16
 * (8-bit significands) is exact in f32, so each step is one rounding, as
 * a sequential f32 FMA loop, only the two terms of a pair swapped. The
 * instruction ignores MXCSR: bf16 subnormal inputs count as zero (DAZ)
 * and subnormal results are flushed to zero (FTZ), each flush an error
 * below 2^-126. gemm_half.c sends inputs that hold bf16 subnormals to the
 * converting path instead (locus__bf16_has_subnormal_avx512), so only the
 * flush of tiny partial sums remains, an absolute error below
 * k 2^-126 per element.
 *
 * Packed layouts (gemm_half.c): a holds kq steps of MR pairs (a[(q * MR
 * + i) * 2 + t] = A[i][2q + t]), b kq steps of NR pairs (b[(q * NR + j) *
 * 2 + t] = B[2q + t][j]); one step is one 32-bit broadcast of A per row
 * and two zmm of B. */
#include <immintrin.h>
#include <string.h>

#include "gemm_half_kernels.h"

#define MR LOCUS__BF16_AVX512_MR
#define NR LOCUS__BF16_AVX512_NR

/* Row i of the tile: c<i>0 and c<i>1 += the pair of A's row i times the
 * two B vectors' pairs. */
#define ROW(i)                                                                 \
    do {                                                                       \
        uint32_t pair;                                                         \
        memcpy(&pair, a + (i)*2, sizeof pair);                                 \
        __m512bh ai = (__m512bh)_mm512_set1_epi32((int)pair);                  \
        c##i##0 = _mm512_dpbf16_ps(c##i##0, ai, b0);                           \
        c##i##1 = _mm512_dpbf16_ps(c##i##1, ai, b1);                           \
    } while (0)

/* beta == 0 stores alpha * acc without reading C; otherwise one rounding
 * of alpha * acc, then one of the FMA with beta * C (the f32 kernel's
 * order). */
static inline void store_row(float *c, __m512 acc0, __m512 acc1, __m512 alpha,
                             __m512 beta, int scale, int read_c)
{
    __m512 r0 = acc0, r1 = acc1;
    if (scale) {
        r0 = _mm512_mul_ps(alpha, acc0);
        r1 = _mm512_mul_ps(alpha, acc1);
    }
    if (read_c) {
        r0 = _mm512_fmadd_ps(beta, _mm512_loadu_ps(c), r0);
        r1 = _mm512_fmadd_ps(beta, _mm512_loadu_ps(c + 16), r1);
    }
    _mm512_storeu_ps(c, r0);
    _mm512_storeu_ps(c + 16, r1);
}

void locus__gemm_bf16_avx512(size_t kq, const uint16_t *a, const uint16_t *b,
                             float *c, size_t ldc, float alpha, float beta)
{
    /* Named accumulators, as in the f32 kernel: an array of them made
     * GCC keep part of the tile on the stack. */
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00,
           c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
           c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00,
           c80 = c00, c81 = c00, c90 = c00, c91 = c00, c100 = c00, c101 = c00,
           c110 = c00, c111 = c00;
    for (size_t i = 0; i < MR; i++)
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
#pragma GCC unroll 2
    for (size_t q = 0; q < kq; q++) {
        _mm_prefetch((const char *)(b + 16 * NR * 2), _MM_HINT_T0);
        _mm_prefetch((const char *)(b + 16 * NR * 2 + 32), _MM_HINT_T0);
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);
        ROW(0);
        ROW(1);
        ROW(2);
        ROW(3);
        ROW(4);
        ROW(5);
        ROW(6);
        ROW(7);
        ROW(8);
        ROW(9);
        ROW(10);
        ROW(11);
        a += MR * 2;
        b += NR * 2;
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    int scale = alpha != 1.0f, read_c = beta != 0.0f;
    store_row(c + 0 * ldc, c00, c01, va, vb, scale, read_c);
    store_row(c + 1 * ldc, c10, c11, va, vb, scale, read_c);
    store_row(c + 2 * ldc, c20, c21, va, vb, scale, read_c);
    store_row(c + 3 * ldc, c30, c31, va, vb, scale, read_c);
    store_row(c + 4 * ldc, c40, c41, va, vb, scale, read_c);
    store_row(c + 5 * ldc, c50, c51, va, vb, scale, read_c);
    store_row(c + 6 * ldc, c60, c61, va, vb, scale, read_c);
    store_row(c + 7 * ldc, c70, c71, va, vb, scale, read_c);
    store_row(c + 8 * ldc, c80, c81, va, vb, scale, read_c);
    store_row(c + 9 * ldc, c90, c91, va, vb, scale, read_c);
    store_row(c + 10 * ldc, c100, c101, va, vb, scale, read_c);
    store_row(c + 11 * ldc, c110, c111, va, vb, scale, read_c);
}

int locus__bf16_has_subnormal_avx512(const uint16_t *x, size_t n)
{
    const __m512i exponent = _mm512_set1_epi16(0x7f80);
    const __m512i mantissa = _mm512_set1_epi16(0x007f);
    size_t i = 0;
    for (; i < n; i += 32) {
        __mmask32 live =
            n - i >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << (n - i)) - 1;
        __m512i v = _mm512_maskz_loadu_epi16(live, x + i);
        /* Exponent bits all zero and some mantissa bit set. */
        __mmask32 tiny = _mm512_mask_testn_epi16_mask(live, v, exponent);
        if (_mm512_mask_test_epi16_mask(tiny, v, mantissa))
            return 1;
    }
    return 0;
}
