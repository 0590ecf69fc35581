/* `locus bench --dtype`: what each element type changes in a run: the
 * inputs' and output's element sizes, how inputs are filled, the wider
 * reference (float64 from the exact input values for f32, bf16 and f16;
 * long double for f64) and the tolerance. */
#ifndef LOCUS_TOOL_BENCH_DTYPE_H
#define LOCUS_TOOL_BENCH_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include <locus/locus.h>

#include "random.h"

/* Bytes of one input element, and of one output element (f32 for the
 * 16-bit input types, as locus.h defines them). */
size_t bench_input_size(locus_dtype dtype);
size_t bench_output_size(locus_dtype dtype);

/* Fresh random inputs in the dtype: f32 as random_fill; f64 with all 53
 * bits random, so a kernel that computes in f32 fails the check; bf16 and
 * f16 rounded from random floats. */
void bench_fill_inputs(random_state *random, locus_dtype dtype, void *host,
                       size_t count);

/* The inputs as floats for the float64 reference (exact: every bf16 and
 * f16 value is a float): host itself for f32, a new copy (free it) for
 * bf16 and f16; NULL for f64, whose reference reads the doubles. */
float *bench_inputs_as_float(locus_dtype dtype, const void *host, size_t count,
                             bool *copied);

/* An output of NaN in the output's type. */
void bench_poison_output(locus_dtype dtype, void *host, size_t count);
double bench_output_value(locus_dtype dtype, const void *host, size_t index);

/* The long double references of f64 (same contract as reference.h): the
 * products of doubles in x87's 64-bit mantissa, the sums too, so the
 * reference's own error is 2^11 times below the f64 result's. */
void bench_sum_f64(const double *x, size_t count, double *sum,
                   double *magnitude);
void bench_gemm_entry_f64(const double *a, const double *b, size_t n, size_t k,
                          size_t i, size_t j, double *value, double *magnitude);
void bench_conv2d_entry_f64(const double *input, const double *filter,
                            const locus_conv2d_desc *desc, size_t out_height,
                            size_t out_width, size_t index, double *value,
                            double *magnitude);

/* The unit roundoff of the accumulation: 2^-53 for f64, 2^-24 otherwise
 * (bf16 and f16 products are exact in f32, which accumulates them). */
double bench_accumulation_roundoff(locus_dtype dtype);

#endif
