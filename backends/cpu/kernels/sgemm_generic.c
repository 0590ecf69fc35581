/* The portable SGEMM micro-kernel: a 4 x 16 tile kept in a local array of
 * constant shape, which the compiler keeps in vector registers of whatever
 * width the baseline ISA has. */
#include "kernels.h"

#define MR LOCUS__GENERIC_MR
#define NR LOCUS__GENERIC_NR

void locus__sgemm_generic_strided(size_t kc, const float *a, const float *b,
                                  size_t ldb, float *c, size_t ldc, float alpha,
                                  float beta)
{
    float acc[MR][NR] = {{0.0f}};
    for (size_t p = 0; p < kc; p++) {
        for (int i = 0; i < MR; i++) {
            float ai = a[i];
            for (int j = 0; j < NR; j++)
                acc[i][j] += ai * b[j];
        }
        a += MR;
        b += ldb;
    }
    for (int i = 0; i < MR; i++) {
        float *ci = c + (size_t)i * ldc;
        if (beta == 0.0f) {
            /* Stored, not scaled: NaN in C must not survive beta = 0. */
            for (int j = 0; j < NR; j++)
                ci[j] = alpha * acc[i][j];
        } else {
            for (int j = 0; j < NR; j++)
                ci[j] = alpha * acc[i][j] + beta * ci[j];
        }
    }
}

void locus__sgemm_generic(size_t kc, const float *a, const float *b, float *c,
                          size_t ldc, float alpha, float beta)
{
    locus__sgemm_generic_strided(kc, a, b, NR, c, ldc, alpha, beta);
}
