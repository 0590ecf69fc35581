/* The kernels of each instruction set, one file per ISA so each can be
 * compiled with its own -m flags (backends/cpu/meson.build). Only isa.c
 * calls them, and only after checking that the CPU has the ISA. */
#ifndef LOCUS_CPU_KERNELS_H
#define LOCUS_CPU_KERNELS_H

#include <stddef.h>

/* Portable C: any CPU. */
#define LOCUS__GENERIC_MR 4
#define LOCUS__GENERIC_NR 16
void locus__sgemm_generic(size_t kc, const float *a, const float *b, float *c,
                          size_t ldc, float alpha, float beta);
void locus__sgemm_generic_strided(size_t kc, const float *a, const float *b,
                                  size_t ldb, float *c, size_t ldc, float alpha,
                                  float beta);
double locus__sum_generic(const float *x, size_t n);
void locus__pad_rows_generic(float *dst, size_t dst_stride, const float *src,
                             size_t src_stride, size_t rows, size_t pad,
                             size_t width, size_t dst_width);
float locus__min_generic(const float *x, size_t n, int *nan);
float locus__max_generic(const float *x, size_t n, int *nan);

/* AVX2 + FMA: 6 x 16 tile, 12 ymm accumulators. */
#define LOCUS__AVX2_MR 6
#define LOCUS__AVX2_NR 16
void locus__sgemm_avx2(size_t kc, const float *a, const float *b, float *c,
                       size_t ldc, float alpha, float beta);
void locus__sgemm_avx2_strided(size_t kc, const float *a, const float *b,
                               size_t ldb, float *c, size_t ldc, float alpha,
                               float beta);
void locus__sgemm_avx2_strided_rows(size_t kc, const float *a, const float *b,
                                    size_t ldb, float *c, size_t ldc,
                                    float alpha, float beta, size_t rows);
void locus__sgemm_avx2_strided_epilogue(size_t kc, const float *a,
                                        const float *b, size_t ldb, float *c,
                                        size_t ldc, float beta,
                                        const float *bias, int activation,
                                        size_t rows);
/* The tile's first 8 columns only (isa.h, sgemm_narrow). */
#define LOCUS__AVX2_NARROW_NR 8
void locus__sgemm_avx2_narrow(size_t kc, const float *a, const float *b,
                              size_t ldb, float *c, size_t ldc, float alpha,
                              float beta);
double locus__sum_avx2(const float *x, size_t n);
void locus__pad_rows_avx2(float *dst, size_t dst_stride, const float *src,
                          size_t src_stride, size_t rows, size_t pad,
                          size_t width, size_t dst_width);
float locus__min_avx2(const float *x, size_t n, int *nan);
float locus__max_avx2(const float *x, size_t n, int *nan);
void locus__pack_a_panel_avx2(float *a, const float *const *src, size_t kc,
                              size_t rows, size_t mr);
/* The direct convolution's 6-position x 16-filter tile (isa.h). */
#define LOCUS__AVX2_DIRECT_POSITIONS 6
#define LOCUS__AVX2_DIRECT_FILTERS 16
void locus__conv_direct_avx2(size_t depth, const float *filter,
                             const float *input, const ptrdiff_t *offsets,
                             size_t step, float *out, size_t ldo,
                             size_t positions, size_t filters, int accumulate);

/* AVX-512F: 12 x 32 tile, 24 zmm accumulators. */
#define LOCUS__AVX512_MR 12
#define LOCUS__AVX512_NR 32
void locus__sgemm_avx512(size_t kc, const float *a, const float *b, float *c,
                         size_t ldc, float alpha, float beta);
void locus__sgemm_avx512_strided(size_t kc, const float *a, const float *b,
                                 size_t ldb, float *c, size_t ldc, float alpha,
                                 float beta);
void locus__sgemm_avx512_strided_rows(size_t kc, const float *a, const float *b,
                                      size_t ldb, float *c, size_t ldc,
                                      float alpha, float beta, size_t rows);
void locus__sgemm_avx512_strided_epilogue(size_t kc, const float *a,
                                          const float *b, size_t ldb, float *c,
                                          size_t ldc, float beta,
                                          const float *bias, int activation,
                                          size_t rows);
/* The tile's first 16 columns only (isa.h, sgemm_narrow). */
#define LOCUS__AVX512_NARROW_NR 16
void locus__sgemm_avx512_narrow(size_t kc, const float *a, const float *b,
                                size_t ldb, float *c, size_t ldc, float alpha,
                                float beta);
/* The tile's first 1-4 or 17-20 columns only (isa.h, sgemm_thin). */
#define LOCUS__AVX512_THIN_NR 4
void locus__sgemm_avx512_thin(size_t kc, const float *a, const float *b,
                              size_t ldb, float *c, size_t ldc, float alpha,
                              float beta, size_t cols);
double locus__sum_avx512(const float *x, size_t n);
void locus__pad_rows_avx512(float *dst, size_t dst_stride, const float *src,
                            size_t src_stride, size_t rows, size_t pad,
                            size_t width, size_t dst_width);
float locus__min_avx512(const float *x, size_t n, int *nan);
float locus__max_avx512(const float *x, size_t n, int *nan);
/* The direct convolution's 14-position x 32-filter tile (isa.h). */
#define LOCUS__AVX512_DIRECT_POSITIONS 14
#define LOCUS__AVX512_DIRECT_FILTERS 32
void locus__conv_direct_avx512(size_t depth, const float *filter,
                               const float *input, const ptrdiff_t *offsets,
                               size_t step, float *out, size_t ldo,
                               size_t positions, size_t filters,
                               int accumulate);

#endif
