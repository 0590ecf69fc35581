/* Float64 reference kernels that `locus bench` checks results against.
 *
 * Each reference also returns the magnitude of its terms (the same sum over
 * absolute values). Errors are measured relative to that magnitude: it is
 * the scale rounding errors are proportional to, and unlike the result
 * itself it never comes close to zero through cancellation, so a correct
 * float32 result never looks wrong because its exact value happens to be
 * tiny. Where nothing cancels it equals the plain relative error. */
#ifndef LOCUS_TOOL_REFERENCE_H
#define LOCUS_TOOL_REFERENCE_H

#include <stddef.h>

#include <locus/locus.h>

/* The sum of x and the sum of |x|. */
void reference_sum(const float *x, size_t count, double *sum,
                   double *magnitude);

/* C = A B for row-major A (m x k) and B (k x n), all of it: value and
 * magnitude are m x n. Costs m n k multiply-adds. */
void reference_gemm(const float *a, const float *b, size_t m, size_t n,
                    size_t k, double *value, double *magnitude);
/* One entry (row i, column j) of the same product. */
void reference_gemm_entry(const float *a, const float *b, size_t n, size_t k,
                          size_t i, size_t j, double *value, double *magnitude);

/* One output element, at flat NKPQ index `index`, of the convolution the
 * descriptor describes (zero padding, cross-correlation); out_height and
 * out_width are P and Q. */
void reference_conv2d_entry(const float *input, const float *filter,
                            const locus_conv2d_desc *desc, size_t out_height,
                            size_t out_width, size_t index, double *value,
                            double *magnitude);

/* |got - expected| / magnitude; infinity when got is not a number, so an
 * unwritten (NaN-poisoned) output always fails. */
double reference_relative_error(double got, double expected, double magnitude);

#endif
