/* The f64 register kernels of each instruction set (dgemm.h says what
 * they compute), one file per ISA so that each is compiled with its own
 * -m flags (backends/cpu/meson.build). Only dgemm_isa.c calls them, and
 * only at a level the CPU table (isa.h) was given, which it checked. */
#ifndef LOCUS_CPU_DGEMM_KERNELS_H
#define LOCUS_CPU_DGEMM_KERNELS_H

#include <stddef.h>

/* Portable C: any CPU. */
#define LOCUS__DGEMM_GENERIC_MR 4
#define LOCUS__DGEMM_GENERIC_NR 8
void locus__dgemm_generic(size_t kc, const double *a, const double *b,
                          double *c, size_t ldc, double alpha, double beta);

/* AVX2 + FMA: 6 x 8 tile, 12 ymm accumulators. */
#define LOCUS__DGEMM_AVX2_MR 6
#define LOCUS__DGEMM_AVX2_NR 8
void locus__dgemm_avx2(size_t kc, const double *a, const double *b, double *c,
                       size_t ldc, double alpha, double beta);

/* AVX-512F: 12 x 16 tile, 24 zmm accumulators. */
#define LOCUS__DGEMM_AVX512_MR 12
#define LOCUS__DGEMM_AVX512_NR 16
void locus__dgemm_avx512(size_t kc, const double *a, const double *b, double *c,
                         size_t ldc, double alpha, double beta);

#endif
