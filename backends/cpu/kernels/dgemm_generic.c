/* The portable DGEMM micro-kernel: a 4 x 8 tile in a local array of
 * constant shape, which the compiler keeps in vector registers of whatever
 * width the baseline ISA has. */
#include "dgemm_kernels.h"

#define MR LOCUS__DGEMM_GENERIC_MR
#define NR LOCUS__DGEMM_GENERIC_NR

void locus__dgemm_generic(size_t kc, const double *a, const double *b,
                          double *c, size_t ldc, double alpha, double beta)
{
    double acc[MR][NR] = {{0.0}};
    for (size_t p = 0; p < kc; p++) {
        for (int i = 0; i < MR; i++) {
            double ai = a[i];
            for (int j = 0; j < NR; j++)
                acc[i][j] += ai * b[j];
        }
        a += MR;
        b += NR;
    }
    for (int i = 0; i < MR; i++) {
        double *ci = c + (size_t)i * ldc;
        if (beta == 0.0) {
            /* Stored, not scaled: NaN in C must not survive beta = 0. */
            for (int j = 0; j < NR; j++)
                ci[j] = alpha * acc[i][j];
        } else {
            for (int j = 0; j < NR; j++)
                ci[j] = alpha * acc[i][j] + beta * ci[j];
        }
    }
}
